/**
 * `jinx lint --offline --format text` on the real trees of the shared corpus
 * (Nginx Proxy Manager, Debian's stock /etc/nginx, crossplane's parser
 * fixtures) and on the scenario's tree, compared whole with a fixture that
 * was reviewed line by line (`fixtures/lint/<tree>.txt`; README "jinx
 * lint"): each finding true, said once, placed at its file:line with its
 * include chain, and no note where jinx does what nginx does. The temp root
 * the trees are laid out in reads `<ROOT>` in the fixtures.
 *
 * After a change to a rule, `JINX_WRITE_LINT_FIXTURES=1 node --test
 * dist/test/cli/lint-corpus.test.js` writes the fixtures anew; review the
 * diff line by line before committing it.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup, ROOT, runJinx, SHARED } from '../helpers/harness.js';
import { prepareDebian, prepareProxyManager, prepareScenario, type PreparedTree } from '../helpers/corpus-trees.js';

const WRITE = process.env.JINX_WRITE_LINT_FIXTURES === '1';

/** The output compared with `fixtures/lint/NAME.txt` (or written there with JINX_WRITE_LINT_FIXTURES=1). */
function matchesFixture(name: string, output: string): void {
  const file = join(ROOT, 'fixtures/lint', `${name}.txt`);
  if (WRITE) writeFileSync(file, output);
  assert.equal(output, readFileSync(file, 'utf8'));
}

/** Every line of the output, asserted to be there once. */
function linesOnce(output: string): string[] {
  const lines = output.trimEnd().split('\n');
  const repeated = lines.filter((l, i) => lines.indexOf(l) !== i);
  assert.deepEqual(repeated, [], 'a finding printed twice');
  return lines;
}

/** `jinx lint --offline` on a prepared tree: exit status and the text output with the temp root as `<ROOT>`. */
function lintTree(tree: PreparedTree): { status: number | null; output: string } {
  const r = runJinx(['lint', '--offline', '-p', `${tree.prefix}/`, '-c', tree.conf, '--format', 'text']);
  assert.equal(r.stderr, '');
  return { status: r.status, output: r.stdout.split(tree.root).join('<ROOT>') };
}

describe('jinx lint on the corpus trees: the reviewed output', () => {
  after(cleanup);

  it('Nginx Proxy Manager: the assets location drops HSTS and X-Robots-Tag (with its include chain), each loss once', async () => {
    const { status, output } = lintTree(await prepareProxyManager());
    assert.equal(status, 0, output);
    const lines = linesOnce(output);
    assert.ok(lines.some((l) => l.startsWith('conf.d/include/assets.conf:1, included from <ROOT>/data/nginx/proxy_host/1.conf:39, included from nginx.conf:90: [warning] location ')
      && l.includes('so Strict-Transport-Security (<ROOT>/data/nginx/proxy_host/1.conf:48) and X-Robots-Tag (<ROOT>/data/nginx/proxy_host/1.conf:76), set above, are not sent with its responses. (add-header-inheritance)')), output);
    matchesFixture('npm', output);
  });

  it('Debian: the version in the Server header and TLSv1/TLSv1.1, nothing else', async () => {
    const { status, output } = lintTree(await prepareDebian());
    assert.equal(status, 0, output);
    linesOnce(output);
    matchesFixture('debian', output);
  });

  it('the scenario tree: each loss once, the http block\'s Accept-Encoding as one finding', async () => {
    const { status, output } = lintTree(await prepareScenario());
    assert.equal(status, 0, output);
    linesOnce(output);
    matchesFixture('scenario', output);
  });

  it('crossplane\'s fixtures: every entry file, an error where nginx -t rejects it (SOURCE.md; messy\'s getgrnam("nobody") is the host\'s), no finding twice', () => {
    const configs = join(SHARED, 'corpus/crossplane/configs');
    let output = '';
    for (const fixture of readdirSync(configs).sort()) {
      for (const entry of ['nginx.conf', 'broken-above.conf', 'broken-below.conf']) {
        if (!existsSync(join(configs, fixture, entry))) continue;
        const r = runJinx(['lint', '--offline', '-p', `${join(configs, fixture)}/`, '-c', entry, '--format', 'text']);
        assert.equal(r.stderr, '');
        linesOnce(r.stdout);
        output += `## ${fixture}/${entry}: exit ${r.status}\n${r.stdout.split(configs).join('<CORPUS>')}`;
      }
    }
    matchesFixture('crossplane', output);
  });
});
