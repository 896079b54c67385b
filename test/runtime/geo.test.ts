/**
 * geo and split_clients, differential against nginx: `geo $arg_ip` answers
 * for addresses at the edges of nested IPv4 and IPv6 CIDR entries and of
 * IPv4 ranges (split, shifted, deleted, across 65,536-address blocks), for
 * text that is no address, for IPv4-mapped IPv6; `proxy` and
 * `proxy_recursive` with X-Forwarded-For chains; `volatile`; a client on a
 * unix domain socket; and split_clients' bucket of 10,000 keys (and of keys
 * with bytes past ASCII), every one the same as nginx's. Then `-t`: nginx's
 * warnings for duplicates, deletes and low address bits, and its errors for
 * bad entries.
 */
import { strict as assert } from 'node:assert';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf } from '../helpers/differential.js';
import { defineConfCases, failed, HTTP_TEMP_PATHS, succeeded, type ConfCase } from '../helpers/conf-test.js';

const CIDRS = `  geo $arg_ip $cidr {
    default d;
    10.0.0.0/8 ten;
    10.1.0.0/16 ten-one;
    10.1.2.0/24 ten-one-two;
    10.1.2.3 host;
    192.168.0.0/16 private;
    delete 192.168.0.0/16;
    172.16.0.1/12 low-bits;
    128.0.0.0/2 q;
    255.255.255.255 all-ones;
    4.0.0.0/6 six;
    delete 4.0.0.0/6;
    ::/0 v6;
    2001:db8::/32 doc;
    2001:db8:1::/48 doc-one;
    ::1 lo6;
    ::ffff:0:0/96 mapped;
    fe80::/10 link-local;
  }
  geo $arg_ip $range {
    ranges;
    default rd;
    10.0.0.0-10.255.255.255 r10;
    10.1.2.0-10.1.2.255 split;
    10.1.2.0-10.1.2.10 start;
    10.1.2.250-10.1.2.255 end;
    192.168.0.0-192.168.255.255 rp;
    delete 192.168.0.0-192.168.255.255;
    1.0.0.0-1.2.3.4 r1;
    1.2.3.6-1.3.0.0 r2;
    127.0.0.1-127.0.0.1 lo;
    0.0.0.0-0.0.0.0 zero;
  }
`;

/** Addresses at the edges of the entries above, and text that is no address. */
const ADDRESSES = [
  '10.0.0.0', '9.255.255.255', '10.255.255.255', '11.0.0.0', '10.1.0.0', '10.0.255.255', '10.1.255.255', '10.2.0.0',
  '10.1.2.0', '10.1.2.2', '10.1.2.3', '10.1.2.4', '10.1.2.10', '10.1.2.11', '10.1.2.249', '10.1.2.250', '10.1.2.255', '10.1.3.0', '10.1.1.255',
  '192.168.1.1', '172.16.0.0', '172.31.255.255', '172.32.0.0', '128.0.0.0', '191.255.255.255', '192.0.0.0', '127.255.255.255',
  '255.255.255.255', '255.255.255.254', '4.0.0.1', '7.255.255.255', '0.0.0.0', '0.0.0.1',
  '1.0.0.0', '0.255.255.255', '1.2.3.4', '1.2.3.5', '1.2.3.6', '1.2.255.255', '1.3.0.0', '1.3.0.1', '127.0.0.1', '127.0.0.2',
  '10.1..3', '010.001.002.003', '1.2.3', '1.2.3.4.5', '256.1.1.1', '1.2.3.4:80', '', 'abc', '-1.0.0.0',
  '::', '::1', '::2', '2001:db8::', '2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', '2001:db9::', '2001:db8:1::1', '2001:db8:2::',
  '2001:DB8:1:0:0:0:0:1', 'fe80::1', 'febf:ffff::', 'fec0::', '::ffff:10.1.2.3', '::ffff:1.2.3.5', '::ffff:0a01:0203', '::10.1.2.3',
  '[::1]', '::1/128', '1::2::3', '12345::', ':1', '1:2:3:4:5:6:7:8', '1:2:3:4:5:6:7:8:9', '1:2:3:4:5:6:1.2.3.4', 'fe80::1%25lo',
];

const PROXIES = `  geo $proxied {
    proxy 127.0.0.1;
    default none;
    10.0.0.0/8 ten;
    127.0.0.1 lo;
    192.0.2.0/24 doc;
    2001:db8::/32 doc6;
  }
  geo $recursive {
    proxy 127.0.0.0/8;
    proxy 10.0.0.0/8;
    proxy_recursive;
    default none;
    10.0.0.0/8 ten;
    127.0.0.1 lo;
    192.0.2.0/24 doc;
  }
  geo $arg_ip $not_trusted {
    proxy 10.0.0.0/8;
    default none;
    10.0.0.0/8 ten;
    192.0.2.0/24 doc;
  }
  geo $proxied_ranges {
    ranges;
    proxy 127.0.0.1;
    default none;
    192.0.2.0-192.0.2.255 doc;
    127.0.0.1-127.0.0.1 lo;
  }
`;

const FORWARDED = [
  '192.0.2.1', '10.0.0.1, 192.0.2.1', '192.0.2.1, 10.0.0.1', '192.0.2.1,10.0.0.2 10.0.0.3', '192.0.2.1, 10.0.0.1, 127.0.0.5',
  'bogus', 'bogus, 10.0.0.1', '192.0.2.1:8080', '[2001:db8::1]:80', '2001:db8::1', '::ffff:192.0.2.1', ' 192.0.2.1 ,, ',
  '192.0.2.1:0', '[2001:db8::1]', '[192.0.2.1]', '[192.0.2.1]:80', '[2001:db8::1]x', '192.0.2.1:65536', '192.0.2.1, bogus', ',192.0.2.1', '',
];

describe('geo (differential)', () => {
  after(cleanup);

  it('gives the longest matching CIDR entry and the range holding the address, as nginx, for IPv4, IPv6 and text that is no address', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${CIDRS}  server { listen 127.0.0.1:${port}; location / { return 200 "$cidr $range\\n"; } }`),
    }, async (s) => {
      const out: Record<string, string> = {};
      for (const ip of ADDRESSES) out[ip] = (await s.get(`/?ip=${ip}`)).body;
      return out;
    });
    assert.equal(run.nginx.result['10.1.2.3'], 'host start\n');
    assert.equal(run.nginx.result['::ffff:10.1.2.3'], 'host start\n');
    assertSameAsNginx(run);
    assert.deepEqual(run.jinx.allErrorLog.filter((l) => l.startsWith('[warn]')), run.nginx.allErrorLog.filter((l) => l.startsWith('[warn]')));
  });

  it('takes the address from X-Forwarded-For when the client is a trusted proxy, once or, with proxy_recursive, while the address is trusted', async () => {
    const run = await differential({
      conf: ({ port }) => httpConf(`${PROXIES}  server { listen 127.0.0.1:${port};
    location / { return 200 "$proxied $recursive $proxied_ranges\\n"; }
    location /arg { return 200 "$not_trusted\\n"; }
  }`),
    }, async (s) => {
      const out: Record<string, string> = {};
      out['no header'] = (await s.get('/')).body;
      for (const xff of FORWARDED) out[`[${xff}]`] = (await s.get('/', { headers: { 'X-Forwarded-For': xff } })).body;
      out['two headers'] = (await s.raw('GET / HTTP/1.0\r\nX-Forwarded-For: 192.0.2.7\r\nX-Forwarded-For: 10.0.0.9\r\n\r\n'))?.body ?? 'none';
      out['arg from a proxy'] = (await s.get('/arg?ip=10.0.0.1', { headers: { 'X-Forwarded-For': '192.0.2.1' } })).body;
      out['arg not a proxy'] = (await s.get('/arg?ip=192.0.2.9', { headers: { 'X-Forwarded-For': '10.0.0.1' } })).body;
      return out;
    });
    assert.equal(run.nginx.result['[192.0.2.1]'], 'doc doc doc\n');
    assertSameAsNginx(run);
  });

  it('reads a volatile geo variable again after $args changes, a cached one once; a unix-socket client is 255.255.255.255', async () => {
    const run = await differential({
      conf: ({ port, prefix }) => httpConf(`  geo $arg_ip $cached { default none; 192.0.2.1 one; 192.0.2.2 two; }
  geo $arg_ip $fresh { volatile; default none; 192.0.2.1 one; 192.0.2.2 two; }
  geo $client { default d; 127.0.0.1 lo; 255.255.255.255 all-ones; }
  geo $remote_addr $by_var { default d; 127.0.0.1 lo; 255.255.255.255 all-ones; }
  geo $client_ranges { ranges; default d; 0.0.0.0-255.255.255.254 any; 127.0.0.1-127.0.0.1 lo; }
  server { listen unix:${prefix}/geo.sock; location / { return 200 "$client $by_var $client_ranges\\n"; } }
  server { listen 127.0.0.1:${port};
    location /volatile { set $a "$cached $fresh"; set $args ip=192.0.2.2; return 200 "$a / $cached $fresh\\n"; }
    location /tcp { return 200 "$client $by_var $client_ranges\\n"; }
    location /unix { proxy_pass http://unix:${prefix}/geo.sock; }
  }`, { level: 'notice' }),
    }, async (s) => ({
      volatile: (await s.get('/volatile?ip=192.0.2.1')).body,
      tcp: (await s.get('/tcp')).body,
      unix: (await s.get('/unix')).body,
    }));
    assert.equal(run.nginx.result.unix, 'all-ones all-ones d\n');
    assertSameAsNginx(run);
  });
});

/** Ten split_clients over `$arg_k` and a suffix: each request answers ten keys. */
const SPLITS = 10;
const SPLIT_PARTS = '0.5% a; 20% b; 33.33% c; 12.34% d; 0.01% e; 8% f; * g;';

describe('split_clients (differential)', () => {
  after(cleanup);

  it('puts each of 10,000 keys in the same bucket as nginx (MurmurHash2, shares in hundredths of a percent)', async () => {
    const blocks = Array.from({ length: SPLITS }, (_, i) => `  split_clients "$arg_k.${i}" $bucket${i} { ${SPLIT_PARTS} }\n`).join('');
    const answer = Array.from({ length: SPLITS }, (_, i) => `$bucket${i}`).join('');
    const run = await differential({
      conf: ({ port }) => httpConf(`${blocks}  split_clients "$arg_s" $short { 50% x; 50% y; }
  split_clients "$arg_s" $partial { 10% x; 20% y; }
  server { listen 127.0.0.1:${port};
    location / { return 200 "${answer}\\n"; }
    location /short { return 200 "$short$partial\\n"; }
  }`),
    }, async (s) => {
      const out: string[] = [];
      for (let n = 0; n < 10_000 / SPLITS; n++) out.push((await s.get(`/?k=${n % 7 === 0 ? `user%40${n}` : `k${'x'.repeat(n % 5)}${n}`}`)).body.trim());
      const short: string[] = [];
      for (const k of ['', 'a', 'ab', 'abc', 'abcd', 'abcde', '%FF%00', '0123456789abcdef']) short.push((await s.get(`/short?s=${k}`)).body.trim());
      // bytes past ASCII are hashed as bytes
      for (let i = 0; i < 20; i++) {
        const key = String.fromCharCode(0x80 + i * 5, 0xc3, 0xa9, 0x30 + i).repeat(1 + (i % 3));
        short.push((await s.raw(`GET /short?s=${key} HTTP/1.0\r\n\r\n`))?.body.trim() ?? 'none');
      }
      return { buckets: out.join(' '), short: short.join(' ') };
    });
    const counts = new Map<string, number>();
    for (const c of run.nginx.result.buckets.replace(/ /g, '')) counts.set(c, (counts.get(c) ?? 0) + 1);
    assert.ok((counts.get('c') ?? 0) > 3000, 'the keys spread over the buckets');
    assertSameAsNginx(run);
  });
});

const http = (body: string): string => `events {}\nhttp {\n${HTTP_TEMP_PATHS}\n${body}\n}\n`;

const CASES: ConfCase[] = [
  {
    name: 'geo: a duplicate network or default is replaced with a warning naming the old value (that of the longest prefix)',
    files: { 'nginx.conf': http('geo $g {\n default a;\n default b;\n 10.0.0.0/8 x;\n 10.0.0.0/24 y;\n 10.0.0.0/8 z;\n ::1 w;\n ::1 v;\n}') },
    status: 0,
    lines: succeeded(
      '[warn] duplicate network "default", value: "b", old value: "a" in PREFIX/nginx.conf:6',
      '[warn] duplicate network "default", value: "b", old value: "a" in PREFIX/nginx.conf:6',
      '[warn] duplicate network "10.0.0.0/8", value: "z", old value: "y" in PREFIX/nginx.conf:9',
      '[warn] duplicate network "::1", value: "v", old value: "w" in PREFIX/nginx.conf:11',
    ),
  },
  {
    name: 'geo: low address bits, and deleting a network that is not there (a 6-bit one, a preallocated node, deletes silently)',
    files: { 'nginx.conf': http('geo $g {\n 1.2.3.4/24 q;\n delete 5.0.0.0/8;\n delete 4.0.0.0/6;\n delete 0.0.0.0/5;\n}') },
    status: 0,
    lines: succeeded(
      '[warn] low address bits of 1.2.3.4/24 are meaningless in PREFIX/nginx.conf:5',
      '[warn] no network "5.0.0.0/8" to delete in PREFIX/nginx.conf:6',
      '[warn] no network "0.0.0.0/5" to delete in PREFIX/nginx.conf:8',
    ),
  },
  {
    name: 'geo: "ranges" after a CIDR entry',
    files: { 'nginx.conf': http('geo $g {\n default a;\n ranges;\n}') },
    status: 1,
    lines: failed('[emerg] the "ranges" directive must be the first directive inside "geo" block in PREFIX/nginx.conf:6'),
  },
  {
    name: 'geo ranges: a duplicate range per block, a default twice, a missing range to delete, then an overlap with the nearest piece of a split range',
    files: { 'nginx.conf': http('geo $g {\n ranges;\n default a;\n default b;\n delete 1.2.3.4-1.2.3.5;\n 1.0.0.0-1.1.0.0 x;\n 1.0.0.0-1.1.0.0 y;\n 1.0.3.3-1.0.3.5 c;\n 1.0.3.4-1.0.3.9 d;\n}') },
    status: 1,
    lines: failed(
      '[warn] duplicate default geo range value: "b", old value: "a" in PREFIX/nginx.conf:7',
      '[warn] no address range "1.2.3.4-1.2.3.5" to delete in PREFIX/nginx.conf:8',
      '[warn] duplicate range "1.0.0.0-1.1.0.0", value: "y", old value: "x" in PREFIX/nginx.conf:10',
      '[warn] duplicate range "1.0.0.0-1.1.0.0", value: "y", old value: "x" in PREFIX/nginx.conf:10',
      '[emerg] range "1.0.3.4-1.0.3.9" overlaps "1.0.3.6-1.0.255.255" in PREFIX/nginx.conf:12',
    ),
  },
  {
    name: 'geo ranges: 255.255.255.255 cannot end a range (ngx_inet_addr takes it for INADDR_NONE)',
    files: { 'nginx.conf': http('geo $g {\n ranges;\n 0.0.0.0-255.255.255.255 x;\n}') },
    status: 1,
    lines: failed('[emerg] invalid range "0.0.0.0-255.255.255.255" in PREFIX/nginx.conf:6'),
  },
  {
    name: 'geo: unix: is no network for proxy',
    files: { 'nginx.conf': http('geo $g {\n proxy unix:;\n}') },
    status: 1,
    lines: failed('[emerg] invalid network "unix:" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'geo: 255.255.255.255/32 is an invalid network',
    files: { 'nginx.conf': http('geo $g {\n 255.255.255.255/32 x;\n}') },
    status: 1,
    lines: failed('[emerg] invalid network "255.255.255.255/32" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'geo: an entry of three words, in an included file',
    files: { 'nginx.conf': http('geo $g {\n include geo.conf;\n}'), 'geo.conf': '10.0.0.0/8 a;\n1::2::3 b c;\n' },
    status: 1,
    lines: failed('[emerg] invalid number of the geo parameters in PREFIX/geo.conf:2'),
  },
  {
    name: 'geo: the address variable must exist',
    files: { 'nginx.conf': http('geo $nope $g {\n}') },
    status: 1,
    lines: failed('[emerg] unknown "nope" variable'),
  },
  {
    name: 'split_clients: the sum over 100% is refused at the closing brace',
    files: { 'nginx.conf': http('split_clients $arg_k $b {\n 50% a;\n * b;\n 0.01% c;\n}') },
    status: 1,
    lines: failed('[emerg] percent total is greater than 100% in PREFIX/nginx.conf:8'),
  },
  {
    name: 'split_clients: a percentage with more than two decimals',
    files: { 'nginx.conf': http('split_clients $arg_k $b {\n 12.345% a;\n}') },
    status: 1,
    lines: failed('[emerg] invalid percent value "12.345%" in PREFIX/nginx.conf:5'),
  },
  {
    name: 'split_clients: an entry of one or three words is accepted, as nginx does not count them',
    files: { 'nginx.conf': http('split_clients $arg_k $b {\n 10% a b;\n 20%;\n 1.5.% c;\n}') },
    status: 1,
    lines: failed('[emerg] invalid percent value "1.5.%" in PREFIX/nginx.conf:7'),
  },
];

defineConfCases('geo and split_clients -t', CASES);
