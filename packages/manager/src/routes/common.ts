import { Type } from '@sinclair/typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { ErrorBody, Id } from '@svc/contracts';

export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export const RunParams = Type.Object({ runId: Id }, { additionalProperties: false });
export const CommandParams = Type.Object({ commandId: Id }, { additionalProperties: false });
export const RunCommandParams = Type.Object(
  { runId: Id, commandId: Id },
  { additionalProperties: false },
);

/** Route config of the runner-facing routes: a runner Job's token may call them (own run only). */
export const RUNNER = { access: 'runner' } as const;

/** Error responses of every route: the response schema decides what is serialized. */
export const errors = { '4xx': ErrorBody, '5xx': ErrorBody } as const;

/** The lease token a runner sends back on lease-fenced calls (absent when not sent). */
export function leaseTokenOf(request: {
  headers: Record<string, string | string[] | undefined>;
}): string | undefined {
  const value = request.headers['x-lease-token'];
  return typeof value === 'string' && value.length > 0 ? value : undefined;
}

/** An AbortSignal that fires when the client goes away (ends long-polls early). */
export function clientGone(request: {
  raw: { once(event: 'close', fn: () => void): unknown };
}): AbortSignal {
  const controller = new AbortController();
  request.raw.once('close', () => controller.abort());
  return controller.signal;
}
