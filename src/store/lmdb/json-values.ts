import { asBinary } from 'lmdb';
import { Encoder } from 'msgpackr';

/**
 * Values of the dbs that hold what machines and their callers made (heads, histories, the outbox, machine
 * logs) come in two forms:
 * - msgpack, what lmdb-js wrote for an object before 2026-11-30 (read still, never written now);
 * - JSON text, behind one byte that msgpack never uses (0xc1, "never used" in the msgpack spec): what
 *   every write stores. A commit that comes through the log is stored as the JSON text its frame already
 *   holds (`asJsonValue`: not encoded a second time; msgpack encoding of a head and its record was ≈ 8 %
 *   of the node's main thread at 64 in flight); any other write is stringified by the encoder below.
 * These values are JSON values (they came in as JSON, or went through it on their way to the log), and
 * msgpack does not carry every JSON value: msgpackr's decode renames an own key `__proto__` to
 * `__proto_` (on purpose) and a string with a lone surrogate (`"\ud800"`, valid JSON) comes back as
 * U+FFFD. So a direct write (a status change, a deletion's neighbours, a commit that sends or takes a
 * message) or a crash's replay, when they wrote msgpack, changed the context from what the instance
 * showed before. JSON round-trips all of it.
 */
const JSON_MARK = 0xc1;

/**
 * The encoder of those dbs: lmdb-js's own (msgpackr, made with lmdb-js's options through the `Encoder`
 * hook of `encoder`), whose encode writes the JSON form and whose decode reads either.
 */
class MsgpackOrJsonEncoder extends Encoder {
  constructor(options?: ConstructorParameters<typeof Encoder>[0]) {
    super(options);
    // msgpackr's constructor sets `encode` on the instance (a prototype method would not be called).
    // lmdb-js asks for a reusable buffer (its mode argument) because msgpackr has `copyBuffers`; a fresh
    // buffer without start/end is taken as it is, as an `asBinary` value is
    this.encode = (value: unknown): Buffer => jsonBytes(JSON.stringify(value));
  }

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
export const asJsonValue = <V>(json: string): V =>
  // lmdb-js stores a Binary's bytes unencoded; typed as the db's value type, which it reads back as
  asBinary(jsonBytes(json)) as unknown as V;

/** A JSON text in the JSON form: the mark, then its UTF-8 (JSON.stringify escapes lone surrogates). */
const jsonBytes = (json: string): Buffer => {
  const bytes = Buffer.allocUnsafe(1 + Buffer.byteLength(json, 'utf8'));
  bytes[0] = JSON_MARK;
  bytes.write(json, 1, 'utf8');
  return bytes;
};
