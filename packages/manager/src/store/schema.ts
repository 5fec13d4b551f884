import type { ColumnType, Generated } from 'kysely';

/**
 * Table types of the manager's store. Column names are the SQL names; store functions map rows
 * to API records, so a column never reaches a response without being named on purpose.
 */
type Timestamp = ColumnType<Date, Date | string, Date | string>;
type Json<T = unknown> = ColumnType<T, string, string>;
/** A timestamp with a database default: optional on insert. */
type DefaultTimestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface RunsTable {
  run_id: string;
  tenant_id: string;
  project_id: string;
  provider_id: string;
  backend_profile: string;
  workspace_ref: Json;
  execution_policy: Json;
  trace_sink: Json | null;
  resource_bundle_ref: Json | null;
  session_ref: Json | null;
  session_id: string | null;
  metadata: Json;
  /** The queue task whose work this run is (an attempt's or its judge's run; 0020). */
  queue_task_id: string | null;
  state: string;
  failure_kind: string | null;
  message: string | null;
  failure_details: Json | null;
  lease_owner: string | null;
  /** SHA-256 of the lease token the current owner's claim received. */
  lease_token_hash: string | null;
  /** Until when a reader waits for this run's events (appends notify only then; 0019). */
  events_watched_until: Timestamp | null;
  lease_expires_at: Timestamp | null;
  lease_epoch: Generated<number>;
  heartbeat_at: Timestamp | null;
  last_activity_at: Timestamp | null;
  last_activity_kind: string | null;
  last_seq: Generated<number>;
  command_seq: Generated<number>;
  latest_command_id: string | null;
  cancel_requested_at: Timestamp | null;
  cancel_reason: string | null;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
  claimed_at: Timestamp | null;
  terminal_at: Timestamp | null;
}

export interface CommandsTable {
  command_id: string;
  run_id: string;
  seq: number;
  type: string;
  state: string;
  idempotency_key: string | null;
  payload_hash: string;
  /** A session send's hash of its whole request (migration 0008); null for other commands. */
  request_hash: string | null;
  payload: Json;
  target_command_id: string | null;
  thread_id: string | null;
  turn_id: string | null;
  runner_id: string | null;
  failure_kind: string | null;
  message: string | null;
  steer_delivery: Json | null;
  cancel_requested_at: Timestamp | null;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
  delivered_at: Timestamp | null;
  confirmed_at: Timestamp | null;
  terminal_at: Timestamp | null;
  expires_at: Timestamp;
  /** Maintained by the event log in the append transaction. */
  event_count: Generated<number>;
  last_event_seq: number | null;
}

export interface EventsTable {
  run_id: string;
  seq: number;
  command_id: string | null;
  category: string;
  name: string | null;
  event_key: string | null;
  observed_at: Timestamp;
  recorded_at: DefaultTimestamp;
  data: Json<Record<string, unknown>>;
}

export interface RunnersTable {
  runner_id: string;
  run_id: string;
  attempt_id: string | null;
  runner_job_id: string | null;
  hostname: string | null;
  pid: number | null;
  version: string | null;
  work_ready: Json | null;
  registered_at: DefaultTimestamp;
  last_seen_at: DefaultTimestamp;
}

export interface RunnerJobsTable {
  runner_job_id: string;
  run_id: string;
  command_id: string;
  attempt_id: string;
  runner_id: string;
  job_name: string;
  namespace: string;
  launcher: string;
  idempotency_key: string | null;
  payload_hash: string;
  image: Json;
  phase: string;
  log_path: string | null;
  pod_identity: string | null;
  transient_env: Json;
  session_pvc: Json | null;
  work_ready: Json | null;
  ttl_seconds_after_finished: number;
  retention: string | null;
  exit_code: number | null;
  terminal_summary: Json | null;
  manager_instance: string | null;
  /** SHA-256 of the job's own runner token (never the token). */
  token_hash: string | null;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
  started_at: Timestamp | null;
  finished_at: Timestamp | null;
  replacement: Generated<boolean>;
}

export interface SessionsTable {
  session_id: string;
  conversation_id: string | null;
  thread_id: string | null;
  profile_threads: ColumnType<Record<string, string>, string | undefined, string>;
  backend_profile: string;
  tenant_id: string;
  project_id: string;
  run_base: Json<Record<string, unknown>>;
  execution_state: string;
  active_run_id: string | null;
  active_command_id: string | null;
  last_run_id: string | null;
  last_command_id: string | null;
  last_outcome: string | null;
  version: Generated<number>;
  storage_kind: string;
  pvc_name: string;
  pvc_namespace: string;
  pvc_phase: string | null;
  storage_size_bytes: number | null;
  storage_files_count: number | null;
  storage_sha256: string | null;
  storage_updated_at: Timestamp | null;
  storage_evicted_at: Timestamp | null;
  expires_at: Timestamp;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
}

export interface SessionReadersTable {
  session_id: string;
  reader_id: string;
  read_version: number;
  read_at: DefaultTimestamp;
}

/** Provider profiles: validations, delegated-change audit, the hash-suffix salt. */
export interface ProviderValidationsTable {
  validation_id: string;
  profile: string;
  status: string;
  failure_kind: string | null;
  message: string | null;
  run_id: string | null;
  command_id: string | null;
  runner_job_id: string | null;
  job_name: string | null;
  secret_resource_version: string | null;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
  finished_at: Timestamp | null;
}

export interface ProviderProfileAuditTable {
  audit_id: string;
  profile: string;
  action: string;
  outcome: string;
  delegated_system: string | null;
  delegated_user_hash: string | null;
  delegated_username_hash: string | null;
  request_id: string | null;
  reason: string | null;
  trace_id: string;
  resource_version: string | null;
  credential_hash_suffix: string | null;
  config_hash_suffix: string | null;
  bridge_sync_done: boolean | null;
  created_at: DefaultTimestamp;
}

export interface ProviderProfileSettingsTable {
  id: number;
  hash_salt: string;
  created_at: DefaultTimestamp;
}

/** The task queue (migration 0005): tasks, attempts with their summaries, readers, judges. */
export interface QueueWatermarkTable {
  id: number;
  change_seq: number;
}

export interface QueueTasksTable {
  task_id: string;
  tenant_id: string;
  project_id: string;
  queue: string;
  lane: string;
  title: string;
  priority: number;
  state: string;
  backend_profile: string;
  provider_id: string;
  workspace_ref: Json<Record<string, unknown>>;
  resource_bundle_ref: Json<Record<string, unknown>> | null;
  session_ref: Json<Record<string, unknown>> | null;
  execution_policy: Json<Record<string, unknown>> | null;
  payload: Json<Record<string, unknown>>;
  payload_hash: string;
  metadata: Json<Record<string, unknown>>;
  summary: string | null;
  max_attempts: number;
  attempt_count: Generated<number>;
  failed_attempts: Generated<number>;
  blocked_attempts: Generated<number>;
  latest_attempt_id: string | null;
  session_id: string | null;
  cancel_reason: string | null;
  version: Generated<number>;
  change_seq: number;
  enqueue_seq: number;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
  terminal_at: Timestamp | null;
  run_after: Timestamp | null;
  retry_policy: Json<Record<string, unknown>> | null;
  judge: Json<Record<string, unknown>> | null;
  retry_note: string | null;
  deferrals: Generated<number>;
  last_refusal: Json<Record<string, unknown>> | null;
  /** The schedule that fired this task, and the tick it was fired for (migration 0026). */
  schedule_id: string | null;
  schedule_tick: Timestamp | null;
  retry_base: Generated<number>;
  retry_count: Generated<number>;
  concurrency_key: string | null;
  concurrency_limit: number | null;
}

/** Recurring schedules (migration 0026): a task template fired on each cron tick. */
export interface QueueSchedulesTable {
  schedule_id: string;
  name: string | null;
  cron: string;
  timezone: string;
  tenant_id: string;
  queue: string;
  template: Json<Record<string, unknown>>;
  next_run_at: Timestamp;
  last_run_at: Timestamp | null;
  last_task_id: string | null;
  fired_count: Generated<number>;
  /** Why the last tick made no task (its template refused at fire time), and when. */
  last_error: string | null;
  last_error_at: Timestamp | null;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
}

export interface QueueTaskRetriesTable {
  retry_id: string;
  task_id: string;
  from_state: string;
  failure_kind: string | null;
  attempts_before: number;
  retried_by: string;
  reason: string | null;
  bulk: Generated<boolean>;
  change_seq: number;
  retried_at: DefaultTimestamp;
}

export interface QueueAttemptsTable {
  attempt_id: string;
  task_id: string;
  retry_index: number;
  state: string;
  session_id: string | null;
  session_origin: string | null;
  thread: string | null;
  run_id: string | null;
  command_id: string | null;
  runner_job_id: string | null;
  terminal_status: string | null;
  failure_kind: string | null;
  message: string | null;
  runner_id: string | null;
  job_name: string | null;
  runner_phase: string | null;
  duration_ms: number | null;
  event_count: number | null;
  last_event_seq: number | null;
  supervisor: Json<Record<string, unknown>> | null;
  supervisor_at: Timestamp | null;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
  started_at: Timestamp | null;
  terminal_at: Timestamp | null;
}

export interface QueueReadCursorsTable {
  reader_id: string;
  task_id: string;
  reader_kind: string;
  queue: string;
  read_version: number;
  read_change_seq: number;
  read_at: DefaultTimestamp;
}

export interface QueueJudgeRunsTable {
  judge_run_id: string;
  task_id: string;
  attempt_id: string | null;
  state: string;
  request: Json<Record<string, unknown>>;
  result: Json<Record<string, unknown>> | null;
  failure_kind: string | null;
  retry_suggestion: string | null;
  verdict: string | null;
  backend_profile: string | null;
  session_id: string | null;
  run_id: string | null;
  command_id: string | null;
  terminal_at: Timestamp | null;
  created_at: DefaultTimestamp;
  updated_at: DefaultTimestamp;
}

export interface QueueSettingsTable {
  queue: string;
  max_running: number | null;
  paused: Generated<boolean>;
  updated_at: DefaultTimestamp;
}

/** Capacity limits and profile start rates set at run time (they override configuration). */
export interface QueueLimitsTable {
  scope: 'global' | 'tenant' | 'profile' | 'profile-rate';
  name: string;
  value: number;
  updated_at: DefaultTimestamp;
}

export interface QueueTaskReferencesTable {
  task_id: string;
  position: number;
  kind: string;
  ref: string;
  url: string | null;
  title: string | null;
}

export interface Database {
  runs: RunsTable;
  commands: CommandsTable;
  events: EventsTable;
  runners: RunnersTable;
  runner_jobs: RunnerJobsTable;
  provider_validations: ProviderValidationsTable;
  provider_profile_audit: ProviderProfileAuditTable;
  provider_profile_settings: ProviderProfileSettingsTable;
  sessions: SessionsTable;
  session_readers: SessionReadersTable;
  queue_watermark: QueueWatermarkTable;
  queue_tasks: QueueTasksTable;
  queue_attempts: QueueAttemptsTable;
  queue_read_cursors: QueueReadCursorsTable;
  queue_judge_runs: QueueJudgeRunsTable;
  queue_task_references: QueueTaskReferencesTable;
  queue_settings: QueueSettingsTable;
  queue_schedules: QueueSchedulesTable;
  queue_task_retries: QueueTaskRetriesTable;
  queue_limits: QueueLimitsTable;
}
