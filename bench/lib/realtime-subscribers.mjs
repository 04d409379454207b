// The realtime scenario's subscribers (bench/lib/realtime.mjs forks this): one `ws` websocket per
// subscriber on GET /rt, each subscribed to one instance. Every `instance-update` after the first (the
// current state, sent at once) is recorded with when it arrived on CLOCK_MONOTONIC (process.hrtime, the
// same clock in every process of the host, so the sender's answer times compare with it) and on the wall
// clock (to compare with the update's `ts`). The parent drives it over IPC (advanced serialization, so the
// receipts travel as typed arrays): connect, count, collect (and reset), close.
import WebSocket from 'ws';

const params = JSON.parse(process.argv[2]);
/** { url, machine, names: instance names, tokens, from, to: global subscriber indices [from, to) } */
const { url, machine, names, tokens, from, to } = params;
const CONNECT_AT_ONCE = 50;

const mono = () => Number(process.hrtime.bigint()) / 1e6;
const wall = () => performance.timeOrigin + performance.now();

const count = to - from;
const sockets = new Array(count);
const gotFirst = new Uint8Array(count);
const lastTs = new Float64Array(count);
let firstFrames = 0;
let closing = false;

/** Receipts since the last collect, as growable columns. */
let size = 0;
let sub = new Uint32Array(1 << 16);
let tsCol = new Float64Array(1 << 16);
let atCol = new Float64Array(1 << 16);
let wallCol = new Float64Array(1 << 16);
const grow = () => {
  const n = sub.length * 2;
  const copy = (Type, old) => {
    const next = new Type(n);
    next.set(old);
    return next;
  };
  sub = copy(Uint32Array, sub);
  tsCol = copy(Float64Array, tsCol);
  atCol = copy(Float64Array, atCol);
  wallCol = copy(Float64Array, wallCol);
};

const problems = { errorFrames: {}, wrongInstance: 0, outOfOrder: 0, unparsable: 0, unexpectedCloses: {}, socketErrors: {} };
const tally = (counts, key) => (counts[key] = (counts[key] ?? 0) + 1);

const instanceOf = (s) => s % names.length;
const tokenOf = (s) => tokens[Math.floor(s / names.length) % tokens.length];

const open = (s) =>
  new Promise((resolve) => {
    const local = s - from;
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}/rt?token=${encodeURIComponent(tokenOf(s))}`, { perMessageDeflate: false });
    sockets[local] = ws;
    const name = names[instanceOf(s)];
    let settled = false;
    const done = (ok) => {
      if (!settled) {
        settled = true;
        resolve(ok);
      }
    };
    ws.on('open', () => {
      ws.send(JSON.stringify({ type: 'subscribe-to-instance', machineName: machine, machineInstanceName: name, requestId: `s${s}` }));
      done(true);
    });
    ws.on('message', (data) => {
      const at = mono();
      const w = wall();
      let message;
      try {
        message = JSON.parse(data.toString());
      } catch {
        problems.unparsable++;
        return;
      }
      if (message.type === 'error') {
        tally(problems.errorFrames, `${message.status} ${message.code}`);
        return;
      }
      if (message.type !== 'instance-update') return;
      if (message.machineInstanceName !== name || message.machineName !== machine) {
        problems.wrongInstance++;
        return;
      }
      if (!gotFirst[local]) {
        gotFirst[local] = 1;
        lastTs[local] = message.ts;
        firstFrames++;
        return;
      }
      if (message.ts <= lastTs[local]) problems.outOfOrder++;
      lastTs[local] = message.ts;
      if (size === sub.length) grow();
      sub[size] = s;
      tsCol[size] = message.ts;
      atCol[size] = at;
      wallCol[size] = w;
      size++;
    });
    ws.on('error', (err) => {
      tally(problems.socketErrors, err?.code || err?.message || 'error');
      done(false);
    });
    ws.on('close', (code) => {
      if (!closing) tally(problems.unexpectedCloses, String(code));
      done(false);
    });
  });

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const connect = async ({ timeoutMs }) => {
  closing = false;
  firstFrames = 0;
  gotFirst.fill(0);
  const t0 = mono();
  let failed = 0;
  for (let s = from; s < to; s += CONNECT_AT_ONCE) {
    const batch = [];
    for (let k = s; k < Math.min(to, s + CONNECT_AT_ONCE); k++) batch.push(open(k));
    failed += (await Promise.all(batch)).filter((ok) => !ok).length;
  }
  const openedMs = mono() - t0;
  while (firstFrames < count && mono() - t0 < timeoutMs) await sleep(5);
  return {
    opened: count - failed,
    failed,
    firstFrames,
    openedMs: Number(openedMs.toFixed(1)),
    subscribedMs: Number((mono() - t0).toFixed(1)),
  };
};

const close = async ({ timeoutMs }) => {
  closing = true;
  const t0 = mono();
  const waits = sockets.filter(Boolean).map((ws) =>
    ws.readyState === WebSocket.CLOSED
      ? undefined
      : new Promise((resolve) => {
          ws.once('close', resolve);
          ws.close(1000);
        }),
  );
  const all = Promise.all(waits);
  const late = await Promise.race([all.then(() => false), sleep(timeoutMs).then(() => true)]);
  if (late) for (const ws of sockets) if (ws && ws.readyState !== WebSocket.CLOSED) ws.terminate();
  sockets.fill(undefined);
  return { closedMs: Number((mono() - t0).toFixed(1)), terminated: late };
};

const collect = () => {
  const out = { sub: sub.slice(0, size), ts: tsCol.slice(0, size), at: atCol.slice(0, size), wall: wallCol.slice(0, size) };
  size = 0;
  return out;
};

process.on('message', async ({ id, op, args }) => {
  let result;
  try {
    if (op === 'connect') result = await connect(args);
    else if (op === 'count') result = { received: size };
    else if (op === 'collect') result = { receipts: collect(), problems };
    else if (op === 'close') result = await close(args);
    else throw new Error(`unknown op ${op}`);
    process.send({ id, result });
  } catch (err) {
    process.send({ id, error: String(err?.stack ?? err) });
  }
});
process.on('disconnect', () => process.exit(0));
process.send({ ready: true });
