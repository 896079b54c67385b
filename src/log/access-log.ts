/**
 * The access log: `log_format` compiled once into literal and variable parts
 * (`ngx_http_log_compile_format` in `src/http/modules/ngx_http_log_module.c`),
 * rendered per request and written to a sonic-boom stream per file.
 */
import { closeSync, openSync } from 'node:fs';
import { SonicBoom, writeBytes } from './sonic.js';
import type { AccessLogTarget, CompiledLogFormat } from '../config/route-table.js';
import type { VariableRegistry } from '../config/variables.js';
import type { HttpRequestState } from '../runtime/request.js';

/**
 * nginx's default escaping of variable values in the access log: `"`, `\`
 * and bytes outside 0x20..0x7e become `\xHH` (`ngx_http_log_escape`).
 */
export function escapeDefault(value: string): string {
  if (/^[\x20-\x21\x23-\x5b\x5d-\x7e]*$/.test(value)) return value;
  let out = '';
  for (const byte of Buffer.from(value)) {
    out += byte < 0x20 || byte > 0x7e || byte === 0x22 || byte === 0x5c
      ? `\\x${byte.toString(16).toUpperCase().padStart(2, '0')}`
      : String.fromCharCode(byte);
  }
  return out;
}

/** `escape=json`: JSON string escaping without the quotes. */
export function escapeJson(value: string): string {
  return JSON.stringify(value).slice(1, -1);
}

/**
 * Compiles a format. Variables that are not found print `-` (nginx's
 * `ngx_http_log_variable`), except with `escape=json`/`none` where they
 * print nothing; an empty value prints nothing.
 */
export function compileLogFormat(
  name: string, text: string, escape: 'default' | 'json' | 'none', vars: VariableRegistry,
): CompiledLogFormat {
  const parts: (string | ((r: HttpRequestState) => string))[] = [];
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

/** The open access-log files of a running configuration. */
export class AccessLogFiles {
  private readonly streams = new Map<string, SonicBoom>();

  private stream(t: AccessLogTarget): SonicBoom {
    let s = this.streams.get(t.path);
    if (!s) {
      s = new SonicBoom({ dest: t.path, append: true, mkdir: false, minLength: t.bufferBytes, periodicFlush: t.flushMs, contentMode: 'buffer' });
      this.streams.set(t.path, s);
    }
    return s;
  }

  /**
   * Opens every target's file now (as nginx does at start), so that a bad
   * path fails the start, not the first request.
   * @throws Error with the system error of the first file that cannot be opened
   */
  open(targets: readonly AccessLogTarget[]): void {
    for (const t of targets) {
      touchForAppend(t.path);
      this.stream(t);
    }
  }

  /** Writes the request's line to each target whose `if=` condition holds. */
  write(targets: readonly AccessLogTarget[], r: HttpRequestState): void {
    for (const t of targets) {
      if (t.condition) {
        const c = t.condition.evaluate(r);
        if (c === '' || c === '0') continue;
      }
      writeBytes(this.stream(t), t.format.render(r) + '\n');
    }
  }

  reopen(): void {
    for (const s of this.streams.values()) s.reopen();
  }

  /**
   * Closes every file once the lines written so far are in it, in order:
   * `end()` lets a write in flight finish, then writes the rest (a
   * `flushSync()` during a write would put the lines queued behind it first).
   */
  close(): void {
    for (const s of this.streams.values()) s.end();
    this.streams.clear();
  }
}

/** Opens and closes a file for appending, so that a missing directory is reported at start. */
function touchForAppend(path: string): void {
  closeSync(openSync(path, 'a'));
}
