#!/usr/bin/env node
// Lints every Dockerfile under deploy/ with dockerfile-utils (every rule raised to an error),
// then checks the rules the images promise in docs/operations.md: base images pinned by digest,
// a non-root final user, OCI version and revision labels. Exits non-zero on any problem.
// Usage: node scripts/lint-dockerfiles.mjs [file ...]
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { validate, ValidationSeverity } from 'dockerfile-utils';

const STRICT = Object.fromEntries(
  [
    'deprecatedMaintainer',
    'directiveCasing',
    'emptyContinuationLine',
    'instructionCasing',
    'instructionCmdMultiple',
    'instructionEntrypointMultiple',
    'instructionHealthcheckMultiple',
    'instructionJSONInSingleQuotes',
    'instructionWorkdirRelative',
  ].map((rule) => [rule, ValidationSeverity.ERROR]),
);

function dockerfiles(dir) {
  const found = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) found.push(...dockerfiles(path));
    else if (/^Dockerfile(\.[\w-]+)?$/.test(entry) && !entry.endsWith('.dockerignore'))
      found.push(path);
  }
  return found;
}

/** Instructions with their line numbers, continuation lines joined. */
function instructions(text) {
  const out = [];
  let current = null;
  text.split('\n').forEach((raw, index) => {
    const line = raw.trim();
    if (current === null) {
      if (line === '' || line.startsWith('#')) return;
      current = { line: index + 1, text: '' };
    } else if (line.startsWith('#')) return;
    const continued = line.endsWith('\\');
    current.text += (current.text ? ' ' : '') + (continued ? line.slice(0, -1).trim() : line);
    if (!continued) {
      out.push(current);
      current = null;
    }
  });
  return out;
}

/** The project's own image rules; each problem is [line, message]. */
function projectProblems(text) {
  const problems = [];
  const list = instructions(text);
  const args = new Map();
  for (const { text: ins } of list) {
    const match = /^ARG\s+(\w+)=(\S+)/i.exec(ins);
    if (match) args.set(match[1], match[2]);
  }
  const stages = [];
  for (const { line, text: ins } of list) {
    const from = /^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?/i.exec(ins);
    if (!from) continue;
    stages.push({ line, start: list.findIndex((i) => i.line === line) });
    const ref = from[1].replace(/^\$\{?(\w+)\}?$/, (_, name) => args.get(name) ?? `$${name}`);
    const previousStage = stages.some((s) => s.name === from[1]);
    stages.at(-1).name = from[2];
    if (!previousStage && !/@sha256:[0-9a-f]{64}$/.test(ref))
      problems.push([line, `base image is not pinned by digest: ${from[1]}`]);
  }
  const final = list.slice(stages.at(-1)?.start ?? 0);
  const user = final.filter((i) => /^USER\s/i.test(i.text)).at(-1);
  if (!user) problems.push([1, 'the final stage sets no USER (images run as non-root)']);
  else if (/^USER\s+(root|0)(:|\s|$)/i.test(user.text))
    problems.push([user.line, 'the final stage runs as root']);
  const labels = final
    .filter((i) => /^LABEL\s/i.test(i.text))
    .map((i) => i.text)
    .join(' ');
  for (const label of ['org.opencontainers.image.version', 'org.opencontainers.image.revision'])
    if (!labels.includes(label)) problems.push([1, `the final stage has no ${label} label`]);
  return problems;
}

const files = process.argv.length > 2 ? process.argv.slice(2) : dockerfiles('deploy');
if (files.length === 0) {
  console.error('lint-dockerfiles: no Dockerfile found under deploy/');
  process.exit(1);
}
let failures = 0;
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const found = [
    ...validate(text, STRICT).map((d) => [d.range.start.line + 1, d.message]),
    ...projectProblems(text),
  ];
  for (const [line, message] of found) console.error(`${file}:${line}: ${message}`);
  failures += found.length;
}
if (failures > 0) {
  console.error(`lint-dockerfiles: ${failures} problem(s) in ${files.length} file(s)`);
  process.exit(1);
}
console.log(`lint-dockerfiles: ${files.length} Dockerfile(s) clean`);
