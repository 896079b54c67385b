/**
 * TLS to upstream servers (`proxy_ssl_*`), differential against nginx, with
 * real HTTPS upstreams on 127.0.0.1 and certificates made by `openssl` for
 * the run (test/helpers/pki.ts): which SNI the upstream gets, what
 * `proxy_ssl_verify` accepts and the exact error line for what it refuses,
 * `proxy_ssl_verify_depth`, client certificates, protocol versions, session
 * resumption, and the `-t` errors of broken settings.
 *
 * nginx keeps one TLS session per upstream server and resumes it from any
 * location that proxies to it, even one with other `proxy_ssl_*` settings
 * (README, "Differences from nginx"): every location here has upstream
 * servers of its own, so that no case depends on another's session.
 */
import { strict as assert } from 'node:assert';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { compareConfigTestAsync } from '../helpers/config-test.js';
import { TEMP_PATHS, assertSameAsNginx, differential, httpConf, type Side } from '../helpers/differential.js';
import { cleanup, freePort, hasCommand, tempDir, writeFiles } from '../helpers/harness.js';
import { makePki, type Pki } from '../helpers/pki.js';
import { tlsUpstream, type TlsSeen, type TlsUpstream } from '../helpers/upstreams.js';

const skip = hasCommand('openssl') ? false : 'no openssl command';

let pki: Pki;

/** The certificates the configurations name, under the prefix (relative paths resolve against the configuration's directory). */
const certFiles = (): Record<string, string> => ({
  'certs/root.pem': pki.text('root.pem'),
  'certs/other-root.pem': pki.text('other-root.pem'),
  'certs/client.pem': pki.text('client.pem'),
  'certs/client.key': pki.text('client.key'),
  'certs/leaf.key': pki.text('leaf.key'),
});

/** An HTTPS upstream serving the certificate (chain) `name`. */
const upstream = (name: string, options: Parameters<typeof tlsUpstream>[0] = {}): Promise<TlsUpstream> =>
  tlsUpstream({ cert: pki.text(`${name}.pem`), key: pki.text(`${name}.key`), ...options });

/** What the client got for one request: the status, and for a 200 what the upstream saw of the TLS connection. */
interface Outcome {
  readonly status: number;
  readonly tls?: TlsSeen;
}

async function fetchSeen(s: Side, path: string, headers?: Record<string, string>): Promise<Outcome> {
  const r = await s.get(path, { headers });
  return r.status === 200 ? { status: 200, tls: JSON.parse(r.body) as TlsSeen } : { status: r.status };
}

/** Whether nginx logged a line starting with `[error] *CONN TEXT`. */
const logged = (lines: readonly string[], text: string): boolean => lines.some((l) => l.startsWith(`[error] *CONN ${text}`));

describe('upstream TLS (differential)', { skip }, () => {
  before(() => {
    pki = makePki()!;
  });
  after(cleanup);

  it('sends no SNI by default; with proxy_ssl_server_name on, proxy_ssl_name (port stripped, variables allowed) or the proxy_pass host, never an IP address', async () => {
    const up = await upstream('leaf');
    const run = await differential({
      conf: ({ port }) => httpConf(`  upstream backend.test { server 127.0.0.1:${up.port}; }
  server { listen 127.0.0.1:${port};
    location /default/ { proxy_pass https://127.0.0.1:${up.port}/; }
    location /ip/ { proxy_ssl_server_name on; proxy_pass https://127.0.0.1:${up.port}/; }
    location /upstream-off/ { proxy_pass https://backend.test/; }
    location /upstream/ { proxy_ssl_server_name on; proxy_pass https://backend.test/; }
    location /name/ { proxy_ssl_server_name on; proxy_ssl_name sni.backend.test:8443; proxy_pass https://127.0.0.1:${up.port}/; }
    location /variable/ { proxy_ssl_server_name on; proxy_ssl_name $http_x_backend; proxy_pass https://127.0.0.1:${up.port}/; }
  }`),
    }, async (s) => {
      const sni = async (path: string): Promise<string | false | number> => {
        const o = await fetchSeen(s, path, { 'X-Backend': 'var.backend.test' });
        return o.tls ? o.tls.sni : o.status;
      };
      return {
        default: await sni('/default/'), ip: await sni('/ip/'), upstreamOff: await sni('/upstream-off/'), upstream: await sni('/upstream/'),
        name: await sni('/name/'), variable: await sni('/variable/'),
      };
    });
    assert.deepEqual(run.nginx.result, {
      default: false, ip: false, upstreamOff: false, upstream: 'backend.test', name: 'sni.backend.test', variable: 'var.backend.test',
    });
    assertSameAsNginx(run);
  });

  it('proxy_ssl_verify on passes a certificate of the trusted CA whose DNS name matches, and answers 502 with nginx\'s line to a self-signed one, another CA\'s, or a name mismatch', async () => {
    const [good, ip, self, otherCa, mismatch, unverified] = await Promise.all([
      upstream('leaf'), upstream('leaf'), upstream('self'), upstream('leaf'), upstream('leaf'), upstream('self'),
    ]);
    const verify = 'proxy_ssl_verify on; proxy_ssl_trusted_certificate certs/root.pem;';
    const run = await differential({
      files: certFiles(),
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    location /good/ { ${verify} proxy_ssl_name backend.test; proxy_pass https://127.0.0.1:${good.port}/; }
    location /ip/ { ${verify} proxy_pass https://127.0.0.1:${ip.port}/; }
    location /self-signed/ { ${verify} proxy_ssl_name backend.test; proxy_pass https://127.0.0.1:${self.port}/; }
    location /other-ca/ { proxy_ssl_verify on; proxy_ssl_trusted_certificate certs/other-root.pem; proxy_ssl_name backend.test;
      proxy_pass https://127.0.0.1:${otherCa.port}/; }
    location /mismatch/ { ${verify} proxy_ssl_name other.test; proxy_pass https://127.0.0.1:${mismatch.port}/; }
    location /unverified/ { proxy_pass https://127.0.0.1:${unverified.port}/; }
  }`),
    }, async (s) => ({
      good: (await fetchSeen(s, '/good/')).status,
      ip: (await fetchSeen(s, '/ip/')).status,
      selfSigned: (await fetchSeen(s, '/self-signed/')).status,
      otherCa: (await fetchSeen(s, '/other-ca/')).status,
      mismatch: (await fetchSeen(s, '/mismatch/')).status,
      unverified: (await fetchSeen(s, '/unverified/')).status,
    }));
    assert.deepEqual(run.nginx.result, { good: 200, ip: 502, selfSigned: 502, otherCa: 502, mismatch: 502, unverified: 200 });
    const log = run.nginx.errorLog;
    // X509_check_host(): the certificate's IP address SAN does not count, the name is checked against DNS names
    assert.ok(logged(log, 'upstream SSL certificate does not match "127.0.0.1" while SSL handshaking to upstream'), log.join('\n'));
    assert.ok(logged(log, 'upstream SSL certificate verify error: (18:self-signed certificate) while SSL handshaking to upstream'));
    assert.ok(logged(log, 'upstream SSL certificate verify error: (21:unable to verify the first certificate) while SSL handshaking to upstream'));
    assert.ok(logged(log, 'upstream SSL certificate does not match "other.test" while SSL handshaking to upstream'));
    assertSameAsNginx(run);
  });

  it('proxy_ssl_verify_depth limits the chain: one intermediate needs the default 1, two need 2; a longer chain is 502 "(20:unable to get local issuer certificate)"', async () => {
    const [oneAtZero, oneAtDefault, twoAtDefault, twoAtTwo] = await Promise.all([
      upstream('chain1'), upstream('chain1'), upstream('chain2'), upstream('chain2'),
    ]);
    const verify = 'proxy_ssl_verify on; proxy_ssl_trusted_certificate certs/root.pem; proxy_ssl_name backend.test;';
    const run = await differential({
      files: certFiles(),
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    location /one-at-0/ { ${verify} proxy_ssl_verify_depth 0; proxy_pass https://127.0.0.1:${oneAtZero.port}/; }
    location /one-at-default/ { ${verify} proxy_pass https://127.0.0.1:${oneAtDefault.port}/; }
    location /two-at-default/ { ${verify} proxy_pass https://127.0.0.1:${twoAtDefault.port}/; }
    location /two-at-2/ { ${verify} proxy_ssl_verify_depth 2; proxy_pass https://127.0.0.1:${twoAtTwo.port}/; }
  }`),
    }, async (s) => ({
      oneAtZero: (await fetchSeen(s, '/one-at-0/')).status,
      oneAtDefault: (await fetchSeen(s, '/one-at-default/')).status,
      twoAtDefault: (await fetchSeen(s, '/two-at-default/')).status,
      twoAtTwo: (await fetchSeen(s, '/two-at-2/')).status,
    }));
    assert.deepEqual(run.nginx.result, { oneAtZero: 502, oneAtDefault: 200, twoAtDefault: 502, twoAtTwo: 200 });
    const failures = run.nginx.errorLog.filter((l) => l.startsWith('[error]'));
    assert.equal(failures.length, 2);
    assert.ok(failures.every((l) => l.startsWith('[error] *CONN upstream SSL certificate verify error: (20:unable to get local issuer certificate) while SSL handshaking to upstream')));
    assertSameAsNginx(run);
  });

  it('an upstream that requires a client certificate gets proxy_ssl_certificate; without one it is 502 with OpenSSL\'s alert (TLS 1.3: after the handshake, TLS 1.2: in it)', async () => {
    const mtls = { requestCert: true, rejectUnauthorized: true, ca: pki.text('root.pem') };
    const [withCert, without, without12, chosen] = await Promise.all([
      upstream('leaf', mtls), upstream('leaf', mtls), upstream('leaf', { ...mtls, maxVersion: 'TLSv1.2' }), upstream('leaf', mtls),
    ]);
    const run = await differential({
      files: certFiles(),
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    location /with/ { proxy_ssl_certificate certs/client.pem; proxy_ssl_certificate_key certs/client.key; proxy_pass https://127.0.0.1:${withCert.port}/; }
    location /without/ { proxy_pass https://127.0.0.1:${without.port}/; }
    location /without-tls12/ { proxy_pass https://127.0.0.1:${without12.port}/; }
    location /chosen/ { proxy_ssl_certificate certs/$http_x_client.pem; proxy_ssl_certificate_key certs/$http_x_client.key;
      proxy_pass https://127.0.0.1:${chosen.port}/; }
  }`),
    }, async (s) => {
      const w = await fetchSeen(s, '/with/');
      const c = await fetchSeen(s, '/chosen/', { 'X-Client': 'client' });
      return {
        with: w.tls?.client ?? w.status,
        without: (await fetchSeen(s, '/without/')).status,
        without12: (await fetchSeen(s, '/without-tls12/')).status,
        chosen: c.tls?.client ?? c.status,
        chosenMissing: (await fetchSeen(s, '/chosen/', { 'X-Client': 'nobody' })).status,
      };
    });
    assert.deepEqual(run.nginx.result, { with: 'jinx-client', without: 502, without12: 502, chosen: 'jinx-client', chosenMissing: 500 });
    const log = run.nginx.errorLog;
    assert.ok(logged(log, 'SSL_read() failed (SSL: error:0A00045C:SSL routines::tlsv13 alert certificate required:SSL alert number 116) while reading response header from upstream'), log.join('\n'));
    assert.ok(logged(log, 'SSL_do_handshake() failed (SSL: error:0A000410:SSL routines::ssl/tls alert handshake failure:SSL alert number 40) while SSL handshaking to upstream'));
    assert.ok(logged(log, 'cannot load certificate "') && log.some((l) => l.includes('/certs/nobody.pem": BIO_new_file() failed') && l.includes('while connecting to upstream')));
    assertSameAsNginx(run);
  });

  it('proxy_ssl_protocols: TLSv1.2 against a TLS 1.3-only upstream, or TLSv1.3 against a TLS 1.2-only one, is 502 "SSL_do_handshake() failed (… protocol version …)"', async () => {
    const [only13, only12, any, any12] = await Promise.all([
      upstream('leaf', { minVersion: 'TLSv1.3' }), upstream('leaf', { maxVersion: 'TLSv1.2' }), upstream('leaf'), upstream('leaf'),
    ]);
    const run = await differential({
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    location /tls12-to-13/ { proxy_ssl_protocols TLSv1.2; proxy_pass https://127.0.0.1:${only13.port}/; }
    location /tls13-to-12/ { proxy_ssl_protocols TLSv1.3; proxy_pass https://127.0.0.1:${only12.port}/; }
    location /default/ { proxy_pass https://127.0.0.1:${any.port}/; }
    location /tls12/ { proxy_ssl_protocols TLSv1.2; proxy_pass https://127.0.0.1:${any12.port}/; }
  }`),
    }, async (s) => {
      const protocol = async (path: string): Promise<string | number | null> => {
        const o = await fetchSeen(s, path);
        return o.tls ? o.tls.protocol : o.status;
      };
      return { tls12To13: await protocol('/tls12-to-13/'), tls13To12: await protocol('/tls13-to-12/'), default: await protocol('/default/'), tls12: await protocol('/tls12/') };
    });
    assert.deepEqual(run.nginx.result, { tls12To13: 502, tls13To12: 502, default: 'TLSv1.3', tls12: 'TLSv1.2' });
    const failures = run.nginx.errorLog.filter((l) => l.startsWith('[error]'));
    assert.equal(failures.length, 2);
    assert.ok(failures.every((l) => l.startsWith(
      '[error] *CONN SSL_do_handshake() failed (SSL: error:0A00042E:SSL routines::tlsv1 alert protocol version:SSL alert number 70) while SSL handshaking to upstream',
    )), failures.join('\n'));
    assertSameAsNginx(run);
  });

  it('resumes the TLS session on the next connection (TLS 1.3 and 1.2), verifying the resumed session\'s certificate, and never with proxy_ssl_session_reuse off', async () => {
    const [tls13, tls12, off, verified] = await Promise.all([upstream('leaf'), upstream('leaf', { maxVersion: 'TLSv1.2' }), upstream('leaf'), upstream('leaf')]);
    const run = await differential({
      files: certFiles(),
      conf: ({ port }) => httpConf(`  server { listen 127.0.0.1:${port};
    location /verified/ { proxy_ssl_verify on; proxy_ssl_trusted_certificate certs/root.pem; proxy_ssl_name backend.test;
      proxy_pass https://127.0.0.1:${verified.port}/; }
    location /tls13/ { proxy_pass https://127.0.0.1:${tls13.port}/; }
    location /tls12/ { proxy_pass https://127.0.0.1:${tls12.port}/; }
    location /off/ { proxy_ssl_session_reuse off; proxy_pass https://127.0.0.1:${off.port}/; }
  }`, { oneWorker: true }),
    }, async (s) => {
      // no upstream keepalive: every request is a new connection
      const twice = async (path: string): Promise<(boolean | number)[]> => {
        const out: (boolean | number)[] = [];
        for (let i = 0; i < 2; i++) {
          const o = await fetchSeen(s, path);
          out.push(o.tls ? o.tls.resumed : o.status);
        }
        return out;
      };
      return { tls13: await twice('/tls13/'), tls12: await twice('/tls12/'), off: await twice('/off/'), verified: await twice('/verified/') };
    });
    assert.deepEqual(run.nginx.result, { tls13: [false, true], tls12: [false, true], off: [false, false], verified: [false, true] });
    assertSameAsNginx(run);
  });
});

describe('upstream TLS settings, -t (differential)', { skip }, () => {
  before(() => {
    pki = makePki()!;
  });
  after(cleanup);

  /** `-t` of a configuration with one location; `location` is its body. */
  async function configTest(location: string): Promise<Awaited<ReturnType<typeof compareConfigTestAsync>>> {
    const dir = tempDir('jinx-tls-t-');
    mkdirSync(join(dir, 'tmp'));
    mkdirSync(join(dir, 'logs'));
    const port = await freePort();
    writeFiles(dir, {
      ...certFiles(),
      'nginx.conf': `pid logs/nginx.pid;\nerror_log logs/error.log;\nevents {}\nhttp {\n  ${TEMP_PATHS}\n  access_log off;\n`
        + `  server {\n    listen 127.0.0.1:${port};\n    location / {\n      ${location}\n    }\n  }\n}\n`,
    });
    return compareConfigTestAsync(dir, join(dir, 'nginx.conf'), { hidePrefix: dir });
  }

  const cases: readonly { readonly what: string; readonly location: string; readonly expect: string }[] = [
    {
      what: 'proxy_ssl_verify without proxy_ssl_trusted_certificate',
      location: 'proxy_ssl_verify on; proxy_pass https://127.0.0.1:1;',
      expect: '[emerg] no proxy_ssl_trusted_certificate for proxy_ssl_verify',
    },
    {
      what: 'a missing proxy_ssl_certificate file',
      location: 'proxy_ssl_certificate certs/missing.pem; proxy_ssl_certificate_key certs/client.key; proxy_pass https://127.0.0.1:1;',
      expect: '[emerg] cannot load certificate "PREFIX/certs/missing.pem": BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:calling fopen(PREFIX/certs/missing.pem, r) error:10000080:BIO routines::no such file)',
    },
    {
      what: 'a missing proxy_ssl_trusted_certificate file',
      location: 'proxy_ssl_verify on; proxy_ssl_trusted_certificate certs/missing-ca.pem; proxy_pass https://127.0.0.1:1;',
      expect: '[emerg] cannot load certificate "PREFIX/certs/missing-ca.pem": BIO_new_file() failed (SSL: error:80000002:system library::No such file or directory:calling fopen(PREFIX/certs/missing-ca.pem, r) error:10000080:BIO routines::no such file)',
    },
    {
      what: 'a certificate without proxy_ssl_certificate_key',
      location: 'proxy_ssl_certificate certs/client.pem; proxy_pass https://127.0.0.1:1;',
      expect: '[emerg] no "proxy_ssl_certificate_key" is defined for certificate "certs/client.pem"',
    },
    {
      what: 'a key that is not the certificate\'s',
      location: 'proxy_ssl_certificate certs/client.pem; proxy_ssl_certificate_key certs/leaf.key; proxy_pass https://127.0.0.1:1;',
      expect: '[emerg] SSL_CTX_use_PrivateKey("PREFIX/certs/leaf.key") failed (SSL: error:05800074:x509 certificate routines::key values mismatch)',
    },
    {
      what: 'a key file that holds no key',
      location: 'proxy_ssl_certificate certs/client.pem; proxy_ssl_certificate_key certs/root.pem; proxy_pass https://127.0.0.1:1;',
      expect: '[emerg] cannot load certificate key "PREFIX/certs/root.pem": PEM_read_bio_PrivateKey() failed (SSL: error:1E08010C:DECODER routines::unsupported:No supported data to decode. Input type: PEM)',
    },
    {
      what: 'a cipher list OpenSSL does not know',
      location: 'proxy_ssl_ciphers NO-SUCH-CIPHER; proxy_pass https://127.0.0.1:1;',
      expect: '[emerg] SSL_CTX_set_cipher_list("NO-SUCH-CIPHER") failed (SSL: error:0A0000B9:SSL routines::no cipher match)',
    },
    {
      what: 'broken settings with a plain http:// proxy_pass (not read)',
      location: 'proxy_ssl_verify on; proxy_ssl_certificate certs/missing.pem; proxy_ssl_ciphers NO-SUCH-CIPHER; proxy_pass http://127.0.0.1:1;',
      expect: 'nginx: the configuration file PREFIX/nginx.conf syntax is ok',
    },
  ];

  for (const c of cases) {
    it(`-t: ${c.what} is "${c.expect.slice(0, 60)}…" as in nginx`, async () => {
      const { jinx, nginx } = await configTest(c.location);
      assert.equal(nginx!.lines[0], c.expect, `nginx printed:\n${nginx!.lines.join('\n')}`);
      assert.deepEqual(jinx, nginx);
    });
  }
});
