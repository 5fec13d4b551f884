import {
  DEFAULT_ISSUE_LIST_FIELDS,
  DEFAULT_PR_LIST_FIELDS,
  ISSUE_FIELDS,
  PR_FIELDS,
  type IssueField,
  type PrField,
} from '../codehost/shapes.js';
import type { OperationName } from './operations.js';
import {
  boundedString,
  branchName,
  describeType,
  field,
  optionalBoolean,
  positiveInt,
  Problems,
  rejectUnknownKeys,
  type JsonObject,
} from './validation.js';

/** Structured parameters per operation (spec/1 leaves the list parameters open; docs say why). */
export type OperationParams =
  | { operation: 'codehost.auth.status' }
  | {
      operation: 'codehost.issue.list';
      state: ListState;
      labels: string[];
      limit: number;
      fields: IssueField[];
    }
  | { operation: 'codehost.issue.read'; number: number; fields: IssueField[] }
  | {
      operation: 'codehost.pr.list';
      state: ListState;
      base: string | null;
      head: string | null;
      limit: number;
      fields: PrField[];
    }
  | { operation: 'codehost.pr.read'; number: number; fields: PrField[] }
  | {
      operation: 'codehost.pr.create';
      title: string;
      base: string;
      head: string;
      body: string | null;
      draft: boolean;
      maintainerCanModify: boolean;
    }
  | { operation: 'codehost.pr.comment.create'; number: number; body: string };

export type ListState = 'open' | 'closed' | 'all';

export const LIST_LIMIT_DEFAULT = 30;
export const LIST_LIMIT_MAX = 200;
/** The code host's own cap on issue, PR and comment bodies. */
export const BODY_MAX_CHARS = 65_536;
const LIST_STATES: readonly ListState[] = ['open', 'closed', 'all'];

export function parseParams<O extends OperationName>(
  operation: O,
  params: JsonObject,
): Extract<OperationParams, { operation: O }> {
  const p = new Problems();
  const result = parse(operation, params, p);
  p.throwIfAny(`params for ${operation}`);
  // `parse` switches on the same operation, so the variant matches.
  return result as Extract<OperationParams, { operation: O }>;
}

function parse(operation: OperationName, params: JsonObject, p: Problems): OperationParams {
  const allow = (keys: string[]) => rejectUnknownKeys(params, keys, 'params', p);
  switch (operation) {
    case 'codehost.auth.status':
      allow([]);
      return { operation };
    case 'codehost.issue.list':
      allow(['state', 'labels', 'limit', 'jsonFields']);
      return {
        operation,
        state: state(params, p),
        labels: labelList(field(params, 'labels'), p),
        limit: limit(params, p),
        fields: jsonFields(params, ISSUE_FIELDS, DEFAULT_ISSUE_LIST_FIELDS, p),
      };
    case 'codehost.issue.read':
      allow(['number', 'jsonFields']);
      return {
        operation,
        number: positiveInt(field(params, 'number'), 'params.number', p) ?? 0,
        fields: jsonFields(params, ISSUE_FIELDS, ISSUE_FIELDS, p),
      };
    case 'codehost.pr.list': {
      allow(['state', 'base', 'head', 'limit', 'jsonFields']);
      const base = field(params, 'base');
      const head = field(params, 'head');
      return {
        operation,
        state: state(params, p),
        base: base === undefined ? null : (branchName(base, 'params.base', p) ?? null),
        head: head === undefined ? null : (branchName(head, 'params.head', p, true) ?? null),
        limit: limit(params, p),
        fields: jsonFields(params, PR_FIELDS, DEFAULT_PR_LIST_FIELDS, p),
      };
    }
    case 'codehost.pr.read':
      allow(['number', 'jsonFields']);
      return {
        operation,
        number: positiveInt(field(params, 'number'), 'params.number', p) ?? 0,
        fields: jsonFields(params, PR_FIELDS, PR_FIELDS, p),
      };
    case 'codehost.pr.create': {
      allow(['title', 'base', 'head', 'body', 'draft', 'maintainerCanModify']);
      const title = boundedString(field(params, 'title'), 'params.title', p, { min: 1, max: 256 });
      if (title !== undefined && title.trim() === '') p.add('params.title must not be blank');
      const base = branchName(field(params, 'base'), 'params.base', p) ?? '';
      const head = branchName(field(params, 'head'), 'params.head', p, true) ?? '';
      if (base !== '' && base === head) p.add('params.head must differ from params.base');
      const body = field(params, 'body');
      return {
        operation,
        title: title ?? '',
        base,
        head,
        body:
          body === undefined || body === null
            ? null
            : (boundedString(body, 'params.body', p, { min: 0, max: BODY_MAX_CHARS }) ?? null),
        draft: optionalBoolean(field(params, 'draft'), 'params.draft', p) ?? false,
        maintainerCanModify:
          optionalBoolean(field(params, 'maintainerCanModify'), 'params.maintainerCanModify', p) ??
          true,
      };
    }
    case 'codehost.pr.comment.create':
      allow(['number', 'body']);
      return {
        operation,
        number: positiveInt(field(params, 'number'), 'params.number', p) ?? 0,
        body:
          boundedString(field(params, 'body'), 'params.body', p, { min: 1, max: BODY_MAX_CHARS }) ??
          '',
      };
  }
}

function state(params: JsonObject, p: Problems): ListState {
  const value = field(params, 'state');
  if (value === undefined) return 'open';
  if (typeof value === 'string' && (LIST_STATES as readonly string[]).includes(value))
    return value as ListState;
  p.add(`params.state must be one of ${LIST_STATES.join(', ')}`);
  return 'open';
}

function limit(params: JsonObject, p: Problems): number {
  const value = field(params, 'limit');
  if (value === undefined) return LIST_LIMIT_DEFAULT;
  return positiveInt(value, 'params.limit', p, LIST_LIMIT_MAX) ?? LIST_LIMIT_DEFAULT;
}

function labelList(value: unknown, p: Problems): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > 20) {
    p.add(`params.labels must be an array of at most 20 names (got ${describeType(value)})`);
    return [];
  }
  const names: string[] = [];
  value.forEach((item, i) => {
    const name = boundedString(item, `params.labels[${i}]`, p, { min: 1, max: 100 });
    // Labels travel comma-joined in the query, so a comma would split one into two.
    if (name !== undefined && /[,\p{Cc}]/u.test(name))
      p.add(`params.labels[${i}] must not contain commas or control characters`);
    else if (name !== undefined) names.push(name);
  });
  return names;
}

function jsonFields<F extends string>(
  params: JsonObject,
  allowed: readonly F[],
  fallback: readonly F[],
  p: Problems,
): F[] {
  const value = field(params, 'jsonFields');
  if (value === undefined) return [...fallback];
  if (!Array.isArray(value) || value.length === 0 || value.length > allowed.length * 2) {
    p.add(`params.jsonFields must be a non-empty array of field names`);
    return [...fallback];
  }
  const unknown = value.filter((f) => typeof f !== 'string' || !allowed.includes(f as F));
  if (unknown.length > 0) {
    p.add(`params.jsonFields has unknown fields (allowed: ${allowed.join(', ')})`);
    return [...fallback];
  }
  return [...new Set(value as F[])];
}
