import { SECRET_NAMESPACE, type ProfileDeleteResponse } from '@svc/contracts';
import type { SecretStore } from '../../secrets/store.js';
import type { Ctx } from '../context.js';
import { providerSecretName, secretRefRecord } from '../runs/run-policy.js';
import { audited } from './audit.js';
import { assertManageableProfile } from './rules.js';
import { deleteProfileSecret } from './secret-io.js';
import { isBuiltin, requiredProfileKeys } from './status.js';

/**
 * DELETE …/:profile (spec/2 rule 5): the Secret goes. A built-in stays in the collection as
 * configured=false with `secret-unavailable`; a dynamic slug leaves it. Runs already holding
 * an agent home are not touched; new runs of the profile fail with `secret-unavailable`.
 */
export async function deleteProfile(
  ctx: Ctx,
  secrets: SecretStore,
  profile: string,
  traceId: string,
): Promise<ProfileDeleteResponse> {
  return audited(ctx, { profile, action: 'delete', traceId }, async () => {
    assertManageableProfile(profile);
    const removed = await deleteProfileSecret(ctx, secrets, profile);
    return {
      profile,
      removed,
      alreadyAbsent: !removed,
      stillListed: isBuiltin(profile),
      secretRef: secretRefRecord(
        SECRET_NAMESPACE,
        providerSecretName(profile),
        requiredProfileKeys(profile),
      ),
      valuesPrinted: false,
    };
  });
}
