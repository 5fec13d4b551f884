import type { Redactor, TransientEnvSummary } from '@svc/contracts';
import type { Launcher } from '../../launcher/types.js';

interface EnvEntry {
  name: string;
  value: string;
}

/**
 * A runner Job's transientEnv values are masked like any Secret's while the job may still echo
 * them (the agent can print its environment): registered once the job's record is written,
 * forgotten when it ends. The platform endpoint defaults the manager adds are not secrets (they
 * are its own configuration) and are left out, or every mention of the manager's URL would go.
 * Outgoing only: the next job of the same task is sent the same values, which must reach it.
 */
const source = (runnerJobId: string) => `runner-job:${runnerJobId}:transient-env`;

export function maskTransientEnv(
  redactor: Redactor,
  runnerJobId: string,
  entries: readonly EnvEntry[],
  defaultsAdded: readonly string[],
): void {
  const given = entries.filter((e) => !defaultsAdded.includes(e.name));
  redactor.registerOutgoing(
    source(runnerJobId),
    given.map((e) => e.value),
  );
}

export function forgetTransientEnv(redactor: Redactor, runnerJobId: string): void {
  redactor.unregister(source(runnerJobId));
}

/**
 * At start, before anything is served: the masks of jobs still alive, read back from where their
 * launcher keeps the values (the store keeps names and hashes only). A job whose values cannot be
 * read is logged by the caller's failure, never served unmasked: the error stops the start.
 */
export async function restoreTransientEnvMasks(
  redactor: Redactor,
  launcher: Pick<Launcher, 'transientEnvOf'>,
  jobs: ReadonlyArray<{ runnerJobId: string; jobName: string; summary: unknown }>,
): Promise<number> {
  let restored = 0;
  for (const job of jobs) {
    const summary = job.summary as Partial<TransientEnvSummary> | null;
    if (!summary?.count) continue;
    const entries = await launcher.transientEnvOf(job.jobName);
    maskTransientEnv(redactor, job.runnerJobId, entries, summary.defaultsAdded ?? []);
    restored += 1;
  }
  return restored;
}
