import type { JsonObject, MachineEvent } from '../domain/machine-state.js';
import type { InstanceHead, InstanceStatus } from '../store/instance-store.js';
import type { CreateRequest } from './instance-runtime.js';

/**
 * What the API asks of an instance's owner: the writes, and the read that runs its authorizer against
 * the committed state. The embedded node's InstanceRuntime is it; a cluster node's forwarder is too, and
 * runs each call on the instance's owner, wherever that is (design.md §6.1).
 */
export interface InstanceWrites {
  create(request: CreateRequest): Promise<InstanceHead>;
  read(orgId: string, machine: string, name: string, authContext: JsonObject): Promise<InstanceHead>;
  send(orgId: string, machine: string, name: string, event: MachineEvent, authContext: JsonObject): Promise<InstanceHead>;
  setStatus(orgId: string, machine: string, name: string, status: InstanceStatus): Promise<void>;
  /** Records the version the instance is to be upgraded to; 400 no-migration-path when no chain of migrations leads there. */
  setTargetVersion(orgId: string, machine: string, name: string, targetVersionId: string): Promise<void>;
  delete(orgId: string, machine: string, name: string): Promise<boolean>;
  /** Runs a machine's deletion while no instance of it is being created, on this node or any other. */
  whileDeletingMachine<T>(orgId: string, machine: string, work: () => Promise<T>): Promise<T>;
}
