// Client of the platform frontend's SSH route (docs/tools.md, "Wire protocol"): one HTTP(S)
// JSON request per command, authenticated with the bearer token from PLATFORM_SSH_CLIENT_TOKEN.
// The token is read only from that variable, sent only in the Authorization header, and
// redacted from everything printed. There is no local shell fallback and no other token source.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

export const PROTOCOL = 'svc.platform-ssh/v1';
export const ROUTE_PATH = '/api/v1/platform-ssh/exec';
export const TOKEN_ENV = 'PLATFORM_SSH_CLIENT_TOKEN';
const MAX_SCRIPT_BYTES = 1024 * 1024;
const MAX_PATCH_BYTES = 8 * 1024 * 1024;
const DEFAULT_TIMEOUT_SECONDS = 600;
const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/** Exit codes of local failures; a completed remote command exits with its own code. */
export const EXIT = {
  'schema-invalid': 2,
  'unsupported-operation': 3,
  'secret-unavailable': 4,
  'auth-failed': 5,
  'infra-failed': 6,
};

export class ToolError extends Error {
  constructor(kind, message, extra = {}) {
    super(message);
    this.kind = kind;
    this.extra = extra;
  }
}

/** Endpoint of the SSH route: PLATFORM_FRONTEND_URL, else the main server host, else its IP. */
export function resolveEndpoint(env) {
  const scheme = env.PLATFORM_MAIN_SERVER_SCHEME?.trim();
  const port = env.PLATFORM_MAIN_SERVER_PORT?.trim();
  let base;
  let source;
  if (env.PLATFORM_FRONTEND_URL?.trim()) {
    base = env.PLATFORM_FRONTEND_URL.trim();
    source = 'PLATFORM_FRONTEND_URL';
  } else if (env.PLATFORM_MAIN_SERVER_HOST?.trim()) {
    base = `${scheme || 'https'}://${withPort(env.PLATFORM_MAIN_SERVER_HOST.trim(), port)}`;
    source = 'PLATFORM_MAIN_SERVER_HOST';
  } else if (env.PLATFORM_MAIN_SERVER_IP?.trim()) {
    const ip = env.PLATFORM_MAIN_SERVER_IP.trim();
    // An IPv6 address needs brackets in a URL.
    const host = ip.includes(':') && !ip.startsWith('[') ? `[${ip}]` : ip;
    base = `${scheme || 'http'}://${withPort(host, port)}`;
    source = 'PLATFORM_MAIN_SERVER_IP';
  } else {
    throw new ToolError(
      'schema-invalid',
      'no platform endpoint: set PLATFORM_FRONTEND_URL, PLATFORM_MAIN_SERVER_HOST or PLATFORM_MAIN_SERVER_IP',
    );
  }
  let url;
  try {
    url = new URL(base);
  } catch {
    throw new ToolError('schema-invalid', `${source} is not a valid address`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ToolError('schema-invalid', `${source} must use http or https`);
  }
  if (url.username || url.password || url.search) {
    throw new ToolError('schema-invalid', `${source} must not carry credentials or a query`);
  }
  url.pathname = `${url.pathname.replace(/\/+$/, '')}${ROUTE_PATH}`;
  return { url: url.toString(), source };
}

function withPort(host, port) {
  if (!port) return host;
  if (/^[^[]*:\d+$/.test(host) || /\]:\d+$/.test(host)) return host;
  return `${host}:${port}`;
}

export function readToken(env) {
  const token = env[TOKEN_ENV];
  if (!token || !token.trim()) {
    throw new ToolError(
      'secret-unavailable',
      `${TOKEN_ENV} is not set: the run needs the platform-ssh tool credential (executionPolicy.secretScope.toolCredentials)`,
    );
  }
  return token.trim();
}

/** Replace the token (and its common encodings) wherever it appears. */
export function redactor(token) {
  if (!token) return (text) => text;
  const forms = [
    token,
    Buffer.from(token).toString('base64'),
    Buffer.from(token).toString('base64url'),
    encodeURIComponent(token),
    JSON.stringify(token).slice(1, -1),
  ].filter((f) => f.length >= 6);
  return (text) => forms.reduce((out, form) => out.split(form).join('[redacted]'), text);
}

export async function readInput(file, what, limit) {
  let data;
  if (file !== undefined) {
    try {
      data = await readFile(file);
    } catch (error) {
      throw new ToolError(
        'schema-invalid',
        `cannot read ${what} file ${file} (${error.code ?? 'error'})`,
      );
    }
  } else {
    if (process.stdin.isTTY) {
      throw new ToolError(
        'schema-invalid',
        `no ${what}: give --file <path> or pipe it on standard input`,
      );
    }
    const chunks = [];
    for await (const chunk of process.stdin) chunks.push(chunk);
    data = Buffer.concat(chunks);
  }
  if (data.length > limit) {
    throw new ToolError(
      'schema-invalid',
      `${what} is ${data.length} bytes, over the ${limit}-byte limit`,
    );
  }
  return data.toString('utf8');
}

export const LIMITS = { script: MAX_SCRIPT_BYTES, patch: MAX_PATCH_BYTES };

/** POST one request to the SSH route; returns `{ exitCode, stdout, stderr, ... }`. */
export async function callRoute(request, env, timeoutSeconds = DEFAULT_TIMEOUT_SECONDS) {
  const endpoint = resolveEndpoint(env);
  const token = readToken(env);
  const body = JSON.stringify({
    protocol: PROTOCOL,
    requestId: `tran-${randomBytes(8).toString('hex')}`,
    timeoutSeconds,
    ...request,
  });
  let response;
  try {
    response = await post(endpoint.url, token, body, deadlineMs(timeoutSeconds));
  } catch (error) {
    if (error?.code === 'ETIMEDOUT') {
      throw new ToolError(
        'infra-failed',
        `timed out after ${timeoutSeconds}s: the platform SSH route at ${endpoint.url} gave no answer`,
        { timedOut: true, timeoutSeconds },
      );
    }
    throw new ToolError(
      'infra-failed',
      `platform SSH route unreachable at ${endpoint.url} (${error?.code ?? error?.message ?? 'error'})`,
    );
  }
  const text = response.body;
  let payload;
  try {
    payload = JSON.parse(text);
  } catch {
    payload = undefined;
  }
  if (response.status < 200 || response.status > 299) {
    const kind =
      typeof payload?.failureKind === 'string'
        ? payload.failureKind
        : response.status === 401 || response.status === 403
          ? 'auth-failed'
          : response.status === 501
            ? 'unsupported-operation'
            : 'infra-failed';
    const message = typeof payload?.message === 'string' ? payload.message : text.slice(0, 500);
    throw new ToolError(kind, `platform SSH route answered HTTP ${response.status}: ${message}`, {
      status: response.status,
    });
  }
  if (!payload || !Number.isInteger(payload.exitCode)) {
    throw new ToolError('infra-failed', 'platform SSH route answered without an integer exitCode');
  }
  return {
    exitCode: payload.exitCode,
    stdout: typeof payload.stdout === 'string' ? payload.stdout : '',
    stderr: typeof payload.stderr === 'string' ? payload.stderr : '',
    stdoutTruncated: payload.stdoutTruncated === true,
    stderrTruncated: payload.stderrTruncated === true,
  };
}

/**
 * How long the client waits in all: the command's own timeout plus a short grace for the route
 * to stop the command and answer (10%, between 1 and 5 s). A silent route then ends the call
 * about when the user asked, not half a minute later.
 */
function deadlineMs(timeoutSeconds) {
  const grace = Math.min(5, Math.max(1, timeoutSeconds * 0.1));
  return Math.round((timeoutSeconds + grace) * 1000);
}

/** One POST with node's own client: no redirect following, a hard deadline, a capped body. */
function post(url, token, body, timeoutMs) {
  const target = new URL(url);
  const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolvePost, rejectPost) => {
    const req = send(
      target,
      {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          accept: 'application/json',
        },
        timeout: timeoutMs,
      },
      (res) => {
        const chunks = [];
        let size = 0;
        res.on('data', (chunk) => {
          size += chunk.length;
          if (size > MAX_RESPONSE_BYTES) {
            req.destroy(
              Object.assign(new Error('response over the size limit'), { code: 'ETOOBIG' }),
            );
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () =>
          resolvePost({
            status: res.statusCode ?? 0,
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        res.on('error', rejectPost);
      },
    );
    // The socket's idle timeout alone would let a route that trickles bytes run forever: the
    // deadline covers the whole exchange.
    const expire = () => req.destroy(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' }));
    const deadline = setTimeout(expire, timeoutMs);
    req.on('timeout', expire);
    req.on('close', () => clearTimeout(deadline));
    req.on('error', rejectPost);
    req.end(body);
  });
}

/** Print a result like ssh does (streams and exit code) or as one JSON object with --json. */
export function emitResult(result, options, env) {
  const clean = redactor(env[TOKEN_ENV]?.trim());
  if (options.json) {
    process.stdout.write(`${clean(JSON.stringify({ ok: result.exitCode === 0, ...result }))}\n`);
  } else {
    process.stdout.write(clean(result.stdout));
    process.stderr.write(clean(result.stderr));
  }
  return Math.min(Math.max(result.exitCode, 0), 255);
}

/** Print a local failure as JSON on stderr and return its exit code. */
export function emitError(error, env, tool) {
  const clean = redactor(env[TOKEN_ENV]?.trim());
  const kind = error instanceof ToolError ? error.kind : 'infra-failed';
  const message = error instanceof Error ? error.message : String(error);
  const extra = error instanceof ToolError ? error.extra : {};
  const out = { ok: false, tool, error: { kind, message, ...extra }, valuesPrinted: false };
  process.stderr.write(`${clean(JSON.stringify(out))}\n`);
  return EXIT[kind] ?? 1;
}
