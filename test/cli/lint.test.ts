/**
 * `jinx lint`: what `-t` checks, plus a note with file:line for every
 * directive jinx accepts but does not act on where its value asks for what
 * jinx does not do (tuning knobs are not reported); text or `--format
 * json`; exit 1 only for an error. The other options: lint-options.test.ts.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup, runJinx } from '../helpers/harness.js';
import { makePrefix, type LintJsonFinding as Finding } from '../helpers/cli.js';
import { relativeToPrefix } from '../../src/cli/lint.js';


const CONF = {
  'nginx.conf': `pcre_jit on;
events {}
http { server_tokens off;
    msie_refresh on;
    proxy_store on;
    ssl_stapling on;
    include conf.d/*.conf;
}
`,
  'conf.d/site.conf': `server {
    listen 127.0.0.1:1;
    sendfile on; tcp_nopush on; open_file_cache max=1000 inactive=20s; postpone_output 0; proxy_force_ranges off;
    location / {
        allow 10.1.2.3/8;
        deny all;
        return 200;
    }
}
`,
};

const BAD = {
  'nginx.conf': 'events {}\nhttp { server_tokens off;\n    sendfile on;\n    server { listen 127.0.0.1:1; bogus_directive on; }\n}\n',
};

function lintJson(args: readonly string[]): { status: number | null; findings: Finding[]; stderr: string } {
  const r = runJinx(['lint', ...args, '--format', 'json']);
  return { status: r.status, findings: JSON.parse(r.stdout) as Finding[], stderr: r.stderr };
}

describe('jinx lint', () => {
  after(cleanup);

  it('text: the low-address-bits warning with its include chain and a no-effect note per directive that differs, exit 0', () => {
    const p = makePrefix(CONF);
    const r = runJinx(['lint', '-p', `${p}/`, '-c', 'nginx.conf']);
    assert.equal(r.status, 0, r.stderr);
    const lines = r.stdout.trimEnd().split('\n');
    assert.ok(lines.includes(
      'conf.d/site.conf:5, included from nginx.conf:7: [warning] low address bits of 10.1.2.3/8 are meaningless (low-address-bits)',
    ), r.stdout);
    for (const [file, line, name] of [['nginx.conf', 4, 'msie_refresh'], ['nginx.conf', 5, 'proxy_store'], ['nginx.conf', 6, 'ssl_stapling']] as const) {
      const prefix = `${file}:${line}: [note] "${name}" has no effect in jinx`;
      assert.ok(lines.some((l) => l.startsWith(prefix) && l.endsWith(' (no-effect)')), `expected a line starting with ${prefix}\n${r.stdout}`);
    }
    // pcre_jit, sendfile, tcp_nopush, open_file_cache, postpone_output: tuning; proxy_force_ranges off: what jinx does
    assert.equal(lines.length, 4, r.stdout);
  });

  it('--format json: an array of {severity, code, message, file, line}, exit 0', () => {
    const p = makePrefix(CONF);
    const { status, findings } = lintJson(['-p', `${p}/`, '-c', 'nginx.conf']);
    assert.equal(status, 0);
    for (const f of findings) assert.deepEqual(Object.keys(f).sort(), ['code', 'file', 'fix', 'includedFrom', 'line', 'message', 'severity']);
    assert.deepEqual(findings.find((f) => f.severity === 'warning'), {
      severity: 'warning', code: 'low-address-bits', message: 'low address bits of 10.1.2.3/8 are meaningless',
      file: `${p}/conf.d/site.conf`, line: 5, includedFrom: [{ file: `${p}/nginx.conf`, line: 7 }], fix: null,
    });
    const notes = findings.filter((f) => f.severity === 'note')
      .map((f) => ({ code: f.code, name: /^"([^"]+)" has no effect in jinx: \S/.exec(f.message)?.[1], file: f.file, line: f.line }))
      .sort((a, b) => `${a.file}:${a.line}`.localeCompare(`${b.file}:${b.line}`));
    assert.deepEqual(notes, [
      { code: 'no-effect', name: 'msie_refresh', file: `${p}/nginx.conf`, line: 4 },
      { code: 'no-effect', name: 'proxy_store', file: `${p}/nginx.conf`, line: 5 },
      { code: 'no-effect', name: 'ssl_stapling', file: `${p}/nginx.conf`, line: 6 },
    ]);
    assert.equal(findings.length, 4);
  });

  it('an error: "FILE:LINE: [error] unknown directive …" and exit 1', () => {
    const p = makePrefix(BAD);
    const r = runJinx(['lint', '-p', `${p}/`, '-c', 'nginx.conf']);
    assert.equal(r.status, 1);
    assert.ok(r.stdout.split('\n').includes('nginx.conf:4: [error] unknown directive "bogus_directive" (unknown-directive)'), r.stdout);
  });

  it('an error in JSON: severity "error" with its code, file and line, exit 1', () => {
    const p = makePrefix(BAD);
    const { status, findings } = lintJson(['-p', `${p}/`, '-c', 'nginx.conf']);
    assert.equal(status, 1);
    assert.deepEqual(findings.filter((f) => f.severity === 'error'), [{
      severity: 'error', code: 'unknown-directive', message: 'unknown directive "bogus_directive"', file: `${p}/nginx.conf`, line: 4,
      includedFrom: [], fix: null,
    }]);
  });

  it('text names the files under the prefix relative to it (json keeps nginx\'s paths); other paths stay whole', () => {
    assert.equal(
      relativeToPrefix('/p/a.conf:1, included from /p/nginx.conf:2: [error] open() "/p/b.conf" failed; /q/p/c.conf, /pp/d, /p/', '/p/'),
      'a.conf:1, included from nginx.conf:2: [error] open() "b.conf" failed; /q/p/c.conf, /pp/d, /p/',
    );
    assert.equal(relativeToPrefix('/etc/nginx/nginx.conf:1', '/'), '/etc/nginx/nginx.conf:1');
  });

  it('a configuration with nothing to report: "FILE: no findings", exit 0', () => {
    const p = makePrefix({ 'nginx.conf': 'events {}\nhttp { server_tokens off; server { listen 127.0.0.1:1; return 204; } }\n' });
    const r = runJinx(['lint', '-p', `${p}/`, '-c', 'nginx.conf']);
    assert.equal(r.status, 0);
    assert.equal(r.stdout, 'nginx.conf: no findings\n');
    const json = lintJson(['-p', `${p}/`, '-c', 'nginx.conf']);
    assert.deepEqual(json.findings, []);
  });

  it('the file may be given as an argument, relative to -p', () => {
    const p = makePrefix(BAD);
    const r = runJinx(['-p', `${p}/`, 'lint', 'nginx.conf']);
    assert.equal(r.status, 1);
    assert.match(r.stdout, /nginx\.conf:4: \[error\] unknown directive "bogus_directive"/);
  });

  it('a missing file: an [error] open() … failed line, exit 1', () => {
    const p = makePrefix({});
    const r = runJinx(['lint', '-p', `${p}/`, '-c', 'missing.conf']);
    assert.equal(r.status, 1);
    assert.match(r.stdout, new RegExp(`\\[error\\] open\\(\\) "missing.conf" failed \\(2: No such file or directory\\)`));
  });

  it('-g directives are checked too', () => {
    const p = makePrefix({ 'nginx.conf': 'events {}\nhttp { server_tokens off; server { listen 127.0.0.1:1; } }\n' });
    const r = runJinx(['lint', '-p', `${p}/`, '-c', 'nginx.conf', '-g', 'bogus x;']);
    assert.equal(r.status, 1);
    assert.match(r.stdout, /\[error\] unknown directive "bogus"/);
  });

  it('an unknown --format: an error naming the choices, exit 1', () => {
    const p = makePrefix({ 'nginx.conf': 'events {}\n' });
    const r = runJinx(['lint', '-p', `${p}/`, '-c', 'nginx.conf', '--format', 'yaml']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /text, json, sarif/);
  });
});
