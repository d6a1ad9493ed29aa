/* Partition table lookups: binary search over (topic, partition). */
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
static uint32_t lower_bound(const struct km_part_table *t, const char *topic,
			    int32_t partition)
{
	uint32_t lo = 0, hi = t->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (cmp(&t->parts[mid], topic, partition) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct km_part *km_part_find(const struct km_part_table *t, const char *topic,
			     int32_t partition)
{
	uint32_t i = lower_bound(t, topic, partition);

	if (i < t->n && cmp(&t->parts[i], topic, partition) == 0)
		return &t->parts[i];
	return NULL;
}

uint32_t km_part_topic(const struct km_part_table *t, const char *topic,
		       struct km_part **first)
{
	uint32_t i = lower_bound(t, topic, INT32_MIN), n = 0;

	while (i + n < t->n && strcmp(t->parts[i + n].topic, topic) == 0)
		n++;
	*first = n > 0 ? &t->parts[i] : NULL;
	return n;
}
