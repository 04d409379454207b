// A session with an hour's inactivity timeout that every INC starts again (it re-enters the state with
// the `after`): each instance holds one pending delayed event. The probes' machine with a timer.
export const SESSION_MACHINE = `import { createMachine, assign } from 'xstate';
export default createMachine({ id: 'session', predictableActionArguments: true, initial: 'active', context: { n: 0 },
  states: {
    active: { after: { 3600000: 'expired' }, on: { INC: { target: 'active', actions: assign({ n: (c) => c.n + 1 }) } } },
    expired: {},
  } });
export const allowRead = () => true; export const allowWrite = () => true;`;
