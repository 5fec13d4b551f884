/** jsonb parameters travel as text: node-postgres would otherwise send arrays as SQL arrays. */
export function json(value: unknown): string {
  return JSON.stringify(value ?? null);
}

export function iso(value: Date | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  return value instanceof Date ? value.toISOString() : new Date(value).toISOString();
}

export function isoRequired(value: Date | string): string {
  return value instanceof Date ? value.toISOString() : new Date(value).toISOString();
}
