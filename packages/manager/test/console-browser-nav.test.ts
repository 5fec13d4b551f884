import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import {
  axeFindings,
  launchBrowser,
  sidewaysOverflow,
  WIDTHS,
  type TestBrowser,
} from './browser.js';
import { seed, type Seeded } from './console-seed.js';
import { useE2E } from './e2e-helpers.js';
import { submit } from './queue-helpers.js';

/**
 * Getting around the console as an operator does, at a desktop and a phone width: a task page
 * with its attempts, links task <-> run <-> session both ways, a session page with all its
 * turns and runs, the jump box, copy buttons, paging, the key help and the not-found page.
 */
let browser: TestBrowser;
let page: Page;
let seeded: Seeded;

before(async () => {
  browser = await launchBrowser();
  page = browser.page;
  page.setDefaultTimeout(30_000);
  await browser.context.grantPermissions(['clipboard-read', 'clipboard-write']);
});
after(async () => {
  await browser?.close();
});
const rig = useE2E();

describe('the console, seeded', { concurrency: false }, () => {
  before(async () => {
    seeded = await seed(rig.e);
    // A task whose id is its own (no service prefix): the jump box looks it up.
    await submit(rig.e.t, { taskId: 'nightly-0001', title: 'Nightly dependency check' });
  });
  after(async () => {
    await seeded?.close();
  });

  const url = (path: string) => `${rig.e.t.manager.url}${path}`;
  const hrefs = (selector: string) =>
    page.locator(selector).evaluateAll((els) => els.map((el) => el.getAttribute('href')));
  const noSideways = async (what: string) =>
    assert.equal(await sidewaysOverflow(page), 0, `${what} scrolls sideways`);

  for (const { name, width, height } of WIDTHS)
    describe(`navigating the console at ${width} px (${name})`, { concurrency: false }, () => {
      before(() => page.setViewportSize({ width, height }));

      it('a task page: its attempts with run, session and outcome; its actions; links both ways', async () => {
        const { task } = seeded;
        await page.goto(url('/queue'));
        await page.locator(`tr[data-task-id="${task.taskId}"] a`, { hasText: task.title }).click();
        await page.getByRole('heading', { name: task.title }).waitFor();
        const attempt = page.locator('table.attempts tbody tr').first();
        const text = await attempt.innerText();
        assert.match(text, /completed/);
        assert.deepEqual(
          (await hrefs('table.attempts a')).sort(),
          [`/runs/${task.runId}`, `/sessions/${task.sessionId}`].sort(),
        );
        // A completed task takes no dispatch and no cancel; its outcome can be read again.
        assert.equal(await page.getByRole('button', { name: 'Dispatch' }).isDisabled(), true);
        assert.equal(await page.getByRole('button', { name: 'Cancel' }).isDisabled(), true);
        assert.equal(await page.getByRole('button', { name: 'Refresh' }).isDisabled(), false);
        await noSideways('a task page');

        // Task -> run -> task and session.
        await page.locator(`table.attempts a[href="/runs/${task.runId}"]`).click();
        await page.getByRole('heading', { name: `Run ${task.runId}` }).waitFor();
        assert.ok((await hrefs('dl a')).includes(`/tasks/${task.taskId}`), 'run -> task');
        assert.ok((await hrefs('dl a')).includes(`/sessions/${task.sessionId}`), 'run -> session');
        await page.locator(`dl a[href="/sessions/${task.sessionId}"]`).click();
        await page.getByRole('heading', { name: `Session ${task.sessionId}` }).waitFor();
        // Session -> its run -> its task.
        const run = page.locator(`.session-run[data-run-id="${task.runId}"]`);
        await run.waitFor();
        assert.ok(
          (await hrefs(`.session-run[data-run-id="${task.runId}"] a`)).includes(
            `/tasks/${task.taskId}`,
          ),
        );
        await run.locator(`a[href="/tasks/${task.taskId}"]`).click();
        await page.getByRole('heading', { name: task.title }).waitFor();
      });

      it('a paused queue and a task held by it: the queue, its row and the task page say so', async () => {
        await page.goto(url('/queue'));
        const banner = page.locator('[data-paused]');
        await banner.waitFor();
        assert.match(await banner.innerText(), /paused[\s\S]*nightly[\s\S]*queue resume/);
        const row = page.locator('tr', { hasText: 'Audit the dependencies' });
        await row.waitFor();
        assert.match(await row.innerText(), /queue-paused/);
        // A dispatch would be refused: the row does not offer it.
        assert.equal(await row.getByRole('button', { name: 'Dispatch' }).isDisabled(), true);
        await row.getByRole('link', { name: 'Audit the dependencies' }).click();
        await page.getByRole('heading', { name: 'Audit the dependencies' }).waitFor();
        const facts = await page.locator('dl').first().innerText();
        assert.match(facts, /repo:example\/web \(at most 1 at once\)/);
        await page.locator('.waiting-reason').first().waitFor();
        assert.match(await page.locator('.waiting-reason').first().innerText(), /paused/);
      });

      it('a queued task can be dispatched or cancelled, and says when it runs', async () => {
        const [waiting] = seeded.waitingTasks;
        await page.goto(url(`/tasks/${waiting}`));
        await page.getByRole('heading', { name: 'Update the README walkthrough' }).waitFor();
        assert.equal(await page.getByRole('button', { name: 'Dispatch' }).isDisabled(), false);
        assert.equal(await page.getByRole('button', { name: 'Cancel' }).isDisabled(), false);
        assert.equal(await page.getByRole('button', { name: 'Refresh' }).isDisabled(), true);
        await page.getByText('No attempt yet.').waitFor();
        const facts = await page.locator('dl').first().innerText();
        assert.match(facts, /Runs after/);
        const shown = (await rig.e.t.api('GET', `/api/v1/queue/tasks/${waiting}`)).body;
        // Once the manager says why a task waits, the page says it too.
        if (shown.waiting) await page.locator('.waiting-reason').first().waitFor();
      });

      it('a cancelled task can be retried: the page asks first, then shows it queued', async () => {
        const task = await submit(rig.e.t, { title: `Retry me at ${width} px` });
        const taskUrl = `/api/v1/queue/tasks/${task.taskId}`;
        await rig.e.t.api('POST', `${taskUrl}/cancel`, { reason: 'wrong day' });
        await page.goto(url(`/tasks/${task.taskId}`));
        await page.getByRole('heading', { name: task.title }).waitFor();
        await page.locator('.view-head .badge', { hasText: 'cancelled' }).waitFor();
        const retry = page.getByRole('button', { name: 'Retry', exact: true });
        // Backing out does nothing; confirming requeues it.
        await retry.click();
        await page.getByRole('dialog').getByRole('button', { name: 'Back' }).click();
        assert.equal((await rig.e.t.api('GET', taskUrl)).body.state, 'cancelled');
        await retry.click();
        await page.getByRole('dialog').getByLabel('Reason (optional)').fill('right day now');
        await page.getByRole('button', { name: 'Confirm retry' }).click();
        await page.locator('.view-head .badge', { hasText: 'queued' }).waitFor({ timeout: 10_000 });
        await page.locator('dd', { hasText: 'right day now' }).waitFor();
        assert.equal(await retry.count(), 0, 'a queued task takes no retry');
        const shown = (await rig.e.t.api('GET', taskUrl)).body;
        assert.equal(shown.state, 'queued');
        assert.equal(shown.retries[0].reason, 'right day now');
        await noSideways('a retried task page');
      });

      it('a session page lists every run and turn, each prompt with its reply', async () => {
        const { session } = seeded;
        await page.goto(url(`/sessions/${session.sessionId}`));
        await page.getByRole('heading', { name: `Session ${session.sessionId}` }).waitFor();
        for (const prompt of session.prompts)
          await page.locator('.command-card .prompt', { hasText: prompt }).waitFor();
        await page
          .locator('.command-card .reply', { hasText: 'The build passes on main.' })
          .waitFor();
        await page.locator('.command-card .reply', { hasText: 'it now polls' }).waitFor();
        for (const runId of session.runIds)
          assert.ok((await hrefs('.session-run a')).includes(`/runs/${runId}`), runId);
        // Each reply once: the output timeline points to the turns instead of repeating them.
        assert.equal(
          await page.locator('.markdown', { hasText: 'The build passes on main.' }).count(),
          1,
        );
        await noSideways('a session page');
      });

      it('jumps to any run, session or task id from the box, and says when none has it', async () => {
        const jump = page.getByRole('searchbox', { name: 'Jump to a run, session or task id' });
        await page.goto(url('/profiles'));
        for (const [id, heading] of [
          [seeded.refused.runId, `Run ${seeded.refused.runId}`],
          [seeded.session.sessionId, `Session ${seeded.session.sessionId}`],
          [seeded.task.taskId, seeded.task.title],
          ['nightly-0001', 'Nightly dependency check'],
        ] as const) {
          // `/` puts the cursor in the box from anywhere.
          await page.locator('main').click({ position: { x: 5, y: 5 } });
          await page.keyboard.press('/');
          assert.equal(await jump.evaluate((el) => el === el.ownerDocument.activeElement), true);
          await page.keyboard.type(` ${id.toUpperCase()} `);
          await page.keyboard.press('Enter');
          await page.getByRole('heading', { name: heading }).waitFor();
        }
        await jump.fill('zzz-0000-nothing');
        await jump.press('Enter');
        await page
          .getByRole('alert')
          .filter({ hasText: 'no run, session or task has the id' })
          .waitFor();
        await jump.fill('not an id');
        await jump.press('Enter');
        await page.getByRole('alert').filter({ hasText: 'is not an id' }).waitFor();
        await jump.press('Escape');
      });

      it('copies an id with its button', async () => {
        await page.goto(url(`/runs/${seeded.answered.runId}`));
        await page
          .getByRole('button', { name: `Copy run id ${seeded.answered.runId}` })
          .first()
          .click();
        await page.getByRole('status').filter({ hasText: 'run id copied' }).waitFor();
        assert.equal(await page.evaluate('navigator.clipboard.readText()'), seeded.answered.runId);
      });

      it('pages through sessions and the queue', async () => {
        await page.goto(url('/queue?limit=2'));
        await page.locator('tr[data-task-id]').first().waitFor();
        const firstPage = await page
          .locator('tr[data-task-id]')
          .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-task-id')));
        assert.equal(firstPage.length, 2);
        await page.getByRole('link', { name: 'Older tasks →' }).click();
        await page.getByRole('link', { name: '← Newest tasks' }).waitFor();
        await page
          .locator(
            `tr[data-task-id]${firstPage.map((id) => `:not([data-task-id="${id}"])`).join('')}`,
          )
          .first()
          .waitFor();
        const secondPage = await page
          .locator('tr[data-task-id]')
          .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-task-id')));
        assert.equal(secondPage.length, 2);
        assert.ok(
          secondPage.every((id) => !firstPage.includes(id)),
          'a new page',
        );
        await page.getByRole('link', { name: '← Newest tasks' }).click();
        await page.locator(`tr[data-task-id="${firstPage[0]}"]`).waitFor();

        // Sessions: one a page, the seeded sessions reached by following "Older".
        await page.goto(url('/sessions?limit=1'));
        await page.locator('tr[data-session-id]').first().waitFor();
        const seen = new Set<string>();
        for (let i = 0; i < 10; i++) {
          const rows = await page
            .locator('tr[data-session-id]')
            .evaluateAll((els) => els.map((el) => el.getAttribute('data-session-id') ?? ''));
          assert.equal(rows.length, 1);
          seen.add(rows[0] ?? '');
          const older = page.getByRole('link', { name: 'Older sessions →' });
          if ((await older.count()) === 0) break;
          await older.click();
          await page.locator(`tr[data-session-id]:not([data-session-id="${rows[0]}"])`).waitFor();
        }
        assert.ok(
          seen.has(seeded.session.sessionId) && seen.has(seeded.task.sessionId),
          [...seen].join(),
        );
      });

      it('? shows every key; Escape closes it; g then a letter switches views', async () => {
        await page.goto(url('/runs'));
        await page.getByRole('heading', { name: 'Runs' }).waitFor();
        await page.keyboard.press('?');
        const help = page.getByRole('dialog', { name: 'Keyboard' });
        await help.waitFor();
        for (const what of ['Runs', 'Sessions', 'Queue', 'Provider profiles', 'This help'])
          await help.getByRole('cell', { name: what, exact: true }).waitFor();
        assert.deepEqual(await axeFindings(page), [], 'the help dialog, as axe-core sees it');
        await page.keyboard.press('Escape');
        await help.waitFor({ state: 'hidden' });
        for (const [key, heading] of [
          ['s', 'Sessions'],
          ['q', 'Queue'],
          ['p', 'Provider profiles'],
          ['r', 'Runs'],
        ] as const) {
          await page.keyboard.press('g');
          await page.keyboard.press(key);
          await page.getByRole('heading', { name: heading, exact: true }).waitFor();
        }
      });

      it('answers an unknown address with its own not-found page, and a missing id plainly', async () => {
        const response = await page.goto(url('/no-such-page'));
        assert.equal(response?.status(), 404);
        await page.getByRole('heading', { name: 'No such page' }).waitFor();
        assert.doesNotMatch(await page.content(), /failureKind/);
        await page.getByRole('link', { name: 'Runs' }).first().click();
        await page.getByRole('heading', { name: 'Runs' }).waitFor();
        await page.goto(url('/runs/run-00000000000000000000000000'));
        await page.getByText('No such run').waitFor();
        await page.goto(url('/tasks/tsk-00000000000000000000000000'));
        await page.getByText('No such task').waitFor();
        // An address that is no valid escape, reached inside the console (a link, the back
        // button), names nothing: the page says so, it never blanks.
        for (const bad of ['/runs/%E0', '/tasks/%E0%A4%A', '/sessions/%ZZ']) {
          await page.goto(url('/runs'));
          await page.getByRole('heading', { name: 'Runs' }).waitFor();
          await page.evaluate(
            `history.pushState(null, '', ${JSON.stringify(bad)}); dispatchEvent(new PopStateEvent('popstate'))`,
          );
          await page.getByRole('heading', { name: 'No such page' }).waitFor();
        }
        await noSideways('the not-found page');
      });
    });
});
