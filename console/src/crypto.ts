/** HMAC-SHA256 with WebCrypto, in the page: nothing secret leaves it. */

const utf8 = new TextEncoder();

const base64url = (bytes: ArrayBuffer | Uint8Array): string => {
  let text = '';
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
};

const hmac = async (key: string, data: string): Promise<string> => {
  const cryptoKey = await crypto.subtle.importKey('raw', utf8.encode(key), { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  return base64url(await crypto.subtle.sign('HMAC', cryptoKey, utf8.encode(data)));
};

/** The confirmation a delete carries (wire-protocol §3.1, §3.4): HMAC-SHA256 keyed with the machine's name. */
export const deletionConfirmation = (machine: string, name: string): Promise<string> => hmac(machine, name);

/**
 * A State Backed token signed with a key's secret, as @statebacked/token makes them (wire-protocol
 * §2.2): HS256, `kid` the key id, keyed with the secret's UTF-8 bytes; `act` is the auth context
 * machines' authorizers see.
 */
export const signKeyToken = async (keyId: string, secret: string, act: Record<string, unknown>, hours = 12): Promise<string> => {
  const now = Math.floor(Date.now() / 1000);
  const part = (value: object) => base64url(utf8.encode(JSON.stringify(value)));
  const unsigned = `${part({ alg: 'HS256', kid: keyId })}.${part({ act, aud: 'https://api.statebacked.dev/', iat: now, exp: now + hours * 3600 })}`;
  return `${unsigned}.${await hmac(secret, unsigned)}`;
};
