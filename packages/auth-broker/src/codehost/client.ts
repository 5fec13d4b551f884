import { Octokit } from '@octokit/rest';
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

const API_VERSION = '2022-11-28';
/** Failures worth one more attempt: the request may never have reached the code host. */
const RETRIED_REASONS = new Set(['codehost-unreachable', 'codehost-server-error']);
const RETRY_DELAY_MS = 200;

export class CodehostClient {
  readonly #request: RequestFn;
  readonly #credential: CredentialSource;
  readonly #timeoutMs: number;
  readonly #retries: number;

  constructor(options: CodehostClientOptions) {
    const log = options.logger.child({ component: 'codehost' });
    // Retries are a plain loop below rather than @octokit/plugin-retry: the plugin schedules
    // every request through a fresh Bottleneck limiter, which measured ~5 ms per read here.
    const octokit = new Octokit({
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
      // A redirect could carry the credential to another origin; a moved repository is reported.
      request: { redirect: 'manual' },
    });
    this.#request = octokit.request;
    this.#credential = options.credential;
    this.#timeoutMs = options.timeoutMs;
    this.#retries = options.retries;
  }

  /** One GET on an allowlisted route. Failures arrive as BrokerError with the spec's kind. */
  async get(
    route: ReadRoute,
    params: RouteParams,
    calls: UpstreamCall[],
  ): Promise<UpstreamResponse> {
    const authorization = `token ${await this.#credential.resolve()}`;
    const call: UpstreamCall = {
      method: 'GET',
      path: fillPath(route, params),
      status: null,
      attempts: 0,
    };
    calls.push(call);
    for (;;) {
      call.attempts++;
      try {
        const response = await this.#request(route, {
          ...params,
          headers: { authorization, 'x-github-api-version': API_VERSION },
          request: { signal: AbortSignal.timeout(this.#timeoutMs) },
        });
        call.status = response.status;
        // With manual redirects a 3xx arrives as a "success"; it is not one.
        if (response.status >= 300) throw httpLike(response);
        return response;
      } catch (error) {
        const status = (error as { response?: { status?: unknown } }).response?.status;
        call.status = typeof status === 'number' ? status : null;
        const failure = toBrokerError(error);
        if (call.attempts > this.#retries || !RETRIED_REASONS.has(failure.degradedReason))
          throw failure;
        await new Promise((resolve) => setTimeout(resolve, RETRY_DELAY_MS * call.attempts));
      }
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
