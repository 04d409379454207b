/** Unpadded base64url, the encoding of pretty ids, JWT segments and deletion confirmations. */
export const toBase64Url = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');

/**
 * Only the canonical text of some bytes is accepted: the last character of a length that is not a
 * multiple of 4 carries unused low bits, and a text differing only there would otherwise decode to the
 * same bytes (a MAC or id whose text can be changed without being refused).
 */
export const fromBase64Url = (text: string): Buffer | undefined => {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return undefined;
  const bytes = Buffer.from(text, 'base64url');
  return bytes.toString('base64url') === text ? bytes : undefined;
};
