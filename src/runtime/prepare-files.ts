/**
 * What nginx does with the file system once a configuration has parsed
 * (`ngx_init_cycle` in `src/core/ngx_cycle.c`), for `-t` as for a start:
 * temp directories are created (`ngx_create_paths`: one level, an existing
 * one is fine) and every log file is opened for appending, created if
 * missing. Failures are nginx's `mkdir() "PATH" failed (…)` and
 * `open() "PATH" failed (…)`.
 */
import { closeSync, mkdirSync, openSync } from 'node:fs';
import type { RouteTable } from '../config/route-table.js';
import { ConfigError } from '../errors.js';
import { systemErrorText } from '../os-errors.js';

/** @throws ConfigError for the first directory or file that cannot be made */
export function prepareFiles(table: RouteTable): void {
  for (const dir of table.tempDirs) {
    try {
      mkdirSync(dir, { mode: 0o700 });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new ConfigError('file', `mkdir() "${dir}" failed (${systemErrorText(err)})`, undefined, { phase: 'init' });
      }
    }
  }
  const files = new Set([...table.errorLogTargets.map((t) => t.path), ...table.accessLogTargets.filter((t) => !t.pathValue).map((t) => t.path)]);
  for (const path of files) {
    if (path === 'stderr') continue;
    try {
      closeSync(openSync(path, 'a'));
    } catch (err) {
      throw new ConfigError('file', `open() "${path}" failed (${systemErrorText(err)})`, undefined, { phase: 'init' });
    }
  }
}
