import { invalidParameter } from './errors.js';

/** Machine, instance, index and token-provider names (wire-protocol §1.6). */
export const slugPattern = /^[a-zA-Z0-9_-]{1,128}$/;

export const isSlug = (value: unknown): value is string => typeof value === 'string' && slugPattern.test(value);

export const requireSlug = (value: unknown, parameter: string): string => {
  if (!isSlug(value)) {
    throw invalidParameter(parameter, `${parameter} must be 1 to 128 characters of A-Z, a-z, 0-9, _ and -`);
  }
  return value;
};

/** A caller-given name or id as error messages quote it: whole if short, else its start and its length. */
export const clipped = (value: string, max = 100): string => (value.length <= max ? value : `${value.slice(0, max)}… (${value.length} characters)`);
