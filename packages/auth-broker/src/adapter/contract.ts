import { OPERATIONS, OPERATION_NAMES } from '../domain/operations.js';
import { BROKER_FAILURE_KINDS, BROKER_FAILURE_KIND_NAMES } from '../errors.js';
import { BROKER_URL_VARIABLES } from './environment.js';

/** The dry-run contract surface, printed by `auth-broker contract`. Static: no network. */
export function contractDocument(): Record<string, unknown> {
  return {
    service: 'auth-broker',
    phase: 'p0',
    endpoints: [
      { method: 'GET', path: '/health' },
      { method: 'POST', path: '/v1/codehost/cli' },
      { method: 'POST', path: '/v1/codehost/pr-preflight' },
    ],
    operations: OPERATION_NAMES.map((name) => ({
      name,
      kind: OPERATIONS[name].kind,
      upstream: OPERATIONS[name].upstream,
      writesRemote: false,
      dryRunRequired: OPERATIONS[name].kind === 'mutation',
    })),
    subcommands: [
      { name: 'contract', options: [] },
      { name: 'health', options: ['--dry-run'] },
      {
        name: 'credential-request',
        options: ['--operation <operation>', '--repo <owner>/<repo>', '--number <n>', '--dry-run'],
      },
      {
        name: 'pr-preflight',
        options: [
          '--repo <owner>/<repo>',
          '--base <branch>',
          '--head <branch>',
          '--issue <number>',
          '--dry-run',
        ],
      },
    ],
    brokerAddressVariables: [...BROKER_URL_VARIABLES],
    failureKinds: BROKER_FAILURE_KIND_NAMES.map((kind) => ({
      failureKind: kind,
      httpStatus: BROKER_FAILURE_KINDS[kind].httpStatus,
      runnerDisposition: BROKER_FAILURE_KINDS[kind].runnerDisposition,
      retryable: BROKER_FAILURE_KINDS[kind].retryable,
    })),
    blocked: [
      'PR merge',
      'issue or PR deletion',
      'arbitrary code-host API calls',
      'arbitrary HTTP proxying',
      'raw git push',
      'container-registry login',
      'deploy commands',
    ],
  };
}
