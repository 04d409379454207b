import type { NatsConnection, Subscription } from '@nats-io/transport-node';
import { withinMs } from '../domain/within-ms.js';

/**
 * Where a node is in its life: `joining` while it catches up the partitions it is to own (it owns none
 * yet), `ready` once it owns its share, `draining` while it hands its share over before it leaves (it
 * still owns it, and the others catch up what they are to take from it).
 */
export type MemberState = 'joining' | 'ready' | 'draining';

/** A node as the others see it: its id, the URL it serves the API on, and when it last beat. */
interface Member {
  id: string;
  url: string;
  /** When that node's process started (a restart under the same id shows as a new value). */
  startedAt: number;
  lastSeenAt: number;
  state: MemberState;
  /** The draining members whose share this node has caught up (it can take it over warm). */
  warm: string[];
  /** The members that node counts as owning (its `current`); absent from a node that does not say. */
  owners?: string[];
  /** The members that node heard beat itself lately (see vouchedFor); absent from a node that does not say. */
  heard?: string[];
}

interface MembershipOptions {
  /** Names the cluster: nodes on one NATS with different names do not see each other. */
  cluster: string;
  self: { id: string; url: string };
  /** How often each node says it is alive. */
  heartbeatMs: number;
  /** A node not heard from for this many beats leaves every node's view. */
  missedHeartbeats: number;
  now?: () => number;
  /** Whether this node owns its share from the start (true) or joins first and says when it is ready (setReady). */
  readyAtStart?: boolean;
}

/**
 * A node that turned ready owns its share once every owning member said it counts it as an owner; one
 * that does not say so within this many beats, and never before a hand-over's bound and two beats have
 * passed (a node of a release that does not tell its view, one about to be dropped), is not waited for
 * longer.
 */
const TAKEOVER_WAIT_BEATS = 4;

/** The longest a member waits for its work on the instances it gave away before it names their new owner (handOverWith). */
export const HANDOVER_MAX_MS = 500;

/** The ids a beat's list holds, sorted; undefined when it holds no list. */
const idsOf = (value: unknown): string[] | undefined =>
  Array.isArray(value) ? value.filter((id): id is string => typeof id === 'string').sort() : undefined;

/** A member whose answers are slow is checked (see Membership.suspect) at most this often. */
const SUSPECT_INTERVAL_MS = 1_000;

type ChangeListener = (members: readonly string[]) => void;

interface Beat {
  id: string;
  url: string;
  startedAt: number;
  /** A node that is leaving says so, and is dropped at once instead of after its missed beats. */
  leaving?: true;
  /** Absent from a node that does not say (it owns its share). */
  state?: MemberState;
  warm?: string[];
  /** The sender's view of the owning members: a node that turned ready waits for the others' (see ownsShare). */
  owners?: string[];
  /** The members whose own beats the sender heard within the drop window (see vouchedFor). */
  heard?: string[];
}

/**
 * Cluster membership over core NATS: every node publishes a heartbeat on one subject and keeps the
 * view of who beat recently. A node seeing a newcomer beats back at once, so a joining node knows the
 * cluster within a round trip rather than a beat. Views may differ for a moment while a node joins or
 * fails; writes are fenced by the log (JetStream's expected sequence), not by the view.
 *
 * The view that owns (`current`) holds the members that are ready or draining: a node joins first,
 * catches up what it is to own, then says it is ready, so it takes its share warm; a node that leaves
 * says it is draining and waits until the others say they caught up its share (`warm`) before it goes.
 *
 * A node that turns ready counts itself as an owner only once each owning member's beat names it among
 * theirs (each beats back at once when its view changes), or after TAKEOVER_WAIT_BEATS: until then a
 * member that has not heard it yet still serves the partitions moving to it, from its copy, and the
 * newcomer must not commit to them meanwhile (a timer it fired would be missing from the reads the old
 * owner answers).
 *
 * A member this node does not hear, but another member it hears does, stays in its view (vouchedFor):
 * a link that fails one way (a partition healed with one route's interest lost, as a probe saw) must
 * not make two nodes own one member's partitions for as long as it lasts. Requests through this node
 * to that member's instances fail meanwhile, which its /health says. A member that is gone is heard by
 * no one: each node that finds it gone stops vouching for it at once and says so in a beat.
 */
export class Membership {
  private readonly members = new Map<string, Member>();
  private readonly listeners = new Set<ChangeListener>();
  private readonly startedAt: number;
  private readonly now: () => number;
  private subscription: Subscription | undefined;
  private beating: NodeJS.Timeout | undefined;
  private view: readonly string[] = [];
  /** What the listeners were last told of: every member's id, state and warm list. */
  private told = '';
  private state: MemberState;
  private warm: string[] = [];
  /** The owners this node's beats name: its view, but a member it gained only once what it handed over settled (handOverWith). */
  private announced: readonly string[] = [];
  private handOver: (() => Promise<void>) | undefined;
  private handingOver = false;
  private stopped = false;
  /** When this node turned ready, until the others all count it as an owner (see ownsShare); unset once it owns its share. */
  private readySince: number | undefined;
  /** When the beat timer last ran: a gap past the drop window means this process was stopped or stalled. */
  private lastTickAt = 0;
  private readonly stallListeners = new Set<() => void>();
  private departures: Subscription | undefined;
  /** Asks whether a member is gone (see suspect); none until the node can ask (confirmDeparturesWith). */
  private confirmGone: ((id: string, checkedElsewhere: boolean) => Promise<boolean>) | undefined;
  /** Members being checked now, and when each was last (see suspect). */
  private readonly checking = new Set<string>();
  private readonly checkedAt = new Map<string, number>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: MembershipOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.startedAt = this.now();
    this.state = options.readyAtStart === false ? 'joining' : 'ready';
  }

  private get subject(): string {
    return `statehold.${this.options.cluster}.members`;
  }

  /** Where a node says which member it found gone before its missed beats said so (see suspect). */
  private get departuresSubject(): string {
    return `statehold.${this.options.cluster}.departures`;
  }

  /** Joins: listens, beats, and resolves once the others had two beats' time to answer. */
  async start(): Promise<void> {
    const { self } = this.options;
    this.members.set(self.id, { ...self, startedAt: this.startedAt, lastSeenAt: this.now(), state: this.state, warm: [] });
    this.refreshView();
    this.subscription = this.nc.subscribe(this.subject, {
      callback: (error, message) => {
        if (error) return;
        let beat: Beat;
        try {
          beat = message.json<Beat>();
        } catch {
          return;
        }
        if (typeof beat?.id !== 'string' || beat.id === self.id) return;
        this.heard(beat);
      },
    });
    this.departures = this.nc.subscribe(this.departuresSubject, {
      callback: (error, message) => {
        if (error) return;
        let said: { by?: unknown; gone?: unknown };
        try {
          said = message.json();
        } catch {
          return;
        }
        if (typeof said?.gone === 'string' && said.by !== self.id) this.suspect(said.gone, 'told');
      },
    });
    this.beat();
    this.lastTickAt = this.now();
    this.beating = setInterval(() => this.tick(), this.options.heartbeatMs);
    this.beating.unref();
    await this.nc.flush();
    await new Promise((resolve) => setTimeout(resolve, this.options.heartbeatMs * 2));
  }

  /** The URL this node serves the API on, once it listens (sent with the next beat). */
  setUrl(url: string): void {
    this.options.self.url = url;
    const self = this.members.get(this.options.self.id);
    if (self) self.url = url;
  }

  /**
   * Whether this node went longer than the drop window without beating (it was stopped, SIGSTOP, or
   * its event loop stalled), up to the beat that ends it: the others may have dropped it meanwhile and
   * taken its instances over, while its own view still says it owns them.
   */
  stalled(): boolean {
    return this.beating !== undefined && this.now() - this.lastTickAt > this.window();
  }

  /** Called when a beat finds that this node was stalled past the drop window (see stalled). */
  onStall(listener: () => void): () => void {
    this.stallListeners.add(listener);
    return () => this.stallListeners.delete(listener);
  }

  /** The members that own a share (ready or draining), sorted: this node included once it is ready. */
  current(): readonly string[] {
    return this.view;
  }

  /** Every live member's id, sorted, joining ones included. */
  all(): readonly string[] {
    return [...this.members.keys()].sort();
  }

  /** This node's state. */
  get self(): MemberState {
    return this.state;
  }

  /** The members that are draining, sorted. */
  draining(): readonly string[] {
    return this.all().filter((id) => this.members.get(id)?.state === 'draining');
  }

  /** The members that are joining (catching up what they are to own), sorted, this node included while it joins. */
  joining(): readonly string[] {
    return this.all().filter((id) => this.members.get(id)?.state === 'joining');
  }

  /** Whether every other owning member says it caught up the share of draining member `id`. */
  warmFor(id: string): boolean {
    return this.view.every((member) => member === id || this.members.get(member)?.warm.includes(id) === true);
  }

  /**
   * What this node waits for before its beats name a member it newly counts as an owner (the newcomer
   * owns its share only then): the work under way on the instances it gave away, so that the newcomer
   * does not answer for one of them while this node may still commit to it. HANDOVER_MAX_MS at most.
   */
  handOverWith(settle: () => Promise<void>): void {
    this.handOver = settle;
  }

  /** This node owns its share from now on (it caught up what it is to own). */
  setReady(): void {
    this.setState('ready');
  }

  /**
   * This node is leaving: it keeps its share until the others caught it up (warmFor), then stops. False
   * when it owns no share yet (joining, or not yet counted by the others): it has nothing to hand over,
   * and a draining member is an owner to the others, of partitions this one may never have caught up.
   */
  drain(): boolean {
    if (!this.view.includes(this.options.self.id)) return false;
    this.setState('draining');
    return true;
  }

  /** The draining members whose share this node caught up (told to the others with each beat). */
  setWarm(ids: readonly string[]): void {
    const sorted = [...ids].sort();
    if (sorted.join(',') === this.warm.join(',')) return;
    this.warm = sorted;
    const self = this.members.get(this.options.self.id);
    if (self) self.warm = sorted;
    this.beat();
  }

  private setState(state: MemberState): void {
    if (this.state === state) return;
    if (state === 'ready' && this.state === 'joining') this.readySince = this.now();
    this.state = state;
    const self = this.members.get(this.options.self.id);
    if (self) self.state = state;
    this.beat();
    this.refreshView();
  }

  member(id: string): Member | undefined {
    return this.members.get(id);
  }

  /**
   * How this node checks a suspected member (see suspect): resolves true when it is gone;
   * `checkedElsewhere` when another node found so already (one quick look is enough then).
   */
  confirmDeparturesWith(confirm: (id: string, checkedElsewhere: boolean) => Promise<boolean>): void {
    this.confirmGone = confirm;
  }

  /**
   * Member `id` may be gone: a request to it found no one listening on its subject (NATS says so at
   * once), or waits long for its answer. Its process may have died, or it may be cut off from NATS;
   * either way it serves nothing now. Rather than wait for its missed beats (a second by default) while
   * its instances answer nothing, this node checks (confirmGone) and, if it is gone, drops it from its
   * view and tells the others, which check for themselves, so that the new owners of its partitions take
   * them at once. A member that was only away a moment beats again and is back, as after a drop.
   * On a slow answer alone, checked at most once per SUSPECT_INTERVAL_MS per member.
   */
  suspect(id: string, why: 'no-responders' | 'slow' | 'told'): void {
    const member = this.members.get(id);
    if (!member || id === this.options.self.id || member.state === 'joining' || !this.confirmGone || this.checking.has(id)) return;
    const now = this.now();
    // (a slow answer is a weak sign, checked now and then; no one listening, or another node's word, at once)
    if (why === 'slow' && now - (this.checkedAt.get(id) ?? -Infinity) < SUSPECT_INTERVAL_MS) return;
    const checkedElsewhere = why === 'told';
    this.checking.add(id);
    this.checkedAt.set(id, now);
    const seen = member.lastSeenAt;
    void this.confirmGone(id, checkedElsewhere)
      .then((gone) => {
        // (not if it beat meanwhile, or left, or came back as a new process)
        const found = this.members.get(id);
        if (!gone || !found || found.lastSeenAt !== seen) return;
        if (!checkedElsewhere) this.publishOn(this.departuresSubject, { by: this.options.self.id, gone: id });
        // (no longer heard here, so no longer vouched for by this node; dropped unless another hears it)
        found.lastSeenAt = Number.NEGATIVE_INFINITY;
        this.sweep();
        this.beat();
      })
      .catch(() => undefined)
      .finally(() => this.checking.delete(id));
  }

  /** Called with the new view whenever a member joins or leaves. */
  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Leaves: tells the others (they drop this node at once) and stops beating. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.beating) clearInterval(this.beating);
    this.beating = undefined;
    // (this node owns nothing from now on, in its own view too)
    this.members.delete(this.options.self.id);
    this.refreshView();
    if (!this.nc.isClosed()) {
      this.publish({ ...this.options.self, startedAt: this.startedAt, leaving: true });
      await this.nc.flush().catch(() => undefined);
    }
    this.subscription?.unsubscribe();
    this.subscription = undefined;
    this.departures?.unsubscribe();
    this.departures = undefined;
  }

  private heard(beat: Beat): void {
    if (this.stopped) return;
    if (beat.leaving) {
      if (this.members.delete(beat.id)) this.refreshView();
      return;
    }
    const known = this.members.get(beat.id);
    const state: MemberState = beat.state === 'joining' || beat.state === 'draining' ? beat.state : 'ready';
    const warm = idsOf(beat.warm) ?? [];
    const owners = idsOf(beat.owners);
    const heard = idsOf(beat.heard);
    this.members.set(beat.id, {
      id: beat.id,
      url: String(beat.url),
      startedAt: Number(beat.startedAt),
      lastSeenAt: this.now(),
      state,
      warm,
      ...(owners ? { owners } : {}),
      ...(heard ? { heard } : {}),
    });
    // (a member only this one vouched for goes once it no longer does)
    if (known && known.heard?.join(',') !== heard?.join(',')) this.sweep();
    const viewBefore = this.view;
    if (!known || known.state !== state || known.warm.join(',') !== warm.join(',') || this.readySince !== undefined) this.refreshView();
    // A newcomer learns of this node now rather than at its next beat; a node whose view changed says so
    // at once (a member that turned ready waits for that before it owns its share).
    if (!known || this.view !== viewBefore) this.beat();
  }

  private beat(): void {
    // (not after stop: a beat then would bring this node back into the others' views)
    if (this.stopped || this.nc.isClosed()) return;
    const self = this.members.get(this.options.self.id);
    if (self) self.lastSeenAt = this.now();
    this.publish({
      ...this.options.self,
      startedAt: this.startedAt,
      state: this.state,
      warm: this.warm,
      owners: [...this.announced],
      heard: this.heardLately(),
    });
  }

  private publish(beat: Beat): void {
    this.publishOn(this.subject, beat);
  }

  private publishOn(subject: string, message: object): void {
    try {
      this.nc.publish(subject, JSON.stringify(message));
    } catch {
      // (closed or draining: the others will miss our beats, as they should)
    }
  }

  private window(): number {
    return this.options.heartbeatMs * this.options.missedHeartbeats;
  }

  private tick(): void {
    const now = this.now();
    const stalled = now - this.lastTickAt > this.window();
    this.lastTickAt = now;
    this.beat();
    if (!stalled) {
      this.sweep();
      // (waited long enough for the members that did not say they count this node: see ownsShare)
      if (this.readySince !== undefined && now - this.readySince >= this.takeoverWaitMs()) this.refreshView();
      return;
    }
    // This node, not the others, went silent: their beats of that time wait unread behind this one.
    // They get a window from now, rather than all being dropped (which would make this node the owner
    // of every instance until it hears them again).
    for (const member of this.members.values()) member.lastSeenAt = Math.max(member.lastSeenAt, now);
    for (const listener of [...this.stallListeners]) listener();
  }

  private sweep(): void {
    const oldest = this.now() - this.window();
    const silent = [...this.members.values()].filter((member) => member.id !== this.options.self.id && member.lastSeenAt < oldest);
    let changed = false;
    for (const member of silent) {
      if (this.vouchedFor(member.id, oldest)) continue;
      this.members.delete(member.id);
      changed = true;
    }
    if (changed) this.refreshView();
  }

  /** The other members this node heard beat within the drop window: what its beats vouch for. */
  private heardLately(): string[] {
    const oldest = this.now() - this.window();
    const self = this.options.self.id;
    return [...this.members.values()].filter((member) => member.id !== self && member.lastSeenAt >= oldest).map((member) => member.id);
  }

  /** Whether a member this node heard within the window says it heard member `id` within its own. */
  private vouchedFor(id: string, oldest: number): boolean {
    const self = this.options.self.id;
    for (const member of this.members.values())
      if (member.id !== self && member.id !== id && member.lastSeenAt >= oldest && member.heard?.includes(id)) return true;
    return false;
  }

  /**
   * Whether this node counts itself as an owner: not while joining; once ready, when every other owning
   * member's last beat named it among theirs, or it waited TAKEOVER_WAIT_BEATS (see the class comment).
   */
  private ownsShare(): boolean {
    if (this.state === 'joining') return false;
    if (this.readySince === undefined) return true;
    const self = this.options.self.id;
    const counted = [...this.members.values()].every(
      (member) => member.id === self || member.state === 'joining' || member.owners?.includes(self) === true,
    );
    const waited = this.now() - this.readySince >= this.takeoverWaitMs();
    if (counted || waited) this.readySince = undefined;
    return this.readySince === undefined;
  }

  /** Names the view in the beats from now on; one with a member gained, once the hand-over settled (handOverWith). */
  private announceOwners(): void {
    const self = this.options.self.id;
    const gained = this.view.some((id) => id !== self && !this.announced.includes(id));
    if (!gained || !this.handOver) {
      this.announced = this.view;
      return;
    }
    // (a hand-over under way announces the view it settled for, then looks again; members that left
    // meanwhile are no longer named)
    const stillHere = (ids: readonly string[]) => ids.filter((id) => this.view.includes(id));
    if (this.handingOver) {
      this.announced = stillHere(this.announced);
      return;
    }
    this.handingOver = true;
    const settling = this.view;
    void withinMs(
      this.handOver().catch(() => undefined),
      HANDOVER_MAX_MS,
      () => undefined,
    ).then(() => {
      this.handingOver = false;
      if (this.stopped) return;
      this.announced = stillHere(settling);
      this.announceOwners();
      this.beat();
    });
  }

  /** How long a node that turned ready waits for a member that does not name it (see TAKEOVER_WAIT_BEATS). */
  private takeoverWaitMs(): number {
    const beat = this.options.heartbeatMs;
    return Math.max(beat * TAKEOVER_WAIT_BEATS, HANDOVER_MAX_MS + 2 * beat);
  }

  private refreshView(): void {
    const self = this.options.self.id;
    const view = [...this.members.values()]
      .filter((member) => member.state !== 'joining' && (member.id !== self || this.ownsShare()))
      .map((member) => member.id)
      .sort();
    // (the same array while nothing changed: `heard` compares by identity)
    if (view.join(',') !== this.view.join(',')) {
      this.view = view;
      this.announceOwners();
    }
    const told = [...this.members.values()]
      .map((member) => `${member.id}:${member.state}:${member.warm.join('+')}`)
      .sort()
      .join(',')
      .concat(' owners ', this.view.join(','));
    if (told === this.told) return;
    this.told = told;
    for (const listener of [...this.listeners]) listener(this.view);
  }
}
