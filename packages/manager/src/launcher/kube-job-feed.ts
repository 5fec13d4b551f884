import type { V1Job } from '@kubernetes/client-node';
import type { Logger } from '../logging.js';
import { kubeFailure, type KubeApis } from './kube-api.js';
import { runnerSelector } from './kube-labels.js';

export type JobChange = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface JobFeedHandlers {
  /** Every runner Job of the namespace, after each list. */
  snapshot(jobs: V1Job[]): void;
  /** One Job changed, as the watch reported it. */
  change(type: JobChange, job: V1Job): void;
}

export interface JobFeedOptions {
  apis: Pick<KubeApis, 'batch' | 'watch'>;
  namespace: string;
  /** A full list this often even while the watch is healthy (the safety net). */
  resyncMs: number;
  /** The wait before listing again when the API is unavailable or refuses to watch. */
  retryMs: number;
  logger: Logger;
}

const RETRY_MAX_MS = 30_000;

/**
 * Runner Job status by list-then-watch, as Kubernetes controllers read it: one list gives every
 * Job and a resourceVersion, then one long watch from that version carries each change as it
 * happens. A list costs the API server a read of every Job; a watch costs it nothing while
 * nothing changes, so a fleet of idle runners no longer means a list every few seconds.
 *
 * The watch ends on its own every `resyncMs` (and whenever the server closes it, restarts, or
 * answers 410 Gone for a version it no longer keeps); the feed then lists again and watches from
 * the new version. A server that refuses to watch leaves the feed listing every `retryMs`, the
 * polling this replaced, with the same results.
 */
export class JobFeed {
  #closed = false;
  #abort: AbortController | null = null;
  #wake: (() => void) | null = null;
  /** Ends the watch under way (close must not wait for the server to answer or end it). */
  #endWatch: (() => void) | null = null;
  #loop: Promise<void> | null = null;

  constructor(private readonly options: JobFeedOptions) {}

  start(handlers: JobFeedHandlers, afterFirstList: () => Promise<void>): void {
    this.#loop = this.#run(handlers, afterFirstList);
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#abort?.abort();
    this.#endWatch?.();
    this.#wake?.();
    await this.#loop;
  }

  async #run(handlers: JobFeedHandlers, afterFirstList: () => Promise<void>): Promise<void> {
    let failures = 0;
    let first = true;
    while (!this.#closed) {
      let version: string | undefined;
      try {
        const list = await this.options.apis.batch.listNamespacedJob({
          namespace: this.options.namespace,
          labelSelector: runnerSelector(),
        });
        version = list.metadata?.resourceVersion;
        handlers.snapshot(list.items);
      } catch (error) {
        failures += 1;
        this.options.logger.warn(
          { err: kubeFailure(error, 'list Jobs').message },
          'runner Job status unavailable; retrying',
        );
        await this.#sleep(this.#backoff(failures));
        continue;
      }
      if (first) {
        first = false;
        await afterFirstList();
      }
      const outcome = await this.#watch(version, handlers);
      if (outcome === 'refused') {
        failures += 1;
        await this.#sleep(this.#backoff(failures));
      } else failures = 0;
    }
  }

  /** One watch, until it ends: `ended` to list again at once, `refused` to wait first. */
  #watch(version: string | undefined, handlers: JobFeedHandlers): Promise<'ended' | 'refused'> {
    if (this.#closed) return Promise.resolve('ended');
    return new Promise((resolve) => {
      let settled = false;
      let delivered = false;
      const started = Date.now();
      const finish = (outcome: 'ended' | 'refused', error?: unknown) => {
        if (settled) return;
        settled = true;
        this.#endWatch = null;
        clearTimeout(timer);
        this.#abort?.abort();
        this.#abort = null;
        if (error && !this.#closed)
          this.options.logger.debug(
            { err: error instanceof Error ? error.message : JSON.stringify(error) },
            'runner Job watch ended; listing again',
          );
        resolve(outcome);
      };
      // The server ends the watch at the resync time; the client makes sure of it.
      const timer = setTimeout(() => finish('ended'), this.options.resyncMs + 5_000);
      timer.unref();
      this.#endWatch = () => finish('ended');
      const path = `/apis/batch/v1/namespaces/${this.options.namespace}/jobs`;
      this.options.apis.watch
        .watch(
          path,
          {
            labelSelector: runnerSelector(),
            resourceVersion: version,
            timeoutSeconds: Math.max(1, Math.round(this.options.resyncMs / 1000)),
            allowWatchBookmarks: true,
          },
          (type: string, object: unknown) => {
            delivered = true;
            if (type === 'ERROR') return finish('ended', new Error(statusMessage(object)));
            if (type === 'ADDED' || type === 'MODIFIED' || type === 'DELETED')
              handlers.change(type, asJob(object));
          },
          // A watch that failed, or closed at once, before delivering anything was refused (or
          // the server is down): wait before listing again rather than spin.
          (error: unknown) =>
            finish(
              !delivered && (error || Date.now() - started < 1000) ? 'refused' : 'ended',
              error,
            ),
        )
        .then(
          (controller) => {
            if (settled) controller.abort();
            else this.#abort = controller;
          },
          (error: unknown) => finish('refused', error),
        );
    });
  }

  #backoff(failures: number): number {
    const base = Math.min(RETRY_MAX_MS, this.options.retryMs * 2 ** Math.min(failures - 1, 8));
    return base / 2 + Math.random() * (base / 2);
  }

  #sleep(ms: number): Promise<void> {
    if (this.#closed) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.#wake = done;
    });
  }
}

/**
 * A watch delivers plain JSON; the launcher reads Jobs as the typed client returns them, whose
 * timestamps are Dates.
 */
function asJob(object: unknown): V1Job {
  const job = object as V1Job & { metadata?: { creationTimestamp?: unknown } };
  const created = job.metadata?.creationTimestamp;
  if (typeof created === 'string')
    return { ...job, metadata: { ...job.metadata, creationTimestamp: new Date(created) } };
  return job;
}

function statusMessage(object: unknown): string {
  const status = object as { code?: number; message?: string } | null;
  return `watch error ${status?.code ?? ''}: ${status?.message ?? 'unknown'}`;
}
