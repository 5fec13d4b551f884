import { lstat, mkdir, realpath } from 'node:fs/promises';
import { join } from 'node:path';
import type { BundleItem, ResourceBundleRef } from '@svc/contracts';
import { copyBundleItem, type CopyLimits } from './bundle-copy.js';
import { itemSource, type ItemSource, type TopSource } from './bundle-ref.js';
import type { GitCredential } from './git-exec.js';
import { materializeCheckout, type CheckoutResult, type GitBundleContext } from './git-bundle.js';
import { repoIdentity, repoOrigin } from './mirror.js';
import { resolveInside } from './paths.js';
import type { BundleCopyFact } from './summary.js';

/**
 * Step 7's first part: copy `bundles[]` (or the default lab bundles) into the workspace. An item
 * from another repository, ref or commit is fetched into its own scratch checkout; items that
 * share a source share one fetch.
 */
export const DEFAULT_LAB_BUNDLES: ReadonlyArray<{
  name: string;
  subpath: string;
  target_path: string;
}> = [
  { name: 'tools', subpath: 'tools', target_path: 'tools' },
  { name: 'skills', subpath: 'skills', target_path: '.agents/skills' },
];

export interface CopyBundlesContext {
  bundle: ResourceBundleRef;
  top: TopSource;
  topCheckout: CheckoutResult;
  /** Real paths. */
  checkoutRoot: string;
  workspaceRoot: string;
  /** Directory for scratch checkouts (created by the caller, removed by the caller). */
  scratchRoot: string;
  forbiddenRoots: readonly string[];
  limits: CopyLimits;
  git: GitBundleContext;
  /** The top-level resource credential; sent only to the same origin as the top repository. */
  credential?: GitCredential | undefined;
}

interface PlannedItem {
  index: number | null;
  name: string;
  defaulted: boolean;
  item: BundleItem;
}

export async function copyBundles(ctx: CopyBundlesContext): Promise<BundleCopyFact[]> {
  const planned = await plan(ctx);
  const scratch = new Map<string, Promise<{ root: string; result: CheckoutResult }>>();
  const facts: BundleCopyFact[] = [];
  for (const entry of planned) {
    const source = itemSource(entry.item, ctx.top, ctx.bundle);
    const fromTop =
      source.sameAsTop ||
      (source.commitId !== undefined &&
        repoIdentity(source.repoUrl) === repoIdentity(ctx.top.repoUrl) &&
        source.commitId === ctx.topCheckout.materializedCommit);
    let root = ctx.checkoutRoot;
    let checkout = ctx.topCheckout;
    if (!fromTop) {
      const key = `${repoIdentity(source.repoUrl)}\n${source.ref ?? ''}\n${source.commitId ?? ''}`;
      let pending = scratch.get(key);
      if (!pending) {
        pending = fetchScratch(ctx, source, scratch.size);
        scratch.set(key, pending);
      }
      ({ root, result: checkout } = await pending);
    }
    const field =
      entry.index === null
        ? `defaultBundles.${entry.name}`
        : `resourceBundleRef.bundles[${entry.index}]`;
    const copied = await copyBundleItem({
      sourceRoot: root,
      subpath: entry.item.subpath,
      workspaceRoot: ctx.workspaceRoot,
      targetPath: entry.item.target_path,
      field,
      forbiddenRoots: ctx.forbiddenRoots,
      limits: ctx.limits,
    });
    facts.push({
      index: entry.index,
      name: entry.name,
      defaulted: entry.defaulted,
      repoUrl: checkout.repoUrl,
      fetchRepoUrl: checkout.fetchRepoUrl,
      mirrorUsed: checkout.mirrorUsed,
      mirrorBaseUrl: checkout.mirrorBaseUrl,
      requestedRef: fromTop ? checkout.requestedRef : (source.ref ?? null),
      refSource: fromTop ? checkout.refSource : source.refSource,
      requestedCommit: fromTop ? checkout.requestedCommit : (source.commitId ?? null),
      materializedCommit: checkout.materializedCommit,
      checkoutTree: checkout.checkoutTree,
      source: fromTop ? 'checkout' : 'scratch',
      subpath: entry.item.subpath,
      target_path: entry.item.target_path,
      ...copied,
    });
  }
  return facts;
}

/** `bundles[]` as given; when absent, the default lab bundles whose subpath exists. */
async function plan(ctx: CopyBundlesContext): Promise<PlannedItem[]> {
  if (ctx.bundle.bundles !== undefined) {
    return ctx.bundle.bundles.map((item, index) => ({
      index,
      name: item.name ?? `bundles[${index}]`,
      defaulted: false,
      item,
    }));
  }
  const planned: PlannedItem[] = [];
  for (const item of DEFAULT_LAB_BUNDLES) {
    const abs = resolveInside(ctx.checkoutRoot, item.subpath, `defaultBundles.${item.name}`);
    const exists = await lstat(abs).then(
      () => true,
      () => false,
    );
    if (exists) planned.push({ index: null, name: item.name, defaulted: true, item: { ...item } });
  }
  return planned;
}

async function fetchScratch(
  ctx: CopyBundlesContext,
  source: ItemSource,
  n: number,
): Promise<{ root: string; result: CheckoutResult }> {
  const dir = join(ctx.scratchRoot, `bundle-${n}`);
  await mkdir(dir, { recursive: true });
  const sameOrigin = repoOrigin(source.repoUrl) === repoOrigin(ctx.top.repoUrl);
  const result = await materializeCheckout(
    {
      repoUrl: source.repoUrl,
      ref: source.ref,
      refSource: source.refSource,
      commitId: source.commitId,
      dir,
      credential: sameOrigin ? ctx.credential : undefined,
    },
    ctx.git,
  );
  return { root: await realpath(dir), result };
}
