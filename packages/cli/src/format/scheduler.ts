import type { JudgeRun, SchedulerLimits, SchedulerView } from '@svc/contracts';
import { clip } from '../output.js';

const limitOf = (named: Record<string, number>, key: string, each: number | null) =>
  named[key] ?? each;

/** `used/limit`, or `used/-` when nothing bounds it. */
const usage = (used: number, limit: number | null | undefined) =>
  `${used}/${limit === null || limit === undefined ? '-' : limit}`;

/**
 * Every key that has either a named limit or attempts in use, so a limit with nothing running
 * still shows (an operator checking "why does tenant X not start" sees its limit of 0).
 */
function usageLines(
  label: string,
  used: Record<string, number>,
  named: Record<string, number>,
  each: number | null,
): string[] {
  const keys = [...new Set([...Object.keys(used), ...Object.keys(named)])].sort();
  const head = `  ${label}: each ${each ?? 'unlimited'}`;
  if (keys.length === 0) return [`${head}; none in use`];
  return [head, ...keys.map((k) => `    ${k}  ${usage(used[k] ?? 0, limitOf(named, k, each))}`)];
}

const sourced = (names: Record<string, number>, sources: Record<string, string>) =>
  Object.keys(names)
    .sort()
    .map((k) => `${k}=${names[k]} (${sources[k] ?? 'configured'})`)
    .join(', ') || 'none named';

/** The limits in force and where each comes from (configured, or stored through the API). */
export function limitsLines(l: SchedulerLimits): string[] {
  const rates = Object.entries(l.profileRates);
  return [
    `limits in force: global ${l.global} (${l.sources.global})`,
    `  tenants: each ${l.perTenant ?? 'unlimited'} (configured); ${sourced(l.tenants, l.sources.tenants)}`,
    `  profiles: each ${l.perProfile ?? 'unlimited'} (configured); ${sourced(l.profiles, l.sources.profiles)}`,
    `  profile start rates: ${rates.length === 0 ? 'none' : rates.map(([k, n]) => `${k}=${n}/min (stored)`).join(', ')}`,
  ];
}

/** `queue scheduler`: capacity in use against its limits, backlog, the next wake-up. */
export function schedulerLines(v: SchedulerView): string[] {
  const lines = [
    `scheduler ${v.enabled ? 'on' : 'off'} (instance ${v.instanceId})` +
      `  last pass ${v.lastPassAt ?? 'never'}  next wake-up ${v.nextWakeAt ?? (v.enabled ? 'on demand' : '-')}` +
      `  scan every ${Math.round(v.scanIntervalMs / 1000)}s`,
    `capacity in use: global ${usage(v.inUse.global, v.limits.global)}`,
    ...usageLines('per tenant', v.inUse.byTenant, v.limits.tenants, v.limits.perTenant),
    ...usageLines('per backend profile', v.inUse.byProfile, v.limits.profiles, v.limits.perProfile),
    ...usageLines('per queue', v.inUse.byQueue, v.limits.queues, v.limits.perQueue),
    ...limitsLines(v.limits),
  ];
  const paused = v.queues.filter((q) => q.paused).map((q) => q.queue);
  lines.push(
    paused.length === 0
      ? 'paused queues: none'
      : `paused queues: ${paused.join(', ')} (nothing of them is dispatched; queue resume <queue>)`,
  );
  const keys = Object.entries(v.inUse.byKey);
  if (keys.length > 0)
    lines.push(`concurrency keys in use: ${keys.map(([k, n]) => `${k} ${n}`).join(', ')}`);
  for (const r of v.rates)
    lines.push(
      `profile ${r.profile}: ${r.startsLastMinute} of ${r.perMinute} starts in the last minute` +
        (r.nextStartAt ? `; next start at ${r.nextStartAt}` : ''),
    );
  if (v.backlog.length === 0) lines.push('backlog: none queued');
  else {
    lines.push('backlog (tenant  queue  ready  waiting  next runAfter):');
    for (const b of v.backlog)
      lines.push(`  ${b.tenantId}  ${b.queue}  ${b.ready}  ${b.waiting}  ${b.nextRunAfter ?? '-'}`);
  }
  lines.push(
    `judges open ${v.judges.open} · runs awaiting a replacement runner ${v.replacements.pending}` +
      ` (at most ${v.replacements.maxPerRun} per run)`,
  );
  return lines;
}

/** One judge run: verdict, failure kind, the retry it suggests, and the attempt it reviewed. */
export function judgeRunLines(j: JudgeRun): string[] {
  const lines = [
    `judge ${j.judgeRunId} ${j.state} verdict ${j.verdict ?? '-'}` +
      `${j.failureKind ? ` ${j.failureKind}` : ''}  attempt ${j.attemptId ?? '-'}` +
      `  profile ${j.backendProfile ?? '-'}`,
  ];
  if (j.retrySuggestion) lines.push(`  retry suggestion: ${clip(j.retrySuggestion, 150)}`);
  if (j.sessionId) lines.push(`  judged in session ${j.sessionId} (run ${j.runId ?? '-'})`);
  return lines;
}
