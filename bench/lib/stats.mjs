// Latency summaries over arrays of milliseconds.

const round = (x, digits = 3) => (Number.isFinite(x) ? Number(x.toFixed(digits)) : null);

export const summarize = (values) => {
  const n = values.length;
  if (n === 0) return { count: 0, mean: null, p50: null, p90: null, p99: null, p999: null, max: null, min: null };
  const sorted = Float64Array.from(values).sort();
  const at = (q) => sorted[Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1))];
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: n,
    mean: round(sum / n),
    min: round(sorted[0]),
    p50: round(at(0.5)),
    p90: round(at(0.9)),
    p99: round(at(0.99)),
    p999: round(at(0.999)),
    max: round(sorted[n - 1]),
  };
};

export { round };
