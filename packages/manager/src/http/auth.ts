import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ServiceError } from '@svc/contracts';
import { RUNNER_TOKEN_PREFIX } from '../domain/caller-tokens.js';
import { findRunnerCaller, type RunnerCaller } from '../domain/runs/runner-callers.js';
import type { Db } from '../store/db.js';
import type { SandboxPeers } from './sandbox-peer.js';

/** Who is calling: an operator (API key) or one runner Job (its own token). */
export type Caller = { kind: 'operator' } | RunnerCaller;

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * `runner`: a runner Job's token may call this route, for its own run only. Every other
     * route in the API scope is for API keys alone.
     */
    access?: 'runner';
  }
  interface FastifyRequest {
    /** Set by the API scope's authentication; absent outside it. */
    caller?: Caller;
  }
}

export interface AuthSettings {
  apiKeys: readonly string[];
  deploymentMode: 'local' | 'runtime';
  db: Db;
  /** The lease lane's connections: a renewal's or claim's caller is looked up there. */
  leaseDb?: Db;
  /**
   * Without an API key (permissive local mode) and with local runner sandboxes: tells calls
   * from inside a sandbox apart, which then need a credential all the same (sandbox-peer.ts).
   */
  sandboxPeers?: SandboxPeers;
}

const digest = (value: string) => createHash('sha256').update(value).digest();

/**
 * Authentication of the API scope: installed as that scope's hooks, so a route is protected
 * by where it is registered, never by how its URL is spelled. API keys are compared as SHA-256
 * digests with timingSafeEqual against every configured key (no early exit), so neither a
 * key's content nor its length nor which key matched leaks through timing.
 */
export function installAuth(scope: FastifyInstance, settings: AuthSettings): void {
  const keys = settings.apiKeys.map(digest);

  const operatorKey = (token: string | null): ServiceError | undefined => {
    if (keys.length === 0) {
      // Without a key: permissive local self-test mode, unless this is a runtime deployment.
      return settings.deploymentMode === 'runtime'
        ? new ServiceError(
            'auth-missing',
            'the server has no API key configured; a runtime deployment must set SVC_API_KEY',
          )
        : undefined;
    }
    if (token === null)
      return new ServiceError(
        'auth-failed',
        'missing bearer token (Authorization: Bearer <API_KEY>)',
      );
    const given = digest(token);
    let matched = false;
    for (const key of keys) matched = timingSafeEqual(given, key) || matched;
    return matched ? undefined : new ServiceError('auth-failed', 'bearer token rejected');
  };

  scope.addHook('onRequest', async (request) => {
    const token = bearer(request.headers.authorization);
    if (token?.startsWith(RUNNER_TOKEN_PREFIX)) {
      const found = await findRunnerCaller(
        request.routeOptions.config.lane === 'lease'
          ? (settings.leaseDb ?? settings.db)
          : settings.db,
        token,
        request.params as Record<string, unknown>,
      );
      if (!found) throw new ServiceError('auth-failed', 'runner token unknown or expired');
      request.caller = found.caller;
      assertRunnerPath(request, found.caller, found.pathRunId);
      return;
    }
    const refused = operatorKey(token);
    if (refused) throw refused;
    if (keys.length === 0 && (await settings.sandboxPeers?.isSandboxed(request.raw.socket)))
      throw new ServiceError(
        'auth-failed',
        'this manager has no API key, and the call comes from inside a runner sandbox: code a run executes gets no operator access (set SVC_API_KEY, and send it, to call the API from there)',
      );
    request.caller = { kind: 'operator' };
  });

  // A runner route that names its run only in the body (register) is checked once it is parsed.
  scope.addHook('preHandler', (request, _reply, done) => {
    const caller = request.caller;
    try {
      if (caller?.kind === 'runner') assertRunnerBody(request, caller);
      done();
    } catch (error) {
      done(error as Error);
    }
  });
}

/** The token of `Authorization: Bearer <token>`, or null when absent or malformed. */
function bearer(header: string | undefined): string | null {
  if (typeof header !== 'string') return null;
  const match = /^Bearer ([\x21-\x7e]+)$/i.exec(header.trim());
  return match?.[1] ?? null;
}

/** Requests whose run was already matched from their path. */
const matchedByPath = new WeakSet<FastifyRequest>();

/**
 * A runner token: runner routes only, only about its own run, only as its own runner. The path
 * is checked before the body is read (`pathRunId`: the run the path names, read with the
 * caller); a run named only in the body (register) afterwards, by `assertRunnerBody`.
 */
function assertRunnerPath(
  request: FastifyRequest,
  caller: RunnerCaller,
  pathRunId: string | null | undefined,
): void {
  if (request.routeOptions.config.access !== 'runner')
    throw new ServiceError('tenant-policy-denied', 'a runner token may call runner routes only');
  const params = request.params as Record<string, unknown>;
  const sessionId = params['sessionId'];
  if (sessionId !== undefined && (caller.sessionId === null || sessionId !== caller.sessionId))
    throw notItsRun();
  const runId = sessionId !== undefined ? caller.runId : pathRunId;
  if (runId === undefined) return;
  if (runId !== caller.runId) throw notItsRun();
  matchedByPath.add(request);
}

/** The body and query of a runner's request: its own run, runner and job only. */
function assertRunnerBody(request: FastifyRequest, caller: RunnerCaller): void {
  const body = (request.body ?? {}) as Record<string, unknown>;
  const query = (request.query ?? {}) as Record<string, unknown>;
  if (!matchedByPath.has(request) && body['runId'] !== caller.runId) throw notItsRun();
  for (const runnerId of [body['runnerId'], query['runnerId']])
    if (runnerId !== undefined && runnerId !== caller.runnerId)
      throw new ServiceError('tenant-policy-denied', 'a runner token acts as its own runner only');
  if (body['runnerJobId'] !== undefined && body['runnerJobId'] !== caller.runnerJobId)
    throw new ServiceError('tenant-policy-denied', 'a runner token acts for its own job only');
}

const notItsRun = () =>
  new ServiceError('tenant-policy-denied', 'a runner token may act on its own run only');
