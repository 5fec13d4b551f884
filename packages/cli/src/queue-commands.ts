import {
  QUEUE_PAGE_MAX,
  TASK_STATES,
  type Commander,
  type DispatchResponse,
  type JudgeRunList,
  type QueuePlan,
  type QueueStats,
  type ReadCursor,
  type SchedulerView,
  type Task,
  type TaskPage,
} from '@svc/contracts';
import { Cli, type Invocation } from './run.js';
import { scheduleCommands } from './schedules-commands.js';
import { addRetryCommand } from './queue-retry.js';
import { UsageError } from './errors.js';
import { choiceOption, intOption, jsonBody, type JsonSource } from './inputs.js';
import { planLines } from './format/common.js';
import { queueControls } from './queue-controls.js';
import { commanderLines, statsLines } from './format/overview.js';
import { judgeRunLines, schedulerLines } from './format/scheduler.js';
import {
  boundedTask,
  dispatchLines,
  expandedBlocks,
  pageLines,
  readLines,
  taskLines,
  waitingLine,
} from './format/tasks.js';

const BASE = '/api/v1/queue';

interface ViewFlags {
  full?: boolean;
  raw?: boolean;
}
interface DryRunFlag {
  dryRun?: boolean;
}

const isPlan = (value: unknown): value is QueuePlan =>
  typeof value === 'object' && value !== null && (value as { dryRun?: unknown }).dryRun === true;
const expanded = (v: ViewFlags) => v.full === true || v.raw === true;

/** Print a task: bounded by default, whole with --full or --raw. */
function printTask(inv: Invocation, task: Task, view: ViewFlags): void {
  if (inv.config.json) return inv.out.data(expanded(view) ? task : boundedTask(task));
  if (view.raw) return inv.out.block(JSON.stringify(task, null, 2));
  for (const line of taskLines(task)) inv.out.line(line);
  if (view.full) for (const block of expandedBlocks(task)) inv.out.block(block);
}

function printPlan(inv: Invocation, plan: QueuePlan): void {
  if (inv.config.json) return inv.out.data(plan);
  for (const line of planLines(plan)) inv.out.line(line);
}

const taskPath = (taskId: string, action = '') =>
  `${BASE}/tasks/${encodeURIComponent(taskId)}${action ? `/${action}` : ''}`;

export function queueProgram(): Cli {
  const cli = new Cli('queue', 'The task queue of the agent run service (manager REST API only)');
  const p = cli.program;

  p.command('submit')
    .description('store a task (no run is created); the body comes from standard input or a file')
    .option('--json-stdin', 'read the task JSON from standard input')
    .option('--json-file <path>', 'read the task JSON from a reusable file')
    .option('--dry-run', 'check and print the plan; write nothing')
    .option(
      '--concurrency-key <key>',
      'tasks sharing this key run at most --concurrency-limit attempts at once',
    )
    .option(
      '--concurrency-limit <n>',
      'open attempts allowed per key (default 1; needs --concurrency-key)',
      intOption('--concurrency-limit', 10_000, 1),
    )
    .action(
      cli.action(
        async (
          inv,
          flags: JsonSource & DryRunFlag & { concurrencyKey?: string; concurrencyLimit?: number },
        ) => {
          if (flags.concurrencyLimit !== undefined && flags.concurrencyKey === undefined)
            throw new UsageError('--concurrency-limit needs --concurrency-key');
          const body = (await jsonBody(flags, { required: true, what: 'the task JSON' }))!;
          const answer = await inv.client.request<Task | QueuePlan>('POST', `${BASE}/tasks`, {
            ...body,
            ...(flags.concurrencyKey !== undefined ? { concurrencyKey: flags.concurrencyKey } : {}),
            ...(flags.concurrencyLimit !== undefined
              ? { concurrencyLimit: flags.concurrencyLimit }
              : {}),
            ...(flags.dryRun ? { dryRun: true } : {}),
          });
          if (isPlan(answer)) return printPlan(inv, answer);
          if (inv.config.json) return inv.out.data(boundedTask(answer));
          inv.out.line(
            `submitted ${answer.taskId} (${answer.state}, priority ${answer.priority}) to ${answer.queue}/${answer.lane}`,
          );
          if (answer.waiting) inv.out.line(`  ${waitingLine(answer.waiting)}`);
          inv.out.line(`  next: ${answer.next ?? `queue show ${answer.taskId}`}`);
        },
      ),
    );

  p.command('list')
    .description('list task summaries (bounded); --full or --raw expand payload, bundle, metadata')
    .option('--queue <queue>', 'only this queue')
    .option(
      '--state <state>',
      `only this state (${TASK_STATES.join(', ')})`,
      choiceOption('--state', TASK_STATES),
    )
    .option('--cursor <cursor>', 'continue after a page')
    .option(
      '--limit <n>',
      `page size (default 50, at most ${QUEUE_PAGE_MAX})`,
      intOption('--limit', QUEUE_PAGE_MAX, 1),
    )
    .option(
      '--updated-after <changeSeq>',
      'only tasks changed after this watermark, in change order',
      intOption('--updated-after'),
    )
    .option('--full', 'expand payload, resource bundle and metadata')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(
        async (
          inv,
          flags: ViewFlags & {
            queue?: string;
            state?: string;
            cursor?: string;
            limit?: number;
            updatedAfter?: number;
          },
        ) => {
          const page = await inv.client.request<TaskPage>('GET', `${BASE}/tasks`, undefined, {
            query: {
              queue: flags.queue,
              state: flags.state,
              cursor: flags.cursor,
              limit: flags.limit,
              updatedAfter: flags.updatedAfter,
              view: expanded(flags) ? 'full' : undefined,
            },
          });
          if (inv.config.json) return inv.out.data(page);
          if (flags.raw) return inv.out.block(JSON.stringify(page, null, 2));
          const again = flags.queue ? ` --queue ${flags.queue}` : '';
          for (const line of pageLines(page, again)) inv.out.line(line);
          if (flags.full)
            for (const t of page.tasks)
              if (t.payload) {
                inv.out.line(`${t.taskId}:`);
                for (const block of expandedBlocks(t)) inv.out.block(block);
              }
        },
      ),
    );

  p.command('show')
    .description(
      'one task with its latest attempt, sessionPath and supervisor (no output or trace)',
    )
    .argument('<taskId>')
    .option('--full', 'expand payload, resource bundle and metadata')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(async (inv, taskId: string, flags: ViewFlags) => {
        printTask(inv, await inv.client.request<Task>('GET', taskPath(taskId)), flags);
      }),
    );

  p.command('stats')
    .description('task and attempt counts by queue, lane, state and profile')
    .option('--queue <queue>', 'only this queue')
    .action(
      cli.action(async (inv, flags: { queue?: string }) => {
        const stats = await inv.client.request<QueueStats>('GET', `${BASE}/stats`, undefined, {
          query: { queue: flags.queue },
        });
        if (inv.config.json) return inv.out.data(stats);
        for (const line of statsLines(stats)) inv.out.line(line);
      }),
    );

  p.command('scheduler')
    .description('capacity in use against its limits, backlog per tenant and queue, next wake-up')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(async (inv, flags: { raw?: boolean }) => {
        const view = await inv.client.request<SchedulerView>('GET', `${BASE}/scheduler`);
        if (inv.config.json) return inv.out.data(view);
        if (flags.raw) return inv.out.block(JSON.stringify(view, null, 2));
        for (const line of schedulerLines(view)) inv.out.line(line);
      }),
    );

  queueControls(cli, p);

  p.command('judge-runs')
    .description("a task's judge runs: verdict, failure kind, retry suggestion, attempt judged")
    .argument('<taskId>')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(async (inv, taskId: string, flags: { raw?: boolean }) => {
        const list = await inv.client.request<JudgeRunList>('GET', taskPath(taskId, 'judge-runs'));
        if (inv.config.json) return inv.out.data(list);
        if (flags.raw) return inv.out.block(JSON.stringify(list, null, 2));
        inv.out.line(`${list.judgeRuns.length} judge run(s) for ${list.taskId}`);
        for (const j of list.judgeRuns) for (const line of judgeRunLines(j)) inv.out.line(line);
      }),
    );

  p.command('commander')
    .description('what needs attention first, with the next commands to run')
    .option('--queue <queue>', 'only this queue')
    .option('--reader-id <readerId>', 'count unread tasks for this reader')
    .option(
      '--limit <n>',
      `items (default 50, at most ${QUEUE_PAGE_MAX})`,
      intOption('--limit', QUEUE_PAGE_MAX, 1),
    )
    .option('--full', 'expand payload, resource bundle and metadata')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(
        async (inv, flags: ViewFlags & { queue?: string; readerId?: string; limit?: number }) => {
          const view = await inv.client.request<Commander>('GET', `${BASE}/commander`, undefined, {
            query: {
              queue: flags.queue,
              readerId: flags.readerId,
              limit: flags.limit,
              view: expanded(flags) ? 'full' : undefined,
            },
          });
          if (inv.config.json) return inv.out.data(view);
          if (flags.raw) return inv.out.block(JSON.stringify(view, null, 2));
          for (const line of commanderLines(view)) inv.out.line(line);
          if (flags.full)
            for (const { task: t } of view.items)
              for (const block of expandedBlocks(t)) inv.out.block(`${t.taskId} ${block}`);
        },
      ),
    );

  p.command('read')
    .description("mark a task read for a reader (it leaves that reader's unread count)")
    .argument('<taskId>')
    .requiredOption('--reader-id <readerId>', 'who read it')
    .option('--dry-run', 'print the plan; write nothing')
    .option('--full', 'print the whole answer')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(
        async (inv, taskId: string, flags: ViewFlags & DryRunFlag & { readerId: string }) => {
          const answer = await inv.client.request<ReadCursor | QueuePlan>(
            'POST',
            taskPath(taskId, 'read'),
            {
              readerId: flags.readerId,
              ...(flags.dryRun ? { dryRun: true } : {}),
            },
          );
          if (isPlan(answer)) return printPlan(inv, answer);
          if (inv.config.json || flags.raw || flags.full) return inv.out.data(answer);
          for (const line of readLines(answer)) inv.out.line(line);
        },
      ),
    );

  p.command('cancel')
    .description('cancel a task and the attempt in flight; it accepts no further dispatch')
    .argument('<taskId>')
    .option('--reason <reason>', 'why (kept with the task)')
    .option('--dry-run', 'print the plan; write nothing')
    .option('--full', 'expand payload, resource bundle and metadata')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(
        async (inv, taskId: string, flags: ViewFlags & DryRunFlag & { reason?: string }) => {
          const answer = await inv.client.request<Task | QueuePlan>(
            'POST',
            taskPath(taskId, 'cancel'),
            {
              ...(flags.reason !== undefined ? { reason: flags.reason } : {}),
              ...(flags.dryRun ? { dryRun: true } : {}),
            },
          );
          if (isPlan(answer)) return printPlan(inv, answer);
          printTask(inv, answer, flags);
        },
      ),
    );

  p.command('dispatch')
    .description('start an attempt: session, run, turn and runner Job; returns without waiting')
    .argument('<taskId>')
    .option('--json-stdin', 'read the dispatch JSON (attemptId, runnerJob) from standard input')
    .option('--json-file <path>', 'read the dispatch JSON from a reusable file')
    .option('--dry-run', 'check and print the plan; write nothing')
    .option('--full', 'print the whole answer')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(async (inv, taskId: string, flags: ViewFlags & DryRunFlag & JsonSource) => {
        const body = (await jsonBody(flags, { required: false, what: 'the dispatch JSON' })) ?? {};
        const answer = await inv.client.request<DispatchResponse | QueuePlan>(
          'POST',
          taskPath(taskId, 'dispatch'),
          {
            ...body,
            ...(flags.dryRun ? { dryRun: true } : {}),
          },
        );
        if (isPlan(answer)) return printPlan(inv, answer);
        if (inv.config.json) return inv.out.data(answer);
        if (flags.raw || flags.full) return inv.out.block(JSON.stringify(answer, null, 2));
        for (const line of dispatchLines(answer)) inv.out.line(line);
      }),
    );

  addRetryCommand(cli);

  p.command('refresh')
    .description('write the outcome of the latest attempt from its run and command records')
    .argument('<taskId>')
    .option('--dry-run', 'print what would change; write nothing')
    .option('--full', 'expand payload, resource bundle and metadata')
    .option('--raw', 'print the API answer as it is')
    .action(
      cli.action(async (inv, taskId: string, flags: ViewFlags & DryRunFlag) => {
        const answer = await inv.client.request<Task | QueuePlan>(
          'POST',
          taskPath(taskId, 'refresh'),
          {
            ...(flags.dryRun ? { dryRun: true } : {}),
          },
        );
        if (isPlan(answer)) return printPlan(inv, answer);
        printTask(inv, answer, flags);
      }),
    );

  scheduleCommands(cli);
  return cli;
}
