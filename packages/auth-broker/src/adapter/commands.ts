import { randomUUID } from 'node:crypto';
import { sanitizeUrl, type Env } from '@svc/contracts';
import { isMutation, isOperationName } from '../domain/operations.js';
import { parseRepo } from '../domain/repos.js';
import { BrokerError, isBrokerError } from '../errors.js';
import { brokerFailure, callBroker, type BrokerReply } from './broker-client.js';
import { contractDocument } from './contract.js';
import { brokerAddress, endpoint, tokenPresence, type BrokerAddress } from './environment.js';
import {
  adapterFailure,
  EXIT_FAILED,
  EXIT_OK,
  missingBrokerShape,
  readyShape,
  type CommandOutput,
  type Subcommand,
} from './shapes.js';

/**
 * The client adapter's subcommands. Each resolves the broker address first: without one the
 * answer is the `auth-missing` failure and nothing is contacted, whatever tokens the
 * environment holds. With `--dry-run` the broker is not contacted either; the planned request
 * is printed instead.
 */
export interface CredentialRequestOptions {
  operation: string;
  repo: string;
  number?: string;
  dryRun: boolean;
}

export interface PreflightOptions {
  repo: string;
  base: string;
  head: string;
  issue: string;
  dryRun: boolean;
}

/** The contract is printed either way; without a broker next to the auth-missing failure. */
export async function contractCommand(env: Env): Promise<CommandOutput> {
  const result = await withAddress('contract', env, (address) =>
    Promise.resolve({
      exitCode: EXIT_OK,
      output: readyShape('contract', address, env, { dryRun: true }),
    }),
  );
  return { ...result, output: { ...result.output, contract: contractDocument() } };
}

export function healthCommand(env: Env, dryRun: boolean): Promise<CommandOutput> {
  return withAddress('health', env, async (address) => {
    const url = endpoint(address, '/health');
    const ready = readyShape('health', address, env, { dryRun });
    if (dryRun) return plannedOutput(ready, 'GET', url);
    return answer(ready, await callBroker(url, 'GET'), 'health');
  });
}

export function credentialRequestCommand(
  env: Env,
  options: CredentialRequestOptions,
): Promise<CommandOutput> {
  return withAddress('credential-request', env, async (address) => {
    if (!isOperationName(options.operation))
      throw new BrokerError('operation-not-allowed', 'the operation is not in the allowlist', {
        degradedReason: 'unknown-operation',
      });
    if (!parseRepo(options.repo))
      throw new BrokerError('validation-failed', '--repo must be <owner>/<repo>', {
        degradedReason: 'invalid-parameters',
      });
    const params: Record<string, unknown> = {};
    if (options.number !== undefined) params['number'] = positiveInt(options.number, '--number');
    const body = {
      requestId: randomUUID(),
      caller: { plane: 'manual-cli' },
      repo: options.repo,
      operation: options.operation,
      // The adapter never asks for a live write; mutations come back as planned requests.
      dryRun: isMutation(options.operation) ? true : false,
      params,
    };
    const url = endpoint(address, '/v1/codehost/cli');
    const ready = readyShape('credential-request', address, env, { dryRun: options.dryRun });
    if (options.dryRun) return plannedOutput(ready, 'POST', url, body);
    return answer(ready, await callBroker(url, 'POST', body), 'response');
  });
}

export function prPreflightCommand(env: Env, options: PreflightOptions): Promise<CommandOutput> {
  return withAddress('pr-preflight', env, async (address) => {
    if (!parseRepo(options.repo))
      throw new BrokerError('validation-failed', '--repo must be <owner>/<repo>', {
        degradedReason: 'invalid-parameters',
      });
    const body = {
      requestId: randomUUID(),
      repo: options.repo,
      base: options.base,
      head: options.head,
      issueNumber: positiveInt(options.issue, '--issue'),
      includePrCreateDryRun: true,
      includePushDryRun: false,
    };
    const url = endpoint(address, '/v1/codehost/pr-preflight');
    const ready = readyShape('pr-preflight', address, env, {
      dryRun: options.dryRun,
      targetBranch: options.base,
    });
    if (options.dryRun) return plannedOutput(ready, 'POST', url, body);
    return answer(ready, await callBroker(url, 'POST', body), 'response');
  });
}

async function withAddress(
  command: Subcommand,
  env: Env,
  run: (address: BrokerAddress) => Promise<CommandOutput>,
): Promise<CommandOutput> {
  let address: BrokerAddress | null;
  try {
    address = brokerAddress(env);
  } catch (error) {
    if (isBrokerError(error))
      return adapterFailure(command, error, { migration: tokenPresence(env) });
    throw error;
  }
  if (!address) return missingBrokerShape(command, env);
  try {
    return await run(address);
  } catch (error) {
    if (!isBrokerError(error)) throw error;
    return adapterFailure(command, error, {
      broker: { url: address.display, source: address.source },
      migration: tokenPresence(env),
    });
  }
}

function plannedOutput(
  ready: Record<string, unknown>,
  method: 'GET' | 'POST',
  url: URL,
  body?: unknown,
): CommandOutput {
  return {
    exitCode: EXIT_OK,
    output: {
      ...ready,
      planned: { method, url: sanitizeUrl(url.href), sent: false, ...(body ? { body } : {}) },
    },
  };
}

/** Fold the broker's reply into the ready shape, or into its failure when it failed. */
function answer(ready: Record<string, unknown>, reply: BrokerReply, key: string): CommandOutput {
  const failure = brokerFailure(reply);
  if (failure)
    return {
      exitCode: EXIT_FAILED,
      output: {
        ...failure,
        command: ready['command'],
        broker: ready['broker'],
        tokenCoverage: ready['tokenCoverage'],
        migration: ready['migration'],
      },
    };
  return {
    exitCode: EXIT_OK,
    output: { ...ready, requestId: reply.body['requestId'] ?? null, [key]: reply.body },
  };
}

function positiveInt(text: string, option: string): number {
  const value = Number(text);
  if (!/^\d{1,10}$/.test(text) || !Number.isSafeInteger(value) || value < 1)
    throw new BrokerError('validation-failed', `${option} must be a positive integer`, {
      degradedReason: 'invalid-parameters',
    });
  return value;
}
