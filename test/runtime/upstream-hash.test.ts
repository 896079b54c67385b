/**
 * `hash KEY [consistent]`, `random [two]` and `max_conns`, differential
 * against nginx: which peer each of 10,000 keys goes to (the consistent
 * hash's ring must be nginx's point for point), the rehash past a down
 * peer, the round robin of an empty key, a held request steering `random
 * two` and `max_conns`, and `no live upstreams` once every peer is at its
 * `max_conns`. The peers of the hashed groups have fixed names
 * (`127.42.0.N:8081`, on the loopback network), since the names are what
 * nginx hashes: the recorded answer then holds for any run.
 */
import { strict as assert } from 'node:assert';
import { Agent, request } from 'node:http';
import { after, describe, it } from 'node:test';
import { cleanup, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf } from '../helpers/differential.js';

/** Three back ends, `127.42.0.N:8081`, answering with their letter. */
const NAMED_BACK_ENDS = ['a', 'b', 'c'].map((name, i) => `  server { listen 127.42.0.${i + 1}:8081; location / { return 200 "${name}"; } }`).join('\n');
const A = '127.42.0.1:8081';
const B = '127.42.0.2:8081';
const C = '127.42.0.3:8081';

/**
 * The letter of the peer each key of `keys` goes to through `path?k=KEY`,
 * on four keep-alive connections (a status other than 200 is `!`).
 */
async function peersOf(port: number, path: string, keys: readonly string[]): Promise<string> {
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const out = new Array<string>(keys.length);
  let next = 0;
  const one = (key: string): Promise<string> => new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: `${path}?k=${encodeURIComponent(key)}`, agent }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(res.statusCode === 200 ? body : '!'));
    });
    req.on('error', reject);
    req.end();
  });
  const worker = async (): Promise<void> => {
    while (next < keys.length) {
      const i = next++;
      out[i] = await one(keys[i]!);
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  agent.destroy();
  return out.join('');
}

const pause = (ms: number): Promise<unknown> => new Promise((r) => setTimeout(r, ms));

describe('upstream hash, random and max_conns (differential)', () => {
  after(cleanup);

  it('hash KEY consistent sends each of 10,000 keys to the peer nginx does, by weight, past a down peer', async () => {
    const keys = Array.from({ length: 10_000 }, (_, i) => (i % 3 === 0 ? `user${i}` : i % 3 === 1 ? `/img/${i * 7919}.png` : String(i)));
    const run = await differential({
      conf: ({ port }) => httpConf(`
  upstream ring { hash $arg_k consistent; server ${A}; server ${B}; server ${C}; }
  upstream weighted { hash $arg_k consistent; server ${A} weight=3; server ${B}; server ${C} weight=2; }
  upstream downs { hash $arg_k consistent; server ${A}; server ${B} down; server ${C}; }
  server { listen 127.0.0.1:${port};
    location /ring { proxy_pass http://ring; }
    location /weighted { proxy_pass http://weighted; }
    location /downs { proxy_pass http://downs; }
  }
${NAMED_BACK_ENDS}`),
    }, async (s) => ({
      ring: await peersOf(s.port, '/ring', keys),
      weighted: await peersOf(s.port, '/weighted', keys.slice(0, 2000)),
      downs: await peersOf(s.port, '/downs', keys.slice(0, 2000)),
    }));
    assertSameAsNginx(run);
    const counts = [...'abc'].map((p) => run.jinx.result.ring.split(p).length - 1);
    assert.ok(counts.every((n) => n > 2000), `every peer takes a share of the ring: ${counts.join(' ')}`);
    assert.doesNotMatch(run.jinx.result.downs, /b/);
  });

  it('plain hash KEY rehashes past down peers, and an empty key goes round robin', async () => {
    const keys = Array.from({ length: 3000 }, (_, i) => `k${i}`);
    const run = await differential({
      conf: ({ port }) => httpConf(`
  upstream plain { hash $arg_k; server ${A}; server ${B} weight=2; server ${C}; }
  upstream downs { hash $arg_k; server ${A} down; server ${B}; server ${C} down; server 127.42.0.4:8081 down; }
  upstream empty { hash $arg_k consistent; server ${A}; server ${B}; server ${C}; }
  server { listen 127.0.0.1:${port};
    location /plain { proxy_pass http://plain; }
    location /downs { proxy_pass http://downs; }
    location /empty { proxy_pass http://empty; }
  }
${NAMED_BACK_ENDS}`, { oneWorker: true }),
    }, async (s) => {
      const empty: string[] = [];
      for (let i = 0; i < 6; i++) empty.push((await s.get('/empty?k=')).body);
      return {
        plain: await peersOf(s.port, '/plain', keys),
        downs: await peersOf(s.port, '/downs', keys.slice(0, 500)),
        empty: empty.join(''),
      };
    });
    assertSameAsNginx(run);
    assert.equal(run.jinx.result.empty, 'abcabc');
    assert.match(run.jinx.result.downs, /^b+$/);
  });

  it('random and random two pick live peers; two picks the one with fewer requests; max_conns sends the rest on, then 502', async () => {
    const holds: (() => void)[] = [];
    const slow = await startUpstream((req, res) => {
      if (req.url?.startsWith('/hold')) holds.push(() => res.end('slow'));
      else res.end('slow');
    });
    const run = await differential({
      conf: ({ port }) => httpConf(`
  upstream rnd { random; server ${A}; server ${B} down; server ${C} down; }
  upstream two { random two least_conn; server 127.0.0.1:${slow.port}; server ${A}; }
  upstream limited { server 127.0.0.1:${slow.port} max_conns=1; server ${B}; }
  upstream full { zone full 64k; server 127.0.0.1:${slow.port} max_conns=1; }
  server { listen 127.0.0.1:${port};
    location /rnd { proxy_pass http://rnd; }
    location /two/ { proxy_pass http://two/; }
    location /limited/ { proxy_pass http://limited/; }
    location /full/ { proxy_pass http://full/; }
  }
${NAMED_BACK_ENDS}`, { oneWorker: true }),
    }, async (s) => {
      const rnd: string[] = [];
      for (let i = 0; i < 6; i++) rnd.push((await s.get('/rnd')).body);
      // a request held on the slow peer (drawn again until it lands there): `random two` goes to the other one while it runs
      let heldTwo: Promise<{ body: string }> | undefined;
      for (let i = 0; i < 20 && !heldTwo; i++) {
        const tried = s.get('/two/hold');
        if ((await Promise.race([tried.then(() => 'answered'), pause(200)])) !== 'answered') heldTwo = tried;
      }
      assert.ok(heldTwo, 'a request is held on the slow peer');
      const two: string[] = [];
      for (let i = 0; i < 4; i++) two.push((await s.get('/two/')).body);
      // one request held on each group's slow peer, which takes one at most: the next go on, or are refused
      const heldLimited = s.get('/limited/hold');
      const heldFull = s.get('/full/hold');
      await pause(200);
      const limited: string[] = [];
      for (let i = 0; i < 3; i++) limited.push((await s.get('/limited/')).body);
      const full = await s.get('/full/');
      for (const release of holds.splice(0)) release();
      const held = (await Promise.all([heldTwo, heldLimited, heldFull])).map((r) => r.body);
      const after = (await s.get('/full/')).body;
      return { rnd: rnd.join(' '), two: two.join(' '), limited: limited.join(' '), full: full.status, held: held.join(' '), after };
    });
    assertSameAsNginx(run);
    assert.equal(run.jinx.result.two, 'a a a a');
    assert.equal(run.jinx.result.full, 502);
    assert.ok(run.jinx.errorLog.some((l) => l.includes('no live upstreams while connecting to upstream')));
  });
});
