/**
 * A DNS server of the tests' own on 127.0.0.1: UDP and TCP on one port
 * (TCP messages framed by their 2-byte length, RFC 1035 4.2.2), answering
 * each question as a test's script says. Messages are built by hand, so a
 * script can also answer what no real server would: a wrong id, a short or
 * truncated message, records of the wrong size, compression pointers that
 * loop. It counts the questions per name and type since the last `reset`,
 * which lets a differential test give nginx and jinx the same sequence.
 */
import { createSocket } from 'node:dgram';
import { createServer, type Socket } from 'node:net';
import { onCleanup } from './harness.js';

export const A = 1;
export const CNAME = 5;
export const TXT = 16;
export const AAAA = 28;
export const DNAME = 39;

/** One question received. */
export interface DnsQuestion {
  readonly id: number;
  /** The name as asked (its case kept), without the trailing dot. */
  readonly name: string;
  readonly type: number;
  readonly tcp: boolean;
  /** How many times this name and type were asked since the last reset, this one included. */
  readonly count: number;
}

/** A record of an answer. */
export interface DnsRecord {
  readonly type: number;
  /** The owner: a name written out, or by default a pointer to the question's name. */
  readonly name?: string;
  readonly ttl?: number;
  /** An address for A and AAAA, a name for CNAME and DNAME, the data itself as a Buffer. */
  readonly data: string | Buffer;
  readonly class?: number;
}

/** How to answer one question. */
export type DnsReply =
  | 'silent'
  | { readonly raw: Buffer }
  | {
    readonly rcode?: number;
    readonly answers?: readonly DnsRecord[];
    /** Sets TC. */
    readonly truncated?: boolean;
    /** Replaces the question's id. */
    readonly id?: number;
    /** The flags word, replacing 0x8180 | rcode (TC added when `truncated`). */
    readonly flags?: number;
    /** The question echoed with another name, type or class, or none at all. */
    readonly question?: { readonly name?: string; readonly type?: number; readonly class?: number } | 'none';
  };

export type DnsScript = (q: DnsQuestion) => DnsReply;

export interface ScriptedDns {
  readonly port: number;
  /** Questions received since the last reset. */
  readonly questions: DnsQuestion[];
  /** Forgets the questions and their counts. */
  reset(): void;
}

/** `a.b.c` as labels: `\1a\1b\1c\0`. */
export function encodeName(name: string): Buffer {
  const parts: Buffer[] = [];
  for (const label of name === '' ? [] : name.split('.')) parts.push(Buffer.from([label.length]), Buffer.from(label, 'latin1'));
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

/** The 16 bytes of an IPv6 address (`::1`, `fe80::2`, `::ffff:127.0.0.1`). */
function ipv6Bytes(text: string): Buffer {
  const quad = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  const hex = (hi: string, lo: string): string => (Number(hi) * 256 + Number(lo)).toString(16);
  const addr = quad ? `${quad[1]}${hex(quad[2]!, quad[3]!)}:${hex(quad[4]!, quad[5]!)}` : text;
  const [head, tail] = addr.includes('::') ? addr.split('::') : [addr, undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const words = tail === undefined ? h : [...h, ...new Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  words.forEach((w, i) => out.writeUInt16BE(parseInt(w, 16), i * 2));
  return out;
}

function recordData(r: DnsRecord): Buffer {
  if (Buffer.isBuffer(r.data)) return r.data;
  if (r.type === A) return Buffer.from(r.data.split('.').map(Number));
  if (r.type === AAAA) return ipv6Bytes(r.data);
  return encodeName(r.data);
}

/** The answer message for `q` as `reply` describes it. */
export function buildReply(q: DnsQuestion, reply: Exclude<DnsReply, 'silent' | { raw: Buffer }>): Buffer {
  const rcode = reply.rcode ?? 0;
  const header = Buffer.alloc(12);
  header.writeUInt16BE(reply.id ?? q.id, 0);
  header.writeUInt16BE((reply.flags ?? (0x8180 | rcode)) | (reply.truncated ? 0x0200 : 0), 2);
  const answers = reply.answers ?? [];
  header.writeUInt16BE(reply.question === 'none' ? 0 : 1, 4);
  header.writeUInt16BE(answers.length, 6);
  const parts: Buffer[] = [header];
  if (reply.question !== 'none') {
    const tail = Buffer.alloc(4);
    tail.writeUInt16BE(reply.question?.type ?? q.type, 0);
    tail.writeUInt16BE(reply.question?.class ?? 1, 2);
    parts.push(encodeName(reply.question?.name ?? q.name), tail);
  }
  for (const r of answers) {
    const data = recordData(r);
    const fixed = Buffer.alloc(10);
    fixed.writeUInt16BE(r.type, 0);
    fixed.writeUInt16BE(r.class ?? 1, 2);
    fixed.writeInt32BE(r.ttl ?? 3600, 4);
    fixed.writeUInt16BE(data.length, 8);
    parts.push(r.name === undefined ? Buffer.from([0xc0, 0x0c]) : encodeName(r.name), fixed, data);
  }
  return Buffer.concat(parts);
}

function questionName(msg: Buffer): { raw: string; end: number } {
  const labels: string[] = [];
  let i = 12;
  for (let guard = 0; guard < 128 && i < msg.length && msg[i] !== 0; guard++) {
    labels.push(msg.toString('latin1', i + 1, i + 1 + msg[i]!));
    i += 1 + msg[i]!;
  }
  return { raw: labels.join('.'), end: i + 1 };
}

/**
 * Starts a scripted DNS server (UDP and TCP on the same port of
 * 127.0.0.1); stopped at cleanup.
 */
export async function scriptedDns(script: DnsScript): Promise<ScriptedDns> {
  const questions: DnsQuestion[] = [];
  const counts = new Map<string, number>();
  const answer = (msg: Buffer, tcp: boolean): Buffer | undefined => {
    if (msg.length < 12) return undefined;
    const { raw, end } = questionName(msg);
    const type = end + 2 <= msg.length ? msg.readUInt16BE(end) : 0;
    const key = `${raw.toLowerCase()}/${type}`;
    const count = (counts.get(key) ?? 0) + 1;
    counts.set(key, count);
    const q: DnsQuestion = { id: msg.readUInt16BE(0), name: raw, type, tcp, count };
    questions.push(q);
    const reply = script(q);
    if (reply === 'silent') return undefined;
    if ('raw' in reply) return reply.raw;
    return buildReply(q, reply);
  };
  const sockets = new Set<Socket>();
  const onTcp = (sock: Socket): void => {
    sockets.add(sock);
    sock.on('close', () => sockets.delete(sock));
    sock.on('error', () => undefined);
    let buf = Buffer.alloc(0);
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) {
        const msg = buf.subarray(2, 2 + buf.readUInt16BE(0));
        buf = buf.subarray(2 + msg.length);
        const out = answer(msg, true);
        if (!out) continue;
        const len = Buffer.alloc(2);
        len.writeUInt16BE(out.length);
        sock.write(Buffer.concat([len, out]));
      }
    });
  };
  // a port free for both UDP and TCP
  for (let attempt = 0; attempt < 20; attempt++) {
    const udp = createSocket('udp4');
    await new Promise<void>((res) => udp.bind(0, '127.0.0.1', () => res()));
    const port = udp.address().port;
    const tcp = createServer(onTcp);
    const listening = await new Promise<boolean>((res) => {
      tcp.once('error', () => res(false));
      tcp.listen(port, '127.0.0.1', () => res(true));
    });
    if (!listening) {
      await new Promise<void>((res) => udp.close(() => res()));
      continue;
    }
    udp.on('message', (msg, rinfo) => {
      const out = answer(msg, false);
      if (out) udp.send(out, rinfo.port, rinfo.address);
    });
    onCleanup(() => new Promise<void>((res) => {
      for (const s of sockets) s.destroy();
      udp.close(() => tcp.close(() => res()));
    }));
    return {
      port,
      questions,
      reset: () => {
        questions.length = 0;
        counts.clear();
      },
    };
  }
  throw new Error('no port free for both UDP and TCP');
}
