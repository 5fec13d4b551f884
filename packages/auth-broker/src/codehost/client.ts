import { Octokit } from '@octokit/rest';
import { retry } from '@octokit/plugin-retry';
import type { UpstreamCall } from '../audit.js';
import type { Logger } from '../logging.js';
import type { CredentialSource } from './credential.js';
import { toBrokerError } from './errors.js';

/**
 * The only code-host routes the broker can call: GETs, fixed templates, no raw path or URL.
 * Every call is recorded (method, path without query, status) for the audit record.
 */
export type ReadRoute =
  | 'GET /rate_limit'
  | 'GET /repos/{owner}/{repo}'
  | 'GET /repos/{owner}/{repo}/issues'
  | 'GET /repos/{owner}/{repo}/issues/{issue_number}'
  | 'GET /repos/{owner}/{repo}/pulls'
  | 'GET /repos/{owner}/{repo}/pulls/{pull_number}';

export type RouteParams = Record<string, string | number | undefined>;

export interface UpstreamResponse {
  status: number;
  headers: Record<string, string | number | undefined>;
  data: unknown;
}

export interface CodehostClientOptions {
  apiUrl: string;
  timeoutMs: number;
  retries: number;
  credential: CredentialSource;
  logger: Logger;
  userAgent?: string;
}

type RequestFn = (route: string, params: object) => Promise<UpstreamResponse>;

const RetryingOctokit = Octokit.plugin(retry);
const API_VERSION = '2022-11-28';

export class CodehostClient {
  readonly #request: RequestFn;
  readonly #timeoutMs: number;

  constructor(options: CodehostClientOptions) {
    const log = options.logger.child({ component: 'codehost' });
    const octokit = new RetryingOctokit({
      baseUrl: options.apiUrl,
      userAgent: options.userAgent ?? 'svc-auth-broker/0.1.0',
      // Octokit would log to the console; route it through the redacting logger instead. Its
      // per-attempt lines are debug: the broker writes its own line per request.
      log: {
        debug: (message: string) => log.debug(message),
        info: (message: string) => log.debug(message),
        warn: (message: string) => log.warn(message),
        error: (message: string) => log.debug(message),
      },
      retry: {
        retries: options.retries,
        retryAfterBaseValue: 200,
        // Rate limits go back to the caller with a retry hint; holding the request would hide
        // them from the runner's own backoff.
        doNotRetry: [400, 401, 403, 404, 410, 422, 429, 451],
      },
      // A redirect could carry the credential to another origin; a moved repository is reported.
      request: { redirect: 'manual' },
    });
    octokit.hook.before('request', async (requestOptions) => {
      // Runs once per attempt, retries included; the call record rides along in `request`.
      const call = (requestOptions.request as { brokerCall?: UpstreamCall } | undefined)
        ?.brokerCall;
      if (call) call.attempts++;
      requestOptions.headers.authorization = `token ${await options.credential.resolve()}`;
    });
    this.#request = octokit.request;
    this.#timeoutMs = options.timeoutMs;
  }

  /** One GET on an allowlisted route. Failures arrive as BrokerError with the spec's kind. */
  async get(
    route: ReadRoute,
    params: RouteParams,
    calls: UpstreamCall[],
  ): Promise<UpstreamResponse> {
    const call: UpstreamCall = {
      method: 'GET',
      path: fillPath(route, params),
      status: null,
      attempts: 0,
    };
    calls.push(call);
    try {
      const response = await this.#request(route, {
        ...params,
        headers: { 'x-github-api-version': API_VERSION },
        request: { signal: AbortSignal.timeout(this.#timeoutMs), brokerCall: call },
      });
      call.status = response.status;
      // With manual redirects a 3xx arrives as a "success"; it is not one.
      if (response.status >= 300) throw httpLike(response);
      return response;
    } catch (error) {
      const status = (error as { response?: { status?: unknown } }).response?.status;
      if (typeof status === 'number') call.status = status;
      throw toBrokerError(error);
    }
  }
}

/** The REST path for the audit record: template filled, no query. */
export function fillPath(route: ReadRoute, params: RouteParams): string {
  const path = route.slice(route.indexOf(' ') + 1);
  return path.replace(/\{(\w+)\}/g, (_, name: string) =>
    encodeURIComponent(String(params[name] ?? '')),
  );
}

function httpLike(response: UpstreamResponse): Error {
  return Object.assign(new Error(`code host answered ${response.status}`), {
    name: 'HttpError',
    status: response.status,
    response,
  });
}
