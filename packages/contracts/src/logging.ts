import { pino, type DestinationStream, type Logger } from 'pino';
import { REDACTED, type Redactor } from './redaction.js';

export type { Logger } from 'pino';

/** Paths that carry credentials in any service's log objects. */
const SECRET_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
  '*.authorization',
  '*.apiKey',
  '*.token',
  '*.password',
  '*.authJson',
  '*.configToml',
];

export interface RedactedLoggerOptions {
  level: string;
  redactor: Redactor;
  destination?: DestinationStream | undefined;
  /** Fields on every line (e.g. the service name). */
  base?: Record<string, unknown>;
}

/**
 * A pino logger with two layers of redaction: credential-bearing paths are censored by name,
 * and every serialized line is scrubbed of the registered secret values (and their encodings)
 * by exact value, so a secret pasted into a message is caught too, and of credential-shaped
 * substrings (URL user info, bearer values, well-known token formats) nobody registered.
 */
export function createRedactedLogger(options: RedactedLoggerOptions): Logger {
  return pino(
    {
      level: options.level,
      ...(options.base ? { base: options.base } : {}),
      redact: { paths: SECRET_PATHS, censor: REDACTED },
      hooks: { streamWrite: (line) => options.redactor.scrub(line) },
    },
    options.destination,
  );
}
