import { QUEUE_PAGE_MAX, type Schedule, type SchedulePage } from '@svc/contracts';
import type { Cli, Invocation } from './run.js';
import { UsageError } from './errors.js';
import { intOption, jsonBody, promptText, type JsonSource, type PromptSource } from './inputs.js';

const BASE = '/api/v1/queue/schedules';
const schedulePath = (id: string) => `${BASE}/${encodeURIComponent(id)}`;

interface TemplateFlags extends JsonSource, PromptSource {
  tenantId?: string;
  projectId?: string;
  queue?: string;
  lane?: string;
  title?: string;
  priority?: number;
  backendProfile?: string;
  maxAttempts?: number;
}

/**
 * The task template: the JSON of a `queue submit` body (--json-stdin or --json-file), with the
 * flags given on top of it. Without a JSON body the flags alone make it.
 */
async function template(flags: TemplateFlags): Promise<Record<string, unknown>> {
  const base = (await jsonBody(flags, { required: false, what: 'the task JSON' })) ?? {};
  const promptGiven =
    flags.prompt !== undefined || flags.promptStdin === true || flags.promptFile !== undefined;
  const prompt = promptGiven ? await promptText(flags, flags.jsonStdin === true) : undefined;
  const task: Record<string, unknown> = {
    ...base,
    ...(flags.tenantId !== undefined ? { tenantId: flags.tenantId } : {}),
    ...(flags.projectId !== undefined ? { projectId: flags.projectId } : {}),
    ...(flags.queue !== undefined ? { queue: flags.queue } : {}),
    ...(flags.lane !== undefined ? { lane: flags.lane } : {}),
    ...(flags.title !== undefined ? { title: flags.title } : {}),
    ...(flags.priority !== undefined ? { priority: flags.priority } : {}),
    ...(flags.backendProfile !== undefined ? { backendProfile: flags.backendProfile } : {}),
    ...(flags.maxAttempts !== undefined ? { maxAttempts: flags.maxAttempts } : {}),
  };
  if (prompt !== undefined) task['payload'] = { ...(base['payload'] ?? {}), prompt };
  const missing = ['tenantId', 'projectId', 'queue', 'title'].filter((k) => task[k] === undefined);
  if (task['payload'] === undefined) missing.push('prompt');
  if (missing.length > 0)
    throw new UsageError(
      `the task template lacks ${missing.join(', ')}: give the flags or a task JSON (--json-stdin, --json-file)`,
    );
  return task;
}

const titleOf = (s: Schedule) => (typeof s.task['title'] === 'string' ? s.task['title'] : '');
const lastLine = (s: Schedule) =>
  s.lastTaskId ? `${s.lastRunAt ?? '-'} -> ${s.lastTaskId}` : 'never fired';

function scheduleLines(s: Schedule): string[] {
  return [
    `${s.scheduleId}${s.name ? ` (${s.name})` : ''}`,
    `  cron: ${s.cron}  timezone: ${s.timezone}`,
    `  task: ${s.tenantId}/${s.queue} "${titleOf(s)}"`,
    `  next run: ${s.nextRunAt}`,
    `  last run: ${lastLine(s)} (${s.firedCount} fired)`,
    ...(s.lastError ? [`  last error: ${s.lastError.message} (${s.lastError.at})`] : []),
    ...(s.lastTaskId ? [`  next: queue show ${s.lastTaskId}`] : []),
  ];
}

function printSchedule(inv: Invocation, s: Schedule): void {
  if (inv.config.json) return inv.out.data(s);
  for (const line of scheduleLines(s)) inv.out.line(line);
}

/** `queue schedules ...`: recurring schedules (cron) whose ticks submit a task each. */
export function scheduleCommands(cli: Cli): void {
  const s = cli.program
    .command('schedules')
    .description('recurring schedules: a task submitted on every cron tick');

  s.command('list', { isDefault: true })
    .description('list schedules: id, name, cron, timezone, next run, last task')
    .option('--cursor <cursor>', 'continue after a page')
    .option(
      '--limit <n>',
      `page size (default 50, at most ${QUEUE_PAGE_MAX})`,
      intOption('--limit', QUEUE_PAGE_MAX, 1),
    )
    .action(
      cli.action(async (inv, flags: { cursor?: string; limit?: number }) => {
        const page = await inv.client.request<SchedulePage>('GET', BASE, undefined, {
          query: { cursor: flags.cursor, limit: flags.limit },
        });
        if (inv.config.json) return inv.out.data(page);
        inv.out.line(`${page.schedules.length} schedule(s)`);
        for (const x of page.schedules)
          inv.out.line(
            `${x.scheduleId}  ${x.name ?? '-'}  "${x.cron}"  ${x.timezone}  next ${x.nextRunAt}  last ${x.lastTaskId ?? '-'}`,
          );
        if (page.nextCursor) inv.out.line(`more: queue schedules list --cursor ${page.nextCursor}`);
      }),
    );

  s.command('create')
    .description('create a schedule; the task template comes from flags and/or a task JSON')
    .requiredOption('--cron <expr>', 'five fields: minute hour day-of-month month day-of-week')
    .option('--timezone <zone>', 'IANA time zone of the cron fields (default UTC)')
    .option('--name <name>', 'a name to know it by')
    .option('--json-stdin', 'read the task JSON (a queue submit body) from standard input')
    .option('--json-file <path>', 'read the task JSON from a reusable file')
    .option('--prompt <text>', 'the task prompt')
    .option('--prompt-stdin', 'read the prompt from standard input')
    .option('--prompt-file <path>', 'read the prompt from a file')
    .option('--tenant-id <tenant>', 'tenant of the tasks')
    .option('--project-id <project>', 'project of the tasks')
    .option('--queue <queue>', 'queue of the tasks')
    .option('--lane <lane>', 'lane of the tasks')
    .option('--title <title>', 'title of the tasks')
    .option('--priority <n>', 'priority (-1000 to 1000)', (raw: string) => {
      const n = Number(raw);
      if (!/^-?\d+$/.test(raw) || n < -1000 || n > 1000)
        throw new UsageError('--priority must be a whole number between -1000 and 1000');
      return n;
    })
    .option('--backend-profile <profile>', 'backend profile of the tasks')
    .option('--max-attempts <n>', 'attempts per task (1 to 20)', intOption('--max-attempts', 20, 1))
    .action(
      cli.action(
        async (inv, flags: TemplateFlags & { cron: string; timezone?: string; name?: string }) => {
          const body = {
            cron: flags.cron,
            ...(flags.timezone !== undefined ? { timezone: flags.timezone } : {}),
            ...(flags.name !== undefined ? { name: flags.name } : {}),
            task: await template(flags),
          };
          const created = await inv.client.request<Schedule>('POST', BASE, body);
          if (inv.config.json) return inv.out.data(created);
          inv.out.line(`created ${created.scheduleId}: next run ${created.nextRunAt}`);
          inv.out.line(`  next: queue schedules show ${created.scheduleId}`);
        },
      ),
    );

  s.command('show')
    .description('one schedule: cron, timezone, next run, last task')
    .argument('<scheduleId>')
    .action(
      cli.action(async (inv, id: string) => {
        printSchedule(inv, await inv.client.request<Schedule>('GET', schedulePath(id)));
      }),
    );

  s.command('delete')
    .description('delete a schedule: it fires no more (tasks it made stay)')
    .argument('<scheduleId>')
    .action(
      cli.action(async (inv, id: string) => {
        const deleted = await inv.client.request<Schedule>('DELETE', schedulePath(id));
        if (inv.config.json) return inv.out.data(deleted);
        inv.out.line(`deleted ${deleted.scheduleId}; it fires no more`);
      }),
    );
}
