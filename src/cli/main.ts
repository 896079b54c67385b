/**
 * The `jinx` command: nginx's flags (`-c -p -t -T -q -g -e -s -v -V`) and
 * `jinx lint`. Messages go where nginx's Debian build puts them: log lines
 * (`YYYY/MM/DD HH:MM:SS [emerg] PID#PID: …`) and `nginx: …` notes on stderr.
 */
import { appendFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { isAbsolute, resolve } from 'node:path';
import { Command, Option } from 'commander';
import { compileConfig, type CompiledConfig } from '../config/compile.js';
import { ConfigError, formatWarning } from '../errors.js';
import { formatErrorLine } from '../log/error-log.js';
import type { LogLevel } from '../log/levels.js';
import { systemErrorText } from '../os-errors.js';
import { Engine } from '../runtime/engine.js';
import { prepareFiles } from '../runtime/prepare-files.js';
import { buildInfo, DEFAULT_CONF, DEFAULT_PREFIX, versionLine } from './build-info.js';
import { lint } from './lint.js';

/** nginx's `-s` signals. */
const SIGNALS: Readonly<Record<string, NodeJS.Signals>> = { stop: 'SIGTERM', quit: 'SIGQUIT', reopen: 'SIGUSR1', reload: 'SIGHUP' };

interface Flags {
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
}

/** Paths derived from `-p` and `-c` as nginx's `ngx_process_options` does. */
export interface ConfPaths {
  /** Absolute, ending with `/`. */
  readonly prefix: string;
  readonly confFile: string;
}

export function confPaths(prefixFlag: string | undefined, confFlag: string | undefined): ConfPaths {
  let prefix = prefixFlag === undefined ? DEFAULT_PREFIX : resolve(prefixFlag);
  if (!prefix.endsWith('/')) prefix += '/';
  const conf = confFlag ?? DEFAULT_CONF;
  return { prefix, confFile: isAbsolute(conf) ? conf : resolve(prefix, conf) };
}

/** Receives log lines that have no request context. */
interface MessageSink {
  write(level: LogLevel, message: string): void;
}

/** Where messages go before the configuration's `error_log` is open (`-e`, stderr by default). */
class StartupLog implements MessageSink {
  constructor(private readonly target: string) {}

  write(level: LogLevel, message: string): void {
    const line = formatErrorLine(level, message, undefined) + '\n';
    if (this.target === 'stderr') {
      process.stderr.write(line);
      return;
    }
    try {
      appendFileSync(this.target, line);
    } catch {
      // the file is unusable: stderr below still carries the message
    }
    if (level === 'emerg' || level === 'alert' || level === 'crit' || level === 'error' || level === 'warn') {
      process.stderr.write(`nginx: [${level}] ${message}\n`);
    }
  }
}

function report(log: MessageSink, err: unknown): void {
  if (err instanceof ConfigError) log.write('emerg', err.message);
  else if ((err as NodeJS.ErrnoException)?.code && (err as NodeJS.ErrnoException).path) {
    log.write('emerg', `open() "${(err as NodeJS.ErrnoException).path}" failed (${systemErrorText(err)})`);
  } else log.write('emerg', String((err as Error)?.message ?? err));
}

async function compile(paths: ConfPaths, flags: Flags, log: MessageSink): Promise<CompiledConfig | undefined> {
  try {
    const compiled = await compileConfig({ confFile: paths.confFile, prefix: paths.prefix, globalDirectives: flags.g });
    for (const w of compiled.warnings) log.write(w.level, formatWarning(w));
    return compiled;
  } catch (err) {
    report(log, err);
    return undefined;
  }
}

async function testConfig(paths: ConfPaths, flags: Flags, log: StartupLog): Promise<number> {
  const compiled = await compile(paths, flags, log);
  if (!compiled) {
    process.stderr.write(`nginx: configuration file ${paths.confFile} test failed\n`);
    return 1;
  }
  if (!flags.q) process.stderr.write(`nginx: the configuration file ${paths.confFile} syntax is ok\n`);
  try {
    prepareFiles(compiled.table);
  } catch (err) {
    report(log, err);
    process.stderr.write(`nginx: configuration file ${paths.confFile} test failed\n`);
    return 1;
  }
  if (!flags.q) process.stderr.write(`nginx: configuration file ${paths.confFile} test is successful\n`);
  if (flags.T) {
    for (const f of compiled.files) process.stdout.write(`# configuration file ${f.path}:\n${f.text}\n`);
  }
  return 0;
}

/** `-s SIGNAL`: signals the process whose pid the configuration's pid file holds. */
async function signalProcess(paths: ConfPaths, flags: Flags, log: StartupLog): Promise<number> {
  const sig = SIGNALS[flags.s!];
  if (!sig) {
    process.stderr.write(`nginx: invalid option: "-s ${flags.s}"\n`);
    return 1;
  }
  const compiled = await compile(paths, flags, log);
  if (!compiled) return 1;
  const pidFile = compiled.table.main.pidFile;
  let text: string;
  try {
    text = readFileSync(pidFile, 'utf8');
  } catch (err) {
    log.write('error', `open() "${pidFile}" failed (${systemErrorText(err)})`);
    return 1;
  }
  const pid = Number(text.trim());
  if (!/^\d+$/.test(text.trim()) || pid <= 0) {
    log.write('error', `invalid PID number "${text.trim()}" in "${pidFile}"`);
    return 1;
  }
  try {
    process.kill(pid, sig);
  } catch (err) {
    log.write('alert', `kill(${pid}, ${sig === 'SIGTERM' ? 15 : sig === 'SIGQUIT' ? 3 : sig === 'SIGUSR1' ? 10 : 1}) failed (${systemErrorText(err)})`);
    return 1;
  }
  return 0;
}

/** Starts a detached copy of this process for `daemon on` and waits until it serves or fails. */
function daemonize(pidFile: string): Promise<number> {
  return new Promise((resolveExit) => {
    const child = spawn(process.execPath, process.argv.slice(1), {
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

async function serve(paths: ConfPaths, flags: Flags, log: StartupLog): Promise<number> {
  let compiled = await compile(paths, flags, log);
  if (!compiled) return 1;
  const main = compiled.table.main;
  if (main.daemon && !process.env['JINX_DAEMON_CHILD']) return daemonize(main.pidFile);
  let engine: Engine;
  try {
    engine = await Engine.start(compiled);
  } catch (err) {
    report(log, err);
    return 1;
  }
  try {
    writeFileSync(main.pidFile, `${process.pid}\n`);
  } catch (err) {
    report(log, err);
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
        resolveExit(0);
      });
    };
    process.on('SIGQUIT', () => exit('graceful'));
    process.on('SIGTERM', () => exit('fast'));
    process.on('SIGINT', () => exit('fast'));
    process.on('SIGUSR1', () => engine.reopenLogs());
    process.on('SIGHUP', () => {
      void (async () => {
        const reloadLog: MessageSink = { write: (level, message) => engine.log(level, message) };
        const next = await compile(paths, flags, reloadLog);
        if (!next) return;
        try {
          await engine.reload(next);
          compiled = next;
        } catch (err) {
          report(reloadLog, err);
        }
      })();
    });
  });
}

/** Runs the command line; resolves to the exit status. */
export async function main(argv: readonly string[]): Promise<number> {
  const program = new Command('jinx');
  program
    .description('an nginx-compatible config interpreter and reverse proxy')
    .helpOption('-h, --help', 'this help')
    .option('-v', 'show version and exit')
    .option('-V', 'show version and configure options then exit')
    .option('-t', 'test configuration and exit')
    .option('-T', 'test configuration, dump it and exit')
    .option('-q', 'suppress non-error messages during configuration testing')
    .addOption(new Option('-s <signal>', 'send signal to the running process: stop, quit, reopen, reload'))
    .option('-p <prefix>', `set prefix path (default: ${DEFAULT_PREFIX})`)
    .option('-e <filename>', 'set error log file (default: stderr)')
    .option('-c <filename>', `set configuration file (default: ${DEFAULT_CONF})`)
    .option('-g <directives>', 'set global directives out of configuration file')
    .allowExcessArguments(false)
    .exitOverride()
    .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stderr.write(s) });

  let status = 0;
  program.action(async () => {
    const flags = program.opts<Flags>();
    if (flags.v || flags.V) {
      process.stderr.write((flags.V ? buildInfo() : versionLine()) + '\n');
      if (!flags.t && !flags.T) return;
    }
    const paths = confPaths(flags.p, flags.c);
    const log = new StartupLog(flags.e === undefined || flags.e === 'stderr' ? 'stderr' : resolve(paths.prefix, flags.e));
    if (flags.t || flags.T) status = await testConfig(paths, flags, log);
    else if (flags.s) status = await signalProcess(paths, flags, log);
    else status = await serve(paths, flags, log);
  });

  program
    .command('lint')
    .description('check a configuration like -t, and list what has no effect in jinx')
    .argument('[file]', 'configuration file (default: the -c file)')
    .addOption(new Option('--format <format>', 'output format').choices(['text', 'json']).default('text'))
    .action(async (file: string | undefined, opts: { format: 'text' | 'json' }) => {
      const flags = program.opts<Flags>();
      const paths = confPaths(flags.p, file ?? flags.c);
      status = await lint(paths, opts.format, flags.g);
    });

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (err) {
    const code = (err as { exitCode?: number }).exitCode;
    return code ?? 1;
  }
  return status;
}
