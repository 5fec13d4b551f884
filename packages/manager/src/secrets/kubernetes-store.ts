import type { CoreV1Api, V1Secret } from '@kubernetes/client-node';
import { SECRET_NAMESPACE, ServiceError } from '@svc/contracts';
import { isStatus, kubeFailure } from '../launcher/kube-api.js';
import { LABELS, MANAGER_NAME } from '../launcher/kube-labels.js';
import {
  assertControlledName,
  assertSecretKeys,
  type PutOptions,
  type SecretMeta,
  type SecretStore,
  type StoredSecret,
} from './store.js';

/** Written by `kubectl apply`: it would hold the whole Secret, data included. */
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
const UPDATED_AT = 'svc.dev/updated-at';
/** Labels and annotations this store owns; callers see only their own. */
const OWN_LABELS = [LABELS.managed, LABELS.managedBy];
const OWN_ANNOTATIONS = [UPDATED_AT, LAST_APPLIED];
const WRITE_ATTEMPTS = 3;

export interface KubernetesSecretStoreOptions {
  core: CoreV1Api;
  /** Always svc-v01 in a deployment (spec/2); a parameter for tests only. */
  namespace?: string;
}

/**
 * Controlled Secrets as Kubernetes Secrets in namespace svc-v01. Every write replaces the
 * whole object through the API (create or update, never apply), so no last-applied
 * annotation can carry data; the store labels what it writes `svc.dev/managed=true` and lists
 * only those. Names outside the controlled prefixes are refused before any API call.
 */
export class KubernetesSecretStore implements SecretStore {
  readonly kind = 'kubernetes' as const;
  readonly #core: CoreV1Api;
  readonly #namespace: string;

  constructor(options: KubernetesSecretStoreOptions) {
    this.#core = options.core;
    this.#namespace = options.namespace ?? SECRET_NAMESPACE;
  }

  async get(name: string): Promise<StoredSecret | null> {
    assertControlledName(name);
    const secret = await this.#read(name);
    if (!secret) return null;
    const data: Record<string, Buffer> = {};
    for (const [key, value] of Object.entries(secret.data ?? {}))
      data[key] = Buffer.from(value, 'base64');
    return { ...this.#meta(secret), data };
  }

  /** One read by name instead of a list of every managed Secret (with all their data). */
  async meta(name: string): Promise<SecretMeta | null> {
    assertControlledName(name);
    const secret = await this.#read(name);
    // As `list` sees it: a Secret of that name the manager does not manage is not one of its own.
    if (secret?.metadata?.labels?.[LABELS.managed] !== 'true') return null;
    return this.#meta(secret);
  }

  async list(prefix: string): Promise<SecretMeta[]> {
    let items: V1Secret[];
    try {
      const list = await this.#core.listNamespacedSecret({
        namespace: this.#namespace,
        labelSelector: `${LABELS.managed}=true`,
      });
      items = list.items;
    } catch (error) {
      throw kubeFailure(error, 'list Secrets');
    }
    return items
      .filter((s) => {
        const name = s.metadata?.name ?? '';
        return name.startsWith(prefix) && isControlled(name);
      })
      .map((s) => this.#meta(s))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  async put(
    name: string,
    data: Record<string, Buffer>,
    options: PutOptions = {},
  ): Promise<SecretMeta> {
    assertControlledName(name);
    assertSecretKeys(data);
    checkAnnotations(options.annotations ?? {}, data);
    const expected = options.expectedResourceVersion;
    for (let attempt = 0; attempt < WRITE_ATTEMPTS; attempt++) {
      const current = await this.#read(name);
      const version = current?.metadata?.resourceVersion ?? null;
      if (expected !== undefined && version !== expected) throw changed(name);
      const body = this.#body(name, data, options, current);
      try {
        const written = current
          ? await this.#core.replaceNamespacedSecret({
              name,
              namespace: this.#namespace,
              body: { ...body, metadata: { ...body.metadata, resourceVersion: version! } },
            })
          : await this.#core.createNamespacedSecret({ namespace: this.#namespace, body });
        return this.#meta(written);
      } catch (error) {
        // Someone wrote (or deleted) it between our read and our write.
        const raced = isStatus(error, 409) || (current !== null && isStatus(error, 404));
        if (!raced) throw kubeFailure(error, `write Secret ${name}`);
        if (expected !== undefined) throw changed(name);
      }
    }
    throw changed(name);
  }

  async delete(name: string): Promise<boolean> {
    assertControlledName(name);
    try {
      await this.#core.deleteNamespacedSecret({ name, namespace: this.#namespace });
      return true;
    } catch (error) {
      if (isStatus(error, 404)) return false;
      throw kubeFailure(error, `delete Secret ${name}`);
    }
  }

  async #read(name: string): Promise<V1Secret | null> {
    try {
      return await this.#core.readNamespacedSecret({ name, namespace: this.#namespace });
    } catch (error) {
      if (isStatus(error, 404)) return null;
      throw kubeFailure(error, `read Secret ${name}`);
    }
  }

  /** The whole object as written: labels and annotations kept unless the caller gives new. */
  #body(
    name: string,
    data: Record<string, Buffer>,
    options: PutOptions,
    current: V1Secret | null,
  ): V1Secret {
    const labels = options.labels ?? without(current?.metadata?.labels, OWN_LABELS);
    const annotations =
      options.annotations ?? without(current?.metadata?.annotations, OWN_ANNOTATIONS);
    return {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        name,
        namespace: this.#namespace,
        labels: { ...labels, [LABELS.managed]: 'true', [LABELS.managedBy]: MANAGER_NAME },
        annotations: { ...annotations, [UPDATED_AT]: new Date().toISOString() },
      },
      type: current?.type ?? 'Opaque',
      data: Object.fromEntries(
        Object.entries(data).map(([key, value]) => [key, value.toString('base64')]),
      ),
    };
  }

  #meta(secret: V1Secret): SecretMeta {
    const annotations = secret.metadata?.annotations ?? {};
    return {
      name: secret.metadata?.name ?? '',
      namespace: secret.metadata?.namespace ?? this.#namespace,
      keys: Object.keys(secret.data ?? {}).sort(),
      resourceVersion: secret.metadata?.resourceVersion ?? '',
      labels: without(secret.metadata?.labels, OWN_LABELS),
      annotations: without(annotations, OWN_ANNOTATIONS),
      updatedAt:
        annotations[UPDATED_AT] ?? secret.metadata?.creationTimestamp?.toISOString() ?? null,
    };
  }
}

function isControlled(name: string): boolean {
  try {
    assertControlledName(name);
    return true;
  } catch {
    return false;
  }
}

const changed = (name: string) =>
  new ServiceError('state-conflict', `Secret ${name} changed meanwhile; read it again`, { name });

function without(
  record: Record<string, string> | undefined,
  keys: readonly string[],
): Record<string, string> {
  return Object.fromEntries(Object.entries(record ?? {}).filter(([k]) => !keys.includes(k)));
}

/** Annotations are metadata anyone with `get` sees in clear: no value may ride in one. */
function checkAnnotations(annotations: Record<string, string>, data: Record<string, Buffer>) {
  if (LAST_APPLIED in annotations)
    throw new ServiceError('schema-invalid', `annotation ${LAST_APPLIED} is never written`);
  const values = Object.values(data)
    .flatMap((v) => [v.toString('utf8').trim(), v.toString('base64')])
    .filter((v) => v.length >= 6);
  for (const [key, text] of Object.entries(annotations)) {
    if (values.some((v) => text.includes(v)))
      throw new ServiceError('schema-invalid', `annotation ${key} would hold Secret data`, {
        annotation: key,
      });
  }
}
