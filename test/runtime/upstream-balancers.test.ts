/**
 * `ip_hash` and `least_conn` upstream blocks, differential against nginx:
 * which peer each request goes to, with weights, `down`, `backup`, a peer
 * that refuses connections (`max_fails`), clients told apart by the realip
 * module, and requests still running on a slow peer.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf } from '../helpers/differential.js';

/** Back ends on the extra ports, each answering with its port. */
const backEnds = (ports: readonly number[]): string =>
  ports.map((p) => `  server { listen 127.0.0.1:${p}; location / { return 200 "${p}\\n"; } }`).join('\n');

describe('upstream balancers (differential)', () => {
  after(cleanup);

  it('ip_hash picks the peer by the client address (three octets of IPv4, all of IPv6), by weight, past down and failing peers', async () => {
    const dead = await freePort();
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`
  upstream hashed { ip_hash; server 127.0.0.1:${ports[0]}; server 127.0.0.1:${ports[1]} weight=2; server 127.0.0.1:${ports[2]}; }
  upstream downs { ip_hash; server 127.0.0.1:${ports[0]}; server 127.0.0.1:${ports[1]} down; server 127.0.0.1:${ports[2]}; }
  upstream failing { ip_hash; server 127.0.0.1:${ports[0]}; server 127.0.0.1:${dead} weight=3 max_fails=2; server 127.0.0.1:${ports[2]}; }
  upstream backups { server 127.0.0.1:${ports[1]} backup; ip_hash; server 127.0.0.1:${ports[0]}; server 127.0.0.1:${ports[2]}; }
  server { listen 127.0.0.1:${port}; set_real_ip_from 127.0.0.0/8;
    location /hashed { proxy_pass http://hashed; }
    location /downs { proxy_pass http://downs; }
    location /failing { proxy_pass http://failing; }
    location /backups { proxy_pass http://backups; }
  }
${backEnds(ports)}`, { oneWorker: true }),
      extraPorts: 3,
    }, async (s) => {
      const clients = [
        ...Array.from({ length: 12 }, (_, i) => `10.0.${i}.${i + 1}`), '10.1.7.200', '192.0.2.1', '192.0.2.77',
        '2001:db8::1', '2001:db8::2', 'fe80::1:2',
      ];
      const out: Record<string, string> = {};
      for (const path of ['/hashed', '/downs', '/failing', '/backups']) {
        const seen: string[] = [];
        for (const addr of clients) {
          const res = await s.get(path, { headers: { 'X-Real-IP': addr } });
          seen.push(`${addr}=${res.status === 200 ? s.ports.indexOf(Number(res.body.trim())) : res.status}`);
        }
        out[path] = seen.join(' ');
      }
      return out;
    });
    assertSameAsNginx(run);
    assert.ok(run.nginx.errorLog.some((l) => l.includes('connect() failed (111: Connection refused)')));
  });

  it('least_conn sends requests to the peer with the fewest active connections per weight, round robin among ties', async () => {
    const holds: (() => void)[] = [];
    const slow = await startUpstream((req, res) => {
      if (req.url?.startsWith('/hold')) holds.push(() => res.end('slow\n'));
      else res.end('slow\n');
    });
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`
  upstream least { least_conn; server 127.0.0.1:${slow.port}; server 127.0.0.1:${ports[0]}; server 127.0.0.1:${ports[1]} weight=2; }
  upstream tied { least_conn; server 127.0.0.1:${ports[0]}; server 127.0.0.1:${ports[1]}; server 127.0.0.1:${ports[2]} down; server 127.0.0.1:${slow.port} backup; }
  server { listen 127.0.0.1:${port};
    location / { proxy_pass http://least; }
    location /tied { proxy_pass http://tied; }
  }
${backEnds(ports)}`, { oneWorker: true }),
      extraPorts: 3,
    }, async (s) => {
      const name = (body: string): string => (body === 'slow\n' ? 'slow' : String(s.ports.indexOf(Number(body.trim()))));
      const quiet: string[] = [];
      for (let i = 0; i < 8; i++) quiet.push(name((await s.get('/')).body));
      // two requests held on whichever peers they reach, then more while they run
      const pause = (ms: number): Promise<unknown> => new Promise((r) => setTimeout(r, ms));
      const held = [s.get('/hold1')];
      await pause(150);
      held.push(s.get('/hold2'));
      await pause(150);
      const busy: string[] = [];
      for (let i = 0; i < 8; i++) busy.push(name((await s.get('/')).body));
      for (const release of holds.splice(0)) release();
      const heldTo = (await Promise.all(held)).map((r) => name(r.body));
      const tied: string[] = [];
      for (let i = 0; i < 6; i++) tied.push(name((await s.get('/tied')).body));
      return { quiet: quiet.join(' '), busy: busy.join(' '), held: heldTo.join(' '), tied: tied.join(' ') };
    });
    assertSameAsNginx(run);
    assert.match(run.nginx.result.busy, /^[^s]*$/, 'no request goes to the slow peer while it holds one');
  });
});
