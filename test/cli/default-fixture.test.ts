/**
 * The bundled default configuration (`fixtures/default/`), which README's
 * "run" command starts: it passes `-t`, and it serves its static page, its
 * `return` location and its proxied location. The served copy has its ports
 * 8080 and 8081 moved to free ones so that the test never collides.
 */
import { strict as assert } from 'node:assert';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, logLines, request, ROOT, runJinx, startServer, JINX } from '../helpers/harness.js';
import { makePrefix, readText, referenceImpl, runImpl } from '../helpers/cli.js';

const FIXTURE = join(ROOT, 'fixtures/default');

/** A copy of the fixture (without what a run left in logs/ and temp/) with its ports replaced; returns the prefix. */
function fixtureCopy(front: number, back: number): string {
  const prefix = makePrefix({});
  const generated = /^(logs|temp)\/(?!\.gitkeep$)/;
  cpSync(FIXTURE, prefix, { recursive: true, filter: (src) => !generated.test(relative(FIXTURE, src)) });
  const conf = readFileSync(join(prefix, 'nginx.conf'), 'utf8');
  assert.match(conf, /listen 127\.0\.0\.1:8080;/);
  assert.match(conf, /listen 127\.0\.0\.1:8081;/);
  writeFileSync(join(prefix, 'nginx.conf'), conf.replaceAll('127.0.0.1:8080', `127.0.0.1:${front}`).replaceAll('127.0.0.1:8081', `127.0.0.1:${back}`));
  return prefix;
}

describe('the bundled default configuration (fixtures/default/)', () => {
  after(cleanup);

  it('passes jinx -t as README runs it (-p fixtures/default/ -c nginx.conf), exit 0', () => {
    const r = runJinx(['-p', 'fixtures/default/', '-c', 'nginx.conf', '-t'], { cwd: ROOT });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /fixtures\/default\/nginx\.conf test is successful\n$/);
  });

  it('has no lint errors or warnings', () => {
    const r = runJinx(['lint', '-p', 'fixtures/default/', '-c', 'nginx.conf', '--format', 'json'], { cwd: ROOT });
    assert.equal(r.status, 0, r.stdout);
    const findings = JSON.parse(r.stdout) as { severity: string }[];
    assert.deepEqual(findings.filter((f) => f.severity !== 'note'), []);
  });

  it('is a configuration the reference nginx accepts too', (t) => {
    const ref = referenceImpl();
    if (!ref) return t.skip('no reference nginx');
    const p = fixtureCopy(8080, 8081);
    const r = runImpl(ref, ['-p', `${p}/`, '-c', 'nginx.conf', '-t']);
    assert.equal(r.status, 0, r.stderr);
  });

  it('serves the static page, the return location and the proxied location; logs each request; exits 0 on SIGQUIT', async () => {
    const [front, back] = [await freePort(), await freePort()];
    const p = fixtureCopy(front, back);
    const jinx = await startServer(JINX, p, join(p, 'nginx.conf'), [front, back]);

    const page = await request(front, '/');
    assert.equal(page.status, 200);
    assert.equal(page.headers['content-type'], 'text/html');
    assert.equal(page.body, readFileSync(join(FIXTURE, 'html/index.html'), 'latin1'));

    const health = await request(front, '/health');
    assert.equal(health.status, 200);
    assert.equal(health.body, 'ok\n');

    const proxied = await request(front, '/api/hello?x=1');
    assert.equal(proxied.status, 200);
    assert.equal(proxied.headers['content-type'], 'text/plain');
    assert.equal(proxied.body, 'hello from the upstream: /hello?x=1\n');

    const missing = await request(front, '/nope');
    assert.equal(missing.status, 404);

    assert.equal(await jinx.stop('SIGQUIT'), 0);
    const access = readText(join(p, 'logs/access.log')).split('\n').filter(Boolean);
    assert.equal(access.length, 5, access.join('\n'));
    assert.ok(access.some((l) => l.includes('"GET /api/hello?x=1 HTTP/1.1" 200')));
    // error_log at warn: the 404 is an [error] line, nothing else
    assert.deepEqual(logLines(readText(join(p, 'logs/error.log'))).map((l) => l.replace(/ \*CONN .*/, '')), ['[error]']);
    assert.equal(jinx.stderr(), '');
  });
});
