/**
 * `-t`, `-T`, `-q`, `-g`, `-e`, `-p`/`-c`: what a user sees on stdout, on
 * stderr and in files, and the exit code; and that `-t` loads nothing of
 * the serving path. Where nginx's output is the
 * expectation, the same command also runs on the reference nginx.
 */
import { strict as assert } from 'node:assert';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup, logLines, runJinx, type RunResult } from '../helpers/harness.js';
import { makePrefix, readText, referenceImpl, runImpl, JINX_IMPL } from '../helpers/cli.js';

const GOOD = {
  'nginx.conf': `daemon off;
pid logs/nginx.pid;
error_log logs/error.log;
events {}
http {
    access_log off;
    include conf.d/*.conf;
}
`,
  'conf.d/b.conf': 'server { listen 127.0.0.1:1; server_name b.test; return 200 "b\\n"; }\n',
  'conf.d/a.conf': 'server {\n    listen 127.0.0.1:1;\n    server_name a.test;\n    include snippets/loc.conf;\n}\n',
  'snippets/loc.conf': 'location = /x { return 204; }\n',
};

const BAD = {
  'nginx.conf': 'daemon off;\nevents {}\nhttp {\n    server { listen 127.0.0.1:1; bogus_directive on; }\n}\n',
};

const WARN = {
  'nginx.conf': 'events {}\nhttp {\n    server {\n        listen 127.0.0.1:1;\n        location / { allow 10.1.2.3/8; }\n    }\n}\n',
};

/** stderr as comparable lines: log lines without time and pid. */
const errLines = (r: RunResult): string[] => logLines(r.stderr);

/** Runs `args` on jinx and on the reference nginx in the same prefix; undefined for nginx when none is installed. */
function both(_prefix: string, args: readonly string[]): { jinx: RunResult; nginx: RunResult | undefined } {
  const ref = referenceImpl();
  return { nginx: ref && runImpl(ref, args), jinx: runImpl(JINX_IMPL, args) };
}

describe('jinx -t', () => {
  after(cleanup);

  it('a valid configuration: "syntax is ok" and "test is successful" on stderr, exit 0', () => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t']);
    assert.equal(r.status, 0);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr,
      `nginx: the configuration file ${p}/nginx.conf syntax is ok\n` +
      `nginx: configuration file ${p}/nginx.conf test is successful\n`);
  });

  it('an unknown directive: the [emerg] line with file:line, then "test failed", exit 1', () => {
    const p = makePrefix(BAD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t']);
    assert.equal(r.status, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[emerg\] \d+#\d+: /);
    assert.deepEqual(errLines(r), [
      `[emerg] unknown directive "bogus_directive" in ${p}/nginx.conf:4`,
      `nginx: configuration file ${p}/nginx.conf test failed`,
    ]);
  });

  it('valid, invalid and warning configurations print what the reference nginx prints', (t) => {
    if (!referenceImpl()) return t.skip('no reference nginx');
    for (const files of [GOOD, BAD, WARN]) {
      const p = makePrefix(files);
      const { jinx, nginx } = both(p, ['-p', `${p}/`, '-c', 'nginx.conf', '-t']);
      assert.equal(jinx.status, nginx!.status, files['nginx.conf']);
      assert.deepEqual(errLines(jinx), errLines(nginx!), files['nginx.conf']);
      assert.equal(jinx.stdout, nginx!.stdout);
    }
  });

  it('a configuration whose error_log directory does not exist fails the test, as in nginx', (t) => {
    const p = makePrefix({
      'nginx.conf': 'error_log nodir/error.log;\nevents {}\nhttp { access_log off; server { listen 127.0.0.1:1; } }\n',
    });
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t']);
    assert.deepEqual(errLines(r), [
      `nginx: the configuration file ${p}/nginx.conf syntax is ok`,
      `[emerg] open() "${p}/nodir/error.log" failed (2: No such file or directory)`,
      `nginx: configuration file ${p}/nginx.conf test failed`,
    ]);
    assert.equal(r.status, 1);
    const ref = referenceImpl();
    if (!ref) return t.skip('no reference nginx to compare with');
    const nginx = runImpl(ref, ['-p', `${p}/`, '-c', 'nginx.conf', '-t']);
    assert.deepEqual(errLines(r), errLines(nginx));
  });

  it('-q: a valid configuration prints nothing, exit 0', () => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t', '-q']);
    assert.equal(r.status, 0);
    assert.equal(r.stdout, '');
    assert.equal(r.stderr, '');
  });

  it('-q: an invalid configuration still prints the [emerg] line and "test failed", exit 1', () => {
    const p = makePrefix(BAD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t', '-q']);
    assert.equal(r.status, 1);
    assert.deepEqual(errLines(r), [
      `[emerg] unknown directive "bogus_directive" in ${p}/nginx.conf:4`,
      `nginx: configuration file ${p}/nginx.conf test failed`,
    ]);
  });

  it('-q: a warning is still printed (nginx only hides the "syntax is ok" lines)', (t) => {
    const p = makePrefix(WARN);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t', '-q']);
    assert.equal(r.status, 0);
    assert.deepEqual(errLines(r), [`[warn] low address bits of 10.1.2.3/8 are meaningless in ${p}/nginx.conf:5`]);
    const ref = referenceImpl();
    if (!ref) return t.skip('no reference nginx to compare with');
    assert.deepEqual(errLines(r), errLines(runImpl(ref, ['-p', `${p}/`, '-c', 'nginx.conf', '-t', '-q'])));
  });

  it('requires none of the serving packages (pino, sonic-boom, undici) and not node:http: only node\'s own modules', () => {
    const p = makePrefix(GOOD);
    const hook = join(p, 'load-hook.cjs');
    const log = join(p, 'loads.txt');
    // every require() goes through it: the script bin/jinx starts (launch.cjs), then the bundle's requires of
    // node's modules and of the packages it leaves out, pino and sonic-boom
    writeFileSync(hook, `const Module = require('node:module');
const { appendFileSync } = require('node:fs');
const load = Module._load;
Module._load = function (request, ...rest) { appendFileSync(${JSON.stringify(log)}, request + '\\n'); return load.call(this, request, ...rest); };
`);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t', '-q'], { env: { NODE_OPTIONS: `--require ${hook}` } });
    assert.equal(r.status, 0, r.stderr);
    const loaded = new Set(readFileSync(log, 'utf8').split('\n').filter(Boolean));
    const launcher = [...loaded][0];
    assert.match(launcher ?? '', /\/dist\/src\/cli\/launch\.cjs$/);
    assert.deepEqual([...loaded].slice(1).filter((m) => !m.startsWith('node:') || m === 'node:http'), []);
  });

  it('combined flags -tq act as -t -q', () => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-tq']);
    assert.equal(r.status, 0);
    assert.equal(r.stderr, '');
  });
});

describe('jinx -T', () => {
  after(cleanup);

  it('dumps every file, includes too, each after "# configuration file PATH:", on stdout, exit 0', () => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-T']);
    assert.equal(r.status, 0);
    assert.equal(r.stdout,
      `# configuration file ${p}/nginx.conf:\n${GOOD['nginx.conf']}\n` +
      `# configuration file ${p}/conf.d/a.conf:\n${GOOD['conf.d/a.conf']}\n` +
      `# configuration file ${p}/snippets/loc.conf:\n${GOOD['snippets/loc.conf']}\n` +
      `# configuration file ${p}/conf.d/b.conf:\n${GOOD['conf.d/b.conf']}\n`);
    assert.equal(r.stderr,
      `nginx: the configuration file ${p}/nginx.conf syntax is ok\n` +
      `nginx: configuration file ${p}/nginx.conf test is successful\n`);
  });

  it('the dump is byte for byte the reference nginx\'s', (t) => {
    const ref = referenceImpl();
    if (!ref) return t.skip('no reference nginx');
    const p = makePrefix(GOOD);
    const { jinx, nginx } = both(p, ['-p', `${p}/`, '-c', 'nginx.conf', '-T']);
    assert.equal(jinx.stdout, nginx!.stdout);
    assert.equal(jinx.stderr, nginx!.stderr);
    assert.equal(jinx.status, nginx!.status);
  });

  it('-T -q: the dump on stdout and nothing on stderr', () => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-T', '-q']);
    assert.equal(r.status, 0);
    assert.equal(r.stderr, '');
    assert.match(r.stdout, /^# configuration file .*\/nginx\.conf:\ndaemon off;\n/);
  });

  it('an invalid configuration: nothing on stdout, "test failed", exit 1', () => {
    const p = makePrefix(BAD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-T']);
    assert.equal(r.status, 1);
    assert.equal(r.stdout, '');
    assert.match(r.stderr, /test failed\n$/);
  });

  it('-T into a pipe closed early (jinx -T | head -1) prints no stack trace', async () => {
    const big = Array.from({ length: 20000 }, (_, i) => `# comment line ${i} padding padding padding padding\n`).join('');
    const p = makePrefix({ ...GOOD, 'conf.d/big.conf': big });
    const child = spawn(JINX_IMPL.binary, ['-p', `${p}/`, '-c', 'nginx.conf', '-T'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => { err += d.toString(); });
    child.stdout.once('data', () => child.stdout.destroy());
    await new Promise((res) => child.once('close', res));
    assert.doesNotMatch(err, /EPIPE|Error:|\n\s+at /, `stderr:\n${err}`);
  });
});

describe('jinx -g', () => {
  after(cleanup);
  const NO_DAEMON = {
    'nginx.conf': 'error_log logs/error.log;\nevents {}\nhttp { access_log off; server { listen 127.0.0.1:1; } }\n',
  };

  it('directives given with -g are accepted before the file\'s, exit 0', () => {
    const p = makePrefix(NO_DAEMON);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-g', 'daemon off; pid logs/other.pid;', '-t']);
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, /test is successful\n$/);
  });

  it('a -g directive the file repeats: "is duplicate in FILE:LINE", exit 1', () => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-g', 'daemon off;', '-t']);
    assert.equal(r.status, 1);
    assert.deepEqual(errLines(r), [
      `[emerg] "daemon" directive is duplicate in ${p}/nginx.conf:1`,
      `nginx: configuration file ${p}/nginx.conf test failed`,
    ]);
  });

  it('an unknown -g directive: "unknown directive "bogus" in command line", exit 1', () => {
    const p = makePrefix(NO_DAEMON);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-g', 'daemon off; bogus x;', '-t']);
    assert.equal(r.status, 1);
    assert.deepEqual(errLines(r), [
      '[emerg] unknown directive "bogus" in command line',
      `nginx: configuration file ${p}/nginx.conf test failed`,
    ]);
  });

  it('-g without the final ";": "unexpected end of parameter, expecting ";" in command line", exit 1', () => {
    const p = makePrefix(NO_DAEMON);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-g', 'daemon off', '-t']);
    assert.equal(r.status, 1);
    assert.deepEqual(errLines(r), [
      '[emerg] unexpected end of parameter, expecting ";" in command line',
      `nginx: configuration file ${p}/nginx.conf test failed`,
    ]);
  });

  it('-g errors read as the reference nginx\'s', (t) => {
    if (!referenceImpl()) return t.skip('no reference nginx');
    const p = makePrefix(NO_DAEMON);
    for (const g of ['daemon off; bogus x;', 'daemon off', 'events {}', 'daemon off; daemon on;', 'worker_processes x;']) {
      const { jinx, nginx } = both(p, ['-p', `${p}/`, '-c', 'nginx.conf', '-g', g, '-t']);
      assert.deepEqual(errLines(jinx), errLines(nginx!), `-g "${g}"`);
      assert.equal(jinx.status, nginx!.status, `-g "${g}"`);
    }
  });
});

describe('jinx -e', () => {
  after(cleanup);

  it('-e FILE: the start-up [emerg] line goes into FILE (relative to the prefix), stderr gets "nginx: [emerg] …"', () => {
    const p = makePrefix(BAD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-e', 'logs/startup.log', '-t']);
    assert.equal(r.status, 1);
    assert.equal(r.stderr,
      `nginx: [emerg] unknown directive "bogus_directive" in ${p}/nginx.conf:4\n` +
      `nginx: configuration file ${p}/nginx.conf test failed\n`);
    assert.deepEqual(logLines(readText(join(p, 'logs/startup.log'))), [
      `[emerg] unknown directive "bogus_directive" in ${p}/nginx.conf:4`,
    ]);
  });

  it('-e stderr: messages stay on stderr as full log lines', () => {
    const p = makePrefix(BAD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-e', 'stderr', '-t']);
    assert.equal(r.status, 1);
    assert.match(r.stderr, /^\d{4}\/\d\d\/\d\d \d\d:\d\d:\d\d \[emerg\] \d+#\d+: unknown directive "bogus_directive"/);
    assert.equal(existsSync(join(p, 'stderr')), false);
  });

  it('-e FILE and -t on a valid configuration: the file is created, as nginx opens it', (t) => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-e', 'logs/startup.log', '-t']);
    assert.equal(r.status, 0);
    assert.equal(existsSync(join(p, 'logs/startup.log')), true, 'logs/startup.log exists');
    const ref = referenceImpl();
    if (!ref) return t.skip('no reference nginx to compare with');
    const q = makePrefix(GOOD);
    runImpl(ref, ['-p', `${q}/`, '-c', 'nginx.conf', '-e', 'logs/startup.log', '-t']);
    assert.equal(existsSync(join(q, 'logs/startup.log')), true, 'nginx created logs/startup.log');
  });
});

describe('jinx -p and -c', () => {
  after(cleanup);

  it('a relative -c is read from the -p prefix, whatever the working directory', () => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', `${p}/`, '-c', 'nginx.conf', '-t'], { cwd: '/' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`the configuration file ${p}/nginx.conf syntax is ok`));
  });

  it('-p without the trailing slash is the same prefix', () => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', p, '-c', 'nginx.conf', '-t'], { cwd: '/' });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stderr, new RegExp(`the configuration file ${p}/nginx.conf syntax is ok`));
  });

  it('-c conf/nginx.conf: includes resolve against the file\'s directory (PREFIX/conf/), as in nginx', (t) => {
    const files = {
      'conf/nginx.conf': 'error_log logs/error.log;\nevents {}\nhttp { include conf.d/*.conf; }\n',
      'conf/conf.d/x.conf': 'server { listen 127.0.0.1:1; server_name in-conf-dir; }\n',
      'conf.d/x.conf': 'server { listen 127.0.0.1:1; server_name in-prefix; }\n',
    };
    const p = makePrefix(files);
    const r = runJinx(['-p', `${p}/`, '-c', 'conf/nginx.conf', '-T'], { cwd: '/' });
    assert.equal(r.status, 0, r.stderr);
    assert.deepEqual(r.stdout.split('\n').filter((l) => l.startsWith('# configuration file')), [
      `# configuration file ${p}/conf/nginx.conf:`,
      `# configuration file ${p}/conf/conf.d/x.conf:`,
    ]);
    const ref = referenceImpl();
    if (!ref) return t.skip('no reference nginx to compare with');
    assert.equal(r.stdout, runImpl(ref, ['-p', `${p}/`, '-c', 'conf/nginx.conf', '-T']).stdout);
  });

  it('a missing -c file: open() failed (2: No such file or directory) with the path under the prefix, exit 1', () => {
    const p = makePrefix({});
    const r = runJinx(['-p', `${p}/`, '-c', 'missing.conf', '-t']);
    assert.equal(r.status, 1);
    assert.deepEqual(errLines(r), [
      `[emerg] open() "${p}/missing.conf" failed (2: No such file or directory)`,
      `nginx: configuration file ${p}/missing.conf test failed`,
    ]);
  });

  it('the file is named as nginx names it: the prefix followed by -c as written (conf.d/../nginx.conf)', (t) => {
    const p = makePrefix(GOOD);
    const r = runJinx(['-p', `${p}/`, '-c', 'conf.d/../nginx.conf', '-t']);
    assert.equal(r.status, 0);
    assert.equal(r.stderr,
      `nginx: the configuration file ${p}/conf.d/../nginx.conf syntax is ok\n` +
      `nginx: configuration file ${p}/conf.d/../nginx.conf test is successful\n`);
    const ref = referenceImpl();
    if (!ref) return t.skip('no reference nginx to compare with');
    assert.equal(r.stderr, runImpl(ref, ['-p', `${p}/`, '-c', 'conf.d/../nginx.conf', '-t']).stderr);
  });
});

describe('jinx -h and -?', () => {
  it('-h and -? print the usage with every flag on stderr, exit 0, as nginx does', () => {
    for (const flag of ['-h', '-?']) {
      const r = runJinx([flag]);
      assert.equal(r.status, 0, `${flag}: ${r.stderr}`);
      assert.equal(r.stdout, '', flag);
      for (const f of ['-v', '-V', '-t', '-T', '-q', '-s', '-p', '-e', '-c', '-g']) {
        assert.match(r.stderr, new RegExp(`^\\s*${f.replace('?', '\\?')}\\b`, 'm'), `${flag} lists ${f}`);
      }
    }
  });
});

describe('jinx with a bad command line', () => {
  it('prints nginx\'s messages for an unknown option and a missing option value, exit 1', (t) => {
    const cases: [string[], string][] = [
      [['-x'], 'nginx: invalid option: "x"\n'],
      [['-s'], 'nginx: option "-s" requires parameter\n'],
      [['-c'], 'nginx: option "-c" requires file name\n'],
      [['-p'], 'nginx: option "-p" requires directory name\n'],
      [['-g'], 'nginx: option "-g" requires parameter\n'],
      [['-e'], 'nginx: option "-e" requires file name\n'],
      [['-s', 'bogus'], 'nginx: invalid option: "-s bogus"\n'],
    ];
    const ref = referenceImpl();
    for (const [args, expected] of cases) {
      const r = runJinx(args);
      assert.equal(r.status, 1, args.join(' '));
      if (ref) assert.equal(runImpl(ref, args).stderr, expected, `reference nginx: ${args.join(' ')}`);
      assert.equal(r.stderr, expected, args.join(' '));
    }
    if (!ref) t.diagnostic('no reference nginx: compared with the expected text only');
  });
});
