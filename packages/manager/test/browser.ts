import { existsSync } from 'node:fs';
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
