import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Page } from 'playwright-core';
import {
  axeFindings,
  launchBrowser,
  screenshotDir,
  sidewaysOverflow,
  WIDTHS,
  type TestBrowser,
} from './browser.js';
import { seed, type Seeded } from './console-seed.js';
import { useE2E } from './e2e-helpers.js';

/**
 * Every view at a desktop and a phone width, light and dark: nothing scrolls sideways, axe-core
 * finds nothing serious or critical, focus is visible, the theme follows the system until the
 * reader picks one. The screenshots in docs/console come from here (`npm run screenshots`).
 */
let browser: TestBrowser;
let page: Page;
let seeded: Seeded;
let shots: string;

before(async () => {
  browser = await launchBrowser();
  page = browser.page;
  page.setDefaultTimeout(30_000);
  shots = await screenshotDir();
});
after(async () => {
  await browser?.close();
});
const rig = useE2E();

const url = (path: string) => `${rig.e.t.manager.url}${path}`;

/** Each view, the screenshot it makes and what shows it has loaded. */
function views(s: Seeded): { name: string; path: string; ready: string }[] {
  return [
    { name: 'runs', path: '/runs', ready: `tr[data-run-id="${s.answered.runId}"]` },
    {
      name: 'run-detail',
      path: `/runs/${s.answered.runId}`,
      ready: '.command-card .reply table',
    },
    { name: 'run-failed', path: `/runs/${s.refused.runId}`, ready: '.command-card .failure' },
    {
      name: 'sessions',
      path: '/sessions',
      ready: `tr[data-session-id="${s.session.sessionId}"]`,
    },
    {
      name: 'session-detail',
      path: `/sessions/${s.session.sessionId}`,
      ready: '.command-card .reply',
    },
    { name: 'queue', path: '/queue', ready: `tr[data-task-id="${s.task.taskId}"]` },
    { name: 'task', path: `/tasks/${s.task.taskId}`, ready: 'table.attempts tbody tr' },
    { name: 'profiles', path: '/profiles', ready: 'tr[data-profile="builtin-a"]' },
    { name: 'not-found', path: '/no-such-page', ready: '.not-found' },
  ];
}

async function show(path: string, ready: string) {
  await page.goto(url(path));
  await page.locator(ready).first().waitFor();
  // Relative times and live durations settle; the event stream says what it is.
  await page
    .locator('.stream-mode')
    .first()
    .waitFor({ state: 'attached', timeout: 2000 })
    .catch(() => undefined);
}

const background = () => page.evaluate<string>('getComputedStyle(document.body).backgroundColor');
/** Relative luminance of an `rgb(r, g, b)` colour, 0 (black) to 1 (white). */
function luminance(rgb: string): number {
  const [r, g, b] = (rgb.match(/\d+/g) ?? []).slice(0, 3).map((v) => Number(v) / 255);
  const lin = (c: number) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4);
  return 0.2126 * lin(r ?? 0) + 0.7152 * lin(g ?? 0) + 0.0722 * lin(b ?? 0);
}

describe('the console on a phone and at night', { concurrency: false }, () => {
  before(async () => {
    seeded = await seed(rig.e);
  });
  after(async () => {
    await seeded?.close();
  });

  for (const { name: widthName, width, height } of WIDTHS)
    for (const scheme of ['light', 'dark'] as const)
      it(`every view at ${width} px (${widthName}), ${scheme}: no sideways scrolling, no serious axe finding`, async () => {
        await page.setViewportSize({ width, height });
        await page.emulateMedia({ colorScheme: scheme });
        const problems: string[] = [];
        for (const view of views(seeded)) {
          await show(view.path, view.ready);
          const dark = luminance(await background()) < 0.2;
          assert.equal(dark, scheme === 'dark', `${view.name}: the page follows ${scheme}`);
          const overflow = await sidewaysOverflow(page);
          if (overflow > 0) problems.push(`${view.name}: ${overflow}px wider than the screen`);
          for (const f of await axeFindings(page))
            problems.push(
              `${view.name}: ${f.impact} ${f.id} (${f.help}) at ${f.targets.join(' | ')}`,
            );
          const suffix = `${widthName === 'phone' ? '-phone' : ''}${scheme === 'dark' ? '-dark' : ''}`;
          if (scheme === 'light' || ['run-detail', 'session-detail', 'queue'].includes(view.name))
            await page.screenshot({
              path: join(shots, `${view.name}${suffix}.png`),
              fullPage: true,
            });
        }
        assert.deepEqual(problems, []);
      });

  it('no view scrolls sideways at any width between a small phone and a laptop', async () => {
    await page.emulateMedia({ colorScheme: 'light' });
    const problems: string[] = [];
    for (const view of views(seeded)) {
      await page.setViewportSize({ width: 1440, height: 900 });
      await show(view.path, view.ready);
      // The same page resized, as a window dragged narrower or a tablet turned.
      for (const width of [320, 360, 480, 600, 700, 761, 768, 820, 900, 1024, 1180, 1280]) {
        await page.setViewportSize({ width, height: 900 });
        const overflow = await sidewaysOverflow(page);
        if (overflow > 0) problems.push(`${view.name} at ${width} px: ${overflow}px too wide`);
      }
    }
    assert.deepEqual(problems, []);
  });

  it('the theme switch wins over the system and is remembered; t switches too', async () => {
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.emulateMedia({ colorScheme: 'light' });
    await show('/runs', `tr[data-run-id="${seeded.answered.runId}"]`);
    const toggle = page.getByRole('button', { name: /^Colour theme/ });
    assert.match(await toggle.innerText(), /System/);
    await toggle.click();
    assert.match(await toggle.innerText(), /Dark/);
    assert.ok(luminance(await background()) < 0.2, 'dark although the system is light');
    await page.reload();
    await page.locator(`tr[data-run-id="${seeded.answered.runId}"]`).waitFor();
    assert.ok(luminance(await background()) < 0.2, 'still dark after a reload');
    await page.locator('main').click({ position: { x: 5, y: 5 } });
    await page.keyboard.press('t');
    assert.match(await toggle.innerText(), /Light/);
    assert.ok(luminance(await background()) > 0.8);
    await page.emulateMedia({ colorScheme: 'dark' });
    assert.ok(luminance(await background()) > 0.8, 'light although the system is dark');
    await page.keyboard.press('t');
    assert.match(await toggle.innerText(), /System/);
    assert.ok(luminance(await background()) < 0.2, 'the system again');
    await page.emulateMedia({ colorScheme: 'light' });
  });

  for (const { name: widthName, width, height } of WIDTHS)
    it(`shows where the keyboard focus is at ${width} px (${widthName})`, async () => {
      await page.setViewportSize({ width, height });
      await show(`/runs/${seeded.answered.runId}`, '.command-card .reply');
      await page.locator('body').click({ position: { x: 1, y: height - 2 } });
      const seen: string[] = [];
      for (let i = 0; i < 12; i++) {
        await page.keyboard.press('Tab');
        const focus = await page.evaluate<{
          what: string;
          outline: string;
          visible: boolean;
        } | null>(`(() => {
          const el = document.activeElement;
          if (!el || el === document.body) return null;
          const style = getComputedStyle(el);
          return {
            what: el.tagName.toLowerCase() + ' ' + (el.textContent || '').trim().slice(0, 30),
            outline: style.outlineStyle + ' ' + style.outlineWidth,
            visible: el.matches(':focus-visible'),
          };
        })()`);
        if (!focus) continue;
        seen.push(focus.what);
        assert.ok(focus.visible, `${focus.what} is focused visibly`);
        assert.match(focus.outline, /^solid [2-9](\.\d+)?px$/, `${focus.what}: ${focus.outline}`);
      }
      assert.ok(seen.length >= 8, seen.join(', '));
    });
});
