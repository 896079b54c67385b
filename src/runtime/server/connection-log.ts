/**
 * Error-log lines about a client connection that has no request (yet):
 * nginx's connection context `, client: ADDR, server: LISTEN_ADDR`
 * (`ngx_http_log_error` without a request), in the default server's logs.
 */
import type { ErrorLogTarget, ListenGroup, ServerSet } from '../../config/route-table.js';
import { connectionContext, type ErrorLogFiles } from '../../log/error-log.js';
import type { LogLevel } from '../../log/levels.js';
import type { ClientConnection } from '../request.js';

/** The servers of the address a connection arrived on (`hc->addr_conf`). */
export function addressServers(group: ListenGroup, info: ClientConnection): ServerSet {
  return group.byLocalAddr.get(info.localAddr) ?? group.servers;
}

/** The listening address as nginx prints it for connections without a request (`server: 127.0.0.1:80`). */
export function listenText(group: ListenGroup): string {
  if (group.unixPath !== undefined) return group.addrText;
  return group.host.includes(':') ? `[${group.host}]:${group.port}` : `${group.host}:${group.port}`;
}

/** The error logs of the default server of the connection's address. */
export function defaultErrorLogs(group: ListenGroup, info: ClientConnection): readonly ErrorLogTarget[] {
  return addressServers(group, info).defaultServer.conf.errorLogs;
}

/**
 * Logs `message` (at info unless `level` says otherwise) with the connection
 * context, in `logs` (the default server's unless given).
 */
export type LogConnection = (
  group: ListenGroup, info: ClientConnection, message: string, level?: LogLevel, logs?: readonly ErrorLogTarget[],
) => void;

/** A `LogConnection` that writes through the error-log files `errorLog()` returns at the time (the configuration in service). */
export function connectionLogger(errorLog: () => ErrorLogFiles): LogConnection {
  return (group, info, message, level = 'info', logs = defaultErrorLogs(group, info)) => {
    errorLog().write(logs, level, message, info.id, connectionContext(info.peerAddr, listenText(group)));
  };
}
