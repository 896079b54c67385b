/**
 * HTTP Basic authentication (`ngx_http_auth_basic_module.c`). The user file
 * is read for each request, as nginx does, and passwords are checked as
 * `ngx_crypt` (`src/core/ngx_crypt.c`) and the C library's crypt(3)
 * (libxcrypt) check them: `$apr1$` and `$1$` (apache-md5), `$5$`/`$6$`
 * (unixcrypt), `$2a$`/`$2b$`/`$2y$` (bcryptjs), traditional DES
 * (unix-crypt-td-js), `{SHA}`, `{SSHA}`, `{PLAIN}`; a hash crypt(3) cannot
 * read never matches. The other libxcrypt formats (yescrypt `$y$`, `$gy$`,
 * scrypt `$7$`, `$sha1$`, `$md5`, BSDi `_`, NT `$3$`) answer 500 with an
 * error-log line naming the user.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import aprMd5Module from 'apache-md5';
import bcrypt from 'bcryptjs';
import { verify as verifyUnixCrypt } from 'unixcrypt';
import { systemErrorText } from '../../os-errors.js';
import { logRequest } from '../context.js';
import type { Exchange } from '../exchange.js';
import type { AccessResult } from './access.js';
import { basicCredentials } from '../../credentials.js';

/** apache-md5 is CommonJS: its default import is the function, which its types describe as a namespace. */
const aprMd5 = aprMd5Module as unknown as (password: string, salt: string) => string;
/** unix-crypt-td-js (CommonJS, no types): crypt(3)'s traditional DES, the password a byte (latin1) string. */
const desCrypt = createRequire(import.meta.url)('unix-crypt-td-js') as (password: string, salt: string) => string;

/** libxcrypt's prefixes of formats jinx cannot compute. */
const UNCHECKABLE = ['$y$', '$gy$', '$7$', '$sha1$', '$md5', '$3$', '_'];
/** The characters of a DES salt. */
const DES_SALT = /^[./0-9A-Za-z]{2}/;

const same = (a: string, b: string): boolean => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/**
 * Whether `password` (a byte string) matches an htpasswd entry's hash;
 * undefined when jinx cannot check that hash format.
 */
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
  if (UNCHECKABLE.some((p) => hash.startsWith(p))) return undefined;
  // crypt(3): two salt characters are traditional DES; anything else is a failure ("*0"), which matches nothing
  if (!hash.startsWith('$') && DES_SALT.test(hash)) return same(desCrypt(password, hash.slice(0, 2)), hash);
  return false;
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
  let file = conf.userFile.evaluate(r);
  // ngx_http_script_full_name_code: a relative name from a variable is under the configuration's directory
  if (conf.confPrefix !== undefined && !file.startsWith('/')) file = conf.confPrefix + file;
  let text: string;
  try {
    text = await readFile(Buffer.from(file, 'latin1'), 'latin1');
  } catch (err) {
    // a directory opens, and its read fails (ngx_read_file)
    if ((err as NodeJS.ErrnoException).code === 'EISDIR') {
      logRequest(ex.cx, r, 'crit', `pread() "${file}" failed (${systemErrorText(err)})`);
      return 500;
    }
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
      logRequest(ex.cx, r, 'error', `user "${creds.user}": the password hash in "${file}" has a format jinx cannot check (use $apr1$, $1$, $5$, $6$, bcrypt, DES, {SHA} or {SSHA})`);
      return 500;
    }
    if (matches) return 'ok';
    logRequest(ex.cx, r, 'error', `user "${creds.user}": password mismatch`);
    return unauthorized();
  }
  logRequest(ex.cx, r, 'error', `user "${creds.user}" was not found in "${file}"`);
  return unauthorized();
}
