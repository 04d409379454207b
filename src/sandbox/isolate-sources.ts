/**
 * The code that runs inside the isolates, as the host hands it over: the checked JavaScript of
 * src/sandbox/isolate/ (its own tsconfig: the isolate's globals only), which `make build` checks and
 * copies unchanged to dist/sandbox/isolate/ beside this module, read here once as text. Unchanged, so
 * a line number in an isolate's error is a line of the source.
 *
 * - globals.js, encoding.js, structured-clone.js, url.js, fetch.js, subtle.js: installers (function
 *   expressions) run once per isolate before any other code, each with the audited callbacks it gets
 *   (version-loading.ts);
 * - harness.js (statehold:harness): the module the host calls into (HarnessExports names its functions
 *   and parameters); it imports its parts (HARNESS_PART_SOURCES) by relative specifiers, which resolve
 *   only from the harness's own modules;
 * - the two entry modules below, which bind the harness to the bundle and to the shared xstate 5.
 * Values the isolate code must agree on with the host (limits, the tampering marker) are handed to
 * globals.js as JSON (isolateSettings), not pasted into its source.
 */
import { readFileSync } from 'node:fs';
import type ivm from 'isolated-vm';
import type * as Harness from './isolate/harness.js';
import {
  MAX_EVENT_TIMERS_PER_OWNER,
  MAX_LOG_CHARS_PER_CALL,
  MAX_LOG_ENTRIES_PER_CALL,
  MAX_LOG_ENTRY_CHARS,
  MAX_TIMERS_PER_OWNER,
} from './limits.js';

const read = (name: string): string => readFileSync(new URL(`./isolate/${name}`, import.meta.url), 'utf8');

export const GLOBALS_SOURCE = read('globals.js');
export const ENCODING_SOURCE = read('encoding.js');
export const STRUCTURED_CLONE_SOURCE = read('structured-clone.js');
export const URL_SOURCE = read('url.js');
export const FETCH_SOURCE = read('fetch.js');
export const SUBTLE_SOURCE = read('subtle.js');
export const HARNESS_SOURCE = read('harness.js');
/** The harness's parts, by the specifier its modules import them with (module-loader.ts). */
export const HARNESS_PART_SOURCES: ReadonlyMap<string, string> = new Map(
  [
    'harness-base.js',
    'harness-v4.js',
    'harness-v5.js',
    'harness-pure-steps.js',
    'harness-http-api.js',
    'harness-version-info.js',
    'harness-upgrades.js',
  ].map((name) => [`./${name}`, read(name)]),
);

/** Starts the message of the error the harness throws when machine code tampered with what it relies on. */
export const TAMPERED_MARKER = 'statehold: sandbox tampered: ';

/** The harness's tampering message without its marker. */
export const untampered = (message: string): string => message.slice(message.indexOf(TAMPERED_MARKER) + TAMPERED_MARKER.length);

/** What globals.js gets as its settingsJson (isolate/isolate-settings.d.ts). */
export const isolateSettings = (): string =>
  JSON.stringify({
    maxTimersPerOwner: MAX_TIMERS_PER_OWNER,
    maxEventTimersPerOwner: MAX_EVENT_TIMERS_PER_OWNER,
    maxLogEntryChars: MAX_LOG_ENTRY_CHARS,
    maxLogEntriesPerCall: MAX_LOG_ENTRIES_PER_CALL,
    maxLogCharsPerCall: MAX_LOG_CHARS_PER_CALL,
    tamperedMarker: TAMPERED_MARKER,
  });

/** The harness's functions the host calls, with their parameters as the harness declares them. */
export type HarnessExports = Omit<typeof Harness, 'bind' | 'bindV5'>;
export type HarnessFn = keyof HarnessExports;
/** The arguments of a harness function as the host passes them (bytes go in as a host-made copy). */
export type HarnessArgs<K extends HarnessFn> = HostArgs<Parameters<HarnessExports[K]>>;
type HostArgs<P extends unknown[]> = { [I in keyof P]: P[I] extends ArrayBuffer | undefined ? ivm.Copy<ArrayBuffer> | undefined : P[I] };

/** Hands the shared xstate 5 copy to the harness (module-loader.ts says when). */
export const ENTRY5_SOURCE = `import * as X5 from 'xstate@5';
import { bindV5 } from 'statehold:harness';
bindV5(X5);
`;

/** Binds the harness to the user bundle; evaluated after both. */
export const ENTRY_SOURCE = `import * as bundle from 'statehold:bundle';
import { bind } from 'statehold:harness';
bind(bundle);
`;
