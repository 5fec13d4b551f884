import { sql, type Insertable } from 'kysely';
import {
  newId,
  ServiceError,
  SESSIONS_PAGE_DEFAULT,
  type ControlBody,
  type RunCreateBody,
  type Session,
  type SessionCreateBody,
  type SessionListQuery,
  type SessionPage,
  type StorageRefreshBody,
  type StorageResponse,
  type Supervisor,
} from '@svc/contracts';
import type { SessionVolumes } from '../../sessions/volumes.js';
import { sessionPvcName } from '../../sessions/volumes.js';
import { json } from '../../store/json.js';
import { findCommand } from '../../store/commands.js';
import { findRun, type Executor } from '../../store/runs.js';
import type { SessionsTable } from '../../store/schema.js';
import { checkRunSources } from '../runs/bundle-policy.js';
import { cancelCommand } from '../runs/commands.js';
import type { Ctx } from '../context.js';
import { dispatchScope } from '../dispatch-scope.js';
import { livenessOf } from '../runs/liveness-of.js';
import {
  checkProjectBoundary,
  completeExecutionPolicy,
  resolveProfile,
} from '../runs/run-policy.js';
import { assertLeaseOwner, ownerDetails } from '../runs/lease-checks.js';
import { cancelRun, isTerminalRun, lockRunOrThrow } from '../runs/runs.js';
import {
  decodeCursor,
  encodeCursor,
  sessionPath,
  storageOf,
  toSession,
  type SessionRow,
} from './records.js';

export interface SessionDeps {
  volumes: SessionVolumes;
}

export async function findSession(
  db: Executor,
  sessionId: string,
): Promise<SessionRow | undefined> {
  return db
    .selectFrom('sessions')
    .selectAll()
    .where('session_id', '=', sessionId)
    .executeTakeFirst();
}

export async function getSessionRow(db: Executor, sessionId: string): Promise<SessionRow> {
  const row = await findSession(db, sessionId);
  if (!row) throw new ServiceError('not-found', `session ${sessionId} not found`);
  return row;
}

/** The run fields a session reuses, checked as a run would be (tenant, project, policy, bundle). */
export function checkRunBase(
  ctx: Ctx,
  runBase: SessionCreateBody['runBase'],
  profile: string,
): void {
  const asRun: RunCreateBody = {
    ...runBase,
    backendProfile: profile,
    traceSink: runBase.traceSink ?? null,
  };
  checkProjectBoundary(asRun, ctx.config.tenants);
  completeExecutionPolicy(runBase.executionPolicy, profile, ctx.config.policy);
  checkRunSources(runBase, ctx.config.repoUrlPrefixes);
}

/** A new session's record, idle, its storage named before the volume exists. */
export function sessionRowOf(
  ctx: Ctx,
  sessionId: string,
  body: SessionCreateBody,
  profile: string,
): Insertable<SessionsTable> {
  return {
    session_id: sessionId,
    conversation_id: body.conversationId ?? null,
    thread_id: body.threadId ?? null,
    profile_threads: json(body.threadId ? { [profile]: body.threadId } : {}),
    backend_profile: profile,
    tenant_id: body.runBase.tenantId,
    project_id: body.runBase.projectId,
    run_base: json(body.runBase),
    execution_state: 'idle',
    storage_kind: 'pvc',
    pvc_name: sessionPvcName(sessionId),
    pvc_namespace: ctx.config.launcher.namespace,
    expires_at: new Date(
      Date.now() + (body.expiresInSeconds ?? ctx.config.sessions.ttlSeconds) * 1000,
    ),
  };
}

/**
 * Create a session and its volume, synchronously: the response names a claim that exists.
 * Creating an id that exists returns the existing session unchanged.
 */
export async function createSession(
  ctx: Ctx,
  deps: SessionDeps,
  body: SessionCreateBody,
): Promise<{ session: Session; created: boolean }> {
  const profile = resolveProfile(body);
  checkRunBase(ctx, body.runBase, profile);
  await ctx.hooks.assertProfileUsable(profile);
  const sessionId = body.sessionId ?? newId('ses');

  const inserted = await ctx.db
    .insertInto('sessions')
    .values(sessionRowOf(ctx, sessionId, body, profile))
    .onConflict((oc) => oc.column('session_id').doNothing())
    .returningAll()
    .executeTakeFirst();
  if (!inserted)
    return { session: toSession(await getSessionRow(ctx.db, sessionId), null), created: false };
  try {
    const volume = await deps.volumes.create(sessionId);
    // The dispatch creating it goes on to check it several times: this answer stands for them.
    dispatchScope()?.trustClaim(sessionId, volume);
    const row = await ctx.db
      .updateTable('sessions')
      .set({
        pvc_name: volume.pvcName,
        pvc_namespace: volume.namespace,
        pvc_phase: volume.phase,
        updated_at: sql`now()`,
      } as never)
      .where('session_id', '=', sessionId)
      .returningAll()
      .executeTakeFirstOrThrow();
    return { session: toSession(row, null), created: true };
  } catch (error) {
    // No session without its volume: the record goes too.
    await ctx.db.deleteFrom('sessions').where('session_id', '=', sessionId).execute();
    throw new ServiceError(
      'infra-failed',
      `the volume of session ${sessionId} could not be created: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
}

async function readerVersion(
  db: Executor,
  sessionId: string,
  readerId: string | undefined,
): Promise<{ readerId: string; readVersion: number | null } | null> {
  if (!readerId) return null;
  const row = await db
    .selectFrom('session_readers')
    .select('read_version')
    .where('session_id', '=', sessionId)
    .where('reader_id', '=', readerId)
    .executeTakeFirst();
  return { readerId, readVersion: row?.read_version ?? null };
}

/** One session with the liveness of its active (or last) work and a compact supervisor view. */
export async function getSession(
  ctx: Ctx,
  sessionId: string,
  readerId: string | undefined,
): Promise<Session> {
  const row = await getSessionRow(ctx.db, sessionId);
  const session = toSession(row, await readerVersion(ctx.db, sessionId, readerId));
  const runId = row.active_run_id ?? row.last_run_id;
  const commandId = row.active_command_id ?? row.last_command_id;
  const run = runId ? await findRun(ctx.db, runId) : undefined;
  if (!run) return { ...session, liveness: null, supervisor: null };
  const command = commandId ? ((await findCommand(ctx.db, commandId)) ?? null) : null;
  const liveness = await livenessOf(ctx, run, command);
  return { ...session, liveness, supervisor: supervisorOf(sessionId, liveness) };
}

function supervisorOf(sessionId: string, liveness: NonNullable<Session['liveness']>): Supervisor {
  const activity = liveness.lastCommandActivity ?? liveness.lastActivity;
  const recovery =
    liveness.recoveryActions.find(
      (a) => a.action !== 'inspect-result' && a.action !== 'read-events',
    ) ?? liveness.recoveryActions[0]!;
  const after = activity?.sourceSeq ? Math.max(0, activity.sourceSeq - 20) : 0;
  return {
    phase: liveness.phase,
    lastActivitySeq: activity?.sourceSeq ?? null,
    lastActivityEventId: activity?.eventId ?? null,
    timeoutBudget: {
      state: liveness.timeoutBudget.state,
      remainingMs: liveness.timeoutBudget.remainingMs,
      timeoutMs: liveness.timeoutBudget.timeoutMs,
    },
    recoveryAction: recovery.action,
    next: `sessions output ${sessionId} --after-seq ${after}`,
  };
}

export async function listSessions(ctx: Ctx, query: SessionListQuery): Promise<SessionPage> {
  const state = query.state ?? 'default';
  const limit = query.limit ?? SESSIONS_PAGE_DEFAULT;
  const reader = query.readerId ?? null;
  let q = ctx.db
    .selectFrom('sessions as s')
    .leftJoin('session_readers as r', (join) =>
      join.onRef('r.session_id', '=', 's.session_id').on('r.reader_id', '=', reader ?? ''),
    )
    .selectAll('s')
    .select('r.read_version');
  const unread = sql<boolean>`(r.read_version IS NULL OR r.read_version < s.version)`;
  if (state === 'running') q = q.where('s.execution_state', '=', 'running');
  if (state === 'terminal') q = q.where('s.execution_state', '=', 'terminal');
  if (state === 'idle') q = q.where('s.execution_state', '=', 'idle');
  if (state === 'unread') q = q.where(unread);
  if (state === 'default')
    q = q.where((eb) => eb.or([eb('s.execution_state', '=', 'running'), unread]));
  if (query.backendProfile) q = q.where('s.backend_profile', '=', query.backendProfile);
  if (query.cursor) {
    const { updatedAt, sessionId } = decodeCursor(query.cursor);
    q = q.where(sql<boolean>`(s.updated_at, s.session_id) < (${updatedAt}, ${sessionId})`);
  }
  const rows = await q
    .orderBy('s.updated_at', 'desc')
    .orderBy('s.session_id', 'desc')
    .limit(limit + 1)
    .execute();
  const page = rows.slice(0, limit);
  return {
    sessions: page.map((row) =>
      toSession(row, reader ? { readerId: reader, readVersion: row.read_version ?? null } : null),
    ),
    nextCursor: rows.length > limit ? encodeCursor(page.at(-1)!) : null,
    state,
    readerId: reader,
  };
}

/** The reader has seen the session as it is now: it leaves that reader's default list. */
export async function markRead(ctx: Ctx, sessionId: string, readerId: string): Promise<Session> {
  const row = await getSessionRow(ctx.db, sessionId);
  await ctx.db
    .insertInto('session_readers')
    .values({ session_id: sessionId, reader_id: readerId, read_version: row.version })
    .onConflict((oc) =>
      oc.columns(['session_id', 'reader_id']).doUpdateSet({
        read_version: sql`greatest(session_readers.read_version, excluded.read_version)`,
        read_at: sql`now()`,
      } as never),
    )
    .execute();
  return toSession(row, await readerVersion(ctx.db, sessionId, readerId));
}

/** Cancel the session's active command, or its active run when no command is active. */
export async function controlSession(
  ctx: Ctx,
  sessionId: string,
  body: ControlBody,
): Promise<{
  sessionId: string;
  action: string;
  cancelled: { commandId: string | null; runId: string | null };
  session: Session;
}> {
  const row = await getSessionRow(ctx.db, sessionId);
  const command = row.active_command_id
    ? await findCommand(ctx.db, row.active_command_id)
    : undefined;
  const run = row.active_run_id ? await findRun(ctx.db, row.active_run_id) : undefined;
  let cancelled = { commandId: null as string | null, runId: null as string | null };
  if (command && ['accepted', 'delivered', 'confirmed'].includes(command.state)) {
    await cancelCommand(ctx, command.command_id, body.reason);
    cancelled = { commandId: command.command_id, runId: null };
  } else if (run && !isTerminalRun(run.state)) {
    await cancelRun(ctx, run.run_id, body.reason);
    cancelled = { commandId: null, runId: run.run_id };
  } else {
    throw new ServiceError(
      'state-conflict',
      `session ${sessionId} has no active command or run to cancel`,
      { executionState: row.execution_state },
    );
  }
  return {
    sessionId,
    action: body.action,
    cancelled,
    session: toSession(await getSessionRow(ctx.db, sessionId), null),
  };
}

export async function getStorage(
  ctx: Ctx,
  deps: SessionDeps,
  sessionId: string,
): Promise<StorageResponse> {
  let row = await getSessionRow(ctx.db, sessionId);
  if (row.storage_kind === 'pvc') {
    const volume = await deps.volumes.get(sessionId);
    row = await ctx.db
      .updateTable('sessions')
      .set({ pvc_phase: volume ? volume.phase : 'Missing' } as never)
      .where('session_id', '=', sessionId)
      .returningAll()
      .executeTakeFirstOrThrow();
  }
  return storageResponse(row);
}

function storageResponse(row: SessionRow): StorageResponse {
  const { storageKind, pvcNamespace: _namespace, ...facts } = storageOf(row);
  return { sessionId: row.session_id, storage_kind: storageKind, ...facts };
}

/** Delete the session's volume: the session becomes `evicted` and accepts no new work. */
export async function evictStorage(
  ctx: Ctx,
  deps: SessionDeps,
  sessionId: string,
  reason: string,
): Promise<StorageResponse> {
  const row = await getSessionRow(ctx.db, sessionId);
  if (row.storage_kind === 'evicted') return storageResponse(row);
  await deps.volumes.delete(sessionId);
  const updated = await ctx.db
    .updateTable('sessions')
    .set({
      storage_kind: 'evicted',
      storage_evicted_at: sql`now()`,
      pvc_phase: null,
      version: sql`version + 1`,
      updated_at: sql`now()`,
    } as never)
    .where('session_id', '=', sessionId)
    .returningAll()
    .executeTakeFirstOrThrow();
  ctx.logger.info({ sessionId, reason }, 'session storage evicted');
  return storageResponse(updated);
}

/**
 * The storage summary is lease-fenced like every other runner write: only the runner holding the
 * lease of the session's run (its runnerId and `x-lease-token`) may report what the volume holds,
 * so neither a stale runner nor a stranger can overwrite it.
 */
export async function refreshStorage(
  ctx: Ctx,
  sessionId: string,
  body: StorageRefreshBody,
  leaseToken: string | undefined,
): Promise<StorageResponse> {
  return ctx.db.transaction().execute(async (trx) => {
    const session = await getSessionRow(trx, sessionId);
    const runId = session.active_run_id ?? session.last_run_id;
    if (!runId)
      throw new ServiceError(
        'runner-lease-conflict',
        `session ${sessionId} has no run to report for`,
        // As every lease conflict does: the holder and its expiry, here none.
        ownerDetails(null, null),
      );
    assertLeaseOwner(await lockRunOrThrow(trx, runId), body.runnerId, leaseToken);
    return storageResponse(await writeStorageSummary(trx, sessionId, body));
  });
}

function writeStorageSummary(db: Executor, sessionId: string, body: StorageRefreshBody) {
  return db
    .updateTable('sessions')
    .set({
      storage_size_bytes: body.sizeBytes,
      storage_files_count: body.filesCount,
      storage_sha256: body.sha256,
      storage_updated_at: sql`now()`,
      updated_at: sql`now()`,
    } as never)
    .where('session_id', '=', sessionId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

export { sessionPath };
