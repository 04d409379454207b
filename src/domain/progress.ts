/**
 * Lines that say how far long start-up work is (a write-ahead log's replay, a cluster node's catch-up):
 * done of total, the rate, and the time left at that rate. Nothing is said before the work has run for
 * `everyMs`, so a short start prints no line; then one every `everyMs`, and one when it ends.
 */
export interface Progress {
  /** How far it is; cheap enough to call for every item (it reads the clock and compares). */
  step(done: number, total: number, note?: string): void;
  /** The work ended: says so, with its time, if any line was said. */
  end(done: number): void;
}

export const progress = (
  what: string,
  unit: string,
  everyMs: number,
  say: (line: string) => void,
  now: () => number = Date.now,
): Progress => {
  const startedAt = now();
  let toldAt = startedAt;
  let told = false;
  return {
    step(done, total, note) {
      const at = now();
      if (at - toldAt < everyMs) return;
      toldAt = at;
      told = true;
      say(progressLine(what, unit, done, total, at - startedAt, note));
    },
    end(done) {
      if (told) say(`${what}: done, ${done} ${unit} in ${((now() - startedAt) / 1000).toFixed(1)} s`);
    },
  };
};

export const progressLine = (what: string, unit: string, done: number, total: number, elapsedMs: number, note?: string): string => {
  const perSecond = elapsedMs > 0 ? (done * 1000) / elapsedMs : 0;
  const left = perSecond > 0 ? `about ${Math.ceil(Math.max(0, total - done) / perSecond)} s left` : 'time left unknown';
  const share = total > 0 ? ` (${Math.floor((Math.min(done, total) * 100) / total)} %)` : '';
  return `${what}: ${done} of ${total} ${unit}${share}, ${Math.round(perSecond)}/s, ${left}${note ? `; ${note}` : ''}`;
};
