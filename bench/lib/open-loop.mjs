// Open loop: events are scheduled at a fixed rate whatever the server does, and latency runs from the
// scheduled send time, so time spent waiting behind a slow server counts (no coordinated omission).
// Each event goes to a random idle instance; when every instance is busy, events wait in a backlog and are
// sent as instances free up (their latency keeps running from the scheduled time).
import { summarize } from './stats.mjs';
import { byWindow } from './windows.mjs';

const TICK_MS = 1;

export const runOpenLoop = async ({ book, pool, rate, durationS, capS }) => {
  const total = Math.round(rate * durationS);
  const intervalNs = 1e9 / rate;
  const latencies = new Float64Array(total); // from scheduled time to answer
  const service = new Float64Array(total); // from actual send to answer
  const sendLag = new Float64Array(total); // actual send minus scheduled time
  const doneAtMs = new Float64Array(total); // answer time, ms since start
  const counts = {};
  let recorded = 0;
  let scheduled = 0;
  let acked = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let maxBacklog = 0;
  let capped = false;

  const idle = Array.from({ length: book.count }, (_, i) => i);
  const backlog = []; // scheduled times (ns since start) waiting for an idle instance
  let backlogHead = 0;
  const t0 = process.hrtime.bigint();
  const now = () => Number(process.hrtime.bigint() - t0);
  const capNs = capS * 1e9;

  let finish;
  const finished = new Promise((resolve) => (finish = resolve));
  const maybeFinish = () => {
    if (inFlight === 0 && backlogHead === backlog.length && (scheduled >= total || capped)) finish();
  };

  const send = (i, scheduledNs) => {
    inFlight++;
    if (inFlight > maxInFlight) maxInFlight = inFlight;
    const sentNs = now();
    book.sendNext(pool, i, counts).then(({ ok, ms }) => {
      inFlight--;
      if (ok) acked++;
      const k = recorded++;
      doneAtMs[k] = now() / 1e6;
      service[k] = ms;
      sendLag[k] = (sentNs - scheduledNs) / 1e6;
      latencies[k] = (sentNs - scheduledNs) / 1e6 + ms;
      if (backlogHead < backlog.length) send(i, backlog[backlogHead++]);
      else idle.push(i);
      maybeFinish();
    });
  };

  const dispatch = (scheduledNs) => {
    if (idle.length === 0) {
      backlog.push(scheduledNs);
      maxBacklog = Math.max(maxBacklog, backlog.length - backlogHead);
      return;
    }
    const pick = (Math.random() * idle.length) | 0;
    const i = idle[pick];
    idle[pick] = idle[idle.length - 1];
    idle.pop();
    send(i, scheduledNs);
  };

  const tick = () => {
    const t = now();
    if (t > capNs) capped = true;
    while (!capped && scheduled < total && scheduled * intervalNs <= t) dispatch(scheduled++ * intervalNs);
    if (!capped && scheduled < total) setTimeout(tick, TICK_MS);
    else maybeFinish();
  };
  tick();
  await finished;

  const wallS = now() / 1e9;
  return {
    kind: 'open',
    targetRate: rate,
    durationS,
    scheduled,
    issued: recorded,
    acked,
    wallS: Number(wallS.toFixed(3)),
    throughput: Number((acked / wallS).toFixed(1)),
    cappedByTime: capped,
    maxInFlight,
    maxBacklog,
    statusCounts: counts,
    latencyMs: summarize(latencies.subarray(0, recorded)),
    serviceLatencyMs: summarize(service.subarray(0, recorded)),
    sendLagMs: summarize(sendLag.subarray(0, recorded)),
    overTime: byWindow(doneAtMs.subarray(0, recorded), latencies.subarray(0, recorded), wallS * 1000),
  };
};
