/**
 * A real uWSGI (Debian's `uwsgi-core` with `uwsgi-plugin-python3`) serving
 * a WSGI application of the test's, for uwsgi_pass tests: started in the
 * foreground with `--socket 127.0.0.1:PORT` (the uwsgi protocol), waited for
 * until it accepts connections, stopped by pid at cleanup.
 */
import { chmodSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, portOpen, startDaemon, tempDir, waitFor } from './harness.js';

const UWSGI = '/usr/bin/uwsgi-core';
const PLUGIN = '/usr/lib/uwsgi/plugins/python3_plugin.so';

/** `skip` option for tests that need uWSGI. */
export const NO_UWSGI: string | false = existsSync(UWSGI) && existsSync(PLUGIN) ? false : 'no uWSGI with python3 installed (test/prepare.sh installs it)';

/** A running uWSGI. */
export interface UwsgiServer {
  readonly port: number;
  /** What uWSGI logged so far. */
  log(): string;
}

/** Starts uWSGI with `processes` workers running the WSGI module `app` (Python source defining `application`). */
export async function startUwsgi(app: string, processes = 2): Promise<UwsgiServer> {
  const dir = tempDir('jinx-uwsgi-');
  // the workers run as nobody when the tests run as root: they read the application from here
  chmodSync(dir, 0o755);
  const port = await freePort();
  const logFile = join(dir, 'uwsgi.log');
  writeFileSync(join(dir, 'app.py'), app);
  const args = [
    '--plugin', PLUGIN, '--socket', `127.0.0.1:${port}`, '--wsgi-file', join(dir, 'app.py'), '--master', '--processes', String(processes),
    '--need-app', '--die-on-term', '--logto', logFile, '--buffer-size', '32768',
  ];
  if (process.getuid?.() === 0) args.push('--uid', 'nobody', '--gid', 'nogroup');
  const daemon = startDaemon(UWSGI, args, 'SIGTERM', dir);
  const log = (): string => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');
  await waitFor(async () => daemon.exited() || portOpen(port), 10_000, `uWSGI on ${port}`);
  if (daemon.exited()) throw new Error(`uWSGI exited during start:\n${daemon.stderr()}${log()}`);
  return { port, log };
}
