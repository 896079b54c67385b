/**
 * The stream limit_conn, geo, split_clients and upstream hash modules,
 * differential against nginx: a held TCP session makes the next one of the
 * same client refused (`$status` 503, `$limit_conn_status` REJECTED and
 * nginx's `limiting connections by zone "z"` line), or only logged with
 * `limit_conn_dry_run`; `geo` (the client's address, a variable's, ranges)
 * and `split_clients` values returned with `return`; the PROXY protocol v2
 * header's addresses and TLVs (`$proxy_protocol_tlv_*`); and the upstream
 * server `hash $k` and `hash $k consistent` pick for eight keys.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync } from 'node:fs';
import { connect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { streamModulePath } from '../helpers/corpus-trees.js';
import { differential, mainContext, ORACLE } from '../helpers/differential.js';
import { cleanup, freePort } from '../helpers/harness.js';
import { tcpSession } from '../helpers/stream-clients.js';

/** What a server sends before it closes the connection (the client sends nothing and does not shut down first). */
function readAll(port: number): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    let out = '';
    s.on('data', (d) => { out += d.toString('latin1'); });
    s.on('error', () => undefined);
    s.on('close', () => resolve(out));
  });
}

/** What a server sends to a client that sends `first` and then waits for the close. */
function answerTo(port: number, first: Buffer): Promise<string> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1', () => s.write(first));
    let out = '';
    s.on('data', (d) => { out += d.toString('latin1'); });
    s.on('error', () => undefined);
    s.on('close', () => resolve(out));
  });
}

/** A TLV of a PROXY protocol v2 header: type, 16-bit length, value. */
const tlv = (type: number, value: Buffer): Buffer => Buffer.concat([Buffer.from([type, value.length >> 8, value.length & 0xff]), value]);

/**
 * A PROXY protocol v2 header (TCP over IPv4, 192.0.2.1:123 to 192.0.2.2:5678)
 * with ALPN, authority and unique ID TLVs and an SSL TLV (client flags,
 * verify result 0, version and CN sub-TLVs).
 */
function proxyV2Header(): Buffer {
  const addresses = Buffer.from([192, 0, 2, 1, 192, 0, 2, 2, 0, 123, 0x16, 0x2e]);
  const ssl = tlv(0x20, Buffer.concat([Buffer.from([0x07, 0, 0, 0, 0]), tlv(0x21, Buffer.from('TLSv1.3')), tlv(0x22, Buffer.from('client.example'))]));
  const body = Buffer.concat([addresses, tlv(0x01, Buffer.from('h2')), tlv(0x02, Buffer.from('example.com')), tlv(0x05, Buffer.from('id-7')), ssl]);
  const head = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a, 0x21, 0x11, body.length >> 8, body.length & 0xff]);
  return Buffer.concat([head, body]);
}

/** The lines of a file of the prefix (none when it is not there). */
const lines = (prefix: string, rel: string): string[] =>
  (existsSync(join(prefix, rel)) ? readFileSync(join(prefix, rel), 'latin1').split('\n').filter(Boolean) : []);

/** A TCP server answering `foo` with `bar`, and servers that say their letter and close. */
describe('stream limit_conn, geo, split_clients, upstream hash (differential)', () => {
  let echo: Server;
  let echoPort = 0;
  const named: Server[] = [];
  const namedPorts: number[] = [];

  before(async () => {
    echoPort = await freePort();
    echo = createServer({ allowHalfOpen: true }, (s) => {
      s.on('data', (d) => s.write(d.toString('latin1').replace(/foo/g, 'bar')));
      s.on('end', () => s.end());
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => echo.listen(echoPort, '127.0.0.1', resolve));
    for (const letter of ['A', 'B', 'C']) {
      const port = await freePort();
      const server = createServer((s) => {
        s.on('error', () => undefined);
        s.end(letter);
      });
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
      named.push(server);
      namedPorts.push(port);
    }
  });

  after(() => {
    echo.close();
    for (const s of named) s.close();
    cleanup();
  });

  it('refuses a second session of a client while the first is held (503, REJECTED, nginx\'s line), logs only with dry run', async () => {
    const run = await differential({
      extraPorts: 1,
      literals: { STREAM_MODULE: streamModulePath(), UP: echoPort },
      conf: ({ port, ports }) => `load_module ${streamModulePath()};\n${mainContext()}stream {
  log_format lc '$status $limit_conn_status';
  limit_conn_zone $binary_remote_addr zone=z:1m;
  access_log logs/lc.log lc;
  server { listen 127.0.0.1:${port}; limit_conn z 1; proxy_pass 127.0.0.1:${echoPort}; }
  server { listen 127.0.0.1:${ports[0]}; limit_conn z 1; limit_conn_dry_run on; limit_conn_log_level warn; proxy_pass 127.0.0.1:${echoPort}; }
}
`,
    }, async (s) => {
      // the start-up probes' sessions are done before the held one starts
      await new Promise((r) => setTimeout(r, 300));
      const skip = lines(s.prefix, 'logs/lc.log').length;
      const held = connect(s.port, '127.0.0.1');
      let heldOut = '';
      held.on('data', (d) => { heldOut += d.toString('latin1'); });
      const heldClosed = new Promise<void>((resolve) => held.on('close', () => resolve()));
      await new Promise<void>((resolve) => held.on('connect', () => resolve()));
      held.write('foo');
      for (let i = 0; i < 100 && heldOut !== 'bar'; i++) await new Promise((r) => setTimeout(r, 20));
      const refused = await tcpSession(s.port, ['foo'], [3]);
      const dryRun = await tcpSession(s.ports[0]!, ['foo'], [3]);
      held.end();
      await heldClosed;
      await new Promise((r) => setTimeout(r, 200));
      const again = await tcpSession(s.port, ['foo'], [3]);
      await new Promise((r) => setTimeout(r, 200));
      return { held: heldOut, refused, dryRun, again, access: lines(s.prefix, 'logs/lc.log').slice(skip) };
    });
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.deepEqual(run.nginx.result, {
      held: 'bar', refused: '', dryRun: 'bar', again: 'bar', access: ['503 REJECTED', '200 REJECTED_DRY_RUN', '200 PASSED', '200 PASSED'],
    });
    const limiting = (lines: readonly string[]): string[] => lines.filter((l) => l.includes('limiting connections'))
      .map((l) => l.replace(/server: 127\.0\.0\.1:\d+/, 'server: ADDR'));
    // (a start-up probe of the dry-run server may come while the main one's is counted)
    assert.deepEqual(limiting(run.jinx.errorLog).slice(-2), limiting(run.nginx.errorLog).slice(-2));
    assert.deepEqual(limiting(run.nginx.errorLog).slice(-2), [
      '[error] *CONN limiting connections by zone "z" while initializing session, client: 127.0.0.1, server: ADDR',
      '[warn] *CONN limiting connections, dry run, by zone "z" while initializing session, client: 127.0.0.1, server: ADDR',
    ]);
  });

  it('returns geo values (client address, a variable\'s, ranges) and split_clients parts as nginx', async () => {
    const run = await differential({
      literals: { STREAM_MODULE: streamModulePath() },
      conf: ({ port }) => `load_module ${streamModulePath()};\n${mainContext()}stream {
  geo $g1 { default none; 127.0.0.0/8 loop; 127.0.0.1/32 one; }
  map $protocol $addr { default 10.1.2.3; }
  geo $addr $g2 { ranges; default other; 10.0.0.0-10.255.255.255 ten; 10.1.0.0-10.1.255.255 ten-one; }
  geo $g3 { 10.0.0.0/8 x; }
  split_clients "alpha" $s1 { 10% a; 20% b; 30% c; * d; }
  split_clients "beta" $s2 { 10% a; 20% b; 30% c; * d; }
  split_clients "gamma" $s3 { 10% a; 20% b; 30% c; * d; }
  split_clients "delta" $s4 { 10% a; 20% b; 30% c; * d; }
  split_clients "\${protocol}x" $s5 { 0.5% a; 50% b; }
  server { listen 127.0.0.1:${port}; return "$g1 $g2 [$g3] $s1$s2$s3$s4 [$s5]\\n"; }
}
`,
    }, async (s) => ({ returned: await readAll(s.port) }));
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.match(run.nginx.result.returned, /^one ten-one \[\] [abcd]{4} \[[ab]?\]\n$/);
  });

  it('reads a PROXY protocol v2 header: its addresses and TLVs by name and by type, as nginx', async () => {
    const run = await differential({
      literals: { STREAM_MODULE: streamModulePath() },
      conf: ({ port }) => `load_module ${streamModulePath()};\n${mainContext()}stream {
  server {
    listen 127.0.0.1:${port} proxy_protocol;
    return "$proxy_protocol_addr:$proxy_protocol_port $proxy_protocol_server_addr:$proxy_protocol_server_port $proxy_protocol_tlv_alpn $proxy_protocol_tlv_authority $proxy_protocol_tlv_0x05 [$proxy_protocol_tlv_0x30] $proxy_protocol_tlv_ssl_version $proxy_protocol_tlv_ssl_cn $proxy_protocol_tlv_ssl_verify\\n";
  }
}
`,
    }, async (s) => ({ returned: await answerTo(s.port, proxyV2Header()) }));
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.equal(run.nginx.result.returned, '192.0.2.1:123 192.0.2.2:5678 h2 example.com id-7 [] TLSv1.3 client.example 0\n');
  });

  it('picks the upstream server by hash $k and hash $k consistent for eight keys as nginx', async () => {
    const keys = Array.from({ length: 8 }, (_, i) => `key${i * 7}`);
    const servers = namedPorts.map((p) => `server 127.0.0.1:${p};`).join(' ');
    const run = await differential({
      extraPorts: keys.length * 2 - 1,
      literals: { STREAM_MODULE: streamModulePath(), A: namedPorts[0]!, B: namedPorts[1]!, C: namedPorts[2]! },
      conf: ({ port, ports }) => {
        const all = [port, ...ports];
        const servers2 = keys.flatMap((k, i) => [
          `  server { listen 127.0.0.1:${all[i]}; set $k ${k}; proxy_pass h; }`,
          `  server { listen 127.0.0.1:${all[keys.length + i]}; set $k ${k}; proxy_pass ch; }`,
        ]);
        return `load_module ${streamModulePath()};\n${mainContext()}stream {
  upstream h { hash $k; ${servers} }
  upstream ch { hash $k consistent; zone ch 64k; ${servers} }
${servers2.join('\n')}
}
`;
      },
    }, async (s) => {
      const all = [s.port, ...s.ports];
      const pick = async (offset: number): Promise<string> => {
        let out = '';
        for (let i = 0; i < keys.length; i++) out += await readAll(all[offset + i]!);
        return out;
      };
      return { hash: await pick(0), chash: await pick(keys.length), chashAgain: await pick(keys.length) };
    });
    // hash: crc32 of the key over the servers in order, whatever their ports
    assert.equal(run.jinx.result.hash, run.nginx.result.hash);
    assert.equal(run.jinx.result.chashAgain, run.jinx.result.chash);
    assert.equal(new Set(run.jinx.result.hash).size, 3);
    // the consistent ring hashes the servers' addresses: the same picks as nginx's live ones, on the same ports
    if (ORACLE) assert.equal(run.jinx.result.chash, run.nginx.result.chash);
  });
});
