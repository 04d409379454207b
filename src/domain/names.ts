import { invalidParameter } from './errors.js';

/** Machine, instance, index and token-provider names (wire-protocol §1.6). */
const slugPattern = /^[a-zA-Z0-9_-]{1,128}$/;

export const isSlug = (value: unknown): value is string => typeof value === 'string' && slugPattern.test(value);

export const requireSlug = (value: unknown, parameter: string): string => {
  if (!isSlug(value)) {
    throw invalidParameter(parameter, `${parameter} must be 1 to 128 characters of A-Z, a-z, 0-9, _ and -`);
  }
  return value;
};

/**
 * Org and key names: free text to show people, so any printable characters, but no control characters
 * (NUL, line breaks, escapes that would rewrite a terminal's screen) and no lone UTF-16 surrogates
 * (which have no UTF-8 form).
 */
export const requireDisplayName = (value: unknown, parameter: string): string => {
  if (typeof value !== 'string' || value.trim() === '' || value.length > 256) {
    throw invalidParameter(parameter, `${parameter} must be a non-empty string of at most 256 characters`);
  }
  if (/[\p{Cc}\p{Cs}]/u.test(value))
    throw invalidParameter(parameter, `${parameter} must not contain control characters or unpaired surrogates`);
  return value;
};

export { clipped } from './clipped.js';
