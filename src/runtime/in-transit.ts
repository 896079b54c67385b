/**
 * Bytes a client connection holds only because a turn of node's event loop
 * has not passed yet, not because the client has not taken them.
 *
 * nginx counts as busy what the kernel would not take (`ngx_event_pipe.c`:
 * the busy buffers are those `ngx_http_output_filter` could not send). A
 * plain socket in node tells the same: a write the kernel takes ends at
 * once and leaves `writableLength`. A TLS socket does not: node finishes a
 * write that the kernel took in a `setImmediate` (`TLSWrap::EncOut`), and
 * the writes made meanwhile wait in the socket's buffer to go out together
 * at that point; an HTTP/2 stream's DATA likewise waits for its
 * connection's next pump. Counted as busy, these bytes made a fast client
 * look like a slow one: every 1 MiB response over TLS went to a temp file
 * (`an upstream response is buffered to a temporary file`), which nginx
 * does not do, at a fifth of nginx's speed over HTTP/2.
 *
 * So the bytes written in the current turn (`turn-clock.ts`) and the one
 * before are in transit, not busy, up to `IN_TRANSIT_LIMIT_BYTES`. Bytes
 * older than that are held back by the client and count, so a slow
 * client's connection holds at most one turn's writes beyond the bound the
 * spool keeps (`spool.ts`).
 */
import { currentTurn } from './turn-clock.js';
import { bodyTurns } from './turn-budget.js';

/** In-transit bytes of one connection, at most: two turns' worth of response bodies (`bodyTurns`). */
export const IN_TRANSIT_LIMIT_BYTES = 2 * bodyTurns.bytesPerTurn;

/** Follows a running total of bytes written to tell those of the current turn and the one before. */
export class InTransit {
  private turn = Number.NaN;
  /** The running total when the current turn was first seen, and when the turn before was. */
  private atTurnStart = 0;
  private atLastTurnStart = 0;

  /**
   * Bytes of `totalBytes` (written so far, a running total that only grows)
   * written in this turn and the one before, at most
   * `IN_TRANSIT_LIMIT_BYTES`. A turn counts from the first call in it: bytes
   * written in a turn before any call count as older (busy), never less.
   */
  private bytes(totalBytes: number): number {
    const now = currentTurn();
    if (now !== this.turn) {
      this.atLastTurnStart = now === this.turn + 1 ? this.atTurnStart : totalBytes;
      this.atTurnStart = totalBytes;
      this.turn = now;
    }
    return Math.min(IN_TRANSIT_LIMIT_BYTES, totalBytes - this.atLastTurnStart);
  }

  /** What of `heldBytes` (bytes a connection or stream holds now) the client has not taken: those not in transit (`bytes`). */
  busy(heldBytes: number, totalBytes: number): number {
    return Math.max(0, heldBytes - this.bytes(totalBytes));
  }
}
