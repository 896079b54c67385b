/**
 * `include`, as `ngx_conf_include` does it: relative to the directory of the
 * main file, globs sorted bytewise and allowed to match nothing, each file
 * parsed on its own with the context of the include, errors placed in the
 * included file. Expected output is nginx 1.30's.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { confTest, defineConfCases, failed, HTTP_TEMP_PATHS, makePrefix, referenceConfTest, succeeded, type ConfCase, type ConfTestResult } from '../helpers/conf-test.js';
import { cleanup, JINX } from '../helpers/harness.js';

const http = (body: string): string => `events {}\nhttp {\n${HTTP_TEMP_PATHS}\n${body}}\n`;

const basics: ConfCase[] = [
  {
    name: 'a missing file: open() failed (2: No such file or directory) at the include',
    files: { 'nginx.conf': 'events {}\n\ninclude missing.conf;\n' }, status: 1,
    lines: failed('[emerg] open() "PREFIX/missing.conf" failed (2: No such file or directory) in PREFIX/nginx.conf:3'),
  },
  {
    name: 'a pattern that matches nothing is not an error',
    files: { 'nginx.conf': 'events {}\ninclude nothing/*.conf;\ninclude none*.conf;\n' }, status: 0,
    lines: succeeded(),
  },
  {
    name: 'an error in an included file is placed at its own line',
    files: { 'nginx.conf': 'events {}\ninclude a.conf;\nfoo;\n', 'a.conf': '\n\nbar;\n' }, status: 1,
    lines: failed('[emerg] unknown directive "bar" in PREFIX/a.conf:3'),
  },
  {
    name: 'an error three includes deep is placed in the deepest file',
    files: {
      'nginx.conf': 'events {}\ninclude a.conf;\n',
      'a.conf': '# a\ninclude sub/b.conf;\n',
      'sub/b.conf': '# b\n# b\ninclude sub/c.conf;\n',
      'sub/c.conf': 'worker_processes 1;\nworker_processes 2;\n',
    },
    status: 1,
    lines: failed('[emerg] "worker_processes" directive is duplicate in PREFIX/sub/c.conf:2'),
  },
  {
    name: 'an included file that leaves a block open: unexpected end of file in that file',
    files: { 'nginx.conf': 'events {}\ninclude a.conf;\nfoo;\n', 'a.conf': 'http {\n' }, status: 1,
    lines: failed('[emerg] unexpected end of file, expecting "}" in PREFIX/a.conf:2'),
  },
  {
    name: 'an included file cannot close the includer\'s block: unexpected "}"',
    files: { 'nginx.conf': 'events {}\nhttp {\ninclude a.conf;\n', 'a.conf': '}\n' }, status: 1,
    lines: failed('[emerg] unexpected "}" in PREFIX/a.conf:1'),
  },
  {
    name: 'included directives are checked in the context of the include',
    files: {
      'nginx.conf': http(' server {\n  include a.conf;\n }\n'),
      'a.conf': 'location / {\n  listen 80;\n}\n',
    },
    status: 1,
    lines: failed('[emerg] "listen" directive is not allowed here in PREFIX/a.conf:2'),
  },
  {
    name: 'two arguments: invalid number of arguments in "include" directive',
    files: { 'nginx.conf': 'events {}\ninclude a.conf b.conf;\n' }, status: 1,
    lines: failed('[emerg] invalid number of arguments in "include" directive in PREFIX/nginx.conf:2'),
  },
  {
    name: 'no argument: invalid number of arguments in "include" directive',
    files: { 'nginx.conf': 'events {}\ninclude;\n' }, status: 1,
    lines: failed('[emerg] invalid number of arguments in "include" directive in PREFIX/nginx.conf:2'),
  },
  {
    name: 'brace expansion is not supported: the { ends the word, directive "include" is not terminated by ";"',
    files: { 'nginx.conf': 'events {}\ninclude conf.d/{a,b}.conf;\n' }, status: 1,
    lines: failed('[emerg] directive "include" is not terminated by ";" in PREFIX/nginx.conf:2'),
  },
  {
    name: 'a [.] character class matches',
    files: { 'nginx.conf': 'events {}\ninclude a[.]conf;\n', 'a.conf': 'bar;\n' }, status: 1,
    lines: failed('[emerg] unknown directive "bar" in PREFIX/a.conf:1'),
  },
  {
    name: 'relative paths resolve against the main file\'s directory, not the -p prefix',
    files: {
      'conf/nginx.conf': 'events {}\ninclude x.conf;\n',
      'conf/x.conf': 'in_conf_dir;\n',
      'x.conf': 'in_prefix;\n',
    },
    opts: (prefix) => ({ args: ['-t', '-p', `${prefix}/`, '-c', `${prefix}/conf/nginx.conf`] }),
    status: 1,
    lines: [
      '[emerg] unknown directive "in_conf_dir" in PREFIX/conf/x.conf:1',
      'nginx: configuration file PREFIX/conf/nginx.conf test failed',
    ],
  },
  {
    name: 'a path with ./ is named as written: in PREFIX/./snip/x.conf',
    files: { 'nginx.conf': 'events {}\ninclude ./snip/x.conf;\n', 'snip/x.conf': '\nfoo;\n' }, status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/./snip/x.conf:2'),
  },
  {
    name: 'a pattern with .. is named as written: in PREFIX/sub/../snip/x.conf',
    files: { 'nginx.conf': 'events {}\ninclude sub/../snip/*.conf;\n', 'sub/keep': '', 'snip/x.conf': '\nfoo;\n' }, status: 1,
    lines: failed('[emerg] unknown directive "foo" in PREFIX/sub/../snip/x.conf:2'),
  },
  {
    name: 'a duplicate extension in an included mime.types warns at its line in that file',
    files: {
      'nginx.conf': http(' include mime.types;\n'),
      'mime.types': 'types {\n  text/html html;\n  text/plain html;\n}\n',
    },
    status: 0,
    lines: succeeded('[warn] duplicate extension "html", content type: "text/plain", previous content type: "text/html" in PREFIX/mime.types:3'),
  },
  {
    name: 'a conflicting entry in a file included inside map is placed in that file',
    files: {
      'nginx.conf': http(' map $uri $x {\n  include map.inc;\n }\n'),
      'map.inc': '/a 1;\n/a 2;\n',
    },
    status: 1,
    lines: failed('[emerg] conflicting parameter "/a" in PREFIX/map.inc:2'),
  },
];

const directories: ConfCase[] = [
  {
    name: 'including a directory: [crit] pread() failed (21: Is a directory), without a place',
    files: { 'nginx.conf': 'events {}\ninclude conf.d;\n', 'conf.d/a.conf': '# a\n' }, status: 1,
    lines: failed('[crit] pread() "PREFIX/conf.d" failed (21: Is a directory)'),
  },
  {
    name: 'a glob that matches a subdirectory: [crit] pread() failed for it',
    files: {
      'nginx.conf': 'events {}\ninclude sites-enabled/*;\n',
      'sites-enabled/a-site': '# a\n',
      'sites-enabled/old/b-site': '# b\n',
    },
    status: 1,
    lines: failed('[crit] pread() "PREFIX/sites-enabled/old" failed (21: Is a directory)'),
  },
  {
    name: 'a glob does not match hidden files',
    files: { 'nginx.conf': 'events {}\ninclude conf.d/*;\n', 'conf.d/.hidden': 'foo;\n', 'conf.d/a': '# a\n' }, status: 0,
    lines: succeeded(),
  },
];

defineConfCases('include', basics);
defineConfCases('include of directories and hidden files', directories);

describe('include order and -T', () => {
  after(cleanup);
  /** `-T` of jinx, or of the reference nginx (or its recorded answer). */
  const dumpT = (binary: 'jinx' | 'nginx', prefix: string): ConfTestResult => {
    const opts = { args: ['-T', '-p', `${prefix}/`, '-c', `${prefix}/nginx.conf`] };
    return binary === 'jinx' ? confTest(JINX, prefix, opts) : referenceConfTest(prefix, opts);
  };

  /** The `# configuration file` headers of a -T dump. */
  const dumpedFiles = (binary: 'jinx' | 'nginx', files: Record<string, string>): string[] => {
    const r = dumpT(binary, makePrefix(files));
    assert.equal(r.status, 0, r.lines.join('\n'));
    return r.stdout.split('\n').filter((l) => l.startsWith('# configuration file '));
  };
  const globFiles: Record<string, string> = {
    'nginx.conf': 'events {}\ninclude conf.d/*.conf;\n',
    'conf.d/B.conf': '# B\n', 'conf.d/a.conf': '# a\n', 'conf.d/_x.conf': '# _x\n',
    'conf.d/10-x.conf': '# 10\n', 'conf.d/9-x.conf': '# 9\n', 'conf.d/Z.conf': '# Z\n',
  };
  const bytewise = [
    'nginx.conf', 'conf.d/10-x.conf', 'conf.d/9-x.conf', 'conf.d/B.conf', 'conf.d/Z.conf', 'conf.d/_x.conf', 'conf.d/a.conf',
  ].map((f) => `# configuration file PREFIX/${f}:`);

  it('-T dumps glob matches in bytewise order (digits, upper case, _, lower case)', () => {
    assert.deepEqual(dumpedFiles('jinx', globFiles), bytewise);
  });
  it('-T dumps glob matches in bytewise order (reference nginx agrees)', () => {
    assert.deepEqual(dumpedFiles('nginx', globFiles), bytewise);
  });

  const twice: Record<string, string> = {
    'nginx.conf': 'events {}\ninclude conf.d/*.conf;\ninclude conf.d/a.conf;\n',
    'conf.d/a.conf': 'worker_priority 0;', 'conf.d/b.conf': '\n\n# c\n',
  };
  const dump = (binary: 'jinx' | 'nginx'): string => dumpT(binary, makePrefix(twice)).stdout;
  const expectedDump = '# configuration file PREFIX/nginx.conf:\n' + twice['nginx.conf'] + '\n'
    + '# configuration file PREFIX/conf.d/a.conf:\n' + twice['conf.d/a.conf'] + '\n'
    + '# configuration file PREFIX/conf.d/b.conf:\n' + twice['conf.d/b.conf'] + '\n';

  it('-T dumps each file once, text as written, a file included twice only the first time', () => {
    assert.equal(dump('jinx'), expectedDump);
  });
  it('-T dumps each file once (reference nginx agrees)', () => {
    assert.equal(dump('nginx'), expectedDump);
  });

  // nginx 1.30 itself crashes (SIGSEGV, stack overflow) on a file that includes
  // itself; jinx must fail the test cleanly and point at the include.
  it('a file that includes itself fails the test with an [emerg] at the include, without crashing', () => {
    const prefix = makePrefix({ 'nginx.conf': 'events {}\ninclude self.conf;\n', 'self.conf': '# line 1\ninclude self.conf;\n' });
    const r = confTest(JINX, prefix);
    assert.equal(r.status, 1);
    assert.equal(r.lines.length, 2, r.lines.join('\n'));
    assert.match(r.lines[0]!, /^\[emerg\] .*PREFIX\/self\.conf.* in PREFIX\/self\.conf:2$/);
    assert.equal(r.lines[1], 'nginx: configuration file PREFIX/nginx.conf test failed');
  });
});
