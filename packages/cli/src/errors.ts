import { ApiError, ConfigError, UnreachableError } from '@svc/contracts';

/** Exit codes of both clients (packages/cli/README.md). */
export const EXIT = {
  ok: 0,
  /** A fault of the client itself. */
  internal: 1,
  /** Bad flags, arguments or input (nothing was sent). */
  usage: 2,
  /** The manager answered with a structured failure. */
  api: 3,
  /** The manager could not be reached. */
  unreachable: 4,
  /** `--follow`: the followed turn ended failed or blocked. */
  turnFailed: 5,
  /** `--follow`: the followed turn was cancelled. */
  turnCancelled: 6,
} as const;

/** The exit code of a followed turn by its terminal status (as `gh run watch --exit-status`). */
export function turnExitCode(status: string | null | undefined): number {
  if (status === 'completed') return EXIT.ok;
  if (status === 'cancelled') return EXIT.turnCancelled;
  return EXIT.turnFailed;
}

/** A problem with what the user typed or piped in; nothing was sent to the manager. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface Failure {
  exitCode: number;
  /** Stable failure kind: the manager's failureKind, or usage, manager-unreachable, internal-error. */
  kind: string;
  message: string;
  /** `<kind>: <message>`, the one line printed on standard error. */
  line: string;
}

const failure = (exitCode: number, kind: string, message: string): Failure => ({
  exitCode,
  kind,
  message,
  line: `${kind}: ${message}`,
});

/** One line per failure, always naming its kind: `<kind>: <message>`. */
export function describeFailure(error: unknown): Failure {
  if (error instanceof ApiError) {
    const trace = error.traceId ? `, traceId ${error.traceId}` : '';
    return failure(EXIT.api, error.failureKind, `${error.message} (HTTP ${error.status}${trace})`);
  }
  if (error instanceof UnreachableError)
    return failure(EXIT.unreachable, 'manager-unreachable', error.message);
  if (error instanceof ConfigError) return failure(EXIT.usage, 'usage', error.problems.join('; '));
  if (error instanceof UsageError) return failure(EXIT.usage, 'usage', error.message);
  const message = error instanceof Error ? error.message : String(error);
  return failure(EXIT.internal, 'internal-error', message);
}
