import { closeSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { WriteAheadLog } from '../src/store/lmdb/write-ahead-log.js';
import { removeDir, tempDataDir } from './helpers/node-process.js';

const payload = (n: number, size = 40): Buffer => Buffer.from(`frame-${n}-`.padEnd(size, 'x'));
const segmentsOf = (dir: string): string[] =>
  readdirSync(dir)
    .filter((name) => name.endsWith('.wal'))
    .sort();
const HEADER = 20;
const sparesIn = (dir: string): string[] => readdirSync(dir).filter((name) => name.endsWith('.spare'));
/**
 * Waits (up to a second) for the log to have made its spare on libuv's pool, and to know it: the file
 * is renamed into place on the pool a moment before the log's callback takes it as its spare.
 */
const spareMade = async (dir: string, log: WriteAheadLog): Promise<void> => {
  for (let wait = 0; wait < 100 && sparesIn(dir).length === 0; wait++) await new Promise((resolve) => setTimeout(resolve, 10));
  const { preparation } = log as unknown as { preparation: unknown };
  if (!(preparation instanceof Promise)) throw new Error('the log keeps no preparation promise: spareMade must wait otherwise');
  await preparation;
};

/** A log in `dir` that holds frames 1 to `frames`, closed with its segments kept. */
const writtenLog = async (dir: string, segmentBytes: number, frames: number): Promise<void> => {
  const log = WriteAheadLog.start(dir, 1, segmentBytes);
  for (let n = 1; n <= frames; n++) log.appendSync(payload(n));
  await log.close(false);
};

t.test('frames come back in order, across segments, from the number the log started at', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const log = WriteAheadLog.start(dir, 41, 200);
  const seqs = [1, 2, 3, 4, 5, 6, 7].map((n) => log.appendSync(payload(n)));
  t.same(seqs, [41, 42, 43, 44, 45, 46, 47], 'numbered without gaps from the first');
  t.ok(segmentsOf(dir).length >= 3, `small segments rotate (${segmentsOf(dir).join(', ')})`);
  t.equal(statSync(join(dir, segmentsOf(dir)[0] as string)).size, 200, 'a segment is created at its full size');
  const frames = WriteAheadLog.read(dir);
  t.same(
    frames.map((f) => f.seq),
    seqs,
  );
  t.same(
    frames.map((f) => f.payload.toString()),
    [1, 2, 3, 4, 5, 6, 7].map((n) => payload(n).toString()),
  );

  const big = payload(8, 500);
  t.equal(log.appendSync(big), 48, 'a frame larger than a segment gets a segment of its own size');
  t.same(WriteAheadLog.read(dir).at(-1)?.payload.toString(), big.toString());
  await log.close(false);
  t.equal(WriteAheadLog.read(dir).length, 8, 'closing without discarding keeps the frames');
});

t.test('release deletes the segments LMDB holds, never the one being written', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const log = WriteAheadLog.start(dir, 1, 150);
  for (let n = 1; n <= 9; n++) log.appendSync(payload(n));
  const before = segmentsOf(dir);
  log.release(4);
  await new Promise((resolve) => setTimeout(resolve, 50));
  const after = segmentsOf(dir);
  t.ok(after.length < before.length, `segments went (${before.length} → ${after.length})`);
  const frames = WriteAheadLog.read(dir);
  t.ok((frames[0]?.seq ?? 0) <= 5, 'the frames after the released one are all still there');
  t.equal(frames.at(-1)?.seq, 9);
  log.release(1_000);
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(segmentsOf(dir).length, 1, 'the current segment stays');
  t.equal(log.appendSync(payload(10)), 10, 'and takes the next frame');
  await log.close(true);
  t.same(segmentsOf(dir), [], 'close with discard deletes every segment');
});

t.test('reading stops at the first frame that is not whole and next: torn, corrupted or stale', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  await writtenLog(dir, 4096, 5);
  const segment = join(dir, segmentsOf(dir)[0] as string);
  const original = readFileSync(segment);
  const frameBytes = HEADER + 40;
  const rewrite = (edit: (data: Buffer) => void): void => {
    const data = Buffer.from(original);
    edit(data);
    const fd = openSync(segment, 'r+');
    writeSync(fd, data, 0, data.length, 0);
    closeSync(fd);
  };

  rewrite((data) => data.fill(0, 4 * frameBytes + HEADER + 10, 5 * frameBytes));
  t.same(
    WriteAheadLog.read(dir).map((f) => f.seq),
    [1, 2, 3, 4],
    'a torn last frame is not read',
  );

  rewrite((data) => {
    const at = 2 * frameBytes + HEADER + 3;
    data[at] = (data[at] as number) ^ 0xff;
  });
  t.same(
    WriteAheadLog.read(dir).map((f) => f.seq),
    [1, 2],
    'a frame whose checksum fails ends the log',
  );

  rewrite((data) => data.copy(data, 3 * frameBytes, 0, frameBytes));
  t.same(
    WriteAheadLog.read(dir).map((f) => f.seq),
    [1, 2, 3],
    'a frame with an older number (a stale one) ends the log',
  );

  rewrite((data) => data.writeUInt32BE(0xdeadbeef, 0));
  t.same(WriteAheadLog.read(dir), [], 'nothing is read past a bad first frame');

  rewrite(() => undefined);
  t.equal(WriteAheadLog.read(dir).length, 5, 'the untouched segment reads whole');
  await WriteAheadLog.start(dir, 6, 4096).close(false);
  t.same(WriteAheadLog.read(dir), [], 'starting a log deletes the old segments');
});

t.test('an empty or missing directory holds no frames', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  t.same(WriteAheadLog.read(join(dir, 'missing')), []);
  t.same(WriteAheadLog.read(dir), []);
});

t.test('released segments are written over as the next ones; their old frames are never read', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const bytes = 150; // two 60-byte frames a segment
  const log = WriteAheadLog.start(dir, 1, bytes);
  const sparesOf = () => sparesIn(dir);
  await spareMade(dir, log);
  t.equal(sparesOf().length, 1, 'a zero-filled spare is made ahead of time');
  t.equal(
    readFileSync(join(dir, sparesOf()[0] as string)).every((byte) => byte === 0),
    true,
  );
  for (let n = 1; n <= 4; n++) log.appendSync(payload(n));
  log.release(2);
  t.same(sparesOf().length, 1, 'the released segment is kept as the spare');
  const spare = readFileSync(join(dir, sparesOf()[0] as string));
  t.match(spare.toString('latin1'), /frame-1-/, 'holding its old frames');
  for (let n = 5; n <= 6; n++) log.appendSync(payload(n, 20));
  const frames = WriteAheadLog.read(dir);
  t.same(
    frames.map((f) => f.seq),
    [3, 4, 5, 6],
    'the frames written since, and none of the old ones beside them',
  );
  t.same(
    frames.slice(2).map((f) => f.payload.toString()),
    [payload(5, 20).toString(), payload(6, 20).toString()],
  );
  await log.close(false);
  const restarted = WriteAheadLog.start(dir, 7, bytes);
  t.same(WriteAheadLog.read(dir), [], 'a new start reuses old segments without reading their frames as its own');
  t.equal(restarted.appendSync(payload(7)), 7);
  t.same(
    WriteAheadLog.read(dir).map((f) => f.seq),
    [7],
  );
  await restarted.close(true);
});

t.test('a start keeps at most two old files, whatever their names, and never reads their frames', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const bytes = 150;
  for (const seq of [1, 3, 5, 7]) {
    const log = WriteAheadLog.start(dir, seq, bytes);
    log.appendSync(payload(seq));
    log.appendSync(payload(seq + 1));
    await log.close(false);
  }
  // Every start found the last one's segment and spares: the files never pile up.
  t.ok(readdirSync(dir).length <= 3, `files: ${readdirSync(dir).join(', ')}`);
  t.same(
    WriteAheadLog.read(dir).map((f) => f.seq),
    [7, 8],
  );
  const log = WriteAheadLog.start(dir, 9, bytes);
  t.same(WriteAheadLog.read(dir), []);
  for (let n = 9; n <= 14; n++) log.appendSync(payload(n));
  t.same(
    WriteAheadLog.read(dir).map((f) => f.seq),
    [9, 10, 11, 12, 13, 14],
    'rotating through reused files',
  );
  await log.close(true);
});

t.test('a rotation that fails changes nothing: that frame fails, the next ones go on', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  const log = WriteAheadLog.start(dir, 1, 150);
  const spares = () => sparesIn(dir);
  await spareMade(dir, log);
  log.appendSync(payload(1));
  log.appendSync(payload(2));
  // The spare vanishes under the log (an I/O error renaming it would do the same).
  for (const name of spares()) rmSync(join(dir, name));
  t.throws(() => log.appendSync(payload(3)), { code: 'ENOENT' }, 'on this thread the frame fails');
  // A new spare is made; it vanishes too.
  await spareMade(dir, log);
  for (const name of spares()) rmSync(join(dir, name));
  await t.rejects(log.append(payload(3)), { code: 'ENOENT' }, 'on the pool the promise rejects (nothing is thrown past it)');
  await spareMade(dir, log);
  t.equal(await log.append(payload(3)), 3, 'the next try takes the spare made since');
  t.equal(log.appendSync(payload(4)), 4);
  t.same(
    WriteAheadLog.read(dir).map((f) => f.seq),
    [1, 2, 3, 4],
  );
  await log.close(false);
});

t.test('a segment missing in the middle of the log is refused, not skipped', async (t) => {
  const dir = tempDataDir();
  t.teardown(() => removeDir(dir));
  await writtenLog(dir, 150, 6);
  const segments = segmentsOf(dir);
  t.equal(segments.length, 3);
  rmSync(join(dir, segments[1] as string));
  t.throws(() => WriteAheadLog.read(dir), /misses frames 3 to 4/);
  t.same(
    WriteAheadLog.read(dir, 4).map((f) => f.seq),
    [5, 6],
    'reading from a frame the missing segment held is fine: LMDB has it',
  );
});

t.test('frames not synced one by one (a cluster copy): written without O_DSYNC, synced when asked and at rotation', async (t) => {
  const O_DSYNC = 0o10000; // Linux
  const flagsOf = (log: WriteAheadLog): number => {
    const fd = (log as unknown as { fd: number }).fd;
    const line = readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('flags:')) as string;
    return parseInt(line.split(/\s+/)[1] as string, 8);
  };
  const synced = tempDataDir();
  const loose = tempDataDir();
  t.teardown(() => {
    removeDir(synced);
    removeDir(loose);
  });
  const byDefault = WriteAheadLog.start(synced, 1, 200);
  t.ok(flagsOf(byDefault) & O_DSYNC, 'by default each frame is written with O_DSYNC');
  await byDefault.sync();
  await byDefault.close(false);

  const log = WriteAheadLog.start(loose, 1, 200, { syncFrames: false });
  t.notOk(flagsOf(log) & O_DSYNC, 'without O_DSYNC');
  const seqs = [1, 2, 3, 4, 5, 6, 7].map((n) => log.appendSync(payload(n)));
  t.ok(segmentsOf(loose).length >= 3, 'segments rotate as before');
  t.notOk(flagsOf(log) & O_DSYNC, 'the next segment too');
  t.equal(await log.append(payload(8)), 8, 'a frame written on the pool');
  await log.sync();
  t.same(
    WriteAheadLog.read(loose).map((f) => f.seq),
    [...seqs, 8],
    'every frame reads back',
  );
  await log.close(false);
  await log.sync();
  t.pass('a sync after close does nothing');
});
