/* The partition's transactions, open or decided but still holding the LSO
 * (Kafka's ongoingTxns + unreplicatedTxns, both keyed by first offset): a
 * ring of txns_max entries, oldest first offset at the head.
 *
 * The ring is ordered by first offset because transactions open in offset
 * order (batches arrive in offset order, R6), so the LSO is the head's first
 * offset once decided transactions whose marker is below the high watermark
 * have been popped.
 */
#include "iouring_log/pstate_pvt.h"

#include <inttypes.h>

#include "common/km_assert.h"
#include "common/log.h"

typedef bool (*txn_pred_fn)(const struct txn *t, int64_t arg);

static struct txn *txn_at(const struct km_pstate *ps, uint32_t k)
{
	uint32_t i = ps->txn_head + k;

	KM_ASSERT_HOT(k < ps->txn_len);
	if (i >= ps->txns_max)
		i -= ps->txns_max;
	return &ps->txns[i];
}

void km_pstate_txns_push(struct km_pstate *ps, int64_t first_offset,
			 int64_t pid)
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
void km_pstate_txns_retire(struct km_pstate *ps, int64_t hw)
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
bool km_pstate_txns_make_room(struct km_pstate *ps, int64_t hw)
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

/* CompletedTxn(producerId, firstOffset, markerOffset, isAborted); the txn
 * moves from ongoing to decided and holds the LSO until hw passes the
 * marker (completeTxn / onHighWatermarkUpdated). */
void km_pstate_txns_complete(struct km_pstate *ps, const struct entry *e,
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

/* An upstream barrier meeting an open negative-id transaction means the
 * upstream did not abort it first (a malformed log). Kafka's prototype
 * leaves ongoing transactions alone because its ABORT markers come first;
 * here the producer entry is about to be forgotten, so no marker could ever
 * close that transaction again and the LSO would be stuck on it for good.
 * We drop such transactions, loudly, and let the LSO move on. */
void km_pstate_txns_drop_open_negative(struct km_pstate *ps, int64_t offset)
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

/* ---- public API ---- */

int64_t km_pstate_lso(struct km_pstate *ps, int64_t hw)
{
	KM_ASSERT(ps != NULL);
	km_pstate_txns_retire(ps, hw);
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
			e = km_pstate_table_find(ps, t->producer_id);
			KM_ASSERT(e != NULL);
			km_pstate_entry_info(e, &out[n]);
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
