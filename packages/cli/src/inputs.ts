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

/**
 * A comma-separated list of known values (`--state failed,blocked`): a value outside them is a
 * usage error naming the values allowed; nothing is sent.
 */
export function listOption(name: string, allowed: readonly string[]) {
  return (raw: string): string => {
    const values = raw.split(',').map((v) => v.trim());
    const unknown = values.filter((v) => !allowed.includes(v));
    if (values.length === 0 || unknown.length > 0)
      throw new UsageError(
        `${name} ${JSON.stringify(raw)}: ${unknown.length > 0 ? `unknown ${unknown.map((v) => JSON.stringify(v)).join(', ')}; ` : ''}allowed: ${allowed.join(', ')} (several comma-separated)`,
      );
    return [...new Set(values)].join(',');
  };
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
