/**
 * The browser module, differential against nginx: `$modern_browser`,
 * `$ancient_browser` and `$msie` for real and odd `User-Agent` values
 * (none, MSIE, Gecko, Safari and Chrome, Opera old and new, Konqueror,
 * text browsers, Netscape 4, versions past nginx's scale and past 2^64),
 * with and without `modern_browser unlisted` and `ancient_browser
 * netscape4` (which hold only where written), the lists and values
 * inherited by inner locations, and `set $msie`.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { join } from 'node:path';
import { cleanup, runJinx, tempDir, writeFiles } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

const SHOW = 'return 200 "m=[$modern_browser] a=[$ancient_browser] msie=[$msie]\\n";';

const AGENTS: readonly (string | undefined)[] = [
  undefined,
  'x',
  'Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)',
  'Mozilla/4.0 (compatible; MSIE 5.5; Windows 98)',
  'Mozilla/4.0 (compatible; MSIE 18446744073709551617.0; Windows NT 5.1)',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:120.0) Gecko/20100101 Firefox/120.0',
  'Mozilla/5.0 (X11; U; Linux i686; en-US; rv:1.9.0.5) Gecko/2008120121 Firefox/3.0.5',
  'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Safari/605.1.15',
  'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36',
  'Opera/9.80 (X11; Linux x86_64) Presto/2.12.388 Version/12.16',
  'Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1) Opera 8.0',
  'Opera/5000.1',
  'Mozilla/5.0 (compatible; Konqueror/4.5; Linux) KHTML/4.5.5 (like Gecko)',
  'Lynx/2.8.9rel.1 libwww-FM/2.14',
  'Wget/1.21.3',
  'Mozilla/3.01 (X11; I; Linux)',
];

describe('browser module (differential)', () => {
  after(cleanup);

  it('sorts User-Agent values into $modern_browser and $ancient_browser as nginx does, and sets $msie for MSIE', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    modern_browser_value modern;
    location /default/ { ${SHOW} }
    location /listed/ {
      modern_browser msie 6.0;
      modern_browser gecko 1.9.1;
      modern_browser safari 500;
      modern_browser Opera 9.80;
      modern_browser konqueror 3.5.1;
      ancient_browser Links Lynx netscape4;
      ${SHOW}
      location /listed/inner/ { ${SHOW} }
    }
    location /unlisted/ {
      modern_browser msie 7.0;
      modern_browser unlisted;
      ancient_browser Lynx netscape4;
      ancient_browser_value old;
      ${SHOW}
      location /unlisted/inner/ { ${SHOW} }
    }
    location /ancient-only/ { ancient_browser Wget; modern_browser unlisted; ${SHOW} }
    location /set/ { set $msie forced; set $ancient_browser no; ${SHOW} }
  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const path of ['/default/', '/listed/', '/listed/inner/', '/unlisted/', '/unlisted/inner/', '/ancient-only/', '/set/']) {
        for (const ua of AGENTS) {
          out[`${path} ${ua ?? '(no User-Agent)'}`] = await s.get(path, { headers: ua === undefined ? {} : { 'User-Agent': ua } });
        }
      }
      return out;
    });
    const body = (path: string, ua: string | undefined): string | undefined => run.nginx.result[`${path} ${ua ?? '(no User-Agent)'}`]?.body;
    // the fixture still shows what it is named for
    assert.equal(body('/default/', AGENTS[8]), 'm=[] a=[1] msie=[]\n', 'without the directives every browser is ancient');
    assert.equal(body('/listed/', AGENTS[8]), 'm=[modern] a=[] msie=[]\n');
    assert.equal(body('/unlisted/', AGENTS[11]), 'm=[modern] a=[] msie=[]\n', 'Opera past the version nginx gives it when not listed');
    assert.equal(body('/unlisted/', AGENTS[15]), 'm=[] a=[old] msie=[]\n', 'netscape4');
    assert.equal(body('/unlisted/inner/', AGENTS[15]), 'm=[] a=[old] msie=[]\n', 'unlisted not inherited: ancient');
    assert.equal(body('/listed/', AGENTS[2]), 'm=[modern] a=[] msie=[1]\n');
    assertSameAsNginx(run);
  });

  it('refuses a browser name and a version it cannot read with nginx\'s messages, and names what "modern_browser WORD" lacks (nginx fails without a message)', () => {
    const dir = tempDir('jinx-browser-');
    const check = (directive: string): { status: number | null; stderr: string } => {
      writeFiles(dir, { 'nginx.conf': `events {}\nhttp {\n  server {\n    location / {\n      ${directive}\n    }\n  }\n}\n` });
      return runJinx(['-t', '-p', `${dir}/`, '-c', join(dir, 'nginx.conf')]);
    };
    const unknown = check('modern_browser chrome 100;');
    assert.equal(unknown.status, 1);
    assert.match(unknown.stderr, /\[emerg\] .*unknown browser name "chrome" in .*nginx\.conf:5\n/);
    const version = check('modern_browser msie 6.x;');
    assert.equal(version.status, 1);
    assert.match(version.stderr, /\[emerg\] .*invalid browser version "6\.x" in .*nginx\.conf:5\n/);
    const word = check('modern_browser msie;');
    assert.equal(word.status, 1);
    assert.match(word.stderr, /\[emerg\] .*invalid parameter "msie" in "modern_browser" directive, it must be "unlisted" or a browser name and a version in .*nginx\.conf:5\n/);
  });
});
