import { Type, type Static } from '@sinclair/typebox';
import { Id, Nullable } from './common.js';
import { TERMINAL_COMMAND_STATES } from './commands.js';
import { Run, RUN_ACTIVITIES, RUN_STATES } from './runs.js';

export const RUNS_PAGE_DEFAULT = 50;
export const RUNS_PAGE_MAX = 200;

/** One value of `values`, or several comma-separated. */
const oneOrMore = (values: readonly string[], maxLength = 200) => {
  const one = values.join('|');
  return Type.String({
    pattern: `^(${one})(,(${one}))*$`,
    maxLength,
    description: `one of ${values.join(', ')}, or several comma-separated`,
  });
};

export const RunListQuery = Type.Object(
  {
    tenantId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    projectId: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    /** One state or several, comma-separated (`pending,claimed,running`). */
    state: Type.Optional(oneOrMore(RUN_STATES)),
    /** What the run is doing now (`activity` of the run record); several comma-separated. */
    activity: Type.Optional(oneOrMore(RUN_ACTIVITIES)),
    /** How the run's latest turn ended (`lastCommand.state`, a terminal command state). */
    lastOutcome: Type.Optional(oneOrMore(TERMINAL_COMMAND_STATES)),
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
