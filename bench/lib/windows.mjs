// Figures per time window of a measured phase, by when each answer arrived: they show how long the node
// takes to reach its steady state (JIT, caches, heap sizing) and whether the tail comes from one stretch
// of the run or from all of it.
import { round, summarize } from './stats.mjs';

/** A window length that gives a phase of `wallMs` about a dozen windows, in steps of 250 ms. */
export const windowLengthMs = (wallMs) => Math.max(250, Math.ceil(wallMs / 12 / 250) * 250);

/**
 * `doneAtMs[k]` is when answer k arrived (ms since the phase began), `latencies[k]` its latency. Returns
 * one entry per window, and the summary of everything after the first second.
 */
export const byWindow = (doneAtMs, latencies, wallMs) => {
  const lengthMs = windowLengthMs(wallMs);
  // The phase rarely ends on a window boundary: a remainder shorter than half a window (an open loop's
  // drain, say) joins the window before it rather than showing as a rate over a few milliseconds.
  const count = Math.max(1, Math.round(wallMs / lengthMs));
  const buckets = Array.from({ length: count }, () => []);
  for (let k = 0; k < doneAtMs.length; k++) buckets[Math.min(count - 1, Math.floor(doneAtMs[k] / lengthMs))].push(latencies[k]);
  const windows = buckets.map((values, w) => {
    const spanMs = w === count - 1 ? wallMs - w * lengthMs : lengthMs;
    const s = summarize(values);
    return {
      fromS: round((w * lengthMs) / 1000),
      events: values.length,
      perSecond: spanMs > 0 ? round((values.length * 1000) / spanMs, 1) : null,
      p50: s.p50,
      p99: s.p99,
    };
  });
  const later = [];
  for (let k = 0; k < doneAtMs.length; k++) if (doneAtMs[k] >= 1000) later.push(latencies[k]);
  return { windowMs: lengthMs, windows, afterFirstSecond: summarize(later) };
};
