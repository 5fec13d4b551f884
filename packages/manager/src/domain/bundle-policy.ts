import {
  SECRET_NAMESPACE,
  ServiceError,
  TOOL_SECRET_PREFIX,
  type ResourceBundleRef,
} from '@svc/contracts';

/**
 * Shape rules of a `gitbundle` reference that the schema cannot say: paths stay relative and
 * inside their root, and the fetch credential is a controlled Secret reference.
 */
export function checkResourceBundle(ref: ResourceBundleRef): void {
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
  checkRepoUrl(ref.repoUrl, 'resourceBundleRef.repoUrl');
  (ref.bundles ?? []).forEach(
    (b, i) => b.repoUrl && checkRepoUrl(b.repoUrl, `resourceBundleRef.bundles[${i}].repoUrl`),
  );
}

/** Relative, no `..`, no absolute path, no backslash tricks. */
export function checkRelativePath(
  path: string,
  field: string,
  options: { allowDot: boolean },
): void {
  const parts = path.split('/');
  const bad =
    path.startsWith('/') ||
    path.includes('\\') ||
    parts.includes('..') ||
    (!options.allowDot && path === '.') ||
    /^[A-Za-z]:/.test(path);
  if (bad)
    throw new ServiceError(
      'schema-invalid',
      `${field} must be a relative path inside its root with no '..' (got ${JSON.stringify(path)})`,
      { field },
    );
}

/** Repository URLs carry no credentials: those travel only through credentialRef. */
function checkRepoUrl(raw: string, field: string): void {
  if (/^[\w.-]+@[\w.-]+:/.test(raw)) return; // scp-like ssh form
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ServiceError('schema-invalid', `${field} is not a repository URL`, { field });
  }
  if (!['https:', 'http:', 'ssh:', 'git:', 'file:'].includes(url.protocol)) {
    throw new ServiceError(
      'schema-invalid',
      `${field} uses an unsupported scheme ${url.protocol}`,
      { field },
    );
  }
  if (url.username || url.password) {
    throw new ServiceError(
      'schema-invalid',
      `${field} must not embed credentials; use resourceBundleRef.credentialRef`,
      { field },
    );
  }
}
