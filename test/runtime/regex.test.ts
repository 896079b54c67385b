/**
 * PCRE2 regexes as nginx matches them, differential against nginx: the
 * location, server_name and map chosen and the captures seen for patterns
 * using PCRE syntax JavaScript lacks or reads differently (`$` before a final
 * newline, `.` and CR, `\s` and NBSP, `\Q…\E`, `\p{N}`, POSIX classes,
 * `(?P<name>…)`, inline options, atomic groups and possessive quantifiers,
 * branch reset groups).
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

const LOCATIONS: readonly string[] = [
  '^/dollar/a$',
  '^/dollar-z/a\\z',
  '^/dollar-Z/a\\Z',
  '^/dot/a.b$',
  '^/space/a\\sb$',
  '^/h/a\\hb$',
  '^/quote/\\Q.+*\\E$',
  '^/digit/(\\p{N}+)$',
  '^/notdigit/(\\P{N}+)$',
  '^/posix/([[:alpha:][:digit:]]+)-([[:^alpha:]]+)$',
  '^/named/(?P<first>[a-z]+)/(?\'second\'[a-z]+)$',
  '^/inline/(?i)abc(?-i)DEF$',
  '^/scoped/(?i:abc)DEF$',
  '(?x) ^/ext / (\\d+) # digits\n $',
  '^/atomic/(?>a|ab)c$',
  '^/possessive/(a++)ab$',
  '^/possessive2/([^/]*+)/(x)\\2$',
  '^/lazy/(a+?)(a*)$',
  '^/braces/a{,2}$',
  '^/literal-brace/a{x}$',
  '^/lookbehind/(?<=/lookbehind/a{1,3})b$',
  '^/backref/(\\w)\\g{-1}\\g1$',
  '^/octal/\\101\\x42\\x{43}\\o{104}$',
  '^/reset/(?|(a)(x)|(b))-(\\d)$',
  '^/reset-backref/(?|x(\\w)|y(\\d))\\1$',
];

describe('PCRE2 regexes (differential)', () => {
  after(cleanup);

  it('chooses the regex location nginx chooses and captures what it captures', async () => {
    const locations = LOCATIONS.map((re, i) => `    location ~ "${re}" { return 200 "${i} [$1] [$2] [$first] [$second]\\n"; }`).join('\n');
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; server_name re.test;\n${locations}\n    location / { return 404 "none\\n"; } }`),
    }, async (s) => {
      const uris = [
        '/dollar/a', '/dollar/a%0A', '/dollar/a%0A%0A', '/dollar-z/a', '/dollar-z/a%0A', '/dollar-Z/a%0A', '/dollar-Z/a%0A%0A',
        '/dot/a%0Db', '/dot/a%0Ab', '/dot/axb', '/space/a%20b', '/space/a%A0b', '/space/a%0Bb', '/h/a%A0b', '/h/a%0Ab',
        '/quote/.+*', '/quote/a+*', '/digit/12%B2', '/digit/1a', '/notdigit/ab', '/notdigit/a1', '/posix/ab12-3_%', '/posix/ab-c',
        '/named/ab/cd', '/inline/ABCDEF', '/inline/abcdef', '/scoped/AbCDEF', '/scoped/abcdef', '/ext/42', '/atomic/abc', '/atomic/ac',
        '/possessive/aaab', '/possessive2/abc/xx', '/lazy/aaa', '/braces/', '/braces/aa', '/braces/aaa', '/literal-brace/a%7Bx%7D',
        '/lookbehind/aab', '/lookbehind/aaaab', '/backref/xxx', '/backref/xxy', '/octal/ABCD',
        '/reset/ax-1', '/reset/b-2', '/reset/bx-3', '/reset-backref/xkk', '/reset-backref/y55', '/reset-backref/y5k',
      ];
      const out: Record<string, Snap> = {};
      for (const u of uris) out[u] = (await s.raw(`GET ${u} HTTP/1.0\r\nHost: re.test\r\n\r\n`))!;
      return out;
    });
    assert.equal(run.nginx.result['/dollar/a%0A']!.body.split(' ')[0], '0');
    assert.equal(run.nginx.result['/possessive/aaab']!.body, 'none\n');
    assertSameAsNginx(run);
  });

  it('selects servers by regex names with (?P<name>…), \\Q…\\E and \\p{N}, and maps with named captures', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`
  map $http_x_key $mapped {
    default none;
    ~^(?P<word>[[:alpha:]]+)\\Q.+\\E$ "word-$word";
    "~(?i)^KEY(?-i)-X$" key;
  }
  server { listen 127.0.0.1:${port}; server_name default.test; return 200 "default $mapped\\n"; }
  server { listen 127.0.0.1:${port}; server_name ~^(?P<name>[a-z]+)\\Q.example.com\\E$; return 200 "quoted $name\\n"; }
  server { listen 127.0.0.1:${port}; server_name "~^(?P<name>www\\p{N}+)\\.example\\.com$"; return 200 "digits $name\\n"; }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const host of ['blah.example.com', 'BLAH.EXAMPLE.COM', 'blahxexample.com', 'www01.example.com', 'WWW01.EXAMPLE.COM', 'wwwx.example.com']) {
        out[host] = await s.get('/', { headers: { Host: host } });
      }
      for (const key of ['abc.+', 'abc.x', 'key-X', 'KEY-X', 'key-x']) out[`key ${key}`] = await s.get('/', { headers: { Host: 'default.test', 'X-Key': key } });
      return out;
    });
    assert.equal(run.nginx.result['BLAH.EXAMPLE.COM']!.body, 'quoted blah\n');
    assertSameAsNginx(run);
  });
});
