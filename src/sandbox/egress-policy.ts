/**
 * Where machine code's `fetch` may go (design.md §5): http(s) only, and by default nowhere inside the
 * host's own networks. Pure except for `resolveDestination`, whose DNS lookup is injectable.
 *
 * A destination is checked address by address, after resolution: a name is refused if ANY of its
 * addresses is loopback, unspecified, private, shared (CGNAT), link-local, a cloud metadata address,
 * multicast, broadcast or otherwise reserved; IPv6 forms that embed an IPv4 address (mapped
 * `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) are judged by the
 * embedded address. IPv4 literals in odd forms (`2130706433`, `0x7f.1`, `0177.0.0.1`) are canonicalised
 * by the WHATWG URL parser before they get here; a hostname that still looks numeric but is not a
 * canonical dotted quad is refused outright.
 *
 * The allow-list opens specific hosts: `host` (any port) or `host:port`; hosts are names or IP
 * literals (`127.0.0.1:8080`, `[::1]:8080`). A destination is allowed when its URL host name is
 * listed, or address by address when the address itself is listed (for the URL's port).
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';

export interface EgressOptions {
  /** Hosts opened despite the address checks: `host`, `host:port`, `127.0.0.1:8080`, `[::1]:8080`. */
  allow: string[];
  /** Whole-call budget of one fetch (DNS, connect, redirects, body). */
  timeoutMs: number;
  /** Largest response body (after decompression). */
  maxResponseBytes: number;
}

export const defaultEgressOptions: EgressOptions = { allow: [], timeoutMs: 10_000, maxResponseBytes: 5 * 1024 * 1024 };

export interface AllowEntry {
  /** Lower-cased name, canonical IPv4, or canonical (compressed, bracket-less) IPv6. */
  host: string;
  port: number | undefined;
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

type AddressClass =
  | 'loopback'
  | 'unspecified'
  | 'private'
  | 'shared (CGNAT)'
  | 'link-local'
  | 'metadata'
  | 'multicast'
  | 'broadcast'
  | 'reserved'
  | 'documentation';

// ---------------------------------------------------------------------------------------------------
// Address parsing

/** Strict dotted-decimal IPv4 (no leading zeros, four parts) → 32-bit number, else undefined. */
function parseIPv4(text: string): number | undefined {
  const parts = text.split('.');
  if (parts.length !== 4) return undefined;
  let n = 0;
  for (const p of parts) {
    if (!/^(0|[1-9][0-9]{0,2})$/.test(p)) return undefined;
    const v = Number(p);
    if (v > 255) return undefined;
    n = n * 256 + v;
  }
  return n;
}

/** IPv6 text (no brackets, no zone) → 16 bytes, else undefined. Accepts an embedded dotted quad at the end. */
export function parseIPv6(text: string): Uint8Array | undefined {
  if (text.includes('%') || !/^[0-9a-fA-F:.]+$/.test(text)) return undefined;
  let head = text;
  let tailV4: number | undefined;
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.')) {
    tailV4 = parseIPv4(text.slice(lastColon + 1));
    if (tailV4 === undefined) return undefined;
    const prefix = text.slice(0, lastColon + 1); // ends with ':'
    head = prefix.endsWith('::') ? prefix : prefix.slice(0, -1);
  }
  const groupsWanted = tailV4 === undefined ? 8 : 6;
  const halves = head.split('::');
  if (halves.length > 2) return undefined;
  const parseGroups = (s: string): number[] | undefined => {
    if (s === '') return [];
    const out: number[] = [];
    for (const g of s.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(g)) return undefined;
      out.push(parseInt(g, 16));
    }
    return out;
  };
  const left = parseGroups(halves[0] ?? '');
  const right = halves.length === 2 ? parseGroups(halves[1] ?? '') : [];
  if (!left || !right) return undefined;
  let groups: number[];
  if (halves.length === 2) {
    const missing = groupsWanted - left.length - right.length;
    if (missing < 1) return undefined;
    groups = [...left, ...new Array<number>(missing).fill(0), ...right];
  } else {
    groups = left;
  }
  if (groups.length !== groupsWanted) return undefined;
  const bytes = new Uint8Array(16);
  groups.forEach((g, i) => {
    bytes[i * 2] = g >> 8;
    bytes[i * 2 + 1] = g & 0xff;
  });
  if (tailV4 !== undefined) {
    bytes[12] = (tailV4 >>> 24) & 0xff;
    bytes[13] = (tailV4 >>> 16) & 0xff;
    bytes[14] = (tailV4 >>> 8) & 0xff;
    bytes[15] = tailV4 & 0xff;
  }
  return bytes;
}

const ipv4Text = (n: number): string => [n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff].join('.');

/** Canonical compressed IPv6 text (RFC 5952, without the dotted-quad tail form). */
function ipv6Text(bytes: Uint8Array): string {
  const groups: number[] = [];
  for (let i = 0; i < 8; i++) groups.push(((bytes[i * 2] ?? 0) << 8) | (bytes[i * 2 + 1] ?? 0));
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8;) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

/**
 * A host as written in an allow-list entry or a URL (brackets allowed around IPv6) → canonical form:
 * IPv4 dotted quad, compressed IPv6, or a lower-cased name without a trailing dot.
 */
export function canonicalHost(host: string): string {
  const h = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
  const v4 = parseIPv4(h);
  if (v4 !== undefined) return ipv4Text(v4);
  if (h.includes(':')) {
    const v6 = parseIPv6(h);
    if (v6 !== undefined) return ipv6Text(v6);
  }
  return h.toLowerCase().replace(/\.$/, '');
}

// ---------------------------------------------------------------------------------------------------
// Classification

type V4Rule = [base: string, prefix: number, kind: AddressClass];
// most specific first: the first match names the class
const V4_RULES: V4Rule[] = [
  ['169.254.169.254', 32, 'metadata'], // AWS, GCP, Azure, OpenStack, DigitalOcean...
  ['168.63.129.16', 32, 'metadata'], // Azure wire server
  ['100.100.100.200', 32, 'metadata'], // Alibaba Cloud
  ['255.255.255.255', 32, 'broadcast'],
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'shared (CGNAT)'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'reserved'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.88.99.0', 24, 'reserved'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'reserved'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'],
];
const V4_COMPILED = V4_RULES.map(([base, prefix, kind]) => {
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return { net: ((parseIPv4(base) ?? 0) & mask) >>> 0, mask, kind };
});

function classifyIPv4(n: number): AddressClass | undefined {
  for (const r of V4_COMPILED) if ((n & r.mask) >>> 0 === r.net) return r.kind;
  return undefined;
}

type V6Rule = [base: string, prefix: number, kind: AddressClass];
const V6_RULES: V6Rule[] = [
  ['fd00:ec2::254', 128, 'metadata'], // AWS IMDS over IPv6
  ['::', 128, 'unspecified'],
  ['::1', 128, 'loopback'],
  ['64:ff9b:1::', 48, 'private'], // local-use NAT64
  ['100::', 64, 'reserved'], // discard-only
  ['2001:db8::', 32, 'documentation'],
  ['2001::', 23, 'reserved'], // IETF protocol assignments, Teredo (2001::/32) included
  ['3fff::', 20, 'documentation'],
  ['5f00::', 16, 'reserved'], // SRv6 SIDs
  ['fc00::', 7, 'private'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'private'], // deprecated site-local
  ['ff00::', 8, 'multicast'],
  ['::', 8, 'reserved'], // what is left of ::/8 after the embedded-IPv4 forms
];
const V6_COMPILED = V6_RULES.map(([base, prefix, kind]) => ({ net: parseIPv6(base) ?? new Uint8Array(16), prefix, kind }));

const inPrefix = (bytes: Uint8Array, net: Uint8Array, prefix: number): boolean => {
  for (let bit = 0; bit < prefix; bit += 8) {
    const i = bit / 8;
    const take = Math.min(8, prefix - bit);
    const mask = (0xff << (8 - take)) & 0xff;
    if (((bytes[i] ?? 0) & mask) !== ((net[i] ?? 0) & mask)) return false;
  }
  return true;
};

const v4At = (b: Uint8Array, i: number): number =>
  (((b[i] ?? 0) << 24) | ((b[i + 1] ?? 0) << 16) | ((b[i + 2] ?? 0) << 8) | (b[i + 3] ?? 0)) >>> 0;

/** The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64, 6to4), if any. */
function embeddedIPv4(b: Uint8Array): number | undefined {
  const zeros = (from: number, to: number): boolean => b.slice(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return v4At(b, 12); // ::ffff:a.b.c.d
  if (zeros(0, 12) && !(zeros(12, 15) && (b[15] === 0 || b[15] === 1))) return v4At(b, 12); // ::a.b.c.d (not :: or ::1)
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return v4At(b, 12); // 64:ff9b::/96
  if (b[0] === 0x20 && b[1] === 0x02) return v4At(b, 2); // 2002:wwxx:yyzz::/16
  return undefined;
}

function classifyIPv6(b: Uint8Array): AddressClass | undefined {
  const v4 = embeddedIPv4(b);
  if (v4 !== undefined) return classifyIPv4(v4);
  for (const r of V6_COMPILED) if (inPrefix(b, r.net, r.prefix)) return r.kind;
  return undefined;
}

/** Class of an IP address text (v4 or v6; brackets allowed); undefined for a public address. Throws for non-addresses. */
export function classifyAddress(address: string): AddressClass | undefined {
  const a = address.startsWith('[') && address.endsWith(']') ? address.slice(1, -1) : address;
  const v4 = parseIPv4(a);
  if (v4 !== undefined) return classifyIPv4(v4);
  const v6 = parseIPv6(a);
  if (v6 !== undefined) return classifyIPv6(v6);
  throw new TypeError(`not an IP address: ${address}`);
}

// ---------------------------------------------------------------------------------------------------
// Allow-list

/** Parses allow-list entries; throws a TypeError naming the first bad one. */
export function parseAllowList(entries: readonly string[]): AllowEntry[] {
  const out: AllowEntry[] = [];
  for (const raw of entries) {
    const entry = raw.trim();
    if (entry === '') continue;
    let host = entry;
    let port: number | undefined;
    const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
    if (bracketed) {
      host = bracketed[1] ?? '';
      if (bracketed[2] !== undefined) port = Number(bracketed[2]);
      if (parseIPv6(host) === undefined) throw new TypeError(`fetch allow-list entry "${raw}": not an IPv6 address in brackets`);
    } else if ((entry.match(/:/g) ?? []).length === 1) {
      const i = entry.indexOf(':');
      host = entry.slice(0, i);
      port = Number(entry.slice(i + 1));
    } else if (entry.includes(':') && parseIPv6(entry) === undefined) {
      throw new TypeError(`fetch allow-list entry "${raw}": write IPv6 addresses as [addr] or [addr]:port`);
    }
    if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65535)) {
      throw new TypeError(`fetch allow-list entry "${raw}": the port must be an integer from 1 to 65535`);
    }
    if (!/^[A-Za-z0-9._:-]+\.?$/.test(host) || host.startsWith('.') || host.startsWith('-')) {
      throw new TypeError(`fetch allow-list entry "${raw}": not a host name or IP address`);
    }
    out.push({ host: canonicalHost(host), port });
  }
  return out;
}

const entryMatches = (e: AllowEntry, host: string, port: number): boolean => e.host === host && (e.port === undefined || e.port === port);

// ---------------------------------------------------------------------------------------------------
// Destinations

interface Destination {
  /** The URL's host name (brackets already removed for IPv6), canonical. */
  host: string;
  port: number;
}

/** Parses a fetch URL on the host (WHATWG parser: canonicalises odd IPv4 forms). Throws a TypeError with a reason. */
export function destinationOf(url: URL): Destination {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new TypeError(`only http: and https: URLs are allowed, not ${url.protocol}`);
  if (url.username !== '' || url.password !== '') throw new TypeError('URLs with credentials are not allowed');
  const host = canonicalHost(url.hostname);
  if (host === '') throw new TypeError('the URL has no host');
  // After the WHATWG parser an IPv4 literal is a canonical dotted quad. Anything else that still looks
  // numeric (a last label of digits or 0x...) is refused rather than guessed at.
  if (!host.includes(':') && parseIPv4(host) === undefined) {
    const last = host.split('.').pop() ?? '';
    if (/^(0x[0-9a-f]*|[0-9]+)$/i.test(last)) throw new TypeError(`the host ${url.hostname} is not a canonical IPv4 address`);
  }
  const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
  return { host, port };
}

/** Why an address is refused for this destination, or undefined when it may be connected to. */
export function refusal(dest: Destination, address: string, allow: readonly AllowEntry[]): string | undefined {
  if (allow.some((e) => entryMatches(e, dest.host, dest.port))) return undefined;
  const canonical = canonicalHost(address);
  if (allow.some((e) => entryMatches(e, canonical, dest.port))) return undefined;
  const kind = classifyAddress(canonical);
  if (kind === undefined) return undefined;
  const article = /^[aeiou]/.test(kind) ? 'an' : 'a';
  const what = dest.host === canonical ? `destination ${canonical}` : `destination ${dest.host} (${canonical})`;
  return `${what} is ${article} ${kind} address and not in the allow-list`;
}

export type Lookup = (host: string) => Promise<ResolvedAddress[]>;

export const systemLookup: Lookup = async (host) => {
  const all = await dnsLookup(host, { all: true, verbatim: true });
  return all.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
};

/**
 * Resolves the destination and checks every address. Resolves to the addresses the connection must be
 * pinned to; rejects with a TypeError whose message is the reason.
 */
export async function resolveDestination(
  dest: Destination,
  allow: readonly AllowEntry[],
  lookup: Lookup = systemLookup,
): Promise<ResolvedAddress[]> {
  let addresses: ResolvedAddress[];
  const literal = isIP(dest.host);
  if (literal !== 0) {
    addresses = [{ address: dest.host, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await lookup(dest.host);
    } catch (e) {
      const code = (e as { code?: unknown }).code;
      throw new TypeError(`could not resolve ${dest.host}${typeof code === 'string' ? ` (${code})` : ''}`);
    }
    if (addresses.length === 0) throw new TypeError(`could not resolve ${dest.host}`);
  }
  for (const a of addresses) {
    if (isIP(a.address) === 0) throw new TypeError(`${dest.host} resolved to something that is not an address`);
    const why = refusal(dest, a.address, allow);
    if (why !== undefined) throw new TypeError(why);
  }
  return addresses;
}
