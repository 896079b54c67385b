/**
 * User and group names as `getpwnam()` and `getgrnam()` see them, for the
 * `user` directive (`ngx_set_user` in `src/core/nginx.c`). Node has no
 * binding for either call: the files database is read, then `getent`
 * asks the other NSS sources glibc asks.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

/**
 * The numeric id of `name` in NSS database `db` (`passwd`: the user id;
 * `group`: the group id), or undefined when there is no such entry. The
 * files database (`/etc/passwd`, `/etc/group`) is read first, as glibc's
 * usual `files` first order does, without starting a process; a name it
 * lacks is asked of `getent` (LDAP, systemd's dynamic users …). `getent`
 * also takes a number as an id, which `getpwnam` does not: the entry's name
 * must be `name`.
 */
export function accountId(db: 'passwd' | 'group', name: string): number | undefined {
  return idIn(filesEntries(db), name) ?? idIn(getentEntries(db, name), name);
}

/**
 * Whether `/etc/passwd` or `/etc/group` mentions `word` anywhere, as
 * nginx's `auto/unix` asks `grep nobody /etc/group` at build time to choose
 * its default group: the files database only, no other NSS source (and no
 * process started).
 */
export function filesMention(db: 'passwd' | 'group', word: string): boolean {
  return filesEntries(db).some((line) => line.includes(word));
}

/** The lines of `/etc/passwd` or `/etc/group` (none when unreadable). */
function filesEntries(db: 'passwd' | 'group'): string[] {
  try {
    return readFileSync(`/etc/${db}`, 'latin1').split('\n');
  } catch {
    return [];
  }
}

/** What `getent DB NAME` prints, by line (none when it finds nothing or is missing). */
function getentEntries(db: 'passwd' | 'group', name: string): string[] {
  const r = spawnSync('getent', [db, name], { encoding: 'latin1', timeout: 10_000 });
  return !r.error && r.status === 0 ? r.stdout.split('\n') : [];
}

/** The id (third field) of the entry named `name` among `entries`. */
function idIn(entries: readonly string[], name: string): number | undefined {
  const fields = entries.map((line) => line.split(':')).find((f) => f[0] === name && f.length > 2);
  const id = fields && Number(fields[2]);
  return id !== undefined && Number.isInteger(id) ? id : undefined;
}
