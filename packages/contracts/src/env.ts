/**
 * Typed reads of environment variables that collect every problem before failing, so a
 * misconfigured program prints one message listing all of them instead of failing one by one.
 */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

export type Env = Readonly<Record<string, string | undefined>>;

export class EnvReader {
  readonly problems: string[] = [];

  constructor(private readonly env: Env) {}

  raw(name: string): string | undefined {
    const value = this.env[name];
    return value === undefined || value.trim() === '' ? undefined : value.trim();
  }

  string(name: string, fallback: string): string {
    return this.raw(name) ?? fallback;
  }

  optional(name: string): string | undefined {
    return this.raw(name);
  }

  int(name: string, fallback: number, bounds: { min?: number; max?: number } = {}): number {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    const { min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER } = bounds;
    if (!Number.isInteger(value) || value < min || value > max) {
      this.problems.push(
        `${name} must be an integer between ${min} and ${max} (got ${JSON.stringify(raw)})`,
      );
      return fallback;
    }
    return value;
  }

  bool(name: string, fallback: boolean): boolean {
    const raw = this.raw(name)?.toLowerCase();
    if (raw === undefined) return fallback;
    if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
    if (['0', 'false', 'no', 'off'].includes(raw)) return false;
    this.problems.push(`${name} must be true or false (got ${JSON.stringify(raw)})`);
    return fallback;
  }

  oneOf<T extends string>(name: string, values: readonly T[], fallback: T): T {
    const raw = this.raw(name);
    if (raw === undefined) return fallback;
    if ((values as readonly string[]).includes(raw)) return raw as T;
    this.problems.push(`${name} must be one of ${values.join(', ')} (got ${JSON.stringify(raw)})`);
    return fallback;
  }

  list(name: string, fallback: readonly string[]): string[] {
    const raw = this.raw(name);
    if (raw === undefined) return [...fallback];
    return raw
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
  }

  url(name: string, fallback?: string): string | undefined {
    const raw = this.raw(name) ?? fallback;
    if (raw === undefined) return undefined;
    try {
      new URL(raw);
      return raw;
    } catch {
      // Never echo the value: a URL may carry a password.
      this.problems.push(`${name} is not a valid URL`);
      return undefined;
    }
  }

  json<T>(name: string, check: (value: unknown) => string | null): T | undefined {
    const raw = this.raw(name);
    if (raw === undefined) return undefined;
    try {
      const value: unknown = JSON.parse(raw);
      const problem = check(value);
      if (problem) {
        this.problems.push(`${name}: ${problem}`);
        return undefined;
      }
      return value as T;
    } catch {
      this.problems.push(`${name} is not valid JSON`);
      return undefined;
    }
  }

  fail(problem: string): void {
    this.problems.push(problem);
  }

  /** Throw a ConfigError listing every problem, if any. */
  done(): void {
    if (this.problems.length > 0) throw new ConfigError(this.problems);
  }
}
