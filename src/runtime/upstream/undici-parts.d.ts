/**
 * Types of the parts of undici that jinx loads on their own, without
 * undici's index (which also loads fetch, WebSocket, EventSource, its caches
 * and mock agents: about 9 MiB more resident memory in every process, see
 * README.md, "Memory"): `Client`, one HTTP/1.1 connection
 * (peer-connections.ts), `buildConnector`, the TCP/TLS connector
 * (clients.ts, tls.ts), and its error classes (h2-connections.ts). Their
 * values are undici's own exports.
 */
declare module 'undici/lib/dispatcher/client.js' {
  import { Client } from 'undici';
  export default Client;
}

declare module 'undici/lib/core/errors.js' {
  import { errors } from 'undici';
  const undiciErrors: typeof errors;
  export default undiciErrors;
}

declare module 'undici/lib/core/connect.js' {
  import { buildConnector } from 'undici';
  export default buildConnector;
}

/**
 * undici's internal symbols, for the two figures of a `Client` that jinx
 * reads on every request (peer-connections.ts): its public `stats` makes a
 * new `ClientStats` of four getters at each read; and a socket's parser,
 * which read-buffers.ts runs on each read.
 */
declare module 'undici/lib/core/symbols.js' {
  const symbols: {
    /** `client[kConnected]`: the connection is open (`stats.connected`). */
    readonly kConnected: unique symbol;
    /** `client[kSize]`: requests queued or running on it (`stats.pending + stats.running`). */
    readonly kSize: unique symbol;
    /** `socket[kParser]`: the HTTP/1.1 parser undici reads the socket with (null once the socket is upgraded or closed). */
    readonly kParser: unique symbol;
  };
  export default symbols;
}
