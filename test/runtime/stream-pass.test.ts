/**
 * The stream `pass` module, differential against nginx: a connection handed
 * to an http `listen` (plain, after `ssl_preread` chose the address by the
 * SNI name, or TLS-terminated by the stream server, which http then serves
 * as https), to another stream server, with the address from a variable;
 * and the sessions that cannot be passed: preread data of a TLS
 * connection, an address without a port or that is a name, no listening
 * socket on the address, a UDP session. The replies (with the http side's
 * `$server_port`, `$scheme` and `$https`), the stream access-log lines and
 * the error-log lines are compared with nginx's.
 */
import { strict as assert } from 'node:assert';
import { createSocket } from 'node:dgram';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect as netConnect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { connect as tlsConnect } from 'node:tls';
import { streamModulePath } from '../helpers/corpus-trees.js';
import { differential, mainContext, TEMP_PATHS } from '../helpers/differential.js';
import { cleanup, hasCommand } from '../helpers/harness.js';
import { makePki, type Pki } from '../helpers/pki.js';

const skip = hasCommand('openssl') ? false : 'no openssl command';

/** Lines whose ephemeral ports change from run to run. */
const EPHEMERAL = /client \S+ connected to /;

/** An HTTP/1.0 GET over a new connection (TLS with `servername`); resolves with the reply's last line, or `[closed]`. */
function get(port: number, servername?: string): Promise<string> {
  return new Promise((resolve) => {
    const s = servername === undefined ? netConnect(port, '127.0.0.1') : tlsConnect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false });
    let out = '';
    s.on(servername === undefined ? 'connect' : 'secureConnect', () => s.write('GET / HTTP/1.0\r\nHost: localhost\r\n\r\n'));
    s.on('data', (d: Buffer) => { out += d.toString('latin1'); });
    s.on('error', () => undefined);
    s.on('close', () => resolve(out === '' ? '[closed]' : out.split('\r\n').at(-1)!.trim()));
  });
}

/** The lines of a log file under `logs/` (none while it does not exist). */
const lines = (prefix: string, file = 'stream.log'): string[] =>
  (existsSync(join(prefix, 'logs', file)) ? readFileSync(join(prefix, 'logs', file), 'latin1').split('\n').filter(Boolean) : []);

/** The `[error]` lines of the error log, as `[error] *CONN MESSAGE` (no time, pid or connection number). */
const errorLines = (prefix: string): string[] =>
  lines(prefix, 'error.log').filter((l) => l.includes(' [error] ')).map((l) => l.replace(/^.* \[error\] \d+#\d+: \*\d+ /, '[error] *CONN '));

/** One datagram to `port`, then a wait for what (if anything) comes back. */
function datagram(port: number): Promise<string> {
  return new Promise((resolve) => {
    const sock = createSocket('udp4');
    let out = '';
    sock.on('message', (m) => { out += m.toString('latin1'); });
    sock.send('ping', port, '127.0.0.1');
    setTimeout(() => {
      sock.close();
      resolve(out);
    }, 300);
  });
}

describe('stream pass (differential)', { skip }, () => {
  let pki: Pki;

  before(() => {
    pki = makePki()!;
  });

  after(cleanup);

  it('hands connections to http and stream listens as nginx does, and refuses the ones it cannot pass with nginx\'s lines', async () => {
    const run = await differential({
      extraPorts: 6,
      racing: EPHEMERAL,
      files: { 'cert.pem': pki.text('leaf.pem'), 'cert.key': pki.text('leaf.key') },
      conf: ({ port, ports }) => `load_module ${streamModulePath()};\n${mainContext()}stream {
  log_format s '$server_port $status';
  access_log logs/stream.log s;
  map $ssl_preread_server_name $to {
    default 127.0.0.1:${port};
    tls.test 127.0.0.1:${ports[0]};
    noport.test 127.0.0.1;
    name.test localhost:80;
  }
  server { listen 127.0.0.1:${ports[1]}; ssl_preread on; pass $to; }
  server {
    listen 127.0.0.1:${ports[2]} ssl; server_name default.test;
    ssl_certificate cert.pem; ssl_certificate_key cert.key;
    ssl_preread on;
    pass 127.0.0.1:${port};
  }
  server { listen 127.0.0.1:${ports[2]} ssl; server_name sni.test; pass 127.0.0.1:${port}; }
  server { listen 127.0.0.1:${ports[3]}; pass 127.0.0.1:${ports[4]}; }
  server { listen 127.0.0.1:${ports[4]}; return "stream $server_port\\n"; }
  server { listen 127.0.0.1:${ports[5]}; listen 127.0.0.1:${ports[5]} udp; pass 127.0.0.1:1; }
}
http {
  ${TEMP_PATHS}
  access_log off;
  server {
    listen 127.0.0.1:${port};
    listen 127.0.0.1:${ports[0]} ssl;
    ssl_certificate cert.pem; ssl_certificate_key cert.key;
    location / { return 200 "http $server_port $scheme [$https]\\n"; }
  }
}
`,
    }, async (s) => {
      // the start-up probes' sessions are over before the comparison starts: their lines are left out (a probe closes
      // at once, which nginx's pass, run as it accepts, still tries; jinx's may hear of the close first and log nothing)
      await new Promise((r) => setTimeout(r, 300));
      const probes = lines(s.prefix).length;
      const probeErrors = errorLines(s.prefix).length;
      const replies = {
        plain: await get(s.ports[1]!),
        prereadTls: await get(s.ports[1]!, 'tls.test'),
        noPort: await get(s.ports[1]!, 'noport.test'),
        name: await get(s.ports[1]!, 'name.test'),
        terminated: await get(s.ports[2]!, 'sni.test'),
        terminatedPreread: await get(s.ports[2]!, 'default.test'),
        toStream: await get(s.ports[3]!),
        notFound: await get(s.ports[5]!),
        udp: await datagram(s.ports[5]!),
      };
      await new Promise((r) => setTimeout(r, 200));
      // ports by name: the port numbers change from run to run
      const named = (text: string): string => [s.port, ...s.ports].reduce((t, p, i) => t.split(String(p)).join(i === 0 ? 'P' : `P${i}`), text);
      return {
        replies: JSON.parse(named(JSON.stringify(replies))) as typeof replies,
        access: lines(s.prefix).slice(probes).map(named).sort(),
        errors: errorLines(s.prefix).slice(probeErrors).map(named).sort(),
      };
    });
    assert.deepEqual(run.jinx.result, run.nginx.result);
    assert.deepEqual(run.nginx.result.replies, {
      plain: 'http P http []',
      prereadTls: 'http P1 https [on]',
      noPort: '[closed]',
      name: '[closed]',
      terminated: 'http P https [on]',
      terminatedPreread: '[closed]',
      toStream: 'stream P5',
      notFound: '[closed]',
      udp: '',
    });
    // the sessions passed on leave no line; the others their status (the return server's, the one passed to it)
    assert.deepEqual(run.nginx.result.access, ['P2 500', 'P2 500', 'P3 500', 'P5 200', 'P6 200', 'P6 500']);
    // the error lines are in the results compared above
    const messages = new Set(run.nginx.result.errors.map((l) => l.replace(/^\[error\] \*CONN /, '').replace(/ while .*/, '')));
    assert.deepEqual([...messages].sort(), [
      'cannot pass connection with preread data', 'cannot pass udp connection', 'no addresses in pass "localhost:80"',
      'no port in pass "127.0.0.1"', 'port not found for "127.0.0.1:1"',
    ]);
  });
});
