// The console's only way to the manager: same-origin JSON calls typed from the contracts
// package (types only: nothing of the contracts' server code reaches the browser).
import type {
  SchedulePage,
  Command,
  Commander,
  DispatchResponse,
  EventEnvelope,
  EventPage,
  ProfileList,
  QueueStats,
  ResultEnvelope,
  Run as RunRecord,
  RunnerJobList,
  RunPage as RunPageRecord,
  SendResponse,
  Session,
  SessionPage,
  Task as TaskRecord,
  TaskPage as TaskPageRecord,
  TaskSummary as TaskSummaryRecord,
  Validation,
  ValidationStarted,
  WorkReadySummary,
} from '@svc/contracts';

export type { Command, EventEnvelope, ResultEnvelope, Session };

/** A run with what it is doing (`activity`) and how its latest turn ended (`lastCommand`). */
export type Run = RunRecord;
export type { RunActivity, LastCommand, TaskWaiting } from '@svc/contracts';
/** A task, and a page's task summary, with why it waits (`waiting`). */
export type Task = TaskRecord;
export type TaskSummary = TaskSummaryRecord;

export interface RunFilters {
  tenantId?: string;
  projectId?: string;
  state?: string;
  backendProfile?: string;
  sessionId?: string;
  activity?: string;
  lastOutcome?: string;
  cursor?: string;
  limit?: number;
}

export interface Health {
  status: string;
  ready: boolean;
  serviceId: string;
  store: { kind: string; reachable: boolean };
  auth: { mode: string; apiKeyConfigured: boolean };
  build: { version: string; commit: string };
  extra: { launcher?: string; secretStore?: string; workReady?: WorkReadySummary };
}

/** A failure as the manager reports it, or a transport failure in the same shape. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly failureKind: string,
    message: string,
    readonly traceId: string | null,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

const KEY_STORAGE = 'svc.apiKey';

/** The API key lives for the browser session only (sessionStorage), never in localStorage. */
export const apiKey = {
  get: (): string | null => sessionStorage.getItem(KEY_STORAGE),
  set: (value: string) => sessionStorage.setItem(KEY_STORAGE, value),
  clear: () => sessionStorage.removeItem(KEY_STORAGE),
};

type Listener = (error: ApiError) => void;
const authListeners = new Set<Listener>();
/** Called whenever the manager answers 401, so the shell can ask for a key. */
export function onAuthFailure(listener: Listener): () => void {
  authListeners.add(listener);
  return () => authListeners.delete(listener);
}

export function authHeaders(): Record<string, string> {
  const key = apiKey.get();
  return key ? { authorization: `Bearer ${key}` } : {};
}

type Query = Record<string, string | number | undefined>;

function withQuery(path: string, query: Query | undefined): string {
  if (!query) return path;
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query))
    if (value !== undefined && value !== '') params.set(name, String(value));
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

export async function failureOf(response: Response): Promise<ApiError> {
  let body: { failureKind?: string; message?: string; traceId?: string } = {};
  try {
    body = (await response.json()) as typeof body;
  } catch {
    // not JSON: keep the status line
  }
  const error = new ApiError(
    response.status,
    body.failureKind ?? 'http-error',
    body.message ?? `HTTP ${response.status} ${response.statusText}`,
    body.traceId ?? response.headers.get('x-request-id'),
  );
  if (response.status === 401) for (const listener of authListeners) listener(error);
  return error;
}

export async function request<T>(
  method: 'GET' | 'POST' | 'PUT' | 'DELETE',
  path: string,
  options: { query?: Query; body?: unknown; signal?: AbortSignal } = {},
): Promise<T> {
  let response: Response;
  try {
    response = await fetch(withQuery(path, options.query), {
      method,
      headers: {
        accept: 'application/json',
        ...authHeaders(),
        ...(options.body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(options.body !== undefined && { body: JSON.stringify(options.body) }),
      ...(options.signal && { signal: options.signal }),
    });
  } catch (error) {
    if (options.signal?.aborted) throw error;
    throw new ApiError(0, 'unreachable', 'the manager cannot be reached', null);
  }
  if (!response.ok) throw await failureOf(response);
  return (await response.json()) as T;
}

type RunPage = Omit<RunPageRecord, 'runs'> & { runs: Run[] };
type TaskPage = Omit<TaskPageRecord, 'tasks'> & { tasks: TaskSummary[] };

const enc = encodeURIComponent;
const run = (runId: string) => `/api/v1/runs/${enc(runId)}`;

/** Every call the console makes, one line each. */
export const api = {
  health: () => request<Health>('GET', '/health'),
  listRuns: (filters: RunFilters) =>
    request<RunPage>('GET', '/api/v1/runs', { query: { ...filters } }),
  getRun: (runId: string) => request<Run>('GET', run(runId)),
  cancelRun: (runId: string, reason: string) =>
    request<Run>('POST', `${run(runId)}/cancel`, { body: { reason } }),
  events: (runId: string, afterSeq: number, signal?: AbortSignal, limit = 1000) =>
    request<EventPage>('GET', `${run(runId)}/events`, {
      query: { afterSeq, limit },
      ...(signal && { signal }),
    }),
  getCommand: (runId: string, commandId: string) =>
    request<Command>('GET', `${run(runId)}/commands/${enc(commandId)}`),
  commandResult: (runId: string, commandId: string) =>
    request<ResultEnvelope>('GET', `${run(runId)}/commands/${enc(commandId)}/result`),
  runResult: (runId: string) => request<ResultEnvelope>('GET', `${run(runId)}/result`),
  createCommand: (runId: string, body: { type: string; payload: Record<string, unknown> }) =>
    request<Command>('POST', `${run(runId)}/commands`, { body }),
  runnerJobs: (runId: string) => request<RunnerJobList>('GET', `${run(runId)}/runner-jobs`),
  listSessions: (query: { state?: string; readerId?: string; cursor?: string; limit?: number }) =>
    request<SessionPage>('GET', '/api/v1/sessions', { query }),
  getSession: (sessionId: string, readerId: string) =>
    request<Session>('GET', `/api/v1/sessions/${enc(sessionId)}`, { query: { readerId } }),
  markRead: (sessionId: string, readerId: string) =>
    request<Session>('POST', `/api/v1/sessions/${enc(sessionId)}/read`, { body: { readerId } }),
  sendPrompt: (sessionId: string, prompt: string) =>
    request<SendResponse>('POST', `/api/v1/sessions/${enc(sessionId)}/send`, {
      body: { prompt },
    }),
  listTasks: (query: { queue?: string; state?: string; cursor?: string; limit?: number }) =>
    request<TaskPage>('GET', '/api/v1/queue/tasks', { query }),
  getTask: (taskId: string) => request<Task>('GET', `/api/v1/queue/tasks/${enc(taskId)}`),
  queueStats: () => request<QueueStats>('GET', '/api/v1/queue/stats'),
  commander: (readerId: string) =>
    request<Commander>('GET', '/api/v1/queue/commander', { query: { readerId } }),
  dispatchTask: (taskId: string) =>
    request<DispatchResponse>('POST', `/api/v1/queue/tasks/${enc(taskId)}/dispatch`, {
      body: {},
    }),
  cancelTask: (taskId: string, reason: string) =>
    request<Task>('POST', `/api/v1/queue/tasks/${enc(taskId)}/cancel`, { body: { reason } }),
  retryTask: (taskId: string, reason: string) =>
    request<Task>('POST', `/api/v1/queue/tasks/${enc(taskId)}/retry`, {
      body: reason ? { reason } : {},
    }),
  refreshTask: (taskId: string) =>
    request<Task>('POST', `/api/v1/queue/tasks/${enc(taskId)}/refresh`, { body: {} }),
  schedules: () => request<SchedulePage>('GET', '/api/v1/queue/schedules'),
  profiles: () => request<ProfileList>('GET', '/api/v1/provider-profiles'),
  validateProfile: (profile: string) =>
    request<ValidationStarted>('POST', `/api/v1/provider-profiles/${enc(profile)}/validate`, {
      body: {},
    }),
  validation: (profile: string, validationId: string) =>
    request<Validation>(
      'GET',
      `/api/v1/provider-profiles/${enc(profile)}/validations/${enc(validationId)}`,
    ),
};
