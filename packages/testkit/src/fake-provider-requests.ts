/** One request the fake provider received, and readers of what the agent sent in it. */

export interface RecordedRequest {
  /** 1-based position among all requests the fake received. */
  index: number;
  kind: 'responses' | 'compact' | 'other';
  method: string;
  path: string;
  /** Lower-cased header names. */
  headers: Record<string, string>;
  /** The bearer token sent, or null when no Authorization header came. */
  bearer: string | null;
  body: unknown;
  receivedAt: number;
  /** When the last byte of the answer was handed to the socket (null until then). */
  respondedAt: number | null;
}

/** Every text the request's `input` carries (messages and tool outputs), in order. */
export function inputTexts(request: RecordedRequest): string[] {
  const body = request.body as { input?: unknown } | null;
  const input = Array.isArray(body?.input) ? (body.input as unknown[]) : [];
  const texts: string[] = [];
  for (const item of input) {
    if (!item || typeof item !== 'object') continue;
    const record = item as Record<string, unknown>;
    if (typeof record['output'] === 'string') texts.push(record['output']);
    if (Array.isArray(record['content'])) {
      for (const part of record['content'] as unknown[]) {
        const text = (part as Record<string, unknown> | null)?.['text'];
        if (typeof text === 'string') texts.push(text);
      }
    }
  }
  return texts;
}

/** Texts of the user messages in the request's `input`, in order. */
export function userTexts(request: RecordedRequest): string[] {
  const body = request.body as { input?: unknown } | null;
  const input = Array.isArray(body?.input) ? (body.input as unknown[]) : [];
  return input.flatMap((item) => {
    const record = item as Record<string, unknown> | null;
    if (record?.['role'] !== 'user' || !Array.isArray(record['content'])) return [];
    return (record['content'] as unknown[])
      .map((part) => (part as Record<string, unknown> | null)?.['text'])
      .filter((text): text is string => typeof text === 'string');
  });
}

/** The output the agent sent back for a function call, or undefined. */
export function functionCallOutput(request: RecordedRequest, callId?: string): string | undefined {
  const body = request.body as { input?: unknown } | null;
  const input = Array.isArray(body?.input) ? (body.input as unknown[]) : [];
  for (const item of input) {
    const record = item as Record<string, unknown> | null;
    if (record?.['type'] !== 'function_call_output') continue;
    if (callId !== undefined && record['call_id'] !== callId) continue;
    const output = record['output'];
    return typeof output === 'string' ? output : JSON.stringify(output);
  }
  return undefined;
}
