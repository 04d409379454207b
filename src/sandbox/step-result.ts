/**
 * A step's result as the harness hands it over: three JSON texts (the rest of the result, the
 * context, the snapshot). The sandbox worker passes them on as text, so the node parses the first two
 * once and never parses the snapshot (it goes to storage as it is). Machine code runs in the same
 * isolate as the harness and could tamper with what it produces; the host never trusts the shape
 * blindly, so a malformed result becomes a MachineCodeError.
 */
import { rememberJsonText } from '../domain/json-texts.js';
import { eventShapeProblem } from '../domain/reserved-events.js';
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
  /**
   * How deeply the texts nest at most, once the sandbox checked (version-isolate.ts): the commit then
   * does not scan the context's text again.
   */
  maxDepth?: number;
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
  const sizes = {
    contextBytes: Buffer.byteLength(context, 'utf8'),
    restBytes: Buffer.byteLength(snapshot, 'utf8') + Buffer.byteLength(rest, 'utf8'),
  };
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
  checkEffects(rest as Record<string, unknown[]>);
  // The commit writes this text into the head, rather than encoding the context once more.
  if (raw.maxDepth !== undefined) rememberJsonText(context as object, raw.context, raw.maxDepth);
  // Named fields rather than a spread of the harness's object: one shape for every result, and nothing
  // machine code may have added to that object comes along.
  const fields = rest as unknown as Omit<StepResult, 'context' | 'snapshot' | 'pendingHostCalls' | 'sizes'>;
  return {
    state: fields.state,
    context: context as StepResult['context'],
    tags: fields.tags,
    done: fields.done,
    changed: fields.changed,
    snapshot: raw.snapshot,
    pendingTimers: fields.pendingTimers,
    runningChildren: fields.runningChildren,
    persistentSpawns: fields.persistentSpawns,
    outboundSends: fields.outboundSends,
    transitions: fields.transitions,
    sizes: raw.sizes,
    pendingHostCalls: raw.pendingHostCalls,
  };
}

const SLUG = /^[a-zA-Z0-9_-]{1,128}$/;
const isSlugText = (v: unknown): boolean => typeof v === 'string' && SLUG.test(v);

/**
 * The effects the node acts on (messages to other instances, timers it indexes) are produced by the
 * harness, but in an isolate machine code shares: their shape is checked here, and names that no
 * instance could have are refused with a message machine code authors can act on.
 */
function checkEffects(rest: Record<string, unknown[]>): void {
  const malformed = () => new MachineCodeError('the sandbox produced a malformed step result');
  for (const spawn of rest.persistentSpawns as unknown[]) {
    if (!isObject(spawn)) throw malformed();
    if (!isSlugText(spawn.machineName) || !isSlugText(spawn.machineInstanceName)) {
      throw new MachineCodeError(
        'a persistent spawn names a machine or instance that is not 1 to 128 characters of A-Z, a-z, 0-9, _ and -',
      );
    }
    if (spawn.machineVersionId !== undefined && typeof spawn.machineVersionId !== 'string') throw malformed();
    if (spawn.context !== undefined && !isObject(spawn.context)) throw malformed();
  }
  for (const send of rest.outboundSends as unknown[]) {
    if (!isObject(send) || !isObject(send.event) || typeof send.event.type !== 'string') throw malformed();
    const shape = eventShapeProblem(send.event);
    if (shape !== undefined) throw new MachineCodeError(`a send to another instance is refused: ${shape}`);
    if (send.to === 'parent') continue;
    if (!isObject(send.to)) throw malformed();
    if (!isSlugText(send.to.machineName) || !isSlugText(send.to.machineInstanceName)) {
      throw new MachineCodeError(
        'a send to another instance names a machine or instance that is not 1 to 128 characters of A-Z, a-z, 0-9, _ and -',
      );
    }
  }
  for (const timer of rest.pendingTimers as unknown[]) {
    if (!isObject(timer) || typeof timer.id !== 'string' || timer.id.length > 256) throw malformed();
    // (an infinite delay's due time comes through JSON as null)
    if (timer.kind === 'event' && ((typeof timer.dueAt !== 'number' && timer.dueAt !== null) || !isObject(timer.event))) throw malformed();
  }
  for (const child of rest.runningChildren as unknown[]) {
    if (!isObject(child) || typeof child.id !== 'string') throw malformed();
  }
}
