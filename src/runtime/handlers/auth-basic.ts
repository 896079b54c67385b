/**
 * HTTP Basic authentication (`ngx_http_auth_basic_module.c`). The user file
 * is read for each request, as nginx does, and passwords are checked in the
 * formats nginx accepts that have a Node implementation: `$apr1$` and `$1$`
 * (apache-md5), `$5$`/`$6$` (unixcrypt), `$2a$`/`$2b$`/`$2y$` (bcryptjs),
 * `{SHA}`, `{SSHA}`, `{PLAIN}` (`ngx_crypt` in `src/core/ngx_crypt.c`, the
 * rest through the C library's crypt(3)). Other crypt(3) formats (DES,
 * yescrypt `$y$` …) answer 500 with an error-log line naming the user.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import aprMd5Module from 'apache-md5';
import bcrypt from 'bcryptjs';
import { verify as verifyUnixCrypt } from 'unixcrypt';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import type { Exchange } from '../exchange.js';
import type { AccessResult } from './access.js';
import { basicCredentials } from '../credentials.js';

/** apache-md5 is CommonJS: its default import is the function, which its types describe as a namespace. */
const aprMd5 = aprMd5Module as unknown as (password: string, salt: string) => string;

const same = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/** Whether `password` matches an htpasswd entry's hash; undefined when jinx cannot check that hash format. */
export function passwordMatches(password: string, hash: string): boolean | undefined {
  if (hash.startsWith('$apr1$') || hash.startsWith('$1$')) return same(aprMd5(password, hash), hash);
  if (hash.startsWith('$5$') || hash.startsWith('$6$')) return verifyUnixCrypt(password, hash);
  if (/^\$2[aby]\$/.test(hash)) return bcrypt.compareSync(password, hash.replace(/^\$2y\$/, '$2b$'));
  if (hash.startsWith('{SHA}')) return same(createHash('sha1').update(password).digest('base64'), hash.slice(5));
  if (hash.startsWith('{SSHA}')) {
    const raw = Buffer.from(hash.slice(6), 'base64');
    const digest = raw.subarray(0, 20);
    const salt = raw.subarray(20);
    const computed = createHash('sha1').update(password).update(salt).digest();
    return digest.length === 20 && timingSafeEqual(digest, computed);
  }
  if (hash.startsWith('{PLAIN}')) return same(password, hash.slice(7));
  return undefined;
}

/** The access check of `auth_basic` (realm `off` disables it). */
export async function checkAuthBasic(ex: Exchange): Promise<AccessResult> {
  const { r } = ex;
  const conf = r.loc.authBasic;
  if (!conf) return 'declined';
  const realm = conf.realm.evaluate(r);
  if (realm === 'off') return 'declined';
  const unauthorized = (): number => {
    r.pendingHeaders.push(['WWW-Authenticate', `Basic realm="${realm}"`]);
    return 401;
  };
  const creds = basicCredentials(r.headers.authorization);
  if (!creds) {
    logRequest(ex.cx, r, 'info', 'no user/password was provided for basic authentication');
    return unauthorized();
  }
  const file = conf.userFile.evaluate(r);
  let text: string;
  try {
    text = await readFile(Buffer.from(file, 'latin1'), 'latin1');
  } catch (err) {
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    logRequest(ex.cx, r, missing ? 'error' : 'crit', `open() "${file}" failed (${systemErrorText(err)})`);
    return missing ? 403 : 500;
  }
  for (const line of text.split('\n')) {
    if (line.startsWith('#')) continue;
    const colon = line.indexOf(':');
    if (colon === -1 || line.slice(0, colon) !== creds.user) continue;
    const rest = line.slice(colon + 1).replace(/\r$/, '');
    const hash = rest.includes(':') ? rest.slice(0, rest.indexOf(':')) : rest;
    const matches = passwordMatches(creds.password, hash);
    if (matches === undefined) {
      logRequest(ex.cx, r, 'error', `user "${creds.user}": the password hash in "${file}" has a format jinx cannot check (use $apr1$, $1$, $5$, $6$, bcrypt, {SHA} or {SSHA})`);
      return 500;
    }
    if (matches) return 'ok';
    logRequest(ex.cx, r, 'error', `user "${creds.user}": password mismatch`);
    return unauthorized();
  }
  logRequest(ex.cx, r, 'error', `user "${creds.user}" was not found in "${file}"`);
  return unauthorized();
}
