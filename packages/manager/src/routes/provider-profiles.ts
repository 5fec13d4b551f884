import {
  CredentialPutBody,
  ProfileConfig,
  ProfileConfigPutBody,
  ProfileDeleteResponse,
  ProfileList,
  ProfileParams,
  ProfileStatus,
  ProfileWriteResponse,
  Validation,
  ValidationParams,
  ValidationStarted,
} from '@svc/contracts';
import type { Ctx } from '../domain/context.js';
import { getProfileConfig, putProfileConfig } from '../domain/profiles/config-ops.js';
import { putCredential } from '../domain/profiles/credential.js';
import { deleteProfile } from '../domain/profiles/removal.js';
import { assertManageableProfile } from '../domain/profiles/rules.js';
import { listProfileStatuses, profileStatus } from '../domain/profiles/status.js';
import {
  getValidation,
  startValidation,
  type ValidationDeps,
} from '../domain/profiles/validation.js';
import { errors, type App } from './common.js';

const BASE = '/api/v1/provider-profiles';

/**
 * Provider profiles: a server-delegated surface for the business backend (spec/2). Routes do
 * HTTP only; every rule lives in domain/profiles.
 */
export function providerProfileRoutes(app: App, ctx: Ctx, deps: ValidationDeps): void {
  const { secrets } = deps;

  app.get(`${BASE}`, { schema: { response: { 200: ProfileList, ...errors } } }, async () => ({
    profiles: await listProfileStatuses(ctx, secrets),
  }));

  app.get(
    `${BASE}/:profile`,
    { schema: { params: ProfileParams, response: { 200: ProfileStatus, ...errors } } },
    async (request) => {
      assertManageableProfile(request.params.profile);
      return profileStatus(ctx, secrets, request.params.profile);
    },
  );

  app.delete(
    `${BASE}/:profile`,
    { schema: { params: ProfileParams, response: { 200: ProfileDeleteResponse, ...errors } } },
    async (request) => deleteProfile(ctx, secrets, request.params.profile, request.id),
  );

  app.get(
    `${BASE}/:profile/config`,
    { schema: { params: ProfileParams, response: { 200: ProfileConfig, ...errors } } },
    async (request) => getProfileConfig(ctx, secrets, request.params.profile),
  );

  app.put(
    `${BASE}/:profile/config`,
    {
      schema: {
        params: ProfileParams,
        body: ProfileConfigPutBody,
        response: { 200: ProfileWriteResponse, 201: ProfileWriteResponse, ...errors },
      },
    },
    async (request, reply) => {
      const written = await putProfileConfig(
        ctx,
        secrets,
        request.params.profile,
        request.body,
        request.id,
      );
      return reply.code(written.created ? 201 : 200).send(written);
    },
  );

  app.post(
    `${BASE}/:profile/validate`,
    { schema: { params: ProfileParams, response: { 202: ValidationStarted, ...errors } } },
    async (request, reply) =>
      reply.code(202).send(await startValidation(ctx, deps, request.params.profile, request.id)),
  );

  app.get(
    `${BASE}/:profile/validations/:validationId`,
    { schema: { params: ValidationParams, response: { 200: Validation, ...errors } } },
    async (request) => getValidation(ctx, request.params.profile, request.params.validationId),
  );

  app.put(
    `${BASE}/:profile/credential`,
    {
      // The key is taken as sent: one written earlier is a registered secret, and the same key
      // sent again must not arrive as [redacted]. It goes into the Secret and nowhere else.
      config: { secretFields: { apiKey: 'as-sent' } },
      schema: {
        params: ProfileParams,
        body: CredentialPutBody,
        response: { 200: ProfileWriteResponse, 201: ProfileWriteResponse, ...errors },
      },
    },
    async (request, reply) => {
      const written = await putCredential(
        ctx,
        secrets,
        request.params.profile,
        request.body,
        request.id,
      );
      return reply.code(written.created ? 201 : 200).send(written);
    },
  );
}
