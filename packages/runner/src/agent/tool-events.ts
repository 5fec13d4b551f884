import { headBytes, headTailBytes, summarize } from './bounded.js';
import { asRecord, num, str, type ThreadItem } from './protocol.js';

/**
 * Tool items of a turn as `tool_call` / `command_output` event data: small, bounded, and
 * shaped for the result envelope's tool call summary (itemId, toolName, type, method,
 * status, exitCode, command).
 */

export const TOOL_LIMITS = {
  commandChars: 200,
  outputBytes: 16 * 1024,
  diffBytes: 60 * 1024,
};

const TOOL_ITEM_TYPES = new Set([
  'commandExecution',
  'fileChange',
  'mcpToolCall',
  'dynamicToolCall',
  'collabAgentToolCall',
  'webSearch',
  'imageView',
  'imageGeneration',
]);

export function isToolItem(item: ThreadItem): boolean {
  return TOOL_ITEM_TYPES.has(item.type);
}

export type ToolStatus = 'started' | 'completed' | 'failed' | 'declined' | 'interrupted';

function toolNameOf(item: ThreadItem): string {
  const f = item.fields;
  switch (item.type) {
    case 'commandExecution':
      return 'shell';
    case 'fileChange':
      return 'apply_patch';
    case 'mcpToolCall':
      return `${str(f['server']) ?? 'mcp'}/${str(f['tool']) ?? 'unknown'}`;
    case 'webSearch':
      return 'web_search';
    case 'imageView':
      return 'view_image';
    case 'imageGeneration':
      return 'image_generation';
    default:
      return str(f['tool']) ?? item.type;
  }
}

/** What the tool was asked to do, in one bounded line. */
function commandOf(item: ThreadItem): string | null {
  const f = item.fields;
  let raw: string | null = null;
  switch (item.type) {
    case 'commandExecution':
      raw = str(f['command']);
      break;
    case 'fileChange': {
      const changes = Array.isArray(f['changes']) ? (f['changes'] as unknown[]) : [];
      raw = changes
        .map((c) => str(asRecord(c)?.['path']))
        .filter((p): p is string => p !== null)
        .join(' ');
      break;
    }
    case 'webSearch':
      raw = str(f['query']);
      break;
    case 'imageView':
      raw = str(f['path']);
      break;
    default:
      raw = f['arguments'] === undefined ? null : JSON.stringify(f['arguments']);
  }
  return raw === null ? null : summarize(raw, TOOL_LIMITS.commandChars);
}

function completedStatus(item: ThreadItem): ToolStatus {
  const status = str(item.fields['status']);
  if (status === 'failed' || status === 'declined') return status;
  if (item.fields['success'] === false) return 'failed';
  return 'completed';
}

export function toolCallData(
  item: ThreadItem,
  method: string,
  turnId: string | null,
  phase: 'started' | 'completed' | 'interrupted',
): Record<string, unknown> {
  const status: ToolStatus =
    phase === 'completed' ? completedStatus(item) : phase === 'started' ? 'started' : 'interrupted';
  const command = commandOf(item);
  const exitCode = num(item.fields['exitCode']);
  const durationMs = num(item.fields['durationMs']);
  return {
    itemId: item.id,
    turnId,
    toolName: toolNameOf(item),
    type: item.type,
    method,
    status,
    ...(command !== null && { command }),
    ...(exitCode !== null && { exitCode }),
    ...(durationMs !== null && { durationMs }),
  };
}

/** Bounded output of a finished command, or null when it produced none. */
export function commandOutputData(
  item: ThreadItem,
  turnId: string | null,
): Record<string, unknown> | null {
  if (item.type !== 'commandExecution') return null;
  const output = str(item.fields['aggregatedOutput']);
  if (output === null) return null;
  const bounded = headTailBytes(output, TOOL_LIMITS.outputBytes);
  const exitCode = num(item.fields['exitCode']);
  return {
    itemId: item.id,
    turnId,
    stream: 'combined',
    text: bounded.text,
    originalBytes: bounded.originalBytes,
    keptBytes: bounded.keptBytes,
    outputTruncated: bounded.truncated,
    ...(exitCode !== null && { exitCode }),
    final: true,
  };
}

export function diffData(diff: string, turnId: string | null): Record<string, unknown> {
  const bounded = headBytes(diff, TOOL_LIMITS.diffBytes);
  return {
    turnId,
    diff: bounded.text,
    originalBytes: bounded.originalBytes,
    keptBytes: bounded.keptBytes,
    outputTruncated: bounded.truncated,
  };
}

/** An approval the runner declined, with what was asked. */
export function approvalData(method: string, params: unknown): Record<string, unknown> {
  const p = asRecord(params);
  const command = str(p?.['command']);
  const reason = str(p?.['reason']);
  return {
    itemId: str(p?.['itemId']),
    turnId: str(p?.['turnId']),
    toolName:
      method.includes('fileChange') || method === 'applyPatchApproval' ? 'apply_patch' : 'shell',
    type: 'approval',
    method,
    status: 'declined',
    ...(command !== null && { command: summarize(command, TOOL_LIMITS.commandChars) }),
    ...(reason !== null && { reason: summarize(reason, TOOL_LIMITS.commandChars) }),
  };
}
