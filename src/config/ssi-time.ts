/**
 * The time of SSI's `$date_local` and `$date_gmt`
 * (`ngx_http_ssi_date_gmt_local_variable`): `%s` alone gives the seconds
 * since the epoch, any other format goes through C's `strftime` in the C
 * locale, here reimplemented for the conversions glibc documents.
 */

/** nginx's default `timefmt`. */
export const SSI_DEFAULT_TIMEFMT = '%A, %d-%b-%Y %H:%M:%S %Z';

const DAYS = ['Sunday', 'Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday', 'Saturday'];
const MONTHS = ['January', 'February', 'March', 'April', 'May', 'June', 'July', 'August', 'September', 'October', 'November', 'December'];

/** The broken-down time `strftime` formats (C's `struct tm`), with the zone's name and offset. */
interface Tm {
  readonly year: number;
  readonly mon: number;
  readonly mday: number;
  readonly hour: number;
  readonly min: number;
  readonly sec: number;
  readonly wday: number;
  readonly yday: number;
  readonly zone: string;
  /** Minutes east of UTC. */
  readonly offsetMin: number;
  readonly epochSec: number;
}

/** The local zone's abbreviation at `d`, as the C library names it (`UTC`, `CET` …) where Intl knows it. */
function localZoneName(d: Date): string {
  const part = new Intl.DateTimeFormat('en-US', { timeZoneName: 'short' }).formatToParts(d).find((p) => p.type === 'timeZoneName');
  return part?.value ?? 'UTC';
}

function brokenDown(ms: number, gmt: boolean): Tm {
  const d = new Date(ms);
  const offsetMin = gmt ? 0 : -d.getTimezoneOffset();
  const s = new Date(ms + offsetMin * 60_000);
  const start = Date.UTC(s.getUTCFullYear(), 0, 1);
  return {
    year: s.getUTCFullYear(), mon: s.getUTCMonth(), mday: s.getUTCDate(), hour: s.getUTCHours(), min: s.getUTCMinutes(),
    sec: s.getUTCSeconds(), wday: s.getUTCDay(), yday: Math.floor((s.getTime() - start) / 86_400_000),
    zone: gmt ? 'GMT' : localZoneName(d), offsetMin, epochSec: Math.floor(ms / 1000),
  };
}

const pad = (n: number, width: number, fill = '0'): string => String(n).padStart(width, fill);

/** ISO 8601 week number and week-based year (`%V`, `%G`). */
function isoWeek(tm: Tm): { week: number; year: number } {
  const wday = (tm.wday + 6) % 7;
  const thursday = tm.yday - wday + 3;
  if (thursday < 0) {
    const prevDays = isLeap(tm.year - 1) ? 366 : 365;
    return { week: Math.floor((thursday + prevDays) / 7) + 1, year: tm.year - 1 };
  }
  const days = isLeap(tm.year) ? 366 : 365;
  if (thursday >= days) return { week: 1, year: tm.year + 1 };
  return { week: Math.floor(thursday / 7) + 1, year: tm.year };
}

const isLeap = (y: number): boolean => (y % 4 === 0 && y % 100 !== 0) || y % 400 === 0;

/** C's `strftime` in the C locale; an unknown conversion is copied as it is. */
function strftime(format: string, tm: Tm): string {
  let out = '';
  for (let i = 0; i < format.length; i++) {
    const c = format[i]!;
    if (c !== '%' || i + 1 === format.length) {
      out += c;
      continue;
    }
    const f = format[++i]!;
    out += conversion(f, tm) ?? `%${f}`;
  }
  return out;
}

function conversion(f: string, tm: Tm): string | undefined {
  const h12 = tm.hour % 12 === 0 ? 12 : tm.hour % 12;
  switch (f) {
    case 'a': return DAYS[tm.wday]!.slice(0, 3);
    case 'A': return DAYS[tm.wday]!;
    case 'b': case 'h': return MONTHS[tm.mon]!.slice(0, 3);
    case 'B': return MONTHS[tm.mon]!;
    case 'c': return `${conversion('a', tm)} ${conversion('b', tm)} ${pad(tm.mday, 2, ' ')} ${conversion('T', tm)} ${tm.year}`;
    case 'C': return pad(Math.floor(tm.year / 100), 2);
    case 'd': return pad(tm.mday, 2);
    case 'D': return `${pad(tm.mon + 1, 2)}/${pad(tm.mday, 2)}/${pad(tm.year % 100, 2)}`;
    case 'e': return pad(tm.mday, 2, ' ');
    case 'F': return `${tm.year}-${pad(tm.mon + 1, 2)}-${pad(tm.mday, 2)}`;
    case 'G': return String(isoWeek(tm).year);
    case 'g': return pad(isoWeek(tm).year % 100, 2);
    case 'H': return pad(tm.hour, 2);
    case 'I': return pad(h12, 2);
    case 'j': return pad(tm.yday + 1, 3);
    case 'k': return pad(tm.hour, 2, ' ');
    case 'l': return pad(h12, 2, ' ');
    case 'm': return pad(tm.mon + 1, 2);
    case 'M': return pad(tm.min, 2);
    case 'n': return '\n';
    case 'p': return tm.hour < 12 ? 'AM' : 'PM';
    case 'P': return tm.hour < 12 ? 'am' : 'pm';
    case 'r': return `${pad(h12, 2)}:${pad(tm.min, 2)}:${pad(tm.sec, 2)} ${conversion('p', tm)}`;
    case 'R': return `${pad(tm.hour, 2)}:${pad(tm.min, 2)}`;
    case 's': return String(tm.epochSec);
    case 'S': return pad(tm.sec, 2);
    case 't': return '\t';
    case 'T': return `${pad(tm.hour, 2)}:${pad(tm.min, 2)}:${pad(tm.sec, 2)}`;
    case 'u': return String(tm.wday === 0 ? 7 : tm.wday);
    case 'U': return pad(Math.floor((tm.yday + 7 - tm.wday) / 7), 2);
    case 'V': return pad(isoWeek(tm).week, 2);
    case 'w': return String(tm.wday);
    case 'W': return pad(Math.floor((tm.yday + 7 - ((tm.wday + 6) % 7)) / 7), 2);
    case 'x': return conversion('D', tm);
    case 'X': return conversion('T', tm);
    case 'y': return pad(tm.year % 100, 2);
    case 'Y': return String(tm.year);
    case 'z': {
      const a = Math.abs(tm.offsetMin);
      return `${tm.offsetMin < 0 ? '-' : '+'}${pad(Math.floor(a / 60), 2)}${pad(a % 60, 2)}`;
    }
    case 'Z': return tm.zone;
    case '%': return '%';
    default: return undefined;
  }
}

/**
 * `$date_local` (`gmt` false) or `$date_gmt` now, in `timefmt` (nginx's
 * default when undefined); `%s` alone is the seconds since the epoch.
 */
export function ssiDate(timefmt: string | undefined, gmt: boolean): string {
  const fmt = timefmt ?? SSI_DEFAULT_TIMEFMT;
  const now = Date.now();
  if (fmt === '%s') return String(Math.floor(now / 1000));
  return strftime(fmt, brokenDown(now, gmt));
}
