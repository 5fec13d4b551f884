import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError } from '@svc/contracts';
import {
  FEATURE_CONFIG_SCHEMA_URL,
  FeatureConfigError,
  loadConfig,
  loadFeatureConfig,
  WebProbeSentinel,
  type SentinelScheduler,
} from '../src/index.js';
import { eventually, startTestBroker } from './helpers.js';

/** A scheduler the test advances by hand; it records the interval it was given. */
class ManualScheduler implements SentinelScheduler {
  callback: (() => void) | null = null;
  intervalMs: number | null = null;
  cleared = false;
  setInterval(callback: () => void, ms: number): unknown {
    this.callback = callback;
    this.intervalMs = ms;
    return 1;
  }
  clearInterval(): void {
    this.cleared = true;
  }
  tick(): void {
    this.callback?.();
  }
}

const enabled = (intervalSeconds = 30) => ({
  webProbeSentinel: { enabled: true, scheduler: { intervalSeconds } },
});

describe('feature configuration schema', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'feature-config-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('ships a draft 2020-12 schema with the web-probe-sentinel feature', () => {
    const schema = JSON.parse(readFileSync(FEATURE_CONFIG_SCHEMA_URL, 'utf8'));
    assert.equal(schema.$schema, 'https://json-schema.org/draft/2020-12/schema');
    assert.equal(schema.additionalProperties, false);
    assert.deepEqual(Object.keys(schema.properties), ['webProbeSentinel']);
    assert.equal(schema.required, undefined, 'webProbeSentinel is optional');
    const sentinel = schema.properties.webProbeSentinel;
    assert.equal(sentinel.title, 'web-probe-sentinel', 'the feature marker');
    assert.deepEqual(sentinel.required, ['enabled', 'scheduler']);
    assert.equal(sentinel.additionalProperties, false);
    assert.equal(sentinel.properties.scheduler.properties.intervalSeconds.minimum, 30);
  });

  it('accepts valid documents, from an object or a file', async () => {
    assert.deepEqual(loadFeatureConfig({}), {});
    assert.deepEqual(loadFeatureConfig(enabled(30)), enabled(30));
    const disabled = { webProbeSentinel: { enabled: false, scheduler: { intervalSeconds: 600 } } };
    const path = join(dir, 'features.json');
    await writeFile(path, JSON.stringify(disabled));
    assert.deepEqual(loadFeatureConfig(path), disabled);
  });

  it('lists every problem of an invalid document', () => {
    const bad = {
      webProbeSentinel: {
        enabled: 'yes',
        scheduler: { intervalSeconds: 10, jitter: 1 },
        extra: true,
      },
      otherFeature: {},
    };
    const error = (() => {
      try {
        loadFeatureConfig(bad);
      } catch (e) {
        return e;
      }
      return null;
    })();
    assert.ok(error instanceof FeatureConfigError);
    const text = error.problems.join('\n');
    assert.match(text, /\(root\) has unknown property "otherFeature"/);
    assert.match(text, /webProbeSentinel has unknown property "extra"/);
    assert.match(text, /webProbeSentinel\.enabled must be boolean \(got "yes"\)/);
    assert.match(text, /webProbeSentinel\.scheduler\.intervalSeconds must be >= 30 \(got 10\)/);
    assert.match(text, /webProbeSentinel\.scheduler has unknown property "jitter"/);
    assert.equal(error.problems.length, 5);
  });

  it('requires the required fields and an integer interval', () => {
    assert.throws(
      () => loadFeatureConfig({ webProbeSentinel: { enabled: true } }),
      (e: FeatureConfigError) =>
        e.problems.some((p) => /missing required property "scheduler"/.test(p)),
    );
    assert.throws(
      () => loadFeatureConfig({ webProbeSentinel: { enabled: true, scheduler: {} } }),
      (e: FeatureConfigError) =>
        e.problems.some((p) => /missing required property "intervalSeconds"/.test(p)),
    );
    assert.throws(
      () => loadFeatureConfig(enabled(45.5)),
      (e: FeatureConfigError) => e.problems.some((p) => /must be integer/.test(p)),
    );
    assert.throws(() => loadFeatureConfig([]), FeatureConfigError);
  });

  it('names unreadable and non-JSON files', async () => {
    assert.throws(
      () => loadFeatureConfig(join(dir, 'missing.json')),
      /cannot read the file \(ENOENT\)/,
    );
    const path = join(dir, 'broken.json');
    await writeFile(path, '{ "webProbeSentinel": ');
    assert.throws(() => loadFeatureConfig(path), /not valid JSON/);
  });

  it('stops the broker from starting with a bad feature file, naming the variable', async () => {
    const path = join(dir, 'too-fast.json');
    await writeFile(path, JSON.stringify(enabled(5)));
    assert.throws(
      () => loadConfig({ AUTH_BROKER_FEATURE_CONFIG: path }),
      (e: ConfigError) =>
        e instanceof ConfigError &&
        e.problems.some(
          (p) => p.includes('AUTH_BROKER_FEATURE_CONFIG') && p.includes('must be >= 30 (got 5)'),
        ),
    );
  });
});

describe('web probe sentinel', () => {
  let server: Server;
  let base: string;
  let hits = 0;
  before(async () => {
    server = createServer((req, res) => {
      hits++;
      if (req.url === '/down') {
        res.writeHead(503, { 'content-type': 'application/json' });
        res.end('{"secret":"never read"}');
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"ok":true,"body":"not recorded"}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  it('probes at once, then on the configured interval, recording no bodies', async () => {
    const scheduler = new ManualScheduler();
    const sentinel = new WebProbeSentinel({
      config: enabled(45).webProbeSentinel,
      urls: [`${base}/health`, `${base}/down`, 'http://127.0.0.1:9/health'],
      scheduler,
    });
    const before = hits;
    sentinel.start();
    assert.equal(scheduler.intervalMs, 45_000);
    await eventually(() => sentinel.lastResults().length === 3);
    assert.equal(hits - before, 2, 'the first round ran immediately');
    const [up, down, refused] = sentinel.lastResults();
    assert.equal(up!.ok, true);
    assert.equal(up!.status, 200);
    assert.equal(up!.error, null);
    assert.ok(up!.latencyMs >= 0 && !Number.isNaN(Date.parse(up!.checkedAt)));
    assert.deepEqual([down!.ok, down!.status, down!.error], [false, 503, 'http-status']);
    assert.deepEqual(
      [refused!.ok, refused!.status, refused!.error],
      [false, null, 'connection-failed'],
    );
    assert.ok(!JSON.stringify(sentinel.lastResults()).includes('never read'));
    assert.deepEqual(Object.keys(up!).sort(), [
      'checkedAt',
      'error',
      'latencyMs',
      'ok',
      'status',
      'url',
    ]);

    const firstCheck = up!.checkedAt;
    scheduler.tick();
    await eventually(() => sentinel.lastResults()[0]!.checkedAt !== firstCheck);
    assert.equal(hits - before, 4, 'the tick ran a second round');
    await sentinel.stop();
    assert.equal(scheduler.cleared, true);
  });

  it('does nothing when disabled or unconfigured', async () => {
    for (const config of [{ enabled: false, scheduler: { intervalSeconds: 30 } }, undefined]) {
      const scheduler = new ManualScheduler();
      const sentinel = new WebProbeSentinel({ config, urls: [`${base}/health`], scheduler });
      const before = hits;
      sentinel.start();
      await new Promise((r) => setTimeout(r, 50));
      assert.equal(scheduler.callback, null);
      assert.equal(hits, before);
      assert.deepEqual(sentinel.lastResults(), []);
    }
  });

  it('reports a timeout as its own error kind and prints URLs without credentials', async () => {
    const hang = createServer(() => undefined);
    await new Promise<void>((r) => hang.listen(0, '127.0.0.1', r));
    const port = (hang.address() as AddressInfo).port;
    try {
      const sentinel = new WebProbeSentinel({
        config: enabled(30).webProbeSentinel,
        urls: [`http://127.0.0.1:${port}/health?token=hunter2secret`],
        timeoutMs: 100,
        scheduler: new ManualScheduler(),
      });
      const [result] = await sentinel.probeNow();
      assert.equal(result!.error, 'timeout');
      assert.ok(!result!.url.includes('hunter2secret'), result!.url);
    } finally {
      hang.closeAllConnections();
      await new Promise<void>((r) => hang.close(() => r()));
    }
  });

  it('refuses URLs that are not http(s) or that carry credentials', () => {
    assert.throws(
      () => new WebProbeSentinel({ config: undefined, urls: ['file:///etc/passwd', 'nope'] }),
      /not http\(s\) URLs/,
    );
    assert.throws(
      () =>
        new WebProbeSentinel({
          config: undefined,
          urls: [`${base}/x`, 'http://u:hunter2secret@127.0.0.1/'],
        }),
      (e: Error) =>
        /must not carry credentials/.test(e.message) && !e.message.includes('hunter2secret'),
    );
  });

  it('runs inside the broker when AUTH_BROKER_FEATURE_CONFIG enables it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'broker-features-'));
    const path = join(dir, 'features.json');
    await writeFile(path, JSON.stringify(enabled(30)));
    const t = await startTestBroker({ env: { AUTH_BROKER_FEATURE_CONFIG: path } });
    try {
      let health = await t.get('/health');
      await eventually(async () => {
        health = await t.get('/health');
        return health.body.features.webProbeSentinel.lastResults.length === 1;
      });
      const feature = health.body.features.webProbeSentinel;
      assert.equal(feature.enabled, true);
      assert.equal(feature.intervalSeconds, 30);
      assert.deepEqual(feature.targets, [`${t.url}/health`]);
      assert.equal(feature.lastResults[0].ok, true);
      assert.equal(feature.lastResults[0].status, 200);
      // Its probes are ordinary requests: audited like any other.
      assert.ok((await t.audit()).some((a) => a.endpoint.path === '/health'));
    } finally {
      await t.close();
      await rm(dir, { recursive: true, force: true });
    }
    const plain = await startTestBroker();
    try {
      assert.deepEqual((await plain.get('/health')).body.features, {});
    } finally {
      await plain.close();
    }
  });
});
