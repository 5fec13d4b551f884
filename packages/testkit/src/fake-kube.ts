import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  alreadyExists,
  asRecord,
  at,
  applyJsonPatch,
  applyMergePatch,
  badRequest,
  conflict,
  initialize,
  KubeStatusError,
  matchesSelector,
  normalizeSecret,
  notFound,
  parseLabelSelector,
  RESOURCES,
  validateObject,
  type KubeObject,
} from './fake-kube-objects.js';

import { jobPod, jobStatus, type JobState, type JobStateDetail } from './fake-kube-jobs.js';
import { WatchHub, type WatchType } from './fake-kube-watch.js';
import { allowedBy, callKey, rbacVerb, type PolicyRule } from './fake-kube-rbac.js';

export { allowedBy, callKey, rbacVerb } from './fake-kube-rbac.js';
export type { PolicyRule, RbacCall } from './fake-kube-rbac.js';

export type { KubeObject } from './fake-kube-objects.js';
export type { JobState, JobStateDetail } from './fake-kube-jobs.js';

/** One request as the fake received it. */
export interface KubeRequest {
  method: string;
  /** Path without the query string, e.g. `/apis/batch/v1/namespaces/svc-v01/jobs`. */
  path: string;
  query: Record<string, string>;
  contentType: string | null;
  /** Parsed JSON body, or null. */
  body: unknown;
  /** The body exactly as sent. */
  raw: string;
  /** The client's port: requests on one kept-alive connection share it. */
  clientPort: number;
}

export interface FakeKubeOptions {
  /** When set, requests must carry `Authorization: Bearer <token>` (else 401). */
  token?: string;
  /**
   * Each request is handled this long after it arrived: the round trip of an API server in a
   * real cluster, for measuring what a client's sequence of calls costs there.
   */
  latencyMs?: number;
  /**
   * The Role of the caller: a request it does not grant is answered 403 Forbidden, as the API
   * server answers a ServiceAccount. Unset: everything is allowed.
   */
  rbac?: readonly PolicyRule[];
}

interface Injected {
  method: string;
  resource: string;
  /** 0: never answer (a hung API server). */
  status: number;
  reason: string;
  message?: string | undefined;
}

const PATH =
  /^\/(api\/v1|apis\/batch\/v1)\/namespaces\/([a-z0-9-]+)\/([a-z]+)(?:\/([^/]+))?(?:\/(status))?$/;

/**
 * A loopback fake of the Kubernetes API server for the resources the manager uses: batch/v1
 * jobs, v1 secrets, persistentvolumeclaims and pods. Real REST paths and JSON: create (409
 * AlreadyExists), get (404 NotFound), list with labelSelector, replace with optimistic
 * resourceVersion (409 Conflict), JSON and merge patch, delete with propagationPolicy
 * (Background and Foreground delete dependents by owner reference, as the garbage collector
 * would), and watch (`?watch=1`, see WatchHub) on every change however it was made. Every
 * request is recorded; tests move Job status with `setJobState`.
 */
export class FakeKube {
  readonly requests: KubeRequest[] = [];
  /** Every verb asked of a resource (`batch/jobs:watch`), allowed or not, since the start. */
  readonly calls = new Set<string>();
  readonly #objects = new Map<string, KubeObject>();
  readonly #injected: Injected[] = [];
  readonly #watches = new WatchHub();
  #revision = 1000;
  readonly #listeners = new Set<(request: KubeRequest) => void>();

  private constructor(
    private readonly server: Server,
    readonly url: string,
    private readonly options: FakeKubeOptions,
  ) {}

  static async start(options: FakeKubeOptions = {}): Promise<FakeKube> {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    const fake = new FakeKube(server, `http://127.0.0.1:${port}`, options);
    server.on(
      'request',
      (req: IncomingMessage, res: ServerResponse) => void fake.#handle(req, res),
    );
    return fake;
  }

  /**
   * Calls `listener` with each request as it is recorded, before it is answered; returns the
   * function that stops it. For waiting on a request without polling `requests`.
   */
  onRequest(listener: (request: KubeRequest) => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** A copy of a stored object, or undefined. */
  get(resource: string, namespace: string, name: string): KubeObject | undefined {
    const obj = this.#objects.get(key(resource, namespace, name));
    return obj ? structuredClone(obj) : undefined;
  }

  /** Copies of the stored objects of a resource (in a namespace when given). */
  list(resource: string, namespace?: string): KubeObject[] {
    return [...this.#objects.entries()]
      .filter(([k]) => k.startsWith(namespace ? `${resource}/${namespace}/` : `${resource}/`))
      .map(([, obj]) => structuredClone(obj));
  }

  /**
   * Store an object as if someone else created it (not recorded as a request); a given
   * creationTimestamp is kept, to make it look old.
   */
  seed(resource: string, namespace: string, obj: KubeObject): KubeObject {
    const created = initialize(resource, obj, namespace, this.#nextRevision());
    if (obj.metadata.creationTimestamp)
      created.metadata.creationTimestamp = obj.metadata.creationTimestamp;
    this.#put(resource, namespace, created);
    return structuredClone(created);
  }

  /** Remove an object as the cluster would (TTL controller, an operator): not recorded. */
  remove(resource: string, namespace: string, name: string): boolean {
    return this.#drop(resource, namespace, name);
  }

  /** End every open watch (an API server restart, a dropped connection). */
  dropWatches(): void {
    this.#watches.dropAll();
  }

  /** Forget the changes kept for watches: resuming from an older resourceVersion gets 410. */
  compactWatchHistory(): void {
    this.#watches.compact(this.#revision);
  }

  /** Watches open right now. */
  get openWatches(): number {
    return this.#watches.open;
  }

  /** Write an object's status as its controller would (a claim becoming Bound). */
  setStatus(resource: string, namespace: string, name: string, status: Record<string, unknown>) {
    const obj = this.#objects.get(key(resource, namespace, name));
    if (!obj) throw new Error(`fake kube: no ${resource} ${namespace}/${name}`);
    obj.status = structuredClone(status);
    obj.metadata.resourceVersion = this.#nextRevision();
    this.#changed('MODIFIED', resource, namespace, obj);
  }

  /** The next request of `method` on `resource` fails with this status, reason and message. */
  failNext(
    method: string,
    resource: string,
    status: number,
    reason: string,
    message?: string,
  ): void {
    this.#injected.push({ method, resource, status, reason, message });
  }

  /** The next `count` requests of `method` on `resource` are never answered. */
  hangNext(method: string, resource: string, count = 1): void {
    for (let i = 0; i < count; i += 1)
      this.#injected.push({ method, resource, status: 0, reason: 'hang' });
  }

  clearRequests(): void {
    this.requests.length = 0;
  }

  /**
   * Move a Job's status as the Job controller would, and keep one pod for it whose status
   * matches (phase, container state, exit code).
   */
  setJobState(namespace: string, name: string, state: JobState, detail: JobStateDetail = {}): void {
    const job = this.#objects.get(key('jobs', namespace, name));
    if (!job) throw new Error(`fake kube: no job ${namespace}/${name}`);
    job.status = jobStatus(job, state, detail);
    job.metadata.resourceVersion = this.#nextRevision();
    this.#changed('MODIFIED', 'jobs', namespace, job);
    const existing = [...this.#objects.values()].find(
      (o) =>
        o.kind === 'Pod' &&
        o.metadata.namespace === namespace &&
        o.metadata.labels?.['batch.kubernetes.io/job-name'] === name,
    );
    const exitCode = detail.exitCode ?? (state === 'failed' ? 1 : 0);
    const pod = jobPod(job, existing, state, exitCode);
    pod.metadata.resourceVersion = this.#nextRevision();
    this.#put('pods', namespace, pod);
  }

  async close(): Promise<void> {
    this.#watches.dropAll();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  #nextRevision(): string {
    this.#revision += 1;
    return String(this.#revision);
  }

  /** Store an object (created or replaced) and tell the watches. */
  #put(resource: string, namespace: string, obj: KubeObject): void {
    const k = key(resource, namespace, obj.metadata.name);
    const type = this.#objects.has(k) ? 'MODIFIED' : 'ADDED';
    this.#objects.set(k, obj);
    this.#changed(type, resource, namespace, obj);
  }

  /** Delete an object and tell the watches (a deletion is a change with its own revision). */
  #drop(resource: string, namespace: string, name: string): boolean {
    const k = key(resource, namespace, name);
    const obj = this.#objects.get(k);
    if (!obj) return false;
    this.#objects.delete(k);
    obj.metadata.resourceVersion = this.#nextRevision();
    this.#changed('DELETED', resource, namespace, obj);
    return true;
  }

  #changed(type: WatchType, resource: string, namespace: string, obj: KubeObject): void {
    this.#watches.record({
      revision: Number(obj.metadata.resourceVersion),
      type,
      resource,
      namespace,
      object: structuredClone(obj),
    });
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString('utf8');
    const url = new URL(req.url ?? '/', 'http://fake');
    const contentType = req.headers['content-type'] ?? null;
    let body: unknown = null;
    try {
      body = raw ? JSON.parse(raw) : null;
    } catch {
      body = null;
    }
    const method = req.method ?? 'GET';
    const recorded: KubeRequest = {
      clientPort: req.socket.remotePort ?? 0,
      method,
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      contentType,
      body,
      raw,
    };
    this.requests.push(recorded);
    for (const listener of this.#listeners) listener(recorded);
    if (this.options.latencyMs) await new Promise((r) => setTimeout(r, this.options.latencyMs));
    const send = (status: number, payload: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(payload));
    };
    try {
      if (this.options.token && req.headers.authorization !== `Bearer ${this.options.token}`)
        throw new KubeStatusError(401, 'Unauthorized', 'Unauthorized');
      if (raw && body === null) throw badRequest('the request body is not valid JSON');
      const match = PATH.exec(url.pathname);
      if (!match) throw new KubeStatusError(404, 'NotFound', 'the server could not find the URL');
      const [, prefix, namespace, resource, name, sub] = match as unknown as [
        string,
        string,
        string,
        string,
        string | undefined,
        string | undefined,
      ];
      const info = RESOURCES[resource];
      if (!info || info.prefix !== `/${prefix}` || sub)
        throw new KubeStatusError(
          404,
          'NotFound',
          'the server could not find the requested resource',
        );
      const call = {
        group: prefix === 'api/v1' ? '' : prefix.split('/')[1]!,
        resource,
        verb: rbacVerb(method, name, isWatch(url)),
        name,
      };
      this.calls.add(callKey(call));
      if (this.options.rbac && !allowedBy(this.options.rbac, call))
        throw new KubeStatusError(
          403,
          'Forbidden',
          `${resource}${name ? ` "${name}"` : ''} is forbidden: User "system:serviceaccount:${namespace}:svc-run-manager" cannot ${call.verb} resource "${resource}" in API group "${call.group}" in the namespace "${namespace}"`,
        );
      const injected = this.#injected.findIndex(
        (i) => i.method === method && i.resource === resource,
      );
      if (injected >= 0) {
        const [fault] = this.#injected.splice(injected, 1);
        // A hung server: the request stays open until the client gives up or the fake closes.
        if (fault!.status === 0) return;
        throw new KubeStatusError(
          fault!.status,
          fault!.reason,
          fault!.message ?? `injected ${fault!.reason}`,
        );
      }
      if (method === 'GET' && !name && isWatch(url)) {
        const requirements = parseLabelSelector(url.searchParams.get('labelSelector') ?? '');
        const timeout = url.searchParams.get('timeoutSeconds');
        this.#watches.serve(
          res,
          { resource, namespace, requirements },
          url.searchParams.get('resourceVersion'),
          timeout === null ? null : Number(timeout),
          () => this.list(resource, namespace).filter((o) => matchesSelector(o, requirements)),
        );
        return;
      }
      const [status, payload] = this.#route(
        method,
        resource,
        namespace,
        name,
        url,
        body,
        contentType,
      );
      send(status, payload);
    } catch (error) {
      if (error instanceof KubeStatusError) send(error.code, error.body());
      else send(500, new KubeStatusError(500, 'InternalError', String(error)).body());
    }
  }

  #route(
    method: string,
    resource: string,
    namespace: string,
    name: string | undefined,
    url: URL,
    body: unknown,
    contentType: string | null,
  ): [number, unknown] {
    if (!name && method === 'GET') return [200, this.#list(resource, namespace, url)];
    if (!name && method === 'POST') return [201, this.#create(resource, namespace, body)];
    if (!name) throw new KubeStatusError(405, 'MethodNotAllowed', `${method} is not allowed here`);
    const k = key(resource, namespace, name);
    const current = this.#objects.get(k);
    if (method === 'GET') {
      if (!current) throw notFound(resource, name);
      return [200, current];
    }
    if (method === 'PUT') return [200, this.#replace(resource, name, current, body)];
    if (method === 'PATCH') {
      if (!current) throw notFound(resource, name);
      const patched = contentType?.startsWith('application/json-patch+json')
        ? applyJsonPatch(current, body)
        : (applyMergePatch(current, body) as KubeObject);
      return [200, this.#replace(resource, name, current, patched)];
    }
    if (method === 'DELETE') {
      if (!current) throw notFound(resource, name);
      const policy =
        url.searchParams.get('propagationPolicy') ??
        (at(body, 'propagationPolicy') as string | undefined) ??
        // batch/v1 Jobs orphan their pods unless told otherwise; the rest cascade.
        (resource === 'jobs' ? 'Orphan' : 'Background');
      this.#drop(resource, namespace, name);
      if (policy !== 'Orphan') this.#deleteDependents(current.metadata.uid as string);
      if (resource === 'persistentvolumeclaims' || resource === 'pods') return [200, current];
      return [
        200,
        {
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Success',
          details: { name, kind: resource, uid: current.metadata.uid, ...groupDetail(resource) },
        },
      ];
    }
    throw new KubeStatusError(405, 'MethodNotAllowed', `${method} is not allowed here`);
  }

  #list(resource: string, namespace: string, url: URL): unknown {
    const requirements = parseLabelSelector(url.searchParams.get('labelSelector') ?? '');
    const field = url.searchParams.get('fieldSelector');
    const nameIs = field?.startsWith('metadata.name=')
      ? field.slice('metadata.name='.length)
      : null;
    if (field && nameIs === null) throw badRequest(`field selector ${field} is not supported`);
    const info = RESOURCES[resource]!;
    const items = this.list(resource, namespace)
      .filter((o) => matchesSelector(o, requirements))
      .filter((o) => nameIs === null || o.metadata.name === nameIs)
      .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name))
      // List items carry no apiVersion or kind, as the real server sends them.
      .map(({ apiVersion: _a, kind: _k, ...rest }) => rest);
    return {
      kind: `${info.kind}List`,
      apiVersion: info.apiVersion,
      metadata: { resourceVersion: String(this.#revision) },
      items,
    };
  }

  #create(resource: string, namespace: string, body: unknown): KubeObject {
    const info = RESOURCES[resource]!;
    const obj = asObject(body);
    if (obj.kind !== undefined && obj.kind !== info.kind)
      throw badRequest(`the body kind ${String(obj.kind)} does not match ${info.kind}`);
    const name = obj.metadata.name;
    if (obj.metadata.namespace && obj.metadata.namespace !== namespace)
      throw badRequest(
        'the namespace of the provided object does not match the namespace sent on the request',
      );
    if (obj.metadata.resourceVersion)
      throw badRequest('resourceVersion should not be set on objects to be created');
    validateObject(resource, obj);
    const k = key(resource, namespace, name);
    if (this.#objects.has(k)) throw alreadyExists(resource, name);
    const created = initialize(resource, obj, namespace, this.#nextRevision());
    this.#put(resource, namespace, created);
    return created;
  }

  #replace(
    resource: string,
    name: string,
    current: KubeObject | undefined,
    body: unknown,
  ): KubeObject {
    if (!current) throw notFound(resource, name);
    const obj = asObject(body);
    if (obj.metadata.name !== name)
      throw badRequest('the name of the object does not match the name on the URL');
    // An update naming a resourceVersion is conditional on it; without one it is not.
    const expected = obj.metadata.resourceVersion;
    if (expected && expected !== current.metadata.resourceVersion) throw conflict(resource, name);
    validateObject(resource, obj);
    const next: KubeObject = {
      ...obj,
      apiVersion: current.apiVersion,
      kind: current.kind,
      metadata: {
        ...obj.metadata,
        namespace: current.metadata.namespace,
        uid: current.metadata.uid,
        creationTimestamp: current.metadata.creationTimestamp,
        resourceVersion: this.#nextRevision(),
      },
      // Status is written through the status subresource only.
      ...(current.status !== undefined ? { status: current.status } : {}),
    };
    if (resource === 'secrets') normalizeSecret(next);
    this.#put(resource, current.metadata.namespace!, next);
    return next;
  }

  #deleteDependents(uid: string): void {
    for (const [k, obj] of [...this.#objects.entries()]) {
      const owners = (obj.metadata.ownerReferences ?? []) as Array<{ uid: string }>;
      if (owners.some((o) => o.uid === uid)) {
        const [resource, namespace, name] = k.split('/') as [string, string, string];
        this.#drop(resource, namespace, name);
        this.#deleteDependents(obj.metadata.uid as string);
      }
    }
  }
}

/** A request body that must be an object with a name. */
function asObject(body: unknown): KubeObject {
  const obj = asRecord(body);
  const name = at(obj, 'metadata', 'name');
  if (typeof name !== 'string' || !name)
    throw new KubeStatusError(422, 'Invalid', 'metadata.name: Required value: name is required');
  return obj as KubeObject;
}

const isWatch = (url: URL) => ['true', '1'].includes(url.searchParams.get('watch') ?? '');

const key = (resource: string, namespace: string, name: string) =>
  `${resource}/${namespace}/${name}`;

const groupDetail = (resource: string) =>
  RESOURCES[resource]?.group ? { group: RESOURCES[resource].group } : {};
