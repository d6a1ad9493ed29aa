/* Synced topic configs (tconfig.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/serve/tconfig.h"

int km_tconfig_new(struct km_tconfig **out)
{
	struct km_tconfig *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	*out = t;
	return 0;
}

void km_tconfig_free(struct km_tconfig *t)
{
	if (t == NULL)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t);
}

static int cmp_entry(const void *a, const void *b)
{
	return strcmp(((const struct km_tconfig_entry *)a)->name,
		      ((const struct km_tconfig_entry *)b)->name);
}

/* Entries compare by their strings: the bytes after a NUL are whatever
 * the caller's buffer held. */
static bool same(const struct km_tconfig_entry *a,
		 const struct km_tconfig_entry *b, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(a[i].name, b[i].name) != 0 ||
		    strcmp(a[i].value, b[i].value) != 0)
			return false;
	return true;
}

int km_tconfig_replace(struct km_tconfig *t, const struct km_tconfig_entry *e,
		       uint32_t n)
{
	struct km_tconfig_entry *sorted;
	int changed;

	if (n > KM_TCONFIG_ENTRIES_MAX)
		n = KM_TCONFIG_ENTRIES_MAX;
	if ((sorted = calloc(n ? n : 1, sizeof(*sorted))) == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		snprintf(sorted[i].name, sizeof(sorted[i].name), "%s", e[i].name);
		snprintf(sorted[i].value, sizeof(sorted[i].value), "%s",
			 e[i].value);
	}
	qsort(sorted, n, sizeof(*sorted), cmp_entry);
	pthread_mutex_lock(&t->lock);
	changed = t->n != n || !same(t->e, sorted, n);
	if (changed) {
		memcpy(t->e, sorted, sizeof(*sorted) * n);
		t->n = n;
	}
	pthread_mutex_unlock(&t->lock);
	free(sorted);
	return changed;
}

uint32_t km_tconfig_copy(struct km_tconfig *t, struct km_tconfig_entry *out,
			 uint32_t max)
{
	uint32_t n;

	pthread_mutex_lock(&t->lock);
	n = t->n < max ? t->n : max;
	memcpy(out, t->e, sizeof(*out) * n);
	pthread_mutex_unlock(&t->lock);
	return n;
}

uint32_t km_tconfig_count(struct km_tconfig *t)
{
	uint32_t n;

	pthread_mutex_lock(&t->lock);
	n = t->n;
	pthread_mutex_unlock(&t->lock);
	return n;
}

bool km_tconfig_get(struct km_tconfig *t, const char *name, char *value,
		    size_t cap)
{
	bool found = false;

	pthread_mutex_lock(&t->lock);
	for (uint32_t i = 0; i < t->n && !found; i++)
		if (strcmp(t->e[i].name, name) == 0) {
			snprintf(value, cap, "%s", t->e[i].value);
			found = true;
		}
	pthread_mutex_unlock(&t->lock);
	return found;
}
