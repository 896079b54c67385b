/**
 * The secure_link module (`src/http/modules/ngx_http_secure_link_module.c`):
 * `$secure_link` checks a link's MD5.
 *
 * - `secure_link VALUE` (`HASH[,EXPIRES]`, HASH the base64url MD5 of
 *   `secure_link_md5 VALUE`): `$secure_link` is `1` when the hash matches,
 *   `0` when it matches but EXPIRES (seconds since the epoch) has passed,
 *   empty otherwise; `$secure_link_expires` is EXPIRES once `$secure_link`
 *   has looked at it.
 * - `secure_link_secret WORD` (the old style, URIs `/PREFIX/HEX-MD5/LINK`
 *   with the MD5 of LINK followed by WORD): `$secure_link` is LINK, or empty.
 *
 * Merged as `ngx_http_secure_link_merge_conf` does: a level with its own
 * `secure_link_secret` takes neither of the others from above (nor may it
 * set them: `"secure_link_secret" cannot be mixed with …`), and a level with
 * neither `secure_link` nor `secure_link_md5` keeps the secret from above.
 */
import { createHash } from 'node:crypto';
import { HTTP_SRV_LOC } from '../flags.js';
import type { EvaluatedValue, RequestView, SecureLinkConf } from '../request-view.js';
import { fail } from '../failure.js';
import { DirectiveFailure, slot, type ConfChain, type DirectiveSpec, type LevelConf, type Slot } from '../spec.js';
import type { ValueSource, VariableDef, VariableRegistry } from '../variables.js';

const MODULE = 'ngx_http_secure_link_module';

const secureLinkValue = slot<ValueSource | undefined>('secure_link', undefined);
const secureLinkMd5 = slot<ValueSource | undefined>('secure_link_md5', undefined);
const secureLinkSecret = slot<string | undefined>('secure_link_secret', undefined);

/**
 * nginx's message when one level has `secure_link_secret` and one of the
 * others; nginx finds it as it merges the level (its line is then the end of
 * the `http` block), jinx at the second of the directives.
 */
const MIXED = '"secure_link_secret" cannot be mixed with "secure_link" and "secure_link_md5"';

/** A complex-value directive of the module: once per level, and not beside `secure_link_secret`. */
function valueDirective(name: string, s: Slot<ValueSource | undefined>): DirectiveSpec {
  return {
    name, module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(s)) throw new DirectiveFailure('is duplicate');
      if (cx.level.own(secureLinkSecret)) fail(MIXED);
      cx.level.set(s, cx.scope.variables.value(d.args[0]!, d.loc), d.loc);
    },
  };
}

export const secureLinkDirectives: readonly DirectiveSpec[] = [
  valueDirective('secure_link', secureLinkValue),
  valueDirective('secure_link_md5', secureLinkMd5),
  {
    name: 'secure_link_secret', module: MODULE, contexts: HTTP_SRV_LOC, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(secureLinkSecret)) throw new DirectiveFailure('is duplicate');
      if (cx.level.own(secureLinkValue) || cx.level.own(secureLinkMd5)) fail(MIXED);
      cx.level.set(secureLinkSecret, d.args[0]!, d.loc);
    },
  },
];

interface MergedSources {
  readonly value?: ValueSource;
  readonly md5?: ValueSource;
  readonly secret?: string;
}

/** `mergedSources` of each level, made once (each level's merge reads its parent's). */
const mergedByLevel = new WeakMap<LevelConf, MergedSources>();

/** `ngx_http_secure_link_merge_conf`: a level's own secret, or its value and md5 merged, or the secret above when neither is set. */
function mergedSources(c: ConfChain): MergedSources {
  const known = mergedByLevel.get(c.level);
  if (known) return known;
  const secret = c.level.own(secureLinkSecret)?.value;
  let merged: MergedSources;
  if (secret !== undefined) {
    merged = { secret };
  } else {
    const prev = c.parent ? mergedSources(c.parent) : {};
    const value = c.level.own(secureLinkValue)?.value ?? prev.value;
    const md5 = c.level.own(secureLinkMd5)?.value ?? prev.md5;
    merged = value === undefined && md5 === undefined ? { secret: prev.secret } : { value, md5 };
  }
  mergedByLevel.set(c.level, merged);
  return merged;
}

/** The secure_link settings of a level; undefined when it has none. */
export function secureLinkConf(c: ConfChain, vars: VariableRegistry): SecureLinkConf | undefined {
  const m = mergedSources(c);
  if (m.secret !== undefined) return { kind: 'secret', secret: m.secret };
  if (m.value === undefined && m.md5 === undefined) return undefined;
  return { kind: 'md5', value: m.value && vars.bind(m.value), md5: m.md5 && vars.bind(m.md5) };
}

/** `$secure_link_expires` of the requests whose `$secure_link` found one. */
const expiresOf = new WeakMap<RequestView, string>();

/** ngx_decode_base64url: the alphabet up to the first `=`, not one character past a whole group; undefined when invalid. */
function decodeBase64url(text: string): Buffer | undefined {
  const end = text.indexOf('=');
  const body = end === -1 ? text : text.slice(0, end);
  if (!/^[A-Za-z0-9_-]*$/.test(body) || body.length % 4 === 1) return undefined;
  return Buffer.from(body, 'base64url');
}

/** `$secure_link` with `secure_link` and `secure_link_md5` (`ngx_http_secure_link_variable`). */
function checkedLink(r: RequestView, value: EvaluatedValue | undefined, md5: EvaluatedValue | undefined): string | undefined {
  if (!value || !md5) return undefined;
  let hash = value.evaluate(r);
  let expiresSec = 0;
  const comma = hash.indexOf(',');
  if (comma !== -1) {
    const expires = hash.slice(comma + 1);
    hash = hash.slice(0, comma);
    // ngx_atotm: digits only
    expiresSec = /^\d+$/.test(expires) ? Number(expires) : -1;
    if (expiresSec <= 0) return undefined;
    expiresOf.set(r, expires);
  }
  if (hash.length > 24) return undefined;
  const decoded = decodeBase64url(hash);
  if (!decoded || decoded.length !== 16) return undefined;
  const expected = createHash('md5').update(Buffer.from(md5.evaluate(r), 'latin1')).digest();
  if (!decoded.equals(expected)) return undefined;
  return expiresSec !== 0 && expiresSec < Math.floor(Date.now() / 1000) ? '0' : '1';
}

/** `$secure_link` with `secure_link_secret` (`ngx_http_secure_link_old_variable`): the LINK of `/PREFIX/HEX-MD5/LINK`. */
function secretLink(r: RequestView, secret: string): string | undefined {
  const uri = r.requestUri;
  const start = uri.indexOf('/', 1) + 1;
  if (start === 0) return undefined;
  const end = uri.indexOf('/', start);
  if (end === -1 || end - start !== 32) return undefined;
  const link = uri.slice(end + 1);
  if (link === '') return undefined;
  const hash = createHash('md5').update(Buffer.from(link + secret, 'latin1')).digest('hex');
  return uri.slice(start, end).toLowerCase() === hash ? link : undefined;
}

export const secureLinkVariables: readonly VariableDef[] = [
  {
    name: 'secure_link',
    get: (r) => {
      const s = r.loc.secureLink;
      if (!s) return undefined;
      return s.kind === 'secret' ? secretLink(r, s.secret) : checkedLink(r, s.value, s.md5);
    },
  },
  { name: 'secure_link_expires', get: (r) => expiresOf.get(r) },
];
