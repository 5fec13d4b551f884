import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import { foreignRequests, launchBrowser, screenshotDir, type TestBrowser } from './browser.js';
import { createSession, sendToSession, useE2E, waitFor, waitForCommand } from './e2e-helpers.js';
import { runBody } from './helpers.js';
import { submit } from './queue-helpers.js';

const API_KEY = 'console-browser-key-4f1c9a7e2b6d';
let browser: TestBrowser;
let page: Page;
let shots: string;

// Registered before the rig's hooks so the browser is gone before its leak guard looks.
before(async () => {
  browser = await launchBrowser();
  page = browser.page;
  page.setDefaultTimeout(30_000);
  shots = await screenshotDir();
});
after(async () => {
  await browser?.close();
});
const rig = useE2E({ env: { SVC_API_KEY: API_KEY } });

const url = (path: string) => `${rig.e.t.manager.url}${path}`;
const shot = (name: string) =>
  page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });

async function createRunAndTurn(prompt: string) {
  const run = await rig.e.t.api(
    'POST',
    '/api/v1/runs',
    runBody({ executionPolicy: { timeoutMs: 60_000 } }),
  );
  assert.equal(run.status, 201, run.raw);
  const command = await rig.e.t.api('POST', `/api/v1/runs/${run.body.runId}/commands`, {
    type: 'turn',
    payload: { prompt },
  });
  assert.equal(command.status, 201, command.raw);
  return { runId: run.body.runId as string, commandId: command.body.commandId as string };
}

async function launchRunner(runId: string, commandId: string) {
  const job = await rig.e.t.api('POST', `/api/v1/runs/${runId}/runner-jobs`, { commandId });
  assert.equal(job.status, 201, job.raw);
}

describe('the web console in a real browser', { concurrency: false }, () => {
  it('asks for the API key once, and says clearly when a key is wrong', async () => {
    await page.goto(url('/runs'));
    await page.getByRole('heading', { name: 'This manager needs an API key' }).waitFor();
    await shot('key-prompt');
    await page.getByLabel('API key').fill('not-the-key');
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.getByRole('heading', { name: 'The API key was refused' }).waitFor();
    const alert = await page.getByRole('alert').innerText();
    assert.match(alert, /auth-failed/);
    assert.match(alert, /bearer token rejected/);

    await page.getByLabel('API key').fill(API_KEY);
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.getByRole('heading', { name: 'Runs' }).waitFor();
    await page.getByText('No runs yet').waitFor();
    // The key lives in this tab's session storage only.
    assert.equal(await page.evaluate('localStorage.length'), 0);
    assert.equal(await page.evaluate("sessionStorage.getItem('svc.apiKey')"), API_KEY);
  });

  it('lists a run created through the API and follows its state', async () => {
    const { runId } = await createRunAndTurn('Listed run.');
    const row = page.locator(`tr[data-run-id="${runId}"]`);
    await row.waitFor({ timeout: 10_000 });
    assert.match(await row.innerText(), /pending/);
    // A filter that excludes it hides it; clearing the filter brings it back.
    await page.getByLabel('State').selectOption('completed');
    await page.getByText('No run matches these filters.').waitFor();
    await page.getByRole('button', { name: 'Clear' }).click();
    await row.waitFor();
    // Cancel it through the API: the list shows the new state on its own.
    await rig.e.t.api('POST', `/api/v1/runs/${runId}/cancel`, { reason: 'list test' });
    await row.locator('.badge', { hasText: 'cancelled' }).waitFor({ timeout: 10_000 });
  });

  it('shows the events of a real turn as they arrive, and the reply as safe Markdown', async () => {
    const reply = [
      '**Done.** Here is `code`.',
      '',
      '<img src=x onerror="window.__pwned = 1"> <script>window.__pwned = 2</script>',
      '![remote](http://203.0.113.9/pixel.png) [bad](javascript:window.__pwned=3)',
    ].join('\n');
    rig.e.provider.enqueue(
      { kind: 'tool-call', command: 'echo hello-from-console' },
      { kind: 'stall', text: reply },
    );
    const { runId, commandId } = await createRunAndTurn('Say hello from a shell.');
    await page.goto(url('/runs'));
    await page.locator(`tr[data-run-id="${runId}"] a`).click();
    await page.getByRole('heading', { name: `Run ${runId}` }).waitFor();
    await page.getByText('No events yet').waitFor();

    await page.getByText('No runner job launched.').waitFor();
    await launchRunner(runId, commandId);
    // The runner job appears once its runner claims, without a reload.
    await page.locator('table.list td.mono', { hasText: 'svc-v01-runner-' }).waitFor({
      timeout: 10_000,
    });
    const tool = page.locator('.entry.tool', { hasText: 'echo hello-from-console' });
    await tool.getByText('exit 0').waitFor({ timeout: 60_000 });
    // The provider holds the turn open: what the page shows arrived while the turn ran.
    const during = await rig.e.t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`);
    assert.ok(['delivered', 'confirmed'].includes(during.body.state), during.raw);
    await tool.locator('summary').click();
    await tool.locator('pre.output').getByText('hello-from-console').waitFor();

    rig.e.provider.release();
    await page.locator('.command-card .reply strong', { hasText: 'Done.' }).waitFor({
      timeout: 60_000,
    });
    await page.locator('.entry.assistant', { hasText: 'Done.' }).first().waitFor();
    const command = await waitForCommand(rig.e.t, runId, commandId);
    assert.equal(command.state, 'completed');
    await page.locator('.command-card .badge', { hasText: 'completed' }).waitFor();

    // Markup in the reply is inert: no script ran, no handler, no remote image, no js: link.
    assert.equal(await page.evaluate('window.__pwned'), undefined);
    const replyHtml = await page.locator('.command-card .reply').innerHTML();
    assert.doesNotMatch(replyHtml, /onerror|<script|javascript:|src="http/);
    await page.locator('.command-card .reply .blocked-image').getByText('remote').waitFor();
    await page.locator('.stream-mode').waitFor();
    await shot('run-detail');
  });

  it('cancels a running run from its page, after a confirmation', async () => {
    rig.e.provider.enqueue({ kind: 'stall' });
    const asked = rig.e.provider.requestsOf().length;
    const { runId, commandId } = await createRunAndTurn('Take your time.');
    await launchRunner(runId, commandId);
    await page.goto(url(`/runs/${runId}`));
    // The turn is running: the agent is waiting on the (stalled) provider.
    await waitFor(
      'the agent to ask the provider',
      () => rig.e.provider.requestsOf().length > asked,
      60_000,
    );
    await page.getByRole('button', { name: 'Cancel run' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Reason (optional)').fill('stopped from the console');
    // Backing out does nothing; confirming cancels.
    await dialog.getByRole('button', { name: 'Back' }).click();
    assert.equal((await rig.e.t.api('GET', `/api/v1/runs/${runId}`)).body.cancelRequested, false);
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await page.getByRole('dialog').getByLabel('Reason (optional)').fill('stopped from the console');
    await page.getByRole('button', { name: 'Confirm cancel run' }).click();
    await waitFor('the run to be cancelled', async () => {
      const run = await rig.e.t.api('GET', `/api/v1/runs/${runId}`);
      return run.body.state === 'cancelled' ? run.body : null;
    });
    const command = await waitForCommand(rig.e.t, runId, commandId);
    assert.equal(command.state, 'cancelled');
    await page.locator('.view-head .badge', { hasText: 'cancelled' }).waitFor({ timeout: 10_000 });
    rig.e.provider.release();
  });

  it('shows sessions, the queue and the profiles, reachable by keyboard', async () => {
    rig.e.provider.enqueue({ kind: 'text', text: 'Session reply: all good.' });
    const session = await createSession(rig.e.t);
    const sent = await sendToSession(rig.e.t, session.sessionId, { prompt: 'Check the build.' });
    assert.ok(sent.command?.commandId, JSON.stringify(sent));
    await waitForCommand(rig.e.t, sent.run.runId, sent.command.commandId);
    await submit(rig.e.t, { title: 'Fix the flaky login test', priority: 5 });
    await submit(rig.e.t, { title: 'Update the README walkthrough' });

    await page.goto(url('/runs'));
    await page.getByRole('heading', { name: 'Runs' }).waitFor();
    await page.keyboard.press('g');
    await page.keyboard.press('s');
    await page.getByRole('heading', { name: 'Sessions' }).waitFor();
    await page.locator(`a[href="/sessions/${session.sessionId}"]`).waitFor();
    await shot('sessions');
    await page.locator(`a[href="/sessions/${session.sessionId}"]`).click();
    await page.locator('.entry.assistant', { hasText: 'Session reply: all good.' }).waitFor();
    await shot('session-detail');

    await page.keyboard.press('g');
    await page.keyboard.press('q');
    await page.getByRole('heading', { name: 'Queue' }).waitFor();
    await page.locator('tr[data-task-id]', { hasText: 'Fix the flaky login test' }).waitFor();
    await page.getByRole('heading', { name: 'Commander' }).waitFor();
    await shot('queue');

    await page.keyboard.press('g');
    await page.keyboard.press('p');
    await page.getByRole('heading', { name: 'Provider profiles' }).waitFor();
    const row = page.locator('tr[data-profile="builtin-a"]');
    await row.getByText('configured', { exact: true }).waitFor();
    // Profile values never reach the page.
    assert.ok(!(await page.content()).includes(rig.e.providerKey));
    await page.getByRole('heading', { name: 'Work-ready tools' }).waitFor();
    await shot('profiles');

    await page.goto(url('/runs'));
    await page.locator('table.list tbody tr').first().waitFor();
    await shot('runs');
  });

  it('sent no request to anything but this machine', () => {
    assert.ok(browser.requests.length > 10, 'the page made requests');
    assert.deepEqual(foreignRequests(browser.requests), []);
    for (const request of browser.requests) assert.ok(!request.includes(API_KEY));
  });
});
