import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * The wire side of the fake code host: resource JSON as GitHub's REST API writes it, and the
 * failure responses it can produce (status codes and headers as GitHub sends them).
 */
export type Fault =
  | 'rate-limit-primary'
  | 'rate-limit-429'
  | 'secondary-rate-limit'
  | 'not-found'
  | 'bad-credentials'
  | 'forbidden'
  | 'scope-missing'
  | 'permission-missing'
  | 'malformed-json'
  | 'wrong-shape'
  | 'reset'
  | 'server-error'
  | 'moved'
  | 'slow'
  | 'echo-secrets';

export interface FakeIssue {
  number: number;
  title: string;
  body: string | null;
  state: 'open' | 'closed';
  labels: string[];
  author: string;
  createdAt: string;
  /** Set for entries that are pull requests (GitHub lists them on the issues endpoint). */
  pull?: { head: string; base: string; draft: boolean; mergedAt: string | null; sha: string };
}

export interface FakeRepo {
  id: number;
  owner: string;
  name: string;
  private: boolean;
  defaultBranch: string;
  items: FakeIssue[];
}
export type JsonWriter = (
  res: ServerResponse,
  status: number,
  body: unknown,
  headers?: Record<string, string>,
) => void;

export const NOT_FOUND = {
  message: 'Not Found',
  documentation_url: 'https://docs.github.com/rest',
  status: '404',
};

export function repoJson(repo: FakeRepo) {
  return {
    id: repo.id,
    name: repo.name,
    full_name: `${repo.owner}/${repo.name}`,
    owner: { login: repo.owner, id: 1, type: 'Organization' },
    private: repo.private,
    visibility: repo.private ? 'private' : 'public',
    default_branch: repo.defaultBranch,
    archived: false,
    permissions: { admin: false, maintain: false, push: true, triage: true, pull: true },
    html_url: `https://github.example/${repo.owner}/${repo.name}`,
  };
}

export function issueJson(baseUrl: string, repo: FakeRepo, item: FakeIssue) {
  const html = `https://github.example/${repo.owner}/${repo.name}`;
  return {
    id: repo.id * 10_000 + item.number,
    node_id: `I_${item.number}`,
    number: item.number,
    title: item.title,
    body: item.body,
    state: item.state,
    state_reason: item.state === 'closed' ? 'completed' : null,
    user: { login: item.author, id: 7, type: 'User' },
    labels: item.labels.map((name, i) => ({ id: i + 1, name, color: 'ededed' })),
    assignees: [],
    milestone: null,
    locked: false,
    comments: 0,
    html_url: `${html}/${item.pull ? 'pull' : 'issues'}/${item.number}`,
    created_at: item.createdAt,
    updated_at: item.createdAt,
    closed_at: item.state === 'closed' ? item.createdAt : null,
    ...(item.pull
      ? {
          pull_request: {
            url: `${baseUrl}/repos/${repo.owner}/${repo.name}/pulls/${item.number}`,
            html_url: `${html}/pull/${item.number}`,
            merged_at: item.pull.mergedAt,
          },
        }
      : {}),
  };
}

export function pullJson(repo: FakeRepo, item: FakeIssue) {
  const pull = item.pull!;
  const full = `${repo.owner}/${repo.name}`;
  return {
    id: repo.id * 10_000 + item.number,
    number: item.number,
    title: item.title,
    body: item.body,
    state: item.state,
    user: { login: item.author, id: 7, type: 'User' },
    labels: [],
    assignees: [],
    milestone: null,
    locked: false,
    draft: pull.draft,
    head: { ref: pull.head, sha: pull.sha, repo: { full_name: full } },
    base: { ref: pull.base, sha: 'b'.repeat(40), repo: { full_name: full } },
    html_url: `https://github.example/${full}/pull/${item.number}`,
    created_at: item.createdAt,
    updated_at: item.createdAt,
    closed_at: item.state === 'closed' ? item.createdAt : null,
    merged_at: pull.mergedAt,
  };
}

/** Answer one request with `fault` instead of the real response. */
export function writeFault(
  fault: Fault,
  req: IncomingMessage,
  res: ServerResponse,
  authorization: string | null,
  context: { baseUrl: string; slowMs: number; json: JsonWriter },
): void {
  const { baseUrl, slowMs, json } = context;
  const reset = String(Math.floor(Date.now() / 1000) + 120);
  switch (fault) {
    case 'rate-limit-primary':
      json(
        res,
        403,
        {
          message: 'API rate limit exceeded for installation.',
          documentation_url: 'https://docs.github.com/rest/rate-limit',
        },
        { 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': reset, 'x-ratelimit-used': '5000' },
      );
      return;
    case 'rate-limit-429':
      json(
        res,
        429,
        { message: 'Too Many Requests' },
        { 'retry-after': '7', 'x-ratelimit-remaining': '12' },
      );
      return;
    case 'secondary-rate-limit':
      json(
        res,
        403,
        {
          message:
            'You have exceeded a secondary rate limit. Please wait a few minutes before you try again.',
        },
        { 'retry-after': '42', 'x-ratelimit-remaining': '4000' },
      );
      return;
    case 'not-found':
      json(res, 404, NOT_FOUND);
      return;
    case 'bad-credentials':
      json(res, 401, {
        message: 'Bad credentials',
        documentation_url: 'https://docs.github.com/rest',
      });
      return;
    case 'forbidden':
      json(res, 403, { message: 'Must have admin rights to Repository.' });
      return;
    case 'scope-missing':
      json(
        res,
        403,
        { message: 'Resource not accessible by personal access token' },
        { 'x-accepted-oauth-scopes': 'repo', 'x-oauth-scopes': 'read:org, gist' },
      );
      return;
    case 'permission-missing':
      json(
        res,
        403,
        { message: 'Resource not accessible by integration' },
        { 'x-accepted-github-permissions': 'issues=read; pull_requests=read' },
      );
      return;
    case 'malformed-json':
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' });
      res.end('{"number": 1, "title": "truncated');
      return;
    case 'wrong-shape':
      json(res, 200, { number: 'one', title: 42, state: null });
      return;
    case 'reset':
      req.socket.destroy();
      return;
    case 'server-error':
      res.writeHead(502, { 'content-type': 'text/html' });
      res.end('<html><body>Bad gateway</body></html>');
      return;
    case 'moved':
      json(
        res,
        301,
        {
          message: 'Moved Permanently',
          url: `${baseUrl}/repositories/1`,
          documentation_url: 'x',
        },
        { location: 'http://127.0.0.2:9/elsewhere' },
      );
      return;
    case 'slow':
      setTimeout(() => json(res, 200, {}), slowMs).unref();
      return;
    case 'echo-secrets':
      // A hostile or buggy upstream reflecting the credential back in every form.
      json(
        res,
        401,
        {
          message: `Bad credentials: ${authorization ?? ''} ${Buffer.from(authorization ?? '').toString('base64')}`,
        },
        { 'x-echo': authorization ?? '', 'set-cookie': `session=${authorization ?? ''}` },
      );
      return;
  }
}
