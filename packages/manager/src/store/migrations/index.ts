import type { Migration, MigrationProvider } from 'kysely/migration';
import * as core from './0001-core.js';
import * as runnerJobs from './0002-runner-jobs.js';
import * as sessions from './0003-sessions.js';
import * as providerProfiles from './0004-provider-profiles.js';
import * as queue from './0005-queue.js';
import * as replyIndex from './0006-reply-index.js';
import * as callerTokens from './0007-caller-tokens.js';
import * as sendRequestHash from './0008-send-request-hash.js';
import * as runListing from './0009-run-listing.js';
import * as scheduler from './0010-scheduler.js';
import * as queueCounters from './0014-queue-counters.js';
import * as appendFunction from './0015-append-function.js';
import * as finishFunction from './0016-finish-function.js';
import * as createFunction from './0017-create-function.js';
import * as commanderFunction from './0018-commander-function.js';
import * as eventsWatch from './0019-events-watch.js';
import * as liveRunnerJobs from './0020-live-runner-jobs.js';
import * as appendGroups from './0021-append-groups.js';
import * as runActivity from './0023-run-activity.js';
import * as queueControls from './0024-queue-controls.js';
import * as queueRetry from './0025-queue-retry.js';
import * as queueSchedules from './0026-queue-schedules.js';
import * as eventsRunCheck from './0027-events-run-check.js';

/** Ordered by name; a new migration is a new file added here, never an edit of a landed one. */
const MIGRATIONS: Record<string, Migration> = {
  '0001-core': core,
  '0002-runner-jobs': runnerJobs,
  '0003-sessions': sessions,
  '0004-provider-profiles': providerProfiles,
  '0005-queue': queue,
  '0006-reply-index': replyIndex,
  '0007-caller-tokens': callerTokens,
  '0008-send-request-hash': sendRequestHash,
  '0009-run-listing': runListing,
  '0010-scheduler': scheduler,
  '0014-queue-counters': queueCounters,
  '0015-append-function': appendFunction,
  '0016-finish-function': finishFunction,
  '0017-create-function': createFunction,
  '0018-commander-function': commanderFunction,
  '0019-events-watch': eventsWatch,
  '0020-live-runner-jobs': liveRunnerJobs,
  '0021-append-groups': appendGroups,
  '0023-run-activity': runActivity,
  '0024-queue-controls': queueControls,
  '0025-queue-retry': queueRetry,
  '0026-queue-schedules': queueSchedules,
  '0027-events-run-check': eventsRunCheck,
};

export const MIGRATION_NAMES = Object.keys(MIGRATIONS).sort();

export const migrationProvider: MigrationProvider = {
  getMigrations: () => Promise.resolve(MIGRATIONS),
};
