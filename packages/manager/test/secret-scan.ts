import { lstat, readdir, readFile } from 'node:fs/promises';
import { join, relative } from 'node:path';

/**
 * The encodings a value can take on disk: plain, base64 and base64url at every alignment (a
 * value inside a larger encoded text), URL-encoded, hex and JSON-escaped.
 */
function forms(value: string): string[] {
  const out = new Set<string>([
    value,
    encodeURIComponent(value),
    JSON.stringify(value).slice(1, -1),
    Buffer.from(value).toString('hex'),
  ]);
  for (let pad = 0; pad < 3; pad++) {
    const buf = Buffer.concat([Buffer.alloc(pad, 0x20), Buffer.from(value)]);
    for (const enc of ['base64', 'base64url'] as const) {
      // Drop the characters that depend on neighbouring bytes at either end.
      const text = buf.toString(enc).replace(/=+$/, '');
      out.add(text.slice(pad === 0 ? 0 : Math.ceil((pad * 4) / 3), text.length - 2));
    }
  }
  return [...out].filter((f) => f.length >= 8);
}

export interface TreeHit {
  file: string;
  canary: string;
}

/**
 * Every file under `root` (symbolic links are not followed, `skip` names top-level entries
 * left out) that holds one of `canaries` in any of its forms, or matches `pattern`.
 */
export async function findCanariesInTree(
  root: string,
  canaries: readonly string[],
  options: { skip?: readonly string[]; pattern?: RegExp } = {},
): Promise<TreeHit[]> {
  const hits: TreeHit[] = [];
  const needles = canaries.map((c) => ({ canary: c, forms: forms(c) }));
  const walk = async (dir: string): Promise<void> => {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      const path = join(dir, name);
      if (dir === root && options.skip?.includes(name)) continue;
      const info = await lstat(path).catch(() => null);
      if (!info) continue;
      if (info.isDirectory()) await walk(path);
      if (!info.isFile()) continue;
      const text = (await readFile(path).catch(() => Buffer.alloc(0))).toString('latin1');
      for (const { canary, forms: fs } of needles)
        if (fs.some((f) => text.includes(f))) hits.push({ file: relative(root, path), canary });
      if (options.pattern?.test(text))
        hits.push({ file: relative(root, path), canary: String(options.pattern) });
    }
  };
  await walk(root);
  return hits;
}
