import { parse, stringify } from 'smol-toml';
import { AgentError } from './errors.js';
import type { ApprovalPolicy, SandboxMode } from './protocol.js';

/**
 * The agent's `config.toml` for a runner. Two pure functions: render a whole config from typed
 * options (tests, the validation canary), and merge the runner's required settings into a
 * provider profile's config written by an operator (keeping its model, provider and base URL).
 *
 * Runner-required settings make the agent headless, offline apart from the provider, and
 * bounded: no approvals to wait for, no plugin sync or update check, no analytics, no endless
 * reconnects, the workspace pre-trusted (otherwise thread/start rewrites config.toml).
 */

export interface RunnerSettings {
  /** Default `never`: nobody is there to approve. */
  approvalPolicy?: ApprovalPolicy;
  /** Default `workspace-write`. */
  sandboxMode?: SandboxMode;
  /** Network for sandboxed commands (`workspace-write` only; default off). */
  networkAccess?: boolean;
  /** Directories trusted as projects (the workspace cwd). */
  trustedProjects: readonly string[];
  /** Retries of a failed provider request (default 1). */
  requestMaxRetries?: number;
  /** Reconnects of a dropped response stream (default 1). */
  streamMaxRetries?: number;
  /** Silence on a response stream before the agent gives up on it (default 300 000 ms). */
  streamIdleTimeoutMs?: number;
  modelCatalogJson?: string;
  modelContextWindow?: number;
  modelAutoCompactTokenLimit?: number;
}

export type ProviderAuth =
  /** The key comes from this environment variable of the agent process. */
  | { envKey: string }
  /** The key comes from `auth.json` in the agent home (`renderAuthJson`). */
  | { openaiAuth: true };

export interface ProviderSettings {
  /** Table name under `model_providers` (default `svc`). */
  id?: string;
  /** Display name (default: the id). The name "OpenAI" enables remote compaction. */
  name?: string;
  /** Ends in `/v1`: requests go to `<baseUrl>/responses`. */
  baseUrl: string;
  auth: ProviderAuth;
  httpHeaders?: Readonly<Record<string, string>>;
}

export interface RunnerConfigOptions extends RunnerSettings {
  model: string;
  provider: ProviderSettings;
}

export const RUNNER_DEFAULTS = {
  approvalPolicy: 'never',
  sandboxMode: 'workspace-write',
  requestMaxRetries: 1,
  streamMaxRetries: 1,
  streamIdleTimeoutMs: 300_000,
} as const;

type Table = Record<string, unknown>;

export function renderRunnerConfig(options: RunnerConfigOptions): string {
  const id = options.provider.id ?? 'svc';
  assertKey(id, 'provider id');
  if (!/^https?:\/\//.test(options.provider.baseUrl))
    throw new AgentError('invalid-config', 'provider base URL must be http(s)');
  const provider: Table = {
    name: options.provider.name ?? id,
    base_url: options.provider.baseUrl,
    wire_api: 'responses',
  };
  if ('envKey' in options.provider.auth) {
    assertKey(options.provider.auth.envKey, 'env_key');
    provider['env_key'] = options.provider.auth.envKey;
  } else {
    provider['requires_openai_auth'] = true;
  }
  if (options.provider.httpHeaders) provider['http_headers'] = { ...options.provider.httpHeaders };
  const doc: Table = {
    model: options.model,
    model_provider: id,
    model_providers: { [id]: provider },
  };
  return toToml(applyRunnerSettings(doc, id, options, []));
}

export interface MergeResult {
  toml: string;
  /** The provider the profile selects (`model_provider`, default `openai`). */
  providerId: string;
  model: string | null;
  /** What could not be applied, for a diagnostic event (no values). */
  warnings: string[];
  /** Secret values found in the profile config, for the caller's redactor. */
  secretValues: string[];
}

/** Merge the runner's required settings into a profile's config.toml. */
export function mergeRunnerConfig(profileToml: string, settings: RunnerSettings): MergeResult {
  let doc: Table;
  try {
    doc = parse(profileToml);
  } catch (error) {
    // The parser's message quotes the offending line, which may hold a secret: not echoed.
    throw new AgentError('invalid-config', 'profile config.toml is not valid TOML', {
      cause: error,
    });
  }
  const providerId = typeof doc['model_provider'] === 'string' ? doc['model_provider'] : 'openai';
  const warnings: string[] = [];
  const merged = applyRunnerSettings(doc, providerId, settings, warnings);
  return {
    toml: toToml(merged),
    providerId,
    model: typeof doc['model'] === 'string' ? doc['model'] : null,
    warnings,
    secretValues: secretValuesOf(doc),
  };
}

/** `auth.json` for `requires_openai_auth` providers: the key as an API-key login. */
export function renderAuthJson(apiKey: string): string {
  return `${JSON.stringify({ OPENAI_API_KEY: apiKey, auth_mode: 'apikey' })}\n`;
}

function applyRunnerSettings(
  source: Table,
  providerId: string,
  settings: RunnerSettings,
  warnings: string[],
): Table {
  const doc = structuredClone(source);
  const sandboxMode = settings.sandboxMode ?? RUNNER_DEFAULTS.sandboxMode;
  doc['approval_policy'] = settings.approvalPolicy ?? RUNNER_DEFAULTS.approvalPolicy;
  doc['sandbox_mode'] = sandboxMode;
  if (sandboxMode === 'workspace-write') {
    table(doc, 'sandbox_workspace_write')['network_access'] = settings.networkAccess ?? false;
  }
  doc['web_search'] = 'disabled';
  doc['check_for_update_on_startup'] = false;
  const features = table(doc, 'features');
  // Plugins sync contacts remote services at start; unbounded retries never give up on a
  // refused provider connection.
  features['plugins'] = false;
  features['unbounded_connection_retries'] = false;
  table(doc, 'analytics')['enabled'] = false;
  const projects = table(doc, 'projects');
  for (const dir of settings.trustedProjects) {
    if (!dir.startsWith('/'))
      throw new AgentError('invalid-config', 'trusted project must be absolute');
    projects[dir] = { ...(projects[dir] as Table | undefined), trust_level: 'trusted' };
  }
  if (settings.modelCatalogJson !== undefined)
    doc['model_catalog_json'] = settings.modelCatalogJson;
  if (settings.modelContextWindow !== undefined)
    doc['model_context_window'] = positiveInt(settings.modelContextWindow, 'model_context_window');
  if (settings.modelAutoCompactTokenLimit !== undefined)
    doc['model_auto_compact_token_limit'] = positiveInt(
      settings.modelAutoCompactTokenLimit,
      'model_auto_compact_token_limit',
    );
  const provider = (doc['model_providers'] as Table | undefined)?.[providerId];
  if (provider && typeof provider === 'object') {
    const p = provider as Table;
    p['request_max_retries'] = nonNegativeInt(
      settings.requestMaxRetries ?? RUNNER_DEFAULTS.requestMaxRetries,
      'request_max_retries',
    );
    p['stream_max_retries'] = nonNegativeInt(
      settings.streamMaxRetries ?? RUNNER_DEFAULTS.streamMaxRetries,
      'stream_max_retries',
    );
    p['stream_idle_timeout_ms'] = positiveInt(
      settings.streamIdleTimeoutMs ?? RUNNER_DEFAULTS.streamIdleTimeoutMs,
      'stream_idle_timeout_ms',
    );
  } else {
    warnings.push(
      `provider "${providerId}" has no [model_providers] table: retries and stream idle timeout keep the agent defaults`,
    );
  }
  return doc;
}

function table(doc: Table, key: string): Table {
  const existing = doc[key];
  if (existing && typeof existing === 'object' && !Array.isArray(existing))
    return existing as Table;
  const created: Table = {};
  doc[key] = created;
  return created;
}

function secretValuesOf(doc: Table): string[] {
  const found: string[] = [];
  const providers = doc['model_providers'];
  if (!providers || typeof providers !== 'object') return found;
  for (const provider of Object.values(providers as Table)) {
    if (!provider || typeof provider !== 'object') continue;
    const p = provider as Table;
    if (typeof p['experimental_bearer_token'] === 'string')
      found.push(p['experimental_bearer_token']);
    const headers = p['http_headers'];
    if (headers && typeof headers === 'object') {
      for (const [name, value] of Object.entries(headers as Table)) {
        if (typeof value === 'string' && /auth|key|token|secret/i.test(name)) found.push(value);
      }
    }
  }
  return found;
}

function positiveInt(value: number, name: string): number {
  if (!Number.isInteger(value) || value <= 0)
    throw new AgentError('invalid-config', `${name} must be a positive integer`);
  return value;
}

function nonNegativeInt(value: number, name: string): number {
  if (!Number.isInteger(value) || value < 0)
    throw new AgentError('invalid-config', `${name} must be a non-negative integer`);
  return value;
}

function assertKey(value: string, what: string): void {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(value))
    throw new AgentError('invalid-config', `${what} must match [A-Za-z0-9_-]{1,64}`);
}

function toToml(doc: Table): string {
  return `${stringify(doc)}\n`;
}
