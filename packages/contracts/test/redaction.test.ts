import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Redactor, SECRET_SHAPES, scrubSecretShapes, secretShapesIn } from '../src/index.js';

const secret = () => `sk-live-${randomBytes(12).toString('hex')}`;

/** The forms a careless tool or a log line produces from a value embedded in other text. */
function encodings(value: string): Record<string, string> {
  const out: Record<string, string> = {
    plain: `key=${value};`,
    json: JSON.stringify({ k: `a"${value}\n` }),
    jsonTwice: JSON.stringify(JSON.stringify({ k: value })),
    url: `q=${encodeURIComponent(`${value} &x`)}`,
    urlEveryByte: [...Buffer.from(value)].map((b) => `%${b.toString(16)}`).join(''),
    hex: Buffer.from(value).toString('hex'),
    HEX: Buffer.from(value).toString('hex').toUpperCase(),
  };
  for (const prefix of ['', 'a', 'ab', 'abc']) {
    const bytes = Buffer.from(`${prefix}${value}tail`);
    out[`base64+${prefix.length}`] = bytes.toString('base64');
    out[`base64url+${prefix.length}`] = bytes.toString('base64url');
  }
  return out;
}

describe('Redactor: known values', () => {
  it('masks a value in every encoding at every base64 alignment', () => {
    const value = `${secret()}/+?"é`;
    const redactor = new Redactor().register('p', [value]);
    for (const [form, text] of Object.entries(encodings(value))) {
      assert.ok(redactor.leaks(text), `${form} is recognised`);
      const masked = redactor.redact(text);
      assert.match(masked, /\[redacted\]/, form);
      assert.equal(new Redactor().register('p', [value]).leaks(masked), false, form);
    }
  });

  it('never registers values too short, too common or too low in entropy', () => {
    const redactor = new Redactor().ignore(['tenant-a', 'proj-1']);
    redactor.register('p', [
      'tenant-a',
      'TENANT-A',
      'proj-1',
      'true',
      'postgres',
      'password',
      '1234567890',
      '2026-11-24T00:00:00Z',
      'aaaaaaaaaaaaaaaa',
      'abababababababab',
      'builtin-a',
      '[redacted]',
      'short7!',
    ]);
    assert.equal(redactor.size, 0);
    assert.equal(
      redactor.redact('tenant-a true postgres 1234567890'),
      'tenant-a true postgres 1234567890',
    );
  });

  it('keeps one set per source: a replaced value is forgotten once no source holds it', () => {
    const [a, b] = [secret(), secret()];
    const redactor = new Redactor().register('one', [a]).register('two', [a]);
    redactor.register('one', [b]);
    assert.equal(redactor.size, 2);
    assert.ok(redactor.leaks(a), 'still held by source two');
    redactor.unregister('two');
    assert.equal(redactor.leaks(a), false);
    assert.ok(redactor.leaks(b));
    assert.equal(redactor.size, 1);
    // Writing the same source again and again does not grow the set.
    for (let i = 0; i < 1000; i++) redactor.register('one', [secret()]);
    assert.equal(redactor.size, 1);
  });

  it('masks outgoing-only values going out, but not in the request fields that carry them', () => {
    const [lab, apiKey] = [secret(), secret()];
    const redactor = new Redactor().register('config:api-keys', [apiKey]);
    redactor.registerOutgoing('runner-job:1', [lab]);
    assert.equal(redactor.redact(`${lab} ${apiKey}`), '[redacted] [redacted]');
    assert.equal(redactor.redactIncoming(`${lab} ${apiKey}`), `${lab} [redacted]`);
    // A value some ordinary source also holds is masked both ways while that source holds it.
    redactor.register('secret:x', [lab]);
    assert.equal(redactor.redactIncoming(lab), '[redacted]');
    redactor.unregister('secret:x');
    assert.equal(redactor.redactIncoming(lab), lab);
    // Two jobs given the same value: it stays masked until the last one is forgotten.
    redactor.registerOutgoing('runner-job:2', [lab]);
    redactor.unregister('runner-job:1');
    assert.ok(redactor.leaks(lab));
    redactor.unregister('runner-job:2');
    assert.equal(redactor.leaks(lab), false);
    assert.equal(redactor.size, 1);
    // A source re-registered as ordinary is masked both ways.
    redactor.registerOutgoing('s', [lab]).register('s', [lab]);
    assert.equal(redactor.redactIncoming(lab), '[redacted]');
    redactor.unregister('s');
    assert.equal(redactor.size, 1);
  });

  it('replaces the longest registered value when one contains another', () => {
    const inner = secret();
    const outer = `${inner}-${secret()}`;
    const redactor = new Redactor().register('p', [inner, outer]);
    assert.equal(redactor.redact(`x ${outer} y`), 'x [redacted] y');
  });

  it('finds any registered value in arbitrary surrounding text (property)', () => {
    const value = secret();
    const redactor = new Redactor().register('p', [value]);
    fc.assert(
      fc.property(fc.string(), fc.string(), (before, after) => {
        const text = `${before}${value}${after}`;
        return !redactor.redact(text).includes(value);
      }),
      { numRuns: 300 },
    );
  });
});

/** Realistic shapes: the issuer formats, built from random bytes so no real token is named. */
const alnum = (n: number) =>
  randomBytes(n * 2)
    .toString('base64')
    .replace(/[^A-Za-z0-9]/g, '')
    .slice(0, n)
    .padEnd(n, 'x');

const SHAPES: Record<string, string[]> = {
  'url-userinfo': [
    `git clone https://deploy:${alnum(20)}@github.example/org/repo.git`,
    `fetch from HTTPS://x-access-token:${alnum(30)}@code.example/o/r`,
    `remote = https://${alnum(40)}@github.com/o/r`,
  ],
  'authorization-header': [
    `curl -H "Authorization: token ${alnum(24)}" https://api.example`,
    `{"authorization":"Basic ${Buffer.from(`u:${alnum(12)}`).toString('base64')}"}`,
    `Proxy-Authorization: Bearer ${alnum(30)}`,
  ],
  'bearer-token': [`the header was bearer ${alnum(32)}.${alnum(8)}`],
  'private-key-block': [
    `-----BEGIN OPENSSH PRIVATE KEY-----\n${alnum(64)}\n${alnum(64)}\n-----END OPENSSH PRIVATE KEY-----`,
    `-----BEGIN RSA PRIVATE KEY-----\\n${alnum(64)}\\n-----END RSA PRIVATE KEY-----`,
    `-----BEGIN PRIVATE KEY-----\n${alnum(64)} (truncated`,
  ],
  'github-token': ['ghp', 'gho', 'ghs', 'ghu', 'ghr'].map((p) => `token ${p}_${alnum(36)} used`),
  'github-fine-grained': [`github_pat_${alnum(22)}_${alnum(59)}`],
  'openai-key': [`OPENAI key sk-proj-${alnum(48)}`, `sk-${alnum(48)}`],
  'anthropic-key': [`sk-ant-api03-${alnum(80)}-${alnum(6)}AA`],
  'aws-access-key-id': [`AKIA${alnum(16).toUpperCase()}`, `ASIA${alnum(16).toUpperCase()}`],
  'slack-token': [`xoxb-${alnum(12)}-${alnum(12)}-${alnum(24)}`, `xoxp-${alnum(30)}`],
  'google-api-key': [`AIza${alnum(35)}`],
  jwt: [
    `eyJ${alnum(20)}.eyJ${alnum(40)}.${alnum(43)}`,
    `token=eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.`,
  ],
  'credential-assignment': [`export GITHUB_TOKEN=${alnum(20)}`, `DB_PASSWORD: "${alnum(12)}"`],
  'url-credential-parameter': [`https://h.example/cb?code=1&access_token=${alnum(20)}`],
};

describe('credential shapes nobody registered', () => {
  for (const [shape, samples] of Object.entries(SHAPES)) {
    it(`scrubs ${shape}`, () => {
      for (const sample of samples) {
        assert.ok(secretShapesIn(sample).includes(shape), `${shape} recognises ${sample}`);
        const scrubbed = scrubSecretShapes(sample);
        assert.match(scrubbed, /\[redacted\]/, sample);
        assert.deepEqual(secretShapesIn(scrubbed), [], `${scrubbed} holds no shape any more`);
      }
    });
  }

  it('skips no text a rule would change (the one prefilter in front of the rules)', () => {
    // Every rule on its own, each behind its own hint: what scrubbing did before the prefilter.
    const eachRule = (text: string) =>
      SECRET_SHAPES.reduce((out, rule) => {
        if (!rule.hint.test(out)) return out;
        rule.pattern.lastIndex = 0;
        return out.replace(rule.pattern, rule.replace as (m: string, ...a: unknown[]) => string);
      }, text);
    const cased = (text: string) => [text, text.toUpperCase(), text.toLowerCase()];
    const samples = [
      ...Object.values(SHAPES).flat(),
      `PROXY-AUTHORIZATION: BEARER ${alnum(30)}`,
      `x-amz-signature=${alnum(20)} and ?Token=${alnum(12)}`,
      'plain words, keys like itemId or originalBytes, and line 3.4',
    ];
    for (const sample of samples.flatMap(cased))
      for (const text of [sample, `prefix ${sample} suffix`, `${sample}\n${sample}`])
        assert.equal(scrubSecretShapes(text), eachRule(text), text);
  });

  it('keeps what says what was there and leaves ordinary text alone', () => {
    assert.equal(
      scrubSecretShapes('git clone https://user:hunter2hunter2@github.com/o/r'),
      'git clone https://[redacted]@github.com/o/r',
    );
    assert.equal(
      scrubSecretShapes('Authorization: Bearer abcdefghijklmnop'),
      'Authorization: Bearer [redacted]',
    );
    for (const text of [
      'ssh://git@github.com/o/r and git@github.com:o/r.git',
      'https://example.com/a@b?page=2',
      'the task-risk assessment for sk-learn',
      '{"maxTokens": 100000000, "secretRef": {"name": "svc-v01-provider-builtin-a"}}',
      'SVC_MANAGER_TOKEN_FILE=/run/secret/manager-token',
      'authorization is required',
      'ordinary prose with a ? and & and :// inside',
    ])
      assert.equal(scrubSecretShapes(text), text);
  });
});
