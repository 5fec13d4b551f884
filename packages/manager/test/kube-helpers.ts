import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import * as k8s from '@kubernetes/client-node';
import { Job } from 'kubernetes-models/batch/v1/Job';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { LimitRange } from 'kubernetes-models/v1/LimitRange';
import { PodTemplate } from 'kubernetes-models/v1/PodTemplate';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { Redactor, type SessionPvcSummary, type ToolCredentialRecord } from '@svc/contracts';
import { after, before, beforeEach } from 'node:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import {
  FakeKube as FakeKubeServer,
  type FakeKube,
  type FakeKubeOptions,
  type PolicyRule,
} from '@svc/testkit';
import { KubernetesLauncher } from '../src/launcher/kubernetes.js';
import { createKubeApis, type KubeApis } from '../src/launcher/kube-api.js';
import type { RunnerJobSpec } from '../src/launcher/types.js';
import { createLogger, type Logger } from '../src/logging.js';

/** The manager's Role, as deploy/base/manager/rbac.yaml grants it. */
export const MANAGER_ROLE: readonly PolicyRule[] = (
  yaml.loadAll(
    readFileSync(join(import.meta.dirname, '../../../deploy/base/manager/rbac.yaml'), 'utf8'),
  ) as Array<{ kind: string; metadata: { name: string }; rules?: PolicyRule[] }>
).find((doc) => doc.kind === 'Role' && doc.metadata.name === 'svc-run-manager')!.rules!;

/**
 * The fake API server as the manager meets it in a cluster: it answers 403 to any call the
 * manager's Role does not grant, so a code path that needs more fails its test.
 */
export function startFakeKube(options: FakeKubeOptions = {}): Promise<FakeKube> {
  return FakeKubeServer.start({ rbac: MANAGER_ROLE, ...options });
}

/** Clients of the real @kubernetes/client-node, pointed at the fake API server. */
export const apisFor = (fake: FakeKube): KubeApis => createKubeApis({ apiUrl: fake.url });

/** A logger whose lines a test can read. */
export function capturedLogger(): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: createLogger({ level: 'debug', redactor: new Redactor(), destination }), lines };
}

export const DIGEST = `sha256:${'a'.repeat(64)}`;

export const toolCredential = (
  tool: string,
  secret: string,
  keys: string[],
  projection: ToolCredentialRecord['projection'],
): ToolCredentialRecord => ({
  tool,
  purpose: tool === 'platform-ssh' ? 'ssh-passthrough' : 'pull-request',
  secretRef: { namespace: 'svc-v01', name: secret, keys, valuesPrinted: false },
  projection,
  valuesPrinted: false,
});

export const sessionPvc = (sessionId: string): SessionPvcSummary => ({
  sessionId,
  pvcName: `svc-v01-session-${sessionId}`,
  namespace: 'svc-v01',
  mountPath: '/home/runner/agent-home/sessions',
  agentRolloutSubdir: 'sessions',
  storageKind: 'pvc',
  valuesPrinted: false,
});

/** A complete runner job spec, as the runner-jobs domain builds one. */
export function runnerSpec(overrides: Partial<RunnerJobSpec> = {}): RunnerJobSpec {
  const id = Math.random().toString(36).slice(2, 12);
  const jobName = `svc-v01-runner-${id}`;
  return {
    runnerJobId: `rj-${id}`,
    jobName,
    namespace: 'svc-v01',
    runId: `run-${id}`,
    commandId: `cmd-${id}`,
    attemptId: `att-${id}`,
    runnerId: `rnr-${id}`,
    image: {
      ref: `registry.example/svc-runner@${DIGEST}`,
      digest: DIGEST,
      resolvedFrom: 'default',
      source: null,
      reuse: 'default-image',
    },
    managerUrl: 'http://svc-run-manager.svc-v01.svc:8080',
    managerToken: 'manager-token-value-0123456789',
    profile: 'builtin-a',
    providerSecret: {
      namespace: 'svc-v01',
      name: 'svc-v01-provider-builtin-a',
      keys: ['auth.json', 'config.toml'],
      valuesPrinted: false,
    },
    toolCredentials: [],
    bundleCredential: null,
    transientEnv: [{ name: 'LAB_API_KEY', value: 'lab-key-value-0123456789' }],
    transientEnvSummary: {
      names: ['LAB_API_KEY'],
      count: 1,
      hash: 'h',
      defaultsAdded: [],
      secretRef: { name: `${jobName}-env`, namespace: 'svc-v01' },
      valuesPrinted: false,
    },
    sessionPvc: null,
    ttlSecondsAfterFinished: 3600,
    timeoutMs: 600_000,
    runnerEnv: { SVC_RUNNER_IDLE_EXIT_MS: '120000' },
    ...overrides,
  };
}

/** The plain environment of the runner container as a map. */
export function containerEnv(job: any): Record<string, string> {
  const env = job.spec.template.spec.containers[0].env as Array<{ name: string; value: string }>;
  for (const entry of env) assert.ok('value' in entry && !('valueFrom' in entry), entry.name);
  return Object.fromEntries(env.map((e) => [e.name, e.value]));
}

const MODELS: Record<string, { new (data: any): { validate(): void } }> = {
  'batch/v1/Job': Job,
  'apps/v1/Deployment': Deployment,
  'v1/ConfigMap': ConfigMap,
  'v1/LimitRange': LimitRange,
  'v1/PodTemplate': PodTemplate,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'v1/Namespace': Namespace,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
};

/**
 * Validate a manifest against the official Kubernetes OpenAPI schema (kubernetes-models), and
 * refuse fields the schema does not know (a misspelt field is silently dropped by a lenient
 * server, so the schema alone would not catch it); field names come from the client's models,
 * generated from the same OpenAPI document.
 */
export function validateManifest(manifest: any): void {
  const key = `${manifest.apiVersion}/${manifest.kind}`;
  const Model = MODELS[key];
  assert.ok(Model, `no schema model for ${key}`);
  new Model(manifest).validate();
  const unknown = unknownFields(manifest, `V1${manifest.kind}`, manifest.kind);
  assert.deepEqual(unknown, [], `${key} ${manifest.metadata?.name}: unknown fields`);
}

function unknownFields(value: unknown, type: string, path: string): string[] {
  if (value === null || value === undefined) return [];
  const array = /^Array<(.+)>$/.exec(type);
  if (array)
    return (value as unknown[]).flatMap((v, i) => unknownFields(v, array[1]!, `${path}[${i}]`));
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map)
    return Object.entries(value).flatMap(([k, v]) => unknownFields(v, map[1]!, `${path}.${k}`));
  const model = (k8s as any)[type] as
    { getAttributeTypeMap(): Array<{ baseName: string; type: string }> } | undefined;
  if (typeof model?.getAttributeTypeMap !== 'function' || typeof value !== 'object') return [];
  const attributes = model.getAttributeTypeMap();
  return Object.entries(value).flatMap(([k, v]) => {
    const attribute = attributes.find((a) => a.baseName === k);
    if (!attribute) return [`${path}.${k}`];
    return unknownFields(v, attribute.type, `${path}.${k}`);
  });
}

/** Poll until `check` returns a value (not undefined), or fail after `timeoutMs`. */
export async function eventually<T>(
  check: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * A fake Kubernetes API for one test file and a fresh launcher on it before each test (the
 * fake's jobs, Secrets and pods cleared), closed afterwards. Read `fake` and `launcher` from
 * the returned object inside tests.
 */
export function useKubeLauncher(
  namespace: string,
  log: { logger: Logger },
): { fake: FakeKube; launcher: KubernetesLauncher } {
  const rig = {} as { fake: FakeKube; launcher: KubernetesLauncher };
  before(async () => {
    rig.fake = await startFakeKube();
  });
  after(() => rig.fake.close());
  beforeEach(async () => {
    await rig.launcher?.close();
    for (const resource of ['jobs', 'secrets', 'pods'])
      for (const obj of rig.fake.list(resource, namespace))
        rig.fake.remove(resource, namespace, obj.metadata.name);
    rig.fake.clearRequests();
    rig.launcher = new KubernetesLauncher({
      apis: apisFor(rig.fake),
      namespace,
      killGraceMs: 5000,
      pollIntervalMs: 100,
      logger: log.logger,
    });
  });
  after(() => rig.launcher?.close());
  return rig;
}
