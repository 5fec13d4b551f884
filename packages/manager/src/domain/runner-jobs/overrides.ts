import type { BackendImageRef, ImageSummary, RunBase } from '@svc/contracts';
import { checkBackendImageRef } from '../runs/bundle-policy.js';
import { resolveImage, type ImagePolicy } from './images.js';
import { checkTransientEnv, platformEndpointDefaults, type EnvEntry } from './transient-env.js';

/** The parts of a runner Job request a caller may override (dispatch, send, runner-jobs). */
export interface JobOverrides {
  image?: string | undefined;
  backendImageRef?: BackendImageRef | undefined;
  transientEnv?: readonly EnvEntry[] | undefined;
}

/**
 * Every rule a runner Job's overrides meet, in one place: transientEnv names, sizes and
 * credential shapes; a digest-pinned, allowlisted or catalogued image (`build-required` for an
 * uncatalogued environment specification); a platform-ssh endpoint. Callers that write several
 * records before the Job (queue dispatch, session send) run it first, so a refused override
 * writes nothing, and their dry runs refuse exactly what the real call would.
 */
export function checkJobOverrides(
  images: ImagePolicy,
  overrides: JobOverrides,
  tools: ReadonlyArray<{ tool: string }>,
  platformDefaults: Readonly<Record<string, string>>,
): { image: ImageSummary; defaults: EnvEntry[] } {
  const entries = overrides.transientEnv ?? [];
  checkTransientEnv(entries);
  // Shape before catalog: a Dockerfile outside its context is schema-invalid, not build-required.
  if (overrides.backendImageRef)
    checkBackendImageRef(overrides.backendImageRef, images.repoUrlPrefixes ?? []);
  const image = resolveImage(images, overrides.image, overrides.backendImageRef);
  return { image, defaults: platformEndpointDefaults(entries, tools, platformDefaults) };
}

/** The tools a run of this base will request credentials for (before its policy is completed). */
export function toolsOf(
  runBase: Partial<RunBase> | Record<string, unknown>,
): Array<{ tool: string }> {
  const policy = (runBase as Partial<RunBase>).executionPolicy;
  return (policy?.secretScope?.toolCredentials ?? []).map((entry) => ({ tool: entry.tool }));
}
