import type { Command, CommandStatusBody } from '@svc/contracts';
import { recordProgress } from '../../store/command-progress.js';
import { tokenHash } from '../caller-tokens.js';
import type { Ctx } from '../context.js';
import { toCommand } from './records.js';

/**
 * The runner's usual progress report (`running`, the thread and turn ids, no events) in one
 * fenced statement instead of a locked transaction of five: it comes once per turn, while the
 * turn's first events are being appended under the same run lock. Undefined when the report
 * is anything else or is refused: `reportCommandStatus` then handles it and explains why.
 */
export async function recordProgressAtOnce(
  ctx: Ctx,
  commandId: string,
  body: CommandStatusBody,
  leaseToken: string | undefined,
): Promise<Command | undefined> {
  if (body.state !== 'running' || (body.events?.length ?? 0) > 0) return undefined;
  // U+0000 outside event data is refused by the general path; JSON spells it as an escape.
  if (JSON.stringify(body).includes('\\u0000')) return undefined;
  const recorded = await recordProgress(
    ctx.db,
    commandId,
    body.runnerId,
    tokenHash(leaseToken ?? ''),
    { threadId: body.threadId || null, turnId: body.turnId || null },
  );
  return recorded ? toCommand(recorded) : undefined;
}
