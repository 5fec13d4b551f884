import {
  EVENTS_PAGE_MAX,
  RUN_ACTIVITIES,
  RUN_STATES,
  TERMINAL_COMMAND_STATES,
  RUNS_PAGE_MAX,
  type ApiClient,
  type EventPage,
  type ResultEnvelope,
  type Run,
  type RunPage,
} from '@svc/contracts';
import { stateTone } from './colour.js';
import { choicesOption, instantOption, intOption } from './inputs.js';
import { commandLine, livenessLines, runHead, runLines, runPageLines } from './format/runs.js';
import { Cli } from './run.js';
import { runEvents, runPath, type RunEventFlags } from './runs-follow.js';

interface ListFlags {
  tenant?: string;
  project?: string;
  state?: string;
  activity?: string;
  lastOutcome?: string;
  profile?: string;
  session?: string;
  createdAfter?: string;
  createdBefore?: string;
  cursor?: string;
  limit?: number;
}

/** Event pages `runs show` reads to name a run's commands (the newest are shown). */
const SHOW_EVENT_PAGES = 5;
const SHOW_COMMANDS = 20;

/** The same filters again, for the `more:` hint of a page. */
function nextListCommand(flags: ListFlags, cursor: string): string {
  const parts = ['runs list'];
  const add = (flag: string, value: string | number | undefined) => {
    if (value !== undefined) parts.push(`--${flag} ${value}`);
  };
  add('tenant', flags.tenant);
  add('project', flags.project);
  add('state', flags.state);
  add('activity', flags.activity);
  add('last-outcome', flags.lastOutcome);
  add('profile', flags.profile);
  add('session', flags.session);
  add('created-after', flags.createdAfter);
  add('created-before', flags.createdBefore);
  add('limit', flags.limit);
  parts.push(`--cursor ${cursor}`);
  return parts.join(' ');
}

export function runsProgram(): Cli {
  const cli = new Cli('runs', 'Runs of the agent run service: list, show, events, cancel');
  const p = cli.program;

  p.command('list')
    .description('list runs, newest first')
    .option('--tenant <tenantId>', 'only this tenant')
    .option('--project <projectId>', 'only this project')
    .option(
      '--state <states>',
      `${RUN_STATES.join(', ')}; several comma-separated`,
      choicesOption('--state', RUN_STATES),
    )
    .option(
      '--activity <activities>',
      `what the run does now: ${RUN_ACTIVITIES.join(', ')}; several comma-separated`,
      choicesOption('--activity', RUN_ACTIVITIES),
    )
    .option(
      '--last-outcome <states>',
      `how its latest turn ended: ${TERMINAL_COMMAND_STATES.join(', ')}; several comma-separated`,
      choicesOption('--last-outcome', TERMINAL_COMMAND_STATES),
    )
    .option('--profile <profile>', 'only this backend profile')
    .option('--session <sessionId>', 'only the runs of this session')
    .option(
      '--created-after <time>',
      'created strictly after this ISO 8601 instant',
      instantOption('--created-after'),
    )
    .option(
      '--created-before <time>',
      'created strictly before this ISO 8601 instant',
      instantOption('--created-before'),
    )
    .option('--cursor <cursor>', 'continue after a page (printed as "more:")')
    .option(
      '--limit <n>',
      `page size (default 50, at most ${RUNS_PAGE_MAX})`,
      intOption('--limit', RUNS_PAGE_MAX, 1),
    )
    .action(
      cli.action(async (inv, flags: ListFlags) => {
        const page = await inv.client.request<RunPage>('GET', '/api/v1/runs', undefined, {
          query: {
            tenantId: flags.tenant,
            projectId: flags.project,
            state: flags.state,
            activity: flags.activity,
            lastOutcome: flags.lastOutcome,
            backendProfile: flags.profile,
            sessionId: flags.session,
            createdAfter: flags.createdAfter,
            createdBefore: flags.createdBefore,
            cursor: flags.cursor,
            limit: flags.limit,
          },
        });
        if (inv.config.json) return inv.out.data(page);
        const lines = runPageLines(page, (cursor) => nextListCommand(flags, cursor));
        inv.out.line(lines[0]);
        page.runs.forEach((run, i) => inv.out.line(lines[i + 1], stateTone(run.state)));
        for (const line of lines.slice(page.runs.length + 1)) inv.out.line(line);
      }),
    );

  p.command('show')
    .description('one run: state, liveness, and its commands with their result status')
    .argument('<runId>')
    .action(
      cli.action(async (inv, runId: string) => {
        const run = await inv.client.request<Run>('GET', runPath(runId));
        const latest = await inv.client.request<ResultEnvelope>('GET', runPath(runId, '/result'));
        const commandIds = await commandsOf(inv.client, runId, run.latestCommandId);
        const commands = await Promise.all(
          commandIds.map((id) =>
            inv.client.request<ResultEnvelope>(
              'GET',
              runPath(runId, `/commands/${encodeURIComponent(id)}/result`),
            ),
          ),
        );
        if (inv.config.json) return inv.out.data({ run, liveness: latest.liveness, commands });
        const [head, ...rest] = runLines(run);
        inv.out.line(head, stateTone(run.state));
        for (const line of rest) inv.out.line(line);
        for (const line of livenessLines(latest.liveness)) inv.out.line(line);
        if (commands.length === 0) inv.out.line('  no commands yet');
        for (const c of commands) inv.out.line(commandLine(c), stateTone(c.terminalStatus));
        inv.out.line(`  next: runs events ${runId} --follow`);
      }),
    );

  p.command('events')
    .description("a run's events by seq")
    .argument('<runId>')
    .option('--after <seq>', 'start after this seq', intOption('--after'))
    .option(
      '--limit <n>',
      `events per page (at most ${EVENTS_PAGE_MAX})`,
      intOption('--limit', EVENTS_PAGE_MAX, 1),
    )
    .option(
      '--follow',
      'long-poll for new events until the followed turn (the latest command) is terminal; ' +
        'exit 0 when it completed, 5 when it failed, was blocked or expired, 6 when it was cancelled',
    )
    .action(cli.action((inv, runId: string, flags: RunEventFlags) => runEvents(inv, runId, flags)));

  p.command('cancel')
    .description('cancel a run (its runner stops the agent)')
    .argument('<runId>')
    .option('--reason <reason>', 'why')
    .action(
      cli.action(async (inv, runId: string, flags: { reason?: string }) => {
        const run = await inv.client.request<Run>('POST', runPath(runId, '/cancel'), {
          ...(flags.reason !== undefined ? { reason: flags.reason } : {}),
        });
        if (inv.config.json) return inv.out.data(run);
        inv.out.line(`cancel requested: ${runHead(run)}`, stateTone(run.state));
      }),
    );
  return cli;
}

/**
 * The run's commands, oldest first, as its events name them (there is no command listing for
 * clients): a bounded read of the first pages, plus the latest command.
 */
async function commandsOf(
  client: ApiClient,
  runId: string,
  latest: string | null,
): Promise<string[]> {
  const ids = new Set<string>();
  let after = 0;
  for (let i = 0; i < SHOW_EVENT_PAGES; i++) {
    const page = await client.request<EventPage>('GET', runPath(runId, '/events'), undefined, {
      query: { afterSeq: after, limit: EVENTS_PAGE_MAX },
    });
    for (const event of page.events) if (event.commandId) ids.add(event.commandId);
    if (!page.hasMore || page.nextAfterSeq === null) break;
    after = page.nextAfterSeq;
  }
  if (latest) ids.add(latest);
  return [...ids].slice(-SHOW_COMMANDS);
}
