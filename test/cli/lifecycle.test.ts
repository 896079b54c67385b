/**
 * A running server: its pid file, `-s stop|quit|reopen|reload`, the signals
 * behind them (SIGQUIT graceful, SIGTERM fast, SIGHUP reload, SIGUSR1
 * reopen) and a port already in use. Every scenario runs on jinx and, when
 * installed, on the reference nginx, so the expectation is nginx's.
 */
import { strict as assert } from 'node:assert';
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import { connect, createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { cleanup, freePort, logLines, onCleanup, portOpen, startUpstream, waitFor } from '../helpers/harness.js';
import {
  childPids, impls, KeepAliveClient, makePrefix, readPid, readText, runImpl, sleep, spawnImpl, startImpl, tryGet, withoutPrefix,
  type Impl,
} from '../helpers/cli.js';

/** The common head of every configuration: foreground, pid and logs under the prefix. */
const HEAD = `daemon off;
pid logs/nginx.pid;
error_log logs/error.log;
events {}
`;

/** A configuration serving `return 200 "TEXT\n"` on `/` and a proxied `/slow`. */
function conf(port: number, text: string, upstreamPort = 1, extraHttp = ''): string {
  return `${HEAD}http {
    access_log off;
    client_body_temp_path logs/body;
    proxy_temp_path logs/proxy;
    ${extraHttp}
    server {
        listen 127.0.0.1:${port};
        location / { return 200 "${text}\\n"; }
        location /slow { proxy_pass http://127.0.0.1:${upstreamPort}; proxy_buffering off; }
    }
}
`;
}

/** The pids of the processes whose command line names `prefix` (a server's master and workers; not zombies). */
function processesNaming(prefix: string): number[] {
  return readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'latin1').includes(`${prefix}/`);
    } catch {
      return false;
    }
  }).map(Number);
}

/** An upstream that sends `part1`, waits `delayMs`, then `part2`; `started` resolves when a request arrives. */
async function slowUpstream(delayMs: number): Promise<{ port: number; started: Promise<void> }> {
  let arrived!: () => void;
  const started = new Promise<void>((r) => { arrived = r; });
  const up = await startUpstream((_req, res) => {
    arrived();
    res.writeHead(200, { 'Content-Type': 'text/plain', 'Content-Length': '10' });
    res.write('part1');
    const t = setTimeout(() => res.end('part2'), delayMs);
    res.once('close', () => clearTimeout(t));
  });
  return { port: up.port, started };
}

function runScenarios(impl: Impl): void {
  describe(`${impl.name}: pid file and -s`, () => {
    after(cleanup);

    it('writes logs/nginx.pid ("PID\\n") only once its port accepts connections, and removes it on exit', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const pidFile = join(p, 'logs/nginx.pid');
      const proc = spawnImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf']);
      let sawPidBeforePort = false;
      await waitFor(async () => {
        if (proc.hasExited()) return true;
        if (!existsSync(pidFile)) return false;
        if (!(await portOpen(port))) sawPidBeforePort = true;
        return true;
      }, 10_000, 'pid file');
      assert.equal(proc.hasExited(), false, proc.stderr());
      assert.equal(sawPidBeforePort, false, 'the pid file existed before the port accepted connections');
      assert.equal(readText(pidFile), `${proc.pid}\n`);
      proc.child.kill('SIGQUIT');
      assert.equal(await proc.waitExit(), 0);
      assert.equal(existsSync(pidFile), false, 'pid file removed on exit');
    });

    it('-s quit: exit 0 for the signaller, the server exits 0, pid file removed', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const proc = await startImpl(impl, p, [port]);
      const r = runImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf', '-s', 'quit']);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(await proc.waitExit(), 0);
      assert.equal(existsSync(join(p, 'logs/nginx.pid')), false);
    });

    it('-s stop: the server exits 0 at once, pid file removed', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const proc = await startImpl(impl, p, [port]);
      const r = runImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf', '-s', 'stop']);
      assert.equal(r.status, 0, r.stderr);
      assert.equal(await proc.waitExit(5000), 0);
      assert.equal(existsSync(join(p, 'logs/nginx.pid')), false);
    });

    it('-s reload: exit 0 and the new configuration is served', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const proc = await startImpl(impl, p, [port]);
      assert.equal((await tryGet(port, '/')).body, 'one\n');
      writeFileSync(join(p, 'nginx.conf'), conf(port, 'two'));
      const r = runImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf', '-s', 'reload']);
      assert.equal(r.status, 0, r.stderr);
      await waitFor(async () => (await tryGet(port, '/')).body === 'two\n', 10_000, 'the new configuration');
      assert.equal(proc.hasExited(), false);
    });

    it('-s reload|reopen|quit print "[notice] signal process started" on stderr', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const proc = await startImpl(impl, p, [port]);
      for (const s of ['reopen', 'reload', 'quit']) {
        const r = runImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf', '-s', s]);
        assert.equal(r.status, 0, `-s ${s}: ${r.stderr}`);
        assert.deepEqual(logLines(r.stderr), ['[notice] signal process started'], `-s ${s}`);
        if (s === 'reload') await sleep(500);
      }
      assert.equal(await proc.waitExit(), 0);
    });

    it('-s with no pid file: the notice, then open() "…/logs/nginx.pid" failed (2: No such file or directory), exit 1', () => {
      const p = makePrefix({ 'nginx.conf': conf(1, 'one') });
      for (const s of ['stop', 'quit', 'reopen', 'reload']) {
        const r = runImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf', '-s', s]);
        assert.equal(r.status, 1, `-s ${s}`);
        assert.deepEqual(logLines(withoutPrefix(r.stderr, p)), [
          '[notice] signal process started',
          '[error] open() "PREFIX/logs/nginx.pid" failed (2: No such file or directory)',
        ], `-s ${s}`);
      }
    });

    it('-s with a pid file that is not a number, or names no process: nginx\'s [error]/[alert] lines, exit 1', () => {
      const p = makePrefix({ 'nginx.conf': conf(1, 'one'), 'logs/nginx.pid': 'garbage\n' });
      let r = runImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf', '-s', 'reload']);
      assert.equal(r.status, 1);
      assert.deepEqual(logLines(withoutPrefix(r.stderr, p)).filter((l) => !l.startsWith('[notice]')), [
        '[error] invalid PID number "garbage" in "PREFIX/logs/nginx.pid"',
      ]);
      writeFileSync(join(p, 'logs/nginx.pid'), '999999\n');
      r = runImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf', '-s', 'reload']);
      assert.equal(r.status, 1);
      assert.deepEqual(logLines(r.stderr).filter((l) => !l.startsWith('[notice]')), ['[alert] kill(999999, 1) failed (3: No such process)']);
    });
  });

  describe(`${impl.name}: signals`, () => {
    after(cleanup);

    it('SIGQUIT: stops accepting, lets an in-flight slow request complete, exits 0, removes the pid file', async () => {
      const up = await slowUpstream(1500);
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one', up.port) });
      const proc = await startImpl(impl, p, [port]);
      const client = new KeepAliveClient(port);
      let headers!: () => void;
      const gotHeaders = new Promise<void>((r) => { headers = r; });
      const slow = client.get('/slow', () => headers());
      await up.started;
      await gotHeaders;
      proc.child.kill('SIGQUIT');
      await waitFor(async () => !(await portOpen(port)), 3000, 'the port to close');
      const res = await slow;
      assert.equal(res.error, undefined, `the slow request failed: ${res.error}`);
      assert.equal(res.status, 200);
      assert.equal(res.body, 'part1part2');
      assert.equal(await proc.waitExit(), 0);
      assert.equal(existsSync(join(p, 'logs/nginx.pid')), false);
    });

    it('SIGTERM: exits 0 at once, cutting an in-flight slow request, removes the pid file', async () => {
      const up = await slowUpstream(8000);
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one', up.port) });
      const proc = await startImpl(impl, p, [port]);
      const client = new KeepAliveClient(port);
      let headers!: () => void;
      const gotHeaders = new Promise<void>((r) => { headers = r; });
      const slow = client.get('/slow', () => headers());
      await up.started;
      await gotHeaders;
      const t0 = Date.now();
      proc.child.kill('SIGTERM');
      assert.equal(await proc.waitExit(6000), 0);
      assert.ok(Date.now() - t0 < 6000, 'exited before the upstream finished (8 s)');
      const res = await slow;
      assert.notEqual(res.body, 'part1part2', 'the slow response was cut');
      assert.equal(existsSync(join(p, 'logs/nginx.pid')), false);
    });

    it('SIGTERM after a body passed on as it came (proxy_request_buffering off, grpc_pass): exits at once, with master_process on and off', async () => {
      const up = await startUpstream((req, res) => {
        req.resume();
        req.on('end', () => res.end('ok'));
      });
      const h2 = http2.createServer((req, res) => {
        req.resume();
        req.on('end', () => res.end('ok'));
      });
      await new Promise<void>((resolve) => h2.listen(0, '127.0.0.1', () => resolve()));
      onCleanup(() => new Promise<void>((resolve) => h2.close(() => resolve())));
      const h2Port = (h2.address() as AddressInfo).port;
      for (const master of ['on', 'off']) {
        const port = await freePort();
        const p = makePrefix({ 'nginx.conf': `${HEAD}master_process ${master};
http {
    access_log off;
    client_body_temp_path logs/body;
    server {
        listen 127.0.0.1:${port};
        http2 on;
        location /proxy { proxy_request_buffering off; proxy_http_version 1.1; proxy_pass http://127.0.0.1:${up.port}; }
        location /grpc { grpc_pass grpc://127.0.0.1:${h2Port}; }
    }
}
` });
        const proc = await startImpl(impl, p, [port]);
        const session = http2.connect(`http://127.0.0.1:${port}`);
        for (const path of ['/proxy', '/grpc']) {
          const answer = await new Promise<string>((resolve, reject) => {
            const req = session.request({ ':method': 'POST', ':path': path, 'content-type': 'application/grpc' });
            let body = '';
            req.on('data', (c: Buffer) => { body += c.toString(); });
            req.on('end', () => resolve(body));
            req.on('error', reject);
            req.end('x'.repeat(100_000));
          });
          assert.equal(answer, 'ok', `${path} with master_process ${master}`);
        }
        session.close();
        const t0 = Date.now();
        proc.child.kill('SIGTERM');
        assert.equal(await proc.waitExit(5000), 0);
        assert.ok(Date.now() - t0 < 500, `master_process ${master}: exited ${Date.now() - t0} ms after SIGTERM`);
      }
    });

    it('SIGHUP: the new configuration is served; a request in flight on a keep-alive connection completes', async () => {
      const up = await slowUpstream(1500);
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one', up.port) });
      const proc = await startImpl(impl, p, [port]);
      const client = new KeepAliveClient(port);
      const first = await client.get('/');
      assert.equal(first.body, 'one\n');
      const slow = client.get('/slow');
      await up.started;
      writeFileSync(join(p, 'nginx.conf'), conf(port, 'two', up.port));
      proc.child.kill('SIGHUP');
      await waitFor(async () => (await tryGet(port, '/')).body === 'two\n', 10_000, 'the new configuration');
      const res = await slow;
      assert.equal(res.error, undefined, `the in-flight request failed: ${res.error}`);
      assert.equal(res.reused, true, 'the slow request went over the kept-alive connection');
      assert.equal(res.localPort, first.localPort);
      assert.equal(res.body, 'part1part2');
      assert.equal(proc.hasExited(), false);
      assert.deepEqual(logLines(readText(join(p, 'logs/error.log'))), []);
    });

    /** A connected socket that has sent nothing, and how long after `start()` it was closed. */
    const silentConnection = async (port: number): Promise<{ socket: Socket; closed: Promise<number> }> => {
      const socket = connect({ host: '127.0.0.1', port });
      socket.on('error', () => undefined);
      await new Promise((resolve) => socket.once('connect', resolve));
      const start = Date.now();
      return { socket, closed: new Promise<number>((resolve) => socket.on('close', () => resolve(Date.now() - start))) };
    };

    it('SIGHUP: a connection that has sent nothing yet is served by the configuration it was accepted in, without keep-alive', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const proc = await startImpl(impl, p, [port]);
      const served = await silentConnection(port);
      let answer = '';
      served.socket.on('data', (d: Buffer) => { answer += d.toString('latin1'); });
      await sleep(200);
      writeFileSync(join(p, 'nginx.conf'), conf(port, 'two'));
      proc.child.kill('SIGHUP');
      await waitFor(async () => (await tryGet(port, '/')).body === 'two\n', 10_000, 'the new configuration');
      await sleep(500);
      served.socket.write('GET / HTTP/1.1\r\nHost: x\r\n\r\n');
      await served.closed;
      assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/);
      assert.match(answer, /\r\nConnection: close\r\n/);
      assert.match(answer, /\r\n\r\none\n$/);
    });

    it('SIGHUP with worker_shutdown_timeout: a connection left open is closed that long after the reload', async () => {
      const port = await freePort();
      const timed = (text: string): string => conf(port, text).replace('daemon off;', 'daemon off;\nworker_shutdown_timeout 300ms;');
      const p = makePrefix({ 'nginx.conf': timed('one') });
      const proc = await startImpl(impl, p, [port]);
      const silent = await silentConnection(port);
      // (accepted by the server before the reload, not left in the listening socket's queue)
      await sleep(500);
      writeFileSync(join(p, 'nginx.conf'), timed('two'));
      proc.child.kill('SIGHUP');
      const closedAfterMs = await Promise.race([silent.closed, sleep(8000).then(() => -1)]);
      silent.socket.destroy();
      assert.ok(closedAfterMs > 0 && closedAfterMs < 5000, `the silent connection was closed after ${closedAfterMs} ms`);
    });

    it('SIGHUP with a broken configuration: the [emerg] line goes to the error log and the old configuration keeps serving', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const proc = await startImpl(impl, p, [port]);
      assert.equal((await tryGet(port, '/')).body, 'one\n');
      writeFileSync(join(p, 'nginx.conf'), conf(port, 'two').replace('access_log off;', 'access_log off;\n    bogus_directive on;'));
      proc.child.kill('SIGHUP');
      const log = join(p, 'logs/error.log');
      await waitFor(() => readText(log).includes('[emerg]'), 10_000, 'the [emerg] line');
      assert.deepEqual(logLines(withoutPrefix(readText(log), p)), ['[emerg] unknown directive "bogus_directive" in PREFIX/nginx.conf:7']);
      await sleep(300);
      for (let i = 0; i < 3; i++) assert.equal((await tryGet(port, '/')).body, 'one\n');
      assert.equal(proc.hasExited(), false);
    });

    it('SIGHUP moving the server to another port: the new port serves, the old one closes', async () => {
      const [port, port2] = [await freePort(), await freePort()];
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const proc = await startImpl(impl, p, [port]);
      writeFileSync(join(p, 'nginx.conf'), conf(port2, 'two'));
      proc.child.kill('SIGHUP');
      await waitFor(async () => (await tryGet(port2, '/')).body === 'two\n', 10_000, 'the new port');
      await waitFor(async () => !(await portOpen(port)), 10_000, 'the old port to close');
      assert.equal(proc.hasExited(), false);
      assert.deepEqual(logLines(readText(join(p, 'logs/error.log'))), []);
    });

    it('SIGUSR1: after the log files are renamed, new lines go to new files', async () => {
      const port = await freePort();
      const text = conf(port, 'one', 1, 'access_log logs/access.log;')
        .replace('access_log off;', '')
        .replace('location / { return 200 "one\\n"; }', 'location / { root html; }');
      const p = makePrefix({ 'nginx.conf': text, 'html/index.html': 'hello\n' });
      const proc = await startImpl(impl, p, [port]);
      const log = (f: string): string => join(p, 'logs', f);
      assert.equal((await tryGet(port, '/missing-before')).status, 404);
      await waitFor(() => readText(log('access.log')).includes('missing-before') && readText(log('error.log')).includes('missing-before'), 5000, 'the first lines');
      renameSync(log('access.log'), log('access.log.1'));
      renameSync(log('error.log'), log('error.log.1'));
      proc.child.kill('SIGUSR1');
      await waitFor(() => existsSync(log('access.log')) && existsSync(log('error.log')), 5000, 'new log files');
      await sleep(300);
      assert.equal((await tryGet(port, '/missing-after')).status, 404);
      await waitFor(() => readText(log('access.log')).includes('missing-after') && readText(log('error.log')).includes('missing-after'), 5000, 'lines in the new files');
      assert.equal(readText(log('access.log')).split('\n').filter(Boolean).length, 1);
      assert.doesNotMatch(readText(log('access.log.1')), /missing-after/);
      assert.doesNotMatch(readText(log('error.log.1')), /missing-after/);
      assert.deepEqual(logLines(withoutPrefix(readText(log('error.log')), p)), [
        `[error] *CONN open() "PREFIX/html/missing-after" failed (2: No such file or directory), client: 127.0.0.1, server: , request: "GET /missing-after HTTP/1.1", host: "127.0.0.1:${port}"`,
      ]);
      assert.equal(proc.hasExited(), false);
    });

    it('-s reopen: after the access log is renamed, new lines go to a new file', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one', 1, 'access_log logs/access.log;').replace('access_log off;', '') });
      await startImpl(impl, p, [port]);
      const log = (f: string): string => join(p, 'logs', f);
      await tryGet(port, '/before');
      await waitFor(() => readText(log('access.log')).includes('/before'), 5000, 'the first line');
      renameSync(log('access.log'), log('access.log.1'));
      const r = runImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf', '-s', 'reopen']);
      assert.equal(r.status, 0, r.stderr);
      await waitFor(() => existsSync(log('access.log')), 5000, 'a new access.log');
      await sleep(300);
      await tryGet(port, '/after');
      await waitFor(() => readText(log('access.log')).includes('/after'), 5000, 'the line in the new file');
      assert.doesNotMatch(readText(log('access.log.1')), /\/after/);
    });
  });

  describe(`${impl.name}: start-up`, () => {
    after(cleanup);

    it('-e FILE: a start-up warning goes into FILE as a log line and to stderr as "nginx: [warn] …"', async () => {
      const port = await freePort();
      const text = conf(port, 'one').replace('location / {', 'location / { allow 10.1.2.3/8;');
      const p = makePrefix({ 'nginx.conf': text });
      const proc = await startImpl(impl, p, [port], ['-e', 'logs/startup.log']);
      const warn = `low address bits of 10.1.2.3/8 are meaningless in ${p}/nginx.conf:12`;
      await waitFor(() => proc.stderr().includes('\n'), 5000, 'stderr');
      assert.equal(proc.stderr(), `nginx: [warn] ${warn}\n`);
      assert.deepEqual(logLines(readText(join(p, 'logs/startup.log'))), [`[warn] ${warn}`]);
      proc.child.kill('SIGQUIT');
      assert.equal(await proc.waitExit(), 0);
    });

    it('without -e: the start-up warning is a full log line on stderr', async () => {
      const port = await freePort();
      const text = conf(port, 'one').replace('location / {', 'location / { allow 10.1.2.3/8;');
      const p = makePrefix({ 'nginx.conf': text });
      const proc = await startImpl(impl, p, [port]);
      await waitFor(() => proc.stderr().includes('\n'), 5000, 'stderr');
      assert.deepEqual(logLines(proc.stderr()), [`[warn] low address bits of 10.1.2.3/8 are meaningless in ${p}/nginx.conf:12`]);
      proc.child.kill('SIGQUIT');
      assert.equal(await proc.waitExit(), 0);
    });

    it('a configuration that fails after it was read: exit 1, the [emerg] on stderr, and no process of the server left', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one').replace('events {}\n', '') });
      const proc = spawnImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf']);
      assert.equal(await proc.waitExit(10_000), 1);
      assert.deepEqual(logLines(proc.stderr()), ['[emerg] no "events" section in configuration']);
      // jinx's master starts its first worker before the compile step that fails (src/cli/first-worker.ts): killed, not left to find out
      await waitFor(() => processesNaming(p).length === 0, 50, 'no process of the server');
    });

    it('master_process off: one process serves, without a worker', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': `master_process off;\n${conf(port, 'one')}` });
      const proc = await startImpl(impl, p, [port]);
      assert.equal((await tryGet(port, '/')).body, 'one\n');
      await waitFor(() => childPids(proc.pid).length === 0, 2000, 'no child process');
      proc.child.kill('SIGQUIT');
      assert.equal(await proc.waitExit(), 0);
    });

    it('-g "daemon off;" with a file that does not say it: runs in the foreground', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one').replace('daemon off;\n', '') });
      const proc = await startImpl(impl, p, [port], ['-g', 'daemon off;']);
      assert.equal(readText(join(p, 'logs/nginx.pid')), `${proc.pid}\n`);
      assert.equal((await tryGet(port, '/')).body, 'one\n');
      proc.child.kill('SIGQUIT');
      assert.equal(await proc.waitExit(), 0);
    });

    it('daemon on: the command exits 0 once the server serves; the pid file names the daemon; -s quit stops it', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'one').replace('daemon off;', 'daemon on;') });
      const pidFile = join(p, 'logs/nginx.pid');
      onCleanup(async () => {
        const pid = readPid(pidFile);
        if (pid === undefined) return;
        try {
          process.kill(pid, 'SIGTERM');
        } catch {
          return;
        }
        await waitFor(() => !existsSync(pidFile), 5000, 'the daemon to exit').catch(() => process.kill(pid, 'SIGKILL'));
      });
      const launcher = spawnImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf']);
      assert.equal(await launcher.waitExit(10_000), 0, launcher.stderr());
      await waitFor(() => readPid(pidFile) !== undefined, 5000, 'the pid file');
      const pid = readPid(pidFile)!;
      assert.notEqual(pid, launcher.pid, 'the pid file names the daemon, not the command that started it');
      await waitFor(() => portOpen(port), 5000, 'the port');
      assert.equal((await tryGet(port, '/')).body, 'one\n');
      const r = runImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf', '-s', 'quit']);
      assert.equal(r.status, 0, r.stderr);
      await waitFor(() => !existsSync(pidFile), 10_000, 'the daemon to exit and remove its pid file');
      await waitFor(async () => !(await portOpen(port)), 5000, 'the port to close');
    });
  });

  describe(`${impl.name}: a port already in use`, () => {
    after(cleanup);

    it('bind() to 127.0.0.1:PORT failed (98: Address already in use) on stderr, exit 1, no pid file', async () => {
      const port = await freePort();
      const blocker = createNetServer();
      await new Promise<void>((r) => blocker.listen(port, '127.0.0.1', () => r()));
      onCleanup(() => new Promise<void>((r) => blocker.close(() => r())));
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const proc = spawnImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf']);
      const code = await proc.waitExit(15_000);
      assert.equal(code, 1);
      assert.match(proc.stderr(), new RegExp(`\\[emerg\\] (\\d+#\\d+: )?bind\\(\\) to 127\\.0\\.0\\.1:${port} failed \\(98: Address already in use\\)\\n`));
      assert.equal(existsSync(join(p, 'logs/nginx.pid')), false);
    });

    /** Runs the server on a port held by another socket; resolves to its exit code, stderr and error.log. */
    async function blocked(): Promise<{ code: number | null; stderr: string; errorLog: string; port: number }> {
      const port = await freePort();
      const blocker = createNetServer();
      await new Promise<void>((r) => blocker.listen(port, '127.0.0.1', () => r()));
      onCleanup(() => new Promise<void>((r) => blocker.close(() => r())));
      const p = makePrefix({ 'nginx.conf': conf(port, 'one') });
      const proc = spawnImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf']);
      const code = await proc.waitExit(15_000);
      return { code, stderr: proc.stderr(), errorLog: readText(join(p, 'logs/error.log')), port };
    }

    it('the bind failure goes to the configured error_log as an [emerg] line, and to stderr as "nginx: [emerg] …"', async () => {
      const r = await blocked();
      assert.equal(r.code, 1);
      const bind = `bind() to 127.0.0.1:${r.port} failed (98: Address already in use)`;
      assert.ok(logLines(r.errorLog).includes(`[emerg] ${bind}`), `error.log:\n${r.errorLog}`);
      assert.ok(r.stderr.split('\n').includes(`nginx: [emerg] ${bind}`), `stderr:\n${r.stderr}`);
    });

    it('bind() is tried 5 times, then "still could not bind()", in the error_log and on stderr', async () => {
      const r = await blocked();
      assert.equal(r.code, 1);
      const bind = `bind() to 127.0.0.1:${r.port} failed (98: Address already in use)`;
      assert.deepEqual(logLines(r.errorLog), [...Array<string>(5).fill(`[emerg] ${bind}`), '[emerg] still could not bind()']);
      assert.deepEqual(r.stderr.split('\n').filter(Boolean), [
        ...Array<string>(5).fill(`nginx: [emerg] ${bind}`), 'nginx: [emerg] still could not bind()',
      ]);
    });
  });
}

for (const impl of impls()) runScenarios(impl);
