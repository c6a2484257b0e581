/*
 * glob.h - Redis's glob-style pattern matching (SCAN's MATCH), pure.
 *
 * `*` matches any run of bytes (also none), `?` any one byte, `[abc]` one
 * of the bytes listed, `[^abc]` one not listed, `[a-z]` a range (its ends
 * in either order), `\x` the byte x itself (also inside brackets). A `[`
 * left open runs to the end of the pattern. Bytes compare unsigned (Redis
 * compares ranges as signed chars: they differ only for ranges with an end
 * past 0x7f).
 *
 * One more difference: Redis matches the empty string with the empty
 * pattern only (not with "*"); here "*" matches it too. Keys are never
 * empty, so SCAN answers alike.
 *
 * The matcher backtracks only to the last `*` seen, so it takes at most
 * O(len(pattern) * len(string)) steps on any input (Redis's recursive
 * matcher is exponential on patterns such as "*a*a*a*a*b"), and a
 * trailing star ends it: "prefix*" costs a comparison of the prefix.
 */
#ifndef RK_GLOB_H
#define RK_GLOB_H

#include <stdbool.h>

#include "common/rk.h"

/* Whether s matches pattern. nocase: ASCII letters compare without case. */
bool rk_glob_match(struct rk_slice pattern, struct rk_slice s, bool nocase);

#endif
