import type { QueueLimitsBody, QueueSettings, SchedulerLimits } from '@svc/contracts';
import type { Command } from 'commander';
import { UsageError } from './errors.js';
import type { Cli } from './run.js';
import { intOption } from './inputs.js';
import { limitsLines } from './format/scheduler.js';

const BASE = '/api/v1/queue';
const MAX_LIMIT = 100_000;

/**
 * `name=N` (or `name=none`, which removes a limit set earlier: back to configuration), for
 * `--tenant` and `--profile`, repeatable.
 */
function namedLimit(flag: string, min: number) {
  const parse = intOption(flag, MAX_LIMIT, min);
  return (raw: string, previous: Record<string, number | null> = {}) => {
    const at = raw.lastIndexOf('=');
    const name = at > 0 ? raw.slice(0, at) : '';
    const value = at > 0 ? raw.slice(at + 1) : '';
    if (!name || !value) throw new UsageError(`${flag} takes name=N or name=none (got "${raw}")`);
    return { ...previous, [name]: value === 'none' ? null : parse(value) };
  };
}

/** A number, or `none` (kept as the word: commander turns an option parsed to null into ''). */
function globalLimit(raw: string): number | 'none' {
  return raw === 'none' ? 'none' : intOption('--global', MAX_LIMIT)(raw);
}

/** `queue pause`, `queue resume` and `queue limits`: the scheduler's run-time controls. */
export function queueControls(cli: Cli, p: Command): void {
  const setPaused = (paused: boolean) =>
    cli.action(async (inv, queue: string) => {
      const answer = await inv.client.request<QueueSettings>(
        'PUT',
        `${BASE}/queues/${encodeURIComponent(queue)}/settings`,
        { paused },
      );
      if (inv.config.json) return inv.out.data(answer);
      inv.out.line(
        paused
          ? `queue ${answer.queue} paused: nothing of it is dispatched until queue resume ${answer.queue}`
          : `queue ${answer.queue} resumed: the scheduler starts its tasks again`,
      );
    });
  p.command('pause')
    .description('pause a queue: no task of it is dispatched, by the scheduler or by hand')
    .argument('<queue>')
    .action(setPaused(true));
  p.command('resume')
    .description('resume a paused queue: the scheduler starts its tasks again')
    .argument('<queue>')
    .action(setPaused(false));

  p.command('limits')
    .description(
      'set capacity limits and profile start rates at run time (every replica, next pass); ' +
        'none removes one (back to configuration); no option shows the limits in force',
    )
    .option('--global <n|none>', 'live runners at most, service-wide', globalLimit)
    .option(
      '--tenant <name=n|none>',
      'live runners per tenant (repeatable)',
      namedLimit('--tenant', 0),
    )
    .option(
      '--profile <name=n|none>',
      'live runners per provider profile (repeatable)',
      namedLimit('--profile', 0),
    )
    .option(
      '--profile-rate <name=n|none>',
      'attempt starts per minute per provider profile (repeatable)',
      namedLimit('--profile-rate', 1),
    )
    .action(
      cli.action(
        async (
          inv,
          flags: {
            global?: number | 'none';
            tenant?: Record<string, number | null>;
            profile?: Record<string, number | null>;
            profileRate?: Record<string, number | null>;
          },
        ) => {
          const body: QueueLimitsBody = {
            ...(flags.global !== undefined
              ? { global: flags.global === 'none' ? null : flags.global }
              : {}),
            ...(flags.tenant ? { tenants: flags.tenant } : {}),
            ...(flags.profile ? { profiles: flags.profile } : {}),
            ...(flags.profileRate ? { profileRates: flags.profileRate } : {}),
          };
          const limits =
            Object.keys(body).length === 0
              ? (await inv.client.request<{ limits: SchedulerLimits }>('GET', `${BASE}/scheduler`))
                  .limits
              : await inv.client.request<SchedulerLimits>('PUT', `${BASE}/limits`, body);
          if (inv.config.json) return inv.out.data(limits);
          for (const line of limitsLines(limits)) inv.out.line(line);
        },
      ),
    );
}
