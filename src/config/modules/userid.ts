/**
 * The userid filter (`src/http/modules/ngx_http_userid_filter_module.c`):
 * a cookie that identifies the client, read from the request into
 * `$uid_got` and, with `userid on|v1`, set in the response when the client
 * has none (the filter itself is `src/runtime/filters/userid.ts`).
 *
 * The identifier is four 32-bit words, printed in `$uid_got`/`$uid_set` as
 * `NAME=` and 32 upper-case hex digits (each word in the host's order, as
 * nginx's `%08XD` prints it), and sent as their 16 bytes in base64 (nginx's
 * alphabet, `==` padding, the first `=` replaced by `userid_mark`). `v1`
 * stores the words in host order: service (0 by default), time, the
 * worker's start value, a sequence from 1 by 0x100; `on` in network order:
 * service (by default the local IPv4 address as it is in memory, the last 4
 * bytes of an IPv6 one, 0 on a unix socket), time, start value, a sequence
 * from 0x03030302 by 0x100.
 *
 * A client's cookie is read once per request, and again after an internal
 * redirect (`ngx_http_userid_get_uid`; `$uid_got` and `$uid_set` keep the
 * value they first had, as nginx's cached variables do): its first 22
 * characters are decoded (a mark or a garbage trail after them
 * is allowed); one shorter than 22 characters is logged at error as `client
 * sent too short userid cookie "…"`, one that does not decode as `client sent
 * invalid userid cookie "…"` (quoting the whole `Cookie` header). A client
 * with a cookie gets it again only when `userid_mark` is set and the cookie
 * lacks the mark (its own 22 characters, then the mark and `=`), or a new one
 * when `$uid_reset` is neither empty nor `0` (`log`: also logged at notice,
 * `userid cookie "NAME=HEX" was reset`).
 */
import { endianness } from 'node:os';
import ipaddr from 'ipaddr.js';
import { cString } from '../../c-string.js';
import { HTTP_SRV_LOC } from '../flags.js';
import type { RequestView, UseridConf } from '../request-view.js';
import {
  DirectiveFailure, enumSetter, fail, parseNumber, parseTime, slot, strSetter, type ConfChain, type DirectiveSpec,
} from '../spec.js';
import type { VariableDef, VariableRegistry } from '../variables.js';

const MODULE = 'ngx_http_userid_filter_module';

/** `NGX_HTTP_USERID_MAX_EXPIRES`: `userid_expires max`, 31 Dec 2037 23:55:55 GMT. */
export const USERID_MAX_EXPIRES = 2145916555;

/** The `; expires=` of `userid_expires max`, as nginx writes it whatever the time. */
export const MAX_EXPIRES_TEXT = '; expires=Thu, 31-Dec-37 23:55:55 GMT';

const enable = slot<UseridConf['enable']>('userid', 'off');
const service = slot<number | undefined>('userid_service', undefined);
const name = slot('userid_name', 'uid');
const domain = slot<string | undefined>('userid_domain', undefined);
const path = slot<string | undefined>('userid_path', undefined);
const expires = slot('userid_expires', 0);
const p3p = slot('userid_p3p', '');
const mark = slot('userid_mark', '');
/** `userid_flags` as nginx's bits (`NGX_HTTP_USERID_COOKIE_*`); 0 when none was given. */
const flags = slot('userid_flags', 0);

/** `ngx_http_userid_flags`: each value's bits; the `samesite=` ones share `SAMESITE`, so only the first of them counts. */
const FLAG_BITS: Readonly<Record<string, number>> = {
  off: 0x02, secure: 0x04, httponly: 0x08, 'samesite=strict': 0x10 | 0x20, 'samesite=lax': 0x10 | 0x40, 'samesite=none': 0x10 | 0x80,
};

/** The cookie attribute of each flag bit, in the order `ngx_http_userid_set_uid` writes them. */
const FLAG_TEXTS: readonly (readonly [number, string])[] = [
  [0x04, '; secure'], [0x08, '; httponly'], [0x20, '; samesite=strict'], [0x40, '; samesite=lax'], [0x80, '; samesite=none'],
];

export const useridDirectives: readonly DirectiveSpec[] = [
  { name: 'userid', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: enumSetter(enable, ['off', 'log', 'v1', 'on']) },
  {
    // ngx_conf_set_num_slot
    name: 'userid_service', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(service)) throw new DirectiveFailure('is duplicate');
      const v = parseNumber(d.args[0]!);
      if (v === undefined) throw new DirectiveFailure('invalid number');
      cx.level.set(service, v, d.loc);
    },
  },
  { name: 'userid_name', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: strSetter(name) },
  { name: 'userid_domain', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: strSetter(domain) },
  { name: 'userid_path', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: strSetter(path) },
  {
    // ngx_http_userid_expires
    name: 'userid_expires', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(expires)) throw new DirectiveFailure('is duplicate');
      const text = d.args[0]!;
      const sec = text === 'max' ? USERID_MAX_EXPIRES : text === 'off' ? 0 : parseTime(text, true);
      if (sec === undefined) throw new DirectiveFailure('invalid value');
      cx.level.set(expires, sec, d.loc);
    },
  },
  {
    // ngx_conf_set_bitmask_slot with ngx_http_userid_flags: a later directive at the level adds to an earlier one
    name: 'userid_flags', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1', 'TAKE2', 'TAKE3'], effect: 'runtime',
    set: (d, cx) => {
      let bits = cx.level.own(flags)?.value ?? 0;
      for (const arg of d.args) {
        const bit = FLAG_BITS[arg.toLowerCase()];
        if (bit === undefined) fail(`invalid value "${cString(arg)}"`);
        if (bits & bit) cx.warn(`duplicate value "${cString(arg)}"`, 'duplicate-value');
        else bits |= bit;
      }
      cx.level.replace(flags, bits, d.loc);
    },
  },
  { name: 'userid_p3p', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime', set: strSetter(p3p) },
  {
    // ngx_http_userid_mark
    name: 'userid_mark', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(mark)) throw new DirectiveFailure('is duplicate');
      const text = d.args[0]!;
      if (text !== 'off' && !/^[0-9A-Za-z=]$/.test(text)) throw new DirectiveFailure('value must be "off" or a single letter, digit or "="');
      cx.level.set(mark, text === 'off' ? '' : text, d.loc);
    },
  },
];

/**
 * The userid settings of a level (`ngx_http_userid_merge_conf`): `none`
 * for `userid_domain` and `userid_p3p` is none, the path is `/` unless
 * told otherwise; `vars` gives the `$uid_reset` reader.
 */
export function useridConf(c: ConfChain, vars: VariableRegistry): UseridConf {
  const d = c.get(domain);
  const bits = c.get(flags);
  let attributes = (d === undefined || d === 'none' ? '' : `; domain=${d}`) + `; path=${c.get(path) ?? '/'}`;
  for (const [bit, text] of FLAG_TEXTS) if (bits & bit) attributes += text;
  const p = c.get(p3p);
  return {
    enable: c.get(enable),
    service: c.get(service),
    name: c.get(name),
    expiresSec: c.get(expires),
    mark: c.get(mark),
    attributes,
    p3p: p === 'none' ? '' : p,
    reset: vars.getter('uid_reset') ?? (() => ''),
  };
}

// ---------------------------------------------------------------------------
// The identifiers (ngx_http_userid_get_uid, ngx_http_userid_create_uid).

/** The module's context of a main request (`ngx_http_userid_ctx_t`): the cookie read and the identifier to set. */
interface UseridCtx {
  /** The 16 bytes the client's cookie decoded to, zero without one. */
  readonly got: Buffer;
  /** The identifier to set, once made. */
  set: Buffer | undefined;
  /** The cookie's value as sent (up to its `;`), '' without one. */
  readonly cookie: string;
  /** `$uid_reset` asked for a new identifier. */
  reset: boolean;
}

/** The module's key in a request's `moduleCtx`. */
const CTX = Symbol('userid');

/**
 * The worker process's counters (the module's statics): `start_value`,
 * made at the first identifier the process sets (nginx makes it as its
 * worker starts) from the microseconds and the pid, and the two sequences.
 */
const worker = { start: undefined as number | undefined, v1: 1, v2: 0x03030302 };

/** `ngx_http_userid_init_worker`: the most significant microsecond part that fits 16 bits, then the pid. */
function startValue(): number {
  if (worker.start === undefined) {
    const usec = Math.floor((performance.timeOrigin + performance.now()) * 1000) % 1_000_000;
    worker.start = ((Math.floor(usec / 20) << 16) | process.pid) >>> 0;
  }
  return worker.start;
}

const HOST_LE = endianness() === 'LE';

/** Writes a 32-bit word as a C `uint32_t` holds it on this host. */
function writeHost(b: Buffer, word: number, at: number): void {
  if (HOST_LE) b.writeUInt32LE(word >>> 0, at);
  else b.writeUInt32BE(word >>> 0, at);
}

/** `%08XD%08XD%08XD%08XD` of the four words (`ngx_http_userid_variable`). */
function hex(uid: Buffer): string {
  let out = '';
  for (let at = 0; at < 16; at += 4) out += (HOST_LE ? uid.readUInt32LE(at) : uid.readUInt32BE(at)).toString(16).toUpperCase().padStart(8, '0');
  return out;
}

/** Whether an identifier is there: nginx tests its fourth word. */
const present = (uid: Buffer | undefined): uid is Buffer => uid !== undefined && uid.readUInt32LE(12) !== 0;

/** The main request (nginx's `r->main`). */
function mainOf(r: RequestView): RequestView {
  let m = r;
  while (m.parent) m = m.parent;
  return m;
}

/**
 * `ngx_http_parse_multi_header_lines`: the value of cookie `cookieName`
 * (compared in any case) in the `Cookie` header lines, and the whole line
 * it is in (HTTP/2's cookie fields come joined in one, as nginx joins them).
 */
function findCookie(r: RequestView, cookieName: string): { readonly value: string; readonly line: string } | undefined {
  const raw = r.rawHeaders;
  const wanted = cookieName.toLowerCase();
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.length !== 6 || raw[i]!.toLowerCase() !== 'cookie') continue;
    const line = raw[i + 1]!;
    if (cookieName.length > line.length) continue;
    let p = 0;
    while (p < line.length) {
      if (line.slice(p, p + wanted.length).toLowerCase() === wanted) {
        let q = p + wanted.length;
        while (q < line.length && line[q] === ' ') q++;
        if (q < line.length && line[q] === '=') {
          q++;
          while (q < line.length && line[q] === ' ') q++;
          const end = line.indexOf(';', q);
          return { value: line.slice(q, end === -1 ? line.length : end), line };
        }
        p = q;
      }
      while (p < line.length) {
        const ch = line[p++];
        if (ch === ';' || ch === ',') break;
      }
      while (p < line.length && line[p] === ' ') p++;
    }
  }
  return undefined;
}

/**
 * `ngx_decode_base64` of the cookie's first 22 characters: the alphabet up to
 * the first `=`, not one character past a whole group; undefined when invalid.
 */
function decodeUid(text: string): Buffer | undefined {
  const src = text.slice(0, 22);
  const eq = src.indexOf('=');
  const body = eq === -1 ? src : src.slice(0, eq);
  if (!/^[A-Za-z0-9+/]*$/.test(body) || body.length % 4 === 1) return undefined;
  const uid = Buffer.alloc(16);
  Buffer.from(body, 'base64').copy(uid);
  return uid;
}

/**
 * `ngx_http_userid_get_uid`: the request's context, reading the client's
 * cookie the first time (again after an internal redirect, as in nginx).
 */
function contextOf(r: RequestView, conf: UseridConf): UseridCtx {
  const known = r.moduleCtx.get(CTX) as UseridCtx | undefined;
  if (known) return known;
  const found = findCookie(r, conf.name);
  let got: Buffer | undefined;
  if (found && found.value.length < 22) r.logError('error', `client sent too short userid cookie "${found.line}"`);
  else if (found) {
    got = decodeUid(found.value);
    if (!got) r.logError('error', `client sent invalid userid cookie "${found.line}"`);
  }
  const ctx: UseridCtx = { got: got ?? Buffer.alloc(16), set: undefined, cookie: found?.value ?? '', reset: false };
  r.moduleCtx.set(CTX, ctx);
  return ctx;
}

/** The service word of `userid on` without `userid_service`: the local address's last 4 bytes, 0 on a unix socket. */
function localAddressBytes(r: RequestView): Buffer {
  const addr = r.conn.localAddr;
  if (!ipaddr.isValid(addr)) return Buffer.alloc(4);
  return Buffer.from(ipaddr.parse(addr).toByteArray().slice(-4));
}

/** `ngx_http_userid_create_uid`: makes the identifier to set, if the request is to get one. */
function createUid(r: RequestView, ctx: UseridCtx, conf: UseridConf): void {
  if (present(ctx.set)) return;
  if (present(ctx.got)) {
    const reset = conf.reset(r) ?? '';
    if (reset === '' || reset === '0') {
      if (conf.mark === '' || (ctx.cookie.length > 23 && ctx.cookie[22] === conf.mark && ctx.cookie[23] === '=')) return;
      ctx.set = ctx.got;
      return;
    }
    ctx.reset = true;
    if (reset === 'log') r.logError('notice', `userid cookie "${conf.name}=${hex(ctx.got)}" was reset`);
  }
  const uid = Buffer.alloc(16);
  const nowSec = Math.floor(Date.now() / 1000);
  // a service past 32 bits keeps its low ones, as a uint32_t does
  const serviceWord = conf.service === undefined ? undefined : Number(BigInt(conf.service) & 0xffff_ffffn);
  if (conf.enable === 'v1') {
    writeHost(uid, serviceWord ?? 0, 0);
    writeHost(uid, nowSec, 4);
    writeHost(uid, startValue(), 8);
    writeHost(uid, worker.v1, 12);
    worker.v1 = (worker.v1 + 0x100) >>> 0;
  } else {
    if (serviceWord === undefined) localAddressBytes(r).copy(uid, 0);
    else uid.writeUInt32BE(serviceWord, 0);
    uid.writeUInt32BE(nowSec >>> 0, 4);
    uid.writeUInt32BE(startValue(), 8);
    uid.writeUInt32BE(worker.v2, 12);
    worker.v2 = (worker.v2 + 0x100) >>> 0;
    if (worker.v2 < 0x03030302) worker.v2 = 0x03030302;
  }
  ctx.set = uid;
}

const WEEK = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const pad2 = (n: number): string => String(n).padStart(2, '0');

/** `ngx_http_cookie_time`: `Thu, 31-Dec-37 23:55:55 GMT`, the year in 4 digits past 2037. */
export function cookieTime(sec: number): string {
  const d = new Date(sec * 1000);
  const year = d.getUTCFullYear();
  return `${WEEK[d.getUTCDay()]}, ${pad2(d.getUTCDate())}-${MONTHS[d.getUTCMonth()]}-${year > 2037 ? year : pad2(year % 100)} `
    + `${pad2(d.getUTCHours())}:${pad2(d.getUTCMinutes())}:${pad2(d.getUTCSeconds())} GMT`;
}

/**
 * The headers the userid filter adds to a main request's response
 * (`ngx_http_userid_set_uid`): the `Set-Cookie` and, with `userid_p3p`, the
 * `P3P`; none when the client keeps its cookie. For `userid on|v1` only.
 */
export function useridHeaders(r: RequestView, conf: UseridConf): [string, string][] {
  const ctx = contextOf(r, conf);
  createUid(r, ctx, conf);
  if (!present(ctx.set)) return [];
  let cookie = `${conf.name}=`;
  if (!present(ctx.got) || ctx.reset) {
    const encoded = ctx.set.toString('base64');
    cookie += conf.mark === '' ? encoded : `${encoded.slice(0, 22)}${conf.mark}=`;
  } else {
    cookie += `${ctx.cookie.slice(0, 22)}${conf.mark}=`;
  }
  if (conf.expiresSec === USERID_MAX_EXPIRES) cookie += MAX_EXPIRES_TEXT;
  else if (conf.expiresSec !== 0) cookie += `; expires=${cookieTime(Math.floor(Date.now() / 1000) + conf.expiresSec)}`;
  cookie += conf.attributes;
  const out: [string, string][] = [['Set-Cookie', cookie]];
  if (conf.p3p !== '') out.push(['P3P', conf.p3p]);
  return out;
}

/**
 * The values `$uid_got` and `$uid_set` gave a request, found or not, by
 * main request: nginx keeps a cacheable variable's value in `r->variables`
 * for the whole request, past the internal redirects that empty the
 * module's context (whose cookie may then differ from an earlier `$uid_set`).
 */
const values = new WeakMap<RequestView, Map<string, string | undefined>>();

/** The value of variable `name` for the request of `main`, computed the first time it is read. */
function cached(main: RequestView, name: string, compute: () => string | undefined): string | undefined {
  let known = values.get(main);
  if (!known) values.set(main, (known = new Map()));
  if (known.has(name)) return known.get(name);
  const value = compute();
  known.set(name, value);
  return value;
}

export const useridVariables: readonly VariableDef[] = [
  {
    // ngx_http_userid_got_variable
    name: 'uid_got',
    get: (r) => {
      const main = mainOf(r);
      return cached(main, 'uid_got', () => {
        const conf = main.loc.userid;
        if (conf.enable === 'off') return undefined;
        const ctx = contextOf(main, conf);
        return present(ctx.got) ? `${conf.name}=${hex(ctx.got)}` : undefined;
      });
    },
  },
  {
    // ngx_http_userid_set_variable
    name: 'uid_set',
    get: (r) => {
      const main = mainOf(r);
      return cached(main, 'uid_set', () => {
        const conf = main.loc.userid;
        if (conf.enable === 'off' || conf.enable === 'log') return undefined;
        const ctx = contextOf(main, conf);
        createUid(main, ctx, conf);
        return present(ctx.set) ? `${conf.name}=${hex(ctx.set)}` : undefined;
      });
    },
  },
  // ngx_http_userid_reset_variable: empty unless `set` or `map` give it a value
  { name: 'uid_reset', changeable: true, get: () => '' },
];
