import {
  createRedactedLogger,
  defaultLogFormat,
  type DestinationStream,
  type LogFormat,
  type Logger,
  type Redactor,
} from '@svc/contracts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export interface RunnerLogOptions {
  level?: LogLevel;
  /** Fields on every line: the run, the runner and its attempt, so a job log is searchable. */
  base?: Record<string, unknown>;
  format?: LogFormat;
  destination?: DestinationStream;
}

/**
 * The runner's log on stdout (the job log), in the manager's shape: pino lines with level,
 * time, msg and the run's ids. Every line passes the run's redactor, which knows the manager
 * token, transientEnv values and the credentials the runner projected.
 */
export class RunnerLog {
  readonly logger: Logger;

  constructor(redactor: Redactor, options: RunnerLogOptions = {}) {
    this.logger = createRedactedLogger({
      level: options.level ?? 'info',
      redactor,
      format: options.format ?? defaultLogFormat(),
      destination: options.destination,
      base: { pid: process.pid, ...options.base },
    });
  }

  log(level: LogLevel, message: string, fields: Record<string, unknown> = {}): void {
    this.logger[level](fields, message);
  }

  debug(message: string, fields?: Record<string, unknown>): void {
    this.log('debug', message, fields);
  }
  info(message: string, fields?: Record<string, unknown>): void {
    this.log('info', message, fields);
  }
  warn(message: string, fields?: Record<string, unknown>): void {
    this.log('warn', message, fields);
  }
  error(message: string, fields?: Record<string, unknown>): void {
    this.log('error', message, fields);
  }
}
