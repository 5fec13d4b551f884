import { spawn } from 'node:child_process';
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redactor, ServiceError, sanitizeUrl, type Env } from '@svc/contracts';

/**
 * The one place assembly starts `git`: argv arrays (never a shell), a minimal environment that
 * ignores system and user configuration (so no credential helper, `insteadOf` rewrite or hook
 * from the image can take part), a timeout that kills the whole process group, and stderr that
 * is redacted before anyone sees it.
 *
 * A fetch credential travels only in this process's environment, as `GIT_CONFIG_*` entries
 * setting `http.extraHeader`; it never appears in a URL, in argv, in an event or in an error.
 */

/** Values read from the projected `credentialRef` Secret; used for one repository's fetch. */
export type GitCredential =
  | { token: string; username?: string; scheme?: 'basic' | 'bearer' }
  | { username: string; password: string };

export interface GitSpawnInfo {
  argv: readonly string[];
  /** Names only: values may hold the credential header. */
  envNames: readonly string[];
  cwd: string | undefined;
}

export interface GitObserver {
  onSpawn?(info: GitSpawnInfo): void;
}

export interface GitRunnerOptions {
  binary?: string | undefined;
  observer?: GitObserver | undefined;
  /** Environment to take PATH, proxy and TLS settings from; default process.env. */
  env?: Env | undefined;
  /** Schemes git may use (GIT_ALLOW_PROTOCOL); `ext::` and friends are never allowed. */
  allowedProtocols?: readonly string[] | undefined;
}

export interface GitRunOptions {
  cwd?: string | undefined;
  timeoutMs: number;
  credential?: GitCredential | undefined;
  /** Extra `-c`-style settings passed through the environment, never argv. */
  config?: ReadonlyArray<readonly [string, string]>;
}

export interface GitOutput {
  stdout: string;
  stderr: string;
}

/** A failed git command; `stderr` is already redacted and bounded. */
export class GitCommandError extends Error {
  constructor(
    readonly command: string,
    readonly exitCode: number | null,
    readonly stderr: string,
    readonly timedOut: boolean,
  ) {
    super(
      timedOut
        ? `git ${command} timed out`
        : `git ${command} failed (exit ${exitCode ?? 'signal'}): ${stderr}`,
    );
    this.name = 'GitCommandError';
  }
}

const PASSTHROUGH_ENV = [
  'PATH',
  'TMPDIR',
  'HOME',
  'HTTP_PROXY',
  'HTTPS_PROXY',
  'NO_PROXY',
  'http_proxy',
  'https_proxy',
  'no_proxy',
  'GIT_SSL_CAINFO',
  'SSL_CERT_FILE',
  'SSL_CERT_DIR',
  'SSH_AUTH_SOCK',
  'SVC_TEST_TAG',
];
const STDOUT_CAP = 32 * 1024 * 1024;
const STDERR_KEEP = 64 * 1024;
const STDERR_SHOWN = 2000;

export const DEFAULT_ALLOWED_PROTOCOLS = ['https', 'http', 'ssh', 'git', 'file'] as const;

export class GitRunner {
  readonly redactor = new Redactor();
  readonly #binary: string;
  readonly #observer: GitObserver | undefined;
  readonly #env: Env;
  readonly #protocols: string;

  constructor(options: GitRunnerOptions = {}) {
    this.#binary = options.binary ?? 'git';
    this.#observer = options.observer;
    this.#env = options.env ?? process.env;
    this.#protocols = (options.allowedProtocols ?? DEFAULT_ALLOWED_PROTOCOLS).join(':');
  }

  /** Register a credential's values (and the header built from them) for redaction. */
  registerCredential(credential: GitCredential): void {
    const header = authorizationHeader(credential);
    this.redactor.add(header).add(header.replace(/^Authorization: \S+ /, ''));
    if ('token' in credential) this.redactor.add(credential.token);
    else this.redactor.add(credential.password);
  }

  /** Redact registered values and URL credentials from text shown to callers. */
  clean(text: string): string {
    return this.redactor
      .redact(text)
      .replace(/[a-z][a-z0-9+.-]*:\/\/[^\s'"]+/gi, (url) => sanitizeUrl(url));
  }

  run(args: readonly string[], options: GitRunOptions): Promise<GitOutput> {
    const env = this.#buildEnv(options, args);
    const command = args.find((a) => !a.startsWith('-')) ?? 'git';
    this.#observer?.onSpawn?.({
      argv: [this.#binary, ...args],
      envNames: Object.keys(env).sort(),
      cwd: options.cwd,
    });
    return new Promise((resolve, reject) => {
      const child = spawn(this.#binary, [...args], {
        cwd: options.cwd,
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
        // Own process group: a timeout kills git and its transport helpers together.
        detached: true,
      });
      const out: Buffer[] = [];
      let outBytes = 0;
      let err = '';
      let timedOut = false;
      let overflow = false;
      const killGroup = () => {
        try {
          if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
        } catch {
          // already gone
        }
      };
      const timer = setTimeout(() => {
        timedOut = true;
        killGroup();
      }, options.timeoutMs);
      child.stdout.on('data', (chunk: Buffer) => {
        outBytes += chunk.length;
        if (outBytes > STDOUT_CAP) {
          overflow = true;
          killGroup();
          return;
        }
        out.push(chunk);
      });
      child.stderr.on('data', (chunk: Buffer) => {
        err = (err + chunk.toString('utf8')).slice(-STDERR_KEEP);
      });
      child.on('error', (error) => {
        clearTimeout(timer);
        const code = (error as { code?: string }).code;
        reject(
          new ServiceError(
            'infra-failed',
            `cannot start git (${code ?? 'spawn error'}); the runner image must provide it`,
          ),
        );
      });
      child.on('close', (code) => {
        clearTimeout(timer);
        const stderr = this.#shownStderr(err);
        if (timedOut) reject(new GitCommandError(command, code, stderr, true));
        else if (overflow) reject(new GitCommandError(command, code, 'output over the cap', false));
        else if (code !== 0) reject(new GitCommandError(command, code, stderr, false));
        else resolve({ stdout: Buffer.concat(out).toString('utf8'), stderr });
      });
    });
  }

  #shownStderr(raw: string): string {
    const text = this.clean(raw).trim();
    return text.length > STDERR_SHOWN ? `…${text.slice(-STDERR_SHOWN)}` : text;
  }

  #buildEnv(options: GitRunOptions, args: readonly string[]): Record<string, string> {
    const env: Record<string, string> = {};
    for (const name of PASSTHROUGH_ENV) {
      const value = this.#env[name];
      if (value !== undefined) env[name] = value;
    }
    Object.assign(env, {
      LC_ALL: 'C',
      GIT_CONFIG_NOSYSTEM: '1',
      GIT_CONFIG_GLOBAL: trustedMirrorConfig(args),
      GIT_TERMINAL_PROMPT: '0',
      GIT_ALLOW_PROTOCOL: this.#protocols,
      GIT_SSH_COMMAND: 'ssh -o BatchMode=yes',
    });
    const config: Array<readonly [string, string]> = [
      // An empty value resets the helper list: no helper may answer for this fetch.
      ['credential.helper', ''],
      ['core.hooksPath', '/dev/null'],
      ['advice.detachedHead', 'false'],
      ...(options.config ?? []),
    ];
    if (options.credential) {
      config.push(['http.extraHeader', authorizationHeader(options.credential)]);
      // The header must not follow a redirect to another host.
      config.push(['http.followRedirects', 'false']);
    }
    env['GIT_CONFIG_COUNT'] = String(config.length);
    config.forEach(([key, value], i) => {
      env[`GIT_CONFIG_KEY_${i}`] = key;
      env[`GIT_CONFIG_VALUE_${i}`] = value;
    });
    return env;
  }
}

/**
 * A local mirror (a `file://` URL, only ever one the operator listed) is usually owned by
 * another user than the runner's (a sandboxed runner has its own uid), and git refuses to read
 * such a repository unless a global or system config lists it in `safe.directory`; `-c` and
 * GIT_CONFIG_* do not reach the repository side of a local fetch. So a fetch from one gets a
 * global config naming exactly that repository, and nothing else.
 */
function trustedMirrorConfig(args: readonly string[]): string {
  const paths = args.filter((a) => a.startsWith('file://')).map(localPath);
  if (paths.length === 0) return '/dev/null';
  const text = `[safe]\n${paths.map((p) => `\tdirectory = ${p}\n`).join('')}`;
  let file = trustFiles.get(text);
  if (!file) {
    // A private directory: a shared temp dir must not let anyone plant this config first.
    trustDir ??= mkdtempSync(join(tmpdir(), 'svc-git-'));
    file = join(trustDir, `config-${trustFiles.size}`);
    writeFileSync(file, text, { mode: 0o600 });
    trustFiles.set(text, file);
  }
  return file;
}

const trustFiles = new Map<string, string>();
let trustDir: string | undefined;
process.once('exit', () => {
  if (trustDir) rmSync(trustDir, { recursive: true, force: true });
});

function localPath(url: string): string {
  const path = decodeURIComponent(new URL(url).pathname).replace(/\/+$/, '');
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

export function authorizationHeader(credential: GitCredential): string {
  if ('password' in credential) {
    return `Authorization: Basic ${basic(credential.username, credential.password)}`;
  }
  if (credential.scheme === 'bearer') return `Authorization: Bearer ${credential.token}`;
  // Code hosts take a token as the password of HTTP Basic; the user name is conventional.
  return `Authorization: Basic ${basic(credential.username ?? 'x-access-token', credential.token)}`;
}

function basic(username: string, password: string): string {
  return Buffer.from(`${username}:${password}`).toString('base64');
}

/**
 * Build a credential from the data of the projected Secret (keys `token`, or `username` and
 * `password`). Missing values are `secret-unavailable`; values are never echoed.
 */
export function gitCredentialFromSecret(
  data: Readonly<Record<string, string | undefined>>,
  secretName: string,
): GitCredential {
  const token = data['token']?.trim();
  const username = data['username']?.trim();
  const password = data['password'];
  if (token) return username ? { token, username } : { token };
  if (username && password) return { username, password };
  throw new ServiceError(
    'secret-unavailable',
    `resource credential Secret ${secretName} has neither key token nor keys username and password`,
    { secretRef: secretName, keysPresent: Object.keys(data).sort(), valuesPrinted: false },
  );
}
