/**
 * `jinx -t` and the reference `nginx -t` agree on real-world configurations:
 * Nginx Proxy Manager's tree, Debian's stock /etc/nginx, the scenario's
 * tree, and each of crossplane's fixtures (valid and deliberately invalid):
 * same exit status, same warnings and errors with the same FILE:LINE.
 */
import { strict as assert } from 'node:assert';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { compareConfigTest, copyTree, type TestOutcome } from '../helpers/config-test.js';
import { cleanup, SHARED } from '../helpers/harness.js';
import { prepareDebian, prepareProxyManager, prepareScenario } from '../helpers/corpus-trees.js';

/** Asserts both sides agree, and returns nginx's outcome for further checks. */
function assertSame(t: { root: string; prefix: string; conf: string }, flags: readonly string[] = []): TestOutcome {
  const { jinx, nginx } = compareConfigTest(t.prefix, t.conf, { flags, hidePrefix: t.root });
  assert.deepEqual(jinx, nginx, `jinx -t and nginx -t differ on ${t.conf}`);
  return nginx;
}

describe('real-world trees pass -t in jinx as in nginx', () => {
  after(cleanup);

  it('accepts the Nginx Proxy Manager tree with nginx\'s output (syntax is ok, test is successful)', async () => {
    const t = await prepareProxyManager();
    const ng = assertSame(t);
    assert.equal(ng.status, 0, `nginx rejected the prepared NPM tree:\n${ng.lines.join('\n')}`);
  });

  it('accepts the Nginx Proxy Manager tree with -q silently', async () => {
    const t = await prepareProxyManager();
    const ng = assertSame(t, ['-q']);
    assert.equal(ng.status, 0);
  });

  it('accepts Debian\'s stock /etc/nginx with nginx\'s output', async () => {
    const t = await prepareDebian();
    const ng = assertSame(t);
    assert.equal(ng.status, 0, `nginx rejected the prepared Debian tree:\n${ng.lines.join('\n')}`);
  });

  it('accepts Debian\'s default site with its SSL lines (snakeoil certificate) enabled', async () => {
    const t = await prepareDebian({ ssl: true });
    const ng = assertSame(t);
    assert.equal(ng.status, 0, `nginx rejected the prepared Debian tree with SSL:\n${ng.lines.join('\n')}`);
  });

  it('reports a bad value in an included NPM host file at that file\'s line (proxy_host/2.conf:50), exit 1', async () => {
    const t = await prepareProxyManager();
    const host = join(t.root, 'data/nginx/proxy_host/2.conf');
    writeFileSync(host, readFileSync(host, 'utf8').replace('proxy_read_timeout 300s;', 'proxy_read_timeout 300q;'));
    const ng = assertSame(t);
    assert.equal(ng.status, 1);
    assert.ok(ng.lines.includes('[emerg] "proxy_read_timeout" directive invalid value in PREFIX/data/nginx/proxy_host/2.conf:50'), ng.lines.join('\n'));
  });

  it('reports an error in Debian\'s sites-enabled/default at its line (sites-enabled/default:51), exit 1', async () => {
    const t = await prepareDebian();
    const site = join(t.prefix, 'sites-enabled/default');
    writeFileSync(site, readFileSync(site, 'utf8').replace('try_files $uri $uri/ =404;', 'try_files $uri;'));
    const ng = assertSame(t);
    assert.equal(ng.status, 1);
    assert.ok(ng.lines.includes('[emerg] invalid number of arguments in "try_files" directive in PREFIX/etc/nginx/sites-enabled/default:51'), ng.lines.join('\n'));
  });

  it('accepts the scenario\'s rendered config tree with nginx\'s output', async () => {
    const t = await prepareScenario();
    const ng = assertSame(t);
    assert.equal(ng.status, 0, `nginx rejected the rendered scenario tree:\n${ng.lines.join('\n')}`);
  });
});

/**
 * crossplane's SOURCE.md table: fixture entry → what nginx -t says
 * ("ok", or the first error), to name the tests and check the fixtures.
 */
function crossplaneTable(): Map<string, { ok: boolean; message: string; hostSpecific: boolean }> {
  const table = new Map<string, { ok: boolean; message: string; hostSpecific: boolean }>();
  const text = readFileSync(join(SHARED, 'corpus/crossplane/SOURCE.md'), 'utf8');
  for (const m of text.matchAll(/^\| ([\w/.-]+) \| (ok|rejected) \| ?(.*?) ?\|$/gm)) {
    const entry = m[1]!.includes('/') ? m[1]! : `${m[1]}/nginx.conf`;
    table.set(entry, { ok: m[2] === 'ok', message: m[3]!.trim(), hostSpecific: m[3]!.includes('host-specific') });
  }
  return table;
}

describe('crossplane fixtures: jinx -t reports what nginx -t reports', () => {
  after(cleanup);
  const base = join(SHARED, 'corpus/crossplane/configs');
  const table = crossplaneTable();
  for (const fixture of readdirSync(base).sort()) {
    const entries = fixture === 'missing-semicolon' ? ['broken-above.conf', 'broken-below.conf'] : ['nginx.conf'];
    for (const entry of entries) {
      const doc = table.get(`${fixture}/${entry}`);
      const title = doc?.ok ? 'syntax is ok, test is successful, exit 0' : `${doc?.message ?? 'rejected'}, exit 1`;
      it(`${fixture}/${entry}: ${title}`, () => {
        assert.ok(doc, `SOURCE.md lists ${fixture}/${entry}`);
        const dir = copyTree(join(base, fixture), 'jinx-crossplane-');
        // Without an access_log, nginx opens its compiled-in default: the
        // oracle (a Debian build) /var/log/nginx/access.log, jinx
        // PREFIX/logs/access.log (nginx's upstream default). The directory
        // must exist for jinx as /var/log/nginx does for the oracle.
        mkdirSync(join(dir, 'logs'), { recursive: true });
        const ng = assertSame({ root: dir, prefix: dir, conf: join(dir, entry) });
        if (!doc.hostSpecific) assert.equal(ng.status, doc.ok ? 0 : 1, `nginx's status for ${fixture}/${entry}`);
      });
    }
  }
});
