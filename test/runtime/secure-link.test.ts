/**
 * secure_link, differential against nginx: `$secure_link` and
 * `$secure_link_expires` for a valid, a wrong, a malformed and an expired
 * link (base64url MD5 of `secure_link_md5`, with and without `=` padding),
 * the old style (`secure_link_secret`, `/PREFIX/HEX-MD5/LINK`), the merge of
 * the three directives across levels, and nginx's refusal to mix
 * `secure_link_secret` with the others at one level.
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { join } from 'node:path';
import { cleanup, runJinx, tempDir, writeFiles } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

const md5 = (text: string): Buffer => createHash('md5').update(text).digest();
const b64url = (b: Buffer): string => b.toString('base64url');

describe('secure_link (differential)', () => {
  after(cleanup);

  it('answers by $secure_link: 1 for a good hash, 0 once expired, empty for a wrong or malformed one; the old style yields the link', async () => {
    const future = 4_000_000_000;
    const past = 1_000_000_000;
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    secure_link_md5 secret$uri$arg_e;
    location /new/ {
      secure_link $arg_h,$arg_e;
      return 200 "link=[$secure_link] expires=[$secure_link_expires]\\n";
    }
    location /plain/ {
      secure_link $arg_h;
      secure_link_md5 secret$uri;
      return 200 "link=[$secure_link]\\n";
    }
    location /p/ {
      secure_link_secret word;
      return 200 "link=[$secure_link]\\n";
      location /p/inner/ { secure_link $arg_h; secure_link_md5 secret; return 200 "inner=[$secure_link]\\n"; }
    }
    location /none/ { return 200 "none=[$secure_link][$secure_link_expires]\\n"; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const get = async (label: string, path: string): Promise<void> => { out[label] = await s.get(path); };
      await get('valid', `/new/a?h=${b64url(md5(`secret/new/a${future}`))}&e=${future}`);
      await get('expired', `/new/a?h=${b64url(md5(`secret/new/a${past}`))}&e=${past}`);
      await get('wrong hash', `/new/a?h=${b64url(md5('other'))}&e=${future}`);
      await get('bad expires', `/new/a?h=${b64url(md5(`secret/new/a${future}`))}&e=12x`);
      await get('zero expires', `/new/a?h=${b64url(md5('secret/new/a0'))}&e=0`);
      await get('plain valid', `/plain/b?h=${b64url(md5('secret/plain/b'))}`);
      await get('plain padded', `/plain/b?h=${md5('secret/plain/b').toString('base64').replace(/\+/g, '-').replace(/\//g, '_')}`);
      await get('plain too long', `/plain/b?h=${b64url(md5('secret/plain/b'))}AAAA`);
      await get('plain bad alphabet', `/plain/b?h=${b64url(md5('secret/plain/b')).slice(0, 21)}+`);
      await get('old style', `/p/${createHash('md5').update('file.txtword').digest('hex')}/file.txt`);
      await get('old style upper-case hex', `/p/${createHash('md5').update('file.txtword').digest('hex').toUpperCase()}/file.txt`);
      await get('old style wrong', `/p/${'0'.repeat(32)}/file.txt`);
      await get('old style no link', `/p/${createHash('md5').update('word').digest('hex')}/`);
      await get('inner location', `/p/inner/x?h=${b64url(md5('secret'))}`);
      await get('none', '/none/');
      return out;
    });
    assert.equal(run.nginx.result['valid']!.body, `link=[1] expires=[${future}]\n`);
    assertSameAsNginx(run);
  });

  it('refuses secure_link_secret beside secure_link or secure_link_md5 at one level with nginx\'s message, at the second directive\'s line (nginx: the end of the http block)', () => {
    const dir = tempDir('jinx-secure-link-');
    writeFiles(dir, { 'nginx.conf': 'events {}\nhttp {\n  server {\n    location / {\n      secure_link $arg_h;\n      secure_link_secret w;\n    }\n  }\n}\n' });
    const result = runJinx(['-t', '-p', `${dir}/`, '-c', join(dir, 'nginx.conf')]);
    assert.equal(result.status, 1);
    assert.match(result.stderr, /\[emerg\] .*"secure_link_secret" cannot be mixed with "secure_link" and "secure_link_md5" in .*nginx\.conf:6\n/);
  });
});
