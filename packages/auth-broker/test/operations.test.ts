import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { REPO, startTestBroker, upstreamLines, type TestBroker } from './helpers.js';

describe('operation endpoint: allowlisted reads and planned writes', () => {
  let t: TestBroker;
  before(async () => {
    t = await startTestBroker();
  });
  after(() => t.close());
  beforeEach(() => t.fake.resetLog());

  it('lists issues without passing pull requests off as issues', async () => {
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.issue.list',
      params: { state: 'all' },
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.ok, true);
    assert.deepEqual(
      res.body.data.map((i: { number: number }) => i.number),
      [3, 2, 1],
    );
    assert.deepEqual(res.body.page, { limit: 30, returned: 3, truncated: false, pagesFetched: 1 });
    assert.equal(res.body.writesRemote, false);
    assert.deepEqual(upstreamLines(t.fake), [`GET /repos/${REPO}/issues`]);
  });

  it('follows Link pagination until the limit and reports truncation', async () => {
    for (let i = 0; i < 8; i++) t.fake.addIssue(REPO, { title: `Bulk ${i}`, labels: ['bulk'] });
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.issue.list',
      params: { labels: ['bulk'], limit: 5, jsonFields: ['number', 'title'] },
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.data.length, 5);
    assert.deepEqual(Object.keys(res.body.data[0]), ['number', 'title']);
    assert.equal(res.body.page.truncated, true);
    // limit 5 fits one page of 5; more pages exist, so the broker stops and says so.
    assert.equal(res.body.page.pagesFetched, 1);

    const all = await t.cli({
      repo: REPO,
      operation: 'codehost.issue.list',
      params: { state: 'all', limit: 200, jsonFields: ['number'] },
    });
    const numbers = all.body.data.map((i: { number: number }) => i.number);
    assert.equal(numbers.length, 11, 'the 11 issues, none of the 2 pull requests');
    assert.ok(!numbers.includes(4) && !numbers.includes(5));
    assert.equal(all.body.page.truncated, false);
  });

  it('walks several pages when the code host paginates', async () => {
    t.fake.resetLog();
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.pr.list',
      params: { state: 'all', limit: 1 },
    });
    assert.equal(res.body.data.length, 1);
    assert.equal(res.body.page.truncated, true);
    const many = await t.cli({
      repo: REPO,
      operation: 'codehost.issue.list',
      params: { state: 'all', limit: 200 },
    });
    assert.equal(many.status, 200);
    const pages = t.fake.requests.filter((r) => r.path.endsWith('/issues'));
    assert.ok(pages.every((r) => r.query['page'] !== undefined));
  });

  it('reads one issue with the selected fields only', async () => {
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.issue.read',
      params: { number: 1, jsonFields: ['number', 'title', 'labels', 'state'] },
    });
    assert.equal(res.status, 200, res.raw);
    assert.deepEqual(res.body.data, {
      number: 1,
      title: 'Crash on start',
      labels: [{ name: 'bug' }],
      state: 'OPEN',
    });
  });

  it('refuses to read a pull request as an issue', async () => {
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.issue.read',
      params: { number: 4 },
    });
    assert.equal(res.status, 404);
    assert.equal(res.body.failureKind, 'repo-not-found');
    assert.equal(res.body.degradedReason, 'number-is-pull-request');
  });

  it('lists and reads pull requests with branch fields', async () => {
    const list = await t.cli({
      repo: REPO,
      operation: 'codehost.pr.list',
      params: { head: 'refactor' },
    });
    assert.equal(list.status, 200, list.raw);
    assert.deepEqual(
      list.body.data.map((p: any) => [p.number, p.headRefName, p.isDraft]),
      [[5, 'refactor', true]],
    );
    assert.equal(t.fake.requests.at(-1)!.query['head'], 'acme:refactor');
    const read = await t.cli({ repo: REPO, operation: 'codehost.pr.read', params: { number: 4 } });
    assert.equal(read.status, 200, read.raw);
    assert.equal(read.body.data.baseRefName, 'main');
    assert.equal(read.body.data.state, 'OPEN');
    assert.equal(read.body.data.body, 'Closes #1');
  });

  it('reports auth status from the rate-limit query and the repository probe', async () => {
    const res = await t.cli({ repo: 'ACME/Widgets', operation: 'codehost.auth.status' });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.repo, REPO, 'the allowlist spelling is used');
    assert.equal(res.body.data.authenticated, true);
    assert.equal(res.body.data.rateLimit.limit, 5000);
    assert.deepEqual(res.body.data.scopes, ['repo', 'read:org']);
    assert.equal(res.body.data.repository.visibility, 'private');
    assert.deepEqual(upstreamLines(t.fake), ['GET /rate_limit', `GET /repos/${REPO}`]);
  });

  it('plans a PR create as a dry run and never sends it', async () => {
    const body = '## Change\n\nCloses #1';
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.pr.create',
      dryRun: true,
      params: { title: 'Fix crash', base: 'main', head: 'fix/crash', body },
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.writesRemote, false);
    assert.equal(res.body.planned.writesRemote, false);
    assert.equal(res.body.planned.sent, false);
    assert.equal(res.body.planned.method, 'POST');
    assert.equal(res.body.planned.path, `/repos/${REPO}/pulls`);
    assert.equal(res.body.planned.body.length, Buffer.byteLength(body));
    assert.match(res.body.planned.body.sha256, /^[0-9a-f]{64}$/);
    assert.ok(!res.raw.includes('## Change'), 'the Markdown body is not echoed');
    assert.deepEqual(upstreamLines(t.fake), []);
  });

  it('plans a PR comment as a dry run', async () => {
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.pr.comment.create',
      dryRun: true,
      params: { number: 4, body: 'LGTM' },
    });
    assert.equal(res.status, 200, res.raw);
    assert.equal(res.body.planned.path, `/repos/${REPO}/issues/4/comments`);
    assert.deepEqual(upstreamLines(t.fake), []);
  });

  it('answers dry-run-required (409) for a live write and calls nothing', async () => {
    for (const dryRun of [false, undefined]) {
      const res = await t.cli({
        repo: REPO,
        operation: 'codehost.pr.create',
        ...(dryRun === undefined ? {} : { dryRun }),
        params: { title: 'x', base: 'main', head: 'feature' },
      });
      assert.equal(res.status, 409);
      assert.equal(res.body.failureKind, 'dry-run-required');
      assert.equal(res.body.runnerDisposition, 'business-failed');
    }
    assert.deepEqual(upstreamLines(t.fake), []);
  });

  it('rejects unknown jsonFields with the list of allowed names', async () => {
    const res = await t.cli({
      repo: REPO,
      operation: 'codehost.issue.read',
      params: { number: 1, jsonFields: ['number', 'secretField'] },
    });
    assert.equal(res.status, 400);
    assert.equal(res.body.failureKind, 'validation-failed');
    assert.match(res.body.message, /allowed: number, title/);
  });
});
