/* Partition table lookups: binary search over a sorted view of (topic,
 * partition), and the views the control thread publishes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dataplane/serve/part.h"

static int cmp(const struct km_part *p, const char *topic, int32_t partition)
{
	int c = strcmp(p->topic, topic);

	if (c != 0)
		return c;
	return (p->partition > partition) - (p->partition < partition);
}

/* Index of the first entry not below (topic, partition). */
static uint32_t lower_bound(const struct km_part_index *ix, const char *topic,
			    int32_t partition)
{
	uint32_t lo = 0, hi = ix->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (cmp(ix->p[mid], topic, partition) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct km_part *km_part_find(const struct km_part_table *t, const char *topic,
			     int32_t partition)
{
	const struct km_part_index *ix = km_part_index_get(t);
	uint32_t i = lower_bound(ix, topic, partition);

	if (i < ix->n && cmp(ix->p[i], topic, partition) == 0)
		return ix->p[i];
	return NULL;
}

uint32_t km_part_topic(const struct km_part_index *ix, const char *topic,
		       struct km_part *const **first)
{
	uint32_t i = lower_bound(ix, topic, INT32_MIN), n = 0;

	while (i + n < ix->n && strcmp(ix->p[i + n]->topic, topic) == 0)
		n++;
	*first = n > 0 ? &ix->p[i] : NULL;
	return n;
}

static int cmp_entries(const void *a, const void *b)
{
	const struct km_part *x = *(struct km_part *const *)a;
	const struct km_part *y = *(struct km_part *const *)b;

	return cmp(x, y->topic, y->partition);
}

int km_part_table_publish(struct km_part_table *t)
{
	struct km_part_index *ix = malloc(sizeof(*ix) + t->n * sizeof(ix->p[0]));

	if (ix == NULL)
		return -ENOMEM;
	ix->n = 0;
	for (uint32_t i = 0; i < t->n; i++)
		if (!t->parts[i].deleted)
			ix->p[ix->n++] = &t->parts[i];
	qsort(ix->p, ix->n, sizeof(ix->p[0]), cmp_entries);
	ix->retired = atomic_load_explicit(&t->index, memory_order_relaxed);
	/* Every pointer and entry is visible before the view is. */
	atomic_store_explicit(&t->index, ix, memory_order_release);
	return 0;
}

void km_part_table_fini(struct km_part_table *t)
{
	struct km_part_index *ix = atomic_load(&t->index);

	while (ix != NULL) {
		struct km_part_index *next = ix->retired;

		free(ix);
		ix = next;
	}
	atomic_store(&t->index, NULL);
}
