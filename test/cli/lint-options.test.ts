/**
 * `jinx lint`'s options and exit codes: every error listed (where `-t`
 * stops at the first), directives of modules jinx lacks as notes,
 * `--fail-on`, `--rule`/`--skip`, `# jinx-lint: ignore` comments,
 * `--context`, `--offline` (lint and `-t`), `--explain`, lint and `-t`
 * agreeing on what fails (log directory, pid file), and each finding once
 * over NPM's corpus tree, where one include is read by every host.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { prepareProxyManager } from '../helpers/corpus-trees.js';
import { cleanup, referenceNginx, runJinx, SHARED } from '../helpers/harness.js';
import { makePrefix, type LintJsonFinding as Finding } from '../helpers/cli.js';


function lintJson(p: string, args: readonly string[] = []): { status: number | null; findings: Finding[] } {
  const r = runJinx(['lint', '-p', `${p}/`, '-c', 'nginx.conf', '--format', 'json', ...args]);
  assert.equal(r.stderr, '');
  return { status: r.status, findings: JSON.parse(r.stdout) as Finding[] };
}

const brief = (f: Finding): string => `${f.severity} ${f.code} ${f.line}: ${f.message}`;

/** `jinx -t` on the prefix: its exit status and its `[emerg]` messages (after the pid). */
function testEmergs(p: string): { status: number | null; emergs: string[] } {
  const t = runJinx(['-t', '-p', `${p}/`, '-c', 'nginx.conf']);
  return { status: t.status, emergs: t.stderr.split('\n').filter((l) => l.includes('[emerg]')).map((l) => l.replace(/^.*\[emerg\] \d+#\d+: /, '')) };
}

/** Three mistakes in three places, one of them in a block that is skipped whole. */
const THREE = {
  'nginx.conf': `events {}
http { server_tokens off;
    server {
        listen 127.0.0.1:1;
        proxy_buffering maybe;
        location / {
            return 200 "a" "b" "c";
        }
        bogus on;
        gzip on; gzip off;
    }
}
`,
};

describe('jinx lint options', () => {
  after(cleanup);

  it('every error is listed, in reading order, each with the code of its condition, where -t stops at the first with nginx\'s message', () => {
    const p = makePrefix(THREE);
    const { status, findings } = lintJson(p);
    assert.equal(status, 1);
    assert.deepEqual(findings.map(brief), [
      'error invalid-value 5: invalid value "maybe" in "proxy_buffering" directive, it must be "on" or "off"',
      'error invalid-args 7: invalid number of arguments in "return" directive',
      'error unknown-directive 9: unknown directive "bogus"',
      'error duplicate 10: "gzip" directive is duplicate',
    ]);
    assert.deepEqual(testEmergs(p), {
      status: 1, emergs: [`invalid value "maybe" in "proxy_buffering" directive, it must be "on" or "off" in ${p}/nginx.conf:5`],
    });
  });

  it('after reading: every unknown variable (where first used) and the duplicate location of each server are listed; -t stops at the first', () => {
    const p = makePrefix({
      'nginx.conf': `events {}
http { server_tokens off;
    server {
        listen 127.0.0.1:1;
        location /a { return 200 $foo; }
        location /a { return 200; }
    }
    server {
        listen 127.0.0.1:2;
        location = /b { return 200 $bar; }
        location = /b { return 200; }
    }
}
`,
    });
    const { status, findings } = lintJson(p);
    assert.equal(status, 1);
    assert.deepEqual(findings.map(brief), [
      'error duplicate-location 6: duplicate location "/a"',
      'error duplicate-location 11: duplicate location "/b"',
      'error unknown-variable 5: unknown "foo" variable',
      'error unknown-variable 10: unknown "bar" variable',
    ]);
    assert.deepEqual(testEmergs(p), { status: 1, emergs: [`duplicate location "/a" in ${p}/nginx.conf:6`] });
  });

  it('reading goes on after a syntax error in one include and a missing one: four files, four errors, each with its include chain', () => {
    const p = makePrefix({
      'nginx.conf': 'events {}\nhttp { server_tokens off;\n include c/*.conf;\n include c/missing.conf;\n server { listen 127.0.0.1:1; bogus; }\n}\n',
      'c/a.conf': 'server { listen 127.0.0.1:2; "a"b; }\n',
      'c/b.conf': 'gzip on\n',
    });
    const { status, findings } = lintJson(p);
    assert.equal(status, 1);
    assert.deepEqual(findings.map((f) => [f.code, f.file?.slice(p.length), f.line, f.includedFrom.map((l) => `${l.file.slice(p.length)}:${l.line}`)]), [
      ['syntax', '/c/a.conf', 1, ['/nginx.conf:3']],
      ['syntax', '/c/b.conf', 2, ['/nginx.conf:3']],
      ['include', '/nginx.conf', 4, []],
      ['unknown-directive', '/nginx.conf', 5, []],
    ]);
  });

  it('a directive of a module jinx lacks, or a value jinx refuses, is a note (skipped), a misspelt one an error; --fail-on note fails on the note', () => {
    const p = makePrefix({
      'nginx.conf': 'events {}\nhttp { server_tokens off;\n    perl_modules perl/lib;\n    server { listen 127.0.0.1:1; xslt_stylesheet a.xslt; }\n'
        + '    access_log syslog:server=127.0.0.1:5514;\n    perl_set $perl_answer \'sub { 42 }\';\n    add_header X-Answer $perl_answer;\n}\n',
    });
    const { status, findings } = lintJson(p);
    assert.equal(status, 0);
    assert.deepEqual(findings.map(brief), [
      'note not-implemented 3: "perl_modules" is not implemented by jinx (ngx_http_perl_module)',
      'note not-implemented 4: "xslt_stylesheet" is not implemented by jinx (ngx_http_xslt_module)',
      'note not-implemented 5: syslog is not supported by jinx',
      'note not-implemented 6: "perl_set" is not implemented by jinx (ngx_http_perl_module)',
      'note not-implemented 7: unknown "perl_answer" variable: it may be defined by a directive jinx does not implement',
    ]);
    assert.equal(lintJson(p, ['--fail-on', 'note']).status, 1);
    assert.equal(lintJson(p, ['--fail-on', 'warning']).status, 0);
  });

  it('--fail-on warning exits 1 for a warning; --rule and --skip select warnings and notes, never errors', () => {
    const p = makePrefix({
      'nginx.conf': 'events {}\nhttp { server_tokens off;\n    msie_refresh on;\n    server { listen 127.0.0.1:1; allow 10.1.2.3/8; deny all; }\n}\n',
    });
    assert.deepEqual(lintJson(p).findings.map((f) => f.code), ['low-address-bits', 'no-effect']);
    assert.equal(lintJson(p).status, 0);
    assert.equal(lintJson(p, ['--fail-on', 'warning']).status, 1);
    assert.deepEqual(lintJson(p, ['--skip', 'low-address-bits']).findings.map((f) => f.code), ['no-effect']);
    assert.deepEqual(lintJson(p, ['--rule', 'low-address-bits']).findings.map((f) => f.code), ['low-address-bits']);
    assert.deepEqual(lintJson(p, ['--skip', 'low-address-bits', '--skip', 'no-effect']).findings, []);
    const bad = makePrefix({ 'nginx.conf': 'events {}\nbogus;\nhttp { server_tokens off; msie_refresh on; }\n' });
    const r = lintJson(bad, ['--rule', 'low-address-bits']);
    assert.deepEqual(r.findings.map((f) => f.code), ['unknown-directive']);
    assert.equal(r.status, 1);
  });

  it('# jinx-lint: ignore CODE on the line or the line above silences that code; a bare ignore silences all; errors stay', () => {
    const p = makePrefix({
      'nginx.conf': `events {}
http { server_tokens off;
    msie_refresh on; # jinx-lint: ignore no-effect
    # jinx-lint: ignore low-address-bits
    server { listen 127.0.0.1:1; allow 10.1.2.3/8; deny all; }
    # jinx-lint: ignore low-address-bits
    proxy_store on;
    # jinx-lint: ignore
    ssl_stapling on;
    add_header X "# jinx-lint: ignore no-effect"; auth_delay 1s;
}
# jinx-lint: ignore unknown-directive
bogus;
`,
    });
    const { status, findings } = lintJson(p);
    assert.deepEqual(findings.map(brief), [
      'error unknown-directive 13: unknown directive "bogus"',
      'note no-effect 7: "proxy_store" has no effect in jinx: responses are not stored as files',
      'note no-effect 10: "auth_delay" has no effect in jinx: failed authentication is answered at once',
    ]);
    assert.equal(status, 1);
  });

  it('--context http|server|location lints a snippet on its own; places name the snippet only', () => {
    const p = makePrefix({
      'snippets/loc.conf': 'proxy_set_header Host $host;\nproxy_pass http://127.0.0.1:9;\nmsie_refresh on;\n',
      'snippets/srv.conf': 'listen 127.0.0.1:1;\nlocation / { return 204; }\nbogus;\n',
      'snippets/http.conf': 'server { listen 127.0.0.1:1; }\nmsie_refresh on;\n',
    });
    const run = (context: string, file: string): { status: number | null; text: string } => {
      const r = runJinx(['lint', '-p', `${p}/`, '--context', context, file]);
      return { status: r.status, text: r.stdout };
    };
    assert.deepEqual(run('location', 'snippets/loc.conf'), {
      status: 0, text: `snippets/loc.conf:3: [note] "msie_refresh" has no effect in jinx: redirects are answered with Location (no-effect)\n`,
    });
    assert.deepEqual(run('server', 'snippets/srv.conf'), { status: 1, text: `snippets/srv.conf:3: [error] unknown directive "bogus" (unknown-directive)\n` });
    assert.equal(run('http', 'snippets/http.conf').status, 0);
    // in the wrong context, what nginx says there
    assert.deepEqual(run('http', 'snippets/loc.conf').status, 1);
    assert.match(run('location', 'snippets/srv.conf').text, /srv\.conf:1: \[error\] "listen" directive is not allowed here \(not-allowed\)/);
  });

  it('--offline: no DNS, certificate, account or file checks, for lint and -t alike', () => {
    const files = {
      'nginx.conf': `pid run/nginx.pid;
user jinx-no-such-user;
events {}
http { server_tokens off;
    access_log nologs/access.log;
    server {
        listen 127.0.0.1:1 ssl;
        ssl_certificate certs/missing.pem;
        ssl_certificate_key certs/missing.key;
        location / { proxy_pass http://upstream.invalid; }
    }
}
`,
    };
    const p = makePrefix(files);
    const online = lintJson(p);
    assert.equal(online.status, 1);
    assert.deepEqual(online.findings.map((f) => f.code), process.geteuid?.() === 0 ? ['invalid-value', 'host-not-found'] : ['user-ignored', 'host-not-found']);
    const offline = lintJson(p, ['--offline']);
    assert.deepEqual(offline.findings.filter((f) => f.code !== 'user-ignored'), []);
    assert.equal(offline.status, 0);
    assert.equal(runJinx(['-t', '-p', `${p}/`, '-c', 'nginx.conf']).status, 1);
    const t = runJinx(['-t', '--offline', '-p', `${p}/`, '-c', 'nginx.conf']);
    assert.equal(t.status, 0, t.stderr);
    assert.equal(existsSync(join(p, 'run')), false, 'offline, nothing is created');
  });

  it('lint and -t agree: a missing log directory and a pid file whose directory is missing are errors of both, as nginx says', () => {
    for (const conf of [
      'events {}\nhttp { server_tokens off; access_log nodir/access.log; server { listen 127.0.0.1:1; } }\n',
      'pid nodir/nginx.pid;\nevents {}\nhttp { server_tokens off; server { listen 127.0.0.1:1; } }\n',
    ]) {
      const p = makePrefix({ 'nginx.conf': conf });
      const t = runJinx(['-t', '-p', `${p}/`, '-c', 'nginx.conf']);
      const l = lintJson(p);
      assert.equal(t.status, 1);
      assert.equal(l.status, 1);
      const emerg = /\[emerg\] \d+#\d+: (.*)/.exec(t.stderr)?.[1];
      assert.deepEqual(l.findings.map((f) => `${f.severity}: ${f.message}`), [`error: ${emerg}`]);
      assert.match(emerg!, new RegExp(`^open\\(\\) "${p}/nodir/(access\\.log|nginx\\.pid)" failed \\(2: No such file or directory\\)$`));
      const nginx = referenceNginx();
      if (nginx && conf.startsWith('pid')) {
        const ref = spawnSync(nginx, ['-t', '-p', `${p}/`, '-c', 'nginx.conf'], { encoding: 'utf8', timeout: 30_000 });
        assert.equal(ref.status, t.status);
        assert.equal(/\[emerg\] \d+#\d+: (.*)/.exec(ref.stderr)?.[1], emerg);
      }
    }
  });

  it('--explain prints what a code means; an unknown code exits 1 naming the codes', () => {
    const r = runJinx(['lint', '--explain', 'not-implemented']);
    assert.equal(r.status, 0);
    assert.match(r.stdout, /^not-implemented: A directive of an nginx module jinx does not have\n\n/);
    const bad = runJinx(['lint', '--explain', 'no-such-rule']);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /no lint rule "no-such-rule"; the codes are: .*no-effect/);
  });

  it('NPM\'s corpus tree: no finding repeats, and a note in an include read by every host is listed once with its first include chain', {
    skip: !existsSync(join(SHARED, 'corpus/nginx-proxy-manager')) && 'no corpus',
  }, async () => {
    const tree = await prepareProxyManager();
    const include = join(tree.prefix, 'conf.d/include/proxy.conf');
    appendFileSync(include, 'msie_refresh on;\n');
    const r = runJinx(['lint', '--offline', '-p', `${tree.prefix}/`, '-c', tree.conf, '--format', 'json']);
    rmSync(tree.root, { recursive: true, force: true });
    const findings = JSON.parse(r.stdout) as Finding[];
    const keys = findings.map((f) => `${f.code} ${f.file}:${f.line} ${f.message}`);
    assert.equal(new Set(keys).size, keys.length, keys.join('\n'));
    const notes = findings.filter((f) => f.file === include);
    assert.equal(notes.length, 1, r.stdout);
    assert.equal(notes[0]!.code, 'no-effect');
    assert.ok(notes[0]!.includedFrom.length >= 1, r.stdout);
    assert.equal(r.status, 0, r.stdout);
  });
});
