/**
 * `early_hints` (nginx 1.29), differential against nginx: an upstream's
 * `103 Early Hints` passed on to HTTP/1.1 and HTTP/2 clients when one of the
 * location's values is neither empty nor "0", its hidden headers left out,
 * nothing for HTTP/1.0 or for a 103 left without headers, and the `[info]`
 * for 103s past `proxy_buffer_size` together.
 */
import { strict as assert } from 'node:assert';
import { connect as http2Connect } from 'node:http2';
import type { Socket } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange } from '../helpers/differential.js';
import { scriptedUpstream } from '../helpers/upstreams.js';

/** A 103 head with these header lines. */
const hints = (...lines: string[]): string => `HTTP/1.1 103 Early Hints\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`;
const FINAL = 'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 3\r\nLink: </s.css>; rel=preload\r\nConnection: close\r\n\r\nok\n';

/** What the upstream answers, by path. */
const ANSWERS: Record<string, string> = {
  '/hints': hints('Link: </s.css>; rel=preload', 'X-Other: o', 'X-Hidden: h', 'Server: upstream') + hints('Link: </t.js>; rel=preload') + FINAL,
  // three heads of 1,837 bytes: the third goes past proxy_buffer_size (4k) together with the first two
  '/big': hints(`X-Big: ${'a'.repeat(1800)}`) + hints(`X-Big: ${'b'.repeat(1800)}`) + hints(`X-Big: ${'c'.repeat(1800)}`) + FINAL,
  '/empty': hints('Server: upstream', 'Date: x') + FINAL,
};

/** A raw HTTP/1.x exchange with the Date and Server values of the final response blanked. */
async function rawHints(port: number, path: string, version = '1.1'): Promise<string> {
  const text = await rawExchange(port, `GET ${path} HTTP/${version}\r\nHost: eh.test\r\nConnection: close\r\n\r\n`);
  return text.replace(/^(Date|Server): .*$/gm, '$1: X');
}

/** The header blocks of an HTTP/2 response in order (the 103s, then the final one), without Date and Server. */
function http2Heads(port: number, path: string): Promise<Record<string, unknown>[]> {
  const session = http2Connect(`http://127.0.0.1:${port}`);
  return new Promise<Record<string, unknown>[]>((resolve, reject) => {
    const heads: Record<string, unknown>[] = [];
    const keep = (h: Record<string, unknown>): Record<string, unknown> => Object.fromEntries(Object.entries(h).filter(([k]) => k !== 'server' && k !== 'date'));
    const req = session.request({ ':path': path, ':authority': 'eh.test' });
    req.on('headers', (h) => heads.push(keep(h)));
    req.on('response', (h) => heads.push(keep(h)));
    req.on('data', () => undefined);
    req.on('end', () => resolve(heads));
    req.on('error', reject);
    req.end();
  }).finally(() => session.close());
}

describe('early_hints (differential)', () => {
  after(cleanup);

  it('passes an upstream\'s 103 Early Hints to HTTP/1.1 and HTTP/2 clients when early_hints says so, without hidden headers, as nginx', async () => {
    const up = await scriptedUpstream((line: string, sock: Socket) => {
      sock.end(ANSWERS[line.split(' ')[1]!.replace(/\?.*/, '')] ?? 'HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port}; http2 on; server_name eh.test;
    location / { early_hints $arg_eh; proxy_hide_header X-Hidden; proxy_pass http://127.0.0.1:${up.port}; }
    location /never/ { proxy_pass http://127.0.0.1:${up.port}/; }
  }`),
    }, async (s) => ({
      passed: await rawHints(s.port, '/hints?eh=1'),
      zero: await rawHints(s.port, '/hints?eh=0'),
      unset: await rawHints(s.port, '/hints'),
      never: await rawHints(s.port, '/never/hints'),
      http10: await rawHints(s.port, '/hints?eh=1', '1.0'),
      big: await rawHints(s.port, '/big?eh=1'),
      empty: await rawHints(s.port, '/empty?eh=1'),
      http2: await http2Heads(s.port, '/hints?eh=1'),
      http2Zero: await http2Heads(s.port, '/hints?eh=0'),
    }));
    assert.match(run.jinx.result.passed, /^HTTP\/1\.1 103 Early Hints\r\nLink: <\/s\.css>; rel=preload\r\nX-Other: o\r\n\r\nHTTP\/1\.1 103 /);
    assert.match(run.jinx.result.zero, /^HTTP\/1\.1 200 OK\r\n/);
    assert.deepEqual(run.jinx.result.http2.map((h) => h[':status']), [103, 103, 200]);
    assert.equal(run.jinx.errorLog.filter((l) => l.includes('upstream sent too big early hints')).length, 1);
    assertSameAsNginx(run);
  });
});
