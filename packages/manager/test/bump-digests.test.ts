import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';

const SCRIPT = join(import.meta.dirname, '../../../scripts/bump-digests');
const run = promisify(execFile);
const OLD = `sha256:${'0'.repeat(64)}`;
const NEW = `sha256:${'4'.repeat(64)}`;
const TOKEN = 'registry-token-abc';

/** A loopback registry speaking the OCI distribution API, with the bearer-token challenge. */
let server: Server;
let url = '';
const seen: string[] = [];
before(async () => {
  server = createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    if (req.url?.startsWith('/token')) {
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ token: TOKEN }));
    }
    if (req.headers.authorization !== `Bearer ${TOKEN}`) {
      res.writeHead(401, {
        'www-authenticate': `Bearer realm="${url}/token",service="fake",scope="repository:library/node:pull"`,
      });
      return res.end();
    }
    const known: Record<string, string> = {
      '/v2/library/node/manifests/24-bookworm-slim': NEW,
      '/v2/team/svc-runner/manifests/1.2.0': NEW,
    };
    const digest = known[req.url ?? ''];
    if (req.method !== 'HEAD' || !digest) {
      res.writeHead(404);
      return res.end();
    }
    res.writeHead(200, {
      'docker-content-digest': digest,
      'content-type': 'application/vnd.oci.image.index.v1+json',
    });
    res.end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(() => new Promise<void>((r) => server.close(() => r())));

describe('scripts/bump-digests', () => {
  it('re-pins Dockerfile bases and overlay images to the digest the registry serves', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'svc-bump-'));
    try {
      const dockerfile = join(dir, 'Dockerfile');
      await writeFile(
        dockerfile,
        `ARG NODE_IMAGE=docker.io/library/node:24-bookworm-slim@${OLD}\nFROM \${NODE_IMAGE}\n`,
      );
      const overlay = join(dir, 'overlay');
      await run('mkdir', [overlay]);
      const kustomization = `images:\n  - name: svc-runner\n    newName: reg.test:5000/team/svc-runner\n    newTag: 1.2.0\n    digest: ${OLD}\n`;
      await writeFile(join(overlay, 'kustomization.yaml'), kustomization);
      const registries = [
        '--registry-url',
        `docker.io=${url}`,
        '--registry-url',
        `reg.test:5000=${url}`,
      ];
      // --check reports and changes nothing.
      await assert.rejects(
        run(process.execPath, [SCRIPT, '--check', ...registries, dockerfile, overlay]),
        (e: any) => e.code === 1 && /2 digest\(s\) out of date/.test(e.stderr),
      );
      assert.match(await readFile(dockerfile, 'utf8'), new RegExp(OLD));
      await run(process.execPath, [SCRIPT, ...registries, dockerfile, overlay]);
      assert.equal(
        await readFile(dockerfile, 'utf8'),
        `ARG NODE_IMAGE=docker.io/library/node:24-bookworm-slim@${NEW}\nFROM \${NODE_IMAGE}\n`,
      );
      assert.equal(
        await readFile(join(overlay, 'kustomization.yaml'), 'utf8'),
        kustomization.replace(OLD, NEW),
      );
      assert.ok(
        seen.some((s) => s.startsWith('GET /token')),
        'the token exchange happened',
      );
      const again = await run(process.execPath, [
        SCRIPT,
        '--check',
        ...registries,
        dockerfile,
        overlay,
      ]);
      assert.match(again.stdout, /all digests current/);
      // A tag the registry does not know fails loudly.
      await writeFile(dockerfile, `FROM docker.io/library/node:99@${OLD}\n`);
      await assert.rejects(run(process.execPath, [SCRIPT, ...registries, dockerfile]), /HTTP 404/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
