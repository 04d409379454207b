/**
 * Delivering a host call's outcome into the isolate (version-isolate.ts, "Host calls"): a completed
 * fetch's outcome (copied data only) is handed over by a sync call (`deliver` then `afterDeliver`,
 * under the CPU limit), outside any step. If machine code fails meanwhile, the actor the call belongs
 * to is dropped, and the failure is kept for its next step to throw.
 */
import ivm from 'isolated-vm';
import { MachineCodeError } from './errors.js';
import type { HostCallOutcome, HostCalls } from './host-calls.js';
import type { HarnessArgs, HarnessFn } from './isolate-sources.js';

/** What a delivery needs of its VersionIsolate (an http API call, which waits for deliveries, too). */
export interface DeliveringIsolate {
  /** False once the isolate is gone. */
  healthy(): boolean;
  /** One harness call, as the VersionIsolate makes them (log window, limits, recovery). */
  call<K extends HarnessFn>(fn: K, args: HarnessArgs<K>): string;
  readonly hostCalls: HostCalls;
  /** Actors (or http API calls) whose machine code failed while an outcome was delivered: their next step throws this. */
  readonly deliveryFailures: Map<string, Error>;
  /** Runs each delivery (the sandbox worker times it for its stall watchdog); absent: runs it as is. */
  readonly aroundDelivery: ((deliver: () => void) => void) | undefined;
}

/** Hands host call `id`'s outcome, of actor `owner` (null: none), to the isolate. */
export function deliverHostCallOutcome(isolate: DeliveringIsolate, id: number, owner: string | null, outcome: HostCallOutcome): void {
  if (!isolate.healthy()) return;
  const head =
    'error' in outcome
      ? { error: outcome.error }
      : {
          status: outcome.ok.status,
          statusText: outcome.ok.statusText,
          url: outcome.ok.url,
          redirected: outcome.ok.redirected,
          headers: outcome.ok.headers,
        };
  try {
    let body: ivm.Copy<ArrayBuffer> | undefined;
    if ('ok' in outcome) {
      const bytes = outcome.ok.body;
      const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
      body = new ivm.ExternalCopy(buffer).copyInto({ release: true });
    }
    const run = () => {
      isolate.call('deliver', [id, JSON.stringify(head), body, Date.now()]);
      isolate.call('afterDeliver', []);
    };
    if (isolate.aroundDelivery) isolate.aroundDelivery(run);
    else run();
  } catch (e) {
    const error = e instanceof Error ? e : new MachineCodeError(String(e));
    if (owner !== null) {
      isolate.deliveryFailures.set(owner, error);
      isolate.hostCalls.drop(owner);
      try {
        if (isolate.healthy()) isolate.call('stop', [owner]);
      } catch {
        // the isolate will be rebuilt by the caller if it is unusable
      }
    }
  }
}
