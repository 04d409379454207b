// Number and status formatting shared by the report's sections.

/** A count with thousands separators, '–' when absent. */
export const int = (x) => (x === null || x === undefined ? '–' : Math.round(x).toLocaleString('en-US'));

/** Non-200 answers by status ("3× 503, 1× 409"), '0' when none. */
export const failureText = (counts = {}) => {
  const bad = Object.entries(counts).filter(([key]) => key !== '200');
  return bad.length === 0 ? '0' : bad.map(([key, n]) => `${n}× ${key}`).join(', ');
};
