import { createRedactedLogger, type LogFormat, type Logger, type Redactor } from '@svc/contracts';
import type { DestinationStream } from 'pino';

export type { Logger } from '@svc/contracts';

/** The manager's logger: redacted by path and by the values the manager knows are secret. */
export function createLogger(options: {
  level: string;
  redactor: Redactor;
  destination?: DestinationStream;
  format?: LogFormat;
}): Logger {
  return createRedactedLogger(options);
}
