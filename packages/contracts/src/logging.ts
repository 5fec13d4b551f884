import { pino, type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';
import { REDACTED, type Redactor } from './redaction.js';

export type { DestinationStream, Logger } from 'pino';

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
  /** `json` (default): one JSON object a line. `pretty`: one readable, coloured line a record. */
  format?: LogFormat | undefined;
}

export type LogFormat = 'json' | 'pretty';

/** Pretty on a terminal, JSON for anything that collects logs (a pipe, a file, a pod log). */
export function defaultLogFormat(stream: { isTTY?: boolean } = process.stdout): LogFormat {
  return stream.isTTY ? 'pretty' : 'json';
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
    options.format === 'pretty' ? prettyStream(options.destination) : options.destination,
  );
}

/**
 * pino-pretty in this process (no worker thread), fed the line after redaction. Synchronous,
 * so the last lines before a process exits are not lost. Colour follows the terminal and
 * NO_COLOR / FORCE_COLOR.
 */
function prettyStream(destination: DestinationStream | undefined): DestinationStream {
  return pretty({
    destination: destination ?? 1,
    sync: true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname',
    singleLine: true,
  });
}
