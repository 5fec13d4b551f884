import type { Liveness, ResultEnvelope, Run, RunPage } from '@svc/contracts';
import { seconds } from './common.js';

/** How the run's latest turn stands, in a few words: `last turn failed provider-auth-failed`. */
export function lastTurn(r: Run): string {
  const c = r.lastCommand;
  if (!c) return 'no turn yet';
  return `last ${c.type} ${c.state}${c.failureKind && c.failureKind !== c.state ? ` ${c.failureKind}` : ''}`;
}

export function runHead(r: Run): string {
  return (
    `${r.runId}  ${r.state.padEnd(9)}  ${r.activity.padEnd(14)}  ${lastTurn(r)}  ${r.backendProfile}  ${r.tenantId}/${r.projectId}` +
    `  seq ${r.lastSeq}  created ${r.createdAt}${r.sessionRef ? `  session ${r.sessionRef.sessionId}` : ''}`
  );
}

export function runPageLines(page: RunPage, nextCommand: (cursor: string) => string): string[] {
  const lines = [`${page.runs.length} run(s), newest first`];
  for (const r of page.runs) lines.push(runHead(r));
  if (page.nextCursor) lines.push(`more: ${nextCommand(page.nextCursor)}`);
  return lines;
}

export function runLines(r: Run): string[] {
  const lines = [
    `run ${r.runId}  ${r.state}${r.cancelRequested && r.state !== 'cancelled' ? ' (cancel requested)' : ''}  activity ${r.activity}`,
    `  ${r.tenantId}/${r.projectId}  profile ${r.backendProfile}  provider ${r.providerId}` +
      `${r.sessionRef ? `  session ${r.sessionRef.sessionId}` : ''}`,
    `  created ${r.createdAt}  claimed ${r.claimedAt ?? '-'}  terminal ${r.terminalAt ?? '-'}  last seq ${r.lastSeq}`,
  ];
  if (r.failureKind || r.message) lines.push(`  ${r.failureKind ?? 'message'}: ${r.message ?? ''}`);
  const c = r.lastCommand;
  lines.push(
    c
      ? `  ${lastTurn(r)}: ${c.commandId}${c.endedAt ? `  ended ${c.endedAt}` : ''}${c.message ? `  ${c.message}` : ''}`
      : '  no turn yet',
  );
  return lines;
}

export function livenessLines(l: Liveness): string[] {
  const lease = l.lease.owner
    ? `lease ${l.lease.owner}${l.lease.expired ? ' (expired)' : ''}, heartbeat ${l.lease.heartbeatAgeMs === null ? 'never' : `${seconds(l.lease.heartbeatAgeMs)} ago`}`
    : 'lease not held';
  const b = l.timeoutBudget;
  return [
    `  liveness ${l.phase}${l.active ? ' (active)' : ''}  last event ${l.lastEventAgeMs === null ? 'none' : `#${l.lastSeq} ${seconds(l.lastEventAgeMs)} ago`}  ${lease}`,
    `  idle budget ${b.state}: ${seconds(b.remainingMs)} of ${seconds(b.timeoutMs)} left  next: ${l.recoveryActions[0]?.action ?? '-'}`,
  ];
}

export function commandLine(r: ResultEnvelope): string {
  const failure = r.failureKind ? ` ${r.failureKind}` : '';
  const reply = r.reply ? `  reply: ${r.reply}` : '';
  return `  command ${r.commandId ?? '-'}  ${r.terminalStatus ?? r.status}${failure}${reply}`;
}
