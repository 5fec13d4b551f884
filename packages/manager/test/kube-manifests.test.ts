import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
// Installed with @kubernetes/client-node; its own loadAllYaml converts to client models.
import yaml from 'js-yaml';
import { FakeKube } from '@svc/testkit';
import { loadConfig } from '../src/config.js';
import { createKubeApis } from '../src/launcher/kube-api.js';
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
const OVERLAYS = ['local', 'production'] as const;
const PINNED = /^[a-z0-9.:/-]+(?::[\w.-]+)?@sha256:[0-9a-f]{64}$/;

/** `kubectl kustomize` of an overlay, offline, as an operator renders it. */
function render(overlay: string): any[] {
  let out: string;
  try {
    out = execFileSync('kubectl', ['kustomize', join(DEPLOY, 'overlays', overlay)], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (error) {
    const e = error as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT')
      throw new Error(
        'kubectl is not installed: the deploy tests render the kustomize overlays with ' +
          '`kubectl kustomize` (kubectl 1.27 or newer; see docs/operations.md)',
      );
    throw new Error(
      `kubectl kustomize deploy/overlays/${overlay} failed: ${e.stderr ?? e.message}`,
    );
  }
  return (yaml.loadAll(out) as any[]).filter((doc) => doc !== null && doc !== undefined);
}

const rendered = Object.fromEntries(OVERLAYS.map((o) => [o, render(o)])) as Record<
  (typeof OVERLAYS)[number],
  any[]
>;
const documents = rendered.production.map((doc) => ({ file: 'overlays/production', doc }));
const find = (kind: string, name: string, docs = rendered.production) => {
  const found = docs.find((d) => d.kind === kind && d.metadata.name === name);
  assert.ok(found, `${kind} ${name} in the rendered overlay`);
  return found;
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

describe('deploy/ overlays rendered with kustomize', () => {
  for (const overlay of OVERLAYS) {
    it(`${overlay}: every document is valid against the Kubernetes schema, namespaced and labelled`, () => {
      const docs = rendered[overlay];
      assert.ok(docs.length >= 15, `found ${docs.length} documents`);
      for (const doc of docs) {
        const where = `${overlay}: ${doc.kind} ${doc.metadata?.name}`;
        assert.doesNotThrow(() => validateManifest(doc), where);
        assert.ok(doc.metadata.namespace || doc.kind === 'Namespace', `${where}: namespaced`);
        assert.equal(
          doc.metadata.labels?.['app.kubernetes.io/part-of'],
          'agent-run-service',
          where,
        );
      }
    });

    it(`${overlay}: every image is pinned by digest, set once in the overlay`, () => {
      const docs = rendered[overlay];
      const images = docs.flatMap((doc) => {
        const pod = doc.spec?.template?.spec ?? doc.template?.spec;
        return (pod?.containers ?? []).map((c: any) => c.image as string);
      });
      assert.equal(images.length, 3, images.join(' '));
      for (const image of images) assert.match(image, PINNED);
      const source = readFileSync(join(DEPLOY, 'overlays', overlay, 'kustomization.yaml'), 'utf8');
      const declared = (yaml.load(source) as any).images as Array<{
        name: string;
        newName: string;
      }>;
      assert.deepEqual(declared.map((i) => i.name).sort(), [
        'svc-auth-broker',
        'svc-run-manager',
        'svc-runner',
      ]);
      for (const entry of declared)
        assert.ok(
          images.some(
            (i) => i.startsWith(`${entry.newName}:`) || i.startsWith(`${entry.newName}@`),
          ),
          entry.name,
        );
      // The manager's default runner image is the one the overlay pinned.
      const manager = find('Deployment', 'svc-run-manager', docs).spec.template.spec.containers[0];
      const runnerImage = find('PodTemplate', 'svc-runner-image', docs).template.spec.containers[0]
        .image;
      assert.equal(manager.env.find((e: any) => e.name === 'SVC_RUNNER_IMAGE').value, runnerImage);
    });

    it(`${overlay}: namespaces enforce the restricted Pod Security profile`, () => {
      const namespaces = rendered[overlay].filter((d) => d.kind === 'Namespace');
      assert.deepEqual(namespaces.map((n) => n.metadata.name).sort(), [
        'svc-v01',
        'svc-v01-auth-broker',
      ]);
      for (const ns of namespaces) {
        assert.equal(ns.metadata.labels['pod-security.kubernetes.io/enforce'], 'restricted');
        assert.equal(ns.metadata.labels['pod-security.kubernetes.io/enforce-version'], 'latest');
      }
    });

    it(`${overlay}: runner pods take no connection and reach only manager, DNS, broker, providers`, () => {
      const policy = find('NetworkPolicy', 'svc-runner', rendered[overlay]);
      assert.deepEqual(policy.spec.podSelector, {
        matchLabels: { 'app.kubernetes.io/name': 'svc-runner' },
      });
      assert.deepEqual(policy.spec.policyTypes, ['Ingress', 'Egress']);
      assert.deepEqual(policy.spec.ingress ?? [], []);
      const [manager, dns, broker, providers, ...rest] = policy.spec.egress;
      assert.deepEqual(rest, []);
      assert.deepEqual(manager.to, [
        { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'svc-run-manager' } } },
      ]);
      assert.deepEqual(manager.ports, [{ protocol: 'TCP', port: 8080 }]);
      assert.equal(
        dns.to[0].namespaceSelector.matchLabels['kubernetes.io/metadata.name'],
        'kube-system',
      );
      assert.deepEqual(
        dns.ports.map((p: any) => `${p.protocol}/${p.port}`),
        ['UDP/53', 'TCP/53'],
      );
      assert.equal(
        broker.to[0].namespaceSelector.matchLabels['kubernetes.io/metadata.name'],
        'svc-v01-auth-broker',
      );
      assert.deepEqual(broker.ports, [{ protocol: 'TCP', port: 8081 }]);
      // Providers: address blocks only, never "anything" (no empty peer, no 0.0.0.0/0).
      assert.ok(providers.to.length > 0);
      for (const peer of providers.to) {
        assert.deepEqual(Object.keys(peer), ['ipBlock']);
        assert.notEqual(peer.ipBlock.cidr, '0.0.0.0/0');
      }
      // The manager's runner Jobs carry the label the policy selects.
      const job = new KubernetesLauncher({
        apis: createKubeApis({ apiUrl: 'http://127.0.0.1:1' }),
        namespace: 'svc-v01',
        killGraceMs: 1000,
        pollIntervalMs: 1000,
        logger: capturedLogger().logger,
      }).render(runnerSpec()) as any;
      assert.equal(job.job.spec.template.metadata.labels['app.kubernetes.io/name'], 'svc-runner');
    });
  }

  it('production: two managers, kept available through disruptions and rollouts', () => {
    const deployment = find('Deployment', 'svc-run-manager');
    assert.equal(deployment.spec.replicas, 2);
    assert.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0);
    const pdb = find('PodDisruptionBudget', 'svc-run-manager');
    assert.equal(pdb.spec.minAvailable, 1);
    assert.deepEqual(pdb.spec.selector.matchLabels, deployment.spec.selector.matchLabels);
    const grace = deployment.spec.template.spec.terminationGracePeriodSeconds;
    assert.ok(grace >= 30, `grace ${grace}`);
    const broker = find('PodDisruptionBudget', 'svc-auth-broker');
    assert.equal(broker.spec.minAvailable, 1);
    assert.equal(find('Deployment', 'svc-auth-broker').spec.replicas, 2);
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
    const configMap = find('ConfigMap', container.envFrom[0].configMapRef.name);
    const env: Record<string, string> = { ...configMap.data };
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
    for (const tool of ['git', 'openssh-client', 'ripgrep', 'jq', 'python3', 'curl'])
      assert.match(dockerfile, new RegExp(`'${tool}=`), tool);
    // kubectl and gh come from their own releases, each checked against its published checksum.
    assert.match(dockerfile, /^ARG KUBECTL_VERSION=v1\.(3[7-9]|[4-9]\d)\.\d+$/m);
    assert.match(dockerfile, /kubectl\.sha256.*sha256sum -c/);
    assert.match(dockerfile, /^ARG GH_VERSION=2\.(9\d|\d{3})\.\d+$/m);
    assert.match(dockerfile, /gh_\$\{GH_VERSION\}_checksums\.txt.*sha256sum -c/);
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
