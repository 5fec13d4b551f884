import {
  checkDockerfilePath,
  checkRelativePath,
  checkRepoAddress,
  SECRET_NAMESPACE,
  ServiceError,
  TOOL_SECRET_PREFIX,
  type BackendImageRef,
  type ResourceBundleRef,
  type WorkspaceRef,
} from '@svc/contracts';

/**
 * Shape rules of a `gitbundle` reference that the schema cannot say: network repositories,
 * paths relative, inside their root and out of `.git`, and the fetch credential a controlled
 * Secret reference.
 */
function checkResourceBundle(ref: ResourceBundleRef, prefixes: readonly string[]): void {
  (ref.bundles ?? []).forEach((bundle, i) => {
    checkRelativePath(bundle.subpath, `resourceBundleRef.bundles[${i}].subpath`, {
      allowDot: true,
    });
    checkRelativePath(bundle.target_path, `resourceBundleRef.bundles[${i}].target_path`, {
      allowDot: true,
    });
  });
  const promptNames = new Set<string>();
  (ref.promptRefs ?? []).forEach((prompt, i) => {
    checkRelativePath(prompt.path, `resourceBundleRef.promptRefs[${i}].path`, { allowDot: false });
    if (promptNames.has(prompt.name))
      throw new ServiceError('schema-invalid', `promptRefs name ${prompt.name} appears twice`);
    promptNames.add(prompt.name);
  });
  if (ref.credentialRef) {
    const { name, namespace, keys } = ref.credentialRef;
    if (!name.startsWith(TOOL_SECRET_PREFIX)) {
      throw new ServiceError(
        'tenant-policy-denied',
        `resourceBundleRef.credentialRef must name a Secret ${TOOL_SECRET_PREFIX}<name>`,
        { field: 'resourceBundleRef.credentialRef.name' },
      );
    }
    if (namespace !== undefined && namespace !== SECRET_NAMESPACE) {
      throw new ServiceError(
        'tenant-policy-denied',
        `Secrets live only in namespace ${SECRET_NAMESPACE}`,
        { field: 'resourceBundleRef.credentialRef.namespace' },
      );
    }
    const allowed = ['token', 'username', 'password'];
    if (keys?.some((k) => !allowed.includes(k))) {
      throw new ServiceError(
        'schema-invalid',
        `resourceBundleRef.credentialRef.keys must be among ${allowed.join(', ')}`,
      );
    }
  }
  checkRepoAddress(ref.repoUrl, 'resourceBundleRef.repoUrl', prefixes);
  (ref.bundles ?? []).forEach(
    (b, i) =>
      b.repoUrl && checkRepoAddress(b.repoUrl, `resourceBundleRef.bundles[${i}].repoUrl`, prefixes),
  );
}

/** The repository addresses of a run (its workspace and its bundle) a caller may name. */
export function checkRunSources(
  body: { workspaceRef: WorkspaceRef; resourceBundleRef?: ResourceBundleRef | null | undefined },
  prefixes: readonly string[],
): void {
  if (body.workspaceRef.kind === 'git' && body.workspaceRef.repoUrl !== undefined)
    checkRepoAddress(body.workspaceRef.repoUrl, 'workspaceRef.repoUrl', prefixes);
  if (body.resourceBundleRef) checkResourceBundle(body.resourceBundleRef, prefixes);
}

/** An environment specification: a network repository and a Dockerfile inside it. */
export function checkBackendImageRef(ref: BackendImageRef, prefixes: readonly string[]): void {
  checkRepoAddress(ref.source.repoUrl, 'backendImageRef.source.repoUrl', prefixes);
  checkDockerfilePath(ref.source.dockerfilePath, 'backendImageRef.source.dockerfilePath');
}
