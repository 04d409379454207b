import { conflict } from '../domain/errors.js';
import { withinMs } from '../domain/within-ms.js';

/**
 * Creating an instance and deleting its machine exclude each other. The delete checks that the machine
 * has no instances, but an instance being created is not stored until its first commit, which comes
 * after machine code ran: without this the two could both succeed and leave an instance of a machine
 * (and versions) that no longer exists. On the embedded node counting in memory is enough; a cluster
 * node deleting a machine first closes the gate on every other node (`close`, cluster/forwarder.ts).
 */
export class MachineGate {
  private readonly creating = new Map<string, number>();
  /** Deletions running (here, or on another node with the gate closed here), each with its end. */
  private readonly deleting = new Map<string, { over: Promise<void>; end: () => void; here: boolean }>();
  /** Gates closed for a deletion on another node, with the timer that opens them should it never say. */
  private readonly held = new Map<string, NodeJS.Timeout>();

  constructor(private readonly createWaitsMs = CREATE_WAITS_MS) {}

  /**
   * Marks a create of an instance of `machine` as started, once no deletion of the machine runs on this
   * node (waited for, CREATE_WAITS_MS at most: a create that came during one learns after it whether
   * the machine is still there, rather than a 404 for a machine whose deletion then failed); during one
   * run by another node, a 409 that says to retry. Call the answer when the create is over.
   */
  async enterCreate(orgId: string, machine: string): Promise<() => void> {
    const key = keyOf(orgId, machine);
    const until = Date.now() + this.createWaitsMs;
    for (let deletion = this.deleting.get(key); deletion !== undefined; deletion = this.deleting.get(key)) {
      // (one run by another node ends there before this node's catalog may have applied it: not waited for)
      if (!deletion.here || Date.now() >= until) throw conflict(`machine ${machine} is being deleted; retry if it still exists`);
      await withinMs(deletion.over, until - Date.now(), () => undefined);
    }
    this.creating.set(key, (this.creating.get(key) ?? 0) + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const count = (this.creating.get(key) ?? 1) - 1;
      if (count > 0) this.creating.set(key, count);
      else this.creating.delete(key);
    };
  }

  /**
   * Closes the gate for a deletion run elsewhere (another cluster node): refused (409) while a create
   * runs here; closed until `open`, or `holdMs` at most should that node never say.
   */
  close(orgId: string, machine: string, holdMs: number): void {
    const key = keyOf(orgId, machine);
    if (this.deleting.has(key)) throw conflict(`machine ${machine} is being deleted by another request`);
    if ((this.creating.get(key) ?? 0) > 0) {
      throw conflict(`machine ${machine} has an instance being created: try again once it is done, after deleting its instances`);
    }
    this.startDeleting(key, false);
    const timer = setTimeout(() => this.endDeleting(key), holdMs);
    timer.unref();
    this.held.set(key, timer);
  }

  open(orgId: string, machine: string): void {
    const key = keyOf(orgId, machine);
    const timer = this.held.get(key);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.held.delete(key);
    this.endDeleting(key);
  }

  /** Runs the deletion of `machine` while no create of its instances runs or starts. */
  async whileDeleting<T>(orgId: string, machine: string, work: () => Promise<T>): Promise<T> {
    const key = keyOf(orgId, machine);
    if (this.deleting.has(key)) throw conflict(`machine ${machine} is being deleted by another request`);
    if ((this.creating.get(key) ?? 0) > 0) {
      throw conflict(`machine ${machine} has an instance being created: try again once it is done, after deleting its instances`);
    }
    this.startDeleting(key, true);
    try {
      return await work();
    } finally {
      this.endDeleting(key);
    }
  }

  private startDeleting(key: string, here: boolean): void {
    let end = (): void => undefined;
    const over = new Promise<void>((resolve) => (end = resolve));
    this.deleting.set(key, { over, end, here });
  }

  private endDeleting(key: string): void {
    this.deleting.get(key)?.end();
    this.deleting.delete(key);
  }
}

const keyOf = (orgId: string, machine: string): string => `${orgId}\u0000${machine}`;

/** How long a create waits for a deletion of its machine to end (a deletion checks and removes records: milliseconds). */
const CREATE_WAITS_MS = 5_000;
