import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { TestRunner, type TestManager } from './helpers.js';
import { waitFor } from './e2e-helpers.js';
import { show, stopStandIn } from './queue-helpers.js';

/** Settings that make the scheduler react within a test's patience. */
export const FAST_SCHEDULER = {
  SVC_SCHEDULER: 'on',
  SVC_SCHEDULER_SCAN_MS: '300',
  SVC_RETRY_BACKOFF_MS: '200',
};

/** Open attempts now, from the database (the scheduler's own measure of capacity). */
export async function openAttempts(t: TestManager) {
  const rows = await sql<{ tenant_id: string; n: number }>`
    SELECT t.tenant_id, count(*)::int AS n FROM queue_attempts a
    JOIN queue_tasks t USING (task_id) WHERE a.state IN ('dispatched', 'running')
    GROUP BY t.tenant_id`.execute(t.manager.store.db);
  const byTenant = Object.fromEntries(rows.rows.map((r) => [r.tenant_id, r.n]));
  return { total: rows.rows.reduce((sum, r) => sum + r.n, 0), byTenant };
}

/** Wait until the task's latest attempt has its run, command and runner (a started attempt). */
export async function startedAttempt(t: TestManager, taskId: string, retryIndex = 0) {
  let attempt: any;
  await waitFor(
    `attempt ${retryIndex} of ${taskId} started`,
    async () => {
      attempt = (await show(t, taskId)).latestAttempt;
      return (
        attempt !== null &&
        attempt.retryIndex === retryIndex &&
        attempt.commandId !== null &&
        attempt.runner.runnerId !== null
      );
    },
    15_000,
  );
  return attempt;
}

/** Take the runner's part of a started attempt and end its command. */
export async function endAttempt(
  t: TestManager,
  attempt: any,
  state: 'completed' | 'failed' | 'blocked',
  extra: Record<string, unknown> = {},
): Promise<void> {
  const runner = new TestRunner(t, attempt.runner.runnerId, attempt.runId);
  assert.equal((await runner.claim()).status, 200);
  await runner.poll();
  assert.equal((await runner.ack(attempt.commandId)).status, 200);
  const done = await runner.finish(attempt.commandId, state, extra);
  assert.equal(done.status, 200, done.raw);
  if (attempt.runner.jobName) await stopStandIn(t, attempt.runner.jobName);
}
