/**
 * TLS termination settings (`src/http/modules/ngx_http_ssl_module.c`).
 * Certificates are read when the configuration is loaded (and on reload).
 */
import { HTTP_SRV } from '../flags.js';
import {
  acceptOnly, bitmaskSetter, DirectiveFailure, flagSetter, listSlot, secSetter, slot, strSetter, type DirectiveSpec,
} from '../spec.js';

const SSL = 'ngx_http_ssl_module';

export const sslCertificates = listSlot<string>('ssl_certificate');
export const sslCertificateKeys = listSlot<string>('ssl_certificate_key');
export const sslProtocols = slot<readonly string[]>('ssl_protocols', ['TLSv1.2', 'TLSv1.3']);
export const sslCiphers = slot('ssl_ciphers', 'HIGH:!aNULL:!MD5');
export const sslPreferServerCiphers = slot('ssl_prefer_server_ciphers', false);
export const sslRejectHandshake = slot('ssl_reject_handshake', false);
export const sslSessionTimeoutSec = slot('ssl_session_timeout', 300);

const PROTOCOLS = ['SSLv2', 'SSLv3', 'TLSv1', 'TLSv1.1', 'TLSv1.2', 'TLSv1.3'] as const;

const none = (name: string, args: DirectiveSpec['args'], note: string): DirectiveSpec => ({
  name, module: SSL, contexts: HTTP_SRV, args, effect: 'none', note, set: acceptOnly,
});

export const sslDirectives: readonly DirectiveSpec[] = [
  {
    name: 'ssl_certificate', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => cx.level.append(sslCertificates, cx.scope.confPath(d.args[0]!), d.loc),
  },
  {
    name: 'ssl_certificate_key', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime',
    set: (d, cx) => cx.level.append(sslCertificateKeys, cx.scope.confPath(d.args[0]!), d.loc),
  },
  {
    name: 'ssl_protocols', module: SSL, contexts: HTTP_SRV, args: ['1MORE'], effect: 'runtime',
    set: (d, cx) => {
      if (cx.level.own(sslProtocols)) throw new DirectiveFailure('is duplicate');
      bitmaskSetter(sslProtocols, PROTOCOLS)(d, cx);
    },
  },
  { name: 'ssl_ciphers', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: strSetter(sslCiphers) },
  { name: 'ssl_prefer_server_ciphers', module: SSL, contexts: HTTP_SRV, args: ['FLAG'], effect: 'runtime', set: flagSetter(sslPreferServerCiphers) },
  { name: 'ssl_reject_handshake', module: SSL, contexts: HTTP_SRV, args: ['FLAG'], effect: 'runtime', set: flagSetter(sslRejectHandshake) },
  { name: 'ssl_session_timeout', module: SSL, contexts: HTTP_SRV, args: ['TAKE1'], effect: 'runtime', set: secSetter(sslSessionTimeoutSec) },
  none('ssl_session_cache', ['TAKE1', 'TAKE2'], 'sessions are cached by the TLS library per process'),
  none('ssl_session_tickets', ['FLAG'], 'session tickets follow the TLS library\'s default'),
  none('ssl_session_ticket_key', ['TAKE1'], 'session tickets follow the TLS library\'s default'),
  none('ssl_buffer_size', ['TAKE1'], 'TLS records are sized by the runtime'),
  none('ssl_dhparam', ['TAKE1'], 'DHE key exchange is not configured yet'),
  none('ssl_ecdh_curve', ['TAKE1'], 'curves follow the TLS library\'s default'),
  none('ssl_stapling', ['FLAG'], 'OCSP stapling needs network access and is not implemented'),
  none('ssl_stapling_verify', ['FLAG'], 'OCSP stapling needs network access and is not implemented'),
  none('ssl_stapling_file', ['TAKE1'], 'OCSP stapling is not implemented'),
  none('ssl_stapling_responder', ['TAKE1'], 'OCSP stapling is not implemented'),
  none('ssl_trusted_certificate', ['TAKE1'], 'client certificates and stapling are not implemented yet'),
  none('ssl_client_certificate', ['TAKE1'], 'client certificates are not implemented yet'),
  none('ssl_verify_client', ['TAKE1'], 'client certificates are not implemented yet'),
  none('ssl_verify_depth', ['TAKE1'], 'client certificates are not implemented yet'),
  none('ssl_crl', ['TAKE1'], 'client certificates are not implemented yet'),
  none('ssl_password_file', ['TAKE1'], 'encrypted keys are not supported yet'),
  none('ssl_early_data', ['FLAG'], 'TLS 1.3 early data is not accepted'),
  none('ssl_conf_command', ['TAKE2'], 'OpenSSL configuration commands are not passed through'),
];
