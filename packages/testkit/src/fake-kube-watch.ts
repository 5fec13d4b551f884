import type { ServerResponse } from 'node:http';
import {
  KubeStatusError,
  matchesSelector,
  type KubeObject,
  type Requirement,
} from './fake-kube-objects.js';

export type WatchType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface Change {
  revision: number;
  type: WatchType;
  resource: string;
  namespace: string;
  object: KubeObject;
}

interface Watcher {
  resource: string;
  namespace: string;
  requirements: Requirement[];
  res: ServerResponse;
}

/** How many changes the fake keeps for watches that resume from a resourceVersion. */
const HISTORY = 10_000;

/**
 * The watch side of the fake API server, as the real one serves `?watch=1`: a 200 response that
 * stays open and carries one JSON line per change, `{"type":"ADDED|MODIFIED|DELETED","object":…}`.
 * From a `resourceVersion` the changes after it are replayed first; from one older than what
 * is kept, a single `ERROR` line with a 410 Gone Status ends the watch (the client lists again).
 * Without one, the current objects come first as ADDED. `timeoutSeconds` ends a watch, as the
 * server's own timeout would.
 */
export class WatchHub {
  readonly #history: Change[] = [];
  readonly #watchers = new Set<Watcher>();
  /** Changes at or below this revision are no longer kept. */
  #compactedThrough = 0;

  record(change: Change): void {
    this.#history.push(change);
    if (this.#history.length > HISTORY) this.#compactedThrough = this.#history.shift()!.revision;
    for (const watcher of this.#watchers) this.#send(watcher, change);
  }

  /** Forget the kept changes: a watch resuming from before now gets 410 Gone. */
  compact(throughRevision: number): void {
    this.#history.length = 0;
    this.#compactedThrough = throughRevision;
  }

  /** End every open watch, as an API server restart or a dropped connection would. */
  dropAll(): void {
    for (const watcher of this.#watchers) watcher.res.end();
    this.#watchers.clear();
  }

  get open(): number {
    return this.#watchers.size;
  }

  serve(
    res: ServerResponse,
    watch: { resource: string; namespace: string; requirements: Requirement[] },
    from: string | null,
    timeoutSeconds: number | null,
    current: () => KubeObject[],
  ): void {
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    // The headers go at once, as the real server sends them, before any change exists.
    res.flushHeaders();
    const watcher: Watcher = { ...watch, res };
    if (from !== null && from !== '' && from !== '0') {
      const revision = Number(from);
      if (!Number.isFinite(revision) || revision < this.#compactedThrough) {
        const gone = new KubeStatusError(410, 'Expired', `too old resource version: ${from}`);
        res.end(`${JSON.stringify({ type: 'ERROR', object: gone.body() })}\n`);
        return;
      }
      for (const change of this.#history)
        if (change.revision > revision) this.#send(watcher, change);
    } else {
      for (const object of current())
        this.#send(watcher, {
          revision: 0,
          type: 'ADDED',
          resource: watch.resource,
          namespace: watch.namespace,
          object,
        });
    }
    this.#watchers.add(watcher);
    const end = () => this.#watchers.delete(watcher);
    res.on('close', end);
    if (timeoutSeconds !== null && timeoutSeconds > 0) {
      const timer = setTimeout(() => {
        end();
        res.end();
      }, timeoutSeconds * 1000);
      timer.unref();
      res.on('close', () => clearTimeout(timer));
    }
  }

  #send(watcher: Watcher, change: Change): void {
    if (change.resource !== watcher.resource || change.namespace !== watcher.namespace) return;
    if (!matchesSelector(change.object, watcher.requirements)) return;
    watcher.res.write(`${JSON.stringify({ type: change.type, object: change.object })}\n`);
  }
}
