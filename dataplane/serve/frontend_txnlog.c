/* The transaction coordinator's log (issue 20): every change of a
 * transactional id is one record in `__transaction_state-0`, in Kafka's own
 * format (dataplane/group/txnlog.h), written as Kafka's
 * TransactionStateManager writes it: through ops->produce with acks=-1
 * (the partition's owner appends it, wherever it runs), the client answered
 * only once it is durable. Meanwhile the id is pending in the coordinator
 * (its requests are CONCURRENT_TRANSACTIONS, as Kafka answers an id with a
 * pending transition), so one record of an id is decided at a time, and
 * outcomes of one partition come back in append order: the log holds the
 * changes in the order the table made them.
 *
 * A write that fails is tried again with a backoff (100 ms doubling to
 * 5 s), never dropped: the change is already in the table, and a client
 * that waits for it gets its answer once it is durable (or gives up and
 * retries, and is told CONCURRENT_TRANSACTIONS until then).
 *
 * At start the table is rebuilt from the partition before any request of
 * the coordinator is served (COORDINATOR_LOAD_IN_PROGRESS until the owner
 * opened it), and a transaction found Prepare* has its markers written and
 * completes (frontend_txn.c). Compaction as the committed offsets do it:
 * every live id is written again and retain_below set where that copy
 * starts. Without a __transaction_state-0 partition (the front-end's tests)
 * nothing is written and the table is in memory only.
 *
 * Memory: the write table (two per id, and the jobs'), one batch buffer
 * and one value, at init.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/group/txncoord.h"
#include "dataplane/group/txnlog.h"
#include "dataplane/serve/frontend_pvt.h"

#define RETRY_FIRST_MS 100u
#define RETRY_MAX_MS 5000u
#define COMPACT_MIN_RECORDS 1000u
#define COMPACT_RATIO 4u

struct tl_write {
	struct km_frontend *fe;
	bool used;
	bool in_flight;
	bool tombstone;		/* as submitted */
	bool compact;		/* a compaction copy */
	char id[KM_TXNCOORD_NAME_MAX + 1];
	fe_txnlog_fn fn;
	void *arg;
	struct fe_conn *fc;	/* an answer held until durable, or NULL */
	uint32_t slot;
	uint32_t attempts;
	uint64_t retry_at_ms;	/* 0: not waiting to retry */
};

struct fe_txnlog {
	struct km_txncoord *coord;
	struct km_part *part;	/* NULL: nothing is persisted */
	int64_t expiration_ms;
	bool loaded;
	int load_err;
	bool stopping;		/* held answers are let go on a failure */
	uint32_t restored_full;	/* ids the table had no room for */
	struct tl_write *w;
	uint32_t n_w;
	uint32_t in_flight;	/* writes not yet durable (retries too) */
	uint64_t since_compact;
	uint32_t compact_left;
	int64_t compact_from;
	struct km_txnrec_value val;
	uint8_t buf[KM_TXNLOG_BUILD_BYTES];
};

#ifdef KM_TEST_HOOKS
/* Test switch (docs/testing.md): KMIRROR_TEST_CRASH=<point> kills the
 * process with SIGKILL at that step of a transaction's end, to prove a
 * restart completes it. */
void km_frontend_txn_crash_point(const char *point)
{
	const char *want = getenv("KMIRROR_TEST_CRASH");

	if (want != NULL && strcmp(want, point) == 0) {
		KM_WARN("txn", "KMIRROR_TEST_CRASH=%s: killing the process",
			point);
		raise(SIGKILL);
	}
}
#endif

int km_frontend_txnlog_init(struct km_frontend *fe, struct km_txncoord *coord,
			    uint32_t ids_max, uint32_t jobs,
			    int64_t expiration_ms)
{
	struct fe_txnlog *tl = calloc(1, sizeof(*tl));

	if (tl == NULL)
		return -ENOMEM;
	tl->coord = coord;
	tl->expiration_ms = expiration_ms;
	tl->part = km_part_find(fe->table, KM_TXNLOG_TOPIC, 0);
	/* An id has one change in flight, and once more its compaction
	 * copy; the jobs' Complete records come on top. */
	tl->n_w = 2 * ids_max + jobs;
	tl->w = calloc(tl->n_w, sizeof(*tl->w));
	if (tl->w == NULL) {
		free(tl);
		return -ENOMEM;
	}
	tl->compact_from = -1;
	fe->txnlog = tl;
	return 0;
}

void km_frontend_txnlog_free(struct km_frontend *fe)
{
	if (fe->txnlog == NULL)
		return;
	free(fe->txnlog->w);
	free(fe->txnlog);
	fe->txnlog = NULL;
}

/* ---- replay ---- */

static void restore_one(void *arg, const char *txn_id,
			const struct km_txnrec_value *v, int64_t offset)
{
	struct fe_txnlog *tl = arg;
	int rc = km_txncoord_restore(tl->coord, txn_id, v);

	if (rc == -ENOSPC && tl->restored_full++ == 0)
		KM_ERROR("txn", "%s-0: transactional id \"%s\" at offset %"
			 PRId64 " does not fit transaction.ids.max: "
			 "forgotten (and any other that does not fit)",
			 KM_TXNLOG_TOPIC, txn_id, offset);
	else if (rc < 0 && rc != -ENOSPC)
		KM_WARN("txn", "%s-0: record of \"%s\" at offset %" PRId64
			" skipped: %s", KM_TXNLOG_TOPIC, txn_id, offset,
			km_strerror(rc));
}

/* Every Prepare* transaction the log left has its markers written. */
static uint32_t resume_prepared(struct km_frontend *fe)
{
	struct km_txn_markers mk;
	uint32_t cursor = 0, n = 0;

	while (km_txncoord_prepared(fe->txnlog->coord, &cursor, &mk) == 1) {
		KM_INFO("txn", "transaction \"%s\" (producer %" PRId64
			", epoch %d) was %s: writing its %u markers",
			mk.transactional_id, mk.producer_id, mk.producer_epoch,
			mk.commit ? "PrepareCommit" : "PrepareAbort",
			mk.n_parts);
		km_frontend_txn_resume(fe, &mk);
		n++;
	}
	return n;
}

int16_t km_frontend_txnlog_ready(struct km_frontend *fe)
{
	struct fe_txnlog *tl = fe->txnlog;
	struct km_log *log;
	int n;

	if (tl->loaded || tl->part == NULL)
		return tl->load_err ? KM_KERR_COORDINATOR_NOT_AVAILABLE
				    : KM_KERR_NONE;
	log = tl->part->log;
	if (log == NULL || atomic_load(&tl->part->error) != 0)
		return KM_KERR_COORDINATOR_LOAD_IN_PROGRESS;
	n = km_txnlog_load(log, restore_one, tl);
	tl->loaded = true;
	if (n < 0) {
		tl->load_err = n;
		KM_ERROR("txn", "%s-0: cannot rebuild the transactions: %s",
			 KM_TXNLOG_TOPIC, km_strerror(n));
		return KM_KERR_COORDINATOR_NOT_AVAILABLE;
	}
	tl->since_compact = (uint64_t)n;
	KM_INFO("txn", "%s-0: transactions rebuilt from %d records [%" PRId64
		", %" PRId64 "), %u to complete", KM_TXNLOG_TOPIC, n,
		km_log_start_offset(log), km_log_appended_offset(log),
		resume_prepared(fe));
	return KM_KERR_NONE;
}

/* ---- writes ---- */

static void release_answer(struct fe_conn *fc, uint32_t slot);

/* A stopping front-end drains: the client's answer is not held by a
 * record that may never be written. */
static void let_go(struct tl_write *w)
{
	struct fe_conn *fc = w->fc;

	if (fc == NULL)
		return;
	w->fc = NULL;
	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	km_frontend_conn_maybe_free(fc);
}

static void schedule_retry(struct fe_txnlog *tl, struct tl_write *w, int rc)
{
	uint32_t backoff = RETRY_FIRST_MS;

	for (uint32_t i = 0; i < w->attempts && backoff < RETRY_MAX_MS; i++)
		backoff *= 2;
	if (backoff > RETRY_MAX_MS)
		backoff = RETRY_MAX_MS;
	if (w->attempts++ == 0 || w->attempts % 20 == 0)
		KM_WARN("txn", "%s-0: record of \"%s\": %s; trying again "
			"every %u ms at most", KM_TXNLOG_TOPIC, w->id,
			km_strerror(rc), backoff);
	w->in_flight = false;
	w->retry_at_ms = km_frontend_now_ms() + backoff;
	if (tl->stopping)
		let_go(w);
}

static void on_written(void *arg, const struct km_part_produced *res);

/* The id's record as the table has it now (the same as when the write
 * began: the id is pending), to the partition's owner. */
static void submit(struct km_frontend *fe, struct tl_write *w)
{
	struct fe_txnlog *tl = fe->txnlog;
	int rc = km_txncoord_record(tl->coord, w->id, &tl->val);
	struct iovec iov;
	struct km_chain ch = { &iov, 1 };

	w->retry_at_ms = 0;
	if (rc >= 0) {
		w->tombstone = rc == 1;
		rc = km_txnlog_build(tl->buf, sizeof(tl->buf), w->id,
				     w->tombstone ? NULL : &tl->val,
				     km_clock_wall_ms());
	}
	if (rc < 0) {
		schedule_retry(tl, w, rc);
		return;
	}
	iov = (struct iovec){ tl->buf, (size_t)rc };
	w->in_flight = true;
	rc = fe->ops->produce(fe->ops->ctx, tl->part, &ch, km_chain_start(&ch),
			      (uint32_t)rc, -1, on_written, w);
	if (rc < 0)
		schedule_retry(tl, w, rc);
}

static void release_answer(struct fe_conn *fc, uint32_t slot)
{
	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	if (fc->c != NULL && !fc->closing) {
		fc->slots[slot].state = FE_SLOT_READY;
		km_frontend_send_ready(fc);
	}
	km_frontend_conn_maybe_free(fc);
}

static void compact_done(struct km_frontend *fe, int64_t base_offset);

static void on_written(void *arg, const struct km_part_produced *res)
{
	struct tl_write *w = arg;
	struct km_frontend *fe = w->fe;
	struct fe_txnlog *tl = fe->txnlog;
	struct tl_write done;

	if (res->err != 0) {
		schedule_retry(tl, w, res->err);
		return;
	}
	done = *w;
	w->used = false;
	tl->in_flight--;
	tl->since_compact++;
	(void)km_txncoord_set_pending(tl->coord, done.id, false);
	if (done.tombstone)
		(void)km_txncoord_forget(tl->coord, done.id);
	if (done.compact)
		compact_done(fe, res->base_offset);
	if (done.fc != NULL)
		release_answer(done.fc, done.slot);
	if (done.fn != NULL)
		done.fn(fe, done.arg);
}

/* A write of id's record; fn(fe, arg) once it is durable. */
static int write_new(struct km_frontend *fe, const char *id, fe_txnlog_fn fn,
		     void *arg, struct tl_write **out)
{
	struct fe_txnlog *tl = fe->txnlog;

	for (uint32_t i = 0; i < tl->n_w; i++) {
		struct tl_write *w = &tl->w[i];

		if (w->used)
			continue;
		memset(w, 0, sizeof(*w));
		w->used = true;
		w->fe = fe;
		snprintf(w->id, sizeof(w->id), "%s", id);
		w->fn = fn;
		w->arg = arg;
		tl->in_flight++;
		(void)km_txncoord_set_pending(tl->coord, id, true);
		(void)km_txncoord_take_dirty(tl->coord, id, km_clock_wall_ms());
		*out = w;
		return 0;
	}
	KM_ERROR("txn", "%s-0: no write free for \"%s\"", KM_TXNLOG_TOPIC, id);
	return -EAGAIN;
}

int km_frontend_txnlog_persist(struct km_frontend *fe, const char *id,
			       fe_txnlog_fn fn, void *arg)
{
	struct tl_write *w;
	int rc;

	if (fe->txnlog->part == NULL) {
		(void)km_txncoord_take_dirty(fe->txnlog->coord, id,
					     km_clock_wall_ms());
		if (km_txncoord_record(fe->txnlog->coord, id,
				       &fe->txnlog->val) == 1)
			(void)km_txncoord_forget(fe->txnlog->coord, id);
		if (fn != NULL)
			fn(fe, arg);
		return 0;
	}
	if ((rc = write_new(fe, id, fn, arg, &w)) < 0)
		return rc;
	submit(fe, w);
	return 0;
}

int km_frontend_txnlog_answer(struct fe_conn *fc, uint32_t slot,
			      struct km_wire_wr *w, const char *id)
{
	struct km_frontend *fe = fc->fe;
	struct tl_write *tw;
	int n;

	if (!km_txncoord_take_dirty(fe->txnlog->coord, id,
				    km_clock_wall_ms()) ||
	    fe->txnlog->part == NULL)
		return km_frontend_slot_finish(fc, slot, w, true);
	/* Encoded now, sent once the record is durable. */
	if ((n = km_wire_wr_frame_end(w)) < 0)
		return km_frontend_conn_fail(fc, "encoding a transaction "
					     "answer: %s", km_strerror(n));
	fc->slots[slot].len = (uint32_t)w->pos;
	if (write_new(fe, id, NULL, NULL, &tw) < 0)
		return km_frontend_slot_finish(fc, slot, w, true);
	tw->fc = fc;
	tw->slot = slot;
	fc->pending_ops++;
	submit(fe, tw);
	return 0;
}

/* InitProducerId with a transactional id: answered once the id's record
 * (its new epoch) is durable. */
int km_frontend_txn_handle_initpid(struct fe_conn *fc,
				   const struct km_reqhdr *h,
				   const struct km_initpid_req *q)
{
	struct km_initpid_resp m = { 0, 0, -1, -1 };
	struct km_wire_wr w;
	uint32_t slot;
	int rc = km_frontend_slot_open(fc, h, 64, &slot);

	if (rc != 0)
		return rc;
	m.error_code = km_frontend_txn_init_pid(fc->fe, q, &m.producer_id,
						&m.producer_epoch);
	if (m.error_code != KM_KERR_NONE) {
		m.producer_id = -1;
		m.producer_epoch = -1;
	}
	km_frontend_slot_begin(fc, slot, &w);
	km_initpid_resp_encode(&w, h->api_version, &m);
	return km_frontend_txnlog_answer(fc, slot, &w, q->transactional_id.s);
}

void km_frontend_txnlog_stop(struct km_frontend *fe)
{
	struct fe_txnlog *tl = fe->txnlog;

	tl->stopping = true;
	for (uint32_t i = 0; i < tl->n_w; i++)
		if (tl->w[i].used && !tl->w[i].in_flight)
			let_go(&tl->w[i]);
}

/* ---- compaction ---- */

static void compact_done(struct km_frontend *fe, int64_t base_offset)
{
	struct fe_txnlog *tl = fe->txnlog;

	if (tl->compact_from < 0 || base_offset < tl->compact_from)
		tl->compact_from = base_offset;
	KM_ASSERT(tl->compact_left > 0);
	if (--tl->compact_left > 0)
		return;
	atomic_store_explicit(&tl->part->retain_below, tl->compact_from,
			      memory_order_release);
	KM_INFO("txn", "%s-0: compacted: every live id copied from offset %"
		PRId64, KM_TXNLOG_TOPIC, tl->compact_from);
	tl->since_compact = 0;
}

/* Only with no write in flight: one would land below the copy, in a
 * segment that may go, while the copy does not hold it. */
static void maybe_compact(struct km_frontend *fe)
{
	struct fe_txnlog *tl = fe->txnlog;
	uint32_t cursor = 0, live = 0;
	const char *id;
	struct tl_write *w;

	if (tl->part == NULL || !tl->loaded || tl->in_flight > 0)
		return;
	while (km_txncoord_next_id(tl->coord, &cursor) != NULL)
		live++;
	if (tl->since_compact < COMPACT_MIN_RECORDS ||
	    tl->since_compact < (uint64_t)live * COMPACT_RATIO)
		return;
	tl->compact_from = -1;
	cursor = 0;
	while ((id = km_txncoord_next_id(tl->coord, &cursor)) != NULL &&
	       write_new(fe, id, NULL, NULL, &w) == 0) {
		w->compact = true;
		tl->compact_left++;
		submit(fe, w);
	}
	if (tl->compact_left == 0)
		tl->since_compact = 0;
}

/* ---- the clock ---- */

void km_frontend_txnlog_tick(struct km_frontend *fe, uint64_t now_ms)
{
	struct fe_txnlog *tl = fe->txnlog;
	const char *id;

	if (km_frontend_txnlog_ready(fe) != KM_KERR_NONE)
		return;
	for (uint32_t i = 0; i < tl->n_w; i++) {
		struct tl_write *w = &tl->w[i];

		if (w->used && !w->in_flight && w->retry_at_ms != 0 &&
		    w->retry_at_ms <= now_ms)
			submit(fe, w);
	}
	/* transactional.id.expiration.ms: one id a tick, with its tombstone
	 * (Kafka's removeExpiredTransactionalIds writes one too). */
	id = km_txncoord_expire_id(tl->coord, km_clock_wall_ms(),
				   tl->expiration_ms);
	if (id != NULL) {
		KM_INFO("txn", "transactional id \"%s\" idle for more than "
			"transactional.id.expiration.ms=%" PRId64 ": forgotten",
			id, tl->expiration_ms);
		(void)km_frontend_txnlog_persist(fe, id, NULL, NULL);
	}
	maybe_compact(fe);
}
