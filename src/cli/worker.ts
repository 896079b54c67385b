/**
 * A worker process of jinx's master (`ngx_worker_process_cycle`,
 * `src/os/unix/ngx_process_cycle.c`): it serves the configuration the
 * master checked, on the master's listening sockets, and takes the
 * master's signals as nginx's workers do: `QUIT` graceful stop, `TERM` and
 * `INT` fast stop, `USR1` reopen logs; `HUP` and `WINCH` are the master's
 * and ignored here. When the master goes away, node:cluster ends the worker.
 */
import { spawnSync } from 'node:child_process';
import cluster from 'node:cluster';
import { setPriority } from 'node:os';
import type { CompiledConfig } from '../config/compile.js';
import type { CpuAffinity, MainConf } from '../config/modules/core.js';
import type { LogLevel } from '../log/levels.js';
import { errnoTextOf, systemErrorText } from '../os-errors.js';
import { releaseEarlySignals, type StopKind } from './early-signals.js';
import { WorkerLimitConn, WorkerLimitReq, WorkerSessions, WorkerStatus } from './shared-zones.js';
import type { StartupLog } from './startup-log.js';
import { loadingModules, optimizeFromNowOn } from './tiering.js';
import { isPeerEventMessage, isRetireMessage, WORKER_INDEX_ENV, type PeerEventMessage, type EmergMessage, type ListeningMessage, type ReadyMessage } from './worker-protocol.js';

/** nginx's exit code for a worker that cannot start; the master does not start it again. */
const FATAL_EXIT = 2;

/**
 * Serves as a worker until told to stop.
 * @param ticketKeys the session ticket keys of the worker's generation (`ConfMessage`)
 * @returns the exit code: 0 after a stop, 2 when the worker could not start
 */
export async function serveWorker(compiled: CompiledConfig, startupLog: StartupLog, ticketKeys: Buffer): Promise<number> {
  // as nginx's worker, settled before it accepts; logged once the error log is open
  const index = Number(process.env[WORKER_INDEX_ENV] ?? 0);
  const initLines = initWorkerProcess(compiled.table.main, index);
  // the addresses first: once every new worker listens, the master can stop the old ones (their
  // connections are queued here meanwhile); one that does not bind is left to Engine.start to report
  const { listenEarly } = await loadingModules(() => import('../runtime/listen.js'));
  const early = await listenEarly(compiled.table.listens).catch(() => undefined);
  const listening: ListeningMessage = { type: 'listening' };
  if (early) process.send?.(listening);
  // the runtime (and undici with it) is loaded only to serve
  const { Engine } = await loadingModules(() => import('../runtime/engine.js'));
  let engine: Awaited<ReturnType<typeof Engine.start>>;
  const status = new WorkerStatus();
  try {
    engine = await Engine.start(compiled, startupLog, {
      quietBind: index !== 0, worker: true, early, ticketKeys, workerSlot: { index, of: compiled.table.main.workerProcesses },
      onStartupMessage: (level, message) => {
        const emerg: EmergMessage = { type: 'emerg', message };
        if (level === 'emerg') process.send?.(emerg);
      },
      limitReq: new WorkerLimitReq((message) => engine.log('alert', message)),
      limitConn: new WorkerLimitConn(),
      sslSessions: new WorkerSessions(),
      status,
      sharePeerEvent: (event) => {
        const told: PeerEventMessage = { type: 'peer_event', event };
        if (process.connected) process.send?.(told);
      },
    });
  } catch (err) {
    if (!(err instanceof Engine.ReportedError)) startupLog.write('emerg', String((err as Error)?.message ?? err));
    return leaveMaster(FATAL_EXIT);
  }
  for (const [level, message] of initLines) engine.log(level, message);
  // as root, the files are open, the temp directories the user's: nothing is served before the switch
  const fatal = becomeWorkerUser(compiled.table.main, (level, message) => engine.log(level, message));
  if (fatal) {
    await engine.stop();
    return leaveMaster(FATAL_EXIT);
  }
  for (const signal of ['SIGHUP', 'SIGWINCH'] as const) process.on(signal, () => undefined);
  const ready: ReadyMessage = { type: 'ready' };
  process.send?.(ready);
  optimizeFromNowOn();
  return new Promise<number>((resolveExit) => {
    let stopping = false;
    const stop = (how: StopKind): void => {
      if (stopping && how === 'graceful') return;
      stopping = true;
      void (how === 'graceful' ? engine.shutdown() : engine.stop()).then(() => leaveWhenIdle(engine, resolveExit, () => status.reportLast()));
    };
    process.on('SIGQUIT', () => stop('graceful'));
    process.on('SIGTERM', () => stop('fast'));
    process.on('SIGINT', () => stop('fast'));
    process.on('SIGUSR1', () => engine.reopenLogs());
    process.on('message', (m: unknown) => {
      if (isRetireMessage(m) && !stopping) engine.retire();
      else if (isPeerEventMessage(m)) engine.applyPeerEvent(m.event);
    });
    // the early handlers go once these are in place: a signal without a handler in between would end the
    // worker, and one that came but was not yet passed to JavaScript would be dropped with the last handler
    const stopAsked = releaseEarlySignals();
    if (stopAsked) stop(stopAsked);
  });
}

/**
 * The CPUs worker number `index` is bound to (`ngx_get_cpu_affinity`,
 * `src/core/nginx.c`): with `auto`, the index-th CPU of the mask (CPU
 * `index` without one); else its own mask, or the last one.
 * @returns undefined for an `auto` mask without CPUs
 */
export function workerCpus(affinity: CpuAffinity, index: number): number[] | undefined {
  const cpusOf = (mask: string): number[] => [...mask].reverse().flatMap((bit, cpu) => (bit === '1' ? [cpu] : []));
  if (!affinity.auto) return cpusOf(affinity.masks[Math.min(index, affinity.masks.length - 1)]!);
  if (affinity.masks.length === 0) return [index % 1024];
  const set = cpusOf(affinity.masks[0]!);
  return set.length === 0 ? undefined : [set[index % set.length]!];
}

/** Runs a util-linux command on this process; resolves to its error text, or undefined when it succeeded. */
function onThisProcess(command: string, args: readonly string[]): string | undefined {
  const r = spawnSync(command, args, { encoding: 'utf8' });
  if (r.error) return systemErrorText(r.error);
  return r.status === 0 ? undefined : errnoTextOf(r.stderr.trim().split('\n').at(-1) ?? '');
}

/**
 * `ngx_worker_process_init` (`src/os/unix/ngx_process_cycle.c`): the
 * worker's priority (`worker_priority`), descriptor and core file limits
 * (`worker_rlimit_nofile`, `worker_rlimit_core`) and CPUs (`worker_cpu_affinity`), each failure an
 * `[alert]` with nginx's words. node can set a priority but neither a limit
 * nor an affinity, so util-linux's prlimit and taskset set them on this
 * process (every thread of it).
 * @returns the lines to log, once the worker's error log is open
 */
function initWorkerProcess(main: MainConf, index: number): [LogLevel, string][] {
  const lines: [LogLevel, string][] = [];
  const log = (level: LogLevel, message: string): number => lines.push([level, message]);
  if (main.workerPriority !== 0) {
    try {
      setPriority(main.workerPriority);
    } catch (err) {
      log('alert', `setpriority(${main.workerPriority}) failed (${systemErrorText(err)})`);
    }
  }
  if (main.workerRlimitNofile !== 0) {
    const n = main.workerRlimitNofile;
    const failed = onThisProcess('prlimit', ['--pid', String(process.pid), `--nofile=${n}:${n}`]);
    if (failed) log('alert', `setrlimit(RLIMIT_NOFILE, ${n}) failed (${failed})`);
  }
  if (main.workerRlimitCoreBytes !== -1) {
    const n = main.workerRlimitCoreBytes;
    const failed = onThisProcess('prlimit', ['--pid', String(process.pid), `--core=${n}:${n}`]);
    if (failed) log('alert', `setrlimit(RLIMIT_CORE, ${n}) failed (${failed})`);
  }
  const cpus = main.cpuAffinity && workerCpus(main.cpuAffinity, index);
  if (cpus) {
    for (const cpu of cpus) log('notice', `sched_setaffinity(): using cpu #${cpu}`);
    const failed = onThisProcess('taskset', ['-a', '-p', '-c', cpus.join(','), String(process.pid)]);
    if (failed) log('alert', `sched_setaffinity() failed (${failed})`);
  }
  return lines;
}

/** node's `process.initgroups` (POSIX), which @types/node leaves out. */
type WithInitgroups = NodeJS.Process & { initgroups(user: string, extraGroup: number): void };

/**
 * The rest of `ngx_worker_process_init`, once the worker has opened its
 * files: as root, the account of `user` (`setgid`, `initgroups`, `setuid`,
 * each failure an `[emerg]`, fatal but for `initgroups`), then
 * `working_directory` (`[alert] chdir("DIR") failed`, fatal).
 * @returns whether the worker must end (exit code 2)
 */
function becomeWorkerUser(main: MainConf, log: (level: LogLevel, message: string) => void): boolean {
  const user = main.user;
  if (user && process.geteuid?.() === 0) {
    const step = (call: () => void, message: string, level: LogLevel): boolean => {
      try {
        call();
        return true;
      } catch (err) {
        log(level, `${message} failed (${systemErrorText(err)})`);
        return false;
      }
    };
    if (!step(() => process.setgid!(user.gid), `setgid(${user.gid})`, 'emerg')) return true;
    step(() => (process as WithInitgroups).initgroups(user.name, user.gid), `initgroups(${user.name}, ${user.gid})`, 'emerg');
    if (!step(() => process.setuid!(user.uid), `setuid(${user.uid})`, 'emerg')) return true;
  }
  if (main.workingDirectory !== '') {
    try {
      process.chdir(main.workingDirectory);
    } catch (err) {
      log('alert', `chdir("${main.workingDirectory}") failed (${systemErrorText(err)})`);
      return true;
    }
  }
  return false;
}

/**
 * Lets a worker's process end by itself (its last writes done): leaves the
 * master's channel, which would keep it alive, telling node:cluster that
 * this is no sign of the master's death. Should anything else keep the
 * process alive, it exits a second later.
 * @returns `code`, the exit code to end with
 */
export function leaveMaster(code: number): number {
  if (cluster.worker) cluster.worker.exitedAfterDisconnect = true;
  if (process.connected) process.disconnect();
  setTimeout(() => process.exit(code), 1000).unref();
  return code;
}

/** Once the last client connection is closed, calls `beforeLeaving`, then leaves the master (`leaveMaster`). */
function leaveWhenIdle(engine: { readonly openConnections: number }, resolveExit: (code: number) => void, beforeLeaving: () => void): void {
  const check = setInterval(() => {
    if (engine.openConnections > 0) return;
    clearInterval(check);
    beforeLeaving();
    resolveExit(leaveMaster(0));
  }, 50);
}
