import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { LocalLauncher } from '../src/launcher/local.js';
import { capturedLogger, runnerSpec } from './kube-helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-no-runner-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('the local launcher where no runner is installed (the manager image)', () => {
  it('refuses a launch, naming what is missing, and starts nothing', async () => {
    const launcher = new LocalLauncher({
      jobsRoot: join(dir, 'jobs'),
      secretsRoot: join(dir, 'secrets'),
      runnerEntry: null,
      nodePath: process.execPath,
      instanceId: 'test',
      killGraceMs: 1000,
      logger: capturedLogger().logger,
      inherit: [],
    });
    await assert.rejects(
      launcher.launch(runnerSpec()),
      /no runner is installed beside this manager \(package @svc\/runner\); set SVC_RUNNER_ENTRY/,
    );
    await launcher.close();
  });
});
