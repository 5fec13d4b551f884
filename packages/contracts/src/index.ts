/**
 * Contracts shared by every program: API schemas (TypeBox), failure kinds, event categories,
 * ids, hashing and redaction helpers.
 *
 * Glossary
 * - run: one unit of agent work for a tenant and project; owns commands and events.
 * - command: a durable instruction to the runner of a run (`turn`, `steer`, `interrupt`, `resume`).
 * - event: an append-only fact of a run, ordered by a per-run `seq`.
 * - runner: the process that claims a run (lease), polls its commands and drives the agent.
 * - runner job: one launched runner process (an attempt) for a run.
 * - lease: time-bounded ownership of a run by one runner, extended by heartbeats.
 * - result envelope: the answer to "what happened", aggregated from events at query time.
 */
export * from './failure-kinds.js';
export * from './errors.js';
export * from './redaction.js';
export * from './ids.js';
export * from './hashing.js';
export * from './env.js';
export * from './client.js';
export * from './logging.js';
export * from './repo-address.js';
export * from './schemas/common.js';
export * from './schemas/runs.js';
export * from './schemas/run-listing.js';
export * from './schemas/commands.js';
export * from './schemas/events.js';
export * from './schemas/liveness.js';
export * from './schemas/results.js';
export * from './schemas/runner-api.js';
export * from './schemas/backends.js';
export * from './schemas/runner-jobs.js';
export * from './schemas/sessions.js';
export * from './schemas/profiles.js';
export * from './schemas/queue.js';
export * from './schemas/schedules.js';
export * from './schemas/queue-retry.js';
export * from './secret-patterns.js';
export { isMaskable, secretForms, MIN_SECRET_LENGTH } from './secret-forms.js';
export * from './schemas/scheduler.js';
export { answerInfoFlags, packageVersion, type ProgramInfo } from './program-info.js';
