/**
 * The FastCGI module (`src/http/modules/ngx_http_fastcgi_module.c`). The
 * directives are read and checked; FastCGI requests are not made yet, so a
 * location with `fastcgi_pass` answers 502 (never its files as static content).
 */
import { HTTP_SRV_LOC } from '../flags.js';
import { acceptOnly, DirectiveFailure, slot, type DirectiveSpec } from '../spec.js';

const FASTCGI = 'ngx_http_fastcgi_module';
const NOTE = 'FastCGI is not implemented yet: a location with fastcgi_pass answers 502';

/** The `fastcgi_pass` address as written (not inherited). */
export const fastcgiPass = slot<string | undefined>('fastcgi_pass', undefined, false);

const none = (name: string, args: DirectiveSpec['args'], contexts = HTTP_SRV_LOC): DirectiveSpec => ({
  name, module: FASTCGI, contexts, args, effect: 'none', note: NOTE, set: acceptOnly,
});

export const fastcgiDirectives: readonly DirectiveSpec[] = [
  {
    name: 'fastcgi_pass', module: FASTCGI, contexts: ['location', 'lif'], args: ['TAKE1'], effect: 'none', note: NOTE,
    set: (d, cx) => {
      if (cx.level.own(fastcgiPass)) throw new DirectiveFailure('is duplicate');
      cx.level.set(fastcgiPass, d.args[0]!, d.loc);
    },
  },
  none('fastcgi_param', ['TAKE2', 'TAKE3']),
  none('fastcgi_index', ['TAKE1']),
  none('fastcgi_split_path_info', ['TAKE1'], ['location']),
  none('fastcgi_read_timeout', ['TAKE1']),
  none('fastcgi_connect_timeout', ['TAKE1']),
  none('fastcgi_send_timeout', ['TAKE1']),
  none('fastcgi_buffer_size', ['TAKE1']),
  none('fastcgi_buffers', ['TAKE2']),
  none('fastcgi_buffering', ['FLAG']),
  none('fastcgi_intercept_errors', ['FLAG']),
  none('fastcgi_keep_conn', ['FLAG']),
  none('fastcgi_hide_header', ['TAKE1']),
  none('fastcgi_pass_header', ['TAKE1']),
  none('fastcgi_temp_path', ['TAKE1', 'TAKE2', 'TAKE3', 'TAKE4']),
  none('fastcgi_pass_request_body', ['FLAG']),
  none('fastcgi_pass_request_headers', ['FLAG']),
];
