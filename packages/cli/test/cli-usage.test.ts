import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { RUN_STATES, SESSION_LIST_STATES, TASK_STATES } from '@svc/contracts';
import { assertBuilt, cli } from './cli-helpers.js';

/**
 * A value outside an option's fixed set is a usage error: exit 2, the allowed values named,
 * nothing sent. The manager here is a loopback listener that counts what reaches it.
 */
let listener: Server;
let requests: string[] = [];
let env: Record<string, string>;

before(async () => {
  assertBuilt();
  listener = createServer((req, res) => {
    requests.push(req.url ?? '');
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ sessions: [], runs: [], tasks: [], nextCursor: null, changeSeq: 0 }));
  });
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  env = { SVC_MANAGER_URL: `http://127.0.0.1:${(listener.address() as AddressInfo).port}` };
});
after(() => new Promise((resolve) => listener.close(resolve)));

const CASES: { program: 'queue' | 'sessions' | 'runs'; args: string[]; allowed: string[] }[] = [
  { program: 'sessions', args: ['ps', '--state', 'bogus'], allowed: [...SESSION_LIST_STATES] },
  { program: 'queue', args: ['list', '--state', 'bogus'], allowed: [...TASK_STATES] },
  { program: 'runs', args: ['list', '--state', 'running,bogus'], allowed: [...RUN_STATES] },
  { program: 'runs', args: ['list', '--state', ''], allowed: [...RUN_STATES] },
  { program: 'runs', args: ['list', '--created-after', 'yesterday'], allowed: ['ISO 8601'] },
  { program: 'runs', args: ['list', '--limit', '0'], allowed: ['between 1 and'] },
];

describe('usage errors exit 2, say what is allowed, and send nothing', () => {
  for (const { program, args, allowed } of CASES)
    it(`${program} ${args.join(' ')}`, async () => {
      requests = [];
      const human = await cli(program, args, { env, tty: true });
      assert.equal(human.code, 2, human.stdout);
      assert.match(human.stdout, new RegExp(`^${program}: usage: `));
      for (const value of allowed) assert.ok(human.stdout.includes(value), `names ${value}`);

      const json = await cli(program, [...args, '--json'], { env });
      assert.equal(json.code, 2, json.stderr);
      const body = JSON.parse(json.stdout) as { error: { kind: string; message: string } };
      assert.equal(body.error.kind, 'usage');
      for (const value of allowed) assert.ok(body.error.message.includes(value), `names ${value}`);
      assert.deepEqual(requests, [], 'no request was sent');
    });

  it('an allowed value is sent as given', async () => {
    requests = [];
    const ok = await cli('sessions', ['ps', '--state', 'all'], { env });
    assert.equal(ok.code, 0, ok.stderr);
    const several = await cli('runs', ['list', '--state', 'failed,cancelled,failed'], { env });
    assert.equal(several.code, 0, several.stderr);
    assert.deepEqual(requests, [
      '/api/v1/sessions?state=all',
      '/api/v1/runs?state=failed%2Ccancelled',
    ]);
  });
});
