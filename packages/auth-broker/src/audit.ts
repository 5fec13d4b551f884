import { appendFile } from 'node:fs/promises';
import type { Redactor } from '@svc/contracts';
import type { BrokerFailureKind, RunnerDisposition } from './errors.js';

/**
 * One JSON line per request (spec/1 "Audit record"), success or failure. Caller-controlled text
 * is bounded before it gets here; bodies appear only as length and SHA-256.
 */
export type CallerPlane = 'code-queue' | 'ci' | 'commander' | 'manual-cli' | 'unknown';

export interface UpstreamCall {
  method: string;
  /** REST path without query. */
  path: string;
  /** Upstream HTTP status; null when no response arrived. */
  status: number | null;
  /** Requests actually sent for this call (retries included); 0 for a planned request. */
  attempts: number;
}

export interface AuditRecord {
  requestId: string;
  observedAt: string;
  endpoint: { method: string; path: string };
  caller: {
    plane: CallerPlane;
    taskId: string | null;
    queueId: string | null;
    address: string | null;
  };
  /** An allowlisted operation, or null when the request named none (or an unknown one). */
  operation: string | null;
  repo: string | null;
  resource: Record<string, string | number | boolean | null> | null;
  /** Whether upstream mutation is impossible for this request (always true in p0). */
  dryRun: boolean;
  /** The caller's dryRun field, when given. */
  requestedDryRun: boolean | null;
  body: { length: number; sha256: string } | null;
  credentialRef: string;
  credentialValuePrinted: false;
  upstream: {
    method: string | null;
    path: string | null;
    /** Every upstream call in order; planned (dry-run) requests are listed with sent=false. */
    calls: UpstreamCall[];
    sent: boolean;
  };
  status: number;
  ok: boolean;
  failureKind: BrokerFailureKind | null;
  degradedReason: string | null;
  runnerDisposition: RunnerDisposition;
  retryable: boolean;
  durationMs: number;
  redaction: { valuesPrinted: false };
}

export interface AuditSink {
  readonly kind: 'file' | 'stdout';
  /** Resolves once the line is handed to the OS; rejects when it cannot be written. */
  write(record: AuditRecord): Promise<void>;
}

export function createAuditSink(path: string | null, redactor: Redactor): AuditSink {
  // Redaction by value is the last guard: a record is built from structured fields only.
  const line = (record: AuditRecord) => `${redactor.redact(JSON.stringify(record))}\n`;
  if (path !== null) {
    return {
      kind: 'file',
      // Opened per line so a rotated or replaced file is picked up, and a vanished one fails.
      write: (record) => appendFile(path, line(record), { encoding: 'utf8', mode: 0o600 }),
    };
  }
  return {
    kind: 'stdout',
    write: (record) =>
      new Promise((resolve, reject) => {
        process.stdout.write(line(record), (error) => (error ? reject(error) : resolve()));
      }),
  };
}
