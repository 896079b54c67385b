/**
 * autoindex, differential against nginx: the HTML listing (links escaped
 * as URI components, names HTML-escaped, cut at 50 characters with `..>`,
 * counted in UTF-8 characters under `charset utf-8`, invalid UTF-8 counted
 * in bytes, directories first, hidden names left out, symlinks followed and
 * broken ones listed as themselves), `autoindex_exact_size off` (K, M, G
 * and their rounding), `autoindex_localtime` (in a time zone of +05:30),
 * the XML, JSON and JSONP listings with their escaping and callback checks,
 * HEAD, the not-modified filter's judgement of a response without date or
 * ETag (304, 412), a listing as an `error_page`, an index file winning over
 * the listing, and the 403 (or 404) when there is no listing.
 */
import { strict as assert } from 'node:assert';
import { lstatSync, lutimesSync, mkdirSync, symlinkSync, truncateSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

/** A fixed time for every entry: 2021-07-04 23:45:06 UTC (05:15 on the 5th at +05:30). */
const MTIME_SEC = 1_625_442_306;

/** Entries (under `html/`) made with the files of the test, their sizes in bytes. */
const SIZED: Readonly<Record<string, number>> = {
  'sizes/s9999': 9999,
  'sizes/s10000': 10_000,
  'sizes/s10751': 10_751,
  'sizes/s10752': 10_752,
  'sizes/s1048575': 1_048_575,
  'sizes/s1572863': 1_572_863,
  'sizes/s1572864': 1_572_864,
  'sizes/s3758096384': 3_758_096_384,
};

const FILES: Readonly<Record<string, string>> = {
  'html/plain.txt': 'hello',
  'html/.hidden': '',
  'html/quo"te': '',
  "html/ap'os": '',
  'html/sp ace': '',
  'html/col:on': '',
  'html/pct%': '',
  'html/q?mark': '',
  'html/tab\tname': '',
  'html/ctl\u0001name': '',
  'html/<b>&amp;': '',
  [`html/long-${'0'.repeat(50)}`]: '',
  [`html/long-${'>'.repeat(50)}`]: '',
  [`html/e${'x'.repeat(48)}`]: '',
  [`html/f${'x'.repeat(49)}`]: '',
  [`html/g${'x'.repeat(50)}`]: '',
  'html/dir <&>/inside': '',
  [`html/d${'x'.repeat(48)}/a`]: '',
  [`html/e${'x'.repeat(49)}-dir/a`]: '',
  'html/sub/a': '',
  'html/indexed/index.html': 'the index\n',
  'html/utf8/ф-short': '',
  [`html/utf8/${'ф'.repeat(45)}`]: '',
  [`html/utf8/<>&-${'ф'.repeat(45)}`]: '',
  [`html/utf8/${'ф'.repeat(3)}-${'>'.repeat(45)}`]: '',
  'html/utf8/dir-ф/a': '',
  'html/empty/.only-hidden': '',
};

/** Symlinks: name → target. */
const LINKS: Readonly<Record<string, string>> = {
  'html/link-file': 'plain.txt',
  'html/link-dir': 'sub',
  'html/link-dangling': 'nowhere',
  'html/loop1': 'loop2',
  'html/loop2': 'loop1',
};

/**
 * Makes what `writeFiles` cannot (sparse files of the sizes, a name that is
 * not UTF-8, symlinks) and dates every entry `MTIME_SEC`; run before each
 * side's requests, it leaves the same tree each time.
 */
function prepare(prefix: string): void {
  const html = join(prefix, 'html');
  mkdirSync(join(html, 'sizes'), { recursive: true });
  for (const [name, size] of Object.entries(SIZED)) {
    writeFileSync(join(prefix, 'html', name), '');
    truncateSync(join(prefix, 'html', name), size);
  }
  writeFileSync(Buffer.from(`${html}/utf8/bad-\xff-name`, 'latin1'), '');
  for (const [name, target] of Object.entries(LINKS)) {
    if (!isLink(join(prefix, name))) symlinkSync(target, join(prefix, name));
  }
  const entries = [
    ...Object.keys(FILES), ...Object.keys(SIZED).map((n) => `html/${n}`), 'html/sizes',
    'html/dir <&>', `html/d${'x'.repeat(48)}`, `html/e${'x'.repeat(49)}-dir`, 'html/sub', 'html/indexed', 'html/utf8/dir-ф', 'html/empty', 'html/utf8', 'html',
  ];
  for (const rel of entries) utimesSync(join(prefix, rel), MTIME_SEC, MTIME_SEC);
  utimesSync(Buffer.from(`${html}/utf8/bad-\xff-name`, 'latin1'), MTIME_SEC, MTIME_SEC);
  for (const name of Object.keys(LINKS)) lutimesSync(join(prefix, name), MTIME_SEC, MTIME_SEC);
  utimesSync(html, MTIME_SEC, MTIME_SEC);
}

/** Whether a path is a symlink already there (a broken one too). */
function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}

describe('autoindex (differential)', () => {
  const tz = process.env.TZ;
  after(async () => {
    if (tz === undefined) delete process.env.TZ;
    else process.env.TZ = tz;
    await cleanup();
  });

  it('lists directories as nginx does: HTML, sizes, local time, XML, JSON, JSONP, HEAD, and 403 without autoindex', async () => {
    // both servers inherit the zone: autoindex_localtime shows +05:30
    process.env.TZ = 'Asia/Kolkata';
    const run = await differential({
      conf: ({ port, prefix }) => httpConf(`  server { listen 127.0.0.1:${port};
    root ${prefix}/html;
    autoindex on;
    location /utf8/ { charset utf-8; }
    location /human/ { alias ${prefix}/html/; autoindex_exact_size off; autoindex_localtime on; }
    location /x/ { alias ${prefix}/html/; autoindex_format xml; }
    location /j/ { alias ${prefix}/html/; autoindex_format json; }
    location /p/ { alias ${prefix}/html/; autoindex_format jsonp; }
    location /off/ { alias ${prefix}/html/; autoindex off; }
    location /ep/ { error_page 404 /sub/; }
  }`),
      files: FILES,
    }, async (s) => {
      prepare(s.prefix);
      const out: Record<string, Snap> = {};
      const get = async (label: string, path: string, method?: string, headers?: Record<string, string>): Promise<void> => {
        out[label] = await s.get(path, { method, headers });
      };
      await get('html', '/');
      await get('html head', '/', 'HEAD');
      await get('html utf-8', '/utf8/');
      await get('html utf8 names without charset', '/human/utf8/');
      await get('html escaped title', '/dir%20%3C&%3E/');
      await get('html empty', '/empty/');
      await get('human sizes and local time', '/human/sizes/');
      await get('exact sizes', '/sizes/');
      await get('index file', '/indexed/');
      await get('xml', '/x/');
      await get('xml utf8', '/x/utf8/');
      await get('json', '/j/');
      await get('json utf8', '/j/utf8/');
      await get('jsonp', '/p/sub/?callback=cb.x_1');
      await get('jsonp callback case-insensitive name', '/p/sub/?a=1&CallBack=Cb2');
      await get('jsonp without =', '/p/sub/?callback&callback=second');
      await get('jsonp empty callback', '/p/sub/?callback=');
      await get('jsonp no callback', '/p/sub/');
      await get('jsonp invalid callback', '/p/sub/?callback=alert(1)');
      await get('jsonp callback of 128', `/p/sub/?callback=${'c'.repeat(128)}`);
      await get('jsonp callback of 129', `/p/sub/?callback=${'c'.repeat(129)}`);
      await get('if-none-match *', '/x/', 'GET', { 'If-None-Match': '*' });
      await get('if-match other', '/j/', 'GET', { 'If-Match': '"x"' });
      await get('if-unmodified-since', '/', 'GET', { 'If-Unmodified-Since': 'Sun, 04 Jul 2021 23:45:06 GMT' });
      await get('if-modified-since', '/sub/', 'GET', { 'If-Modified-Since': 'Sun, 04 Jul 2041 23:45:06 GMT' });
      await get('listing as error page', '/ep/missing');
      await get('off', '/off/');
      await get('post', '/sub/', 'POST');
      await get('missing directory', '/none/');
      await get('file as directory', '/plain.txt/');
      return out;
    });
    assert.match(run.nginx.result['html']!.body, /<a href="dir%20%3C%26%3E\/">dir &lt;&amp;&gt;\/<\/a>/);
    assertSameAsNginx(run);
  });
});
