/**
 * What the resource tests measure, as a user or an operator would: the
 * connections an upstream server sees (accepted, open right now), the open
 * descriptors of the serving process (`/proc/PID/fd`), and whether an
 * unrelated client is served while others misbehave. Scenarios run on jinx
 * and, when the reference nginx is installed, on nginx too, each in a fresh
 * prefix with `logs/` and `tmp/`.
 */
import { mkdirSync, readdirSync, readlinkSync } from 'node:fs';
import { createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { ORACLE } from './differential.js';
import { JINX, freePort, onCleanup, startServer, tempDir, writeFiles, type ServerProcess } from './harness.js';
import { servingPid } from './slow-clients.js';

/** An upstream HTTP server that counts its connections. */
export interface CountingUpstream {
  readonly port: number;
  /** Connections accepted since it started. */
  accepted(): number;
  /** Connections open right now. */
  open(): number;
  /** Requests received since it started. */
  requests(): number;
}

/** Starts an HTTP server on 127.0.0.1 whose requests `answer` handles (the body is read first); stopped at cleanup. */
export async function countingUpstream(answer: (req: IncomingMessage, res: ServerResponse) => void): Promise<CountingUpstream> {
  let accepted = 0;
  let requests = 0;
  const sockets = new Set<Socket>();
  const server = createServer((req, res) => {
    requests++;
    req.resume();
    req.on('end', () => answer(req, res));
  });
  // idle connections stay until the proxy closes them: the proxy's cache is what is measured
  server.keepAliveTimeout = 120_000;
  server.on('connection', (socket: Socket) => {
    accepted++;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((res) => server.listen(0, '127.0.0.1', () => res()));
  onCleanup(() => new Promise<void>((res) => {
    for (const s of sockets) s.destroy();
    server.close(() => res());
  }));
  return { port: (server.address() as { port: number }).port, accepted: () => accepted, open: () => sockets.size, requests: () => requests };
}

/** The number of open descriptors of process `pid`. */
export function descriptorCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** The targets of `pid`'s descriptors that are not among `before` (deleted temp files show as `PATH (deleted)`). */
export function newDescriptors(pid: number, before: readonly string[]): string[] {
  const now = descriptorTargets(pid);
  const left = [...before];
  return now.filter((t) => {
    const at = left.indexOf(t);
    if (at === -1) return true;
    left.splice(at, 1);
    return false;
  });
}

/** The targets of `pid`'s open descriptors (`socket:[…]`, paths, `pipe:[…]` …). */
export function descriptorTargets(pid: number): string[] {
  const out: string[] = [];
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      out.push(readlinkSync(`/proc/${pid}/fd/${fd}`));
    } catch {
      // closed meanwhile
    }
  }
  return out;
}

/** Waits until `check` holds, polling every 50 ms, at most `timeoutMs`; returns whether it held. */
export async function settles(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (check()) return true;
    if (Date.now() >= deadline) return false;
    await new Promise((res) => setTimeout(res, 50));
  }
}

/** Runs `task(0)` … `task(count - 1)`, at most `concurrency` at a time. */
export async function inBatches(count: number, concurrency: number, task: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < count) await task(next++);
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
}

/** A client that keeps asking for one path while a test runs, one request at a time. */
export interface Bystander {
  /** Stops asking; resolves to the statuses (or error codes) of every request made. */
  stop(): Promise<(number | string)[]>;
}

/** Requests `GET path` from 127.0.0.1:port every `everyMs` on a connection of its own each time, until stopped. */
export function bystander(port: number, path: string, everyMs = 100): Bystander {
  const seen: (number | string)[] = [];
  let stopped = false;
  const once = (): Promise<void> => new Promise((res) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent: false, timeout: 5000 }, (resp) => {
      resp.resume();
      resp.on('end', () => {
        seen.push(resp.statusCode ?? 0);
        res();
      });
    });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
    req.on('error', (err: NodeJS.ErrnoException) => {
      seen.push(err.code ?? err.message);
      res();
    });
    req.end();
  });
  const loop = (async () => {
    while (!stopped) {
      await once();
      await new Promise((res) => setTimeout(res, everyMs));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return seen;
    },
  };
}

/** The server a scenario runs on. */
export interface ResourceSide {
  readonly kind: 'nginx' | 'jinx';
  readonly port: number;
  /** Further ports, when asked for. */
  readonly ports: readonly number[];
  readonly prefix: string;
  readonly server: ServerProcess;
  /** The process that serves connections (nginx's worker). */
  readonly pid: number;
}

/**
 * Runs `scenario` on jinx, then on the reference nginx when one is
 * installed (unless `jinxOnly`), each on `conf` (made for its port, extra
 * ports and prefix) in a fresh prefix; resolves to the results by server.
 */
export async function onEachServer<T>(
  spec: { conf: (env: { port: number; ports: readonly number[]; prefix: string }) => string; extraPorts?: number; jinxOnly?: boolean },
  scenario: (side: ResourceSide) => Promise<T>,
): Promise<{ jinx: T; nginx: T | undefined }> {
  const run = async (kind: 'nginx' | 'jinx', binary: string): Promise<T> => {
    const prefix = tempDir(`jinx-resource-${kind}-`);
    mkdirSync(join(prefix, 'logs'));
    mkdirSync(join(prefix, 'tmp'));
    const port = await freePort();
    const ports: number[] = [];
    for (let i = 0; i < (spec.extraPorts ?? 0); i++) ports.push(await freePort());
    writeFiles(prefix, { 'nginx.conf': spec.conf({ port, ports, prefix }) });
    const server = await startServer(binary, prefix, join(prefix, 'nginx.conf'), [port, ...ports]);
    try {
      return await scenario({ kind, port, ports, prefix, server, pid: servingPid(server.child.pid!) });
    } finally {
      await server.stop('SIGQUIT');
    }
  };
  const jinx = await run('jinx', JINX);
  const nginx = ORACLE && !spec.jinxOnly ? await run('nginx', ORACLE) : undefined;
  return { jinx, nginx };
}
