/**
 * The page of `stub_status` (`ngx_http_stub_status_handler`): nginx's text
 * of the connection counters, or, beyond nginx, when the request's `Accept`
 * asks for it (as Prometheus's scraper does), the same counters and jinx's
 * request tallies in the Prometheus text exposition format (version 0.0.4)
 * or in OpenMetrics 1.0. The counters keep the names the NGINX Prometheus
 * exporter (`nginxinc/nginx-prometheus-exporter`) gives them (`nginx_…`);
 * jinx's tallies are `jinx_…` (README, "Status page").
 */
import type { IncomingHttpHeaders } from 'node:http';
import { UPSTREAM_BUCKETS_SEC, type StatusSnapshot } from '../stub-status.js';

/** The formats of the page. */
export type StatusFormat = 'nginx' | 'prometheus' | 'openmetrics';

/** The page's body and `Content-Type`. */
export interface StatusPage {
  readonly type: string;
  readonly body: Buffer;
}

/**
 * The format an `Accept` header asks for: OpenMetrics when it names
 * `application/openmetrics-text`, the Prometheus text format when it names
 * `text/plain` with `version=0.0.4`, else nginx's text. A range with `q=0`
 * does not count.
 */
export function statusFormat(headers: IncomingHttpHeaders): StatusFormat {
  const accept = headers.accept;
  if (typeof accept !== 'string') return 'nginx';
  let format: StatusFormat = 'nginx';
  for (const range of accept.toLowerCase().split(',')) {
    const [type, ...params] = range.split(';').map((p) => p.trim());
    if (params.some((p) => /^q\s*=\s*0(\.0*)?$/.test(p))) continue;
    if (type === 'application/openmetrics-text') return 'openmetrics';
    if (type === 'text/plain' && params.some((p) => /^version\s*=\s*"?0\.0\.4"?$/.test(p))) format = 'prometheus';
  }
  return format;
}

/** nginx's text, trailing spaces included (`ngx_http_stub_status_handler`). */
function nginxText(s: StatusSnapshot): string {
  return `Active connections: ${s.active} \nserver accepts handled requests\n ${s.accepted} ${s.handled} ${s.requests} \n`
    + `Reading: ${s.reading} Writing: ${s.writing} Waiting: ${s.waiting} \n`;
}

/** A label value escaped as the exposition formats want it (backslash, double quote, line feed). */
function labelValue(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));
}

/** A number as the exposition formats write it. */
function sample(n: number): string {
  return Number.isFinite(n) ? String(n) : n > 0 ? '+Inf' : '-Inf';
}

const CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'];

/**
 * One metric family: its samples as `[suffix, labels, value]`. OpenMetrics
 * names a counter family without `_total` and its samples with it.
 */
interface Family {
  readonly name: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly help: string;
  readonly samples: readonly (readonly [suffix: string, labels: string, value: number])[];
}

/** The metric families of a snapshot. */
function families(s: StatusSnapshot): Family[] {
  const servers = Object.entries(s.servers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const upstreams = Object.entries(s.upstreams).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const histogram: (readonly [string, string, number])[] = [];
  for (const [name, u] of upstreams) {
    const label = `upstream="${labelValue(name)}"`;
    let cumulative = 0;
    UPSTREAM_BUCKETS_SEC.forEach((bound, i) => {
      cumulative += u.buckets[i]!;
      histogram.push(['_bucket', `${label},le="${bound}"`, cumulative]);
    });
    histogram.push(['_bucket', `${label},le="+Inf"`, u.count]);
    histogram.push(['_sum', label, u.sumMs / 1000]);
    histogram.push(['_count', label, u.count]);
  }
  return [
    { name: 'nginx_connections_accepted', type: 'counter', help: 'Accepted client connections', samples: [['', '', s.accepted]] },
    { name: 'nginx_connections_active', type: 'gauge', help: 'Active client connections', samples: [['', '', s.active]] },
    { name: 'nginx_connections_handled', type: 'counter', help: 'Handled client connections', samples: [['', '', s.handled]] },
    { name: 'nginx_connections_reading', type: 'gauge', help: 'Connections where NGINX is reading the request header', samples: [['', '', s.reading]] },
    { name: 'nginx_connections_waiting', type: 'gauge', help: 'Idle client connections', samples: [['', '', s.waiting]] },
    {
      name: 'nginx_connections_writing', type: 'gauge', help: 'Connections where NGINX is writing the response back to the client',
      samples: [['', '', s.writing]],
    },
    { name: 'nginx_http_requests_total', type: 'counter', help: 'Total http requests', samples: [['', '', s.requests]] },
    { name: 'nginx_up', type: 'gauge', help: 'Status of the last metric scrape', samples: [['', '', 1]] },
    {
      name: 'jinx_http_requests_by_server_total', type: 'counter', help: 'Client requests finished, by server_name and status class',
      samples: servers.flatMap(([name, classes]) => CLASSES.map((code, i) => ['', `server="${labelValue(name)}",code="${code}"`, classes[i]!] as const)),
    },
    {
      name: 'jinx_upstream_responses_total', type: 'counter', help: 'Upstream attempts, by upstream and status class',
      samples: upstreams.flatMap(([name, u]) => CLASSES.map((code, i) => ['', `upstream="${labelValue(name)}",code="${code}"`, u.classes[i]!] as const)),
    },
    { name: 'jinx_upstream_response_time_seconds', type: 'histogram', help: 'Upstream attempts\' response times, by upstream', samples: histogram },
  ];
}

/** The families in the Prometheus text format 0.0.4, or OpenMetrics 1.0 (`openMetrics`). */
function exposition(s: StatusSnapshot, openMetrics: boolean): string {
  const lines: string[] = [];
  for (const f of families(s)) {
    const family = openMetrics && f.type === 'counter' ? f.name.replace(/_total$/, '') : f.name;
    lines.push(`# HELP ${family} ${f.help}`, `# TYPE ${family} ${f.type}`);
    for (const [suffix, labels, value] of f.samples) {
      const name = openMetrics && f.type === 'counter' ? `${family}_total` : `${family}${suffix}`;
      lines.push(`${name}${labels ? `{${labels}}` : ''} ${sample(value)}`);
    }
  }
  if (openMetrics) lines.push('# EOF');
  return `${lines.join('\n')}\n`;
}

/** The page of `snapshot` in `format`. */
export function statusPage(snapshot: StatusSnapshot, format: StatusFormat): StatusPage {
  switch (format) {
    case 'nginx':
      return { type: 'text/plain', body: Buffer.from(nginxText(snapshot), 'latin1') };
    case 'prometheus':
      return { type: 'text/plain; version=0.0.4; charset=utf-8', body: Buffer.from(exposition(snapshot, false), 'utf8') };
    case 'openmetrics':
      return { type: 'application/openmetrics-text; version=1.0.0; charset=utf-8', body: Buffer.from(exposition(snapshot, true), 'utf8') };
  }
}
