import type { MemberState } from './membership.js';
import { ownerOf, rankedOf } from './rendezvous.js';

/** What ownership is computed from: this node's view of the members. */
export interface MembershipView {
  /** The members that own a share (ready or draining), sorted. */
  current(): readonly string[];
  /** The members that are draining, sorted. */
  draining(): readonly string[];
  /** The members that are joining, sorted. */
  joining(): readonly string[];
  /** This node's own state. */
  readonly self: MemberState;
}

interface PartitionOwnershipOptions {
  /** This node's id. */
  self: string;
  /** How many partitions instances are divided into. */
  count: number;
  /** How many nodes besides the owner hold each partition caught up, to take it over warm if the owner dies (0 or 1). */
  standbys: number;
  view: MembershipView;
}

/**
 * Who owns which partition (design.md §6.2): rendezvous hashing of partitions over the members that own
 * a share, so a membership change moves only the partitions of the member that came or went. A node
 * holds (follows, keeps in its LMDB) more than it owns: what it is to own once the joining members
 * are ready and the draining ones gone, so it takes that over warm; and, with standbys, the
 * partitions it is next in line for.
 */
export class PartitionOwnership {
  constructor(private readonly options: PartitionOwnershipOptions) {}

  get count(): number {
    return this.options.count;
  }

  /** The owner of a partition in this node's view (or among `members`). */
  ownerOf(partition: number, members: readonly string[] = this.options.view.current()): string | undefined {
    return ownerOf(keyOf(partition), members);
  }

  /** Whether this node owns every one of these partitions now. */
  ownsAll(partitions: readonly number[]): boolean {
    const members = this.options.view.current();
    return partitions.every((partition) => this.ownerOf(partition, members) === this.options.self);
  }

  /** The partitions this node owns now. */
  owned(): Set<number> {
    const members = this.options.view.current();
    const owned = new Set<number>();
    for (let partition = 0; partition < this.options.count; partition++)
      if (this.ownerOf(partition, members) === this.options.self) owned.add(partition);
    return owned;
  }

  /**
   * The members that will own a share once the draining ones are gone and the joining ones (this node
   * among them, unless draining) are ready: nodes that start together each catch up only their share.
   */
  future(): string[] {
    const { view, self } = this.options;
    const draining = new Set(view.draining());
    const staying = new Set([...view.current(), ...view.joining()].filter((id) => !draining.has(id)));
    if (view.self !== 'draining') staying.add(self);
    return [...staying].sort();
  }

  /** The partitions this node is to hold: owned now, owned in the future, and those it stands by for. */
  held(): Set<number> {
    const held = this.needed();
    for (const partition of this.standingBy()) held.add(partition);
    return held;
  }

  /** The partitions this node must hold: owned now, or to own once the joining members are ready and the draining ones gone. */
  needed(): Set<number> {
    const { self, count } = this.options;
    const now = this.options.view.current();
    const future = this.future();
    const needed = new Set<number>();
    for (let partition = 0; partition < count; partition++)
      if (this.ownerOf(partition, now) === self || this.ownerOf(partition, future) === self) needed.add(partition);
    return needed;
  }

  /** With standbys, the partitions this node is next in line for (it takes them over warm if their owner dies), but not those it needs. */
  standingBy(): Set<number> {
    const { self, count, standbys } = this.options;
    const standing = new Set<number>();
    if (standbys === 0) return standing;
    const now = this.options.view.current();
    const future = this.future();
    for (let partition = 0; partition < count; partition++) {
      const ranked = rankedOf(keyOf(partition), future, 1 + standbys);
      if (ranked[0] !== self && ranked.includes(self) && this.ownerOf(partition, now) !== self) standing.add(partition);
    }
    return standing;
  }

  /** The draining members every partition of which that this node is to take is caught up here (`ready`). */
  warmFor(ready: ReadonlySet<number>): string[] {
    const { self, count } = this.options;
    const now = this.options.view.current();
    const future = this.future();
    return this.options.view.draining().filter((id) => {
      for (let partition = 0; partition < count; partition++)
        if (this.ownerOf(partition, now) === id && this.ownerOf(partition, future) === self && !ready.has(partition)) return false;
      return true;
    });
  }
}

const keyOf = (partition: number): string => `partition/${partition}`;
