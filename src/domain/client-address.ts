/**
 * The part of a client's address that per-client limits count by: an IPv4 address whole, an IPv6
 * address by its /64 (one host, or one home network, is handed a whole /64: counting its addresses
 * one by one would give it 2^64 budgets). IPv4-mapped IPv6 addresses count as their IPv4 address.
 * Anything unparsable counts as itself.
 */
export const clientAddressGroup = (address: string): string => {
  const text = address
    .trim()
    .toLowerCase()
    .replace(/^\[|\]$/g, '');
  if (!text.includes(':')) return text;
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (mapped?.[1]) return mapped[1];
  const hextets = expand(text);
  if (!hextets) return text;
  if (hextets.slice(0, 5).every((h) => h === 0) && hextets[5] === 0xffff) {
    return [(hextets[6] as number) >> 8, (hextets[6] as number) & 255, (hextets[7] as number) >> 8, (hextets[7] as number) & 255].join('.');
  }
  return `${hextets
    .slice(0, 4)
    .map((h) => h.toString(16))
    .join(':')}::/64`;
};

/** The eight 16-bit groups of an IPv6 address in text (no zone, no embedded IPv4), or undefined. */
const expand = (text: string): number[] | undefined => {
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const parse = (part: string | undefined) =>
    part ? part.split(':').map((h) => (/^[0-9a-f]{1,4}$/.test(h) ? parseInt(h, 16) : Number.NaN)) : [];
  const head = parse(halves[0]);
  const tail = parse(halves[1]);
  const missing = 8 - head.length - tail.length;
  if ((halves.length === 1 && missing !== 0) || missing < 0) return undefined;
  const all = [...head, ...Array<number>(halves.length === 2 ? missing : 0).fill(0), ...tail];
  return all.length === 8 && all.every((h) => !Number.isNaN(h)) ? all : undefined;
};
