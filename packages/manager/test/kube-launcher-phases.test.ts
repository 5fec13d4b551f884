import assert from 'node:assert/strict';
import { beforeEach, describe, it } from 'node:test';
import { KubernetesLauncher } from '../src/launcher/kubernetes.js';
import type { PhaseUpdate } from '../src/launcher/types.js';
import {
  apisFor,
  capturedLogger,
  eventually,
  runnerSpec,
  useKubeLauncher,
} from './kube-helpers.js';

const NS = 'svc-v01';
const log = capturedLogger();
const rig = useKubeLauncher(NS, log);
let updates: PhaseUpdate[];
beforeEach(() => {
  updates = [];
});

describe('KubernetesLauncher phases and cancel', () => {
  const record = (u: PhaseUpdate) => {
    updates.push(u);
    return Promise.resolve();
  };
  const phasesOf = (jobName: string) =>
    updates.filter((u) => u.jobName === jobName).map((u) => u.phase);

  it('reports running, then succeeded with the exit code, from Job status', async () => {
    await rig.launcher.start(record, []);
    const spec = runnerSpec();
    await rig.launcher.launch(spec);
    rig.fake.setJobState(NS, spec.jobName, 'running');
    await eventually(() => (phasesOf(spec.jobName).includes('running') ? true : undefined));
    rig.fake.setJobState(NS, spec.jobName, 'succeeded');
    const done = await eventually(() => updates.find((u) => u.phase === 'succeeded'));
    assert.equal(done.exitCode, 0);
    assert.equal(done.summary?.condition, 'Complete');
    assert.match(String(done.summary?.pod), new RegExp(`^${spec.jobName}-`));
    assert.deepEqual(phasesOf(spec.jobName), ['running', 'succeeded']);
    const polls = rig.fake.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/jobs'));
    assert.equal(
      polls[0]!.query.labelSelector,
      'app.kubernetes.io/name=svc-runner,app.kubernetes.io/managed-by=svc-run-manager',
    );
  });

  const jobReads = () => {
    const reads = rig.fake.requests.filter((r) => r.method === 'GET' && r.path.endsWith('/jobs'));
    const watches = reads.filter((r) => ['true', '1'].includes(r.query.watch ?? ''));
    return { lists: reads.length - watches.length, watches: watches.length };
  };

  it('follows Job phases by one list and then a watch, without listing again', async () => {
    await rig.launcher.start(record, []);
    await eventually(() => (jobReads().watches > 0 ? true : undefined));
    // The start lists the Jobs (and once more for the sweep of leftover Secrets), then watches.
    const atStart = jobReads();
    const specs = [runnerSpec(), runnerSpec(), runnerSpec()];
    for (const spec of specs) await rig.launcher.launch(spec);
    for (const spec of specs) rig.fake.setJobState(NS, spec.jobName, 'running');
    for (const spec of specs) rig.fake.setJobState(NS, spec.jobName, 'succeeded');
    await eventually(() =>
      specs.every((spec) => phasesOf(spec.jobName).includes('succeeded')) ? true : undefined,
    );
    for (const spec of specs) assert.deepEqual(phasesOf(spec.jobName), ['running', 'succeeded']);
    // Polling at 100 ms would have listed again and again; the watch needs no further read.
    assert.deepEqual(jobReads(), atStart);
    assert.equal(atStart.watches, 1);
    const watch = rig.fake.requests.find((r) => r.query.watch);
    assert.equal(
      watch?.query.labelSelector,
      'app.kubernetes.io/name=svc-runner,app.kubernetes.io/managed-by=svc-run-manager',
    );
    assert.ok(watch?.query.resourceVersion, 'the watch starts where the list ended');
  });

  it('lists again after a dropped watch or a 410 Gone, and misses no change', async () => {
    await rig.launcher.start(record, []);
    await eventually(() => (jobReads().watches > 0 ? true : undefined));
    const spec = runnerSpec();
    await rig.launcher.launch(spec);
    // The watch breaks and the history it would resume from is gone: a change made meanwhile
    // is found by the new list.
    rig.fake.dropWatches();
    rig.fake.compactWatchHistory();
    rig.fake.setJobState(NS, spec.jobName, 'running');
    await eventually(() => (phasesOf(spec.jobName).includes('running') ? true : undefined));
    await eventually(() => (jobReads().watches > 0 ? true : undefined));
    rig.fake.setJobState(NS, spec.jobName, 'failed', { exitCode: 4 });
    const failed = await eventually(() => updates.find((u) => u.phase === 'failed'));
    assert.equal(failed.exitCode, 4);
    assert.deepEqual(phasesOf(spec.jobName), ['running', 'failed']);
    assert.ok(jobReads().lists >= 2, 'listed again after the watch ended');
  });

  it('reports a Job deleted under a live watch as failed, job-not-found', async () => {
    await rig.launcher.start(record, []);
    await eventually(() => (jobReads().watches > 0 ? true : undefined));
    const atStart = jobReads();
    const spec = runnerSpec();
    await rig.launcher.launch(spec);
    rig.fake.remove('jobs', NS, spec.jobName);
    const gone = await eventually(() => updates.find((u) => u.jobName === spec.jobName));
    assert.deepEqual([gone.phase, gone.summary?.reason], ['failed', 'job-not-found']);
    assert.deepEqual(jobReads(), atStart, 'seen on the watch, not by listing');
  });

  it('reports a failed Job with its reason and exit code', async () => {
    await rig.launcher.start(record, []);
    const spec = runnerSpec();
    await rig.launcher.launch(spec);
    rig.fake.setJobState(NS, spec.jobName, 'failed', { exitCode: 3, reason: 'DeadlineExceeded' });
    const failed = await eventually(() => updates.find((u) => u.phase === 'failed'));
    assert.equal(failed.exitCode, 3);
    assert.equal(failed.summary?.reason, 'DeadlineExceeded');
  });

  it('reports active jobs that no longer exist as failed, and finished ones as they ended', async () => {
    const spec = runnerSpec();
    await rig.launcher.launch(spec);
    rig.fake.setJobState(NS, spec.jobName, 'succeeded');
    const fresh = new KubernetesLauncher({
      apis: apisFor(rig.fake),
      namespace: NS,
      killGraceMs: 5000,
      pollIntervalMs: 100,
      logger: log.logger,
    });
    try {
      await fresh.start(record, [
        {
          jobName: 'svc-v01-runner-gone',
          phase: 'running',
          podIdentity: null,
          managerInstance: 'm',
        },
        { jobName: spec.jobName, phase: 'running', podIdentity: null, managerInstance: 'm' },
      ]);
      assert.deepEqual(
        await eventually(() => updates.find((u) => u.jobName === 'svc-v01-runner-gone')),
        {
          jobName: 'svc-v01-runner-gone',
          phase: 'failed',
          exitCode: null,
          summary: {
            reason: 'job-not-found',
            message: 'the Job no longer exists; it was deleted before its outcome was seen',
          },
        },
      );
      await eventually(() => (phasesOf(spec.jobName).length > 0 ? true : undefined));
      assert.deepEqual(phasesOf(spec.jobName), ['succeeded']);
    } finally {
      await fresh.close();
    }
  });

  it('follows live Jobs of another manager once they are old enough, not fresh ones', async () => {
    const labels = {
      'app.kubernetes.io/name': 'svc-runner',
      'app.kubernetes.io/managed-by': 'svc-run-manager',
    };
    const template = { spec: { containers: [{ name: 'runner', image: 'x' }] } };
    rig.fake.seed('jobs', NS, {
      metadata: {
        name: 'svc-v01-runner-foreign',
        labels,
        creationTimestamp: '2020-01-01T00:00:00Z',
      },
      spec: { template },
    });
    rig.fake.seed('jobs', NS, {
      metadata: { name: 'svc-v01-runner-fresh', labels },
      spec: { template },
    });
    rig.fake.setJobState(NS, 'svc-v01-runner-foreign', 'running');
    rig.fake.setJobState(NS, 'svc-v01-runner-fresh', 'running');
    await rig.launcher.start(record, []);
    await eventually(() =>
      phasesOf('svc-v01-runner-foreign').includes('running') ? true : undefined,
    );
    assert.deepEqual(phasesOf('svc-v01-runner-fresh'), [], 'its own manager reports it');
  });

  it('cancel deletes the Job in the background; its per-job Secret goes with it', async () => {
    await rig.launcher.start(record, []);
    const spec = runnerSpec();
    await rig.launcher.launch(spec);
    rig.fake.setJobState(NS, spec.jobName, 'running');
    await rig.launcher.cancel(spec.jobName);
    const del = rig.fake.requests.find((r) => r.method === 'DELETE')!;
    assert.equal(del.path, `/apis/batch/v1/namespaces/${NS}/jobs/${spec.jobName}`);
    assert.equal(del.query.propagationPolicy, 'Background');
    assert.equal(rig.fake.get('jobs', NS, spec.jobName), undefined);
    assert.equal(rig.fake.get('secrets', NS, `${spec.jobName}-env`), undefined);
    assert.deepEqual(rig.fake.list('pods', NS), []);
    assert.equal(phasesOf(spec.jobName).at(-1), 'cancelled');
    await new Promise((r) => setTimeout(r, 300));
    assert.ok(!phasesOf(spec.jobName).includes('failed'), 'a cancelled job is not reported lost');
    await rig.launcher.cancel(spec.jobName); // already gone: no error
  });

  it('sweeps per-job Secrets whose Job is gone at start', async () => {
    const labels = {
      'app.kubernetes.io/component': 'runner-env',
      'app.kubernetes.io/managed-by': 'svc-run-manager',
      'svc.dev/job-name': 'svc-v01-runner-old',
    };
    rig.fake.seed('secrets', NS, {
      metadata: {
        name: 'svc-v01-runner-old-env',
        labels,
        creationTimestamp: '2020-01-01T00:00:00Z',
      },
    });
    rig.fake.seed('secrets', NS, {
      metadata: {
        name: 'svc-v01-runner-new-env',
        labels: { ...labels, 'svc.dev/job-name': 'svc-v01-runner-new' },
      },
    });
    rig.fake.seed('secrets', NS, { metadata: { name: 'kube-root-ca.crt' } });
    await rig.launcher.start(record, []);
    await eventually(() =>
      rig.fake.get('secrets', NS, 'svc-v01-runner-old-env') === undefined ? true : undefined,
    );
    await rig.launcher.close(); // the first pass has finished
    assert.ok(
      rig.fake.get('secrets', NS, 'svc-v01-runner-new-env'),
      'a young one may be mid-launch',
    );
    assert.ok(rig.fake.get('secrets', NS, 'kube-root-ca.crt'));
  });
});
