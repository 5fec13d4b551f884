import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  issueJson,
  NOT_FOUND,
  pullJson,
  repoJson,
  writeFault,
  type Fault,
  type FakeIssue,
  type FakeRepo,
} from './fake-github-wire.js';

export type { Fault, FakeIssue, FakeRepo } from './fake-github-wire.js';

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

interface ArmedFault {
  fault: Fault;
  match: RegExp;
  remaining: number;
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
      writeFault(armed.fault, req, res, authorization, {
        baseUrl: this.url,
        slowMs: this.slowMs,
        json: (...args) => this.#json(...args),
      });
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
      this.#json(res, 200, repoJson(repo));
      return;
    }
    if (number) {
      const item = repo.items.find((i) => i.number === Number(number));
      if (!item || (collection === 'pulls' && !item.pull)) this.#notFound(res);
      else
        this.#json(
          res,
          200,
          collection === 'pulls' ? pullJson(repo, item) : issueJson(this.url, repo, item),
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
      slice.map((i) => (collection === 'pulls' ? pullJson(repo, i) : issueJson(this.url, repo, i))),
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

  #notFound(res: ServerResponse): void {
    this.#json(res, 404, NOT_FOUND);
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
