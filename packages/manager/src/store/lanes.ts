import { writeGroupSize } from '../metrics/registry.js';
import { appendFresh, appendFreshGroup, type FreshAppend } from './append-fresh.js';
import { Coalescer } from './coalescer.js';
import type { Db, Store } from './db.js';
import { renewLease, renewLeases, type Renewal, type RenewedRun } from './heartbeats.js';

/** Requests and events per coalesced append: a group's statement stays a few milliseconds. */
const APPEND_GROUP_MAX = 128;
const APPEND_GROUP_MAX_EVENTS = 4000;
const RENEWAL_GROUP_MAX = 256;

/**
 * How the hot runner writes reach the store: lease renewals and claims on the lease lane's
 * connections, appends and renewals coalesced into group commits (store/coalescer.ts).
 */
export interface WriteLanes {
  readonly leaseDb: Db;
  /** Plain appends: the first seq written, or null for the general path. */
  readonly appends: Coalescer<FreshAppend, number | null> | null;
  /** Renewals: the renewed run, or null (not renewed; the caller explains). */
  readonly renewals: Coalescer<Renewal, RenewedRun | null> | null;
}

/**
 * `groups`: coalesced writes of a kind in flight at once (0: every request commits alone). The
 * embedded store has one connection: one group at a time. Renewal groups in flight are also
 * bounded by the lease lane's connections (`leaseConnections`, 0: none of its own): a group
 * beyond them would only wait for a connection, ahead of a claim.
 */
export function writeLanes(store: Store, groups: number, leaseConnections = 0): WriteLanes {
  const inFlight = store.kind === 'pglite' ? Math.min(groups, 1) : groups;
  const renewalsInFlight = leaseConnections > 0 ? Math.min(inFlight, leaseConnections) : inFlight;
  if (inFlight <= 0) return { leaseDb: store.leaseDb, appends: null, renewals: null };
  return {
    leaseDb: store.leaseDb,
    appends: new Coalescer<FreshAppend, number | null>({
      concurrency: inFlight,
      maxItems: APPEND_GROUP_MAX,
      maxWeight: APPEND_GROUP_MAX_EVENTS,
      weight: (a) => a.events.length,
      key: (a) => a.runId,
      group: (appends) => appendFreshGroup(store.writeDb, appends),
      single: (append) => appendFresh(store.writeDb, append),
      onGroup: (size) => writeGroupSize.observe({ kind: 'append' }, size),
    }),
    renewals: new Coalescer<Renewal, RenewedRun | null>({
      concurrency: renewalsInFlight,
      maxItems: RENEWAL_GROUP_MAX,
      maxWeight: RENEWAL_GROUP_MAX,
      weight: () => 1,
      key: (r) => r.runId,
      group: (renewals) => renewLeases(store.leaseDb, renewals),
      // A renewal whose row another transaction holds (an append group committing) comes back
      // in a later group: the lease lane never waits for a lock.
      skipsLocked: true,
      single: (renewal) => renewLease(store.leaseDb, renewal),
      onGroup: (size) => writeGroupSize.observe({ kind: 'renewal' }, size),
    }),
  };
}
