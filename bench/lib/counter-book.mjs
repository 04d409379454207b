// The `yardstick` scenario's record of K counters on one target (Statehold, or the yardstick service):
// how that target's HTTP API spells create, INC and read for the same counter, and per counter the sum
// of the INCs it acknowledged. Every 200 answer's count must be that sum; at the end every counter's
// count read back must be too. The same code drives both targets (bench/lib/yardstick-load.mjs).
import { outcomeKey, request, tally } from './http.mjs';

/**
 * The counter's API on a target. Statehold: the machine `machine` (its count in `context.public`, which
 * every answer carries as `publicContext`), with a bearer token; the yardstick: `/counter/:key/…`, no
 * authentication, `{ state, count }` in every answer.
 */
export const counterApi = (target) => {
  if (target.kind === 'statehold') {
    const m = encodeURIComponent(target.machine);
    const auth = { authorization: `Bearer ${target.token}` };
    return {
      headers: { ...auth, 'content-type': 'application/json' },
      readHeaders: auth,
      create: (key) => ['POST', `/machines/${m}`, { slug: key }],
      send: (key, by) => ['POST', `/machines/${m}/i/${key}/events`, { event: { type: 'INC', by } }],
      read: (key) => ['GET', `/machines/${m}/i/${key}`],
      countOf: (answer) => answer?.publicContext?.count,
    };
  }
  if (target.kind === 'yardstick') {
    return {
      headers: { 'content-type': 'application/json' },
      readHeaders: {},
      create: (key) => ['POST', `/counter/${key}/create`, {}],
      send: (key, by) => ['POST', `/counter/${key}/send`, { type: 'INC', by }],
      read: (key) => ['GET', `/counter/${key}`],
      countOf: (answer) => answer?.count,
    };
  }
  throw new Error(`unknown target kind ${target.kind}`);
};

const countIn = (api, text) => {
  try {
    return api.countOf(JSON.parse(text));
  } catch {
    return undefined;
  }
};

export class CounterBook {
  /** `by` picks each INC's amount (default: 1 to 9 at random; the counters treat 0 as 1). */
  constructor({ api, count, by = () => 1 + ((Math.random() * 9) | 0) }) {
    this.api = api;
    this.count = count;
    this.by = by;
    this.acked = new Float64Array(count); // sum of the acknowledged INCs' `by`
    this.doubt = new Float64Array(count); // sum of the `by` of INCs with no answer or a 5xx: may have counted
    this.answerMismatches = 0;
    this.answerMismatchExamples = [];
  }

  key(i) {
    return `k${i}`;
  }

  /** Creates counter i (count 0). */
  create(pool, i) {
    const [method, path, body] = this.api.create(this.key(i));
    return request(pool, method, path, this.api.headers, body);
  }

  /** Sends counter i one INC and checks a 200 answer's count; never two at once per counter (closed-loop.mjs). */
  async sendNext(pool, i, counts) {
    const by = this.by();
    const [method, path, body] = this.api.send(this.key(i), by);
    const result = await request(pool, method, path, this.api.headers, body);
    tally(counts, outcomeKey(result));
    if (result.status === 200) {
      this.acked[i] += by;
      const count = countIn(this.api, result.text);
      // After an answer that never came, the count may hold that INC too: only the sum is checked then.
      if (this.doubt[i] === 0 && count !== this.acked[i]) {
        this.answerMismatches++;
        if (this.answerMismatchExamples.length < 5)
          this.answerMismatchExamples.push({ counter: this.key(i), expected: this.acked[i], got: count ?? result.text.slice(0, 200) });
      }
    } else if (result.status === 0 || result.status >= 500) {
      this.doubt[i] += by;
    }
    return { ok: result.status === 200, ms: result.ms };
  }

  /** Reads counter i back: the count, or why there is none. */
  async read(pool, i) {
    const [method, path] = this.api.read(this.key(i));
    const result = await request(pool, method, path, this.api.readHeaders);
    if (result.status !== 200) return { error: outcomeKey(result) };
    const count = countIn(this.api, result.text);
    return typeof count === 'number' ? { count } : { error: `no count in ${result.text.slice(0, 200)}` };
  }

  /** Whether a count read back is what was acknowledged (give or take INCs whose outcome is unknown). */
  matches(i, count) {
    return count >= this.acked[i] && count <= this.acked[i] + this.doubt[i];
  }
}
