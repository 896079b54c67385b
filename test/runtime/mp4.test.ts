/**
 * The MP4 module, differential against nginx: `mp4` crops a movie to
 * `?start=` and `?end=` (seconds, milliseconds kept) byte for byte as nginx
 * does — `ftyp`, the new `moov` with the sample tables cut, durations and
 * chunk offsets updated, the `mdat` header and the samples' range of the
 * file — for a `moov` before or after the `mdat`, `stco` or `co64`, version
 * 1 headers, a 64-bit `mdat`, with `mp4_start_key_frame` on or off; sends
 * the file whole otherwise; HEAD, a range of a cropped movie, ETag and
 * Last-Modified; reads through `mp4_buffer_size` and `mp4_max_buffer_size`;
 * a track cut to no sample (nginx's `zero size buf` alerts); and answers
 * what it cannot crop (truncated or malformed files, a start past the end,
 * no sample between start and end, a `moov` beyond `mp4_max_buffer_size`)
 * with 500 and nginx's error line. The files are made by `mp4-files.ts`.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Side, type Snap } from '../helpers/differential.js';
import { atom, mp4File, patched } from '../helpers/mp4-files.js';

/** A response with a body that is not text kept as base64 (MP4 bytes), so that recordings stay small. */
async function get(s: Side, path: string, opts: { method?: string; headers?: Record<string, string> } = {}): Promise<Snap> {
  const snap = await s.get(path, opts);
  return /^[\x09\x0a\x0d\x20-\x7e]*$/.test(snap.body) ? snap : { ...snap, body: `base64:${Buffer.from(snap.body, 'latin1').toString('base64')}` };
}

/** Asks each path and keeps the answers by path. */
async function each(s: Side, paths: readonly string[]): Promise<Record<string, Snap>> {
  const out: Record<string, Snap> = {};
  for (const path of paths) out[path] = await get(s, path);
  return out;
}

const conf = (extra = '') => ({ port, prefix }: { port: number; prefix: string }): string => httpConf(`
  types { video/mp4 mp4; text/html html; }
  server { listen 127.0.0.1:${port}; root ${prefix}/www;
    location / { mp4; ${extra} }
  }`);

/** The times asked of every variant of the file. */
const SPANS = [
  'start=0', 'start=0.5', 'start=0.55', 'start=1', 'start=1.23', 'start=1.2999', 'start=2', 'start=2.05',
  'end=1', 'end=0.35', 'start=0.5&end=1.5', 'start=0.25&end=0.45', 'start=1.25&end=1.3', 'start=0.75&end=5',
  'start=1&end=0.5', 'start=1&end=1', 'start=0.3&end=0', 'start=.5', 'start=1.', 'START=1&x=y',
];

describe('mp4 (differential)', () => {
  after(cleanup);

  it('crops the movie to ?start= and ?end= byte for byte as nginx does, moov before or after the mdat, stco or co64', async () => {
    const files = {
      'www/last.mp4': mp4File(),
      'www/first.mp4': mp4File({ moov: 'first' }),
      'www/co64.mp4': mp4File({ co64: true }),
    };
    const run = await differential({ files, conf: conf() }, (s) => each(s, Object.keys(files).flatMap((f) => SPANS.map((q) => `/${f.slice(4)}?${q}`))));
    assert.equal(run.nginx.result['/last.mp4?start=0.5']!.status, 200);
    assertSameAsNginx(run);
  });

  it('crops version 1 headers, a 64-bit mdat, a file without ftyp and one with an edit list (dropped) as nginx does', async () => {
    const files = {
      'www/v1.mp4': mp4File({ version1: true }),
      'www/mdat64.mp4': mp4File({ mdat64: true }),
      'www/noftyp.mp4': mp4File({ noFtyp: true, moov: 'first' }),
      'www/edts.mp4': mp4File({ editList: true }),
    };
    const spans = ['start=0', 'start=0.75', 'start=1.5&end=2', 'end=0.65'];
    const run = await differential({ files, conf: conf() }, (s) => each(s, Object.keys(files).flatMap((f) => spans.map((q) => `/${f.slice(4)}?${q}`))));
    assertSameAsNginx(run);
  });

  it('starts each track at the key frame before ?start= with mp4_start_key_frame on, an edit list skipping to the time', async () => {
    const files = { 'www/last.mp4': mp4File(), 'www/co64.mp4': mp4File({ co64: true, moov: 'first' }) };
    const spans = ['start=0', 'start=0.3', 'start=0.5', 'start=0.75', 'start=1.25', 'start=1.55', 'start=1.95', 'start=0.75&end=1.25', 'end=1'];
    const run = await differential({ files, conf: conf('mp4_start_key_frame on;') }, (s) => each(s, Object.keys(files).flatMap((f) => spans.map((q) => `/${f.slice(4)}?${q}`))));
    assertSameAsNginx(run);
  });

  it('sends the file whole without a start, or a valid one, with ETag, Last-Modified and ranges as nginx; HEAD and ranges of a cropped movie', async () => {
    const files = { 'www/last.mp4': mp4File(), 'www/first.mp4': mp4File({ moov: 'first' }) };
    const run = await differential({ files, conf: conf() }, async (s) => {
      const out: Record<string, Snap> = {};
      for (const path of ['/first.mp4', '/first.mp4?start=0', '/first.mp4?start=x', '/first.mp4?start=', '/first.mp4?start=1.2.3', '/first.mp4?end=0', '/first.mp4?end=-1', '/first.mp4?start=99999999999999999999', '/last.mp4?start=0&end=abc']) {
        out[path] = await get(s, path);
      }
      out['HEAD cropped'] = await get(s, '/last.mp4?start=1', { method: 'HEAD' });
      out['range of cropped'] = await get(s, '/last.mp4?start=1', { headers: { Range: 'bytes=10-99' } });
      out['suffix range of cropped'] = await get(s, '/last.mp4?start=1', { headers: { Range: 'bytes=-20' } });
      out['two ranges of cropped: whole'] = await get(s, '/last.mp4?start=1', { headers: { Range: 'bytes=0-9,20-29' } });
      out['two ranges of start=0 (moov first): whole'] = await get(s, '/first.mp4?start=0', { headers: { Range: 'bytes=0-9,20-29' } });
      out['two ranges without start'] = await get(s, '/first.mp4', { headers: { Range: 'bytes=0-9,20-29' } });
      out['range past the cropped end'] = await get(s, '/last.mp4?start=1', { headers: { Range: 'bytes=100000-' } });
      const etag = out['HEAD cropped'].headers.etag ?? '';
      out['If-None-Match of cropped'] = await get(s, '/last.mp4?start=1', { headers: { 'If-None-Match': etag } });
      out['If-Range of cropped'] = await get(s, '/last.mp4?start=1', { headers: { 'If-Range': etag, Range: 'bytes=0-3' } });
      return out;
    });
    assert.equal(run.nginx.result['range of cropped']!.status, 206);
    assertSameAsNginx(run);
  });

  it('answers 500 with nginx\'s error line for what it cannot crop', async () => {
    const whole = mp4File();
    // each file, and what is asked of it
    const cases: Record<string, readonly [Buffer | string, string]> = {
      'cut-in-moov': [whole.subarray(0, whole.length - 100), 'start=0.5'],
      'cut-atom-header': [Buffer.concat([mp4File({ noMdat: true }).subarray(0, 32), Buffer.from('00000010', 'hex')]), 'start=0.5'],
      cmov: [mp4File({ moovExtra: [atom('cmov', Buffer.alloc(8))] }), 'start=0.5'],
      'two-mvhd': [mp4File({ moovExtra: [atom('mvhd', Buffer.alloc(100))] }), 'start=0.5'],
      'child-too-large': [mp4File({ moovExtra: [Buffer.from('000000ff66726565', 'hex')] }), 'start=0.5'],
      'small-atom': [mp4File({ afterFtyp: Buffer.from('0000000466726565', 'hex') }), 'start=0.5'],
      'small-atom64': [mp4File({ afterFtyp: Buffer.from('00000001667265650000000000000008', 'hex') }), 'start=0.5'],
      'big-ftyp': [mp4File({ afterFtyp: atom('ftyp', Buffer.alloc(1100)) }), 'start=0.5'],
      'two-ftyp': [mp4File({ afterFtyp: atom('ftyp', Buffer.alloc(16)) }), 'start=0.5'],
      'no-mdat': [mp4File({ noMdat: true }), 'start=0.5'],
      'short-stts': [patched(whole, 'stts', 16, 2), 'start=1.5'],
      'short-stts-end': [patched(whole, 'stts', 16, 2), 'end=1.5'],
      'stts-entries': [patched(whole, 'stts', 12, 1000), 'start=0.5'],
      'no-stts': [patched(whole, 'stts', 4, 0x78747473), 'start=0.5'],
      'no-stsc': [patched(whole, 'stsc', 4, 0x78747363), 'start=0.5'],
      'no-stco': [patched(whole, 'stco', 4, 0x7874636f), 'start=0.5'],
      'no-stsc-entries': [patched(whole, 'stsc', 12, 0), 'start=0.5'],
      'stsc-unordered': [patched(whole, 'stsc', 28, 0), 'start=0.5'],
      'stsc-zero-chunk': [patched(whole, 'stsc', 16, 0), 'start=0.1'],
      'stsc-zero-samples': [patched(whole, 'stsc', 44, 0), 'start=1.1'],
      'stsz-entries': [patched(whole, 'stsz', 16, 5), 'start=0.5'],
      'stsz-entries-end': [patched(whole, 'stsz', 16, 8), 'start=0.2&end=1'],
      'stsz-entries-exact-end': [patched(whole, 'stsz', 16, 10), 'end=1'],
      'stco-entries': [patched(whole, 'stco', 12, 2), 'start=0.7'],
      'stco-entries-end': [patched(whole, 'stco', 12, 5), 'end=2'],
      'stco-entries-exact-end': [patched(whole, 'stco', 12, 4), 'end=1.5'],
      'huge-sample': [patched(whole, 'stsz', 32, 0x7fffffff), 'start=0.5'],
      'far-chunk': [patched(whole, 'stco', 16, 0x7fffffff), 'start=0.05'],
      text: ['not a movie at all\n', 'start=0.5'],
    };
    const files = Object.fromEntries(Object.entries(cases).map(([name, [bytes]]) => [`www/${name}.mp4`, bytes]));
    const run = await differential({ files: { ...files, 'www/last.mp4': whole, 'www/first.mp4': mp4File({ moov: 'first' }) }, conf: conf() }, (s) => each(s, [
      ...Object.entries(cases).map(([name, [, query]]) => `/${name}.mp4?${query}`),
      '/last.mp4?start=2.1', '/last.mp4?start=2.2', '/last.mp4?start=9999', '/last.mp4?start=2.0999&end=3',
      '/first.mp4?start=2.05&end=2.06', '/last.mp4?start=2.05&end=2.06', '/no-mdat.mp4',
    ]));
    assert.equal(run.nginx.result['/cut-in-moov.mp4?start=0.5']!.status, 500);
    assertSameAsNginx(run);
  });

  it('sends a track cut to no sample with empty tables, and nginx\'s alert for each empty buffer it sends', async () => {
    const run = await differential({ files: { 'www/last.mp4': mp4File() }, conf: conf() }, async (s) => ({
      whole: await get(s, '/last.mp4?start=1.25&end=1.3'),
      'a range before the empty tables': await get(s, '/last.mp4?start=1.25&end=1.3', { headers: { Range: 'bytes=0-10' } }),
      'a range over them': await get(s, '/last.mp4?start=1.25&end=1.3', { headers: { Range: 'bytes=5-2000' } }),
      'a suffix range': await get(s, '/last.mp4?start=1.25&end=1.3', { headers: { Range: 'bytes=-5' } }),
      HEAD: await get(s, '/last.mp4?start=1.25&end=1.3', { method: 'HEAD' }),
    }));
    assertSameAsNginx(run);
  });

  it('refuses a sync sample 0 when it seeks key frames', async () => {
    const run = await differential({
      files: { 'www/zero-sync.mp4': patched(mp4File(), 'stss', 16, 0) },
      conf: conf('mp4_start_key_frame on;'),
    }, (s) => each(s, ['/zero-sync.mp4?start=0.5', '/zero-sync.mp4?start=0']));
    assertSameAsNginx(run);
  });

  it('reads the file through mp4_buffer_size, the moov up to mp4_max_buffer_size, as nginx does', async () => {
    const big = mp4File({ moovExtra: [atom('free', Buffer.alloc(3000))] });
    const run = await differential({
      files: { 'www/big.mp4': big, 'www/first.mp4': mp4File({ moov: 'first' }), 'www/last.mp4': mp4File() },
      conf: ({ port, prefix }) => httpConf(`
  types { video/mp4 mp4; }
  server { listen 127.0.0.1:${port}; root ${prefix}/www; mp4_buffer_size 1k; mp4_max_buffer_size 2k;
    location / { mp4; }
    location /larger/ { alias ${prefix}/www/; mp4; mp4_max_buffer_size 8k; }
    location /buffered/ { alias ${prefix}/www/; mp4; mp4_buffer_size 64k; }
    location /tiny/ { alias ${prefix}/www/; mp4; mp4_buffer_size 16; }
    location /none/ { alias ${prefix}/www/; mp4; mp4_buffer_size 0; }
  }`),
    }, (s) => each(s, [
      '/big.mp4?start=1', '/big.mp4', '/larger/big.mp4?start=1', '/buffered/big.mp4?start=1',
      '/first.mp4?start=0.5', '/last.mp4?start=0.5&end=1.5', '/tiny/first.mp4?start=0.5', '/none/first.mp4?start=0.5',
    ]));
    assert.equal(run.nginx.result['/big.mp4?start=1']!.status, 500);
    assertSameAsNginx(run);
  });

  it('leaves a directory, a URI ending in /, a missing file and other methods to nginx\'s answers', async () => {
    const run = await differential({
      files: { 'www/v.mp4': mp4File(), 'www/dir/index.html': 'index\n' },
      conf: conf(),
    }, async (s) => ({
      dir: await get(s, '/dir?start=1'),
      slash: await get(s, '/dir/?start=1'),
      missing: await get(s, '/none.mp4?start=1'),
      post: await get(s, '/v.mp4?start=1', { method: 'POST' }),
      delete: await get(s, '/v.mp4', { method: 'DELETE' }),
    }));
    assertSameAsNginx(run);
  });
});
