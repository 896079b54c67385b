/**
 * The browsers nginx recognizes in `User-Agent` while it reads the header
 * (`ngx_http_process_user_agent` in `src/http/ngx_http_request.c`), for
 * `keepalive_disable`, `msie_padding`, `gzip_disable msie6` and `$msie`.
 */

/** What nginx notes of a client's `User-Agent`. */
export interface Browser {
  /** `MSIE ` followed by at least three more bytes (Opera excluded). */
  readonly msie: boolean;
  /** MSIE 4, 5, or 6 without `SV1`. */
  readonly msie6: boolean;
  /** Safari on Mac OS X (not MSIE, Opera, Gecko or Chrome). */
  readonly safari: boolean;
}

const NONE: Browser = { msie: false, msie6: false, safari: false };

/** The browser a `User-Agent` value names, as nginx decides it. */
export function browserOf(userAgent: string | undefined): Browser {
  if (!userAgent) return NONE;
  const at = userAgent.indexOf('MSIE ');
  let msie = at !== -1 && at + 7 < userAgent.length;
  let msie6 = false;
  if (msie && userAgent[at + 6] === '.') {
    const major = userAgent[at + 5];
    if (major === '4' || major === '5') msie6 = true;
    else if (major === '6' && !userAgent.includes('SV1', at + 8)) msie6 = true;
  }
  const opera = userAgent.includes('Opera');
  if (opera) msie = msie6 = false;
  const safari = !msie && !opera && !userAgent.includes('Gecko/') && !userAgent.includes('Chrome/')
    && userAgent.includes('Safari/') && userAgent.includes('Mac OS X');
  return { msie, msie6, safari };
}
