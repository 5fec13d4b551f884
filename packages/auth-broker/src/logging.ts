import { destination, type DestinationStream } from 'pino';
import { createRedactedLogger, type Logger, type Redactor } from '@svc/contracts';

export type { Logger } from '@svc/contracts';

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
  return createRedactedLogger({
    level: options.level,
    redactor: options.redactor,
    base: { service: 'auth-broker' },
    destination: options.destination ?? destination({ fd: 2, sync: false }),
  });
}
