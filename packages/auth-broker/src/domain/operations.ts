/**
 * The operation allowlist: the only things the broker will ever do with its credential.
 * Anything not named here is `operation-not-allowed`; there is no generic path or URL operation.
 */
export const OPERATIONS = {
  'codehost.auth.status': {
    kind: 'read',
    upstream: 'GET /rate_limit + GET /repos/{owner}/{repo}',
    capability: 'codehost.auth.status',
  },
  'codehost.issue.list': {
    kind: 'read',
    upstream: 'GET /repos/{owner}/{repo}/issues',
    capability: 'codehost.issue.read',
  },
  'codehost.issue.read': {
    kind: 'read',
    upstream: 'GET /repos/{owner}/{repo}/issues/{number}',
    capability: 'codehost.issue.read',
  },
  'codehost.pr.list': {
    kind: 'read',
    upstream: 'GET /repos/{owner}/{repo}/pulls',
    capability: 'codehost.pr.read',
  },
  'codehost.pr.read': {
    kind: 'read',
    upstream: 'GET /repos/{owner}/{repo}/pulls/{number}',
    capability: 'codehost.pr.read',
  },
  'codehost.pr.create': {
    kind: 'mutation',
    upstream: 'POST /repos/{owner}/{repo}/pulls (planned only)',
    capability: 'codehost.pr.create.dry-run',
  },
  'codehost.pr.comment.create': {
    kind: 'mutation',
    upstream: 'POST /repos/{owner}/{repo}/issues/{number}/comments (planned only)',
    capability: 'codehost.pr.comment.create.dry-run',
  },
} as const satisfies Record<
  string,
  { kind: 'read' | 'mutation'; upstream: string; capability: string }
>;

export type OperationName = keyof typeof OPERATIONS;

export const OPERATION_NAMES = Object.keys(OPERATIONS) as OperationName[];

/** Name used in audit records for the preflight endpoint (not an operation of the cli endpoint). */
export const PREFLIGHT_OPERATION = 'codehost.pr.preflight';

export const CAPABILITIES: readonly string[] = [
  ...new Set([
    ...OPERATION_NAMES.map((name) => OPERATIONS[name].capability),
    'codehost.pr.preflight.dry-run',
  ]),
];

export function isOperationName(value: unknown): value is OperationName {
  return typeof value === 'string' && Object.hasOwn(OPERATIONS, value);
}

export function isMutation(operation: OperationName): boolean {
  return OPERATIONS[operation].kind === 'mutation';
}
