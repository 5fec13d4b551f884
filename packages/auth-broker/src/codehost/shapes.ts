import { BrokerError } from '../errors.js';

/**
 * Code-host JSON turned into the broker's issue and pull request records. Field names follow the
 * code-host CLI's `--json` names, so callers moving off the CLI keep their field lists. Anything
 * that does not have the expected shape is `upstream-invalid-response`, never passed through.
 */
export const ISSUE_FIELDS = [
  'number',
  'title',
  'state',
  'stateReason',
  'body',
  'author',
  'labels',
  'assignees',
  'milestone',
  'commentsCount',
  'locked',
  'url',
  'createdAt',
  'updatedAt',
  'closedAt',
] as const;

export const PR_FIELDS = [
  'number',
  'title',
  'state',
  'body',
  'author',
  'labels',
  'assignees',
  'milestone',
  'locked',
  'isDraft',
  'headRefName',
  'headRefOid',
  'headRepository',
  'baseRefName',
  'url',
  'createdAt',
  'updatedAt',
  'closedAt',
  'mergedAt',
] as const;

export type IssueField = (typeof ISSUE_FIELDS)[number];
export type PrField = (typeof PR_FIELDS)[number];
export type IssueRecord = Record<IssueField, unknown>;
export type PrRecord = Record<PrField, unknown>;

export const DEFAULT_ISSUE_LIST_FIELDS: readonly IssueField[] = [
  'number',
  'title',
  'state',
  'author',
  'labels',
  'url',
  'createdAt',
  'updatedAt',
];
export const DEFAULT_PR_LIST_FIELDS: readonly PrField[] = [
  'number',
  'title',
  'state',
  'author',
  'isDraft',
  'headRefName',
  'baseRefName',
  'url',
  'createdAt',
  'updatedAt',
];

type Json = Record<string, unknown>;

/** Reads typed fields of one upstream object; the first mismatch is the whole response's fault. */
class Reader {
  constructor(
    private readonly what: string,
    private readonly value: Json,
  ) {}

  static of(what: string, value: unknown): Reader {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw invalid(what);
    return new Reader(what, value as Json);
  }

  has(key: string): boolean {
    return Object.hasOwn(this.value, key) && this.value[key] !== undefined;
  }

  int(key: string): number {
    const v = this.value[key];
    if (typeof v !== 'number' || !Number.isSafeInteger(v)) throw invalid(`${this.what}.${key}`);
    return v;
  }

  string(key: string): string {
    const v = this.value[key];
    if (typeof v !== 'string') throw invalid(`${this.what}.${key}`);
    return v;
  }

  nullableString(key: string): string | null {
    const v = this.value[key];
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string') throw invalid(`${this.what}.${key}`);
    return v;
  }

  bool(key: string, fallback: boolean): boolean {
    const v = this.value[key];
    if (v === undefined || v === null) return fallback;
    if (typeof v !== 'boolean') throw invalid(`${this.what}.${key}`);
    return v;
  }

  object(key: string): Reader | null {
    const v = this.value[key];
    if (v === undefined || v === null) return null;
    return Reader.of(`${this.what}.${key}`, v);
  }

  array(key: string): unknown[] {
    const v = this.value[key];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v)) throw invalid(`${this.what}.${key}`);
    return v;
  }
}

export function invalid(what: string): BrokerError {
  return new BrokerError(
    'upstream-invalid-response',
    `the code-host response could not be parsed safely (${what})`,
    { degradedReason: 'unexpected-shape' },
  );
}

function user(r: Reader, key: string): { login: string } | null {
  const u = r.object(key);
  return u ? { login: u.string('login') } : null;
}

function labels(r: Reader): { name: string }[] {
  // The code host sends label objects, and plain names in some older payloads.
  return r
    .array('labels')
    .map((label, i) =>
      typeof label === 'string'
        ? { name: label }
        : { name: Reader.of(`labels[${i}]`, label).string('name') },
    );
}

function logins(r: Reader, key: string): { login: string }[] {
  return r.array(key).map((u, i) => ({ login: Reader.of(`${key}[${i}]`, u).string('login') }));
}

function milestone(r: Reader): { number: number; title: string } | null {
  const m = r.object('milestone');
  return m ? { number: m.int('number'), title: m.string('title') } : null;
}

function upper(state: string): string {
  return state.toUpperCase();
}

/** True when an entry of the issues endpoint is a pull request (the code host lists both). */
export function isPullRequestEntry(value: unknown): boolean {
  return Reader.of('issue', value).has('pull_request');
}

export function parseIssue(value: unknown): IssueRecord {
  const r = Reader.of('issue', value);
  return {
    number: r.int('number'),
    title: r.string('title'),
    state: upper(r.string('state')),
    stateReason: r.nullableString('state_reason'),
    body: r.nullableString('body'),
    author: user(r, 'user'),
    labels: labels(r),
    assignees: logins(r, 'assignees'),
    milestone: milestone(r),
    commentsCount: r.has('comments') ? r.int('comments') : 0,
    locked: r.bool('locked', false),
    url: r.string('html_url'),
    createdAt: r.string('created_at'),
    updatedAt: r.string('updated_at'),
    closedAt: r.nullableString('closed_at'),
  };
}

export function parsePull(value: unknown): PrRecord {
  const r = Reader.of('pull', value);
  const head = r.object('head');
  const base = r.object('base');
  if (!head || !base) throw invalid('pull.head/base');
  const mergedAt = r.nullableString('merged_at');
  const state = r.string('state');
  return {
    number: r.int('number'),
    title: r.string('title'),
    state: mergedAt ? 'MERGED' : upper(state),
    body: r.nullableString('body'),
    author: user(r, 'user'),
    labels: labels(r),
    assignees: logins(r, 'assignees'),
    milestone: milestone(r),
    locked: r.bool('locked', false),
    isDraft: r.bool('draft', false),
    headRefName: head.string('ref'),
    headRefOid: head.string('sha'),
    headRepository: head.object('repo')?.string('full_name') ?? null,
    baseRefName: base.string('ref'),
    url: r.string('html_url'),
    createdAt: r.string('created_at'),
    updatedAt: r.string('updated_at'),
    closedAt: r.nullableString('closed_at'),
    mergedAt,
  };
}

export interface RepoInfo {
  fullName: string;
  private: boolean;
  visibility: string;
  defaultBranch: string;
  archived: boolean;
  permissions: { admin: boolean; push: boolean; pull: boolean } | null;
}

export function parseRepoInfo(value: unknown): RepoInfo {
  const r = Reader.of('repository', value);
  const isPrivate = r.bool('private', false);
  const p = r.object('permissions');
  return {
    fullName: r.string('full_name'),
    private: isPrivate,
    visibility: r.nullableString('visibility') ?? (isPrivate ? 'private' : 'public'),
    defaultBranch: r.string('default_branch'),
    archived: r.bool('archived', false),
    permissions: p
      ? { admin: p.bool('admin', false), push: p.bool('push', false), pull: p.bool('pull', false) }
      : null,
  };
}

export interface RateLimitInfo {
  limit: number;
  remaining: number;
  used: number;
  resetAt: string;
}

export function parseRateLimit(value: unknown): RateLimitInfo {
  const r = Reader.of('rate_limit', value);
  const core = r.object('resources')?.object('core') ?? r.object('rate');
  if (!core) throw invalid('rate_limit.resources.core');
  return {
    limit: core.int('limit'),
    remaining: core.int('remaining'),
    used: core.has('used') ? core.int('used') : core.int('limit') - core.int('remaining'),
    resetAt: new Date(core.int('reset') * 1000).toISOString(),
  };
}

/** Keep only the asked-for fields, in the asked-for order. */
export function project<F extends string>(
  record: Record<F, unknown>,
  fields: readonly F[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const field of fields) out[field] = record[field];
  return out;
}

/** Upstream list bodies must be arrays. */
export function asArray(value: unknown, what: string): unknown[] {
  if (!Array.isArray(value)) throw invalid(what);
  return value;
}
