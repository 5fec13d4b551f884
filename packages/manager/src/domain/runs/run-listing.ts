import { sql } from 'kysely';
import {
  RUN_STATES,
  RUNS_PAGE_DEFAULT,
  ServiceError,
  TERMINAL_RUN_STATES,
  type RunActivity,
  type RunListQuery,
  type RunPage,
} from '@svc/contracts';
import { dbNow } from '../../store/runs.js';
import { activityOf, runViews } from '../../store/run-view.js';
import type { Ctx } from '../context.js';
import { toRun } from './records.js';

/** Characters of the first prompt a listing carries. */
const FIRST_PROMPT_CHARS = 200;

/**
 * Keyset position over (created_at desc, run_id desc). created_at is kept in microseconds
 * since the epoch: a millisecond Date would skip or repeat runs created within one millisecond.
 */
interface Position {
  micros: string;
  runId: string;
}

function encodeCursor(position: Position): string {
  return Buffer.from(JSON.stringify(['r', position.micros, position.runId])).toString('base64url');
}

function decodeCursor(raw: string): Position {
  try {
    const parts = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(parts) && parts.length === 3) {
      const [kind, micros, runId] = parts as unknown[];
      if (
        kind === 'r' &&
        typeof micros === 'string' &&
        /^-?\d{1,16}$/.test(micros) &&
        typeof runId === 'string' &&
        runId.length <= 100
      )
        return { micros, runId };
    }
  } catch {
    // fall through
  }
  throw new ServiceError('schema-invalid', 'cursor is not a cursor this service returned', {
    field: 'cursor',
  });
}

/** The created_at instant of a position, rebuilt exactly (integer microseconds, no float). */
const instantOf = (micros: string) =>
  sql`(timestamptz 'epoch' + ${micros}::bigint * interval '1 microsecond')`;

const OPEN_STATES = RUN_STATES.filter((s) => !TERMINAL_RUN_STATES.includes(s));
const values = (list: string) => [...new Set(list.split(','))];

export async function listRuns(ctx: Ctx, query: RunListQuery): Promise<RunPage> {
  const limit = query.limit ?? RUNS_PAGE_DEFAULT;
  let q = runViews(ctx.db)
    .select(
      sql<string>`(extract(epoch from runs.created_at) * 1000000)::bigint::text`.as('created_us'),
    )
    // What the run was asked first, for a list a person scans (the commands' (run_id, seq) key).
    .select(
      sql<string | null>`(SELECT left(c.payload->>'prompt', ${FIRST_PROMPT_CHARS}) FROM commands c
        WHERE c.run_id = runs.run_id AND c.type = 'turn' ORDER BY c.seq LIMIT 1)`.as(
        'first_prompt',
      ),
    );
  if (query.tenantId !== undefined) q = q.where('runs.tenant_id', '=', query.tenantId);
  if (query.projectId !== undefined) q = q.where('runs.project_id', '=', query.projectId);
  if (query.backendProfile !== undefined)
    q = q.where('runs.backend_profile', '=', query.backendProfile);
  if (query.sessionId !== undefined) q = q.where('runs.session_id', '=', query.sessionId);
  if (query.state !== undefined) q = q.where('runs.state', 'in', values(query.state));
  if (query.activity !== undefined) {
    const wanted = values(query.activity) as RunActivity[];
    q = q.where(activityOf, 'in', wanted);
    // The run state tells closed from open: an index range, then the probe only on those.
    if (!wanted.includes('closed')) q = q.where('runs.state', 'in', OPEN_STATES);
    else if (wanted.length === 1) q = q.where('runs.state', 'in', TERMINAL_RUN_STATES);
  }
  if (query.lastOutcome !== undefined) q = q.where('lc.state', 'in', values(query.lastOutcome));
  if (query.createdAfter !== undefined)
    q = q.where('runs.created_at', '>', new Date(query.createdAfter));
  if (query.createdBefore !== undefined)
    q = q.where('runs.created_at', '<', new Date(query.createdBefore));
  if (query.cursor !== undefined) {
    const position = decodeCursor(query.cursor);
    q = q.where(
      sql<boolean>`(runs.created_at, runs.run_id) < (${instantOf(position.micros)}, ${position.runId})`,
    );
  }
  const [rows, now] = await Promise.all([
    q
      .orderBy('runs.created_at', 'desc')
      .orderBy('runs.run_id', 'desc')
      .limit(limit + 1)
      .execute(),
    dbNow(ctx.db),
  ]);
  const page = rows.slice(0, limit);
  const last = page.at(-1);
  return {
    runs: page.map((row) => ({ ...toRun(row, now), firstPrompt: row.first_prompt })),
    nextCursor:
      rows.length > limit && last
        ? encodeCursor({ micros: last.created_us, runId: last.run_id })
        : null,
  };
}
