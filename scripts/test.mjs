#!/usr/bin/env node
// Runs every test file with node's test runner (TypeScript through tsx, workspace packages
// from source). Usage: node scripts/test.mjs [path-substring ...]
import { spawn } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { availableParallelism } from 'node:os';

const filters = process.argv.slice(2);
const files = [];
const walk = (dir) => {
  for (const entry of readdirSync(dir)) {
    if (entry === 'node_modules' || entry === 'dist') continue;
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) walk(path);
    else if (path.endsWith('.test.ts')) files.push(path);
  }
};
for (const pkg of readdirSync('packages')) {
  try {
    walk(join('packages', pkg, 'test'));
  } catch {
    // package without tests
  }
}
const selected = files
  .sort()
  .filter((f) => filters.length === 0 || filters.some((s) => f.includes(s)));
if (selected.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? String(Math.max(2, availableParallelism()));
const child = spawn(
  process.execPath,
  [
    '--conditions=source',
    '--import',
    'tsx',
    '--test',
    `--test-concurrency=${concurrency}`,
    // No single test may hang CI: ten minutes is far above the slowest end-to-end test.
    '--test-timeout=600000',
    '--test-reporter=spec',
    ...selected,
  ],
  { stdio: 'inherit', env: { ...process.env, NODE_ENV: 'test' } },
);
child.on('exit', (code, signal) => process.exit(signal ? 1 : (code ?? 1)));
