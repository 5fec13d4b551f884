import { createHash } from 'node:crypto';
import { sql } from 'kysely';
import type pg from 'pg';

/**
 * The mark of a statement each connection prepares once: a comment opening or closing its text.
 * Without it, every execution of a statement is parsed and planned again; for the runner's
 * poll, ack and heartbeat that was most of their time in the database (0.6 to 0.9 ms of about
 * 1 ms each on the reference machine). Only statements whose text never varies with their
 * values carry it (no lists spelled out per value), so a connection holds a few dozen at most.
 * The server still plans the first executions for their values and keeps a generic plan only
 * when it costs no more; a schema change makes it plan again by itself.
 */
const MARK = '/* prepared */';

/**
 * The mark: to open a `sql` template (sql`${PREPARED} SELECT ...`), or to end a query built by
 * Kysely (`.modifyEnd(PREPARED)`).
 */
export const PREPARED = sql.raw(MARK);

const names = new Map<string, string>();
let renamed = 0;

/** One name per statement text, the same in every process (a digest of the text). */
function nameOf(text: string): string {
  let name = names.get(text);
  if (!name) {
    name = `svc_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
    names.set(text, name);
  }
  return name;
}

/**
 * A column added to a table while this process runs (another replica's migration) changes
 * the rows of a prepared `SELECT *`, and the server refuses to run the old statement again.
 */
const staleResultType = (error: unknown) =>
  (error as { code?: unknown }).code === '0A000' &&
  String((error as Error).message).includes('must not change result type');

type Query = (config: unknown, values?: unknown, callback?: unknown) => unknown;

/**
 * Marked statements of this connection go out as named ones: the driver sends their text and
 * the server parses it once per connection, later executions only bind and execute. Kysely
 * passes each statement as text and values; anything else is left as it came. A statement made
 * stale by a schema change is prepared again under a new name, in every connection of the
 * process, and tried once more: outside a transaction the caller never sees the refusal.
 */
export function prepareMarked(client: pg.PoolClient): void {
  const target = client as unknown as { query: Query };
  const query: Query = target.query.bind(client);
  target.query = (config, values, callback) => {
    if (
      typeof config !== 'string' ||
      !(config.startsWith(MARK) || config.endsWith(MARK)) ||
      !Array.isArray(values) ||
      callback !== undefined
    )
      return query(config, values, callback);
    const run = () => query({ name: nameOf(config), text: config, values }) as Promise<unknown>;
    return run().catch((error: unknown) => {
      if (!staleResultType(error)) throw error;
      renamed += 1;
      names.set(config, `${nameOf(config)}_${renamed}`);
      return run();
    });
  };
}

/**
 * For a statement whose text grows with its rows (a multi-row insert): the mark when it writes
 * one row, the common case of a claim as tasks trickle in, so a connection holds one text of
 * it; nothing otherwise.
 */
export const preparedForOne = (rows: number) => (rows === 1 ? PREPARED : sql.raw(''));
