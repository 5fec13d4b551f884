import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  BROKER_FAILURE_KINDS,
  loadConfig,
  startBroker,
  type AuditRecord,
  type BrokerFailureKind,
  type RunningBroker,
} from '../src/index.js';
import { FakeGithub } from './fake-github.js';

export const REPO = 'acme/widgets';
/** A complete `pr-preflight` invocation against REPO (append `--dry-run` for the plan). */
export const PREFLIGHT_ARGS: readonly string[] = [
  'pr-preflight',
  '--repo',
  REPO,
  '--base',
  'main',
  '--head',
  'fix/crash',
  '--issue',
  '1',
];
export const OTHER_REPO = 'acme/gadgets';

/** A distinctive token value; tests search every output for it and its encodings. */
export function plantedToken(): string {
  return `ghp_CANARY${randomBytes(16).toString('hex')}`;
}

export interface Reply<T = any> {
  status: number;
  body: T;
  raw: string;
  headers: Headers;
}

export interface TestBroker {
  broker: RunningBroker;
  url: string;
  fake: FakeGithub;
  token: string;
  dir: string;
  auditPath: string;
  /** Every operational log line the broker wrote. */
  logs: string[];
  audit(): Promise<AuditRecord[]>;
  auditText(): Promise<string>;
  cli(body: unknown, init?: RequestInit): Promise<Reply>;
  preflight(body: unknown): Promise<Reply>;
  get(path: string): Promise<Reply>;
  close(): Promise<void>;
}

export interface TestBrokerOptions {
  env?: Record<string, string>;
  /** Share one fake between brokers; otherwise a fresh one is started and closed. */
  fake?: FakeGithub;
  token?: string;
}

/** A real broker on a loopback port 0, in front of the fake code host, with a file credential. */
export async function startTestBroker(options: TestBrokerOptions = {}): Promise<TestBroker> {
  const token = options.token ?? plantedToken();
  const ownFake = !options.fake;
  const fake = options.fake ?? (await FakeGithub.start({ token }));
  if (ownFake) seedRepo(fake);
  const dir = await mkdtemp(join(tmpdir(), 'auth-broker-test-'));
  const tokenPath = join(dir, 'codehost-token');
  await writeFile(tokenPath, `${token}\n`, { mode: 0o600 });
  const auditPath = join(dir, 'audit.jsonl');
  const env: Record<string, string> = {
    AUTH_BROKER_HOST: '127.0.0.1',
    AUTH_BROKER_PORT: '0',
    AUTH_BROKER_CODEHOST_CREDENTIAL_REF: `file:${tokenPath}`,
    AUTH_BROKER_ALLOWED_REPOS: `${REPO},${OTHER_REPO}`,
    AUTH_BROKER_AUDIT_LOG: auditPath,
    AUTH_BROKER_CODEHOST_API_URL: fake.url,
    AUTH_BROKER_UPSTREAM_RETRIES: '0',
    AUTH_BROKER_UPSTREAM_TIMEOUT_MS: '3000',
    AUTH_BROKER_LOG_LEVEL: 'info',
    ...options.env,
  };
  const logs: string[] = [];
  const broker = await startBroker(loadConfig(env), {
    env,
    logDestination: { write: (line: string) => void logs.push(line) },
  });
  const send = async (path: string, init: RequestInit): Promise<Reply> => {
    const res = await fetch(`${broker.url}${path}`, init);
    const raw = await res.text();
    let body: unknown = raw;
    try {
      body = JSON.parse(raw);
    } catch {
      // left as text; a test that expects JSON will say so
    }
    return { status: res.status, body, raw, headers: res.headers };
  };
  const post = (path: string, body: unknown, init: RequestInit = {}) =>
    send(path, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: typeof body === 'string' ? body : JSON.stringify(body),
      ...init,
    });
  const auditText = () => readFile(auditPath, 'utf8').catch(() => '');
  return {
    broker,
    url: broker.url,
    fake,
    token,
    dir,
    auditPath,
    logs,
    auditText,
    async audit() {
      return (await auditText())
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as AuditRecord);
    },
    cli: (body, init) => post('/v1/codehost/cli', body, init),
    preflight: (body) => post('/v1/codehost/pr-preflight', body),
    get: (path) => send(path, { method: 'GET' }),
    async close() {
      await broker.close();
      if (ownFake) await fake.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The standard repository: issues #1-#3 interleaved with pull requests #4-#5, plus enough
 * issues to need several pages.
 */
export function seedRepo(fake: FakeGithub): void {
  fake.addRepo(REPO);
  fake.addRepo(OTHER_REPO, { private: false });
  fake.addIssue(REPO, { title: 'Crash on start', body: 'Steps:\n1. start', labels: ['bug'] });
  fake.addIssue(REPO, { title: 'Docs typo', labels: ['docs'] });
  fake.addIssue(REPO, { title: 'Old request', state: 'closed' });
  fake.addPull(REPO, { title: 'Fix crash', head: 'fix/crash', body: 'Closes #1' });
  fake.addPull(REPO, { title: 'Draft refactor', head: 'refactor', draft: true });
}

/** The request log of the fake, as `METHOD /path` lines. */
export function upstreamLines(fake: FakeGithub): string[] {
  return fake.requests.map((r) => `${r.method} ${r.path}`);
}

/** Wait until `check` passes or the time runs out. */
export async function eventually(
  check: () => boolean | Promise<boolean>,
  timeoutMs = 5000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The reply is the spec's failure envelope for `kind`, with the registered status and hints. */
export function assertFailure(res: Reply, kind: BrokerFailureKind, degradedReason?: string): void {
  const spec = BROKER_FAILURE_KINDS[kind];
  assert.equal(res.status, spec.httpStatus, `${kind}: ${res.raw}`);
  assert.equal(res.body.ok, false);
  assert.equal(res.body.failureKind, kind, res.raw);
  assert.equal(res.body.runnerDisposition, spec.runnerDisposition);
  assert.equal(res.body.retryable, spec.retryable);
  assert.equal(typeof res.body.message, 'string');
  assert.match(res.body.requestId, UUID_PATTERN);
  assert.ok(Array.isArray(res.body.next) && res.body.next.length > 0, 'next actions are offered');
  assert.equal(res.headers.get('x-request-id'), res.body.requestId);
  if (degradedReason !== undefined) assert.equal(res.body.degradedReason, degradedReason, res.raw);
}
