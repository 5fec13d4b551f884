import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  canary,
  ensureTestTag,
  findCanaries,
  killTagged,
  userTexts,
  waitForNoTaggedProcesses,
} from '@svc/testkit';
import {
  createSession,
  runEvents,
  startE2E,
  waitForCommand,
  type E2E,
  sendToSession,
} from './e2e-helpers.js';
import { startGitHttpServer } from '../../runner/test/assembly-helpers.js';

/**
 * Runtime assembly end to end on the local launcher: a real git repository carries tools, a
 * skill and a domain prompt; the runner materializes it, the agent uses the tool from PATH, the
 * first turn of a new thread carries the prompt and a resumed turn does not.
 */
const tag = ensureTestTag();
const PROMPT_TEXT = 'House rule: every answer starts with the word Indeed.';
const toolSecret = canary('tooltoken');
const transientSecret = canary('labkey');
let e: E2E;
let repoDir: string;
let repoUrl: string;
let commit: string;

const git = (cwd: string, ...args: string[]) =>
  execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 't',
      GIT_AUTHOR_EMAIL: 't@e',
      GIT_COMMITTER_NAME: 't',
      GIT_COMMITTER_EMAIL: 't@e',
    },
  }).trim();

before(async () => {
  repoDir = await mkdtemp(join(tmpdir(), 'svc-bundle-'));
  // An operator's mirror is readable by the runners' user (a sandboxed runner has its own uid).
  await chmod(repoDir, 0o755);
  const work = join(repoDir, 'work');
  await mkdir(join(work, 'tools'), { recursive: true });
  await mkdir(join(work, 'skills', 'review'), { recursive: true });
  await mkdir(join(work, 'prompts'), { recursive: true });
  await writeFile(join(work, 'tools', 'lab-hello'), '#!/bin/sh\necho "lab tool says hi"\n');
  await chmod(join(work, 'tools', 'lab-hello'), 0o644); // the runner makes shebang scripts executable
  await writeFile(join(work, 'tools', 'notes.txt'), 'a support file, not a tool\n');
  await writeFile(
    join(work, 'skills', 'review', 'SKILL.md'),
    '---\nname: review\ndescription: Review a change carefully.\n---\nSteps...\n',
  );
  await writeFile(join(work, 'skills', 'review', 'checklist.md'), '- read the diff\n');
  await writeFile(join(work, 'prompts', 'entry.md'), `${PROMPT_TEXT}\n`);
  git(work, 'init', '-q', '-b', 'main');
  git(work, 'add', '.');
  git(work, 'commit', '-qm', 'bundle');
  commit = git(work, 'rev-parse', 'HEAD');
  git(repoDir, 'clone', '-q', '--bare', work, 'bundle.git');
  repoUrl = `file://${join(repoDir, 'bundle.git')}`;
  // The test repository is a local path: an operator-listed mirror prefix, as callers may not name file://.
  e = await startE2E({ env: { SVC_REPO_URL_ALLOW_PREFIXES: `file://${repoDir}/` } });
  await e.t.manager.secrets.put('svc-v01-tool-labtool', { token: Buffer.from(toolSecret) });
});
after(async () => {
  await e?.close();
  await rm(repoDir, { recursive: true, force: true });
  const left = await waitForNoTaggedProcesses(tag, 10_000);
  killTagged(tag);
  assert.deepEqual(left, []);
});

const bundle = (extra: Record<string, unknown> = {}) => ({
  kind: 'gitbundle',
  repoUrl,
  ref: 'main',
  promptRefs: [{ name: 'entry', path: 'prompts/entry.md', inject: 'thread-start', required: true }],
  requiredSkills: [{ name: 'review' }],
  ...extra,
});
const runBase = (resourceBundleRef: unknown) => ({
  tenantId: 'tenant-a',
  projectId: 'proj-1',
  workspaceRef: { kind: 'git', repoUrl, branch: 'main' },
  providerId: 'openai',
  resourceBundleRef,
  executionPolicy: {
    timeoutMs: 60_000,
    secretScope: {
      toolCredentials: [
        {
          tool: 'codehost',
          purpose: 'pull-request',
          secretRef: { name: 'svc-v01-tool-labtool', keys: ['token'] },
          projection: { kind: 'env', envName: 'CODEHOST_TOKEN' },
        },
      ],
    },
  },
});

describe('runtime assembly with a git bundle', () => {
  it('materializes tools, skills and prompts, injects the prompt on the new thread only, and records the assembly', async () => {
    e.provider.enqueue(
      { kind: 'tool-call', command: 'lab-hello; printenv CODEHOST_TOKEN; printenv LAB_API_KEY' },
      { kind: 'text', text: 'Indeed, the tool ran.' },
      { kind: 'text', text: 'Indeed, resumed.' },
    );
    const session = await createSession(e.t, { runBase: runBase(bundle()) });
    const first = await sendToSession(e.t, session.sessionId, {
      prompt: 'Run the lab tool.',
      runnerJob: { transientEnv: [{ name: 'LAB_API_KEY', value: transientSecret }] },
    });
    const done = await waitForCommand(e.t, first.run.runId, first.command.commandId, 90_000);
    assert.equal(done.state, 'completed', JSON.stringify(done));

    const events = await runEvents(e.t, first.run.runId);
    const assembly = events.find((ev) => ev.name === 'runtime-assembly').data;
    assert.equal(assembly.profile, 'builtin-a');
    assert.deepEqual(
      [assembly.image.resolvedFrom, typeof assembly.image.digest, assembly.image.reuse],
      ['default', 'string', 'controlled-default'],
    );
    assert.equal(assembly.providerSecretRef.name, 'svc-v01-provider-builtin-a');
    assert.deepEqual(
      assembly.toolCredentials.map((t: any) => [
        t.tool,
        t.secretRef.name,
        t.projection,
        t.valuesPrinted,
      ]),
      [['codehost', 'svc-v01-tool-labtool', 'env', false]],
    );
    assert.deepEqual(assembly.transientEnv.names, ['LAB_API_KEY']);
    assert.equal(assembly.sessionRef.sessionId, session.sessionId);
    assert.equal(assembly.bundle.repository.repoUrl, repoUrl);
    assert.equal(assembly.bundle.repository.mirrorUsed, false);
    assert.equal(assembly.bundle.materializedCommit, commit);
    assert.equal(assembly.bundle.requestedRef, 'main');
    assert.deepEqual(assembly.bundle.bundles.map((b: any) => b.target_path).sort(), [
      '.agents/skills',
      'tools',
    ]);
    assert.deepEqual(
      assembly.bundle.tools.tools.map((t: any) => t.name),
      ['lab-hello'],
    );
    assert.deepEqual(
      assembly.bundle.skills.skills.map((s: any) => s.name),
      ['review'],
    );
    assert.deepEqual(
      assembly.bundle.requiredSkills.found.map((s: any) => s.name),
      ['review'],
    );
    assert.deepEqual(
      assembly.bundle.prompts.facts.map((p: any) => [p.name, p.status, typeof p.sha256]),
      [['entry', 'loaded', 'string']],
    );
    assert.ok(events.some((ev) => ev.name === 'resource-bundle-materialized'));
    assert.ok(!JSON.stringify(assembly).includes(PROMPT_TEXT), 'facts, never the text');

    const turnPrompt = events.find((ev) => ev.name === 'turn.prompt').data;
    assert.equal(turnPrompt.initialPromptInjected, true);
    assert.deepEqual(turnPrompt.injectedPromptNames, ['entry']);
    const firstRequest = e.provider
      .requestsOf()
      .find((r) => userTexts(r).some((t) => t.includes('Run the lab tool.')))!;
    const firstUser = userTexts(firstRequest).find((t) => t.includes('Run the lab tool.'))!;
    assert.ok(
      firstUser.includes(PROMPT_TEXT),
      'the first turn of a new thread carries the domain prompt',
    );
    assert.ok(firstUser.includes('review'), 'and the skill facts');

    const output = events.find((ev) => ev.category === 'command_output');
    assert.match(output.data.text, /lab tool says hi/, 'the bundle tool ran from PATH');
    assert.match(output.data.text, /\[redacted\]/, 'credentials the agent printed are redacted');

    // A later send resumes the thread in a new runner: no prompt injection.
    const second = await sendToSession(e.t, session.sessionId, {
      prompt: 'Again, briefly.',
    });
    assert.equal(
      (await waitForCommand(e.t, second.run.runId, second.command.commandId, 90_000)).state,
      'completed',
    );
    const secondEvents = await runEvents(e.t, second.run.runId);
    const resumedPrompt = secondEvents.find((ev) => ev.name === 'turn.prompt').data;
    assert.equal(resumedPrompt.newThread, false);
    assert.equal(resumedPrompt.initialPromptInjected, false);
    const lastRequest = e.provider.requestsOf().at(-1)!;
    const lastUser = userTexts(lastRequest).at(-1)!;
    assert.equal(
      lastUser.trim(),
      'Again, briefly.',
      'a resumed turn carries the user prompt alone',
    );

    // Canary: the projected credential and the transientEnv value appear in no event, response or log.
    const jobs = (await e.t.api('GET', `/api/v1/runs/${first.run.runId}/runner-jobs`)).raw;
    const logs = await import('node:fs/promises').then((fs) =>
      fs.readFile(
        first.runnerJob ? join(e.t.dataDir, 'jobs', first.runnerJob.jobName, 'runner.log') : '',
        'utf8',
      ),
    );
    const everything = [
      JSON.stringify(events),
      JSON.stringify(secondEvents),
      jobs,
      logs,
      ...e.t.logs,
    ].join('\n');
    assert.deepEqual(findCanaries(everything, [toolSecret, transientSecret]), []);
  });

  it('blocks the run and the command when a required skill is missing', async () => {
    const session = await createSession(e.t, {
      runBase: runBase(bundle({ requiredSkills: [{ name: 'review' }, { name: 'deploy' }] })),
    });
    const sent = await sendToSession(e.t, session.sessionId, { prompt: 'x' });
    const blocked = await waitForCommand(e.t, sent.run.runId, sent.command.commandId, 90_000);
    assert.equal(blocked.state, 'blocked');
    assert.equal(blocked.failureKind, 'required-skill-unavailable');
    const result = (
      await e.t.api(
        'GET',
        `/api/v1/runs/${sent.run.runId}/commands/${sent.command.commandId}/result`,
      )
    ).body;
    assert.equal(result.terminalStatus, 'blocked');
    assert.match(result.blocker.message, /deploy/);
    assert.deepEqual(result.blocker.details.required, ['review', 'deploy']);
    assert.deepEqual(result.blocker.details.missing, ['deploy']);
    assert.ok(result.blocker.details.available.includes('review'));
    // The run is blocked with the command, in the same write: never `running` after it.
    const run = (await e.t.api('GET', `/api/v1/runs/${sent.run.runId}`)).body;
    assert.equal(run.state, 'blocked');
    assert.equal(run.failureKind, 'required-skill-unavailable');
    const error = (await runEvents(e.t, sent.run.runId)).find((ev) => ev.category === 'error');
    assert.equal(error.data.failureKind, 'required-skill-unavailable');
  });

  it('fetches a private repository with the bundle credential, used for the fetch only', async () => {
    const token = canary('gittoken');
    const server = await startGitHttpServer({
      projectRoot: repoDir,
      basic: { username: 'x-access-token', password: token },
    });
    try {
      await e.t.manager.secrets.put('svc-v01-tool-gitfetch', { token: Buffer.from(token) });
      e.provider.enqueue({ kind: 'text', text: 'Indeed, private.' });
      const privateUrl = `${server.url}/bundle.git`;
      const ref = {
        ...bundle({ repoUrl: privateUrl }),
        credentialRef: { name: 'svc-v01-tool-gitfetch', keys: ['token'] },
      };
      const session = await createSession(e.t, {
        runBase: {
          ...runBase(ref),
          workspaceRef: { kind: 'git', repoUrl: privateUrl, branch: 'main' },
        },
      });
      const sent = await sendToSession(e.t, session.sessionId, {
        prompt: 'hello private',
      });
      const done = await waitForCommand(e.t, sent.run.runId, sent.command.commandId, 90_000);
      assert.equal(done.state, 'completed', JSON.stringify(done));
      const events = await runEvents(e.t, sent.run.runId);
      const repository = events.find((ev) => ev.name === 'runtime-assembly').data.bundle.repository;
      assert.equal(repository.credentialUsed, true);
      assert.equal(repository.materializedCommit ?? commit, commit);
      assert.ok(
        server.requests.some((r) => r.authorized),
        'the fetch authenticated',
      );
      const logs = await import('node:fs/promises').then((fs) =>
        fs.readFile(join(e.t.dataDir, 'jobs', sent.runnerJob.jobName, 'runner.log'), 'utf8'),
      );
      const everything = [JSON.stringify(events), logs, ...e.t.logs, JSON.stringify(sent)].join(
        '\n',
      );
      assert.deepEqual(
        findCanaries(everything, [token]),
        [],
        'the credential shows in no event or log',
      );
      // The agent never gets it: the credential is not in the agent's environment.
      const agentEnv = events
        .find((ev) => ev.name === 'runtime-assembly')
        .data.toolCredentials.map((t: any) => t.secretRef.name);
      assert.ok(!agentEnv.includes('svc-v01-tool-gitfetch'));
    } finally {
      await server.close();
    }
  });
});
