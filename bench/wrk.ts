/**
 * wrk's output read into figures, for the benchmarks that drive HTTP/1.1
 * load with wrk (proxy.ts, cache.ts).
 */

/** One wrk run's figures (also h2load's, without percentiles). */
export interface WrkResult {
  rps: number;
  requests: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  socketErrors: number;
}

/** A wrk duration (`812.34us`, `1.20ms`, `2.01s`) in ms. */
function toMs(v: string, unit: string): number {
  const n = Number(v);
  switch (unit) {
    case 'us': return n / 1000;
    case 'ms': return n;
    case 's': return n * 1000;
    case 'm': return n * 60_000;
    default: return NaN;
  }
}

/** Reads wrk's summary (with `--latency`). @throws Error when it has no `Requests/sec`. */
export function parseWrk(out: string): WrkResult {
  const num = (re: RegExp): number | undefined => {
    const m = re.exec(out);
    return m ? Number(m[1]) : undefined;
  };
  const pct = (p: string): number => {
    const m = new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out);
    return m ? toMs(m[1]!, m[2]!) : NaN;
  };
  const rps = num(/^Requests\/sec:\s+([\d.]+)/m);
  if (rps === undefined) throw new Error(`cannot read wrk's output:\n${out}`);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  return {
    rps,
    requests: num(/^\s*(\d+) requests in/m) ?? 0,
    p50Ms: pct('50'),
    p99Ms: pct('99'),
    non2xx: num(/Non-2xx or 3xx responses:\s+(\d+)/) ?? 0,
    socketErrors: sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0,
  };
}
