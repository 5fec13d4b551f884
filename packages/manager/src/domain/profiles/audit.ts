import { isServiceError, newId, toError, type DelegatedBy } from '@svc/contracts';
import type { Ctx } from '../context.js';
import { hashSalt, identityHash } from './hashing.js';

/**
 * The audit trail of delegated profile changes. `delegatedBy` is recorded and never consulted:
 * the caller's system and request id in clear (to correlate with its own logs), user ids and
 * usernames only as salted pseudonyms, the reason redacted. Refused attempts are recorded too.
 */

export type AuditAction = 'credential-put' | 'config-put' | 'delete' | 'validate';

export interface AuditEntry {
  profile: string;
  action: AuditAction;
  traceId: string;
  delegatedBy?: DelegatedBy | undefined;
  reason?: string | undefined;
  bridgeSyncDone?: boolean | undefined;
}

export interface AuditOutcome {
  resourceVersion?: string | null;
  credentialHashSuffix?: string | null;
  configHashSuffix?: string | null;
}

/** The entry of a write (credential or config PUT): the delegation fields come from its body. */
export function writeEntry(
  profile: string,
  action: 'credential-put' | 'config-put',
  traceId: string,
  body: Pick<AuditEntry, 'delegatedBy' | 'reason' | 'bridgeSyncDone'>,
): AuditEntry {
  const { delegatedBy, reason, bridgeSyncDone } = body;
  return { profile, action, traceId, delegatedBy, reason, bridgeSyncDone };
}

const MAX_REASON = 1000;

/** Run `operation`, then record its outcome; a failing audit write is logged, not thrown. */
export async function audited<T>(
  ctx: Ctx,
  entry: AuditEntry,
  operation: () => Promise<T>,
  outcomeOf: (value: T) => AuditOutcome = () => ({}),
): Promise<T> {
  let value: T;
  try {
    value = await operation();
  } catch (error) {
    await record(ctx, entry, isServiceError(error) ? error.failureKind : 'internal-error', {});
    throw error;
  }
  await record(ctx, entry, 'applied', outcomeOf(value));
  return value;
}

async function record(
  ctx: Ctx,
  entry: AuditEntry,
  outcome: string,
  details: AuditOutcome,
): Promise<void> {
  try {
    const salt = await hashSalt(ctx.db);
    const by = entry.delegatedBy;
    await ctx.db
      .insertInto('provider_profile_audit')
      .values({
        audit_id: newId('pau'),
        profile: entry.profile,
        action: entry.action,
        outcome,
        delegated_system: by ? ctx.redactor.redact(by.system) : null,
        delegated_user_hash: by?.userId ? identityHash(salt, 'user-id', by.userId) : null,
        delegated_username_hash: by?.username ? identityHash(salt, 'username', by.username) : null,
        request_id: by ? ctx.redactor.redact(by.requestId) : null,
        reason: entry.reason ? ctx.redactor.redact(entry.reason).slice(0, MAX_REASON) : null,
        trace_id: entry.traceId,
        resource_version: details.resourceVersion ?? null,
        credential_hash_suffix: details.credentialHashSuffix ?? null,
        config_hash_suffix: details.configHashSuffix ?? null,
        bridge_sync_done: entry.bridgeSyncDone ?? null,
      })
      .execute();
  } catch (error) {
    ctx.logger.error(
      {
        profile: entry.profile,
        action: entry.action,
        err: ctx.redactor.redact(toError(error).message),
      },
      'recording a provider profile audit entry failed',
    );
  }
}
