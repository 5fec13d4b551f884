import { randomBytes } from 'node:crypto';

/**
 * Wire shapes of the OpenAI Responses API as the coding agent reads them: Server-Sent Events
 * for `POST /v1/responses` (`event: <type>` + `data: <json>`), and the JSON error bodies the
 * real API returns for failed HTTP requests.
 */

export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(8).toString('hex')}`;
}

export function sseFrame(event: Record<string, unknown> & { type: string }): string {
  return `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

export function created(responseId: string): Record<string, unknown> & { type: string } {
  return { type: 'response.created', response: { id: responseId, status: 'in_progress' } };
}

export function completed(
  responseId: string,
  usage: Usage,
): Record<string, unknown> & { type: string } {
  return {
    type: 'response.completed',
    response: {
      id: responseId,
      status: 'completed',
      usage: {
        input_tokens: usage.inputTokens,
        input_tokens_details: { cached_tokens: 0 },
        output_tokens: usage.outputTokens,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: usage.inputTokens + usage.outputTokens,
      },
    },
  };
}

export function messageItem(id: string, text: string): Record<string, unknown> {
  return {
    type: 'message',
    id,
    role: 'assistant',
    status: 'completed',
    content: [{ type: 'output_text', text, annotations: [] }],
  };
}

/** The frames of one assistant message, optionally streamed as several text deltas first. */
export function messageFrames(text: string, deltas: readonly string[]): string[] {
  const id = newId('msg');
  const frames: string[] = [];
  if (deltas.length > 0) {
    frames.push(
      sseFrame({
        type: 'response.output_item.added',
        output_index: 0,
        item: { type: 'message', id, role: 'assistant', status: 'in_progress', content: [] },
      }),
    );
    for (const delta of deltas)
      frames.push(
        sseFrame({
          type: 'response.output_text.delta',
          item_id: id,
          output_index: 0,
          content_index: 0,
          delta,
        }),
      );
  }
  frames.push(
    sseFrame({ type: 'response.output_item.done', output_index: 0, item: messageItem(id, text) }),
  );
  return frames;
}

export function functionCallFrame(name: string, args: unknown, callId: string): string {
  return sseFrame({
    type: 'response.output_item.done',
    output_index: 0,
    item: {
      type: 'function_call',
      id: newId('fc'),
      call_id: callId,
      name,
      arguments: JSON.stringify(args),
      status: 'completed',
    },
  });
}

export function failedFrame(
  responseId: string,
  code: string,
  message: string,
): Record<string, unknown> & { type: string } {
  return {
    type: 'response.failed',
    response: { id: responseId, status: 'failed', error: { code, message } },
  };
}

/** Split `text` into `count` roughly equal deltas (at least one character each). */
export function splitDeltas(text: string, count: number): string[] {
  const chars = [...text];
  const n = Math.max(1, Math.min(count, chars.length));
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    out.push(
      chars
        .slice(Math.floor((i * chars.length) / n), Math.floor(((i + 1) * chars.length) / n))
        .join(''),
    );
  }
  return out;
}

/** Realistic JSON error bodies, as the hosted API answers them. */
export function errorBody(status: number, message?: string): Record<string, unknown> {
  switch (status) {
    case 401:
      return {
        error: {
          message:
            message ?? 'Incorrect API key provided. You can find your API key in your account.',
          type: 'invalid_request_error',
          param: null,
          code: 'invalid_api_key',
        },
      };
    case 403:
      return {
        error: {
          message: message ?? 'You are not allowed to sample from this model',
          type: 'invalid_request_error',
          param: null,
          code: 'model_not_allowed',
        },
      };
    case 404:
      return {
        error: {
          message: message ?? 'Not found: no route for this path',
          type: 'invalid_request_error',
          param: null,
          code: 'not_found',
        },
      };
    case 429:
      return {
        error: {
          message: message ?? 'Rate limit reached for requests. Please try again in 20s.',
          type: 'requests',
          param: null,
          code: 'rate_limit_exceeded',
        },
      };
    default:
      return {
        error: {
          message:
            message ?? 'The server had an error while processing your request. Sorry about that!',
          type: 'server_error',
          param: null,
          code: null,
        },
      };
  }
}
