import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import {
  axeFindings,
  launchBrowser,
  screenshotDir,
  sidewaysOverflow,
  WIDTHS,
  type TestBrowser,
} from './browser.js';
import { waitFor } from './e2e-helpers.js';
import { startTestManager, type TestManager } from './helpers.js';
import { taskBody } from './queue-helpers.js';

/**
 * The Schedules view as an operator reaches it: from the queue page, a schedule with its cron,
 * zone, next run and the last task it made, a link to that task's page, which names the
 * schedule back. A real manager fires the tick (capacity 0: the task stays queued).
 */
let browser: TestBrowser;
let t: TestManager;
let scheduleId: string;
let taskId: string;

before(async () => {
  t = await startTestManager({
    listen: true,
    env: { SVC_SCHEDULER: 'on', SVC_SCHEDULER_SCAN_MS: '200', SVC_SCHEDULER_MAX_RUNNING: '0' },
  });
  await t.configureProfile('builtin-a');
  const created = await t.api('POST', '/api/v1/queue/schedules', {
    cron: '0 9 * * mon-fri',
    timezone: 'Europe/Berlin',
    name: 'weekday triage',
    task: taskBody({ title: 'Triage new issues' }),
  });
  assert.equal(created.status, 201, created.raw);
  scheduleId = created.body.scheduleId;
  await sql`UPDATE queue_schedules SET next_run_at = now() - interval '1 minute'
    WHERE schedule_id = ${scheduleId}`.execute(t.manager.store.db);
  taskId = await waitFor('tick fired', async () => {
    const s = (await t.api('GET', `/api/v1/queue/schedules/${scheduleId}`)).body;
    return s.lastTaskId as string | null;
  });
  browser = await launchBrowser();
  browser.page.setDefaultTimeout(30_000);
});
after(async () => {
  await browser?.close();
  await t?.close();
});

describe('the Schedules view', { concurrency: false }, () => {
  for (const { name, width, height } of WIDTHS)
    it(`lists schedules with next run and last task, linked both ways (${name})`, async () => {
      const { page } = browser;
      await page.setViewportSize({ width, height });
      await page.goto(`${t.manager.url}/queue`);
      await page.getByRole('link', { name: 'Schedules' }).click();
      await page.getByRole('heading', { name: 'Schedules' }).waitFor();
      const row = page.locator(`tr[data-schedule="${scheduleId}"]`);
      const text = await row.innerText();
      assert.match(text, /weekday triage/);
      assert.match(text, /0 9 \* \* mon-fri/);
      assert.match(text, /Europe\/Berlin/);
      assert.match(text, /Triage new issues/);
      assert.equal(await sidewaysOverflow(page), 0, 'the schedules view scrolls sideways');
      assert.deepEqual(await axeFindings(page), [], 'the schedules view, as axe-core sees it');
      await page.screenshot({ path: join(await screenshotDir(), `schedules-${name}.png`) });
      await row.locator(`a[href="/tasks/${taskId}"]`).click();
      await page.getByRole('heading', { name: 'Triage new issues' }).waitFor();
      const field = page.locator('dl', { hasText: 'Schedule' });
      assert.match(await field.innerText(), new RegExp(scheduleId));
    });
});
