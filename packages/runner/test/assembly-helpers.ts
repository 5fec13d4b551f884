import { execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { dirname, join, normalize } from 'node:path';
import assert from 'node:assert/strict';
import { ServiceError } from '@svc/contracts';

/**
 * Real git repositories for assembly tests: working repositories with branches, tags and a
 * commit that is no tip, bare copies served over file://, and a private repository behind
 * `git http-backend` on loopback that demands Basic or Bearer authentication.
 */
export const REPO_TOOLS_DIR = join(import.meta.dirname, '../../../tools');

/** The ServiceError `work` fails with (of `kind`, when given); any other outcome fails the test. */
export async function serviceFailure(
  work: Promise<unknown> | (() => unknown),
  kind?: string,
): Promise<ServiceError> {
  let caught: unknown;
  try {
    await (typeof work === 'function' ? work() : work);
  } catch (error) {
    caught = error;
  }
  assert.ok(caught instanceof ServiceError, `expected a ServiceError, got ${String(caught)}`);
  if (kind !== undefined) assert.equal(caught.failureKind, kind, caught.message);
  return caught;
}

const GIT_ENV = {
  PATH: process.env['PATH'] ?? '/usr/bin:/bin',
  HOME: tmpdir(),
  LC_ALL: 'C',
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 'Fixture',
  GIT_AUTHOR_EMAIL: 'fixture@example.test',
  GIT_COMMITTER_NAME: 'Fixture',
  GIT_COMMITTER_EMAIL: 'fixture@example.test',
};

export function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', args, { cwd, env: GIT_ENV, encoding: 'utf8' }).trim();
}

export async function tempDir(label: string): Promise<string> {
  return realpathSync(await mkdtemp(join(tmpdir(), `svc-asm-${label}-`)));
}

export async function removeDir(dir: string): Promise<void> {
  await rm(dir, { recursive: true, force: true });
}

export type FileSpec = string | { symlink: string } | { content: string; mode: number } | null;

export function writeFiles(root: string, files: Record<string, FileSpec>): void {
  for (const [path, spec] of Object.entries(files)) {
    const abs = join(root, path);
    rmSync(abs, { recursive: true, force: true });
    if (spec === null) continue;
    mkdirSync(dirname(abs), { recursive: true });
    if (typeof spec === 'string') writeFileSync(abs, spec);
    else if ('symlink' in spec) symlinkSync(spec.symlink, abs);
    else {
      writeFileSync(abs, spec.content);
      chmodSync(abs, spec.mode);
    }
  }
}

export function initRepo(dir: string, branch = 'main'): string {
  mkdirSync(dir, { recursive: true });
  git(dir, 'init', '-q', '-b', branch);
  return dir;
}

/** Write files (null deletes), commit everything, return the commit id. */
export function commit(repo: string, files: Record<string, FileSpec>, message: string): string {
  writeFiles(repo, files);
  git(repo, 'add', '-A');
  git(repo, 'commit', '-q', '--allow-empty', '-m', message);
  return git(repo, 'rev-parse', 'HEAD');
}

/** A bare copy with every branch and tag; returns its path. */
export function bareCopy(repo: string, bare: string): string {
  git(dirname(bare), 'clone', '-q', '--bare', '--no-local', repo, bare);
  return bare;
}

export const fileUrl = (path: string) => `file://${path}`;

export interface LabRepo {
  work: string;
  bare: string;
  url: string;
  /** main: c1 -> c2 (annotated tag v1) -> c3 (tip); feature: c1 -> f1. c1 is no tip. */
  c1: string;
  c2: string;
  c3: string;
  f1: string;
  /** In the bare repository's object store but reachable from no ref. */
  dangling: string;
}

/**
 * The lab resource repository: tools (with the repository's own tran, trans, apply_patch),
 * skills (one multi-file), prompts, and at the tip a symlink to /etc that nothing reads.
 */
export function makeLabRepo(root: string): LabRepo {
  const work = initRepo(join(root, 'lab-work'));
  const c1 = commit(
    work,
    {
      'README.md': 'lab v1\n',
      'tools/hello': { content: '#!/bin/sh\necho hello from the lab\n', mode: 0o644 },
      'tools/helper.txt': 'support file, no shebang\n',
      'tools/lib/util.sh': 'util() { :; }\n',
      'skills/alpha/SKILL.md':
        '---\nname: alpha\ndescription: Alpha skill does the first thing.\n---\n# Alpha\nBody text.\n',
      'skills/alpha/reference.md': 'alpha reference\n',
      'skills/alpha/scripts/run.sh': { content: '#!/bin/sh\necho alpha\n', mode: 0o755 },
      'skills/beta/SKILL.md': '# Beta\n\nBeta summary from the body.\n',
      'prompts/base.md': 'Always use the standard entry points.\n',
      'prompts/style.md': 'Never touch forbidden paths.\n',
      'docs/guide.md': 'guide\n',
    },
    'c1',
  );
  cpSync(REPO_TOOLS_DIR, join(work, 'tools'), { recursive: true });
  const c2 = commit(work, { 'README.md': 'lab v2\n' }, 'c2 with platform tools');
  git(work, 'tag', '-a', 'v1', '-m', 'release v1');
  const c3 = commit(work, { 'README.md': 'lab v3\n', 'etc-link': { symlink: '/etc' } }, 'c3');
  git(work, 'checkout', '-q', '-b', 'feature', c1);
  const f1 = commit(work, { 'FEATURE.md': 'feature\n' }, 'f1');
  git(work, 'checkout', '-q', '-b', 'doomed', c3);
  const dangling = commit(work, { 'SECRET-PLAN.md': 'unreachable\n' }, 'dangling');
  git(work, 'checkout', '-q', 'main');
  const bare = bareCopy(work, join(root, 'lab.git'));
  git(bare, 'update-ref', '-d', 'refs/heads/doomed');
  git(work, 'branch', '-q', '-D', 'doomed');
  return { work, bare, url: fileUrl(bare), c1, c2, c3, f1, dangling };
}

/** A second repository: another skill and a config file. */
export function makeExtraRepo(root: string): { bare: string; url: string; commit: string } {
  const work = initRepo(join(root, 'extra-work'));
  const id = commit(
    work,
    {
      'skills/gamma/SKILL.md': '---\ndescription: >\n  Gamma skill, folded\n  description.\n---\n',
      'skills/gamma/scripts/go.sh': '#!/bin/sh\necho gamma\n',
      'config/settings.json': '{"extra":true}\n',
    },
    'extra c1',
  );
  git(work, 'checkout', '-q', '-b', 'stable');
  commit(work, { 'config/settings.json': '{"extra":"stable"}\n' }, 'stable');
  git(work, 'checkout', '-q', 'main');
  const bare = bareCopy(work, join(root, 'extra.git'));
  return { bare, url: fileUrl(bare), commit: id };
}

export interface GitHttpServer {
  /** Base URL; a repository `x.git` under the project root is `${url}/x.git`. */
  url: string;
  requests: Array<{ method: string; path: string; authorized: boolean }>;
  close(): Promise<void>;
}

export interface GitHttpOptions {
  projectRoot: string;
  basic?: { username: string; password: string };
  bearer?: string;
  /** false: ignore the client's protocol v2 request, as older servers do. */
  protocolV2?: boolean;
  /** Serve the repository as static files (the dumb HTTP protocol) instead of http-backend. */
  dumb?: boolean;
}

/** `git http-backend` behind a loopback HTTP server that requires Basic or Bearer auth. */
export async function startGitHttpServer(options: GitHttpOptions): Promise<GitHttpServer> {
  const requests: GitHttpServer['requests'] = [];
  const server: Server = createServer((req, res) => {
    try {
      handle(req, res);
    } catch (error) {
      // A fixture bug answers 500 instead of taking the test process down.
      res.writeHead(500);
      res.end(String(error));
    }
  });
  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const authorized = isAuthorized(req, options);
    requests.push({ method: req.method ?? 'GET', path: url.pathname, authorized });
    if (!authorized) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="private"' });
      res.end('authentication required\n');
      return;
    }
    if (options.dumb) {
      serveStatic(options.projectRoot, url.pathname, res);
      return;
    }
    const env: Record<string, string> = {
      PATH: process.env['PATH'] ?? '/usr/bin:/bin',
      GIT_PROJECT_ROOT: options.projectRoot,
      GIT_HTTP_EXPORT_ALL: '1',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: '/dev/null',
      PATH_INFO: url.pathname,
      QUERY_STRING: url.search.slice(1),
      REQUEST_METHOD: req.method ?? 'GET',
      CONTENT_TYPE: req.headers['content-type'] ?? '',
      REMOTE_ADDR: '127.0.0.1',
      REMOTE_USER: 'fixture',
    };
    const encoding = req.headers['content-encoding'];
    if (typeof encoding === 'string') env['HTTP_CONTENT_ENCODING'] = encoding;
    const protocol = req.headers['git-protocol'];
    if (options.protocolV2 !== false && typeof protocol === 'string')
      env['GIT_PROTOCOL'] = protocol;
    const cgi = spawn('/usr/lib/git-core/git-http-backend', [], { env });
    const out: Buffer[] = [];
    cgi.stdout.on('data', (chunk: Buffer) => out.push(chunk));
    cgi.stderr.resume();
    req.pipe(cgi.stdin);
    cgi.on('close', () => {
      const raw = Buffer.concat(out);
      const split = raw.indexOf('\r\n\r\n');
      const headEnd = split >= 0 ? split : raw.indexOf('\n\n');
      const sepLen = split >= 0 ? 4 : 2;
      const head = raw.subarray(0, headEnd).toString('latin1');
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.split(/\r?\n/)) {
        const at = line.indexOf(':');
        if (at < 0) continue;
        const name = line.slice(0, at).trim();
        const value = line.slice(at + 1).trim();
        if (name.toLowerCase() === 'status') status = Number(value.split(' ')[0]);
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      res.end(raw.subarray(headEnd + sepLen));
    });
  };
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function serveStatic(root: string, path: string, res: ServerResponse): void {
  const abs = join(root, normalize(path));
  if (!abs.startsWith(`${root}/`) || !existsSync(abs) || !statSync(abs).isFile()) {
    res.writeHead(404);
    res.end('not found\n');
    return;
  }
  res.writeHead(200, { 'content-type': 'application/octet-stream' });
  res.end(readFileSync(abs));
}

function isAuthorized(req: IncomingMessage, options: GitHttpOptions): boolean {
  const header = req.headers.authorization ?? '';
  if (options.bearer && header === `Bearer ${options.bearer}`) return true;
  if (options.basic && header.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice(6), 'base64').toString('utf8');
    return decoded === `${options.basic.username}:${options.basic.password}`;
  }
  return !options.basic && !options.bearer;
}
