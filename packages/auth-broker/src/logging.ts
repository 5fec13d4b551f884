import { destination, pino, type DestinationStream, type Logger as PinoLogger } from 'pino';
import { REDACTED, type Redactor } from '@svc/contracts';

export type Logger = PinoLogger;

/**
 * The broker's operational log (standard error by default, so standard output can carry the
 * audit stream). Secret-bearing paths are censored by name, and every line is scrubbed of the
 * credential value and its encodings by exact value.
 */
export function createLogger(options: {
  level: string;
  redactor: Redactor;
  destination?: DestinationStream;
}): Logger {
  return pino(
    {
      level: options.level,
      base: { service: 'auth-broker' },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers.cookie',
          'headers.authorization',
          'headers.cookie',
          '*.token',
          '*.authorization',
        ],
        censor: REDACTED,
      },
      hooks: { streamWrite: (line) => options.redactor.redact(line) },
    },
    options.destination ?? destination({ fd: 2, sync: false }),
  );
}
