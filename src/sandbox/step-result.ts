/**
 * A step's result as the harness hands it over: three JSON texts (the rest of the result, the
 * context, the snapshot). The sandbox worker passes them on as text, so the node parses the first two
 * once and never parses the snapshot (it goes to storage as it is). Machine code runs in the same
 * isolate as the harness and could tamper with what it produces; the host never trusts the shape
 * blindly, so a malformed result becomes a MachineCodeError.
 */
import { MachineCodeError } from './errors.js';
import type { StepResult, StepSizes } from './types.js';

export interface RawStep {
  /** JSON of the result without its context and snapshot. */
  rest: string;
  /** JSON of the context. */
  context: string;
  /** JSON of the snapshot (without the value and context it shares with the result; see snapshot.ts). */
  snapshot: string;
  pendingHostCalls: number;
  sizes: StepSizes;
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Splits the harness's text; undefined when it is not a result (an error or no-actor answer). */
export function splitStep(text: string, pendingHostCalls: number): RawStep | undefined {
  const first = text.indexOf('\n');
  if (first < 0) return undefined;
  const second = text.indexOf('\n', first + 1);
  if (second < 0) throw new MachineCodeError('the sandbox produced a malformed step result');
  const rest = text.slice(0, first);
  const context = text.slice(first + 1, second);
  const snapshot = text.slice(second + 1);
  // What a commit persists: the context (limited on its own), and the snapshot plus the pending
  // timers (bounded here by the whole rest of the result, which holds them).
  const sizes = { contextBytes: Buffer.byteLength(context, 'utf8'), restBytes: Buffer.byteLength(snapshot, 'utf8') + Buffer.byteLength(rest, 'utf8') };
  return { rest, context, snapshot, pendingHostCalls, sizes };
}

export function parseStep(raw: RawStep): StepResult {
  let rest: unknown;
  let context: unknown;
  try {
    rest = JSON.parse(raw.rest);
    context = JSON.parse(raw.context);
  } catch {
    throw new MachineCodeError('the sandbox produced a malformed step result');
  }
  const ok =
    isObject(rest) &&
    (typeof rest.state === 'string' || isObject(rest.state)) &&
    isObject(context) &&
    Array.isArray(rest.tags) &&
    typeof rest.done === 'boolean' &&
    typeof rest.changed === 'boolean' &&
    Array.isArray(rest.pendingTimers) &&
    Array.isArray(rest.runningChildren) &&
    Array.isArray(rest.persistentSpawns) &&
    Array.isArray(rest.outboundSends) &&
    typeof rest.transitions === 'number' &&
    raw.snapshot.startsWith('{');
  if (!ok) throw new MachineCodeError('the sandbox produced a malformed step result');
  return { ...(rest as unknown as Omit<StepResult, 'context' | 'snapshot' | 'pendingHostCalls' | 'sizes'>), context: context as StepResult['context'], snapshot: raw.snapshot, pendingHostCalls: raw.pendingHostCalls, sizes: raw.sizes };
}
