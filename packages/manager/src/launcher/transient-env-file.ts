/** The per-job Secret's key (the local job directory's file) holding the transientEnv entries. */
export const TRANSIENT_ENV_KEY = 'transient-env.json';

/**
 * The transientEnv entries as a launcher stored them (a JSON array of {name, value}), read back.
 * Anything else (absent, unreadable, another shape) reads as no entries: the caller only masks
 * what it finds, and a job without transientEnv has nothing stored.
 */
export function parseTransientEnv(
  stored: string | Buffer | undefined,
  encoding: 'base64' | 'utf8',
): Array<{ name: string; value: string }> {
  if (stored === undefined) return [];
  const text =
    typeof stored === 'string' ? Buffer.from(stored, encoding).toString('utf8') : stored.toString();
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(doc)) return [];
  return doc.filter(
    (e): e is { name: string; value: string } =>
      typeof e === 'object' &&
      e !== null &&
      typeof (e as { name?: unknown }).name === 'string' &&
      typeof (e as { value?: unknown }).value === 'string',
  );
}
