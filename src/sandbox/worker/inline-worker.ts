/**
 * `--sandbox inline`: a SandboxClient's requests run in the node's own process, on its main thread, by
 * the same SandboxHost a worker process runs (sandbox-host.ts). What it saves: the two crossings between
 * processes of every call (a write, a read and a wake-up each way, with V8 serialization of the batch).
 * What it gives up: a V8 crash in machine code (one huge allocation past what isolated-vm catches)
 * takes the node down, and a call that holds the thread holds the node's event loop (HTTP included)
 * until it returns or its CPU limit ends it: no watchdog can move the other requests on meanwhile.
 * Such a call is still noticed once it returned (`stallMs` of its isolate's CPU time), and its org is
 * moved aside as the watchdog's would be (onStall: to the quarantine worker, a process).
 */
import type { Batch, NodeMessage, WorkerMessage } from './protocol.js';
import { SandboxHost, type SlowCall } from './sandbox-host.js';
import type { Pending, SandboxWorker, Stall } from './worker-lifecycle.js';

export interface InlineOptions {
  /** A call into machine code that takes this much CPU time is reported to onStall (0: never). */
  stallMs: number;
  onStall: (stall: Stall) => void;
}

export class InlineWorker implements SandboxWorker {
  readonly pending = new Map<number, Pending>();
  readonly spawnedAt = Date.now();
  retired = false;
  deadline: NodeJS.Timeout | undefined = undefined;
  private open = true;
  /** What the host said, handed to the client together once the batch (or the callback that said it) is done. */
  private outgoing: WorkerMessage[] = [];
  private flushScheduled = false;
  /** Calls that held the thread, reported after the batch they were in (the pool then moves their org). */
  private slow: SlowCall[] = [];
  private readonly host: SandboxHost;

  constructor(
    private readonly deliver: (batch: Batch<WorkerMessage>) => void,
    private readonly options: InlineOptions,
  ) {
    this.host = new SandboxHost({
      inNodeProcess: true,
      post: (message) => {
        this.outgoing.push(message);
        this.scheduleFlush();
      },
      ...(options.stallMs > 0
        ? {
            slowCalls: {
              stallMs: options.stallMs,
              onSlow: (slow: SlowCall) => {
                this.slow.push(slow);
                this.scheduleFlush();
              },
            },
          }
        : {}),
    });
  }

  get alive(): boolean {
    return this.open;
  }

  send(batch: Batch<NodeMessage>, onError: (error: Error) => void): void {
    // (as a send to a worker process that is gone: its requests fail at once rather than wait forever)
    if (!this.open) {
      onError(new Error('the inline sandbox was closed'));
      return;
    }
    for (const message of batch) this.host.run(message);
    this.flush();
  }

  kill(): void {
    if (!this.open) return;
    this.open = false;
    this.outgoing = [];
    this.host.disposeAll();
  }

  close(): Promise<void> {
    this.kill();
    return Promise.resolve();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(this.flush);
  }

  private readonly flush = (): void => {
    this.flushScheduled = false;
    if (!this.open) return;
    if (this.outgoing.length > 0) {
      const batch = this.outgoing;
      this.outgoing = [];
      this.deliver(batch);
    }
    // After the answers: the call's own result stands (it returned within its CPU limit, or failed at it).
    if (this.slow.length > 0) {
      const slow = this.slow;
      this.slow = [];
      for (const stall of slow) this.options.onStall(stall);
    }
  };
}
