import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ServiceError } from '@svc/contracts';
import { LocalLauncher } from '../src/launcher/local.js';
import {
  capturedLogger,
  useKubeLauncher,
  containerEnv,
  runnerSpec,
  sessionPvc,
  toolCredential,
  validateManifest,
} from './kube-helpers.js';

const NS = 'svc-v01';
const log = capturedLogger();
const rig = useKubeLauncher(NS, log);

const TOKEN = 'manager-token-value-0123456789';
const LAB_KEY = 'lab-key-value-0123456789';

describe('KubernetesLauncher.render', () => {
  it('shows the Job and per-job Secret with key names and hashes, never a value', () => {
    const spec = runnerSpec();
    const rendered = rig.launcher.render(spec) as any;
    assert.equal(rendered.valuesPrinted, false);
    assert.equal(rendered.secret.metadata.name, `${spec.jobName}-env`);
    assert.equal(rendered.secret.data, undefined);
    assert.deepEqual(
      rendered.secretData.map((d: any) => d.key),
      ['transient-env.json', 'manager-token'],
    );
    for (const entry of rendered.secretData) assert.match(entry.sha256, /^[0-9a-f]{64}$/);
    assert.deepEqual(rendered.transientEnv.names, ['LAB_API_KEY']);
    const text = JSON.stringify(rendered);
    assert.ok(!text.includes(TOKEN) && !text.includes(LAB_KEY), 'no value in the rendering');
    validateManifest(rendered.job);
    validateManifest(rendered.secret);
  });

  it('gives the runner the same variables as the local launcher, with pod paths', () => {
    const spec = runnerSpec({
      sessionPvc: sessionPvc('ses-abc123'),
      toolCredentials: [
        toolCredential('codehost', 'svc-v01-tool-codehost', ['token'], {
          kind: 'env',
          envName: 'GH_TOKEN',
        }),
      ],
    });
    const local = new LocalLauncher({
      jobsRoot: '/tmp/jobs',
      secretsRoot: '/tmp/secrets',
      runnerEntry: '/app/main.js',
      nodePath: '/usr/bin/node',
      instanceId: 'mgr-x',
      killGraceMs: 1000,
      logger: log.logger,
      inherit: [],
    }).render(spec) as { env: Record<string, string> };
    const env = containerEnv((rig.launcher.render(spec) as any).job);
    // Host-only: a local job's directory, and the tool probes shared by the runners of a host
    // (a pod probes its own image once).
    const hostOnly = ['SVC_JOB_DIR', 'SVC_WORK_READY_CACHE'];
    const localNames = Object.keys(local.env).filter((n) => !hostOnly.includes(n));
    assert.deepEqual(
      localNames.filter((n) => !(n in env)),
      [],
      'every variable of the local contract is set',
    );
    assert.deepEqual(
      {
        SVC_SECRET_DIR: env.SVC_SECRET_DIR,
        SVC_PROFILE_DIR: env.SVC_PROFILE_DIR,
        SVC_WORKSPACE_DIR: env.SVC_WORKSPACE_DIR,
        SVC_AGENT_HOME: env.SVC_AGENT_HOME,
        SVC_RUNNER_HOME: env.SVC_RUNNER_HOME,
        HOME: env.HOME,
        SVC_SESSION_PVC_MOUNT_PATH: env.SVC_SESSION_PVC_MOUNT_PATH,
        SVC_AGENT_ROLLOUT_SUBDIR: env.SVC_AGENT_ROLLOUT_SUBDIR,
      },
      {
        SVC_SECRET_DIR: '/var/run/svc/secret',
        SVC_PROFILE_DIR: '/var/run/svc/profile',
        SVC_WORKSPACE_DIR: '/home/runner/workspace',
        SVC_AGENT_HOME: '/home/runner/agent-home',
        SVC_RUNNER_HOME: '/home/runner',
        HOME: '/home/runner',
        SVC_SESSION_PVC_MOUNT_PATH: '/home/runner/agent-home/sessions',
        SVC_AGENT_ROLLOUT_SUBDIR: 'sessions',
      },
    );
    for (const name of ['SVC_RUN_ID', 'SVC_RUNNER_ID', 'SVC_ATTEMPT_ID', 'SVC_RUNNER_JOB_ID'])
      assert.equal(env[name], local.env[name], name);
    assert.equal(env.SVC_JOB_NAME, spec.jobName);
    assert.equal(env.SVC_IMAGE, spec.image.ref);
    assert.equal(env.SVC_MANAGER_URL, spec.managerUrl);
    assert.equal(env.SVC_SESSION_PVC_NAME, 'svc-v01-session-ses-abc123');
    assert.equal(env.SVC_SESSION_PVC_NAMESPACE, NS);
    assert.equal(env.SVC_RUNNER_IDLE_EXIT_MS, '120000');
    const tools = JSON.parse(env.SVC_TOOL_CREDENTIALS!);
    assert.equal(tools[0].secretDir, '/var/run/svc/tools/svc-v01-tool-codehost');
    assert.deepEqual(tools[0].projection, { kind: 'env', envName: 'GH_TOKEN' });
  });

  it('refuses Secrets and claims a runner may not mount', () => {
    const refused = (spec: ReturnType<typeof runnerSpec>, kind: string) =>
      assert.throws(
        () => rig.launcher.render(spec),
        (e: unknown) => e instanceof ServiceError && e.failureKind === kind,
      );
    const base = runnerSpec();
    refused(
      runnerSpec({ providerSecret: { ...base.providerSecret, name: 'kube-root-ca.crt' } }),
      'tenant-policy-denied',
    );
    refused(
      runnerSpec({ providerSecret: { ...base.providerSecret, name: 'svc-v01-tool-x' } }),
      'tenant-policy-denied',
    );
    refused(
      runnerSpec({
        toolCredentials: [
          {
            ...toolCredential('codehost', 'svc-v01-tool-codehost', [], {
              kind: 'env',
              envName: 'GH_TOKEN',
            }),
            secretRef: {
              namespace: 'kube-system',
              name: 'svc-v01-tool-codehost',
              keys: [],
              valuesPrinted: false,
            },
          },
        ],
      }),
      'tenant-policy-denied',
    );
    refused(
      runnerSpec({ sessionPvc: { ...sessionPvc('ses-a1'), pvcName: 'svc-v01-session-ses-b2' } }),
      'tenant-policy-denied',
    );
    refused(
      runnerSpec({ sessionPvc: { ...sessionPvc('ses-a1'), agentRolloutSubdir: '../auth' } }),
      'schema-invalid',
    );
  });
});

describe('KubernetesLauncher.launch', () => {
  it('creates the per-job Secret, then the Job, and ties the Secret to the Job', async () => {
    const spec = runnerSpec();
    const result = await rig.launcher.launch(spec);
    assert.equal(result.phase, 'starting');
    assert.deepEqual(
      rig.fake.requests.map((r) => `${r.method} ${r.path}`),
      [
        `POST /api/v1/namespaces/${NS}/secrets`,
        `POST /apis/batch/v1/namespaces/${NS}/jobs`,
        `PATCH /api/v1/namespaces/${NS}/secrets/${spec.jobName}-env`,
      ],
    );
    const job = rig.fake.get('jobs', NS, spec.jobName) as any;
    const secret = rig.fake.get('secrets', NS, `${spec.jobName}-env`) as any;
    assert.deepEqual(secret.metadata.ownerReferences, [
      { apiVersion: 'batch/v1', kind: 'Job', name: spec.jobName, uid: job.metadata.uid },
    ]);
    assert.equal(result.podIdentity, `kubernetes:${NS}/job/${spec.jobName}#${job.metadata.uid}`);
    const decoded = (key: string) => Buffer.from(secret.data[key], 'base64').toString();
    assert.equal(decoded('manager-token'), TOKEN);
    assert.deepEqual(JSON.parse(decoded('transient-env.json')), [
      { name: 'LAB_API_KEY', value: LAB_KEY },
    ]);
    assert.equal(secret.immutable, true);
    // What was created is what render shows.
    const rendered = (rig.launcher.render(spec) as any).job;
    assert.deepEqual(job.spec.template.spec, rendered.spec.template.spec);
    assert.equal(job.spec.backoffLimit, 0);
    assert.equal(job.spec.ttlSecondsAfterFinished, 3600);
  });

  it('never sends a value anywhere but the per-job Secret data', async () => {
    await rig.launcher.launch(runnerSpec());
    const [secretCreate, ...rest] = rig.fake.requests;
    const { data: _data, ...secretWithoutData } = secretCreate!.body as any;
    const outside = JSON.stringify([
      secretWithoutData,
      ...rest.map((r) => [r.path, r.query, r.body]),
    ]);
    for (const value of [TOKEN, LAB_KEY, Buffer.from(TOKEN).toString('base64')])
      assert.ok(!outside.includes(value), 'a value left the per-job Secret');
    assert.ok(!log.lines.join('').includes(TOKEN));
  });

  it('runs as a locked-down, non-root pod with read-only projections and lookup labels', async () => {
    const spec = runnerSpec({
      toolCredentials: [
        toolCredential('platform-ssh', 'svc-v01-tool-platform-ssh', ['PLATFORM_SSH_CLIENT_TOKEN'], {
          kind: 'env',
          envName: 'PLATFORM_SSH_CLIENT_TOKEN',
        }),
        toolCredential('codehost', 'svc-v01-tool-codehost', ['id_ed25519', 'known_hosts'], {
          kind: 'volume',
          mountPath: '/home/runner/.ssh',
        }),
      ],
      sessionPvc: sessionPvc('ses-abc123'),
    });
    await rig.launcher.launch(spec);
    const job = rig.fake.get('jobs', NS, spec.jobName) as any;
    validateManifest(job);
    const labels = job.metadata.labels;
    assert.equal(labels['app.kubernetes.io/name'], 'svc-runner');
    assert.equal(labels['svc.dev/run-id'], spec.runId);
    assert.equal(labels['svc.dev/attempt-id'], spec.attemptId);
    assert.equal(labels['svc.dev/runner-job-id'], spec.runnerJobId);
    assert.equal(labels['svc.dev/session-id'], 'ses-abc123');
    assert.equal(job.metadata.namespace, NS);
    const pod = job.spec.template.spec;
    assert.equal(pod.restartPolicy, 'Never');
    assert.equal(pod.automountServiceAccountToken, false);
    assert.deepEqual(
      [
        pod.securityContext.runAsUser,
        pod.securityContext.runAsNonRoot,
        pod.securityContext.fsGroup,
      ],
      [1000, true, 1000],
    );
    const container = pod.containers[0];
    assert.equal(container.image, spec.image.ref);
    assert.equal(container.securityContext.allowPrivilegeEscalation, false);
    assert.equal(container.securityContext.readOnlyRootFilesystem, true);
    assert.deepEqual(container.securityContext.capabilities.drop, ['ALL']);

    const volume = (name: string) => pod.volumes.find((v: any) => v.name === name);
    const mount = (path: string) => container.volumeMounts.find((m: any) => m.mountPath === path);
    assert.equal(
      volume(mount('/var/run/svc/secret').name).secret.secretName,
      `${spec.jobName}-env`,
    );
    assert.equal(mount('/var/run/svc/secret').readOnly, true);
    assert.equal(
      volume(mount('/var/run/svc/profile').name).secret.secretName,
      'svc-v01-provider-builtin-a',
    );
    assert.equal(mount('/var/run/svc/profile').readOnly, true);
    for (const [secret, keys] of [
      ['svc-v01-tool-platform-ssh', ['PLATFORM_SSH_CLIENT_TOKEN']],
      ['svc-v01-tool-codehost', ['id_ed25519', 'known_hosts']],
    ] as const) {
      const m = mount(`/var/run/svc/tools/${secret}`);
      assert.equal(m.readOnly, true, secret);
      assert.equal(volume(m.name).secret.secretName, secret);
      assert.deepEqual(
        volume(m.name).secret.items.map((i: any) => i.key),
        keys,
        'only the granted keys are projected',
      );
    }
    const session = mount('/home/runner/agent-home/sessions');
    assert.ok(session, 'the claim is mounted at <agent_home>/<agent_rollout_subdir>');
    assert.notEqual(session.readOnly, true);
    assert.equal(
      volume(session.name).persistentVolumeClaim.claimName,
      'svc-v01-session-ses-abc123',
    );
    for (const path of ['/home/runner/workspace', '/tmp'])
      assert.deepEqual(volume(mount(path).name).emptyDir, {}, path);
    // Homes hold auth.json, keyed config and tool credential copies: memory-backed only.
    for (const path of ['/home/runner', '/home/runner/agent-home'])
      assert.deepEqual(volume(mount(path).name).emptyDir, { medium: 'Memory' }, path);
    // Every secret volume is a read-only projection.
    for (const m of container.volumeMounts)
      if (volume(m.name).secret) assert.equal(m.readOnly, true, m.mountPath);
  });

  it('keeps a retained Job (TTL 0 means keep) and hashes ids too long for a label', async () => {
    const spec = runnerSpec({ ttlSecondsAfterFinished: 0, attemptId: `att-${'x'.repeat(80)}` });
    await rig.launcher.launch(spec);
    const job = rig.fake.get('jobs', NS, spec.jobName) as any;
    assert.equal(job.spec.ttlSecondsAfterFinished, undefined);
    assert.match(job.metadata.labels['svc.dev/attempt-id'], /^sha256-[0-9a-f]{56}$/);
  });

  it('fails as infra-failed and removes the per-job Secret when the Job cannot be created', async () => {
    rig.fake.failNext('POST', 'jobs', 403, 'Forbidden');
    const spec = runnerSpec();
    await assert.rejects(rig.launcher.launch(spec), (e: unknown) => {
      assert.ok(e instanceof ServiceError);
      assert.equal(e.failureKind, 'infra-failed');
      assert.match(e.message, /create Job .* HTTP 403 Forbidden/);
      assert.ok(!e.message.includes('Headers'), 'no response dump in the message');
      return true;
    });
    assert.equal(rig.fake.get('secrets', NS, `${spec.jobName}-env`), undefined);
    assert.equal(rig.fake.requests.at(-1)!.method, 'DELETE');
  });
});

describe('the git bundle fetch credential', () => {
  it('is projected read-only for the runner alone, named by the run, and refused outside the tool prefix', () => {
    const bundleCredential = {
      namespace: NS,
      name: 'svc-v01-tool-gitfetch',
      keys: ['token'],
      valuesPrinted: false as const,
    };
    const { job } = rig.launcher.render(runnerSpec({ bundleCredential })) as any;
    validateManifest(job);
    const volume = job.spec.template.spec.volumes.find((v: any) => v.name === 'bundle-credential');
    assert.equal(volume.secret.secretName, 'svc-v01-tool-gitfetch');
    assert.deepEqual(volume.secret.items, [{ key: 'token', path: 'token' }]);
    const container = job.spec.template.spec.containers[0];
    const mount = container.volumeMounts.find((m: any) => m.name === 'bundle-credential');
    assert.equal(mount.readOnly, true);
    const env = containerEnv(job);
    assert.equal(env.SVC_BUNDLE_CREDENTIAL_DIR, mount.mountPath);
    assert.throws(
      () =>
        rig.launcher.render(
          runnerSpec({ bundleCredential: { ...bundleCredential, name: 'kube-root-ca.crt' } }),
        ),
      ServiceError,
    );
  });
});
