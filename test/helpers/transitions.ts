/**
 * A listed transition's event type. The State Backed client types a transition's event as a string or
 * an object with a type; the server answers the object. As `transition.event.type` did before these
 * files were type-checked, a string event gives undefined (so a test expecting a type still fails).
 */
export const eventType = (transition: { event: string | { type: string } }): string | undefined =>
  typeof transition.event === 'string' ? undefined : transition.event.type;
