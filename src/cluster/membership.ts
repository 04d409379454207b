import type { NatsConnection, Subscription } from '@nats-io/transport-node';

/** A node as the others see it: its id, the URL it serves the API on, and when it last beat. */
interface Member {
  id: string;
  url: string;
  /** When that node's process started (a restart under the same id shows as a new value). */
  startedAt: number;
  lastSeenAt: number;
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
}

type ChangeListener = (members: readonly string[]) => void;

interface Beat {
  id: string;
  url: string;
  startedAt: number;
  /** A node that is leaving says so, and is dropped at once instead of after its missed beats. */
  leaving?: true;
}

/**
 * Cluster membership over core NATS: every node publishes a heartbeat on one subject and keeps the
 * view of who beat recently. A node seeing a newcomer beats back at once, so a joining node knows the
 * cluster within a round trip rather than a beat. Views may differ for a moment while a node joins or
 * fails; writes are fenced by the log (JetStream's expected sequence), not by the view.
 */
export class Membership {
  private readonly members = new Map<string, Member>();
  private readonly listeners = new Set<ChangeListener>();
  private readonly startedAt: number;
  private readonly now: () => number;
  private subscription: Subscription | undefined;
  private beating: NodeJS.Timeout | undefined;
  private view: readonly string[] = [];
  /** When the beat timer last ran: a gap past the drop window means this process was stopped or stalled. */
  private lastTickAt = 0;
  private readonly stallListeners = new Set<() => void>();

  constructor(
    private readonly nc: NatsConnection,
    private readonly options: MembershipOptions,
  ) {
    this.now = options.now ?? Date.now;
    this.startedAt = this.now();
  }

  private get subject(): string {
    return `statehold.${this.options.cluster}.members`;
  }

  /** Joins: listens, beats, and resolves once the others had two beats' time to answer. */
  async start(): Promise<void> {
    const { self } = this.options;
    this.members.set(self.id, { ...self, startedAt: this.startedAt, lastSeenAt: this.now() });
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

  /** The live members' ids, sorted (this node included). */
  current(): readonly string[] {
    return this.view;
  }

  member(id: string): Member | undefined {
    return this.members.get(id);
  }

  /** Called with the new view whenever a member joins or leaves. */
  onChange(listener: ChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Leaves: tells the others (they drop this node at once) and stops beating. */
  async stop(): Promise<void> {
    if (this.beating) clearInterval(this.beating);
    this.beating = undefined;
    if (!this.nc.isClosed()) {
      this.publish({ ...this.options.self, startedAt: this.startedAt, leaving: true });
      await this.nc.flush().catch(() => undefined);
    }
    this.subscription?.unsubscribe();
    this.subscription = undefined;
  }

  private heard(beat: Beat): void {
    if (beat.leaving) {
      if (this.members.delete(beat.id)) this.refreshView();
      return;
    }
    const known = this.members.get(beat.id);
    this.members.set(beat.id, { id: beat.id, url: String(beat.url), startedAt: Number(beat.startedAt), lastSeenAt: this.now() });
    if (!known) {
      // A newcomer learns of this node now rather than at its next beat.
      this.beat();
      this.refreshView();
    }
  }

  private beat(): void {
    if (this.nc.isClosed()) return;
    const self = this.members.get(this.options.self.id);
    if (self) self.lastSeenAt = this.now();
    this.publish({ ...this.options.self, startedAt: this.startedAt });
  }

  private publish(beat: Beat): void {
    try {
      this.nc.publish(this.subject, JSON.stringify(beat));
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
    let changed = false;
    for (const [id, member] of this.members) {
      if (id !== this.options.self.id && member.lastSeenAt < oldest) {
        this.members.delete(id);
        changed = true;
      }
    }
    if (changed) this.refreshView();
  }

  private refreshView(): void {
    this.view = [...this.members.keys()].sort();
    for (const listener of [...this.listeners]) listener(this.view);
  }
}
