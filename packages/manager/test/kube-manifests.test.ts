import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { after, before, describe, it } from 'node:test';
// Installed with @kubernetes/client-node; its own loadAllYaml converts to client models.
import yaml from 'js-yaml';
import { FakeKube } from '@svc/testkit';
import { loadConfig } from '../src/config.js';
import { KubernetesLauncher } from '../src/launcher/kubernetes.js';
import { KubernetesSessionVolumes } from '../src/sessions/kubernetes-volumes.js';
import {
  apisFor,
  capturedLogger,
  runnerSpec,
  sessionPvc,
  toolCredential,
  validateManifest,
} from './kube-helpers.js';

const DEPLOY = join(import.meta.dirname, '../../../deploy');

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return yamlFiles(path);
    return /\.ya?ml$/.test(entry.name) ? [path] : [];
  });
}

const documents = yamlFiles(DEPLOY).flatMap((file) =>
  (yaml.loadAll(readFileSync(file, 'utf8')) as any[])
    .filter((doc) => doc !== null && doc !== undefined)
    .map((doc) => ({ file: relative(DEPLOY, file), doc })),
);
const find = (kind: string, name: string) => {
  const found = documents.find((d) => d.doc.kind === kind && d.doc.metadata.name === name);
  assert.ok(found, `${kind} ${name} in deploy/`);
  return found.doc;
};

/** The restricted Pod Security profile the namespaces enforce, checked on a pod spec. */
function assertRestricted(pod: any, where: string): void {
  const podContext = pod.securityContext ?? {};
  assert.equal(podContext.runAsNonRoot, true, `${where}: runAsNonRoot`);
  assert.equal(podContext.seccompProfile?.type, 'RuntimeDefault', `${where}: seccomp`);
  for (const container of pod.containers) {
    const c = container.securityContext ?? {};
    assert.equal(c.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation`);
    assert.deepEqual(c.capabilities?.drop, ['ALL'], `${where}: capabilities`);
    assert.equal(c.readOnlyRootFilesystem, true, `${where}: readOnlyRootFilesystem`);
    assert.notEqual(c.privileged, true);
  }
  for (const volume of pod.volumes ?? []) {
    const kinds = Object.keys(volume).filter((k) => k !== 'name');
    assert.ok(
      kinds.every((k) => ['emptyDir', 'secret', 'persistentVolumeClaim', 'configMap'].includes(k)),
      `${where}: volume ${volume.name} is ${kinds.join(',')}`,
    );
  }
}

describe('deploy/ manifests', () => {
  it('are all valid against the Kubernetes OpenAPI schema', () => {
    assert.ok(documents.length >= 10, `found ${documents.length} documents`);
    for (const { file, doc } of documents) {
      assert.doesNotThrow(() => validateManifest(doc), file);
      assert.ok(doc.metadata.namespace || doc.kind === 'Namespace', `${file}: namespaced`);
    }
  });

  it('expose nothing outside the cluster', () => {
    const kinds = documents.map((d) => d.doc.kind);
    assert.ok(!kinds.includes('Ingress'));
    for (const { doc } of documents.filter((d) => d.doc.kind === 'Service')) {
      assert.equal(doc.spec.type, 'ClusterIP', doc.metadata.name);
      for (const port of doc.spec.ports) assert.equal(port.nodePort, undefined);
    }
  });

  it('give the manager only the permissions the spec allows, in its namespace', () => {
    const kinds = documents.map((d) => d.doc.kind);
    assert.ok(!kinds.includes('ClusterRole') && !kinds.includes('ClusterRoleBinding'));
    const role = find('Role', 'svc-run-manager');
    assert.equal(role.metadata.namespace, 'svc-v01');
    const granted = new Map<string, Set<string>>();
    for (const rule of role.rules) {
      for (const resource of rule.resources) {
        assert.notEqual(resource, '*');
        const key = `${rule.apiGroups.join(',')}/${resource}`;
        const verbs = granted.get(key) ?? new Set<string>();
        for (const verb of rule.verbs) {
          assert.notEqual(verb, '*');
          verbs.add(verb);
        }
        granted.set(key, verbs);
      }
    }
    const sorted = Object.fromEntries([...granted].map(([k, v]) => [k, [...v].sort()]));
    assert.deepEqual(sorted, {
      '/secrets': ['create', 'delete', 'get', 'list', 'patch', 'update'],
      '/persistentvolumeclaims': ['create', 'delete', 'get', 'list', 'watch'],
      'batch/jobs': ['create', 'delete', 'get', 'list', 'watch'],
      '/pods': ['get', 'list'],
    });
    const binding = find('RoleBinding', 'svc-run-manager');
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: 'svc-run-manager', namespace: 'svc-v01' },
    ]);
  });

  it('run the manager in runtime mode on Kubernetes, with a configuration it accepts', () => {
    const deployment = find('Deployment', 'svc-run-manager');
    const pod = deployment.spec.template.spec;
    assertRestricted(pod, 'manager');
    const container = pod.containers[0];
    const env: Record<string, string> = {};
    for (const entry of container.env) {
      if (entry.valueFrom) {
        assert.equal(entry.valueFrom.secretKeyRef.name, 'svc-run-manager', entry.name);
        env[entry.name] =
          entry.name === 'DATABASE_URL' ? 'postgres://svc:pw@db.svc-v01.svc:5432/svc' : 'key';
      } else env[entry.name] = entry.value;
    }
    assert.ok(container.env.find((e: any) => e.name === 'SVC_API_KEY').valueFrom.secretKeyRef);
    assert.ok(container.env.find((e: any) => e.name === 'DATABASE_URL').valueFrom.secretKeyRef);
    assert.equal(container.readinessProbe.httpGet.path, '/health/readiness');
    assert.equal(container.livenessProbe.httpGet.path, '/health/live');
    const config = loadConfig(env);
    assert.equal(config.deploymentMode, 'runtime');
    assert.equal(config.launcher.kind, 'kubernetes');
    assert.equal(config.secretStore.kind, 'kubernetes');
    assert.equal(config.launcher.namespace, 'svc-v01');
    assert.match(config.runnerJobs.defaultImage, /@sha256:[0-9a-f]{64}$/);
  });

  it('let only the service namespace reach the auth broker, which holds its credential in a file', () => {
    const deployment = find('Deployment', 'svc-auth-broker');
    const pod = deployment.spec.template.spec;
    assertRestricted(pod, 'auth-broker');
    const env = Object.fromEntries(pod.containers[0].env.map((e: any) => [e.name, e.value]));
    assert.match(env.AUTH_BROKER_CODEHOST_CREDENTIAL_REF, /^file:\/var\/run\/svc\/codehost\//);
    assert.ok(env.AUTH_BROKER_ALLOWED_REPOS);
    const mount = pod.containers[0].volumeMounts.find((m: any) => m.name === 'codehost-credential');
    assert.equal(mount.readOnly, true);
    const policy = find('NetworkPolicy', 'svc-auth-broker-ingress');
    assert.deepEqual(policy.spec.policyTypes, ['Ingress']);
    assert.deepEqual(policy.spec.ingress, [
      {
        from: [
          { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'svc-v01' } } },
        ],
        ports: [{ protocol: 'TCP', port: 8081 }],
      },
    ]);
  });

  it('build a work-ready, non-root runner image', () => {
    const dockerfile = readFileSync(join(DEPLOY, 'runner/Dockerfile'), 'utf8');
    assert.match(dockerfile, /^ENTRYPOINT \["node", "\/app\/packages\/runner\/dist\/main\.js"\]$/m);
    assert.match(dockerfile, /SVC_REQUIRED_TOOLS=git,node,npm,ssh,curl,rg,jq,python3/);
    assert.match(dockerfile, /SVC_SERVICE_TOOLS_DIR=\/app\/tools/);
    assert.match(dockerfile, /^USER 1000:1000$/m);
    assert.match(dockerfile, /useradd --uid 1000 .*--home-dir \/home\/runner/);
    assert.match(dockerfile, /npm ci --omit=dev/);
    for (const tool of ['git', 'openssh-client', 'ripgrep', 'jq', 'python3', 'curl', 'gh'])
      assert.match(dockerfile, new RegExp(`'${tool}=`), tool);
  });
});

describe('manifests the manager renders and sends', () => {
  let fake: FakeKube;
  before(async () => {
    fake = await FakeKube.start();
  });
  after(() => fake.close());

  it('the runner Job, its per-job Secret and a session claim are valid and restricted', async () => {
    const launcher = new KubernetesLauncher({
      apis: apisFor(fake),
      namespace: 'svc-v01',
      killGraceMs: 5000,
      pollIntervalMs: 1000,
      logger: capturedLogger().logger,
    });
    const spec = runnerSpec({
      sessionPvc: sessionPvc('ses-m1'),
      toolCredentials: [
        toolCredential('codehost', 'svc-v01-tool-codehost', ['id_ed25519'], {
          kind: 'volume',
          mountPath: '/home/runner/.ssh',
        }),
      ],
    });
    const rendered = launcher.render(spec) as any;
    validateManifest(rendered.job);
    validateManifest(rendered.secret);
    assertRestricted(rendered.job.spec.template.spec, 'runner Job');
    await launcher.launch(spec);
    await new KubernetesSessionVolumes({
      core: apisFor(fake).core,
      namespace: 'svc-v01',
      storageClass: 'local-path',
    }).create('ses-m1');
    const sent = fake.requests.filter((r) => r.method === 'POST').map((r) => r.body as any);
    assert.deepEqual(
      sent.map((b) => b.kind),
      ['Secret', 'Job', 'PersistentVolumeClaim'],
    );
    for (const body of sent) validateManifest(body);
    await launcher.close();
  });
});
