import type { Attempt, QueuePlan, Supervisor } from '@svc/contracts';
import { clip } from '../output.js';

export const seconds = (ms: number | null) =>
  ms === null ? '-' : ms >= 10_000 ? `${Math.round(ms / 1000)}s` : `${(ms / 1000).toFixed(1)}s`;

/** The compact supervisor: phase, last activity (source seq and event id), budget, recovery. */
export function supervisorLine(s: Supervisor | null | undefined): string {
  if (!s) return 'supervisor: none yet';
  const activity =
    s.lastActivitySeq !== null
      ? `last activity #${s.lastActivitySeq} (${s.lastActivityEventId ?? '-'})`
      : 'no activity yet';
  const budget = `budget ${s.timeoutBudget.state} ${seconds(s.timeoutBudget.remainingMs)} of ${seconds(s.timeoutBudget.timeoutMs)} left`;
  return `supervisor: phase ${s.phase} · ${activity} · ${budget} · recovery ${s.recoveryAction}`;
}

export function attemptLines(a: Attempt): string[] {
  const lines = [
    `attempt ${a.attemptId} #${a.retryIndex} ${a.state}` +
      `  run ${a.runId ?? '-'}  command ${a.commandId ?? '-'}` +
      `  job ${a.runner.jobName ?? '-'} (${a.runner.phase ?? '-'})`,
  ];
  if (a.sessionId)
    lines.push(
      `session ${a.sessionId} (${a.sessionOrigin ?? '-'}, thread ${a.thread ?? '-'})  ${a.sessionPath ?? ''}`,
    );
  if (a.terminalStatus)
    lines.push(
      `outcome ${a.terminalStatus}${a.failureKind ? ` ${a.failureKind}` : ''}` +
        `${a.message ? `: ${clip(a.message, 120)}` : ''}  duration ${seconds(a.durationMs)}` +
        `  events ${a.eventCount ?? '-'}`,
    );
  lines.push(supervisorLine(a.supervisor));
  return lines;
}

export function planLines(plan: QueuePlan): string[] {
  return [
    `dry run: ${plan.action}${plan.taskId ? ` ${plan.taskId}` : ''} (mutation=false, nothing written)`,
    ...JSON.stringify(plan.plan, null, 2).split('\n'),
  ];
}

export function indent(lines: string[], by = '  '): string[] {
  return lines.map((l) => `${by}${l}`);
}
