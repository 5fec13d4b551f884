import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
// Installed with @kubernetes/client-node; its own loadAllYaml converts to client models.
import yaml from 'js-yaml';
import type { FakeKube } from '@svc/testkit';
import { loadConfig as loadBrokerConfig } from '@svc/auth-broker';
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
  startFakeKube,
} from './kube-helpers.js';

const DEPLOY = join(import.meta.dirname, '../../../deploy');
const OVERLAYS = ['local', 'production'] as const;
const PINNED = /^[a-z0-9.:/-]+(?::[\w.-]+)?@sha256:[0-9a-f]{64}$/;

/**
 * `kubectl kustomize` of an overlay, offline, as an operator renders it. The production
 * overlay needs the operator's `site/` component: rendered here with the shipped example.
 */
function render(overlay: string): any[] {
  if (overlay !== 'production') return renderDir(join(DEPLOY, 'overlays', overlay));
  const copy = mkdtempSync(join(tmpdir(), 'svc-deploy-'));
  try {
    cpSync(DEPLOY, copy, { recursive: true });
    const production = join(copy, 'overlays/production');
    cpSync(join(production, 'site.example'), join(production, 'site'), { recursive: true });
    return renderDir(production);
  } finally {
    rmSync(copy, { recursive: true, force: true });
  }
}

function kustomize(dir: string): string {
  return execFileSync('kubectl', ['kustomize', dir], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

function renderDir(dir: string): any[] {
  let out: string;
  try {
    out = execFileSync('kubectl', ['kustomize', dir], {
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
    throw new Error(`kubectl kustomize ${dir} failed: ${e.stderr ?? e.message}`);
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

/** The manager's environment as its pod gets it (Secret values stand in). */
function managerEnv(docs: any[]): Record<string, string> {
  const container = find('Deployment', 'svc-run-manager', docs).spec.template.spec.containers[0];
  const configMap = find('ConfigMap', container.envFrom[0].configMapRef.name, docs);
  const env: Record<string, string> = { ...configMap.data };
  for (const entry of container.env) {
    if (entry.valueFrom) {
      assert.equal(entry.valueFrom.secretKeyRef.name, 'svc-run-manager', entry.name);
      env[entry.name] =
        entry.name === 'DATABASE_URL' ? 'postgres://svc:pw@db.svc-v01.svc:5432/svc' : 'key';
    } else env[entry.name] = entry.value;
  }
  return env;
}

/** Cluster DNS: the kube-dns pods and NodeLocal DNSCache, port 53 only. */
function assertDns(rule: any): void {
  assert.equal(
    rule.to[0].namespaceSelector.matchLabels['kubernetes.io/metadata.name'],
    'kube-system',
  );
  assert.deepEqual(rule.to[0].podSelector.matchLabels, { 'k8s-app': 'kube-dns' });
  assert.deepEqual(rule.to[1], { ipBlock: { cidr: '169.254.20.10/32' } });
  assert.deepEqual(
    rule.ports.map((p: any) => `${p.protocol}/${p.port}`),
    ['UDP/53', 'TCP/53'],
  );
}

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
      // The production overlay names its images in the operator's site component.
      const where = overlay === 'production' ? 'production/site.example' : overlay;
      const source = readFileSync(join(DEPLOY, 'overlays', where, 'kustomization.yaml'), 'utf8');
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
      assert.deepEqual(manager.ports, [{ protocol: 'TCP', port: 'http' }]);
      assertDns(dns);
      assert.equal(
        broker.to[0].namespaceSelector.matchLabels['kubernetes.io/metadata.name'],
        'svc-v01-auth-broker',
      );
      assert.deepEqual(broker.ports, [{ protocol: 'TCP', port: 'http' }]);
      assert.deepEqual(providers.ports, [{ protocol: 'TCP', port: 443 }]);
      // Providers: address blocks only, never "anything" (no empty peer, no 0.0.0.0/0).
      assert.ok(providers.to.length > 0);
      for (const peer of providers.to) {
        assert.deepEqual(Object.keys(peer), ['ipBlock']);
        assert.notEqual(peer.ipBlock.cidr, '0.0.0.0/0');
      }
      // Cut off, should the allow list above be refused: a policy of its own that allows
      // nothing, selecting the same pods.
      const deny = find('NetworkPolicy', 'svc-runner-default-deny', rendered[overlay]);
      assert.deepEqual(deny.spec, {
        podSelector: { matchLabels: { 'app.kubernetes.io/name': 'svc-runner' } },
        policyTypes: ['Ingress', 'Egress'],
      });
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
    // Exactly the verbs the code calls: kube-rbac.test.ts derives the same from the calls.
    assert.deepEqual(sorted, {
      '/secrets': ['create', 'delete', 'get', 'list', 'patch', 'update'],
      '/persistentvolumeclaims': ['create', 'delete', 'get'],
      'batch/jobs': ['create', 'delete', 'list', 'watch'],
      '/pods': ['list'],
    });
    for (const rule of role.rules) assert.equal(rule.resourceNames, undefined);
    const binding = find('RoleBinding', 'svc-run-manager');
    assert.deepEqual(binding.subjects, [
      { kind: 'ServiceAccount', name: 'svc-run-manager', namespace: 'svc-v01' },
    ]);
  });

  it('run the manager in runtime mode on Kubernetes, with a configuration it accepts', () => {
    const env = managerEnv(rendered.local);
    const config = loadConfig(env);
    assert.equal(config.deploymentMode, 'runtime');
    assert.equal(config.launcher.kind, 'kubernetes');
    assert.equal(config.secretStore.kind, 'kubernetes');
    assert.equal(config.launcher.namespace, 'svc-v01');
    assert.match(config.runnerJobs.defaultImage, /@sha256:[0-9a-f]{64}$/);
    const container = find('Deployment', 'svc-run-manager', rendered.local).spec.template.spec
      .containers[0];
    assert.ok(container.env.find((e: any) => e.name === 'SVC_API_KEY').valueFrom.secretKeyRef);
    assert.ok(container.env.find((e: any) => e.name === 'DATABASE_URL').valueFrom.secretKeyRef);
    assert.equal(container.readinessProbe.httpGet.path, '/health/readiness');
    assert.equal(container.livenessProbe.httpGet.path, '/health/live');
  });

  it('production placeholders fail loudly: no site, no render; a CHANGE-ME left, no start', () => {
    // The shipped overlay does not render: the operator's site component is missing.
    assert.throws(
      () => kustomize(join(DEPLOY, 'overlays/production')),
      (error: any) => /production\/site/.test(String(error.stderr)),
    );
    // Rendered with the example site, every CHANGE-ME is refused where it is used.
    assert.throws(() => loadConfig(managerEnv(rendered.production)), /SVC_SESSION_STORAGE_CLASS/);
    const broker = find('Deployment', 'svc-auth-broker').spec.template.spec.containers[0];
    const brokerEnv = Object.fromEntries(broker.env.map((e: any) => [e.name, e.value]));
    assert.throws(() => loadBrokerConfig(brokerEnv), /AUTH_BROKER_ALLOWED_REPOS/);
    assert.throws(
      () => loadBrokerConfig({ ...brokerEnv, AUTH_BROKER_ALLOWED_REPOS: 'acme/app' }),
      /AUTH_BROKER_TRUSTED_CIDRS/,
    );
    const cidrs = documents
      .filter(({ doc }) => doc.kind === 'NetworkPolicy')
      .flatMap(({ doc }) => [...(doc.spec.egress ?? []), ...(doc.spec.ingress ?? [])])
      .flatMap((rule: any) => [...(rule.to ?? []), ...(rule.from ?? [])])
      .filter((peer: any) => peer.ipBlock)
      .map((peer: any) => peer.ipBlock.cidr as string);
    // Placeholders are not addresses (the API server refuses them), never a routable default.
    const placeholders = cidrs.filter((c) => c === 'CHANGE-ME');
    assert.equal(placeholders.length, 4, cidrs.join(' '));
    for (const cidr of cidrs.filter((c) => c !== 'CHANGE-ME'))
      assert.ok(['169.254.20.10/32'].includes(cidr), `production cidr ${cidr} is not the site's`);
    // With every value set, the manager accepts its configuration.
    const env = managerEnv(rendered.production);
    env['SVC_SESSION_STORAGE_CLASS'] = 'fast-ssd';
    assert.equal(loadConfig(env).kubernetes.sessionStorageClass, 'fast-ssd');
  });

  it('spread the replicas over nodes (required) and zones, and give a migration time to finish', () => {
    for (const name of ['svc-run-manager', 'svc-auth-broker']) {
      const deployment = find('Deployment', name);
      const spread = deployment.spec.template.spec.topologySpreadConstraints;
      const byKey = Object.fromEntries(spread.map((c: any) => [c.topologyKey, c]));
      assert.equal(byKey['kubernetes.io/hostname']?.whenUnsatisfiable, 'DoNotSchedule', name);
      assert.ok(byKey['topology.kubernetes.io/zone'], `${name}: zone spread`);
      for (const c of spread) {
        assert.deepEqual(c.labelSelector.matchLabels, deployment.spec.selector.matchLabels);
        assert.equal(c.maxSkew, 1);
      }
    }
    const manager = find('Deployment', 'svc-run-manager').spec.template.spec.containers[0];
    const startup = manager.startupProbe;
    assert.ok(startup, 'the manager has a startupProbe');
    assert.ok(startup.periodSeconds * startup.failureThreshold >= 300, 'five minutes to migrate');
    assert.equal(manager.livenessProbe.initialDelaySeconds, undefined);
    // The broker's readiness asks /health by HTTP, naming the broker as its callers do.
    const broker = find('Deployment', 'svc-auth-broker').spec.template.spec.containers[0];
    const probe = broker.readinessProbe.httpGet;
    assert.equal(probe.path, '/health');
    assert.equal(broker.readinessProbe.exec, undefined);
    const host = probe.httpHeaders.find((h: any) => h.name === 'Host').value;
    const allowed = broker.env.find((e: any) => e.name === 'AUTH_BROKER_ALLOWED_HOSTS').value;
    assert.ok(allowed.split(',').includes(host), `${host} is an allowed host`);
  });

  it('open only named ports to named peers: manager and broker ingress and egress', () => {
    for (const overlay of OVERLAYS) {
      const docs = rendered[overlay];
      const ingress = find('NetworkPolicy', 'svc-run-manager-ingress', docs);
      assert.deepEqual(ingress.spec.ingress, [
        {
          from: [
            { podSelector: {} },
            {
              namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } },
            },
          ],
          ports: [{ protocol: 'TCP', port: 'http' }],
        },
      ]);
      const manager = find('NetworkPolicy', 'svc-run-manager-egress', docs);
      assert.deepEqual(manager.spec.policyTypes, ['Egress']);
      const [dns, database, api, ...rest] = manager.spec.egress;
      assert.deepEqual(rest, []);
      assertDns(dns);
      assert.deepEqual(database.ports, [{ protocol: 'TCP', port: 5432 }]);
      assert.deepEqual(
        api.ports.map((p: any) => p.port),
        [443, 6443],
      );
      const broker = find('NetworkPolicy', 'svc-auth-broker-egress', docs);
      const [brokerDns, codehost, ...more] = broker.spec.egress;
      assert.deepEqual(more, []);
      assertDns(brokerDns);
      assert.deepEqual(codehost.ports, [{ protocol: 'TCP', port: 443 }]);
      // No rule opens every port or every peer.
      for (const policy of docs.filter((d) => d.kind === 'NetworkPolicy'))
        for (const rule of [...(policy.spec.egress ?? []), ...(policy.spec.ingress ?? [])]) {
          assert.ok(rule.ports?.length > 0, `${overlay}: ${policy.metadata.name} names its ports`);
          assert.ok((rule.to ?? rule.from)?.length > 0, `${policy.metadata.name} names peers`);
          for (const peer of rule.to ?? rule.from)
            assert.notDeepEqual(
              peer.namespaceSelector,
              {},
              `${policy.metadata.name}: any namespace`,
            );
        }
    }
  });

  it('run runner pods as a ServiceAccount of their own that is bound to nothing', () => {
    const account = find('ServiceAccount', 'svc-runner');
    assert.equal(account.metadata.namespace, 'svc-v01');
    assert.equal(account.automountServiceAccountToken, false);
    for (const binding of documents.filter((d) => /RoleBinding$/.test(d.doc.kind)))
      for (const subject of binding.doc.subjects)
        assert.notEqual(subject.name, 'svc-runner', binding.doc.metadata.name);
    const job = new KubernetesLauncher({
      apis: createKubeApis({ apiUrl: 'http://127.0.0.1:1' }),
      namespace: 'svc-v01',
      killGraceMs: 1000,
      pollIntervalMs: 1000,
      logger: capturedLogger().logger,
    }).render(runnerSpec()) as any;
    const pod = job.job.spec.template.spec;
    assert.equal(pod.serviceAccountName, 'svc-runner');
    assert.equal(pod.automountServiceAccountToken, false);
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
        ports: [{ protocol: 'TCP', port: 'http' }],
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
    fake = await startFakeKube();
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
