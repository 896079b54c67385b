/**
 * What nginx does with the file system once a configuration has parsed
 * (`ngx_init_cycle` in `src/core/ngx_cycle.c`), for `-t` as for a start:
 * temp directories are created (`ngx_create_paths`: one level, an existing
 * one is fine) and given to the workers' user when the master runs as root,
 * and every log file is opened for appending, created if missing. Failures
 * are nginx's `mkdir() "PATH" failed (…)`, `chown("PATH", UID) failed (…)`
 * and `open() "PATH" failed (…)`.
 */
import { chmodSync, chownSync, closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import type { WorkerUser } from '../config/modules/core.js';
import type { RouteTable } from '../config/route-table.js';
import { ConfigError } from '../errors.js';
import { systemErrorText } from '../os-errors.js';

/** @throws ConfigError for the first directory or file that cannot be made, or given to the workers' user */
export function prepareFiles(table: RouteTable): void {
  const user = table.main.user;
  for (const dir of table.tempDirs) {
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new ConfigError('file', `mkdir() "${dir}" failed (${systemErrorText(err)})`, undefined, { phase: 'init' });
      }
    }
    if (user) {
      const failure = giveTo(dir, user, 0o700);
      if (failure) throw new ConfigError('file', failure, undefined, { phase: 'init' });
    }
  }
  for (const path of logFiles(table)) {
    try {
      closeSync(openSync(path, 'a'));
    } catch (err) {
      throw new ConfigError('file', `open() "${path}" failed (${systemErrorText(err)})`, undefined, { phase: 'init' });
    }
  }
}

/** The log files a configuration opens at start (error logs, access logs without variables in their path). */
function logFiles(table: RouteTable): Set<string> {
  const paths = [...table.errorLogTargets.map((t) => t.path), ...table.accessLogTargets.filter((t) => !t.pathValue).map((t) => t.path)];
  return new Set(paths.filter((p) => p !== 'stderr'));
}

/**
 * Makes `path` the workers' user's, with at least the owner permissions
 * `ownerMode` (`ngx_create_paths`, `ngx_reopen_files`: `chown()` to the user
 * when it owns it not, then `chmod()` adding what the owner lacks).
 * @returns nginx's message for what failed, undefined when nothing did
 */
function giveTo(path: string, user: WorkerUser, ownerMode: number): string | undefined {
  let stat;
  try {
    stat = statSync(path);
  } catch (err) {
    return `stat() "${path}" failed (${systemErrorText(err)})`;
  }
  if (stat.uid !== user.uid) {
    try {
      chownSync(path, user.uid, -1);
    } catch (err) {
      return `chown("${path}", ${user.uid}) failed (${systemErrorText(err)})`;
    }
  }
  if ((stat.mode & ownerMode) !== ownerMode) {
    try {
      chmodSync(path, (stat.mode & 0o7777) | ownerMode);
    } catch (err) {
      return `chmod() "${path}" failed (${systemErrorText(err)})`;
    }
  }
  return undefined;
}

/**
 * The master's part of reopening the logs (`ngx_reopen_files` with the
 * workers' user, `src/core/ngx_cycle.c`): every log file of `table` is
 * created if it was moved away and given to the workers' user, so that the
 * workers, which reopen their own, may open it.
 * @returns nginx's `[emerg]` messages for the files that could not be
 */
export function reopenLogFilesForWorkers(table: RouteTable): string[] {
  const user = table.main.user;
  if (!user) return [];
  const failures: string[] = [];
  for (const path of logFiles(table)) {
    try {
      closeSync(openSync(path, 'a'));
    } catch (err) {
      failures.push(`open() "${path}" failed (${systemErrorText(err)})`);
      continue;
    }
    const failure = giveTo(path, user, 0o600);
    if (failure) failures.push(failure);
  }
  return failures;
}
