/* Producer state manager (R2, R3): what Kafka's ProducerStateManager,
 * ProducerStateEntry and ProducerAppendInfo keep and check, over one caller
 * memory block and with no I/O. See pstate.h for the contract.
 *
 * Layout of the block: struct km_pstate | hash table of producer entries
 * (open addressing, linear probing, capacity a power of two >= 2 x
 * producers_max so a probe always meets a free slot) | ring of transactions
 * (txns_max), oldest first offset at the head.
 *
 * The transaction ring is ordered by first offset because transactions open
 * in offset order (batches arrive in offset order, R6), so the LSO is the
 * head's first offset once decided transactions whose marker is below the
 * high watermark have been popped (Kafka's ongoingTxns + unreplicatedTxns,
 * both keyed by first offset).
 */
#include "iouring_log/pstate.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "kafka/control.h"

/* Largest capacities accepted: the hash table (2 x, power of two) stays in
 * uint32 and a full snapshot (10 + 46 bytes per producer, 772 MiB at this
 * bound) stays below INT_MAX, so snapshot_encode can return its size. */
#define PSTATE_PRODUCERS_LIMIT (1u << 24)
#define PSTATE_TXNS_LIMIT (1u << 24)

/* producerId -1 is "no producer" (RecordBatch.NO_PRODUCER_ID); it is never
 * stored, so it marks a free hash slot. */
#define NO_PID ((int64_t)-1)

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

/* Kafka's BatchMetadata, with the first sequence and offset kept rather than
 * recomputed from offsetDelta. */
struct batch_md {
	int32_t first_seq;
	int32_t last_seq;
	int64_t first_offset;
	int64_t last_offset;
	int64_t timestamp;
};

/* Kafka's ProducerStateEntry. */
struct entry {
	int64_t producer_id; /* NO_PID: free slot */
	int64_t last_timestamp;
	int64_t txn_first_offset; /* -1: no open transaction */
	int32_t coordinator_epoch;
	int16_t epoch;
	uint8_t batch_head; /* oldest remembered batch */
	uint8_t batch_count;
	struct batch_md batches[KM_PSTATE_BATCHES];
};
static_assert(KM_PSTATE_BATCHES < UINT8_MAX, "ring indexes fit uint8_t");

/* One transaction, open (marker_offset -1) or decided. */
struct txn {
	int64_t first_offset;
	int64_t producer_id;
	int64_t marker_offset;
};

struct km_pstate {
	struct entry *table;
	struct txn *txns;
	uint32_t producers_max;
	uint32_t txns_max;
	uint32_t table_mask;
	uint32_t table_shift; /* 64 - log2(table capacity) */
	uint32_t count;
	uint32_t txn_head;
	uint32_t txn_len;
	int64_t max_positive_pid;
	int64_t next_offset;
	struct km_pstate_stats stats;
};

typedef int (*cmp_fn)(const void *a, const void *b);
typedef bool (*txn_pred_fn)(const struct txn *t, int64_t arg);

/* ---- small helpers ---- */

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static uint32_t table_log2_cap(uint32_t producers_max)
{
	uint32_t bits = 1;

	/* Bounded by the limit asserted by the callers: at most 26 rounds. */
	while (bits < 31 && (1u << bits) < 2 * (uint64_t)producers_max)
		bits++;
	return bits;
}

/* ProducerStateManager.inSequence: "nextSeq == lastSeq + 1L ||
 * (nextSeq == 0 && lastSeq == Integer.MAX_VALUE)". */
static bool in_sequence(int32_t last_seq, int32_t next_seq)
{
	return (int64_t)next_seq == (int64_t)last_seq + 1 ||
	       (next_seq == 0 && last_seq == INT32_MAX);
}

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

static void note_pid(struct km_pstate *ps, int64_t pid)
{
	if (pid > ps->max_positive_pid)
		ps->max_positive_pid = pid;
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

/* ---- producer entries (ProducerStateEntry) ---- */

static void entry_fresh(struct entry *e, int64_t pid)
{
	memset(e, 0, sizeof(*e));
	e->producer_id = pid;
	e->epoch = -1; /* RecordBatch.NO_PRODUCER_EPOCH */
	e->coordinator_epoch = -1;
	e->last_timestamp = -1;
	e->txn_first_offset = -1;
}

static bool entry_txn_open(const struct entry *e)
{
	return e->txn_first_offset >= 0;
}

static const struct batch_md *entry_newest(const struct entry *e)
{
	if (e->batch_count == 0)
		return NULL;
	return &e->batches[(e->batch_head + e->batch_count - 1) %
			   KM_PSTATE_BATCHES];
}

/* maybeUpdateProducerEpoch: "if (this.producerEpoch != producerEpoch) {
 * batchMetadata.clear(); ...}" - sequences restart with a new epoch. */
static void entry_set_epoch(struct entry *e, int16_t epoch)
{
	if (e->epoch == epoch)
		return;
	e->epoch = epoch;
	e->batch_head = 0;
	e->batch_count = 0;
}

/* addBatchMetadata: "if (batchMetadata.size() == NUM_BATCHES_TO_RETAIN)
 * batchMetadata.removeFirst()". */
static void entry_add_batch(struct entry *e, int16_t epoch,
			    const struct batch_md *md)
{
	entry_set_epoch(e, epoch);
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
static const struct batch_md *entry_find_dup(const struct entry *e,
					     int16_t epoch, int32_t first_seq,
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

static void entry_info(const struct entry *e, struct km_producer_info *out)
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

static uint32_t home_slot(const struct km_pstate *ps, int64_t pid)
{
	/* Fibonacci hashing: the top bits of pid x 2^64/phi spread the dense,
	 * sequential ids a coordinator hands out over the whole table. */
	return (uint32_t)(((uint64_t)pid * 0x9E3779B97F4A7C15ull) >>
			  ps->table_shift);
}

static struct entry *table_find(const struct km_pstate *ps, int64_t pid)
{
	uint32_t i = home_slot(ps, pid);

	/* At most half the slots are used: the probe meets a free one. */
	for (uint32_t n = 0; n <= ps->table_mask; n++) {
		struct entry *e = &ps->table[i];

		if (e->producer_id == pid)
			return e;
		if (e->producer_id == NO_PID)
			return NULL;
		i = (i + 1) & ps->table_mask;
	}
	return NULL;
}

static void table_insert(struct km_pstate *ps, const struct entry *e)
{
	uint32_t i = home_slot(ps, e->producer_id);

	KM_ASSERT(ps->count < ps->producers_max);
	for (uint32_t n = 0; n <= ps->table_mask; n++) {
		if (ps->table[i].producer_id == NO_PID) {
			ps->table[i] = *e;
			ps->count++;
			return;
		}
		i = (i + 1) & ps->table_mask;
	}
	KM_ASSERT(!"hash table without a free slot");
}

/* Store an updated copy: over its slot, or as a new entry. */
static void table_commit(struct km_pstate *ps, struct entry *slot,
			 const struct entry *e)
{
	if (slot != NULL)
		*slot = *e;
	else
		table_insert(ps, e);
}

/* Free slot hole by backward-shift deletion (Knuth 6.4, Algorithm R): later
 * members of the probe cluster that may live at or before the hole move into
 * it, so lookups never need tombstones. */
static void table_delete_at(struct km_pstate *ps, uint32_t hole)
{
	uint32_t mask = ps->table_mask, j = hole;

	for (uint32_t n = 0; n < mask; n++) {
		j = (j + 1) & mask;
		if (ps->table[j].producer_id == NO_PID)
			break;
		uint32_t home = home_slot(ps, ps->table[j].producer_id);

		/* Movable iff the hole lies on j's probe path [home, j). */
		if (((j - home) & mask) >= ((j - hole) & mask)) {
			ps->table[hole] = ps->table[j];
			hole = j;
		}
	}
	ps->table[hole].producer_id = NO_PID;
	ps->count--;
}

/* R3: remove every producer with id < 0 (NO_PID is never stored, so that
 * is every id <= -2). A deletion only moves entries into the slot being
 * looked at or into slots already cleared of negative ids, so re-checking
 * the current slot until it holds no negative id visits every entry. */
static uint32_t table_expire_negative(struct km_pstate *ps)
{
	uint32_t expired = 0;

	for (uint32_t i = 0; i <= ps->table_mask; i++) {
		for (uint32_t k = 0; k < ps->producers_max; k++) {
			if (ps->table[i].producer_id >= NO_PID)
				break;
			table_delete_at(ps, i);
			expired++;
		}
	}
	return expired;
}

/* ---- transactions, a ring in first-offset order ---- */

static struct txn *txn_at(const struct km_pstate *ps, uint32_t k)
{
	uint32_t i = ps->txn_head + k;

	KM_ASSERT_HOT(k < ps->txn_len);
	if (i >= ps->txns_max)
		i -= ps->txns_max;
	return &ps->txns[i];
}

static void txns_push(struct km_pstate *ps, int64_t first_offset, int64_t pid)
{
	KM_ASSERT(ps->txn_len < ps->txns_max);
	ps->txn_len++;
	*txn_at(ps, ps->txn_len - 1) = (struct txn){
		.first_offset = first_offset,
		.producer_id = pid,
		.marker_offset = -1,
	};
}

/* Drop every transaction pred selects; keeps the order of the rest. */
static uint32_t txns_filter(struct km_pstate *ps, txn_pred_fn pred,
			    int64_t arg)
{
	uint32_t kept = 0, len = ps->txn_len;

	for (uint32_t r = 0; r < len; r++) {
		struct txn t = *txn_at(ps, r);

		if (!pred(&t, arg))
			*txn_at(ps, kept++) = t;
	}
	ps->txn_len = kept;
	return len - kept;
}

/* removeUnreplicatedTransactions: "if (lastOffset.isPresent() &&
 * lastOffset.getAsLong() < offset) iterator.remove()". */
static bool txn_retired(const struct txn *t, int64_t hw)
{
	return t->marker_offset >= 0 && t->marker_offset < hw;
}

static bool txn_open_negative(const struct txn *t, int64_t unused)
{
	(void)unused;
	return t->marker_offset < 0 && t->producer_id < 0;
}

/* Pop decided transactions below hw from the head: they no longer hold the
 * LSO. Ones further back are compacted away only when the ring is full. */
static void txns_retire(struct km_pstate *ps, int64_t hw)
{
	uint32_t len = ps->txn_len;

	for (uint32_t n = 0; n < len && txn_retired(txn_at(ps, 0), hw); n++) {
		ps->txn_head = (ps->txn_head + 1) % ps->txns_max;
		ps->txn_len--;
	}
}

/* Room for one more transaction, compacting away decided ones below hw.
 * Retiring those is no observable change: the LSO at hw, or any later hw,
 * is the same with or without them. */
static bool txns_make_room(struct km_pstate *ps, int64_t hw)
{
	if (ps->txn_len < ps->txns_max)
		return true;
	txns_filter(ps, txn_retired, hw);
	return ps->txn_len < ps->txns_max;
}

static struct txn *txns_find_open(const struct km_pstate *ps, int64_t pid)
{
	for (uint32_t k = 0; k < ps->txn_len; k++) {
		struct txn *t = txn_at(ps, k);

		if (t->marker_offset < 0 && t->producer_id == pid)
			return t;
	}
	return NULL;
}

/* lastStableOffset(completedTxn): "findNextIncompleteTxn(producerId)
 * .map(x -> x.firstOffset).orElse(completedTxn.lastOffset + 1)", where the
 * next incomplete transaction is the first ongoing one of another producer. */
static int64_t aborted_lso(const struct km_pstate *ps, int64_t pid,
			   int64_t marker_offset)
{
	for (uint32_t k = 0; k < ps->txn_len; k++) {
		const struct txn *t = txn_at(ps, k);

		if (t->marker_offset < 0 && t->producer_id != pid)
			return t->first_offset;
	}
	return (int64_t)((uint64_t)marker_offset + 1); /* no UB at INT64_MAX */
}

static int cmp_txn_first(const void *a, const void *b)
{
	int64_t x = ((const struct txn *)a)->first_offset;
	int64_t y = ((const struct txn *)b)->first_offset;

	return (x > y) - (x < y);
}

/* ---- data batches (ProducerAppendInfo.appendDataBatch) ---- */

struct data_view {
	int64_t pid;
	int16_t epoch;
	bool transactional;
	struct batch_md md;
};

static void data_view(const struct km_batch *b, struct data_view *v)
{
	v->pid = km_batch_producer_id(b);
	v->epoch = km_batch_producer_epoch(b);
	v->transactional = km_batch_is_transactional(b);
	v->md.first_seq = km_batch_base_sequence(b);
	v->md.last_seq = km_batch_last_sequence(b);
	v->md.first_offset = km_batch_base_offset(b);
	v->md.last_offset = km_batch_last_offset(b);
	/* appendDataBatch records batch.maxTimestamp(). */
	v->md.timestamp = km_batch_max_timestamp(b);
}

/* checkSequence (CLIENT only). */
static int check_sequence(const struct entry *e, int16_t epoch,
			  int32_t first_seq)
{
	const struct batch_md *last = entry_newest(e);

	/* "If there is no current producer epoch ... accept writes with any
	 * sequence number" - also covers a producer we have no state for. */
	if (e->epoch == -1)
		return 0;
	/* "Invalid sequence number for new epoch": a new epoch starts at 0. */
	if (epoch != e->epoch)
		return first_seq == 0 ? 0 : KM_EOUTOFORDERSEQ;
	/* Same epoch: continue at lastSeq + 1 (NO_SEQUENCE if nothing is
	 * remembered, so only 0 continues it). */
	if (!in_sequence(last ? last->last_seq : -1, first_seq))
		return KM_EOUTOFORDERSEQ;
	return 0;
}

/* Kafka's order (header): duplicate, epoch, sequence, transaction state.
 * MIRROR is never rejected; CONTROL data is checked like Kafka's
 * COORDINATOR origin (epoch and transaction state, no sequence rules). */
static int validate_data(const struct entry *e, bool known,
			 const struct data_view *v, enum km_origin origin,
			 struct km_pstate_result *res)
{
	const struct batch_md *dup;
	int rc;

	if (origin == KM_ORIGIN_MIRROR)
		return 0;
	if (origin == KM_ORIGIN_CLIENT && known &&
	    (dup = entry_find_dup(e, v->epoch, v->md.first_seq,
				  v->md.last_seq)) != NULL) {
		res->dup_first_offset = dup->first_offset;
		res->dup_last_offset = dup->last_offset;
		return KM_EDUPLICATE;
	}
	/* checkProducerEpoch: "producerEpoch < updatedEntry.producerEpoch()". */
	if (v->epoch < e->epoch)
		return KM_EPRODUCERFENCED;
	if (origin == KM_ORIGIN_CLIENT &&
	    (rc = check_sequence(e, v->epoch, v->md.first_seq)) < 0)
		return rc;
	/* "Received a non-transactional message while a transaction is
	 * active" -> InvalidTxnStateException. */
	if (entry_txn_open(e) && !v->transactional)
		return KM_EINVALIDTXNSTATE;
	return 0;
}

/* R2: on MIRROR appends what CLIENT would refuse is counted and logged, so
 * two unrelated producers merged under one mapped id are never silent. */
static void note_mirror_data(struct km_pstate *ps, const struct entry *e,
			     const struct data_view *v)
{
	const struct batch_md *last = entry_newest(e);

	if (v->epoch < e->epoch) {
		ps->stats.mirror_epoch_regressions++;
		KM_WARN("pstate",
			"producer %" PRId64 " epoch went back from %d to %d "
			"at offset %" PRId64,
			v->pid, e->epoch, v->epoch, v->md.first_offset);
	} else if (v->epoch == e->epoch && last != NULL &&
		   !in_sequence(last->last_seq, v->md.first_seq)) {
		ps->stats.mirror_sequence_gaps++;
		KM_WARN("pstate",
			"producer %" PRId64 " sequence gap at offset %" PRId64
			": expected %" PRId64 ", got %" PRId32,
			v->pid, v->md.first_offset,
			last->last_seq == INT32_MAX ? 0
						    : (int64_t)last->last_seq + 1,
			v->md.first_seq);
	}
	/* Kafka refuses this even when replicating; a mirror keeps the txn
	 * open and says so (no counter of its own in the stats). */
	if (entry_txn_open(e) && !v->transactional)
		KM_WARN("pstate",
			"producer %" PRId64 " wrote a non-transactional batch "
			"at offset %" PRId64 " inside its transaction from %" PRId64,
			v->pid, v->md.first_offset, e->txn_first_offset);
}

static int append_data(struct km_pstate *ps, const struct km_batch *b,
		       enum km_origin origin, int64_t hw,
		       struct km_pstate_result *res)
{
	struct data_view v;
	struct entry e, *slot;
	bool opens;
	int rc;

	data_view(b, &v);
	slot = table_find(ps, v.pid);
	if (slot != NULL)
		e = *slot;
	else
		entry_fresh(&e, v.pid);
	rc = validate_data(&e, slot != NULL, &v, origin, res);
	if (rc < 0)
		return rc;
	if (slot == NULL && ps->count == ps->producers_max)
		return KM_EPSTATEFULL;
	/* "Began a new transaction": a transactional batch of a producer with
	 * no open transaction opens one at its first offset. */
	opens = v.transactional && !entry_txn_open(&e);
	if (opens && !txns_make_room(ps, hw))
		return KM_EPSTATEFULL;
	/* Nothing below fails: the state changes from here on. */
	if (origin == KM_ORIGIN_MIRROR && slot != NULL)
		note_mirror_data(ps, &e, &v);
	entry_add_batch(&e, v.epoch, &v.md);
	e.last_timestamp = v.md.timestamp;
	if (opens) {
		e.txn_first_offset = v.md.first_offset;
		txns_push(ps, v.md.first_offset, v.pid);
	}
	table_commit(ps, slot, &e);
	note_pid(ps, v.pid);
	return 0;
}

/* ---- transaction markers (appendEndTxnMarker) ---- */

/* CLIENT/CONTROL: checkProducerEpoch (TV0/1: marker epoch >= current) and
 * checkCoordinatorEpoch ("updatedEntry.coordinatorEpoch() >
 * endTxnMarker.coordinatorEpoch()" -> TransactionCoordinatorFenced). */
static int validate_marker(const struct entry *e, int16_t epoch,
			   int32_t coordinator_epoch)
{
	if (epoch < e->epoch)
		return KM_EPRODUCERFENCED;
	if (e->coordinator_epoch > coordinator_epoch)
		return KM_ECOORDFENCED;
	return 0;
}

static void note_mirror_marker(struct km_pstate *ps, const struct entry *e,
			       int16_t epoch, int32_t coordinator_epoch,
			       int64_t offset)
{
	if (epoch < e->epoch) {
		ps->stats.mirror_epoch_regressions++;
		KM_WARN("pstate",
			"producer %" PRId64 " marker epoch went back from %d "
			"to %d at offset %" PRId64,
			e->producer_id, e->epoch, epoch, offset);
	}
	if (e->coordinator_epoch > coordinator_epoch)
		KM_WARN("pstate",
			"producer %" PRId64 " marker at offset %" PRId64
			" has coordinator epoch %" PRId32 " below %" PRId32,
			e->producer_id, offset, coordinator_epoch,
			e->coordinator_epoch);
	if (!entry_txn_open(e)) {
		ps->stats.mirror_stray_markers++;
		KM_WARN("pstate",
			"producer %" PRId64 " marker at offset %" PRId64
			" without an open transaction",
			e->producer_id, offset);
	}
}

/* CompletedTxn(producerId, firstOffset, markerOffset, isAborted); the txn
 * moves from ongoing to decided and holds the LSO until hw passes the
 * marker (completeTxn / onHighWatermarkUpdated). */
static void complete_txn(struct km_pstate *ps, const struct entry *e,
			 bool aborted, int64_t marker_offset,
			 struct km_pstate_result *res)
{
	struct txn *t = txns_find_open(ps, e->producer_id);

	KM_ASSERT(t != NULL);
	KM_ASSERT(t->first_offset == e->txn_first_offset);
	res->txn_completed = true;
	res->txn_aborted = aborted;
	res->txn_producer_id = e->producer_id;
	res->txn_first_offset = e->txn_first_offset;
	res->txn_last_offset = marker_offset;
	if (aborted)
		res->txn_last_stable_offset =
			aborted_lso(ps, e->producer_id, marker_offset);
	t->marker_offset = marker_offset;
}

static int append_marker(struct km_pstate *ps, const struct km_batch *b,
			 const struct km_ctrl *c, enum km_origin origin,
			 struct km_pstate_result *res)
{
	int64_t pid = km_batch_producer_id(b), off = km_batch_base_offset(b);
	int16_t epoch = km_batch_producer_epoch(b);
	struct entry e, *slot = table_find(ps, pid);
	int rc;

	if (slot != NULL)
		e = *slot;
	else
		entry_fresh(&e, pid);
	if (origin != KM_ORIGIN_MIRROR &&
	    (rc = validate_marker(&e, epoch, c->coordinator_epoch)) < 0)
		return rc;
	/* A marker for an unknown producer creates its entry, as Kafka's
	 * update(appendInfo) does. */
	if (slot == NULL && ps->count == ps->producers_max)
		return KM_EPSTATEFULL;
	if (origin == KM_ORIGIN_MIRROR)
		note_mirror_marker(ps, &e, epoch, c->coordinator_epoch, off);
	if (entry_txn_open(&e))
		complete_txn(ps, &e, c->type == KM_CTRL_ABORT, off, res);
	entry_set_epoch(&e, epoch);
	e.txn_first_offset = -1;
	e.coordinator_epoch = c->coordinator_epoch;
	e.last_timestamp = km_batch_max_timestamp(b);
	table_commit(ps, slot, &e);
	note_pid(ps, pid);
	return 0;
}

/* ---- the MIRROR_PID_RESET barrier (R3) ---- */

/* An upstream barrier meeting an open negative-id transaction means the
 * upstream did not abort it first (a malformed log). Kafka's prototype
 * leaves ongoing transactions alone because its ABORT markers come first;
 * here the producer entry is about to be forgotten, so no marker could ever
 * close that transaction again and the LSO would be stuck on it for good.
 * We drop such transactions, loudly, and let the LSO move on. */
static void drop_open_negative_txns(struct km_pstate *ps, int64_t offset)
{
	for (uint32_t k = 0; k < ps->txn_len; k++) {
		const struct txn *t = txn_at(ps, k);

		if (txn_open_negative(t, 0))
			KM_WARN("pstate",
				"barrier at offset %" PRId64 " forgets producer "
				"%" PRId64 " whose transaction from offset "
				"%" PRId64 " is still open",
				offset, t->producer_id, t->first_offset);
	}
	txns_filter(ps, txn_open_negative, 0);
}

static int apply_barrier(struct km_pstate *ps, const struct km_batch *b,
			 enum km_origin origin, struct km_pstate_result *res)
{
	int64_t off = km_batch_base_offset(b);
	uint32_t expired;

	/* R3: "Locally, a barrier is only written when no negative-id
	 * transaction is open" (ABORT markers go first, R4 stop). */
	if (origin != KM_ORIGIN_MIRROR && km_pstate_has_open_negative_txn(ps))
		return KM_ETXNOPEN;
	if (origin == KM_ORIGIN_MIRROR)
		drop_open_negative_txns(ps, off);
	expired = table_expire_negative(ps);
	res->barrier = true;
	res->barrier_expired = expired;
	ps->stats.barriers_applied++;
	KM_INFO("pstate", "barrier at offset %" PRId64 " expired %" PRIu32
		" producers", off, expired);
	return 0;
}

/* Control batches: which of them touch producer state.
 *  - isTransactional with a producer id: an end-transaction marker, whose
 *    key must be ABORT or COMMIT (EndTransactionMarker: "Invalid record type
 *    for end transaction marker");
 *  - MIRROR_PID_RESET (producerId -1, not transactional): the barrier;
 *  - anything else (LEADER_CHANGE, ..., or a marker without producer id,
 *    which Kafka skips as !hasProducerId()): no producer state. */
static int append_control(struct km_pstate *ps, const struct km_batch *b,
			  enum km_origin origin, struct km_pstate_result *res)
{
	struct km_ctrl c;
	int rc = km_ctrl_parse(b, &c);

	if (rc < 0)
		return rc;
	if (km_batch_is_transactional(b)) {
		if (km_batch_producer_id(b) == NO_PID)
			return 0;
		if (c.type != KM_CTRL_ABORT && c.type != KM_CTRL_COMMIT)
			return KM_ECTRLKEY;
		return append_marker(ps, b, &c, origin, res);
	}
	if (c.type == KM_CTRL_MIRROR_PID_RESET)
		return apply_barrier(ps, b, origin, res);
	return 0;
}

static void result_clear(struct km_pstate_result *res)
{
	*res = (struct km_pstate_result){
		.dup_first_offset = -1,
		.dup_last_offset = -1,
		.txn_producer_id = NO_PID,
		.txn_first_offset = -1,
		.txn_last_offset = -1,
		.txn_last_stable_offset = -1,
	};
}

/* ---- public API ---- */

size_t km_pstate_memsize(const struct km_pstate_config *cfg)
{
	KM_ASSERT(cfg != NULL);
	KM_ASSERT(cfg->producers_max <= PSTATE_PRODUCERS_LIMIT);
	KM_ASSERT(cfg->txns_max <= PSTATE_TXNS_LIMIT);
	return align8(sizeof(struct km_pstate)) +
	       ((size_t)1 << table_log2_cap(cfg->producers_max)) *
		       sizeof(struct entry) +
	       (size_t)cfg->txns_max * sizeof(struct txn);
}

struct km_pstate *km_pstate_init(void *mem, const struct km_pstate_config *cfg)
{
	struct km_pstate *ps = mem;
	uint32_t bits;

	KM_ASSERT(mem != NULL);
	KM_ASSERT(((uintptr_t)mem & 7) == 0);
	KM_ASSERT(cfg != NULL);
	KM_ASSERT(cfg->producers_max <= PSTATE_PRODUCERS_LIMIT);
	KM_ASSERT(cfg->txns_max <= PSTATE_TXNS_LIMIT);
	if (cfg->producers_max == 0 || cfg->txns_max == 0)
		return NULL;
	bits = table_log2_cap(cfg->producers_max);
	memset(ps, 0, sizeof(*ps));
	ps->table = (struct entry *)((uint8_t *)mem + align8(sizeof(*ps)));
	ps->txns = (struct txn *)(ps->table + ((size_t)1 << bits));
	ps->table_mask = (1u << bits) - 1;
	ps->table_shift = 64 - bits;
	ps->producers_max = cfg->producers_max;
	ps->txns_max = cfg->txns_max;
	km_pstate_reset(ps);
	return ps;
}

void km_pstate_reset(struct km_pstate *ps)
{
	KM_ASSERT(ps != NULL);
	for (uint32_t i = 0; i <= ps->table_mask; i++)
		ps->table[i].producer_id = NO_PID;
	ps->count = 0;
	ps->txn_head = 0;
	ps->txn_len = 0;
	ps->max_positive_pid = -1;
	ps->next_offset = 0;
	memset(&ps->stats, 0, sizeof(ps->stats));
}

int km_pstate_append(struct km_pstate *ps, const struct km_batch *b,
		     enum km_origin origin, int64_t hw,
		     struct km_pstate_result *res)
{
	int rc;

	KM_ASSERT(ps != NULL);
	KM_ASSERT(b != NULL);
	KM_ASSERT(res != NULL);
	KM_ASSERT(origin == KM_ORIGIN_MIRROR || origin == KM_ORIGIN_CLIENT ||
		  origin == KM_ORIGIN_CONTROL);
	/* The log appends in offset order (R6): transactions then open in
	 * first-offset order, which the LSO ring relies on. */
	KM_ASSERT(km_batch_base_offset(b) >= ps->next_offset);
	result_clear(res);
	if (km_batch_is_control(b))
		rc = append_control(ps, b, origin, res);
	else if (km_batch_producer_id(b) == NO_PID)
		rc = 0; /* no producer: nothing to remember */
	else
		rc = append_data(ps, b, origin, hw, res);
	if (rc < 0)
		return rc;
	ps->next_offset = (int64_t)((uint64_t)km_batch_last_offset(b) + 1);
	txns_retire(ps, hw);
	return 0;
}

int64_t km_pstate_lso(struct km_pstate *ps, int64_t hw)
{
	KM_ASSERT(ps != NULL);
	txns_retire(ps, hw);
	/* The head is now open, or decided with its marker at or above hw. */
	if (ps->txn_len > 0 && txn_at(ps, 0)->first_offset < hw)
		return txn_at(ps, 0)->first_offset;
	return hw;
}

int64_t km_pstate_first_open_txn(const struct km_pstate *ps)
{
	KM_ASSERT(ps != NULL);
	for (uint32_t k = 0; k < ps->txn_len; k++) {
		const struct txn *t = txn_at(ps, k);

		if (t->marker_offset < 0)
			return t->first_offset;
	}
	return -1;
}

uint32_t km_pstate_open_txns(const struct km_pstate *ps,
			     struct km_producer_info *out, uint32_t max)
{
	uint32_t n = 0;

	KM_ASSERT(ps != NULL);
	KM_ASSERT(out != NULL || max == 0);
	for (uint32_t k = 0; k < ps->txn_len; k++) {
		const struct txn *t = txn_at(ps, k);
		const struct entry *e;

		if (t->marker_offset >= 0)
			continue;
		if (n < max) {
			e = table_find(ps, t->producer_id);
			KM_ASSERT(e != NULL);
			entry_info(e, &out[n]);
		}
		n++;
	}
	return n;
}

bool km_pstate_has_open_negative_txn(const struct km_pstate *ps)
{
	KM_ASSERT(ps != NULL);
	for (uint32_t k = 0; k < ps->txn_len; k++)
		if (txn_open_negative(txn_at(ps, k), 0))
			return true;
	return false;
}

int km_pstate_get(const struct km_pstate *ps, int64_t producer_id,
		  struct km_producer_info *out)
{
	const struct entry *e;

	KM_ASSERT(ps != NULL);
	KM_ASSERT(out != NULL);
	if (producer_id == NO_PID)
		return -ENOENT;
	e = table_find(ps, producer_id);
	if (e == NULL)
		return -ENOENT;
	entry_info(e, out);
	return 0;
}

uint32_t km_pstate_count(const struct km_pstate *ps)
{
	KM_ASSERT(ps != NULL);
	return ps->count;
}

int64_t km_pstate_max_positive_pid(const struct km_pstate *ps)
{
	KM_ASSERT(ps != NULL);
	return ps->max_positive_pid;
}

int64_t km_pstate_next_offset(const struct km_pstate *ps)
{
	KM_ASSERT(ps != NULL);
	return ps->next_offset;
}

void km_pstate_get_stats(const struct km_pstate *ps,
			 struct km_pstate_stats *out)
{
	KM_ASSERT(ps != NULL);
	KM_ASSERT(out != NULL);
	*out = ps->stats;
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
		if (ps->table[i].producer_id == NO_PID)
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

	entry_fresh(e, (int64_t)km_load_be64(p));
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
	entry_add_batch(e, e->epoch, &md);
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
		if (e.producer_id == NO_PID || table_find(ps, e.producer_id))
			return KM_ESNAPSHOT;
		if (entry_txn_open(&e)) {
			if (ps->txn_len == ps->txns_max)
				return KM_EPSTATEFULL;
			txns_push(ps, e.txn_first_offset, e.producer_id);
		}
		table_insert(ps, &e);
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
