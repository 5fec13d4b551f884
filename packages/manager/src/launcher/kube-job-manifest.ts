import type { V1EnvVar, V1Job, V1Secret, V1Volume, V1VolumeMount } from '@kubernetes/client-node';
import { PROVIDER_SECRET_PREFIX, ServiceError, TOOL_SECRET_PREFIX } from '@svc/contracts';
import { assertControlledName } from '../secrets/store.js';
import { TRANSIENT_ENV_KEY } from './transient-env-file.js';
import { sessionPvcName } from '../sessions/volumes.js';
import { LABELS, labelValue, MANAGER_NAME, PART_OF, RUNNER_APP } from './kube-labels.js';
import { runnerEnvironment } from './runner-env.js';
import { jobDeadlineSeconds, type RunnerPodSettings } from './runner-pod-defaults.js';
import type { RunnerJobSpec } from './types.js';

/**
 * Where things live inside a runner pod. The runner reads the same variables as under the
 * local launcher; only the paths differ.
 */
export const POD_PATHS = {
  runnerHome: '/home/runner',
  workspace: '/home/runner/workspace',
  agentHome: '/home/runner/agent-home',
  tmp: '/tmp',
  /** The per-job Secret: `manager-token`, `transient-env.json`. */
  secret: '/var/run/svc/secret',
  /** The profile Secret `svc-v01-provider-<profile>`, read-only; the runner copies it. */
  profile: '/var/run/svc/profile',
  /** One read-only directory per tool credential Secret, named after the Secret. */
  tools: '/var/run/svc/tools',
  /** The git bundle's fetch credential, read-only, read by the runner for the fetch only. */
  bundleCredential: '/var/run/svc/bundle-credential',
} as const;

export const RUNNER_UID = 1000;
/** The ServiceAccount runner pods run as: bound to nothing, its token never mounted. */
export const RUNNER_SERVICE_ACCOUNT = 'svc-runner';
/** Secret files: owner and the pod's fsGroup may read, nobody writes. */
const SECRET_FILE_MODE = 0o440;

export interface JobManifestOptions {
  namespace: string;
  killGraceMs: number;
  runnerPod: RunnerPodSettings;
}

export interface RunnerJobObjects {
  job: V1Job;
  /** The per-job Secret without its data. */
  secret: V1Secret;
  /** The per-job Secret's values: only `launch` sends them, only inside the Secret. */
  secretData: Record<string, Buffer>;
}

export const jobSecretName = (jobName: string) => `${jobName}-env`;

/** Build the Job and its per-job Secret from a spec; refuses references it may not mount. */
export function buildRunnerJob(spec: RunnerJobSpec, options: JobManifestOptions): RunnerJobObjects {
  checkReferences(spec, options.namespace);
  const labels = jobLabels(spec);
  // Homes hold secret material (auth.json, config with keys, tool credential copies): memory
  // only, so nothing of it reaches the node's disk and it is gone with the pod.
  const volumes: V1Volume[] = [
    { name: 'runner-home', emptyDir: { medium: 'Memory' } },
    { name: 'workspace', emptyDir: {} },
    { name: 'agent-home', emptyDir: { medium: 'Memory' } },
    { name: 'tmp', emptyDir: {} },
    secretVolume('job-env', jobSecretName(spec.jobName)),
    secretVolume('profile', spec.providerSecret.name),
  ];
  const mounts: V1VolumeMount[] = [
    { name: 'runner-home', mountPath: POD_PATHS.runnerHome },
    { name: 'workspace', mountPath: POD_PATHS.workspace },
    { name: 'agent-home', mountPath: POD_PATHS.agentHome },
    { name: 'tmp', mountPath: POD_PATHS.tmp },
    { name: 'job-env', mountPath: POD_PATHS.secret, readOnly: true },
    { name: 'profile', mountPath: POD_PATHS.profile, readOnly: true },
  ];
  toolSecrets(spec).forEach(([secretName, keys], i) => {
    volumes.push(secretVolume(`tool-${i}`, secretName, keys));
    mounts.push({ name: `tool-${i}`, mountPath: toolDir(secretName), readOnly: true });
  });
  if (spec.bundleCredential) {
    volumes.push(
      secretVolume('bundle-credential', spec.bundleCredential.name, spec.bundleCredential.keys),
    );
    mounts.push({
      name: 'bundle-credential',
      mountPath: POD_PATHS.bundleCredential,
      readOnly: true,
    });
  }
  if (spec.sessionPvc) {
    volumes.push({
      name: 'session',
      persistentVolumeClaim: { claimName: spec.sessionPvc.pvcName },
    });
    mounts.push({ name: 'session', mountPath: sessionMountPath(spec) });
  }
  const job: V1Job = {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name: spec.jobName, namespace: options.namespace, labels },
    spec: {
      // One attempt per Job: a retry is a new attempt the manager creates and records.
      backoffLimit: 0,
      // A hard wall-clock stop for a runner that neither finishes nor idles out.
      activeDeadlineSeconds: jobDeadlineSeconds(spec.timeoutMs, options.runnerPod.deadlineFactor),
      // The domain records `retention: keep` as 0; for a Job, 0 would mean "delete at once".
      ...(spec.ttlSecondsAfterFinished > 0
        ? { ttlSecondsAfterFinished: spec.ttlSecondsAfterFinished }
        : {}),
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          // The runner talks to the manager only; it has no business with the cluster API: its
          // own ServiceAccount (deploy/base/manager/rbac.yaml) has no binding and no token.
          serviceAccountName: RUNNER_SERVICE_ACCOUNT,
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: Math.max(1, Math.ceil(options.killGraceMs / 1000)),
          securityContext: {
            runAsNonRoot: true,
            runAsUser: RUNNER_UID,
            runAsGroup: RUNNER_UID,
            fsGroup: RUNNER_UID,
            fsGroupChangePolicy: 'OnRootMismatch',
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'runner',
              image: spec.image.ref,
              imagePullPolicy: 'IfNotPresent',
              workingDir: POD_PATHS.runnerHome,
              env: environment(spec, options.namespace),
              resources: {
                requests: { ...options.runnerPod.resources.requests },
                limits: { ...options.runnerPod.resources.limits },
              },
              volumeMounts: mounts,
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                runAsNonRoot: true,
                capabilities: { drop: ['ALL'] },
              },
            },
          ],
          volumes,
        },
      },
    },
  };
  const secretData: Record<string, Buffer> = {};
  if (spec.transientEnv.length > 0)
    secretData[TRANSIENT_ENV_KEY] = Buffer.from(JSON.stringify(spec.transientEnv));
  if (spec.managerToken) secretData['manager-token'] = Buffer.from(spec.managerToken);
  const secret: V1Secret = {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: jobSecretName(spec.jobName),
      namespace: options.namespace,
      labels: { ...labels, [LABELS.component]: 'runner-env', [LABELS.jobName]: spec.jobName },
    },
    type: 'Opaque',
    // Values are fixed for the job's life; only metadata (the owner reference) changes.
    immutable: true,
  };
  return { job, secret, secretData };
}

function jobLabels(spec: RunnerJobSpec): Record<string, string> {
  return {
    [LABELS.name]: RUNNER_APP,
    [LABELS.component]: 'runner',
    [LABELS.partOf]: PART_OF,
    [LABELS.managedBy]: MANAGER_NAME,
    [LABELS.runId]: labelValue(spec.runId),
    [LABELS.commandId]: labelValue(spec.commandId),
    [LABELS.attemptId]: labelValue(spec.attemptId),
    [LABELS.runnerJobId]: labelValue(spec.runnerJobId),
    [LABELS.profile]: labelValue(spec.profile),
    ...(spec.sessionPvc ? { [LABELS.sessionId]: labelValue(spec.sessionPvc.sessionId) } : {}),
  };
}

/** The same variables the local launcher sets, with pod paths; names and paths only. */
function environment(spec: RunnerJobSpec, namespace: string): V1EnvVar[] {
  const env = runnerEnvironment(
    spec,
    {
      home: POD_PATHS.runnerHome,
      jobDir: POD_PATHS.runnerHome,
      secretDir: POD_PATHS.secret,
      profileDir: POD_PATHS.profile,
      workspace: POD_PATHS.workspace,
      agentHome: POD_PATHS.agentHome,
      toolDir,
      bundleCredentialDir: POD_PATHS.bundleCredential,
      sessionMountPath,
    },
    namespace,
  );
  // Pod-only settings: a writable temp dir, and assembly never writes into Secret projections.
  Object.assign(env, { TMPDIR: POD_PATHS.tmp, SVC_FORBIDDEN_ROOTS: '/var/run/svc' });
  return Object.entries(env).map(([name, value]) => ({ name, value }));
}

/** The claim is mounted directly at `<agent_home>/<agent_rollout_subdir>` (spec/2). */
function sessionMountPath(spec: RunnerJobSpec): string {
  return `${POD_PATHS.agentHome}/${spec.sessionPvc!.agentRolloutSubdir}`;
}

const toolDir = (secretName: string) => `${POD_PATHS.tools}/${secretName}`;

function secretVolume(name: string, secretName: string, keys: readonly string[] = []): V1Volume {
  return {
    name,
    secret: {
      secretName,
      defaultMode: SECRET_FILE_MODE,
      optional: false,
      // Only the keys the run was granted; no keys named means the whole Secret.
      ...(keys.length > 0 ? { items: keys.map((key) => ({ key, path: key })) } : {}),
    },
  };
}

/** Tool Secrets of the run, one volume each, with the union of the keys their entries name. */
function toolSecrets(spec: RunnerJobSpec): Array<[string, string[]]> {
  const bySecret = new Map<string, Set<string>>();
  for (const entry of spec.toolCredentials) {
    const keys = bySecret.get(entry.secretRef.name) ?? new Set<string>();
    entry.secretRef.keys.forEach((k) => keys.add(k));
    bySecret.set(entry.secretRef.name, keys);
  }
  return [...bySecret].map(([name, keys]) => [name, [...keys].sort()]);
}

/** A Job may mount only controlled Secrets and its own session claim, in its namespace. */
function checkReferences(spec: RunnerJobSpec, namespace: string): void {
  const refuse = (message: string, details: Record<string, unknown>) => {
    throw new ServiceError('tenant-policy-denied', message, details);
  };
  const provider = spec.providerSecret;
  assertControlledName(provider.name);
  if (!provider.name.startsWith(PROVIDER_SECRET_PREFIX) || provider.namespace !== namespace)
    refuse(`the provider Secret must be ${PROVIDER_SECRET_PREFIX}<profile> in ${namespace}`, {
      name: provider.name,
      namespace: provider.namespace,
    });
  const bundle = spec.bundleCredential;
  if (bundle && (!bundle.name.startsWith(TOOL_SECRET_PREFIX) || bundle.namespace !== namespace)) {
    refuse(`the bundle credential must be a ${TOOL_SECRET_PREFIX}<name> Secret in ${namespace}`, {
      name: bundle.name,
    });
  }
  if (bundle) assertControlledName(bundle.name);
  for (const tool of spec.toolCredentials) {
    assertControlledName(tool.secretRef.name);
    if (
      !tool.secretRef.name.startsWith(TOOL_SECRET_PREFIX) ||
      tool.secretRef.namespace !== namespace
    )
      refuse(`tool Secrets must be ${TOOL_SECRET_PREFIX}<name> in ${namespace}`, {
        tool: tool.tool,
        name: tool.secretRef.name,
        namespace: tool.secretRef.namespace,
      });
  }
  const session = spec.sessionPvc;
  if (session) {
    if (session.pvcName !== sessionPvcName(session.sessionId) || session.namespace !== namespace)
      refuse(`a runner Job mounts only its session's claim ${sessionPvcName(session.sessionId)}`, {
        pvcName: session.pvcName,
        namespace: session.namespace,
      });
    if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(session.agentRolloutSubdir))
      throw new ServiceError(
        'schema-invalid',
        'agentRolloutSubdir must be one plain directory name',
        { agentRolloutSubdir: session.agentRolloutSubdir },
      );
  }
}
