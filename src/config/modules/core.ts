/**
 * Main and events contexts: nginx's core module (`src/core/nginx.c`), the
 * event modules (`src/event/ngx_event.c`), `error_log` (`src/core/ngx_log.c`)
 * and `include` (`src/core/ngx_conf_file.c`; files are spliced in by the
 * loader, the spec here only checks its arguments).
 */
import { basename } from 'node:path';
import type { Directive } from '../../parser/ast.js';
import { isLogLevel, type LogLevel } from '../../log/levels.js';
import { ANY_CONTEXT, HTTP_SRV_LOC, type Context } from '../flags.js';
import {
  acceptOnly, DirectiveFailure, fail, flagSetter, LevelConf, listSlot, slot, strSetter, type DirectiveSpec,
  type SetContext,
} from '../spec.js';

const CORE = 'ngx_core_module';
const EVENTS = 'ngx_events_module';
const MAIN: readonly Context[] = ['main'];
const EVENT: readonly Context[] = ['events'];

export const daemon = slot('daemon', true);
export const pidFile = slot('pid', 'logs/nginx.pid');
export const workerProcesses = slot('worker_processes', 1);
export const workerConnections = slot('worker_connections', 512);
/** `error_log` targets of a level: path as written and level. */
export const errorLogs = listSlot<{ readonly path: string; readonly level: LogLevel }>('error_log');

/** Parses `error_log FILE [LEVEL]` (nginx's `ngx_log_set_log` and `ngx_log_set_levels`). */
function setErrorLog(d: Directive, cx: SetContext): void {
  const file = d.args[0]!;
  if (file.startsWith('memory:')) fail('nginx was built without debug support');
  if (file.startsWith('syslog:')) fail('syslog is not supported by jinx');
  let level: LogLevel | undefined;
  for (const word of d.args.slice(1)) {
    if (!isLogLevel(word)) {
      if (/^debug_(core|alloc|mutex|event|http|mail|stream)$/.test(word)) continue;
      fail(`invalid log level "${word}"`);
    }
    if (level !== undefined) fail(`duplicate log level "${word}"`);
    level = word;
  }
  cx.level.append(errorLogs, { path: file === 'stderr' ? 'stderr' : cx.scope.fullPath(file), level: level ?? 'error' }, d.loc);
}

/** Dynamic modules jinx knows by file name: loading one makes its directives known. */
const DYNAMIC_MODULES = new Set(['ngx_stream_module', 'ngx_mail_module']);

const noEffect = (name: string, contexts: readonly Context[], args: DirectiveSpec['args'], note: string, module = CORE): DirectiveSpec => ({
  name, module, contexts, args, effect: 'none', note, set: acceptOnly,
});

export const coreDirectives: readonly DirectiveSpec[] = [
  {
    name: 'include', module: 'ngx_conf_module', contexts: ANY_CONTEXT, args: ['TAKE1'], effect: 'runtime',
    set: () => undefined,
  },
  { name: 'daemon', module: CORE, contexts: MAIN, args: ['FLAG'], effect: 'runtime', set: flagSetter(daemon) },
  { name: 'pid', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'runtime', set: strSetter(pidFile) },
  {
    name: 'worker_processes', module: CORE, contexts: MAIN, args: ['TAKE1'], effect: 'runtime',
    note: 'jinx runs one process; the value is checked, not used',
    set: (d, cx) => {
      if (cx.level.own(workerProcesses)) throw new DirectiveFailure('is duplicate');
      const v = d.args[0] === 'auto' ? 1 : /^\d+$/.test(d.args[0]!) ? Number(d.args[0]) : undefined;
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
    note: 'jinx has no loadable modules; loading ngx_stream_module or ngx_mail_module makes their directives known',
    set: (d, cx) => {
      const name = basename(d.args[0]!).replace(/\.so$/, '');
      if (DYNAMIC_MODULES.has(name)) cx.scope.loadedModules.add(name);
    },
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
    name: 'worker_connections', module: 'ngx_event_core_module', contexts: EVENT, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(workerConnections)) throw new DirectiveFailure('is duplicate');
      if (!/^\d+$/.test(d.args[0]!)) fail(`invalid number "${d.args[0]}"`);
      cx.level.set(workerConnections, Number(d.args[0]), d.loc);
    },
  },
  noEffect('user', MAIN, ['TAKE1', 'TAKE2'], 'jinx does not switch users; run it as the user it should serve as'),
  noEffect('pcre_jit', MAIN, ['FLAG'], 'regular expressions are compiled by V8', 'ngx_regex_module'),
  noEffect('env', MAIN, ['TAKE1'], 'jinx keeps its own environment'),
  noEffect('worker_rlimit_nofile', MAIN, ['TAKE1'], 'set the limit with ulimit before starting jinx'),
  noEffect('worker_rlimit_core', MAIN, ['TAKE1'], 'core dumps are the runtime\'s business'),
  noEffect('worker_priority', MAIN, ['TAKE1'], 'set the priority with nice before starting jinx'),
  noEffect('worker_cpu_affinity', MAIN, ['1MORE'], 'jinx runs one process'),
  noEffect('worker_shutdown_timeout', MAIN, ['TAKE1'], 'graceful shutdown waits for in-flight requests'),
  noEffect('working_directory', MAIN, ['TAKE1'], 'jinx does not change directory'),
  noEffect('master_process', MAIN, ['FLAG'], 'jinx runs one process'),
  noEffect('timer_resolution', MAIN, ['TAKE1'], 'timers are the runtime\'s'),
  noEffect('lock_file', MAIN, ['TAKE1'], 'jinx runs one process'),
  noEffect('thread_pool', MAIN, ['TAKE2', 'TAKE3'], 'file I/O uses the runtime\'s thread pool'),
  noEffect('multi_accept', EVENT, ['FLAG'], 'accepting is the runtime\'s', EVENTS),
  noEffect('accept_mutex', EVENT, ['FLAG'], 'jinx runs one process', EVENTS),
  noEffect('accept_mutex_delay', EVENT, ['TAKE1'], 'jinx runs one process', EVENTS),
  noEffect('use', EVENT, ['TAKE1'], 'the event loop is the runtime\'s', EVENTS),
  noEffect('worker_aio_requests', EVENT, ['TAKE1'], 'file I/O uses the runtime\'s thread pool', 'ngx_epoll_module'),
];
