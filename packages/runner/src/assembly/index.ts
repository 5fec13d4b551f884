/**
 * Runtime assembly (spec/3, "Runtime assembly" and Assembly steps 6 and 7): what the runner does
 * with a run's `resourceBundleRef` before the backend starts.
 *
 * Glossary
 * - gitbundle: the resource bundle reference; one repository at one commit, plus `bundles[]`,
 *   `promptRefs[]`, `requiredSkills[]` and an optional fetch credential reference.
 * - checkout: the materialized top-level repository (by default the workspace itself).
 * - materialized commit: the commit actually checked out; the content identity of the run.
 * - bundle item: a file or directory copied from a checkout `subpath` to a workspace `target_path`.
 * - tool: a top-level file with a shebang in workspace `tools/`; a shim execs it from the
 *   resource bin path.
 * - skill: `.agents/skills/<name>/SKILL.md` and the files beside it.
 * - domain prompt: a `promptRefs` file injected into the first turn of a new thread only.
 */
export { assembleRuntime } from './assemble.js';
export type { AssembleOptions, AssemblyLogger, AssemblyResult } from './assemble.js';
export type {
  AssemblyStep,
  AssemblySummary,
  BundleCopyFact,
  RepositoryFact,
  StepTiming,
} from './summary.js';
export { assemblyConfigFromEnv } from './config.js';
export type { AssemblyEnvConfig } from './config.js';
export { composeTurnPrompt } from './initial-prompt.js';
export type { TurnPrompt, TurnPromptInput } from './initial-prompt.js';
export { DEFAULT_PROMPT_CAPS, readPrompts } from './prompts.js';
export type { LoadedPrompt, PromptCaps, PromptFact, PromptsRead } from './prompts.js';
export { SKILLS_DIR, checkRequiredSkills, discoverSkills } from './skills.js';
export type { RequiredSkillsSummary, SkillFact, SkillsSummary } from './skills.js';
export { TOOLS_DIR, prepareToolsDir } from './tools-dir.js';
export type { PreparedTools, ToolFact, ToolsSummary } from './tools-dir.js';
export {
  ASSEMBLED_PATH_TOOLS,
  DEFAULT_BASE_TOOLS,
  assembledPath,
  checkAssembledPath,
  checkWorkReady,
  detectWorkReady,
} from '@svc/contracts/work-ready';
export type { BaseToolFact, BaseToolSpec, WorkReadySummary } from '@svc/contracts/work-ready';
export { materializeCheckout } from './git-bundle.js';
export type { CheckoutRequest, CheckoutResult, GitBundleContext, RefSource } from './git-bundle.js';
export { GitRunner, gitCredentialFromSecret } from './git-exec.js';
export type { GitCredential, GitObserver, GitSpawnInfo } from './git-exec.js';
export { resolveFetchTarget } from './mirror.js';
export type { FetchTarget, MirrorConfig } from './mirror.js';
export { DEFAULT_FORBIDDEN_ROOTS, checkWritableRoot, resolveInside } from './paths.js';
export { parseResourceBundleRef } from './bundle-ref.js';
export { DEFAULT_LAB_BUNDLES } from './bundles.js';
export { DEFAULT_COPY_LIMITS } from './bundle-copy.js';
export type { CopyLimits } from './bundle-copy.js';
