import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { delimiter, isAbsolute, join } from 'node:path';
import {
  EVENT_NAMES,
  ServiceError,
  type ExecutionPolicy,
  type Redactor,
  type Run,
} from '@svc/contracts';
import { CodexAgent } from './agent/index.js';
import { materializeAgentHome, type AgentHomeSummary } from './agent-home.js';
import { assembleRuntime, checkAssembledPath, type AssemblyResult } from './assembly/index.js';
import type { RunnerConfig } from './config.js';
import { projectCredentials, type ProjectedCredentials } from './credentials.js';
import type { EventSink } from './event-sink.js';
import type { RunnerLog } from './logging.js';
import type { ManagerClient } from './manager-client.js';
import { summarizeRolloutStorage } from './rollout-storage.js';

/**
 * Everything assembled once per run and reused by every turn the runner serves: the workspace
 * (git bundle, tools, skills, prompts), the agent home, projected credentials and the running
 * agent. Assembly steps 4-8 of spec/3, in order; the first failure fails or blocks the run.
 */
export class RunContext {
  agent: CodexAgent | null = null;
  assembly: AssemblyResult | null = null;
  agentHome: AgentHomeSummary | null = null;
  credentials: ProjectedCredentials | null = null;
  workspaceDir: string;
  /** Threads this agent process has started or resumed (no resume needed for them). */
  readonly loadedThreads = new Set<string>();
  #prepared: Promise<void> | null = null;

  constructor(
    private readonly config: RunnerConfig,
    readonly run: Run,
    private readonly sink: EventSink,
    private readonly redactor: Redactor,
    private readonly log: RunnerLog,
  ) {
    const ref = run.workspaceRef;
    this.workspaceDir = ref.kind === 'host-path' ? ref.path : config.workspaceDir;
    // A full event buffer holds the agent's output until the manager has taken enough.
    sink.onPressure((full) => {
      this.#outputHeld = full;
      this.agent?.holdOutput(full);
      if (full)
        this.log.warn('event buffer full: holding the agent output', { buffered: sink.buffered });
    });
  }

  #outputHeld = false;

  get hasSessionVolume(): boolean {
    return this.config.session !== null;
  }

  get policy(): ExecutionPolicy {
    return this.run.executionPolicy;
  }

  prepare(commandId: string): Promise<void> {
    this.#prepared ??= this.#prepare(commandId);
    return this.#prepared;
  }

  async #prepare(commandId: string): Promise<void> {
    const started = performance.now();
    if (!this.config.profileDir) {
      throw new ServiceError(
        'secret-unavailable',
        `no projection of the ${this.run.backendProfile} profile Secret was mounted for this runner`,
      );
    }
    // A relative host path is refused before anything is written with it (the agent home's
    // config names the workspace as a trusted project).
    if (this.run.workspaceRef.kind === 'host-path' && !isAbsolute(this.workspaceDir))
      throw new ServiceError('schema-invalid', 'a host-path workspace must be absolute');
    // Step 4: the profile Secret, copied into this run's writable agent home.
    this.agentHome = await materializeAgentHome({
      profile: this.run.backendProfile,
      profileDir: this.config.profileDir,
      agentHome: this.config.agentHome,
      workspaceDir: this.workspaceDir,
      policy: this.policy,
      session: this.config.session,
      redactor: this.redactor,
    });
    // Step 5: tool credentials and transientEnv.
    this.credentials = await projectCredentials(this.config, this.redactor);
    // Steps 6-7: the git bundle, tools, skills, prompts.
    if (this.run.workspaceRef.kind !== 'host-path')
      await mkdir(this.workspaceDir, { recursive: true });
    if (this.run.resourceBundleRef) {
      this.assembly = await assembleRuntime({
        resourceBundleRef: this.run.resourceBundleRef,
        workspaceRef: this.run.workspaceRef,
        workspaceDir: this.workspaceDir,
        forbiddenRoots: [
          this.config.agentHome,
          ...(this.config.profileDir ? [this.config.profileDir] : []),
          ...(this.config.session ? [this.config.session.mountPath] : []),
          ...this.config.assembly.forbiddenRoots,
        ],
        mirror: this.config.assembly.mirror,
        credential: await this.#bundleCredential(),
        resourceBinPath: this.config.assembly.resourceBinPath,
        basePath: this.#basePath(),
        ...(this.config.assembly.workspacePrefix
          ? { workspacePrefix: this.config.assembly.workspacePrefix }
          : {}),
        git: { fetchTimeoutMs: this.config.assembly.fetchTimeoutMs },
      });
      this.sink.push({
        commandId,
        category: 'system',
        name: EVENT_NAMES.bundleMaterialized,
        data: {
          ...this.assembly.summary.repository,
          bundles: this.assembly.summary.bundles,
        },
      });
    } else if (this.config.serviceToolsDir) {
      await checkAssembledPath([], this.#basePath());
    }
    // Step 8: one bounded event with every fact of the assembly, names and hashes only.
    this.sink.push({
      commandId,
      category: 'system',
      name: EVENT_NAMES.assembly,
      data: {
        image: this.config.imageSummary ?? { ref: this.config.image },
        profile: this.run.backendProfile,
        providerSecretRef: this.policy.secretScope.providerCredentials[0]?.secretRef ?? null,
        agentHome: this.agentHome,
        toolCredentials: this.credentials.summary.tools,
        transientEnv: this.credentials.summary.transientEnv,
        sessionRef: this.run.sessionRef,
        session: this.config.session
          ? {
              pvcName: this.config.session.pvcName,
              mountPath: this.config.session.mountPath,
              agentRolloutSubdir: this.config.session.rolloutSubdir,
            }
          : null,
        workspace: { kind: this.run.workspaceRef.kind, dir: this.workspaceDir },
        bundle: this.assembly?.summary ?? null,
        durationMs: Math.round(performance.now() - started),
        valuesPrinted: false,
      },
    });
  }

  /** Values of the bundle's fetch credential, read from its projection for the fetch only. */
  async #bundleCredential() {
    const ref = this.run.resourceBundleRef as { credentialRef?: { name: string } } | null;
    if (!ref?.credentialRef) return null;
    const dir = this.config.bundleCredentialDir;
    if (!dir)
      throw new ServiceError(
        'secret-unavailable',
        `the bundle credential ${ref.credentialRef.name} was not projected for this runner`,
      );
    const value = async (key: string) =>
      (await readFile(join(dir, key), 'utf8').catch(() => null))?.trim() ?? null;
    const token = await value('token');
    const username = await value('username');
    const password = await value('password');
    for (const v of [token, password]) if (v) this.redactor.add(v);
    if (token) return { token };
    if (username && password) return { username, password };
    throw new ServiceError(
      'secret-unavailable',
      `the bundle credential ${ref.credentialRef.name} holds neither token nor username/password`,
    );
  }

  #basePath(): string {
    const base = process.env['PATH'] ?? '/usr/bin:/bin';
    return this.config.serviceToolsDir ? `${this.config.serviceToolsDir}${delimiter}${base}` : base;
  }

  /** PATH of the agent: bundle tools first, then the service's own tools, then the image. */
  #path(): string {
    return [...(this.assembly?.pathEntries ?? []), this.#basePath()].join(delimiter);
  }

  async startAgent(commandId: string, attemptId: string | null): Promise<CodexAgent> {
    if (this.agent?.running) return this.agent;
    await this.#writeLoginProfile();
    this.loadedThreads.clear();
    this.agent = await CodexAgent.start({
      codexHome: this.config.agentHome,
      ...(this.config.codexBinary ? { binaryPath: this.config.codexBinary } : {}),
      env: this.credentials?.env ?? {},
      path: this.#path(),
      home: this.config.runnerHome,
      cwd: this.workspaceDir,
      redactor: this.redactor,
      turnDefaults: { idleTimeoutMs: this.policy.timeoutMs },
    });
    if (this.#outputHeld) this.agent.holdOutput(true);
    this.sink.push({
      commandId,
      category: 'backend_status',
      name: 'backend.initialized',
      data: {
        profile: this.run.backendProfile,
        backendKind: 'codex-app-server',
        protocol: 'json-rpc-stdio',
        attempt: attemptId,
        provider: this.agentHome?.providerId ?? null,
        model: this.agentHome?.model ?? null,
        pid: this.agent.process.pid,
      },
    });
    if (this.config.session) {
      this.sink.push({
        commandId,
        category: 'system',
        name: EVENT_NAMES.rolloutStorageMounted,
        data: {
          pvcName: this.config.session.pvcName,
          mountPath: this.config.session.mountPath,
          agentRolloutSubdir: this.config.session.rolloutSubdir,
        },
      });
    }
    this.log.info('agent started', { pid: this.agent.process.pid });
    return this.agent;
  }

  /** After each turn: the session volume's summary (size, files, hash), never its contents. */
  async reportStorage(client: ManagerClient, runnerId: string): Promise<void> {
    const session = this.config.session;
    if (!session?.sessionId) return;
    await client.refreshSessionStorage(
      session.sessionId,
      runnerId,
      await summarizeRolloutStorage(session.mountPath),
    );
  }

  /**
   * The agent runs shell commands in login shells, and a login shell resets PATH from
   * /etc/profile. The runner home is this run's own, so its ~/.profile puts the run's tools
   * back in front.
   */
  async #writeLoginProfile(): Promise<void> {
    const entries = [
      ...(this.assembly?.pathEntries ?? []),
      ...(this.config.serviceToolsDir ? [this.config.serviceToolsDir] : []),
    ];
    if (entries.length === 0) return;
    const quoted = entries.map((entry) => entry.replaceAll("'", "'\\''")).join(':');
    await mkdir(this.config.runnerHome, { recursive: true });
    await writeFile(
      join(this.config.runnerHome, '.profile'),
      `# The run's tools first on PATH (written by the runner for login shells).\nexport PATH='${quoted}':"$PATH"\n`,
    );
  }

  async shutdown(): Promise<void> {
    if (!this.agent) return;
    await this.agent.shutdown().catch(() => undefined);
    this.agent.killTree();
  }
}
