/**
 * `log_format` compiled once into literal and variable parts
 * (`ngx_http_log_compile_format` in `src/http/modules/ngx_http_log_module.c`),
 * with nginx's escaping of variable values; `log/access-log.ts` renders it per
 * request and writes the line.
 */
import type { RequestView } from './request-view.js';
import type { CompiledValue, ScriptView, VariableRegistry } from './variables.js';

/** A compiled `log_format` (of the http module, or `R` = `StreamView` of the stream module's). */
export interface CompiledLogFormat<R extends ScriptView = RequestView> {
  readonly name: string;
  readonly render: CompiledValue<R>['evaluate'];
}

/**
 * nginx's default escaping of variable values in the access log: `"`, `\`
 * and bytes outside 0x20..0x7e become `\xHH` (`ngx_http_log_escape`).
 * `value` is a byte string, one character per byte, as jinx reads requests
 * and configurations.
 */
export function escapeDefault(value: string): string {
  if (/^[\x20-\x21\x23-\x5b\x5d-\x7e]*$/.test(value)) return value;
  let out = '';
  for (const byte of Buffer.from(value, 'latin1')) {
    out += byte < 0x20 || byte > 0x7e || byte === 0x22 || byte === 0x5c
      ? `\\x${byte.toString(16).toUpperCase().padStart(2, '0')}`
      : String.fromCharCode(byte);
  }
  return out;
}

/**
 * `escape=json` (`ngx_escape_json`): `"` and `\\` escaped, control bytes as
 * `\\n`, `\\r`, `\\t`, `\\b`, `\\f` or `\\u00XX` (upper-case hex), other
 * bytes as they are.
 */
export function escapeJson(value: string): string {
  if (!/["\\\x00-\x1f]/.test(value)) return value;
  return value.replace(/["\\\x00-\x1f]/g, (ch) => JSON_ESCAPES[ch] ?? `\\u00${ch.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`);
}

const JSON_ESCAPES: Record<string, string> = { '"': '\\"', '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', '\b': '\\b', '\f': '\\f' };

/**
 * Compiles a format. Variables that are not found print `-` (nginx's
 * `ngx_http_log_variable`), except with `escape=json`/`none` where they
 * print nothing; an empty value prints nothing.
 */
export function compileLogFormat<R extends ScriptView = RequestView>(
  name: string, text: string, escape: 'default' | 'json' | 'none', vars: VariableRegistry<R>,
): CompiledLogFormat<R> {
  const parts: (string | ((r: R) => string))[] = [];
  const re = /\$(?:\{([A-Za-z0-9_]+)\}|([A-Za-z0-9_]+))/g;
  let last = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    if (m.index > last) parts.push(text.slice(last, m.index));
    const get = vars.getter(m[1] ?? m[2]!) ?? (() => undefined);
    const missing = escape === 'default' ? '-' : '';
    const esc = escape === 'default' ? escapeDefault : escape === 'json' ? escapeJson : (v: string) => v;
    parts.push((r) => {
      const v = get(r);
      return v === undefined ? missing : esc(v);
    });
    last = re.lastIndex;
  }
  if (last < text.length) parts.push(text.slice(last));
  return {
    name,
    render: (r) => {
      let out = '';
      for (const p of parts) out += typeof p === 'string' ? p : p(r);
      return out;
    },
  };
}
