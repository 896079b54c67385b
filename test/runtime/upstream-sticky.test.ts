/**
 * `sticky` in upstream blocks (nginx 1.29.6), differential against nginx:
 * which peer each request goes to and the cookie that names it, for
 * `sticky cookie` (server IDs from `route=` and from the MD5 of the
 * address, `expires`, `domain`, `path`, `httponly`, `secure`, `samesite`
 * from a variable), a named server that is `drain`ed (still chosen), down
 * or failing (another is, and named), round robin's weights after sticky
 * requests, `sticky route` over `hash` and `least_conn`, and a method
 * chosen after `sticky` (which replaces it); the cookie kept, as nginx
 * keeps its response headers, by a 502, an intercepted error's page, a
 * named location that proxies again (a cookie each), and X-Accel-Redirect;
 * `sticky learn` (sessions from the upstream's cookie, learned at the end
 * of the request or with `header`, kept alive by use, timed out).
 */
import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { after, describe, it } from 'node:test';
import { cleanup, freePort } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, type Side } from '../helpers/differential.js';

/** Back ends on the extra ports, each answering with its port. */
const backEnds = (ports: readonly number[]): string =>
  ports.map((p) => `  server { listen 127.0.0.1:${p}; location / { return 200 "${p}\\n"; } }`).join('\n');

const md5 = (text: string): string => createHash('md5').update(text).digest('hex');

/** A response as the test compares it: which back end answered (its index), and the sticky cookie with ports and times made neutral. */
async function answer(s: Side, path: string, cookie?: string): Promise<string> {
  const res = await s.get(path, cookie === undefined ? {} : { headers: { Cookie: cookie } });
  const port = Number(res.body.trim());
  const by = res.status === 200 ? `P${s.ports.indexOf(port)}` : String(res.status);
  let set = res.headers['set-cookie'] ?? '';
  s.ports.forEach((p, i) => { set = set.split(md5(`127.0.0.1:${p}`)).join(`md5(P${i})`); });
  set = set.replace(/expires=\w{3}, \d\d-\w{3}-\d\d \d\d:\d\d:\d\d GMT/, 'expires=DATE');
  return `${by} ${set}`;
}

describe('upstream sticky (differential)', () => {
  after(cleanup);

  it('sticky cookie: names the answering server in a cookie (route= or the MD5 of its address) and sends a request with it there, drained or not, past a failed one', async () => {
    const dead = await freePort();
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`
  upstream cookie {
    server 127.0.0.1:${ports[0]} route=a; server 127.0.0.1:${ports[1]}; server 127.0.0.1:${ports[2]} route=c drain;
    sticky cookie srv_id expires=1h domain=.example.com path=/ httponly secure samesite=$arg_ss;
  }
  upstream plain { server 127.0.0.1:${ports[0]} route=a; server 127.0.0.1:${ports[1]} route=b down; sticky cookie s expires=max; }
  upstream weighted { server 127.0.0.1:${ports[0]} route=a weight=3; server 127.0.0.1:${ports[1]} route=b; sticky cookie s; }
  upstream failing { server 127.0.0.1:${dead} route=d; server 127.0.0.1:${ports[0]} route=a; sticky cookie s; }
  upstream single { server 127.0.0.1:${ports[2]} route=c drain; sticky cookie s; }
  server { listen 127.0.0.1:${port};
    location /cookie { proxy_pass http://cookie; }
    location /plain { proxy_pass http://plain; }
    location /weighted { proxy_pass http://weighted; }
    location /failing { proxy_pass http://failing; }
    location /single { proxy_pass http://single; }
  }
${backEnds(ports)}`, { oneWorker: true }),
      extraPorts: 3,
    }, async (s) => {
      const seq = async (path: string, cookies: readonly (string | undefined)[]): Promise<string> => {
        const out: string[] = [];
        for (const c of cookies) out.push(`${c ?? '-'} → ${await answer(s, path, c)}`);
        return out.join('\n');
      };
      return {
        cookie: await seq('/cookie', [undefined, undefined, undefined, 'srv_id=c', 'srv_id=a', `srv_id=${'0'.repeat(32)}`, 'other=1; srv_id=c']),
        samesite: [await answer(s, '/cookie?ss=Lax'), await answer(s, '/cookie?ss=bogus')].join('\n'),
        plain: await seq('/plain', [undefined, 's=b', 's=a']),
        weighted: await seq('/weighted', [undefined, 's=b', 's=b', 's=b', undefined, undefined, undefined, undefined, 's=b', undefined]),
        failing: await seq('/failing', ['s=d', 's=d', undefined]),
        single: await seq('/single', [undefined, 's=c']),
      };
    });
    assert.match(run.nginx.result.cookie, /srv_id=c → P2 srv_id=c; expires=DATE; max-age=3600; domain=\.example\.com; httponly; secure; path=\//);
    assert.match(run.nginx.result.cookie, /→ P1 srv_id=md5\(P1\);/);
    assert.match(run.nginx.result.single, /^- → 502 \ns=c → P2 s=c$/);
    assertSameAsNginx(run);
  });

  it('sticky route: the first non-empty variable names the server, over hash and least_conn; a method after sticky replaces it', async () => {
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`
  upstream hashed { hash $arg_k; server 127.0.0.1:${ports[0]} route=a; server 127.0.0.1:${ports[1]} route=b; server 127.0.0.1:${ports[2]} route=c; sticky route $arg_r $cookie_r; }
  upstream least { least_conn; server 127.0.0.1:${ports[0]} route=a; server 127.0.0.1:${ports[1]} route=b; sticky route $arg_r; }
  upstream replaced { server 127.0.0.1:${ports[0]} route=a; server 127.0.0.1:${ports[1]} route=b; sticky route $arg_r; hash $arg_k; }
  server { listen 127.0.0.1:${port};
    location /hashed { proxy_pass http://hashed; }
    location /least { proxy_pass http://least; }
    location /replaced { proxy_pass http://replaced; }
  }
${backEnds(ports)}`, { oneWorker: true }),
      extraPorts: 3,
    }, async (s) => {
      const out: Record<string, string> = {};
      let i = 0;
      for (const [path, cookie] of [
        ['/hashed?k=1', undefined], ['/hashed?k=1&r=c', undefined], ['/hashed?k=1&r=b', undefined], ['/hashed?k=1', 'r=c'],
        ['/hashed?k=1&r=', 'r=a'], ['/hashed?k=2&r=zz', undefined],
        ['/least?r=b', undefined], ['/least?r=b', undefined], ['/least', undefined], ['/least', undefined],
        ['/replaced?k=1&r=a', undefined], ['/replaced?k=1&r=b', undefined],
      ] as const) {
        out[`${i++} ${path} ${cookie ?? ''}`] = await answer(s, path, cookie);
      }
      return out;
    });
    assert.equal(run.nginx.result['1 /hashed?k=1&r=c ']?.trim(), 'P2');
    assertSameAsNginx(run);
  });

  it('keeps the cookie through a 502, an intercepted error\'s page, a named location proxying again (two cookies) and X-Accel-Redirect', async () => {
    const dead = await freePort();
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`
  upstream dead { server 127.0.0.1:${dead} route=z; sticky cookie s; }
  upstream live { server 127.0.0.1:${ports[0]} route=a; sticky cookie s path=/; }
  server { listen 127.0.0.1:${port};
    location /dead { proxy_pass http://dead; }
    location /paged { proxy_pass http://dead; error_page 502 /page; }
    location = /page { return 200 "page\\n"; }
    location /missing { proxy_pass http://live; proxy_intercept_errors on; error_page 404 = @again; }
    location @again { proxy_pass http://live; }
    location /accel { proxy_pass http://live; }
    location /internal/ { internal; return 200 "redirected\\n"; }
  }
  server { listen 127.0.0.1:${ports[0]};
    location /missing { return 404; }
    location /accel { add_header X-Accel-Redirect /internal/x; add_header Set-Cookie up=1; return 200 "replaced\\n"; }
  }`, { oneWorker: true }),
      extraPorts: 1,
    }, async (s) => {
      const out: Record<string, string> = {};
      for (const path of ['/dead', '/paged', '/missing', '/accel']) {
        const res = await s.get(path);
        out[path] = `${res.status} ${res.body.trim()} | ${res.headers['set-cookie'] ?? ''}`;
      }
      return out;
    });
    assert.match(run.nginx.result['/missing']!, /^404 [^]*\| s=a; path=\/\ns=a; path=\/$/);
    assertSameAsNginx(run);
  });

  it('sticky learn: a session the upstream names in a cookie goes back to its server until it times out', async () => {
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`
  upstream learned {
    server 127.0.0.1:${ports[0]}; server 127.0.0.1:${ports[1]};
    sticky learn create=$upstream_cookie_sess lookup=$cookie_sess lookup=$arg_sess zone=sessions:64k timeout=1s;
  }
  upstream header {
    server 127.0.0.1:${ports[0]}; server 127.0.0.1:${ports[1]};
    sticky learn create=$upstream_cookie_sess lookup=$cookie_sess zone=header_sessions:1m header;
  }
  server { listen 127.0.0.1:${port};
    location /learned { proxy_pass http://learned; }
    location /header { proxy_pass http://header; }
  }
${ports.map((p) => `  server { listen 127.0.0.1:${p}; location / { add_header Set-Cookie "sess=$arg_s"; return 200 "${p}\\n"; } }`).join('\n')}`, { oneWorker: true }),
      extraPorts: 2,
    }, async (s) => {
      const out: string[] = [];
      const get = async (path: string, cookie?: string): Promise<void> => {
        out.push(`${path} ${cookie ?? '-'} → ${(await answer(s, path, cookie)).split(' ')[0]}`);
      };
      for (const base of ['/learned', '/header']) {
        await get(`${base}?s=one`);
        await get(`${base}?s=two`);
        for (const c of ['sess=one', 'sess=two', 'sess=one', 'sess=two', 'sess=three', undefined]) await get(base, c);
      }
      await get('/learned?sess=two');
      await new Promise((r) => setTimeout(r, 1300));
      for (const c of ['sess=two', 'sess=two', 'sess=two']) await get('/learned', c);
      return out.join('\n');
    });
    assert.match(run.nginx.result, /\/learned sess=one → (P\d)\n\/learned sess=two → (?!\1)P\d\n/);
    assertSameAsNginx(run);
  });
});
