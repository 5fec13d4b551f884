import type { Redactor, SessionPvcSummary, SessionRef } from '@svc/contracts';
import type { CommandRow } from '../store/commands.js';
import type { ManagerConfig } from '../config.js';
import type { Logger } from '../logging.js';
import type { Db } from '../store/db.js';
import type { Executor, RunRow, Tx } from '../store/runs.js';
import type { Wakeups } from '../store/wakeups.js';
import type { WatchSlots } from './runs/watch-slots.js';
import type { WriteLanes } from '../store/lanes.js';

/**
 * What a domain operation may use. Passed explicitly so a test can build one around a real
 * store without the HTTP layer.
 */
export interface Ctx {
  readonly db: Db;
  readonly config: ManagerConfig;
  readonly wakeups: Wakeups;
  readonly logger: Logger;
  /** Known secret values (API key, store password, credentials in flight): never stored. */
  readonly redactor: Redactor;
  readonly hooks: DomainHooks;
  /** The process's bound on client long-polls and event streams. */
  readonly watches: WatchSlots;
  /**
   * The lease lane's connections and the coalesced writers (store/lanes.ts); absent: every
   * write on `db`, one request per commit.
   */
  readonly lanes?: WriteLanes;
}

/**
 * Reactions other layers attach to core transitions (sessions follow their runs, profiles gate
 * run creation). Each hook runs inside the transaction of the transition it reacts to.
 */
export interface DomainHooks {
  /** Throws `secret-unavailable` when the profile cannot be used by a new run. */
  assertProfileUsable(profile: string): Promise<void>;
  /** A new run names a session: check it and complete its sessionRef (thread, conversation). */
  completeSessionRef?(sessionRef: SessionRef, profile: string): Promise<SessionRef>;
  /** A turn or resume command was created on a locked run (sessions track their active work). */
  afterCommand?(trx: Tx, run: RunRow, command: CommandRow): Promise<void>;
  /** Before a command is created on a locked run (sessions refuse evicted storage). */
  beforeCommand?(trx: Tx, run: RunRow): Promise<void>;
  /** Before a runner job is created for a locked run (sessions refuse evicted storage). */
  beforeRunnerJob?(trx: Tx, run: RunRow): Promise<void>;
  /**
   * Before a send, command or runner job touches a session (outside any transaction): a volume
   * removed behind the API's back is recorded as eviction and refused.
   */
  checkSessionStorage?(sessionId: string): Promise<void>;
  /** The same for the session a run names, if any. */
  checkRunStorage?(runId: string): Promise<void>;
  /** The session volume a runner job of this run mounts, if the run has a session. */
  sessionPvcFor?(run: RunRow, db: Executor): Promise<SessionPvcSummary | null>;
  /** After a run was cancelled and committed (launchers stop what does not stop by itself). */
  afterRunCancelled?(runId: string): void;
  /** A command or run reached a terminal state (inside its transaction). */
  onTerminal(trx: Tx, change: TerminalChange): Promise<void>;
  /** A runner acknowledged a command: its work started (inside the acknowledging transaction). */
  onAcknowledged?(trx: Tx, change: { runId: string; commandId: string }): Promise<void>;
}

export interface TerminalChange {
  runId: string;
  commandId: string | null;
  state: string;
  threadId: string | null;
  /**
   * The run's session, when the caller holds the run row: null says the run has none, so no
   * session follows this change (a session's active command is always of its own runs).
   */
  sessionId?: string | null;
}

export const noHooks: DomainHooks = {
  assertProfileUsable: () => Promise.resolve(),
  onTerminal: () => Promise.resolve(),
};
