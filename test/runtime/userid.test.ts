/**
 * The userid filter, differential against nginx: a known cookie decoded
 * into `$uid_got` (in a list of cookies, with a garbage trail, in any case of
 * its name), a new identifier's `Set-Cookie` and `$uid_set` (`on` and `v1`,
 * default and custom service, the sequence), `userid_mark` (a cookie without
 * the mark sent again with it), `userid_flags`, `userid_domain`,
 * `userid_path`, `userid_p3p`, `userid_expires` (a time and `max`), the
 * cookie on a 404 and a 204, `userid log|off`, `$uid_reset` (`log` logs the
 * reset), the error-log lines of a too short and an invalid cookie, the
 * cookie's place after a proxied response's own `Set-Cookie` and after
 * `add_header`'s headers (nginx writes its header list in order), and
 * what an internal redirect does (the cookie is read and made again, the
 * variables keep their values, as nginx's cached variables do).
 *
 * What changes from run to run is made fixed on both sides before the
 * comparison: a new identifier's time and start value (pid and
 * microseconds) become `TIME` and `START` once the time is checked to be
 * the response's, a cookie's expiry `DATE+N` once checked to be N seconds
 * after the response's `Date`.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, rawExchange, snap, type Side, type Snap } from '../helpers/differential.js';

/** A cookie nginx made: service 127.0.0.1, time 2014-11-09, start 0x00010000, sequence 0x03030302. */
const KNOWN = 'fwAAAVzAX1QAAQAAAwMDAg';
const KNOWN_HEX = '0100007F545FC05C0000010002030303';

/** The 32-bit word `hex` (8 hex digits) with its bytes reversed. */
const swapped = (hex: string): number => Number.parseInt(hex.match(/../g)!.reverse().join(''), 16);

/** An identifier's 32 hex digits with its time and start words made fixed, when its time is within a minute of `nowSec`. */
function fixedHex(hex: string, nowSec: number): string {
  const time = hex.slice(8, 16);
  const near = (t: number): boolean => Math.abs(t - nowSec) < 60;
  return near(Number.parseInt(time, 16)) || near(swapped(time)) ? `${hex.slice(0, 8)}TIME____START___${hex.slice(24)}` : hex;
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** Seconds since the epoch of a cookie date (`Thu, 31-Dec-37 23:55:55 GMT`). */
function cookieDateSec(text: string): number {
  const m = /^\w{3}, (\d\d)-(\w{3})-(\d{2,4}) (\d\d):(\d\d):(\d\d) GMT$/.exec(text);
  if (!m) return Number.NaN;
  const year = m[3]!.length === 2 ? 2000 + Number(m[3]) : Number(m[3]);
  return Date.UTC(year, MONTHS.indexOf(m[2]!), Number(m[1]), Number(m[4]), Number(m[5]), Number(m[6])) / 1000;
}

/**
 * A `Set-Cookie` with a new identifier's words shown (`NAME=[HEX]XY`, XY
 * the two characters after the 22 of the identifier: padding or mark) and
 * made fixed (`fixedHex`), and an expiry near `nowSec` as `DATE+N`.
 */
function fixedCookie(cookie: string, nowSec: number): string {
  return cookie.replace(/^(\w+)=([A-Za-z0-9+/]{22})(..)/, (_all, name: string, id: string, tail: string) => {
    const hex = Buffer.from(id, 'base64').toString('hex').toUpperCase().match(/.{8}/g)!.map((w) => swapped(w).toString(16).toUpperCase().padStart(8, '0')).join('');
    return `${name}=[${fixedHex(hex, nowSec)}]${tail}`;
  }).replace(/expires=([^;]+)/, (all, date: string) => {
    const sec = cookieDateSec(date);
    return Math.abs(sec - nowSec - 86400) <= 2 ? 'expires=DATE+86400' : all;
  });
}

/** One response, what changes from run to run made fixed. */
async function observe(s: Side, path: string, cookie?: string): Promise<Snap> {
  const resp = await s.request(path, cookie === undefined ? {} : { headers: { cookie } });
  const nowSec = Date.parse(String(resp.headers.date)) / 1000;
  const sn = snap(resp, s.kind);
  const headers = { ...sn.headers };
  const fixUid = (text: string): string => text.replace(/=([0-9A-F]{32})/g, (_all, hex: string) => `=${fixedHex(hex, nowSec)}`);
  if (headers['set-cookie'] !== undefined) headers['set-cookie'] = headers['set-cookie'].split('\n').map((c) => fixedCookie(c, nowSec)).join('\n');
  for (const name of Object.keys(headers)) if (name.startsWith('x-')) headers[name] = fixUid(headers[name]!);
  return { ...sn, headers, body: fixUid(sn.body) };
}

describe('userid (differential)', () => {
  after(cleanup);

  it('reads a known cookie into $uid_got, sets a new one in nginx\'s format on every status, marks, flags, expiry, reset, and logs bad cookies', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    userid on;
    add_header X-Got $uid_got always;
    add_header X-Set $uid_set always;
    location / { return 200 "got=[$uid_got] set=[$uid_set]\\n"; }
    location /mark { userid_mark t; return 200 "got=[$uid_got] set=[$uid_set]\\n"; }
    location /flags {
      userid_name sid; userid_domain example.com; userid_path /app; userid_expires max;
      userid_flags secure httponly samesite=strict; userid_p3p 'policyref="/w3c/p3p.xml", CP="NOI"';
      return 404;
      location /flags/none { userid_domain none; userid_flags off; userid_p3p none; userid_expires off; return 404; }
    }
    location /expires { userid_expires 1d; return 204; }
    location /v1 { userid v1; userid_mark 9; return 200 "set=[$uid_set]\\n"; }
    location /service { userid_service 65534; return 200 "set=[$uid_set]\\n"; }
    location /log { userid log; return 200 "got=[$uid_got] set=[$uid_set]\\n"; }
    location /off { userid off; return 200 "got=[$uid_got] set=[$uid_set]\\n"; }
    location /reset { set $uid_reset log; return 200 "got=[$uid_got] set=[$uid_set]\\n"; }
    location /keep { set $uid_reset 0; return 200 "got=[$uid_got] set=[$uid_set]\\n"; }
    # (the error log at notice: jinx's own upstream connection closes apart from nginx's info lines about it)
    location /proxied { add_header X-After-Upstream 1; proxy_pass http://127.0.0.1:${port}/upstream; }
    location /upstream { userid off; add_header Set-Cookie up=1; add_header X-Upstream 1; return 200 "upstream\\n"; }
  }`, { oneWorker: true, level: 'notice' }),
    }, async (s) => {
      const out: Record<string, Snap> = {};
      const get = async (label: string, path: string, cookie?: string): Promise<void> => { out[label] = await observe(s, path, cookie); };
      await get('known cookie', '/', `uid=${KNOWN}==`);
      await get('known cookie among others', '/', `a=b; UID = ${KNOWN}==; c=d`);
      await get('known cookie with a garbage trail', '/', `uid=${KNOWN}xyz`);
      await get('no cookie', '/');
      await get('second new cookie', '/');
      await get('too short cookie', '/', 'uid=fwAAAVzAX1Q');
      await get('invalid cookie', '/', 'a=1; uid=fwAAAVzAX1QAAQAA*wMDAg==');
      await get('cookie of zeros', '/', 'uid=AAAAAAAAAAAAAAAAAAAAAA==');
      await get('mark missing', '/mark', `uid=${KNOWN}==`);
      await get('mark present', '/mark', `uid=${KNOWN}t=`);
      await get('mark on a new cookie', '/mark');
      await get('flags, domain, path, p3p, expires max on a 404', '/flags/x');
      await get('flags turned off', '/flags/none');
      await get('known cookie with flags', '/flags/x', `sid=${KNOWN}==`);
      await get('expires 1d on a 204', '/expires');
      await get('v1', '/v1');
      await get('v1 again', '/v1');
      await get('custom service', '/service');
      await get('log', '/log', `uid=${KNOWN}==`);
      await get('log without cookie', '/log');
      await get('off', '/off', `uid=${KNOWN}==`);
      await get('reset', '/reset', `uid=${KNOWN}==`);
      await get('reset 0 keeps', '/keep', `uid=${KNOWN}==`);
      await get('after an upstream\'s Set-Cookie and add_header', '/proxied');
      const head = (await rawExchange(s.port, 'GET /proxied HTTP/1.0\r\n\r\n')).split('\r\n\r\n')[0]!;
      const order = head.split('\r\n').slice(1).map((l) => l.slice(0, l.indexOf(':'))).filter((n) => n !== 'Date' && n !== 'Server');
      return { ...out, 'header order': order };
      return out;
    });
    const nginx = run.nginx.result as Record<string, Snap>;
    assert.equal(nginx['known cookie']!.headers['x-got'], `uid=${KNOWN_HEX}`);
    assert.equal(nginx['no cookie']!.headers['set-cookie'], 'uid=[0100007FTIME____START___02030303]==; path=/');
    assert.ok(run.nginx.errorLog.some((l) => l.includes('client sent invalid userid cookie "a=1; uid=fwAAAVzAX1QAAQAA*wMDAg=="')));
    assertSameAsNginx(run);
  });

  it('starts the cookie again after an internal redirect (index, error_page to a named location) while $uid_got and $uid_set keep their first values', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    userid on;
    root html;
    set $early $uid_set;
    add_header X-Early $early;
    add_header X-Set $uid_set;
    location / { }
    location /e { error_page 404 = @named; return 404; }
    location @named { add_header X-Named $uid_set; return 200 "named\\n"; }
  }`, { oneWorker: true }),
      files: { 'html/index.html': 'index\n' },
    }, async (s) => ({
      index: await observe(s, '/', 'uid=bad*cookie*aaaaaaaaaaaaaaaaaa'),
      named: await observe(s, '/e'),
    }));
    assert.equal(run.nginx.errorLog.filter((l) => l.includes('client sent invalid userid cookie')).length, 2);
    assertSameAsNginx(run);
  });
});
