/**
 * The plain names of the servers on one address, as `ngx_http_server_names`
 * and `ngx_stream_server_names` (`src/http/ngx_http.c`,
 * `src/stream/ngx_stream.c`) hash them: exact names, head wildcards
 * (`*.example.com` kept as `.example.com`; `.example.com` both as the exact
 * `example.com` and as a head) and tail wildcards (`www.example.*` kept as
 * `www.example.`); the first server to name one keeps it.
 */
export class ServerNameTable<S> {
  readonly exact = new Map<string, S>();
  readonly heads: [string, S][] = [];
  readonly tails: [string, S][] = [];

  /**
   * Adds a plain (not regex) name of `server`; `conflict` is called for a
   * name an earlier server of the address has (nginx's `conflicting server
   * name "NAME" on ADDR, ignored`), and the name stays that server's.
   */
  add(name: string, server: S, conflict: () => void): void {
    const put = (list: [string, S][] | Map<string, S>, key: string): void => {
      const taken = list instanceof Map ? list.get(key) : list.find(([k]) => k === key)?.[1];
      if (taken !== undefined && taken !== server) {
        conflict();
        return;
      }
      if (taken !== undefined) return;
      if (list instanceof Map) list.set(key, server);
      else list.push([key, server]);
    };
    if (name.startsWith('*.')) put(this.heads, name.slice(1));
    else if (name.startsWith('.')) {
      put(this.exact, name.slice(1));
      put(this.heads, name);
    } else if (name.endsWith('.*')) put(this.tails, name.slice(0, -1));
    else put(this.exact, name);
  }
}
