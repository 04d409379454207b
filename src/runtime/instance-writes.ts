/**
 * What the API asks of an instance's owner, and what a create, a read and a send answer: the
 * instance-command contract's API face (cluster/instance-commands.ts, where the owner side and the
 * commands forwarded between cluster nodes are defined with it). The embedded node's InstanceRuntime
 * is it; a cluster node's forwarder is too, and runs each call on the instance's owner.
 */
export type { InstanceState, InstanceWrites } from '../cluster/instance-commands.js';
