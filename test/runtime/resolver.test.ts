/**
 * Run-time name resolution (`resolver`, `resolver_timeout`, `proxy_pass` and
 * `fastcgi_pass` with variables), differential against nginx with a DNS
 * server of the tests' own whose answers each test scripts: CNAME chains,
 * long names and DNAME, several addresses gone through by round robin, A
 * and AAAA together or alone, two name servers, TTL and `valid=`, answers
 * over TCP after a truncated one, malformed answers, time-outs, and a client
 * that leaves while its name is resolved. Each case compares statuses,
 * `$upstream_addr`, the questions the DNS server received, and the exact
 * error-log lines, the resolver's own (`short DNS response` …) included.
 */
import { strict as assert } from 'node:assert';
import { connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, startUpstream } from '../helpers/harness.js';
import { assertSameAsNginx, differential, httpConf, lineDiff, type Side, type SideResult } from '../helpers/differential.js';
import { A, AAAA, CNAME, DNAME, TXT, buildReply, scriptedDns, type DnsReply, type ScriptedDns } from '../helpers/dns-server.js';

/** What a client sees of one request: its status and the `$upstream_addr` the server reports. */
interface Seen {
  readonly status: number;
  readonly addr: string | undefined;
}

/** A request for `path` with `Host: host`. */
async function seen(s: Side, host: string, path = '/'): Promise<Seen> {
  const resp = await s.get(path, { headers: { Host: host } });
  return { status: resp.status, addr: resp.headers['x-addr'] };
}

/** The questions a side's run sent, as `name type` (and `tcp`), in order. */
const asked = (dns: ScriptedDns): string[] => dns.questions.map((q) => `${q.name} ${q.type === A ? 'A' : q.type === AAAA ? 'AAAA' : q.type}${q.tcp ? ' tcp' : ''}`);

/** The resolver's own lines (no request context), query ids made equal. */
function resolverLines(side: SideResult<unknown>): string[] {
  return side.allErrorLog
    .filter((l) => /^\[(?:emerg|alert|crit|error|warn)\] (?!\*CONN)/.test(l))
    .map((l) => l.replace(/query id:\d+/, 'query id:ID').replace(/ident \d+ (.*), expect \d+/, 'ident ID $1, expect ID').replace(/DNS response \d+ fl:/, 'DNS response ID fl:'));
}

/** Both sides' resolver lines are the same (sorted when requests ran at once). */
function assertSameResolverLines(run: { nginx: SideResult<unknown>; jinx: SideResult<unknown> }, sorted = false): void {
  const order = (ls: string[]): string[] => (sorted ? [...ls].sort() : ls);
  const diffs = lineDiff(order(resolverLines(run.nginx)), order(resolverLines(run.jinx)));
  assert.ok(diffs.length === 0, `resolver lines differ:\n  ${diffs.join('\n  ')}`);
}

/** A server on `port` that reports `$upstream_addr`, with `body` inside; one worker (the resolver's cache is each worker's). */
const server = (port: number, body: string): string => httpConf(`  server { listen 127.0.0.1:${port}; server_name resolve.test;
    add_header X-Addr $upstream_addr always;
${body}
  }`, { oneWorker: true });

/** An upstream on 127.0.0.1 answering every request with 200 `ok`; its port. */
async function okUpstream(): Promise<number> {
  return (await startUpstream((_req, res) => res.end('ok\n'))).port;
}

/** What `p` gives, and whether it came within 3 seconds. */
async function timed<T>(p: Promise<T>): Promise<{ seen: T; soon: boolean }> {
  const started = Date.now();
  const result = await p;
  return { seen: result, soon: Date.now() - started < 3000 };
}

/** An A answer. */
const a = (addr: string, ttl?: number): DnsReply => ({ answers: [{ type: A, data: addr, ttl }] });
/** An answer with no records (NOERROR). */
const empty: DnsReply = { answers: [] };

describe('resolver (differential)', () => {
  after(cleanup);

  it('follows CNAMEs to a second query, long labels and names, DNAME; caches them; NXDOMAIN and a CNAME to nothing are 502', async () => {
    const long1 = 'a'.repeat(63);
    const long4 = [long1, long1, long1, long1].join('.');
    const dns = await scriptedDns((q) => {
      const name = q.name.toLowerCase();
      if (name === 'cname.test') return q.count > 1 ? { rcode: 2 } : { answers: [{ type: CNAME, data: 'alias.test' }] };
      if (name === 'alias.test') return q.type === A ? a('127.0.0.1') : empty;
      if (name === 'long.test') return { answers: [{ type: CNAME, data: long1 }] };
      if (name === 'long2.test') return { answers: [{ type: CNAME, data: long4 }] };
      if (name === long1 || name === long4) return q.type === A ? a('127.0.0.1') : empty;
      if (name === 'alias.dname.test') {
        return { answers: [{ type: DNAME, name: 'dname.test', data: 'test' }, { type: CNAME, data: 'alias.test' }] };
      }
      if (name === 'cname2.test') return { answers: [{ type: CNAME, data: 'nx.test' }] };
      if (name === 'case.test') return q.count > 1 ? { rcode: 2 } : q.type === A ? a('127.0.0.1') : empty;
      return { rcode: 3 };
    });
    const up = await okUpstream();
    const run = await differential({
      conf: ({ port }) => server(port, `    location / { resolver 127.0.0.1:${dns.port}; resolver_timeout 2s; proxy_pass http://$host:${up}/backend; }`),
    }, async (s) => {
      dns.reset();
      const result = {
        cname: await seen(s, 'cname.test'),
        cached: await seen(s, 'CNAME.test'),
        long: await seen(s, 'long.test'),
        long2: await seen(s, 'long2.test'),
        dname: await seen(s, 'alias.dname.test'),
        nx: await seen(s, 'NX.Test'),
        cname2: await seen(s, 'cname2.test'),
        caseFirst: await seen(s, 'case.test'),
        caseAgain: await seen(s, 'CASE.TEST.'),
        asked: asked(dns),
      };
      return result;
    });
    const n = run.nginx.result;
    assert.equal(n.cname.status, 200);
    assert.equal(n.cached.status, 200);
    assert.equal(n.nx.status, 502);
    assert.ok(run.nginx.errorLog.some((l) => l.startsWith('[error] *CONN nx.test could not be resolved (3: Host not found)')));
    assertSameAsNginx(run);
    assertSameResolverLines(run);
  });

  it('goes through every address of a name by round robin with proxy_next_upstream, IPv4 first, for proxy_pass and fastcgi_pass', async () => {
    const dns = await scriptedDns((q) => {
      const name = q.name.toLowerCase();
      if (name === 'many.test') return q.type === A ? { answers: [{ type: A, data: '127.0.0.201' }, { type: A, data: '127.0.0.202' }, { type: A, data: '127.0.0.1' }] } : empty;
      if (name === 'mixed.test' || name === 'fcgi.test') return q.type === A ? a('127.0.0.203') : { answers: [{ type: AAAA, data: '::1' }] };
      if (name === 'two.test') return q.type === A ? { answers: [{ type: A, data: '127.0.0.204' }, { type: A, data: '127.0.0.205' }] } : empty;
      return { rcode: 3 };
    });
    const dead = await freePort();
    const up = await okUpstream();
    const run = await differential({
      conf: ({ port }) => server(port, `    resolver 127.0.0.1:${dns.port};
    location / { proxy_pass http://$host:${up}/backend; }
    location /dead { proxy_pass http://$host:${dead}/backend; }
    location /tries { proxy_next_upstream_tries 2; proxy_pass http://$host:${up}/backend; }
    location /fcgi { fastcgi_pass $host:${dead}; }`),
    }, async (s) => {
      dns.reset();
      return {
        many: await seen(s, 'many.test'),
        mixed: await seen(s, 'mixed.test', '/dead'),
        tries: await seen(s, 'two.test', '/tries'),
        fcgi: await seen(s, 'fcgi.test', '/fcgi'),
        asked: asked(dns),
      };
    });
    const n = run.nginx.result;
    assert.deepEqual(n.many, { status: 200, addr: `127.0.0.201:${up}, 127.0.0.202:${up}, 127.0.0.1:${up}` });
    assert.deepEqual(n.mixed, { status: 502, addr: `127.0.0.203:${dead}, [::1]:${dead}` });
    assertSameAsNginx(run);
    assertSameResolverLines(run);
  });

  it('answers from the cache with the addresses rotated, each tried once', async () => {
    const dns = await scriptedDns((q) => (q.type === A && q.count === 1 ? { answers: [{ type: A, data: '127.0.0.201' }, { type: A, data: '127.0.0.202' }] } : q.count === 1 ? empty : { rcode: 2 }));
    const up = await okUpstream();
    const run = await differential({
      conf: ({ port }) => server(port, `    location / { resolver 127.0.0.1:${dns.port}; proxy_pass http://$host:${up}/backend;
      # nginx starts the rotation at a random address: its lines about each (connect() failed) are left out, the result holds the addresses sorted
      error_log logs/rotated.log crit; }`),
    }, async (s) => {
      dns.reset();
      const out: Seen[] = [];
      for (let i = 0; i < 4; i++) out.push(await seen(s, 'many.test'));
      return { statuses: out.map((o) => o.status), addrs: out.map((o) => (o.addr ?? '').split(', ').sort().join(', ')), asked: asked(dns) };
    });
    assert.deepEqual(run.nginx.result.statuses, [502, 502, 502, 502]);
    assert.deepEqual(run.jinx.result, run.nginx.result);
  });

  it('asks the next name server for the next name and when one does not answer; failures are not cached, answers are', async () => {
    const failing = await scriptedDns(() => ({ rcode: 2 }));
    const good = await scriptedDns((q) => (q.type === A ? a('127.0.0.1') : empty));
    const silent = await scriptedDns(() => 'silent');
    const dead = await freePort();
    const up = await okUpstream();
    const run = await differential({
      conf: ({ port }) => server(port, `    location /two { resolver 127.0.0.1:${failing.port} 127.0.0.1:${good.port}; proxy_pass http://$host:${up}/backend; }
    location /resend { resolver 127.0.0.1:${silent.port} 127.0.0.1:${good.port}; resolver_timeout 8s; proxy_pass http://$host:${up}/backend; }
    location /dead { resolver 127.0.0.1:${dead} 127.0.0.1:${good.port}; resolver_timeout 8s; proxy_pass http://$host:${up}/backend; }`),
    }, async (s) => {
      for (const d of [failing, good, silent]) d.reset();
      const result = {
        bad: await seen(s, 'two.test', '/two'),
        good: await seen(s, 'two.test', '/two'),
        cached: await seen(s, 'two.test', '/two'),
        resent: await seen(s, 'resend.test', '/resend'),
        dead: await timed(seen(s, 'dead.test', '/dead')),
        deadNext: await seen(s, 'next.test', '/dead'),
      };
      return { ...result, askedFailing: asked(failing), askedGood: asked(good), askedSilent: asked(silent) };
    });
    const n = run.nginx.result;
    assert.deepEqual([n.bad.status, n.good.status, n.cached.status, n.resent.status, n.dead.seen.status], [502, 200, 200, 200, 200]);
    // a server refusing on its port is passed over at once, not after 5 seconds
    assert.equal(n.dead.soon, true);
    assert.ok(resolverLines(run.nginx).some((l) => l === `[error] send() failed (111: Connection refused) while resolving, resolver: 127.0.0.1:${dead}`));
    assertSameAsNginx(run);
    assertSameResolverLines(run);
  });

  it('keeps answers for their lowest TTL, CNAME included, or for valid=; an expired name is asked again', async () => {
    const dns = await scriptedDns((q) => {
      const name = q.name.toLowerCase();
      if (q.type !== A) return empty;
      if (name === 'ttl.test' || name === 'valid.test') return q.count > 1 ? { rcode: 2 } : a('127.0.0.1', 1);
      if (name === 'chain.test') {
        return q.count > 1 ? { rcode: 2 } : { answers: [{ type: CNAME, data: 'target.test', ttl: 1 }, { type: A, name: 'target.test', data: '127.0.0.1' }] };
      }
      return { rcode: 3 };
    });
    const up = await okUpstream();
    const run = await differential({
      conf: ({ port }) => server(port, `    location / { resolver 127.0.0.1:${dns.port}; proxy_pass http://$host:${up}/backend; }
    location /valid { resolver 127.0.0.1:${dns.port} valid=30s; proxy_pass http://$host:${up}/backend; }`),
    }, async (s) => {
      dns.reset();
      const first = [await seen(s, 'ttl.test'), await seen(s, 'ttl.test'), await seen(s, 'valid.test', '/valid'), await seen(s, 'chain.test')];
      await new Promise((res) => setTimeout(res, 2100));
      const later = [await seen(s, 'ttl.test'), await seen(s, 'valid.test', '/valid'), await seen(s, 'chain.test')];
      return { first: first.map((x) => x.status), later: later.map((x) => x.status), asked: asked(dns) };
    });
    assert.deepEqual(run.nginx.result.first, [200, 200, 200, 200]);
    assert.deepEqual(run.nginx.result.later, [502, 200, 502]);
    assertSameAsNginx(run);
  });

  it('asks again over TCP when the UDP answer is truncated, and takes A and AAAA as ipv4= and ipv6= say', async () => {
    const dns = await scriptedDns((q) => {
      const name = q.name.toLowerCase();
      if (name === 'tc.test') return q.type === A ? { truncated: !q.tcp, answers: [{ type: A, data: q.tcp ? '127.0.0.1' : '127.0.0.201' }] } : { truncated: !q.tcp };
      if (name === 'both.test') return q.type === A ? a('127.0.0.201') : { answers: [{ type: AAAA, data: '::1' }] };
      if (name === 'six.test') return q.type === AAAA ? { answers: [{ type: AAAA, data: '::1' }, { type: AAAA, data: '::ffff:127.0.0.1' }] } : empty;
      return { rcode: 3 };
    });
    const dead = await freePort();
    const up = await okUpstream();
    const run = await differential({
      conf: ({ port }) => server(port, `    location / { resolver 127.0.0.1:${dns.port}; proxy_pass http://$host:${up}/backend; }
    location /both { resolver 127.0.0.1:${dns.port}; proxy_pass http://$host:${dead}/backend; }
    location /four { resolver 127.0.0.1:${dns.port} ipv6=off; proxy_pass http://$host:${dead}/backend; }
    location /six { resolver 127.0.0.1:${dns.port} ipv4=off; proxy_pass http://$host:${dead}/backend; }`),
    }, async (s) => {
      dns.reset();
      return {
        tc: await seen(s, 'tc.test'),
        both: await seen(s, 'both.test', '/both'),
        four: await seen(s, 'both.test', '/four'),
        six: await seen(s, 'both.test', '/six'),
        sixOnly: await seen(s, 'six.test', '/six'),
        noSix: await seen(s, 'six.test', '/four'),
        asked: asked(dns).sort(),
      };
    });
    const n = run.nginx.result;
    assert.equal(n.tc.status, 200);
    assert.equal(n.both.addr, `127.0.0.201:${dead}, [::1]:${dead}`);
    assert.equal(n.four.addr, `127.0.0.201:${dead}`);
    assert.equal(n.six.addr, `[::1]:${dead}`);
    assert.equal(n.sixOnly.addr, `[::1]:${dead}, [::ffff:127.0.0.1]:${dead}`);
    assertSameAsNginx(run);
    assertSameResolverLines(run);
  });

  it('drops malformed answers with nginx\'s error lines, and times out (110) on them', async () => {
    const dns = await scriptedDns((q): DnsReply => {
      const name = q.name.toLowerCase();
      const label = name.split('.')[0]!;
      // a CNAME whose target points at itself: header, question, then the answer's pointer and fixed part
      const loop = Buffer.from([0xc0, 12 + name.length + 2 + 4 + 12]);
      const s: Record<string, DnsReply> = {
        short: { answers: [{ type: A, data: Buffer.alloc(0) }] },
        badlen: { answers: [{ type: A, data: Buffer.from([127, 0, 0]) }] },
        badid: { id: (q.id + 1) & 0xffff, ...(a('127.0.0.1') as object) },
        formerr: { rcode: 1 },
        formerr42: { rcode: 1, id: 42 },
        unknown: { rcode: 9 },
        notresponse: { flags: 0x0100 },
        questions: { question: 'none' },
        klass: { question: { class: 3 } },
        qtype: { question: { type: TXT } },
        other: { question: { name: 'other.test' } },
        rrclass: { answers: [{ type: A, data: '127.0.0.1', class: 3 }] },
        aaaa: { answers: [{ type: AAAA, data: '::1' }] },
        loop: { answers: [{ type: CNAME, data: loop }] },
        outside: { answers: [{ type: CNAME, data: Buffer.from([0xc0, 0xff]) }] },
        txt: { answers: [{ type: TXT, data: Buffer.from('\x02hi') }] },
      };
      return s[label] ?? { rcode: 3 };
    });
    const names = ['short', 'badlen', 'badid', 'formerr', 'formerr42', 'unknown', 'notresponse', 'questions', 'klass', 'qtype', 'other', 'rrclass', 'aaaa', 'loop', 'outside', 'txt'];
    const up = await okUpstream();
    const run = await differential({
      conf: ({ port }) => server(port, `    location / { resolver 127.0.0.1:${dns.port} ipv6=off; resolver_timeout 1s; proxy_pass http://$host:${up}/backend; }`),
    }, async (s) => {
      dns.reset();
      // one after the other: the connections' numbers and the log's order are then the same in every run (the recording holds them)
      const results: Record<string, number | undefined> = {};
      for (const n of names) results[n] = (await seen(s, `${n}.test`)).status;
      return results;
    });
    assert.ok(Object.values(run.nginx.result).every((st) => st === 502));
    const lines = resolverLines(run.nginx);
    for (const l of ['[error] short DNS response', '[error] invalid A record in DNS response', '[error] compression pointers loop in DNS response',
      '[error] DNS error (1: Format error), query id:ID', '[error] DNS error (1: Format error), query id:ID, name:"formerr.test"',
      '[error] no A or CNAME types in DNS response']) {
      assert.ok(lines.includes(l), `nginx logs ${l}`);
    }
    assert.deepEqual(Object.fromEntries(Object.entries(run.jinx.result)), Object.fromEntries(Object.entries(run.nginx.result)));
    assert.deepEqual([...run.jinx.errorLog].sort(), [...run.nginx.errorLog].sort());
    assertSameResolverLines(run, true);
  });

  it('answers 499 when the client leaves while its name is resolved; a request waiting on the same name still times out', async () => {
    const dns = await scriptedDns(() => 'silent');
    const up = await okUpstream();
    const run = await differential({
      conf: ({ port }) => `${httpConf(`  log_format st "$status $request";
  server { listen 127.0.0.1:${port}; server_name resolve.test; access_log logs/access.log st;
    location / { resolver 127.0.0.1:${dns.port}; resolver_timeout 2s; proxy_pass http://$host:${up}/backend; }
  }`)}`,
    }, async (s) => {
      const leaving = connect(s.port, '127.0.0.1');
      leaving.on('error', () => undefined);
      leaving.write('GET /gone HTTP/1.0\r\nHost: slow.test\r\n\r\n');
      const waiting = seen(s, 'slow.test', '/waits');
      await new Promise((res) => setTimeout(res, 500));
      leaving.end();
      leaving.destroy();
      return { waiting: (await waiting).status };
    });
    assert.equal(run.nginx.result.waiting, 502);
    assert.deepEqual(run.nginx.file('logs/access.log').sort(), ['499 GET /gone HTTP/1.0', '502 GET /waits HTTP/1.1']);
    assert.deepEqual(run.jinx.file('logs/access.log').sort(), run.nginx.file('logs/access.log').sort());
    assertSameAsNginx(run);
  });
});


describe('resolver facing garbage', () => {
  after(cleanup);

  it('settles every lookup, with addresses or a resolver error, whatever bytes the name server answers', async () => {
    // a reproducible stream of bytes: answers keep the query's id and a response's flags, the rest is noise or a mangled real answer
    let seed = 12345;
    const next = (): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff;
      return seed;
    };
    const pick = <T>(xs: readonly T[]): T => xs[next() % xs.length]!;
    const dns = await scriptedDns((q) => {
      const answers = Array.from({ length: next() % 4 }, () => {
        const type = pick([q.type, q.type, q.type, q.type, CNAME, CNAME, DNAME, TXT, A, AAAA, next() & 0xffff]);
        const size = type === A ? pick([4, 4, 4, 4, 4, 3]) : type === AAAA ? pick([16, 16, 16, 16, 4]) : next() % 24;
        const data = Buffer.alloc(size);
        for (let i = 0; i < size; i++) data[i] = next() & 0xff;
        // CNAME targets: a name of the same zone, or a pointer anywhere
        if (type === CNAME && next() % 2 === 0) return { type, data: `c${next() % 5}.test`, ttl: next() % 3 };
        if (type === CNAME && size >= 2) data[0] |= 0xc0;
        return { type, data, ttl: next() % 3, class: next() % 20 === 0 ? 3 : 1 };
      });
      const built = buildReply(q, { rcode: pick([0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 5, 9]), answers, truncated: next() % 20 === 0 && !q.tcp });
      // sometimes cut short, sometimes a byte flipped
      const cut = next() % 10 === 0 ? built.subarray(0, 12 + (next() % Math.max(1, built.length - 12))) : built;
      if (next() % 10 === 0 && cut.length > 12) cut[12 + (next() % (cut.length - 12))] = next() & 0xff;
      return { raw: cut };
    });
    const { NameResolver, ResolveError } = await import('../../src/runtime/upstream/resolver.js');
    const lines: string[] = [];
    const resolver = new NameResolver((level, message) => lines.push(`[${level}] ${message}`));
    const def = { servers: [`127.0.0.1:${dns.port}`], validSec: undefined, ipv4: true, ipv6: true };
    const outcomes = await Promise.all(Array.from({ length: 300 }, async (_v, i) => {
      try {
        const addrs = await resolver.resolve(`n${i}.test`, def, 300);
        return addrs.length > 0 ? 'addresses' : 'none';
      } catch (err) {
        return err instanceof ResolveError ? `(${err.rcode})` : `threw ${String(err)}`;
      }
    }));
    resolver.close();
    assert.equal(outcomes.length, 300);
    assert.ok(outcomes.every((o) => o === 'addresses' || /^\(\d+\)$/.test(o)), outcomes.find((o) => o.startsWith('threw')));
    assert.ok(lines.length > 0 && lines.every((l) => l.startsWith('[error] ')), lines.find((l) => !l.startsWith('[error] ')));
  });
});
