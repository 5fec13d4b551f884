import {
  PROFILE_SLUG_PATTERN,
  PROVIDER_SECRET_PREFIX,
  ServiceError,
  TOOL_SECRET_PREFIX,
} from '@svc/contracts';

/**
 * Secrets the manager controls: provider profiles (`svc-v01-provider-<profile>`) and tool
 * credentials (`svc-v01-tool-<name>`), in namespace svc-v01. Two implementations share this
 * interface and one contract test: a local directory store and Kubernetes Secrets.
 * Values are Buffers and never leave this layer except into a runner's agent home.
 */
export interface SecretMeta {
  name: string;
  namespace: string;
  keys: string[];
  resourceVersion: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  updatedAt: string | null;
}

export interface StoredSecret extends SecretMeta {
  data: Record<string, Buffer>;
}

export interface PutOptions {
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  /** Optimistic concurrency: fail with state-conflict if the Secret changed meanwhile. */
  expectedResourceVersion?: string | null;
}

export interface SecretStore {
  readonly kind: 'local' | 'kubernetes';
  get(name: string): Promise<StoredSecret | null>;
  /** Metadata of one controlled Secret (as `list` would show it), or null: no data is read. */
  meta(name: string): Promise<SecretMeta | null>;
  /** Metadata of the controlled Secrets whose names start with `prefix`. */
  list(prefix: string): Promise<SecretMeta[]>;
  /** Create or replace the whole Secret. */
  put(name: string, data: Record<string, Buffer>, options?: PutOptions): Promise<SecretMeta>;
  /** True when it existed. */
  delete(name: string): Promise<boolean>;
}

const SLUG = new RegExp(PROFILE_SLUG_PATTERN);
const KEY = /^[-._a-zA-Z0-9]{1,253}$/;

/** Refuse any name the manager is not allowed to touch (spec/2 provider profile rule 9). */
export function assertControlledName(name: string): void {
  const prefix = [PROVIDER_SECRET_PREFIX, TOOL_SECRET_PREFIX].find((p) => name.startsWith(p));
  if (!prefix || !SLUG.test(name.slice(prefix.length)) || name.length > 253) {
    throw new ServiceError(
      'tenant-policy-denied',
      `the manager only touches Secrets named ${PROVIDER_SECRET_PREFIX}<slug> or ${TOOL_SECRET_PREFIX}<slug>`,
      { name },
    );
  }
}

export function assertSecretKeys(data: Record<string, Buffer>): void {
  for (const key of Object.keys(data)) {
    if (!KEY.test(key) || key === '.' || key === '..')
      throw new ServiceError('schema-invalid', `invalid Secret key ${JSON.stringify(key)}`);
  }
}
