/**
 * The bytes an upstream request moves on its connection, for
 * `$upstream_bytes_sent` and `$upstream_bytes_received` (nginx counts them on
 * the peer connection, `c->sent` and the reads of
 * `ngx_http_upstream_process_header` and the event pipe). undici does not
 * hand its socket to a request's handler; it does publish the socket on the
 * `undici:client:sendHeaders` diagnostics channel, synchronously right after
 * it called the handler's `onConnect`. A meter armed in `onConnect` is
 * therefore the one the next publication belongs to, and it counts from the
 * socket's totals at that moment.
 */
import { subscribe } from 'node:diagnostics_channel';
import type { Socket } from 'node:net';

/** Counts one request's bytes on the connection undici sends it on. */
export class WireMeter {
  private socket: Socket | undefined;
  private readAtStart = 0;
  private writtenAtStart = 0;

  /** Call from the handler's `onConnect`: the request's head is written next, on the socket published then. */
  arm(): void {
    armed = this;
  }

  /** Starts counting on `socket`, before the request's head is written. */
  attach(socket: Socket): void {
    this.socket = socket;
    this.readAtStart = socket.bytesRead;
    this.writtenAtStart = socket.bytesWritten;
  }

  /** Bytes read from the peer since the request was sent (0 before). */
  get received(): number {
    return this.socket ? this.socket.bytesRead - this.readAtStart : 0;
  }

  /** Bytes written to the peer for this request (0 before it was sent). */
  get sent(): number {
    return this.socket ? this.socket.bytesWritten - this.writtenAtStart : 0;
  }
}

/** The meter whose request undici is about to write. */
let armed: WireMeter | undefined;

subscribe('undici:client:sendHeaders', (message) => {
  const meter = armed;
  armed = undefined;
  meter?.attach((message as { socket: Socket }).socket);
});
