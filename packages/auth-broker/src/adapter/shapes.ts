import { randomUUID } from 'node:crypto';
import type { Env } from '@svc/contracts';
import { OPERATION_NAMES } from '../domain/operations.js';
import { BrokerError, failureEnvelope, type FailureEnvelope } from '../errors.js';
import { tokenPresence, type BrokerAddress } from './environment.js';

/**
 * The two shapes every adapter command prints (spec/1 "Client adapter" rules 2 and 4): the
 * structured `auth-missing` failure when no broker address is set, and the ready shape when one
 * is. Neither ever holds a token value.
 */
export const SUBCOMMANDS = ['contract', 'health', 'credential-request', 'pr-preflight'] as const;
export type Subcommand = (typeof SUBCOMMANDS)[number];

export interface CommandOutput {
  exitCode: number;
  output: Record<string, unknown>;
}

export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

export function readyShape(
  command: Subcommand,
  address: BrokerAddress,
  env: Env,
  extra: { dryRun: boolean; targetBranch?: string },
): Record<string, unknown> {
  return {
    ok: true,
    command,
    dryRun: extra.dryRun,
    runnerDisposition: 'ready',
    failureKind: null,
    degradedReason: null,
    brokerNeeded: false,
    broker: { url: address.display, source: address.source },
    tokenCoverage: {
      ok: true,
      source: 'auth-broker',
      scope: 'broker-held-codehost-credential',
      runnerEnvTokenRequired: false,
      presenceOnly: true,
      valuesRead: false,
      valuesPrinted: false,
    },
    prCapabilityContract: {
      ...(extra.targetBranch !== undefined ? { targetBranch: extra.targetBranch } : {}),
      systemCliBinaryRequiredForWrites: false,
      preflightCreatesPr: false,
      preflightMergesPr: false,
      brokerProxy: { ok: true, operations: [...OPERATION_NAMES], writesRemote: false },
    },
    migration: tokenPresence(env),
  };
}

export function missingBrokerShape(command: Subcommand, env: Env): CommandOutput {
  const error = new BrokerError(
    'auth-missing',
    'no auth broker address: set SVC_AUTH_BROKER_URL (or AUTH_BROKER_URL); runner token variables are not a substitute',
    { degradedReason: 'broker-needed' },
  );
  return {
    exitCode: EXIT_FAILED,
    output: {
      ...failureEnvelope(error, randomUUID()),
      command,
      brokerNeeded: true,
      tokenCoverage: { ok: false, presenceOnly: true, valuesRead: false, valuesPrinted: false },
      migration: tokenPresence(env),
    },
  };
}

/** A failure in the adapter itself (bad option, unreachable broker). */
export function adapterFailure(
  command: Subcommand | null,
  error: BrokerError,
  extra: Record<string, unknown> = {},
): CommandOutput {
  const envelope: FailureEnvelope = failureEnvelope(error, randomUUID());
  return {
    exitCode: error.failureKind === 'validation-failed' ? EXIT_USAGE : EXIT_FAILED,
    output: { ...envelope, command, ...extra },
  };
}
