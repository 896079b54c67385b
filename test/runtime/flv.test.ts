/**
 * The FLV module, differential against nginx: `flv` serves a file whole,
 * or with `?start=OFFSET` (the argument's name in any case) the FLV header
 * and the file from OFFSET, its length and ETag those of that body, and its
 * ranges; an offset that is not digits or is past the end sends the whole
 * file; HEAD; a directory (redirect, index), a missing file (404 and
 * nginx's error line) and POST (405) as nginx answers them.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Snap } from '../helpers/differential.js';

/** 100 bytes standing for a video. */
const VIDEO = 'flv-body-'.repeat(11) + 'x';

describe('flv (differential)', () => {
  after(cleanup);

  it('sends the FLV header and the file from ?start=, or the whole file, with nginx\'s headers, ranges and errors', async () => {
    const run = await differential({
      files: { 'www/v.flv': VIDEO, 'www/dir/index.html': 'index\n' },
      conf: ({ port, prefix }) => httpConf(`
  types { video/x-flv flv; text/html html; }
  server { listen 127.0.0.1:${port}; root ${prefix}/www; etag off;
    location / { flv; }
    location /tagged/ { alias ${prefix}/www/; flv; etag on; }
  }`),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const get = async (label: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<void> => {
        out[label] = await s.get(path, { headers, method });
      };
      await get('whole', '/v.flv');
      await get('from 10', '/v.flv?start=10');
      await get('START in capitals, after another argument', '/v.flv?x=1&START=40');
      await get('at the end', '/v.flv?start=100');
      await get('not digits', '/v.flv?start=1x');
      await get('HEAD from 10', '/v.flv?start=10', {}, 'HEAD');
      await get('a range of the body from 10', '/v.flv?start=10', { Range: 'bytes=5-20' });
      await get('ETag of the body from 10', '/tagged/v.flv?start=10');
      await get('a directory', '/dir');
      await get('a directory with its slash', '/dir/');
      await get('missing', '/none.flv?start=3');
      await get('POST', '/v.flv', {}, 'POST');
      return out;
    });
    assert.equal(run.nginx.result['from 10']!.body, `FLV\x01\x05\x00\x00\x00\x09\x00\x00\x00\x00${VIDEO.slice(10)}`);
    assertSameAsNginx(run);
  });
});
