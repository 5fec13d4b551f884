import { asTable, type Toml } from './rules.js';

/**
 * builtin-d's `model-catalog.json`: the agent's model catalog (`{"models":[ModelInfo…]}`),
 * whose entry for the fixed model must state the same context window as config.toml. A
 * malformed catalog makes the agent exit before `initialize`, so a generated one carries every
 * field the agent requires (codex-app-server.md, model_catalog_json).
 */

export interface CatalogSettings {
  model: string;
  contextWindow: number;
  autoCompactTokenLimit: number;
}

/** Keep an operator's catalog (adjusting the window of the fixed model) or generate one. */
export function ensureCatalog(existing: Buffer | undefined, settings: CatalogSettings): Buffer {
  const kept = existing ? adjust(existing, settings) : null;
  return Buffer.from(`${JSON.stringify(kept ?? generate(settings), null, 2)}\n`);
}

function adjust(existing: Buffer, settings: CatalogSettings): Toml | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(existing.toString('utf8'));
  } catch {
    return null;
  }
  const doc = asTable(parsed);
  const models = doc?.['models'];
  if (!doc || !Array.isArray(models)) return null;
  const entry = models.map(asTable).find((m) => m?.['slug'] === settings.model);
  if (!entry) return null;
  entry['context_window'] = settings.contextWindow;
  if (
    typeof entry['max_context_window'] !== 'number' ||
    entry['max_context_window'] < settings.contextWindow
  )
    entry['max_context_window'] = settings.contextWindow;
  entry['auto_compact_token_limit'] = settings.autoCompactTokenLimit;
  return doc;
}

function generate(settings: CatalogSettings): Toml {
  return {
    models: [
      {
        slug: settings.model,
        display_name: settings.model,
        description: 'Model of provider profile builtin-d',
        default_reasoning_level: 'medium',
        supported_reasoning_levels: [
          { effort: 'low', description: 'Fast responses with lighter reasoning' },
          { effort: 'medium', description: 'Balances speed and reasoning depth' },
          { effort: 'high', description: 'Greater reasoning depth for complex problems' },
        ],
        shell_type: 'shell_command',
        visibility: 'list',
        supported_in_api: true,
        priority: 1,
        base_instructions:
          'You are a coding agent working in the user workspace. Follow the instructions, use the available tools, and report what you did.',
        support_verbosity: false,
        default_verbosity: null,
        truncation_policy: { mode: 'tokens', limit: 10_000 },
        experimental_supported_tools: [],
        apply_patch_tool_type: 'freeform',
        input_modalities: ['text'],
        context_window: settings.contextWindow,
        max_context_window: settings.contextWindow,
        auto_compact_token_limit: settings.autoCompactTokenLimit,
      },
    ],
  };
}
