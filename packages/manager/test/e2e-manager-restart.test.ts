import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  createTestStore,
  ensureTestTag,
  FakeProvider,
  freePort,
  liveRunnerJobs,
  realPostgresAvailable,
  waitForHttp,
  waitForNoTaggedProcesses,
} from '@svc/testkit';
import { LocalSecretStore } from '../src/index.js';
import { managerTemplate } from './helpers.js';
import { waitFor } from './e2e-helpers.js';

const skip = (await realPostgresAvailable())
  ? false
  : 'needs a PostgreSQL server that outlives the killed process';
const SERVER = join(import.meta.dirname, '../dist/server.js');
const tag = ensureTestTag();

/**
 * A manager killed with SIGKILL in the middle of a turn and started again on the same data
 * directory and database: the real runner (driving the real agent against a loopback
 * provider) rides out the outage, the restarted manager adopts it, and the turn completes on
 * it. The model is asked once, nothing is marked orphaned or replaced.
 */
describe('a manager killed mid-turn', { skip }, () => {
  it('restarts without losing or repeating anything: the same runner finishes the turn', async (t) => {
    const provider = await FakeProvider.start();
    const store = await createTestStore(managerTemplate);
    assert.equal(store.kind, 'postgres');
    const dir = await mkdtemp(join(tmpdir(), 'svc-restart-'));
    let manager: ChildProcess | undefined;
    try {
      await new LocalSecretStore(join(dir, 'secrets')).put('svc-v01-provider-builtin-a', {
        'auth.json': Buffer.from(
          JSON.stringify({
            OPENAI_API_KEY: 'sk-test-restart-0000000000000000',
            auth_mode: 'apikey',
          }),
        ),
        'config.toml': Buffer.from(
          [
            'model = "test-model"',
            'model_provider = "svc"',
            '[model_providers.svc]',
            'name = "svc"',
            `base_url = "${provider.baseUrl}"`,
            'wire_api = "responses"',
            'requires_openai_auth = true',
            '',
          ].join('\n'),
        ),
      });
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const env = {
        ...process.env,
        DATABASE_URL: store.url,
        PORT: String(port),
        SVC_DATA_DIR: dir,
        LOG_LEVEL: 'warn',
        SVC_SCHEDULER: 'on',
        SVC_SCHEDULER_SCAN_MS: '300',
        SVC_LEASE_TTL_MS: '15000',
        SVC_HEARTBEAT_INTERVAL_MS: '1000',
        SVC_RUNNER_KILL_GRACE_MS: '1000',
      };
      const start = () =>
        spawn(process.execPath, [SERVER], { env, stdio: ['ignore', 'ignore', 'inherit'] });
      const api = async (method: string, path: string, body?: unknown) => {
        const response = await fetch(`${base}${path}`, {
          method,
          ...(body === undefined
            ? {}
            : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
        });
        return { status: response.status, body: (await response.json()) as any };
      };

      // The model holds its answer until released: the turn is in flight across the restart.
      provider.enqueue({ kind: 'stall', text: 'Finished after the restart.' });
      manager = start();
      await waitForHttp(`${base}/health/readiness`);
      const submitted = await api('POST', '/api/v1/queue/tasks', {
        tenantId: 'tenant-a',
        projectId: 'proj-1',
        queue: 'main',
        title: 'across a restart',
        executionPolicy: { timeoutMs: 120_000 },
        payload: { prompt: 'Take your time.' },
      });
      assert.equal(submitted.status, 201, JSON.stringify(submitted.body));
      const taskId = submitted.body.taskId as string;
      await provider.waitForRequest(1, { timeoutMs: 90_000 });
      const attempt = await waitFor('the turn to be acknowledged', async () => {
        const latest = (await api('GET', `/api/v1/queue/tasks/${taskId}`)).body.latestAttempt;
        if (!latest?.commandId) return null;
        const c = await api('GET', `/api/v1/runs/${latest.runId}/commands/${latest.commandId}`);
        return c.body.state === 'confirmed' ? latest : null;
      });
      const runId = attempt.runId as string;
      const [job] = (await api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body.runnerJobs;
      // The job's processes as the host sees them (the runner's own pid is its sandbox's).
      const processes = liveRunnerJobs(tag).get(job.jobName) ?? [];
      assert.ok(processes.length > 0, 'the runner job runs');

      const first = manager;
      first.kill('SIGKILL');
      await new Promise((r) => first.once('exit', r));
      await new Promise((r) => setTimeout(r, 1500));
      assert.deepEqual([...liveRunnerJobs(tag).keys()], [job.jobName], 'the runner lives on');
      assert.deepEqual(liveRunnerJobs(tag).get(job.jobName), processes, 'the same processes');
      manager = start();
      await waitForHttp(`${base}/health/readiness`);

      const adopted = (await api('GET', `/api/v1/runs/${runId}/runner-jobs/${job.runnerJobId}`))
        .body;
      assert.equal(adopted.phase, 'running', JSON.stringify(adopted.terminalSummary));
      provider.release();
      const done = await waitFor(
        'the task to complete',
        async () => {
          const shown = (await api('GET', `/api/v1/queue/tasks/${taskId}`)).body;
          return ['completed', 'failed', 'cancelled', 'blocked'].includes(shown.state)
            ? shown
            : null;
        },
        90_000,
      );
      assert.equal(done.state, 'completed', JSON.stringify(done));
      assert.equal(done.counters.attempts, 1);
      const result = (
        await api('GET', `/api/v1/runs/${runId}/commands/${attempt.commandId}/result`)
      ).body;
      assert.equal(result.reply, 'Finished after the restart.');
      assert.equal(provider.requestsOf().length, 1, 'the model was asked once');

      // The same runner finished the turn; the restarted manager followed it to its end.
      const ended = await waitFor('the adopted runner job to end', async () => {
        const jobs = (await api('GET', `/api/v1/runs/${runId}/runner-jobs`)).body.runnerJobs;
        return jobs.some((j: { phase: string }) => j.phase === 'running') ? null : jobs;
      });
      assert.equal(ended.length, 1, 'no replacement runner job');
      assert.equal(ended[0].phase, 'succeeded', JSON.stringify(ended[0].terminalSummary));
      assert.equal(ended[0].exitCode, 0);
      assert.equal(ended[0].terminalSummary.adopted, true);
      assert.doesNotMatch(JSON.stringify(ended[0].terminalSummary), /orphan/);
      const events = (await api('GET', `/api/v1/runs/${runId}/events?limit=1000`)).body.events;
      const names = events.map((e: { name: string }) => e.name);
      for (const name of ['runner.lost', 'runner.claim.recovered', 'runner.claim.waiting'])
        assert.ok(!names.includes(name), `${name} in ${names.join(', ')}`);
      const completedBy = events.find(
        (e: { category: string; commandId: string }) =>
          e.category === 'terminal_status' && e.commandId === attempt.commandId,
      );
      assert.equal(completedBy.data.status, 'completed');
      const startups = events.filter((e: { name: string }) => e.name === 'runner.startup');
      assert.equal(startups.length, 1, 'one runner');
      const run = (await api('GET', `/api/v1/runs/${runId}`)).body;
      assert.equal(run.state, 'completed');
      t.diagnostic(
        `runner ${job.jobName} (pids ${processes.join(', ')}) served the turn across the restart`,
      );
    } finally {
      if (manager && manager.exitCode === null && manager.signalCode === null) {
        const last = manager;
        last.kill('SIGTERM');
        await new Promise((r) => last.once('exit', r));
      }
      await provider.close();
      const left = await waitForNoTaggedProcesses(tag, 15_000);
      await store.drop();
      await rm(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
      assert.deepEqual(left, [], 'no runner or agent outlives the test');
    }
  });
});
