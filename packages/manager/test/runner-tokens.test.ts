import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runBody, startTestManager, type TestManager } from './helpers.js';

/** A stand-in runner process: writes down its environment and stays up until stopped. */
const STAND_IN = `
import { writeFileSync } from 'node:fs';
writeFileSync(process.env.SVC_JOB_DIR + '/seen-env.json', JSON.stringify(process.env));
process.on('SIGTERM', () => process.exit(0));
setInterval(() => {}, 1000);
`;
const API_KEY = 'operator-key-for-runner-token-test';

let t: TestManager;
let dir: string;
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'svc-tokens-'));
  await writeFile(join(dir, 'runner.mjs'), STAND_IN);
  t = await startTestManager({
    listen: true,
    env: { SVC_RUNNER_ENTRY: join(dir, 'runner.mjs'), SVC_API_KEY: API_KEY },
  });
  await t.configureProfile('builtin-a');
});
after(async () => {
  await t?.close();
  await rm(dir, { recursive: true, force: true });
});

interface Job {
  runId: string;
  commandId: string;
  runnerId: string;
  runnerJobId: string;
  token: string;
}

/** A run, a turn and a runner Job; the job's token as its process finds it. */
async function startJob(): Promise<Job> {
  const run = await t.api('POST', '/api/v1/runs', runBody());
  assert.equal(run.status, 201, run.raw);
  const runId = run.body.runId as string;
  const command = await t.api('POST', `/api/v1/runs/${runId}/commands`, {
    type: 'turn',
    payload: { prompt: 'x' },
  });
  const created = await t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, {
    commandId: command.body.commandId,
  });
  assert.equal(created.status, 201, created.raw);
  const seen = join(t.dataDir, 'jobs', created.body.jobName, 'seen-env.json');
  let env: Record<string, string> | null = null;
  for (let i = 0; i < 200 && !env; i++) {
    if (existsSync(seen)) env = JSON.parse(readFileSync(seen, 'utf8')) as Record<string, string>;
    else await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(env, 'the job started');
  const token = readFileSync(join(env['SVC_SECRET_DIR']!, 'manager-token'), 'utf8');
  return {
    runId,
    commandId: command.body.commandId,
    runnerId: created.body.runnerId,
    runnerJobId: created.body.runnerJobId,
    token,
  };
}

const as = (token: string, method: string, url: string, body?: unknown) =>
  t.api(method, url, body, { authorization: `Bearer ${token}` });

describe('runner Job tokens', () => {
  let a: Job;
  let b: Job;
  before(async () => {
    a = await startJob();
    b = await startJob();
  });

  it('hands each job its own random token, never the API key, and stores only its digest', async () => {
    assert.match(a.token, /^svcr_[A-Za-z0-9_-]{43}$/);
    assert.notEqual(a.token, b.token);
    assert.ok(!a.token.includes(API_KEY));
    const dump = JSON.stringify(
      await t.manager.store.db.selectFrom('runner_jobs').selectAll().execute(),
    );
    assert.ok(!dump.includes(a.token) && !dump.includes(a.token.slice(5)), 'no token stored');
  });

  it('works on its own run runner routes', async () => {
    const reg = await as(a.token, 'POST', '/api/v1/runners/register', {
      runId: a.runId,
      runnerId: a.runnerId,
      runnerJobId: a.runnerJobId,
    });
    assert.equal(reg.status, 200, reg.raw);
    const claim = await as(a.token, 'POST', `/api/v1/runs/${a.runId}/claim`, {
      runnerId: a.runnerId,
    });
    assert.equal(claim.status, 200, claim.raw);
    assert.equal((await as(a.token, 'GET', `/api/v1/runs/${a.runId}`)).status, 200);
    const poll = await as(a.token, 'GET', `/api/v1/runs/${a.runId}/commands?afterSeq=0`);
    assert.equal(poll.status, 200, poll.raw);
  });

  it('is refused on another run, as another runner, and by the runner routes of a command of another run', async () => {
    const refusals = [
      await as(a.token, 'GET', `/api/v1/runs/${b.runId}`),
      await as(a.token, 'POST', `/api/v1/runs/${b.runId}/claim`, { runnerId: a.runnerId }),
      await as(b.token, 'POST', `/api/v1/runs/${a.runId}/claim`, { runnerId: b.runnerId }),
      await as(b.token, 'PATCH', `/api/v1/runs/${a.runId}/lease`, { runnerId: a.runnerId }),
      await as(a.token, 'POST', `/api/v1/runs/${a.runId}/claim`, { runnerId: b.runnerId }),
      await as(a.token, 'POST', '/api/v1/runners/register', { runId: b.runId }),
      await as(a.token, 'POST', `/api/v1/commands/${b.commandId}/ack`, { runnerId: a.runnerId }),
      await as(a.token, 'PATCH', `/api/v1/commands/${b.commandId}/status`, {
        runnerId: a.runnerId,
        state: 'failed',
      }),
      await as(a.token, 'POST', `/api/v1/runs/${b.runId}/events`, {
        runnerId: a.runnerId,
        events: [{ key: 'k1', category: 'backend_status', data: {} }],
      }),
    ];
    for (const r of refusals) {
      assert.equal(r.status, 403, r.raw);
      assert.equal(r.body.failureKind, 'tenant-policy-denied');
    }
  });

  it('is refused on every operator route', async () => {
    const calls: Array<[string, string, unknown?]> = [
      ['POST', '/api/v1/runs', runBody()],
      ['GET', '/api/v1/runs'],
      ['POST', `/api/v1/runs/${a.runId}/cancel`, {}],
      ['POST', `/api/v1/runs/${a.runId}/commands`, { type: 'turn', payload: { prompt: 'y' } }],
      ['POST', `/api/v1/commands/${a.commandId}/cancel`, {}],
      ['GET', `/api/v1/runs/${a.runId}/events`],
      ['GET', `/api/v1/runs/${a.runId}/result`],
      ['POST', `/api/v1/runs/${a.runId}/runner-jobs`, { commandId: a.commandId }],
      ['GET', '/api/v1/provider-profiles'],
      ['GET', '/api/v1/provider-profiles/builtin-a/config'],
      ['PUT', '/api/v1/provider-profiles/builtin-a/credential', { apiKey: 'sk-x-0000000000' }],
      ['GET', '/api/v1/backends'],
      ['POST', '/api/v1/queue/tasks', {}],
      ['GET', '/api/v1/sessions'],
      ['GET', '/api/v1/no-such-route'],
    ];
    for (const [method, url, body] of calls) {
      const r = await as(a.token, method, url, body);
      assert.equal(r.status, 403, `${method} ${url}: ${r.raw}`);
      assert.equal(r.body.failureKind, 'tenant-policy-denied');
    }
  });

  it('refuses altered tokens as unknown', async () => {
    for (const variant of [
      a.token.slice(0, -1),
      `${a.token}x`,
      a.token.toUpperCase(),
      `svcr_${a.token.slice(6)}`,
      'svcr_',
    ]) {
      const r = await as(variant, 'GET', `/api/v1/runs/${a.runId}`);
      assert.equal(r.status, 401, variant);
      assert.equal(r.body.failureKind, 'auth-failed');
    }
  });

  it('is dead once its job ended, and once its run is terminal', async () => {
    await t.api('POST', `/api/v1/runs/${a.runId}/cancel`, { reason: 'done' });
    const r = await as(a.token, 'GET', `/api/v1/runs/${a.runId}`);
    assert.equal(r.status, 401, r.raw);
    assert.equal(r.body.failureKind, 'auth-failed');
    const stillB = await as(b.token, 'GET', `/api/v1/runs/${b.runId}`);
    assert.equal(stillB.status, 200, 'the other job keeps its token');
    await t.manager.store.db
      .updateTable('runner_jobs')
      .set({ phase: 'succeeded' })
      .where('runner_job_id', '=', b.runnerJobId)
      .execute();
    const afterEnd = await as(b.token, 'GET', `/api/v1/runs/${b.runId}`);
    assert.equal(afterEnd.status, 401, afterEnd.raw);
  });
});
