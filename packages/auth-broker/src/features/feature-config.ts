import { readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';

/**
 * Product feature configuration (spec/1 "Product feature configuration"): a JSON document checked
 * against the shipped draft 2020-12 schema. Reusable by any program that reads the same file;
 * nothing here knows about the broker.
 */
export interface WebProbeSentinelConfig {
  enabled: boolean;
  scheduler: { intervalSeconds: number };
}

export interface FeatureConfig {
  webProbeSentinel?: WebProbeSentinelConfig;
}

/** The schema file, shipped with the package (`schema/` sits next to `src/` and `dist/`). */
export const FEATURE_CONFIG_SCHEMA_URL = new URL(
  '../../schema/feature-config.schema.json',
  import.meta.url,
);

export const MIN_PROBE_INTERVAL_SECONDS = 30;

/** Thrown with every problem found, so one run of the product shows all of them. */
export class FeatureConfigError extends Error {
  constructor(
    readonly source: string,
    readonly problems: readonly string[],
  ) {
    super(
      `invalid feature configuration (${source}):\n${problems.map((p) => `  - ${p}`).join('\n')}`,
    );
    this.name = 'FeatureConfigError';
  }
}

let compiled: ValidateFunction | undefined;

function validator(): ValidateFunction {
  if (!compiled) {
    const schema = JSON.parse(readFileSync(FEATURE_CONFIG_SCHEMA_URL, 'utf8')) as object;
    compiled = new Ajv2020({ allErrors: true, strict: true }).compile(schema);
  }
  return compiled;
}

/**
 * Load and check a feature configuration. A string is a path to a JSON file; anything else is
 * the already-parsed document. Returns the typed configuration or throws FeatureConfigError.
 */
export function loadFeatureConfig(pathOrObject: unknown): FeatureConfig {
  let source = 'object';
  let document: unknown = pathOrObject;
  if (typeof pathOrObject === 'string') {
    source = pathOrObject;
    let text: string;
    try {
      text = readFileSync(pathOrObject, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'read error';
      throw new FeatureConfigError(source, [`cannot read the file (${code})`]);
    }
    try {
      document = JSON.parse(text);
    } catch (error) {
      throw new FeatureConfigError(source, [`not valid JSON: ${(error as Error).message}`]);
    }
  }
  const validate = validator();
  if (!validate(document)) {
    const problems = (validate.errors ?? []).map((e) => describe(e, document));
    throw new FeatureConfigError(source, [...new Set(problems)]);
  }
  return document as FeatureConfig;
}

function describe(error: ErrorObject, document: unknown): string {
  const path = error.instancePath
    ? error.instancePath.slice(1).split('/').map(unescapePointer).join('.')
    : '(root)';
  const params = error.params as Record<string, unknown>;
  switch (error.keyword) {
    case 'additionalProperties':
      return `${path} has unknown property ${JSON.stringify(params['additionalProperty'])}`;
    case 'required':
      return `${path} is missing required property ${JSON.stringify(params['missingProperty'])}`;
    case 'minimum':
      return `${path} must be >= ${String(params['limit'])} (got ${show(valueAt(document, error.instancePath))})`;
    case 'type':
      return `${path} must be ${String(params['type'])} (got ${show(valueAt(document, error.instancePath))})`;
    default:
      return `${path} ${error.message ?? 'is invalid'}`;
  }
}

function unescapePointer(segment: string): string {
  return segment.replaceAll('~1', '/').replaceAll('~0', '~');
}

function valueAt(document: unknown, pointer: string): unknown {
  let value = document;
  for (const segment of pointer.split('/').slice(1).map(unescapePointer)) {
    if (value === null || typeof value !== 'object' || !Object.hasOwn(value, segment))
      return undefined;
    value = (value as Record<string, unknown>)[segment];
  }
  return value;
}

function show(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}
