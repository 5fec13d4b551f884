import type { RunnerJobSpec } from './types.js';

/** Where a launcher puts a runner's files, as the runner will see them. */
export interface RunnerPaths {
  home: string;
  jobDir: string;
  secretDir: string;
  profileDir: string;
  workspace: string;
  agentHome: string;
  /** The directory a tool credential Secret is projected into. */
  toolDir(secretName: string): string;
  /** Where the bundle fetch credential Secret is projected. */
  bundleCredentialDir: string;
  /** Where the session volume is mounted, when the job has one. */
  sessionMountPath(spec: RunnerJobSpec): string;
}

/**
 * The runner's environment contract, the same under every launcher: ids, the manager URL,
 * paths of the projected Secrets and volumes, never a value (values live in the per-job
 * Secret's files).
 */
export function runnerEnvironment(
  spec: RunnerJobSpec,
  paths: RunnerPaths,
  namespace: string,
): Record<string, string> {
  const tools = spec.toolCredentials.map((t) => ({
    ...t,
    secretDir: paths.toolDir(t.secretRef.name),
  }));
  const env: Record<string, string> = {
    ...spec.runnerEnv,
    HOME: paths.home,
    SVC_MANAGER_URL: spec.managerUrl,
    SVC_RUN_ID: spec.runId,
    SVC_COMMAND_ID: spec.commandId,
    SVC_ATTEMPT_ID: spec.attemptId,
    SVC_RUNNER_ID: spec.runnerId,
    SVC_RUNNER_JOB_ID: spec.runnerJobId,
    SVC_JOB_NAME: spec.jobName,
    SVC_JOB_DIR: paths.jobDir,
    SVC_SECRET_DIR: paths.secretDir,
    SVC_PROFILE: spec.profile,
    SVC_PROFILE_DIR: paths.profileDir,
    SVC_TOOL_CREDENTIALS: JSON.stringify(tools),
    SVC_WORKSPACE_DIR: paths.workspace,
    SVC_AGENT_HOME: paths.agentHome,
    SVC_RUNNER_HOME: paths.home,
    SVC_IMAGE: spec.image.ref,
    // Used for the bundle fetch only, never given to the agent.
    ...(spec.bundleCredential ? { SVC_BUNDLE_CREDENTIAL_DIR: paths.bundleCredentialDir } : {}),
    // Where the image came from (digest, catalog source, reuse): facts for the assembly event.
    SVC_IMAGE_SUMMARY: JSON.stringify(spec.image),
  };
  if (spec.sessionPvc) {
    Object.assign(env, {
      SVC_SESSION_ID: spec.sessionPvc.sessionId,
      SVC_SESSION_PVC_NAME: spec.sessionPvc.pvcName,
      SVC_SESSION_PVC_NAMESPACE: namespace,
      SVC_SESSION_PVC_MOUNT_PATH: paths.sessionMountPath(spec),
      SVC_AGENT_ROLLOUT_SUBDIR: spec.sessionPvc.agentRolloutSubdir,
    });
  }
  return env;
}
