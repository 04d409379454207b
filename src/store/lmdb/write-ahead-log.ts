/**
 * The embedded store's write-ahead log: a commit is durable, and may be acknowledged, once its frame
 * is written here with one O_DSYNC write; LMDB takes the same writes right after, on its own pace
 * (lmdb-instance-store.ts), and segments whose frames LMDB holds durably are deleted. On start, the
 * frames LMDB did not get are read back and applied.
 *
 * Why: a durable LMDB commit writes a few pages per instance it touches, flushes them, then writes
 * its meta page with O_DSYNC (two flushes and the page writes on the commit's path); one sequential
 * O_DSYNC write is one flush. Measured here: ≈ 0.13 ms for the frame against ≈ 0.33 ms for the
 * smallest synced LMDB commit, and the difference grows with the batch.
 *
 * Segments are `<first seq, 16 digits>.wal`, created sparse at their full size: an O_DSYNC write
 * inside the file's size costs the same as into a preallocated one (≈ 130 µs here), where appending
 * to a growing file costs ≈ 195 µs (its size change is journaled). A frame is
 *   magic u32 | payload length u32 | seq u64 | crc32 u32 (of length, seq and payload) | payload
 * and frames are numbered without gaps, so reading stops at the first one that is not the next:
 * the zeros of the sparse tail, a torn write, or a frame of an older segment.
 */
import { closeSync, fsyncSync, ftruncateSync, mkdirSync, openSync, readdirSync, readFileSync, unlink, unlinkSync, writev, writevSync, constants } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';

const MAGIC = 0x53485731; // "SHW1"
const HEADER_BYTES = 20;
const SEGMENT_NAME = /^(\d{16})\.wal$/;
export const DEFAULT_SEGMENT_BYTES = 64 * 1024 * 1024;

export interface WalFrame {
  seq: number;
  payload: Buffer;
}

interface Segment {
  firstSeq: number;
  path: string;
}

const segmentName = (firstSeq: number): string => `${String(firstSeq).padStart(16, '0')}.wal`;

/** The segments in `dir`, oldest first. */
const listSegments = (dir: string): Segment[] => {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const segments: Segment[] = [];
  for (const name of names) {
    const match = SEGMENT_NAME.exec(name);
    if (match) segments.push({ firstSeq: Number(match[1]), path: join(dir, name) });
  }
  return segments.sort((a, b) => a.firstSeq - b.firstSeq);
};

const frameCrc = (header: Buffer, payload: Uint8Array): number => crc32(payload, crc32(header.subarray(4, 16)));

/** Makes a new directory entry durable (a created segment must not vanish with a power cut). */
const syncDirectory = (dir: string): void => {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
};

export class WriteAheadLog {
  private fd: number;
  private offset = 0;
  private capacity: number;
  private readonly segments: Segment[];
  private nextSeq: number;
  /** A frame is being written on libuv's pool. */
  private busy = false;
  private closed = false;

  private constructor(
    private readonly dir: string,
    firstSeq: number,
    private readonly segmentBytes: number,
  ) {
    this.nextSeq = firstSeq;
    const { fd, capacity, segment } = this.createSegment(firstSeq, 0);
    this.fd = fd;
    this.capacity = capacity;
    this.segments = [segment];
  }

  /**
   * The frames in `dir`, in order: the unbroken run from the oldest segment's first frame. What follows
   * a torn or missing frame is not read (it was never acknowledged: frames are written one at a time).
   */
  static read(dir: string): WalFrame[] {
    const frames: WalFrame[] = [];
    const segments = listSegments(dir);
    let expected = segments[0]?.firstSeq ?? 0;
    for (const segment of segments) {
      if (segment.firstSeq !== expected) break;
      const data = readFileSync(segment.path);
      let at = 0;
      while (at + HEADER_BYTES <= data.length) {
        if (data.readUInt32BE(at) !== MAGIC) break;
        const length = data.readUInt32BE(at + 4);
        const seq = Number(data.readBigUInt64BE(at + 8));
        if (seq !== expected || at + HEADER_BYTES + length > data.length) break;
        const header = data.subarray(at, at + HEADER_BYTES);
        const payload = data.subarray(at + HEADER_BYTES, at + HEADER_BYTES + length);
        if (data.readUInt32BE(at + 16) !== frameCrc(header, payload)) break;
        frames.push({ seq, payload });
        expected++;
        at += HEADER_BYTES + length;
      }
    }
    return frames;
  }

  /**
   * Starts a log in `dir` whose next frame is `firstSeq`. Segments already there are deleted: read
   * them first, and apply what they hold durably elsewhere.
   */
  static start(dir: string, firstSeq: number, segmentBytes: number = DEFAULT_SEGMENT_BYTES): WriteAheadLog {
    mkdirSync(dir, { recursive: true });
    WriteAheadLog.remove(dir);
    return new WriteAheadLog(dir, firstSeq, segmentBytes);
  }

  /** Deletes every segment in `dir` (what they held is durable elsewhere). */
  static remove(dir: string): void {
    for (const segment of listSegments(dir)) unlinkSync(segment.path);
  }

  /** The sequence number the next frame will get. */
  get next(): number {
    return this.nextSeq;
  }

  /**
   * Writes one frame on this thread and returns its sequence number once it is durable. A failed write
   * takes no number: the next frame is written at the same place.
   */
  appendSync(payload: Buffer): number {
    const { buffers, position, seq, total } = this.prepare(payload);
    const written = writevSync(this.fd, buffers, position);
    if (written !== total) throw new Error(`short write to the write-ahead log (${written} of ${total} bytes)`);
    this.offset += total;
    this.nextSeq = seq + 1;
    return seq;
  }

  /**
   * Writes one frame on libuv's pool; resolves with its sequence number once it is durable. Frames go
   * one at a time: the next append waits for this one.
   */
  append(payload: Buffer): Promise<number> {
    const { buffers, position, seq, total } = this.prepare(payload);
    this.busy = true;
    return new Promise((resolve, reject) => {
      writev(this.fd, buffers, position, (error, written) => {
        this.busy = false;
        if (error) reject(error);
        else if (written !== total) reject(new Error(`short write to the write-ahead log (${written} of ${total} bytes)`));
        else {
          this.offset += total;
          this.nextSeq = seq + 1;
          resolve(seq);
        }
      });
    });
  }

  /** Frames up to `seq` are durable elsewhere: the segments holding only such frames go. */
  release(seq: number): void {
    while (this.segments.length > 1) {
      const next = this.segments[1] as Segment;
      if (next.firstSeq - 1 > seq) break;
      const done = this.segments.shift() as Segment;
      unlink(done.path, () => undefined);
    }
  }

  /** Closes the current segment; with `discard`, deletes every segment (all frames are durable elsewhere). */
  close(discard: boolean): void {
    if (this.closed) return;
    this.closed = true;
    closeSync(this.fd);
    if (discard) for (const segment of this.segments.splice(0)) unlinkSync(segment.path);
  }

  private prepare(payload: Buffer): { buffers: Buffer[]; position: number; seq: number; total: number } {
    if (this.closed) throw new Error('the write-ahead log is closed');
    if (this.busy) throw new Error('the write-ahead log writes one frame at a time');
    const total = HEADER_BYTES + payload.length;
    if (this.offset > 0 && this.offset + total > this.capacity) this.rotate(total);
    const seq = this.nextSeq;
    const header = Buffer.allocUnsafe(HEADER_BYTES);
    header.writeUInt32BE(MAGIC, 0);
    header.writeUInt32BE(payload.length, 4);
    header.writeBigUInt64BE(BigInt(seq), 8);
    header.writeUInt32BE(frameCrc(header, payload), 16);
    return { buffers: [header, payload], position: this.offset, seq, total };
  }

  /** A new segment for the next frame, at least as large as the frame. */
  private rotate(frameBytes: number): void {
    const { fd, capacity, segment } = this.createSegment(this.nextSeq, frameBytes);
    closeSync(this.fd);
    this.fd = fd;
    this.capacity = capacity;
    this.offset = 0;
    this.segments.push(segment);
  }

  private createSegment(firstSeq: number, frameBytes: number): { fd: number; capacity: number; segment: Segment } {
    const path = join(this.dir, segmentName(firstSeq));
    const capacity = Math.max(this.segmentBytes, frameBytes);
    const fd = openSync(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_DSYNC, 0o600);
    try {
      ftruncateSync(fd, capacity);
      fsyncSync(fd);
      syncDirectory(this.dir);
    } catch (error) {
      closeSync(fd);
      unlinkSync(path);
      throw error;
    }
    return { fd, capacity, segment: { firstSeq, path } };
  }
}
