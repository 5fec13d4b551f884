import { CronExpressionParser } from 'cron-parser';
import { ServiceError } from '@svc/contracts';

/** The five fields of a standard cron expression, in order. */
export const CRON_FIELDS = ['minute', 'hour', 'day-of-month', 'month', 'day-of-week'] as const;

/**
 * What each field may hold: numbers, `*`, lists, ranges and steps; month and day-of-week also
 * their three-letter names. cron-parser's extensions (`L`, `W`, `#`, `?`, `H`) are refused:
 * `H` picks a random minute per process, so two replicas would not agree on the next tick.
 */
const NUMERIC = /^[0-9*,/-]+$/;
const NAMED = /^(?:[0-9*,/-]|[A-Za-z]{3}(?![A-Za-z]))+$/;

const invalid = (field: string, message: string) =>
  new ServiceError('schema-invalid', message, { field });

/** An IANA zone name the runtime knows (`Europe/Berlin`, `UTC`); refused otherwise. */
export function checkTimezone(timezone: string): string {
  // Offsets (`+01:00`) and POSIX rules are not zone names; Intl alone would take some of them.
  const named = /^[A-Za-z][A-Za-z0-9_+-]*(?:\/[A-Za-z0-9_+-]+)*$/.test(timezone);
  let resolved: string | null = null;
  if (named)
    try {
      resolved = new Intl.DateTimeFormat('en-US', { timeZone: timezone }).resolvedOptions()
        .timeZone;
    } catch {
      resolved = null;
    }
  if (resolved === null)
    throw invalid('timezone', `timezone "${timezone}" is not a known IANA time zone name`);
  // Zone names are matched without regard to case: kept as the database spells them
  // (`europe/berlin` is stored and shown as `Europe/Berlin`), a link (`US/Pacific`) as given.
  return resolved.toLowerCase() === timezone.toLowerCase() ? resolved : timezone;
}

/**
 * A 5-field cron expression, checked field by field so the refusal names the field; the
 * expression is returned with its fields separated by single spaces.
 */
export function checkCron(cron: string, timezone: string): string {
  const fields = cron.trim().split(/\s+/);
  if (fields.length === 6)
    throw invalid(
      'cron',
      `cron "${cron}" has 6 fields: seconds are not supported; give 5 fields (${CRON_FIELDS.join(' ')})`,
    );
  if (fields.length !== 5)
    throw invalid(
      'cron',
      `cron "${cron}" has ${fields.length} field(s); give 5 (${CRON_FIELDS.join(' ')})`,
    );
  fields.forEach((value, i) => {
    const name = CRON_FIELDS[i]!;
    const shape = name === 'month' || name === 'day-of-week' ? NAMED : NUMERIC;
    const alone = fields.map((_, j) => (j === i ? value : '*')).join(' ');
    let problem = shape.test(value) ? undefined : 'unsupported characters';
    if (!problem)
      try {
        CronExpressionParser.parse(alone, { tz: 'UTC' });
      } catch (error) {
        problem = (error as Error).message;
      }
    if (problem)
      throw invalid(
        `cron.${name}`,
        `cron field ${i + 1} (${name}) "${value}" is invalid: ${problem}`,
      );
  });
  const normal = fields.join(' ');
  try {
    nextTick(normal, timezone, new Date());
  } catch (error) {
    // Each field alone is fine; together they name no date (e.g. 31 February).
    throw invalid(
      'cron',
      `cron "${cron}" never fires (day-of-month and month name no date): ${(error as Error).message}`,
    );
  }
  return normal;
}

/** The first tick strictly after `after`, in the schedule's time zone (DST by cron-parser). */
export function nextTick(cron: string, timezone: string, after: Date): Date {
  return CronExpressionParser.parse(cron, { tz: timezone, currentDate: after }).next().toDate();
}
