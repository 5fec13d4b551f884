import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, describe, it } from 'node:test';

const ROOT = join(import.meta.dirname, '../../..');
const SCRIPT = join(ROOT, 'scripts/lint-dockerfiles.mjs');
const run = promisify(execFile);
const PINNED = `docker.io/library/node:24-bookworm-slim@sha256:${'a'.repeat(64)}`;
const GOOD = `ARG NODE_IMAGE=${PINNED}
FROM \${NODE_IMAGE} AS build
WORKDIR /src
RUN echo build
FROM \${NODE_IMAGE}
ARG VERSION=0.0.0
ARG COMMIT=unknown
LABEL org.opencontainers.image.version="\${VERSION}" \\
      org.opencontainers.image.revision="\${COMMIT}"
COPY --from=build /src /app
USER 1000:1000
ENTRYPOINT ["node", "/app/main.js"]
`;

let dir = '';
before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'lint-dockerfiles-'));
});
after(() => rm(dir, { recursive: true, force: true }));

/** Lints one Dockerfile text; resolves with the script's exit code and combined output. */
async function lint(text: string): Promise<{ code: number; output: string }> {
  const file = join(dir, `Dockerfile.${Math.random().toString(36).slice(2)}`);
  await writeFile(file, text);
  try {
    const { stdout, stderr } = await run(process.execPath, [SCRIPT, file], { cwd: ROOT });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failed = error as { code: number; stdout: string; stderr: string };
    return { code: failed.code, output: failed.stdout + failed.stderr };
  }
}

describe('scripts/lint-dockerfiles (part of npm run lint)', () => {
  it("passes the repository's own Dockerfiles", async () => {
    const { stdout } = await run(process.execPath, [SCRIPT], { cwd: ROOT });
    assert.match(stdout, /3 Dockerfile\(s\) clean/);
  });

  it('passes a pinned, non-root, labelled image', async () => {
    assert.deepEqual(await lint(GOOD), {
      code: 0,
      output: 'lint-dockerfiles: 1 Dockerfile(s) clean\n',
    });
  });

  const broken: Array<[string, string, RegExp]> = [
    ['an unpinned base', GOOD.replace(PINNED, 'node:24'), /not pinned by digest: \$\{NODE_IMAGE\}/],
    ['a tag-only FROM', GOOD.replace('FROM ${NODE_IMAGE}\nARG', 'FROM node:24\nARG'), /node:24/],
    ['a root final user', GOOD.replace('USER 1000:1000', 'USER root'), /runs as root/],
    ['no final user', GOOD.replace('USER 1000:1000\n', ''), /sets no USER/],
    ['no version label', GOOD.replace('org.opencontainers.image.version', 'x'), /version label/],
    ['a relative WORKDIR', GOOD.replace('WORKDIR /src', 'WORKDIR src'), /WORKDIR paths/],
    ['lower-case instructions', GOOD.replace('RUN echo', 'run echo'), /uppercase/],
    ['two ENTRYPOINTs', `${GOOD}ENTRYPOINT ["true"]\n`, /ENTRYPOINT/],
    ['an unknown instruction', GOOD.replace('RUN echo build', 'RUNN echo build'), /Unknown/i],
  ];
  for (const [name, text, expected] of broken)
    it(`fails on ${name}, naming the line`, async () => {
      const { code, output } = await lint(text);
      assert.equal(code, 1, output);
      assert.match(output, expected);
      assert.match(output, /Dockerfile\.\w+:\d+: /);
    });
});
