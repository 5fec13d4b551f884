import { randomUUID } from 'node:crypto';

/**
 * Object handling of the fake Kubernetes API server: resource table, Status bodies, label
 * selectors, name and label validation, JSON Patch and merge patch. Kept apart from the HTTP
 * layer in fake-kube.ts so each stays small.
 */

export interface KubeMeta {
  name: string;
  namespace?: string | undefined;
  uid?: string | undefined;
  resourceVersion?: string | undefined;
  creationTimestamp?: string | undefined;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: Array<{ uid: string; [key: string]: unknown }>;
  [key: string]: unknown;
}

/** An API object as stored: typed where the fake reads it, open everywhere else. */
export interface KubeObject {
  apiVersion?: string | undefined;
  kind?: string | undefined;
  metadata: KubeMeta;
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
  data?: Record<string, string>;
  stringData?: Record<string, string>;
  type?: string;
  [key: string]: unknown;
}

/** The value at a property path of an object, or undefined. */
export function at(value: unknown, ...path: string[]): unknown {
  let current = value;
  for (const key of path) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

export const asRecord = (value: unknown): Record<string, unknown> =>
  value !== null && typeof value === 'object' && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};

export interface ResourceInfo {
  /** URL prefix of its API group version. */
  prefix: '/api/v1' | '/apis/batch/v1';
  apiVersion: string;
  kind: string;
  group: string;
}

export const RESOURCES: Record<string, ResourceInfo> = {
  secrets: { prefix: '/api/v1', apiVersion: 'v1', kind: 'Secret', group: '' },
  persistentvolumeclaims: {
    prefix: '/api/v1',
    apiVersion: 'v1',
    kind: 'PersistentVolumeClaim',
    group: '',
  },
  pods: { prefix: '/api/v1', apiVersion: 'v1', kind: 'Pod', group: '' },
  jobs: { prefix: '/apis/batch/v1', apiVersion: 'batch/v1', kind: 'Job', group: 'batch' },
};

export class KubeStatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }

  body(): Record<string, unknown> {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      details: this.details,
      code: this.code,
    };
  }
}

export const notFound = (resource: string, name: string) =>
  new KubeStatusError(404, 'NotFound', `${resource} "${name}" not found`, {
    name,
    kind: resource,
    ...groupOf(resource),
  });

export const alreadyExists = (resource: string, name: string) =>
  new KubeStatusError(409, 'AlreadyExists', `${resource} "${name}" already exists`, {
    name,
    kind: resource,
    ...groupOf(resource),
  });

export const conflict = (resource: string, name: string) =>
  new KubeStatusError(
    409,
    'Conflict',
    `Operation cannot be fulfilled on ${resource} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
    { name, kind: resource, ...groupOf(resource) },
  );

export const invalid = (resource: string, name: string, message: string) =>
  new KubeStatusError(
    422,
    'Invalid',
    `${RESOURCES[resource]?.kind ?? resource} "${name}" is invalid: ${message}`,
    {
      name,
      kind: RESOURCES[resource]?.kind ?? resource,
      ...groupOf(resource),
    },
  );

export const badRequest = (message: string) => new KubeStatusError(400, 'BadRequest', message);

function groupOf(resource: string): { group?: string } {
  const group = RESOURCES[resource]?.group;
  return group ? { group } : {};
}

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The checks of the real API server that a client of ours could plausibly trip. */
export function validateObject(resource: string, obj: KubeObject): void {
  const name = obj.metadata.name;
  if (!DNS_SUBDOMAIN.test(name) || name.length > 253)
    throw invalid(resource, name, 'metadata.name: Invalid value: a lowercase RFC 1123 subdomain');
  if (resource === 'jobs' && name.length > 63)
    throw invalid(resource, name, 'metadata.name: must be no more than 63 characters');
  for (const where of ['metadata', 'spec.template.metadata'] as const) {
    const labels =
      where === 'metadata' ? obj.metadata.labels : at(obj.spec, 'template', 'metadata', 'labels');
    for (const [key, value] of Object.entries(asRecord(labels))) {
      const local = key.includes('/') ? key.slice(key.indexOf('/') + 1) : key;
      if (typeof value !== 'string' || value.length > 63 || !LABEL_VALUE.test(value))
        throw invalid(resource, name, `${where}.labels: Invalid value: ${JSON.stringify(value)}`);
      if (local.length > 63 || !LABEL_NAME.test(local))
        throw invalid(resource, name, `${where}.labels: Invalid key: ${JSON.stringify(key)}`);
    }
  }
  if (resource === 'secrets') {
    for (const [key, value] of Object.entries(asRecord(obj.data))) {
      if (typeof value !== 'string' || !BASE64.test(value) || value.length % 4 !== 0)
        throw invalid(resource, name, `data[${key}]: illegal base64 data`);
    }
  }
}

/** What the API server adds on create. */
export function initialize(
  resource: string,
  obj: KubeObject,
  namespace: string,
  resourceVersion: string,
): KubeObject {
  const info = RESOURCES[resource]!;
  const uid = randomUUID();
  const out: KubeObject = {
    ...obj,
    apiVersion: info.apiVersion,
    kind: info.kind,
    metadata: {
      ...obj.metadata,
      namespace,
      uid,
      resourceVersion,
      creationTimestamp: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
    },
  };
  if (resource === 'secrets') normalizeSecret(out);
  if (resource === 'persistentvolumeclaims') out.status = { phase: 'Pending' };
  if (resource === 'jobs') {
    const selectorLabels = { 'batch.kubernetes.io/controller-uid': uid };
    const podLabels = {
      ...selectorLabels,
      'batch.kubernetes.io/job-name': obj.metadata.name,
      'controller-uid': uid,
      'job-name': obj.metadata.name,
    };
    const template = asRecord(at(obj.spec, 'template'));
    out.metadata.generation = 1;
    out.spec = {
      completions: 1,
      parallelism: 1,
      ...obj.spec,
      selector: { matchLabels: selectorLabels },
      template: {
        ...template,
        metadata: {
          ...asRecord(template['metadata']),
          labels: { ...asRecord(at(template, 'metadata', 'labels')), ...podLabels },
        },
      },
    };
    out.status = {};
  }
  return out;
}

/** `stringData` is write-only: the server merges it into `data`. */
export function normalizeSecret(obj: KubeObject): void {
  obj.type ??= 'Opaque';
  if (obj.stringData) {
    const data: Record<string, string> = { ...obj.data };
    for (const [key, value] of Object.entries(obj.stringData))
      data[key] = Buffer.from(value).toString('base64');
    obj.data = data;
    delete obj.stringData;
  }
}

export type Requirement = (labels: Record<string, string>) => boolean;

/** Equality- and set-based label selectors, as `labelSelector=` is parsed by the server. */
export function parseLabelSelector(selector: string): Requirement[] {
  const parts: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of selector) {
    if (ch === '(') depth++;
    if (ch === ')') depth--;
    if (ch === ',' && depth === 0) {
      parts.push(current);
      current = '';
    } else current += ch;
  }
  if (current.trim()) parts.push(current);
  return parts.map((raw) => {
    const part = raw.trim();
    const set = /^([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(part);
    if (set) {
      const [, key, op, list] = set as unknown as [string, string, string, string];
      const values = list.split(',').map((v) => v.trim());
      return op === 'in'
        ? (l) => key in l && values.includes(l[key]!)
        : (l) => !(key in l) || !values.includes(l[key]!);
    }
    const eq = /^([^\s!=(),]+)\s*(!=|==|=)\s*([^\s!=(),]*)$/.exec(part);
    if (eq) {
      const [, key, op, value] = eq as unknown as [string, string, string, string];
      return op === '!=' ? (l) => l[key] !== value : (l) => l[key] === value;
    }
    const exists = /^(!?)([^\s!=(),]+)$/.exec(part);
    if (exists) {
      const [, not, key] = exists as unknown as [string, string, string];
      return not ? (l) => !(key in l) : (l) => key in l;
    }
    throw badRequest(`unable to parse requirement: ${JSON.stringify(part)}`);
  });
}

export function matchesSelector(obj: KubeObject, requirements: Requirement[]): boolean {
  const labels = obj.metadata.labels ?? {};
  return requirements.every((r) => r(labels));
}

/** RFC 6902 JSON Patch on a copy (add, replace, remove, test). */
export function applyJsonPatch(target: KubeObject, ops: unknown): KubeObject {
  if (!Array.isArray(ops)) throw badRequest('json patch body must be an array of operations');
  const doc = structuredClone(target);
  for (const raw of ops) {
    const op = asRecord(raw);
    const path = typeof op['path'] === 'string' ? op['path'] : '';
    const tokens = path
      .split('/')
      .slice(1)
      .map((t) => t.replace(/~1/g, '/').replace(/~0/g, '~'));
    const last = tokens.pop();
    if (last === undefined) throw badRequest(`invalid json patch path ${path}`);
    let parent: unknown = doc;
    for (const token of tokens) {
      parent = Array.isArray(parent)
        ? (parent as unknown[])[Number(token)]
        : asRecord(parent)[token];
      if (parent === null || typeof parent !== 'object')
        throw new KubeStatusError(422, 'Invalid', `doc is missing path: ${path}`);
    }
    if (Array.isArray(parent)) patchArray(parent, op, last, path);
    else patchObject(parent as Record<string, unknown>, op, last, path);
  }
  return doc;
}

function patchArray(parent: unknown[], op: Record<string, unknown>, last: string, path: string) {
  const index = last === '-' ? parent.length : Number(last);
  if (op['op'] === 'add') parent.splice(index, 0, op['value']);
  else if (op['op'] === 'replace') parent[index] = op['value'];
  else if (op['op'] === 'remove') parent.splice(index, 1);
  else if (op['op'] === 'test') testValue(parent[index], op['value'], path);
  else throw badRequest(`unsupported json patch operation ${String(op['op'])}`);
}

function patchObject(
  parent: Record<string, unknown>,
  op: Record<string, unknown>,
  last: string,
  path: string,
) {
  if (op['op'] === 'add') parent[last] = op['value'];
  else if (op['op'] === 'replace' || op['op'] === 'remove') {
    if (!(last in parent)) throw new KubeStatusError(422, 'Invalid', `doc is missing key: ${path}`);
    if (op['op'] === 'replace') parent[last] = op['value'];
    else delete parent[last];
  } else if (op['op'] === 'test') testValue(parent[last], op['value'], path);
  else throw badRequest(`unsupported json patch operation ${String(op['op'])}`);
}

function testValue(actual: unknown, expected: unknown, path: string) {
  if (JSON.stringify(actual) !== JSON.stringify(expected))
    throw new KubeStatusError(422, 'Invalid', `testing value ${path} failed`);
}

/** RFC 7386 JSON merge patch. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target && typeof target === 'object' && !Array.isArray(target)
      ? { ...(target as Record<string, unknown>) }
      : {};
  for (const [key, value] of Object.entries(patch as Record<string, unknown>)) {
    if (value === null) delete out[key];
    else out[key] = applyMergePatch(out[key], value);
  }
  return out;
}
