/* Producer entries (Kafka's ProducerStateEntry) and the hash table that
 * holds them by producer id: open addressing, linear probing, capacity a
 * power of two >= 2 x producers_max so a probe always meets a free slot.
 */
#include "iouring_log/pstate_pvt.h"

#include <string.h>

#include "common/km_assert.h"

/* ---- producer entries (ProducerStateEntry) ---- */

void km_pstate_entry_fresh(struct entry *e, int64_t pid)
{
	memset(e, 0, sizeof(*e));
	e->producer_id = pid;
	e->epoch = -1; /* RecordBatch.NO_PRODUCER_EPOCH */
	e->coordinator_epoch = -1;
	e->last_timestamp = -1;
	e->txn_first_offset = -1;
}

/* maybeUpdateProducerEpoch: "if (this.producerEpoch != producerEpoch) {
 * batchMetadata.clear(); ...}" - sequences restart with a new epoch. */
void km_pstate_entry_set_epoch(struct entry *e, int16_t epoch)
{
	if (e->epoch == epoch)
		return;
	e->epoch = epoch;
	e->batch_head = 0;
	e->batch_count = 0;
}

/* addBatchMetadata: "if (batchMetadata.size() == NUM_BATCHES_TO_RETAIN)
 * batchMetadata.removeFirst()". */
void km_pstate_entry_add_batch(struct entry *e, int16_t epoch,
			       const struct batch_md *md)
{
	km_pstate_entry_set_epoch(e, epoch);
	if (e->batch_count < KM_PSTATE_BATCHES) {
		e->batches[(e->batch_head + e->batch_count) % KM_PSTATE_BATCHES] =
			*md;
		e->batch_count++;
		return;
	}
	e->batches[e->batch_head] = *md;
	e->batch_head = (uint8_t)((e->batch_head + 1) % KM_PSTATE_BATCHES);
}

/* findDuplicateBatch: "if (batch.producerEpoch() != producerEpoch) return
 * Optional.empty()"; else the retained batch with the same first and last
 * sequence (batchWithSequenceRange). */
const struct batch_md *km_pstate_entry_find_dup(const struct entry *e,
						int16_t epoch,
						int32_t first_seq,
						int32_t last_seq)
{
	if (epoch != e->epoch)
		return NULL;
	for (uint32_t i = 0; i < e->batch_count; i++) {
		const struct batch_md *md =
			&e->batches[(e->batch_head + i) % KM_PSTATE_BATCHES];

		if (md->first_seq == first_seq && md->last_seq == last_seq)
			return md;
	}
	return NULL;
}

void km_pstate_entry_info(const struct entry *e, struct km_producer_info *out)
{
	const struct batch_md *md = entry_newest(e);

	out->producer_id = e->producer_id;
	out->epoch = e->epoch;
	out->coordinator_epoch = e->coordinator_epoch;
	out->last_timestamp = e->last_timestamp;
	out->txn_first_offset = e->txn_first_offset;
	out->batch_count = e->batch_count;
	out->first_seq = md ? md->first_seq : -1;
	out->last_seq = md ? md->last_seq : -1;
	out->first_offset = md ? md->first_offset : -1;
	out->last_offset = md ? md->last_offset : -1;
}

/* ---- hash table ---- */

uint32_t km_pstate_table_log2_cap(uint32_t producers_max)
{
	uint32_t bits = 1;

	/* Bounded by the limit asserted by the callers: at most 26 rounds. */
	while (bits < 31 && (1u << bits) < 2 * (uint64_t)producers_max)
		bits++;
	return bits;
}

static uint32_t home_slot(const struct km_pstate *ps, int64_t pid)
{
	/* Fibonacci hashing: the top bits of pid x 2^64/phi spread the dense,
	 * sequential ids a coordinator hands out over the whole table. */
	return (uint32_t)(((uint64_t)pid * 0x9E3779B97F4A7C15ull) >>
			  ps->table_shift);
}

struct entry *km_pstate_table_find(const struct km_pstate *ps, int64_t pid)
{
	uint32_t i = home_slot(ps, pid);

	/* At most half the slots are used: the probe meets a free one. */
	for (uint32_t n = 0; n <= ps->table_mask; n++) {
		struct entry *e = &ps->table[i];

		if (!e->used)
			return NULL;
		if (e->producer_id == pid)
			return e;
		i = (i + 1) & ps->table_mask;
	}
	return NULL;
}

void km_pstate_table_insert(struct km_pstate *ps, const struct entry *e)
{
	uint32_t i = home_slot(ps, e->producer_id);

	KM_ASSERT(ps->count < ps->producers_max);
	for (uint32_t n = 0; n <= ps->table_mask; n++) {
		if (!ps->table[i].used) {
			ps->table[i] = *e;
			ps->table[i].used = true;
			ps->count++;
			return;
		}
		i = (i + 1) & ps->table_mask;
	}
	KM_ASSERT(!"hash table without a free slot");
}

/* Store an updated copy: over its slot, or as a new entry. */
void km_pstate_table_commit(struct km_pstate *ps, struct entry *slot,
			    const struct entry *e)
{
	if (slot != NULL) {
		*slot = *e;
		slot->used = true;
	} else
		km_pstate_table_insert(ps, e);
}

/* Free slot hole by backward-shift deletion (Knuth 6.4, Algorithm R): later
 * members of the probe cluster that may live at or before the hole move into
 * it, so lookups never need tombstones. */
static void table_delete_at(struct km_pstate *ps, uint32_t hole)
{
	uint32_t mask = ps->table_mask, j = hole;

	for (uint32_t n = 0; n < mask; n++) {
		j = (j + 1) & mask;
		if (!ps->table[j].used)
			break;
		uint32_t home = home_slot(ps, ps->table[j].producer_id);

		/* Movable iff the hole lies on j's probe path [home, j). */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			ps->table[hole] = ps->table[j];
			hole = j;
		}
	}
	ps->table[hole].used = false;
	ps->count--;
}

/* R3: remove every producer with id < 0 (NO_PID is never stored, so that
 * is every id <= -2). A deletion only moves entries into the slot being
 * looked at or into slots already cleared of negative ids, so re-checking
 * the current slot until it holds no negative id visits every entry. */
uint32_t km_pstate_table_expire_negative(struct km_pstate *ps)
{
	uint32_t expired = 0;

	for (uint32_t i = 0; i <= ps->table_mask; i++) {
		for (uint32_t k = 0; k < ps->producers_max; k++) {
			if (!ps->table[i].used || ps->table[i].producer_id >= 0)
				break;
			table_delete_at(ps, i);
			expired++;
		}
	}
	return expired;
}
