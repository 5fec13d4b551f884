import {
  chmod,
  mkdir,
  readdir,
  readFile,
  readlink,
  rename,
  rm,
  symlink,
  writeFile,
} from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { SECRET_NAMESPACE, ServiceError } from '@svc/contracts';
import {
  assertControlledName,
  assertSecretKeys,
  type PutOptions,
  type SecretMeta,
  type SecretStore,
  type StoredSecret,
} from './store.js';

interface MetaFile {
  resourceVersion: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
  updatedAt: string;
  keys: string[];
}

/**
 * Local Secret store: `<root>/<name>/current -> rev-<n>/` where each key is a file of mode
 * 0600. A write builds a complete new revision and swaps the `current` symlink with a rename,
 * the way kubelet updates projected Secrets, so a reader never sees half a Secret.
 */
export class LocalSecretStore implements SecretStore {
  readonly kind = 'local' as const;
  #queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly root: string) {}

  async get(name: string): Promise<StoredSecret | null> {
    assertControlledName(name);
    const meta = await this.#meta(name);
    if (!meta) return null;
    const dir = join(this.root, name, 'current');
    const data: Record<string, Buffer> = {};
    for (const key of meta.keys) data[key] = await readFile(join(dir, key));
    return { ...this.#toMeta(name, meta), data };
  }

  async meta(name: string): Promise<SecretMeta | null> {
    assertControlledName(name);
    const meta = await this.#meta(name);
    return meta ? this.#toMeta(name, meta) : null;
  }

  async list(prefix: string): Promise<SecretMeta[]> {
    let names: string[];
    try {
      names = await readdir(this.root);
    } catch {
      return [];
    }
    const out: SecretMeta[] = [];
    for (const name of names.filter((n) => n.startsWith(prefix)).sort()) {
      const meta = await this.#meta(name);
      if (meta) out.push(this.#toMeta(name, meta));
    }
    return out;
  }

  put(name: string, data: Record<string, Buffer>, options: PutOptions = {}): Promise<SecretMeta> {
    assertControlledName(name);
    assertSecretKeys(data);
    // Writes of this process are serialized; revisions are numbered from the previous one.
    const run = this.#queue.then(() => this.#put(name, data, options));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #put(name: string, data: Record<string, Buffer>, options: PutOptions): Promise<SecretMeta> {
    const previous = await this.#meta(name);
    if (
      options.expectedResourceVersion !== undefined &&
      (previous?.resourceVersion ?? null) !== options.expectedResourceVersion
    ) {
      throw new ServiceError('state-conflict', `Secret ${name} changed meanwhile; read it again`, {
        name,
      });
    }
    const base = join(this.root, name);
    await mkdir(base, { recursive: true, mode: 0o700 });
    const revision = String(Number(previous?.resourceVersion ?? '0') + 1);
    const revDir = join(base, `rev-${revision}-${randomBytes(4).toString('hex')}`);
    await mkdir(revDir, { mode: 0o700 });
    for (const [key, value] of Object.entries(data)) {
      const file = join(revDir, key);
      await writeFile(file, value, { mode: 0o600 });
      await chmod(file, 0o600);
    }
    const meta: MetaFile = {
      resourceVersion: revision,
      labels: options.labels ?? previous?.labels ?? {},
      annotations: options.annotations ?? previous?.annotations ?? {},
      updatedAt: new Date().toISOString(),
      keys: Object.keys(data).sort(),
    };
    await writeFile(join(revDir, '..meta.json'), JSON.stringify(meta), { mode: 0o600 });
    const oldTarget = await readlink(join(base, 'current')).catch(() => null);
    const tmpLink = join(base, `.current-${randomBytes(4).toString('hex')}`);
    await symlink(revDir.slice(base.length + 1), tmpLink);
    await rename(tmpLink, join(base, 'current'));
    if (oldTarget) await rm(join(base, oldTarget), { recursive: true, force: true });
    return this.#toMeta(name, meta);
  }

  async delete(name: string): Promise<boolean> {
    assertControlledName(name);
    const existed = (await this.#meta(name)) !== null;
    await rm(join(this.root, name), { recursive: true, force: true });
    return existed;
  }

  async #meta(name: string): Promise<MetaFile | null> {
    try {
      return JSON.parse(
        await readFile(join(this.root, name, 'current', '..meta.json'), 'utf8'),
      ) as MetaFile;
    } catch {
      return null;
    }
  }

  #toMeta(name: string, meta: MetaFile): SecretMeta {
    return {
      name,
      namespace: SECRET_NAMESPACE,
      keys: meta.keys,
      resourceVersion: meta.resourceVersion,
      labels: meta.labels,
      annotations: meta.annotations,
      updatedAt: meta.updatedAt,
    };
  }
}
