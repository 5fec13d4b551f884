import { parse, stringify, TomlError } from 'smol-toml';
import { ServiceError } from '@svc/contracts';
import type { ProfileSettings } from '../../config.js';
import {
  applyProfileRules,
  asTable,
  BUILTIN_D_AUTO_COMPACT_LIMIT,
  BUILTIN_D_CONTEXT_WINDOW,
  CATALOG_FILE,
  checkBaseUrl,
  flashModel,
  type Toml,
} from './rules.js';

/**
 * config.toml of a profile: parsed and re-rendered with smol-toml so what is stored is always
 * valid TOML the agent reads, and built from `{model, baseUrl}` for a credential write.
 */

const PROVIDER_ID = /^[A-Za-z0-9_-]{1,64}$/;
const DEFAULT_PROVIDER_ID = 'svc';

/** Parse config text. The parser's message quotes the offending line, so only its position is told. */
export function parseConfigToml(text: string, what: string): Toml {
  try {
    return parse(text);
  } catch (error) {
    const at = error instanceof TomlError ? ` (line ${error.line}, column ${error.column})` : '';
    throw new ServiceError('schema-invalid', `${what} is not valid TOML${at}`, {
      reason: 'config-parse-failed',
    });
  }
}

export function renderConfigToml(doc: Toml): string {
  try {
    return `${stringify(doc)}\n`;
  } catch {
    throw new ServiceError('schema-invalid', 'config.toml could not be rendered as TOML', {
      reason: 'config-render-failed',
    });
  }
}

export interface CredentialConfigInput {
  model?: string;
  baseUrl?: string;
}

/**
 * The config of a credential write: the existing config's other keys are kept; the selected
 * provider becomes a custom provider table (the agent's built-in one first tries a WebSocket)
 * that reads the key from auth.json.
 */
export function credentialConfig(
  profile: string,
  existing: Toml | null,
  input: CredentialConfigInput,
  settings: ProfileSettings,
): Toml {
  const doc: Toml = existing ? structuredClone(existing) : {};
  const current = doc['model_provider'];
  const providerId =
    typeof current === 'string' && current !== 'openai' && PROVIDER_ID.test(current)
      ? current
      : DEFAULT_PROVIDER_ID;
  const providers = table(doc, 'model_providers');
  const provider = table(providers, providerId);

  if (profile === 'builtin-d') {
    const model = flashModel(settings);
    if (input.model !== undefined && input.model !== model) {
      throw new ServiceError(
        'schema-invalid',
        `builtin-d runs only the model ${model}; it is never overridden`,
        { field: 'config.model' },
      );
    }
    doc['model'] = model;
  } else {
    const model = input.model ?? (typeof doc['model'] === 'string' ? doc['model'] : undefined);
    if (!model) {
      throw new ServiceError(
        'schema-invalid',
        `config.model is required: profile ${profile} has no model yet`,
        { field: 'config.model' },
      );
    }
    doc['model'] = model;
  }

  const existingUrl = typeof provider['base_url'] === 'string' ? provider['base_url'] : undefined;
  const pinned = profile === 'builtin-b' || profile === 'builtin-d';
  const baseUrl =
    input.baseUrl ?? existingUrl ?? (pinned ? (settings.bridgeBaseUrl ?? undefined) : undefined);
  if (!baseUrl) {
    throw new ServiceError(
      'schema-invalid',
      `config.baseUrl is required: profile ${profile} has no provider base URL yet`,
      { field: 'config.baseUrl' },
    );
  }
  const field =
    input.baseUrl !== undefined ? 'config.baseUrl' : `model_providers.${providerId}.base_url`;
  provider['base_url'] = checkBaseUrl(profile, baseUrl, settings, field);
  provider['name'] = typeof provider['name'] === 'string' ? provider['name'] : providerId;
  provider['wire_api'] = 'responses';
  provider['requires_openai_auth'] = true;
  // The key now comes from auth.json: an env_key would make the agent look elsewhere.
  delete provider['env_key'];
  delete provider['experimental_bearer_token'];
  doc['model_provider'] = providerId;

  if (profile === 'builtin-d') {
    doc['model_context_window'] = BUILTIN_D_CONTEXT_WINDOW;
    doc['model_auto_compact_token_limit'] = BUILTIN_D_AUTO_COMPACT_LIMIT;
    doc['model_catalog_json'] = CATALOG_FILE;
  }
  return applyProfileRules(profile, doc, settings);
}

function table(doc: Toml, key: string): Toml {
  const existing = asTable(doc[key]);
  if (existing) return existing;
  const created: Toml = {};
  doc[key] = created;
  return created;
}
