/**
 * The subset of the `codex app-server` v2 protocol this layer uses, written by hand from the
 * types the pinned binary generates (`codex app-server generate-ts`). Everything that arrives
 * is `unknown` until one of the readers below has checked it.
 */

export type ApprovalPolicy = 'never' | 'on-request' | 'on-failure';
export type SandboxMode = 'read-only' | 'workspace-write' | 'danger-full-access';
export type TurnStatus = 'completed' | 'interrupted' | 'failed' | 'inProgress';

export interface ClientInfo {
  name: string;
  title: string;
  version: string;
}

export interface InitializeResult {
  userAgent: string;
  codexHome: string;
  platformOs: string;
}

export interface ThreadInfo {
  id: string;
  /** The rollout file (unstable upstream; informational). */
  path: string | null;
  model: string | null;
  modelProvider: string | null;
}

export interface TurnError {
  message: string;
  codexErrorInfo: unknown;
  additionalDetails: string | null;
}

export interface TurnInfo {
  id: string;
  status: TurnStatus;
  error: TurnError | null;
  durationMs: number | null;
}

/** A thread item: `type` and `id` always; the rest read per type. */
export interface ThreadItem {
  type: string;
  id: string;
  fields: Record<string, unknown>;
}

export type TextInput = { type: 'text'; text: string; text_elements: [] };

export function textInput(text: string): TextInput[] {
  return [{ type: 'text', text, text_elements: [] }];
}

/** Notification methods this layer reads. */
export const N = {
  threadStarted: 'thread/started',
  turnStarted: 'turn/started',
  turnCompleted: 'turn/completed',
  itemStarted: 'item/started',
  itemCompleted: 'item/completed',
  agentMessageDelta: 'item/agentMessage/delta',
  commandOutputDelta: 'item/commandExecution/outputDelta',
  turnDiffUpdated: 'turn/diff/updated',
  tokenUsageUpdated: 'thread/tokenUsage/updated',
  error: 'error',
} as const;

/** Server-to-client requests answered by this layer. */
export const APPROVAL_REQUESTS = {
  'item/commandExecution/requestApproval': { decision: 'decline' },
  'item/fileChange/requestApproval': { decision: 'decline' },
  // Legacy v1 names, still declared by the server.
  execCommandApproval: {
    decision: { denied: { rejection: 'approvals are declined by this runner' } },
  },
  applyPatchApproval: {
    decision: { denied: { rejection: 'approvals are declined by this runner' } },
  },
} as const satisfies Record<string, unknown>;

export function asRecord(value: unknown): Record<string, unknown> | null {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}

export function str(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}

export function num(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

export function readInitialize(value: unknown): InitializeResult | null {
  const r = asRecord(value);
  if (!r) return null;
  return {
    userAgent: str(r['userAgent']) ?? '',
    codexHome: str(r['codexHome']) ?? '',
    platformOs: str(r['platformOs']) ?? '',
  };
}

export function readThread(value: unknown): ThreadInfo | null {
  const thread = asRecord(asRecord(value)?.['thread']);
  const id = str(thread?.['id']);
  if (!thread || !id) return null;
  return {
    id,
    path: str(thread['path']),
    model: str(thread['model']),
    modelProvider: str(thread['modelProvider']),
  };
}

export function readTurnError(value: unknown): TurnError | null {
  const r = asRecord(value);
  if (!r) return null;
  return {
    message: str(r['message']) ?? 'unknown agent error',
    codexErrorInfo: r['codexErrorInfo'] ?? null,
    additionalDetails: str(r['additionalDetails']),
  };
}

const TURN_STATUSES: readonly TurnStatus[] = ['completed', 'interrupted', 'failed', 'inProgress'];

/** `{turn: {...}}` (turn/start result, turn/started, turn/completed params). */
export function readTurn(value: unknown): TurnInfo | null {
  const turn = asRecord(asRecord(value)?.['turn']);
  const id = str(turn?.['id']);
  if (!turn || !id) return null;
  const status = TURN_STATUSES.find((s) => s === turn['status']) ?? 'failed';
  return {
    id,
    status,
    error: readTurnError(turn['error']),
    durationMs: num(turn['durationMs']),
  };
}

export function readItem(value: unknown): ThreadItem | null {
  const item = asRecord(asRecord(value)?.['item']);
  const type = str(item?.['type']);
  const id = str(item?.['id']);
  if (!item || !type || !id) return null;
  return { type, id, fields: item };
}

/** The thread a notification belongs to, when it says. */
export function threadIdOf(params: unknown): string | null {
  const r = asRecord(params);
  return str(r?.['threadId']) ?? str(asRecord(r?.['thread'])?.['id']);
}

/** The turn a notification belongs to, when it says. */
export function turnIdOf(params: unknown): string | null {
  const r = asRecord(params);
  return str(r?.['turnId']) ?? str(asRecord(r?.['turn'])?.['id']);
}
