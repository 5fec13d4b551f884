import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError } from '@svc/contracts';
import { canary, ensureTestTag, findCanaries, processesWithTag } from '@svc/testkit';
import { loadConfig } from '../src/index.js';
import { runBody, startTestManager, type TestManager } from './helpers.js';
import { jsonFileOnceWhole, waitFor } from './e2e-helpers.js';
import { findCanariesInTree } from './secret-scan.js';

/**
 * The local launcher's isolation switch, with a runner stand-in that writes down what it was
 * given and what it can see: fail closed without bubblewrap (a runner-job create and a
 * scheduled attempt), the operator's opt-out, and what a sandboxed job receives.
 */
const STAND_IN = `
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
const pids = readdirSync('/proc').filter((n) => /^[0-9]+$/.test(n));
const job = process.env.SVC_JOB_DIR;
const attempt = (read) => { try { return read(); } catch (error) { return error.code; } };
writeFileSync(job + '/seen.json', JSON.stringify({
  env: process.env, uid: process.getuid(), gid: process.getgid(), pid: process.pid, pids,
  dataDir: attempt(() => readdirSync(job + '/../..')),
  // Where one test keeps the manager's API key file: next to the data dir.
  keyFile: attempt(() => readFileSync(job + '/../../../api-key', 'utf8')),
}));
// The manager's API without a credential, as any code the agent runs could call it.
const probe = async (method, path) => {
  try {
    const res = await fetch(process.env.SVC_MANAGER_URL + path, {
      method, headers: { 'content-type': 'application/json' },
      body: method === 'POST' ? JSON.stringify({ backendProfile: 'builtin-b' }) : undefined,
    });
    return res.status;
  } catch (error) { return String(error.cause?.code ?? error.message); }
};
writeFileSync(job + '/api.json', JSON.stringify({
  list: await probe('GET', '/api/v1/runs'),
  create: await probe('POST', '/api/v1/runs'),
  profiles: await probe('GET', '/api/v1/profiles'),
}));
if (process.env.SVC_PROFILE === 'stubborn') {
  // Deaf to SIGTERM, with a shell in a session of its own: only a SIGKILL of the sandbox ends it.
  const { spawn } = await import('node:child_process');
  spawn('setsid', ['sleep', '301'], { detached: true, stdio: 'ignore' }).unref();
  process.on('SIGTERM', () => {});
} else process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1000);
`;
const root = process.getuid?.() === 0;
const tag = ensureTestTag();
const hasBwrap = ['/usr/bin/bwrap', '/bin/bwrap', '/usr/local/bin/bwrap'].some((p) =>
  existsSync(p),
);
const API_KEY = 'manager-key-for-isolation-test';

let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-isolation-'));
  // Readable by the runners' user, as an installed runner is (one test makes it private).
  await chmod(dir, 0o755);
  await writeFile(join(dir, 'runner.mjs'), STAND_IN);
});
after(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function manager(env: Record<string, string>): Promise<TestManager> {
  const t = await startTestManager({
    listen: true,
    env: { SVC_RUNNER_ENTRY: join(dir, 'runner.mjs'), SVC_API_KEY: API_KEY, ...env },
  });
  await t.configureProfile('builtin-a');
  return t;
}

async function runAndCommand(t: TestManager, profile = 'builtin-a') {
  const run = await t.api('POST', '/api/v1/runs', runBody({ backendProfile: profile }));
  assert.equal(run.status, 201, run.raw);
  const command = await t.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
    type: 'turn',
    payload: { prompt: 'x' },
  });
  return { runId: run.body.runId as string, commandId: command.body.commandId as string };
}

async function seen(t: TestManager, jobName: string): Promise<any> {
  return waitFor('the job to start', async () =>
    jsonFileOnceWhole(join(t.dataDir, 'jobs', jobName, 'seen.json')),
  );
}

describe('isolation settings', () => {
  it('default to a sandbox per job, as uid/gid 65532 under a root manager', () => {
    assert.deepEqual(loadConfig({}).launcher.isolation, {
      mode: 'on',
      bwrapPath: null,
      uid: 65532,
      gid: 65532,
    });
  });

  it('refuse an unknown mode, a relative bwrap path and root as the runners’ user', () => {
    assert.throws(
      () =>
        loadConfig({
          SVC_LOCAL_ISOLATION: 'maybe',
          SVC_BWRAP_PATH: 'bin/bwrap',
          SVC_LOCAL_RUNNER_UID: '0',
          SVC_LOCAL_RUNNER_GID: '-1',
        }),
      (error: unknown) => {
        assert.ok(error instanceof ConfigError);
        for (const name of [
          'SVC_LOCAL_ISOLATION',
          'SVC_BWRAP_PATH',
          'SVC_LOCAL_RUNNER_UID',
          'SVC_LOCAL_RUNNER_GID',
        ])
          assert.match(error.message, new RegExp(name));
        return true;
      },
    );
  });
});

describe('without bubblewrap, the local launcher refuses runner Jobs', () => {
  let t: TestManager;
  before(async () => {
    t = await manager({
      SVC_BWRAP_PATH: '/nonexistent/bin/bwrap',
      SVC_SCHEDULER: 'on',
      SVC_SCHEDULER_SCAN_MS: '100',
    });
  });
  after(async () => {
    await t?.close();
  });

  it('says so on /health and in the start log, naming the package and the opt-out', async () => {
    const health = await t.api('GET', '/health');
    assert.deepEqual(
      {
        mode: health.body.extra.isolation.mode,
        available: health.body.extra.isolation.available,
      },
      { mode: 'bubblewrap', available: false },
    );
    assert.match(health.body.extra.isolation.reason, /not found at \/nonexistent\/bin\/bwrap/);
    const line = t.logs.find((l) => l.includes('runner isolation unavailable'));
    assert.ok(line, 'the start log reports it');
    assert.match(line, /"level":50/);
    assert.match(line, /Debian package bubblewrap/);
    assert.match(line, /SVC_LOCAL_ISOLATION=off/);
  });

  it('fails a runner-job create infra-failed, records the job failed with the reason, leaves no secret', async () => {
    const { runId, commandId } = await runAndCommand(t);
    const transient = canary('transient');
    const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
      commandId,
      transientEnv: [{ name: 'LAB_TOKEN_HINT', value: transient }],
    });
    assert.equal(created.status, 502, created.raw);
    assert.equal(created.body.failureKind, 'infra-failed');
    assert.match(created.body.message, /bubblewrap/);
    assert.match(created.body.message, /SVC_LOCAL_ISOLATION=off/);
    const jobs = (await t.api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body.runnerJobs;
    assert.equal(jobs.length, 1);
    assert.equal(jobs[0].phase, 'failed');
    assert.equal(jobs[0].terminalSummary.reason, 'launch-failed');
    assert.match(jobs[0].terminalSummary.message, /Install the Debian package bubblewrap/);
    // Refused before anything of the job was written: no token, no transientEnv on disk.
    assert.deepEqual(await readdir(join(t.dataDir, 'jobs')).catch(() => []), []);
    assert.deepEqual(await findCanariesInTree(t.dataDir, [transient]), []);
  });

  it('fails a scheduled attempt infra-failed with the same reason', async () => {
    const submitted = await t.api('POST', '/api/v1/queue/tasks', {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      queue: 'isolation',
      title: 'refused',
      maxAttempts: 1,
      payload: { prompt: 'Say hello.' },
    });
    assert.equal(submitted.status, 201, submitted.raw);
    const task = await waitFor('the attempt to fail', async () => {
      const shown = (await t.api('GET', `/api/v1/queue/tasks/${submitted.body.taskId}`)).body;
      return shown.state === 'failed' ? shown : null;
    });
    assert.equal(task.latestAttempt.failureKind, 'infra-failed');
    assert.match(task.latestAttempt.message, /isolation is unavailable.*bubblewrap/);
    assert.equal(task.latestAttempt.runner.phase, 'failed');
  });
});

describe('with SVC_LOCAL_ISOLATION=off', () => {
  let t: TestManager;
  before(async () => {
    t = await manager({ SVC_LOCAL_ISOLATION: 'off', SVC_BWRAP_PATH: '/nonexistent/bin/bwrap' });
  });
  after(async () => {
    await t?.close();
  });

  it('starts runners unsandboxed as the manager’s user, and says so on /health and in the log', async () => {
    const health = await t.api('GET', '/health');
    assert.equal(health.body.extra.isolation.mode, 'off');
    const line = t.logs.find((l) => l.includes('runner isolation is off'));
    assert.ok(line && /"level":40/.test(line), 'a warning at start');
    const { runId, commandId } = await runAndCommand(t);
    const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
    assert.equal(created.status, 201, created.raw);
    const job = await seen(t, created.body.jobName);
    assert.equal(job.uid, process.getuid!());
    assert.ok(job.pids.includes(String(process.pid)), 'the host’s processes are in view');
    assert.equal(job.env.SVC_PROFILE_DIR.startsWith(t.dataDir), true);
    await t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'done' });
  });
});

/** A runner Job started, and the statuses of its keyless calls to the API (api.json). */
async function probedJob(t: TestManager): Promise<{ runId: string; api: any }> {
  const { runId, commandId } = await runAndCommand(t);
  const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
  assert.equal(created.status, 201, created.raw);
  const file = join(t.dataDir, 'jobs', created.body.jobName, 'api.json');
  const api = await waitFor('the job to call the API', async () => jsonFileOnceWhole(file));
  return { runId, api };
}

describe(
  'a sandboxed runner Job of a manager without an API key (permissive local mode)',
  { skip: hasBwrap ? false : 'bubblewrap is not installed' },
  () => {
    let t: TestManager;
    before(async () => {
      t = await manager({ SVC_API_KEY: '' });
    });
    after(() => t?.close());

    it('gets no operator access from inside its sandbox, while the host keeps it', async () => {
      const { runId, api } = await probedJob(t);
      // Listing runs, starting one under another profile, reading profiles: all refused.
      assert.deepEqual(api, { list: 401, create: 401, profiles: 401 });
      // A keyless call from outside every sandbox is still the operator's.
      const listed = await fetch(`${t.manager.url}/api/v1/runs`);
      assert.equal(listed.status, 200);
      const runs = ((await listed.json()) as { runs: Array<{ backendProfile: string }> }).runs;
      assert.ok(
        runs.every((r) => r.backendProfile === 'builtin-a'),
        'no run was created from inside',
      );
      await t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'done' });
    });
  },
);

describe(
  'a sandboxed runner Job',
  { skip: hasBwrap ? false : 'bubblewrap is not installed' },
  () => {
    let t: TestManager;
    const leak = canary('manager-env');
    before(async () => {
      // A variable of the manager's own environment that must not reach any job.
      process.env['SVC_ISOLATION_TEST_LEAK'] = leak;
      t = await manager({ SVC_RUNNER_KILL_GRACE_MS: '1000' });
    });
    after(async () => {
      delete process.env['SVC_ISOLATION_TEST_LEAK'];
      await t?.close();
    });

    it('gets the runner environment contract only, its own uid, pid namespace and Secret projections', async () => {
      const { runId, commandId } = await runAndCommand(t);
      const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
      assert.equal(created.status, 201, created.raw);
      const job = await seen(t, created.body.jobName);
      const names = Object.keys(job.env).filter((n) => !n.startsWith('SVC_'));
      assert.deepEqual(
        names.filter((n) => !['PATH', 'HOME', 'LANG', 'TZ', 'TMPDIR', 'PWD'].includes(n)),
        [],
        'nothing but the contract',
      );
      assert.deepEqual(findCanaries(JSON.stringify(job.env), [leak, API_KEY]), []);
      assert.equal(job.env.TMPDIR, '/tmp');
      assert.equal(job.env.SVC_PROFILE_DIR, '/var/run/svc/profile');
      assert.equal(job.env.SVC_JOB_DIR, join(t.dataDir, 'jobs', created.body.jobName));
      assert.equal(job.uid, root ? 65532 : process.getuid!());
      assert.equal(job.gid, root ? 65532 : process.getgid!());
      assert.ok(job.pid < 10, `a pid of its own namespace: ${job.pid}`);
      assert.ok(job.pids.length < 5, `only its own processes: ${job.pids.join(' ')}`);
      // The pod identity names the sandbox's outermost process, which a group signal reaches.
      const pid = Number(String(created.body.podIdentity).split(':').at(-1));
      assert.match(await readFile(`/proc/${pid}/cmdline`, 'latin1'), /bwrap/);
      const cancelled = await t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'done' });
      assert.equal(cancelled.status, 200, cancelled.raw);
      await waitFor('the sandbox to end', () => !existsSync(`/proc/${pid}/cmdline`), 15_000);
    });

    it('ends the whole sandbox on cancel, a runner deaf to SIGTERM and a shell in its own session included', async () => {
      await t.configureProfile('stubborn');
      const { runId, commandId } = await runAndCommand(t, 'stubborn');
      const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
      assert.equal(created.status, 201, created.raw);
      await seen(t, created.body.jobName);
      await waitFor('the shell to run', () =>
        processesWithTag(tag).some((p) => p.command === 'sleep 301'),
      );
      const cancelled = await t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'stop' });
      assert.equal(cancelled.status, 200, cancelled.raw);
      const job = await waitFor(
        'the job to end',
        async () => {
          const j = (await t.api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body.runnerJobs[0];
          return j.phase !== 'running' && j;
        },
        30_000,
      );
      assert.equal(job.phase, 'cancelled');
      // The phase is recorded once the sandbox's processes are gone: nothing of it is left.
      assert.deepEqual(
        processesWithTag(tag).filter(
          (p) => p.command === 'sleep 301' || p.command.includes(created.body.jobName),
        ),
        [],
      );
    });

    it('hides the data dir and the API key file even inside an operator-listed mirror', async () => {
      const mirror = await mkdtemp(join(tmpdir(), 'svc-isolation-mirror-'));
      await chmod(mirror, 0o755);
      await mkdir(join(mirror, 'data'));
      await writeFile(join(mirror, 'api-key'), `${API_KEY}\n`, { mode: 0o644 });
      const other = await startTestManager({
        listen: true,
        dataDir: join(mirror, 'data'),
        env: {
          SVC_RUNNER_ENTRY: join(dir, 'runner.mjs'),
          SVC_API_KEY_FILE: join(mirror, 'api-key'),
          SVC_API_KEY: API_KEY,
          SVC_REPO_URL_ALLOW_PREFIXES: `file://${mirror}/`,
        },
      });
      try {
        await other.configureProfile('builtin-a');
        const { runId, commandId } = await runAndCommand(other);
        const created = await other.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
        assert.equal(created.status, 201, created.raw);
        const job = await seen(other, created.body.jobName);
        assert.deepEqual(job.dataDir, ['jobs'], 'no Secrets, database or cache in view');
        assert.notEqual(job.keyFile, `${API_KEY}\n`, 'the API key file is hidden');
        assert.ok(existsSync(join(mirror, 'data', 'secrets')), 'the data dir does hold Secrets');
        await other.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'done' });
      } finally {
        await other.close();
        await rm(mirror, { recursive: true, force: true });
      }
    });

    it('calls the API with no credential: refused, as the manager has a key', async () => {
      const { runId, api } = await probedJob(t);
      assert.deepEqual(api, { list: 401, create: 401, profiles: 401 });
      await t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'done' });
    });

    it('runs a lone runner entry its user may not read (a private directory) from a copy', async () => {
      await chmod(dir, 0o700);
      const { runId, commandId } = await runAndCommand(t);
      const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
      assert.equal(created.status, 201, created.raw);
      const job = await seen(t, created.body.jobName);
      assert.equal(job.uid, root ? 65532 : process.getuid!());
      await t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'done' });
    });
  },
);
