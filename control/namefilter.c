/* Anchored ERE lists for topics.include / topics.exclude (namefilter.h). */
#include "control/namefilter.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* "^(expr)$": the whole name, whatever alternatives expr holds. */
static int compile_one(regex_t *re, const char *expr, size_t len, char *err,
		       size_t err_len)
{
	char anchored[KM_NAMEFILTER_BYTES + 8], why[160];
	int rc;

	if (len == 0) {
		snprintf(err, err_len, "an empty expression (two commas, or "
			 "one at an end)");
		return -EINVAL;
	}
	snprintf(anchored, sizeof(anchored), "^(%.*s)$", (int)len, expr);
	if ((rc = regcomp(re, anchored, REG_EXTENDED | REG_NOSUB)) != 0) {
		regerror(rc, re, why, sizeof(why));
		snprintf(err, err_len, "\"%.*s\": %s", (int)len, expr, why);
		return -EINVAL;
	}
	return 0;
}

/* The comma that ends the expression at s, or NULL: one inside (), []
 * or {} belongs to the expression ("a{2,5}", "[,;]"), as does an escaped
 * one. */
static const char *next_comma(const char *s)
{
	int depth = 0;
	bool in_class = false;

	for (; *s != '\0'; s++) {
		if (*s == '\\' && s[1] != '\0')
			s++;
		else if (in_class)
			in_class = *s != ']';
		else if (*s == '[')
			in_class = true;
		else if (*s == '(' || *s == '{')
			depth++;
		else if ((*s == ')' || *s == '}') && depth > 0)
			depth--;
		else if (*s == ',' && depth == 0)
			return s;
	}
	return NULL;
}

int km_namefilter_compile(struct km_namefilter *f, const char *list,
			  char *err, size_t err_len)
{
	const char *s = list;
	int rc;

	f->n = 0;
	if (strlen(list) >= KM_NAMEFILTER_BYTES) {
		snprintf(err, err_len, "longer than %u bytes",
			 KM_NAMEFILTER_BYTES - 1);
		return -EINVAL;
	}
	while (*list != '\0') {
		const char *comma = next_comma(s);
		size_t len = comma ? (size_t)(comma - s) : strlen(s);

		while (len > 0 && *s == ' ')
			s++, len--;
		while (len > 0 && s[len - 1] == ' ')
			len--;
		if (f->n == KM_NAMEFILTER_MAX) {
			snprintf(err, err_len, "more than %u expressions",
				 KM_NAMEFILTER_MAX);
			rc = -EINVAL;
		} else {
			rc = compile_one(&f->re[f->n], s, len, err, err_len);
		}
		if (rc < 0) {
			km_namefilter_free(f);
			return rc;
		}
		f->n++;
		if (comma == NULL)
			break;
		s = comma + 1;
	}
	return 0;
}

bool km_namefilter_match(const struct km_namefilter *f, const char *name)
{
	for (uint32_t i = 0; i < f->n; i++)
		if (regexec(&f->re[i], name, 0, NULL, 0) == 0)
			return true;
	return false;
}

void km_namefilter_free(struct km_namefilter *f)
{
	for (uint32_t i = 0; i < f->n; i++)
		regfree(&f->re[i]);
	f->n = 0;
}
