/**
 * Light shape check of a step result parsed from the harness's JSON. Machine code runs in the same
 * isolate as the harness and could tamper with JSON.stringify; the host must never trust the shape
 * blindly, so a malformed result becomes a MachineCodeError.
 */
import { MachineCodeError } from './errors.js';
import type { StepResult } from './types.js';

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export function checkStepResult(v: unknown): StepResult {
  const ok =
    isObject(v) &&
    (typeof v.state === 'string' || isObject(v.state)) &&
    isObject(v.context) &&
    Array.isArray(v.tags) &&
    typeof v.done === 'boolean' &&
    typeof v.changed === 'boolean' &&
    isObject(v.snapshot) &&
    isObject(v.snapshot.state) &&
    Array.isArray(v.pendingTimers) &&
    Array.isArray(v.runningChildren) &&
    Array.isArray(v.persistentSpawns) &&
    Array.isArray(v.outboundSends) &&
    typeof v.transitions === 'number';
  if (!ok) throw new MachineCodeError('the sandbox produced a malformed step result');
  return v as unknown as StepResult;
}
