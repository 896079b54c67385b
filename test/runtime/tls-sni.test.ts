/**
 * TLS termination, differential against nginx: several servers on one
 * address with their own certificates (RSA and ECDSA, made with openssl at
 * test time), the certificate chosen by SNI and the server by Host, the
 * default server for unknown or missing SNI, nginx's 421 when Host names a
 * server that requires client certificates other than the one negotiated,
 * `ssl_reject_handshake` for unknown names, plain HTTP sent to the TLS port,
 * the `$ssl_*` variables, and encrypted keys with `ssl_password_file`.
 */
import { strict as assert } from 'node:assert';
import { spawnSync } from 'node:child_process';
import { request } from 'node:https';
import { connect, type TLSSocket } from 'node:tls';
import { after, describe, it } from 'node:test';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cleanup, hasCommand, tempDir } from '../helpers/harness.js';
import { compareConfigTest, type Comparison } from '../helpers/config-test.js';
import { selfSigned } from '../helpers/pki.js';
import { NO_ORACLE, assertSameAsNginx, differential, httpConf, normalizeBody, parseRaw, rawExchange } from '../helpers/differential.js';

/** What a client saw of one HTTPS request: the certificate's CN, status and body; or the TLS error. */
interface TlsSeen {
  readonly cert?: string;
  readonly status?: number;
  readonly body?: string;
  readonly error?: string;
}

function get(port: number, servername: string | undefined, host: string, path = '/'): Promise<TlsSeen> {
  return new Promise((resolve) => {
    const req = request({
      host: '127.0.0.1', port, path, servername: servername ?? '', rejectUnauthorized: false, agent: false, headers: { Host: host, Connection: 'close' },
    }, (res) => {
      const cert = (res.socket as TLSSocket).getPeerCertificate().subject?.CN as string | undefined;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ cert, status: res.statusCode, body: normalizeBody(Buffer.concat(chunks).toString()) }));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve({ error: err.code ?? err.message }));
    req.end();
  });
}

/**
 * Whether a TLS handshake with `servername` completes. A refused one fails
 * with nginx's alert `unrecognized_name`, with a reset from jinx (see README).
 */
function handshake(port: number, servername: string): Promise<'completed' | 'failed'> {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false });
    s.on('secureConnect', () => {
      resolve('completed');
      s.destroy();
    });
    s.on('error', () => resolve('failed'));
  });
}

const NO_OPENSSL = hasCommand('openssl') ? false : 'no openssl command';

describe('TLS termination with SNI (differential)', { skip: NO_ORACLE || NO_OPENSSL }, () => {
  after(cleanup);

  it('picks the certificate by SNI and the server by Host, answers 421 across client-certificate servers, and rejects unknown names with ssl_reject_handshake', async () => {
    const files: Record<string, string> = {};
    for (const [name, kind] of [['a.test', 'rsa'], ['b.test', 'ec'], ['c.test', 'ec'], ['known.test', 'ec']] as const) {
      const { cert, key } = selfSigned(name, kind);
      files[`certs/${name}.pem`] = cert;
      files[`certs/${name}.key`] = key;
    }
    const cert = (name: string): string => `ssl_certificate certs/${name}.pem; ssl_certificate_key certs/${name}.key;`;
    const answer = (id: string): string => `return 200 "${id} sni=$ssl_server_name host=$host proto=$ssl_protocol https=$https\\n";`;
    const run = await differential({
      extraPorts: 1,
      files,
      conf: ({ port, ports }) => httpConf(`
  server { listen 127.0.0.1:${port} ssl default_server; server_name a.test; ${cert('a.test')} ${answer('a')} }
  server { listen 127.0.0.1:${port} ssl; server_name b.test; ${cert('b.test')} ${answer('b')} }
  server { listen 127.0.0.1:${port} ssl; server_name c.test; ${cert('c.test')}
    ssl_verify_client optional; ssl_client_certificate certs/c.test.pem; ${answer('c')} }
  server { listen 127.0.0.1:${ports[0]} ssl default_server; ssl_reject_handshake on; }
  server { listen 127.0.0.1:${ports[0]} ssl; server_name known.test; ${cert('known.test')} ${answer('known')} }`),
    }, async (s) => ({
      a: await get(s.port, 'a.test', 'a.test'),
      b: await get(s.port, 'b.test', 'b.test'),
      unknownSni: await get(s.port, 'unknown.test', 'unknown.test'),
      noSni: await get(s.port, undefined, 'b.test'),
      hostDiffers: await get(s.port, 'a.test', 'b.test'),
      verifyingHost: await get(s.port, 'a.test', 'c.test'),
      rejected: await handshake(s.ports[0]!, 'unknown.test'),
      known: await get(s.ports[0]!, 'known.test', 'known.test'),
      plain: parseRaw(await rawExchange(s.port, 'GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n'))?.status,
    }));
    const n = run.nginx.result;
    assert.deepEqual(n.a, { cert: 'a.test', status: 200, body: 'a sni=a.test host=a.test proto=TLSv1.3 https=on\n' });
    assert.equal(n.b.cert, 'b.test');
    assert.deepEqual([n.unknownSni.cert, n.unknownSni.body?.split(' ')[0]], ['a.test', 'a']);
    assert.deepEqual([n.noSni.cert, n.noSni.body?.split(' ')[0]], ['a.test', 'b']);
    assert.deepEqual([n.hostDiffers.cert, n.hostDiffers.body?.split(' ')[0]], ['a.test', 'b']);
    assert.equal(n.verifyingHost.status, 421);
    assert.equal(n.rejected, 'failed');
    assert.equal(n.known.status, 200);
    assert.equal(n.plain, 400);
    assertSameAsNginx(run);
  });
  it('opens an encrypted certificate key with ssl_password_file, and refuses wrong or missing passphrases with nginx\'s [emerg]', async () => {
    const dir = tempDir('jinx-pw-');
    const made = spawnSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-passout', 'pass:right', '-days', '2', '-subj', '/CN=pw.test',
      '-keyout', 'enc.key', '-out', 'enc.pem'], { cwd: dir, encoding: 'utf8' });
    assert.equal(made.status, 0, made.stderr);
    writeFileSync(join(dir, 'good.txt'), 'wrong\nright\n');
    writeFileSync(join(dir, 'bad.txt'), 'wrong\n');
    mkdirSync(join(dir, 'logs'));
    const conf = (passwords: string): string => `daemon off; error_log logs/error.log; pid logs/nginx.pid; events {}
http { access_log off;
  server { listen 127.0.0.1:1; ssl_certificate enc.pem; ssl_certificate_key enc.key; ${passwords} }
}
`;
    const outcomes: Record<string, Comparison> = {};
    for (const [name, line] of [['good', 'ssl_password_file good.txt;'], ['bad', 'ssl_password_file bad.txt;'], ['none', '']] as const) {
      writeFileSync(join(dir, `${name}.conf`), conf(line));
      outcomes[name] = compareConfigTest(dir, join(dir, `${name}.conf`), { hidePrefix: dir });
    }
    assert.equal(outcomes.good!.nginx!.status, 0);
    assert.equal(outcomes.bad!.nginx!.status, 1);
    assert.ok(outcomes.bad!.nginx!.lines.some((l) => l.includes('cannot load certificate key "PREFIX/enc.key": PEM_read_bio_PrivateKey() failed (SSL: error:1C800064:Provider routines::bad decrypt')));
    assert.equal(outcomes.none!.nginx!.status, 1);
    // without a password file OpenSSL prompts on stderr twice (no terminal answers); jinx has nothing to prompt
    const noPrompt = (o: Comparison['jinx']): Comparison['jinx'] => ({ ...o, lines: o.lines.filter((l) => l !== 'Enter PEM pass phrase:') });
    for (const name of Object.keys(outcomes)) assert.deepEqual(outcomes[name]!.jinx, noPrompt(outcomes[name]!.nginx!), name);
  });
});
