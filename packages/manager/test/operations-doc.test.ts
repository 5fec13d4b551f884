import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { registry } from '../src/metrics/registry.js';
// Registers the store gauges on the shared registry, as the server does.
import '../src/metrics/store-gauges.js';

/** Series a histogram exposes besides its own name. */
const base = (name: string) => name.replace(/_(bucket|count|sum)$/, '');

describe('docs/operations.md', () => {
  it('names only metrics and labels the manager exports', async () => {
    const text = await readFile(join(import.meta.dirname, '../../../docs/operations.md'), 'utf8');
    const uses = [...text.matchAll(/\b(svc_[a-z_]+)(\{[^}]*\})?/g)];
    assert.ok(uses.length >= 8, 'the alerts name the metrics they watch');
    for (const [, name, selector] of uses) {
      const metric = registry.getSingleMetric(name!) ?? registry.getSingleMetric(base(name!));
      assert.ok(metric, `${name} is not exported`);
      const labels = (metric as unknown as { labelNames: string[] }).labelNames;
      for (const [, label] of (selector ?? '').matchAll(/([a-z_]+)\s*[=!]/g))
        assert.ok(labels.includes(label!), `${name} has no label ${label}`);
    }
  });
});
