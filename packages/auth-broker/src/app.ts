import Fastify, { LogController, type FastifyInstance } from 'fastify';
import type { Env, Redactor } from '@svc/contracts';
import { createAuditSink } from './audit.js';
import { CodehostClient } from './codehost/client.js';
import { createCredentialSource } from './codehost/credential.js';
import type { BrokerConfig } from './config.js';
import { RepoAllowlist } from './domain/repos.js';
import type { WebProbeSentinel } from './features/web-probe-sentinel.js';
import { CallerBoundary } from './http/caller-boundary.js';
import { HostCheck } from './http/host-check.js';
import { registerErrorHandling } from './http/errors.js';
import { registerJsonBody } from './http/json-body.js';
import { registerLifecycle } from './http/lifecycle.js';
import type { Logger } from './logging.js';
import { codehostRoutes } from './routes/codehost.js';
import { healthRoutes } from './routes/health.js';

/** DESIGN "Body limits": the broker accepts at most 256 KiB per request. */
export const BODY_LIMIT_BYTES = 256 * 1024;

export interface AppDeps {
  config: BrokerConfig;
  logger: Logger;
  redactor: Redactor;
  /** Where `env:<NAME>` credential references are read (default process.env). */
  env: Env;
  /** Holder for the sentinel, filled in once the listening address is known. */
  sentinel: () => WebProbeSentinel | null;
}

/** Assemble the HTTP service. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const { config } = deps;
  const app = Fastify({
    loggerInstance: deps.logger,
    // One line per request is written by the lifecycle hooks, with the broker's own fields.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: BODY_LIMIT_BYTES,
    // The peer address decides the caller boundary; forwarded headers are caller-written.
    trustProxy: false,
    // A request without Host reaches the Host check, so its refusal is audited like any other.
    http: { requireHostHeader: false },
    return503OnClosing: true,
    forceCloseConnections: true,
    // The pino instance's own type is narrower than Fastify's default logger type.
  }) as unknown as FastifyInstance;
  const credential = createCredentialSource(
    config.codehost.credential,
    config.codehost.enabled,
    deps.env,
    deps.redactor,
  );
  const allowlist = new RepoAllowlist(config.allowedRepos);
  const boundary = new CallerBoundary(config.trustedCidrs);
  const audit = createAuditSink(config.auditLog, deps.redactor);
  const client = new CodehostClient({
    apiUrl: config.codehost.apiUrl,
    timeoutMs: config.codehost.timeoutMs,
    retries: config.codehost.retries,
    credential,
    logger: deps.logger,
  });

  registerLifecycle(app, {
    boundary,
    hosts: new HostCheck(config.allowedHosts),
    audit,
    redactor: deps.redactor,
    credentialRef: credential.display,
  });
  registerErrorHandling(app);
  registerJsonBody(app);
  healthRoutes(app, {
    credential,
    apiUrl: config.codehost.apiUrl,
    allowlist,
    boundary,
    auditSink: audit.kind,
    get sentinel() {
      return deps.sentinel();
    },
  });
  codehostRoutes(app, { client, credential, allowlist });
  await app.ready();
  return app;
}
