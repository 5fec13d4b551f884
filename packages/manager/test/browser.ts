import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

/**
 * Debian's Chromium driven through playwright-core: no browser download, a fresh profile per
 * file, every request the page makes recorded so a test can prove none left the machine.
 */
export const CHROMIUM = process.env['SVC_CHROMIUM'] ?? '/usr/bin/chromium';

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--disable-default-apps',
  '--disable-extensions',
  '--disable-crash-reporter',
  '--disable-breakpad',
];

export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  /** Every URL the browser requested, in order. */
  requests: string[];
  close(): Promise<void>;
}

export async function launchBrowser(): Promise<TestBrowser> {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}. The console's browser tests drive Debian's ` +
        `Chromium: install it with 'apt-get install -y chromium' (or point SVC_CHROMIUM at one).`,
    );
  const userDataDir = await mkdtemp(join(tmpdir(), 'svc-chromium-'));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: FLAGS,
    viewport: { width: 1280, height: 860 },
    deviceScaleFactor: 1,
  });
  const requests: string[] = [];
  context.on('request', (request) => requests.push(request.url()));
  const page = context.pages()[0] ?? (await context.newPage());
  return {
    context,
    page,
    requests,
    async close() {
      await context.close().catch(() => undefined);
      await rm(userDataDir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 });
    },
  };
}

/** Requests to anything but this machine (data: and about: URLs never leave the page). */
export function foreignRequests(requests: string[]): string[] {
  return requests.filter((raw) => {
    const url = new URL(raw);
    if (url.protocol === 'data:' || url.protocol === 'about:' || url.protocol === 'blob:')
      return false;
    return !['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
  });
}

/**
 * Where screenshots go: `SVC_CONSOLE_SCREENSHOTS` (the `npm run screenshots` script points it
 * at docs/console) or a temporary directory, so a plain test run changes no tracked file.
 */
export async function screenshotDir(): Promise<string> {
  const wanted = process.env['SVC_CONSOLE_SCREENSHOTS'];
  const dir = wanted ? resolve(wanted) : await mkdtemp(join(tmpdir(), 'svc-console-shots-'));
  await mkdir(dir, { recursive: true });
  return dir;
}

/** The two widths every view is tried at: a desktop and a phone (iPhone 12-15 width). */
export const WIDTHS = [
  { name: 'wide', width: 1440, height: 900 },
  { name: 'phone', width: 390, height: 844 },
] as const;

const AXE_SOURCE = readFileSync(
  createRequire(import.meta.url).resolve('axe-core/axe.min.js'),
  'utf8',
);

export interface AxeFinding {
  id: string;
  impact: string;
  help: string;
  targets: string[];
}

/**
 * axe-core's serious and critical findings on the page as it is now. The engine is evaluated
 * through the DevTools protocol, which the page's Content-Security-Policy does not govern (a
 * script tag would be refused, as it should be).
 */
export async function axeFindings(page: Page): Promise<AxeFinding[]> {
  if (!(await page.evaluate('typeof window.axe !== "undefined"'))) await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate<AxeFinding[]>(`axe.run(document, {
    resultTypes: ['violations'],
    runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] },
  }).then((r) => r.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    targets: v.nodes.slice(0, 5).map((n) => n.target.join(' ')),
  })))`);
  return result.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** How many pixels the page is wider than its viewport (0: no sideways scrolling). */
export function sidewaysOverflow(page: Page): Promise<number> {
  return page.evaluate<number>(
    'document.documentElement.scrollWidth - document.documentElement.clientWidth',
  );
}
