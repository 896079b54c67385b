/**
 * What became of the last reload, for `jinx -s reload` to tell (beyond
 * nginx, whose `-s reload` only sends the signal): the running jinx writes
 * `PIDFILE.reload` after each SIGHUP it handles, a JSON object with the
 * reload's number (counting from 1 since start), whether the new
 * configuration is in service, and the `[emerg]` messages that refused it.
 * The file is replaced whole (written aside, then renamed) and removed at exit.
 */
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';

export interface ReloadStatus {
  readonly reload: number;
  readonly ok: boolean;
  readonly emerg: readonly string[];
}

/** The file beside the pid file. */
export const reloadStatusPath = (pidFile: string): string => `${pidFile}.reload`;

/** Writes the status of a reload; a file that cannot be written is left out (the error log has the truth). */
export function writeReloadStatus(pidFile: string, status: ReloadStatus): void {
  const path = reloadStatusPath(pidFile);
  try {
    writeFileSync(`${path}.tmp`, JSON.stringify(status) + '\n');
    renameSync(`${path}.tmp`, path);
  } catch {
    rmSync(`${path}.tmp`, { force: true });
  }
}

/** The status of the last reload, or undefined when there was none (or it cannot be read). */
export function readReloadStatus(pidFile: string): ReloadStatus | undefined {
  try {
    const parsed = JSON.parse(readFileSync(reloadStatusPath(pidFile), 'utf8')) as ReloadStatus;
    return typeof parsed.reload === 'number' ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/** Removes the status (the server exits). */
export function removeReloadStatus(pidFile: string): void {
  rmSync(reloadStatusPath(pidFile), { force: true });
}

/**
 * After `-s reload`: waits up to `timeoutMs` for a reload numbered after
 * `before` to be done.
 * @returns its status, or undefined when none came (a server that does not write one)
 */
export async function awaitReload(pidFile: string, before: number, timeoutMs: number): Promise<ReloadStatus | undefined> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const status = readReloadStatus(pidFile);
    if (status && status.reload > before) return status;
    await new Promise((r) => setTimeout(r, 50));
  }
  return undefined;
}
