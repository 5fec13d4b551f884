/**
 * The name of every operation in the OpenAPI document, in one table keyed by method and route
 * URL: operationId, summary, tag, and the error statuses the operation answers beyond the ones
 * every API route shares. The routes keep their schemas; openapi.ts applies this table to the
 * generated document. A route without an entry fails openapi-operations.test.ts.
 */
export type OperationTag =
  'runs' | 'commands' | 'events' | 'runner' | 'sessions' | 'queue' | 'profiles' | 'health';

export interface OperationInfo {
  operationId: string;
  summary: string;
  tag: OperationTag;
  /** Error statuses of this operation besides the common ones (see errorStatuses). */
  errors?: readonly number[];
  /** Body fields the server requires that the body schema leaves optional. */
  requires?: readonly string[];
}

export const TAGS: ReadonlyArray<{ name: OperationTag; description: string }> = [
  { name: 'runs', description: 'Runs of the coding agent, their results and runner Jobs' },
  { name: 'commands', description: 'Commands sent to a run (turns, interrupts) and their results' },
  { name: 'events', description: 'The event log of a run: pages, long-polls and a live stream' },
  {
    name: 'runner',
    description: 'Called by runner Jobs with their own token: claim, lease, polls, acks, status',
  },
  { name: 'sessions', description: 'Sessions: threads that outlive one run, and their storage' },
  { name: 'queue', description: 'The task queue: tasks, attempts, dispatch and the scheduler' },
  { name: 'profiles', description: 'Provider profiles, their credentials, and backends' },
  { name: 'health', description: 'Health, readiness and metrics of this replica' },
];

const op = (
  operationId: string,
  tag: OperationTag,
  summary: string,
  errors: readonly number[] = [],
  requires?: readonly string[],
): OperationInfo => ({ operationId, summary, tag, errors, ...(requires ? { requires } : {}) });

export const OPERATIONS: Readonly<Record<string, OperationInfo>> = {
  'GET /health': op('getHealth', 'health', 'Health of this replica and its edges'),
  'GET /health/live': op('getLiveness', 'health', 'Liveness: the process answers'),
  'GET /health/readiness': op(
    'getReadiness',
    'health',
    'Readiness: store reachable, migrated, not draining',
    [503],
  ),
  'GET /metrics': op('getMetrics', 'health', 'Prometheus metrics of this replica', [401, 500, 503]),

  'POST /api/v1/runs': op('createRun', 'runs', 'Create a run', [403, 409, 424], ['backendProfile']),
  'GET /api/v1/runs': op('listRuns', 'runs', 'List runs, newest first, with filters'),
  'GET /api/v1/runs/:runId': op('getRun', 'runs', 'Read a run'),
  'POST /api/v1/runs/:runId/cancel': op('cancelRun', 'runs', 'Cancel a run', [409]),
  'GET /api/v1/runs/:runId/result': op(
    'getRunResult',
    'runs',
    'The result of a run, waiting up to waitMs for it',
    [429],
  ),
  'POST /api/v1/runs/:runId/runner-jobs': op(
    'createRunnerJob',
    'runs',
    'Start a runner Job for a run',
    [403, 409, 424, 502],
  ),
  'GET /api/v1/runs/:runId/runner-jobs': op(
    'listRunnerJobs',
    'runs',
    'List the runner Jobs of a run',
  ),
  'GET /api/v1/runs/:runId/runner-jobs/:runnerJobId': op(
    'getRunnerJob',
    'runs',
    'Read a runner Job',
  ),

  'POST /api/v1/runs/:runId/commands': op(
    'createCommand',
    'commands',
    'Send a command (turn, interrupt) to a run',
    [409, 413, 424],
  ),
  'GET /api/v1/runs/:runId/commands/:commandId': op('getCommand', 'commands', 'Read a command'),
  'GET /api/v1/runs/:runId/commands/:commandId/result': op(
    'getCommandResult',
    'commands',
    'The result of a command, waiting up to waitMs for it',
    [429],
  ),
  'POST /api/v1/commands/:commandId/cancel': op(
    'cancelCommand',
    'commands',
    'Cancel a command',
    [409],
  ),

  'GET /api/v1/runs/:runId/events': op(
    'listEvents',
    'events',
    'Events of a run after a seq, waiting up to waitMs for the first',
    [429],
  ),
  'GET /api/v1/runs/:runId/events/stream': op(
    'streamEvents',
    'events',
    'Events of a run as Server-Sent Events',
    [429],
  ),

  'POST /api/v1/runners/register': op(
    'registerRunner',
    'runner',
    'Register a runner and its work-ready summary',
    [403, 409],
  ),
  'POST /api/v1/runs/:runId/claim': op(
    'claimRun',
    'runner',
    'Claim the lease of a run',
    [403, 409],
  ),
  'PATCH /api/v1/runs/:runId/lease': op(
    'renewLease',
    'runner',
    'Heartbeat: renew the lease of a run',
    [403, 409],
  ),
  'GET /api/v1/runs/:runId/commands': op(
    'pollCommands',
    'runner',
    'Long-poll the commands of a run after a seq',
    [403, 409],
  ),
  'PATCH /api/v1/runs/:runId/status': op(
    'reportRunStatus',
    'runner',
    'Report the run status',
    [403, 409],
  ),
  'POST /api/v1/runs/:runId/events': op(
    'appendEvents',
    'runner',
    'Append a batch of events',
    [403, 409],
  ),
  'POST /api/v1/commands/:commandId/ack': op(
    'ackCommand',
    'runner',
    'Acknowledge a delivered command',
    [403, 409],
  ),
  'PATCH /api/v1/commands/:commandId/status': op(
    'reportCommandStatus',
    'runner',
    'Report the terminal status of a command',
    [403, 409],
  ),
  'POST /api/v1/sessions/:sessionId/storage/refresh': op(
    'refreshSessionStorage',
    'runner',
    'Record the size of a session volume',
    [403, 409, 410],
  ),

  'POST /api/v1/sessions': op(
    'createSession',
    'sessions',
    'Create a session',
    [403, 409, 424],
    ['backendProfile'],
  ),
  'GET /api/v1/sessions': op('listSessions', 'sessions', 'List sessions'),
  'GET /api/v1/sessions/:sessionId': op('getSession', 'sessions', 'Read a session'),
  'GET /api/v1/sessions/:sessionId/trace': op(
    'getSessionTrace',
    'sessions',
    'The runs and commands of a session',
  ),
  'GET /api/v1/sessions/:sessionId/output': op(
    'getSessionOutput',
    'sessions',
    'The latest output of a session',
  ),
  'POST /api/v1/sessions/:sessionId/read': op(
    'readSession',
    'sessions',
    'Read a session and mark it read',
  ),
  'POST /api/v1/sessions/:sessionId/control': op(
    'controlSession',
    'sessions',
    'Close, reopen or interrupt a session',
    [409],
  ),
  'POST /api/v1/sessions/:sessionId/send': op(
    'sendToSession',
    'sessions',
    'Send a message: a turn on the session thread',
    [403, 409, 410, 424, 502],
  ),
  'GET /api/v1/sessions/:sessionId/storage': op(
    'getSessionStorage',
    'sessions',
    'The volume of a session',
  ),
  'DELETE /api/v1/sessions/:sessionId/storage': op(
    'deleteSessionStorage',
    'sessions',
    'Delete the volume of a session',
    [409],
  ),

  'POST /api/v1/queue/tasks': op('submitTask', 'queue', 'Submit a task', [403, 409]),
  'GET /api/v1/queue/tasks': op('listTasks', 'queue', 'List tasks'),
  'GET /api/v1/queue/tasks/:taskId': op('getTask', 'queue', 'Read a task'),
  'POST /api/v1/queue/tasks/:taskId/cancel': op('cancelTask', 'queue', 'Cancel a task', [409]),
  'POST /api/v1/queue/tasks/:taskId/read': op('readTask', 'queue', 'Read a task and mark it read'),
  'POST /api/v1/queue/tasks/:taskId/dispatch': op(
    'dispatchTask',
    'queue',
    'Dispatch a task now (an attempt)',
    [403, 409, 424, 429, 502],
  ),
  'POST /api/v1/queue/tasks/:taskId/refresh': op(
    'refreshTask',
    'queue',
    'Refresh the state of a task from its attempt',
    [409],
  ),
  'POST /api/v1/queue/tasks/:taskId/retry': op(
    'retryTask',
    'queue',
    'Retry a failed, blocked or cancelled task with a fresh attempt budget',
    [409],
  ),
  'POST /api/v1/queue/tasks/retry': op(
    'retryTasks',
    'queue',
    'Retry the failed tasks matching filters (or list them with dryRun)',
  ),
  'GET /api/v1/queue/tasks/:taskId/judge-runs': op(
    'listJudgeRuns',
    'queue',
    'The judge runs of a task',
  ),
  'GET /api/v1/queue/stats': op('getQueueStats', 'queue', 'Counts of tasks by state and queue'),
  'GET /api/v1/queue/commander': op(
    'getCommanderView',
    'queue',
    'What needs attention: tasks that wait and why',
  ),
  'GET /api/v1/queue/scheduler': op(
    'getScheduler',
    'queue',
    'The scheduler: limits, capacity in use, its loop',
  ),
  'PUT /api/v1/queue/queues/:queue/settings': op(
    'putQueueSettings',
    'queue',
    'Set the limit of a queue, or pause and resume it',
  ),
  'PUT /api/v1/queue/limits': op(
    'putQueueLimits',
    'queue',
    'Set capacity limits and profile start rates at run time',
  ),
  'POST /api/v1/queue/schedules': op(
    'createSchedule',
    'queue',
    'Create a recurring schedule: a task template submitted on each cron tick',
    [403],
  ),
  'GET /api/v1/queue/schedules': op('listSchedules', 'queue', 'List recurring schedules'),
  'GET /api/v1/queue/schedules/:scheduleId': op(
    'getSchedule',
    'queue',
    'Read a schedule with its next run and last task',
  ),
  'DELETE /api/v1/queue/schedules/:scheduleId': op(
    'deleteSchedule',
    'queue',
    'Delete a schedule: it fires no more',
  ),

  'GET /api/v1/backends': op(
    'listBackends',
    'profiles',
    'Backends: provider profiles usable by runs',
  ),
  'GET /api/v1/provider-profiles': op('listProviderProfiles', 'profiles', 'List provider profiles'),
  'GET /api/v1/provider-profiles/:profile': op(
    'getProviderProfile',
    'profiles',
    'Read a provider profile',
  ),
  'DELETE /api/v1/provider-profiles/:profile': op(
    'deleteProviderProfile',
    'profiles',
    'Delete a provider profile and its Secret',
    [403, 409],
  ),
  'GET /api/v1/provider-profiles/:profile/config': op(
    'getProviderProfileConfig',
    'profiles',
    'Read the config.toml of a profile',
  ),
  'PUT /api/v1/provider-profiles/:profile/config': op(
    'putProviderProfileConfig',
    'profiles',
    'Write the config.toml of a profile',
    [403, 409],
  ),
  'PUT /api/v1/provider-profiles/:profile/credential': op(
    'putProviderProfileCredential',
    'profiles',
    'Write the credential of a profile',
    [403, 409],
  ),
  'POST /api/v1/provider-profiles/:profile/validate': op(
    'validateProviderProfile',
    'profiles',
    'Validate a profile against its provider',
    [403, 409, 424, 502],
  ),
  'GET /api/v1/provider-profiles/:profile/validations/:validationId': op(
    'getProfileValidation',
    'profiles',
    'Read a validation of a profile',
  ),
};
