import { isServiceError } from '@svc/contracts';
import { sql } from 'kysely';
import { findCommand } from '../../store/commands.js';
import { isTerminalCommand } from '../runs/commands.js';
import type { Ctx, TerminalChange } from '../context.js';
import type { Tx } from '../../store/runs.js';
import type { QueueDeps } from '../queue/launch.js';
import { runBaseOf } from '../queue/inputs.js';
import { attemptsLeft } from '../queue/budget.js';
import { changeTask, findTask, lockTask } from '../queue/store.js';
import { buildResult } from '../runs/results.js';
import { sendToSession } from '../sessions/send.js';
import { createSession } from '../sessions/sessions.js';
import { newId } from '@svc/contracts';

const REPLY_MAX = 32 * 1024;

interface JudgeSpecRow {
  prompt: string;
  backendProfile: string;
}

/**
 * Judges: when an attempt of a task that names a judge completes, a real agent turn (its own
 * session, the judge's profile) reads the attempt's reply and answers a verdict. The task
 * waits `running` meanwhile. Pass: the task is completed. Fail with a suggestion and attempts
 * left: the task is queued again and the suggestion goes into the next attempt's prompt. Fail
 * otherwise: the task is failed. A judge turn that itself fails leaves the attempt's own
 * outcome standing (the judge run records why).
 */
export async function runJudges(ctx: Ctx, deps: QueueDeps): Promise<void> {
  await startJudges(ctx, deps);
  await finishJudges(ctx);
}

async function startJudges(ctx: Ctx, deps: QueueDeps): Promise<void> {
  const due = await sql<{
    task_id: string;
    attempt_id: string;
    run_id: string;
    command_id: string;
  }>`
    SELECT t.task_id, a.attempt_id, a.run_id, a.command_id FROM queue_tasks t
    JOIN queue_attempts a ON a.attempt_id = t.latest_attempt_id
    WHERE t.judge IS NOT NULL AND a.state = 'completed'
      -- running: the attempt's outcome waits for its judge; completed: written by an older replica
      AND t.state IN ('running', 'completed')
      AND a.run_id IS NOT NULL AND a.command_id IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM queue_judge_runs j WHERE j.attempt_id = a.attempt_id)
      -- The judge takes its task's slot once the attempt's runner has ended (its Job reported
      -- so): the two never run at once, whatever the limit (the Job's end wakes this pass).
      AND NOT EXISTS (SELECT 1 FROM runner_jobs rj
        WHERE rj.run_id = a.run_id AND rj.phase IN ('pending', 'starting', 'running'))
    LIMIT 20`.execute(ctx.db);
  for (const row of due.rows) {
    const task = await findTask(ctx.db, row.task_id);
    if (!task) continue;
    const judge = task.judge as unknown as JudgeSpecRow;
    const result = await buildResult(ctx, row.run_id, { commandId: row.command_id });
    const reply = (result.reply ?? '').slice(0, REPLY_MAX);
    const prompt = judgePrompt(
      judge.prompt,
      typeof task.payload['prompt'] === 'string' ? task.payload['prompt'] : '',
      reply,
    );
    // One judge run per attempt: its id is derived from the attempt, so replicas racing here
    // insert it once.
    const judgeRunId = `jdg-${row.attempt_id.replace(/^att[_-]?/, '')}`;
    const sessionId = newId('ses');
    const claimed = await ctx.db.transaction().execute(async (trx) => {
      const locked = await lockTask(trx, row.task_id);
      if (
        !locked ||
        !['running', 'completed'].includes(locked.state) ||
        locked.latest_attempt_id !== row.attempt_id
      )
        return false;
      const inserted = await trx
        .insertInto('queue_judge_runs')
        .values({
          judge_run_id: judgeRunId,
          task_id: row.task_id,
          attempt_id: row.attempt_id,
          state: 'requested',
          request: JSON.stringify({
            prompt: judge.prompt,
            backendProfile: judge.backendProfile,
            attemptId: row.attempt_id,
            result: `/api/v1/runs/${row.run_id}/commands/${row.command_id}/result`,
            replyBytes: Buffer.byteLength(reply),
          }),
          backend_profile: judge.backendProfile,
          session_id: sessionId,
        })
        .onConflict((oc) => oc.column('judge_run_id').doNothing())
        .returning('judge_run_id')
        .executeTakeFirst();
      if (!inserted) return false;
      await changeTask(trx, row.task_id, { state: 'running', terminal_at: null });
      return true;
    });
    if (!claimed) continue;
    try {
      const runBase = runBaseOf(task);
      await createSession(
        ctx,
        { volumes: deps.volumes },
        {
          sessionId,
          backendProfile: judge.backendProfile,
          runBase,
        },
      );
      const sent = await sendToSession(
        ctx,
        { runnerJobs: deps.runnerJobs },
        sessionId,
        {
          payload: { prompt },
          backendProfile: judge.backendProfile,
          runBase: {
            ...runBase,
            metadata: { ...runBase.metadata, queueTaskId: task.task_id, judgeRunId },
          },
          idempotencyKey: judgeRunId,
        },
        // The judge is its task's work: it takes the task's capacity, one turn.
        { queueTaskId: task.task_id },
      );
      await ctx.db
        .updateTable('queue_judge_runs')
        .set({
          run_id: sent.run!.runId,
          command_id: sent.command!.commandId,
          updated_at: sql`now()`,
        } as never)
        .where('judge_run_id', '=', judgeRunId)
        .execute();
    } catch (error) {
      await decide(ctx, judgeRunId, {
        state: 'failed',
        verdict: null,
        failureKind: isServiceError(error) ? error.failureKind : 'infra-failed',
        result: { message: ctx.redactor.redact(String(error)).slice(0, 500) },
        suggestion: null,
      });
    }
  }
}

/** Whether a terminal change ended a judge's turn (its verdict is then the scheduler's to read). */
export async function judgeTurnEnded(trx: Tx, change: TerminalChange): Promise<boolean> {
  const open = await trx
    .selectFrom('queue_judge_runs')
    .select('judge_run_id')
    .where('state', '=', 'requested')
    .where(change.commandId ? 'command_id' : 'run_id', '=', change.commandId ?? change.runId)
    .executeTakeFirst();
  return open !== undefined;
}

async function finishJudges(ctx: Ctx): Promise<void> {
  const open = await ctx.db
    .selectFrom('queue_judge_runs')
    .selectAll()
    .where('state', '=', 'requested')
    .where('command_id', 'is not', null)
    .limit(50)
    .execute();
  for (const judge of open) {
    const command = await findCommand(ctx.db, judge.command_id!);
    if (!command || !isTerminalCommand(command.state)) continue;
    if (command.state !== 'completed') {
      await decide(ctx, judge.judge_run_id, {
        state: 'failed',
        verdict: null,
        failureKind: command.failure_kind ?? 'backend-failed',
        result: { commandState: command.state, message: command.message },
        suggestion: null,
      });
      continue;
    }
    const result = await buildResult(ctx, judge.run_id!, { commandId: judge.command_id! });
    const verdict = parseVerdict(result.reply ?? '');
    await decide(ctx, judge.judge_run_id, {
      state: verdict ? 'completed' : 'failed',
      verdict: verdict?.verdict ?? null,
      failureKind: verdict ? null : 'schema-invalid',
      result: {
        reply: (result.reply ?? '').slice(0, 4000),
        ...(verdict ? { parsed: verdict } : {}),
      },
      suggestion: verdict?.suggestion ?? null,
    });
  }
}

interface Decision {
  state: 'completed' | 'failed';
  verdict: 'pass' | 'fail' | null;
  failureKind: string | null;
  result: Record<string, unknown>;
  suggestion: string | null;
}

async function decide(ctx: Ctx, judgeRunId: string, decision: Decision): Promise<void> {
  await ctx.db.transaction().execute(async (trx) => {
    const judge = await trx
      .selectFrom('queue_judge_runs')
      .selectAll()
      .where('judge_run_id', '=', judgeRunId)
      .forUpdate()
      .executeTakeFirst();
    if (!judge || judge.state !== 'requested') return;
    await trx
      .updateTable('queue_judge_runs')
      .set({
        state: decision.state,
        verdict: decision.verdict,
        failure_kind: decision.failureKind,
        result: JSON.stringify(decision.result),
        retry_suggestion: decision.suggestion,
        terminal_at: sql`now()`,
        updated_at: sql`now()`,
      } as never)
      .where('judge_run_id', '=', judgeRunId)
      .execute();
    const task = await lockTask(trx, judge.task_id);
    if (!task || task.state !== 'running' || task.latest_attempt_id !== judge.attempt_id) return;
    if (decision.verdict !== 'fail') {
      await changeTask(trx, task.task_id, { state: 'completed', terminal_at: sql`now()` });
    } else if (decision.suggestion && attemptsLeft(task)) {
      await changeTask(trx, task.task_id, {
        state: 'queued',
        retry_note: decision.suggestion,
        run_after: null,
      });
    } else {
      await changeTask(trx, task.task_id, { state: 'failed', terminal_at: sql`now()` });
    }
  });
}

function judgePrompt(instructions: string, taskPrompt: string, reply: string): string {
  return [
    instructions,
    '',
    'The task given to the agent was:',
    taskPrompt,
    '',
    "The agent's final reply was:",
    reply || '(no reply)',
    '',
    'Answer with one line of JSON and nothing else:',
    '{"verdict":"pass"} or {"verdict":"fail","suggestion":"<what the next attempt should do differently>"}',
  ].join('\n');
}

/** The last JSON object in the reply that carries a verdict. */
export function parseVerdict(
  reply: string,
): { verdict: 'pass' | 'fail'; suggestion: string | null } | null {
  const candidates = reply.match(/\{[^{}]*\}/g) ?? [];
  for (const text of candidates.reverse()) {
    try {
      const value = JSON.parse(text) as { verdict?: unknown; suggestion?: unknown };
      if (value.verdict === 'pass' || value.verdict === 'fail')
        return {
          verdict: value.verdict,
          suggestion:
            typeof value.suggestion === 'string' && value.suggestion.trim()
              ? value.suggestion.trim().slice(0, 4000)
              : null,
        };
    } catch {
      // not JSON: keep looking
    }
  }
  return null;
}
