import { readFile } from 'node:fs/promises';
import { UsageError } from './errors.js';

/** Standard input, whole (one-off bodies come this way, never through a temporary file). */
export async function readStdin(stdin: NodeJS.ReadableStream = process.stdin): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
  return Buffer.concat(chunks).toString('utf8');
}

async function readInputFile(path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new UsageError(`cannot read ${path} (${code})`);
  }
}

function parseObject(text: string, source: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new UsageError(`${source} is not valid JSON`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new UsageError(`${source} must hold a JSON object`);
  return value as Record<string, unknown>;
}

export interface JsonSource {
  jsonStdin?: boolean;
  jsonFile?: string;
}

/** The JSON body of a command: from standard input or a reusable file, never both. */
export async function jsonBody(
  source: JsonSource,
  options: { required: boolean; what: string },
): Promise<Record<string, unknown> | undefined> {
  if (source.jsonStdin && source.jsonFile)
    throw new UsageError('give --json-stdin or --json-file, not both');
  if (source.jsonStdin) return parseObject(await readStdin(), 'standard input');
  if (source.jsonFile) return parseObject(await readInputFile(source.jsonFile), source.jsonFile);
  if (options.required)
    throw new UsageError(
      `${options.what} is required: pipe it with --json-stdin or name --json-file`,
    );
  return undefined;
}

export interface PromptSource {
  prompt?: string;
  promptStdin?: boolean;
  promptFile?: string;
}

export async function promptText(source: PromptSource, stdinTaken: boolean): Promise<string> {
  const given = [source.prompt !== undefined, source.promptStdin, source.promptFile !== undefined];
  if (given.filter(Boolean).length !== 1)
    throw new UsageError('give exactly one of --prompt, --prompt-stdin or --prompt-file');
  if (source.promptStdin && stdinTaken)
    throw new UsageError('standard input can carry the prompt or the JSON body, not both');
  const text = source.promptStdin
    ? await readStdin()
    : source.promptFile !== undefined
      ? await readInputFile(source.promptFile)
      : (source.prompt ?? '');
  if (text.trim() === '') throw new UsageError('the prompt is empty');
  return text;
}

/** A non-negative integer option. */
export function intOption(name: string, max = Number.MAX_SAFE_INTEGER, min = 0) {
  return (raw: string): number => {
    const value = Number(raw);
    if (!/^\d+$/.test(raw) || !Number.isSafeInteger(value) || value > max || value < min)
      throw new UsageError(`${name} must be a whole number between ${min} and ${max}`);
    return value;
  };
}

/** One value of a fixed set: anything else is a usage error (exit 2) naming the allowed values. */
export function choiceOption(name: string, allowed: readonly string[]) {
  return (raw: string): string => {
    if (!allowed.includes(raw))
      throw new UsageError(`${name} must be one of ${allowed.join(', ')} (got ${quoted(raw)})`);
    return raw;
  };
}

/** Several values of a fixed set, comma-separated (`pending,running`). */
export function choicesOption(name: string, allowed: readonly string[]) {
  return (raw: string): string => {
    const values = raw.split(',').map((v) => v.trim());
    const unknown = values.filter((v) => !allowed.includes(v));
    if (unknown.length > 0 || values.length === 0)
      throw new UsageError(
        `${name} takes one or more of ${allowed.join(', ')}, comma-separated (got ${quoted(raw)})`,
      );
    return [...new Set(values)].join(',');
  };
}

/** An ISO 8601 instant with its offset (`2026-01-31T12:00:00Z`), as the API takes it. */
export function instantOption(name: string) {
  return (raw: string): string => {
    const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$/i;
    if (!iso.test(raw) || Number.isNaN(Date.parse(raw)))
      throw new UsageError(
        `${name} must be an ISO 8601 instant with its offset, e.g. 2026-01-31T12:00:00Z (got ${quoted(raw)})`,
      );
    return raw;
  };
}

/**
 * A point in time as a person types it: a clock time (`10:00`, `09:30:15`) is its latest
 * occurrence in local time (today, or yesterday when today's is still ahead); anything else
 * must be an ISO 8601 instant with its offset. Answers the instant in ISO form (UTC).
 */
export function sinceOption(name: string, now: () => Date = () => new Date()) {
  const instant = instantOption(name);
  return (raw: string): string => {
    const clock = /^(\d{1,2}):(\d{2})(?::(\d{2}))?$/.exec(raw);
    if (!clock) {
      try {
        return new Date(instant(raw)).toISOString();
      } catch {
        throw new UsageError(
          `${name} must be a clock time (10:00, local) or an ISO 8601 instant with its offset, e.g. 2026-01-31T12:00:00Z (got ${quoted(raw)})`,
        );
      }
    }
    const [hours, minutes, seconds] = [clock[1], clock[2], clock[3] ?? '0'].map(Number) as [
      number,
      number,
      number,
    ];
    if (hours > 23 || minutes > 59 || seconds > 59)
      throw new UsageError(`${name} ${quoted(raw)} is not a time of day (00:00 to 23:59)`);
    const at = now();
    const when = new Date(at);
    when.setHours(hours, minutes, seconds, 0);
    if (when > at) when.setDate(when.getDate() - 1);
    return when.toISOString();
  };
}

/** A value quoted for a message, cut short: a usage error never echoes a long input whole. */
const quoted = (raw: string) => JSON.stringify(raw.length > 60 ? `${raw.slice(0, 57)}...` : raw);
