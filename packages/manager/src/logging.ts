import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import { REDACTED, type Redactor } from '@svc/contracts';

export type Logger = PinoLogger;

/**
 * The manager's logger. Two layers of redaction: known secret-bearing paths are censored by
 * name, and every serialized line is scrubbed of registered secret values (API key, store
 * password, credentials seen in flight) by exact value.
 */
export function createLogger(options: {
  level: string;
  redactor: Redactor;
  destination?: DestinationStream;
}): Logger {
  return pino(
    {
      level: options.level,
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'headers.authorization',
          '*.apiKey',
          '*.token',
          '*.password',
          '*.authJson',
          '*.configToml',
        ],
        censor: REDACTED,
      },
      hooks: {
        streamWrite: (line) => options.redactor.redact(line),
      },
    },
    options.destination,
  );
}
