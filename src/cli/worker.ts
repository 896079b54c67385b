/**
 * A worker process of jinx's master (`ngx_worker_process_cycle`,
 * `src/os/unix/ngx_process_cycle.c`): it serves the configuration the
 * master checked, on the master's listening sockets, and takes the
 * master's signals as nginx's workers do: `QUIT` graceful stop, `TERM` and
 * `INT` fast stop, `USR1` reopen logs; `HUP` and `WINCH` are the master's
 * and ignored here. When the master goes away, node:cluster ends the worker.
 */
import cluster from 'node:cluster';
import { setPriority } from 'node:os';
import type { CompiledConfig } from '../config/compile.js';
import { systemErrorText } from '../os-errors.js';
import { releaseEarlySignals, type StopKind } from './early-signals.js';
import { WorkerLimitReq } from './shared-zones.js';
import type { StartupLog } from './startup-log.js';
import { isRetireMessage, WORKER_INDEX_ENV, type EmergMessage, type ReadyMessage } from './worker-protocol.js';

/** nginx's exit code for a worker that cannot start; the master does not start it again. */
const FATAL_EXIT = 2;

/**
 * Serves as a worker until told to stop.
 * @param ticketKeys the session ticket keys of the worker's generation (`ConfMessage`)
 * @returns the exit code: 0 after a stop, 2 when the worker could not start
 */
export async function serveWorker(compiled: CompiledConfig, startupLog: StartupLog, ticketKeys: Buffer): Promise<number> {
  const ready: ReadyMessage = { type: 'ready' };
  // the addresses first: once every new worker listens, the master can stop the old ones (their
  // connections are queued here meanwhile); one that does not bind is left to Engine.start to report
  const { listenEarly } = await import('../runtime/listen.js');
  const early = await listenEarly(compiled.table.listens).catch(() => undefined);
  if (early) process.send?.(ready);
  // the runtime (and undici with it) is loaded only to serve
  const { Engine } = await import('../runtime/engine.js');
  let engine: Awaited<ReturnType<typeof Engine.start>>;
  try {
    engine = await Engine.start(compiled, startupLog, {
      quietBind: Number(process.env[WORKER_INDEX_ENV] ?? 0) !== 0, worker: true, early, ticketKeys,
      onStartupMessage: (level, message) => {
        const emerg: EmergMessage = { type: 'emerg', message };
        if (level === 'emerg') process.send?.(emerg);
      },
      limitReq: new WorkerLimitReq((message) => engine.log('alert', message)),
    });
  } catch (err) {
    if (!(err instanceof Engine.ReportedError)) startupLog.write('emerg', String((err as Error)?.message ?? err));
    return leaveMaster(FATAL_EXIT);
  }
  const priority = compiled.table.main.workerPriority;
  if (priority !== 0) {
    try {
      setPriority(priority);
    } catch (err) {
      engine.log('alert', `setpriority(${priority}) failed (${systemErrorText(err)})`);
    }
  }
  const stopAsked = releaseEarlySignals();
  for (const signal of ['SIGHUP', 'SIGWINCH'] as const) process.on(signal, () => undefined);
  if (!early) process.send?.(ready);
  return new Promise<number>((resolveExit) => {
    let stopping = false;
    const stop = (how: StopKind): void => {
      if (stopping && how === 'graceful') return;
      stopping = true;
      void (how === 'graceful' ? engine.shutdown() : engine.stop()).then(() => leaveWhenIdle(engine, resolveExit));
    };
    process.on('SIGQUIT', () => stop('graceful'));
    process.on('SIGTERM', () => stop('fast'));
    process.on('SIGINT', () => stop('fast'));
    process.on('SIGUSR1', () => engine.reopenLogs());
    process.on('message', (m: unknown) => {
      if (isRetireMessage(m) && !stopping) engine.retire();
    });
    if (stopAsked) stop(stopAsked);
  });
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

/** Once the last client connection is closed, leaves the master (`leaveMaster`). */
function leaveWhenIdle(engine: { readonly openConnections: number }, resolveExit: (code: number) => void): void {
  const check = setInterval(() => {
    if (engine.openConnections > 0) return;
    clearInterval(check);
    resolveExit(leaveMaster(0));
  }, 50);
}
