import { ServiceError } from '@svc/contracts';
import type { RunRow } from '../../store/runs.js';
import { iso } from '../../store/json.js';
import { sameHash, tokenHash } from '../caller-tokens.js';

/**
 * Fencing: only the holder of the current lease may write to a run. The holder proves it with
 * the lease token its claim returned (a runnerId is public: it shows in events and listings),
 * so the check is the stored token hash, plus the runnerId the caller names. An expired lease
 * that nobody took over still belongs to its holder (it may be slow, not dead); once anyone
 * claims again, a fresh token is minted and the old one is refused.
 */
/** What fencing reads of a run. */
export type LeaseFacts = Pick<
  RunRow,
  'run_id' | 'lease_owner' | 'lease_token_hash' | 'lease_expires_at'
>;

export function assertLeaseOwner(
  run: LeaseFacts,
  runnerId: string,
  leaseToken: string | undefined,
): void {
  if (
    run.lease_owner === runnerId &&
    run.lease_token_hash !== null &&
    leaseToken !== undefined &&
    sameHash(tokenHash(leaseToken), run.lease_token_hash)
  )
    return;
  throw leaseConflict(run);
}

/**
 * The refusal names the holder and when its lease runs out (spec/2: "owner and lease expiry"),
 * never a token: the runnerId is public (the run record shows it) and the lease token, not the
 * runnerId, is what fences.
 */
export function leaseConflict(
  run: Pick<LeaseFacts, 'run_id' | 'lease_owner' | 'lease_expires_at'>,
): ServiceError {
  return new ServiceError(
    'runner-lease-conflict',
    run.lease_owner
      ? `run ${run.run_id} is leased by ${run.lease_owner}, not by this caller (send the x-lease-token its claim returned)`
      : `run ${run.run_id} has not been claimed`,
    ownerDetails(run.lease_owner, run.lease_expires_at),
  );
}

/** The details of every `runner-lease-conflict`: who holds the lease, and until when. */
export function ownerDetails(
  owner: string | null,
  expiresAt: Date | string | null,
): { ownerRunnerId: string | null; leaseExpiresAt: string | null } {
  return { ownerRunnerId: owner, leaseExpiresAt: iso(expiresAt) };
}
