// xstate 4's internal modules the harness imports (registry, serviceScope, utils), untyped as xstate is.
export const registry: any;
export const provide: any;
export const updateHistoryValue: any;
