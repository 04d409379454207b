import type { InstanceHead } from '../../src/store/instance-store.js';

/**
 * Instance `i` of machine `m` (org_a, version ver_x) at sequence `seq`, as the store tests commit it;
 * `extra` replaces any field (another name, index values, a status).
 */
export const instanceHead = (seq: number, extra: Partial<InstanceHead> = {}): InstanceHead => ({
  orgId: 'org_a',
  machine: 'm',
  name: 'i',
  createdAt: new Date(0).toISOString(),
  versionId: 'ver_x',
  status: 'running',
  seq,
  ts: seq,
  state: 'idle',
  context: { n: seq },
  tags: [],
  done: false,
  snapshot: '{"xstate":4,"state":{}}',
  pendingTimers: [],
  stoppedChildren: [],
  timerAttempts: {},
  ...extra,
});

/** The transition record of event `E<seq>`, which leads to `instanceHead(seq)`. */
export const transitionRecord = (seq: number) => ({
  seq,
  createdAt: new Date(seq).toISOString(),
  ts: seq,
  event: { type: `E${seq}` },
  state: 'idle',
});
