import { conflict, notFound } from '../domain/errors.js';

/**
 * Creating an instance and deleting its machine exclude each other. The delete checks that the machine
 * has no instances, but an instance being created is not stored until its first commit, which comes
 * after machine code ran: without this the two could both succeed and leave an instance of a machine
 * (and versions) that no longer exists. On the embedded node counting in memory is enough; a cluster
 * node deleting a machine first closes the gate on every other node (`close`, cluster/forwarder.ts).
 */
export class MachineGate {
  private readonly creating = new Map<string, number>();
  private readonly deleting = new Set<string>();
  /** Gates closed for a deletion on another node, with the timer that opens them should it never say. */
  private readonly held = new Map<string, NodeJS.Timeout>();

  /** Marks a create of an instance of `machine` as started; call the answer when it is over. */
  enterCreate(orgId: string, machine: string): () => void {
    const key = keyOf(orgId, machine);
    if (this.deleting.has(key)) throw notFound(`machine ${machine} does not exist`);
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
    this.deleting.add(key);
    const timer = setTimeout(() => this.deleting.delete(key), holdMs);
    timer.unref();
    this.held.set(key, timer);
  }

  open(orgId: string, machine: string): void {
    const key = keyOf(orgId, machine);
    const timer = this.held.get(key);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.held.delete(key);
    this.deleting.delete(key);
  }

  /** Runs the deletion of `machine` while no create of its instances runs or starts. */
  async whileDeleting<T>(orgId: string, machine: string, work: () => Promise<T>): Promise<T> {
    const key = keyOf(orgId, machine);
    if (this.deleting.has(key)) throw conflict(`machine ${machine} is being deleted by another request`);
    if ((this.creating.get(key) ?? 0) > 0) {
      throw conflict(`machine ${machine} has an instance being created: try again once it is done, after deleting its instances`);
    }
    this.deleting.add(key);
    try {
      return await work();
    } finally {
      this.deleting.delete(key);
    }
  }
}

const keyOf = (orgId: string, machine: string): string => `${orgId}\u0000${machine}`;
