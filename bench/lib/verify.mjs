// After a scenario: reads every instance's full history and checks it against the generator's log.
// An instance passes when its history is the creation record followed by exactly the events answered 200,
// in the order they were sent (the generator never has two events in flight to one instance), with events
// whose outcome was unknown allowed in their place or absent, no event answered 4xx, and each record's
// state the one the cart cycle predicts.
import { makePool, authHeaders, request } from './http.mjs';
import { INITIAL_STATE, STATE_AFTER } from './cart-machine.mjs';
import { OK, UNKNOWN } from './instance-book.mjs';

const VERIFY_CONCURRENCY = 16;
const MAX_PAGES = 10_000;

const readHistory = async (pool, headers, machine, slug) => {
  const transitions = [];
  let cursor;
  for (let page = 0; page < MAX_PAGES; page++) {
    const path = `/machines/${machine}/i/${slug}/events` + (cursor ? `?cursor=${encodeURIComponent(cursor)}` : '');
    const result = await request(pool, 'GET', path, headers);
    if (result.status !== 200) throw new Error(`GET ${path}: ${result.status} ${result.error ?? result.text.slice(0, 200)}`);
    const body = JSON.parse(result.text);
    transitions.push(...body.transitions);
    cursor = body.cursor;
    if (!cursor) return transitions;
  }
  throw new Error(`history of ${slug} has more than ${MAX_PAGES} pages`);
};

/** Problems with one instance's history, as strings (empty when it matches). */
export const compareHistory = (transitions, log) => {
  const problems = [];
  const [first, ...rest] = transitions;
  if (!first || first.event?.type !== 'xstate.init') problems.push(`first record is not xstate.init: ${JSON.stringify(first)}`);
  else if (first.state !== INITIAL_STATE) problems.push(`initial state ${JSON.stringify(first.state)}, expected ${INITIAL_STATE}`);
  let j = 0;
  let applied = 0;
  let certain = true;
  for (const [n, outcome] of log) {
    const record = rest[j];
    if (outcome === OK || outcome === UNKNOWN) {
      if (record && record.event?.n === n) {
        if (certain && record.state !== STATE_AFTER[applied % STATE_AFTER.length]) {
          problems.push(`event n=${n}: state ${JSON.stringify(record.state)}, expected ${STATE_AFTER[applied % STATE_AFTER.length]}`);
        }
        j++;
        applied++;
      } else if (outcome === OK) {
        problems.push(`acknowledged event n=${n} missing at history position ${j + 1} (found n=${record?.event?.n})`);
      }
      if (outcome === UNKNOWN) certain = false;
    } else if (record && record.event?.n === n) {
      problems.push(`rejected event n=${n} is in the history`);
      j++;
    }
  }
  if (j < rest.length) problems.push(`${rest.length - j} unexpected record(s) after the last expected one, first n=${rest[j]?.event?.n}`);
  return problems;
};

export const verifyScenario = async ({ url, adminKey, machine, prefix, log }) => {
  const pool = makePool(url, VERIFY_CONCURRENCY);
  const headers = authHeaders(adminKey);
  const t0 = Date.now();
  let next = 0;
  let instancesBad = 0;
  let problemsTotal = 0;
  let historyEvents = 0;
  let acked = 0;
  const examples = [];
  await Promise.all(
    Array.from({ length: VERIFY_CONCURRENCY }, async () => {
      while (next < log.length) {
        const i = next++;
        const slug = `${prefix}-${i}`;
        acked += log[i].filter(([, outcome]) => outcome === OK).length;
        let problems;
        try {
          const transitions = await readHistory(pool, headers, machine, slug);
          historyEvents += Math.max(0, transitions.length - 1);
          problems = compareHistory(transitions, log[i]);
        } catch (err) {
          problems = [String(err?.message ?? err)];
        }
        if (problems.length > 0) {
          instancesBad++;
          problemsTotal += problems.length;
          if (examples.length < 10) examples.push({ instance: slug, problems: problems.slice(0, 3) });
        }
      }
    }),
  );
  await pool.close();
  return {
    instances: log.length,
    ackedEvents: acked,
    historyEvents,
    instancesWithMismatch: instancesBad,
    mismatches: problemsTotal,
    ok: instancesBad === 0,
    wallS: (Date.now() - t0) / 1000,
    examples,
  };
};
