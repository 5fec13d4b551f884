import type { EventEnvelope, SendResponse, Session, SessionPage } from '@svc/contracts';
import { stateTone, type Tone } from '../colour.js';
import { supervisorLine } from './common.js';

export function sessionHead(s: Session): string {
  const reader = s.reader ? `  ${s.reader.unread ? 'unread' : 'read'} by ${s.reader.readerId}` : '';
  return (
    `${s.sessionId}  ${s.executionState.padEnd(8)}  ${s.backendProfile}  ` +
    `last ${s.lastOutcome ?? '-'}  v${s.version}  storage ${s.storage.storageKind}${reader}`
  );
}

export function psLines(page: SessionPage): string[] {
  const lines = [`${page.sessions.length} session(s), state ${page.state}`];
  for (const s of page.sessions) lines.push(sessionHead(s), `  next: sessions show ${s.sessionId}`);
  if (page.nextCursor) lines.push(`more: --cursor ${page.nextCursor}`);
  return lines;
}

export function sessionLines(s: Session): string[] {
  const lines = [
    `session ${s.sessionId}  ${s.sessionPath}`,
    `  state ${s.executionState}  profile ${s.backendProfile}  thread ${s.threadId ?? 'none'}  version ${s.version}`,
    `  active run ${s.activeRunId ?? '-'} command ${s.activeCommandId ?? '-'}` +
      `  last run ${s.lastRunId ?? '-'} outcome ${s.lastOutcome ?? '-'}`,
    `  storage ${s.storage.storageKind} ${s.storage.pvcName} (${s.storage.pvcPhase ?? '-'}), expires ${s.storage.expires_at}`,
  ];
  if (s.reader)
    lines.push(
      `  ${s.reader.unread ? 'unread' : 'read'} by ${s.reader.readerId} (read version ${s.reader.readVersion ?? '-'})`,
    );
  lines.push(`  ${supervisorLine(s.supervisor)}`);
  if (s.supervisor) lines.push(`  next: ${s.supervisor.next}`);
  return lines;
}

export function sendLines(r: SendResponse): string[] {
  return [
    `${r.decision === 'steer' ? 'steered' : 'sent'} to ${r.sessionId}: ${r.internalCommandType}` +
      ` (reason ${r.activeBefore.reason})`,
    `  run ${r.run?.runId ?? '-'}  command ${r.command?.commandId ?? '-'}  runner job ${r.runnerJob?.jobName ?? '-'}`,
    `  next: sessions output ${r.sessionId} --follow`,
  ];
}

const str = (v: unknown) =>
  typeof v === 'string' ? v : v === undefined || v === null ? '' : JSON.stringify(v);

/** One event as one bounded line: what a person wants to read, not the raw envelope. */
export function eventLine(e: EventEnvelope): string {
  const d = e.data;
  let text: string;
  switch (e.category) {
    case 'assistant_message':
      text = str(d['text']);
      break;
    case 'command_output':
      text = str(d['text'] ?? d['stdout'] ?? d['summary']);
      break;
    case 'error':
      text = `${str(d['failureKind'])}: ${str(d['message'])}`;
      break;
    case 'terminal_status':
      text = `${str(d['status'])}${d['failureKind'] ? ` ${str(d['failureKind'])}` : ''}${d['message'] ? `: ${str(d['message'])}` : ''}`;
      break;
    case 'tool_call':
      text = `${str(d['toolName'] ?? d['tool'] ?? d['type'])} ${str(d['status'])}`;
      break;
    default:
      text = str(d);
  }
  return `#${e.seq} ${e.category}${e.name ? ` ${e.name}` : ''}  ${text}`;
}

/** The tone of an event line on a terminal: errors stand out, a terminal status by its status. */
export function eventTone(e: EventEnvelope): Tone | undefined {
  if (e.category === 'error') return 'bad';
  if (e.category === 'terminal_status') return stateTone(str(e.data['status']));
  return undefined;
}
