import { randomBytes } from 'node:crypto';
import { Redactor } from '@svc/contracts';
import { out, pct } from './support.js';

/**
 * The cost of masking: one scrub (registered values in every encoding, then credential shapes)
 * of an event-sized and a body-sized text, with a realistic and a large mask set, and the cost
 * of rebuilding the matcher after a credential write.
 */

const secret = () => `sk-proj-${randomBytes(24).toString('base64url')}`;
const prose = (bytes: number) => {
  const line =
    'INFO compiling module src/queue/worker.ts (42 files, 3.1 s) https://example.com/docs?page=2 ';
  return line.repeat(Math.ceil(bytes / line.length)).slice(0, bytes);
};

function time(fn: () => void, runs: number): number[] {
  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const started = performance.now();
    fn();
    times.push(performance.now() - started);
  }
  return times;
}

for (const values of [10, 200]) {
  const redactor = new Redactor();
  for (let i = 0; i < values; i++) redactor.register(`secret:${i}`, [secret(), secret()]);
  const rebuild = time(() => {
    redactor.register('secret:0', [secret()]);
    redactor.redact('x');
  }, 20);
  out(
    `matcher rebuild, ${redactor.size} values (${redactor.formCount} forms)`,
    `${pct(rebuild, 50).toFixed(2)} ms p50`,
  );
  for (const bytes of [4 * 1024, 1024 * 1024]) {
    const text = prose(bytes);
    for (let i = 0; i < 5; i++) redactor.scrub(text); // warm: the figures are for a running service
    const times = time(() => redactor.scrub(text), bytes > 100_000 ? 20 : 500);
    const mbps = bytes / 1024 / 1024 / (pct(times, 50) / 1000);
    out(
      `scrub ${bytes / 1024} KiB, ${redactor.size} values`,
      `${pct(times, 50).toFixed(3)} ms p50`,
      `${mbps.toFixed(0)} MiB/s`,
    );
  }
  // What an append's body parse does most: many short strings (the keys and values of a
  // 10-event batch), where the per-call cost of the shape rules, not the scan, counts.
  const strings = Array.from(
    { length: 1000 },
    (_, i) =>
      ['command_output', 'itemId', `item-${i}`, 'stdout', `line ${i}.3`, `f-${i}-3`][i % 6]!,
  );
  for (let i = 0; i < 20; i++) for (const s of strings) redactor.scrub(s);
  const short = time(() => {
    for (const s of strings) redactor.scrub(s);
  }, 200);
  out(
    `scrub 1,000 short strings (keys, names, lines), ${redactor.size} values`,
    `${((pct(short, 50) * 1000) / strings.length).toFixed(2)} µs each p50`,
  );
}
