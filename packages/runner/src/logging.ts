import type { Redactor } from '@svc/contracts';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/**
 * One JSON line per entry on stdout (the job log). Every line passes the run's redactor, which
 * knows the manager token, transientEnv values and the credentials the runner projected.
 */
export class RunnerLog {
  constructor(
    private readonly redactor: Redactor,
    private readonly level: LogLevel = 'info',
    private readonly write: (line: string) => void = (line) => process.stdout.write(line),
  ) {}

  log(level: LogLevel, message: string, fields: Record<string, unknown> = {}): void {
    if (ORDER[level] < ORDER[this.level]) return;
    const line = JSON.stringify({ time: new Date().toISOString(), level, msg: message, ...fields });
    this.write(`${this.redactor.redact(line)}\n`);
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
