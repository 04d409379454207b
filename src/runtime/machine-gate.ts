import { conflict, notFound } from '../domain/errors.js';

/**
 * Creating an instance and deleting its machine exclude each other. The delete checks that the machine
 * has no instances, but an instance being created is not stored until its first commit, which comes
 * after machine code ran: without this the two could both succeed and leave an instance of a machine
 * (and versions) that no longer exists. This node is the only writer of its data dir, so counting in
 * memory is enough.
 */
export class MachineGate {
  private readonly creating = new Map<string, number>();
  private readonly deleting = new Set<string>();

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
