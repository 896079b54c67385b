/**
 * Clients that take their time, and what a server leaves behind: a raw TCP
 * (or TLS) client that sends in pieces, pauses, stops reading or hangs up, and tells
 * how the server ended the connection (FIN or RST); the files and
 * directories under a temp path; the open descriptors of a server process
 * (its worker, for nginx), so a test can tell that no temp file or socket
 * outlived a request.
 */
import { existsSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { connect as connectTls } from 'node:tls';
import { join } from 'node:path';
import { onCleanup } from './harness.js';

/** How a server ended a connection, and what it sent before. */
export interface Ending {
  /** Everything received, latin1. */
  readonly text: string;
  /** The connection was reset (ECONNRESET) rather than closed. */
  readonly reset: boolean;
  /** Milliseconds from `connect` to the close. */
  readonly afterMs: number;
}

/** A TCP or TLS connection to 127.0.0.1 driven by a test. */
export interface RawClient {
  readonly socket: Socket;
  /** Writes bytes; resolves once they are handed to the kernel. */
  send(data: string | Buffer): Promise<void>;
  /** Bytes received so far, latin1. */
  received(): string;
  /** Resolves when the server closes or resets the connection (or after `timeoutMs`, with the connection destroyed). */
  ended(timeoutMs?: number): Promise<Ending>;
}

/**
 * Opens a connection to 127.0.0.1:port; `paused` leaves what arrives unread
 * in the kernel (a client that does not read); `tls` speaks TLS (HTTP/1.1 by
 * ALPN, the certificate not checked) with that server name.
 */
export async function rawClient(port: number, opts: { paused?: boolean; tls?: { servername: string } } = {}): Promise<RawClient> {
  const socket = opts.tls
    ? connectTls({ host: '127.0.0.1', port, servername: opts.tls.servername, ALPNProtocols: ['http/1.1'], rejectUnauthorized: false })
    : connect({ host: '127.0.0.1', port });
  onCleanup(() => { socket.destroy(); });
  const started = Date.now();
  const chunks: Buffer[] = [];
  let reset = false;
  let closedAt: number | undefined;
  const closed = new Promise<void>((res) => socket.once('close', () => {
    closedAt = Date.now();
    res();
  }));
  socket.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'ECONNRESET') reset = true;
  });
  socket.on('data', (c: Buffer) => chunks.push(c));
  if (opts.paused) socket.pause();
  await new Promise<void>((res, rej) => {
    socket.once(opts.tls ? 'secureConnect' : 'connect', () => res());
    socket.once('error', rej);
  });
  return {
    socket,
    send: (data) => new Promise<void>((res) => {
      if (socket.destroyed) return res();
      socket.write(data, () => res());
    }),
    received: () => Buffer.concat(chunks).toString('latin1'),
    ended: async (timeoutMs = 10_000) => {
      const timer = setTimeout(() => socket.destroy(), timeoutMs);
      await closed;
      clearTimeout(timer);
      return { text: Buffer.concat(chunks).toString('latin1'), reset, afterMs: (closedAt ?? Date.now()) - started };
    },
  };
}

/** The status of the first response in `text`, or undefined when there is none. */
export const statusOf = (text: string): number | undefined => {
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
  return m ? Number(m[1]) : undefined;
};

/** Waits `ms` milliseconds. */
export const sleep = (ms: number): Promise<void> => new Promise((res) => setTimeout(res, ms));

/**
 * `listTree` once the server is done with the request's files: the client
 * may have the whole response a moment before jinx removes a temp file
 * (nginx removes it in the same event-loop turn), so files still listed are
 * waited for, up to `timeoutMs`.
 */
export async function settledTree(dir: string, timeoutMs = 2000): Promise<string[]> {
  const end = Date.now() + timeoutMs;
  let tree = listTree(dir);
  while (tree.some((e) => !e.endsWith('/')) && Date.now() < end) {
    await sleep(20);
    tree = listTree(dir);
  }
  return tree;
}

/**
 * Files and directories under `dir`, relative, sorted; directories end with
 * `/`. Empty when `dir` does not exist.
 */
export function listTree(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  const walk = (rel: string): void => {
    for (const name of readdirSync(join(dir, rel)).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      if (statSync(join(dir, path)).isDirectory()) {
        out.push(`${path}/`);
        walk(path);
      } else out.push(path);
    }
  };
  walk('');
  return out;
}

/**
 * The process that serves connections: the first worker of a master
 * (nginx's, or jinx's with `master_process on`), or the process itself.
 */
export function servingPid(pid: number): number {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  return children.length > 0 ? Number(children[0]) : pid;
}

/** What a process has open: temp files (paths under `tempDir`, `(deleted)` kept) and the number of TCP sockets. */
export interface OpenFiles {
  readonly tempFiles: string[];
  readonly sockets: number;
}

/** The open descriptors of `pid`: files under `tempDir` and sockets. */
export function openFiles(pid: number, tempDir: string): OpenFiles {
  const tempFiles: string[] = [];
  let sockets = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue;
    }
    if (target.startsWith('socket:')) sockets++;
    else if (target.startsWith(tempDir)) tempFiles.push(target.slice(tempDir.length));
  }
  return { tempFiles: tempFiles.sort(), sockets };
}
