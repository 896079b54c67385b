/**
 * Main and events contexts: nginx's core module (`src/core/nginx.c`), the
 * event modules (`src/event/ngx_event.c`), `error_log` (`src/core/ngx_log.c`)
 * and `include` (`src/core/ngx_conf_file.c`; files are spliced in by the
 * loader, the spec here only checks its arguments).
 */
import { closeSync, openSync, readSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { basename } from 'node:path';
import { systemErrorText } from '../../os-errors.js';
import type { Directive } from '../../parser/ast.js';
import { cString } from '../../c-string.js';
import { isLogLevel, type LogLevel } from '../../log-levels.js';
import { ANY_CONTEXT, HTTP_SRV_LOC, type Context } from '../flags.js';
import { accountId, filesMention } from '../accounts.js';
import { hasCommand } from '../host-commands.js';
import { ConfigError } from '../../errors.js';
import type { LevelNode } from '../check.js';
import type { CompileContext } from '../compile-context.js';
import {
  DirectiveFailure, fail, flagSetter, LevelConf, listSlot, msecSetter, noEffect, numSetter, offSetter, parseNumber, rule, ruleSetter, slot, strSetter,
  type ConfChain, type DirectiveSpec,
  type Rule, type SetContext, type Slot,
} from '../spec.js';

const CORE = 'ngx_core_module';
const EVENTS = 'ngx_events_module';
const EVENT_CORE = 'ngx_event_core_module';
const MAIN: readonly Context[] = ['main'];
const EVENT: readonly Context[] = ['events'];

export const daemon = slot('daemon', true);
/** `master_process`: nginx's worker then holds one connection, its channel to the master. */
export const masterProcess = slot('master_process', true);
/** `worker_shutdown_timeout`: connections still open this long after a graceful shutdown or reload began are closed; 0: none. */
export const workerShutdownTimeoutMs = slot('worker_shutdown_timeout', 0);
export const pidFile = slot('pid', 'logs/nginx.pid');
/** `auto` is the number of CPUs this process may run on (nginx's `ngx_ncpu`). */
export const workerProcesses = slot('worker_processes', 1);
/** `worker_cpu_affinity`: `auto`, and the number of masks. */
export const cpuAffinity = slot<CpuAffinity | undefined>('worker_cpu_affinity', undefined);

/** `worker_rlimit_nofile`: the descriptor limit each worker sets for itself (soft and hard). */
const workerRlimitNofile = slot<number>('worker_rlimit_nofile', 0);
/** `worker_rlimit_core` in bytes; -1: unset (0 is a limit: no core files). */
const workerRlimitCore = slot<number>('worker_rlimit_core', -1);
/** `working_directory`: where each worker changes to; '' leaves it. */
const workingDirectory = slot<string>('working_directory', '');

/**
 * `worker_cpu_affinity`: `auto` (worker N on the N-th CPU of `masks[0]`, all
 * CPUs without one), or a mask per worker, the last for the rest; a mask is
 * nginx's string of 0s and 1s, CPU 0 rightmost.
 */
export interface CpuAffinity {
  readonly auto: boolean;
  readonly masks: readonly string[];
}
export const workerConnections = slot('worker_connections', 512);
/** `error_log` targets of a level: path as written and level. */
export const errorLogs = listSlot<{ readonly path: string; readonly level: LogLevel }>('error_log');

/** Parses `error_log FILE [LEVEL]` (nginx's `ngx_log_set_log` and `ngx_log_set_levels`). */
export function parseErrorLog(d: Directive, cx: SetContext): { readonly path: string; readonly level: LogLevel } {
  const file = d.args[0]!;
  if (file.startsWith('memory:')) fail('the cyclic memory buffer (memory:) is not supported by jinx');
  if (file.startsWith('syslog:')) fail('syslog is not supported by jinx');
  let level: LogLevel | undefined;
  // ngx_log_set_levels compares with ngx_strcmp and prints with %s: a word ends at a NUL byte
  for (const word of d.args.slice(1).map(cString)) {
    if (!isLogLevel(word)) {
      if (/^debug_(core|alloc|mutex|event|http|mail|stream)$/.test(word)) continue;
      fail(`invalid log level "${word}"`);
    }
    if (level !== undefined) fail(`duplicate log level "${word}"`);
    level = word;
  }
  return { path: file === 'stderr' ? 'stderr' : cx.scope.fullPath(file), level: level ?? 'error' };
}

const setErrorLog = (d: Directive, cx: SetContext): void => cx.level.append(errorLogs, parseErrorLog(d, cx), d.loc);

/**
 * `ngx_load_module` (`src/core/nginx.c`): the file (relative to the prefix)
 * is opened with `dlopen()`, whose failures glibc words as below; a module
 * loaded twice is `module "NAME" is already loaded`. jinx reads only the
 * ELF header; the module's name is taken from the file name, as Debian's
 * modules are named.
 */
function loadModule(d: Directive, cx: SetContext): void {
  const path = cx.scope.fullPath(d.args[0]!);
  const failed = (why: string): never => fail(`dlopen() "${path}" failed (${path}: ${why})`);
  const header = Buffer.alloc(64);
  let length = 0;
  try {
    const fd = openSync(path, 'r');
    try {
      length = readSync(fd, header, 0, 64, 0);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EISDIR') failed('cannot read file data: Is a directory');
    failed(`cannot open shared object file: ${systemErrorText(err).replace(/^\d+: /, '')}`);
  }
  if (length < 64) failed('file too short');
  if (header.readUInt32BE(0) !== 0x7f454c46) failed('invalid ELF header');
  const name = basename(path).replace(/\.so$/, '');
  if (cx.scope.loadedModules.has(name)) fail(`module "${name}" is already loaded`);
  cx.scope.loadedModules.add(name);
}

const none = (
  name: string, contexts: readonly Context[], args: DirectiveSpec['args'], note: string, r: Rule, module = CORE,
): DirectiveSpec => noEffect({ name, module, contexts, args, note }, r);

/**
 * The account a worker switches to (`ccf->username`, `ccf->user`,
 * `ccf->group`): set only when the master runs as root.
 */
export interface WorkerUser {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
}

/** `user`, as `ngx_set_user` resolves it (nginx's `ccf->user`: left unset when ignored for want of root, so a second `user` is then no duplicate). */
const workerUser = slot<WorkerUser | undefined>('user', undefined);

/**
 * `ngx_set_user` (`src/core/nginx.c`): without root privileges a warning and
 * nothing else; as root the user and the group (the user's name when none is
 * given) must exist: `getpwnam("NAME") failed`, `getgrnam("NAME") failed`
 * (not looked up `--offline`).
 */
function setUser(d: Directive, cx: SetContext): void {
  if (cx.level.own(workerUser)) throw new DirectiveFailure('is duplicate');
  if (process.geteuid?.() !== 0) {
    cx.warn('the "user" directive makes sense only if the master process runs with super-user privileges, ignored', 'user-ignored');
    return;
  }
  const name = d.args[0]!;
  if (cx.scope.offline) {
    // `--offline`: the accounts are the serving machine's, not this one's (kept for the duplicate check; never served)
    cx.level.set(workerUser, { name, uid: -1, gid: -1 }, d.loc);
    return;
  }
  const uid = accountId('passwd', name);
  if (uid === undefined) fail(`getpwnam("${name}") failed`);
  const group = d.args[1] ?? name;
  const gid = accountId('group', group);
  if (gid === undefined) fail(`getgrnam("${group}") failed`);
  cx.level.set(workerUser, { name, uid, gid }, d.loc);
}

/** The account nginx's workers run as when the master runs as root without `user`, resolved once per process. */
let defaultUser: WorkerUser | undefined;

/**
 * `ngx_core_module_init_conf` (`src/core/nginx.c`): as root without `user`,
 * nginx's build-time `NGX_USER` and `NGX_GROUP`: `nobody`, and the group
 * `nobody` where `/etc/group` mentions it, else `nogroup` (nginx's
 * `auto/unix`: `grep nobody /etc/group`).
 * @throws ConfigError `getpwnam("nobody") failed`, `getgrnam("nogroup") failed`
 */
function rootDefaultUser(): WorkerUser {
  if (defaultUser) return defaultUser;
  const uid = accountId('passwd', 'nobody');
  if (uid === undefined) throw new ConfigError('invalid-value', 'getpwnam("nobody") failed', undefined, { phase: 'init' });
  const groupName = filesMention('group', 'nobody') ? 'nobody' : 'nogroup';
  const gid = accountId('group', groupName);
  if (gid === undefined) throw new ConfigError('invalid-value', `getgrnam("${groupName}") failed`, undefined, { phase: 'init' });
  defaultUser = { name: 'nobody', uid, gid };
  return defaultUser;
}

/**
 * A process directive a worker carries out with a util-linux command
 * (`hasCommand`): where the command is missing, the warning nginx gives on
 * a platform without the call (`"worker_cpu_affinity" is not supported on
 * this platform, ignored`, `ngx_set_cpu_affinity`), naming the command,
 * and the directive is left unset.
 */
function withCommand<T>(command: string, s: Slot<T>, unset: T, setter: DirectiveSpec['set']): DirectiveSpec['set'] {
  return (d, cx) => {
    setter(d, cx);
    if (hasCommand(command)) return;
    cx.warn(`"${d.name}" is not supported on this platform (no "${command}" of util-linux in PATH), ignored`, 'process-command-missing');
    cx.level.replace(s, unset, d.loc);
  };
}

/** `worker_priority` as nginx stores it: 0 is "unset", so `worker_priority 0;` may be repeated. */
const workerPriority = slot('worker_priority', 0);

/** `ngx_set_priority` (`src/core/nginx.c`): `[+|-]NUMBER`. */
function setPriority(d: Directive, cx: SetContext): void {
  if (cx.level.own(workerPriority)?.value) throw new DirectiveFailure('is duplicate');
  const m = /^([-+]?)(.*)$/s.exec(d.args[0]!)!;
  const n = parseNumber(m[2]!);
  if (n === undefined) throw new DirectiveFailure('invalid number');
  cx.level.replace(workerPriority, (m[1] === '-' ? -1 : 1) * n, d.loc);
}

/** `ngx_set_cpu_affinity` (`src/core/nginx.c`): `auto [MASK]` or one mask of 0s and 1s per worker. */
function parseCpuAffinity(d: Directive): CpuAffinity {
  let masks = d.args;
  const auto = masks[0] === 'auto';
  if (auto) {
    if (masks.length > 2) fail('invalid number of arguments in "worker_cpu_affinity" directive');
    masks = masks.slice(1);
  }
  for (const mask of masks) {
    if (mask.length > 1024) fail('"worker_cpu_affinity" supports up to 1024 CPUs only');
    const bad = [...mask].reverse().find((ch) => ch !== ' ' && ch !== '0' && ch !== '1');
    if (bad !== undefined) fail(`invalid character "${bad}" in "worker_cpu_affinity"`);
  }
  return { auto, masks: masks.map((m) => m.replace(/ /g, '')) };
}

/**
 * `ngx_thread_pool` (`src/core/ngx_thread_pool.c`): `NAME threads=N
 * [max_queue=N]`, a name defined once; other words are ignored, as in nginx.
 */
function setThreadPool(d: Directive, cx: SetContext): void {
  const name = d.args[0]!;
  if (cx.scope.threadPools.get(name)?.defined) fail(`duplicate thread pool "${name}"`);
  let threads = 0;
  for (const p of d.args.slice(1)) {
    if (p.startsWith('threads=')) {
      threads = parseNumber(p.slice(8)) ?? 0;
      if (threads === 0) fail(`invalid threads value "${p}"`);
    } else if (p.startsWith('max_queue=') && parseNumber(p.slice(10)) === undefined) fail(`invalid max_queue value "${p}"`);
  }
  if (threads === 0) fail('"thread_pool" must have "threads" parameter');
  cx.scope.threadPools.set(name, { defined: true, loc: d.loc });
}

/** The event methods of nginx on Linux (`ngx_event_use`, `src/event/ngx_event.c`): epoll only. */
const EVENT_METHODS: readonly string[] = ['epoll'];

export const coreDirectives: readonly DirectiveSpec[] = [
  {
    name: 'include', module: 'ngx_conf_module', contexts: ANY_CONTEXT, args: ['TAKE1'], effect: 'runtime',
    set: () => undefined,
  },
  { name: 'daemon', module: CORE, contexts: MAIN, args: ['FLAG'], effect: 'runtime', set: flagSetter(daemon) },
  { name: 'pid', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'runtime', set: strSetter(pidFile) },
  {
    name: 'worker_processes', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'runtime',
    note: 'with master_process on (the default), the master starts this many worker processes; auto is the number of CPUs node reports available',
    set: (d, cx) => {
      if (cx.level.own(workerProcesses)) throw new DirectiveFailure('is duplicate');
      const v = d.args[0] === 'auto' ? availableParallelism() : parseNumber(d.args[0]!);
      if (v === undefined) throw new DirectiveFailure('invalid value');
      cx.level.set(workerProcesses, v, d.loc);
    },
  },
  {
    name: 'error_log', module: 'ngx_errlog_module', contexts: MAIN, args: ['1MORE'], effect: 'runtime', set: setErrorLog,
  },
  {
    name: 'error_log', module: 'ngx_http_core_module', contexts: HTTP_SRV_LOC, args: ['1MORE'], effect: 'runtime', set: setErrorLog,
  },
  {
    name: 'load_module', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'none',
    note: 'jinx has no loadable modules; the file is checked; the stream module is built in (loading it is not needed), loading ngx_mail_module makes its directives known',
    set: loadModule,
  },
  {
    name: 'events', module: EVENTS, contexts: MAIN, args: ['NOARGS'], block: 'context', effect: 'runtime',
    set: (_d, cx) => {
      if (cx.scope.seenBlocks.has('events')) throw new DirectiveFailure('is duplicate');
      cx.scope.seenBlocks.add('events');
      return { context: 'events', level: new LevelConf() };
    },
  },
  {
    name: 'worker_connections', module: EVENT_CORE, contexts: EVENT, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(workerConnections)) throw new DirectiveFailure('is duplicate');
      const n = parseNumber(d.args[0]!);
      if (n === undefined) fail(`invalid number "${d.args[0]}"`);
      cx.level.set(workerConnections, n, d.loc);
    },
  },
  {
    name: 'user', module: CORE, contexts: MAIN, args: ['TAKE1', 'TAKE2'], effect: 'runtime',
    note: 'started as root, each worker switches to it (nobody without it) once its files are open; with master_process off, not used', set: setUser,
  },
  none('pcre_jit', MAIN, ['FLAG'], 'regular expressions are translated from PCRE2 syntax and compiled by V8', rule.flag, 'ngx_regex_module'),
  none('env', MAIN, ['TAKE1'], 'jinx keeps its own environment', rule.array),
  none('ssl_object_cache_inheritable', MAIN, ['FLAG'], 'certificates, keys, CA and CRL files are read again at every reload', rule.flag),
  {
    name: 'worker_rlimit_nofile', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'runtime',
    note: 'each worker sets its limit with prlimit (util-linux); with master_process off, set it with ulimit before starting jinx',
    set: withCommand('prlimit', workerRlimitNofile, 0, numSetter(workerRlimitNofile)),
  },
  {
    name: 'worker_rlimit_core', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'runtime',
    note: 'each worker sets its limit with prlimit (util-linux); with master_process off, set it with ulimit before starting jinx',
    set: withCommand('prlimit', workerRlimitCore, -1, offSetter(workerRlimitCore)),
  },
  {
    name: 'worker_priority', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'runtime',
    note: 'each worker sets its own priority (os.setPriority); with master_process off, set it with nice before starting jinx',
    set: setPriority,
  },
  {
    name: 'worker_cpu_affinity', module: CORE, contexts: MAIN, args: ['1MORE'], effect: 'runtime',
    note: 'each worker binds itself with taskset (util-linux); with master_process off, not used',
    set: withCommand('taskset', cpuAffinity, undefined, ruleSetter('worker_cpu_affinity', rule.custom(parseCpuAffinity, cpuAffinity))),
  },
  {
    name: 'worker_shutdown_timeout', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'runtime', set: msecSetter(workerShutdownTimeoutMs),
  },
  {
    name: 'working_directory', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'runtime',
    note: 'each worker changes to it; with master_process off, not used', set: strSetter(workingDirectory),
  },
  {
    name: 'master_process', module: CORE, contexts: MAIN, args: ['FLAG'], effect: 'runtime',
    note: 'on (the default): a master process and worker_processes workers, whose channel to the master counts among worker_connections; off: one process serves',
    set: flagSetter(masterProcess),
  },
  none('timer_resolution', MAIN, ['TAKE1'], 'timers are the runtime\'s', rule.msec),
  none('lock_file', MAIN, ['TAKE1'], 'jinx has no accept mutex, so no lock file', rule.str),
  none('thread_pool', MAIN, ['TAKE2', 'TAKE3'], '`aio threads` reads in node\'s own thread pool (UV_THREADPOOL_SIZE threads)', rule.repeatable(setThreadPool), 'ngx_thread_pool_module'),
  none('multi_accept', EVENT, ['FLAG'], 'accepting is the runtime\'s', rule.flag, EVENT_CORE),
  none('accept_mutex', EVENT, ['FLAG'], 'workers accept on the shared sockets as the kernel wakes them, as with nginx\'s default accept_mutex off', rule.flag, EVENT_CORE),
  none('accept_mutex_delay', EVENT, ['TAKE1'], 'jinx has no accept mutex', rule.msec, EVENT_CORE),
  none('use', EVENT, ['TAKE1'], 'the event loop is the runtime\'s', rule.custom((d) => {
    if (!EVENT_METHODS.includes(d.args[0]!)) fail(`invalid event type "${d.args[0]}"`);
    return d.args[0];
  }), EVENT_CORE),
  none('worker_aio_requests', EVENT, ['TAKE1'], 'no file AIO: files are read in the worker, or in node\'s thread pool with `aio threads`', rule.num(), 'ngx_epoll_module'),
];

/** Where an `error_log` writes, and from which level up. */
export interface ErrorLogTarget {
  /** Absolute file path, or `stderr`. */
  readonly path: string;
  readonly level: LogLevel;
}

/** Settings of the main and events contexts. */
export interface MainConf {
  readonly daemon: boolean;
  readonly pidFile: string;
  /**
   * Whether `pid` is set in the configuration: `-t` opens the pid file as
   * nginx -t does only then (jinx's compiled-in `logs/nginx.pid` is not
   * opened by `-t`; the reference build's is `/run/nginx.pid`).
   */
  readonly pidFileConfigured: boolean;
  readonly workerProcesses: number;
  readonly workerConnections: number;
  /** `master_process`: an nginx worker counts its channel to the master among its connections. */
  readonly masterProcess: boolean;
  /** `worker_priority`: the nice value each worker sets for itself; 0 leaves it. */
  readonly workerPriority: number;
  /** `worker_rlimit_nofile`; 0 leaves the limit. */
  readonly workerRlimitNofile: number;
  /** `worker_rlimit_core` in bytes; -1 leaves the limit. */
  readonly workerRlimitCoreBytes: number;
  /** `working_directory`; '' leaves it. */
  readonly workingDirectory: string;
  /** The account each worker switches to (`user`, else nobody), when the master runs as root; undefined otherwise. */
  readonly user: WorkerUser | undefined;
  readonly cpuAffinity: CpuAffinity | undefined;
  /** `worker_shutdown_timeout` (ngx_set_shutdown_timer): connections left this long after a graceful shutdown or reload are closed; 0: none. */
  readonly workerShutdownTimeoutMs: number;
  readonly errorLogs: readonly ErrorLogTarget[];
}

/** The `error_log`s of a level; `stderr` at `error` when none is set. */
export function errorLogsConf(c: ConfChain): ErrorLogTarget[] {
  const list = c.list(errorLogs);
  return list.length > 0 ? list : [{ path: 'stderr', level: 'error' }];
}

/** Every http-level error-log target the compile made, in the order made. */
const ERROR_LOG_TARGETS = Symbol('error log targets');

/** The `error_log`s of an http level (`ngx_http_core_merge_loc_conf`), kept among the targets to open at start. */
export function levelErrorLogs(cx: CompileContext, c: ConfChain): ErrorLogTarget[] {
  const list = errorLogsConf(c);
  errorLogTargets(cx).push(...list);
  return list;
}

/** The error-log targets `levelErrorLogs` made. */
export function errorLogTargets(cx: CompileContext): ErrorLogTarget[] {
  return cx.memo(ERROR_LOG_TARGETS, () => []);
}

/**
 * `ngx_core_module_init_conf` (`src/core/nginx.c`): a number of
 * `worker_cpu_affinity` masks other than one or `worker_processes` is a warning.
 */
export function checkCpuAffinity(cx: CompileContext, mainChain: ConfChain): void {
  const affinity = mainChain.get(cpuAffinity);
  if (!affinity || affinity.auto || affinity.masks.length === 1 || affinity.masks.length === mainChain.get(workerProcesses)) return;
  cx.warn({
    level: 'warn', code: 'cpu-affinity-masks', loc: undefined,
    text: 'the number of "worker_processes" is not equal to the number of "worker_cpu_affinity" masks, using last mask for remaining worker processes',
  });
}

/**
 * Whether the process that checked `root` goes on as a master
 * (`src/cli/master.ts`): `master_process on` and, unless it is the daemon
 * already (`daemonChild`), `daemon off`. Read from the main level as the
 * check filled it, before the compile step (`mainConf` reads the same slots
 * after it).
 */
export function becomesMaster(root: LevelNode, daemonChild: boolean): boolean {
  const mainFlag = (s: Slot<boolean>): boolean => root.conf.own(s)?.value ?? s.defaultValue;
  return mainFlag(masterProcess) && (daemonChild || !mainFlag(daemon));
}

/**
 * The main and events settings, checked as `ngx_init_cycle` does once the
 * configuration is read: an `events` section, and `worker_connections`
 * for `sockets` listening sockets and one more.
 * @throws ConfigError `no "events" section in configuration`, `N worker_connections are not enough …`
 */
export function mainConf(cx: CompileContext, root: LevelNode, errorLogTargets: readonly ErrorLogTarget[], sockets: number): MainConf {
  const mainChain = cx.chain(root);
  const events = root.children.find((c) => c.context === 'events');
  if (!events) throw new ConfigError('missing-section', 'no "events" section in configuration', undefined, { phase: 'init' });
  const main = {
    daemon: mainChain.get(daemon),
    pidFile: cx.scope.fullPath(mainChain.get(pidFile)),
    pidFileConfigured: mainChain.has(pidFile),
    workerProcesses: mainChain.get(workerProcesses),
    workerConnections: cx.chain(events).get(workerConnections),
    masterProcess: mainChain.get(masterProcess),
    workerPriority: mainChain.get(workerPriority),
    workerRlimitNofile: mainChain.get(workerRlimitNofile),
    workerRlimitCoreBytes: mainChain.get(workerRlimitCore),
    workingDirectory: mainChain.get(workingDirectory),
    user: process.geteuid?.() === 0 && !cx.scope.offline ? mainChain.get(workerUser) ?? rootDefaultUser() : undefined,
    cpuAffinity: mainChain.get(cpuAffinity),
    workerShutdownTimeoutMs: mainChain.get(workerShutdownTimeoutMs),
    errorLogs: errorLogTargets,
  };
  if (main.workerConnections < sockets + 1) {
    throw new ConfigError('invalid-value', `${main.workerConnections} worker_connections are not enough for ${sockets} listening sockets`,
      undefined, { phase: 'init' });
  }
  return main;
}

/**
 * `ngx_init_cycle`: every shared memory zone needs a size by now (`zone NAME;` names one sized elsewhere).
 * @throws ConfigError `zero size shared memory zone "NAME"`
 */
export function checkSharedZones(cx: CompileContext): void {
  for (const [name, zone] of cx.scope.sharedZones) {
    if (zone.size === 0) throw new ConfigError('invalid-value', `zero size shared memory zone "${name}"`, undefined, { phase: 'init' });
  }
}
