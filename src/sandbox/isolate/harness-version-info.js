/**
 * What the host asks of a machine version as a whole: what its bundle exports (inspect), its default
 * context, and its state nodes for the web console's drawing (definition).
 */
import {
  mapForEach,
  arrayPush,
  objectKeys,
  $String,
  jsonStringify,
  enterCall,
  bundle,
  v5,
  errorText,
  jsonCopy,
  machine,
  contextOr,
} from './harness-base.js';
import { isV5Machine, checkV5Node } from './harness-v5.js';

// ---- version-level calls ----
/** @returns {string} (a call from the host: version-isolate.ts) */
export function inspect() {
  enterCall();
  // Not bound: the entry module never ran, because the bundle's evaluation is still pending.
  if (bundle === null || bundle === undefined) {
    return jsonStringify({ loadError: "the bundle's top-level code did not finish (a top-level await that never settles?)" });
  }
  try {
    const info = {
      hasDefault: 'default' in bundle,
      machine: 'none',
      definitionError: null,
      allowRead: typeof bundle.allowRead === 'function',
      allowWrite: typeof bundle.allowWrite === 'function',
      upgradeState: typeof bundle.upgradeState === 'function',
      upgradeContext: typeof bundle.upgradeContext === 'function',
    };
    const m = bundle.default;
    if (m !== null && typeof m === 'object') {
      if (isV5Machine(m)) {
        info.machine = 'v5';
        // Not machine.definition, as for v4: xstate 5 builds it with its event types as keys of a plain
        // object, which fails for ones named like Object.prototype members (its transitions, a Map, do
        // not); createMachine has checked the config already. A StateMachine's root node points back.
        // What it may still find wrong is resolved lazily per node: initial states and transitions.
        try {
          if (m.root.machine !== m) info.definitionError = 'machine.root.machine is not the machine itself';
          else checkV5Node(m.root, 0);
        } catch (e) {
          info.definitionError = errorText(e);
        }
      } else if (m.__xstatenode === true) {
        info.machine = 'v4';
        try {
          void m.definition;
        } catch (e) {
          info.definitionError = errorText(e);
        }
      }
    }
    return jsonStringify(info);
  } catch (e) {
    // e.g. a getter on the default export that throws
    return jsonStringify({ loadError: "reading the bundle's exports failed: " + errorText(e) });
  }
}

/** @returns {string} (a call from the host: version-isolate.ts) */
export function defaultContext() {
  enterCall();
  const c = v5 ? machine().config.context : machine().context;
  return jsonStringify(contextOr(jsonCopy(c)));
}

// ---- the machine's definition, for the web console's drawing ----
// Read from the state nodes (v4's StateNode, v5's StateNode: both have key, id, type, states, tags),
// not machine.definition: v5 builds that with event types as keys of a plain object (see inspect).
// Plain data only, bounded: the host hands it to a browser as is.
const DEFINITION_MAX_NODES = 1000;
const DEFINITION_MAX_TRANSITIONS = 4000;
const DEFINITION_MAX_DEPTH = 64;
const DEFINITION_MAX_CHARS = 200;
function clippedText(v) {
  const s = $String(v);
  return s.length > DEFINITION_MAX_CHARS ? s.slice(0, DEFINITION_MAX_CHARS) + '…' : s;
}
/** @returns {string} (a call from the host: version-isolate.ts) */
export function definition() {
  enterCall();
  const budget = { nodes: 0, transitions: 0, truncated: false };
  try {
    const m = machine();
    const root = describeNode(v5 ? m.root : m, 0, budget);
    return jsonStringify({ xstate: v5 ? 5 : 4, root: root, truncated: budget.truncated });
  } catch (e) {
    return jsonStringify({ error: "reading the machine's state nodes failed: " + errorText(e) });
  }
}
function targetIds(list) {
  const ids = [];
  if (list === null || list === undefined) return ids;
  for (let i = 0; i < list.length && i < 32; i++) {
    const t = list[i];
    if (t !== null && typeof t === 'object' && t.id !== undefined) arrayPush(ids, clippedText(t.id));
  }
  return ids;
}
function describeTransition(event, t, budget, out) {
  if (budget.transitions >= DEFINITION_MAX_TRANSITIONS) {
    budget.truncated = true;
    return;
  }
  budget.transitions++;
  const one = { event: clippedText(event), targets: targetIds(t.target) };
  if (t.cond || t.guard) one.guarded = true;
  arrayPush(out, one);
}
function describeNode(node, depth, budget) {
  budget.nodes++;
  const out = { key: clippedText(node.key), id: clippedText(node.id), type: clippedText(node.type), states: [], transitions: [] };
  const tags = node.tags;
  if (tags && typeof tags.length === 'number' && tags.length > 0) {
    out.tags = [];
    for (let i = 0; i < tags.length && i < 32; i++) arrayPush(out.tags, clippedText(tags[i]));
  }
  const initial = node.type === 'compound' ? node.initial : undefined;
  if (typeof initial === 'string') out.initial = clippedText(initial);
  else if (initial && initial.target && initial.target[0]) out.initial = clippedText(initial.target[0].key);
  if (v5) {
    mapForEach(node.transitions, function (list, event) {
      for (let i = 0; i < list.length; i++) describeTransition(event, list[i], budget, out.transitions);
    });
    const always = node.always;
    if (always) for (let i = 0; i < always.length; i++) describeTransition('', always[i], budget, out.transitions);
  } else {
    const list = node.transitions;
    for (let i = 0; i < list.length; i++) describeTransition(list[i].eventType, list[i], budget, out.transitions);
  }
  const children = node.states !== null && typeof node.states === 'object' ? node.states : {};
  const keys = objectKeys(children);
  for (let i = 0; i < keys.length; i++) {
    if (depth + 1 > DEFINITION_MAX_DEPTH || budget.nodes >= DEFINITION_MAX_NODES) {
      budget.truncated = true;
      break;
    }
    arrayPush(out.states, describeNode(children[keys[i]], depth + 1, budget));
  }
  return out;
}
