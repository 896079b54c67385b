/**
 * Runs a level's rewrite directives, as nginx's script engine runs the codes
 * of `ngx_http_rewrite_module` (`ngx_http_script_*_code` in
 * `src/http/ngx_http_script.c`).
 */
import { statSync } from 'node:fs';
import type { ReplacementPiece } from '../config/modules/rewrite.js';
import type { ScriptOp } from '../config/route-table.js';
import { escapeArgs } from './uri.js';
import type { HttpRequestState } from './request.js';

/** How running a script ended. */
export type ScriptOutcome =
  /** All directives ran; `uriChanged` when a `rewrite` without flag changed the URI (find the location again). */
  | { readonly kind: 'done'; readonly uriChanged: boolean }
  /** `rewrite … last`: find the location again now. */
  | { readonly kind: 'last' }
  /** `break` or `rewrite … break`: stay in this location, run nothing more. */
  | { readonly kind: 'break' }
  /** `return CODE [TEXT]` or a redirecting `rewrite`. */
  | { readonly kind: 'return'; readonly code: number; readonly text: string | undefined }
  | { readonly kind: 'redirect'; readonly code: number; readonly location: string };

/**
 * Whether the request's URI came with a `%` escape or a `+` in its path
 * (nginx's `r->quoted_uri`, `r->plus_in_uri`, set by the request-line
 * parser): regex captures are then escaped where they go into arguments.
 */
function uriWasEscaped(r: HttpRequestState): boolean {
  const target = r.requestUri;
  const q = target.indexOf('?');
  const path = q === -1 ? target : target.slice(0, q);
  return path.includes('%') || path.includes('+');
}

/**
 * Evaluates a rewrite's replacement pieces; with `escapeCaptures`, regex
 * captures are escaped with `NGX_ESCAPE_ARGS` (`ngx_http_script_copy_capture_code`).
 */
function evaluatePieces(pieces: readonly ReplacementPiece[], r: HttpRequestState, escapeCaptures: boolean): string {
  let out = '';
  for (const p of pieces) {
    if (typeof p === 'string') out += p;
    else if (typeof p === 'function') out += p(r) ?? '';
    else {
      const c = r.captures?.[p.capture] ?? '';
      out += escapeCaptures ? escapeArgs(c) : c;
    }
  }
  return out;
}

const hexValue = (c: number): number => (c >= 0x30 && c <= 0x39 ? c - 0x30 : ((c | 0x20) >= 0x61 && (c | 0x20) <= 0x66 ? (c | 0x20) - 0x61 + 10 : -1));

/**
 * `ngx_unescape_uri` with `NGX_UNESCAPE_REDIRECT`, as a redirecting
 * `rewrite` applies it to its value: up to the first `?` (or `%3F`), a
 * `%XX` of a printable byte above `%` is decoded, other escapes are kept;
 * a malformed escape loses its `%` (and what nginx's state machine drops).
 */
export function unescapeRedirect(value: string): string {
  if (!value.includes('%')) return value;
  let out = '';
  let state: 'usual' | 'quoted' | 'second' = 'usual';
  let decoded = 0;
  for (let i = 0; i < value.length; i++) {
    const ch = value.charCodeAt(i);
    if (state === 'usual') {
      if (ch === 0x3f) return out + value.slice(i);
      if (ch === 0x25) state = 'quoted';
      else out += value[i];
      continue;
    }
    const h = hexValue(ch);
    if (state === 'quoted') {
      if (h === -1) {
        state = 'usual';
        out += value[i];
      } else {
        decoded = h;
        state = 'second';
      }
      continue;
    }
    state = 'usual';
    if (h === -1) continue;
    const byte = decoded * 16 + h;
    // only an escape whose second digit is a letter can stand for '?' (0x3F)
    if (byte === 0x3f && ch > 0x39) return out + '?' + value.slice(i + 1);
    out += byte > 0x25 && byte < 0x7f ? String.fromCharCode(byte) : value.slice(i - 2, i + 1);
  }
  return out;
}

/** Whether a value counts as true in `if ($var)`: not empty and not "0". */
const truthy = (v: string): boolean => v !== '' && v !== '0';

function fileTest(path: string, test: 'f' | 'd' | 'e' | 'x'): boolean {
  try {
    const st = statSync(Buffer.from(path, 'latin1'));
    if (test === 'f') return st.isFile();
    if (test === 'd') return st.isDirectory();
    if (test === 'e') return true;
    return (st.mode & 0o111) !== 0;
  } catch {
    return false;
  }
}

function evaluateCondition(op: ScriptOp & { op: 'if' }, r: HttpRequestState, log: ScriptLog | undefined): boolean {
  const c = op.condition;
  switch (c.kind) {
    case 'var':
      return truthy(c.get(r));
    case 'equal':
      return (c.get(r) === c.value.evaluate(r)) !== c.negate;
    case 'regex': {
      const subject = c.get(r);
      const m = c.regex.exec(subject);
      log?.notice?.(`"${c.source}" ${m ? 'matches' : 'does not match'} "${subject}"`);
      if (m) {
        r.captures = m;
        for (const n of c.namedCaptures) r.vars[n.index] = m.groups?.[n.name] ?? '';
      } else r.captures = null;
      return (m !== null) !== c.negate;
    }
    case 'file':
      return fileTest(c.path.evaluate(r), c.test) !== c.negate;
  }
}

/** The outcome of an empty script (most servers and locations have none): made once. */
const NOTHING_RUN: ScriptOutcome = { kind: 'done', uriChanged: false };

/**
 * Told of each directive a script ran, once it ran: for `if` and `rewrite`,
 * whether the condition or the regex matched (`jinx explain` shows the steps).
 */
export type ScriptStepObserver = (op: ScriptOp, matched: boolean) => void;

/**
 * Where a script's messages go: `error` logs what a variable's set handler
 * refuses (`invalid $limit_rate "…"`) and a rewrite to an empty URI;
 * `notice`, set when the level whose script runs has `rewrite_log on`,
 * traces each regex of `rewrite` and `if` (`"REGEX" matches "SUBJECT"`,
 * `does not match`) and what a rewrite made (`rewritten data: "URI", args:
 * "ARGS"`, `rewritten redirect: "URL"`), as `ngx_http_script_regex_start_code`
 * and `…_end_code` log them with the rewrite handler's `e->log`.
 */
export interface ScriptLog {
  readonly error: (message: string) => void;
  readonly notice: ((message: string) => void) | undefined;
}

/**
 * Runs `ops` against the request. An `if` that matches inside a location
 * switches the request to the `if` block's settings. `log` takes the
 * script's messages; `onStep` is told of each directive run.
 */
export function runScript(
  ops: readonly ScriptOp[], r: HttpRequestState, log?: ScriptLog, onStep?: ScriptStepObserver,
): ScriptOutcome {
  if (ops.length === 0) return NOTHING_RUN;
  let uriChanged = false;
  const run = (list: readonly ScriptOp[]): ScriptOutcome | undefined => {
    for (const op of list) {
      switch (op.op) {
        case 'set': {
          const value = op.value.evaluate(r);
          if (!op.handler) {
            r.vars[op.index] = value;
            onStep?.(op, true);
            break;
          }
          const error = op.handler(r, value);
          if (error) log?.error(error);
          onStep?.(op, true);
          break;
        }
        case 'break':
          onStep?.(op, true);
          // ngx_http_script_break_code: after a rewrite changed the URI, proxy_pass no longer replaces the location prefix
          if (uriChanged) r.validLocation = false;
          return { kind: 'break' };
        case 'return':
          onStep?.(op, true);
          // ngx_http_send_response sets the status before it evaluates the text: `$status` in it is the return's code
          // (an error_page's own code first, as ngx_http_variable_status takes err_status)
          if (op.text) r.status = r.errStatus || op.code;
          return { kind: 'return', code: op.code, text: op.text?.evaluate(r) };
        case 'if': {
          const matched = evaluateCondition(op, r, log);
          onStep?.(op, matched);
          if (matched) {
            if (op.conf) r.loc = op.conf;
            const inner = run(op.ops);
            if (inner) return inner;
          }
          break;
        }
        case 'rewrite': {
          const m = op.regex.exec(r.uri);
          log?.notice?.(`"${op.source}" ${m ? 'matches' : 'does not match'} "${r.uri}"`);
          if (!m) {
            r.captures = null;
            onStep?.(op, false);
            break;
          }
          r.captures = m;
          for (const n of op.namedCaptures) r.vars[n.index] = m.groups?.[n.name] ?? '';
          const escape = uriWasEscaped(r);
          if (op.redirectCode) {
            // ngx_http_script_regex_end_code: the value unescaped for a Location, then the request's arguments
            let location = unescapeRedirect(evaluatePieces(op.replacement.uri, r, escape));
            if (op.addArgs && r.args) location += `${op.hasArgs ? '&' : '?'}${r.args}`;
            log?.notice?.(`rewritten redirect: "${location}"`);
            onStep?.(op, true);
            return { kind: 'redirect', code: op.redirectCode, location };
          }
          const uri = evaluatePieces(op.replacement.uri, r, false);
          if (op.replacement.args) {
            const args = evaluatePieces(op.replacement.args, r, escape);
            r.args = op.addArgs && r.args ? `${args}&${r.args}` : args;
          } else if (!op.addArgs) r.args = '';
          log?.notice?.(`rewritten data: "${uri}", args: "${r.args}"`);
          if (uri === '') {
            onStep?.(op, true);
            log?.error('the rewritten URI has a zero length');
            return { kind: 'return', code: 500, text: undefined };
          }
          r.uri = uri;
          r.internal = true;
          onStep?.(op, true);
          if (op.flag === 'last') return { kind: 'last' };
          if (op.flag === 'break') {
            r.validLocation = false;
            return { kind: 'break' };
          }
          uriChanged = true;
          break;
        }
      }
    }
    return undefined;
  };
  return run(ops) ?? { kind: 'done', uriChanged };
}
