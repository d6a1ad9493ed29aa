/* Name filters for topic discovery: `topics.include` / `topics.exclude`.
 *
 * A filter is a comma-separated list of POSIX extended regular
 * expressions (regcomp(3), REG_EXTENDED; a comma inside (), [] or {}
 * belongs to its expression: "a{2,5}"), each matched against the whole
 * name (anchored, as Java's Pattern.matches in MirrorMaker 2's
 * topics/topics.exclude): `orders\..*` takes orders.eu, not xorders.eu.
 * ERE is close to Java's syntax for the patterns operators write (., *,
 * +, ?, [], |, (), {m,n}); Java's \d, \w and lazy quantifiers are not ERE.
 */
#ifndef KM_CONTROL_NAMEFILTER_H
#define KM_CONTROL_NAMEFILTER_H

#include <regex.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KM_NAMEFILTER_MAX 32u		/* expressions per list */
#define KM_NAMEFILTER_BYTES 1024u	/* the list as written */

struct km_namefilter {
	regex_t re[KM_NAMEFILTER_MAX];
	uint32_t n;
};

/**
 * Compile list ("" = matches nothing).
 * @param err  on failure: which expression and regerror's reason.
 * @return 0, or -EINVAL (too many expressions, one empty or invalid).
 */
int km_namefilter_compile(struct km_namefilter *f, const char *list,
			  char *err, size_t err_len);
/** Whether some expression matches all of name. */
bool km_namefilter_match(const struct km_namefilter *f, const char *name);
void km_namefilter_free(struct km_namefilter *f);

#ifdef __cplusplus
}
#endif

#endif
