import { ServiceError, type CommandType } from '@svc/contracts';

export const MAX_PAYLOAD_BYTES = 256 * 1024;

/**
 * Fields a command payload must never carry: credentials and cookies belong to Secrets, history
 * comes only from the agent's native thread resume, and skill manifests from the bundle.
 */
const FORBIDDEN_KEYS =
  /^(cookies?|set-cookie|session[_-]?token|access[_-]?token|refresh[_-]?token|token|api[_-]?key|apikey|authorization|auth|credentials?|password|secret|history|messages|skill[_-]?manifests?|auth\.json|config\.toml)$/i;

/** The text of a turn or steer: `prompt`, `message` or `text`, whichever is given. */
export function promptOf(payload: Record<string, unknown>): string | null {
  for (const key of ['prompt', 'message', 'text']) {
    const value = payload[key];
    if (typeof value === 'string' && value.trim() !== '') return value;
  }
  return null;
}

/** The backend profile a payload names, under any of its spellings (a turn cannot switch it). */
export function namedProfile(payload: Record<string, unknown>): unknown {
  return payload['backendProfile'] ?? payload['providerProfile'] ?? payload['profile'];
}

export function checkCommandPayload(
  type: CommandType,
  payload: Record<string, unknown>,
  runProfile: string,
): void {
  const bytes = Buffer.byteLength(JSON.stringify(payload));
  if (bytes > MAX_PAYLOAD_BYTES) {
    throw new ServiceError(
      'schema-invalid',
      `command payload is ${bytes} bytes; the limit is ${MAX_PAYLOAD_BYTES}`,
    );
  }
  const forbidden = findForbiddenKey(payload, 'payload', 0);
  if (forbidden) {
    throw new ServiceError(
      'schema-invalid',
      `${forbidden} is not allowed in a command payload (no credentials, cookies, tokens, history or skill manifests)`,
      { field: forbidden },
    );
  }
  if (type === 'turn' || type === 'steer') {
    if (!promptOf(payload))
      throw new ServiceError(
        'schema-invalid',
        `a ${type} command needs a non-empty payload.prompt, payload.message or payload.text`,
        { field: 'payload.prompt' },
      );
  }
  for (const key of ['threadId', 'targetCommandId'] as const) {
    const value = payload[key];
    if (
      value !== undefined &&
      value !== null &&
      (typeof value !== 'string' || value.length === 0 || value.length > 255)
    ) {
      throw new ServiceError('schema-invalid', `payload.${key} must be a non-empty string`, {
        field: `payload.${key}`,
      });
    }
  }
  const profile = namedProfile(payload);
  if (profile !== undefined && profile !== runProfile) {
    throw new ServiceError(
      'tenant-policy-denied',
      `a run has one backendProfile (${runProfile}); a turn cannot switch to ${JSON.stringify(profile)}. Start a new run or use the session's send`,
      {
        field: 'payload.backendProfile',
      },
    );
  }
}

function findForbiddenKey(value: unknown, path: string, depth: number): string | null {
  if (depth > 8 || value === null || typeof value !== 'object') return null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const hit = findForbiddenKey(value[i], `${path}[${i}]`, depth + 1);
      if (hit) return hit;
    }
    return null;
  }
  for (const [key, child] of Object.entries(value)) {
    if (FORBIDDEN_KEYS.test(key)) return `${path}.${key}`;
    const hit = findForbiddenKey(child, `${path}.${key}`, depth + 1);
    if (hit) return hit;
  }
  return null;
}
