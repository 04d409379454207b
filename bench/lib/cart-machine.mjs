// The machine under test: a small shopping cart with an `assign` on most transitions. Events follow a fixed
// cycle, so every event is valid in the state it reaches and the state after each event is known in advance.

export const MACHINE_NAME = 'bench-cart';

export const MACHINE_CODE = `import { createMachine, assign } from "xstate";

const add = assign({
  items: (ctx) => ctx.items + 1,
  total: (ctx, event) => ctx.total + event.price,
  lastN: (ctx, event) => event.n,
  public: (ctx, event) => ({ items: ctx.items + 1, total: ctx.total + event.price, orders: ctx.orders }),
});
const confirm = assign({
  orders: (ctx) => ctx.orders + 1,
  lastN: (ctx, event) => event.n,
  public: (ctx) => ({ items: ctx.items, total: ctx.total, orders: ctx.orders + 1 }),
});
const reset = assign({
  items: 0,
  total: 0,
  lastN: (ctx, event) => event.n,
  public: (ctx) => ({ items: 0, total: 0, orders: ctx.orders }),
});

export default createMachine({
  id: "cart",
  predictableActionArguments: true,
  initial: "idle",
  context: { items: 0, total: 0, orders: 0, lastN: 0, public: { items: 0, total: 0, orders: 0 } },
  states: {
    idle: { on: { ADD: { target: "active", actions: add } } },
    active: { tags: ["open"], on: { ADD: { actions: add }, CHECKOUT: "checkingOut" } },
    checkingOut: { on: { CONFIRM: { target: "confirmed", actions: confirm } } },
    confirmed: { tags: ["paid"], on: { RESET: { target: "idle", actions: reset } } },
  },
});

export const allowRead = () => true;
export const allowWrite = () => true;
`;

/** The event types in cycle order, and the state the machine is in after each of them. */
export const CYCLE = ['ADD', 'ADD', 'ADD', 'CHECKOUT', 'CONFIRM', 'RESET'];
export const STATE_AFTER = ['active', 'active', 'active', 'checkingOut', 'confirmed', 'idle'];
export const INITIAL_STATE = 'idle';

/** The `step`-th event (0-based) sent to an instance; `n` is unique across the whole run. */
export const eventFor = (step, n) => {
  const type = CYCLE[step % CYCLE.length];
  return type === 'ADD' ? { type, n, price: (n % 7) + 1 } : { type, n };
};

export const stateAfter = (step) => STATE_AFTER[step % STATE_AFTER.length];
