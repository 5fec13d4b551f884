import { BrokerError } from '../errors.js';

/**
 * Small checks for caller JSON. Problems are collected so one `validation-failed` lists all of
 * them; caller text is never echoed whole (names are shortened, values are described by type).
 */
export class Problems {
  readonly list: string[] = [];

  add(problem: string): void {
    if (this.list.length < MAX_PROBLEMS) this.list.push(problem);
  }

  /** Throw `validation-failed` listing every problem, if any. */
  throwIfAny(what: string): void {
    if (this.list.length === 0) return;
    throw new BrokerError('validation-failed', `invalid ${what}: ${this.list.join('; ')}`, {
      degradedReason: 'invalid-parameters',
      details: { problems: [...this.list] },
    });
  }
}

const MAX_PROBLEMS = 10;

export type JsonObject = Record<string, unknown>;

export function isPlainObject(value: unknown): value is JsonObject {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Short, printable form of a caller-supplied key. */
export function showKey(key: string): string {
  const printable = key.replace(/[^\x20-\x7e]/g, '?');
  return JSON.stringify(printable.length > 40 ? `${printable.slice(0, 40)}…` : printable);
}

export function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/** Report keys outside `allowed` (own keys only; prototype tricks never reach here). */
export function rejectUnknownKeys(
  value: JsonObject,
  allowed: readonly string[],
  where: string,
  problems: Problems,
): void {
  const unknown = Object.keys(value).filter((k) => !allowed.includes(k));
  if (unknown.length > 0)
    problems.add(
      `${where} has unknown field${unknown.length > 1 ? 's' : ''} ${unknown.slice(0, 5).map(showKey).join(', ')} (allowed: ${allowed.join(', ')})`,
    );
}

export function field(value: JsonObject, key: string): unknown {
  return Object.hasOwn(value, key) ? value[key] : undefined;
}

export function optionalBoolean(
  value: unknown,
  where: string,
  problems: Problems,
): boolean | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'boolean') return value;
  problems.add(`${where} must be a boolean (got ${describeType(value)})`);
  return undefined;
}

export function positiveInt(
  value: unknown,
  where: string,
  problems: Problems,
  max = 2_147_483_647,
): number | undefined {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 1 && value <= max)
    return value;
  problems.add(
    value === undefined
      ? `${where} is required`
      : `${where} must be an integer between 1 and ${max} (got ${describeType(value)})`,
  );
  return undefined;
}

export function boundedString(
  value: unknown,
  where: string,
  problems: Problems,
  bounds: { min: number; max: number },
): string | undefined {
  if (typeof value !== 'string') {
    problems.add(
      value === undefined
        ? `${where} is required`
        : `${where} must be a string (got ${describeType(value)})`,
    );
    return undefined;
  }
  if (value.length < bounds.min || value.length > bounds.max) {
    problems.add(`${where} must be ${bounds.min}-${bounds.max} characters (got ${value.length})`);
    return undefined;
  }
  return value;
}

// git check-ref-format rules that matter for a branch name given to the code host.
const BRANCH_FORBIDDEN = /[\p{Cc} ~^:?*[\\]|\.\.|@\{|\/\/|^[-/.]|\/\.|[/.]$|\.lock$|\.lock\//u;
const BRANCH_OWNER = /^[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9])){0,38}$/;

/** A branch name; with `allowOwner`, also `<owner>:<branch>` (a head in a fork). */
export function branchName(
  value: unknown,
  where: string,
  problems: Problems,
  allowOwner = false,
): string | undefined {
  const text = boundedString(value, where, problems, { min: 1, max: 255 });
  if (text === undefined) return undefined;
  let branch = text;
  const colon = text.indexOf(':');
  if (allowOwner && colon > 0 && BRANCH_OWNER.test(text.slice(0, colon)))
    branch = text.slice(colon + 1);
  if (branch === '' || branch === '@' || BRANCH_FORBIDDEN.test(branch)) {
    problems.add(`${where} is not a valid branch name`);
    return undefined;
  }
  return text;
}
