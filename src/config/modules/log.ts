/**
 * The log module (`src/http/modules/ngx_http_log_module.c`):
 * `log_format NAME [escape=default|json|none] STRING…` and
 * `access_log PATH [FORMAT [buffer=SIZE] [gzip[=LEVEL]] [flush=TIME] [if=COND]] | off`.
 */
import { cString } from '../../c-string.js';
import type { SourceLoc } from '../../parser/ast.js';
import type { Directive } from '../../parser/ast.js';
import { fail, listSlot, parseNumber, parseMsec, parseSize, parseTime, rule, ruleSetter, slot, type ConfChain, type DirectiveSpec } from '../spec.js';
import type { CompiledValue, ValueSource } from '../variables.js';
import type { CompileContext } from '../compile-context.js';
import { compileLogFormat, type CompiledLogFormat } from '../log-format.js';

const LOG = 'ngx_http_log_module';

/** nginx's predefined `combined` format. */
export const COMBINED_FORMAT =
  '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"';

/** One `access_log` directive; `off` disables logging at its level. */
export type AccessLogDef =
  | { readonly off: true }
  | {
      readonly off: false;
      /** The file, made absolute; with variables, the template of its name (see `pathValue`). */
      readonly path: string;
      /** A path with variables, opened for each line (`ngx_http_log_script_write`). */
      readonly pathValue: ValueSource | undefined;
      readonly format: string;
      readonly bufferBytes: number | undefined;
      readonly flushMs: number | undefined;
      /** `gzip[=LEVEL]`: each buffer written as a gzip member of this level (0: not compressed). */
      readonly gzipLevel: number;
      readonly condition: ValueSource | undefined;
      readonly loc: SourceLoc;
    };

export const accessLogs = listSlot<AccessLogDef>('access_log');

/**
 * `open_log_file_cache max=N [inactive=TIME] [min_uses=N] [valid=TIME]`: the
 * cache of descriptors of log files whose names have variables
 * (`ngx_open_file_cache_t`); `null` for `off`.
 */
export interface OpenLogFileCacheDef {
  readonly maxFiles: number;
  /** A file not written for this long is closed (default 10 s). */
  readonly inactiveMs: number;
  /** A descriptor is kept open once its file was written this many times (default 1). */
  readonly minUses: number;
  /** A kept descriptor is used without checking the name again for this long (default 60 s). */
  readonly validMs: number;
}

export const openLogFileCache = slot<OpenLogFileCacheDef | null | undefined>('open_log_file_cache', undefined);

/**
 * `ngx_http_log_open_file_cache`: `off` or `max=N [inactive=TIME]
 * [min_uses=N] [valid=TIME]`; `invalid "open_log_file_cache" parameter "…"`,
 * `"open_log_file_cache" must have "max" parameter`.
 */
function parseOpenLogFileCache(d: Directive): OpenLogFileCacheDef | null {
  let maxFiles = 0;
  let inactiveMs = 10_000;
  let validMs = 60_000;
  let minUses = 1;
  let off = false;
  for (const p of d.args) {
    const num = (prefix: string): number | undefined => (p.startsWith(prefix) ? parseNumber(p.slice(prefix.length)) : undefined);
    const sec = (prefix: string): number | undefined => (p.startsWith(prefix) ? parseTime(p.slice(prefix.length), true) : undefined);
    if (p.startsWith('max=') && num('max=') !== undefined) maxFiles = num('max=')!;
    else if (p.startsWith('inactive=') && sec('inactive=') !== undefined) inactiveMs = sec('inactive=')! * 1000;
    else if (p.startsWith('min_uses=') && num('min_uses=') !== undefined) minUses = num('min_uses=')!;
    else if (p.startsWith('valid=') && sec('valid=') !== undefined) validMs = sec('valid=')! * 1000;
    else if (p === 'off') off = true;
    else fail(`invalid "open_log_file_cache" parameter "${p}"`);
  }
  if (off) return null;
  if (maxFiles === 0) fail('"open_log_file_cache" must have "max" parameter');
  return { maxFiles, inactiveMs, minUses, validMs };
}

/**
 * The variable syntax of a `log_format` string, as
 * `ngx_http_log_compile_format` (and `ngx_stream_log_compile_format`) read
 * each argument: `$name` or `${name}`, a name of letters, digits and `_`.
 * @throws DirectiveFailure `invalid parameter "$…"` (the argument from the
 *   `$` on, up to a NUL byte as nginx prints it with %s), `the closing
 *   bracket in "NAME" variable is missing`
 */
export function checkLogFormatSyntax(args: readonly string[]): void {
  for (const arg of args) {
    for (let i = arg.indexOf('$'); i !== -1; i = arg.indexOf('$', i)) {
      const invalid = (): never => fail(`invalid parameter "${cString(arg.slice(i))}"`);
      let j = i + 1;
      if (j === arg.length) invalid();
      let bracket = arg[j] === '{';
      if (bracket && ++j === arg.length) invalid();
      const start = j;
      let end = j;
      for (; j < arg.length; j++) {
        const ch = arg[j]!;
        if (ch === '}' && bracket) {
          end = j++;
          bracket = false;
          break;
        }
        if (!/[A-Za-z0-9_]/.test(ch)) break;
        end = j + 1;
      }
      if (bracket) fail(`the closing bracket in "${arg.slice(start, j)}" variable is missing`);
      if (end === start) invalid();
      i = j;
    }
  }
}

export const logDirectives: readonly DirectiveSpec[] = [
  {
    name: 'log_format', module: LOG, contexts: ['http'], args: ['2MORE'], effect: 'runtime',
    set: (d, cx) => {
      const name = d.args[0]!;
      // nginx's main conf starts with `combined` (ngx_http_log_create_main_conf)
      if (name === 'combined' || cx.scope.logFormats.has(name)) fail(`duplicate "log_format" name "${name}"`);
      let parts = d.args.slice(1);
      let escape: 'default' | 'json' | 'none' = 'default';
      if (parts[0]!.startsWith('escape=')) {
        const e = parts[0]!.slice(7);
        if (e !== 'default' && e !== 'json' && e !== 'none') fail(`unknown log format escaping "${e}"`);
        escape = e;
        parts = parts.slice(1);
        if (parts.length === 0) fail('invalid number of arguments in "log_format" directive');
      }
      checkLogFormatSyntax(parts);
      const text = parts.join('');
      for (const v of text.matchAll(/\$\{?([A-Za-z0-9_]+)\}?/g)) cx.scope.variables.reference(v[1]!, d.loc);
      cx.scope.logFormats.set(name, { name, escape, text, loc: d.loc });
    },
  },
  {
    name: 'access_log', module: LOG, contexts: ['http', 'server', 'location', 'lif', 'limit_except'], args: ['1MORE'],
    effect: 'runtime',
    set: (d, cx) => {
      const path = d.args[0]!;
      if (path === 'off') {
        if (d.args.length > 1) fail(`invalid parameter "${d.args[1]}"`);
        cx.level.append(accessLogs, { off: true }, d.loc);
        return;
      }
      if (path.startsWith('syslog:')) fail('syslog is not supported by jinx');
      const format = d.args[1] ?? 'combined';
      if (format !== 'combined' && !cx.scope.logFormats.has(format)) fail(`unknown log format "${format}"`);
      let bufferBytes: number | undefined;
      let flushMs: number | undefined;
      let gzipLevel = 0;
      let condition: ValueSource | undefined;
      for (const p of d.args.slice(2)) {
        if (p.startsWith('buffer=')) {
          bufferBytes = parseSize(p.slice(7));
          if (!bufferBytes) fail(`invalid buffer size "${p.slice(7)}"`);
        } else if (p.startsWith('flush=')) {
          flushMs = parseMsec(p.slice(6));
          if (!flushMs) fail(`invalid flush time "${p.slice(6)}"`);
        } else if (p.startsWith('if=')) condition = cx.scope.variables.value(p.slice(3), d.loc);
        else if (p === 'gzip' || p.startsWith('gzip=')) {
          // a buffer of 64k unless one was given before (ngx_http_log_set_log)
          bufferBytes ??= 64 * 1024;
          gzipLevel = p === 'gzip' ? 1 : /^\d+$/.test(p.slice(5)) ? Number(p.slice(5)) : 0;
          if (gzipLevel < 1 || gzipLevel > 9) fail(`invalid compression level "${p.slice(5)}"`);
        } else fail(`invalid parameter "${p}"`);
      }
      if (flushMs !== undefined && bufferBytes === undefined) fail(`no buffer is defined for access_log "${path}"`);
      const full = cx.scope.fullPath(path);
      const pathValue = path.includes('$') ? cx.scope.variables.value(full, d.loc) : undefined;
      if (pathValue && bufferBytes !== undefined) fail('buffered logs cannot have variables in name');
      cx.level.append(accessLogs, { off: false, path: full, pathValue, format, bufferBytes, flushMs, gzipLevel, condition, loc: d.loc }, d.loc);
    },
  },
  {
    name: 'open_log_file_cache', module: LOG, contexts: ['http', 'server', 'location'], args: ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'],
    effect: 'runtime', set: ruleSetter('open_log_file_cache', rule.custom(parseOpenLogFileCache, openLogFileCache)),
  },
];

/** An `access_log` target. */
export interface AccessLogTarget {
  /** The file; for a name with variables, its template. */
  readonly path: string;
  /** A name with variables: the file is opened for each line (`ngx_http_log_script_write`). */
  readonly pathValue: CompiledValue | undefined;
  /** `open_log_file_cache` of the location, for names with variables (shared by the locations that inherit it). */
  readonly openFileCache: OpenLogFileCacheDef | undefined;
  /** `gzip[=LEVEL]`: each buffer is written as one gzip member of this level; 0: plain. */
  readonly gzipLevel: number;
  readonly format: CompiledLogFormat;
  readonly condition: CompiledValue | undefined;
  /** `buffer=SIZE`: lines are written once this many bytes are pending (0: at once). */
  readonly bufferBytes: number;
  /** `flush=TIME`: pending lines are written at least this often (0: no timer). */
  readonly flushMs: number;
}

/** The compiled formats of one compile, by name, and every access-log target made. */
const LOGS = Symbol('access logs');

function logsOf(cx: CompileContext): { formats: Map<string, CompiledLogFormat>; targets: AccessLogTarget[] } {
  return cx.memo(LOGS, () => ({ formats: new Map<string, CompiledLogFormat>(), targets: [] }));
}

/** Compiles `combined` and every `log_format` (`ngx_http_log_compile_format`), once the variables are known. */
export function compileLogFormats(cx: CompileContext): void {
  const vars = cx.scope.variables;
  const { formats } = logsOf(cx);
  formats.set('combined', compileLogFormat('combined', COMBINED_FORMAT, 'default', vars));
  for (const f of cx.scope.logFormats.values()) formats.set(f.name, compileLogFormat(f.name, f.text, f.escape, vars));
}

/** The access logs of a level (`ngx_http_log_merge_loc_conf`): `logs/access.log` in `combined` when none is set, none with `off`. */
export function accessLogsConf(cx: CompileContext, c: ConfChain): AccessLogTarget[] {
  const entries = c.list(accessLogs);
  if (entries.some((e) => e.off)) return [];
  const { formats, targets } = logsOf(cx);
  const vars = cx.scope.variables;
  const list = entries.length > 0
    ? entries.flatMap((e) => (e.off ? [] : [{
        path: e.path, pathValue: e.pathValue && vars.bind(e.pathValue), openFileCache: c.get(openLogFileCache) ?? undefined,
        gzipLevel: e.gzipLevel, format: formats.get(e.format)!, condition: e.condition && vars.bind(e.condition),
        bufferBytes: e.bufferBytes ?? 0, flushMs: e.flushMs ?? (e.bufferBytes ? 1000 : 0),
      }]))
    : [{
        path: cx.scope.fullPath('logs/access.log'), pathValue: undefined, openFileCache: undefined, gzipLevel: 0,
        format: formats.get('combined')!, condition: undefined, bufferBytes: 0, flushMs: 0,
      }];
  targets.push(...list);
  return list;
}

/** Every access-log target the compile made, in the order made, to open at start. */
export function accessLogTargets(cx: CompileContext): AccessLogTarget[] {
  return logsOf(cx).targets;
}
