import type { CodehostClient } from '../codehost/client.js';
import type { CredentialSource } from '../codehost/credential.js';
import { BrokerError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import { isMutation, type OperationName } from './operations.js';
import { parseParams, type OperationParams } from './params.js';
import { planMutation, type PlannedRequest } from './planned.js';
import { runRead, type ListPage } from './reads.js';
import type { RepoAllowlist, RepoRef } from './repos.js';
import { parseOperationRequest } from './request.js';

/**
 * The operation endpoint's domain service: envelope, operation allowlist, repository allowlist,
 * dry-run rule, parameters, credential, then the one allowlisted action. The order is the
 * order of the failures a caller sees.
 */
export interface OperationDeps {
  client: CodehostClient;
  credential: CredentialSource;
  allowlist: RepoAllowlist;
}

export interface OperationSuccess {
  ok: true;
  requestId: string;
  operation: OperationName;
  repo: string;
  writesRemote: false;
  data?: unknown;
  page?: ListPage;
  planned?: PlannedRequest;
}

export async function runOperation(
  deps: OperationDeps,
  ctx: RequestContext,
  body: unknown,
): Promise<OperationSuccess> {
  const request = parseOperationRequest(body, ctx);
  const repo = allowedRepo(deps.allowlist, request.repo);
  ctx.repo = repo.fullName;
  if (isMutation(request.operation) && request.dryRun !== true)
    throw new BrokerError(
      'dry-run-required',
      `${request.operation} is allowed only as a dry run (dryRun=true); the broker never writes to the code host`,
      { degradedReason: 'live-write-disabled' },
    );
  const params = parseParams(request.operation, request.params);
  ctx.resource = resourceOf(params);
  if (!deps.credential.configured)
    throw new BrokerError(
      'auth-not-configured',
      'the broker has no code-host credential configured',
      {
        degradedReason: 'credential-ref-missing',
      },
    );
  const base = {
    ok: true as const,
    requestId: ctx.requestId,
    operation: request.operation,
    repo: repo.fullName,
    writesRemote: false as const,
  };
  if (
    params.operation === 'codehost.pr.create' ||
    params.operation === 'codehost.pr.comment.create'
  ) {
    const planned = planMutation(repo, params, deps.credential.display);
    ctx.planned = { method: planned.method, path: planned.path };
    ctx.body = planned.body;
    return { ...base, planned };
  }
  const result = await runRead(deps.client, repo, params, ctx.upstreamCalls);
  return { ...base, ...result };
}

export function allowedRepo(allowlist: RepoAllowlist, value: string): RepoRef {
  const repo = allowlist.lookup(value);
  if (!repo)
    throw new BrokerError('repo-not-allowed', 'the repository is not in the broker allowlist', {
      degradedReason: 'repo-not-in-allowlist',
    });
  return repo;
}

/** What the audit record names as the resource: numbers and branch names, never text. */
function resourceOf(params: OperationParams): RequestContext['resource'] {
  switch (params.operation) {
    case 'codehost.auth.status':
      return null;
    case 'codehost.issue.list':
      return { state: params.state, limit: params.limit };
    case 'codehost.pr.list':
      return { state: params.state, limit: params.limit, base: params.base, head: params.head };
    case 'codehost.issue.read':
    case 'codehost.pr.read':
    case 'codehost.pr.comment.create':
      return { number: params.number };
    case 'codehost.pr.create':
      return { base: params.base, head: params.head, draft: params.draft };
  }
}
