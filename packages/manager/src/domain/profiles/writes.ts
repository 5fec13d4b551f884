import {
  isServiceError,
  SECRET_NAMESPACE,
  ServiceError,
  type ProfileWriteResponse,
} from '@svc/contracts';
import type { SecretMeta, SecretStore, StoredSecret } from '../../secrets/store.js';
import type { Ctx } from '../context.js';
import { providerSecretName, secretRefRecord } from '../runs/run-policy.js';
import { ensureCatalog } from './catalog.js';
import { hashSalt, secretSuffixes } from './hashing.js';
import { BUILTIN_D_AUTO_COMPACT_LIMIT, type Toml } from './rules.js';
import { readProfileSecret, writeProfileSecret } from './secret-io.js';
import { missingKeys, requiredProfileKeys } from './status.js';

/**
 * The read-modify-write cycle shared by credential and config writes: read the Secret, build
 * the new data from it, write it expecting the version read. A concurrent writer makes the
 * write fail; it is retried on fresh data unless the caller pinned a version.
 */

const ATTEMPTS = 3;

export interface Rewritten {
  meta: SecretMeta;
  data: Record<string, Buffer>;
  created: boolean;
}

export async function rewriteSecret(
  ctx: Ctx,
  secrets: SecretStore,
  profile: string,
  build: (current: StoredSecret | null) => Record<string, Buffer>,
  pinnedVersion?: string,
): Promise<Rewritten> {
  for (let attempt = 1; ; attempt++) {
    const current = await readProfileSecret(ctx, secrets, profile);
    if (pinnedVersion !== undefined && current?.resourceVersion !== pinnedVersion) {
      throw new ServiceError(
        'state-conflict',
        `Secret ${providerSecretName(profile)} is at another resourceVersion than the one given; read it again`,
        { currentResourceVersion: current?.resourceVersion ?? null },
      );
    }
    const data = build(current);
    try {
      const meta = await writeProfileSecret(ctx, secrets, profile, data, current);
      return { meta, data, created: current === null };
    } catch (error) {
      const raced = isServiceError(error) && error.failureKind === 'state-conflict';
      if (!raced || pinnedVersion !== undefined || attempt >= ATTEMPTS) throw error;
    }
  }
}

/** builtin-d keeps a catalog whose context window equals the config's. */
export function catalogFor(
  profile: string,
  doc: Toml,
  current: StoredSecret | null,
): Record<string, Buffer> {
  if (profile !== 'builtin-d') return {};
  const contextWindow = Number(doc['model_context_window']);
  return {
    'model-catalog.json': ensureCatalog(current?.data['model-catalog.json'], {
      model: String(doc['model']),
      contextWindow,
      autoCompactTokenLimit: Number(
        doc['model_auto_compact_token_limit'] ?? BUILTIN_D_AUTO_COMPACT_LIMIT,
      ),
    }),
  };
}

export async function writeResponse(
  ctx: Ctx,
  profile: string,
  written: Rewritten,
  bridgeSyncDone: boolean | undefined,
): Promise<ProfileWriteResponse> {
  const salt = await hashSalt(ctx.db);
  return {
    profile,
    configured: missingKeys(profile, written.meta).length === 0,
    created: written.created,
    secretRef: secretRefRecord(
      SECRET_NAMESPACE,
      providerSecretName(profile),
      requiredProfileKeys(profile),
    ),
    resourceVersion: written.meta.resourceVersion,
    ...secretSuffixes(salt, written.data),
    updatedAt: written.meta.updatedAt,
    // The bridge holds its own upstream credential: it must follow unless the caller says it has.
    ...(profile === 'builtin-b' ? { requiresExternalBridgeUpdate: bridgeSyncDone !== true } : {}),
    valuesPrinted: false,
  };
}
