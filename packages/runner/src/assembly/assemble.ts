import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { ServiceError, isServiceError, type WorkspaceRef } from '@svc/contracts';
import { DEFAULT_COPY_LIMITS, type CopyLimits } from './bundle-copy.js';
import { parseResourceBundleRef, topSource } from './bundle-ref.js';
import { copyBundles } from './bundles.js';
import { materializeCheckout } from './git-bundle.js';
import { GitRunner, type GitCredential, type GitObserver } from './git-exec.js';
import type { MirrorConfig } from './mirror.js';
import {
  DEFAULT_FORBIDDEN_ROOTS,
  checkWritableRoot,
  isInside,
  normalizeRelative,
} from './paths.js';
import { DEFAULT_PROMPT_CAPS, readPrompts, type LoadedPrompt, type PromptCaps } from './prompts.js';
import { checkRequiredSkills, discoverSkills } from './skills.js';
import type { AssemblyStep, AssemblySummary, StepTiming } from './summary.js';
import { prepareToolsDir } from './tools-dir.js';
import { countTree } from './walk.js';
import { ASSEMBLED_PATH_TOOLS, checkAssembledPath } from '@svc/contracts/work-ready';

/**
 * Steps 6 and 7 of the spec's Assembly table for one workspace, in order: materialize the
 * gitbundle, copy bundles, prepare `tools/`, discover skills, check required skills, read
 * prompts, and check that the assembled PATH resolves the platform tools. Returns the bounded
 * summary for the assembly event, the prompt texts for the first turn and the PATH entries; any
 * failure is a typed ServiceError whose details name the step.
 */
export interface AssemblyLogger {
  info(data: Record<string, unknown>, message: string): void;
}

export interface AssembleOptions {
  /** The run's `resourceBundleRef` (re-checked here). */
  resourceBundleRef: unknown;
  /** The run's workspaceRef: its branch is the ref when the bundle names none. */
  workspaceRef?: WorkspaceRef | null | undefined;
  /** The runner workspace (agent working directory). */
  workspaceDir: string;
  /** Where the top-level checkout goes; default the workspace itself. */
  checkoutDir?: string | undefined;
  /** Parent of scratch checkouts for bundles from other sources; default the OS temp dir. */
  scratchDir?: string | undefined;
  /** The allowed workspace prefix; workspace and checkout must lie inside it when set. */
  workspacePrefix?: string | undefined;
  /** Secret projection dirs, the agent home, session dirs (`/app` is always forbidden). */
  forbiddenRoots?: readonly string[] | undefined;
  mirror?: MirrorConfig | null | undefined;
  /** Values read from the `credentialRef` Secret; required when the bundle has a credentialRef. */
  credential?: GitCredential | null | undefined;
  /** SVC_RESOURCE_BIN_PATH. */
  resourceBinPath?: string | null | undefined;
  /** Base PATH for the assembled-PATH check; default process.env.PATH. */
  basePath?: string | undefined;
  /** Names the assembled PATH must resolve; default tran, trans, apply_patch. */
  assembledPathTools?: readonly string[] | undefined;
  promptCaps?: PromptCaps | undefined;
  copyLimits?: CopyLimits | undefined;
  git?:
    | {
        binary?: string;
        fetchTimeoutMs?: number;
        commandTimeoutMs?: number;
        observer?: GitObserver;
        allowedProtocols?: readonly string[];
      }
    | undefined;
  logger?: AssemblyLogger | undefined;
}

export interface AssemblyResult {
  summary: AssemblySummary;
  /** Loaded prompt texts in promptRefs order, for the first turn of a new thread. */
  prompts: LoadedPrompt[];
  /** Directories to put in front of PATH for the agent, in order. */
  pathEntries: string[];
}

export async function assembleRuntime(options: AssembleOptions): Promise<AssemblyResult> {
  const started = performance.now();
  const timings: StepTiming[] = [];
  let current: AssemblyStep = 'validate';
  const step = async <T>(name: AssemblyStep, fn: () => Promise<T>): Promise<T> => {
    current = name;
    const t0 = performance.now();
    const value = await fn();
    const ms = Math.round(performance.now() - t0);
    timings.push({ step: name, ms });
    options.logger?.info({ step: name, ms }, 'assembly step done');
    return value;
  };
  let scratchRoot: string | undefined;
  try {
    const forbiddenRoots = [...DEFAULT_FORBIDDEN_ROOTS, ...(options.forbiddenRoots ?? [])];
    const setup = await step('validate', async () => {
      const bundle = parseResourceBundleRef(options.resourceBundleRef);
      if (bundle.credentialRef && !options.credential) {
        throw new ServiceError(
          'secret-unavailable',
          `resource credential Secret ${bundle.credentialRef.name} was not projected into the runner`,
          { secretRef: bundle.credentialRef.name, valuesPrinted: false },
        );
      }
      const rootOptions = { forbiddenRoots, prefix: options.workspacePrefix, create: true };
      const workspaceRoot = await checkWritableRoot(options.workspaceDir, 'workspace', rootOptions);
      const checkoutRoot = options.checkoutDir
        ? await checkWritableRoot(options.checkoutDir, 'checkout', rootOptions)
        : workspaceRoot;
      const scratchParent = options.scratchDir
        ? await checkWritableRoot(options.scratchDir, 'scratch', { forbiddenRoots, create: true })
        : await realpath(tmpdir());
      scratchRoot = await mkdtemp(join(scratchParent, 'svc-bundles-'));
      if (isInside(workspaceRoot, scratchRoot) || isInside(scratchRoot, workspaceRoot)) {
        throw new ServiceError(
          'schema-invalid',
          'the scratch directory must lie outside the workspace',
          {
            field: 'scratchDir',
          },
        );
      }
      return { bundle, workspaceRoot, checkoutRoot, scratchRoot };
    });
    const { bundle, workspaceRoot, checkoutRoot } = setup;
    const git = {
      git: new GitRunner({
        binary: options.git?.binary,
        observer: options.git?.observer,
        allowedProtocols: options.git?.allowedProtocols,
      }),
      mirror: options.mirror,
      fetchTimeoutMs: options.git?.fetchTimeoutMs ?? 300_000,
      commandTimeoutMs: options.git?.commandTimeoutMs ?? 60_000,
    };
    const credential = options.credential ?? undefined;
    if (credential) git.git.registerCredential(credential);
    const top = topSource(bundle, options.workspaceRef);

    const checkout = await step('materialize', () =>
      materializeCheckout(
        { ...top, dir: checkoutRoot, credential: bundle.credentialRef ? credential : undefined },
        git,
      ),
    );
    options.logger?.info(
      {
        repoUrl: checkout.fetchRepoUrl,
        commit: checkout.materializedCommit,
        fetchMode: checkout.fetchMode,
      },
      'gitbundle materialized',
    );
    const bundles = await step('copy-bundles', () =>
      copyBundles({
        bundle,
        top,
        topCheckout: checkout,
        checkoutRoot,
        workspaceRoot,
        scratchRoot: setup.scratchRoot,
        forbiddenRoots,
        limits: options.copyLimits ?? DEFAULT_COPY_LIMITS,
        git,
        credential: bundle.credentialRef ? credential : undefined,
      }),
    );
    const tools = await step('prepare-tools', () =>
      prepareToolsDir({ workspaceRoot, resourceBinPath: options.resourceBinPath, forbiddenRoots }),
    );
    const skills = await step('discover-skills', () =>
      discoverSkills({
        workspaceRoot,
        sourceOf: (dir) => {
          // The last bundle written over a directory is the one its files came from.
          const from = [...bundles]
            .reverse()
            .find((b) => isInside(`/${normalizeRelative(b.target_path)}`, `/${dir}`));
          return from?.name ?? 'checkout';
        },
      }),
    );
    const requiredSkills = await step('check-required-skills', () =>
      Promise.resolve(checkRequiredSkills(bundle.requiredSkills ?? [], skills)),
    );
    const caps = options.promptCaps ?? DEFAULT_PROMPT_CAPS;
    const prompts = await step('read-prompts', () =>
      readPrompts(checkoutRoot, bundle.promptRefs ?? [], caps),
    );
    const assembledPathTools = await step('check-assembled-path', () =>
      checkAssembledPath(
        tools.pathEntries,
        options.basePath ?? process.env['PATH'] ?? '',
        options.assembledPathTools ?? ASSEMBLED_PATH_TOOLS,
      ),
    );
    const workspace = await step('summarize', () => countTree(workspaceRoot));
    const summary: AssemblySummary = {
      kind: 'gitbundle',
      repository: {
        repoUrl: checkout.repoUrl,
        fetchRepoUrl: checkout.fetchRepoUrl,
        mirrorUsed: checkout.mirrorUsed,
        mirrorBaseUrl: checkout.mirrorBaseUrl,
        credentialRef: bundle.credentialRef
          ? {
              name: bundle.credentialRef.name,
              namespace: bundle.credentialRef.namespace ?? null,
              keys: [...(bundle.credentialRef.keys ?? [])],
              valuesPrinted: false,
            }
          : null,
        credentialUsed: checkout.credentialUsed,
      },
      requestedRef: checkout.requestedRef,
      refSource: checkout.refSource,
      requestedCommit: checkout.requestedCommit,
      resolvedRef: checkout.resolvedRef,
      materializedCommit: checkout.materializedCommit,
      checkoutTree: checkout.checkoutTree,
      fetchMode: checkout.fetchMode,
      objectFormat: checkout.objectFormat,
      workspace: { root: workspaceRoot, checkoutDir: checkoutRoot, ...workspace },
      bundles,
      tools: tools.summary,
      assembledPathTools,
      skills,
      requiredSkills,
      prompts: { facts: prompts.facts, totalBytes: prompts.totalBytes, caps },
      pathEntries: tools.pathEntries,
      timings,
      totalMs: Math.round(performance.now() - started),
      valuesPrinted: false,
    };
    return { summary, prompts: prompts.prompts, pathEntries: tools.pathEntries };
  } catch (error) {
    throw withStep(error, current);
  } finally {
    if (scratchRoot) await rm(scratchRoot, { recursive: true, force: true });
  }
}

/** Name the failing step in the error's details; anything untyped becomes `infra-failed`. */
function withStep(error: unknown, step: AssemblyStep): ServiceError {
  if (isServiceError(error)) {
    return new ServiceError(error.failureKind, error.message, {
      ...error.details,
      assemblyStep: step,
    });
  }
  const code = (error as { code?: unknown } | null)?.code;
  return new ServiceError('infra-failed', `assembly step ${step} failed`, {
    assemblyStep: step,
    ...(typeof code === 'string' ? { code } : {}),
  });
}
