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
 * The numeric id of `name` in NSS database `db` (`passwd`: the user id;
 * `group`: the group id), or undefined when there is no such entry.
 * `getent` also takes a number as an id, which `getpwnam` does not: the
 * entry's name must be `name`.
 */
export function accountId(db: 'passwd' | 'group', name: string): number | undefined {
  const r = spawnSync('getent', [db, name], { encoding: 'latin1', timeout: 10_000 });
  let entries: string[];
  if (!r.error) entries = r.status === 0 ? r.stdout.split('\n') : [];
  else {
    try {
      entries = readFileSync(`/etc/${db}`, 'latin1').split('\n');
    } catch {
      return undefined;
    }
  }
  const fields = entries.map((line) => line.split(':')).find((f) => f[0] === name && f.length > 2);
  const id = fields && Number(fields[2]);
  return id !== undefined && Number.isInteger(id) ? id : undefined;
}
