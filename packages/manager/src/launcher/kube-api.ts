import { ApiException, BatchV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { ServiceError } from '@svc/contracts';

/** How the manager reaches the Kubernetes API (config: SVC_KUBE_API_URL, else the default). */
export interface KubeConnection {
  /** An explicit API server URL (tests, or a proxy); null means KUBECONFIG or in-cluster. */
  apiUrl: string | null;
}

export interface KubeApis {
  core: CoreV1Api;
  batch: BatchV1Api;
}

/**
 * API clients for the launcher, the Secret store and the session volumes. Without an explicit
 * URL the default loader applies: KUBECONFIG or ~/.kube/config, else the in-cluster service
 * account.
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
  return { core: kc.makeApiClient(CoreV1Api), batch: kc.makeApiClient(BatchV1Api) };
}

export const isStatus = (error: unknown, code: number): boolean =>
  error instanceof ApiException && error.code === code;

/** The `reason` of a Kubernetes Status body (AlreadyExists, Conflict, NotFound…), if any. */
export function statusReason(error: unknown): string | null {
  if (!(error instanceof ApiException)) return null;
  const body: unknown = error.body;
  try {
    const parsed = (typeof body === 'string' ? JSON.parse(body) : body) as { reason?: unknown };
    return typeof parsed?.reason === 'string' ? parsed.reason : null;
  } catch {
    return null;
  }
}

/**
 * A failed API call as a typed error. Only the HTTP status and the Status reason are kept:
 * the client's own message embeds response bodies and headers, which are not ours to print.
 */
export function kubeFailure(error: unknown, action: string): ServiceError {
  if (error instanceof ServiceError) return error;
  if (error instanceof ApiException) {
    const reason = statusReason(error);
    return new ServiceError(
      'infra-failed',
      `Kubernetes API: ${action} failed with HTTP ${error.code}${reason ? ` ${reason}` : ''}`,
      { httpStatus: error.code, ...(reason ? { reason } : {}) },
    );
  }
  const cause = error instanceof Error ? error.message : String(error);
  return new ServiceError('infra-failed', `Kubernetes API: ${action} failed: ${cause}`);
}
