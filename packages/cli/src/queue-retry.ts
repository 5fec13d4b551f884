import {
  FAILURE_KIND_NAMES,
  RETRY_BULK_DEFAULT,
  RETRY_BULK_MAX,
  RETRYABLE_TASK_STATES,
  type QueuePlan,
  type Task,
  type TaskRetryBulkResponse,
} from '@svc/contracts';
import { UsageError } from './errors.js';
import { choiceOption, choicesOption, intOption, sinceOption } from './inputs.js';
import type { Cli } from './run.js';
import { planLines } from './format/common.js';
import { retryLines, retryBulkLines } from './format/retry.js';

const BASE = '/api/v1/queue';

interface RetryFlags {
  queue?: string;
  state?: string;
  failureKind?: string;
  since?: string;
  limit?: number;
  dryRun?: boolean;
  reason?: string;
  by?: string;
  raw?: boolean;
}

/**
 * `queue retry`: one task by id, or every task a filter names (failed by default). A retried
 * task is queued again with a fresh attempt budget; its earlier attempts stay.
 */
export function addRetryCommand(cli: Cli): void {
  cli.program
    .command('retry')
    .description(
      'queue a failed, blocked or cancelled task again with a fresh attempt budget; without a taskId, every task the filters name',
    )
    .argument('[taskId]', 'the task to retry (or give filters instead)')
    .option('--queue <queue>', 'only tasks of this queue')
    .option(
      '--state <states>',
      `only tasks in these states, comma-separated (${RETRYABLE_TASK_STATES.join(', ')}; default failed)`,
      choicesOption('--state', RETRYABLE_TASK_STATES),
    )
    .option(
      '--failure-kind <kind>',
      "only tasks whose latest attempt failed with this kind (one of the API's failure kinds)",
      choiceOption('--failure-kind', FAILURE_KIND_NAMES),
    )
    .option(
      '--since <time>',
      'only tasks changed after this time: 10:00 (local, its latest occurrence) or an ISO 8601 instant',
      sinceOption('--since'),
    )
    .option(
      '--limit <n>',
      `retry at most this many (default ${RETRY_BULK_DEFAULT}, at most ${RETRY_BULK_MAX})`,
      intOption('--limit', RETRY_BULK_MAX, 1),
    )
    .option('--dry-run', 'print the plan, or list the tasks that would be retried; change nothing')
    .option('--reason <reason>', 'why (kept in the task’s retry history)')
    .option('--by <name>', 'who retries (kept in the history; default: the caller kind)')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(async (inv, taskId: string | undefined, flags: RetryFlags) => {
        const who = {
          ...(flags.reason !== undefined ? { reason: flags.reason } : {}),
          ...(flags.by !== undefined ? { by: flags.by } : {}),
        };
        const filters = [flags.queue, flags.state, flags.failureKind, flags.since, flags.limit];
        const filtered = filters.some((f) => f !== undefined);
        if (taskId !== undefined) {
          if (filtered)
            throw new UsageError(
              'give a taskId or filters (--queue, --state, --failure-kind, --since, --limit), not both',
            );
          const task = await inv.client.request<Task | QueuePlan>(
            'POST',
            `${BASE}/tasks/${encodeURIComponent(taskId)}/retry`,
            { ...who, ...(flags.dryRun ? { dryRun: true } : {}) },
          );
          if (inv.config.json) return inv.out.data(task);
          if ('mutation' in task) {
            for (const line of planLines(task)) inv.out.line(line);
            return;
          }
          if (flags.raw) return inv.out.block(JSON.stringify(task, null, 2));
          for (const line of retryLines(task)) inv.out.line(line);
          return;
        }
        if (!filtered)
          throw new UsageError(
            'give a taskId, or filters to retry many: --queue, --state, --failure-kind, --since (--dry-run lists them first)',
          );
        const answer = await inv.client.request<TaskRetryBulkResponse>(
          'POST',
          `${BASE}/tasks/retry`,
          {
            ...(flags.queue !== undefined ? { queue: flags.queue } : {}),
            ...(flags.state !== undefined ? { state: flags.state.split(',') } : {}),
            ...(flags.failureKind !== undefined ? { failureKind: flags.failureKind } : {}),
            ...(flags.since !== undefined ? { updatedAfter: flags.since } : {}),
            ...(flags.limit !== undefined ? { limit: flags.limit } : {}),
            ...(flags.dryRun ? { dryRun: true } : {}),
            ...who,
          },
        );
        if (inv.config.json) return inv.out.data(answer);
        if (flags.raw) return inv.out.block(JSON.stringify(answer, null, 2));
        for (const line of retryBulkLines(answer)) inv.out.line(line);
      }),
    );
}
