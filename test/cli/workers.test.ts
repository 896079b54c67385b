/**
 * nginx's process model (issue 16): a master and `worker_processes`
 * workers, the master's notices, a worker killed and replaced, reloads under
 * load that drop no request, a WebSocket tunnel and a long download across a
 * reload, and a `limit_req` zone counted across workers. Where the
 * reference nginx is installed, the same scenario runs on it first, so the
 * expectation is nginx's.
 */
import { strict as assert } from 'node:assert';
import { spawn, spawnSync } from 'node:child_process';
import { request as httpRequest, Agent } from 'node:http';
import { connect as h2connect, type ClientHttp2Session } from 'node:http2';
import { connect as netConnect, createServer as createNetServer, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { createPrivateKey } from 'node:crypto';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { mkdirSync, readlinkSync, renameSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { cleanup, freePort, onCleanup, portOpen, waitFor } from '../helpers/harness.js';
import { repeatingUpstream } from '../helpers/upstreams.js';
import { impls, JINX_IMPL, KeepAliveClient, makePrefix, readText, runImpl, sleep, spawnImpl, startImpl, type Impl } from '../helpers/cli.js';
import { selfSigned } from '../helpers/pki.js';

/** The pids of a process's children: the master's workers. */
function workerPids(masterPid: number): number[] {
  const r = spawnSync('ps', ['-o', 'pid=', '--ppid', String(masterPid)], { encoding: 'utf8' });
  return r.stdout.split('\n').map((s) => Number(s.trim())).filter((n) => n > 0).sort();
}

/** Error-log notices of the process model, without the time: `[notice] PID#PID: start worker process N`. */
function notices(log: string): string[] {
  return log.split('\n').filter((l) => /\[(notice|alert|emerg)\]/.test(l)).map((l) => l.replace(/^\S+ \S+ /, ''));
}

/** A configuration with `worker_processes 2`, whose `/` answers with the worker's pid and `X-Gen: GEN`. */
function conf(port: number, gen: string, extra = ''): string {
  return `daemon off;
worker_processes 2;
worker_shutdown_timeout 3s;
pid logs/nginx.pid;
error_log logs/error.log notice;
events {}
http {
    access_log off;
    client_body_temp_path logs/body;
    proxy_temp_path logs/proxy;
    limit_req_zone $server_port zone=one:1m rate=1r/m;
    ${extra}
    server {
        listen 127.0.0.1:${port};
        http2 on;
        location / { add_header X-Gen ${gen}; return 200 "$pid\\n"; }
        location /limited { limit_req zone=one; root html; }
        location /conn { return 200 "$connection\\n"; }
        location /body-file {
            client_body_in_file_only clean;
            proxy_set_header X-Made "$pid $request_body_file";
            proxy_pass http://127.0.0.1:${port}/made;
        }
        location /made { return 200 "$http_x_made\\n"; }
    }
}
`;
}

/** POSTs `size` bytes to `path` on a new connection; resolves to the status and body (status 0 when the connection failed). */
function postBytes(port: number, path: string, size: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, method: 'POST', agent: false, headers: { 'content-length': size } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => { body += d.toString(); });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', () => resolve({ status: 0, body: '' }));
    req.end(Buffer.alloc(size, 'x'));
  });
}

/** A keep-alive client on the worker other than `than`'s (new connections until one lands there; the first one wherever it lands when `than` is 0). */
async function clientOn(port: number, than: number): Promise<{ client: KeepAliveClient; pid: number }> {
  for (let i = 0; i < 200; i++) {
    const client = new KeepAliveClient(port);
    const pid = Number((await client.get('/')).body.trim());
    if (pid !== than) return { client, pid };
    client.agent.destroy();
  }
  throw new Error(`no connection reached a worker other than ${than}`);
}

/** The `X-Gen` header of a GET of `/` on a new connection. */
function genOf(port: number): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/', agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.headers['x-gen'] as string | undefined));
    });
    req.on('error', () => resolve(undefined));
    req.end();
  });
}

/** The outcome of a load run. */
interface Load {
  ok: number;
  /** Requests refused before any response (a connection closed by a stopping worker, a stream past GOAWAY), sent again on a new connection. */
  retried: number;
  failed: string[];
  gens: Set<string>;
}

/**
 * Requests `/` over `h1` keep-alive HTTP/1.1 connections and `h2` HTTP/2
 * connections (4 streams each) until `untilMs`, each loop at most one
 * request per `paceMs` (about 2,000 requests a second in all). A request that
 * got no response because its connection was closed under it (HTTP/1.1,
 * RFC 9112 §9.3.1) or its stream was refused past a GOAWAY (RFC 9113 §8.7)
 * is sent again, as clients do, up to 5 times 10 to 50 ms apart; anything
 * else is a failure.
 */
async function load(port: number, untilMs: number, h1 = 8, h2 = 2, paceMs = 6): Promise<Load> {
  const out: Load = { ok: 0, retried: 0, failed: [], gens: new Set() };
  const agent = new Agent({ keepAlive: true, maxSockets: h1 });
  // sockets that carried a response (node's `reusedSocket` misses one handed to a queued request)
  const used = new WeakSet<object>();
  const h1Get = (): Promise<{ status?: number; gen?: string; retry?: boolean; error?: string }> => new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path: '/', agent }, (res) => {
      used.add(res.socket);
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode, gen: String(res.headers['x-gen']) }));
      res.on('error', (e) => resolve({ error: `body: ${e.message}` }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => {
      const reused = req.reusedSocket || (req.socket !== null && used.has(req.socket));
      resolve(reused && (e.code === 'ECONNRESET' || e.code === 'EPIPE') ? { retry: true } : { error: `${e.code}: ${e.message}` });
    });
    req.end();
  });
  let session: ClientHttp2Session | undefined;
  const h2Session = (): ClientHttp2Session => {
    if (!session || session.closed || session.destroyed) {
      const s = h2connect(`http://127.0.0.1:${port}`);
      s.on('error', () => undefined);
      s.on('goaway', () => { if (session === s) session = undefined; });
      session = s;
    }
    return session;
  };
  const h2Get = (): Promise<{ status?: number; gen?: string; retry?: boolean; error?: string }> => new Promise((resolve) => {
    let stream;
    try {
      stream = h2Session().request({ ':path': '/' });
    } catch {
      session = undefined;
      resolve({ retry: true });
      return;
    }
    let head: { status?: number; gen?: string } = {};
    stream.on('response', (h) => { head = { status: Number(h[':status']), gen: String(h['x-gen']) }; });
    stream.resume();
    stream.on('end', () => resolve(head.status ? head : { retry: true }));
    stream.on('error', (e: NodeJS.ErrnoException) => {
      const refused = /REFUSED_STREAM|GOAWAY|ERR_HTTP2_STREAM_CANCEL|ERR_HTTP2_INVALID_SESSION/.test(`${e.code} ${e.message}`);
      resolve(refused && !head.status ? { retry: true } : { error: `${e.code}: ${e.message}` });
    });
  });
  const loop = async (get: typeof h1Get): Promise<void> => {
    while (Date.now() < untilMs) {
      const started = Date.now();
      let r = await get();
      // as a client would, a little later each time: a burst of retries would all meet the same stopping worker
      for (let tries = 0; r.retry && tries < 5; tries++) {
        out.retried++;
        await sleep(10 * (tries + 1));
        r = await get();
      }
      if (r.status === 200 && r.gen) {
        out.ok++;
        out.gens.add(r.gen);
      } else {
        out.failed.push(r.error ?? (r.retry ? 'refused 6 times' : `status ${r.status}`));
      }
      const wait = paceMs - (Date.now() - started);
      if (wait > 0) await sleep(wait);
    }
  };
  await Promise.all([...Array.from({ length: h1 }, () => loop(h1Get)), ...Array.from({ length: h2 * 4 }, () => loop(h2Get))]);
  agent.destroy();
  session?.close();
  return out;
}

function runScenarios(impl: Impl): void {
  describe(`${impl.name}: worker processes`, () => {
    after(cleanup);

    it('worker_processes 2: the master starts two workers, logged as nginx logs it, and a worker answers', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'a') });
      const proc = await startImpl(impl, p, [port]);
      await waitFor(() => workerPids(proc.pid).length === 2, 5000, 'two workers');
      const workers = workerPids(proc.pid);
      const { client, pid } = await clientOn(port, 0);
      client.agent.destroy();
      assert.ok(workers.includes(pid), `the answer came from ${pid}, not a worker of ${workers.join(', ')}`);
      const log = notices(readText(join(p, 'logs/error.log')));
      const master = `[notice] ${proc.pid}#${proc.pid}: `;
      assert.ok(log.includes(`${master}start worker processes`), log.join('\n'));
      for (const w of workers) assert.ok(log.includes(`${master}start worker process ${w}`), log.join('\n'));
      proc.child.kill('SIGQUIT');
      assert.equal(await proc.waitExit(), 0);
      const end = notices(readText(join(p, 'logs/error.log')));
      for (const w of workers) {
        assert.ok(end.includes(`[notice] ${w}#${w}: exit`), end.join('\n'));
        assert.ok(end.includes(`${master}worker process ${w} exited with code 0`), end.join('\n'));
      }
      assert.equal(end.at(-1), `${master}exit`);
    });

    it('a worker killed with SIGKILL: [alert] … exited on signal 9, a new worker within 1 s, the other worker serves throughout', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'a') });
      const proc = await startImpl(impl, p, [port]);
      await waitFor(() => workerPids(proc.pid).length === 2, 5000, 'two workers');
      const first = await clientOn(port, 0);
      const other = await clientOn(port, first.pid);
      first.client.agent.destroy();
      const killedAt = Date.now();
      process.kill(first.pid, 'SIGKILL');
      let replacedAfterMs = -1;
      const served: string[] = [];
      while (Date.now() - killedAt < 1500) {
        const r = await other.client.get('/');
        served.push(r.error ? String(r.error) : r.body.trim());
        if (replacedAfterMs < 0 && workerPids(proc.pid).filter((w) => w !== other.pid && w !== first.pid).length === 1) replacedAfterMs = Date.now() - killedAt;
        await sleep(20);
      }
      other.client.agent.destroy();
      assert.deepEqual([...new Set(served)], [String(other.pid)], 'every request of the other worker\'s client was served by it');
      assert.ok(replacedAfterMs >= 0 && replacedAfterMs <= 1000, `the new worker started after ${replacedAfterMs} ms`);
      const log = notices(readText(join(p, 'logs/error.log')));
      assert.ok(log.includes(`[alert] ${proc.pid}#${proc.pid}: worker process ${first.pid} exited on signal 9`), log.join('\n'));
    });

    it('a QUIT that comes while the workers start: the master stops them once they serve and exits last with code 0, no worker left serving', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'a').replace('worker_processes 2;', 'worker_processes 4;') });
      const proc = spawnImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf']);
      // the first worker listens while the others start
      await waitFor(() => proc.hasExited() || portOpen(port), 10_000, `port ${port}`);
      proc.child.kill('SIGQUIT');
      assert.equal(await proc.waitExit(), 0, proc.stderr());
      const log = notices(readText(join(p, 'logs/error.log')));
      assert.equal(log.at(-1), `[notice] ${proc.pid}#${proc.pid}: exit`, log.join('\n'));
      await waitFor(async () => !(await portOpen(port)), 5000, 'no process serving the port');
      assert.equal(proc.stderr(), '');
    });

    it('a QUIT that comes while a reload\'s new workers start: they stop once they can, none exits on the signal, the master exits 0', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'a') });
      const proc = spawnImpl(impl, ['-p', `${p}/`, '-c', 'nginx.conf']);
      const starts = (): number => (readText(join(p, 'logs/error.log')).match(/start worker process \d+/g) ?? []).length;
      await waitFor(async () => proc.hasExited() || (starts() === 2 && (await portOpen(port))), 10_000, `port ${port}`);
      proc.child.kill('SIGHUP');
      // the new workers were forked: the QUIT reaches them while they start
      await waitFor(() => proc.hasExited() || starts() > 2, 10_000, 'new workers');
      proc.child.kill('SIGQUIT');
      assert.equal(await proc.waitExit(), 0, proc.stderr());
      const log = readText(join(p, 'logs/error.log'));
      assert.doesNotMatch(log, /exited on signal/);
    });

    it('worker_cpu_affinity auto, worker_rlimit_nofile and worker_priority: each worker on its own CPU, with the limit and the priority, logged as nginx logs it', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'a').replace('worker_processes 2;', 'worker_processes 2;\nworker_cpu_affinity auto;\nworker_rlimit_nofile 4096;\nworker_priority 5;') });
      const proc = await startImpl(impl, p, [port]);
      await waitFor(() => workerPids(proc.pid).length === 2, 5000, 'two workers');
      const seen = workerPids(proc.pid).map((w) => {
        const status = readText(`/proc/${w}/status`);
        const limits = readText(`/proc/${w}/limits`);
        const stat = readText(`/proc/${w}/stat`);
        return {
          cpus: /Cpus_allowed_list:\s+(\S+)/.exec(status)?.[1],
          nofile: /Max open files\s+(\d+)\s+(\d+)/.exec(limits)?.slice(1, 3).join('/'),
          nice: stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16],
        };
      });
      assert.deepEqual(seen.map((w) => w.cpus).sort(), ['0', '1']);
      assert.deepEqual(seen.map((w) => [w.nofile, w.nice]), [['4096/4096', '5'], ['4096/4096', '5']]);
      const affinityLines = (): string[] => notices(readText(join(p, 'logs/error.log'))).map((l) => l.replace(/\d+#\d+: /, '')).filter((l) => l.includes('sched_setaffinity')).sort();
      await waitFor(() => affinityLines().length >= 2, 5000, 'the sched_setaffinity lines');
      assert.deepEqual(affinityLines(), ['[notice] sched_setaffinity(): using cpu #0', '[notice] sched_setaffinity(): using cpu #1']);
    });

    it('started as root: workers run as nobody, or as `user`, own the temp directories, reopen their logs as that user; worker_rlimit_core and working_directory apply', { skip: process.geteuid?.() !== 0 && 'needs root' }, async () => {
      const port = await freePort();
      const front = await freePort();
      const daemonUid = Number(spawnSync('id', ['-u', 'daemon'], { encoding: 'utf8' }).stdout.trim());
      const spooling = `server { listen 127.0.0.1:${front}; location / { client_body_buffer_size 1k; proxy_pass http://127.0.0.1:${port}/; } }`;
      const uidsOf = (master: number): number[] => workerPids(master).map((w) => Number(/Uid:\s+(\d+)/.exec(readText(`/proc/${w}/status`))?.[1]));
      const byDefault = makePrefix({ 'nginx.conf': conf(port, 'a', spooling) });
      const plain = await startImpl(impl, byDefault, [port, front]);
      await waitFor(() => workerPids(plain.pid).length === 2, 5000, 'two workers');
      assert.deepEqual(uidsOf(plain.pid), [65534, 65534], 'the workers run as nobody');
      plain.child.kill('SIGQUIT');
      assert.equal(await plain.waitExit(), 0);

      const p = makePrefix({ 'nginx.conf': 'user daemon;\nworker_rlimit_core 10m;\nworking_directory /tmp;\n' + conf(port, 'a', spooling) });
      const proc = await startImpl(impl, p, [port, front]);
      await waitFor(() => workerPids(proc.pid).length === 2, 5000, 'two workers');
      assert.deepEqual(uidsOf(proc.pid), [daemonUid, daemonUid], 'the workers run as daemon');
      assert.equal(statSync(join(p, 'logs/body')).uid, daemonUid, 'client_body_temp_path is the workers\'');
      const posted = (await postBytes(front, '/', 64 * 1024)).status;
      assert.equal(posted, 200, 'a body spooled to a temp file goes through');
      for (const w of workerPids(proc.pid)) {
        assert.match(readText(`/proc/${w}/limits`), /Max core file size\s+10485760\s+10485760/);
        assert.equal(readlinkSync(`/proc/${w}/cwd`), '/tmp');
      }
      const workers = workerPids(proc.pid);
      renameSync(join(p, 'logs/error.log'), join(p, 'logs/error.old'));
      process.kill(proc.pid, 'SIGUSR1');
      const reopened = (): number => readText(join(p, 'logs/error.old')).split('\n').filter((l) => l.endsWith('reopening logs')).length;
      await waitFor(() => reopened() >= 4, 5000, 'every process\'s "reopening logs"');
      assert.equal(statSync(join(p, 'logs/error.log')).uid, daemonUid, 'the reopened error log is the workers\'');
      // each worker writes a line to it: a missing file (404) on one, a request limit_req refuses (503) on the other
      const first = await clientOn(port, 0);
      const other = await clientOn(port, first.pid);
      const statuses = [(await first.client.get('/limited/missing')).status, (await other.client.get('/limited/missing')).status];
      first.client.agent.destroy();
      other.client.agent.destroy();
      assert.deepEqual(statuses, [404, 503]);
      const writers = new Set(readText(join(p, 'logs/error.log')).split('\n').map((l) => Number(/ (\d+)#/.exec(l)?.[1])));
      assert.deepEqual(workers.filter((w) => writers.has(w)), workers, 'both workers wrote to the reopened error log');
    });

    for (const zone of [true, false]) {
      it(`an upstream peer that failed on one worker is ${zone ? 'skipped by the other too with `zone`' : 'tried by the other too without `zone`'} (max_fails=1)`, async () => {
        const port = await freePort();
        const live = await freePort();
        const dead = await freePort();
        const upstream = `upstream pair { ${zone ? 'zone pair 64k; ' : ''}server 127.0.0.1:${dead} max_fails=1 fail_timeout=30s; server 127.0.0.1:${live}; }
    server { listen 127.0.0.1:${live}; location / { return 200 "live\\n"; } }`;
        const confText = conf(port, 'a', upstream).replace('location /conn', 'location /up { proxy_pass http://pair/; }\n        location /conn');
        const p = makePrefix({ 'nginx.conf': confText });
        await startImpl(impl, p, [port, live]);
        const first = await clientOn(port, 0);
        const other = await clientOn(port, first.pid);
        const bodies: string[] = [];
        for (const client of [first.client, other.client]) {
          for (let i = 0; i < 4; i++) bodies.push((await client.get('/up')).body);
        }
        first.client.agent.destroy();
        other.client.agent.destroy();
        assert.deepEqual([...new Set(bodies)], ['live\n'], 'every request was answered by the live peer');
        const refused = readText(join(p, 'logs/error.log')).split('\n').filter((l) => l.includes(`connect() failed (111: Connection refused) while connecting to upstream`));
        const workers = new Set(refused.map((l) => / (\d+)#/.exec(l)?.[1]));
        assert.equal(workers.size, zone ? 1 : 2, refused.join('\n'));
      });
    }

    it('connection numbers ($connection, the *N of log lines) are not repeated across workers', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'a') });
      await startImpl(impl, p, [port]);
      const first = await clientOn(port, 0);
      const other = await clientOn(port, first.pid);
      const numbers = [(await first.client.get('/conn')).body, (await other.client.get('/conn')).body];
      first.client.agent.destroy();
      other.client.agent.destroy();
      assert.notEqual(numbers[0], numbers[1], `both workers numbered a connection ${numbers[0]}`);
    });

    it('temp file numbers (request bodies, multipart boundaries) are not repeated across workers', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'a') });
      await startImpl(impl, p, [port]);
      // each POST on a new connection, until both workers have kept a body in a file
      const files = new Map<string, string[]>();
      for (let i = 0; i < 200 && files.size < 2; i++) {
        const [pid = '', file = ''] = (await postBytes(port, '/body-file', 16)).body.trim().split(' ');
        files.set(pid, [...(files.get(pid) ?? []), file]);
      }
      assert.equal(files.size, 2, 'both workers kept a request body in a file');
      const all = [...files.values()].flat();
      assert.equal(new Set(all).size, all.length, `temp files named twice: ${JSON.stringify([...files])}`);
    });

    it('a limit_req zone counts the requests of every worker (1r/m: the second request is refused on the other worker)', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'a'), 'html/limited': 'limited\n' });
      await startImpl(impl, p, [port]);
      const first = await clientOn(port, 0);
      const other = await clientOn(port, first.pid);
      assert.equal((await first.client.get('/limited')).status, 200);
      assert.equal((await other.client.get('/limited')).status, 503);
      first.client.agent.destroy();
      other.client.agent.destroy();
    });

    for (const how of ['session tickets', 'ssl_session_cache shared'] as const) {
      it(`a TLS session made with one worker resumes on the other: the workers share their ${how === 'session tickets' ? 'session ticket keys' : 'shared session cache'}`, async () => {
        const port = await freePort();
        const { cert, key } = selfSigned('localhost');
        const sessions = how === 'session tickets' ? '' : '\n        ssl_session_tickets off;\n        ssl_session_cache shared:SSL:1m;';
        const confText = conf(port, 'a').replace(`listen 127.0.0.1:${port};`, `listen 127.0.0.1:${port} ssl;\n        ssl_certificate cert.pem;\n        ssl_certificate_key cert.key;${sessions}`);
        const p = makePrefix({ 'nginx.conf': confText, 'cert.pem': cert, 'cert.key': key });
        await startImpl(impl, p, [port]);
        /** One HTTP/1.0 GET over a new TLS 1.2 connection: the answering worker's pid, whether the session was resumed, the session to resume. */
        const get = (session?: Buffer): Promise<{ pid: number; reused: boolean; session: Buffer | undefined }> => new Promise((resolve, reject) => {
          const s = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false, session, maxVersion: 'TLSv1.2' });
          let text = '';
          let ticket: Buffer | undefined;
          let reused = false;
          s.on('session', (t: Buffer) => { ticket = t; });
          s.on('secureConnect', () => {
            reused = s.isSessionReused();
            s.write('GET / HTTP/1.0\r\nHost: localhost\r\n\r\n');
          });
          s.on('data', (d: Buffer) => { text += d.toString('latin1'); });
          s.on('error', reject);
          s.on('close', () => resolve({ pid: Number(/\r\n\r\n(\d+)/.exec(text)?.[1]), reused, session: ticket }));
        });
        const first = await get();
        assert.ok(first.session, 'the server made a session to resume');
        let other: { pid: number; reused: boolean } | undefined;
        for (let i = 0; i < 100 && !other; i++) {
          const r = await get(first.session);
          if (r.pid !== first.pid) other = r;
        }
        assert.ok(other, `no connection reached a worker other than ${first.pid}`);
        assert.equal(other.reused, true, `the session of worker ${first.pid} was not resumed by worker ${other.pid}`);
      });
    }

    it('ssl_password_file that is a FIFO written once: the master reads it, both workers serve TLS with the key it opened', async () => {
      const port = await freePort();
      const { cert, key } = selfSigned('localhost');
      const encrypted = createPrivateKey(key).export({ format: 'pem', type: 'pkcs8', cipher: 'aes-128-cbc', passphrase: 'secret' }) as string;
      const tls = `listen 127.0.0.1:${port} ssl;\n        ssl_certificate cert.pem;\n        ssl_certificate_key cert.key;\n        ssl_password_file password;`;
      const p = makePrefix({ 'nginx.conf': conf(port, 'a').replace(`listen 127.0.0.1:${port};`, tls), 'cert.pem': cert, 'cert.key': encrypted });
      assert.equal(spawnSync('mkfifo', [join(p, 'password')]).status, 0);
      // one writer, once: a second reader of the FIFO would wait for ever
      const writer = spawn('sh', ['-c', 'echo secret > password'], { cwd: p, stdio: 'ignore' });
      onCleanup(() => {
        if (writer.exitCode === null) writer.kill('SIGKILL');
      });
      const proc = await startImpl(impl, p, [port]);
      const pidOf = (): Promise<number> => new Promise((resolve, reject) => {
        const s = tlsConnect({ host: '127.0.0.1', port, servername: 'localhost', rejectUnauthorized: false });
        let text = '';
        s.on('secureConnect', () => s.write('GET / HTTP/1.0\r\nHost: localhost\r\n\r\n'));
        s.on('data', (d: Buffer) => { text += d.toString('latin1'); });
        s.on('error', reject);
        s.on('close', () => resolve(Number(/\r\n\r\n(\d+)/.exec(text)?.[1])));
      });
      const pids = new Set<number>();
      for (let i = 0; i < 100 && pids.size < 2; i++) pids.add(await pidOf());
      assert.deepEqual([...pids].sort(), workerPids(proc.pid), 'both workers answered over TLS');
    });

    it('20 reloads every 0.5 s under load over HTTP/1.1 and HTTP/2, then a broken configuration: no request fails, every answer is the old or the new configuration\'s, no old worker is left', async () => {
      const port = await freePort();
      const p = makePrefix({ 'nginx.conf': conf(port, 'a') });
      const proc = await startImpl(impl, p, [port]);
      const untilMs = Date.now() + 15_000;
      const running = load(port, untilMs);
      for (let i = 1; i <= 20; i++) {
        await sleep(500);
        writeFileSync(join(p, 'nginx.conf'), conf(port, i % 2 === 0 ? 'a' : 'b'));
        proc.child.kill('SIGHUP');
      }
      await sleep(500);
      writeFileSync(join(p, 'nginx.conf'), conf(port, 'a', 'bogus_directive on;'));
      proc.child.kill('SIGHUP');
      const result = await running;
      assert.deepEqual(result.failed.slice(0, 5), [], `${result.failed.length} of ${result.ok + result.failed.length} requests failed`);
      assert.ok(result.ok > 5000, `only ${result.ok} requests were served in 15 s`);
      assert.deepEqual([...result.gens].sort(), ['a', 'b']);
      // signals that arrive while a reload is under way make one more reload after it, as in nginx
      const emerg = /\[emerg\] \d+#\d+: unknown directive "bogus_directive" in \S+nginx\.conf:12\n/;
      await waitFor(() => emerg.test(readText(join(p, 'logs/error.log'))), 20_000, 'the [emerg] line of the broken configuration')
        .catch((err: Error) => assert.fail(`${err.message}; the error log ends with:\n${readText(join(p, 'logs/error.log')).split('\n').slice(-60).join('\n')}`));
      // worker_shutdown_timeout 3s: every old worker is gone a little after it
      await waitFor(() => workerPids(proc.pid).length === 2, 5000, 'only the two workers of the last configuration');
      assert.equal(proc.hasExited(), false);
    });

    it('a WebSocket tunnel and a slow 100 MiB download that span a reload both finish', async () => {
      const port = await freePort();
      const big = 100 * 1024 * 1024;
      const up = await repeatingUpstream(Buffer.alloc(1024 * 1024, 'x'), big);
      // a WebSocket upstream: answers the upgrade, then echoes
      const ws = createNetServer((sock) => {
        sock.once('data', () => {
          sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
          sock.on('data', (d) => sock.write(d));
        });
        sock.on('error', () => undefined);
      });
      await new Promise<void>((r) => ws.listen(0, '127.0.0.1', r));
      onCleanup(() => new Promise<void>((r) => ws.close(() => r())));
      const wsPort = (ws.address() as { port: number }).port;
      const confWith = (gen: string): string => conf(port, gen).replace('worker_shutdown_timeout 3s;\n', '').replace(
        'location /limited',
        `location /big { proxy_pass http://127.0.0.1:${up.port}; proxy_buffering off; }
        location /ws { proxy_pass http://127.0.0.1:${wsPort}; proxy_http_version 1.1; proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection upgrade; proxy_read_timeout 30s; }
        location /limited`,
      );
      const p = makePrefix({ 'nginx.conf': confWith('a') });
      const proc = await startImpl(impl, p, [port]);
      // the tunnel
      const tunnel: Socket = netConnect({ host: '127.0.0.1', port });
      tunnel.on('error', () => undefined);
      let tunnelText = '';
      tunnel.on('data', (d: Buffer) => { tunnelText += d.toString('latin1'); });
      tunnel.write('GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
      await waitFor(() => tunnelText.includes('\r\n\r\n'), 5000, 'the 101');
      assert.match(tunnelText, /^HTTP\/1\.1 101 /);
      // the download, read slowly
      let received = 0;
      const download = new Promise<number>((resolve, reject) => {
        const req = httpRequest({ host: '127.0.0.1', port, path: '/big' }, (res) => {
          res.on('data', (d: Buffer) => {
            received += d.length;
            res.pause();
            setTimeout(() => res.resume(), 1);
          });
          res.on('end', () => resolve(received));
          res.on('error', reject);
        });
        req.on('error', reject);
        req.end();
      });
      await waitFor(() => received > 1024 * 1024, 10_000, 'the download to start');
      writeFileSync(join(p, 'nginx.conf'), confWith('b'));
      proc.child.kill('SIGHUP');
      await waitFor(async () => (await genOf(port)) === 'b', 10_000, 'the new configuration');
      assert.ok(received < big, 'the download was still running at the reload');
      tunnel.write('after the reload');
      await waitFor(() => tunnelText.endsWith('after the reload'), 5000, 'the echo through the tunnel');
      tunnel.end();
      assert.equal(await download, big);
    });
  });
}

for (const impl of impls().reverse()) runScenarios(impl);

describe('jinx -s reload (beyond nginx: it says what became of the reload)', () => {
  after(cleanup);

  it('prints nothing and exits 0 when the new configuration serves; exits 1 with the [emerg] lines when a new worker cannot bind; -q only signals', async () => {
    const port = await freePort();
    const busy = createNetServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    onCleanup(() => new Promise<void>((r) => busy.close(() => r())));
    const busyPort = (busy.address() as { port: number }).port;
    const p = makePrefix({ 'nginx.conf': conf(port, 'a') });
    await startImpl(JINX_IMPL, p, [port]);
    /** `-s reload`: its exit status and the lines it printed besides nginx's `signal process started` notice. */
    const reload = (...extra: string[]): { status: number | null; said: string[] } => {
      const r = runImpl(JINX_IMPL, ['-p', `${p}/`, '-c', 'nginx.conf', ...extra, '-s', 'reload']);
      return { status: r.status, said: r.stderr.split('\n').filter((l) => l !== '' && !/\[notice\] \d+#\d+: signal process started$/.test(l)) };
    };
    writeFileSync(join(p, 'nginx.conf'), conf(port, 'b'));
    assert.deepEqual(reload(), { status: 0, said: [] });
    assert.equal(await genOf(port), 'b');
    writeFileSync(join(p, 'nginx.conf'), conf(port, 'c', `server { listen 127.0.0.1:${busyPort}; }`));
    const bindFailed = `nginx: [emerg] bind() to 127.0.0.1:${busyPort} failed (98: Address already in use)`;
    assert.deepEqual(reload(), { status: 1, said: [...Array<string>(5).fill(bindFailed), 'nginx: [emerg] still could not bind()'] });
    assert.equal(await genOf(port), 'b', 'the old workers serve on');
    assert.deepEqual(reload('-q'), { status: 0, said: [] });
  });
});

describe('jinx -t: a process directive jinx cannot carry out is warned about, never ignored silently', () => {
  after(cleanup);

  it('without util-linux in PATH, worker_cpu_affinity and worker_rlimit_* get nginx\'s "not supported on this platform, ignored" warning naming the command', () => {
    const p = makePrefix({ 'nginx.conf': 'worker_processes 2;\nworker_cpu_affinity auto;\nworker_rlimit_nofile 4096;\nworker_rlimit_core 10m;\nevents {}\n' });
    // a PATH with only what bin/jinx itself runs
    const bin = join(p, 'bin');
    mkdirSync(bin);
    symlinkSync(process.execPath, join(bin, 'node'));
    symlinkSync(spawnSync('sh', ['-c', 'command -v dirname'], { encoding: 'utf8' }).stdout.trim(), join(bin, 'dirname'));
    const r = spawnSync(JINX_IMPL.binary, ['-p', `${p}/`, '-c', 'nginx.conf', '-t'], { encoding: 'utf8', env: { ...process.env, PATH: bin } });
    const warnings = r.stderr.split('\n').filter((l) => l.includes('[warn]')).map((l) => l.replace(/^.*\[warn\] \d+#\d+: /, ''));
    const conf = join(p, 'nginx.conf');
    assert.deepEqual(warnings, [
      `"worker_cpu_affinity" is not supported on this platform (no "taskset" of util-linux in PATH), ignored in ${conf}:2`,
      `"worker_rlimit_nofile" is not supported on this platform (no "prlimit" of util-linux in PATH), ignored in ${conf}:3`,
      `"worker_rlimit_core" is not supported on this platform (no "prlimit" of util-linux in PATH), ignored in ${conf}:4`,
    ]);
    assert.equal(r.status, 0, r.stderr);
  });
});
