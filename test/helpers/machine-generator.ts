/**
 * Generated XState machines for the differential test (test/differential-xstate.test.ts): fast-check
 * draws a raw shape (a state tree, transitions, actions, guards, events), `buildSpec` turns it into a
 * machine that stays out of the corners where xstate itself answers differently after a restore, and
 * `renderBody` writes it as v4 or v5 source. `referenceRun` runs the same source on the test process's
 * own xstate (v4: `interpret`, v5: `createActor`, both on a simulated clock) and says, event by event,
 * what the service must answer.
 *
 * What the builder keeps out, and why:
 * - Two handlers of one event type that can be active at once in different regions of a parallel
 *   state (or one in a region and one on the parallel state or above it), unless `regionConflicts`.
 *   v4 machines may have such pairs of targetless handlers (`regionConflicts: 'targetless'`): xstate
 *   4 takes the regions in the state value's key order, the order last entered when live, which
 *   `State.create` loses and the service keeps (the reference's restore keeps it too); conflicting
 *   multi-region transitions that leave their regions leave xstate 4 live in a configuration a
 *   restore does not give back. Eventless (`always`) transitions count as one event type for this,
 *   and are never such pairs. v5 machines may have such pairs (`regionConflicts: true`), but not of
 *   eventless transitions: xstate 5 picks between those in the order it holds the active state nodes,
 *   which is document order live and level by level once restored from a persisted snapshot (regions
 *   whose active leaves lie at different depths: xstate alone, seed 20261130 case 8, n 41 live, 12
 *   restored), so the reference's own restored run would disagree with its live one (the service
 *   keeps the live order: test/xstate-v5-restore.test.ts, regions5); nor where
 *   either handler can target a history state: with one such handler targeting a history state inside
 *   a parallel state and another leaving it, xstate 5 live ends in a configuration its own state value
 *   cannot hold (both s7 and s1 active under a compound root, seed 616 case 44 before this rule), and
 *   restored from its persisted snapshot it resolves that to another one (xstate alone, without
 *   Statehold: n 9 live, 10 restored).
 * - Without `regionConflicts`, actions in a region that write what another region writes: every node
 *   inside a region of a parallel state writes only its region's own context key
 *   (`public.r_<region>`), so the order in which regions run never matters.
 * - Without `regionConflicts`, transitions of the user's events from one region into a sibling region
 *   (they change the order xstate 4 takes the regions in); automatic steps never.
 * - Endless automatic steps: `after`, `always` and `onDone` only go to states after their source's
 *   whole subtree in document order (never to a history state), so every chain of them ends.
 * - Two delayed events pending at once whose real-time order could differ from the simulated
 *   clock's: `after` only on atomic states no two of which can be active together, and a machine has
 *   either `after` or delayed sends to itself (D0..D2, 5, 25 and 45 ms, sent only by handlers of the
 *   user's events, so all of one step's are sent at once and due 20 ms apart).
 * - Endless raising: raised events (I0, I1) go to handlers that raise nothing.
 * - Invoked promises and child machines (a third of the machines, three states at most) settle at
 *   once (a child machine ends as it starts, never in error), so within the step that entered their
 *   state, before any timer, live and in the service alike; their handlers
 *   are automatic steps (forward in document order, or targetless) and send nothing; `onError` is
 *   never guarded (an error event no transition takes throws in xstate 4 and ends a v5 machine in
 *   error). The reference folds their done and error events into the record of the step that started
 *   them, as the service's history does.
 * - Throwing only where the event asks for it (`event.boom === <site>`), so delayed events never
 *   throw and initial states never throw.
 */
import fc from 'fast-check';

export type Major = 4 | 5;

// ---------------------------------------------------------------------------------------------
// Raw shapes (what fast-check draws)

interface RawAction {
  kind: number;
  /** Which raised or delayed event. */
  k: number;
  /** Whether this action is one of the event-sending kinds (raise, delayed send, cancel), where they are allowed. */
  sends: boolean;
}
interface RawGuard {
  kind: number;
  k: number;
  throws: boolean;
  /** Also require a state to be active (v4 `in`, v5 `and([stateIn(…), …])`), when not null. */
  inState: number | null;
  /** The condition negated (v5 `not(…)`; v4 has no combinator: a function that negates it). */
  negate: boolean;
}
interface RawCandidate {
  target: number | null;
  /** Aim at a history state, when the machine has one. */
  toHistory: boolean;
  /** The non-default entry mode: v4 `internal: true`, v5 `reenter: true`. */
  flip: boolean;
  guard: RawGuard | null;
  actions: RawAction[];
}
interface RawAuto {
  target: number;
  targetless: boolean;
  guard: RawGuard | null;
  actions: RawAction[];
  delay: number;
}
/**
 * An invoked promise: resolves (or rejects) with `value` plus a counter, handled by `done` (or `error`);
 * or (`machine`) a child machine that doubles the counter and ends at once with `value` added.
 */
interface RawInvoke {
  machine: boolean;
  rejects: boolean;
  /** Both handlers targetless (the state stays active, its promise settled). */
  stays: boolean;
  value: number;
  done: RawAuto;
  error: RawAuto;
}
interface RawNode {
  kind: 'atomic' | 'final' | 'compound' | 'parallel';
  children: RawNode[];
  initial: number;
  history: 'none' | 'shallow' | 'deep';
  tags: string[];
  entry: RawAction[];
  exit: RawAction[];
  after: RawAuto | null;
  always: RawAuto | null;
  onDone: RawAuto | null;
  invoke: RawInvoke | null;
}
interface RawTransition {
  src: number;
  evt: number;
  candidates: RawCandidate[];
}
export interface RawEvent {
  type: number;
  by: number | null;
  boom: number | null;
}
export interface RawCase {
  root: RawNode;
  transitions: RawTransition[];
  rootTransitions: RawTransition[];
  /** Handlers of the raised (I0, I1) and, in delayed-send mode, the delayed (D0..D2) events. */
  sentTransitions: RawTransition[];
  /** Delayed sends to self instead of `after` (never both in one machine: two timers pending at once could fire in another order than on the simulated clock). */
  delayedSends: boolean;
  instances: RawEvent[][];
  initialSecret: number | null;
  /** Actions and guards referred to by name, implemented in the machine's options (v4) or `setup` (v5). */
  named: boolean;
  /** States may invoke promises (a third of the machines). */
  promises: boolean;
  /** Machine code writes to the console (a third of the machines): some actions, and every guard as it is evaluated. */
  logs: boolean;
  /** A v4 machine without `predictableActionArguments` (a quarter of them): actions run after the transition, assigns first, as many users' v4 machines do. */
  unpredictable: boolean;
}

export interface GeneratorOptions {
  /** Events per instance. */
  minEvents: number;
  maxEvents: number;
  /** Instances per machine. */
  instances: number;
}

const rawAction: fc.Arbitrary<RawAction> = fc.record({ kind: fc.nat(99), k: fc.nat(5), sends: fc.nat(2).map((x) => x === 0) });
const rawGuard: fc.Arbitrary<RawGuard> = fc.record({
  kind: fc.nat(99),
  k: fc.nat(5),
  throws: fc.nat(3).map((x) => x === 0),
  inState: fc.option(fc.nat(999), { freq: 3 }),
  negate: fc.nat(3).map((x) => x === 0),
});
const rawCandidate: fc.Arbitrary<RawCandidate> = fc.record({
  target: fc.option(fc.nat(999), { freq: 3 }),
  toHistory: fc.nat(3).map((x) => x === 0),
  flip: fc.nat(3).map((x) => x === 0),
  guard: fc.option(rawGuard, { freq: 2 }),
  actions: fc.array(rawAction, { maxLength: 2 }),
});
const rawAuto: fc.Arbitrary<RawAuto> = fc.record({
  target: fc.nat(999),
  targetless: fc.nat(3).map((x) => x === 0),
  guard: fc.option(rawGuard, { freq: 3 }),
  actions: fc.array(rawAction, { maxLength: 2 }),
  delay: fc.nat(7),
});
const rawInvoke: fc.Arbitrary<RawInvoke> = fc.record({
  machine: fc.nat(2).map((x) => x === 0),
  rejects: fc.nat(2).map((x) => x === 0),
  stays: fc.boolean(),
  value: fc.nat(8).map((x) => x + 1),
  done: rawAuto,
  error: rawAuto,
});
const rawTransition: fc.Arbitrary<RawTransition> = fc.record({
  src: fc.nat(999),
  evt: fc.nat(5),
  candidates: fc.array(rawCandidate, { minLength: 1, maxLength: 2 }),
});

const TAGS = ['t0', 't1', 't2'];
const MAX_DEPTH = 3;

const nodeFields = {
  initial: fc.nat(9),
  history: fc.constantFrom<RawNode['history']>('none', 'none', 'shallow', 'deep'),
  tags: fc.subarray(TAGS, { maxLength: 2 }),
  entry: fc.array(rawAction, { maxLength: 2 }),
  exit: fc.array(rawAction, { maxLength: 2 }),
  after: fc.option(rawAuto, { freq: 3 }),
  always: fc.option(rawAuto, { freq: 5 }),
  onDone: fc.option(rawAuto, { freq: 5 }),
  invoke: fc.option(rawInvoke, { freq: 2 }),
};

const nodeArbs = new Map<number, fc.Arbitrary<RawNode>>();
const nodeArb = (depth: number): fc.Arbitrary<RawNode> => {
  const known = nodeArbs.get(depth);
  if (known) return known;
  const leaf = fc.record({
    ...nodeFields,
    kind: fc.constantFrom<RawNode['kind']>('atomic', 'atomic', 'atomic', 'final'),
    children: fc.constant([] as RawNode[]),
  });
  let arb: fc.Arbitrary<RawNode>;
  if (depth >= MAX_DEPTH) arb = leaf;
  else {
    const children = fc.array(nodeArb(depth + 1), { minLength: 2, maxLength: 3 });
    const compound = fc.record({ ...nodeFields, kind: fc.constant<RawNode['kind']>('compound'), children });
    const parallel = fc.record({ ...nodeFields, kind: fc.constant<RawNode['kind']>('parallel'), children });
    arb =
      depth === 0
        ? fc.oneof({ arbitrary: compound, weight: 3 }, { arbitrary: parallel, weight: 1 })
        : fc.oneof({ arbitrary: leaf, weight: 5 }, { arbitrary: compound, weight: 2 }, { arbitrary: parallel, weight: 1 });
  }
  nodeArbs.set(depth, arb);
  return arb;
};

const rawEvent: fc.Arbitrary<RawEvent> = fc.record({
  type: fc.nat(999),
  by: fc.option(fc.nat(5), { freq: 2 }),
  boom: fc.option(fc.nat(999), { freq: 5 }),
});

/** The arbitrary of one differential case: a machine and each instance's events. */
export const caseArbitrary = (options: GeneratorOptions): fc.Arbitrary<RawCase> =>
  fc.record({
    root: nodeArb(0),
    transitions: fc.array(rawTransition, { minLength: 6, maxLength: 16 }),
    rootTransitions: fc.array(rawTransition, { minLength: 0, maxLength: 3 }),
    sentTransitions: fc.array(rawTransition, { minLength: 0, maxLength: 5 }),
    delayedSends: fc.nat(4).map((x) => x < 2),
    instances: fc.array(fc.array(rawEvent, { minLength: options.minEvents, maxLength: options.maxEvents }), {
      minLength: options.instances,
      maxLength: options.instances,
    }),
    initialSecret: fc.option(fc.nat(50), { freq: 2 }),
    named: fc.boolean(),
    promises: fc.nat(2).map((x) => x === 0),
    logs: fc.nat(2).map((x) => x === 0),
    unpredictable: fc.nat(3).map((x) => x === 0),
  });

// ---------------------------------------------------------------------------------------------
// The built machine

type ActionSpec =
  | { kind: 'inc' | 'mix' | 'secret' }
  /** A custom action that writes a line to the console, with the owner's counter. */
  | { kind: 'say'; label: string; key: string; builtin: boolean }
  /** A custom action that changes the context in place, without assign (as some users write them). */
  | { kind: 'mutate'; key: string }
  /** Picks an assign by the parity of the owner's counter: v4 `choose`, v5 `enqueueActions`. */
  | { kind: 'choose'; key: string }
  | { kind: 'raise'; event: string }
  | { kind: 'schedule'; event: string; delay: number; id: string }
  | { kind: 'cancel'; id: string }
  | { kind: 'trace'; label: string }
  | { kind: 'rinc' | 'rmix'; key: string }
  | { kind: 'throwAction' | 'throwAssign'; site: number }
  /** Adds what an invoked promise resolved (`done`) or rejected (`error`) with to the owner's counter. */
  | { kind: 'got'; key: string; outcome: 'done' | 'error' };

interface GuardSpec {
  expr: 'even' | 'odd' | 'byGt' | 'keyLt';
  k: number;
  key: string;
  site: number | null;
  /** The id of a state that must be active too. */
  inState: string | null;
  negate: boolean;
  /** The line the guard writes to the console as it is evaluated, in a machine that logs. */
  says: string | null;
}

interface Candidate {
  target: SNode | null;
  flip: boolean;
  guard: GuardSpec | null;
  actions: ActionSpec[];
}

interface SNode {
  index: number;
  key: string;
  id: string;
  kind: 'atomic' | 'final' | 'compound' | 'parallel' | 'history';
  history?: 'shallow' | 'deep';
  parent: SNode | null;
  children: SNode[];
  initial?: string;
  /** The context key this node's actions may write: `main` (n, trace, secret) or its region's key. */
  owner: string;
  /** The last pre-order index in this node's subtree. */
  lastIndex: number;
  tags: string[];
  entry: ActionSpec[];
  exit: ActionSpec[];
  on: Map<string, Candidate[]>;
  always: Candidate[];
  after: { delay: number; candidates: Candidate[] } | null;
  onDone: Candidate[];
  invoke: InvokeSpec | null;
}

/**
 * A promise the state invokes while active: it settles at once (a microtask), so within the step that
 * entered the state. Or (`machine`) a child machine, which ends as it starts (an `always` to its final
 * state), never in error.
 */
interface InvokeSpec {
  id: string;
  machine: boolean;
  rejects: boolean;
  /**
   * Settles with `value` plus the owner's counter `key` mod 7 when it started (v4 from the context, v5
   * through `input`); a child machine takes that counter as its context (v4 the invoke's `data`, v5
   * `input`), doubles it on entry and outputs it plus `value` (v4 its final state's `data`, v5 `output`).
   */
  value: number;
  key: string;
  onDone: Candidate[];
  onError: Candidate[];
}

export interface Features {
  targetlessAssign: boolean;
  targetedTransition: boolean;
  rootOn: boolean;
  nested: boolean;
  parallel: boolean;
  parallelRoot: boolean;
  shallowHistory: boolean;
  deepHistory: boolean;
  guard: boolean;
  always: boolean;
  entry: boolean;
  exit: boolean;
  after: boolean;
  final: boolean;
  topLevelFinal: boolean;
  onDone: boolean;
  tags: boolean;
  throwingAction: boolean;
  throwingGuard: boolean;
  throwingAssign: boolean;
  raise: boolean;
  delayedSend: boolean;
  cancel: boolean;
  flippedEntry: boolean;
  choose: boolean;
  inStateGuard: boolean;
  negatedGuard: boolean;
  mutatingAction: boolean;
  logs: boolean;
  invokedPromise: boolean;
  rejectedPromise: boolean;
  invokedMachine: boolean;
  logAction: boolean;
  named: boolean;
  /** Only with `regionConflicts`: handlers of one event type that can be picked together across regions. */
  regionConflict: boolean;
  /** Only with `regionConflicts`: a user's event taking one region into a sibling region. */
  crossRegion: boolean;
  /** v4 only: the machine has no `predictableActionArguments`. */
  unpredictable: boolean;
}

export interface MachineSpec {
  root: SNode;
  nodes: SNode[];
  regionKeys: string[];
  eventTypes: string[];
  throwSites: number;
  initialContext: { public: Record<string, unknown>; secret: { k: number } };
  /** What a create request passes as `context` (shallow-merged over the default), or undefined. */
  createContext: Record<string, unknown> | undefined;
  instances: Array<Array<{ type: string; by?: number; boom?: number }>>;
  /** `named`: actions, guards, delays and promises by name (v4 machine options, v5 `setup`) rather than inline. */
  features: Features;
}

const isAncestor = (a: SNode, b: SNode): boolean => {
  for (let n = b.parent; n; n = n.parent) if (n === a) return true;
  return false;
};
const isSelfOrAncestor = (a: SNode, b: SNode): boolean => a === b || isAncestor(a, b);
const lca = (a: SNode, b: SNode): SNode => {
  const seen = new Set<SNode>();
  for (let n: SNode | null = a; n; n = n.parent) seen.add(n);
  for (let n: SNode | null = b; n; n = n.parent) if (seen.has(n)) return n;
  throw new Error('no common ancestor');
};

/** Whether handlers of one event type on `a` and on `b` could both be picked in one step (a parallel state between them). */
const handlersConflict = (a: SNode, b: SNode): boolean => {
  if (a === b) return false;
  const l = lca(a, b);
  if (l.kind === 'parallel') return true;
  for (const end of [a, b]) for (let n = end.parent; n && n !== l; n = n.parent) if (n.kind === 'parallel') return true;
  return false;
};

/** A target that leaves `src`'s region for a sibling region of the same parallel state. */
const crossesRegions = (src: SNode, target: SNode): boolean => {
  for (let region: SNode | null = src; region && region.parent; region = region.parent) {
    const p = region.parent;
    if (p.kind === 'parallel' && isAncestor(p, target) && !isSelfOrAncestor(region, target)) return true;
  }
  return false;
};

/** The counter a node's actions may change: `n` for the machine's own nodes, else its region's key. */
const counterOf = (owner: string): string => (owner === 'main' ? 'n' : owner);

/** Builds the machine a raw case describes, keeping out of the corners listed at the top of this file. */
export interface BuildOptions {
  /**
   * Let regions of a parallel state (and a region and the parallel state or its ancestors) handle the
   * same event types, and every node write the shared context (n, trace, secret). `true` for v5.
   * `'targetless'` for v4: such handlers only when all of them are targetless, for transitions of
   * several regions that leave them leave xstate 4 live in a configuration its state value cannot
   * hold (tags of a state no longer in the value; seed 616 case 42), which a restore resolves
   * otherwise. Their actions then run in the regions' order: the one they were last entered in,
   * which a node keeps across restores (src/sandbox/isolate/harness-pure-steps.js, keepValueOrder) and the
   * reference's restore too.
   */
  regionConflicts?: boolean | 'targetless';
}

export const buildSpec = (raw: RawCase, options: BuildOptions = {}): MachineSpec => {
  const nodes: SNode[] = [];
  const make = (r: RawNode, parent: SNode | null, key: string): SNode => {
    let kind: SNode['kind'] = r.kind;
    if (parent?.kind === 'parallel' && kind === 'final') kind = 'atomic';
    const node: SNode = {
      index: nodes.length,
      key,
      id: parent ? `${parent.id}.${key}` : 'm',
      kind,
      parent,
      children: [],
      owner:
        parent === null || (options.regionConflicts !== undefined && options.regionConflicts !== false)
          ? 'main'
          : parent.kind === 'parallel'
            ? `r_${key}`
            : parent.owner,
      lastIndex: nodes.length,
      tags: r.tags,
      entry: [],
      exit: [],
      on: new Map(),
      always: [],
      after: null,
      onDone: [],
      invoke: null,
    };
    nodes.push(node);
    if (kind === 'compound' || kind === 'parallel') {
      for (const c of r.children) node.children.push(make(c, node, `s${nodes.length}`));
      if (kind === 'compound') {
        let initial = node.children[r.initial % node.children.length] as SNode;
        if (initial.kind === 'final' && parent === null) {
          const other = node.children.find((c) => c.kind !== 'final');
          if (other) initial = other;
          else initial.kind = 'atomic';
        }
        node.initial = initial.key;
        if (r.history !== 'none' && parent !== null) {
          const h: SNode = { ...blankNode(nodes.length, node, `h${nodes.length}`), kind: 'history', history: r.history };
          nodes.push(h);
          node.children.push(h);
        }
      }
    }
    node.lastIndex = nodes.length - 1;
    return node;
  };
  const root = make(raw.root, null, 'm');
  const rawOf = new Map<SNode, RawNode>();
  const link = (n: SNode, r: RawNode) => {
    rawOf.set(n, r);
    let i = 0;
    for (const c of n.children) if (c.kind !== 'history') link(c, r.children[i++] as RawNode);
  };
  link(root, raw.root);

  const regionKeys = nodes.filter((n) => n.parent?.kind === 'parallel' && n.owner !== 'main').map((n) => n.owner);
  let throwSites = 0;
  const features: Features = {
    targetlessAssign: false,
    targetedTransition: false,
    rootOn: false,
    nested: false,
    parallel: false,
    parallelRoot: root.kind === 'parallel',
    shallowHistory: false,
    deepHistory: false,
    guard: false,
    always: false,
    entry: false,
    exit: false,
    after: false,
    final: false,
    topLevelFinal: false,
    onDone: false,
    tags: false,
    throwingAction: false,
    throwingGuard: false,
    throwingAssign: false,
    raise: false,
    delayedSend: false,
    cancel: false,
    flippedEntry: false,
    choose: false,
    inStateGuard: false,
    negatedGuard: false,
    mutatingAction: false,
    logs: false,
    invokedPromise: false,
    rejectedPromise: false,
    invokedMachine: false,
    logAction: false,
    named: false,
    regionConflict: false,
    crossRegion: false,
    unpredictable: false,
  };
  /** Raised events go to handlers that raise nothing; delayed events to handlers that send nothing delayed. */
  const RAISED = ['I0', 'I1'];
  const DELAYED = ['D0', 'D1', 'D2'];

  type Sends = 'raise' | 'schedule' | 'cancel';
  const actionsFor = (raws: RawAction[], owner: string, label: string, sends: Sends[] = []): ActionSpec[] =>
    raws.map((r, i): ActionSpec => {
      const allowed = sends.filter((k) => k === 'raise' || raw.delayedSends);
      if (r.sends && allowed.length > 0) {
        const kind = allowed[r.kind % allowed.length] as Sends;
        if (kind === 'raise') {
          features.raise = true;
          return { kind, event: RAISED[r.k % RAISED.length] as string };
        }
        const d = r.k % DELAYED.length;
        if (kind === 'cancel') {
          features.cancel = true;
          return { kind, id: `d${d}` };
        }
        features.delayedSend = true;
        return { kind, event: DELAYED[d] as string, delay: 5 + 20 * d, id: `d${d}` };
      }
      const main = ['inc', 'mix', 'trace', 'secret', 'inc', 'trace', 'throwAction', 'throwAssign', 'choose', 'mutate'] as const;
      const region = ['rinc', 'rmix', 'rinc', 'rmix', 'throwAction', 'throwAssign', 'choose', 'mutate'] as const;
      const kind = owner === 'main' ? main[r.kind % main.length] : region[r.kind % region.length];
      const labelled = `${label}${raws.length > 1 ? `#${i}` : ''}`;
      // (in a machine that logs, half the traces and region mixes write a console line instead)
      // (half of those through xstate's own `log` action, which writes through the actor's logger)
      if ((kind === 'trace' || kind === 'rmix') && raw.logs && r.k % 2 === 0) {
        features.logs = true;
        const builtin = r.k % 4 === 0;
        if (builtin) features.logAction = true;
        return { kind: 'say', label: labelled, key: counterOf(owner), builtin };
      }
      switch (kind) {
        case 'mutate':
          features.mutatingAction = true;
          return { kind, key: counterOf(owner) };
        case 'choose':
          features.choose = true;
          return { kind, key: counterOf(owner) };
        case 'throwAction':
        case 'throwAssign':
          if (kind === 'throwAction') features.throwingAction = true;
          else features.throwingAssign = true;
          return { kind, site: throwSites++ };
        case 'trace':
          return { kind, label: labelled };
        case 'rinc':
        case 'rmix':
          return { kind, key: owner };
        default:
          return { kind: kind as 'inc' | 'mix' | 'secret' };
      }
    });
  let guardsMade = 0;
  const guardFor = (r: RawGuard | null, owner: string): GuardSpec | null => {
    if (r === null) return null;
    features.guard = true;
    const exprs = ['even', 'odd', 'byGt', 'keyLt'] as const;
    let expr = exprs[r.kind % exprs.length] as GuardSpec['expr'];
    if (expr === 'keyLt' && owner === 'main') expr = 'even';
    let site: number | null = null;
    if (r.throws) {
      site = throwSites++;
      features.throwingGuard = true;
    }
    let inState: string | null = null;
    if (r.inState !== null) {
      const states = nodes.filter((n) => n !== root && n.kind !== 'history');
      if (states.length > 0) {
        inState = (states[r.inState % states.length] as SNode).id;
        features.inStateGuard = true;
      }
    }
    if (r.negate) features.negatedGuard = true;
    const says = raw.logs ? `G ${guardsMade}` : null;
    guardsMade++;
    return { expr, k: r.k, key: owner, site, inState, negate: r.negate, says };
  };

  // entry, exit, tags
  for (const n of nodes) {
    if (n.kind === 'history') continue;
    const r = rawOf.get(n) as RawNode;
    n.entry = actionsFor(r.entry, n.owner, `in:${n.key}`);
    n.exit = n === root ? [] : actionsFor(r.exit, n.owner, `out:${n.key}`);
    if (n.entry.length) features.entry = true;
    if (n.exit.length) features.exit = true;
    if (n.tags.length) features.tags = true;
    if (n.kind === 'final') features.final = true;
    if (n.kind === 'final' && n.parent === root) features.topLevelFinal = true;
    if (n.kind === 'parallel') features.parallel = true;
    if (n.kind === 'compound' && n !== root) features.nested = true;
  }

  // Handlers per event type ('' stands for eventless transitions).
  const handlers = new Map<string, SNode[]>();
  /** Handlers with a candidate that targets a history state, per event type. */
  const historyHandlers = new Map<string, Set<SNode>>();
  /** Handlers with a candidate that has a target, per event type ('targetless' mode: they conflict with none). */
  const targetedHandlers = new Map<string, Set<SNode>>();
  /**
   * Whether `n` may handle `type` (with a candidate aiming at a history state if `toHistory`): 'free',
   * 'targetless' (only with candidates that have no target), or null (not at all).
   */
  const canHandle = (n: SNode, type: string, toHistory = false): 'free' | 'targetless' | null => {
    const conflicting = (handlers.get(type) ?? []).filter((h) => handlersConflict(h, n));
    if (conflicting.length === 0) return 'free';
    if (type === '') return null;
    if (options.regionConflicts === true)
      return !toHistory && !conflicting.some((h) => historyHandlers.get(type)?.has(h) ?? false) ? 'free' : null;
    if (options.regionConflicts === 'targetless')
      return conflicting.some((h) => targetedHandlers.get(type)?.has(h) ?? false) ? null : 'targetless';
    return null;
  };
  const addHandler = (n: SNode, type: string, toHistory = false) => {
    const list = handlers.get(type) ?? [];
    if (list.some((h) => handlersConflict(h, n))) features.regionConflict = true;
    if (!list.includes(n)) list.push(n);
    handlers.set(type, list);
    if (toHistory) historyHandlers.set(type, (historyHandlers.get(type) ?? new Set()).add(n));
  };
  const sources = nodes.filter((n) => n.kind !== 'history' && n.kind !== 'final');
  const targetables = nodes.filter((n) => n !== root);
  /** Targets of automatic steps from `n`: after its subtree, no history state, not into a sibling region. */
  const autoTargets = (n: SNode): SNode[] => nodes.filter((t) => t.index > n.lastIndex && t.kind !== 'history' && !crossesRegions(n, t));

  const addUserTransition = (src: SNode, r: RawTransition, types: string[] = ['E0', 'E1', 'E2', 'E3', 'E4', 'E5']) => {
    const histories = targetables.filter((n) => n.kind === 'history');
    const aimsAtHistory = (c: RawCandidate): boolean => c.target !== null && c.toHistory && histories.length > 0;
    const toHistory = r.candidates.some(aimsAtHistory);
    let type: string | undefined;
    let targetless = false;
    for (let i = 0; i < types.length; i++) {
      const candidate = types[(r.evt + i) % types.length] as string;
      const verdict = canHandle(src, candidate, toHistory);
      if (verdict !== null) {
        type = candidate;
        targetless = verdict === 'targetless';
        break;
      }
    }
    if (type === undefined) return;
    const sends: Sends[] = type.startsWith('E') ? ['raise', 'schedule', 'cancel'] : type.startsWith('D') ? ['raise', 'cancel'] : [];
    const candidates = r.candidates.map((c): Candidate => {
      const pool = aimsAtHistory(c) ? histories : targetables;
      let target: SNode | null = c.target === null || targetless ? null : (pool[c.target % pool.length] as SNode);
      if (target && crossesRegions(src, target)) {
        if (options.regionConflicts) features.crossRegion = true;
        else target = null;
      }
      const cand = {
        target,
        flip: target !== null && c.flip,
        guard: guardFor(c.guard, src.owner),
        actions: actionsFor(c.actions, src.owner, `${type}@${src.key}`, sends),
      };
      if (cand.flip) features.flippedEntry = true;
      if (target) {
        features.targetedTransition = true;
        if (target.kind === 'history') {
          if (target.history === 'deep') features.deepHistory = true;
          else features.shallowHistory = true;
        }
      } else if (cand.actions.some((a) => a.kind !== 'throwAction')) features.targetlessAssign = true;
      return cand;
    });
    addHandler(src, type, toHistory && !targetless);
    if (candidates.some((c) => c.target !== null)) targetedHandlers.set(type, (targetedHandlers.get(type) ?? new Set()).add(src));
    // Candidates after an unguarded one are never taken (xstate 4 warns about them): drop them.
    const all = [...(src.on.get(type) ?? []), ...candidates];
    const open = all.findIndex((c) => c.guard === null);
    src.on.set(type, open === -1 ? all : all.slice(0, open + 1));
    if (src === root) features.rootOn = true;
  };
  for (const r of raw.rootTransitions) addUserTransition(root, r);
  for (const r of raw.transitions) addUserTransition(sources[r.src % sources.length] as SNode, r);
  for (const r of raw.sentTransitions)
    addUserTransition(sources[r.src % sources.length] as SNode, r, raw.delayedSends ? [...RAISED, ...DELAYED] : RAISED);

  const autoCandidate = (n: SNode, r: RawAuto, allowTargetless: boolean, label: string): Candidate | null => {
    const options = autoTargets(n);
    let target: SNode | null = null;
    if (!(allowTargetless && r.targetless)) {
      if (options.length === 0) return null;
      target = options[r.target % options.length] as SNode;
    }
    return { target, flip: false, guard: guardFor(r.guard, n.owner), actions: actionsFor(r.actions, n.owner, label) };
  };

  // always: eventless transitions count as one event type for the region rule
  for (const n of nodes) {
    const r = rawOf.get(n);
    if (!r?.always || n === root || n.kind === 'final' || n.kind === 'history' || canHandle(n, '') === null) continue;
    const c = autoCandidate(n, r.always, false, `always@${n.key}`);
    if (!c) continue;
    n.always = [c];
    addHandler(n, '');
    features.always = true;
  }

  // after: atomic states, no two of which can be active together
  const timed: SNode[] = [];
  for (const n of nodes) {
    const r = rawOf.get(n);
    if (!r?.after || raw.delayedSends || n.kind !== 'atomic' || timed.some((t) => lca(t, n).kind === 'parallel')) continue;
    const c = autoCandidate(n, r.after, true, `after@${n.key}`);
    if (!c) continue;
    n.after = { delay: 1 + (r.after.delay % 8), candidates: [c] };
    timed.push(n);
    features.after = true;
  }

  // onDone: compound and parallel states that have a final state to reach
  for (const n of nodes) {
    const r = rawOf.get(n);
    if (!r?.onDone || n === root || (n.kind !== 'compound' && n.kind !== 'parallel')) continue;
    const completes = (s: SNode): boolean =>
      s.kind === 'compound'
        ? s.children.some((c) => c.kind === 'final')
        : s.kind === 'parallel'
          ? s.children.every((c) => completes(c))
          : false;
    if (!completes(n)) continue;
    const c = autoCandidate(n, r.onDone, false, `done@${n.key}`);
    if (!c) continue;
    n.onDone = [c];
    features.onDone = true;
  }

  // invoke: a promise settled at once (its done or error event is its own type: no region conflicts),
  // handled like an automatic step (forward in document order, or targetless), at most three a machine
  let invoking = 0;
  for (const n of nodes) {
    const r = rawOf.get(n);
    if (!raw.promises || !r?.invoke || n === root || n.kind === 'final' || n.kind === 'history' || invoking >= 3) continue;
    const invoke = r.invoke;
    const key = counterOf(n.owner);
    // (an error event no transition takes ends a v5 machine in error, and an unhandled one throws in
    // v4: onError is never guarded, and a handler with no target to aim at stays targetless)
    const handler = (a: RawAuto, outcome: 'done' | 'error'): Candidate[] => {
      const c = autoCandidate(n, { ...a, targetless: a.targetless || invoke.stays }, true, `${outcome}:${n.key}`) ?? {
        target: null,
        flip: false,
        guard: null,
        actions: [],
      };
      const got: ActionSpec = { kind: 'got', key, outcome };
      return [{ ...c, guard: outcome === 'error' ? null : c.guard, actions: [...c.actions, got] }];
    };
    n.invoke = {
      id: `p${n.index}`,
      machine: invoke.machine,
      rejects: invoke.rejects && !invoke.machine,
      value: invoke.value,
      key,
      onDone: handler(invoke.done, 'done'),
      onError: handler(invoke.error, 'error'),
    };
    invoking++;
    if (invoke.machine) features.invokedMachine = true;
    else features.invokedPromise = true;
    if (n.invoke.rejects) features.rejectedPromise = true;
  }

  const eventTypes = [...handlers.keys()].filter((k) => k.startsWith('E')).sort();
  const alphabet = [...eventTypes, 'NOPE'];
  const instances = raw.instances.map((events) =>
    events.map((e) => {
      const event: { type: string; by?: number; boom?: number } = { type: alphabet[e.type % alphabet.length] as string };
      if (e.by !== null) event.by = e.by;
      if (e.boom !== null && throwSites > 0) event.boom = e.boom % throwSites;
      return event;
    }),
  );
  const publicContext: Record<string, unknown> = { n: 0, trace: [] };
  for (const k of regionKeys) publicContext[k] = 0;
  return {
    root,
    nodes,
    regionKeys,
    eventTypes,
    throwSites,
    initialContext: { public: publicContext, secret: { k: 1 } },
    createContext: raw.initialSecret === null ? undefined : { secret: { k: raw.initialSecret } },
    instances,
    features: { ...features, named: raw.named, unpredictable: raw.unpredictable },
  };
};

const blankNode = (index: number, parent: SNode, key: string): SNode => ({
  index,
  key,
  id: `${parent.id}.${key}`,
  kind: 'atomic',
  parent,
  children: [],
  owner: parent.owner,
  lastIndex: index,
  tags: [],
  entry: [],
  exit: [],
  on: new Map(),
  always: [],
  after: null,
  onDone: [],
  invoke: null,
});

// ---------------------------------------------------------------------------------------------
// Rendering

const params = (major: Major): string => (major === 4 ? '(c, e)' : '({ context: c, event: e })');

/**
 * A named machine's implementations as they are rendered: each distinct action or guard once, by
 * name (v4 machine options, v5 `setup`).
 */
interface Names {
  actions: Map<string, string>;
  guards: Map<string, string>;
  /** Delays by name (`wait<ms>`: the machine's `delays`), for `after` and delayed sends. */
  delays: Set<number>;
  /** Invoked promises by name: v4 `services`, v5 `actors`. */
  actors: Map<string, string>;
}
const nameFor = (table: Map<string, string>, code: string, prefix: string): string => {
  let name = table.get(code);
  if (name === undefined) {
    name = `${prefix}${table.size}`;
    table.set(code, name);
  }
  return JSON.stringify(name);
};

const renderAction = (a: ActionSpec, major: Major, names?: Names): string =>
  names ? nameFor(names.actions, actionCode(a, major, names), 'act') : actionCode(a, major);

/** A delay in milliseconds, or by its name in a named machine. */
const renderDelay = (ms: number, names?: Names): string => {
  if (!names) return String(ms);
  names.delays.add(ms);
  return JSON.stringify(`wait${ms}`);
};

const actionCode = (a: ActionSpec, major: Major, names?: Names): string => {
  const p = params(major);
  switch (a.kind) {
    case 'inc':
      return `assign({ public: ${p} => ({ ...c.public, n: c.public.n + (e.by ?? 1) }) })`;
    case 'mix':
      return `assign(${p} => ({ public: { ...c.public, n: (c.public.n * 3 + 7) % 101 } }))`;
    case 'trace':
      return `assign({ public: ${p} => ({ ...c.public, trace: [...c.public.trace, ${JSON.stringify(a.label)}].slice(-6) }) })`;
    case 'secret':
      return `assign({ secret: ${p} => ({ k: (c.secret.k * 2 + (e.by ?? 0)) % 1009 }) })`;
    case 'rinc':
      return `assign({ public: ${p} => ({ ...c.public, ${a.key}: c.public.${a.key} + (e.by ?? 1) }) })`;
    case 'rmix':
      return `assign(${p} => ({ public: { ...c.public, ${a.key}: (c.public.${a.key} * 5 + 3) % 97 } }))`;
    case 'say': {
      const line = `${JSON.stringify(`L ${a.label} `)} + c.public.${a.key}`;
      return a.builtin ? `log(${p} => ${line})` : `${p} => console.log(${line})`;
    }
    case 'mutate':
      return `${p} => { c.public.${a.key} += 2; }`;
    case 'throwAction':
      return `${p} => { if (e.boom === ${a.site}) boom(${a.site}); }`;
    case 'throwAssign':
      return `assign({ public: ${p} => (e.boom === ${a.site} ? boom(${a.site}) : c.public) })`;
    case 'raise':
      return major === 4 ? `raise(${JSON.stringify(a.event)})` : `raise({ type: ${JSON.stringify(a.event)} })`;
    case 'schedule':
      return `${major === 4 ? 'send' : 'raise'}({ type: ${JSON.stringify(a.event)} }, { delay: ${renderDelay(a.delay, names)}, id: ${JSON.stringify(a.id)} })`;
    case 'cancel':
      return `cancel(${JSON.stringify(a.id)})`;
    case 'got': {
      const data = major === 4 ? 'e.data' : a.outcome === 'done' ? 'e.output' : 'e.error';
      return `assign({ public: ${p} => ({ ...c.public, ${a.key}: c.public.${a.key} + ${data} }) })`;
    }
    case 'choose': {
      const [even, odd] =
        a.key === 'n'
          ? [renderAction({ kind: 'inc' }, major), renderAction({ kind: 'mix' }, major)]
          : [renderAction({ kind: 'rinc', key: a.key }, major), renderAction({ kind: 'rmix', key: a.key }, major)];
      return major === 4
        ? `choose([{ cond: (c) => c.public.${a.key} % 2 === 0, actions: [${even}] }, { actions: [${odd}] }])`
        : `enqueueActions(({ context: c, enqueue }) => { if (c.public.${a.key} % 2 === 0) enqueue(${even}); else enqueue(${odd}); })`;
    }
  }
};

/**
 * A guard: inline, or by name. A named guard takes its bound as a parameter, as users write them: v4
 * a guard object (`{ type, k }`, read from the third argument's `cond`), v5 `{ type, params: { k } }`.
 */
const renderGuard = (g: GuardSpec, major: Major, names?: Names): string => {
  const bound = g.expr === 'byGt' ? g.k % 4 : g.expr === 'keyLt' ? 3 + g.k * 4 : undefined;
  const k = bound === undefined ? '' : names ? (major === 4 ? 'meta.cond.k' : 'params.k') : String(bound);
  const expr =
    g.expr === 'even'
      ? 'c.public.n % 2 === 0'
      : g.expr === 'odd'
        ? 'c.public.n % 2 === 1'
        : g.expr === 'byGt'
          ? `(e.by ?? 0) > ${k}`
          : `c.public.${g.key} < ${k}`;
  const thrown = g.site === null ? expr : `e.boom === ${g.site} ? boom(${g.site}) : ${expr}`;
  const checked = g.says === null ? thrown : `(console.log(${JSON.stringify(g.says)}), ${thrown})`;
  // (v4 negates inside the function; v5 wraps the guard in not())
  const body = g.negate && major === 4 ? `!(${checked})` : checked;
  let fn: string;
  if (!names) fn = `${params(major)} => ${body}`;
  else {
    const name = nameFor(names.guards, `${major === 4 ? '(c, e, meta)' : '({ context: c, event: e }, params)'} => ${body}`, 'guard');
    fn = bound === undefined ? name : major === 4 ? `{ type: ${name}, k: ${bound} }` : `{ type: ${name}, params: { k: ${bound} } }`;
  }
  if (g.negate && major === 5) fn = `not(${fn})`;
  if (g.inState === null) return `${major === 4 ? 'cond' : 'guard'}: ${fn}`;
  const id = JSON.stringify(`#${g.inState}`);
  return major === 4 ? `in: ${id}, cond: ${fn}` : `guard: and([stateIn(${id}), ${fn}])`;
};

const renderCandidates = (cands: Candidate[], major: Major, names?: Names): string =>
  `[${cands
    .map((c) => {
      const parts: string[] = [];
      if (c.target) parts.push(`target: ${JSON.stringify(`#${c.target.id}`)}`);
      if (c.flip) parts.push(major === 4 ? 'internal: true' : 'reenter: true');
      if (c.guard) parts.push(renderGuard(c.guard, major, names));
      if (c.actions.length) parts.push(`actions: [${c.actions.map((a) => renderAction(a, major, names)).join(', ')}]`);
      return `{ ${parts.join(', ')} }`;
    })
    .join(', ')}]`;

/** A child machine that ends as it starts, with its context's `x` doubled plus `value`. */
const renderChildMachine = (inv: InvokeSpec, major: Major): string => {
  const id = JSON.stringify(`child${inv.id}`);
  return major === 4
    ? `createMachine({ id: ${id}, predictableActionArguments: true, context: { x: 0 }, initial: "a", states: { a: { entry: assign({ x: (c) => c.x * 2 }), always: "b" }, b: { type: "final", data: (c) => c.x + ${inv.value} } } })`
    : `createMachine({ id: ${id}, context: ({ input }) => ({ x: input.x }), initial: "a", states: { a: { entry: assign({ x: ({ context }) => context.x * 2 }), always: "b" }, b: { type: "final" } }, output: ({ context }) => context.x + ${inv.value} })`;
};

/**
 * An invoked promise (v4 a function, v5 `fromPromise`) or child machine, inline or by name (v4
 * `services`, v5 `setup({ actors })`).
 */
const renderInvoke = (inv: InvokeSpec, major: Major, names?: Names): string => {
  const settle = (x: string) => `Promise.${inv.rejects ? 'reject' : 'resolve'}(${x} + ${inv.value})`;
  const creator = inv.machine
    ? renderChildMachine(inv, major)
    : major === 4
      ? `(c) => ${settle(`c.public.${inv.key} % 7`)}`
      : `fromPromise(({ input }) => ${settle('input.x')})`;
  let src = creator;
  if (names) {
    const name = `${inv.machine ? 'child' : 'promise'}${inv.id}`;
    src = JSON.stringify(name);
    names.actors.set(name, creator);
  }
  const counter = `c.public.${inv.key} % 7`;
  const input = major === 5 ? `, input: ({ context: c }) => ({ x: ${counter} })` : inv.machine ? `, data: (c) => ({ x: ${counter} })` : '';
  return `{ id: ${JSON.stringify(inv.id)}, src: ${src}${input}, onDone: ${renderCandidates(inv.onDone, major, names)}, onError: ${renderCandidates(inv.onError, major, names)} }`;
};

/** `predictable`: a v4 root gets `predictableActionArguments` (not for MachineSpec.features.unpredictable). */
const renderNode = (n: SNode, major: Major, indent: string, contextExpr: string, names?: Names, predictable = true): string => {
  const lines: string[] = [];
  const inner = `${indent}  `;
  if (n.parent === null) {
    lines.push(`${inner}id: "m",`);
    if (major === 4 && predictable) lines.push(`${inner}predictableActionArguments: true,`);
    lines.push(`${inner}context: ${contextExpr},`);
  }
  if (n.kind === 'history') {
    lines.push(`${inner}type: "history", history: ${JSON.stringify(n.history)},`);
    return `{\n${lines.join('\n')}\n${indent}}`;
  }
  if (n.kind === 'parallel' || n.kind === 'final') lines.push(`${inner}type: ${JSON.stringify(n.kind)},`);
  if (n.initial) lines.push(`${inner}initial: ${JSON.stringify(n.initial)},`);
  if (n.tags.length) lines.push(`${inner}tags: ${JSON.stringify(n.tags)},`);
  if (n.entry.length) lines.push(`${inner}entry: [${n.entry.map((a) => renderAction(a, major, names)).join(', ')}],`);
  if (n.exit.length) lines.push(`${inner}exit: [${n.exit.map((a) => renderAction(a, major, names)).join(', ')}],`);
  if (n.on.size) {
    lines.push(`${inner}on: {`);
    for (const [type, cands] of n.on) lines.push(`${inner}  ${type}: ${renderCandidates(cands, major, names)},`);
    lines.push(`${inner}},`);
  }
  if (n.always.length) lines.push(`${inner}always: ${renderCandidates(n.always, major, names)},`);
  if (n.after)
    lines.push(`${inner}after: { ${renderDelay(n.after.delay, names)}: ${renderCandidates(n.after.candidates, major, names)} },`);
  if (n.onDone.length) lines.push(`${inner}onDone: ${renderCandidates(n.onDone, major, names)},`);
  if (n.invoke) lines.push(`${inner}invoke: ${renderInvoke(n.invoke, major, names)},`);
  if (n.children.length) {
    lines.push(`${inner}states: {`);
    for (const c of n.children) lines.push(`${inner}  ${c.key}: ${renderNode(c, major, `${inner}  `, contextExpr, names)},`);
    lines.push(`${inner}},`);
  }
  return `{\n${lines.join('\n')}\n${indent}}`;
};

/** The context a new instance starts with: the machine's, with the create request's context shallow-merged over it. */
export const startingContext = (spec: MachineSpec): Record<string, unknown> => ({ ...spec.initialContext, ...(spec.createContext ?? {}) });

/**
 * The machine as statements that define `machine` with xstate's functions (`imports`) in scope; a
 * named machine's actions, guards and delays are referred to by name and implemented in its options
 * (v4) or `setup` (v5).
 * `context` replaces the machine's default context (the reference uses the merged starting context).
 */
export const renderBody = (spec: MachineSpec, major: Major, context: unknown = spec.initialContext): string => {
  const boom = 'function boom(site) { throw new Error("boom " + site); }\n';
  const predictable = !spec.features.unpredictable;
  if (!spec.features.named)
    return `${boom}const machine = createMachine(${renderNode(spec.root, major, '', JSON.stringify(context), undefined, predictable)});\n`;
  const names: Names = { actions: new Map(), guards: new Map(), delays: new Set(), actors: new Map() };
  const config = renderNode(spec.root, major, '', JSON.stringify(context), names, predictable);
  const table = (m: Map<string, string>) => `{\n${[...m].map(([code, name]) => `    ${name}: ${code},`).join('\n')}\n  }`;
  const delays = `{ ${[...names.delays].map((ms) => `wait${ms}: ${ms}`).join(', ')} }`;
  const actors = `{ ${[...names.actors].map(([name, creator]) => `${name}: ${creator}`).join(', ')} }`;
  const implementations = `{\n  actions: ${table(names.actions)},\n  guards: ${table(names.guards)},\n  delays: ${delays},\n  ${major === 4 ? 'services' : 'actors'}: ${actors},\n}`;
  return major === 4
    ? `${boom}const machine = createMachine(${config}, ${implementations});\n`
    : `${boom}const machine = setup(${implementations}).createMachine(${config});\n`;
};

const AUTHORIZERS = 'export const allowRead = () => true;\nexport const allowWrite = () => true;\n';

const imports = (major: Major) =>
  major === 4
    ? ['createMachine', 'assign', 'send', 'raise', 'cancel', 'choose', 'log']
    : ['createMachine', 'assign', 'raise', 'cancel', 'enqueueActions', 'and', 'not', 'stateIn', 'setup', 'fromPromise', 'log'];

/** A module for upload (or for bundling): imports xstate's functions from `specifier`. */
export const renderModule = (spec: MachineSpec, major: Major, specifier: string): string =>
  `import { ${imports(major).join(', ')} } from ${JSON.stringify(specifier)};\n${renderBody(spec, major)}export default machine;\n${AUTHORIZERS}`;

// ---------------------------------------------------------------------------------------------
// The reference: the test process's own xstate

export interface Observed {
  value: unknown;
  context: Record<string, unknown>;
  tags: string[];
  done: boolean;
}

/**
 * One record of the instance's history (`GET .../events`): the event and the state after it. Every
 * event the service took gets one (also one that changed nothing, and one sent after the machine was
 * done), and so does each delayed event that fired; raised events and eventless transitions are part
 * of the step of the event that caused them. `full`: the event as sent (a user's), else its type alone.
 */
export interface HistoryRecord {
  event: { type: string; [k: string]: unknown };
  state: unknown;
  full: boolean;
  /** Everything the machine showed after this event (what the answer says when the step does not wait for delayed events). */
  observed: Observed;
}

/** `logs`: the lines machine code wrote to the console in the step, its delayed events' included (a refused step's too: its code ran). */
export type Expectation =
  /** The event was taken: the service must answer this, and these are its history records. */
  | { kind: 'ok'; state: Observed; records: HistoryRecord[]; logs: string[] }
  /** Machine code threw: 400 machine-code-error, the instance unchanged. */
  | { kind: 'refused'; state: Observed; error: string; logs: string[] }
  /** The machine was already done: the event changes nothing. */
  | { kind: 'after-done'; state: Observed; records: HistoryRecord[]; logs: string[] };

export interface ReferenceRun {
  initial: Observed;
  /** xstate.init and the delayed events that fired while the new instance settled. */
  initialRecords: HistoryRecord[];
  /** What machine code wrote to the console as the instance started and settled. */
  initialLogs: string[];
  steps: Expectation[];
}

export interface XstateModules {
  v4: Record<string, unknown> & { interpret: (m: any, o?: any) => any; SimulatedClock: new () => any };
  v5: Record<string, unknown> & { createActor: (m: any, o?: any) => any; SimulatedClock: new () => any };
}

const machineFrom = (body: string, major: Major, xs: Record<string, unknown>): unknown => {
  const names = imports(major);
  // eslint-disable-next-line @typescript-eslint/no-implied-eval
  return new Function(...names, `${body}\nreturn machine;`)(...names.map((n) => xs[n]));
};

const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/**
 * Lets every settled promise's callbacks run: an invoked promise settles at once, and xstate sends its
 * done or error event a few microtasks later, well within these turns (a macrotask per simulated
 * millisecond cost seconds a run).
 */
const promisesRun = async () => {
  for (let i = 0; i < 16; i++) await Promise.resolve();
};

/**
 * Fires every pending delayed event, a millisecond at a time, letting invoked promises settle before
 * each (xstate 4's SimulatedClock fires a timer cancelled during the same increment anyway). None is
 * due past the settle window.
 */
const flush = async (clock: { timeouts: Map<unknown, unknown>; increment(ms: number): void }, promises: boolean) => {
  // (a machine without promises settles without them: a turn of the event loop per millisecond costs)
  if (promises) await promisesRun();
  for (let i = 0; i < 5000 && clock.timeouts.size > 0; i++) {
    clock.increment(1);
    if (promises) await promisesRun();
  }
  if (clock.timeouts.size > 0) throw new Error('the reference machine never settled');
};

/**
 * An invoked promise's done or error event: the service runs it within the step whose actions started
 * the promise (it settles at once), so it makes no history record of its own; the step's record holds
 * the state after it.
 */
const settledPromiseEvent = (type: string): boolean =>
  /^(done\.invoke\.|error\.platform\.|xstate\.done\.actor\.|xstate\.error\.actor\.)/.test(type);

interface RefActor {
  send(event: unknown): Promise<void>;
  observe(): Observed;
  error(): unknown;
  /** The history records since the last call. */
  takeRecords(): HistoryRecord[];
  stop(): void;
  /** The actor's persisted state (v4: its State as JSON; v5: its persisted snapshot). */
  persisted(): unknown;
}

const recordOf = (event: { type: string }, observed: Observed, user: unknown): HistoryRecord =>
  event === user
    ? { event: plain(event), state: observed.value, full: true, observed }
    : { event: { type: event.type }, state: observed.value, full: false, observed };

/** Adds the record of a step to `records`, or folds a settled promise's into the record of the step that started it. */
const noteRecord = (records: HistoryRecord[], event: { type: string }, observed: Observed, user: unknown): void => {
  const last = records.at(-1);
  if (last && settledPromiseEvent(event.type)) {
    last.state = observed.value;
    last.observed = observed;
  } else records.push(recordOf(event, observed, user));
};

const observe4 = (s: any): Observed => plain({ value: s.value, context: s.context, tags: [...s.tags].sort(), done: s.done === true });
const observe5 = (s: any): Observed => plain({ value: s.value, context: s.context, tags: [...s.tags].sort(), done: s.status === 'done' });

/**
 * `snapshot`: start from this persisted state (v4: a State's JSON) instead of the machine's initial one.
 * A copy of it, as a node reads a new one from storage each time: actions that change the context in
 * place would otherwise change the stored state too (also in a step that then throws).
 */
/** Reorders, in place, the keys of `value`'s objects as they are in `like` (as the service's restore does: src/sandbox/isolate/harness-pure-steps.js). */
const keepValueOrder = (value: unknown, like: unknown): void => {
  if (value === null || typeof value !== 'object' || like === null || typeof like !== 'object') return;
  const v = value as Record<string, unknown>;
  const l = like as Record<string, unknown>;
  const entries = [...Object.keys(l).filter((k) => Object.hasOwn(v, k)), ...Object.keys(v).filter((k) => !Object.hasOwn(l, k))].map(
    (k) => [k, v[k]] as const,
  );
  for (const k of Object.keys(v)) delete v[k];
  for (const [k, x] of entries) {
    v[k] = x;
    keepValueOrder(x, l[k]);
  }
};

const startReference = async (spec: MachineSpec, major: Major, xs: XstateModules, snapshot?: unknown): Promise<RefActor> => {
  const body = renderBody(spec, major, startingContext(spec));
  // (a child machine ends within the step; its done event may still take a microtask to come)
  const promises = spec.features.invokedPromise || spec.features.invokedMachine;
  if (major === 4) {
    const machine = machineFrom(body, 4, xs.v4);
    const clock = new xs.v4.SimulatedClock();
    // (xstate's `log` action writes through the logger, by default the console.log of when xstate loaded)
    const service = xs.v4.interpret(machine, { clock, logger: (...args: unknown[]) => console.log(...args) });
    let failure: unknown;
    let records: HistoryRecord[] = [];
    let user: unknown;
    service.onTransition((state: any) => noteRecord(records, state.event, observe4(state), user));
    // (restored as a node restores it: the stored State's actions, children and history left out, so nothing runs again)
    const stored = snapshot === undefined ? undefined : { ...(plain(snapshot) as object), actions: [], children: {}, history: undefined };
    service.start(stored === undefined ? undefined : (machine as any).resolveState((xs.v4.State as any).create(stored)));
    // (and, as a node does, with the regions of its value in the stored order, which xstate 4 takes them in)
    if (stored !== undefined) keepValueOrder(service.state.value, (snapshot as { value?: unknown }).value);
    await flush(clock, promises);
    return {
      async send(event) {
        user = event;
        try {
          service.send(event);
          await flush(clock, promises);
        } catch (e) {
          failure = e;
        }
      },
      takeRecords: () => {
        const taken = records;
        records = [];
        return taken;
      },
      observe: () => observe4(service.state),
      error: () => failure,
      stop: () => service.stop(),
      persisted: () => JSON.parse(JSON.stringify(service.state)),
    };
  }
  const machine = machineFrom(body, 5, xs.v5);
  const clock = new xs.v5.SimulatedClock();
  let records: HistoryRecord[] = [];
  let user: unknown;
  const inspect = (ev: any) => {
    if (ev.type === '@xstate.snapshot' && ev.actorRef === actor && ev.snapshot.status !== 'error')
      noteRecord(records, ev.event, observe5(ev.snapshot), user);
  };
  const logger = (...args: unknown[]) => console.log(...args);
  const actor = xs.v5.createActor(machine, { clock, inspect, logger, ...(snapshot === undefined ? {} : { snapshot: plain(snapshot) }) });
  actor.subscribe({ error: () => {} });
  actor.start();
  await flush(clock, promises);
  return {
    async send(event) {
      user = event;
      actor.send(event);
      await flush(clock, promises);
    },
    takeRecords: () => {
      const taken = records;
      records = [];
      return taken;
    },
    observe: () => observe5(actor.getSnapshot()),
    persisted: () => actor.getPersistedSnapshot(),
    error: () => {
      const s = actor.getSnapshot();
      return s.status === 'error' ? s.error : undefined;
    },
    stop: () => actor.stop(),
  };
};

/** Console lines of machine code while a reference runs (withConsole): kept while `heard` is set, else dropped. */
let heard: string[] | null = null;
const withConsole = async <T>(run: () => Promise<T>): Promise<T> => {
  const original = console.log;
  console.log = (...args: unknown[]) => void heard?.push(args.map(String).join(' '));
  try {
    return await run();
  } finally {
    console.log = original;
  }
};
/** The console lines written while `run` runs. */
const hearing = async (run: () => Promise<unknown>): Promise<string[]> => {
  const lines: string[] = [];
  heard = lines;
  try {
    await run();
  } finally {
    heard = null;
  }
  return lines;
};

/**
 * What the service must answer to each event: each step replays the accepted events on a fresh
 * interpreter (actor) and then sends the new one, so a step that throws leaves no trace in the
 * reference, as a refused event must leave none in the service.
 */
export const referenceRun = async (
  spec: MachineSpec,
  major: Major,
  events: Array<{ type: string }>,
  xs: XstateModules,
): Promise<ReferenceRun> =>
  withConsole(async () => {
    let first: RefActor | undefined;
    const initialLogs = await hearing(async () => (first = await startReference(spec, major, xs)));
    if (!first) throw new Error('the reference did not start');
    const initial = first.observe();
    const initialRecords = first.takeRecords();
    first.stop();
    const accepted: unknown[] = [];
    let current = initial;
    const steps: Expectation[] = [];
    for (const event of events) {
      if (current.done) {
        steps.push({ kind: 'after-done', state: current, records: [recordOf(event, current, event)], logs: [] });
        continue;
      }
      const actor = await startReference(spec, major, xs);
      for (const e of accepted) await actor.send(e);
      if (actor.error() !== undefined) throw new Error(`the reference failed replaying accepted events: ${String(actor.error())}`);
      actor.takeRecords();
      const logs = await hearing(() => actor.send(event));
      const error = actor.error();
      if (error !== undefined) steps.push({ kind: 'refused', state: current, error: String(error), logs });
      else {
        accepted.push(event);
        current = actor.observe();
        steps.push({ kind: 'ok', state: current, records: actor.takeRecords(), logs });
      }
      actor.stop();
    }
    return { initial, initialRecords, initialLogs, steps };
  });

/**
 * What xstate alone answers when each event goes to an actor restored from the state persisted after
 * the step before (as a node that keeps no actor live restores it: v4 `State.create` and
 * `resolveState`, v5 a persisted snapshot): the state after each event, or 'refused', with what machine
 * code wrote to the console in the step. The reference
 * settles each step (flush), so no delayed event is pending when a state is persisted (a persisted
 * state holds none).
 */
export const restoredRun = async (
  spec: MachineSpec,
  major: Major,
  events: Array<{ type: string }>,
  xs: XstateModules,
): Promise<Array<{ answer: Observed | 'refused'; logs: string[] }>> =>
  withConsole(async () => {
    const first = await startReference(spec, major, xs);
    let persisted = first.persisted();
    let done = first.observe().done;
    first.stop();
    const answers: Array<{ answer: Observed | 'refused'; logs: string[] }> = [];
    for (const event of events) {
      const actor = await startReference(spec, major, xs, persisted);
      const logs = done ? [] : await hearing(() => actor.send(event));
      if (actor.error() !== undefined) answers.push({ answer: 'refused', logs });
      else {
        const observed = actor.observe();
        answers.push({ answer: observed, logs });
        done = observed.done;
        persisted = actor.persisted();
      }
      actor.stop();
    }
    return answers;
  });
