/**
 * `listen … proxy_protocol`, differential against nginx: PROXY protocol
 * v1 and v2 headers before HTTP and before a TLS handshake, the
 * `$proxy_protocol_*` variables (TLVs included), `real_ip_header
 * proxy_protocol` for `$remote_addr`, `allow`/`deny` and the access log,
 * and the error-log lines of broken headers.
 */
import { strict as assert } from 'node:assert';
import { connect } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { after, describe, it } from 'node:test';
import { cleanup } from '../helpers/harness.js';
import { selfSigned } from '../helpers/pki.js';
import { assertSameAsNginx, differential, httpConf, parseRaw, snap, type Snap } from '../helpers/differential.js';

/** The v2 signature and the PROXY command (version 2). */
const V2 = Buffer.concat([Buffer.from('\r\n\r\n\0\r\nQUIT\n', 'latin1'), Buffer.from([0x21])]);

/** A TLV: type, length, value. */
const tlv = (type: number, value: Buffer | string): Buffer => {
  const v = typeof value === 'string' ? Buffer.from(value, 'latin1') : value;
  return Buffer.concat([Buffer.from([type, v.length >> 8, v.length & 0xff]), v]);
};

/** A v2 header: family/transport byte, then the addresses and TLVs. */
const v2 = (familyTransport: number, body: Buffer): Buffer =>
  Buffer.concat([V2, Buffer.from([familyTransport, body.length >> 8, body.length & 0xff]), body]);

const ipv4 = (a: string): Buffer => Buffer.from(a.split('.').map(Number));
const port = (p: number): Buffer => Buffer.from([p >> 8, p & 0xff]);

/** 192.0.2.1:123 → 192.0.2.2:5678 with ALPN, authority, a unique id and an SSL TLV (verify 0, TLSv1.3, CN). */
const TCP4_TLVS = v2(0x11, Buffer.concat([
  ipv4('192.0.2.1'), ipv4('192.0.2.2'), port(123), port(5678),
  tlv(0x01, 'h2'), tlv(0x02, 'example.test'), tlv(0x05, 'id-1'),
  tlv(0x20, Buffer.concat([Buffer.from([0x01, 0, 0, 0, 7]), tlv(0x21, 'TLSv1.3'), tlv(0x22, 'client.test')])),
]));
/** 2001:db8::1:123 → 2001:db8::2:5678. */
const TCP6 = v2(0x21, Buffer.concat([
  Buffer.from('20010db8000000000000000000000001', 'hex'), Buffer.from('20010db8000000000000000000000002', 'hex'), port(123), port(5678),
]));

/** Sends `bytes` to 127.0.0.1:port and parses the response (undefined when the connection closed without one). */
function exchange(p: number, bytes: Buffer): Promise<Snap | undefined> {
  return new Promise((resolve, reject) => {
    const s = connect({ host: '127.0.0.1', port: p }, () => s.write(bytes));
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => s.destroy(), 5000);
    s.on('data', (c: Buffer) => chunks.push(c));
    s.on('error', (err: NodeJS.ErrnoException) => (err.code === 'ECONNRESET' ? undefined : reject(err)));
    s.on('close', () => {
      clearTimeout(timer);
      const parsed = parseRaw(Buffer.concat(chunks).toString('latin1'));
      resolve(parsed && snap(parsed, 'nginx'));
    });
  });
}

/** A PROXY header, then a TLS handshake and one request over it. */
function tlsExchange(p: number, header: Buffer, path: string): Promise<Snap | undefined> {
  return new Promise((resolve, reject) => {
    const raw = connect({ host: '127.0.0.1', port: p }, () => {
      raw.write(header);
      const s = tlsConnect({ socket: raw, rejectUnauthorized: false, servername: 'pp.test' }, () => {
        s.write(`GET ${path} HTTP/1.0\r\nHost: pp.test\r\n\r\n`);
      });
      const chunks: Buffer[] = [];
      s.on('data', (c: Buffer) => chunks.push(c));
      s.on('error', reject);
      s.on('close', () => {
        const parsed = parseRaw(Buffer.concat(chunks).toString('latin1'));
        resolve(parsed && snap(parsed, 'nginx'));
      });
    });
    raw.on('error', reject);
  });
}

const SHOW = `add_header X-IP "$remote_addr!$remote_port" always;
    add_header X-PP "$proxy_protocol_addr!$proxy_protocol_port" always;
    add_header X-PPS "$proxy_protocol_server_addr!$proxy_protocol_server_port" always;
    add_header X-TLV "$proxy_protocol_tlv_alpn|$proxy_protocol_tlv_authority|$proxy_protocol_tlv_unique_id|$proxy_protocol_tlv_0x05|$proxy_protocol_tlv_ssl_version|$proxy_protocol_tlv_ssl_cn|$proxy_protocol_tlv_ssl_verify" always;`;

describe('PROXY protocol (differential)', () => {
  after(cleanup);

  it('reads v1 and v2 headers, sets $proxy_protocol_* and, with real_ip_header proxy_protocol, the client address; logs broken headers', async () => {
    const { cert, key } = selfSigned('pp.test');
    const run = await differential({
      conf: ({ port, ports }) => httpConf(`
  log_format pp "$remote_addr:$remote_port $proxy_protocol_addr";
  server { listen 127.0.0.1:${port} proxy_protocol; listen 127.0.0.1:${ports[0]} ssl proxy_protocol; server_name pp.test; root html;
    ssl_certificate certs/pp.pem; ssl_certificate_key certs/pp.key;
    set_real_ip_from 127.0.0.1/32;
    ${SHOW}
    location / { try_files /ok.txt =404; }
    location /real { real_ip_header proxy_protocol; access_log logs/pp.log pp; try_files /ok.txt =404; }
    location /deny { real_ip_header proxy_protocol; deny 192.0.2.0/24; try_files /ok.txt =404; }
  }`, { level: 'info' }),
      files: { 'html/ok.txt': 'ok\n', 'certs/pp.pem': cert, 'certs/pp.key': key },
      extraPorts: 1,
    }, async (s) => {
      const get = (path: string): Buffer => Buffer.from(`GET ${path} HTTP/1.0\r\nHost: pp.test\r\n\r\n`, 'latin1');
      const out: Record<string, Snap | undefined> = {};
      const headers: Record<string, Buffer> = {
        tcp4: Buffer.from('PROXY TCP4 192.0.2.1 192.0.2.2 123 5678\r\n', 'latin1'),
        tcp6: Buffer.from('PROXY TCP6 2001:DB8::1 2001:DB8::2 123 5678\r\n', 'latin1'),
        unknown: Buffer.from('PROXY UNKNOWN whatever\r\n', 'latin1'),
        v2tlvs: TCP4_TLVS,
        v2tcp6: TCP6,
        v2local: v2(0x00, Buffer.alloc(0)),
        v2unspec: v2(0x01, Buffer.alloc(0)),
      };
      for (const [name, header] of Object.entries(headers)) {
        for (const path of ['/', '/real', '/deny']) out[`${name} ${path}`] = await exchange(s.port, Buffer.concat([header, get(path)]));
      }
      out['tls tcp4 /real'] = await tlsExchange(s.ports[0]!, headers.tcp4!, '/real');
      out['tls v2 /'] = await tlsExchange(s.ports[0]!, TCP4_TLVS, '/');
      for (const [name, bad] of Object.entries({
        plain: 'GET / HTTP/1.0\r\nHost: pp.test\r\n\r\n',
        short: 'PROXY TCP4 192.0.2.1 192.0.2.2 123\r\n\r\n',
        badPort: 'PROXY TCP4 192.0.2.1 192.0.2.2 123 99999\r\n',
        badAddr: 'PROXY TCP4 192.0.2.x 192.0.2.2 123 5678\r\n',
        tcp5: 'PROXY TCP5 192.0.2.1 192.0.2.2 123 5678\r\n',
      })) {
        out[`broken ${name}`] = await exchange(s.port, Buffer.from(bad, 'latin1'));
      }
      out['v2 version 3'] = await exchange(s.port, Buffer.concat([V2.subarray(0, 12), Buffer.from([0x31, 0x11, 0, 0])]));
      out['v2 too large'] = await exchange(s.port, Buffer.concat([V2, Buffer.from([0x11, 0x10, 0]), Buffer.alloc(12)]));
      out['v2 short addresses'] = await exchange(s.port, Buffer.concat([v2(0x11, Buffer.alloc(4)), get('/')]));
      // the test client's own ports differ from run to run
      for (const [name, res] of Object.entries(out)) {
        const ip = res?.headers['x-ip'];
        if (res && ip?.startsWith('127.0.0.1!')) out[name] = { ...res, headers: { ...res.headers, 'x-ip': '127.0.0.1!PORT' } };
      }
      return out;
    });
    assertSameAsNginx(run);
    assert.equal(run.nginx.result['tcp4 /real']!.headers['x-ip'], '192.0.2.1!123');
    assert.equal(run.nginx.result['v2tlvs /']!.headers['x-tlv'], 'h2|example.test|id-1|id-1|TLSv1.3|client.test|7');
    assert.equal(run.nginx.result['tcp6 /deny']!.status, 200);
    assert.equal(run.nginx.result['tcp4 /deny']!.status, 403);
    assert.ok(run.nginx.errorLog.some((l) => l.includes('broken header: "GET / HTTP/1.0" while reading PROXY protocol')));
    const accessLog = (lines: readonly string[]): string[] => lines.map((l) => l.replace(/^127\.0\.0\.1:\d+/, '127.0.0.1:PORT'));
    assert.deepEqual(accessLog(run.jinx.file('logs/pp.log')), accessLog(run.nginx.file('logs/pp.log')));
  });
});
