import { asBinary } from 'lmdb';
import { Encoder } from 'msgpackr';

/**
 * Values of the heads and histories dbs come in two forms:
 * - msgpack, what lmdb-js writes for an object (every write that does not go through the log, and
 *   everything written before 2026-11-25);
 * - the JSON text a commit's log frame already holds, behind one byte that msgpack never uses (0xc1,
 *   "never used" in the msgpack spec), written when LMDB takes commits from the log: the text was
 *   made once for the frame, so the commit is not encoded a second time (msgpack encoding of a head and
 *   its record was ≈ 8 % of the node's main thread at 64 in flight).
 * Both read back as the same value: a head or record goes through JSON on its way to the log, and a
 * restart after a crash applies exactly that JSON to LMDB.
 */
const JSON_MARK = 0xc1;

/**
 * The encoder of those dbs: lmdb-js's own (msgpackr, made with lmdb-js's options through the `Encoder`
 * hook of `encoder`), whose decode also reads the JSON form.
 */
class MsgpackOrJsonEncoder extends Encoder {
  override decode(bytes: Buffer | Uint8Array, options?: unknown): unknown {
    // lmdb-js passes the end of the value (a number), or an options object, or nothing (then the
    // buffer's length is the value's): the bounds msgpackr's own decode reads from them
    const bounds = typeof options === 'object' && options !== null ? (options as { start?: number; end?: number }) : {};
    const start = bounds.start ?? 0;
    if (bytes[start] !== JSON_MARK) return super.decode(bytes, options as Parameters<Encoder['decode']>[1]);
    const end = typeof options === 'number' ? options : (bounds.end ?? bytes.length);
    return JSON.parse(Buffer.from(bytes.buffer, bytes.byteOffset + start + 1, end - start - 1).toString('utf8'));
  }
}

/** The options that make an lmdb-js db read and write with MsgpackOrJsonEncoder. */
export const msgpackOrJson = { encoding: 'msgpack', encoder: { Encoder: MsgpackOrJsonEncoder } } as const;

/** A JSON text to store as it is (in the JSON form above), in place of the value it encodes. */
export const asJsonValue = <V>(json: string): V => {
  const bytes = Buffer.allocUnsafe(1 + Buffer.byteLength(json, 'utf8'));
  bytes[0] = JSON_MARK;
  bytes.write(json, 1, 'utf8');
  // lmdb-js stores a Binary's bytes unencoded; typed as the db's value type, which it reads back as
  return asBinary(bytes) as unknown as V;
};
