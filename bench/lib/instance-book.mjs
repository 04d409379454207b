// The generator's record of every instance: where it is in the event cycle, and every event sent to it
// with its outcome. Verification compares this record with each instance's history on the server.
import { eventFor, stateAfter } from './cart-machine.mjs';
import { request, outcomeKey, tally } from './http.mjs';

export const OK = 0; // answered 200: must be in the history
export const REJECTED = 1; // answered 4xx: must not be in the history
export const UNKNOWN = 2; // 5xx or no answer: may or may not be in the history

export class InstanceBook {
  constructor({ machine, prefix, count, headers }) {
    this.machine = machine;
    this.prefix = prefix;
    this.count = count;
    this.headers = headers;
    this.step = new Int32Array(count);
    this.log = Array.from({ length: count }, () => []); // [n, outcome] pairs, in send order
    this.uncertain = new Uint8Array(count); // 1 once an outcome was unknown: state checks stop there
    this.nextN = 1;
    this.stateMismatches = 0;
    this.stateMismatchExamples = [];
  }

  slug(i) {
    return `${this.prefix}-${i}`;
  }

  createBody(i) {
    return { slug: this.slug(i), context: { customer: `c${i}` } };
  }

  /** Sends instance i its next event; tallies the outcome into `counts`. Never two at once per instance. */
  async sendNext(pool, i, counts) {
    const n = this.nextN++;
    const step = this.step[i];
    const event = eventFor(step, n);
    const result = await request(pool, 'POST', `/machines/${this.machine}/i/${this.slug(i)}/events`, this.headers, { event });
    const key = outcomeKey(result);
    tally(counts, key);
    if (result.status === 200) {
      this.log[i].push([n, OK]);
      this.step[i] = step + 1;
      if (!this.uncertain[i]) this.checkState(i, n, result.text, stateAfter(step));
    } else if (result.status >= 400 && result.status < 500) {
      this.log[i].push([n, REJECTED]);
    } else {
      this.log[i].push([n, UNKNOWN]);
      this.step[i] = step + 1;
      this.uncertain[i] = 1;
    }
    return { ok: result.status === 200, ms: result.ms };
  }

  checkState(i, n, text, expected) {
    let state;
    try {
      state = JSON.parse(text).state;
    } catch {}
    if (state !== expected) {
      this.stateMismatches++;
      if (this.stateMismatchExamples.length < 5)
        this.stateMismatchExamples.push({ instance: this.slug(i), n, expected, got: state ?? text.slice(0, 200) });
    }
  }
}
