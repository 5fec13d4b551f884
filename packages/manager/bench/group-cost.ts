import pg from 'pg';
import { createTestStore } from '@svc/testkit';
import { managerTemplate } from '../test/helpers.js';

const RUNS = 2_000;
const CALLS = 40;

/**
 * PostgreSQL's own time per appended event: `svc_append_groups` (the coalesced append) called
 * one at a time on one connection with groups of `batches` runs' batches of `events` events
 * each, shaped like the fleet's output. The median call, over the events it wrote, in µs: the
 * database's part of an event's cost, with no manager and no HTTP in it.
 */
export async function groupAppendCost(batches = 28, events = 40): Promise<number> {
  const store = await createTestStore(managerTemplate);
  if (store.kind !== 'postgres') throw new Error('benchmarks need PostgreSQL');
  const client = new pg.Client({ connectionString: store.url });
  await client.connect();
  try {
    await client.query(
      `INSERT INTO runs (run_id, tenant_id, project_id, provider_id, backend_profile,
         workspace_ref, execution_policy, state, lease_owner, lease_token_hash, lease_expires_at)
       SELECT 'run-' || i, 't', 'p', 'prov', 'codex', '{}', '{}', 'running', 'runner-' || i,
         'digest', now() + interval '1 hour'
       FROM generate_series(1, ${RUNS}) i`,
    );
    let key = 0;
    const took: number[] = [];
    for (let call = 0; call < CALLS; call++) {
      const group = Array.from({ length: batches }, (_, b) => {
        const run = ((call * batches + b) % RUNS) + 1;
        const rows = Array.from({ length: events }, (_, e) => {
          key++;
          return {
            i: e + 1,
            command_id: null,
            category: 'command_output',
            name: 'exec',
            event_key: `f-${key}`,
            observed_at: new Date().toISOString(),
            data: {
              itemId: `item-${key}`,
              stream: 'stdout',
              text: `line ${key}`,
              originalBytes: 8,
            },
          };
        });
        return {
          n: b,
          run: `run-${run}`,
          runner: `runner-${run}`,
          token_hash: 'digest',
          rows,
          counts: [],
          commands: [],
          wake: 'w',
        };
      });
      const started = performance.now();
      const { rows } = await client.query<{ first_seq: number | null }>(
        `SELECT n, first_seq FROM svc_append_groups($1::jsonb, 'bench')`,
        [JSON.stringify(group)],
      );
      took.push(performance.now() - started);
      if (rows.some((row) => row.first_seq === null)) throw new Error('a batch was refused');
    }
    took.sort((a, b) => a - b);
    return (took[took.length >> 1]! * 1000) / (batches * events);
  } finally {
    await client.end();
    await store.drop();
  }
}
