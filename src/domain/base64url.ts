/** Unpadded base64url, the encoding of pretty ids, JWT segments and deletion confirmations. */
export const toBase64Url = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64url');

export const fromBase64Url = (text: string): Buffer | undefined => {
  if (!/^[A-Za-z0-9_-]*$/.test(text)) return undefined;
  return Buffer.from(text, 'base64url');
};
