/**
 * What `nginx -t` checks once the configuration has compiled
 * (`ngx_init_cycle` in `src/core/ngx_cycle.c`, test mode): the pid file,
 * the temp directories and log files, then the listen addresses. Shared by
 * `-t` and `jinx lint`, so that both call the same things an error.
 */
import { closeSync, constants, openSync } from 'node:fs';
import type { RouteTable } from '../config/route-table.js';
import { ConfigError } from '../errors.js';
import { systemErrorText } from '../os-errors.js';
import { prepareFiles } from '../runtime/prepare-files.js';
import { checkListenSockets } from './bind-check.js';

/**
 * `ngx_create_pidfile` in test mode (`src/core/ngx_cycle.c`, before temp
 * directories and log files): the pid file `pid` names is opened, created if
 * missing, and left as it is. @throws ConfigError `open() "PATH" failed (…)`
 */
function openPidFile(path: string): void {
  try {
    closeSync(openSync(path, constants.O_RDWR | constants.O_CREAT, 0o644));
  } catch (err) {
    throw new ConfigError('file', `open() "${path}" failed (${systemErrorText(err)})`, undefined, { phase: 'init' });
  }
}

/**
 * The checks of `ngx_init_cycle` after the configuration is read, in its
 * order: the pid file (when `pid` is set: jinx's compiled-in
 * `logs/nginx.pid` is not opened, see `MainConf.pidFileConfigured`), temp
 * directories and log files (`prepareFiles`), listen addresses bound
 * (`checkListenSockets`). `offline` (`--offline`) skips them all: they
 * touch the file system and the network of the machine that checks.
 * @throws ConfigError the first failure, worded as nginx's
 */
export async function initChecks(table: RouteTable, offline: boolean): Promise<void> {
  if (offline) return;
  if (table.main.pidFileConfigured) openPidFile(table.main.pidFile);
  prepareFiles(table);
  await checkListenSockets(table);
}
