/**
 * The `$ssl_*` variables of nginx's ssl module, differential against
 * nginx: a server answers with all of them, and is asked over TLS 1.3 and
 * 1.2, with and without a client certificate (certificates made for the run
 * with openssl, test/helpers/pki.ts, one with an awkward subject), on new and
 * resumed sessions, over HTTP/2, and over plain HTTP. Each variable is
 * compared with nginx's, except:
 * - `$ssl_session_id`, different on every side and session: 64 hex digits
 *   (none for a new TLS 1.2 session, which gets a ticket), the same for two
 *   requests on one connection; each side's ids are numbered in the order
 *   they first appear (`session N`, see `numberSessions`), so that nginx's
 *   recorded answer holds no id of one run;
 * - `$ssl_curve`: each server's own TLS library picks the group, so each is
 *   checked against what its client negotiated (they agree but where
 *   Node.js's OpenSSL 3.0 and nginx's prefer different groups);
 * - `$ssl_sigalg`, `$ssl_client_sigalg`: nginx's OpenSSL (3.5 or later)
 *   names the signature algorithms, jinx leaves them empty, as nginx does
 *   with an older OpenSSL (README, "Differences from nginx").
 *
 * The certificates are made for each run: what nginx prints of them (serial,
 * fingerprint, the three PEM forms) is recorded as literals computed from
 * the certificate files (`certificateLiterals`); the validity dates, and
 * `$ssl_client_v_remain` (days left as of each side's request), are checked
 * against the presented certificate's (`validity`).
 */
import { strict as assert } from 'node:assert';
import { request, Agent, type RequestOptions } from 'node:https';
import { connect as h2connect } from 'node:http2';
import type { ConnectionOptions, TLSSocket } from 'node:tls';
import { X509Certificate } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { compareConfigTest } from '../helpers/config-test.js';
import { differential, httpConf, type Side, type SideResult } from '../helpers/differential.js';
import { cleanup, hasCommand, tempDir } from '../helpers/harness.js';
import { issueClientCertificate, makePki, selfSigned, type Pki } from '../helpers/pki.js';

const skip = hasCommand('openssl') ? false : 'no openssl command';

/** nginx 1.30's `ngx_http_ssl_vars`, in its order. */
const VARIABLES = [
  'ssl_protocol', 'ssl_cipher', 'ssl_ciphers', 'ssl_curve', 'ssl_curves', 'ssl_sigalg', 'ssl_session_id', 'ssl_session_reused',
  'ssl_early_data', 'ssl_server_name', 'ssl_alpn_protocol', 'ssl_ech_status', 'ssl_ech_outer_server_name', 'ssl_client_cert',
  'ssl_client_raw_cert', 'ssl_client_escaped_cert', 'ssl_client_s_dn', 'ssl_client_i_dn', 'ssl_client_s_dn_legacy',
  'ssl_client_i_dn_legacy', 'ssl_client_serial', 'ssl_client_fingerprint', 'ssl_client_verify', 'ssl_client_v_start',
  'ssl_client_v_end', 'ssl_client_v_remain', 'ssl_client_sigalg',
] as const;
type Fields = Record<(typeof VARIABLES)[number], string>;

/** The answer: every variable, `|||` between them (PEM text has newlines). */
const ANSWER = `return 200 "${VARIABLES.map((v) => `$${v}`).join('|||')}";`;
/** The answer, and a few of the variables in the access log. */
const ANSWER_LOGGED = `access_log logs/vars.log vars; ${ANSWER}`;

/** A subject with what RFC 2253 and the legacy form escape: specials, a leading `#`, UTF-8, a multi-valued RDN. */
const ODD_SUBJECT = '/DC=test/DC=jinx/C=DE/O=Ünïcode GmbH/OU=R&D+OU=Ops/CN=#1 "quoted", a\\+b; <x> \\\\ back\\/slash/serialNumber=42/emailAddress=odd@x.test';

/** What the client saw of one request. */
interface Seen {
  readonly status: number;
  readonly fields: Fields | undefined;
  /** The group of the key exchange as the client saw it (`getEphemeralKeyInfo`). */
  readonly group: string | undefined;
}

function parseFields(body: string): Fields | undefined {
  const parts = body.split('|||');
  if (parts.length !== VARIABLES.length) return undefined;
  return Object.fromEntries(VARIABLES.map((v, i) => [v, parts[i]!])) as Fields;
}

/**
 * Another, made by an openssl configuration: a BMPString (a character above
 * U+00FF) and a T61String (Latin-1), an attribute type OpenSSL has no name
 * for, a value starting with `#`.
 */
const ODD_CONFIG = `oid_section = new_oids
[new_oids]
jinxAttribute = 1.2.3.4.5
[req]
prompt = no
distinguished_name = dn
string_mask = default
utf8 = yes
[dn]
CN = Ωmega Ünïcode
O = Ürban
jinxAttribute = custom value
L = \\#start
`;

let pki: Pki;

interface ClientOptions {
  readonly port: number;
  /** A certificate of the PKI (`NAME.pem`/`NAME.key`) to offer. */
  readonly cert?: string;
  readonly maxVersion?: 'TLSv1.2' | 'TLSv1.3';
  readonly ecdhCurve?: string;
  readonly session?: Buffer;
  readonly agent?: Agent;
}

/** The group of a client socket's key exchange (`X25519`, `prime256v1` …). */
const groupOf = (socket: TLSSocket): string | undefined => (socket.getEphemeralKeyInfo() as { name?: string } | null)?.name;

/** nginx's `$ssl_client_v_remain` at `now` (seconds) for a certificate valid until `end`: whole days left, 0 for less than one. */
const daysLeft = (end: number, now: number): number => (end < now + 86400 ? 0 : Math.floor((end - now) / 86400));

/**
 * A client certificate's validity as the server printed it, for a request
 * sent at `sent` and answered by `done` (ms): the fields
 * `$ssl_client_v_start` and `$ssl_client_v_end` of `fields` become
 * `(validFrom of NAME.pem)` / `(validTo of NAME.pem)` where they are the
 * certificate `NAME.pem`'s dates in nginx's form (`Nov 26 14:47:03 2026
 * GMT`, OpenSSL's `ASN1_TIME_print`, as `X509Certificate` gives them), and
 * `$ssl_client_v_remain` becomes `(days left of NAME.pem)` where it is the
 * days left (`daysLeft`) at a second from one before `sent` to `done`;
 * each stays as printed otherwise. The certificates are made for the run (so
 * are their dates), and two of them may share a date or not from one run to
 * the next: a literal of differential() would not hold.
 */
function validity(fields: Fields, cert: string, sent: number, done: number): Fields {
  const x = new X509Certificate(pki.text(`${cert}.pem`));
  const out = { ...fields };
  if (out.ssl_client_v_start === x.validFrom) out.ssl_client_v_start = `(validFrom of ${cert}.pem)`;
  if (out.ssl_client_v_end === x.validTo) out.ssl_client_v_end = `(validTo of ${cert}.pem)`;
  const end = Date.parse(x.validTo) / 1000;
  assert.ok(Number.isInteger(end), `${cert}.pem: validTo ${x.validTo}`);
  const days = new Set([daysLeft(end, Math.floor(sent / 1000) - 1), daysLeft(end, Math.floor(done / 1000))].map(String));
  if (days.has(out.ssl_client_v_remain)) out.ssl_client_v_remain = `(days left of ${cert}.pem)`;
  return out;
}

/** One HTTPS request with SNI `vars.test`; also returns the session to resume. */
function tlsGet(o: ClientOptions): Promise<Seen & { readonly session: Buffer | undefined }> {
  const sent = Date.now();
  return new Promise((resolve, reject) => {
    const opts: RequestOptions & ConnectionOptions = {
      host: '127.0.0.1', port: o.port, path: '/', servername: 'vars.test', headers: { Host: 'vars.test' }, rejectUnauthorized: false,
      ALPNProtocols: ['http/1.1'], agent: o.agent ?? false, maxVersion: o.maxVersion, ecdhCurve: o.ecdhCurve, session: o.session,
      ...(o.cert ? { cert: pki.text(`${o.cert}.pem`), key: pki.text(`${o.cert}.key`) } : {}),
    };
    const req = request(opts, (res) => {
      const socket = res.socket as TLSSocket;
      const group = groupOf(socket);
      const session = socket.getSession();
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        const fields = parseFields(body);
        resolve({ status: res.statusCode ?? 0, fields: fields && o.cert ? validity(fields, o.cert, sent, Date.now()) : fields, group, session });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** One HTTP/2 request (ALPN `h2`). */
function h2Get(port: number): Promise<Seen> {
  return new Promise((resolve, reject) => {
    const session = h2connect(`https://127.0.0.1:${port}`, { servername: 'vars.test', rejectUnauthorized: false });
    session.on('error', reject);
    const stream = session.request({ ':path': '/', ':authority': 'vars.test' });
    let body = '';
    let status = 0;
    stream.setEncoding('latin1');
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.on('data', (c: string) => (body += c));
    stream.on('end', () => {
      const group = groupOf(session.socket as TLSSocket);
      session.close();
      resolve({ status, fields: parseFields(body), group });
    });
    stream.on('error', reject);
  });
}

/**
 * A TCP relay to 127.0.0.1:`port` that passes the client's first bytes on
 * in two pieces, 50 ms apart: a ClientHello that arrives in two reads.
 */
async function splittingRelay(port: number): Promise<{ readonly port: number; close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect({ host: '127.0.0.1', port });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    upstream.pipe(client);
    client.once('data', (first: Buffer) => {
      client.pause();
      upstream.write(first.subarray(0, 40));
      setTimeout(() => {
        upstream.write(first.subarray(40));
        client.pipe(upstream);
      }, 50);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => {
      for (const s of sockets) s.destroy();
      server.close(() => resolve());
    }),
  };
}

/** What one server saw, request by request. */
interface Run {
  readonly plain: Seen;
  readonly noCert: Seen;
  /** Two requests on one kept-alive connection. */
  readonly keptAlive: readonly [Seen, Seen];
  readonly tls13Cert: Seen;
  readonly tls13Resumed: Seen;
  readonly tls12Cert: Seen;
  readonly tls12Resumed: Seen;
  readonly oddCert: Seen;
  readonly oddConfigCert: Seen;
  /** A ClientHello that arrived in two pieces. */
  readonly split: Seen;
  readonly selfSignedNoCa: Seen;
  readonly selfSignedOptional: Seen;
  readonly http2: Seen;
  readonly p384: Seen;
  readonly serverPreference: Seen;
}

/** What the client saw, without the session (each run's own). */
const seen = ({ status, fields, group }: Seen): Seen => ({ status, fields, group });

/**
 * Replaces each `$ssl_session_id` of 64 hex digits by `session N`, N
 * numbering the distinct ids in the order they first appear (a request of
 * the run, in `Run`'s order); another value stays as it is.
 */
function numberSessions(run: Run): Run {
  const ids = new Map<string, string>();
  const all = Object.values(run).flatMap((v: Seen | readonly Seen[]) => (Array.isArray(v) ? v : [v]) as Seen[]);
  for (const s of all) {
    const id = s.fields?.ssl_session_id;
    if (id === undefined || !/^[0-9a-f]{64}$/.test(id)) continue;
    if (!ids.has(id)) ids.set(id, `session ${ids.size + 1}`);
    s.fields!.ssl_session_id = ids.get(id)!;
  }
  return run;
}

async function scenario(s: Side): Promise<Run> {
  const [rsaPort, plainPort] = s.ports as [number, number];
  const plainResponse = await s.get('/', { port: plainPort });
  const plain = { status: plainResponse.status, fields: parseFields(plainResponse.body), group: undefined };
  const noCert = await tlsGet({ port: s.port });
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const keptAlive = [await tlsGet({ port: s.port, agent }), await tlsGet({ port: s.port, agent })] as const;
  agent.destroy();
  const tls13Cert = await tlsGet({ port: s.port, cert: 'client' });
  const tls13Resumed = await tlsGet({ port: s.port, cert: 'client', session: tls13Cert.session });
  const tls12Cert = await tlsGet({ port: s.port, cert: 'client', maxVersion: 'TLSv1.2' });
  const tls12Resumed = await tlsGet({ port: s.port, cert: 'client', maxVersion: 'TLSv1.2', session: tls12Cert.session });
  const relay = await splittingRelay(s.port);
  const split = await tlsGet({ port: relay.port });
  await relay.close();
  return numberSessions({
    plain,
    noCert: seen(noCert),
    keptAlive: [seen(keptAlive[0]), seen(keptAlive[1])],
    tls13Cert: seen(tls13Cert),
    tls13Resumed: seen(tls13Resumed),
    tls12Cert: seen(tls12Cert),
    tls12Resumed: seen(tls12Resumed),
    split: seen(split),
    oddCert: seen(await tlsGet({ port: s.port, cert: 'odd' })),
    oddConfigCert: seen(await tlsGet({ port: s.port, cert: 'odd-config' })),
    selfSignedNoCa: seen(await tlsGet({ port: rsaPort, cert: 'self' })),
    selfSignedOptional: seen(await tlsGet({ port: s.port, cert: 'self' })),
    http2: await h2Get(rsaPort),
    p384: seen(await tlsGet({ port: s.port, ecdhCurve: 'P-384' })),
    serverPreference: seen(await tlsGet({ port: rsaPort, maxVersion: 'TLSv1.2', ecdhCurve: 'P-384:P-521' })),
  });
}

/** The variables that must be the same on both sides. */
const COMPARED = VARIABLES.filter((v) => !['ssl_session_id', 'ssl_curve', 'ssl_sigalg', 'ssl_client_sigalg'].includes(v));

/**
 * Compares one request's variables between nginx and jinx, as the file's
 * comment says. A resumed TLS 1.2 session has no key exchange: its
 * `$ssl_curve` is the group of the session's first handshake, on both sides.
 */
function assertSameVariables(name: string, n: Seen, j: Seen, curve: 'negotiated' | 'of the session' = 'negotiated'): void {
  assert.equal(j.status, n.status, `${name}: status`);
  if (!n.fields || !j.fields) {
    assert.equal(j.fields, n.fields, `${name}: fields`);
    return;
  }
  for (const v of COMPARED) assert.equal(j.fields[v], n.fields[v], `${name}: $${v}`);
  for (const side of [n, j]) {
    assert.match(side.fields!.ssl_session_id, /^(session \d+)?$/, `${name}: $ssl_session_id (64 hex digits, numbered)`);
    if (curve === 'negotiated') assert.equal(side.fields!.ssl_curve, side.group ?? '', `${name}: $ssl_curve is the group the client negotiated`);
    assert.match(side.fields!.ssl_client_v_remain, n.fields.ssl_client_v_start ? /^\(days left of [\w-]+\.pem\)$/ : /^$/, `${name}: $ssl_client_v_remain`);
  }
  if (curve === 'of the session') assert.equal(j.fields.ssl_curve, n.fields.ssl_curve, `${name}: $ssl_curve`);
  assert.equal(j.fields.ssl_session_id === '', n.fields.ssl_session_id === '', `${name}: a session id on both sides or on neither`);
  assert.equal(j.fields.ssl_sigalg, '', `${name}: $ssl_sigalg`);
  assert.equal(j.fields.ssl_client_sigalg, '', `${name}: $ssl_client_sigalg`);
}

/**
 * What nginx prints of the certificate `NAME.pem`, computed from the file:
 * the literals differential() records as `@KEY_…@` (the certificates are
 * made for each run). `$ssl_client_raw_cert` is the PEM text,
 * `$ssl_client_cert` the same without its last newline and with a tab
 * after each other, `$ssl_client_escaped_cert` the PEM text URL-escaped
 * (nginx's NGX_ESCAPE_URI_COMPONENT, which escapes what
 * encodeURIComponent does of a PEM text: space, newline, `+`, `/`, `=`);
 * the serial in upper-case hex, the SHA-1 fingerprint in lower-case hex.
 * The serial is left out with `fixedSerial` (the test names it).
 */
function certificateLiterals(name: string, key: string, opts: { fixedSerial?: boolean } = {}): Record<string, string> {
  const pem = pki.text(`${name}.pem`);
  const x = new X509Certificate(pem);
  return {
    [`${key}_CERT_PEM`]: pem,
    [`${key}_CERT_TABBED`]: pem.replace(/\n$/, '').replaceAll('\n', '\n\t'),
    [`${key}_CERT_ESCAPED`]: encodeURIComponent(pem),
    ...(opts.fixedSerial ? {} : { [`${key}_SERIAL`]: x.serialNumber }),
    [`${key}_FINGERPRINT`]: x.fingerprint.replaceAll(':', '').toLowerCase(),
  };
}

describe('$ssl_* variables (differential)', { skip }, () => {
  let run: { nginx: SideResult<Run>; jinx: SideResult<Run> };
  before(async () => {
    pki = makePki()!;
    issueClientCertificate(pki, 'odd', { subj: ODD_SUBJECT });
    issueClientCertificate(pki, 'odd-config', { config: ODD_CONFIG }, '-5');
    const ec = selfSigned('vars.test', 'ec');
    const rsa = selfSigned('vars.test', 'rsa');
    run = await differential({
      extraPorts: 2,
      literals: {
        ...certificateLiterals('client', 'CLIENT'), ...certificateLiterals('odd', 'ODD'),
        ...certificateLiterals('odd-config', 'ODD_CONFIG', { fixedSerial: true }), ...certificateLiterals('self', 'SELF'),
      },
      files: {
        'certs/ec.pem': ec.cert, 'certs/ec.key': ec.key, 'certs/rsa.pem': rsa.cert, 'certs/rsa.key': rsa.key,
        'certs/root.pem': pki.text('root.pem'),
      },
      conf: ({ port, ports }) => httpConf(`
  log_format vars '$ssl_protocol "$ssl_client_verify" $ssl_session_reused $ssl_early_data $ssl_alpn_protocol "$ssl_client_s_dn" $status';
  server { listen 127.0.0.1:${port} ssl; server_name vars.test; ssl_certificate certs/ec.pem; ssl_certificate_key certs/ec.key;
    ssl_verify_client optional; ssl_client_certificate certs/root.pem; ${ANSWER_LOGGED} }
  server { listen 127.0.0.1:${ports[0]} ssl; http2 on; server_name vars.test; ssl_certificate certs/rsa.pem; ssl_certificate_key certs/rsa.key;
    ssl_prefer_server_ciphers on; ssl_verify_client optional_no_ca; ssl_client_certificate certs/root.pem; ${ANSWER_LOGGED} }
  server { listen 127.0.0.1:${ports[1]}; server_name vars.test; ${ANSWER_LOGGED} }`),
    }, scenario);
  });
  after(cleanup);

  it('reports protocol, cipher, the client\'s ciphers and groups, SNI and ALPN of a TLS 1.3 handshake as nginx does', () => {
    const n = run.nginx.result.noCert.fields!;
    assert.equal(n.ssl_protocol, 'TLSv1.3');
    assert.equal(n.ssl_cipher, 'TLS_AES_256_GCM_SHA384');
    assert.match(n.ssl_ciphers, /^TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:ECDHE-RSA-AES128-GCM-SHA256:.*:TLS_EMPTY_RENEGOTIATION_INFO_SCSV$/);
    assert.equal(n.ssl_curve, 'X25519');
    assert.equal(n.ssl_curves, 'X25519:prime256v1:X448:secp521r1:secp384r1:ffdhe2048:ffdhe3072:ffdhe4096:ffdhe6144:ffdhe8192');
    assert.deepEqual([n.ssl_server_name, n.ssl_alpn_protocol, n.ssl_session_reused, n.ssl_client_verify, n.ssl_early_data], ['vars.test', 'http/1.1', '.', 'NONE', '']);
    assert.equal(n.ssl_sigalg, 'ecdsa_secp256r1_sha256');
    assertSameVariables('no client certificate', run.nginx.result.noCert, run.jinx.result.noCert);
    assertSameVariables('HTTP/2', run.nginx.result.http2, run.jinx.result.http2);
    assert.equal(run.jinx.result.http2.fields!.ssl_alpn_protocol, 'h2');
  });

  it('reads the client\'s ciphers and groups from a ClientHello that arrives in two pieces', () => {
    assert.equal(run.jinx.result.split.fields!.ssl_ciphers, run.nginx.result.noCert.fields!.ssl_ciphers);
    assertSameVariables('split ClientHello', run.nginx.result.split, run.jinx.result.split);
  });

  it('keeps one session id for the requests of a connection', () => {
    for (const side of [run.nginx.result, run.jinx.result]) {
      const [a, b] = side.keptAlive;
      assert.match(a.fields!.ssl_session_id, /^session \d+$/, '64 hex digits, numbered');
      assert.equal(b.fields!.ssl_session_id, a.fields!.ssl_session_id);
    }
    assertSameVariables('kept alive', run.nginx.result.keptAlive[1], run.jinx.result.keptAlive[1]);
  });

  it('prints a verified client certificate as nginx does: PEM forms, RFC 2253 and legacy names, serial, fingerprint, validity', () => {
    const n = run.nginx.result.tls13Cert.fields!;
    assert.equal(n.ssl_client_verify, 'SUCCESS');
    assert.equal(n.ssl_client_s_dn, 'CN=jinx-client');
    assert.equal(n.ssl_client_i_dn, 'CN=Test Root');
    assert.equal(n.ssl_client_raw_cert, pki.text('client.pem'));
    assert.match(n.ssl_client_fingerprint, /^[0-9a-f]{40}$/);
    const client = new X509Certificate(pki.text('client.pem'));
    assert.equal(n.ssl_client_fingerprint, client.fingerprint.replaceAll(':', '').toLowerCase());
    assert.equal(n.ssl_client_serial, client.serialNumber);
    // the dates as X509Certificate prints them (`Nov 26 14:47:03 2026 GMT`), see validity()
    assert.deepEqual([n.ssl_client_v_start, n.ssl_client_v_end, n.ssl_client_v_remain], ['(validFrom of client.pem)', '(validTo of client.pem)', '(days left of client.pem)']);
    assert.match(client.validTo, /^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4} GMT$/);
    assertSameVariables('TLS 1.3 with a client certificate', run.nginx.result.tls13Cert, run.jinx.result.tls13Cert);
    assertSameVariables('TLS 1.2 with a client certificate', run.nginx.result.tls12Cert, run.jinx.result.tls12Cert);
    const odd = run.nginx.result.oddCert.fields!;
    assert.equal(odd.ssl_client_s_dn,
      'emailAddress=odd@x.test,serialNumber=42,CN=\\#1 \\"quoted\\"\\, a\\+b\\; \\<x\\> \\\\ back/slash,OU=R&D+OU=Ops,O=\\C3\\9Cn\\C3\\AFcode GmbH,C=DE,DC=jinx,DC=test');
    assert.equal(odd.ssl_client_s_dn_legacy,
      '/DC=test/DC=jinx/C=DE/O=\\xC3\\x9Cn\\xC3\\xAFcode GmbH/OU=Ops+OU=R&D/CN=#1 "quoted", a\\+b; <x> \\ back\\/slash/serialNumber=42/emailAddress=odd@x.test');
    assertSameVariables('a subject with escapes', run.nginx.result.oddCert, run.jinx.result.oddCert);
    const oddConfig = run.nginx.result.oddConfigCert.fields!;
    assert.equal(oddConfig.ssl_client_s_dn, 'L=\\#start,1.2.3.4.5=#130C637573746F6D2076616C7565,O=\\C3\\9Crban,CN=\\CE\\A9mega \\C3\\9Cn\\C3\\AFcode');
    assert.equal(oddConfig.ssl_client_serial, '-05');
    assertSameVariables('BMPString, T61String, an unknown attribute, a negative serial', run.nginx.result.oddConfigCert, run.jinx.result.oddConfigCert);
  });

  it('reports resumed TLS 1.3 and 1.2 sessions as nginx does (r, the certificate of the session, no groups for TLS 1.2)', () => {
    const n13 = run.nginx.result.tls13Resumed.fields!;
    const n12 = run.nginx.result.tls12Resumed.fields!;
    assert.deepEqual([n13.ssl_session_reused, n12.ssl_session_reused], ['r', 'r']);
    assert.equal(n12.ssl_curves, '');
    assert.equal(n12.ssl_server_name, 'vars.test');
    assert.equal(n13.ssl_client_verify, 'SUCCESS');
    assertSameVariables('TLS 1.3 resumed', run.nginx.result.tls13Resumed, run.jinx.result.tls13Resumed);
    assert.equal(n12.ssl_curve, 'X25519');
    assertSameVariables('TLS 1.2 resumed', run.nginx.result.tls12Resumed, run.jinx.result.tls12Resumed, 'of the session');
  });

  it('reports a certificate that did not verify as FAILED:reason, with optional_no_ca and in the access log of optional\'s 400', () => {
    const n = run.nginx.result.selfSignedNoCa.fields!;
    assert.equal(n.ssl_client_verify, 'FAILED:self-signed certificate');
    assertSameVariables('optional_no_ca, self-signed', run.nginx.result.selfSignedNoCa, run.jinx.result.selfSignedNoCa);
    assert.equal(run.nginx.result.selfSignedOptional.status, 400);
    assert.equal(run.jinx.result.selfSignedOptional.status, 400);
    const log = run.nginx.file('logs/vars.log');
    assert.ok(log.includes('TLSv1.3 "FAILED:self-signed certificate" . - http/1.1 "CN=backend.test" 400'), log.join('\n'));
    assert.deepEqual(run.jinx.file('logs/vars.log'), log);
  });

  it('reports the group of the key exchange its TLS library chose', () => {
    assert.equal(run.nginx.result.p384.fields!.ssl_curve, 'secp384r1');
    assertSameVariables('P-384 only', run.nginx.result.p384, run.jinx.result.p384);
    // TLS 1.2, ssl_prefer_server_ciphers: each library takes the first of its own groups the client offers
    assertSameVariables('server preference', run.nginx.result.serverPreference, run.jinx.result.serverPreference);
  });

  it('leaves every $ssl_* variable empty over plain HTTP (- in the access log)', () => {
    for (const side of [run.nginx, run.jinx]) {
      assert.equal(side.result.plain.status, 200);
      assert.deepEqual(Object.values(side.result.plain.fields!).filter((v) => v !== ''), []);
      assert.ok(side.file('logs/vars.log').includes('- "-" - - - "-" 200'));
    }
  });
});

describe('$ssl_* variables in jinx -t (differential)', () => {
  after(cleanup);

  it('accepts every variable of nginx 1.30\'s ssl module, and set on them, as nginx -t does', () => {
    const dir = tempDir('jinx-sslvars-');
    mkdirSync(join(dir, 'logs'));
    writeFileSync(join(dir, 'nginx.conf'), `daemon off; error_log logs/error.log; pid logs/nginx.pid; events {}
http { access_log off;
  server { listen 127.0.0.1:1; set $ssl_protocol forced; set $ssl_client_verify forced; ${ANSWER} }
}
`);
    const outcome = compareConfigTest(dir, join(dir, 'nginx.conf'), { hidePrefix: dir });
    assert.equal(outcome.nginx.status, 0, outcome.nginx.lines.join('\n'));
    assert.deepEqual(outcome.jinx, outcome.nginx);
  });
});
