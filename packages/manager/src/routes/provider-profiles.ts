import type { FastifyInstance } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import {
  CredentialPutBody,
  ProfileConfig,
  ProfileConfigPutBody,
  ProfileDeleteResponse,
  ProfileList,
  ProfileParams,
  ProfileStatus,
  ProfileWriteResponse,
  ServiceError,
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

  // The credential route parses its own body: see credentialBodyParser.
  void app.register((scope: FastifyInstance) => {
    scope.removeContentTypeParser('application/json');
    scope.addContentTypeParser(
      'application/json',
      { parseAs: 'string' },
      credentialBodyParser(ctx),
    );
    scope.withTypeProvider<TypeBoxTypeProvider>().put(
      `${BASE}/:profile/credential`,
      {
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
    return Promise.resolve();
  });
}

/**
 * The service redacts every known secret at the door. A key written earlier is known, so the
 * same key sent again would arrive as `[redacted]` and be stored as such: here `apiKey` is
 * taken as sent and registered with the redactor at once, and the rest of the body is
 * redacted as everywhere else.
 */
function credentialBodyParser(ctx: Ctx) {
  return (
    _request: unknown,
    body: string | Buffer,
    done: (err: Error | null, body?: unknown) => void,
  ) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') {
      done(new ServiceError('schema-invalid', 'request body is empty; send a JSON object'));
      return;
    }
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
        done(null, parsed);
        return;
      }
      const { apiKey, ...rest } = parsed as Record<string, unknown>;
      if (typeof apiKey === 'string') ctx.redactor.add(apiKey);
      const redacted = wellFormed(ctx.redactor.redactDeep(rest), 0) as Record<string, unknown>;
      done(null, apiKey === undefined ? redacted : { ...redacted, apiKey });
    } catch {
      done(new ServiceError('schema-invalid', 'request body is not valid JSON'));
    }
  };
}

/** PostgreSQL text cannot hold lone surrogates; deeper input is refused by the schema anyway. */
function wellFormed(value: unknown, depth: number): unknown {
  if (typeof value === 'string') return value.toWellFormed();
  if (depth > 4 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => wellFormed(v, depth + 1));
  return Object.fromEntries(
    Object.entries(value).map(([k, v]) => [k.toWellFormed(), wellFormed(v, depth + 1)]),
  );
}
