import { EVENT_NAMES, Redactor, type EventCategory, type EventInput } from '@svc/contracts';
import { AssistantMessages, ASSISTANT_LIMITS, type AssistantLimits } from './assistant-messages.js';
import { summarize } from './bounded.js';
import { classifyAgentError, type AgentFailure } from './classify.js';
import {
  asRecord,
  N,
  num,
  readItem,
  readTurnError,
  str,
  type ThreadItem,
  type TurnError,
} from './protocol.js';
import { scrubDeep } from './redact.js';
import {
  approvalData,
  commandOutputData,
  diffData,
  isToolItem,
  toolCallData,
} from './tool-events.js';

/**
 * Agent notifications of one turn mapped to the manager's event inputs (without `key`, which
 * the caller assigns). Cheap and bounded by construction: deltas are coalesced, outputs cut,
 * diffs and token usage emitted once at the end of the turn, every string scrubbed.
 */

export type AgentEvent = Omit<EventInput, 'key' | 'data' | 'name'> & {
  category: EventCategory;
  name: string;
  data: Record<string, unknown>;
  observedAt: string;
};

export const MESSAGE_CHARS = 2000;

export interface EventMapperOptions {
  redactor?: Redactor;
  commandId?: string;
  now?: () => number;
  assistant?: AssistantLimits;
}

export class TurnEventMapper {
  /** A compaction item is running (errors then may mean "compaction unsupported"). */
  compacting = false;
  /** The last error the agent reported in this turn. */
  lastError: { error: TurnError; willRetry: boolean } | null = null;
  #turnId: string | null = null;
  #threadId: string;
  #assistant: AssistantMessages;
  #redactor: Redactor;
  #now: () => number;
  #commandId: string | undefined;
  #openTools = new Map<string, ThreadItem>();
  #diff: string | null = null;
  #usage: Record<string, unknown> | null = null;

  constructor(threadId: string, options: EventMapperOptions = {}) {
    this.#threadId = threadId;
    this.#redactor = options.redactor ?? new Redactor();
    this.#now = options.now ?? Date.now;
    this.#commandId = options.commandId;
    this.#assistant = new AssistantMessages(
      () => this.#turnId,
      options.assistant ?? ASSISTANT_LIMITS,
    );
  }

  set turnId(id: string) {
    this.#turnId = id;
  }

  get lastMessage(): { itemId: string; text: string } | null {
    return this.#assistant.lastMessage;
  }

  /** One notification of this turn; returns the events it produced (often none). */
  onNotification(method: string, params: unknown): AgentEvent[] {
    switch (method) {
      case N.turnStarted:
        return [
          this.event('backend_status', EVENT_NAMES.turnStarted, {
            threadId: this.#threadId,
            turnId: this.#turnId,
          }),
        ];
      case N.agentMessageDelta: {
        const p = asRecord(params);
        const itemId = str(p?.['itemId']);
        const delta = str(p?.['delta']);
        if (!itemId || delta === null) return [];
        const progress = this.#assistant.delta(itemId, delta, this.#now());
        return progress
          ? [this.event('assistant_message', 'agent.message.progress', progress)]
          : [];
      }
      case N.itemStarted:
        return this.#itemStarted(readItem(params));
      case N.itemCompleted:
        return this.#itemCompleted(readItem(params));
      case N.turnDiffUpdated:
        this.#diff = str(asRecord(params)?.['diff']);
        return [];
      case N.tokenUsageUpdated:
        this.#usage = usageSummary(asRecord(params)?.['tokenUsage']);
        return [];
      case N.error:
        return this.#error(params);
      default:
        return [];
    }
  }

  /** A server request the runner declined (approvals) or refused (anything else). */
  onServerRequest(method: string, params: unknown, declined: boolean): AgentEvent[] {
    if (declined)
      return [this.event('tool_call', 'approval.declined', approvalData(method, params))];
    return [
      this.event('backend_status', 'agent.request-refused', { method, turnId: this.#turnId }),
    ];
  }

  /**
   * The turn is over (or abandoned): the held assistant message (final only when the agent
   * said `completed`), tools left open, the last diff and the token usage.
   */
  finish(summary: {
    completed: boolean;
    agentStatus: string | null;
    failure: AgentFailure | null;
    durationMs: number | null;
  }): AgentEvent[] {
    const events = this.#assistant
      .finish(summary.completed)
      .map((data) => this.event('assistant_message', 'agent.message', data));
    for (const item of this.#openTools.values())
      events.push(
        this.event(
          'tool_call',
          'item.interrupted',
          toolCallData(item, 'turn/completed', this.#turnId, 'interrupted'),
        ),
      );
    this.#openTools.clear();
    if (this.#diff)
      events.push(this.event('diff', 'turn.diff', diffData(this.#diff, this.#turnId)));
    if (this.#usage) {
      events.push(
        this.event('backend_status', 'token.usage', { turnId: this.#turnId, ...this.#usage }),
      );
    }
    events.push(
      this.event('backend_status', 'turn.completed', {
        threadId: this.#threadId,
        turnId: this.#turnId,
        agentStatus: summary.agentStatus,
        durationMs: summary.durationMs,
        ...(summary.failure && {
          failureKind: summary.failure.failureKind,
          reason: summary.failure.reason,
        }),
      }),
    );
    return events;
  }

  /** Build an event: scrubbed, stamped, tagged with the command when known. */
  event(category: EventCategory, name: string, data: Record<string, unknown>): AgentEvent {
    return {
      category,
      name,
      data: scrubDeep(data, this.#redactor),
      observedAt: new Date(this.#now()).toISOString(),
      ...(this.#commandId !== undefined && { commandId: this.#commandId }),
    };
  }

  /** An error event for a failure (agent-reported or observed here). */
  failureEvent(
    name: string,
    failure: AgentFailure,
    extra: Record<string, unknown> = {},
  ): AgentEvent {
    return this.event('error', name, {
      turnId: this.#turnId,
      failureKind: failure.failureKind,
      classification: failure.classification,
      retryable: failure.retryable,
      reason: failure.reason,
      message: summarize(failure.message, MESSAGE_CHARS),
      httpStatus: failure.httpStatus,
      codexErrorInfo: boundedJson(failure.codexErrorInfo),
      ...extra,
    });
  }

  #itemStarted(item: ThreadItem | null): AgentEvent[] {
    if (!item) return [];
    const events = this.#assistant
      .flushHeld()
      .map((data) => this.event('assistant_message', 'agent.message', data));
    if (item.type === 'contextCompaction') {
      this.compacting = true;
      events.push(
        this.event('backend_status', 'context.compaction', {
          turnId: this.#turnId,
          itemId: item.id,
          status: 'started',
        }),
      );
    } else if (isToolItem(item)) {
      this.#openTools.set(item.id, item);
      events.push(
        this.event(
          'tool_call',
          'item.started',
          toolCallData(item, N.itemStarted, this.#turnId, 'started'),
        ),
      );
    }
    return events;
  }

  #itemCompleted(item: ThreadItem | null): AgentEvent[] {
    if (!item) return [];
    if (item.type === 'agentMessage') {
      return this.#assistant
        .completed(item.id, str(item.fields['text']) ?? '', str(item.fields['phase']))
        .map((data) => this.event('assistant_message', 'agent.message', data));
    }
    const events = this.#assistant
      .flushHeld()
      .map((data) => this.event('assistant_message', 'agent.message', data));
    if (item.type === 'contextCompaction') {
      this.compacting = false;
      events.push(
        this.event('backend_status', 'context.compaction', {
          turnId: this.#turnId,
          itemId: item.id,
          status: 'completed',
        }),
      );
    } else if (isToolItem(item)) {
      this.#openTools.delete(item.id);
      events.push(
        this.event(
          'tool_call',
          'item.completed',
          toolCallData(item, N.itemCompleted, this.#turnId, 'completed'),
        ),
      );
      const output = commandOutputData(item, this.#turnId);
      if (output) events.push(this.event('command_output', 'command.output', output));
    }
    return events;
  }

  #error(params: unknown): AgentEvent[] {
    const p = asRecord(params);
    const error = readTurnError(p?.['error']);
    if (!error) return [];
    const willRetry = p?.['willRetry'] === true;
    this.lastError = { error, willRetry };
    const failure = classifyAgentError(error, { compacting: this.compacting });
    const details = error.additionalDetails
      ? summarize(error.additionalDetails, MESSAGE_CHARS)
      : null;
    return [
      this.failureEvent('agent.error', failure, {
        willRetry,
        ...(details !== null && { additionalDetails: details }),
      }),
    ];
  }
}

function usageSummary(value: unknown): Record<string, unknown> | null {
  const usage = asRecord(value);
  if (!usage) return null;
  const pick = (breakdown: unknown) => {
    const b = asRecord(breakdown);
    return {
      totalTokens: num(b?.['totalTokens']),
      inputTokens: num(b?.['inputTokens']),
      cachedInputTokens: num(b?.['cachedInputTokens']),
      outputTokens: num(b?.['outputTokens']),
      reasoningOutputTokens: num(b?.['reasoningOutputTokens']),
    };
  };
  return {
    total: pick(usage['total']),
    last: pick(usage['last']),
    modelContextWindow: num(usage['modelContextWindow']),
  };
}

/** The agent's error tag is tiny; anything odd is cut rather than trusted. */
function boundedJson(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  const text = JSON.stringify(value);
  return text.length <= 500 ? value : summarize(text, 500);
}
