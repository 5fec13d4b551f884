import { DEFAULT_BASE_TOOLS, detectWorkReady } from '@svc/contracts/work-ready';
import type { WorkReadySummary } from '@svc/contracts';
import { join } from 'node:path';
import type { ManagerConfig } from './config.js';

/** Where the tool versions probed on this host are kept, for the manager and local runners. */
export const workReadyCacheFile = (dataDir: string) => join(dataDir, 'work-ready-cache.json');

/**
 * The work-ready summary a runner Job will have, before any runner reports its own: for the
 * local launcher the tools of this host (where local runners run), for Kubernetes the tools the
 * runner image declares (SVC_RUNNER_TOOLS; versions come from the runner's startup report).
 */
export async function expectedWorkReady(config: ManagerConfig): Promise<WorkReadySummary> {
  const required = new Set(config.runnerJobs.requiredTools);
  if (config.launcher.kind === 'kubernetes') {
    return {
      tools: config.runnerJobs.imageTools.map((name) => ({
        name,
        version: null,
        required: required.has(name),
        present: true,
      })),
      dependencyPolicy: 'preinstalled-image-only',
      valuesPrinted: false,
    };
  }
  const detected = await detectWorkReady({
    tools: DEFAULT_BASE_TOOLS.map((tool) => ({ ...tool, required: required.has(tool.name) })),
    timeoutMs: 3000,
    // Local runners run on this host: what is probed here is what they would find.
    cacheFile: workReadyCacheFile(config.dataDir),
  });
  return {
    tools: detected.tools.map(({ name, version, required: req, present }) => ({
      name,
      version,
      required: req,
      present,
    })),
    dependencyPolicy: detected.dependencyPolicy,
    valuesPrinted: false,
  };
}
