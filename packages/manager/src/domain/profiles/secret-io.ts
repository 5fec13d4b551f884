import { isServiceError, Redactor, ServiceError, toError } from '@svc/contracts';
import { registerSecret, secretValues } from '../../secrets/masks.js';
import type { SecretMeta, SecretStore, StoredSecret } from '../../secrets/store.js';
import type { Ctx } from '../context.js';
import { providerSecretName } from '../runs/run-policy.js';

/**
 * Reads and writes of a profile's Secret. Store failures become structured `infra-failed`
 * answers (the cause goes to the log, redacted); the store's own refusals (a name outside the
 * controlled prefix, a concurrent change) pass through as they are.
 */

/** kubectl apply copies the whole object, data included, into this annotation. */
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';
export const PROFILE_ANNOTATION = 'svc.v01/provider-profile';
const MANAGED_LABELS = {
  'app.kubernetes.io/managed-by': 'svc-run-manager',
  'app.kubernetes.io/component': 'provider-profile',
};

export async function readProfileSecret(
  ctx: Pick<Ctx, 'logger' | 'redactor'>,
  secrets: SecretStore,
  profile: string,
): Promise<StoredSecret | null> {
  const name = providerSecretName(profile);
  try {
    const secret = await secrets.get(name);
    registerSecret(ctx.redactor, name, secret?.data ?? null);
    return secret;
  } catch (error) {
    throw storeFailure(ctx, error, 'reading', name, 'secret-read-failed');
  }
}

/** Metadata only (names, keys, version): no values leave the store. */
export async function profileSecretMeta(
  ctx: Pick<Ctx, 'logger' | 'redactor'>,
  secrets: SecretStore,
  profile: string,
): Promise<SecretMeta | null> {
  const name = providerSecretName(profile);
  try {
    return await secrets.meta(name);
  } catch (error) {
    throw storeFailure(ctx, error, 'reading', name, 'secret-read-failed');
  }
}

/**
 * Replace the whole Secret, expecting the version that was read (a concurrent writer makes
 * this fail with state-conflict rather than be silently overwritten). Labels and annotations
 * are rebuilt: a last-applied annotation, or any label or annotation holding a value of the
 * old or new data, is dropped.
 */
export async function writeProfileSecret(
  ctx: Pick<Ctx, 'logger' | 'redactor'>,
  secrets: SecretStore,
  profile: string,
  data: Record<string, Buffer>,
  previous: StoredSecret | null,
): Promise<SecretMeta> {
  const name = providerSecretName(profile);
  const values = [...Object.values(data), ...Object.values(previous?.data ?? {})];
  let written: SecretMeta;
  try {
    written = await secrets.put(name, data, {
      labels: { ...scrub(previous?.labels ?? {}, values), ...MANAGED_LABELS },
      annotations: { ...scrub(previous?.annotations ?? {}, values), [PROFILE_ANNOTATION]: profile },
      expectedResourceVersion: previous?.resourceVersion ?? null,
    });
  } catch (error) {
    // Not registered (the write did not happen), but a store error quoting the data is masked.
    const unwritten = new Redactor().register('unwritten', secretValues(name, data));
    throw storeFailure(ctx, error, 'writing', name, 'secret-write-failed', unwritten);
  }
  // Masked from now on: the values are in force. The previous values are forgotten unless
  // another Secret holds them.
  registerSecret(ctx.redactor, name, data);
  return written;
}

export async function deleteProfileSecret(
  ctx: Pick<Ctx, 'logger' | 'redactor'>,
  secrets: SecretStore,
  profile: string,
): Promise<boolean> {
  const name = providerSecretName(profile);
  let removed: boolean;
  try {
    removed = await secrets.delete(name);
  } catch (error) {
    throw storeFailure(ctx, error, 'deleting', name, 'secret-delete-failed');
  }
  registerSecret(ctx.redactor, name, null);
  return removed;
}

function scrub(entries: Record<string, string>, values: readonly Buffer[]): Record<string, string> {
  const needles = values
    .flatMap((v) => [v.toString('utf8').trim(), v.toString('base64')])
    .filter((n) => n.length >= 6);
  return Object.fromEntries(
    Object.entries(entries).filter(
      ([key, value]) => key !== LAST_APPLIED && !needles.some((n) => value.includes(n)),
    ),
  );
}

function storeFailure(
  ctx: Pick<Ctx, 'logger' | 'redactor'>,
  error: unknown,
  doing: string,
  name: string,
  reason: string,
  unwritten?: Redactor,
): ServiceError {
  // The store's refusals (a foreign name, a concurrent change) are answers as they are.
  if (isServiceError(error) && error.failureKind !== 'infra-failed') return error;
  const message = ctx.redactor.redact(toError(error).message);
  const cause = unwritten ? unwritten.redact(message) : message;
  ctx.logger.error({ secretName: name, err: cause }, `${doing} a provider Secret failed`);
  return new ServiceError('infra-failed', `${doing} Secret ${name} failed`, {
    reason,
    secretName: name,
    ...(isServiceError(error) && error.details ? { store: { ...error.details } } : {}),
  });
}
