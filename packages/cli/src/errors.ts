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
} as const;

/** A problem with what the user typed or piped in; nothing was sent to the manager. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface Failure {
  exitCode: number;
  line: string;
}

/** One line per failure, always naming its kind: `<kind>: <message>`. */
export function describeFailure(error: unknown): Failure {
  if (error instanceof ApiError) {
    const trace = error.traceId ? `, traceId ${error.traceId}` : '';
    return {
      exitCode: EXIT.api,
      line: `${error.failureKind}: ${error.message} (HTTP ${error.status}${trace})`,
    };
  }
  if (error instanceof UnreachableError) {
    return { exitCode: EXIT.unreachable, line: `manager-unreachable: ${error.message}` };
  }
  if (error instanceof ConfigError) {
    return { exitCode: EXIT.usage, line: `usage: ${error.problems.join('; ')}` };
  }
  if (error instanceof UsageError) return { exitCode: EXIT.usage, line: `usage: ${error.message}` };
  const message = error instanceof Error ? error.message : String(error);
  return { exitCode: EXIT.internal, line: `internal-error: ${message}` };
}
