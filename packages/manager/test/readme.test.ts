import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { useE2E } from './e2e-helpers.js';

/**
 * The README's walkthrough, pasted as a newcomer would: its shell blocks run in one bash, in
 * order, against a listening manager whose runners drive the real agent, with the provider the
 * README offers to anyone without a key (`npm run fake-provider`) and the two lines it prints.
 */
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const rig = useE2E();

/** The ```sh blocks between two headings, with each block's own indentation removed. */
function shellBlocks(markdown: string, fromHeading: string, toHeading: string): string[] {
  const start = markdown.indexOf(fromHeading);
  const end = markdown.indexOf(toHeading, start);
  assert.ok(
    start >= 0 && end > start,
    `the README has the sections "${fromHeading}" and "${toHeading}"`,
  );
  const blocks: string[] = [];
  const fence = /^( *)```sh\n([\s\S]*?)^\1```$/gm;
  for (const match of markdown.slice(start, end).matchAll(fence)) {
    const indent = match[1]!.length;
    blocks.push(
      match[2]!
        .split('\n')
        .map((line) => line.slice(Math.min(indent, line.length - line.trimStart().length)))
        .join('\n'),
    );
  }
  return blocks;
}

function bash(script: string, env: NodeJS.ProcessEnv, timeoutMs: number) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn('bash', ['-c', script], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** `npm run fake-provider`, as the README says, until it printed the two lines to paste. */
async function startFakeProvider(): Promise<{ lines: string; stop(): Promise<void> }> {
  const child = spawn('npm', ['run', '-s', 'fake-provider'], {
    cwd: ROOT,
    // Any free port: other test files may hold the default one.
    env: { ...process.env, FAKE_PROVIDER_PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const stop = async () => {
    if (child.exitCode === null) process.kill(-child.pid!, 'SIGTERM');
    await exited;
  };
  const deadline = Date.now() + 60_000;
  while (!/^PROVIDER_KEY=.*$/m.test(out)) {
    if (Date.now() > deadline || child.exitCode !== null) {
      await stop();
      throw new Error(`npm run fake-provider printed no PROVIDER_KEY line: ${out}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const lines = out.split('\n').filter((line) => /^PROVIDER_(URL|KEY)=/.test(line));
  return { lines: lines.join('\n'), stop };
}

describe('the README walkthrough', () => {
  it('runs as pasted against npm run fake-provider: a profile written and validated, a turn dispatched and waited for, a session followed', async () => {
    const { e } = rig;
    const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
    const blocks = shellBlocks(readme, '## Run a turn', '## Web console');
    assert.equal(blocks.length, 4, 'settings, profile, dispatch and session blocks');
    const provider = await startFakeProvider();
    try {
      // The manager's address is the one thing changed; the provider's two lines are pasted
      // after the first block, as the README says.
      assert.ok(blocks[0]!.includes('http://127.0.0.1:8080'), 'the walkthrough names the manager');
      const settings = blocks[0]!.split('http://127.0.0.1:8080').join(e.t.manager.url);
      const script = [settings, provider.lines, ...blocks.slice(1)].join('\n');
      const env = { ...process.env, SVC_API_KEY: '', SVC_MANAGER_URL: '', NO_COLOR: '1' };
      const out = await bash(`set -eo pipefail\n${script}`, env, 300_000);
      const transcript = `exit ${out.code}\n--- stdout\n${out.stdout}\n--- stderr\n${out.stderr}`;
      assert.equal(out.code, 0, transcript);
      // No call failed (a failure prints its HTTP status on standard error).
      assert.doesNotMatch(out.stderr, /HTTP \d{3}/, transcript);
      assert.match(out.stdout, /^\{"profile":"builtin-a","configured":true\}$/m, transcript);
      // Step 1: the validation's outcome, after waiting for it.
      assert.match(
        out.stdout,
        /^\{"status":"completed","failureKind":null,"message":null\}$/m,
        transcript,
      );
      assert.match(out.stdout, /^\{"jobName":"[^"]+","phase":"[a-z]+"\}$/m, transcript);
      // Step 2: the result, waited for with waitMs: the scripted reply quotes the prompt.
      const result = out.stdout.match(/\{\s*"status": "completed",[\s\S]*?\n\}/);
      assert.ok(result, transcript);
      const parsed = JSON.parse(result[0]) as { failureKind: string | null; reply: string };
      assert.equal(parsed.failureKind, null);
      assert.match(parsed.reply, /no model was called/);
      assert.match(parsed.reply, /You asked: Write a haiku about queues\./);
      // The session step followed the reply to the end.
      const followed = out.stdout.slice(out.stdout.indexOf(result[0]) + result[0].length);
      assert.match(followed, /You asked: Write a haiku about queues\./, transcript);
      const key = /PROVIDER_KEY=(.*)/.exec(provider.lines)![1]!;
      assert.ok(!out.stdout.includes(key) && !out.stderr.includes(key), 'the key is never printed');
      assert.ok(!e.t.logs.join('').includes(key), 'the key is never logged');
    } finally {
      await provider.stop();
    }
  });

  it('shows a failure instead of hiding it, and its key placeholder passes validation', async () => {
    const { e } = rig;
    const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
    const [settings, profileStep] = shellBlocks(readme, '## Run a turn', '## Web console');
    const script = [
      // A script stops at a failure only with pipefail; pasted, the message is what counts.
      'set -o pipefail',
      settings!.split('http://127.0.0.1:8080').join(e.t.manager.url),
      // The profile step's first command, with the placeholder key as printed in the README.
      profileStep!.slice(0, profileStep!.indexOf('VAL=')),
      `call POST /api/v1/runs '{"tenantId":"tenant-a"}' | jq -r .runId`,
      'echo "status $?"',
    ].join('\n');
    const out = await bash(script, { ...process.env, NO_COLOR: '1' }, 60_000);
    const transcript = `exit ${out.code}\n--- stdout\n${out.stdout}\n--- stderr\n${out.stderr}`;
    assert.match(out.stdout, /^\{"profile":"builtin-a","configured":true\}$/m, transcript);
    // The refused run: its status and the manager's failure on standard error, a failed step.
    assert.match(
      out.stderr,
      /^POST \/api\/v1\/runs: HTTP 400 \{"failureKind":"[a-z-]+"/m,
      transcript,
    );
    assert.match(out.stdout, /^status 1$/m, transcript);
    assert.doesNotMatch(out.stdout, /^null$/m, 'no silent null in place of an id');
  });
});
