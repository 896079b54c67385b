/**
 * TLS in the stream module, differential against nginx, with certificates
 * made for the run (test/helpers/pki.ts): a `listen … ssl` server
 * terminating TLS (`ssl_alpn`, `$ssl_protocol`, `$ssl_server_name`,
 * `$ssl_alpn_protocol`) to a TCP echo upstream, a handshake refused for
 * want of a common ALPN protocol, and a `server_name` the SNI name chooses; `ssl_preread` routing by the SNI name with
 * `map` without terminating TLS (`$ssl_preread_*`); `proxy_ssl` to a TLS
 * echo upstream (`proxy_ssl_name`, `proxy_ssl_server_name`,
 * `proxy_ssl_verify`), and a name the certificate does not match (502,
 * nginx's `upstream SSL certificate does not match …` line). The replies,
 * access-log lines and error-log lines are compared with nginx's.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readFileSync } from 'node:fs';
import { connect as netConnect, createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect, createServer as createTlsServer, type Server as TlsServer, type TLSSocket } from 'node:tls';
import { streamModulePath } from '../helpers/corpus-trees.js';
import { differential, mainContext } from '../helpers/differential.js';
import { cleanup, freePort, hasCommand } from '../helpers/harness.js';
import { makePki, type Pki } from '../helpers/pki.js';

const skip = hasCommand('openssl') ? false : 'no openssl command';

/** Lines whose ephemeral ports change from run to run. */
const EPHEMERAL = /(?:client|proxy) \S+ connected to /;

/**
 * The closing lines of the start-up probes and of the sessions that carry TLS
 * records (whose sizes, session tickets, are the TLS library's): they race
 * the rest, and a recording leaves them out.
 */
const RACING = new RegExp(`${EPHEMERAL.source}|disconnected, bytes from/to client:`);

/**
 * How many access-log lines and settled error-log entries (those `racing`
 * does not match) the start-up probes left: the comparison starts after them.
 */
async function afterProbes(prefix: string, racing = EPHEMERAL): Promise<{ access: number; settled: number }> {
  await new Promise((r) => setTimeout(r, 300));
  const read = (rel: string): string => (existsSync(join(prefix, rel)) ? readFileSync(join(prefix, rel), 'latin1') : '');
  const entries = read('logs/error.log').split('\n').filter((l) => /^\S+ \S+ \[\w+\] \d+#\d+: \*\d+ /.test(l));
  return { access: read('logs/stream.log').split('\n').filter(Boolean).length, settled: entries.filter((l) => !racing.test(l)).length };
}

/**
 * Writes `message` on `socket` once connected and shuts down once the echo
 * came back (or at once for no message, the server closing); resolves with
 * all that came back (`[error]` for a failure).
 */
function exchange(socket: TLSSocket | ReturnType<typeof netConnect>, message: string, event: 'secureConnect' | 'connect'): Promise<string> {
  return new Promise((resolve) => {
    let out = '';
    socket.on(event, () => {
      if (message !== '') socket.write(message);
    });
    socket.on('data', (d: Buffer) => {
      out += d.toString('latin1');
      if (/bar\d/.test(out)) socket.end();
    });
    socket.on('error', () => {
      out += '[error]';
    });
    socket.on('close', () => resolve(out));
  });
}

/** A TLS client's session: `message` sent, the reply and the ALPN protocol chosen. */
async function tlsSession(port: number, servername: string, alpn: readonly string[], message: string): Promise<string> {
  const s = tlsConnect({ host: '127.0.0.1', port, servername, ALPNProtocols: [...alpn], rejectUnauthorized: false });
  const reply = await exchange(s, message, 'secureConnect');
  return `${reply} alpn=${s.alpnProtocol || '-'}`;
}

describe('stream TLS (differential)', { skip }, () => {
  let pki: Pki;
  let echo: Server;
  let tlsEcho: TlsServer;
  let echoPort = 0;
  let tlsPort = 0;

  before(async () => {
    pki = makePki()!;
    echoPort = await freePort();
    tlsPort = await freePort();
    echo = createServer({ allowHalfOpen: true }, (s) => {
      s.on('data', (d) => s.write(d.toString('latin1').replace(/foo/g, 'bar')));
      s.on('end', () => s.end());
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => echo.listen(echoPort, '127.0.0.1', resolve));
    // the TLS echo says which SNI name it got
    tlsEcho = createTlsServer({ cert: pki.text('leaf.pem'), key: pki.text('leaf.key'), allowHalfOpen: true }, (s) => {
      s.write(`[sni ${(s as TLSSocket & { servername?: string | false }).servername || '-'}] `);
      s.on('data', (d) => s.write(d.toString('latin1').replace(/foo/g, 'bar')));
      s.on('end', () => s.end());
      s.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => tlsEcho.listen(tlsPort, '127.0.0.1', resolve));
  });

  after(() => {
    echo.close();
    tlsEcho.close();
    cleanup();
  });

  it('terminates TLS to a TCP upstream, routes by SNI with ssl_preread and map, and speaks TLS to a TLS upstream, as nginx does', async () => {
    const run = await differential({
      extraPorts: 3,
      literals: { UP: echoPort, TLSUP: tlsPort },
      racing: RACING,
      files: { 'cert.pem': pki.text('leaf.pem'), 'cert.key': pki.text('leaf.key'), 'root.pem': pki.text('root.pem') },
      conf: ({ port, ports }) => `load_module ${streamModulePath()};\n${mainContext()}stream {
  log_format s '$server_port $status $bytes_received [$ssl_protocol|$ssl_server_name|$ssl_alpn_protocol|$ssl_session_reused] [$ssl_preread_protocol|$ssl_preread_server_name|$ssl_preread_alpn_protocols] $upstream_addr';
  access_log logs/stream.log s;
  map $ssl_preread_server_name $route { terminated.test 127.0.0.1:${port}; default 127.0.0.1:${tlsPort}; }
  server {
    listen 127.0.0.1:${port} ssl;
    ssl_certificate cert.pem; ssl_certificate_key cert.key;
    ssl_alpn one two;
    proxy_pass 127.0.0.1:${echoPort};
  }
  server { listen 127.0.0.1:${port}; server_name named.test *.wild.test; return "named $server_name $ssl_server_name $ssl_protocol"; }
  server { listen 127.0.0.1:${ports[0]}; ssl_preread on; proxy_pass $route; }
  server {
    listen 127.0.0.1:${ports[1]};
    proxy_pass 127.0.0.1:${tlsPort};
    proxy_ssl on; proxy_ssl_server_name on; proxy_ssl_name backend.test;
    proxy_ssl_verify on; proxy_ssl_trusted_certificate root.pem;
  }
  server {
    listen 127.0.0.1:${ports[2]};
    proxy_pass 127.0.0.1:${tlsPort};
    proxy_ssl on; proxy_ssl_name wrong.test; proxy_ssl_verify on; proxy_ssl_trusted_certificate root.pem;
  }
}
`,
    }, async (s) => ({
      probes: await afterProbes(s.prefix, RACING),
      terminated: await tlsSession(s.port, 'x.test', ['two', 'three'], 'foo1'),
      noAlpn: await tlsSession(s.port, 'x.test', ['three'], 'foo2'),
      named: await tlsSession(s.port, 'a.wild.test', [], ''),
      prereadToTerminated: await tlsSession(s.ports[0]!, 'terminated.test', ['one'], 'foo3'),
      prereadToUpstream: await tlsSession(s.ports[0]!, 'other.test', [], 'foo4'),
      proxySsl: await exchange(netConnect(s.ports[1]!, '127.0.0.1'), 'foo5', 'connect'),
      wrongName: await exchange(netConnect(s.ports[2]!, '127.0.0.1'), '', 'connect'),
    }));
    const { probes: nginxProbes, ...nginxResult } = run.nginx.result;
    const { probes: jinxProbes, ...jinxResult } = run.jinx.result;
    assert.deepEqual(jinxResult, nginxResult);
    assert.deepEqual(nginxResult, {
      terminated: 'bar1 alpn=two',
      noAlpn: '[error] alpn=-',
      named: 'named named.test a.wild.test TLSv1.3 alpn=-',
      prereadToTerminated: 'bar3 alpn=one',
      prereadToUpstream: '[sni other.test] bar4 alpn=-',
      proxySsl: '[sni backend.test] bar5',
      wrongName: '',
    });
    const access = (side: typeof run.nginx, probes: { access: number }): string[] => side.file('logs/stream.log').slice(probes.access).sort();
    assert.deepEqual(access(run.jinx, jinxProbes), access(run.nginx, nginxProbes));
    // the sessions' closing lines race the rest (RACING); the access log above has their byte counts
    const settled = (lines: readonly string[], probes: { settled: number }): string[] =>
      lines.filter((l) => !RACING.test(l)).slice(probes.settled).sort();
    const jinxErrors = settled(run.jinx.errorLog, jinxProbes);
    assert.deepEqual(jinxErrors, settled(run.nginx.errorLog, nginxProbes));
    assert.ok(jinxErrors.some((l) => l.startsWith('[error] *CONN upstream SSL certificate does not match "wrong.test" while SSL handshaking to upstream')));
  });

  it('takes ssl_alpn and the client-certificate request of the server the SNI name chooses, the default server\'s for one without certificates, as nginx does', async () => {
    const run = await differential({
      racing: EPHEMERAL,
      files: { 'cert.pem': pki.text('leaf.pem'), 'cert.key': pki.text('leaf.key'), 'root.pem': pki.text('root.pem') },
      conf: ({ port }) => `load_module ${streamModulePath()};\n${mainContext()}stream {
  ssl_certificate cert.pem; ssl_certificate_key cert.key;
  server { listen 127.0.0.1:${port} ssl; ssl_alpn one; return "default $ssl_alpn_protocol $ssl_client_verify"; }
  server { listen 127.0.0.1:${port} ssl; server_name alpn.test; ssl_alpn two three; return "alpn $ssl_alpn_protocol $ssl_client_verify"; }
  server {
    listen 127.0.0.1:${port} ssl; server_name verify.test;
    ssl_verify_client optional; ssl_client_certificate root.pem;
    return "verify $ssl_alpn_protocol $ssl_client_verify $ssl_client_s_dn";
  }
  server { listen 127.0.0.1:${port} ssl; server_name required.test; ssl_verify_client on; ssl_client_certificate root.pem; return "required"; }
}
`,
    }, async (s) => {
      await afterProbes(s.prefix);
      /** A TLS session with the client certificate when `withCert`: what came back, the ALPN protocol. */
      const session = (servername: string, alpn: readonly string[], withCert = false): Promise<string> => {
        const cert = withCert ? { cert: pki.text('client.pem'), key: pki.text('client.key') } : {};
        const socket = tlsConnect({ host: '127.0.0.1', port: s.port, servername, ALPNProtocols: [...alpn], rejectUnauthorized: false, ...cert });
        return exchange(socket, '', 'secureConnect').then((reply) => `${reply} alpn=${socket.alpnProtocol || '-'}`);
      };
      return {
        byDefault: await session('other.test', ['two', 'one']),
        chosenAlpn: await session('alpn.test', ['one', 'three']),
        noCommonAlpn: await session('alpn.test', ['one']),
        verified: await session('verify.test', ['one'], true),
        notAsked: await session('alpn.test', [], true),
        withoutCert: await session('verify.test', []),
        required: await session('required.test', []),
      };
    });
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.deepEqual(run.nginx.result, {
      byDefault: 'default one NONE alpn=one',
      chosenAlpn: 'alpn three NONE alpn=three',
      noCommonAlpn: '[error] alpn=-',
      verified: 'verify  SUCCESS CN=jinx-client alpn=-',
      notAsked: 'alpn  NONE alpn=-',
      withoutCert: 'verify  NONE  alpn=-',
      required: ' alpn=-',
    });
    const infoLines = (side: typeof run.nginx): string[] => side.errorLog.filter((l) => /client sent no required SSL certificate|SSL_do_handshake/.test(l)).sort();
    assert.deepEqual(infoLines(run.jinx), infoLines(run.nginx));
  });

  it('reads certificates named with variables for each handshake ($ssl_server_name), with nginx\'s lines for one that cannot be read', async () => {
    const run = await differential({
      racing: EPHEMERAL,
      files: { 'backend.test.crt': pki.text('leaf.pem'), 'backend.test.key': pki.text('leaf.key') },
      conf: ({ port }) => `load_module ${streamModulePath()};\n${mainContext()}stream {
  server {
    listen 127.0.0.1:${port} ssl;
    ssl_certificate $ssl_server_name.crt; ssl_certificate_key $ssl_server_name.key;
    ssl_alpn one;
    return "$ssl_server_name $ssl_alpn_protocol";
  }
}
`,
    }, async (s) => {
      await afterProbes(s.prefix);
      const session = (servername: string): Promise<string> => {
        const socket = tlsConnect({ host: '127.0.0.1', port: s.port, servername, ALPNProtocols: ['one'], rejectUnauthorized: false });
        return exchange(socket, '', 'secureConnect');
      };
      return { named: await session('backend.test'), missing: await session('missing.test') };
    });
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.deepEqual(run.nginx.result, { named: 'backend.test one', missing: '[error]' });
    const lines = (side: typeof run.nginx): string[] => side.errorLog.filter((l) => /certificate|SSL_do_handshake/.test(l)).map((l) => l.replace(/"[^"]*missing/, '"PATH/missing'));
    assert.deepEqual(lines(run.jinx), lines(run.nginx));
    assert.equal(lines(run.nginx).length, 2);
  });
});
