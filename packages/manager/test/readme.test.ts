import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { userTexts } from '@svc/testkit';
import { useE2E } from './e2e-helpers.js';

/**
 * The README's walkthrough, pasted as a newcomer would: its shell blocks run in one bash, in
 * order, against a listening manager whose runners drive the real agent against a scripted
 * provider on loopback. Only the values the README asks the reader to replace are replaced: the
 * manager's address, the key and the provider's base URL.
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

describe('the README walkthrough', () => {
  it('runs as pasted: a profile written and validated, a turn dispatched and waited for, a session followed', async () => {
    const { e } = rig;
    const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
    const blocks = shellBlocks(readme, '## Run a turn with a real provider', '## Web console');
    assert.equal(blocks.length, 4, 'base URL, profile, dispatch and session blocks');
    const key = 'sk-readme-walkthrough-canary-0000000000';
    const placeholders: [string, string][] = [
      ['http://127.0.0.1:8080', e.t.manager.url],
      ['sk-…', key],
      ['https://api.openai.com/v1', e.provider.baseUrl],
    ];
    let script = blocks.join('\n');
    for (const [from, to] of placeholders) {
      assert.ok(script.includes(from), `the walkthrough names ${from}`);
      script = script.split(from).join(to);
    }
    e.provider.dropSteps().enqueue(
      { kind: 'text', text: 'ready' },
      {
        kind: 'text',
        text: 'Jobs wait in line / one by one the workers wake / the queue falls silent',
      },
      {
        kind: 'text',
        text: 'Sessions remember / each turn picks up the thread / output follows on',
      },
    );
    const env = { ...process.env, SVC_API_KEY: '', SVC_MANAGER_URL: '', NO_COLOR: '1' };
    const out = await bash(`set -eo pipefail\n${script}`, env, 240_000);
    const transcript = `exit ${out.code}\n--- stdout\n${out.stdout}\n--- stderr\n${out.stderr}`;
    assert.equal(out.code, 0, transcript);
    // Every curl answer ends its line: each step's output reads on its own.
    assert.match(out.stdout, /^\{"profile":"builtin-a","configured":true\}$/m, transcript);
    assert.match(out.stdout, /^\{"jobName":"[^"]+","phase":"[a-z]+"\}$/m, transcript);
    // Step 1: the validation's outcome, after waiting for it.
    assert.match(out.stdout, /^"completed"$/m, transcript);
    // Step 2: the result, waited for with waitMs.
    const result = out.stdout.match(/\{\s*"status": "completed",[\s\S]*?\n\}/);
    assert.ok(result, transcript);
    const parsed = JSON.parse(result[0]) as { completed: boolean; reply: string };
    assert.equal(parsed.completed, true);
    assert.match(parsed.reply, /Jobs wait in line/);
    // The session step followed the reply to the end.
    assert.match(out.stdout, /Sessions remember/, transcript);
    // The provider saw both prompts with the key written in step 1, and the key never came back.
    const prompts = e.provider
      .requestsOf()
      .filter((r) => userTexts(r).some((text) => text.includes('Write a haiku about queues.')));
    assert.equal(prompts.length, 2);
    assert.ok(prompts.every((r) => r.bearer === key));
    assert.ok(!out.stdout.includes(key) && !out.stderr.includes(key), 'the key is never printed');
    assert.ok(!e.t.logs.join('').includes(key), 'the key is never logged');
  });
});
