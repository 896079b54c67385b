/**
 * nginx's `ngx_connection_counter`: every connection gets the next number,
 * the `*N` of error-log lines. Client connections take one when accepted
 * (`ngx_event_accept`), upstream connections when they are opened
 * (`ngx_event_connect_peer`), so a client connection's number tells how many
 * connections of either kind came before it.
 */
export class ConnectionNumbers {
  private nextNumber = 1;

  /** The number of a new connection. */
  next(): number {
    return this.nextNumber++;
  }
}
