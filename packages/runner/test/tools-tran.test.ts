import { after, before, beforeEach, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { canary, findCanaries } from '@svc/testkit';
import { REPO_TOOLS_DIR, removeDir, tempDir } from './assembly-helpers.js';

/**
 * tran and trans against a loopback fake of the platform frontend's SSH route (an edge this
 * project does not own), speaking the protocol of docs/tools.md.
 */
const TOKEN = canary('platform-ssh');
let root: string;
let server: Server;
let base: string;
let port: number;

interface Seen {
  path: string;
  authorization: string | undefined;
  body: Record<string, any>;
  tokenInSomeArgv: boolean;
}
let seen: Seen[] = [];
/** What the fake route answers next (default: exit 0 with the request echoed). */
let reply: ((body: Record<string, any>) => { status: number; json: unknown }) | undefined;

function tokenInAnyCmdline(): boolean {
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(TOKEN)) return true;
    } catch {
      // gone
    }
  }
  return false;
}

function run(
  tool: 'tran' | 'trans',
  args: string[],
  env: Record<string, string | undefined>,
  input = '',
) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const clean: Record<string, string> = { PATH: process.env['PATH'] ?? '' };
    for (const [k, v] of Object.entries(env)) if (v !== undefined) clean[k] = v;
    const child = spawn(join(REPO_TOOLS_DIR, tool), args, { env: clean, cwd: root });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input);
  });
}

const env = (extra: Record<string, string | undefined> = {}) => ({
  PLATFORM_FRONTEND_URL: base,
  PLATFORM_SSH_CLIENT_TOKEN: TOKEN,
  ...extra,
});

function errorOf(stderr: string): { kind: string; message: string } {
  return JSON.parse(stderr.trim().split('\n').at(-1)!).error;
}

before(async () => {
  root = await tempDir('tran');
  server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw || '{}') as Record<string, any>;
      seen.push({
        path: req.url ?? '',
        authorization: req.headers.authorization,
        body,
        tokenInSomeArgv: tokenInAnyCmdline(),
      });
      const answer = reply?.(body) ?? {
        status: 200,
        json: { exitCode: 0, stdout: `ran ${body['operation']}\n`, stderr: '' },
      };
      res.writeHead(answer.status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(answer.json));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  port = typeof address === 'object' && address ? address.port : 0;
  base = `http://127.0.0.1:${port}`;
});
beforeEach(() => {
  seen = [];
  reply = undefined;
});
after(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await removeDir(root);
});

describe('tran --help and trans --help', () => {
  it('prints the supported surface as JSON', async () => {
    const { code, stdout } = await run('tran', ['--help'], {});
    assert.equal(code, 0);
    const help = JSON.parse(stdout);
    assert.deepEqual(
      help.supported.map((s: any) => `${s.route} ${s.operation}`),
      [
        'host argv',
        'host script',
        'host-workspace argv',
        'host-workspace script',
        'ssh command',
        'host-workspace apply-patch',
        'cluster cli',
        'cluster script',
        'workload argv',
        'workload script',
        'workload apply-patch',
      ],
    );
    assert.deepEqual(
      help.unsupported.map((u: any) => u.operation ?? u.route),
      ['upload', 'download', 'windows'],
    );
    assert.equal(help.protocol.path, '/api/v1/platform-ssh/exec');
    assert.equal(help.valuesPrinted, false);
    const trans = JSON.parse((await run('trans', ['--help'], {})).stdout);
    assert.deepEqual(
      trans.supported.map((s: any) => s.usage.split(' ').slice(0, 2).join(' ')),
      ['trans host', 'trans host-workspace', 'trans cluster', 'trans workload'],
    );
  });
});

describe('tran routes over the documented protocol', () => {
  it('sends host argv with the bearer token and relays stdout, stderr and the exit code', async () => {
    reply = () => ({ status: 200, json: { exitCode: 3, stdout: 'out\n', stderr: 'err\n' } });
    const { code, stdout, stderr } = await run(
      'tran',
      ['host', 'argv', '--host', 'build-1', '--', 'ls', '-la', '/srv'],
      env(),
    );
    assert.equal(code, 3);
    assert.equal(stdout, 'out\n');
    assert.equal(stderr, 'err\n');
    assert.equal(seen.length, 1);
    assert.equal(seen[0]?.path, '/api/v1/platform-ssh/exec');
    assert.equal(seen[0]?.authorization, `Bearer ${TOKEN}`);
    assert.deepEqual(
      { ...seen[0]?.body, requestId: undefined },
      {
        protocol: 'svc.platform-ssh/v1',
        requestId: undefined,
        timeoutSeconds: 600,
        route: 'host',
        operation: 'argv',
        target: { host: 'build-1' },
        argv: ['ls', '-la', '/srv'],
      },
    );
    assert.match(seen[0]?.body['requestId'], /^tran-[0-9a-f]{16}$/);
    assert.equal(seen[0]?.tokenInSomeArgv, false);
  });

  it('covers scripts, ssh-like commands, the cluster CLI, workloads and apply-patch', async () => {
    const script = join(root, 'job.sh');
    writeFileSync(script, 'echo from file\n');
    const patch = '*** Begin Patch\n*** Add File: x.txt\n+x\n*** End Patch\n';
    const calls: Array<[string, string[], string]> = [
      ['tran', ['host', 'script', '--host', 'h1', '--interpreter', 'bash'], 'echo from stdin\n'],
      [
        'tran',
        ['host-workspace', 'script', '--host', 'h1', '--workspace', '/srv/ws', '--file', script],
        '',
      ],
      [
        'tran',
        ['host-workspace', 'argv', '--host', 'h1', '--workspace', '/srv/ws', '--', 'make', 'test'],
        '',
      ],
      ['tran', ['ssh', 'deploy@h2', 'uptime', '&&', 'df', '-h'], ''],
      ['tran', ['host-workspace', 'apply-patch', '--host', 'h1', '--workspace', '/srv/ws'], patch],
      ['tran', ['cluster', 'cli', '--', 'get', 'pods', '-n', 'lab'], ''],
      ['tran', ['cluster', 'script', '--timeout', '30'], 'kubectl get ns\n'],
      [
        'tran',
        [
          'workload',
          'argv',
          '--namespace',
          'lab',
          '--workload',
          'deploy/api',
          '--container',
          'app',
          '--',
          'env',
        ],
        '',
      ],
      ['tran', ['workload', 'script', '--namespace', 'lab', '--workload', 'pod/x'], 'id\n'],
      [
        'tran',
        ['workload', 'apply-patch', '--namespace', 'lab', '--workload', 'deploy/api', '--json'],
        patch,
      ],
      ['trans', ['host', '--host', 'h3', script], ''],
      ['trans', ['workload', '--namespace', 'lab', '--workload', 'deploy/api'], 'hostname\n'],
    ];
    for (const [tool, args, input] of calls) {
      const result = await run(tool as 'tran', args, env(), input);
      assert.equal(result.code, 0, `${tool} ${args.join(' ')}: ${result.stderr}`);
    }
    const bodies = seen.map((s) => s.body);
    const pick = (i: number, ...keys: string[]) =>
      Object.fromEntries(keys.map((k) => [k, bodies[i]?.[k]]));
    assert.deepEqual(pick(0, 'route', 'operation', 'interpreter', 'script'), {
      route: 'host',
      operation: 'script',
      interpreter: 'bash',
      script: 'echo from stdin\n',
    });
    assert.deepEqual(pick(1, 'target', 'script'), {
      target: { host: 'h1', workspace: '/srv/ws' },
      script: 'echo from file\n',
    });
    assert.deepEqual(pick(3, 'route', 'operation', 'target', 'command'), {
      route: 'ssh',
      operation: 'command',
      target: { host: 'deploy@h2' },
      command: 'uptime && df -h',
    });
    assert.deepEqual(pick(4, 'operation', 'patch'), { operation: 'apply-patch', patch });
    assert.deepEqual(pick(5, 'route', 'operation', 'argv'), {
      route: 'cluster',
      operation: 'cli',
      argv: ['get', 'pods', '-n', 'lab'],
    });
    assert.equal(bodies[6]?.['timeoutSeconds'], 30);
    assert.deepEqual(bodies[7]?.['target'], {
      namespace: 'lab',
      workload: 'deploy/api',
      container: 'app',
    });
    assert.deepEqual(pick(9, 'route', 'operation'), {
      route: 'workload',
      operation: 'apply-patch',
    });
    assert.deepEqual(pick(10, 'route', 'operation', 'script'), {
      route: 'host',
      operation: 'script',
      script: 'echo from file\n',
    });
    assert.deepEqual(pick(11, 'route', 'operation', 'script'), {
      route: 'workload',
      operation: 'script',
      script: 'hostname\n',
    });
    assert.ok(seen.every((s) => !s.tokenInSomeArgv));
  });

  it('prints one JSON object with --json', async () => {
    reply = () => ({ status: 200, json: { exitCode: 0, stdout: 'a', stderr: 'b' } });
    const { stdout } = await run('tran', ['cluster', 'cli', '--json', '--', 'version'], env());
    assert.deepEqual(JSON.parse(stdout), {
      ok: true,
      exitCode: 0,
      stdout: 'a',
      stderr: 'b',
      stdoutTruncated: false,
      stderrTruncated: false,
    });
  });

  it('resolves the endpoint from the main server host or IP, and keeps a frontend base path', async () => {
    await run('tran', ['host', 'argv', '--host', 'h', '--', 'true'], {
      PLATFORM_SSH_CLIENT_TOKEN: TOKEN,
      PLATFORM_MAIN_SERVER_IP: '127.0.0.1',
      PLATFORM_MAIN_SERVER_PORT: String(port),
    });
    await run('tran', ['host', 'argv', '--host', 'h', '--', 'true'], {
      PLATFORM_SSH_CLIENT_TOKEN: TOKEN,
      PLATFORM_MAIN_SERVER_HOST: `127.0.0.1:${port}`,
      PLATFORM_MAIN_SERVER_SCHEME: 'http',
    });
    await run(
      'tran',
      ['host', 'argv', '--host', 'h', '--', 'true'],
      env({ PLATFORM_FRONTEND_URL: `${base}/platform/` }),
    );
    assert.deepEqual(
      seen.map((s) => s.path),
      [
        '/api/v1/platform-ssh/exec',
        '/api/v1/platform-ssh/exec',
        '/platform/api/v1/platform-ssh/exec',
      ],
    );
  });
});

describe('tran refusals and secrecy', () => {
  it('fails upload, download and Windows routes as unsupported-operation without a request', async () => {
    const attempts = [
      ['upload', 'local.txt', 'host:/tmp/x'],
      ['download', 'host:/etc/hosts', '.'],
      ['host', 'upload', '--host', 'h'],
      ['windows', 'argv', '--host', 'w', '--', 'dir'],
      ['host', 'argv', '--host', 'w', '--os', 'windows', '--', 'dir'],
      ['host', 'script', '--host', 'w', '--interpreter', 'powershell'],
    ];
    for (const args of attempts) {
      const { code, stdout, stderr } = await run('tran', args, env());
      assert.equal(code, 3, args.join(' '));
      assert.equal(stdout, '');
      assert.equal(errorOf(stderr).kind, 'unsupported-operation');
    }
    const trans = await run('trans', ['download'], env());
    assert.equal(errorOf(trans.stderr).kind, 'unsupported-operation');
    assert.equal(seen.length, 0);
  });

  it('fails clearly without a token or an endpoint, and refuses a token on the command line', async () => {
    const noToken = await run('tran', ['host', 'argv', '--host', 'h', '--', 'id'], {
      PLATFORM_FRONTEND_URL: base,
    });
    assert.equal(noToken.code, 4);
    assert.equal(errorOf(noToken.stderr).kind, 'secret-unavailable');
    assert.match(errorOf(noToken.stderr).message, /PLATFORM_SSH_CLIENT_TOKEN/);
    const noEndpoint = await run(
      'trans',
      ['host', '--host', 'h'],
      { PLATFORM_SSH_CLIENT_TOKEN: TOKEN },
      'id\n',
    );
    assert.equal(noEndpoint.code, 2);
    assert.match(
      errorOf(noEndpoint.stderr).message,
      /PLATFORM_FRONTEND_URL, PLATFORM_MAIN_SERVER_HOST or PLATFORM_MAIN_SERVER_IP/,
    );
    const flag = await run(
      'tran',
      ['host', 'argv', '--host', 'h', '--token', 'abc', '--', 'id'],
      env(),
    );
    assert.equal(flag.code, 2);
    assert.match(errorOf(flag.stderr).message, /never passed on the command line/);
    const badPatch = await run(
      'tran',
      ['workload', 'apply-patch', '--namespace', 'n', '--workload', 'w'],
      env(),
      'not a patch',
    );
    assert.equal(badPatch.code, 2);
    assert.match(errorOf(badPatch.stderr).message, /invalid patch/);
    assert.equal(seen.length, 0);
  });

  it('never prints the token, even when the route echoes it back', async () => {
    reply = () => ({
      status: 200,
      json: {
        exitCode: 0,
        stdout: `token=${TOKEN}\n`,
        stderr: `b64=${Buffer.from(TOKEN).toString('base64')}\n`,
      },
    });
    const plain = await run('tran', ['host', 'argv', '--host', 'h', '--', 'env'], env());
    const json = await run('tran', ['host', 'argv', '--host', 'h', '--json', '--', 'env'], env());
    reply = () => ({
      status: 401,
      json: { failureKind: 'auth-failed', message: `bad token ${TOKEN}` },
    });
    const denied = await run('tran', ['host', 'argv', '--host', 'h', '--', 'env'], env());
    assert.equal(denied.code, 5);
    assert.equal(errorOf(denied.stderr).kind, 'auth-failed');
    const everything = [plain, json, denied].map((r) => `${r.stdout}\n${r.stderr}`).join('\n');
    assert.match(everything, /\[redacted\]/);
    assert.deepEqual(findCanaries(everything, [TOKEN]), []);
  });

  it('reports an unreachable route as infra-failed', async () => {
    const down = await run(
      'tran',
      ['host', 'argv', '--host', 'h', '--', 'id'],
      env({ PLATFORM_FRONTEND_URL: 'http://127.0.0.1:9' }),
    );
    assert.equal(down.code, 6);
    assert.equal(errorOf(down.stderr).kind, 'infra-failed');
  });

  it('gives up on a silent route after about --timeout seconds and says it timed out', async () => {
    // Accepts the connection and the request, never answers.
    const silent = createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const address = silent.address();
    const silentPort = typeof address === 'object' && address ? address.port : 0;
    try {
      const started = Date.now();
      const res = await run(
        'tran',
        ['host', 'argv', '--host', 'h', '--timeout', '2', '--', 'id'],
        env({ PLATFORM_FRONTEND_URL: `http://127.0.0.1:${silentPort}` }),
      );
      const seconds = (Date.now() - started) / 1000;
      assert.equal(res.code, 6);
      const error = errorOf(res.stderr);
      assert.equal(error.kind, 'infra-failed');
      assert.match(error.message, /^timed out after 2s/);
      assert.doesNotMatch(error.message, /unreachable/);
      // 2 s asked, 1 s grace; the rest is process start-up on a busy machine.
      assert.ok(seconds >= 2.5 && seconds < 10, `returned after ${seconds.toFixed(1)} s`);
    } finally {
      silent.closeAllConnections();
      await new Promise((resolve) => silent.close(resolve));
    }
  });
});
