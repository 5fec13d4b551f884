/**
 * One HTTP request to a manager process as a plain client makes it: JSON in, the status, the
 * parsed body (undefined when empty), the raw text and the connection header out.
 */
export async function call(
  base: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const raw = await response.text();
  return {
    status: response.status,
    body: raw ? JSON.parse(raw) : undefined,
    raw,
    connection: response.headers.get('connection'),
  };
}
