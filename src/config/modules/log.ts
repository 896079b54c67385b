/**
 * The log module (`src/http/modules/ngx_http_log_module.c`):
 * `log_format NAME [escape=default|json|none] STRING…` and
 * `access_log PATH [FORMAT [buffer=SIZE] [gzip[=LEVEL]] [flush=TIME] [if=COND]] | off`.
 */
import type { SourceLoc } from '../../parser/ast.js';
import type { Directive } from '../../parser/ast.js';
import { fail, listSlot, noEffect, parseSize, parseTime, rule, type DirectiveSpec } from '../spec.js';
import type { ValueSource } from '../variables.js';

const LOG = 'ngx_http_log_module';

/** nginx's predefined `combined` format. */
export const COMBINED_FORMAT =
  '$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent"';

/** One `access_log` directive; `off` disables logging at its level. */
export type AccessLogDef =
  | { readonly off: true }
  | {
      readonly off: false;
      readonly path: string;
      readonly format: string;
      readonly bufferBytes: number | undefined;
      readonly flushMs: number | undefined;
      readonly condition: ValueSource | undefined;
      readonly loc: SourceLoc;
    };

export const accessLogs = listSlot<AccessLogDef>('access_log');

/**
 * `ngx_http_log_open_file_cache`: `off` or `max=N [inactive=TIME]
 * [min_uses=N] [valid=TIME]`; `invalid "open_log_file_cache" parameter "…"`,
 * `"open_log_file_cache" must have "max" parameter`.
 */
function parseOpenLogFileCache(d: Directive): string {
  let max = 0;
  let off = false;
  for (const p of d.args) {
    const num = (prefix: string): boolean => p.startsWith(prefix) && /^\d+$/.test(p.slice(prefix.length));
    const time = (prefix: string): boolean => p.startsWith(prefix) && parseTime(p.slice(prefix.length), true) !== undefined;
    if (num('max=')) max = Number(p.slice(4));
    else if (time('inactive=') || num('min_uses=') || time('valid=')) continue;
    else if (p === 'off') off = true;
    else fail(`invalid "open_log_file_cache" parameter "${p}"`);
  }
  if (!off && max === 0) fail('"open_log_file_cache" must have "max" parameter');
  return d.args.join(' ');
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
      let condition: ValueSource | undefined;
      for (const p of d.args.slice(2)) {
        if (p.startsWith('buffer=')) {
          bufferBytes = parseSize(p.slice(7));
          if (bufferBytes === undefined) fail(`invalid buffer size "${p.slice(7)}"`);
        } else if (p.startsWith('flush=')) {
          flushMs = parseTime(p.slice(6), false);
          if (flushMs === undefined) fail(`invalid flush time "${p.slice(6)}"`);
        } else if (p.startsWith('if=')) condition = cx.scope.variables.value(p.slice(3), d.loc);
        else if (p === 'gzip' || p.startsWith('gzip=')) fail('gzip compression of access logs is not supported by jinx');
        else fail(`invalid parameter "${p}"`);
      }
      if (path.includes('$')) fail('variables in the "access_log" path are not supported by jinx');
      const full = cx.scope.fullPath(path);
      cx.level.append(accessLogs, { off: false, path: full, format, bufferBytes, flushMs, condition, loc: d.loc }, d.loc);
    },
  },
  noEffect({
    name: 'open_log_file_cache', module: LOG, contexts: ['http', 'server', 'location'], args: ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4'],
    note: 'log files are kept open',
  }, rule.custom(parseOpenLogFileCache)),
];
