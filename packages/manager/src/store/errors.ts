/**
 * Whether a statement failed on a unique index or constraint (SQLSTATE 23505), by name: the
 * driver reports it in `constraint` (pg) or only in the message (PGlite).
 */
export function isUniqueViolation(error: unknown, name: string): boolean {
  const e = error as { code?: unknown; constraint?: unknown; message?: unknown } | null;
  if (!e || e.code !== '23505') return false;
  return e.constraint === name || (typeof e.message === 'string' && e.message.includes(name));
}
