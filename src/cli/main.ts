/**
 * The `jinx` command: nginx's flags (`-c -p -t -T -q -g -e -s -v -V -h -?`,
 * `ngx_get_options` in `src/core/nginx.c`) parsed with commander, and
 * `jinx lint`. Messages go where Debian's nginx build puts them: log lines
 * (`YYYY/MM/DD HH:MM:SS [emerg] PID#PID: …`) and `nginx: …` notes on stderr.
 */
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import cluster from 'node:cluster';
import { Command, CommanderError, Option } from 'commander';
import { compileConfig, type CompileOptions, type CompiledConfig } from '../config/compile.js';
import { becomesMaster } from '../config/modules/core.js';
import { ConfigError, formatWarning } from '../errors.js';
import { systemErrorText } from '../os-errors.js';
import type { Engine } from '../runtime/engine.js';
import { buildInfo, DEFAULT_CONF, DEFAULT_PREFIX, versionLine } from './build-info.js';
import { confPaths, type ConfPaths } from './conf-paths.js';
import { FirstWorker } from './first-worker.js';
import { initChecks } from './init-checks.js';
import type { LintOptions } from './lint.js';
import { StartupLog, type MessageSink } from './startup-log.js';
import { loadingModules, optimizeFromNowOn } from './tiering.js';
import { awaitReload, readReloadStatus, removeReloadStatus, writeReloadStatus } from './reload-status.js';

/** nginx's `-s` signals. */
const SIGNALS: Readonly<Record<string, NodeJS.Signals>> = { stop: 'SIGTERM', quit: 'SIGQUIT', reopen: 'SIGUSR1', reload: 'SIGHUP' };
const SIGNAL_NUMBERS: Readonly<Record<string, number>> = { SIGTERM: 15, SIGQUIT: 3, SIGUSR1: 10, SIGHUP: 1 };

/** What nginx says when an option lacks its value. */
const MISSING_VALUE: Readonly<Record<string, string>> = {
  '-s': 'parameter', '-g': 'parameter', '-c': 'file name', '-e': 'file name', '-p': 'directory name',
};

interface Flags {
  h?: boolean;
  v?: boolean;
  V?: boolean;
  t?: boolean;
  T?: boolean;
  q?: boolean;
  s?: string;
  p?: string;
  c?: string;
  g?: string;
  e?: string;
  offline?: boolean;
}

/** nginx's usage text (`-h`, `-?`), with jinx's subcommand. */
function usage(): string {
  return `${versionLine()}
Usage: jinx [-?hvVtTq] [-s signal] [-p prefix]
            [-e filename] [-c filename] [-g directives]
       jinx lint [file] [--format text|json|sarif] [--fail-on error|warning|note]
                 [--context http|server|location] [--offline]
                 [--rule CODE]... [--skip CODE]... [--explain CODE]
       jinx explain 'METHOD URL' [-H 'Name: value']... [--addr IP] [--port N] [--format text|json]

Options:
  -?,-h         : this help
  -v            : show version and exit
  -V            : show version and configure options then exit
  -t            : test configuration and exit
  -T            : test configuration, dump it and exit
  -q            : suppress non-error messages during configuration testing
  -s signal     : send signal to a master process: stop, quit, reopen, reload
  -p prefix     : set prefix path (default: ${DEFAULT_PREFIX})
  -e filename   : set error log file (default: stderr)
  -c filename   : set configuration file (default: ${DEFAULT_CONF})
  -g directives : set global directives out of configuration file
  --offline     : with -t: no DNS, certificate, pid, log or listen checks

Commands:
  lint [file]   : every error of the configuration, warnings and notes of the
                  lint rules, and what jinx does differently (README "jinx lint")
`;
}

function report(log: MessageSink, err: unknown, internalError?: (err: unknown) => void): void {
  if (err instanceof ConfigError) log.write(err.level, err.message);
  else if ((err as NodeJS.ErrnoException)?.code && (err as NodeJS.ErrnoException).path) {
    internalError?.(err);
    log.write('emerg', `open() "${(err as NodeJS.ErrnoException).path}" failed (${systemErrorText(err)})`);
  } else {
    internalError?.(err);
    log.write('emerg', String((err as Error)?.message ?? err));
  }
}

/** What a caller of `compile` may add: `CompileOptions`' hooks and snapshot, and `internalError` (`report`). */
interface CompileHooks extends Pick<CompileOptions, 'onParsed' | 'onChecked' | 'snapshot'> {
  readonly internalError?: (err: unknown) => void;
}

/** Compiles; reports warnings, and the error if any. */
async function compile(paths: ConfPaths, flags: Flags, log: MessageSink, hooks: CompileHooks = {}): Promise<CompiledConfig | undefined> {
  try {
    return await compileConfig({
      confFile: paths.confFile, prefix: paths.prefix, globalDirectives: flags.g, onWarning: (w) => log.write(w.level, formatWarning(w)),
      onParsed: hooks.onParsed, onChecked: hooks.onChecked, snapshot: hooks.snapshot, offline: flags.offline,
    });
  } catch (err) {
    report(log, err, hooks.internalError);
    return undefined;
  }
}

/** Where `checkConfiguration` writes. */
export interface CheckOutput {
  /** Log lines (`[emerg] …`, `[warn] …`). */
  readonly log: MessageSink;
  /** `nginx: …` notes (`syntax is ok`, `test is successful`, `test failed`), without the newline. */
  note(line: string): void;
  /**
   * Told of an error that is not a configuration error (a fault in jinx)
   * before it is reported as an `[emerg]` line; for the config fuzzer.
   */
  internalError?(err: unknown): void;
}

/**
 * `nginx -t` (`-q`, `-g` honoured): reads, checks and compiles the
 * configuration, then creates its temp directories, opens its log files and
 * binds its listening addresses, as `ngx_init_cycle` does in test mode.
 * Returns the exit status, 0 or 1, and the compiled configuration when it
 * passed. `offline` (`--offline`): no name resolved, no certificate read,
 * none of those file and socket checks (`initChecks`).
 */
export async function checkConfiguration(paths: ConfPaths, flags: { readonly q?: boolean; readonly g?: string; readonly offline?: boolean }, out: CheckOutput,
): Promise<{ readonly status: 0 | 1; readonly compiled: CompiledConfig | undefined }> {
  const syntaxOk = (): void => {
    if (!flags.q) out.note(`nginx: the configuration file ${paths.confFile} syntax is ok`);
  };
  const failed = (): { status: 1; compiled: undefined } => {
    out.note(`nginx: configuration file ${paths.confFile} test failed`);
    return { status: 1, compiled: undefined };
  };
  const compiled = await compile(paths, flags, out.log, { onParsed: syntaxOk, internalError: (err) => out.internalError?.(err) });
  if (!compiled) return failed();
  try {
    await initChecks(compiled.table, flags.offline === true);
  } catch (err) {
    report(out.log, err, (e) => out.internalError?.(e));
    return failed();
  }
  if (!flags.q) out.note(`nginx: configuration file ${paths.confFile} test is successful`);
  return { status: 0, compiled };
}

/**
 * `-t` and `-T`. Like every check that ends the process, it runs on
 * baseline code only (`tiering.ts`).
 */
async function testConfig(paths: ConfPaths, flags: Flags, log: StartupLog): Promise<number> {
  const { status, compiled } = await checkConfiguration(paths, flags, { log, note: (line) => process.stderr.write(`${line}\n`) });
  if (compiled && flags.T) {
    process.stdout.on('error', () => undefined);
    for (const f of compiled.files) process.stdout.write(Buffer.from(`# configuration file ${f.path}:\n${f.text}\n`, 'latin1'));
  }
  return status;
}

/** `-s SIGNAL`: signals the process whose pid the configuration's pid file holds. */
async function signalProcess(paths: ConfPaths, flags: Flags, sig: NodeJS.Signals, log: StartupLog): Promise<number> {
  const compiled = await compile(paths, flags, log);
  if (!compiled) return 1;
  log.write('notice', 'signal process started');
  const pidFile = compiled.table.main.pidFile;
  let text: string;
  try {
    text = readFileSync(pidFile, 'latin1');
  } catch (err) {
    log.write('error', `open() "${pidFile}" failed (${systemErrorText(err)})`);
    return 1;
  }
  const trimmed = text.replace(/[\r\n]+$/, '');
  const pid = Number(trimmed);
  if (!/^\d+$/.test(trimmed) || pid <= 0) {
    log.write('error', `invalid PID number "${trimmed}" in "${pidFile}"`);
    return 1;
  }
  const before = readReloadStatus(pidFile)?.reload ?? 0;
  try {
    process.kill(pid, sig);
  } catch (err) {
    log.write('alert', `kill(${pid}, ${SIGNAL_NUMBERS[sig]}) failed (${systemErrorText(err)})`);
    return 1;
  }
  return sig === 'SIGHUP' && !flags.q ? reloadOutcome(pidFile, before) : 0;
}

/**
 * Beyond nginx: `-s reload` waits (up to 30 s) for the running jinx to say
 * what became of the reload (`reload-status.ts`) and exits 1 with its
 * `[emerg]` lines on stderr when the new configuration is not in service;
 * nothing is printed when it is, or when no answer comes (a server that
 * does not write one). `-q` leaves nginx's behaviour: signal and exit 0.
 */
async function reloadOutcome(pidFile: string, before: number): Promise<number> {
  const status = await awaitReload(pidFile, before, 30_000);
  if (!status || status.ok) return 0;
  const lines = status.emerg.length > 0 ? status.emerg : ['the new configuration is not in service: a worker process could not start (the error log says why)'];
  for (const line of lines) process.stderr.write(Buffer.from(`nginx: [emerg] ${line}\n`, 'latin1'));
  return 1;
}

/** Starts a detached copy of this process for `daemon on` and waits until it serves or fails. */
function daemonize(pidFile: string): Promise<number> {
  return new Promise((resolveExit) => {
    // node with the flags bin/jinx gave it (process.execArgv), on the same script and arguments
    const child = spawn(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
      detached: true, stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, JINX_DAEMON_CHILD: '1' },
    });
    const poll = setInterval(() => {
      try {
        if (Number(readFileSync(pidFile, 'utf8').trim()) === child.pid) {
          clearInterval(poll);
          child.unref();
          resolveExit(0);
        }
      } catch {
        // not written yet
      }
    }, 50);
    child.once('exit', (code) => {
      clearInterval(poll);
      resolveExit(code ?? 1);
    });
  });
}

/**
 * Serves: with `master_process on` (the default) as nginx's master
 * (`master.ts`) or one of its workers (`worker.ts`), otherwise in this one
 * process.
 */
async function serve(paths: ConfPaths, flags: Flags, log: StartupLog): Promise<number> {
  // the master and the worker (and pino with them) are loaded only to serve: `-t`, `lint` and `-V` start without them
  if (cluster.isWorker) {
    const [{ confFromMaster }, { leaveMaster, serveWorker }] = await loadingModules(() => Promise.all([import('./worker-protocol.js'), import('./worker.js')]));
    // the files the master read and checked; it reported their warnings already
    const conf = await confFromMaster();
    if (!conf) return leaveMaster(2);
    const emergOnly: MessageSink = { write: (level, message) => { if (level === 'emerg') log.write(level, message); } };
    const compiled = await compile(paths, flags, emergOnly, { snapshot: conf.snapshot });
    return compiled ? serveWorker(compiled, log, conf.ticketKeys) : leaveMaster(2);
  }
  const daemonChild = process.env['JINX_DAEMON_CHILD'] !== undefined;
  // a master's first worker starts once the configuration is read and checked, while it is compiled (`first-worker.ts`)
  let firstWorker: FirstWorker | undefined;
  const compiled = await compile(paths, flags, log, {
    onChecked: (_nodes, checked) => {
      if (becomesMaster(checked.root, daemonChild)) firstWorker = FirstWorker.start();
    },
  });
  const daemonizing = compiled?.table.main.daemon === true && !daemonChild;
  if (!compiled?.table.main.masterProcess || daemonizing) firstWorker?.discard();
  if (!compiled) return 1;
  const main = compiled.table.main;
  if (daemonizing) return daemonize(main.pidFile);
  if (main.masterProcess) {
    const { Master } = await loadingModules(() => import('./master.js'));
    return Master.run(compiled, { recompile: (sink) => compile(paths, flags, sink), daemonized: main.daemon, firstWorker });
  }
  // the runtime (and undici with it) is loaded only to serve: `-t`, `lint` and `-V` start without it
  const { Engine } = await loadingModules(() => import('../runtime/engine.js'));
  let engine: Engine;
  try {
    engine = await Engine.start(compiled, log);
  } catch (err) {
    if (!(err instanceof Engine.ReportedError)) report(log, err);
    return 1;
  }
  optimizeFromNowOn();
  try {
    writeFileSync(main.pidFile, `${process.pid}\n`);
  } catch (err) {
    engine.log('emerg', `open() "${main.pidFile}" failed (${systemErrorText(err)})`);
    await engine.stop();
    return 1;
  }
  const pidFile = main.pidFile;
  return new Promise<number>((resolveExit) => {
    let exiting = false;
    const exit = (how: 'graceful' | 'fast'): void => {
      if (exiting) return;
      exiting = true;
      void (how === 'graceful' ? engine.shutdown() : engine.stop()).then(() => {
        rmSync(pidFile, { force: true });
        removeReloadStatus(pidFile);
        resolveExit(0);
      });
    };
    process.on('SIGQUIT', () => exit('graceful'));
    process.on('SIGTERM', () => exit('fast'));
    process.on('SIGINT', () => exit('fast'));
    process.on('SIGUSR1', () => engine.reopenLogs());
    let reloads = 0;
    process.on('SIGHUP', () => {
      void (async () => {
        const emerg: string[] = [];
        const reloadLog: MessageSink = {
          write: (level, message) => {
            engine.log(level, message);
            if (level === 'emerg') emerg.push(message);
          },
        };
        const next = await compile(paths, flags, reloadLog);
        let ok = false;
        if (next) {
          try {
            await engine.reload(next);
            ok = true;
          } catch (err) {
            report(reloadLog, err);
          }
        }
        writeReloadStatus(pidFile, { reload: ++reloads, ok, emerg });
      })();
    });
  });
}

/** nginx's message for a command line commander refused (commander's own for `lint`'s options). */
function optionError(err: CommanderError, argv: readonly string[]): string {
  if (err.code === 'commander.invalidArgument') return `jinx: ${err.message.replace(/^error: /, '')}`;
  if (err.code === 'commander.unknownOption') {
    const opt = /'(-+[^']*)'/.exec(err.message)?.[1] ?? '';
    return `nginx: invalid option: "${opt.replace(/^-+/, '')}"`;
  }
  if (err.code === 'commander.optionMissingArgument') {
    const opt = /'(-\w)/.exec(err.message)?.[1] ?? '';
    return `nginx: option "${opt}" requires ${MISSING_VALUE[opt] ?? 'parameter'}`;
  }
  const takesValue = new Set(Object.keys(MISSING_VALUE));
  const extra = argv.find((a, i) => !a.startsWith('-') && !(i > 0 && takesValue.has(argv[i - 1]!)));
  return `nginx: invalid option: "${extra ?? argv[0] ?? ''}"`;
}

/** Runs the command line; resolves to the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  const args = argv.map((a) => (a === '-?' ? '-h' : a));
  const program = new Command('jinx');
  program
    .helpOption(false)
    .option('-h')
    .option('-v')
    .option('-V')
    .option('-t')
    .option('-T')
    .option('-q')
    .option('-s <signal>')
    .option('-p <prefix>')
    .option('-e <filename>')
    .option('-c <filename>')
    .option('-g <directives>')
    .option('--offline')
    .allowExcessArguments(false)
    .exitOverride()
    .configureOutput({ writeErr: () => undefined, writeOut: () => undefined, outputError: () => undefined });

  let status = 0;
  program.action(async () => {
    const flags = program.opts<Flags>();
    if (flags.v || flags.V || flags.h) {
      process.stderr.write(flags.h ? usage() : (flags.V ? buildInfo() : versionLine()) + '\n');
      if (!flags.t && !flags.T) return;
    }
    const sig = flags.s === undefined ? undefined : SIGNALS[flags.s];
    if (flags.s !== undefined && !sig) {
      process.stderr.write(`nginx: invalid option: "-s ${flags.s}"\n`);
      status = 1;
      return;
    }
    // --offline is for checking only: a server started with it would send to 192.0.2.1
    if (!flags.t && !flags.T) flags.offline = undefined;
    const paths = confPaths(flags.p, flags.c);
    const log = StartupLog.open(flags.e === undefined || flags.e === 'stderr' ? 'stderr' : flags.e.startsWith('/') ? flags.e : paths.prefix + flags.e);
    if (flags.t || flags.T) status = await testConfig(paths, flags, log);
    else if (sig) status = await signalProcess(paths, flags, sig, log);
    else status = await serve(paths, flags, log);
  });

  const repeat = (value: string, previous: readonly string[]): string[] => [...previous, value];
  program
    .command('lint')
    .argument('[file]', 'configuration file (default: the -c file)')
    .addOption(new Option('--format <format>', 'output format').choices(['text', 'json', 'sarif']).default('text'))
    .addOption(new Option('--fail-on <severity>', 'lowest severity that exits 1').choices(['error', 'warning', 'note']).default('error'))
    .addOption(new Option('--context <context>', 'lint the file as a snippet included there').choices(['http', 'server', 'location']))
    .option('--offline', 'no DNS, certificate or file checks')
    .option('--rule <code>', 'only this rule (repeatable)', repeat, [])
    .option('--skip <code>', 'not this rule (repeatable)', repeat, [])
    .option('--explain <code>', "print a rule's explanation")
    .action(async (file: string | undefined, opts: LintOptions) => {
      const flags = program.opts<Flags>();
      // loaded only for lint: `-t` starts without the rules
      const { lint } = await loadingModules(() => import('./lint.js'));
      status = await lint(confPaths(flags.p, file ?? flags.c), { ...opts, offline: opts.offline || flags.offline, globalDirectives: flags.g });
    });

  program
    .command('explain')
    .argument('<request>', "the request: 'GET https://host/path?query'")
    .option('-H, --header <header>', "a request header, 'Name: value' (repeatable)", repeat, [])
    .option('--addr <address>', 'the client address', '203.0.113.7')
    .option('--port <port>', 'the port connected to (default: the URL\'s, else 443 for https, 80 for http)')
    .addOption(new Option('--format <format>', 'output format').choices(['text', 'json']).default('text'))
    .action(async (request: string, opts: { header: string[]; addr: string; port?: string; format: 'text' | 'json' }) => {
      const flags = program.opts<Flags>();
      const { explain } = await loadingModules(() => import('./explain.js'));
      const port = opts.port === undefined ? undefined : Number(opts.port);
      if (port !== undefined && !(Number.isInteger(port) && port > 0 && port < 65536)) {
        process.stderr.write(`jinx explain: invalid --port "${opts.port}"\n`);
        status = 1;
        return;
      }
      status = await explain(confPaths(flags.p, flags.c), { request, headers: opts.header, addr: opts.addr, port, format: opts.format, globalDirectives: flags.g });
    });

  try {
    await program.parseAsync(args, { from: 'user' });
  } catch (err) {
    if (!(err instanceof CommanderError)) throw err;
    process.stderr.write(optionError(err, args) + '\n');
    return 1;
  }
  return status;
}

