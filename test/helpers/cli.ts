/**
 * Helpers for the command-line tests: jinx or the reference nginx run as a
 * long-lived process (stderr kept, stopped by pid at cleanup, nginx's worker
 * processes too), prefixes the reference nginx's workers can read, a
 * keep-alive HTTP client and small polling helpers.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { Agent, request as httpRequest, type IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { JINX, onCleanup, portOpen, referenceNginx, tempDir, waitFor, writeFiles, type RunResult } from './harness.js';

/** A server implementation under test: jinx itself or the reference nginx. */
export interface Impl {
  /** `jinx`, or `nginx X.Y.Z (reference)`. */
  readonly name: string;
  readonly binary: string;
}

/** The version line of a reference nginx binary (`1.30.6`). */
export function nginxVersion(binary: string): string {
  const r = spawnSync(binary, ['-v'], { encoding: 'utf8' });
  return /nginx\/(\S+)/.exec(r.stderr)?.[1] ?? 'unknown';
}

export const JINX_IMPL: Impl = { name: 'jinx', binary: JINX };

/** The reference nginx as an `Impl`, or undefined when none is installed. */
export function referenceImpl(): Impl | undefined {
  const ref = referenceNginx();
  return ref ? { name: `nginx ${nginxVersion(ref)} (reference)`, binary: ref } : undefined;
}

/** jinx, then the reference nginx when installed: lifecycle tests run on both so that the expectation is nginx's. */
export function impls(): Impl[] {
  const ref = referenceImpl();
  return ref ? [JINX_IMPL, ref] : [JINX_IMPL];
}

/** One finding of `jinx lint --format json`, as README "jinx lint" documents it. */
export interface LintJsonFinding {
  severity: string;
  code: string;
  message: string;
  file: string | null;
  line: number | null;
  includedFrom: { file: string; line: number }[];
  fix: unknown;
}

/** Runs `impl ARGS` to completion. */
export function runImpl(impl: Impl, args: readonly string[], opts: { cwd?: string } = {}): RunResult {
  const r = spawnSync(impl.binary, args, { cwd: opts.cwd, encoding: 'utf8', timeout: 30_000 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * A prefix directory with `logs/` and the given files, readable by the
 * reference nginx's worker processes (which run as `nobody` under root).
 * Ends without `/`.
 */
export function makePrefix(files: Readonly<Record<string, string>>): string {
  const prefix = tempDir('jinx-cli-');
  mkdirSync(join(prefix, 'logs'));
  writeFiles(prefix, files);
  return prefix;
}

/** The pids of a process's children (nginx's workers). */
export function childPids(pid: number): number[] {
  const r = spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' });
  return r.stdout.split('\n').map((s) => Number(s.trim())).filter((n) => n > 0);
}

/** A long-lived server process started by a test. */
export interface Proc {
  readonly child: ChildProcess;
  readonly pid: number;
  stdout(): string;
  stderr(): string;
  /** Resolves to the exit code (null when killed by a signal). */
  readonly exited: Promise<number | null>;
  /** Whether the process has exited. */
  hasExited(): boolean;
  /** Resolves to the exit code, or rejects after `timeoutMs`. */
  waitExit(timeoutMs?: number): Promise<number | null>;
}

/** Starts `impl ARGS` and keeps its output; at cleanup it (and any worker of it) is killed by pid. */
export function spawnImpl(impl: Impl, args: readonly string[], opts: { cwd?: string } = {}): Proc {
  const child = spawn(impl.binary, args, { cwd: opts.cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { err += d.toString(); });
  let done = false;
  const exited = new Promise<number | null>((res) => child.once('exit', (code) => { done = true; res(code); }));
  const pid = child.pid!;
  onCleanup(async () => {
    if (done) return;
    const workers = childPids(pid);
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
    await exited;
    clearTimeout(timer);
    for (const w of workers) {
      try {
        process.kill(w, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });
  return {
    child,
    pid,
    stdout: () => out,
    stderr: () => err,
    exited,
    hasExited: () => done,
    waitExit: (timeoutMs = 10_000) => Promise.race([
      exited,
      new Promise<never>((_, rej) => setTimeout(() => rej(new Error(`process ${pid} still running after ${timeoutMs} ms; stderr:\n${err}`)), timeoutMs).unref()),
    ]),
  };
}

/** Starts a server on `PREFIX/nginx.conf` (`-p PREFIX/ -c nginx.conf`) and waits for its pid file and ports. */
export async function startImpl(impl: Impl, prefix: string, ports: readonly number[], extraArgs: readonly string[] = []): Promise<Proc> {
  const proc = spawnImpl(impl, ['-p', `${prefix}/`, '-c', 'nginx.conf', ...extraArgs]);
  const pidFile = join(prefix, 'logs/nginx.pid');
  await waitFor(() => proc.hasExited() || existsSync(pidFile), 10_000, `${impl.name}'s pid file`);
  if (proc.hasExited()) throw new Error(`${impl.name} exited during start:\n${proc.stderr()}`);
  for (const port of ports) await waitFor(() => portOpen(port), 10_000, `port ${port}`);
  return proc;
}


/** The text of a file, or '' when it does not exist. */
export function readText(path: string): string {
  return existsSync(path) ? readFileSync(path, 'utf8') : '';
}

/** The pid in a pid file, or undefined. */
export function readPid(path: string): number | undefined {
  const t = readText(path).trim();
  return /^\d+$/.test(t) ? Number(t) : undefined;
}

/** A body read to its end, or the error that cut it. */
export interface BodyResult {
  readonly status: number;
  readonly body: string;
  readonly error: Error | undefined;
  /** Whether the request went over a connection already used before. */
  readonly reused: boolean;
  /** The client's local port, which names the connection. */
  readonly localPort: number;
}

/** An HTTP/1.1 client that keeps one connection alive between requests. */
export class KeepAliveClient {
  readonly agent = new Agent({ keepAlive: true, maxSockets: 1 });

  constructor(private readonly port: number) {
    onCleanup(() => this.agent.destroy());
  }

  /** Sends a GET; `onResponse` runs when the headers have arrived. */
  get(path: string, onResponse?: (res: IncomingMessage) => void): Promise<BodyResult> {
    return new Promise((resolve) => {
      let status = 0;
      let body = '';
      let reused = false;
      let localPort = 0;
      const finish = (error: Error | undefined): void => resolve({ status, body, error, reused, localPort });
      const req = httpRequest({ host: '127.0.0.1', port: this.port, path, agent: this.agent }, (res) => {
        status = res.statusCode ?? 0;
        onResponse?.(res);
        res.setEncoding('latin1');
        res.on('data', (c: string) => { body += c; });
        res.on('end', () => finish(undefined));
        res.on('error', (e) => finish(e));
        res.on('aborted', () => finish(new Error('aborted')));
      });
      req.on('socket', (s) => {
        reused = (req as unknown as { reusedSocket: boolean }).reusedSocket;
        const set = (): void => { localPort = s.localPort ?? 0; };
        if (s.localPort) set();
        else s.once('connect', set);
      });
      req.on('error', (e) => finish(e));
      req.end();
    });
  }
}

/** A one-off GET that never throws: status 0 and the error when the connection fails. */
export function tryGet(port: number, path: string): Promise<BodyResult> {
  return new Promise((resolve) => {
    const req = httpRequest({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (c: string) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, error: undefined, reused: false, localPort: 0 }));
      res.on('error', (e) => resolve({ status: res.statusCode ?? 0, body, error: e, reused: false, localPort: 0 }));
    });
    req.on('error', (e) => resolve({ status: 0, body: '', error: e, reused: false, localPort: 0 }));
    req.end();
  });
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Replaces the absolute prefix in text with `PREFIX` so jinx's and nginx's outputs compare. */
export function withoutPrefix(text: string, prefix: string): string {
  return text.split(prefix).join('PREFIX');
}
