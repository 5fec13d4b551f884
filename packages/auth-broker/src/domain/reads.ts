import type { UpstreamCall } from '../audit.js';
import type { CodehostClient, RouteParams } from '../codehost/client.js';
import {
  asArray,
  isPullRequestEntry,
  parseIssue,
  parsePull,
  parseRateLimit,
  parseRepoInfo,
  project,
  type RateLimitInfo,
  type RepoInfo,
} from '../codehost/shapes.js';
import { BrokerError } from '../errors.js';
import type { OperationParams } from './params.js';
import type { RepoRef } from './repos.js';

/** The read operations: each a fixed sequence of GETs on an allowlisted repository. */
export interface ListPage {
  limit: number;
  returned: number;
  /** True when the code host has more matching items than were returned. */
  truncated: boolean;
  pagesFetched: number;
}

export interface ReadResult {
  data: unknown;
  page?: ListPage;
}

/** Upper bound on upstream pages per list request, so one request costs a bounded time. */
export const MAX_LIST_PAGES = 10;

type ReadParams = Exclude<
  OperationParams,
  { operation: 'codehost.pr.create' } | { operation: 'codehost.pr.comment.create' }
>;

export async function runRead(
  client: CodehostClient,
  repo: RepoRef,
  params: ReadParams,
  calls: UpstreamCall[],
): Promise<ReadResult> {
  const at = { owner: repo.owner, repo: repo.name };
  switch (params.operation) {
    case 'codehost.auth.status':
      return { data: await authStatus(client, repo, calls) };
    case 'codehost.issue.read': {
      const issue = await readIssue(client, repo, params.number, calls);
      return { data: project(parseIssue(issue), params.fields) };
    }
    case 'codehost.pr.read': {
      const res = await client.get(
        'GET /repos/{owner}/{repo}/pulls/{pull_number}',
        { ...at, pull_number: params.number },
        calls,
      );
      return { data: project(parsePull(res.data), params.fields) };
    }
    case 'codehost.issue.list':
      return paginate(params.limit, async (page, perPage) => {
        const query: RouteParams = { ...at, state: params.state, per_page: perPage, page };
        if (params.labels.length > 0) query['labels'] = params.labels.join(',');
        const res = await client.get('GET /repos/{owner}/{repo}/issues', query, calls);
        // The issues endpoint lists pull requests too; they are not issues.
        const entries = asArray(res.data, 'issues').filter((e) => !isPullRequestEntry(e));
        return {
          items: entries.map((e) => project(parseIssue(e), params.fields)),
          link: res.headers['link'],
        };
      });
    case 'codehost.pr.list':
      return paginate(params.limit, async (page, perPage) => {
        const query: RouteParams = { ...at, state: params.state, per_page: perPage, page };
        if (params.base !== null) query['base'] = params.base;
        if (params.head !== null) query['head'] = qualifiedHead(repo, params.head);
        const res = await client.get('GET /repos/{owner}/{repo}/pulls', query, calls);
        return {
          items: asArray(res.data, 'pulls').map((e) => project(parsePull(e), params.fields)),
          link: res.headers['link'],
        };
      });
  }
}

/** One issue by number; a pull request's number is refused rather than passed off as an issue. */
export async function readIssue(
  client: CodehostClient,
  repo: RepoRef,
  number: number,
  calls: UpstreamCall[],
): Promise<unknown> {
  const res = await client.get(
    'GET /repos/{owner}/{repo}/issues/{issue_number}',
    { owner: repo.owner, repo: repo.name, issue_number: number },
    calls,
  );
  if (isPullRequestEntry(res.data))
    throw new BrokerError(
      'repo-not-found',
      `#${number} is a pull request, not an issue; use codehost.pr.read`,
      { degradedReason: 'number-is-pull-request' },
    );
  return res.data;
}

/** The code host filters `head` only in `<owner>:<branch>` form. */
export function qualifiedHead(repo: RepoRef, head: string): string {
  return head.includes(':') ? head : `${repo.owner}:${head}`;
}

export interface AuthStatus {
  authenticated: true;
  rateLimit: RateLimitInfo | null;
  scopes: string[] | null;
  repository: RepoInfo;
}

/** Rate-limit query plus repository probe: proves the credential and the repository's visibility. */
export async function authStatus(
  client: CodehostClient,
  repo: RepoRef,
  calls: UpstreamCall[],
): Promise<AuthStatus> {
  let rateLimit: RateLimitInfo | null = null;
  let scopesHeader: unknown;
  try {
    const res = await client.get('GET /rate_limit', {}, calls);
    rateLimit = parseRateLimit(res.data);
    scopesHeader = res.headers['x-oauth-scopes'];
  } catch (error) {
    // Enterprise servers with rate limiting disabled answer 404 here; that is not a failure.
    if (!(error instanceof BrokerError && error.failureKind === 'repo-not-found')) throw error;
  }
  const res = await client.get(
    'GET /repos/{owner}/{repo}',
    { owner: repo.owner, repo: repo.name },
    calls,
  );
  scopesHeader ??= res.headers['x-oauth-scopes'];
  return {
    authenticated: true,
    rateLimit,
    scopes:
      typeof scopesHeader !== 'string'
        ? null
        : scopesHeader
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean),
    repository: parseRepoInfo(res.data),
  };
}

type PageFetch = (page: number, perPage: number) => Promise<{ items: unknown[]; link: unknown }>;

/** Walk pages by the `next` relation until the limit; only its page number is ever used. */
async function paginate(limit: number, fetchPage: PageFetch): Promise<ReadResult> {
  const perPage = Math.min(100, limit);
  const items: unknown[] = [];
  let page = 1;
  let pagesFetched = 0;
  let truncated = false;
  for (;;) {
    const result = await fetchPage(page, perPage);
    pagesFetched++;
    const next = nextPage(result.link, page);
    const room = limit - items.length;
    items.push(...result.items.slice(0, room));
    if (result.items.length > room) truncated = true;
    if (next === null) break;
    if (items.length >= limit || pagesFetched >= MAX_LIST_PAGES) {
      truncated = true;
      break;
    }
    page = next;
  }
  return { data: items, page: { limit, returned: items.length, truncated, pagesFetched } };
}

/**
 * The page number of the `rel="next"` link. The link's URL itself is never requested: it comes
 * from the upstream response and could name any host.
 */
export function nextPage(link: unknown, current: number): number | null {
  if (typeof link !== 'string') return null;
  for (const part of link.split(',')) {
    const match = /<([^>]*)>\s*;\s*rel="?next"?/.exec(part);
    if (!match?.[1] || !URL.canParse(match[1])) continue;
    const page = Number(new URL(match[1]).searchParams.get('page'));
    if (Number.isSafeInteger(page) && page > current) return page;
  }
  return null;
}
