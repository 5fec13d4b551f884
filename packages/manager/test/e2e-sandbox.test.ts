import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  canary,
  ensureTestTag,
  FakeProvider,
  findCanaries,
  functionCallOutput,
  killTagged,
  processesWithTag,
  waitForNoTaggedProcesses,
} from '@svc/testkit';
import { waitFor } from './e2e-helpers.js';
import {
  commandDone,
  dispatchTo,
  eventsOf,
  putProfile,
  startManagerProcess,
  type ManagerProcess,
} from './manager-process.js';

/**
 * The local runner sandbox, tried as an attacker would: a manager process with secrets in its
 * environment (API key, database password), two profiles, two live jobs. The real agent, driven
 * by the loopback provider, runs shell probes for everything a run must not reach. What the
 * probes print goes to the provider as tool output, so "found nothing" is asserted on what the
 * provider received as well as on the run's events. The same probes with isolation off find
 * the secrets: the probes work, the sandbox is what stops them.
 */

const tag = ensureTestTag();
const root = process.getuid?.() === 0;
let provider: FakeProvider;

before(async () => {
  provider = await FakeProvider.start();
});
after(async () => {
  await provider?.close();
  const left = await waitForNoTaggedProcesses(tag, 15_000);
  killTagged(tag);
  assert.deepEqual(left, [], 'no manager, runner, agent or shell outlives the tests');
});

interface Rig {
  m: ManagerProcess;
  apiKey: string;
  dbPassword: string | null;
  otherKey: string;
  ownKey: string;
}

async function rig(env: Record<string, string> = {}): Promise<Rig> {
  const apiKey = canary('manager-api-key');
  const dbPassword = canary('db-password');
  const otherKey = `sk-${canary('other-profile-key')}`;
  const ownKey = `sk-${canary('own-profile-key')}`;
  const m = await startManagerProcess({ SVC_API_KEY: apiKey, ...env }, { dbPassword });
  await putProfile(m, 'probe-other', otherKey, provider.baseUrl);
  await putProfile(m, 'probe-self', ownKey, provider.baseUrl);
  return {
    m,
    apiKey,
    dbPassword: m.databasePassword,
    otherKey,
    ownKey,
  };
}

/** Every probe, each section introduced by a marker line. */
function probeScript(dataDir: string, managerPid: number, otherJob: string): string {
  return [
    'echo "== uid"; id -u',
    `echo "== secrets"; ls -a ${dataDir}/secrets 2>&1; cat ${dataDir}/secrets/svc-v01-provider-probe-other/current/auth.json 2>&1`,
    `echo "== find-secrets"; timeout 5 find /tmp /var /run /home /root /srv /opt -maxdepth 7 -name 'svc-v01-provider-*' 2>/dev/null | head -5`,
    `echo "== jobs"; ls -a ${dataDir}/jobs 2>&1; cat ${dataDir}/jobs/${otherJob}/agent-home/auth.json 2>&1`,
    `echo "== data-dir"; ls -a ${dataDir} 2>&1`,
    `echo "== manager-environ"; tr '\\0' '\\n' < /proc/${managerPid}/environ 2>&1 | head -c 6000`,
    `echo "== manager-cmdline"; tr '\\0' ' ' < /proc/${managerPid}/cmdline 2>&1`,
    'echo "== ps"; ps -eo pid,args 2>&1 | head -60',
    'echo "== end"',
  ].join('\n');
}

/** The text between one marker and the next. */
function section(output: string, name: string): string {
  const start = output.indexOf(`== ${name}\n`);
  assert.ok(start >= 0, `the probe printed its ${name} section:\n${output}`);
  const rest = output.slice(start + name.length + 4);
  return rest.slice(0, rest.search(/^== /m) === -1 ? undefined : rest.search(/^== /m));
}

/**
 * A job of the other profile holding a shell (its agent home has that profile's key), then a
 * job of this profile under `policy` that runs the probes; returns what the probes printed as
 * the provider received it, and the probing run's events.
 */
async function probe(r: Rig, policy: Record<string, unknown>) {
  // Each job its own script: the holding agent asks again by itself when its call yields, and
  // must never be the one handed the probes.
  provider.dropSteps();
  provider.enqueueFor(r.otherKey, { kind: 'tool-call', command: 'sleep 45', callId: 'hold' });
  const other = await dispatchTo(r.m, 'Hold on.', {
    backendProfile: 'probe-other',
    executionPolicy: { timeoutMs: 60_000 },
  });
  await waitFor(
    'the other job to run its shell',
    () => processesWithTag(tag).some((p) => p.command.includes('sleep 45')),
    30_000,
  );
  const before = provider.requestsOf().length;
  provider.enqueueFor(
    r.ownKey,
    {
      kind: 'tool-call',
      command: probeScript(r.m.dataDir, r.m.pid, other.job.jobName as string),
      callId: 'probe',
    },
    {
      kind: 'tool-call',
      command:
        'echo hello > note.txt && cat note.txt && git init -q repo && cd repo && echo x > f && git add f && git -c user.email=t@e -c user.name=t commit -qm first && git log --oneline | wc -l && command -v apply_patch tran trans; touch /var/tmp/outside-workspace 2>/dev/null && echo outside-written || echo outside-refused',
      callId: 'work',
    },
    { kind: 'text', text: 'probed' },
  );
  const mine = await dispatchTo(r.m, 'Probe.', {
    backendProfile: 'probe-self',
    executionPolicy: { timeoutMs: 60_000, ...policy },
  });
  const done = await commandDone(r.m, mine.runId, mine.commandId);
  assert.equal(done.state, 'completed', JSON.stringify(done));
  const requests = provider.requestsOf().slice(before);
  const probeOutput = requests.map((q) => functionCallOutput(q, 'probe')).find(Boolean) ?? '';
  const workOutput = requests.map((q) => functionCallOutput(q, 'work')).find(Boolean) ?? '';
  const events = await eventsOf(r.m, mine.runId);
  await r.m.api('POST', `/api/v1/runs/${other.runId}/cancel`, { reason: 'probe done' });
  await waitFor(
    'the other job to end',
    () => !processesWithTag(tag).some((p) => p.command.includes('sleep 45')),
    30_000,
  );
  return { probeOutput, workOutput, requests, events, mine, other };
}

function assertNothingFound(r: Rig, result: Awaited<ReturnType<typeof probe>>) {
  const { probeOutput, requests, events, mine } = result;
  assert.match(probeOutput, /== end/, `the probe ran to its end:\n${probeOutput}`);
  const secrets = [r.apiKey, r.otherKey, ...(r.dbPassword ? [r.dbPassword] : [])];
  assert.deepEqual(
    findCanaries(JSON.stringify(requests.map((q) => q.body)), secrets),
    [],
    'the provider received none of the manager’s or another profile’s secrets',
  );
  assert.deepEqual(findCanaries(JSON.stringify(events), secrets), [], 'no secret in the events');
  if (root) assert.equal(section(probeOutput, 'uid').trim(), '65532', 'an unprivileged uid');
  assert.match(section(probeOutput, 'secrets'), /No such file or directory/);
  assert.equal(section(probeOutput, 'find-secrets').trim(), '', 'no Secret store anywhere');
  const jobs = section(probeOutput, 'jobs');
  assert.deepEqual(
    jobs.split('\n').filter((l) => l.startsWith('svc-')),
    [mine.job.jobName],
    `only its own job directory: ${jobs}`,
  );
  assert.match(jobs, /agent-home\/auth.json: No such file or directory/, 'not the other job');
  assert.deepEqual(
    section(probeOutput, 'data-dir')
      .split('\n')
      .filter((l) => l && l !== '.' && l !== '..'),
    ['jobs'],
    'nothing else of the data dir: no Secrets, sessions, database or cache files',
  );
  assert.match(section(probeOutput, 'manager-environ'), /No such file or directory/);
  assert.match(section(probeOutput, 'manager-cmdline'), /No such file or directory/);
  const ps = section(probeOutput, 'ps');
  assert.doesNotMatch(ps, /server\.js|sleep 45/, `neither the manager nor the other job: ${ps}`);
  assert.ok(ps.trim().split('\n').length < 20, `only the job's own processes: ${ps}`);
}

/**
 * The agent's own sandbox still applies inside: workspace-write cannot write outside the
 * workspace and /tmp (/var/tmp is writable in the job's sandbox, so only the agent's refuses).
 */
function assertWorkDone(workOutput: string, agentSandboxed: boolean) {
  const lines = workOutput.split('\n');
  assert.ok(
    lines.includes(agentSandboxed ? 'outside-refused' : 'outside-written'),
    `the agent's own sandbox ${agentSandboxed ? 'holds' : 'is off'}: ${workOutput}`,
  );
  assert.ok(lines.includes('hello'), `a workspace write: ${workOutput}`);
  assert.ok(lines.includes('1'), `a git commit: ${workOutput}`);
  for (const tool of ['apply_patch', 'tran', 'trans'])
    assert.ok(
      lines.some((l) => l.endsWith(`/${tool}`)),
      `the service tool ${tool} on PATH: ${workOutput}`,
    );
}

describe('a local runner Job in its bubblewrap sandbox', () => {
  let r: Rig;
  before(async () => {
    r = await rig();
  });
  after(async () => {
    await r?.m.close();
  });

  it('reports the sandbox on /health and in the start log', async () => {
    const health = (await r.m.api('GET', '/health')).body;
    assert.equal(health.extra.isolation.mode, 'bubblewrap');
    assert.equal(health.extra.isolation.available, true, JSON.stringify(health.extra.isolation));
    assert.deepEqual(health.extra.isolation.runAs, root ? { uid: 65532, gid: 65532 } : null);
    assert.match(
      r.m.output(),
      /runner isolation: every local runner Job runs in its own bubblewrap sandbox/,
    );
  });

  it('under the default policy (workspace-write): the probes find nothing, the work completes', async () => {
    const result = await probe(r, {});
    assertNothingFound(r, result);
    assertWorkDone(result.workOutput, true);
  });

  it('under danger-full-access: the probes find nothing, the work completes', async () => {
    const result = await probe(r, { sandbox: 'danger-full-access', network: 'enabled' });
    assertNothingFound(r, result);
    assertWorkDone(result.workOutput, false);
  });
});

describe('a local runner Job with isolation off (SVC_LOCAL_ISOLATION=off)', () => {
  it('is reported, and the same probes reach the manager’s and the other profile’s secrets', async () => {
    const r = await rig({ SVC_LOCAL_ISOLATION: 'off' });
    try {
      const health = (await r.m.api('GET', '/health')).body;
      assert.equal(health.extra.isolation.mode, 'off');
      assert.match(r.m.output(), /runner isolation is off \(SVC_LOCAL_ISOLATION=off\)/);
      const { probeOutput, requests } = await probe(r, {
        sandbox: 'danger-full-access',
        network: 'enabled',
      });
      assert.match(probeOutput, /== end/);
      const received = JSON.stringify(requests.map((q) => q.body));
      assert.notDeepEqual(findCanaries(received, [r.apiKey]), [], 'the manager’s environment');
      assert.notDeepEqual(findCanaries(received, [r.otherKey]), [], 'another profile’s Secret');
      assert.match(section(probeOutput, 'manager-cmdline'), /server\.js/);
    } finally {
      await r.m.close();
    }
  });
});
