import { performance } from 'node:perf_hooks';
import { sanitizeUrl } from '@svc/contracts';
import type { WebProbeSentinelConfig } from './feature-config.js';

/**
 * The web probe sentinel: when enabled, probes a list of health URLs on the configured interval
 * (the first round at start) and keeps the last result per URL. It records only what a probe
 * proves (status, latency, error kind); response bodies are discarded unread.
 */
export interface ProbeResult {
  /** The URL as printed: user info and credential-looking query values removed. */
  url: string;
  ok: boolean;
  status: number | null;
  latencyMs: number;
  checkedAt: string;
  error: ProbeErrorKind | null;
}

export type ProbeErrorKind = 'timeout' | 'connection-failed' | 'http-status';

/** Timer functions; the default is the process clock. Tests pass a manual one. */
export interface SentinelScheduler {
  setInterval(callback: () => void, ms: number): unknown;
  clearInterval(handle: unknown): void;
}

export interface WebProbeSentinelOptions {
  /** `webProbeSentinel` of a loaded FeatureConfig; absent means disabled. */
  config: WebProbeSentinelConfig | undefined;
  urls: readonly string[];
  /** Per-probe timeout; default 10 s, never longer than the interval. */
  timeoutMs?: number;
  scheduler?: SentinelScheduler;
}

const realScheduler: SentinelScheduler = {
  setInterval: (callback, ms) => setInterval(callback, ms).unref(),
  clearInterval: (handle) => clearInterval(handle as NodeJS.Timeout),
};

export class WebProbeSentinel {
  readonly enabled: boolean;
  readonly intervalSeconds: number | null;
  readonly #urls: URL[];
  readonly #timeoutMs: number;
  readonly #scheduler: SentinelScheduler;
  readonly #results = new Map<string, ProbeResult>();
  #timer: unknown = null;
  #round: Promise<ProbeResult[]> | null = null;

  constructor(options: WebProbeSentinelOptions) {
    this.enabled = options.config?.enabled ?? false;
    this.intervalSeconds = options.config?.scheduler.intervalSeconds ?? null;
    const bad = options.urls.filter(
      (u) => !URL.canParse(u) || !/^https?:$/.test(new URL(u).protocol),
    );
    if (bad.length > 0)
      throw new TypeError(
        `web probe sentinel: not http(s) URLs: ${bad.map(sanitizeUrl).join(', ')}`,
      );
    // A probe proves reachability; it has no business carrying credentials.
    const withCredentials = options.urls.filter((u) => new URL(u).username || new URL(u).password);
    if (withCredentials.length > 0)
      throw new TypeError(
        `web probe sentinel: URLs must not carry credentials: ${withCredentials.map(sanitizeUrl).join(', ')}`,
      );
    this.#urls = options.urls.map((u) => new URL(u));
    const intervalMs = (this.intervalSeconds ?? 30) * 1000;
    this.#timeoutMs = Math.min(options.timeoutMs ?? 10_000, intervalMs);
    this.#scheduler = options.scheduler ?? realScheduler;
  }

  get targets(): string[] {
    return this.#urls.map((u) => sanitizeUrl(u.href));
  }

  /** Start probing (first round now). Does nothing when the feature is disabled. */
  start(): void {
    if (!this.enabled || this.#timer !== null || this.intervalSeconds === null) return;
    this.#timer = this.#scheduler.setInterval(() => {
      void this.probeNow();
    }, this.intervalSeconds * 1000);
    void this.probeNow();
  }

  /** Stop the schedule and wait for a round in flight. */
  async stop(): Promise<void> {
    if (this.#timer !== null) this.#scheduler.clearInterval(this.#timer);
    this.#timer = null;
    await this.#round;
  }

  /** One round over every URL; a round still in flight is joined rather than doubled. */
  probeNow(): Promise<ProbeResult[]> {
    this.#round ??= Promise.all(this.#urls.map((url) => this.#probe(url))).finally(() => {
      this.#round = null;
    });
    return this.#round;
  }

  /** The last result per URL, in the order the URLs were given. */
  lastResults(): ProbeResult[] {
    return this.targets.flatMap((url) => {
      const result = this.#results.get(url);
      return result ? [{ ...result }] : [];
    });
  }

  async #probe(url: URL): Promise<ProbeResult> {
    const started = performance.now();
    const checkedAt = new Date().toISOString();
    let result: ProbeResult;
    try {
      const response = await fetch(url, {
        signal: AbortSignal.timeout(this.#timeoutMs),
        redirect: 'manual',
        headers: { accept: 'application/json' },
      });
      // The body is never read: a probe proves reachability, not content.
      await response.body?.cancel().catch(() => undefined);
      const ok = response.status >= 200 && response.status < 300;
      result = {
        url: sanitizeUrl(url.href),
        ok,
        status: response.status,
        latencyMs: elapsed(started),
        checkedAt,
        error: ok ? null : 'http-status',
      };
    } catch (error) {
      const name = (error as Error).name;
      result = {
        url: sanitizeUrl(url.href),
        ok: false,
        status: null,
        latencyMs: elapsed(started),
        checkedAt,
        error: name === 'TimeoutError' || name === 'AbortError' ? 'timeout' : 'connection-failed',
      };
    }
    this.#results.set(result.url, result);
    return result;
  }
}

function elapsed(started: number): number {
  return Math.round((performance.now() - started) * 100) / 100;
}
