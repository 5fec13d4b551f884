import { ServiceError } from '@svc/contracts';

/** A session id usable as a directory name, in a claim name and as a label value. */
const SESSION_ID = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function assertSessionId(sessionId: string): void {
  if (!SESSION_ID.test(sessionId))
    throw new ServiceError(
      'schema-invalid',
      'a session id for storage is lowercase letters, digits and dashes, at most 63 characters',
      { field: 'sessionId' },
    );
}

/** Claim capacity default (spec/2, Limits). */
export const DEFAULT_SESSION_CAPACITY = '1Gi';
