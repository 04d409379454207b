import type { OutboundSend, PersistentSpawnRequest, StepResult } from '../sandbox/index.js';

/**
 * What the steps of one request asked for beyond their own state: persistent children to create and
 * events for other instances. Each StepResult reports only what is new since the previous one, so a
 * request gathers them from every step it took.
 */
export class StepEffects {
  readonly spawns: PersistentSpawnRequest[] = [];
  readonly sends: OutboundSend[] = [];

  absorb(result: StepResult): StepResult {
    this.spawns.push(...result.persistentSpawns);
    this.sends.push(...result.outboundSends);
    return result;
  }
}
