/**
 * nginx's master process (`ngx_master_process_cycle`,
 * `src/os/unix/ngx_process_cycle.c`) on node:cluster: it reads and checks
 * the configuration, starts `worker_processes` workers and watches them;
 * workers serve. The master holds the listening sockets (node:cluster binds
 * each address once, when the first worker asks, and keeps it while any
 * worker listens on it) and the workers accept on them (`SCHED_NONE`, as
 * nginx's workers do), so a reload's new workers listen on the sockets the
 * old ones still hold and no connection is refused in between. A
 * generation's first worker reports a failed bind (`Engine.start`), as
 * nginx's master does; the master never listens itself, so no connection
 * lands on a socket that closes again.
 *
 * Signals, as nginx's master takes them: `HUP` reload (a configuration
 * that fails leaves the old workers untouched; otherwise a new generation of
 * workers starts on it, the old workers end the connections they have at
 * once, as nginx's do, and stop accepting once every new worker listens),
 * `QUIT` graceful stop, `TERM`/`INT` fast stop, `USR1` reopen logs,
 * `WINCH` (daemonized only) stop the workers and keep the master. A
 * worker that dies is replaced. Every step is logged at `notice` with
 * nginx's words, by the process that takes it.
 *
 * The state nginx keeps in shared memory and jinx's workers share lives in
 * the master, reached by message (`shared-zones.ts`).
 */
import type { Worker } from 'node:cluster';
import { randomBytes } from 'node:crypto';
import { constants as osConstants } from 'node:os';
import { rmSync, writeFileSync } from 'node:fs';
import type { CompiledConfig } from '../config/compile.js';
import { ErrorLogFiles } from '../log/error-log.js';
import type { LogLevel } from '../log/levels.js';
import { systemErrorText } from '../os-errors.js';
import { reopenLogFilesForWorkers } from '../runtime/prepare-files.js';
import { forkWorker, setUpCluster, type FirstWorker, type TakenWorker } from './first-worker.js';
import { removeReloadStatus, writeReloadStatus } from './reload-status.js';
import { MasterZones } from './shared-zones.js';
import type { MessageSink } from './startup-log.js';
import { optimizeFromNowOn } from './tiering.js';
import { isWorkerMessage, type ConfMessage, type RetireMessage } from './worker-protocol.js';

/** One configuration's workers, and the session ticket keys their TLS contexts share. */
interface Generation {
  readonly compiled: CompiledConfig;
  readonly workers: Set<Worker>;
  readonly ticketKeys: Buffer;
}

/** A generation of `compiled`, with new ticket keys (nginx's contexts of a new configuration make theirs). */
function generation(compiled: CompiledConfig): Generation {
  return { compiled, workers: new Set(), ticketKeys: randomBytes(48) };
}

/** A worker's fate as the master sees it. */
interface WorkerState {
  readonly gen: Generation;
  readonly index: number;
  ready: boolean;
  /** The master told it to stop (it is not replaced when it exits). */
  told: boolean;
  /**
   * It sent its first message: its handlers of early signals are in place
   * (`early-signals.ts`). Before that node would end it on a signal.
   */
  heard: boolean;
  /** A stop asked for before it was heard, sent once it is (nginx's worker blocks signals while it starts). */
  held: NodeJS.Signals | undefined;
}

/** `signal N (NAME) received` (`ngx_signal_handler`): node does not say who sent it, so nginx's `from PID` is left out. */
function signalNotice(signal: NodeJS.Signals, action: string): string {
  return `signal ${osConstants.signals[signal]} (${signal}) received${action}`;
}

/** What the master needs from the command line: a way to read the configuration again. */
export interface MasterOptions {
  /** Reads and checks the configuration again (SIGHUP); errors go to `log`. */
  readonly recompile: (log: MessageSink) => Promise<CompiledConfig | undefined>;
  /** `daemon on`: SIGWINCH stops the workers (nginx does so only when daemonized). */
  readonly daemonized: boolean;
  /** Worker number 0, started while the configuration was compiled (`first-worker.ts`): the first generation's. */
  readonly firstWorker?: FirstWorker;
}

export class Master {
  private current: Generation;
  private readonly states = new Map<Worker, WorkerState>();
  private errorLog = new ErrorLogFiles();
  private exiting: 'quit' | 'stop' | undefined;
  /** SIGWINCH: the workers were stopped and are not replaced until the next reload. */
  private noAccepting = false;
  /** A reload in progress, and whether another was asked for meanwhile. */
  private reloading = false;
  private reloadAgain = false;
  private readonly zones: MasterZones;
  /** Reloads handled, for `PIDFILE.reload` (`reload-status.ts`). */
  private reloads = 0;
  /** The `[emerg]` lines of the reload under way. */
  private reloadEmerg: string[] = [];
  private resolveExit: (code: number) => void = () => undefined;
  /** `MasterOptions.firstWorker` until the first `start` takes it. */
  private firstWorker: FirstWorker | undefined;

  private constructor(compiled: CompiledConfig, private readonly opts: MasterOptions) {
    this.current = generation(compiled);
    this.firstWorker = opts.firstWorker;
    this.errorLog.open(compiled.table.main.errorLogs);
    this.zones = new MasterZones((message) => this.log('alert', message), () => this.states.keys());
    setUpCluster();
  }

  /**
   * Runs the master until it exits: starts the first generation of
   * workers, writes the pid file once they serve, then takes signals.
   * @returns the exit code: 0 after a stop, 1 when the first workers could not start
   */
  static run(compiled: CompiledConfig, opts: MasterOptions): Promise<number> {
    return new Master(compiled, opts).serve();
  }

  private get main(): CompiledConfig['table']['main'] {
    return this.current.compiled.table.main;
  }

  /** Writes a line to the main `error_log` of the configuration in service. */
  private log(level: LogLevel, message: string): void {
    this.errorLog.write(this.main.errorLogs, level, message);
  }

  /** A start-up failure: to the error log and, when that is not stderr, to stderr as `nginx: [emerg] …` (nginx's `ngx_use_stderr`). */
  private startupEmerg(message: string): void {
    this.log('emerg', message);
    if (!this.main.errorLogs.some((t) => t.path === 'stderr')) process.stderr.write(Buffer.from(`nginx: [emerg] ${message}\n`, 'latin1'));
  }

  /**
   * The signals are taken from the first moment: one that comes while the
   * first workers start is carried out once they serve, as nginx's master,
   * which blocks them until its cycle waits for them (`sigsuspend`).
   * Without a handler node would end the master at once on a `QUIT` or
   * `TERM`, leaving its workers serving on their own.
   */
  private async serve(): Promise<number> {
    const exited = new Promise<number>((resolve) => {
      this.resolveExit = resolve;
    });
    let held: (() => void)[] | undefined = [];
    const on = (signal: NodeJS.Signals, handler: () => void): void => {
      process.on(signal, () => (held ? held.push(handler) : handler()));
    };
    on('SIGHUP', () => this.onReload());
    on('SIGQUIT', () => this.onStop('quit', 'SIGQUIT'));
    on('SIGTERM', () => this.onStop('stop', 'SIGTERM'));
    on('SIGINT', () => this.onStop('stop', 'SIGINT'));
    on('SIGUSR1', () => this.onReopen());
    on('SIGWINCH', () => this.onNoAccept());
    if (!await this.start(this.current)) return this.close(1);
    optimizeFromNowOn();
    try {
      writeFileSync(this.main.pidFile, `${process.pid}\n`);
    } catch (err) {
      this.startupEmerg(`open() "${this.main.pidFile}" failed (${systemErrorText(err)})`);
      this.signalAll('SIGTERM');
      return this.close(1);
    }
    const pending = held;
    held = undefined;
    for (const handler of pending) handler();
    return exited;
  }

  /** Closes the master's logs and returns `code`. */
  private close(code: number): number {
    this.errorLog.close();
    return code;
  }

  /**
   * Starts `worker_processes` workers of `gen` (`ngx_start_worker_processes`)
   * and waits until each serves; `onListening` runs as soon as each listens.
   * @returns false when one exited first (the others of `gen` are stopped)
   */
  private async start(gen: Generation, onListening?: () => void): Promise<boolean> {
    this.log('notice', 'start worker processes');
    const count = gen.compiled.table.main.workerProcesses;
    const first = this.firstWorker;
    this.firstWorker = undefined;
    const taken = count > 0 ? first?.take() : undefined;
    if (first && !taken) first.discard();
    const workers = Array.from({ length: count }, (_, i) => this.fork(gen, i, i === 0 ? taken : undefined));
    if (onListening) {
      void Promise.all(workers.map((w) => this.whenSignalled(w, 'jinx:listening'))).then((all) => {
        if (all.every(Boolean)) onListening();
      });
    }
    const ok = (await Promise.all(workers.map((w) => this.whenSignalled(w, 'jinx:ready')))).every(Boolean);
    if (!ok) {
      for (const w of gen.workers) this.tell(w, 'SIGTERM');
    }
    return ok;
  }

  /** Starts worker number `index` of `gen`, or takes `started`, its worker already forked. */
  private fork(gen: Generation, index: number, started?: TakenWorker): Worker {
    const worker = started?.worker ?? forkWorker(index);
    gen.workers.add(worker);
    this.states.set(worker, { gen, index, ready: false, told: false, heard: false, held: undefined });
    this.log('notice', `start worker process ${worker.process.pid}`);
    worker.on('message', (m: unknown) => {
      const state = this.states.get(worker);
      if (state && !state.heard) {
        state.heard = true;
        if (state.held) this.kill(worker, state.held);
      }
      if (!isWorkerMessage(m)) return;
      if (m.type === 'conf') {
        const conf: ConfMessage = { type: 'conf', snapshot: gen.compiled.snapshot, ticketKeys: gen.ticketKeys.toString('base64') };
        worker.send(conf);
      } else if (m.type === 'emerg') {
        this.reloadEmerg.push(m.message);
      } else if (m.type === 'listening') {
        worker.emit('jinx:listening');
      } else if (m.type === 'ready') {
        this.states.get(worker)!.ready = true;
        worker.emit('jinx:listening');
        worker.emit('jinx:ready');
      } else if (m.type === 'peer_event') {
        for (const other of gen.workers) if (other !== worker && other.isConnected()) other.send(m);
      } else {
        this.zones.answer(worker, m);
      }
    });
    worker.on('exit', (code, signal) => this.onExit(worker, code, signal as NodeJS.Signals | null));
    for (const m of started?.messages ?? []) worker.emit('message', m);
    if (started?.exit) worker.emit('exit', started.exit.code, started.exit.signal);
    return worker;
  }

  /** Resolves true when `worker` listens (`jinx:listening`) or serves (`jinx:ready`), false when it exits first. */
  private whenSignalled(worker: Worker, event: 'jinx:listening' | 'jinx:ready'): Promise<boolean> {
    return new Promise((resolve) => {
      worker.once(event, () => resolve(true));
      worker.once('exit', () => resolve(false));
    });
  }

  /** Tells a worker to stop (`QUIT` graceful, `TERM` fast) or to reopen its logs, as nginx's master does with signals. */
  private tell(worker: Worker, signal: NodeJS.Signals): void {
    const state = this.states.get(worker);
    if (state && signal !== 'SIGUSR1') state.told = true;
    // SIGKILL (the fast stop's last word) goes at once: no handler can take it, so none needs to be in place
    if (state && !state.heard && signal !== 'SIGKILL') {
      // a fast stop overrides a graceful one; reopening the logs means nothing to a worker that has not opened them
      if (signal !== 'SIGUSR1' && state.held !== 'SIGTERM') state.held = signal;
      return;
    }
    this.kill(worker, signal);
  }

  private kill(worker: Worker, signal: NodeJS.Signals): void {
    try {
      worker.process.kill(signal);
    } catch {
      // already gone: its exit is on the way
    }
  }

  /** Sends a message to every worker of `gen`. */
  private sendAll(gen: Generation, message: RetireMessage): void {
    for (const w of gen.workers) if (w.isConnected()) w.send(message);
  }

  private signalAll(signal: NodeJS.Signals): void {
    for (const worker of this.states.keys()) this.tell(worker, signal);
  }

  /**
   * `ngx_process_get_status` and `ngx_reap_children`: logs how the worker
   * ended, replaces it when it was not told to stop (unless it exited with
   * code 2, nginx's fatal code), and ends the master once the last worker of
   * a stop is gone.
   */
  private onExit(worker: Worker, code: number | null, signal: NodeJS.Signals | null): void {
    const state = this.states.get(worker)!;
    this.states.delete(worker);
    state.gen.workers.delete(worker);
    this.zones.workerExited(worker);
    const pid = worker.process.pid;
    this.log('notice', `signal 17 (SIGCHLD) received from ${pid}`);
    if (signal) this.log('alert', `worker process ${pid} exited on signal ${osConstants.signals[signal]}`);
    else this.log('notice', `worker process ${pid} exited with code ${code}`);
    const fatal = signal === null && code === 2;
    if (fatal && state.ready) this.log('alert', `worker process ${pid} exited with fatal code 2 and cannot be respawned`);
    if (!state.told && !fatal && state.ready && state.gen === this.current && !this.exiting && !this.noAccepting) {
      this.fork(state.gen, state.index);
    }
    if (this.exiting && this.states.size === 0) {
      this.log('notice', 'exit');
      rmSync(this.main.pidFile, { force: true });
      removeReloadStatus(this.main.pidFile);
      this.resolveExit(this.close(0));
    }
  }

  /** SIGHUP (`ngx_reconfigure`). */
  private onReload(): void {
    if (this.exiting) return;
    this.log('notice', signalNotice('SIGHUP', ', reconfiguring'));
    if (this.reloading) {
      this.reloadAgain = true;
      return;
    }
    void this.reload();
  }

  /**
   * Reads the configuration again; when it is good, tells the old workers
   * to end their connections, starts workers on it and, once each listens on
   * every address, stops the old ones gracefully. A configuration or an
   * address that fails is logged (`[emerg]`) and the old workers serve on;
   * a new worker that fails after that makes the master start the old
   * configuration's workers again.
   */
  private async reload(): Promise<void> {
    this.reloading = true;
    this.reloadEmerg = [];
    let ok = false;
    this.log('notice', 'reconfiguring');
    const compiled = await this.opts.recompile({
      write: (level, message) => {
        this.log(level, message);
        if (level === 'emerg') this.reloadEmerg.push(message);
      },
    });
    if (compiled && !this.exiting) {
      const gen = generation(compiled);
      const previous = this.current;
      const logs = new ErrorLogFiles();
      logs.open(compiled.table.main.errorLogs);
      // the old workers end the connections they have now, as nginx's would, and accept until the new ones listen
      this.sendAll(previous, { type: 'retire' });
      let previousTold = false;
      const quitPrevious = (): void => {
        previousTold = true;
        for (const w of previous.workers) this.tell(w, 'SIGQUIT');
      };
      if (await this.start(gen, quitPrevious)) {
        ok = true;
        const oldLogs = this.errorLog;
        this.current = gen;
        this.errorLog = logs;
        this.noAccepting = false;
        if (!previousTold) quitPrevious();
        oldLogs.close();
      } else {
        logs.close();
        if (previousTold) {
          // a new worker failed after the old ones were told to stop: the old configuration is started again
          this.log('alert', 'a new worker process failed to start, starting worker processes of the previous configuration again');
          this.current = generation(previous.compiled);
          void this.start(this.current);
        }
      }
    }
    writeReloadStatus(this.main.pidFile, { reload: ++this.reloads, ok, emerg: this.reloadEmerg });
    this.reloading = false;
    if (this.reloadAgain && !this.exiting) {
      this.reloadAgain = false;
      void this.reload();
    }
  }

  /** SIGQUIT (graceful) or SIGTERM/SIGINT (fast): every worker is told, the master exits after the last. */
  private onStop(how: 'quit' | 'stop', signal: NodeJS.Signals): void {
    this.log('notice', signalNotice(signal, how === 'quit' ? ', shutting down' : ', exiting'));
    if (this.exiting === 'stop' || this.exiting === how) return;
    this.exiting = how;
    this.signalAll(how === 'quit' ? 'SIGQUIT' : 'SIGTERM');
    if (how === 'stop') {
      // nginx's master sends SIGKILL to workers still there after its delays (about 1.5 s)
      setTimeout(() => this.signalAll('SIGKILL'), 1500).unref();
    }
    if (this.states.size === 0) {
      this.log('notice', 'exit');
      rmSync(this.main.pidFile, { force: true });
      removeReloadStatus(this.main.pidFile);
      this.resolveExit(this.close(0));
    }
  }

  /** SIGUSR1 (`ngx_reopen`): the master's logs (each given to the workers' user), then every worker's. */
  private onReopen(): void {
    this.log('notice', signalNotice('SIGUSR1', ', reopening logs'));
    this.log('notice', 'reopening logs');
    this.errorLog.reopen();
    for (const failure of reopenLogFilesForWorkers(this.current.compiled.table)) this.log('emerg', failure);
    this.signalAll('SIGUSR1');
  }

  /** SIGWINCH (`ngx_noaccept`): when daemonized, the workers stop gracefully and are not replaced until a reload. */
  private onNoAccept(): void {
    if (!this.opts.daemonized) {
      this.log('notice', signalNotice('SIGWINCH', ''));
      return;
    }
    this.log('notice', signalNotice('SIGWINCH', ', stop accepting connections'));
    this.noAccepting = true;
    for (const w of this.current.workers) this.tell(w, 'SIGQUIT');
  }
}
