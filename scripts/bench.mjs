#!/usr/bin/env node
// Runs every packages/*/bench/*.bench.ts in turn and lets each print its figures.
// Usage: node scripts/bench.mjs [path-substring ...]
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const filters = process.argv.slice(2);
const benches = [];
for (const pkg of readdirSync('packages').sort()) {
  const dir = join('packages', pkg, 'bench');
  if (!existsSync(dir)) continue;
  for (const file of readdirSync(dir).sort())
    if (file.endsWith('.bench.ts')) benches.push(join(dir, file));
}
const selected = benches.filter((b) => filters.length === 0 || filters.some((f) => b.includes(f)));
let failed = 0;
for (const bench of selected) {
  console.log(`\n=== ${bench} ===`);
  const result = spawnSync(process.execPath, ['--conditions=source', '--import', 'tsx', bench], {
    stdio: 'inherit',
  });
  if (result.status !== 0) failed++;
}
if (failed > 0) {
  console.error(`${failed} benchmark(s) failed`);
  process.exit(1);
}
