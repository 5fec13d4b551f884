import { sql } from 'kysely';
import { ServiceError, type SessionPvcSummary, type SessionRef } from '@svc/contracts';
import type { ManagerConfig } from '../../config.js';
import type { SessionVolume, SessionVolumes } from '../../sessions/volumes.js';
import type { CommandRow } from '../../store/commands.js';
import type { Db } from '../../store/db.js';
import type { Executor, RunRow, Tx } from '../../store/runs.js';
import type { DomainHooks, TerminalChange } from '../context.js';
import { trustedClaim } from '../dispatch-scope.js';
import type { SessionRow } from './records.js';
import { findSession } from './sessions.js';
import { checkRunStorage, checkSessionStorage, refuseEvicted } from './storage-check.js';

/** What a runner Job is told about its session's storage: names and paths, no values. */
export function sessionPvcOf(
  config: Pick<ManagerConfig, 'sessions'>,
  row: Pick<SessionRow, 'session_id' | 'pvc_name' | 'pvc_namespace' | 'storage_kind'>,
  volume: SessionVolume | null,
): SessionPvcSummary {
  return {
    sessionId: row.session_id,
    pvcName: row.pvc_name,
    namespace: row.pvc_namespace,
    // Local volumes live elsewhere and are linked in; a claim is mounted in place.
    mountPath: volume?.mountPath ?? `/home/runner/.codex/${config.sessions.rolloutSubdir}`,
    agentRolloutSubdir: config.sessions.rolloutSubdir,
    storageKind: row.storage_kind,
    valuesPrinted: false,
  };
}

/**
 * How sessions follow their runs: a run naming a session gets the session's thread; a turn
 * makes the session `running`; a terminal command or run makes it `terminal` and bumps its
 * version (unread readers see it); an evicted session (or one whose volume is gone) accepts no
 * run, send, command or runner job.
 */
export function sessionHooks(
  db: Db,
  config: ManagerConfig,
  volumes: SessionVolumes,
): Partial<DomainHooks> {
  return {
    async completeSessionRef(ref: SessionRef, profile: string): Promise<SessionRef> {
      const row = await findSession(db, ref.sessionId);
      if (!row)
        throw new ServiceError(
          'not-found',
          `session ${ref.sessionId} not found; create it with POST /api/v1/sessions`,
          { field: 'sessionRef.sessionId' },
        );
      await checkSessionStorage(db, volumes, row.session_id);
      // Thread identity: the caller's threadId wins, else the session's thread of this profile.
      const sessionThread =
        profile === row.backend_profile ? row.thread_id : (row.profile_threads[profile] ?? null);
      return {
        sessionId: row.session_id,
        conversationId: ref.conversationId ?? row.conversation_id,
        threadId: ref.threadId ?? sessionThread,
      };
    },

    async afterCommand(trx: Tx, run: RunRow, command: CommandRow): Promise<void> {
      if (!run.session_id) return;
      await trx
        .updateTable('sessions')
        .set({
          active_run_id: run.run_id,
          active_command_id: command.command_id,
          execution_state: 'running',
          version: sql`version + 1`,
          updated_at: sql`now()`,
        } as never)
        .where('session_id', '=', run.session_id)
        .execute();
    },

    async beforeCommand(trx: Tx, run: RunRow): Promise<void> {
      if (run.session_id) await refuseEvicted(trx, run.session_id);
    },

    async beforeRunnerJob(trx: Tx, run: RunRow): Promise<void> {
      if (run.session_id) await refuseEvicted(trx, run.session_id);
    },

    checkSessionStorage: (sessionId: string) => checkSessionStorage(db, volumes, sessionId),
    checkRunStorage: (runId: string) => checkRunStorage(db, volumes, runId),

    async sessionPvcFor(run: RunRow, executor: Executor): Promise<SessionPvcSummary | null> {
      if (!run.session_id) return null;
      const row = await findSession(executor, run.session_id);
      if (!row) return null;
      const volume = trustedClaim(run.session_id) ?? (await volumes.get(run.session_id));
      return sessionPvcOf(config, row, volume);
    },

    async onTerminal(trx: Tx, change: TerminalChange): Promise<void> {
      if (change.commandId) {
        // A run without a session has no session to follow it: no lookup on a plain turn.
        if (change.sessionId === null) return;
        const row = await trx
          .selectFrom('sessions')
          .selectAll()
          .where('active_command_id', '=', change.commandId)
          .forUpdate()
          .executeTakeFirst();
        if (!row) return;
        const run = await trx
          .selectFrom('runs')
          .select('backend_profile')
          .where('run_id', '=', change.runId)
          .executeTakeFirst();
        const sameProfile = run?.backend_profile === row.backend_profile;
        const threads =
          change.threadId && run
            ? { ...row.profile_threads, [run.backend_profile]: change.threadId }
            : row.profile_threads;
        await trx
          .updateTable('sessions')
          .set({
            execution_state: 'terminal',
            last_run_id: change.runId,
            last_command_id: change.commandId,
            last_outcome: change.state,
            // A new thread's id is written back, for the session's own profile only.
            ...(change.threadId && sameProfile ? { thread_id: change.threadId } : {}),
            profile_threads: JSON.stringify(threads),
            version: sql`version + 1`,
            updated_at: sql`now()`,
          } as never)
          .where('session_id', '=', row.session_id)
          .execute();
        return;
      }
      await trx
        .updateTable('sessions')
        .set({
          execution_state: 'terminal',
          last_run_id: change.runId,
          active_run_id: null,
          active_command_id: null,
          last_outcome: sql`coalesce(last_outcome, ${change.state})`,
          version: sql`version + 1`,
          updated_at: sql`now()`,
        } as never)
        .where('active_run_id', '=', change.runId)
        .execute();
    },
  };
}
