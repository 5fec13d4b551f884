import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import yaml from 'js-yaml';
import { registry } from '../src/metrics/registry.js';
// Registers the store gauges on the shared registry, as the server does.
import '../src/metrics/store-gauges.js';

const DIR = join(import.meta.dirname, '../../../deploy/prometheus');
const RULES = join(DIR, 'svc-alerts.rules.yaml');
const promtool = spawnSync('promtool', ['--version']).status === 0;
/** Series a histogram exposes besides its own name. */
const base = (name: string) => name.replace(/_(bucket|count|sum)$/, '');

describe('alert rules (deploy/prometheus)', () => {
  it(
    'pass their promtool unit tests: one alert across replicas, no purge or restart hides or invents one',
    { skip: promtool ? false : 'promtool is not installed (Debian package prometheus)' },
    () => {
      execFileSync('promtool', ['check', 'rules', RULES], { stdio: 'pipe' });
      const result = spawnSync('promtool', ['test', 'rules', 'svc-alerts.test.yaml'], {
        cwd: DIR,
        encoding: 'utf8',
      });
      assert.equal(result.status, 0, `${result.stdout}${result.stderr}`);
      assert.match(result.stdout, /SUCCESS/);
    },
  );

  it('watch only metrics and labels the manager exports (kube-state-metrics aside)', () => {
    const file = yaml.load(readFileSync(RULES, 'utf8')) as {
      groups: Array<{ rules: Array<{ alert: string; expr: string }> }>;
    };
    const rules = file.groups.flatMap((g) => g.rules);
    assert.ok(rules.length >= 8);
    for (const rule of rules) {
      for (const [, name, selector] of rule.expr.matchAll(/\b(svc_[a-z_]+)(\{[^}]*\})?/g)) {
        const metric = registry.getSingleMetric(name!) ?? registry.getSingleMetric(base(name!));
        assert.ok(metric, `${rule.alert}: ${name} is not exported`);
        const labels = (metric as unknown as { labelNames: string[] }).labelNames;
        for (const [, label] of (selector ?? '').matchAll(/([a-z_]+)\s*[=!]/g))
          assert.ok(labels.includes(label!), `${rule.alert}: ${name} has no label ${label}`);
      }
    }
    // Every alert is documented in docs/operations.md, by name.
    const doc = readFileSync(join(import.meta.dirname, '../../../docs/operations.md'), 'utf8');
    for (const rule of rules) assert.match(doc, new RegExp(`\\b${rule.alert}\\b`), rule.alert);
  });

  it('exports svc_build_info: version, commit and Node.js version', async () => {
    const { setBuildInfo } = await import('../src/metrics/registry.js');
    setBuildInfo({ version: '9.8.7', commit: 'abc123' });
    const text = await registry.getSingleMetricAsString('svc_build_info');
    assert.match(
      text,
      new RegExp(`svc_build_info\\{version="9.8.7",commit="abc123",node="${process.version}"\\} 1`),
    );
  });
});
