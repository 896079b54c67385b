/**
 * What the benchmark scripts share: the processes they start (servers,
 * upstreams, load generators), each stopped by its pid on exit, error or
 * signal; the temp directory they run in, removed unless kept; and the
 * small helpers around them (waiting for a listener, sizes, medians; free
 * ports are the tests' `freePort`).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, portOpen } from '../test/helpers/harness.js';

export { freePort };

/** The median of the finite values of `xs` (the mean of the middle two for an even count); NaN when there is none. */
export function median(xs: readonly number[]): number {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The project checkout (this file runs from `dist/bench/`). */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The jinx binary under test. */
export const JINX = join(ROOT, 'bin/jinx');
export const MiB = 1024 * 1024;

/** The live children of a process (a master's workers), from /proc; none once it is gone. */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** A `/proc/PID/status` memory field (kB) of `pid` and its live descendants, added up, bytes; 0 for a process gone. */
function treeStatusBytes(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  let kib: number;
  try {
    kib = Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
  return kib * 1024 + childPids(pid).reduce((sum, child) => sum + treeStatusBytes(child, field), 0);
}

/** Resident memory of a process and its live children (a master and its workers), bytes; 0 once gone. */
export function treeRssBytes(pid: number): number {
  return treeStatusBytes(pid, 'VmRSS');
}

/**
 * The kernel's high-water mark of resident memory (`VmHWM`) of `pid` and
 * its descendants, summed, bytes: the exact peak of one process since its
 * mark was last reset (`resetPeakRss`), an upper bound of a tree's (its
 * processes may peak at different times).
 */
export function treePeakRssBytes(pid: number): number {
  return treeStatusBytes(pid, 'VmHWM');
}

/**
 * Sets the high-water mark of `pid` and its descendants to their resident
 * memory now (`/proc/PID/clear_refs`, 5; Linux 4.0 and later). False when
 * the kernel refused one (the mark then covers the process's whole life).
 */
function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    return false;
  }
  return childPids(pid).every(resetPeakRss);
}

/**
 * The peak resident memory of `pid` and its descendants from now until
 * `stop`, bytes: the kernel's high-water mark, reset here
 * (`treePeakRssBytes`), which sees a peak of a few milliseconds (V8
 * compiling a function in the background) that samples miss; and samples
 * of `treeRssBytes` every `intervalMs` (for a process the mark cannot be
 * reset on, and for `peak()` while it runs).
 */
export function rssSampler(pid: number, intervalMs: number): { peak(): number; stop(): number } {
  const marked = resetPeakRss(pid);
  let peak = treeRssBytes(pid);
  const timer = setInterval(() => { peak = Math.max(peak, treeRssBytes(pid)); }, intervalMs);
  return {
    peak: () => peak,
    stop: () => {
      clearInterval(timer);
      peak = Math.max(peak, treeRssBytes(pid), marked ? treePeakRssBytes(pid) : 0);
      return peak;
    },
  };
}

/** A process a script started; every one is stopped on exit, error or signal. */
export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  /** The signal `stopAll` stops it with. */
  readonly stopSignal: NodeJS.Signals;
  exitCode: number | null | undefined;
  /** The signal that ended it, if one did. */
  exitSignal: NodeJS.Signals | undefined;
  /** Its first 64 KiB of stderr. */
  stderr: string;
}

/** How `start` runs a process. */
export interface StartOptions {
  /** A `taskset -c` CPU list to pin it to. */
  readonly cpus?: string;
  /** A nice value (-20 to 19); 0 runs it as is. */
  readonly niceness?: number;
  /** `pipe` to read its stdout from `child.stdout`. */
  readonly stdout?: 'ignore' | 'pipe';
  /** The signal `stopAll` stops it with (default SIGQUIT, nginx's graceful stop). */
  readonly stopSignal?: NodeJS.Signals;
  /** Its environment (default this process's). */
  readonly env?: NodeJS.ProcessEnv;
}

const procs: Proc[] = [];
let tempDir: string | undefined;
let keepTemp = false;
let interruptedBy: NodeJS.Signals | undefined;

/** Starts `cmd args` as `name`. */
export function start(name: string, cmd: string, args: string[], options: StartOptions = {}): Proc {
  const niceness = options.niceness ?? 0;
  let [file, argv] = [cmd, args];
  if (niceness !== 0) [file, argv] = ['nice', ['-n', String(niceness), file, ...argv]];
  if (options.cpus !== undefined) [file, argv] = ['taskset', ['-c', options.cpus, file, ...argv]];
  // taskset and nice exec the command, so the pid is the server's own. With
  // autogroup scheduling (Linux' default), nice only ranks processes of one
  // session: a niced process gets a session of its own (detached) and that
  // session's autogroup gets the nice value too.
  const child = spawn(file, argv, { stdio: ['ignore', options.stdout ?? 'ignore', 'pipe'], detached: niceness !== 0, env: options.env });
  if (niceness !== 0 && child.pid !== undefined && existsSync(`/proc/${child.pid}/autogroup`)) {
    try {
      writeFileSync(`/proc/${child.pid}/autogroup`, String(niceness));
    } catch (err) {
      process.stderr.write(`bench: cannot set the autogroup nice of ${name}: ${(err as Error).message}\n`);
    }
  }
  const proc: Proc = {
    name, child, stopSignal: options.stopSignal ?? 'SIGQUIT', exitCode: undefined, exitSignal: undefined, stderr: '',
    exited: new Promise((res) => child.once('exit', (code, signal) => {
      // as a shell reports it: 128 + the signal's number
      proc.exitCode = code ?? (signal ? 128 + (constants.signals[signal] ?? 0) : null);
      proc.exitSignal = signal ?? undefined;
      res(proc.exitCode);
    })),
  };
  child.once('error', (err) => { proc.stderr += `${err.message}\n`; });
  child.stderr!.on('data', (d: Buffer) => { if (proc.stderr.length < 64 * 1024) proc.stderr += d.toString(); });
  procs.push(proc);
  return proc;
}

/** Stops a process by its pid with `signal`, then SIGKILL after `graceMs`. */
export async function stop(proc: Proc, signal: NodeJS.Signals = proc.stopSignal, graceMs = 10_000): Promise<void> {
  if (proc.exitCode === undefined && proc.child.pid !== undefined) {
    proc.child.kill(signal);
    const timer = setTimeout(() => { if (proc.exitCode === undefined) proc.child.kill('SIGKILL'); }, graceMs);
    await proc.exited;
    clearTimeout(timer);
  }
  const i = procs.indexOf(proc);
  if (i >= 0) procs.splice(i, 1);
}

/** Stops every process still running, the last started first. */
export async function stopAll(): Promise<void> {
  await Promise.all([...procs].reverse().map((p) => stop(p)));
}

/** Makes the directory a run works in (`/tmp/PREFIX…`); `removeTemp` deletes it unless `keep`. */
export function makeTemp(prefix: string, keep: boolean): string {
  keepTemp = keep;
  tempDir = mkdtempSync(join(tmpdir(), prefix));
  return tempDir;
}

/** Deletes the run's directory, unless it is to be kept. */
export function removeTemp(): void {
  if (tempDir && !keepTemp) rmSync(tempDir, { recursive: true, force: true });
}

/** Whether SIGINT, SIGTERM or SIGHUP came: its handler stops everything and exits (130 or 143). */
export const interrupted = (): boolean => interruptedBy !== undefined;

process.on('exit', () => {
  // last resort (e.g. process.exit from a signal handler that did not finish)
  for (const p of procs) if (p.exitCode === undefined) p.child.kill('SIGKILL');
});
for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(sig, () => {
    if (interruptedBy) return;
    interruptedBy = sig;
    process.stderr.write(`\nbench: ${sig}, stopping the servers\n`);
    void stopAll().finally(() => {
      removeTemp();
      process.exit(sig === 'SIGINT' ? 130 : 143);
    });
  });
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Whether `cmd` is on the PATH. */
export function hasCommand(cmd: string): boolean {
  return spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
}

/** A size with an optional `k`, `m` or `g` suffix (powers of 1024), in bytes. @throws Error on anything else. */
export function parseSize(s: string): number {
  const m = /^(\d+)([kKmMgG]?)$/.exec(s.trim());
  if (!m) throw new Error(`bad size "${s}"`);
  const unit = m[2]!.toLowerCase();
  return Number(m[1]) * (unit === 'k' ? 1024 : unit === 'm' ? MiB : unit === 'g' ? 1024 * MiB : 1);
}

/** Waits up to 15 s for `proc` to listen on `port`. @throws Error with its stderr when it exits or does not listen. */
export async function waitListening(proc: Proc, port: number): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== undefined) throw new Error(`${proc.name} exited (${proc.exitCode}) during start:\n${proc.stderr}`);
    if (await portOpen(port)) return;
    await sleep(25);
  }
  throw new Error(`${proc.name} does not listen on 127.0.0.1:${port} after 15 s:\n${proc.stderr}`);
}

/**
 * Runs a script's `main` and exits with its code; an error is printed
 * (`bench: STACK`), every process stopped by its pid and the temp directory
 * removed, then the exit code is 1.
 */
export function runBench(main: () => Promise<number>): void {
  main().then((code) => process.exit(code), async (err: unknown) => {
    process.stderr.write(`bench: ${(err as Error)?.stack ?? String(err)}\n`);
    await stopAll();
    removeTemp();
    process.exit(1);
  });
}
