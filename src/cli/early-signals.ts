/**
 * A worker's signals from its first moment: node would end a process on a
 * signal it has no handler for (SIGQUIT, SIGTERM, SIGHUP …), which its master
 * would then report as a crash (`exited on signal 3`). Until the worker
 * serves, a stop is kept to be carried out then, and the rest is ignored, as
 * an nginx worker that is starting ignores them.
 */

/** How a worker is asked to stop: `QUIT` graceful, `TERM` and `INT` fast. */
export type StopKind = 'graceful' | 'fast';

let pending: StopKind | undefined;

const handlers: Readonly<Record<string, () => void>> = {
  SIGQUIT: () => { pending ??= 'graceful'; },
  SIGTERM: () => { pending = 'fast'; },
  SIGINT: () => { pending = 'fast'; },
  SIGHUP: () => undefined,
  SIGWINCH: () => undefined,
  SIGUSR1: () => undefined,
};

/** Installs the handlers (first thing a worker does). */
export function trapEarlySignals(): void {
  for (const [signal, handler] of Object.entries(handlers)) process.on(signal, handler);
}

/**
 * Removes the handlers, once the worker's own are in place (with none
 * between, node ends the process on the signal, or drops one it had not yet
 * passed on).
 * @returns the stop asked for meanwhile, if any
 */
export function releaseEarlySignals(): StopKind | undefined {
  for (const [signal, handler] of Object.entries(handlers)) process.off(signal, handler);
  return pending;
}
