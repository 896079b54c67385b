/**
 * Fair turns of the event loop for response bodies.
 *
 * libuv accepts one connection per turn of the event loop (libuv#3696, in
 * node 20's libuv 1.46) and reads a readable socket up to 32 times 64 KiB in
 * one go. When many upstreams have large responses ready, one turn moves
 * megabytes, and every new connection waits in the listen queue one such
 * turn each: with 64 clients fetching 1 MiB, their first requests waited up
 * to two seconds (README.md, "1 MiB responses"). nginx reads an
 * upstream one buffer at a time per event (`ngx_event_pipe_read_upstream`),
 * so its turns stay short.
 *
 * A `TurnBudget` bounds the body bytes moved in one turn: a response that
 * gets data past the budget pauses its upstream and is resumed in a later
 * turn, in the order the responses paused, each turn resuming as many as
 * its budget takes. A turn ends at node's check phase (`setImmediate`),
 * after the poll phase in which the sockets were read. `proxy_pass`
 * (handlers/proxy.ts) and `fastcgi_pass` (handlers/fastcgi.ts) responses
 * share one budget.
 */
export class TurnBudget {
  /** Body bytes moved in the current turn. */
  private spentBytes = 0;
  /** Whether the current turn's end (a `setImmediate`) is scheduled. */
  private turnEndScheduled = false;
  /** Responses paused until a later turn, first paused first. */
  private readonly waiting: (() => void)[] = [];

  /** @param bytesPerTurn body bytes one turn moves before responses wait for the next (> 0) */
  constructor(readonly bytesPerTurn: number) {}

  /**
   * Counts `bytes` of body moved now. Returns false when the turn's budget
   * is spent: the caller pauses its upstream and calls `wait`.
   */
  spend(bytes: number): boolean {
    this.spentBytes += bytes;
    this.scheduleTurnEnd();
    return this.spentBytes < this.bytesPerTurn;
  }

  /** Calls `resume` in a later turn, after the responses that paused before. */
  wait(resume: () => void): void {
    this.waiting.push(resume);
    this.scheduleTurnEnd();
  }

  private scheduleTurnEnd(): void {
    if (this.turnEndScheduled) return;
    this.turnEndScheduled = true;
    setImmediate(this.endTurn);
  }

  /** A new turn: resumes waiting responses while its budget lasts (a resumed one may spend and wait again). */
  private readonly endTurn = (): void => {
    this.turnEndScheduled = false;
    this.spentBytes = 0;
    let resumable = this.waiting.length;
    while (resumable-- > 0 && this.spentBytes < this.bytesPerTurn) this.waiting.shift()!();
    if (this.waiting.length > 0) this.scheduleTurnEnd();
  };
}

/**
 * The process's budget: 1 MiB a turn, about 2 ms of proxying. Measured with
 * bench/proxy.js (1 MiB responses, 64 new connections): the p99 fell from
 * 0.8-1.2 s to 0.24-0.8 s, for about 10% more CPU per response (each wait
 * stops and restarts reading its upstream socket); 256 KiB cost more CPU
 * for no better p99. Responses that arrive in one read never wait.
 */
export const bodyTurns = new TurnBudget(1024 * 1024);
