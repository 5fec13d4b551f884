import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { AuditRecord, CallerPlane, UpstreamCall } from '../audit.js';
import type { BrokerError } from '../errors.js';

/**
 * What the broker learns about one request as it handles it. Domain code fills it in step by
 * step (caller, operation, repo after the allowlist check, upstream calls), so the audit record
 * written at the end says how far the request got, whatever way it ended.
 */
export interface RequestContext {
  requestId: string;
  startedAt: number;
  observedAt: string;
  endpoint: { method: string; path: string };
  callerAddress: string | null;
  caller: { plane: CallerPlane; taskId: string | null; queueId: string | null };
  operation: string | null;
  repo: string | null;
  resource: Record<string, string | number | boolean | null> | null;
  requestedDryRun: boolean | null;
  body: { length: number; sha256: string } | null;
  upstreamCalls: UpstreamCall[];
  /** Set for planned (dry-run) mutations: the request that was not sent. */
  planned: { method: string; path: string } | null;
  failure: BrokerError | null;
}

const MAX_ENDPOINT_PATH = 200;

export function newRequestContext(
  method: string,
  rawUrl: string,
  address: string | undefined,
): RequestContext {
  // The query is dropped: it is caller text that may hold anything, including credentials.
  const path = rawUrl.split('?')[0] ?? '';
  return {
    requestId: randomUUID(),
    startedAt: performance.now(),
    observedAt: new Date().toISOString(),
    endpoint: {
      method: method.slice(0, 16),
      path: path.length > MAX_ENDPOINT_PATH ? `${path.slice(0, MAX_ENDPOINT_PATH)}…` : path,
    },
    callerAddress: address ?? null,
    caller: { plane: 'unknown', taskId: null, queueId: null },
    operation: null,
    repo: null,
    resource: null,
    requestedDryRun: null,
    body: null,
    upstreamCalls: [],
    planned: null,
    failure: null,
  };
}

export function auditRecordFor(
  ctx: RequestContext,
  status: number,
  credentialRef: string,
): AuditRecord {
  const failure = ctx.failure;
  const last = ctx.upstreamCalls.at(-1) ?? ctx.planned;
  return {
    requestId: ctx.requestId,
    observedAt: ctx.observedAt,
    endpoint: ctx.endpoint,
    caller: { ...ctx.caller, address: ctx.callerAddress },
    operation: ctx.operation,
    repo: ctx.repo,
    resource: ctx.resource,
    dryRun: true,
    requestedDryRun: ctx.requestedDryRun,
    body: ctx.body,
    credentialRef,
    credentialValuePrinted: false,
    upstream: {
      method: last?.method ?? null,
      path: last?.path ?? null,
      calls: [
        ...ctx.upstreamCalls,
        ...(ctx.planned ? [{ ...ctx.planned, status: null, attempts: 0 }] : []),
      ],
      sent: ctx.upstreamCalls.length > 0,
    },
    status,
    ok: failure === null && status < 400,
    failureKind: failure?.failureKind ?? null,
    degradedReason: failure?.degradedReason ?? null,
    runnerDisposition: failure ? failure.spec.runnerDisposition : 'ready',
    retryable: failure?.spec.retryable ?? false,
    durationMs: Math.round((performance.now() - ctx.startedAt) * 100) / 100,
    redaction: { valuesPrinted: false },
  };
}
