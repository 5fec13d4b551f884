import type {
  Command,
  EventEnvelope,
  ExecutionPolicy,
  Run,
  SessionRef,
  SteerDelivery,
  WorkspaceRef,
} from '@svc/contracts';
import type { CommandRow } from '../../store/commands.js';
import type { EventRow } from '../../store/events.js';
import { iso, isoRequired } from '../../store/json.js';
import type { RunViewRow } from '../../store/run-view.js';

/** Row -> API record mappers: the only place a column becomes a response field. */
export function toRun(row: RunViewRow, now: Date): Run {
  const expiresAt = row.lease_expires_at;
  return {
    runId: row.run_id,
    tenantId: row.tenant_id,
    projectId: row.project_id,
    providerId: row.provider_id,
    backendProfile: row.backend_profile,
    workspaceRef: row.workspace_ref as WorkspaceRef,
    executionPolicy: row.execution_policy as ExecutionPolicy,
    traceSink: row.trace_sink as Run['traceSink'],
    resourceBundleRef: row.resource_bundle_ref as Run['resourceBundleRef'],
    sessionRef: row.session_ref as SessionRef | null,
    metadata: (row.metadata ?? {}) as Record<string, unknown>,
    state: row.state as Run['state'],
    failureKind: row.failure_kind,
    message: row.message,
    lease: {
      owner: row.lease_owner,
      expiresAt: iso(expiresAt),
      heartbeatAt: iso(row.heartbeat_at),
      expired: expiresAt ? new Date(expiresAt).getTime() <= now.getTime() : false,
      epoch: row.lease_epoch,
    },
    lastSeq: row.last_seq,
    latestCommandId: row.latest_command_id,
    activity: row.activity,
    lastCommand: row.lc_command_id
      ? {
          commandId: row.lc_command_id,
          type: row.lc_type as NonNullable<Run['lastCommand']>['type'],
          state: row.lc_state as NonNullable<Run['lastCommand']>['state'],
          failureKind: row.lc_failure_kind,
          message: row.lc_message,
          endedAt: iso(row.lc_terminal_at),
        }
      : null,
    createdAt: isoRequired(row.created_at),
    updatedAt: isoRequired(row.updated_at),
    claimedAt: iso(row.claimed_at),
    terminalAt: iso(row.terminal_at),
    cancelRequested: row.cancel_requested_at !== null,
  };
}

export function toCommand(row: CommandRow): Command {
  const command: Command = {
    commandId: row.command_id,
    runId: row.run_id,
    seq: row.seq,
    type: row.type as Command['type'],
    state: row.state as Command['state'],
    idempotencyKey: row.idempotency_key,
    payloadHash: row.payload_hash,
    payload: row.payload as Record<string, unknown>,
    targetCommandId: row.target_command_id,
    threadId: row.thread_id,
    turnId: row.turn_id,
    runnerId: row.runner_id,
    failureKind: row.failure_kind,
    message: row.message,
    cancelRequested: row.cancel_requested_at !== null,
    createdAt: isoRequired(row.created_at),
    deliveredAt: iso(row.delivered_at),
    confirmedAt: iso(row.confirmed_at),
    terminalAt: iso(row.terminal_at),
    expiresAt: isoRequired(row.expires_at),
  };
  if (row.type === 'steer') command.steerDelivery = steerDeliveryOf(row);
  return command;
}

/** Steer delivery as far as the command row knows; results add "later target events seen". */
export function steerDeliveryOf(row: CommandRow, laterTargetEventsSeen = false): SteerDelivery {
  const reported = (row.steer_delivery ?? {}) as Partial<SteerDelivery>;
  return {
    targetCommandId: row.target_command_id,
    acknowledged: row.confirmed_at !== null,
    forwarded: reported.forwarded ?? false,
    accepted: reported.accepted ?? false,
    targetTurnId: reported.targetTurnId ?? null,
    laterTargetEventsSeen,
    message: reported.message ?? null,
  };
}

export function toEvent(row: EventRow): EventEnvelope {
  return {
    eventId: `${row.run_id}:${row.seq}`,
    runId: row.run_id,
    seq: row.seq,
    commandId: row.command_id,
    category: row.category as EventEnvelope['category'],
    name: row.name,
    observedAt: isoRequired(row.observed_at),
    data: row.data,
  };
}
