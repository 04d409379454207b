/**
 * `--sandbox inline`: a SandboxClient's requests run in the node's own process, on its main thread, by
 * the same SandboxHost a worker process runs (sandbox-host.ts). What it saves: the two crossings between
 * processes of every call (a write, a read and a wake-up each way, with V8 serialization of the batch).
 * What it gives up: a V8 crash in machine code (one huge allocation past what isolated-vm catches)
 * takes the node down, and a call that holds the thread holds the node's event loop (HTTP included)
 * until its CPU limit ends it, with no watchdog to move its org aside.
 */
import type { Batch, NodeMessage, WorkerMessage } from './protocol.js';
import { SandboxHost } from './sandbox-host.js';
import type { Pending, SandboxWorker } from './worker-lifecycle.js';

export class InlineWorker implements SandboxWorker {
  readonly pending = new Map<number, Pending>();
  readonly spawnedAt = Date.now();
  retired = false;
  deadline: NodeJS.Timeout | undefined = undefined;
  private open = true;
  /** What the host said, handed to the client together once the batch (or the callback that said it) is done. */
  private outgoing: WorkerMessage[] = [];
  private flushScheduled = false;
  private readonly host = new SandboxHost({
    post: (message) => {
      this.outgoing.push(message);
      if (!this.flushScheduled) {
        this.flushScheduled = true;
        setImmediate(this.flush);
      }
    },
  });

  constructor(private readonly deliver: (batch: Batch<WorkerMessage>) => void) {}

  get alive(): boolean {
    return this.open;
  }

  send(batch: Batch<NodeMessage>): void {
    if (!this.open) return;
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

  private readonly flush = (): void => {
    this.flushScheduled = false;
    if (this.outgoing.length === 0 || !this.open) return;
    const batch = this.outgoing;
    this.outgoing = [];
    this.deliver(batch);
  };
}
