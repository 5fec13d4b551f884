import { BrokerError, isBrokerFailureKind } from '../errors.js';

/**
 * The adapter's only network path: JSON to and from the broker address. It never talks to the
 * code host, and sends no credential of its own (p0 trusts the private network placement).
 */
export interface BrokerReply {
  status: number;
  body: Record<string, unknown>;
}

export const ADAPTER_TIMEOUT_MS = 15_000;

export async function callBroker(
  url: URL,
  method: 'GET' | 'POST',
  body?: unknown,
): Promise<BrokerReply> {
  let response: Response;
  try {
    response = await fetch(url, {
      method,
      redirect: 'error',
      signal: AbortSignal.timeout(ADAPTER_TIMEOUT_MS),
      headers: {
        accept: 'application/json',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch (error) {
    const timedOut = (error as Error).name === 'TimeoutError';
    throw new BrokerError(
      'broker-unavailable',
      timedOut ? 'the auth broker did not answer in time' : 'the auth broker could not be reached',
      { degradedReason: timedOut ? 'broker-timeout' : 'broker-unreachable' },
    );
  }
  const text = await response.text().catch(() => '');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed))
    throw new BrokerError(
      'broker-unavailable',
      `the auth broker answered ${response.status} without a JSON object; is the address a broker?`,
      { degradedReason: 'broker-invalid-response' },
    );
  return { status: response.status, body: parsed as Record<string, unknown> };
}

/** The failure fields of a broker reply, when it is a failure envelope. */
export function brokerFailure(reply: BrokerReply): Record<string, unknown> | null {
  if (reply.status < 400 && reply.body['ok'] !== false) return null;
  const kind = reply.body['failureKind'];
  const pick = (key: string) => reply.body[key];
  return {
    ok: false,
    message:
      typeof pick('message') === 'string' ? pick('message') : `broker answered ${reply.status}`,
    requestId: pick('requestId') ?? null,
    failureKind: isBrokerFailureKind(kind) ? kind : 'broker-unavailable',
    degradedReason: pick('degradedReason') ?? 'unexpected-broker-reply',
    runnerDisposition: pick('runnerDisposition') ?? 'infra-blocked',
    retryable: pick('retryable') ?? true,
    next: Array.isArray(pick('next')) ? pick('next') : [],
    ...(typeof pick('retryAfterSeconds') === 'number'
      ? { retryAfterSeconds: pick('retryAfterSeconds') }
      : {}),
    brokerStatus: reply.status,
  };
}
