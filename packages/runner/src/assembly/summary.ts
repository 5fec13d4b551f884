import type { CheckoutFacts } from './git-bundle.js';
import type { PromptCaps, PromptFact } from './prompts.js';
import type { RequiredSkillsSummary, SkillsSummary } from './skills.js';
import type { ToolsSummary } from './tools-dir.js';
import type { TreeCount } from './walk.js';

/**
 * The bounded, secret-free record of one assembly: the data of the `resource-bundle-materialized`
 * event and everything step 8's event needs about bundle, tools, skills and prompts. It holds
 * names, paths, hashes and sizes only, never file bodies or credential values.
 */
export interface RepositoryFact {
  /** As declared by the caller. */
  repoUrl: string;
  /** What git fetched from (the mirror when used); never carries credentials. */
  fetchRepoUrl: string;
  mirrorUsed: boolean;
  mirrorBaseUrl: string | null;
}

export interface BundleCopyFact
  extends
    RepositoryFact,
    Pick<
      CheckoutFacts,
      'requestedRef' | 'refSource' | 'requestedCommit' | 'materializedCommit' | 'checkoutTree'
    > {
  /** Position in `bundles[]`; null for a default lab bundle. */
  index: number | null;
  name: string;
  defaulted: boolean;
  /** `checkout`: read from the top-level checkout; `scratch`: its own fetch. */
  source: 'checkout' | 'scratch';
  subpath: string;
  target_path: string;
  kind: 'file' | 'directory';
  files: number;
  bytes: number;
  inPlace: boolean;
}

export interface StepTiming {
  step: AssemblyStep;
  ms: number;
}

export type AssemblyStep =
  | 'validate'
  | 'materialize'
  | 'copy-bundles'
  | 'prepare-tools'
  | 'discover-skills'
  | 'check-required-skills'
  | 'read-prompts'
  | 'check-assembled-path'
  | 'summarize';

export interface AssemblySummary extends CheckoutFacts {
  kind: 'gitbundle';
  repository: RepositoryFact & {
    credentialRef: {
      name: string;
      namespace: string | null;
      keys: string[];
      valuesPrinted: false;
    } | null;
    credentialUsed: boolean;
  };
  workspace: TreeCount & { root: string; checkoutDir: string };
  bundles: BundleCopyFact[];
  tools: ToolsSummary;
  /** `tran`, `trans`, `apply_patch` (or the configured names) as resolved on the assembled PATH. */
  assembledPathTools: Array<{ name: string; path: string }>;
  skills: SkillsSummary;
  requiredSkills: RequiredSkillsSummary;
  prompts: { facts: PromptFact[]; totalBytes: number; caps: PromptCaps };
  /** Directories the caller puts in front of PATH for the agent, in order. */
  pathEntries: string[];
  timings: StepTiming[];
  totalMs: number;
  valuesPrinted: false;
}
