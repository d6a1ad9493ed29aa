/* Producer snapshots: Kafka's ProducerStateManager.writeSnapshot and
 * readSnapshot, to and from caller buffers in the `.snapshot` format
 * (ProducerSnapshot.json v1). */
#include "iouring_log/pstate_pvt.h"

#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"

/* ProducerSnapshot.json v1, spec §3. */
enum {
	SNAP_VERSION = 1,
	SNAP_OFF_CRC = 2,
	SNAP_OFF_COUNT = 6, /* the CRC covers bytes 6..end */
	SNAP_HEADER_BYTES = 10,
	SNAP_ENTRY_BYTES = 46,
};
static_assert(SNAP_ENTRY_BYTES == 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8,
	      "producerId epoch lastSequence lastOffset offsetDelta timestamp "
	      "coordinatorEpoch currentTxnFirstOffset");

typedef int (*cmp_fn)(const void *a, const void *b);

/* DefaultRecordBatch.decrementSequence: the inverse of incrementSequence,
 * wrapping below 0 back to Int32.MAX. */
static int32_t decrement_sequence(int32_t seq, int32_t delta)
{
	if (seq < 0 || delta < 0)
		return seq;
	if (seq < delta)
		return INT32_MAX - (delta - seq) + 1;
	return seq - delta;
}

/* ---- in-place heapsort (glibc's qsort may malloc a merge buffer, which
 * STYLE 9 rules out after init) ---- */

static void swap_elems(uint8_t *a, uint8_t *b, size_t size)
{
	for (size_t i = 0; i < size; i++) {
		uint8_t t = a[i];

		a[i] = b[i];
		b[i] = t;
	}
}

static void sift_down(uint8_t *base, size_t size, size_t root, size_t n,
		      cmp_fn cmp)
{
	/* root at least doubles each round: at most log2(n) rounds. */
	while (2 * root + 1 < n) {
		size_t child = 2 * root + 1;

		if (child + 1 < n &&
		    cmp(base + child * size, base + (child + 1) * size) < 0)
			child++;
		if (cmp(base + root * size, base + child * size) >= 0)
			return;
		swap_elems(base + root * size, base + child * size, size);
		root = child;
	}
}

static void heap_sort(void *base, size_t n, size_t size, cmp_fn cmp)
{
	uint8_t *p = base;

	if (n < 2)
		return;
	for (size_t i = n / 2; i-- > 0;)
		sift_down(p, size, i, n, cmp);
	for (size_t end = n - 1; end > 0; end--) {
		swap_elems(p, p + end * size, size);
		sift_down(p, size, 0, end, cmp);
	}
}

static int cmp_txn_first(const void *a, const void *b)
{
	int64_t x = ((const struct txn *)a)->first_offset;
	int64_t y = ((const struct txn *)b)->first_offset;

	return (x > y) - (x < y);
}

/* ---- snapshots (ProducerStateManager.writeSnapshot / readSnapshot) ---- */

size_t km_pstate_snapshot_size(const struct km_pstate *ps)
{
	KM_ASSERT(ps != NULL);
	return SNAP_HEADER_BYTES + (size_t)ps->count * SNAP_ENTRY_BYTES;
}

/* writeSnapshot: lastSeq/lastDataOffset/lastOffsetDelta of the newest batch,
 * or NO_SEQUENCE, -1 and 0 for an entry without one; timestamp is the
 * entry's lastTimestamp. */
static void snap_put_entry(uint8_t *p, const struct entry *e)
{
	const struct batch_md *md = entry_newest(e);

	km_store_be64(p, (uint64_t)e->producer_id);
	km_store_be16(p + 8, (uint16_t)e->epoch);
	km_store_be32(p + 10, (uint32_t)(md ? md->last_seq : -1));
	km_store_be64(p + 14, (uint64_t)(md ? md->last_offset : -1));
	/* offsetDelta = lastOffset - firstOffset (< 2^31 for any batch the
	 * log accepts); computed unsigned so hostile offsets cannot overflow. */
	km_store_be32(p + 22, md ? (uint32_t)((uint64_t)md->last_offset -
					      (uint64_t)md->first_offset)
				 : 0);
	km_store_be64(p + 26, (uint64_t)e->last_timestamp);
	km_store_be32(p + 34, (uint32_t)e->coordinator_epoch);
	km_store_be64(p + 38, (uint64_t)e->txn_first_offset);
}

static int cmp_snap_pid(const void *a, const void *b)
{
	int64_t x = (int64_t)km_load_be64(a), y = (int64_t)km_load_be64(b);

	return (x > y) - (x < y);
}

int km_pstate_snapshot_encode(const struct km_pstate *ps, void *buf,
			      size_t cap)
{
	size_t size = km_pstate_snapshot_size(ps);
	uint8_t *p = buf, *w;

	KM_ASSERT(buf != NULL || cap == 0);
	if (cap < size)
		return KM_ENOSPACE;
	w = p + SNAP_HEADER_BYTES;
	for (uint32_t i = 0; i <= ps->table_mask; i++) {
		if (!ps->table[i].used)
			continue;
		snap_put_entry(w, &ps->table[i]);
		w += SNAP_ENTRY_BYTES;
	}
	KM_ASSERT(w == p + size);
	/* Sorted by producer id: the same state always gives the same bytes. */
	heap_sort(p + SNAP_HEADER_BYTES, ps->count, SNAP_ENTRY_BYTES,
		  cmp_snap_pid);
	km_store_be16(p, SNAP_VERSION);
	km_store_be32(p + SNAP_OFF_COUNT, ps->count);
	km_store_be32(p + SNAP_OFF_CRC,
		      km_crc32c_update(0, p + SNAP_OFF_COUNT,
				       size - SNAP_OFF_COUNT));
	return (int)size;
}

/* Version, CRC-32C over bytes 6..end, and count matching the length
 * exactly; anything else is a corrupt snapshot (Kafka: CorruptSnapshot-
 * Exception, and the next older snapshot is tried). */
static int snap_check(const uint8_t *p, size_t len, uint32_t *count)
{
	int32_t n;

	if (len < SNAP_HEADER_BYTES)
		return KM_ESNAPSHOT;
	if ((int16_t)km_load_be16(p) != SNAP_VERSION)
		return KM_ESNAPSHOT;
	if (km_load_be32(p + SNAP_OFF_CRC) !=
	    km_crc32c_update(0, p + SNAP_OFF_COUNT, len - SNAP_OFF_COUNT))
		return KM_ESNAPSHOT;
	n = (int32_t)km_load_be32(p + SNAP_OFF_COUNT);
	if (n < 0)
		return KM_ESNAPSHOT;
	if ((uint64_t)len !=
	    SNAP_HEADER_BYTES + (uint64_t)n * SNAP_ENTRY_BYTES)
		return KM_ESNAPSHOT;
	*count = (uint32_t)n;
	return 0;
}

/* readSnapshot: batch metadata only "if lastOffset >= 0", an open
 * transaction only "if currentTxnFirstOffset >= 0". */
static void snap_get_entry(const uint8_t *p, struct entry *e)
{
	struct batch_md md;
	int32_t delta = (int32_t)km_load_be32(p + 22);

	km_pstate_entry_fresh(e, (int64_t)km_load_be64(p));
	e->epoch = (int16_t)km_load_be16(p + 8);
	md.last_seq = (int32_t)km_load_be32(p + 10);
	md.last_offset = (int64_t)km_load_be64(p + 14);
	md.timestamp = (int64_t)km_load_be64(p + 26);
	e->last_timestamp = md.timestamp;
	e->coordinator_epoch = (int32_t)km_load_be32(p + 34);
	e->txn_first_offset = (int64_t)km_load_be64(p + 38);
	if (e->txn_first_offset < 0)
		e->txn_first_offset = -1;
	if (md.last_offset < 0)
		return;
	md.first_seq = decrement_sequence(md.last_seq, delta);
	md.first_offset = (int64_t)((uint64_t)md.last_offset - (uint64_t)delta);
	km_pstate_entry_add_batch(e, e->epoch, &md);
}

static int snap_load(struct km_pstate *ps, const uint8_t *p, uint32_t count)
{
	struct entry e;

	if (count > ps->producers_max)
		return KM_EPSTATEFULL;
	for (uint32_t i = 0; i < count; i++, p += SNAP_ENTRY_BYTES) {
		snap_get_entry(p, &e);
		/* Kafka writes one entry per producer, never one for "no
		 * producer": anything else is not a snapshot it wrote. */
		if (e.producer_id == NO_PID ||
		    km_pstate_table_find(ps, e.producer_id))
			return KM_ESNAPSHOT;
		if (entry_txn_open(&e)) {
			if (ps->txn_len == ps->txns_max)
				return KM_EPSTATEFULL;
			km_pstate_txns_push(ps, e.txn_first_offset,
					    e.producer_id);
		}
		km_pstate_table_insert(ps, &e);
		note_pid(ps, e.producer_id);
	}
	return 0;
}

int km_pstate_snapshot_decode(struct km_pstate *ps, const void *buf,
			      size_t len, int64_t next_offset)
{
	uint32_t count = 0;
	int rc;

	KM_ASSERT(ps != NULL);
	KM_ASSERT(buf != NULL || len == 0);
	km_pstate_reset(ps);
	rc = snap_check(buf, len, &count);
	if (rc == 0)
		rc = snap_load(ps, (const uint8_t *)buf + SNAP_HEADER_BYTES,
			       count);
	if (rc < 0) {
		km_pstate_reset(ps);
		return rc;
	}
	/* Entries come sorted by producer id; the ring wants first offsets
	 * in order (head is 0 after the reset, so the ring is flat). */
	KM_ASSERT(ps->txn_head == 0);
	heap_sort(ps->txns, ps->txn_len, sizeof(struct txn), cmp_txn_first);
	ps->next_offset = next_offset;
	return 0;
}
