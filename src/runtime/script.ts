/**
 * Runs a level's rewrite directives, as nginx's script engine runs the codes
 * of `ngx_http_rewrite_module` (`ngx_http_script_*_code` in
 * `src/http/ngx_http_script.c`).
 */
import { statSync } from 'node:fs';
import type { ScriptOp } from '../config/modules/rewrite.js';
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

function evaluateCondition(op: ScriptOp & { op: 'if' }, r: HttpRequestState): boolean {
  const c = op.condition;
  switch (c.kind) {
    case 'var':
      return truthy(c.get(r));
    case 'equal':
      return (c.get(r) === c.value.evaluate(r)) !== c.negate;
    case 'regex': {
      const m = c.regex.exec(c.get(r));
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

/**
 * Runs `ops` against the request. An `if` that matches inside a location
 * switches the request to the `if` block's settings. `onError` logs what a
 * variable's set handler refuses (`invalid $limit_rate "…"`).
 */
export function runScript(ops: readonly ScriptOp[], r: HttpRequestState, onError?: (message: string) => void): ScriptOutcome {
  let uriChanged = false;
  const run = (list: readonly ScriptOp[]): ScriptOutcome | undefined => {
    for (const op of list) {
      switch (op.op) {
        case 'set': {
          const value = op.value.evaluate(r);
          if (!op.handler) {
            r.vars[op.index] = value;
            break;
          }
          const error = op.handler(r, value);
          if (error) onError?.(error);
          break;
        }
        case 'break':
          // ngx_http_script_break_code: after a rewrite changed the URI, proxy_pass no longer replaces the location prefix
          if (uriChanged) r.validLocation = false;
          return { kind: 'break' };
        case 'return':
          return { kind: 'return', code: op.code, text: op.text?.evaluate(r) };
        case 'if':
          if (evaluateCondition(op, r)) {
            if (op.conf) r.loc = op.conf;
            const inner = run(op.ops);
            if (inner) return inner;
          }
          break;
        case 'rewrite': {
          const m = op.regex.exec(r.uri);
          if (!m) {
            r.captures = null;
            break;
          }
          r.captures = m;
          for (const n of op.namedCaptures) r.vars[n.index] = m.groups?.[n.name] ?? '';
          const value = op.replacement.evaluate(r);
          if (op.redirectCode) {
            const location = op.addArgs && r.args ? `${value}${value.includes('?') ? '&' : '?'}${r.args}` : value;
            return { kind: 'redirect', code: op.redirectCode, location };
          }
          const q = value.indexOf('?');
          if (q !== -1) {
            r.args = op.addArgs && r.args ? `${value.slice(q + 1)}&${r.args}` : value.slice(q + 1);
            r.uri = value.slice(0, q);
          } else {
            if (!op.addArgs) r.args = '';
            r.uri = value;
          }
          r.internal = true;
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
