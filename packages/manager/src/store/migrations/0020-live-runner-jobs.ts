import { sql, type Kysely } from 'kysely';

const LIVE = sql`phase IN ('pending','starting','running')`;

/**
 * Capacity bounds live runners, and a command has at most one.
 *
 * `runs.queue_task_id` names the queue task whose work a run is (an attempt's run or its
 * judge's): its runner Jobs count against that task's capacity until they have ended, and its
 * runner serves one turn and closes the run. Runs made through the runs or sessions API leave
 * it null. Existing runs of attempts and judges are filled in.
 *
 * One live runner Job per command, enforced by a partial unique index. Duplicates that an
 * earlier version let concurrent creates make are resolved first: the oldest live job of a
 * command stays, the others are marked failed (their tokens die with that, so their runners
 * stop quietly).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE runs ADD COLUMN queue_task_id text`.execute(db);
  await sql`
    UPDATE runs r SET queue_task_id = a.task_id
    FROM queue_attempts a WHERE a.run_id = r.run_id`.execute(db);
  await sql`
    UPDATE runs r SET queue_task_id = j.task_id
    FROM queue_judge_runs j WHERE j.run_id = r.run_id AND r.queue_task_id IS NULL`.execute(db);
  await sql`
    UPDATE runner_jobs j SET phase = 'failed', finished_at = now(), updated_at = now(),
      terminal_summary = jsonb_build_object('reason', 'duplicate-live-job',
        'message', 'another live runner job serves the same command')
    WHERE j.phase IN ('pending','starting','running') AND EXISTS (
      SELECT 1 FROM runner_jobs o
      WHERE o.command_id = j.command_id AND o.phase IN ('pending','starting','running')
        AND (o.created_at, o.runner_job_id) < (j.created_at, j.runner_job_id))`.execute(db);
  await sql`
    CREATE UNIQUE INDEX runner_jobs_live_command_idx ON runner_jobs (command_id)
    WHERE ${LIVE}`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX runner_jobs_live_command_idx`.execute(db);
  await sql`ALTER TABLE runs DROP COLUMN queue_task_id`.execute(db);
}
