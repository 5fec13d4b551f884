import { ServiceError } from '@svc/contracts';
import type { RunRow } from '../store/runs.js';
import { iso } from '../store/json.js';

/**
 * Fencing: only the runner named as lease owner may write to a run. An expired lease that
 * nobody took over still belongs to its owner (it may be slow, not dead); once another runner
 * claims, the old owner's writes are refused.
 */
export function assertLeaseOwner(run: RunRow, runnerId: string): void {
  if (run.lease_owner === runnerId) return;
  throw new ServiceError(
    'runner-lease-conflict',
    run.lease_owner
      ? `run ${run.run_id} is leased by another runner`
      : `run ${run.run_id} has not been claimed by runner ${runnerId}`,
    { owner: run.lease_owner, leaseExpiresAt: iso(run.lease_expires_at), runnerId },
  );
}
