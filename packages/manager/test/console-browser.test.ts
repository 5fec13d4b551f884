import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import {
  axeFindings,
  foreignRequests,
  launchBrowser,
  screenshotDir,
  sidewaysOverflow,
  WIDTHS,
  type TestBrowser,
} from './browser.js';
import { createRunAndTurn, launchRunner, seed, type Seeded } from './console-seed.js';
import { useE2E, waitFor, waitForCommand } from './e2e-helpers.js';

/**
 * The console in Debian's Chromium at a desktop and a phone width: the key prompt, runs with
 * their prompt, duration and outcome, a live turn (times, durations, the reply once, actions
 * only while they can act, the stream following), failures with their messages, cancelling.
 */
const API_KEY = 'console-browser-key-4f1c9a7e2b6d';
let browser: TestBrowser;
let page: Page;
let seeded: Seeded;
let shots: string;
const encodings: string[] = [];

// Registered before the rig's hooks so the browser is gone before its leak guard looks.
before(async () => {
  browser = await launchBrowser();
  page = browser.page;
  shots = await screenshotDir();
  page.setDefaultTimeout(30_000);
  page.on('response', (response) => {
    if (response.url().includes('/assets/'))
      encodings.push(response.headers()['content-encoding'] ?? 'identity');
  });
});
after(async () => {
  await browser?.close();
});
const rig = useE2E({ env: { SVC_API_KEY: API_KEY } });

const url = (path: string) => `${rig.e.t.manager.url}${path}`;
const noSideways = async (what: string) =>
  assert.equal(await sidewaysOverflow(page), 0, `${what} scrolls sideways`);

describe('the web console in a real browser', { concurrency: false }, () => {
  before(async () => {
    seeded = await seed(rig.e);
  });
  after(async () => {
    await seeded?.close();
  });

  it('asks for the API key once, and says clearly when a key is wrong', async () => {
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.goto(url('/runs'));
    await page.getByRole('heading', { name: 'This manager needs an API key' }).waitFor();
    await page.screenshot({ path: join(shots, 'key-prompt.png') });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: join(shots, 'key-prompt-phone.png') });
    await page.getByLabel('API key').fill('not-the-key');
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.getByRole('heading', { name: 'The API key was refused' }).waitFor();
    const alert = await page.getByRole('alert').innerText();
    assert.match(alert, /auth-failed/);
    assert.match(alert, /bearer token rejected/);
    assert.deepEqual(await axeFindings(page), [], 'the key prompt, as axe-core sees it');

    await page.getByLabel('API key').fill(API_KEY);
    await page.getByRole('button', { name: 'Use this key' }).click();
    await page.getByRole('heading', { name: 'Runs' }).waitFor();
    await page.locator(`tr[data-run-id="${seeded.answered.runId}"]`).waitFor();
    // The key lives in this tab's session storage only, never in localStorage.
    const stored = await page.evaluate<string>('JSON.stringify(localStorage)');
    assert.ok(!stored.includes(API_KEY));
    assert.equal(await page.evaluate("sessionStorage.getItem('svc.apiKey')"), API_KEY);
  });

  it('sent the bundle compressed (brotli)', () => {
    assert.ok(encodings.length >= 2, encodings.join());
    assert.ok(
      encodings.every((e) => e === 'br'),
      encodings.join(),
    );
  });

  for (const { name, width, height } of WIDTHS)
    describe(`at ${width} px (${name})`, () => {
      before(() => page.setViewportSize({ width, height }));

      it('lists runs with what they were asked, how long they took and how they ended', async () => {
        await page.goto(url('/runs'));
        const answered = page.locator(`tr[data-run-id="${seeded.answered.runId}"]`);
        await answered.waitFor();
        const text = await answered.innerText();
        assert.match(text, /Fix the failing build and report the checks\./);
        assert.match(text, /completed/);
        assert.match(text, /\d+(\.\d)? s|\dm \d\ds/, 'a duration');
        const refused = await page.locator(`tr[data-run-id="${seeded.refused.runId}"]`).innerText();
        assert.match(refused, /Summarize the open issues\./);
        // The turn the provider refused: its outcome and failure kind, as the manager reports.
        const run = (await rig.e.t.api('GET', `/api/v1/runs/${seeded.refused.runId}`)).body;
        assert.equal(run.lastCommand.state, 'failed');
        assert.match(refused, /failed/);
        assert.match(refused, new RegExp(run.lastCommand.failureKind));
        const pending = await page.locator(`tr[data-run-id="${seeded.pending.runId}"]`).innerText();
        assert.match(pending, /Review the release notes/);
        assert.match(pending, /pending/);
        // A filter that excludes it hides it; clearing the filter brings it back.
        await page.getByLabel('State').selectOption('cancelled');
        await page.getByText('No run matches these filters.').waitFor();
        await page.getByRole('button', { name: 'Clear' }).click();
        await answered.waitFor();
        await noSideways('the runs list');
      });

      it("shows a finished turn's times, durations, its reply once and its tables ruled", async () => {
        const { runId, commandId } = seeded.answered;
        await page.goto(url(`/runs/${runId}`));
        const card = page.locator(`.command-card[data-command-id="${commandId}"]`);
        await card.locator('.reply table').waitFor();
        // Every event says when it happened, as a <time> with its ISO instant.
        await page.locator('.timeline .entry').first().waitFor();
        const times = await page
          .locator('.timeline time.clock')
          .evaluateAll((els) => els.map((el) => el.getAttribute('datetime') ?? ''));
        assert.ok(times.length >= 3, `${times.length} event times`);
        for (const t of times) assert.match(t, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
        // The turn and the run say how long they took.
        assert.match(await card.locator('.entry-head .duration').innerText(), /\d/);
        assert.match(await page.locator('.view-head .duration').innerText(), /\d/);
        // The reply is shown once: in its turn; the timeline points there.
        assert.equal(
          await page.locator('.markdown', { hasText: 'The build is green again.' }).count(),
          1,
        );
        await page.locator('.timeline .reply-ref a', { hasText: 'its turn' }).waitFor();
        assert.equal(await card.getByText('Waiting for the reply').count(), 0);
        // Markdown tables have borders.
        const border = await card
          .locator('.reply td')
          .first()
          .evaluate((td) => td.ownerDocument.defaultView.getComputedStyle(td).borderTopWidth);
        assert.notEqual(border, '0px');
        // Nothing to interrupt or steer on a closed turn.
        assert.equal(await page.getByRole('button', { name: 'Interrupt' }).isDisabled(), true);
        assert.equal(await page.getByRole('button', { name: 'Steer' }).isDisabled(), true);
        await noSideways('a run');
      });

      it('says why a refused turn failed, and never that it waits for a reply', async () => {
        const { runId, commandId } = seeded.refused;
        const command = (await rig.e.t.api('GET', `/api/v1/runs/${runId}/commands/${commandId}`))
          .body;
        assert.equal(command.state, 'failed', JSON.stringify(command));
        await page.goto(url(`/runs/${runId}`));
        const card = page.locator(`.command-card[data-command-id="${commandId}"]`);
        await card.locator('.failure').waitFor();
        const failure = await card.locator('.failure').innerText();
        assert.ok(failure.includes(command.failureKind), failure);
        if (command.message) assert.ok(failure.includes(command.message.slice(0, 40)), failure);
        assert.equal(await card.getByText('Waiting for the reply').count(), 0);
        await noSideways('a failed run');
      });

      it('follows a live turn: waiting, streaming, actions while it runs, then its reply', async () => {
        const lines = Array.from({ length: 90 }, (_, i) => `- line ${i + 1} of the long answer`);
        rig.e.provider
          .dropSteps()
          .enqueue(
            { kind: 'tool-call', command: 'echo hello-from-console' },
            { kind: 'text', text: lines.join('\n'), deltas: 60, frameDelayMs: 200 },
          );
        const { runId, commandId } = await createRunAndTurn(rig.e, `Stream at ${width} px.`);
        await page.goto(url(`/runs/${runId}`));
        const card = page.locator(`.command-card[data-command-id="${commandId}"]`);
        await card.getByText('Waiting for the reply…').waitFor();
        // No runner holds the turn yet: nothing to interrupt or steer.
        const interrupt = page.getByRole('button', { name: 'Interrupt' });
        assert.equal(await interrupt.isDisabled(), true);
        await launchRunner(rig.e, runId, commandId);
        // The tool call: its command, exit code and how long it ran.
        const tool = page.locator('.entry.tool', { hasText: 'echo hello-from-console' });
        await tool.getByText('exit 0').waitFor({ timeout: 90_000 });
        assert.match(await tool.locator('.duration').innerText(), /\d/);
        await tool.locator('summary').click();
        await tool.locator('pre.output').getByText('hello-from-console').waitFor();
        // The turn runs: Interrupt and Steer can act now, and the wait is said.
        await waitFor(
          'Interrupt to be enabled',
          async () => !(await interrupt.isDisabled()),
          20_000,
        );
        assert.equal(await page.getByRole('button', { name: 'Steer' }).isDisabled(), false);
        assert.equal(await card.getByText('Waiting for the reply…').count(), 1);

        const pane = page.locator('.timeline');
        // Opening the tool's output scrolled the pane to it when more had arrived below: the
        // reader goes back to the end, from where the pane follows.
        await pane.evaluate((el) => (el.scrollTop = el.scrollHeight));
        await page.locator('.entry.assistant .streaming').waitFor({ timeout: 60_000 });
        await waitFor('the log to overflow its pane', () =>
          pane.evaluate((el) => el.scrollHeight > el.clientHeight + 200),
        );
        // At the end: the pane follows what arrives.
        const atEnd = () =>
          pane.evaluate((el) => el.scrollHeight - el.scrollTop - el.clientHeight <= 48);
        await waitFor('the pane to follow', atEnd, 10_000);
        // Scrolled up to read: it stays where the reader is, and offers the new output.
        await pane.evaluate((el) => (el.scrollTop = 0));
        await page.getByRole('button', { name: '↓ New output' }).waitFor({ timeout: 20_000 });
        assert.equal(await pane.evaluate((el) => el.scrollTop), 0);
        await page.getByRole('button', { name: '↓ New output' }).click();
        assert.ok(await atEnd());

        const done = await waitForCommand(rig.e.t, runId, commandId, 120_000);
        assert.equal(done.state, 'completed');
        await card.locator('.reply', { hasText: 'line 90 of the long answer' }).waitFor();
        assert.equal(await card.getByText('Waiting for the reply…').count(), 0);
        await waitFor('Interrupt to be disabled again', () => interrupt.isDisabled(), 20_000);
        await noSideways('a live run');
      });
    });

  it('cancels a running run from its page, after a confirmation', async () => {
    await page.setViewportSize({ width: 1440, height: 900 });
    rig.e.provider.dropSteps().enqueue({ kind: 'stall' });
    const asked = rig.e.provider.requestsOf().length;
    const { runId, commandId } = await createRunAndTurn(rig.e, 'Take your time.');
    await launchRunner(rig.e, runId, commandId);
    await page.goto(url(`/runs/${runId}`));
    await waitFor(
      'the agent to ask the provider',
      () => rig.e.provider.requestsOf().length > asked,
      60_000,
    );
    await page.getByRole('button', { name: 'Cancel run' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.getByLabel('Reason (optional)').fill('stopped from the console');
    assert.deepEqual(await axeFindings(page), [], 'the confirmation, as axe-core sees it');
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
    assert.equal(await page.getByRole('button', { name: 'Cancel run' }).isDisabled(), true);
    rig.e.provider.release();
  });

  it('keeps reply markup inert: no script, no handler, no remote image, no js: link', async () => {
    rig.e.provider.dropSteps().enqueue({
      kind: 'text',
      text: [
        '**Done.** Here is `code`.',
        '',
        '<img src=x onerror="window.__pwned = 1"> <script>window.__pwned = 2</script>',
        '![remote](http://203.0.113.9/pixel.png) [bad](javascript:window.__pwned=3)',
      ].join('\n'),
    });
    const { runId, commandId } = await createRunAndTurn(rig.e, 'Reply with markup.');
    await launchRunner(rig.e, runId, commandId);
    await waitForCommand(rig.e.t, runId, commandId, 120_000);
    await page.goto(url(`/runs/${runId}`));
    await page.locator('.command-card .reply strong', { hasText: 'Done.' }).waitFor();
    assert.equal(await page.evaluate('window.__pwned'), undefined);
    const replyHtml = await page.locator('.command-card .reply').innerHTML();
    assert.doesNotMatch(replyHtml, /onerror|<script|javascript:|src="http/);
    await page.locator('.command-card .reply .blocked-image').getByText('remote').waitFor();
  });

  it('sent no request to anything but this machine', () => {
    assert.ok(browser.requests.length > 10, 'the page made requests');
    assert.deepEqual(foreignRequests(browser.requests), []);
    for (const request of browser.requests) assert.ok(!request.includes(API_KEY));
  });
});
