/**
 * How deeply a JSON text nests objects and arrays, read off the text without parsing it.
 *
 * Why a limit: the parts of the node that walk values recursively (V8's serializer on the sandbox
 * worker channel, msgpackr when a commit is encoded) overflow their stack somewhere past 1,000
 * levels, which a 10 KB body reaches. So values deeper than MAX_JSON_DEPTH are refused where they come
 * in (request bodies, token claims) and where machine code produces them (step results, with
 * MAX_STATE_DEPTH).
 */
export const MAX_JSON_DEPTH = 100;
/**
 * The limit for what machine code produces (state, context, snapshot): what comes in is kept a few
 * levels further down (an event inside the snapshot's last event, say), so more room than for input.
 */
export const MAX_STATE_DEPTH = 200;

/** The deepest nesting of `[` and `{` in `text` (0 for a scalar), counting no bracket inside a string. */
export const jsonDepth = (text: string): number => {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22 /* " */) {
      // Skip the string, escapes included.
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === 0x5c /* \ */) i++;
        else if (s === 0x22) break;
      }
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > deepest) deepest = depth;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return deepest;
};

/**
 * Whether `text` nests deeper than `limit`. A JSON text that does takes at least 2 × (limit + 1)
 * characters (every level opens and closes a bracket), so shorter texts are not scanned: the hot path's
 * step results and commits are a few hundred characters. A shorter text with more unclosed brackets
 * than that is not JSON: JSON.stringify never writes one, and JSON.parse, which the other callers run
 * next, refuses it without recursing.
 */
export const tooDeep = (text: string, limit: number = MAX_JSON_DEPTH): boolean => text.length > 2 * limit + 1 && jsonDepth(text) > limit;
