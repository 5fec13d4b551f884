import { BackendsResponse, COMMAND_TYPES } from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { knownProfiles } from '../domain/profiles/status.js';
import type { SecretStore } from '../secrets/store.js';
import { errors, type App } from './common.js';

export function backendRoutes(app: App, ctx: Ctx, secrets: SecretStore): void {
  app.get(
    '/api/v1/backends',
    { schema: { response: { 200: BackendsResponse, ...errors } } },
    async () => {
      const profiles = await knownProfiles(secrets);
      const p = ctx.config.policy;
      return {
        backends: [
          {
            backendKind: 'codex-app-server',
            protocol: 'json-rpc',
            transport: 'stdio',
            profiles: profiles.map(({ profile, builtin, configured }) => ({
              profile,
              builtin,
              configured,
            })),
            commandTypes: [...COMMAND_TYPES],
            capabilities: [
              'thread-start',
              'thread-resume',
              'turn',
              'steer',
              'interrupt',
              'idle-budget',
              'session-storage',
            ],
            executionPolicyCeiling: {
              sandbox: p.maxSandbox,
              approval: p.maxApproval,
              network: p.maxNetwork,
              timeoutMs: p.maxTimeoutMs,
              tools: p.allowedTools,
            },
          },
        ],
      };
    },
  );
}
