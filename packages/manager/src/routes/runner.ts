import {
  AckBody,
  ClaimBody,
  ClaimResponse,
  Command,
  CommandStatusBody,
  LeaseBody,
  LeaseResponse,
  PollQuery,
  PollResponse,
  Run,
  RunnerRegisterBody,
  RunnerRegistration,
  RunStatusBody,
  TERMINAL_COMMAND_STATES,
} from '@svc/contracts';
import { ackCommand, reportCommandStatus } from '../domain/runs/commands.js';
import { recordProgressAtOnce } from '../domain/runs/command-progress.js';
import type { Ctx } from '../domain/context.js';
import { reportRunStatus } from '../domain/runs/run-status.js';
import { claimRun, heartbeat, pollCommands, registerRunner } from '../domain/runs/runners.js';
import { ROUTINE } from '../http/request-log.js';
import { LEASE_LANE } from '../http/admission.js';
import { openWaits } from '../metrics/registry.js';
import { eventsWakeKey } from '../store/wakeups.js';
import {
  clientGone,
  CommandParams,
  errors,
  leaseTokenOf,
  RUNNER,
  RunParams,
  type App,
} from './common.js';

/**
 * The runner-facing API: register, claim, heartbeat, poll, ack, command and run status. Each
 * route is open to the runner Job's own token (`RUNNER`), for its own run only.
 */
export function runnerRoutes(app: App, ctx: Ctx): void {
  app.post(
    '/api/v1/runners/register',
    {
      config: RUNNER,
      schema: { body: RunnerRegisterBody, response: { 200: RunnerRegistration, ...errors } },
    },
    async (request) => registerRunner(ctx, request.body),
  );

  app.post(
    '/api/v1/runs/:runId/claim',
    {
      config: { ...RUNNER, ...LEASE_LANE },
      schema: { params: RunParams, body: ClaimBody, response: { 200: ClaimResponse, ...errors } },
    },
    async (request) => claimRun(ctx, request.params.runId, request.body),
  );

  // Heartbeats and polls come every few seconds from every runner: routine request lines.
  // Renewals and claims are the lease lane: served first, never refused for load.
  app.patch(
    '/api/v1/runs/:runId/lease',
    {
      config: { ...RUNNER, ...ROUTINE, ...LEASE_LANE },
      schema: { params: RunParams, body: LeaseBody, response: { 200: LeaseResponse, ...errors } },
    },
    async (request) => heartbeat(ctx, request.params.runId, request.body, leaseTokenOf(request)),
  );

  app.get(
    '/api/v1/runs/:runId/commands',
    {
      config: { ...RUNNER, ...ROUTINE },
      schema: {
        params: RunParams,
        querystring: PollQuery,
        response: { 200: PollResponse, ...errors },
      },
    },
    async (request) => {
      const waiting = (request.query.waitMs ?? 0) > 0;
      if (waiting) openWaits.inc({ kind: 'runner' });
      try {
        return await pollCommands(
          ctx,
          request.params.runId,
          request.query,
          leaseTokenOf(request),
          clientGone(request),
        );
      } finally {
        if (waiting) openWaits.dec({ kind: 'runner' });
      }
    },
  );

  app.patch(
    '/api/v1/runs/:runId/status',
    {
      config: RUNNER,
      schema: { params: RunParams, body: RunStatusBody, response: { 200: Run, ...errors } },
    },
    async (request) =>
      reportRunStatus(ctx, request.params.runId, request.body, leaseTokenOf(request)),
  );

  app.post(
    '/api/v1/commands/:commandId/ack',
    {
      config: RUNNER,
      schema: { params: CommandParams, body: AckBody, response: { 200: Command, ...errors } },
    },
    async (request) =>
      ackCommand(ctx, request.params.commandId, request.body.runnerId, leaseTokenOf(request)),
  );

  app.patch(
    '/api/v1/commands/:commandId/status',
    {
      // The final events it may carry hold agent output, as an append does (U+0000 replaced).
      config: { ...RUNNER, nulInBody: 'replace' },
      schema: {
        params: CommandParams,
        body: CommandStatusBody,
        response: { 200: Command, ...errors },
      },
    },
    async (request) => {
      const { commandId } = request.params;
      const leaseToken = leaseTokenOf(request);
      const progress = await recordProgressAtOnce(ctx, commandId, request.body, leaseToken);
      if (progress) return progress;
      const command = await reportCommandStatus(ctx, commandId, request.body, leaseToken);
      // Committed: this process's result long-polls of the run read the terminal state now,
      // not when the NOTIFY of its events comes back (other replicas still get that NOTIFY).
      if (TERMINAL_COMMAND_STATES.includes(command.state))
        ctx.wakeups.committed(eventsWakeKey(command.runId));
      return command;
    },
  );
}
