import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A stateful fake of the GitHub REST API on loopback: the one edge the broker does not own.
 * It speaks the real wire protocol (JSON bodies, status codes, rate-limit and scope headers,
 * Link pagination with `/repositories/{id}` URLs as GitHub sends them) and records every request
 * it receives. Faults are armed per route to reproduce each failure the code host can produce.
 */
export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  authorization: string | null;
  headers: Record<string, string | string[] | undefined>;
}

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

interface ArmedFault {
  fault: Fault;
  match: RegExp;
  remaining: number;
}

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

export interface FakeGithubOptions {
  token: string;
  /** Classic-token scopes reported in x-oauth-scopes. */
  scopes?: string[];
}

export class FakeGithub {
  readonly requests: RecordedRequest[] = [];
  readonly repos = new Map<string, FakeRepo>();
  token: string;
  scopes: string[];
  rateRemaining = 4999;
  /** Delay for the `slow` fault. */
  slowMs = 2000;
  #faults: ArmedFault[] = [];
  #server: Server;
  #nextRepoId = 1000;
  url = '';

  private constructor(options: FakeGithubOptions) {
    this.token = options.token;
    this.scopes = options.scopes ?? ['repo', 'read:org'];
    this.#server = createServer((req, res) => this.#handle(req, res));
  }

  static async start(options: FakeGithubOptions): Promise<FakeGithub> {
    const fake = new FakeGithub(options);
    await new Promise<void>((resolve) => fake.#server.listen(0, '127.0.0.1', resolve));
    fake.url = `http://127.0.0.1:${(fake.#server.address() as AddressInfo).port}`;
    return fake;
  }

  close(): Promise<void> {
    this.#server.closeAllConnections();
    return new Promise((resolve) => this.#server.close(() => resolve()));
  }

  addRepo(fullName: string, options: { private?: boolean; defaultBranch?: string } = {}): FakeRepo {
    const [owner = '', name = ''] = fullName.split('/');
    const repo: FakeRepo = {
      id: this.#nextRepoId++,
      owner,
      name,
      private: options.private ?? true,
      defaultBranch: options.defaultBranch ?? 'main',
      items: [],
    };
    this.repos.set(fullName.toLowerCase(), repo);
    return repo;
  }

  addIssue(fullName: string, issue: Partial<FakeIssue> & { title: string }): FakeIssue {
    const repo = this.#repo(fullName);
    const item: FakeIssue = {
      number: repo.items.length + 1,
      body: null,
      state: 'open',
      labels: [],
      author: 'octocat',
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, repo.items.length)).toISOString(),
      ...issue,
    };
    repo.items.push(item);
    return item;
  }

  addPull(
    fullName: string,
    pull: {
      title: string;
      head: string;
      base?: string;
      draft?: boolean;
      merged?: boolean;
      state?: 'open' | 'closed';
      body?: string;
    },
  ): FakeIssue {
    return this.addIssue(fullName, {
      title: pull.title,
      body: pull.body ?? null,
      state: pull.state ?? (pull.merged ? 'closed' : 'open'),
      pull: {
        head: pull.head,
        base: pull.base ?? 'main',
        draft: pull.draft ?? false,
        mergedAt: pull.merged ? '2026-02-01T00:00:00Z' : null,
        sha: 'a'.repeat(40),
      },
    });
  }

  /** Arm a fault for requests whose path matches; `times` defaults to every request. */
  fault(fault: Fault, match: RegExp = /.*/, times = Number.POSITIVE_INFINITY): void {
    this.#faults.push({ fault, match, remaining: times });
  }

  clearFaults(): void {
    this.#faults = [];
  }

  /** Forget recorded requests (state stays). */
  resetLog(): void {
    this.requests.length = 0;
  }

  #repo(fullName: string): FakeRepo {
    const repo = this.repos.get(fullName.toLowerCase());
    if (!repo) throw new Error(`fake: no repo ${fullName}`);
    return repo;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', this.url);
    const authorization = req.headers.authorization ?? null;
    this.requests.push({
      method: req.method ?? '',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      authorization,
      headers: { ...req.headers },
    });
    req.resume();
    const armed = this.#faults.find((f) => f.remaining > 0 && f.match.test(url.pathname));
    if (armed) {
      armed.remaining--;
      this.#applyFault(armed.fault, req, res, authorization);
      return;
    }
    if (!this.#authorized(authorization)) {
      this.#json(res, 401, {
        message: 'Bad credentials',
        documentation_url: 'https://docs.github.com/rest',
        status: '401',
      });
      return;
    }
    if (req.method !== 'GET') {
      this.#json(res, 404, { message: 'Not Found', status: '404' });
      return;
    }
    this.#route(url, res);
  }

  #authorized(header: string | null): boolean {
    return header === `token ${this.token}` || header === `Bearer ${this.token}`;
  }

  #route(url: URL, res: ServerResponse): void {
    const path = url.pathname;
    if (path === '/rate_limit') {
      const core = this.#core();
      this.#json(res, 200, { resources: { core, search: { ...core, limit: 30 } }, rate: core });
      return;
    }
    const m = /^\/repos\/([^/]+)\/([^/]+)(?:\/(issues|pulls)(?:\/(\d+))?)?$/.exec(path);
    const repo = m
      ? this.repos.get(`${decodeURIComponent(m[1]!)}/${decodeURIComponent(m[2]!)}`.toLowerCase())
      : undefined;
    if (!m || !repo) {
      this.#notFound(res);
      return;
    }
    const [, , , collection, number] = m;
    if (!collection) {
      this.#json(res, 200, this.#repoJson(repo));
      return;
    }
    if (number) {
      const item = repo.items.find((i) => i.number === Number(number));
      if (!item || (collection === 'pulls' && !item.pull)) this.#notFound(res);
      else
        this.#json(
          res,
          200,
          collection === 'pulls' ? this.#pullJson(repo, item) : this.#issueJson(repo, item),
        );
      return;
    }
    const state = url.searchParams.get('state') ?? 'open';
    let items = [...repo.items].reverse().filter((i) => state === 'all' || i.state === state);
    if (collection === 'pulls') {
      items = items.filter((i) => i.pull);
      const base = url.searchParams.get('base');
      const head = url.searchParams.get('head');
      if (base) items = items.filter((i) => i.pull!.base === base);
      if (head) items = items.filter((i) => `${repo.owner}:${i.pull!.head}` === head);
    } else {
      const labels = url.searchParams.get('labels');
      if (labels) items = items.filter((i) => labels.split(',').every((l) => i.labels.includes(l)));
    }
    const perPage = Math.min(100, Number(url.searchParams.get('per_page') ?? 30));
    const page = Number(url.searchParams.get('page') ?? 1);
    const slice = items.slice((page - 1) * perPage, page * perPage);
    const last = Math.max(1, Math.ceil(items.length / perPage));
    const headers: Record<string, string> = {};
    const link = this.#link(repo, collection, url.searchParams, page, last);
    if (link) headers['link'] = link;
    this.#json(
      res,
      200,
      slice.map((i) =>
        collection === 'pulls' ? this.#pullJson(repo, i) : this.#issueJson(repo, i),
      ),
      headers,
    );
  }

  /** Link header as GitHub writes it: absolute URLs under /repositories/{id}. */
  #link(
    repo: FakeRepo,
    collection: string,
    params: URLSearchParams,
    page: number,
    last: number,
  ): string {
    const at = (p: number, rel: string) => {
      const q = new URLSearchParams(params);
      q.set('page', String(p));
      return `<${this.url}/repositories/${repo.id}/${collection}?${q.toString()}>; rel="${rel}"`;
    };
    const parts: string[] = [];
    if (page > 1) parts.push(at(page - 1, 'prev'));
    if (page < last) parts.push(at(page + 1, 'next'), at(last, 'last'));
    if (page > 1) parts.push(at(1, 'first'));
    return parts.join(', ');
  }

  #core() {
    return {
      limit: 5000,
      remaining: this.rateRemaining,
      reset: Math.floor(Date.now() / 1000) + 3600,
      used: 5000 - this.rateRemaining,
      resource: 'core',
    };
  }

  #repoJson(repo: FakeRepo) {
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

  #issueJson(repo: FakeRepo, item: FakeIssue) {
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
              url: `${this.url}/repos/${repo.owner}/${repo.name}/pulls/${item.number}`,
              html_url: `${html}/pull/${item.number}`,
              merged_at: item.pull.mergedAt,
            },
          }
        : {}),
    };
  }

  #pullJson(repo: FakeRepo, item: FakeIssue) {
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

  #notFound(res: ServerResponse): void {
    this.#json(res, 404, {
      message: 'Not Found',
      documentation_url: 'https://docs.github.com/rest',
      status: '404',
    });
  }

  #applyFault(
    fault: Fault,
    req: IncomingMessage,
    res: ServerResponse,
    authorization: string | null,
  ): void {
    const reset = String(Math.floor(Date.now() / 1000) + 120);
    switch (fault) {
      case 'rate-limit-primary':
        this.#json(
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
        this.#json(
          res,
          429,
          { message: 'Too Many Requests' },
          { 'retry-after': '7', 'x-ratelimit-remaining': '12' },
        );
        return;
      case 'secondary-rate-limit':
        this.#json(
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
        this.#notFound(res);
        return;
      case 'bad-credentials':
        this.#json(res, 401, {
          message: 'Bad credentials',
          documentation_url: 'https://docs.github.com/rest',
        });
        return;
      case 'forbidden':
        this.#json(res, 403, { message: 'Must have admin rights to Repository.' });
        return;
      case 'scope-missing':
        this.#json(
          res,
          403,
          { message: 'Resource not accessible by personal access token' },
          { 'x-accepted-oauth-scopes': 'repo', 'x-oauth-scopes': 'read:org, gist' },
        );
        return;
      case 'permission-missing':
        this.#json(
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
        this.#json(res, 200, { number: 'one', title: 42, state: null });
        return;
      case 'reset':
        req.socket.destroy();
        return;
      case 'server-error':
        res.writeHead(502, { 'content-type': 'text/html' });
        res.end('<html><body>Bad gateway</body></html>');
        return;
      case 'moved':
        this.#json(
          res,
          301,
          {
            message: 'Moved Permanently',
            url: `${this.url}/repositories/1`,
            documentation_url: 'x',
          },
          { location: 'http://127.0.0.2:9/elsewhere' },
        );
        return;
      case 'slow':
        setTimeout(() => this.#json(res, 200, {}), this.slowMs).unref();
        return;
      case 'echo-secrets':
        // A hostile or buggy upstream reflecting the credential back in every form.
        this.#json(
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

  #json(
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ): void {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': Buffer.byteLength(text),
      'x-github-request-id': `FAKE:${this.requests.length}`,
      'x-ratelimit-limit': '5000',
      'x-ratelimit-remaining': String(this.rateRemaining),
      'x-ratelimit-reset': String(Math.floor(Date.now() / 1000) + 3600),
      'x-ratelimit-resource': 'core',
      'x-oauth-scopes': this.scopes.join(', '),
      'x-accepted-oauth-scopes': 'repo',
      ...headers,
    });
    res.end(text);
  }
}
