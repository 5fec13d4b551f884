import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import {
  canary,
  createTestStore,
  freePort,
  realPostgresAvailable,
  waitForHttp,
} from '@svc/testkit';
import { managerTemplate } from './helpers.js';
import { startFakeKube } from './kube-helpers.js';
import {
  assembleImage,
  dockerignore,
  listFiles,
  parseDockerfile,
  treeSize,
  type AssembledImage,
} from './image-assembly.js';

const ROOT = join(import.meta.dirname, '../../..');
const work = mkdtempSync(join(tmpdir(), 'svc-images-'));
const children: ChildProcess[] = [];
after(() => {
  for (const child of children) child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

/** Module resolution climbs parent directories: none above the image may hold packages. */
for (let dir = work; dir !== dirname(dir); dir = dirname(dir))
  assert.ok(!existsSync(join(dir, 'node_modules')), `${dir}/node_modules would leak in`);

const assembled = new Map<string, AssembledImage>();
/** Each image once per run: its tests start the same files. */
function assemble(dockerfile: string): AssembledImage {
  let image = assembled.get(dockerfile);
  if (!image) {
    image = assembleImage({ repo: ROOT, dockerfile, out: join(work, dockerfile.split('/')[1]!) });
    assembled.set(dockerfile, image);
  }
  return image;
}

/** The image's entrypoint, started in its own tree: `/app/...` arguments point there. */
function start(image: AssembledImage, env: Record<string, string>, args: string[] = []) {
  const [program, ...rest] = image.entrypoint;
  assert.equal(program, 'node', 'the entrypoint runs node');
  const mapped = [...rest, ...args].map((a) => (a.startsWith('/') ? join(image.root, a) : a));
  for (const arg of mapped)
    if (arg.startsWith(image.root)) assert.ok(existsSync(arg), `${arg} is in the image`);
  const output: string[] = [];
  // Nothing of the test's environment: no NODE_OPTIONS, no --conditions=source, no NODE_PATH.
  const child = spawn(process.execPath, mapped, {
    cwd: join(image.root, image.workdir),
    env: { ...image.env, HOME: join(work, 'home'), TMPDIR: tmpdir(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code) =>
      reject(new Error(`the entrypoint exited (${code}):\n${output.join('')}`)),
    ),
  );
  exited.catch(() => undefined);
  child.stdout.on('data', (c: Buffer) => output.push(c.toString()));
  child.stderr.on('data', (c: Buffer) => output.push(c.toString()));
  /** Resolves once `url` answers 2xx; fails at once when the program ends first. */
  const ready = (url: string, ms: number) =>
    Promise.race([waitForHttp(url, ms), exited]).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}\n${output.join('')}`);
    });
  return { child, output, ready };
}

/** Files of our own build in the image that a production image has no use for. */
function buildLeftovers(root: string): string[] {
  return listFiles(join(root, 'app/packages')).filter(
    (f) => !f.includes('node_modules/') && /\.(map|d\.ts|tsbuildinfo)$/.test(f),
  );
}

describe('images, assembled from their Dockerfiles and started', () => {
  it('manager: serves /health/readiness on the embedded store and the console, with no runner, agent or build leftovers', async () => {
    const image = assemble('deploy/manager/Dockerfile');
    assert.equal(image.user, '1000:1000');
    const modules = join(image.root, 'app/node_modules');
    assert.ok(!existsSync(join(modules, '@openai')), 'no coding agent in the manager image');
    assert.ok(!existsSync(join(modules, '@svc/runner')), 'no runner package');
    assert.ok(!existsSync(join(image.root, 'app/packages/runner')), 'no runner build');
    assert.deepEqual(buildLeftovers(image.root), []);
    const megabytes = Math.round(treeSize(join(image.root, 'app')) / 2 ** 20);
    assert.ok(megabytes < 250, `manager image files: ${megabytes} MB`);

    const port = await freePort();
    const data = join(work, 'manager-data');
    const { child, ready } = start(image, {
      HOST: '127.0.0.1',
      PORT: String(port),
      SVC_DATA_DIR: data,
      LOG_LEVEL: 'warn',
    });
    const base = `http://127.0.0.1:${port}`;
    await ready(`${base}/health/readiness`, 60_000);
    const readiness = (await (await fetch(`${base}/health/readiness`)).json()) as {
      ready: boolean;
    };
    assert.equal(readiness.ready, true);
    const page = await fetch(`${base}/`);
    assert.equal(page.status, 200);
    assert.doesNotMatch(await page.text(), /Console not built/);
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  });

  it('manager: starts as deployed (runtime mode, PostgreSQL, Kubernetes launcher and Secret store) and keeps a credential in a Secret', async (t) => {
    if (!(await realPostgresAvailable())) return t.skip('needs a PostgreSQL server');
    const image = assemble('deploy/manager/Dockerfile');
    // The settings the base deploys (deploy/base/manager/config.env), with this machine's
    // addresses for the cluster's, and what the Secret and the overlay add.
    const deployed = Object.fromEntries(
      readFileSync(join(ROOT, 'deploy/base/manager/config.env'), 'utf8')
        .split('\n')
        .filter((line) => /^[A-Z_]+=/.test(line))
        .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
    );
    assert.equal(deployed['SVC_LAUNCHER'], 'kubernetes');
    const fake = await startFakeKube();
    const store = await createTestStore(managerTemplate);
    assert.equal(store.kind, 'postgres');
    const port = await freePort();
    const key = canary('image-api-key');
    try {
      const { child, ready } = start(image, {
        ...deployed,
        HOST: '127.0.0.1',
        PORT: String(port),
        SVC_DATA_DIR: join(work, 'manager-runtime-data'),
        SVC_KUBE_API_URL: fake.url,
        DATABASE_URL: store.kind === 'postgres' ? store.url : '',
        SVC_API_KEY: key,
        SVC_SESSION_STORAGE_CLASS: 'standard',
        LOG_LEVEL: 'warn',
      });
      const base = `http://127.0.0.1:${port}`;
      await ready(`${base}/health/readiness`, 60_000);
      const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const put = await fetch(`${base}/api/v1/provider-profiles/builtin-a/credential`, {
        method: 'PUT',
        headers: auth,
        body: JSON.stringify({
          apiKey: canary('image-provider-key'),
          config: { model: 'gpt-test', baseUrl: 'http://127.0.0.1:9/v1' },
          delegatedBy: { system: 'images-test', requestId: 'req-image' },
        }),
      });
      assert.ok(put.status === 200 || put.status === 201, await put.text());
      // The credential went to a Kubernetes Secret: the production code path is in the image.
      assert.ok(fake.get('secrets', 'svc-v01', 'svc-v01-provider-builtin-a'));
      child.kill('SIGTERM');
      await new Promise((resolve) => child.once('exit', resolve));
    } finally {
      await fake.close();
      await store.drop();
    }
  });

  it('auth broker: answers its health', async () => {
    const image = assemble('deploy/auth-broker/Dockerfile');
    assert.equal(image.user, '1000:1000');
    assert.deepEqual(buildLeftovers(image.root), []);
    const port = await freePort();
    const { child, ready } = start(image, {
      AUTH_BROKER_HOST: '127.0.0.1',
      AUTH_BROKER_PORT: String(port),
    });
    await ready(`http://127.0.0.1:${port}/health`, 30_000);
    const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as {
      service: string;
    };
    assert.equal(health.service, 'auth-broker');
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  });

  it('runner: prints its version, and carries the coding agent and the tools', () => {
    const image = assemble('deploy/runner/Dockerfile');
    assert.equal(image.user, '1000:1000');
    assert.deepEqual(buildLeftovers(image.root), []);
    assert.ok(existsSync(join(image.root, 'app/node_modules/@openai/codex/package.json')));
    for (const tool of ['tran', 'trans', 'apply_patch'])
      assert.ok(existsSync(join(image.root, 'app/tools', tool)), tool);
    const [, ...rest] = image.entrypoint;
    const result = spawnSync(
      process.execPath,
      [...rest.map((a) => (a.startsWith('/') ? join(image.root, a) : a)), '--version'],
      {
        cwd: image.root,
        env: { PATH: process.env['PATH'] ?? '' },
        encoding: 'utf8',
      },
    );
    const version = (
      JSON.parse(readFileSync(join(ROOT, 'packages/runner/package.json'), 'utf8')) as {
        version: string;
      }
    ).version;
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, new RegExp(version.replaceAll('.', '\\.')));
  });
});

describe('image build rules', () => {
  const ignored = dockerignore(readFileSync(join(ROOT, '.dockerignore'), 'utf8'));

  it('the root .dockerignore keeps installs, builds, git history and local data out of the context', () => {
    for (const path of [
      'node_modules/fastify/package.json',
      'packages/manager/node_modules/x',
      'packages/manager/dist/server.js',
      'packages/contracts/dist/.tsbuildinfo',
      '.git/HEAD',
      '.data/secrets/svc-v01-provider-a/current/auth.json',
      'packages/manager/.data/pglite/PG_VERSION',
      '.env',
    ])
      assert.equal(ignored(path), true, `${path} is excluded`);
    for (const path of [
      'package.json',
      'package-lock.json',
      'packages/manager/src/server.ts',
      'packages/console/index.js',
      'tools/tran',
    ])
      assert.equal(ignored(path), false, `${path} is in the context`);
    // One filter for every image: a Dockerfile-specific one would replace it.
    const specific = listFiles(join(ROOT, 'deploy')).filter((f) => f.endsWith('.dockerignore'));
    assert.deepEqual(specific, []);
  });

  for (const program of ['manager', 'auth-broker', 'runner']) {
    it(`${program}: manifests and lock file are installed before any source is copied`, () => {
      const text = readFileSync(join(ROOT, 'deploy', program, 'Dockerfile'), 'utf8');
      const instructions = parseDockerfile(text);
      assert.ok(!instructions.some((i) => i.keyword === 'COPY' && /^\.\s/.test(i.args)));
      // Per stage: a source copied from the context before the stage's npm ci would make
      // every source change reinstall the dependencies.
      let installs = false;
      let early: string[] = [];
      const check = () => {
        if (installs) assert.deepEqual(early, [], `${program}: copied before npm ci`);
      };
      for (const ins of instructions) {
        if (ins.keyword === 'FROM') {
          check();
          installs = false;
          early = [];
        } else if (ins.keyword === 'RUN' && /\bnpm ci\b/.test(ins.args)) {
          check();
          installs = true;
          early = [];
        } else if (ins.keyword === 'COPY' && !ins.args.includes('--from=') && !installs) {
          const sources = ins.args.split(/\s+/).slice(0, -1);
          for (const source of sources)
            if (!/(^|\/)(package(-lock)?\.json|tsconfig\.base\.json)$/.test(source))
              early.push(source);
        }
      }
    });
  }

  it('every image names its own program', () => {
    for (const program of ['manager', 'auth-broker', 'runner']) {
      const text = readFileSync(join(ROOT, 'deploy', program, 'Dockerfile'), 'utf8');
      const others = ['manager', 'auth-broker', 'runner'].filter((p) => p !== program);
      for (const other of others)
        assert.doesNotMatch(text, new RegExp(`deploy/${other}/Dockerfile`), `${program}`);
      assert.match(text, new RegExp(`docker build -f deploy/${program}/Dockerfile`));
    }
  });

  it('every package says which Node it needs: 22.13 or later', () => {
    for (const dir of ['.', ...listDirs(join(ROOT, 'packages')).map((d) => `packages/${d}`)]) {
      const manifest = JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')) as {
        engines?: { node?: string };
      };
      assert.equal(manifest.engines?.node, '>=22.13', `${dir}/package.json engines`);
    }
  });
});

function listDirs(dir: string): string[] {
  return readdirSync(dir).filter((d) => existsSync(join(dir, d, 'package.json')));
}
