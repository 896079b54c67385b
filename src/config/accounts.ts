/**
 * User and group names as `getpwnam()` and `getgrnam()` see them, for the
 * `user` directive (`ngx_set_user` in `src/core/nginx.c`). Node has no
 * binding for either call; `getent` asks the same NSS sources glibc does,
 * and where it is missing the files database (`/etc/passwd`, `/etc/group`)
 * is read.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * Whether `name` exists in NSS database `db` (`passwd` or `group`). `getent`
 * also takes a number as an id, which `getpwnam` does not: the entry's name
 * must be `name`.
 */
export function accountExists(db: 'passwd' | 'group', name: string): boolean {
  const r = spawnSync('getent', [db, name], { encoding: 'latin1', timeout: 10_000 });
  if (!r.error) return r.status === 0 && r.stdout.split(':')[0] === name;
  try {
    return readFileSync(`/etc/${db}`, 'utf8').split('\n').some((line) => line.split(':')[0] === name);
  } catch {
    return false;
  }
}
