import type { DefinitionNode } from '../../src/domain/machine-definition.js';

export type { DefinitionNode, MachineDefinition } from '../../src/domain/machine-definition.js';

/** The ids of the state nodes a state value makes active (the root included). */
export const activeIds = (root: DefinitionNode, value: unknown): Set<string> => {
  const active = new Set<string>([root.id]);
  const walk = (node: DefinitionNode, v: unknown) => {
    if (typeof v === 'string') {
      const child = node.states.find((s) => s.key === v);
      if (child) {
        active.add(child.id);
        // A compound child named alone is in its initial state (not in a state value, but kept safe).
        if (child.initial) walk(child, child.initial);
      }
    } else if (v !== null && typeof v === 'object') {
      for (const [key, sub] of Object.entries(v as Record<string, unknown>)) {
        const child = node.states.find((s) => s.key === key);
        if (!child) continue;
        active.add(child.id);
        walk(child, sub);
      }
    }
  };
  walk(root, value);
  return active;
};

/** What a transition's event is called on the drawing: xstate's own names made readable. */
export const eventLabel = (event: string, guarded?: boolean): string => {
  let label = event;
  if (event === '') label = 'always';
  else {
    const after = /^xstate\.after(?:\((\d+)\)|\.(\d+)\.)/.exec(event);
    if (after) label = `after ${after[1] ?? after[2]} ms`;
  }
  return guarded ? `${label} [guarded]` : label;
};

/** Counts a definition's nodes (for a size note). */
export const nodeCount = (node: DefinitionNode): number => 1 + node.states.reduce((n, child) => n + nodeCount(child), 0);
