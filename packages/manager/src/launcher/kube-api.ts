import {
  ApiException,
  BatchV1Api,
  CoreV1Api,
  createConfiguration,
  KubeConfig,
  ServerConfiguration,
  Watch,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import { ServiceError } from '@svc/contracts';
import http from 'node:http';
import https from 'node:https';

/** How the manager reaches the Kubernetes API (config: SVC_KUBE_API_URL, else the default). */
export interface KubeConnection {
  /** An explicit API server URL (tests, or a proxy); null means KUBECONFIG or in-cluster. */
  apiUrl: string | null;
  /** Each request's own time limit (SVC_KUBE_REQUEST_TIMEOUT_MS). */
  requestTimeoutMs?: number;
  /** Further tries after a transient failure (SVC_KUBE_RETRIES). */
  retries?: number;
}

export interface KubeApis {
  core: CoreV1Api;
  batch: BatchV1Api;
  /** Long-lived watches (no per-request time limit: the server's `timeoutSeconds` ends them). */
  watch: Watch;
}

const DEFAULT_TIMEOUT_MS = 10_000;
const DEFAULT_RETRIES = 3;
/** Concurrent connections to the API server per transport (the launch pool is 32 wide). */
const AGENT_MAX_SOCKETS = 64;
/**
 * An idle connection is closed by the client after this long, well before servers and load
 * balancers close theirs (Node's own default is 5 s): a request sent on a connection the
 * server is closing at that moment fails, and a create is never sent twice.
 */
const AGENT_IDLE_MS = 2_000;
const BACKOFF_BASE_MS = 200;
const BACKOFF_MAX_MS = 3_000;

/**
 * API clients for the launcher, the Secret store and the session volumes. Without an explicit
 * URL the default loader applies: KUBECONFIG or ~/.kube/config, else the in-cluster service
 * account. Every call has a time limit and bounded retries (see `disciplined`).
 */
export function createKubeApis(connection: KubeConnection): KubeApis {
  const kc = new KubeConfig();
  if (connection.apiUrl) {
    // The client refuses plain http unless told to skip TLS checks; an http URL has none to
    // skip (a local proxy such as `kubectl proxy`, a test server). https is always verified.
    const plain = new URL(connection.apiUrl).protocol === 'http:';
    kc.loadFromClusterAndUser(
      { name: 'svc', server: connection.apiUrl, skipTLSVerify: plain },
      { name: 'svc' },
    );
  } else {
    kc.loadFromDefault();
  }
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new ServiceError('infra-failed', 'Kubernetes API: no cluster configured');
  const timeoutMs = connection.requestTimeoutMs ?? DEFAULT_TIMEOUT_MS;
  // A request that hangs (API server overloaded, a dropped connection) is aborted.
  const configuration = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    authMethods: { default: kc },
    promiseMiddleware: [
      {
        pre: (context: RequestContext) => {
          context.setSignal(AbortSignal.timeout(timeoutMs));
          reuseConnections(context);
          return Promise.resolve(context);
        },
        post: (context: ResponseContext) => Promise.resolve(context),
      },
    ],
  });
  const retries = connection.retries ?? DEFAULT_RETRIES;
  return {
    core: disciplined(new CoreV1Api(configuration), retries),
    batch: disciplined(new BatchV1Api(configuration), retries),
    watch: new Watch(kc),
  };
}

/**
 * The client builds a new connection agent for every request (a TCP connect, and in a cluster
 * a TLS handshake, per API call). Requests with the same transport settings share one
 * keep-alive agent instead; the credentials travel in headers, set per request as before.
 */
const sharedAgents = new Map<string, http.Agent>();

function reuseConnections(context: RequestContext): void {
  const fresh = context.getAgent();
  // Proxy agents keep their own pooling; only the plain agents the client makes are replaced.
  if (!fresh || (fresh.constructor !== http.Agent && fresh.constructor !== https.Agent)) return;
  const options = (fresh as http.Agent & { options: https.AgentOptions }).options;
  const tls = fresh instanceof https.Agent;
  const key = JSON.stringify([
    tls,
    material(options.ca),
    material(options.cert),
    material(options.key),
    options.rejectUnauthorized ?? null,
    options.servername ?? null,
  ]);
  let agent = sharedAgents.get(key);
  if (!agent) {
    const shared = {
      ...options,
      keepAlive: true,
      maxSockets: AGENT_MAX_SOCKETS,
      timeout: AGENT_IDLE_MS,
    };
    agent = tls ? new https.Agent(shared) : new http.Agent(shared);
    sharedAgents.set(key, agent);
  }
  context.setAgent(agent);
}

/** TLS material (PEM text, buffers, or lists of them) as a key part. */
function material(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (Buffer.isBuffer(value)) return value.toString('latin1');
  if (Array.isArray(value)) return value.map(material).join('\n');
  return JSON.stringify(value);
}

/**
 * Every method of an API client, retried with exponential backoff and jitter on transient
 * failures: 429, 5xx, connection errors, and (except for creates) time-outs. A create that
 * timed out may have been applied, so it is not sent again; refusals (403, 404, 409, 422)
 * are answers, never retried.
 */
function disciplined<T extends object>(api: T, retries: number): T {
  return new Proxy(api, {
    get(target, property, receiver) {
      const value: unknown = Reflect.get(target, property, receiver);
      if (typeof value !== 'function' || typeof property !== 'string') return value;
      const method = value as (...args: unknown[]) => Promise<unknown>;
      const creates = property.startsWith('create');
      return async (...args: unknown[]) => {
        for (let attempt = 0; ; attempt += 1) {
          try {
            return await method.apply(target, args);
          } catch (error) {
            if (attempt >= retries || !transient(error, creates)) throw error;
            const backoff = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** attempt);
            await new Promise((r) => setTimeout(r, backoff / 2 + Math.random() * (backoff / 2)));
          }
        }
      };
    },
  });
}

function transient(error: unknown, creates: boolean): boolean {
  if (error instanceof ApiException) return error.code === 429 || error.code >= 500;
  if (timedOut(error)) return !creates;
  // Transport errors: refused, reset, DNS. A refused connection never reached the server.
  return !creates || /ECONNREFUSED/.test(causeText(error));
}

function timedOut(error: unknown): boolean {
  return /TimeoutError|aborted|AbortError/i.test(causeText(error));
}

function causeText(error: unknown): string {
  const parts: string[] = [];
  let current: unknown = error;
  for (let depth = 0; current && depth < 5; depth += 1) {
    if (current instanceof Error) {
      parts.push(`${current.name} ${current.message} ${(current as { code?: string }).code ?? ''}`);
      current = current.cause;
    } else {
      parts.push(typeof current === 'string' ? current : JSON.stringify(current));
      break;
    }
  }
  return parts.join(' | ');
}

export const isStatus = (error: unknown, code: number): boolean =>
  error instanceof ApiException && error.code === code;

/** The parsed Status body of a refused call, if any. */
function statusBody(error: unknown): { reason?: unknown; message?: unknown } | null {
  if (!(error instanceof ApiException)) return null;
  const body: unknown = error.body;
  try {
    const parsed = (typeof body === 'string' ? JSON.parse(body) : body) as {
      reason?: unknown;
      message?: unknown;
    };
    return parsed && typeof parsed === 'object' ? parsed : null;
  } catch {
    return null;
  }
}

/** The `message` of a Kubernetes Status body, or ''. */
function statusMessage(error: unknown): string {
  const message = statusBody(error)?.message;
  return typeof message === 'string' ? message : '';
}

/** The `reason` of a Kubernetes Status body (AlreadyExists, Conflict, NotFound…), if any. */
export function statusReason(error: unknown): string | null {
  const reason = statusBody(error)?.reason;
  return typeof reason === 'string' ? reason : null;
}

export type KubeRefusal =
  | 'timeout'
  | 'unreachable'
  | 'unauthorized'
  | 'forbidden'
  | 'quota-exceeded'
  | 'admission-denied'
  | 'invalid'
  | 'throttled'
  | 'server-error'
  | 'other';

/** What kind of refusal an API failure is, for an operator to act on. */
export function refusalOf(error: unknown): KubeRefusal {
  if (!(error instanceof ApiException)) return timedOut(error) ? 'timeout' : 'unreachable';
  const message = statusMessage(error);
  if (/exceeded quota|quota/i.test(message)) return 'quota-exceeded';
  if (
    /admission webhook|denied the request|violates PodSecurity|LimitRange|admission/i.test(message)
  )
    return 'admission-denied';
  if (error.code === 401) return 'unauthorized';
  if (error.code === 403) return 'forbidden';
  if (error.code === 422 || error.code === 400) return 'invalid';
  if (error.code === 429) return 'throttled';
  if (error.code >= 500) return 'server-error';
  return 'other';
}

const HINTS: Record<KubeRefusal, string> = {
  timeout: 'the API server did not answer in time',
  unreachable: 'the API server could not be reached',
  unauthorized: "the manager's credentials were not accepted",
  forbidden: "the manager's Role does not allow it (RBAC)",
  'quota-exceeded': "the namespace's ResourceQuota is exhausted",
  'admission-denied': 'an admission policy refused the object',
  invalid: 'the API server refused the object as invalid',
  throttled: 'the API server is throttling requests',
  'server-error': 'the API server failed',
  other: 'the API server refused it',
};

/**
 * A failed API call as a typed error naming the kind of refusal. Only the HTTP status, the
 * Status reason and the Status message (the API server's own words, bounded) are kept: the
 * client's own message embeds response headers, which are not ours to print.
 */
export function kubeFailure(error: unknown, action: string): ServiceError {
  if (error instanceof ServiceError) return error;
  const refusal = refusalOf(error);
  if (error instanceof ApiException) {
    const reason = statusReason(error);
    const said = statusMessage(error).slice(0, 300);
    return new ServiceError(
      'infra-failed',
      `Kubernetes API: ${action} failed with HTTP ${error.code}${reason ? ` ${reason}` : ''}: ` +
        `${HINTS[refusal]}${said ? ` (${said})` : ''}`,
      { httpStatus: error.code, refusal, ...(reason ? { reason } : {}) },
    );
  }
  return new ServiceError('infra-failed', `Kubernetes API: ${action} failed: ${HINTS[refusal]}`, {
    refusal,
  });
}
