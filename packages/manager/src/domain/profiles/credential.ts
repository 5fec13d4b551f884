import { Redactor, type CredentialPutBody, type ProfileWriteResponse } from '@svc/contracts';
import type { SecretStore } from '../../secrets/store.js';
import type { Ctx } from '../context.js';
import { audited, writeEntry } from './audit.js';
import { credentialConfig, parseConfigToml, renderConfigToml } from './config-toml.js';
import { assertExpectedSecretRef, assertManageableProfile } from './rules.js';
import { catalogFor, rewriteSecret, writeResponse } from './writes.js';

/**
 * PUT …/credential (spec/2 rules 1-4): the API key becomes auth.json inside this request and
 * goes nowhere else. It is registered for masking once the Secret write succeeded (a refused
 * write registers nothing). The other fields of this request are masked of the key here, so a
 * reason or config quoting it is stored as `[redacted]` even when the write is refused.
 */
export async function putCredential(
  ctx: Ctx,
  secrets: SecretStore,
  profile: string,
  body: CredentialPutBody,
  traceId: string,
): Promise<ProfileWriteResponse> {
  const { apiKey, ...rest } = body;
  body = { ...new Redactor().add(apiKey).redactDeep(rest), apiKey };
  const authJson = Buffer.from(
    `${JSON.stringify({ OPENAI_API_KEY: body.apiKey, auth_mode: 'apikey' })}\n`,
  );
  return audited(
    ctx,
    writeEntry(profile, 'credential-put', traceId, body),
    async () => {
      assertManageableProfile(profile);
      assertExpectedSecretRef(profile, body.secretRef);
      const written = await rewriteSecret(ctx, secrets, profile, (current) => {
        const stored = current?.data['config.toml'];
        const existing = stored
          ? parseConfigToml(stored.toString('utf8'), 'the stored config.toml')
          : null;
        const doc = credentialConfig(profile, existing, body.config ?? {}, ctx.config.profiles);
        return {
          // Keys the manager does not own are kept as they are.
          ...current?.data,
          'auth.json': authJson,
          'config.toml': Buffer.from(renderConfigToml(doc)),
          ...catalogFor(profile, doc, current),
        };
      });
      return writeResponse(ctx, profile, written, body.bridgeSyncDone);
    },
    (response) => ({
      resourceVersion: response.resourceVersion,
      credentialHashSuffix: response.credentialHashSuffix,
      configHashSuffix: response.configHashSuffix,
    }),
  );
}
