import { startQueueRig, type QueueRig } from '../../manager/test/queue-helpers.js';
import { assertBuilt } from './cli-helpers.js';

/**
 * A real manager (real PostgreSQL, listening on loopback) guarded by `key`, and the
 * environment that points the built client at it: the set-up of every `queue` client test.
 * `managerEnv` adds manager settings; `clientEnv` adds client ones (`NO_COLOR`).
 */
export async function startCliRig(
  key: string,
  managerEnv: Record<string, string> = {},
  clientEnv: Record<string, string> = {},
): Promise<{ rig: QueueRig; env: Record<string, string> }> {
  assertBuilt();
  const rig = await startQueueRig({ listen: true, env: { SVC_API_KEY: key, ...managerEnv } });
  return {
    rig,
    env: { SVC_MANAGER_URL: rig.t.manager.url, SVC_API_KEY: key, ...clientEnv },
  };
}
