import { sql } from 'kysely';
import { ServiceError } from '@svc/contracts';
import type { SessionVolumes } from '../../sessions/volumes.js';
import type { Db } from '../../store/db.js';
import type { Executor } from '../../store/runs.js';
import { trustedClaim, trustedRunSession } from '../dispatch-scope.js';
import { findSession } from './sessions.js';

export const evictedError = (sessionId: string) =>
  new ServiceError(
    'session-store-evicted',
    `session ${sessionId} storage was evicted; no new work can run on it`,
    { sessionId },
  );

/** Refuse new work on a session already marked evicted (inside the caller's transaction). */
export async function refuseEvicted(db: Executor, sessionId: string): Promise<void> {
  const row = await findSession(db, sessionId);
  if (row?.storage_kind === 'evicted') throw evictedError(sessionId);
}

/**
 * A session's storage must exist before new work runs on it. A volume removed outside the API
 * (a deleted claim, a removed directory) is eviction too: it is recorded on the pool in its own
 * statement, never inside the refused request's transaction, so the record survives the refusal
 * and every later send and command gets `session-store-evicted` without looking again.
 * Callers run it before they open their transaction.
 */
export async function checkSessionStorage(
  db: Db,
  volumes: SessionVolumes,
  sessionId: string,
): Promise<void> {
  // Created by this very dispatch: nothing can have been recorded against it that the
  // in-transaction checks (refuseEvicted) would not see.
  if (trustedClaim(sessionId)) return;
  const row = await findSession(db, sessionId);
  if (!row) return;
  if (row.storage_kind === 'evicted') throw evictedError(sessionId);
  if (await volumes.get(sessionId)) return;
  await db
    .updateTable('sessions')
    .set({
      storage_kind: 'evicted',
      storage_evicted_at: sql`now()`,
      pvc_phase: null,
      version: sql`version + 1`,
      updated_at: sql`now()`,
    } as never)
    .where('session_id', '=', sessionId)
    .where('storage_kind', '<>', 'evicted')
    .execute();
  throw evictedError(sessionId);
}

/** The same check for a run: only a run that names a session has storage to lose. */
export async function checkRunStorage(
  db: Db,
  volumes: SessionVolumes,
  runId: string,
): Promise<void> {
  if (trustedRunSession(runId)) return;
  const sessionId = await sessionOfRun(db, runId);
  if (sessionId) await checkSessionStorage(db, volumes, sessionId);
}

/**
 * A run's session (or none) is set when the run is created and never changes, so each process
 * remembers it for recent runs: a turn on a run without a session checks nothing and reads
 * nothing before its transaction. Unknown runs are not remembered (their creation may follow).
 */
const runSessions = new Map<string, string | null>();
const RUN_SESSIONS_KEPT = 10_000;

async function sessionOfRun(db: Db, runId: string): Promise<string | null> {
  const known = runSessions.get(runId);
  if (known !== undefined) return known;
  const run = await db
    .selectFrom('runs')
    .select('session_id')
    .where('run_id', '=', runId)
    .executeTakeFirst();
  if (!run) return null;
  // Oldest first out (a Map iterates in insertion order).
  if (runSessions.size >= RUN_SESSIONS_KEPT) runSessions.delete(runSessions.keys().next().value!);
  runSessions.set(runId, run.session_id);
  return run.session_id;
}
