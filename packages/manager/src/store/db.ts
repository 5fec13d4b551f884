import { mkdir } from 'node:fs/promises';
import { Kysely, PGliteDialect, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Logger } from '../logging.js';
import { lockDataDir } from './data-dir-lock.js';
import { prepareMarked } from './prepared.js';
import type { Database } from './schema.js';
import type { PoolStats } from '../metrics/store-gauges.js';
import { WAKE_CHANNEL, Wakeups } from './wakeups.js';

export type StoreConfig =
  | {
      kind: 'postgres';
      url: string;
      poolSize: number;
      /** Connections of the lease lane (renewals, claims); 0: they share the main pool. */
      leasePoolSize?: number;
      /** Connections of the coalesced appends (one per group in flight); 0: the main pool. */
      writePoolSize?: number;
    }
  | { kind: 'pglite'; dataDir: string };

export type Db = Kysely<Database>;

export interface Store {
  readonly db: Db;
  /**
   * Lease renewals and claims: a small pool of their own, so a busy main pool never delays
   * them past a lease's TTL. The same as `db` on the embedded store (one connection).
   */
  readonly leaseDb: Db;
  /**
   * Coalesced appends (store/lanes.ts): a pool of their own, one connection per group in
   * flight, so a burst of reads (a fleet's polls, a console) holding every connection of the
   * main pool never queues the group commits behind it. The same as `db` on the embedded store.
   */
  readonly writeDb: Db;
  readonly kind: StoreConfig['kind'];
  readonly wakeups: Wakeups;
  /** Connections of the pool (none for the embedded store). */
  poolStats(): PoolStats | null;
  /** Cheap reachability probe for readiness. */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

// int8 (count(*), sums) arrives as text by default; every value we read fits a double.
pg.types.setTypeParser(20, (value) => Number(value));

export async function openStore(config: StoreConfig, logger: Logger): Promise<Store> {
  return config.kind === 'postgres' ? openPostgres(config, logger) : openPglite(config);
}

async function openPostgres(
  config: Extract<StoreConfig, { kind: 'postgres' }>,
  logger: Logger,
): Promise<Store> {
  const openPool = (max: number) => {
    const pool = new pg.Pool({
      connectionString: config.url,
      max,
      // Short indexed queries: parallel workers cost more to start than they save, and index
      // order scans (newest event first) should win over sequential scans on SSD storage.
      options: '-c max_parallel_workers_per_gather=0 -c random_page_cost=1.1',
    });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    pool.on('error', (error) => logger.warn({ err: error.message }, 'store connection lost'));
    pool.on('connect', prepareMarked);
    return pool;
  };
  const pool = openPool(config.poolSize);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  const lanePool = (size: number | undefined) =>
    size !== undefined && size > 0
      ? new Kysely<Database>({ dialect: new PostgresDialect({ pool: openPool(size) }) })
      : db;
  const leaseDb = lanePool(config.leasePoolSize);
  const writeDb = lanePool(config.writePoolSize);
  const wakeups = new Wakeups();
  const listener = new WakeListener(config.url, wakeups, logger);
  await listener.start();
  wakeups.setRemote(async (key) => {
    await sql`SELECT pg_notify(${WAKE_CHANNEL}, ${key})`.execute(db);
  });
  return {
    db,
    leaseDb,
    writeDb,
    kind: 'postgres',
    wakeups,
    poolStats: () => ({
      total: pool.totalCount,
      idle: pool.idleCount,
      waiting: pool.waitingCount,
    }),
    ping: () => ping(db),
    close: async () => {
      await listener.stop();
      if (leaseDb !== db) await leaseDb.destroy();
      if (writeDb !== db) await writeDb.destroy();
      await db.destroy();
    },
  };
}

async function openPglite(config: Extract<StoreConfig, { kind: 'pglite' }>): Promise<Store> {
  await mkdir(config.dataDir, { recursive: true });
  // Before the engine touches a file: a second manager on the same directory stops here.
  const lock = await lockDataDir(config.dataDir);
  let db: Db;
  // One process owns the embedded store, so in-process wake-ups reach every waiter; wake-ups
  // sent on commit (NOTIFY) come back through the store's own listener.
  const wakeups = new Wakeups();
  try {
    // Loaded only when used: a PostgreSQL deployment never pays for the embedded engine.
    const { PGlite } = await import('@electric-sql/pglite');
    const pglite = new PGlite(config.dataDir, {
      parsers: { 20: (value: string) => Number(value) },
    });
    await pglite.waitReady;
    await pglite.listen(WAKE_CHANNEL, (payload) => wakeups.deliver(payload));
    db = new Kysely<Database>({ dialect: new PGliteDialect({ pglite }) });
  } catch (error) {
    await lock.release();
    throw error;
  }
  return {
    db,
    leaseDb: db,
    writeDb: db,
    kind: 'pglite',
    wakeups,
    poolStats: () => null,
    ping: () => ping(db),
    close: async () => {
      await db.destroy();
      await lock.release();
    },
  };
}

async function ping(db: Db): Promise<boolean> {
  try {
    await sql`SELECT 1`.execute(db);
    return true;
  } catch {
    return false;
  }
}

/** A dedicated connection LISTENing for wake-ups, reconnecting after failures. */
class WakeListener {
  #client: pg.Client | undefined;
  #stopped = false;
  #retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly url: string,
    private readonly wakeups: Wakeups,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url });
    client.on('notification', (message) => {
      if (message.payload) this.wakeups.deliver(message.payload);
    });
    client.on('error', (error) => {
      this.logger.warn({ err: error.message }, 'wake-up listener lost its connection');
      this.#reconnectLater();
    });
    await client.connect();
    await client.query(`LISTEN ${WAKE_CHANNEL}`);
    this.#client = client;
  }

  #reconnectLater(): void {
    const old = this.#client;
    this.#client = undefined;
    void old?.end().catch(() => undefined);
    if (this.#stopped || this.#retry) return;
    this.#retry = setTimeout(() => {
      this.#retry = undefined;
      if (this.#stopped) return;
      this.start().catch(() => this.#reconnectLater());
    }, 1000);
    this.#retry.unref();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#retry) clearTimeout(this.#retry);
    await this.#client?.end().catch(() => undefined);
  }
}
