import type { FastifyInstance } from 'fastify';
import { sanitizeUrl } from '@svc/contracts';
import type { CredentialSource } from '../codehost/credential.js';
import { CAPABILITIES, OPERATION_NAMES } from '../domain/operations.js';
import type { RepoAllowlist } from '../domain/repos.js';
import type { WebProbeSentinel } from '../features/web-probe-sentinel.js';
import type { CallerBoundary } from '../http/caller-boundary.js';

export interface HealthSources {
  credential: CredentialSource;
  apiUrl: string;
  allowlist: RepoAllowlist;
  boundary: CallerBoundary;
  auditSink: 'file' | 'stdout';
  sentinel: WebProbeSentinel | null;
}

/**
 * Health (spec/1 "Health response"): enough to locate a fault, never a secret. The credential is
 * shown only as its redacted reference and a presence check.
 */
export function healthRoutes(app: FastifyInstance, sources: HealthSources): void {
  app.get('/health', async () => {
    const { credential, sentinel } = sources;
    return {
      ok: true,
      service: 'auth-broker',
      phase: 'p0',
      codehost: {
        configured: credential.configured,
        credentialRef: credential.display,
        credentialKind: credential.kind,
        ready: credential.configured && (await credential.available()),
        apiUrl: sanitizeUrl(sources.apiUrl),
        valuesPrinted: false,
      },
      capabilities: [...CAPABILITIES],
      operations: [...OPERATION_NAMES],
      allowedRepos: sources.allowlist.names,
      callerBoundary: { loopback: true, trustedCidrs: [...sources.boundary.cidrs] },
      audit: { sink: sources.auditSink },
      features: sentinel
        ? {
            webProbeSentinel: {
              enabled: sentinel.enabled,
              intervalSeconds: sentinel.intervalSeconds,
              targets: sentinel.targets,
              lastResults: sentinel.lastResults(),
            },
          }
        : {},
    };
  });
}
