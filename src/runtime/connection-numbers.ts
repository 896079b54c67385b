/**
 * nginx's `ngx_connection_counter`: every connection gets the next number,
 * the `*N` of error-log lines. Client connections take one when accepted
 * (`ngx_event_accept`), upstream connections when they are opened
 * (`ngx_event_connect_peer`), so a client connection's number tells how many
 * connections of either kind came before it. nginx's counter is in memory
 * its workers share; jinx's workers, which share none, each count in steps
 * of `worker_processes` from their own start (worker 0: 1, 3, 5 …; worker 1:
 * 2, 4, 6 … with two), so that numbers stay unique across workers.
 */
export class ConnectionNumbers {
  private nextNumber: number;

  /** @param first the first number; @param step the distance between two numbers */
  constructor(first = 1, private readonly step = 1) {
    this.nextNumber = first;
  }

  /** The number of a new connection. */
  next(): number {
    const n = this.nextNumber;
    this.nextNumber += this.step;
    return n;
  }

  /** Numbers of connections handed from one listening socket to another (the stream module's `pass`), which keep theirs. */
  private readonly passed = new WeakMap<object, number>();

  /** `socket`, numbered `n`, goes to another listening socket (`pass`: nginx's `c->number` stays). */
  keep(socket: object, n: number): void {
    this.passed.set(socket, n);
  }

  /** The number of a connection accepted on `socket`: the one it kept (`keep`), or the next one. */
  accepted(socket: object): number {
    return this.passed.get(socket) ?? this.next();
  }
}
