/**
 * The master's first worker, started before the master has compiled the
 * configuration. Most of a start's time is node starting and loading jinx,
 * once in the master and once more in its worker, one after the other;
 * with the first worker forked as soon as the configuration is read and
 * checked and says `master_process on` (`becomesMaster`), the worker's
 * start runs while the master compiles the configuration and loads its own
 * code. nginx's master forks its workers after all of that
 * (`ngx_start_worker_processes`); what a user sees is the same: the worker
 * asks for the configuration (`ConfMessage`) and waits for it, the master
 * logs `start worker process PID` once it runs, and when the compile step
 * fails the worker is killed before it has read a file or bound an address.
 *
 * Only on a machine with more than one CPU: on one, the worker's start
 * would take its time from the master's.
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import { WORKER_INDEX_ENV } from './worker-protocol.js';

/**
 * node:cluster as jinx's master uses it: workers accept on the master's
 * sockets themselves, as nginx's do (not handed each connection by the
 * master), and write to the master's stdout and stderr. Set before the
 * first fork.
 */
export function setUpCluster(): void {
  cluster.schedulingPolicy = cluster.SCHED_NONE;
  cluster.setupPrimary({ silent: false });
}

/** Starts worker number `index` (`WORKER_INDEX_ENV`). */
export function forkWorker(index: number): Worker {
  return cluster.fork({ [WORKER_INDEX_ENV]: String(index) });
}

/** What a first worker said and did before the master took it. */
export interface TakenWorker {
  readonly worker: Worker;
  /** Its messages so far, in order (each would have been lost without a listener). */
  readonly messages: readonly unknown[];
  /** How it ended, when it did: `exit`'s code and signal. */
  readonly exit: { readonly code: number | null; readonly signal: string | null } | undefined;
}

/** Worker number 0, forked before the configuration is compiled; `take` or `discard` it. */
export class FirstWorker {
  private readonly worker: Worker;
  private readonly messages: unknown[] = [];
  private exit: TakenWorker['exit'];
  private readonly onMessage = (m: unknown): void => {
    this.messages.push(m);
  };
  private readonly onExit = (code: number | null, signal: string | null): void => {
    this.exit = { code, signal };
  };

  private constructor() {
    setUpCluster();
    this.worker = forkWorker(0);
    this.worker.on('message', this.onMessage);
    this.worker.once('exit', this.onExit);
  }

  /** Forks it, in a process that becomes a master on a machine with more than one CPU; undefined otherwise. */
  static start(): FirstWorker | undefined {
    return cluster.isPrimary && availableParallelism() > 1 ? new FirstWorker() : undefined;
  }

  /** Hands the worker to the master: from now on its events go to the master's listeners. */
  take(): TakenWorker {
    this.worker.off('message', this.onMessage);
    this.worker.off('exit', this.onExit);
    return { worker: this.worker, messages: this.messages, exit: this.exit };
  }

  /** Not needed after all (the configuration failed): killed, before it has opened a file or an address. */
  discard(): void {
    this.take();
    this.worker.process.kill('SIGKILL');
  }
}
