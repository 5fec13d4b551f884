import {
  REDACTED,
  SECRET_NAMESPACE,
  ServiceError,
  type ProfileConfig,
  type ProfileConfigPutBody,
  type ProfileWriteResponse,
} from '@svc/contracts';
import type { SecretStore } from '../../secrets/store.js';
import type { Ctx } from '../context.js';
import { providerSecretName, secretRefRecord } from '../runs/run-policy.js';
import { audited, writeEntry } from './audit.js';
import { parseConfigToml, renderConfigToml } from './config-toml.js';
import { hashSalt, secretSuffixes } from './hashing.js';
import {
  applyProfileRules,
  asTable,
  assertExpectedSecretRef,
  assertManageableProfile,
  inlineCredentialFields,
  type Toml,
} from './rules.js';
import { readProfileSecret } from './secret-io.js';
import { requiredProfileKeys } from './status.js';
import { catalogFor, rewriteSecret, writeResponse } from './writes.js';

/**
 * GET and PUT …/config. GET is the only response that carries config text; a credential-like
 * value found in a config written by other means is shown as `[redacted]`. PUT replaces only
 * config.toml (parsed, checked against the profile's rules, re-rendered) and keeps auth.json.
 */

export async function getProfileConfig(
  ctx: Ctx,
  secrets: SecretStore,
  profile: string,
): Promise<ProfileConfig> {
  assertManageableProfile(profile);
  const name = providerSecretName(profile);
  const secret = await readProfileSecret(ctx, secrets, profile);
  const stored = secret?.data['config.toml'];
  if (!secret || !stored) {
    throw new ServiceError(
      'secret-unavailable',
      secret ? `Secret ${name} holds no config.toml` : `Secret ${name} does not exist`,
      { profile, secretName: name },
    );
  }
  const { text, redactedFields } = showable(stored.toString('utf8'));
  const suffixes = secretSuffixes(await hashSalt(ctx.db), secret.data);
  return {
    profile,
    configToml: ctx.redactor.redact(text),
    secretRef: secretRefRecord(SECRET_NAMESPACE, name, requiredProfileKeys(profile)),
    resourceVersion: secret.resourceVersion,
    credentialHashSuffix: suffixes.credentialHashSuffix,
    configHashSuffix: suffixes.configHashSuffix ?? '',
    catalogHashSuffix: suffixes.catalogHashSuffix,
    updatedAt: secret.updatedAt,
    redactedFields,
  };
}

/** The stored text as is, unless it holds inline credentials: then those values are masked. */
function showable(text: string): { text: string; redactedFields: string[] } {
  let doc: Toml;
  try {
    doc = parseConfigToml(text, 'the stored config.toml');
  } catch {
    return { text, redactedFields: [] };
  }
  const fields = inlineCredentialFields(doc);
  if (fields.length === 0) return { text, redactedFields: [] };
  for (const path of fields) {
    const parts = path.split('.');
    const key = parts.pop()!;
    let table: Toml | null = doc;
    for (const part of parts) table = asTable(table?.[part]);
    if (table) table[key] = REDACTED;
  }
  return { text: renderConfigToml(doc), redactedFields: fields };
}

export async function putProfileConfig(
  ctx: Ctx,
  secrets: SecretStore,
  profile: string,
  body: ProfileConfigPutBody,
  traceId: string,
): Promise<ProfileWriteResponse> {
  return audited(
    ctx,
    writeEntry(profile, 'config-put', traceId, body),
    async () => {
      assertManageableProfile(profile);
      assertExpectedSecretRef(profile, body.secretRef);
      const parsed = parseConfigToml(body.configToml, 'configToml');
      const inline = inlineCredentialFields(parsed);
      if (inline.length > 0) {
        // GET …/config prints config text: a credential there would be printed too.
        throw new ServiceError(
          'schema-invalid',
          `config.toml must not hold credentials (${inline.join(', ')}); the API key goes to auth.json through PUT …/credential`,
          { fields: inline.map((f) => `configToml.${f}`) },
        );
      }
      const doc = applyProfileRules(profile, parsed, ctx.config.profiles);
      const configToml = Buffer.from(renderConfigToml(doc));
      const written = await rewriteSecret(
        ctx,
        secrets,
        profile,
        (current) => ({
          ...current?.data,
          'config.toml': configToml,
          ...catalogFor(profile, doc, current),
        }),
        body.resourceVersion,
      );
      return writeResponse(ctx, profile, written, body.bridgeSyncDone);
    },
    (response) => ({
      resourceVersion: response.resourceVersion,
      credentialHashSuffix: response.credentialHashSuffix,
      configHashSuffix: response.configHashSuffix,
    }),
  );
}
