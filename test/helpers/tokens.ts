import { createHmac } from 'node:crypto';

/** Hand-made JWTs for the cases @statebacked/token refuses to make (other algorithms, bad claims). */
export const craftJwt = (header: Record<string, unknown>, payload: Record<string, unknown>, secret: string | undefined): string => {
  const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
  const signingInput = `${encode(header)}.${encode(payload)}`;
  if (secret === undefined) return `${signingInput}.`;
  const algorithm = header.alg === 'HS512' ? 'sha512' : 'sha256';
  return `${signingInput}.${createHmac(algorithm, Buffer.from(secret, 'utf8')).update(signingInput).digest('base64url')}`;
};

export const STATEBACKED_AUD = 'https://api.statebacked.dev/';
export const inOneHour = () => Math.floor(Date.now() / 1000) + 3600;
