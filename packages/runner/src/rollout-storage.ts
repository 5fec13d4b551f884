import { createHash } from 'node:crypto';
import { readdir, readFile, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';

export interface StorageSummary {
  sizeBytes: number;
  filesCount: number;
  sha256: string;
}

const MAX_FILES = 10_000;

/**
 * A summary of the session volume (the agent's rollout files): size, count and one SHA-256
 * over every file's path and content, so a reader can tell whether storage changed without
 * seeing any of it.
 */
export async function summarizeRolloutStorage(dir: string): Promise<StorageSummary> {
  const files: string[] = [];
  const walk = async (current: string): Promise<void> => {
    const entries = await readdir(current, { withFileTypes: true }).catch(() => []);
    for (const entry of entries.sort((a, b) => a.name.localeCompare(b.name))) {
      if (files.length >= MAX_FILES) return;
      const path = join(current, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.isFile()) files.push(path);
    }
  };
  await walk(dir);
  const hash = createHash('sha256');
  let sizeBytes = 0;
  for (const file of files) {
    const content = await readFile(file).catch(() => Buffer.alloc(0));
    sizeBytes += (await stat(file).catch(() => ({ size: content.length }))).size;
    hash.update(relative(dir, file)).update('\0').update(content);
  }
  return { sizeBytes, filesCount: files.length, sha256: hash.digest('hex') };
}
