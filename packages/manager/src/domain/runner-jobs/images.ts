import { readFileSync } from 'node:fs';
import {
  ServiceError,
  type BackendImageRef,
  type EnvImageSource,
  type ImageSummary,
} from '@svc/contracts';

/** An image reference pinned by digest: `<repository>@sha256:<64 hex>`. */
const DIGEST_PINNED =
  /^[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:\/[a-z0-9]+(?:[._-][a-z0-9]+)*)*(?::[\w][\w.-]{0,127})?@sha256:[0-9a-f]{64}$/;

export interface CatalogEntry {
  source: EnvImageSource;
  image: string;
}

export interface ImagePolicy {
  defaultImage: string;
  allowlist: readonly string[];
  catalog: readonly CatalogEntry[];
  /** Operator-listed repository URL prefixes (a local mirror) a source may use. */
  repoUrlPrefixes?: readonly string[];
}

export function loadCatalog(path: string | undefined): CatalogEntry[] {
  if (!path) return [];
  const parsed = JSON.parse(readFileSync(path, 'utf8')) as { images?: CatalogEntry[] };
  for (const entry of parsed.images ?? []) {
    if (!DIGEST_PINNED.test(entry.image))
      throw new Error(`image catalog ${path}: ${entry.image} is not digest-pinned`);
  }
  return parsed.images ?? [];
}

export const isDigestPinned = (ref: string) => DIGEST_PINNED.test(ref);

const sameSource = (a: EnvImageSource, b: EnvImageSource) =>
  a.kind === b.kind &&
  a.repoUrl === b.repoUrl &&
  a.commitId === b.commitId &&
  a.dockerfilePath.replace(/^\.\//, '') === b.dockerfilePath.replace(/^\.\//, '');

/**
 * Resolve the runner image. An environment specification resolves through the catalog (a miss
 * is `build-required`, never a build inside a task); an explicit image must be digest-pinned
 * and allowlisted or catalogued; nothing given means the controlled default.
 */
export function resolveImage(
  policy: ImagePolicy,
  image: string | undefined,
  ref: BackendImageRef | undefined,
): ImageSummary {
  const digestOf = (r: string) => r.slice(r.indexOf('@') + 1);
  if (ref) {
    const hit = policy.catalog.find((entry) => sameSource(entry.source, ref.source));
    if (!hit) {
      throw new ServiceError(
        'build-required',
        'no catalogued image for this environment specification; build it through controlled CI and add it to the catalog',
        {
          source: ref.source,
        },
      );
    }
    if (ref.image && ref.image !== hit.image) {
      throw new ServiceError(
        'schema-invalid',
        'backendImageRef.image does not match the catalogued image of its source',
        { field: 'backendImageRef.image' },
      );
    }
    return {
      ref: hit.image,
      digest: digestOf(hit.image),
      resolvedFrom: 'catalog',
      source: hit.source,
      reuse: 'catalog-digest-reused',
    };
  }
  const requested = image ?? policy.defaultImage;
  if (!isDigestPinned(requested)) {
    throw new ServiceError(
      'schema-invalid',
      `image ${requested} is not pinned by digest (mutable tags are refused)`,
      { field: 'image' },
    );
  }
  if (image === undefined || image === policy.defaultImage) {
    return {
      ref: requested,
      digest: digestOf(requested),
      resolvedFrom: 'default',
      source: null,
      reuse: 'controlled-default',
    };
  }
  const catalogued = policy.catalog.find((entry) => entry.image === requested);
  if (catalogued)
    return {
      ref: requested,
      digest: digestOf(requested),
      resolvedFrom: 'catalog',
      source: catalogued.source,
      reuse: 'catalog-digest-reused',
    };
  if (policy.allowlist.includes(requested))
    return {
      ref: requested,
      digest: digestOf(requested),
      resolvedFrom: 'allowlist',
      source: null,
      reuse: 'allowlisted',
    };
  throw new ServiceError(
    'tenant-policy-denied',
    `image ${requested} is neither allowlisted nor catalogued`,
    { field: 'image' },
  );
}
