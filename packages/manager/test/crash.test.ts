import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  canary,
  createTestStore,
  ensureTestTag,
  freePort,
  realPostgresAvailable,
  waitForHttp,
  waitForNoTaggedProcesses,
  type TestStore,
} from '@svc/testkit';
import pg from 'pg';
import { LocalSecretStore } from '../src/index.js';
import { identityOf } from '../src/launcher/local-identity.js';
import { managerTemplate, runBody } from './helpers.js';
import { waitFor } from './e2e-helpers.js';
import { findCanariesInTree } from './secret-scan.js';

const skip = (await realPostgresAvailable())
  ? false
  : 'needs a PostgreSQL server that outlives the killed process';
const SERVER = join(import.meta.dirname, '../dist/server.js');
const tag = ensureTestTag();

/** Running (not a zombie waiting for a parent that was killed). */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\S+ \(.*\) [ZX]/.test(stat);
  } catch {
    return false;
  }
}

describe('crash recovery', { skip }, () => {
  it('adopts the live runner jobs of a killed manager on restart and reports the dead ones', async () => {
    const jobStore = await createTestStore(managerTemplate);
    assert.equal(jobStore.kind, 'postgres');
    const dir = await mkdtemp(join(tmpdir(), 'svc-adopt-'));
    // Whatever fails, no manager of this test outlives it (a live child keeps the file open).
    let manager: ChildProcess | undefined;
    let decoy: ChildProcess | undefined;
    const pids: number[] = [];
    try {
      await new LocalSecretStore(join(dir, 'secrets')).put('svc-v01-provider-builtin-a', {
        'auth.json': Buffer.from('{}'),
        'config.toml': Buffer.from(''),
      });
      // A runner stand-in: up until a file named `stop` appears in its job directory, then it
      // leaves its exit code there and exits, as the runner does.
      await writeFile(
        join(dir, 'runner.mjs'),
        [
          "import { existsSync, writeFileSync } from 'node:fs';",
          "process.on('SIGTERM', () => process.exit(0));",
          'setInterval(() => {',
          "  if (!existsSync('stop')) return;",
          "  writeFileSync(process.env.SVC_JOB_DIR + '/exit-status.json', '{\"exitCode\":0}');",
          '  process.exit(0);',
          '}, 20);',
        ].join('\n'),
      );
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const env = {
        ...process.env,
        DATABASE_URL: jobStore.url,
        PORT: String(port),
        SVC_DATA_DIR: dir,
        LOG_LEVEL: 'warn',
        SVC_RUNNER_ENTRY: join(dir, 'runner.mjs'),
      };
      const start = () =>
        spawn(process.execPath, [SERVER], { env, stdio: ['ignore', 'ignore', 'inherit'] });
      manager = start();
      await waitForHttp(`${base}/health/readiness`);
      const post = async (path: string, body: unknown) =>
        (
          await fetch(`${base}${path}`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
          })
        ).json() as Promise<any>;
      const jobOf = async (runId: string, runnerJobId: string) =>
        (await (
          await fetch(`${base}/api/v1/runs/${runId}/runner-jobs/${runnerJobId}`)
        ).json()) as any;
      const transient = canary('transient-env');
      const launch = async () => {
        const run = await post('/api/v1/runs', runBody());
        const command = await post(`/api/v1/runs/${run.runId}/commands`, {
          type: 'turn',
          payload: { prompt: 'x' },
        });
        const job = await post(`/api/v1/runs/${run.runId}/runner-jobs`, {
          commandId: command.commandId,
          transientEnv: [{ name: 'LAB_TOKEN_HINT', value: transient }],
        });
        assert.equal(job.phase, 'running');
        const pid = Number(String(job.podIdentity).split(':').at(-1));
        pids.push(pid);
        return { runId: run.runId as string, job, pid, jobDir: join(dir, 'jobs', job.jobName) };
      };
      // One job lives on through the restart; the other dies while no manager watches.
      const living = await launch();
      const dying = await launch();
      // Secret material the stand-ins leave on disk, as a runner working on its turn does.
      for (const j of [living, dying]) {
        await mkdir(join(j.jobDir, 'agent-home'), { recursive: true });
        await writeFile(join(j.jobDir, 'agent-home', 'auth.json'), JSON.stringify({ transient }));
        assert.equal((await findCanariesInTree(j.jobDir, [transient])).length, 2);
      }
      // Two more of the first manager's jobs, as the second manager below finds them in the
      // database: one still being started (pending, no process yet), one started on another
      // host. Neither is the second manager's to judge.
      const starting = await launch();
      const elsewhere = await launch();
      const db = new pg.Client({ connectionString: jobStore.url });
      await db.connect();
      const setJob = (runnerJobId: string, phase: string, identity: string | null) =>
        db.query('UPDATE runner_jobs SET phase = $2, pod_identity = $3 WHERE runner_job_id = $1', [
          runnerJobId,
          phase,
          identity,
        ]);
      await setJob(starting.job.runnerJobId, 'pending', null);
      await setJob(elsewhere.job.runnerJobId, 'running', 'local:elsewhere.example:999999');
      // A second local manager on the same database, with its own data directory, starts: the
      // live jobs are the first manager's, and stay running and unreported.
      const otherDir = await mkdtemp(join(tmpdir(), 'svc-adopt-other-'));
      const otherPort = await freePort();
      const other = spawn(process.execPath, [SERVER], {
        env: { ...env, PORT: String(otherPort), SVC_DATA_DIR: otherDir },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      try {
        await waitForHttp(`http://127.0.0.1:${otherPort}/health/readiness`);
        const seen = await jobOf(living.runId, living.job.runnerJobId);
        assert.equal(seen.phase, 'running', JSON.stringify(seen.terminalSummary));
        assert.ok(alive(living.pid), "another manager's start left the job running");
        assert.equal((await jobOf(starting.runId, starting.job.runnerJobId)).phase, 'pending');
        assert.equal((await jobOf(elsewhere.runId, elsewhere.job.runnerJobId)).phase, 'running');
        for (const j of [starting, elsewhere]) {
          await setJob(j.job.runnerJobId, 'running', j.job.podIdentity);
          await post(`/api/v1/runs/${j.runId}/cancel`, {});
        }
      } finally {
        await db.end();
        other.kill('SIGTERM');
        await new Promise((r) => other.once('exit', r));
        await rm(otherDir, { recursive: true, force: true });
      }
      const first = manager;
      first.kill('SIGKILL');
      await new Promise((r) => first.once('exit', r));
      assert.ok(alive(living.pid), 'the detached job outlived the killed manager');
      process.kill(dying.pid, 'SIGKILL');
      await waitFor('the dying stand-in to end', () => !alive(dying.pid), 5000);
      // The dead job's directory is the job's to write: a record there naming a live process
      // (here one of the test's own) must not make the restarted manager adopt that process.
      decoy = spawn('sleep', ['300'], { stdio: 'ignore' });
      const forged = identityOf(decoy.pid!);
      assert.ok(forged);
      for (const name of ['runner-process.json', 'job-process.json'])
        await writeFile(join(dying.jobDir, name), JSON.stringify(forged));
      assert.equal(
        existsSync(join(dir, 'job-processes', `${living.job.jobName}.json`)),
        true,
        'the manager keeps its own record of the process',
      );
      manager = start();
      try {
        await waitForHttp(`${base}/health/readiness`);
        // The live job was adopted: still running, untouched, its secret material in place.
        const adopted = await jobOf(living.runId, living.job.runnerJobId);
        assert.equal(adopted.phase, 'running', JSON.stringify(adopted.terminalSummary));
        assert.ok(alive(living.pid), 'the restarted manager left the live job running');
        assert.equal((await findCanariesInTree(living.jobDir, [transient])).length, 2);
        // The dead one is reported as it is, nothing of it left on disk.
        const dead = await jobOf(dying.runId, dying.job.runnerJobId);
        assert.equal(dead.phase, 'failed');
        assert.equal(dead.terminalSummary.reason, 'ended-while-manager-down');
        assert.ok(alive(decoy.pid!), 'the process a forged record named was left alone');
        assert.deepEqual(await findCanariesInTree(dying.jobDir, [transient]), []);
        // The adopted job is followed to its end although it is not the new manager's child.
        await writeFile(join(living.jobDir, 'stop'), '');
        const ended = await waitFor(
          'the adopted job to be reported ended',
          async () => {
            const j = await jobOf(living.runId, living.job.runnerJobId);
            return j.phase === 'running' ? null : j;
          },
          10_000,
        );
        assert.equal(ended.phase, 'succeeded', JSON.stringify(ended.terminalSummary));
        assert.equal(ended.exitCode, 0);
        assert.equal(ended.terminalSummary.adopted, true);
        // Its secret material went with it, as for a child of the manager.
        assert.deepEqual(await findCanariesInTree(dir, [transient], { skip: ['secrets'] }), []);
        for (const sub of ['secret', 'agent-home', 'home'])
          assert.equal(existsSync(join(living.jobDir, sub)), false, sub);
      } finally {
        const restarted = manager;
        restarted.kill('SIGTERM');
        await new Promise((r) => restarted.once('exit', r));
      }
    } finally {
      if (manager && manager.exitCode === null && manager.signalCode === null) {
        manager.kill('SIGKILL');
        await new Promise((r) => manager!.once('exit', r));
      }
      for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
      decoy?.kill('SIGKILL');
      await jobStore.drop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  let store: TestStore;
  let dataDir: string;
  after(async () => {
    await store?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
    assert.deepEqual(await waitForNoTaggedProcesses(tag), []);
  });

  it('keeps every acknowledged event exactly once, in order, across a SIGKILL of the manager under append load', async () => {
    store = await createTestStore(managerTemplate);
    assert.equal(store.kind, 'postgres');
    dataDir = await mkdtemp(join(tmpdir(), 'svc-crash-'));
    await new LocalSecretStore(join(dataDir, 'secrets')).put('svc-v01-provider-builtin-a', {
      'auth.json': Buffer.from('{}'),
      'config.toml': Buffer.from('model = "m"\n'),
    });
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const env = {
      ...process.env,
      DATABASE_URL: store.url,
      PORT: String(port),
      SVC_DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
    };
    const start = (): ChildProcess =>
      spawn(process.execPath, [SERVER], { env, stdio: ['ignore', 'ignore', 'inherit'] });

    let manager = start();
    await waitForHttp(`${base}/health/readiness`);

    const call = async (
      method: string,
      path: string,
      body?: unknown,
      headers: Record<string, string> = {},
    ) => {
      const response = await fetch(`${base}${path}`, {
        method,
        headers: { ...(body ? { 'content-type': 'application/json' } : {}), ...headers },
        ...(body ? { body: JSON.stringify(body) } : {}),
      });
      return { status: response.status, body: (await response.json()) as any };
    };
    const runners = await Promise.all(
      Array.from({ length: 4 }, async (_, i) => {
        const run = await call('POST', '/api/v1/runs', runBody());
        const runnerId = `rnr-crash${i}xx`;
        const claim = await call('POST', `/api/v1/runs/${run.body.runId}/claim`, { runnerId });
        assert.equal(claim.status, 200);
        const leaseToken = claim.body.leaseToken as string;
        return { runId: run.body.runId as string, runnerId, leaseToken, acked: [] as number[] };
      }),
    );

    const BATCHES = 60;
    let killed = false;
    const load = runners.map(async (r) => {
      for (let b = 0; b < BATCHES; b++) {
        const events = Array.from({ length: 50 }, (_, k) => ({
          key: `b${b}-${k}`,
          category: 'command_output',
          data: { b, k, text: `line ${b}.${k}` },
        }));
        // Retry the same batch (same keys) until the manager acknowledges it.
        for (;;) {
          try {
            const response = await call(
              'POST',
              `/api/v1/runs/${r.runId}/events`,
              { runnerId: r.runnerId, events },
              { 'x-lease-token': r.leaseToken },
            );
            if (response.status === 200) {
              r.acked.push(b);
              break;
            }
            if (response.status < 500 && response.status !== 503)
              assert.fail(`append refused: ${JSON.stringify(response.body)}`);
          } catch {
            // connection refused or reset while the manager is down
          }
          await new Promise((res) => setTimeout(res, 25));
        }
      }
    });

    // Kill the manager once a good share of batches has landed, then bring it back.
    while (runners.reduce((n, r) => n + r.acked.length, 0) < 40)
      await new Promise((res) => setTimeout(res, 10));
    manager.kill('SIGKILL');
    killed = true;
    await new Promise((res) => manager.once('exit', res));
    const ackedAtKill = runners.reduce((n, r) => n + r.acked.length, 0);
    manager = start();
    await waitForHttp(`${base}/health/readiness`);
    await Promise.all(load);

    try {
      assert.ok(killed && ackedAtKill < runners.length * BATCHES, 'the kill happened mid-load');
      for (const r of runners) {
        assert.equal(r.acked.length, BATCHES);
        const seen: Array<{ b: number; k: number; seq: number }> = [];
        for (let after = 0; ;) {
          const page = await call(
            'GET',
            `/api/v1/runs/${r.runId}/events?afterSeq=${after}&limit=1000`,
          );
          for (const e of page.body.events)
            if (e.category === 'command_output')
              seen.push({ b: e.data.b, k: e.data.k, seq: e.seq });
          if (!page.body.hasMore) break;
          after = page.body.nextAfterSeq;
        }
        assert.equal(
          seen.length,
          BATCHES * 50,
          `run ${r.runId}: every acknowledged event exactly once`,
        );
        const order = seen.map((e) => e.b * 1000 + e.k);
        assert.deepEqual(
          order,
          [...order].sort((a, b) => a - b),
          'stored in the order they were appended',
        );
        assert.equal(new Set(order).size, order.length, 'no duplicates from retried batches');
      }
    } finally {
      manager.kill('SIGTERM');
      await new Promise((res) => manager.once('exit', res));
    }
  });
});
