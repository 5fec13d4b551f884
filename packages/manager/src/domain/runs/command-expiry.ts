import { anyDue, expireDue } from '../../store/commands.js';
import type { Db } from '../../store/db.js';
import { eventsWakeKey, wakeOnCommit } from '../../store/wakeups.js';
import type { DomainHooks } from '../context.js';

/**
 * Expire the commands past their TTL and let their followers (the session, the queue task and
 * its attempt) react in the same transaction, as they do to any other terminal change: an
 * expired command's task shows the outcome without a manual refresh.
 *
 * The probe runs first because this is called on every runner poll and command read; the
 * transaction is only opened when something is due.
 */
export async function expireCommands(
  deps: { db: Db; hooks: Pick<DomainHooks, 'onTerminal'> },
  runId?: string,
): Promise<number> {
  if (!(await anyDue(deps.db, runId))) return 0;
  return deps.db.transaction().execute(async (trx) => {
    const expired = await expireDue(trx, runId);
    // A result long-poll on the run ends at an expiry: its wake-up rides in this transaction.
    for (const run of new Set(expired.map((c) => c.run_id)))
      await wakeOnCommit(trx, eventsWakeKey(run));
    for (const command of expired) {
      await deps.hooks.onTerminal(trx, {
        runId: command.run_id,
        commandId: command.command_id,
        state: 'expired',
        threadId: command.thread_id,
      });
    }
    return expired.length;
  });
}
