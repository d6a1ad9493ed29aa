/* Which worker owns each partition (issue 18: workers that scale).
 *
 * A hash of topic and partition left two busy partitions on one worker
 * half of the time with two workers (a 4-partition topic all on one worker
 * 1 time in 8): that worker then did all the work while the other slept,
 * and workers=2 moved no more than workers=1. Owners are instead dealt
 * round robin, so that partitions share a worker only when there are more
 * of them than workers, and two classes are dealt apart: mirrored
 * partitions (the source's bytes, the load of a mirror host) and the rest
 * (local topics, the coordinators' logs), so that neither class crowds the
 * other's count. Mirrored partitions are dealt from the last worker down,
 * because worker 0 also runs the Kafka front end; the rest from worker 0
 * up, where a local Produce is taken without a forward.
 *
 * The start's table is sorted by topic then partition, so each topic's
 * partitions take consecutive workers. A partition added while running (a
 * topic found at the source, CreateTopics, CreatePartitions) goes to the
 * worker owning fewest of its class. Owners are not persisted: nothing on
 * disk names a worker, so a restart may deal them differently.
 */
#include <stdint.h>

#include "common/km_assert.h"
#include "control/config.h"
#include "control/daemon_pvt.h"

/* The class's n-th partition's worker, in dealing order. */
static uint32_t dealt(uint32_t k, uint32_t n_workers, bool mirrored)
{
	uint32_t w = k % n_workers;

	return mirrored ? n_workers - 1 - w : w;
}

void km_daemon_assign_owners(struct km_daemon *d)
{
	uint32_t n = d->n_workers > 0 ? d->n_workers : 1;
	uint32_t next[2] = { 0, 0 };

	for (uint32_t i = 0; i < d->table.n; i++) {
		bool m = d->mirrored[i];

		d->table.parts[i].owner = dealt(next[m]++, n, m);
	}
}

uint32_t km_daemon_pick_owner(const struct km_daemon *d, bool mirrored)
{
	uint32_t n = d->n_workers > 0 ? d->n_workers : 1;
	uint32_t count[KM_CONFIG_WORKERS_MAX] = { 0 }, best = dealt(0, n, mirrored);

	KM_ASSERT(n <= KM_CONFIG_WORKERS_MAX);
	for (uint32_t i = 0; i < d->table.n; i++)
		if (!d->table.parts[i].deleted && d->mirrored[i] == mirrored &&
		    d->table.parts[i].owner < n)
			count[d->table.parts[i].owner]++;
	for (uint32_t k = 1; k < n; k++) {
		uint32_t w = dealt(k, n, mirrored);

		if (count[w] < count[best])
			best = w;
	}
	return best;
}
