import {
  ServiceError,
  type Attempt,
  type JudgeRun,
  type SessionRef,
  type Supervisor,
  type Task,
  type TaskReference,
  type TaskRetry,
  type TaskState,
  type TaskSummary,
  type TaskWaiting,
} from '@svc/contracts';
import type { Selectable } from 'kysely';
import { iso, isoRequired } from '../../store/json.js';
import type { QueueJudgeRunsTable, QueueTaskReferencesTable } from '../../store/schema.js';
import { schedulingOf } from '../scheduler/task-policy.js';
import { sessionPath } from '../sessions/records.js';
import type { AttemptRow, RetryRow, TaskRow } from './store.js';
import { attemptsLeft, attemptsSinceRetry } from './budget.js';
import { dispatchHelps, waitingOf, type WaitingView } from './waiting.js';

const FAILED: readonly string[] = ['failed', 'blocked'];

/** Rows -> API records. Every field is named on purpose; nothing is read from runs or events. */
export function toAttempt(row: AttemptRow): Attempt {
  return {
    attemptId: row.attempt_id,
    taskId: row.task_id,
    retryIndex: row.retry_index,
    state: row.state as Attempt['state'],
    runId: row.run_id,
    commandId: row.command_id,
    runnerJobId: row.runner_job_id,
    sessionId: row.session_id,
    sessionPath: row.session_id ? sessionPath(row.session_id) : null,
    sessionOrigin: row.session_origin as Attempt['sessionOrigin'],
    thread: row.thread as Attempt['thread'],
    terminalStatus: row.terminal_status,
    failureKind: row.failure_kind,
    message: row.message,
    runner: { runnerId: row.runner_id, jobName: row.job_name, phase: row.runner_phase },
    durationMs: row.duration_ms === null ? null : Number(row.duration_ms),
    eventCount: row.event_count,
    lastEventSeq: row.last_event_seq,
    outputRef:
      row.run_id && row.command_id && row.session_id
        ? {
            result: `/api/v1/runs/${row.run_id}/commands/${row.command_id}/result`,
            output: `${sessionPath(row.session_id)}/output?runId=${row.run_id}`,
          }
        : null,
    supervisor: (row.supervisor as Supervisor | null) ?? null,
    supervisorAt: iso(row.supervisor_at),
    createdAt: isoRequired(row.created_at),
    updatedAt: isoRequired(row.updated_at),
    startedAt: iso(row.started_at),
    terminalAt: iso(row.terminal_at),
  };
}

/**
 * The command a person runs next for this task (session commands once a session exists). A
 * dispatch only when it is the person's to make and would not be refused (waiting.ts); a task
 * that waits (for the scheduler, capacity, a backoff, its session) points at `queue show`,
 * which says why and until when.
 */
export function nextCommand(
  task: TaskRow,
  attempt: AttemptRow | null,
  waiting: TaskWaiting | null,
  view: WaitingView,
): string {
  const sessionId = attempt?.session_id ?? null;
  const show = `queue show ${task.task_id}`;
  const dispatch = dispatchHelps(task, attempt, waiting, view)
    ? `queue dispatch ${task.task_id}`
    : FAILED.includes(task.state) && !attemptsLeft(task)
      ? `queue retry ${task.task_id}`
      : show;
  if (task.state === 'cancelled')
    return sessionId && attempt?.run_id ? `sessions show ${sessionId}` : show;
  // Nothing of a paused queue starts, by the scheduler or by hand, until it is resumed.
  if (waiting?.reason === 'queue-paused') return `queue resume ${task.queue}`;
  if (!attempt || !sessionId)
    return task.state === 'queued' || FAILED.includes(task.state) ? dispatch : show;
  const seq = (attempt.supervisor as Supervisor | null)?.lastActivitySeq ?? null;
  const after = seq ? ` --after-seq ${Math.max(0, seq - 20)}` : '';
  // An attempt that ended before its run wrote anything has no trace to read.
  const traceless = !attempt.run_id || !attempt.last_event_seq;
  switch (attempt.state) {
    case 'dispatched':
    case 'running':
      return `sessions output ${sessionId}${after} --follow`;
    case 'failed':
    case 'blocked':
      if (traceless) return dispatch;
      return `sessions trace ${sessionId}${after}`;
    case 'completed':
      return `sessions output ${sessionId}${after}`;
    default:
      return `sessions show ${sessionId}`;
  }
}

export interface SummaryOptions {
  full: boolean;
  reader?: { readerId: string; readVersion: number | null } | null;
}

export function toSummary(
  row: TaskRow,
  attempt: AttemptRow | null,
  view: WaitingView,
  options: SummaryOptions = { full: false },
): TaskSummary {
  const waiting = waitingOf(row, attempt, view);
  const summary: TaskSummary = {
    taskId: row.task_id,
    queue: row.queue,
    lane: row.lane,
    title: row.title,
    priority: row.priority,
    state: row.state as TaskState,
    backendProfile: row.backend_profile,
    summary: row.summary,
    maxAttempts: row.max_attempts,
    concurrencyKey: row.concurrency_key,
    concurrencyLimit: row.concurrency_limit,
    counters: {
      attempts: row.attempt_count,
      failed: row.failed_attempts,
      blocked: row.blocked_attempts,
      retries: row.retry_count,
      sinceRetry: attemptsSinceRetry(row),
    },
    sessionId: row.session_id,
    sessionPath: row.session_id ? sessionPath(row.session_id) : null,
    latestAttempt: attempt ? toAttempt(attempt) : null,
    waiting,
    next: nextCommand(row, attempt, waiting, view),
    version: row.version,
    changeSeq: Number(row.change_seq),
    updatedAt: isoRequired(row.updated_at),
    createdAt: isoRequired(row.created_at),
    cursor: encodeCursor({
      kind: 'priority',
      priority: row.priority,
      seq: Number(row.enqueue_seq),
    }),
  };
  if (options.reader) {
    const { readerId, readVersion } = options.reader;
    summary.reader = {
      readerId,
      readVersion,
      unread: readVersion === null || readVersion < row.version,
    };
  }
  if (options.full) {
    summary.payload = row.payload;
    summary.workspaceRef = row.workspace_ref;
    summary.resourceBundleRef = row.resource_bundle_ref;
    summary.metadata = row.metadata;
  }
  return summary;
}

export function toTask(
  row: TaskRow,
  attempt: AttemptRow | null,
  references: Selectable<QueueTaskReferencesTable>[],
  judgeRuns: Selectable<QueueJudgeRunsTable>[],
  view: WaitingView,
  attempts: AttemptRow[] = [],
  retries: RetryRow[] = [],
): Task {
  return {
    ...toSummary(row, attempt, view, { full: false }),
    tenantId: row.tenant_id,
    projectId: row.project_id,
    providerId: row.provider_id,
    payload: row.payload,
    workspaceRef: row.workspace_ref,
    resourceBundleRef: row.resource_bundle_ref,
    metadata: row.metadata,
    sessionRef: (row.session_ref as SessionRef | null) ?? null,
    executionPolicy: row.execution_policy,
    references: references.map((r): TaskReference => ({
      kind: r.kind as TaskReference['kind'],
      ref: r.ref,
      ...(r.url ? { url: r.url } : {}),
      ...(r.title ? { title: r.title } : {}),
    })),
    judgeRuns: judgeRuns.map(toJudgeRun),
    attempts: attempts.map(toAttempt),
    retries: retries.map(toRetry),
    scheduling: schedulingOf(row, view.settings),
    cancelReason: row.cancel_reason,
    schedule:
      row.schedule_id && row.schedule_tick
        ? { scheduleId: row.schedule_id, tick: isoRequired(row.schedule_tick) }
        : null,
    terminalAt: iso(row.terminal_at),
    valuesPrinted: false,
  };
}

export function toRetry(r: RetryRow): TaskRetry {
  return {
    retryId: r.retry_id,
    at: isoRequired(r.retried_at),
    by: r.retried_by,
    reason: r.reason,
    fromState: r.from_state as TaskRetry['fromState'],
    failureKind: r.failure_kind,
    attemptsBefore: r.attempts_before,
    bulk: r.bulk,
  };
}

export function toJudgeRun(j: Selectable<QueueJudgeRunsTable>): JudgeRun {
  return {
    judgeRunId: j.judge_run_id,
    attemptId: j.attempt_id,
    state: j.state as JudgeRun['state'],
    verdict: j.verdict as JudgeRun['verdict'],
    request: j.request,
    result: j.result,
    failureKind: j.failure_kind,
    retrySuggestion: j.retry_suggestion,
    backendProfile: j.backend_profile,
    sessionId: j.session_id,
    runId: j.run_id,
    commandId: j.command_id,
    createdAt: isoRequired(j.created_at),
    terminalAt: iso(j.terminal_at),
  };
}

/**
 * Opaque keyset cursors: queue order is (priority desc, enqueue seq asc); polling order is
 * changeSeq asc. A cursor of one order is refused by the other.
 */
export type Cursor =
  { kind: 'priority'; priority: number; seq: number } | { kind: 'seq'; seq: number };

export function encodeCursor(cursor: Cursor): string {
  const parts = cursor.kind === 'priority' ? ['p', cursor.priority, cursor.seq] : ['s', cursor.seq];
  return Buffer.from(JSON.stringify(parts)).toString('base64url');
}

export function decodeCursor(raw: string): Cursor {
  try {
    const parts = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown[];
    const [kind, a, b] = parts;
    if (kind === 'p' && Number.isInteger(a) && Number.isInteger(b))
      return { kind: 'priority', priority: a as number, seq: b as number };
    if (kind === 's' && Number.isInteger(a)) return { kind: 'seq', seq: a as number };
  } catch {
    // fall through
  }
  throw new ServiceError('schema-invalid', 'cursor is not a cursor this service returned', {
    field: 'cursor',
  });
}
