import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { FAILURE_KIND_NAMES } from '../failure-kinds.js';

export const PROFILE_SLUG_PATTERN = '^[a-z0-9][a-z0-9-]{0,63}$';
export const BUILTIN_PROFILES = ['builtin-a', 'builtin-b', 'builtin-c', 'builtin-d'] as const;
export type BuiltinProfile = (typeof BUILTIN_PROFILES)[number];

/** Namespace and name prefixes the manager may touch (spec/2, provider profile rule 9). */
export const SECRET_NAMESPACE = 'svc-v01';
export const PROVIDER_SECRET_PREFIX = 'svc-v01-provider-';
export const TOOL_SECRET_PREFIX = 'svc-v01-tool-';

/** A string enum whose static type is the union of its literal values. */
export const StringEnum = <const T extends readonly string[]>(
  values: T,
  options: { description?: string } = {},
) => Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...options });

export const Id = Type.String({ pattern: '^[a-z][a-z0-9]{0,15}-[a-z0-9-]{4,80}$', maxLength: 100 });
export const Slug = Type.String({ pattern: PROFILE_SLUG_PATTERN });
/** Free text that is safe to store: no NUL (PostgreSQL text cannot hold it), bounded. */
export const Text = (maxLength: number, minLength = 1) =>
  Type.String({ minLength, maxLength, pattern: '^[^\\u0000]*$' });
/**
 * A repository address from a caller. Credentials never ride in it (they travel through a
 * SecretRef), so an address with user info (`https://user:pass@host/…`, `https:\\tok@host`,
 * `user:pass@host:path`) is refused by the schema; the scp-like `git@host:path` stays valid.
 */
export const REPO_URL_PATTERN =
  '^(?![\\x00-\\x20]*[A-Za-z][A-Za-z0-9+.-]*:[\\\\/\\t\\n\\r]*[^/\\\\?#@]*@)(?![^/@:]*:[^/@]*@)[^\\u0000]*$';
export const RepoUrl = Type.String({ minLength: 1, maxLength: 2048, pattern: REPO_URL_PATTERN });
export const Timestamp = Type.String({ description: 'ISO 8601 timestamp' });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
export const JsonObject = Type.Record(Type.String(), Type.Unknown());

export const ErrorBody = Type.Object(
  {
    failureKind: StringEnum(FAILURE_KIND_NAMES),
    message: Type.String(),
    traceId: Type.String(),
    details: Type.Optional(JsonObject),
  },
  { $id: 'ErrorBody' },
);
export type ErrorBody = Static<typeof ErrorBody>;

export const SecretRef = Type.Object(
  {
    namespace: Type.Optional(Text(63)),
    name: Text(253),
    keys: Type.Optional(Type.Array(Text(253), { maxItems: 32 })),
  },
  { additionalProperties: false },
);
export type SecretRef = Static<typeof SecretRef>;

/** The same SecretRef as stored and returned: always complete. */
export const SecretRefRecord = Type.Object({
  namespace: Type.String(),
  name: Type.String(),
  keys: Type.Array(Type.String()),
  valuesPrinted: Type.Literal(false),
});
export type SecretRefRecord = Static<typeof SecretRefRecord>;

/**
 * Bounds of numbers a client sends. Event and command seqs are PostgreSQL `integer`s; a larger
 * position is refused by the schema (`schema-invalid`), never passed to a query that fails.
 */
export const INT32_MAX = 2_147_483_647;
/** A `bigint` column's bound as JSON numbers carry it exactly. */
export const SAFE_INT_MAX = Number.MAX_SAFE_INTEGER;
/** A position in a run's event or command log (`afterSeq`). */
export const SeqPosition = Type.Integer({ minimum: 0, maximum: INT32_MAX });

export const PageQuery = (defaultLimit: number, maxLimit: number) =>
  Type.Object(
    {
      afterSeq: Type.Optional(SeqPosition),
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: maxLimit, default: defaultLimit })),
    },
    { additionalProperties: false },
  );
