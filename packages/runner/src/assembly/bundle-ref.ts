import {
  ServiceError,
  type BundleItem,
  type ResourceBundleRef,
  type WorkspaceRef,
} from '@svc/contracts';
import type { RefSource } from './git-bundle.js';
import { repoIdentity } from './mirror.js';
import { checkRelative } from './paths.js';

/**
 * The runner re-checks the `gitbundle` it is handed (a run record may predate today's manager):
 * only the fields the spec names, no legacy or mirror fields, and paths that stay relative. Then
 * it works out where each piece of content comes from.
 */
const FIELDS = new Set([
  'kind',
  'repoUrl',
  'ref',
  'commitId',
  'bundles',
  'promptRefs',
  'requiredSkills',
  'credentialRef',
]);
const ITEM_FIELDS = new Set(['name', 'repoUrl', 'ref', 'commitId', 'subpath', 'target_path']);
const COMMIT = /^([0-9a-f]{40}|[0-9a-f]{64})$/;
const SKILL_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function parseResourceBundleRef(value: unknown): ResourceBundleRef {
  const ref = object(value, 'resourceBundleRef');
  for (const key of Object.keys(ref)) {
    if (!FIELDS.has(key))
      invalid(`resourceBundleRef.${key} is not supported`, `resourceBundleRef.${key}`);
  }
  if (ref['kind'] !== 'gitbundle')
    invalid('resourceBundleRef.kind must be gitbundle', 'resourceBundleRef.kind');
  string(ref['repoUrl'], 'resourceBundleRef.repoUrl');
  optionalString(ref['ref'], 'resourceBundleRef.ref');
  commit(ref['commitId'], 'resourceBundleRef.commitId');
  list(ref['bundles'], 'resourceBundleRef.bundles').forEach((raw, i) => {
    const field = `resourceBundleRef.bundles[${i}]`;
    const item = object(raw, field);
    for (const key of Object.keys(item)) {
      if (!ITEM_FIELDS.has(key)) invalid(`${field}.${key} is not supported`, `${field}.${key}`);
    }
    optionalString(item['name'], `${field}.name`);
    optionalString(item['repoUrl'], `${field}.repoUrl`);
    optionalString(item['ref'], `${field}.ref`);
    commit(item['commitId'], `${field}.commitId`);
    checkRelative(string(item['subpath'], `${field}.subpath`), `${field}.subpath`, {
      allowDot: true,
    });
    checkRelative(string(item['target_path'], `${field}.target_path`), `${field}.target_path`, {
      allowDot: true,
    });
  });
  list(ref['promptRefs'], 'resourceBundleRef.promptRefs').forEach((raw, i) => {
    const field = `resourceBundleRef.promptRefs[${i}]`;
    const prompt = object(raw, field);
    string(prompt['name'], `${field}.name`);
    checkRelative(string(prompt['path'], `${field}.path`), `${field}.path`);
    if (prompt['inject'] !== 'thread-start')
      invalid(`${field}.inject must be thread-start`, `${field}.inject`);
    if (typeof prompt['required'] !== 'boolean')
      invalid(`${field}.required must be a boolean`, `${field}.required`);
  });
  list(ref['requiredSkills'], 'resourceBundleRef.requiredSkills').forEach((raw, i) => {
    const field = `resourceBundleRef.requiredSkills[${i}].name`;
    if (!SKILL_NAME.test(string(object(raw, field)['name'], field)))
      invalid(`${field} is not a skill name`, field);
  });
  if (ref['credentialRef'] !== undefined) {
    string(
      object(ref['credentialRef'], 'resourceBundleRef.credentialRef')['name'],
      'resourceBundleRef.credentialRef.name',
    );
  }
  return value as ResourceBundleRef;
}

export interface TopSource {
  repoUrl: string;
  ref: string | undefined;
  refSource: RefSource;
  commitId: string | undefined;
}

/** The top-level ref: `ref`, else the run's `workspaceRef.branch`, else the remote HEAD. */
export function topSource(
  bundle: ResourceBundleRef,
  workspaceRef?: WorkspaceRef | null,
): TopSource {
  if (bundle.ref !== undefined) {
    return {
      repoUrl: bundle.repoUrl,
      ref: bundle.ref,
      refSource: 'resourceBundleRef.ref',
      commitId: bundle.commitId,
    };
  }
  if (workspaceRef?.kind === 'git' && workspaceRef.branch) {
    return {
      repoUrl: bundle.repoUrl,
      ref: workspaceRef.branch,
      refSource: 'workspaceRef.branch',
      commitId: bundle.commitId,
    };
  }
  return {
    repoUrl: bundle.repoUrl,
    ref: undefined,
    refSource: 'remote-head',
    commitId: bundle.commitId,
  };
}

export interface ItemSource extends TopSource {
  /** The item reads from the top-level checkout (same repository, same ref and commit). */
  sameAsTop: boolean;
}

/**
 * Omitted repo, ref and commit are inherited from the top level. A commit pin belongs to one
 * repository and one ref, so it is inherited only when the item names neither another repository
 * nor another ref; an item from another repository inherits only the declared top-level `ref`.
 */
export function itemSource(
  item: BundleItem,
  top: TopSource,
  bundle: ResourceBundleRef,
): ItemSource {
  const sameRepo =
    item.repoUrl === undefined || repoIdentity(item.repoUrl) === repoIdentity(top.repoUrl);
  if (sameRepo) {
    if (item.ref === undefined && item.commitId === undefined) return { ...top, sameAsTop: true };
    const ref = item.ref ?? top.ref;
    const commitId = item.commitId ?? (item.ref === undefined ? top.commitId : undefined);
    const refSource: RefSource = item.ref !== undefined ? 'bundle.ref' : top.refSource;
    const sameAsTop = ref === top.ref && commitId === top.commitId;
    return { repoUrl: top.repoUrl, ref, refSource, commitId, sameAsTop };
  }
  const ref = item.ref ?? bundle.ref;
  const refSource: RefSource =
    item.ref !== undefined ? 'bundle.ref' : ref !== undefined ? 'inherited' : 'remote-head';
  return {
    repoUrl: item.repoUrl ?? top.repoUrl,
    ref,
    refSource,
    commitId: item.commitId,
    sameAsTop: false,
  };
}

function invalid(message: string, field: string): never {
  throw new ServiceError('schema-invalid', message, { field });
}

function object(value: unknown, field: string): Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    invalid(`${field} must be an object`, field);
  return value as Record<string, unknown>;
}

function string(value: unknown, field: string): string {
  if (
    typeof value !== 'string' ||
    value.length === 0 ||
    value.length > 4096 ||
    value.includes('\0')
  ) {
    invalid(`${field} must be a non-empty string`, field);
  }
  return value;
}

function optionalString(value: unknown, field: string): void {
  if (value !== undefined) string(value, field);
}

function commit(value: unknown, field: string): void {
  if (value !== undefined && (typeof value !== 'string' || !COMMIT.test(value))) {
    invalid(`${field} must be a full commit id`, field);
  }
}

function list(value: unknown, field: string): unknown[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) invalid(`${field} must be an array`, field);
  return value;
}
