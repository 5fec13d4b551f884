import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { FAILURE_KINDS } from '@svc/contracts';

describe('docs/failure-kinds.md', () => {
  it('lists exactly the registered failure kinds, each with its HTTP status', async () => {
    const text = await readFile(
      join(import.meta.dirname, '../../../docs/failure-kinds.md'),
      'utf8',
    );
    const documented = new Map<string, string>();
    for (const match of text.matchAll(/^\| `([a-z-]+)` \| ([0-9]{3}|—) \|/gm))
      documented.set(match[1]!, match[2]!);
    const registered = new Map(
      Object.entries(FAILURE_KINDS).map(([kind, info]) => [
        kind,
        info.httpStatus === null ? '—' : String(info.httpStatus),
      ]),
    );
    assert.deepEqual([...documented.keys()].sort(), [...registered.keys()].sort());
    for (const [kind, status] of registered) assert.equal(documented.get(kind), status, kind);
  });
});
