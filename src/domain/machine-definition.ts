/**
 * A machine version's states and transitions as plain data, read from its isolate (the sandbox's
 * harness-version-info.js `definition`) for the web console's drawing.
 */

/** One state node of a machine's definition (harness-version-info.js `definition`), children in declaration order. */
export interface DefinitionNode {
  key: string;
  id: string;
  /** atomic, compound, parallel, final or history. */
  type: string;
  /** A compound state's initial child (its key). */
  initial?: string;
  tags?: string[];
  states: DefinitionNode[];
  /**
   * As the machine's state nodes hold them: `event` the event type ('' for `always`, xstate's own
   * names for `after` delays and done/error events), `targets` the target nodes' ids (none: internal).
   */
  transitions: { event: string; targets: string[]; guarded?: true }[];
}

/** A machine version's states and transitions, for drawing; `truncated` when a bound cut it short. */
export interface MachineDefinition {
  xstate: 4 | 5;
  root: DefinitionNode;
  truncated: boolean;
}
