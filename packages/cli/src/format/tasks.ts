import type {
  DispatchResponse,
  ReadCursor,
  Task,
  TaskPage,
  TaskSummary,
  TaskWaiting,
} from '@svc/contracts';
import { clip } from '../output.js';
import { attemptLines, indent } from './common.js';
import { judgeRunLines } from './scheduler.js';

const STATE_WIDTH = 10;
const JUDGE_RUNS_SHOWN = 3;

/**
 * Why a task waits, in one line: the reason, until when, the limit and its use:
 * `waiting: capacity (tenant tenant-a 3/3): tenant tenant-a runs 3 of its 3 attempts at once; …`.
 */
export function waitingLine(w: TaskWaiting): string {
  const limit = w.limit
    ? ` (${w.limit.scope}${w.limit.key ? ` ${w.limit.key}` : ''} ${w.limit.used}/${w.limit.limit})`
    : '';
  const until = w.until ? ` until ${w.until}` : '';
  return `waiting: ${w.reason}${limit}${until}: ${w.message}`;
}

const keyLine = (t: TaskSummary) =>
  `concurrency key ${clip(t.concurrencyKey ?? '', 80)} (at most ${t.concurrencyLimit ?? 1} at once)`;

/** One task in a listing: a header line, then its session, supervisor and next command. */
export function summaryLines(t: TaskSummary): string[] {
  const head =
    `${t.taskId}  ${t.state.padEnd(STATE_WIDTH)} p${t.priority}  ` +
    `${t.counters.attempts}/${t.maxAttempts} attempts  ${t.queue}/${t.lane}  ${clip(t.title, 60)}`;
  const lines = [head];
  const a = t.latestAttempt;
  if (a) {
    lines.push(
      ...indent([
        `${a.attemptId} #${a.retryIndex} ${a.state}${a.failureKind ? ` ${a.failureKind}` : ''}` +
          `  session ${t.sessionId ?? '-'} ${t.sessionPath ?? ''}`,
        attemptLines(a).at(-1)!,
      ]),
    );
  }
  if (t.concurrencyKey) lines.push(`  ${keyLine(t)}`);
  if (t.reader) lines.push(`  ${t.reader.unread ? 'unread' : 'read'} by ${t.reader.readerId}`);
  if (t.waiting) lines.push(`  ${waitingLine(t.waiting)}`);
  if (t.next) lines.push(`  next: ${t.next}`);
  return lines;
}

export function pageLines(page: TaskPage, query: string): string[] {
  const lines = [
    `${page.tasks.length} task(s), ${page.order} order, queue changeSeq ${page.changeSeq}`,
  ];
  for (const t of page.tasks) lines.push(...summaryLines(t));
  if (page.nextCursor) lines.push(`more: queue list${query} --cursor ${page.nextCursor}`);
  if (page.nextUpdatedAfter !== null)
    lines.push(`watermark: updatedAfter=${page.nextUpdatedAfter}`);
  return lines;
}

/** Payload is described, never printed, in the bounded view. */
function payloadLine(payload: Record<string, unknown>): string {
  const prompt = typeof payload['prompt'] === 'string' ? payload['prompt'] : '';
  const bytes = Buffer.byteLength(JSON.stringify(payload));
  return `payload: ${Object.keys(payload).length} field(s), ${bytes} bytes; prompt "${clip(prompt, 60)}"`;
}

export function taskLines(t: Task): string[] {
  const lines = [
    `task ${t.taskId}  ${clip(t.title, 80)}`,
    `  state ${t.state}  priority ${t.priority}  queue ${t.queue}/${t.lane}  profile ${t.backendProfile}`,
    `  tenant ${t.tenantId}  project ${t.projectId}  workspace ${typeof t.workspaceRef['kind'] === 'string' ? t.workspaceRef['kind'] : '-'}` +
      `  bundle ${t.resourceBundleRef ? 'yes' : 'none'}  sessionRef ${t.sessionRef?.sessionId ?? 'none'}`,
    `  attempts ${t.counters.attempts}/${t.maxAttempts} (failed ${t.counters.failed}, blocked ${t.counters.blocked})` +
      `  version ${t.version}  changeSeq ${t.changeSeq}  updated ${t.updatedAt}`,
    `  ${payloadLine(t.payload)}`,
  ];
  if (t.concurrencyKey) lines.push(`  ${keyLine(t)}`);
  if (t.summary) lines.push(`  summary: ${clip(t.summary, 150)}`);
  if (t.waiting) lines.push(`  ${waitingLine(t.waiting)}`);
  const retryAt = t.scheduling.runAfter;
  if (retryAt && t.state === 'queued' && t.waiting?.until !== retryAt)
    lines.push(`  runAfter ${retryAt}`);
  if (t.cancelReason) lines.push(`  cancelled: ${clip(t.cancelReason, 150)}`);
  if (t.schedule)
    lines.push(
      `  from schedule ${t.schedule.scheduleId}, tick ${t.schedule.tick} (queue schedules show ${t.schedule.scheduleId})`,
    );
  if (t.references.length > 0)
    lines.push(`  references: ${t.references.map((r) => `${r.kind} ${r.ref}`).join('; ')}`);
  if (t.judgeRuns.length > 0) {
    // The latest few keep the view bounded; `queue judge-runs` lists them all.
    const shown = t.judgeRuns.slice(-JUDGE_RUNS_SHOWN);
    lines.push(`  judge runs: ${t.judgeRuns.length}`);
    for (const j of shown) lines.push(...indent(judgeRunLines(j), '    '));
    if (t.judgeRuns.length > shown.length)
      lines.push(
        `    (${t.judgeRuns.length - shown.length} earlier: queue judge-runs ${t.taskId})`,
      );
  }
  lines.push(`  sessionPath: ${t.sessionPath ?? 'none yet'}`);
  if (t.latestAttempt) lines.push(...indent(attemptLines(t.latestAttempt)));
  if (t.next) lines.push(`  next: ${t.next}`);
  return lines;
}

/** `--full`: the inputs, whole (a summary row may leave any of them out). */
export function expandedBlocks(
  t: Partial<Pick<Task, 'payload' | 'workspaceRef' | 'resourceBundleRef' | 'metadata'>>,
): string[] {
  return [
    `payload:\n${JSON.stringify(t.payload ?? {}, null, 2)}`,
    `workspaceRef:\n${JSON.stringify(t.workspaceRef ?? {}, null, 2)}`,
    `resourceBundleRef:\n${JSON.stringify(t.resourceBundleRef ?? null, null, 2)}`,
    `metadata:\n${JSON.stringify(t.metadata ?? {}, null, 2)}`,
  ];
}

/** The bounded JSON form of a task: inputs summarized, not copied. */
export function boundedTask(t: Task): Record<string, unknown> {
  const { payload, resourceBundleRef, metadata, executionPolicy: _policy, ...rest } = t;
  return {
    ...rest,
    payload: {
      fields: Object.keys(payload),
      bytes: Buffer.byteLength(JSON.stringify(payload)),
    },
    resourceBundleRef: resourceBundleRef ? { present: true } : null,
    metadata: { fields: Object.keys(metadata) },
  };
}

export function dispatchLines(d: DispatchResponse): string[] {
  return [
    `${d.created ? 'dispatched' : 'already dispatched'} ${d.taskId}: attempt ${d.attempt.attemptId} #${d.attempt.retryIndex}`,
    `  run ${d.run?.runId ?? '-'}  command ${d.command?.commandId ?? '-'}  runner job ${d.runnerJob?.jobName ?? '-'} (${d.runnerJob?.phase ?? '-'})`,
    `  session ${d.session.sessionId} (${d.session.origin}, thread ${d.session.thread ?? '-'})  ${d.sessionPath}`,
    `  next: sessions output ${d.session.sessionId} --follow`,
  ];
}

export function readLines(c: ReadCursor): string[] {
  return [
    `read ${c.taskId} as ${c.readerId} (${c.readerKind}): version ${c.readVersion}, changeSeq ${c.readChangeSeq}`,
  ];
}
