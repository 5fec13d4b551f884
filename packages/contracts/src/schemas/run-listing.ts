import { Type, type Static } from '@sinclair/typebox';
import { Id, Nullable } from './common.js';
import { Run, RUN_STATES } from './runs.js';

export const RUNS_PAGE_DEFAULT = 50;
export const RUNS_PAGE_MAX = 200;

const stateAlternatives = RUN_STATES.join('|');

export const RunListQuery = Type.Object(
  {
    tenantId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    projectId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    /** One state or several, comma-separated (`pending,claimed,running`). */
    state: Type.Optional(
      Type.String({
        pattern: `^(${stateAlternatives})(,(${stateAlternatives}))*$`,
        maxLength: 200,
        description: `one of ${RUN_STATES.join(', ')}, or several comma-separated`,
      }),
    ),
    backendProfile: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    sessionId: Type.Optional(Id),
    /** Runs created strictly after this instant. */
    createdAfter: Type.Optional(Type.String({ format: 'date-time' })),
    /** Runs created strictly before this instant. */
    createdBefore: Type.Optional(Type.String({ format: 'date-time' })),
    cursor: Type.Optional(Type.String({ maxLength: 300, pattern: '^[A-Za-z0-9_-]+$' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: RUNS_PAGE_MAX })),
  },
  { additionalProperties: false },
);
export type RunListQuery = Static<typeof RunListQuery>;

/** Newest first; `nextCursor` continues after the last run of this page, null on the last page. */
export const RunPage = Type.Object({
  runs: Type.Array(Run),
  nextCursor: Nullable(Type.String()),
});
export type RunPage = Static<typeof RunPage>;
