/* Producer state manager (R2, R3): the checks Kafka's ProducerAppendInfo
 * applies to each batch, over one caller memory block and with no I/O. See
 * pstate.h for the contract; pstate_pvt.h lists the other pstate_*.c files.
 *
 * Layout of the block: struct km_pstate | hash table of producer entries
 * (pstate_table.c) | ring of transactions (txns_max, pstate_txn.c).
 */
#include "iouring_log/pstate_pvt.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "kafka/control.h"

/* Largest capacities accepted: the hash table (2 x, power of two) stays in
 * uint32 and a full snapshot (10 + 46 bytes per producer, 772 MiB at this
 * bound) stays below INT_MAX, so snapshot_encode can return its size. */
#define PSTATE_PRODUCERS_LIMIT (1u << 24)
#define PSTATE_TXNS_LIMIT (1u << 24)

/* ---- small helpers ---- */

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* ProducerStateManager.inSequence: "nextSeq == lastSeq + 1L ||
 * (nextSeq == 0 && lastSeq == Integer.MAX_VALUE)". */
static bool in_sequence(int32_t last_seq, int32_t next_seq)
{
	return (int64_t)next_seq == (int64_t)last_seq + 1 ||
	       (next_seq == 0 && last_seq == INT32_MAX);
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
	    (dup = km_pstate_entry_find_dup(e, v->epoch, v->md.first_seq,
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
	slot = km_pstate_table_find(ps, v.pid);
	if (slot != NULL)
		e = *slot;
	else
		km_pstate_entry_fresh(&e, v.pid);
	rc = validate_data(&e, slot != NULL, &v, origin, res);
	if (rc < 0)
		return rc;
	if (slot == NULL && ps->count == ps->producers_max)
		return KM_EPSTATEFULL;
	/* "Began a new transaction": a transactional batch of a producer with
	 * no open transaction opens one at its first offset. */
	opens = v.transactional && !entry_txn_open(&e);
	if (opens && !km_pstate_txns_make_room(ps, hw))
		return KM_EPSTATEFULL;
	/* Nothing below fails: the state changes from here on. */
	if (origin == KM_ORIGIN_MIRROR && slot != NULL)
		note_mirror_data(ps, &e, &v);
	km_pstate_entry_add_batch(&e, v.epoch, &v.md);
	e.last_timestamp = v.md.timestamp;
	if (opens) {
		e.txn_first_offset = v.md.first_offset;
		km_pstate_txns_push(ps, v.md.first_offset, v.pid);
	}
	km_pstate_table_commit(ps, slot, &e);
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

static int append_marker(struct km_pstate *ps, const struct km_batch *b,
			 const struct km_ctrl *c, enum km_origin origin,
			 struct km_pstate_result *res)
{
	int64_t pid = km_batch_producer_id(b), off = km_batch_base_offset(b);
	int16_t epoch = km_batch_producer_epoch(b);
	struct entry e, *slot = km_pstate_table_find(ps, pid);
	int rc;

	if (slot != NULL)
		e = *slot;
	else
		km_pstate_entry_fresh(&e, pid);
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
		km_pstate_txns_complete(ps, &e, c->type == KM_CTRL_ABORT, off,
					res);
	km_pstate_entry_set_epoch(&e, epoch);
	e.txn_first_offset = -1;
	e.coordinator_epoch = c->coordinator_epoch;
	e.last_timestamp = km_batch_max_timestamp(b);
	km_pstate_table_commit(ps, slot, &e);
	note_pid(ps, pid);
	return 0;
}

/* ---- the MIRROR_PID_RESET barrier (R3) ---- */

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
		km_pstate_txns_drop_open_negative(ps, off);
	expired = km_pstate_table_expire_negative(ps);
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
	       ((size_t)1 << km_pstate_table_log2_cap(cfg->producers_max)) *
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
	bits = km_pstate_table_log2_cap(cfg->producers_max);
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
	/* Only slots in use are written: free ones stay untouched pages. */
	for (uint32_t i = 0; ps->count > 0 && i <= ps->table_mask; i++)
		if (ps->table[i].used) {
			ps->table[i].used = false;
			ps->count--;
		}
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
	km_pstate_txns_retire(ps, hw);
	return 0;
}

int km_pstate_get(const struct km_pstate *ps, int64_t producer_id,
		  struct km_producer_info *out)
{
	const struct entry *e;

	KM_ASSERT(ps != NULL);
	KM_ASSERT(out != NULL);
	if (producer_id == NO_PID)
		return -ENOENT;
	e = km_pstate_table_find(ps, producer_id);
	if (e == NULL)
		return -ENOENT;
	km_pstate_entry_info(e, out);
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

