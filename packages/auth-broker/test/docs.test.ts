import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { BROKER_FAILURE_KINDS, OPERATION_NAMES } from '../src/index.js';

const DOC = readFileSync(join(import.meta.dirname, '../../../docs/auth-broker.md'), 'utf8');

/** Rows of the markdown table that follows `heading`, as arrays of trimmed cells. */
function table(heading: string): string[][] {
  const start = DOC.indexOf(heading);
  assert.ok(start >= 0, `docs/auth-broker.md has a "${heading}" section`);
  const rows: string[][] = [];
  for (const line of DOC.slice(start).split('\n').slice(1)) {
    if (line.startsWith('#')) break;
    if (!line.startsWith('|') || /^\|\s*-/.test(line)) continue;
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim().replace(/^`|`$/g, '')),
    );
  }
  return rows.slice(1);
}

describe('docs/auth-broker.md', () => {
  it('lists exactly the failure kinds that exist, with their status, disposition and retry hint', () => {
    const rows = table('## Failure kinds');
    assert.deepEqual(rows.map((r) => r[0]).sort(), Object.keys(BROKER_FAILURE_KINDS).sort());
    for (const [kind, status, disposition, retryable] of rows) {
      const spec = BROKER_FAILURE_KINDS[kind as keyof typeof BROKER_FAILURE_KINDS];
      assert.equal(status, spec.httpStatus === null ? '—' : String(spec.httpStatus), kind);
      assert.equal(disposition, spec.runnerDisposition, kind);
      assert.equal(retryable, String(spec.retryable), kind);
    }
  });

  it('lists exactly the operations of the allowlist', () => {
    assert.deepEqual(
      table('## Operations')
        .map((r) => r[0])
        .sort(),
      [...OPERATION_NAMES].sort(),
    );
  });
});
