import {
  SESSION_LIST_STATES,
  SESSIONS_PAGE_MAX,
  type SendResponse,
  type Session,
  type SessionPage,
} from '@svc/contracts';
import { UsageError } from './errors.js';
import { sessionEvents, type EventFlags } from './follow.js';
import {
  choiceOption,
  intOption,
  jsonBody,
  promptText,
  type JsonSource,
  type PromptSource,
} from './inputs.js';
import { psLines, sendLines, sessionHead, sessionLines } from './format/sessions.js';
import { Cli, type Invocation } from './run.js';

const BASE = '/api/v1/sessions';
const sessionPath = (sessionId: string, action = '') =>
  `${BASE}/${encodeURIComponent(sessionId)}${action ? `/${action}` : ''}`;

function printSession(inv: Invocation, session: Session): void {
  if (inv.config.json) return inv.out.data(session);
  for (const line of sessionLines(session)) inv.out.line(line);
}

export function sessionsProgram(): Cli {
  const cli = new Cli('sessions', 'Sessions of the agent run service: status, send, output, trace');
  const p = cli.program;

  p.command('ps')
    .description('list sessions: by default the running ones and those unread by the reader')
    .option(
      '--state <state>',
      `${SESSION_LIST_STATES.join(', ')} (default: default)`,
      choiceOption('--state', SESSION_LIST_STATES),
    )
    .option('--profile <profile>', 'only this backend profile')
    .option('--reader-id <readerId>', 'whose read cursors decide "unread"')
    .option('--cursor <cursor>', 'continue after a page')
    .option(
      '--limit <n>',
      `page size (default 50, at most ${SESSIONS_PAGE_MAX})`,
      intOption('--limit', SESSIONS_PAGE_MAX, 1),
    )
    .action(
      cli.action(
        async (
          inv,
          flags: {
            state?: string;
            profile?: string;
            readerId?: string;
            cursor?: string;
            limit?: number;
          },
        ) => {
          const page = await inv.client.request<SessionPage>('GET', BASE, undefined, {
            query: {
              state: flags.state,
              backendProfile: flags.profile,
              readerId: flags.readerId,
              cursor: flags.cursor,
              limit: flags.limit,
            },
          });
          if (inv.config.json) return inv.out.data(page);
          for (const line of psLines(page)) inv.out.line(line);
        },
      ),
    );

  p.command('show')
    .description('one session with its liveness and compact supervisor')
    .argument('<sessionId>')
    .option('--reader-id <readerId>', 'show read state for this reader')
    .action(
      cli.action(async (inv, sessionId: string, flags: { readerId?: string }) => {
        printSession(
          inv,
          await inv.client.request<Session>('GET', sessionPath(sessionId), undefined, {
            query: { readerId: flags.readerId },
          }),
        );
      }),
    );

  p.command('send')
    .description('send a prompt; without a sessionId a new session is created from the run base')
    .argument('[sessionId]')
    .option('--json-stdin', 'read the run base JSON from standard input')
    .option('--json-file <path>', 'read the run base JSON from a reusable file')
    .option('--prompt <text>', 'the prompt, inline')
    .option('--prompt-stdin', 'read the prompt from standard input')
    .option('--prompt-file <path>', 'read the prompt from a reusable file')
    .option('--profile <profile>', 'backend profile (a new session needs one)')
    .action(
      cli.action(
        async (
          inv,
          sessionId: string | undefined,
          flags: JsonSource & PromptSource & { profile?: string },
        ) => {
          const runBase = await jsonBody(flags, { required: false, what: 'the run base' });
          const prompt = await promptText(flags, flags.jsonStdin === true);
          let id = sessionId;
          if (!id) {
            if (!runBase)
              throw new UsageError(
                'a new session needs its run base (tenantId, projectId, workspaceRef, providerId): --json-stdin or --json-file',
              );
            if (!flags.profile) throw new UsageError('a new session needs --profile');
            const created = await inv.client.request<Session>('POST', BASE, {
              backendProfile: flags.profile,
              runBase,
            });
            id = created.sessionId;
            if (!inv.config.json) inv.out.line(`created session ${id}  ${created.sessionPath}`);
          }
          const sent = await inv.client.request<SendResponse>('POST', sessionPath(id, 'send'), {
            prompt,
            ...(sessionId && runBase ? { runBase } : {}),
            ...(sessionId && flags.profile ? { backendProfile: flags.profile } : {}),
          });
          if (inv.config.json) return inv.out.data({ ...sent, createdSession: !sessionId });
          for (const line of sendLines(sent)) inv.out.line(line);
        },
      ),
    );

  p.command('cancel')
    .description("cancel the session's active command (or run)")
    .argument('<sessionId>')
    .option('--reason <reason>', 'why')
    .action(
      cli.action(async (inv, sessionId: string, flags: { reason?: string }) => {
        const answer = await inv.client.request<{
          cancelled: { commandId: string | null; runId: string | null };
          session: Session;
        }>('POST', sessionPath(sessionId, 'control'), {
          action: 'cancel',
          ...(flags.reason !== undefined ? { reason: flags.reason } : {}),
        });
        if (inv.config.json) return inv.out.data(answer);
        const what = answer.cancelled.commandId
          ? `command ${answer.cancelled.commandId}`
          : `run ${answer.cancelled.runId ?? '-'}`;
        inv.out.line(`cancelled ${what} of ${sessionId}`);
        inv.out.line(sessionHead(answer.session));
      }),
    );

  for (const kind of ['output', 'trace'] as const) {
    p.command(kind)
      .description(
        kind === 'output'
          ? "the session's output events (assistant text, command output, errors, terminal status)"
          : "every event of the session's run",
      )
      .argument('<sessionId>')
      .option('--after-seq <seq>', 'start after this source seq', intOption('--after-seq'))
      .option('--limit <n>', 'events per page (at most 1000)', intOption('--limit', 1000, 1))
      .option(
        '--follow',
        "keep printing new events until the session's command is terminal; exit 0 when it completed, 5 when it failed or was blocked, 6 when it was cancelled",
      )
      .action(
        cli.action((inv, sessionId: string, flags: EventFlags) =>
          sessionEvents(inv, sessionId, kind, flags),
        ),
      );
  }

  p.command('read')
    .description("mark a session read: it leaves the reader's default list")
    .argument('<sessionId>')
    .requiredOption('--reader-id <readerId>', 'who read it')
    .action(
      cli.action(async (inv, sessionId: string, flags: { readerId: string }) => {
        printSession(
          inv,
          await inv.client.request<Session>('POST', sessionPath(sessionId, 'read'), {
            readerId: flags.readerId,
          }),
        );
      }),
    );
  return cli;
}
