import { parseIssue, parsePull, asArray } from '../codehost/shapes.js';
import { BrokerError, isBrokerError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import type { OperationDeps } from './operate.js';
import { allowedRepo } from './operate.js';
import { OPERATION_NAMES, PREFLIGHT_OPERATION } from './operations.js';
import { parseParams } from './params.js';
import { planMutation, type PlannedRequest } from './planned.js';
import { authStatus, qualifiedHead, readIssue } from './reads.js';
import type { RepoRef } from './repos.js';
import { readCommon, requireObject } from './request.js';
import {
  branchName,
  field,
  optionalBoolean,
  positiveInt,
  Problems,
  rejectUnknownKeys,
} from './validation.js';

/**
 * PR preflight: proves code-host authentication, repository visibility, issue and PR read and the
 * PR create shape, with the broker-held credential. It cannot prove a push: that stays a
 * runner-local `git push --dry-run` with the runner's own git credentials (`git-remote-gap`).
 */
export interface PreflightSuccess {
  ok: true;
  requestId: string;
  runnerDisposition: 'ready';
  failureKind: null;
  degradedReason: null;
  repo: string;
  tokenCoverage: {
    ok: true;
    source: 'auth-broker';
    scope: 'broker-held-codehost-credential';
    runnerEnvTokenRequired: false;
    valuesPrinted: false;
  };
  prCapabilityContract: {
    targetBranch: string;
    systemCliBinaryRequiredForWrites: false;
    preflightCreatesPr: false;
    preflightMergesPr: false;
    brokerProxy: { ok: true; operations: string[]; writesRemote: false };
  };
  checks: PreflightCheck[];
  pushDryRun: {
    requested: boolean;
    checkedBy: 'runner';
    performedByBroker: false;
    failureKind: 'git-remote-gap';
    command: string;
  };
}

export interface PreflightCheck {
  name: 'auth' | 'repo-visibility' | 'issue-read' | 'pr-read' | 'pr-create-shape';
  ok: true;
  detail: Record<string, unknown>;
}

const FIELDS = [
  'requestId',
  'caller',
  'repo',
  'base',
  'head',
  'issueNumber',
  'includePrCreateDryRun',
  'includePushDryRun',
];

interface PreflightRequest {
  repo: string;
  base: string;
  head: string;
  issueNumber: number;
  includePrCreateDryRun: boolean;
  includePushDryRun: boolean;
}

function parsePreflight(body: unknown, ctx: RequestContext): PreflightRequest {
  const object = requireObject(body);
  const p = new Problems();
  readCommon(object, ctx, p);
  rejectUnknownKeys(object, FIELDS, 'request', p);
  const repo = field(object, 'repo');
  if (typeof repo !== 'string') p.add('repo must be a string <owner>/<repo>');
  const base = branchName(field(object, 'base'), 'base', p);
  const head = branchName(field(object, 'head'), 'head', p, true);
  if (base !== undefined && base === head) p.add('head must differ from base');
  const issueNumber = positiveInt(field(object, 'issueNumber'), 'issueNumber', p);
  const includePrCreateDryRun = optionalBoolean(
    field(object, 'includePrCreateDryRun'),
    'includePrCreateDryRun',
    p,
  );
  const includePushDryRun = optionalBoolean(
    field(object, 'includePushDryRun'),
    'includePushDryRun',
    p,
  );
  p.throwIfAny('pr-preflight request');
  return {
    repo: repo as string,
    base: base ?? '',
    head: head ?? '',
    issueNumber: issueNumber ?? 0,
    includePrCreateDryRun: includePrCreateDryRun ?? true,
    includePushDryRun: includePushDryRun ?? false,
  };
}

export async function runPreflight(
  deps: OperationDeps,
  ctx: RequestContext,
  body: unknown,
): Promise<PreflightSuccess> {
  ctx.operation = PREFLIGHT_OPERATION;
  const request = parsePreflight(body, ctx);
  const repo = allowedRepo(deps.allowlist, request.repo);
  ctx.repo = repo.fullName;
  ctx.resource = {
    issueNumber: request.issueNumber,
    base: request.base,
    head: request.head,
    includePushDryRun: request.includePushDryRun,
  };
  if (!deps.credential.configured)
    throw new BrokerError(
      'auth-not-configured',
      'the broker has no code-host credential configured',
      {
        degradedReason: 'credential-ref-missing',
      },
    );

  const checks: PreflightCheck[] = [];
  const step = async <T>(name: PreflightCheck['name'], run: () => Promise<T>): Promise<T> => {
    try {
      return await run();
    } catch (error) {
      if (!isBrokerError(error)) throw error;
      throw new BrokerError(error.failureKind, `preflight check ${name} failed: ${error.message}`, {
        degradedReason: error.degradedReason,
        next: error.next,
        ...(error.retryAfterSeconds !== undefined
          ? { retryAfterSeconds: error.retryAfterSeconds }
          : {}),
        details: { ...error.details, failedCheck: name, passedChecks: checks.map((c) => c.name) },
      });
    }
  };

  const status = await step('auth', () => authStatus(deps.client, repo, ctx.upstreamCalls));
  checks.push({
    name: 'auth',
    ok: true,
    detail: { rateLimit: status.rateLimit, scopes: status.scopes },
  });
  checks.push({
    name: 'repo-visibility',
    ok: true,
    detail: {
      visibility: status.repository.visibility,
      defaultBranch: status.repository.defaultBranch,
      archived: status.repository.archived,
    },
  });

  const issue = await step('issue-read', async () =>
    parseIssue(await readIssue(deps.client, repo, request.issueNumber, ctx.upstreamCalls)),
  );
  checks.push({
    name: 'issue-read',
    ok: true,
    detail: { number: issue.number, state: issue.state },
  });

  const open = await step('pr-read', async () => {
    const res = await deps.client.get(
      'GET /repos/{owner}/{repo}/pulls',
      {
        owner: repo.owner,
        repo: repo.name,
        state: 'open',
        base: request.base,
        head: qualifiedHead(repo, request.head),
        per_page: 5,
      },
      ctx.upstreamCalls,
    );
    return asArray(res.data, 'pulls').map((p) => parsePull(p).number);
  });
  checks.push({ name: 'pr-read', ok: true, detail: { openPullRequestsForHead: open } });

  if (request.includePrCreateDryRun) {
    const planned = await step('pr-create-shape', () =>
      Promise.resolve(planCreate(request, issue.title, repo, deps)),
    );
    ctx.planned = { method: planned.method, path: planned.path };
    ctx.body = planned.body;
    checks.push({ name: 'pr-create-shape', ok: true, detail: { planned } });
  }

  return {
    ok: true,
    requestId: ctx.requestId,
    runnerDisposition: 'ready',
    failureKind: null,
    degradedReason: null,
    repo: repo.fullName,
    tokenCoverage: {
      ok: true,
      source: 'auth-broker',
      scope: 'broker-held-codehost-credential',
      runnerEnvTokenRequired: false,
      valuesPrinted: false,
    },
    prCapabilityContract: {
      targetBranch: request.base,
      systemCliBinaryRequiredForWrites: false,
      preflightCreatesPr: false,
      preflightMergesPr: false,
      brokerProxy: { ok: true, operations: [...OPERATION_NAMES], writesRemote: false },
    },
    checks,
    pushDryRun: {
      requested: request.includePushDryRun,
      checkedBy: 'runner',
      performedByBroker: false,
      failureKind: 'git-remote-gap',
      command: `git push --dry-run origin ${request.head.slice(request.head.indexOf(':') + 1)}`,
    },
  };
}

/** The PR create request the runner would send, checked with the operation's own rules. */
function planCreate(
  request: PreflightRequest,
  issueTitle: unknown,
  repo: RepoRef,
  deps: OperationDeps,
): PlannedRequest {
  const title =
    typeof issueTitle === 'string' && issueTitle.trim()
      ? issueTitle
      : `Issue #${request.issueNumber}`;
  const params = parseParams('codehost.pr.create', {
    title: title.slice(0, 256),
    base: request.base,
    head: request.head,
    body: `Closes #${request.issueNumber}`,
  });
  return planMutation(repo, params, deps.credential.display);
}
