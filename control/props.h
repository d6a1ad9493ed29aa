/* Kafka-style properties text: the syntax of java.util.Properties.load(),
 * which Kafka uses for server.properties and meta.properties.
 *
 * Supported, as in Java:
 *   - lines end with \n, \r or \r\n;
 *   - blank lines, and lines whose first non-blank character is '#' or '!',
 *     are ignored (a comment line never continues onto the next);
 *   - blanks are space, tab and form feed; leading blanks are skipped;
 *   - the key ends at the first unescaped '=', ':' or blank; blanks around
 *     the separator are skipped, and "key value" (blank only) works too;
 *   - a line ending in an odd number of backslashes continues on the next
 *     one, whose leading blanks (and any blank lines) are skipped;
 *   - escapes in keys and values: \t \n \r \f, \\ (a backslash),
 *     \uXXXX (written as UTF-8; surrogate pairs combined), and backslash
 *     before any other character stands for that character ("\=", "\ ",
 *     "\#");
 *   - other bytes pass through unchanged (UTF-8 files read as UTF-8).
 * Differences from Java, on purpose:
 *   - trailing unescaped blanks of a value are trimmed (Kafka trims values
 *     before parsing them anyway); write "\ " to keep one;
 *   - a NUL byte, \u0000, a lone surrogate or a short \uXXXX is an error,
 *     not a silently odd key;
 *   - Java reads bytes as ISO-8859-1; here they are kept as they are.
 * Duplicate keys are all reported to the callback, in order; the caller
 * decides (kmirrord: the last one wins, as with Java).
 */
#ifndef KM_CONTROL_PROPS_H
#define KM_CONTROL_PROPS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Called once per key/value pair. key and value are NUL-terminated, decoded,
 * and valid only during the call. line is the 1-based line the pair starts
 * on. Return 0 to go on, or a negative code to stop parsing with it.
 */
typedef int (*km_props_fn)(void *arg, const char *key, const char *value,
			   uint32_t line);

/**
 * Parse len bytes of properties text, calling fn for each pair in order.
 * Allocates one scratch buffer of about 2 * len bytes for the call.
 *
 * @param err_line  on KM_ECFGSYNTAX, the line of the error (may be NULL).
 * @param err_what  on KM_ECFGSYNTAX, a static description (may be NULL).
 * @return 0; KM_ECFGSYNTAX (malformed escape, NUL byte); -ENOMEM; or the
 *         first negative value fn returned.
 */
int km_props_parse(const char *text, size_t len, km_props_fn fn, void *arg,
		   uint32_t *err_line, const char **err_what);

/**
 * Escape src so that km_props_parse() reads it back unchanged, as a key
 * (is_key: blanks, '=' and ':' escaped everywhere) or a value (leading and
 * trailing blanks escaped). Backslash, '#'/'!' at the start, and control
 * characters (\t \n \r \f, others as \uXXXX) are escaped in both.
 *
 * @return the length of the escaped text (without the NUL), like snprintf:
 *         dst holds all of it only if the return is below cap.
 */
size_t km_props_escape(char *dst, size_t cap, const char *src, int is_key);

#ifdef __cplusplus
}
#endif

#endif
