import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import openapiTS, { astToString } from 'openapi-typescript';
import { CONSOLE_ROUTES } from '../src/http/console.js';
import { OPERATIONS, TAGS } from '../src/http/operations.js';
import { runBody, SESSION_RUN_BASE, startTestManager, type TestManager } from './helpers.js';

const ROOT = join(import.meta.dirname, '../../..');
const KEY = 'openapi-operations-key-0123456789';
const work = mkdtempSync(join(tmpdir(), 'svc-openapi-'));
let t: TestManager;
let doc: any;
before(async () => {
  t = await startTestManager({
    env: { SVC_API_KEY: KEY, HOST: '127.0.0.1', PORT: '0' },
    listen: true,
  });
  await t.configureProfile('builtin-a');
  doc = (await t.api('GET', '/openapi.json')).body;
});
after(async () => {
  await t.close();
  rmSync(work, { recursive: true, force: true });
});

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const operations = () =>
  Object.entries<any>(doc.paths).flatMap(([path, item]) =>
    Object.entries<any>(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, operation]) => ({ path, method, operation })),
  );

describe('the operations of the OpenAPI document', () => {
  it('every registered route is named in the operations table, and every entry is a route', () => {
    const routes = t.manager
      .routes()
      .filter(
        (r) =>
          r.method !== 'HEAD' &&
          !/^\/(docs|openapi\.json|assets|index\.html|$)/.test(r.url) &&
          !(CONSOLE_ROUTES as readonly string[]).includes(r.url),
      )
      .map((r) => `${r.method} ${r.url}`);
    assert.deepEqual(
      routes.filter((r) => !OPERATIONS[r]),
      [],
      'routes without an entry in http/operations.ts',
    );
    assert.deepEqual(
      Object.keys(OPERATIONS).filter((k) => !routes.includes(k)),
      [],
      'entries for no route',
    );
  });

  it('each has a unique operationId, a summary, one known tag; runner routes are apart', () => {
    const ids = new Set<string>();
    const tags = new Set(TAGS.map((tag) => tag.name));
    const access = new Map(t.manager.routes().map((r) => [`${r.method} ${r.url}`, r.access]));
    for (const { path, method, operation } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      assert.match(operation.operationId ?? '', /^[a-z][A-Za-z]+$/, where);
      assert.ok(!ids.has(operation.operationId), `${where}: duplicate operationId`);
      ids.add(operation.operationId);
      assert.ok(operation.summary?.length > 5, `${where}: summary`);
      assert.equal(operation.tags?.length, 1, where);
      assert.ok(tags.has(operation.tags[0]), `${where}: tag ${operation.tags[0]}`);
      const route = `${method.toUpperCase()} ${path.replace(/\{(\w+)\}/g, ':$1')}`;
      if (operation.tags[0] === 'runner') assert.equal(access.get(route), 'runner', where);
    }
    assert.deepEqual(
      doc.tags.map((tag: any) => tag.name),
      ['runs', 'commands', 'events', 'runner', 'sessions', 'queue', 'profiles', 'health'],
    );
    assert.ok(doc.servers.length > 0);
  });

  it('lists each error status with the failure body, no status ranges', () => {
    for (const { path, method, operation } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      assert.equal(operation.responses['4XX'], undefined, where);
      assert.equal(operation.responses['5XX'], undefined, where);
      if (!path.startsWith('/api/v1')) continue;
      for (const status of ['400', '401', '500'])
        assert.ok(operation.responses[status], `${where}: ${status}`);
      if (path.includes('{')) assert.ok(operation.responses['404'], `${where}: 404`);
      if (operation.requestBody) assert.ok(operation.responses['415'], `${where}: 415`);
      for (const [status, response] of Object.entries<any>(operation.responses)) {
        if (Number(status) < 400) continue;
        const schema = response.content?.['application/json']?.schema;
        assert.deepEqual(
          [...(schema?.required ?? [])].sort(),
          ['failureKind', 'message', 'traceId'],
          `${where} ${status}`,
        );
      }
    }
  });

  it('says what the server requires: POST /runs without backendProfile is refused, as documented', async () => {
    const create = doc.paths['/api/v1/runs'].post.requestBody.content['application/json'].schema;
    assert.ok(create.required.includes('backendProfile'));
    // Every documented-required field is refused when missing; every other one may be left out.
    const full = runBody({ idempotencyKey: undefined });
    for (const field of Object.keys(full)) {
      const { [field]: _left, ...body } = full;
      const answer = await t.api('POST', '/api/v1/runs', body);
      if (create.required.includes(field))
        assert.equal(answer.status, 400, `${field} is required: ${answer.raw}`);
      else assert.equal(answer.status, 201, `${field} is optional: ${answer.raw}`);
    }
  });

  it('POST /sessions: backendProfile required in the document as by the server', async () => {
    const create =
      doc.paths['/api/v1/sessions'].post.requestBody.content['application/json'].schema;
    assert.deepEqual([...create.required].sort(), ['backendProfile', 'runBase']);
    const base = (await t.api('GET', '/api/v1/sessions')).status;
    assert.equal(base, 200);
    const without = await t.api('POST', '/api/v1/sessions', { runBase: SESSION_RUN_BASE });
    assert.equal(without.status, 400, without.raw);
    assert.match(without.body.message, /backendProfile/);
    const withIt = await t.api('POST', '/api/v1/sessions', {
      runBase: SESSION_RUN_BASE,
      backendProfile: 'builtin-a',
    });
    assert.equal(withIt.status, 201, withIt.raw);
  });

  it('passes `redocly lint` with no error', () => {
    const file = join(work, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const result = spawnSync(
      process.execPath,
      [join(ROOT, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', '--format=json', file],
      { cwd: work, encoding: 'utf8', env: { ...process.env, REDOCLY_TELEMETRY: 'off' } },
    );
    const report = JSON.parse(result.stdout) as {
      totals: { errors: number; warnings: number };
      problems: Array<{ ruleId: string; severity: string; message: string }>;
    };
    const errors = report.problems.filter((p) => p.severity === 'error');
    assert.deepEqual(
      errors.map((p) => `${p.ruleId}: ${p.message}`),
      [],
    );
    assert.equal(report.totals.errors, 0);
  });

  it('generates a typed client (openapi-typescript, openapi-fetch) that compiles and calls a live manager', async () => {
    writeFileSync(join(work, 'api.d.ts'), astToString(await openapiTS(doc)));
    symlinkSync(join(ROOT, 'node_modules'), join(work, 'node_modules'));
    writeFileSync(
      join(work, 'client.ts'),
      `import createClient from 'openapi-fetch';
import type { paths } from './api.js';

export async function exercise(baseUrl: string, key: string) {
  const client = createClient<paths>({ baseUrl, headers: { authorization: \`Bearer \${key}\` } });
  const readiness = await client.GET('/health/readiness');
  const created = await client.POST('/api/v1/runs', {
    body: {
      tenantId: 'tenant-a',
      projectId: 'proj-1',
      workspaceRef: { kind: 'opaque' },
      providerId: 'openai',
      backendProfile: 'builtin-a',
      traceSink: null,
    },
  });
  if (!created.data) throw new Error('no run: ' + JSON.stringify(created.error));
  const run = await client.GET('/api/v1/runs/{runId}', {
    params: { path: { runId: created.data.runId } },
  });
  const missing = await client.GET('/api/v1/runs/{runId}', {
    params: { path: { runId: 'run-none-00000001' } },
  });
  // A client that leaves out what the server requires does not compile.
  // @ts-expect-error backendProfile is required
  await client.POST('/api/v1/runs', { body: { tenantId: 'a', projectId: 'b', workspaceRef: { kind: 'opaque' }, providerId: 'openai', traceSink: null } }).catch(() => undefined);
  return {
    ready: readiness.data?.ready,
    runId: created.data.runId,
    state: run.data?.state,
    missingKind: missing.error?.failureKind,
    missingStatus: missing.response.status,
  };
}
`,
    );
    writeFileSync(
      join(work, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          target: 'ES2022',
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          skipLibCheck: true,
          outDir: 'out',
        },
        files: ['client.ts', 'api.d.ts'],
      }),
    );
    writeFileSync(join(work, 'package.json'), '{"type":"module"}');
    try {
      execFileSync(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', work], {
        encoding: 'utf8',
        stdio: 'pipe',
      });
    } catch (error) {
      assert.fail(
        `the generated client does not compile:\n${(error as { stdout: string }).stdout}`,
      );
    }
    const { exercise } = (await import(join(work, 'out/client.js'))) as {
      exercise: (url: string, key: string) => Promise<Record<string, unknown>>;
    };
    const answer = await exercise(t.manager.url, KEY);
    assert.equal(answer.ready, true);
    assert.match(String(answer.runId), /^run-/);
    assert.equal(answer.state, 'pending');
    assert.equal(answer.missingStatus, 404);
    assert.equal(answer.missingKind, 'not-found');
  });
});
