/* Owner-side writer for local Produce: see local_write.h. */
#include "dataplane/serve/local_write.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "dataplane/serve/part.h"
#include "kafka/control.h"
#include "kafka/inflate.h"
#include "kafka/validate.h"
#include "iouring_log/log.h"

/* Outcomes collected per pass before any callback runs, so a callback that
 * submits never meets a half-updated ring (STYLE 15: no recursion). */
#define REPORT_BURST 32

enum lw_state {
	LW_QUEUED = 0, /* parsed; not every batch handed to the log yet */
	LW_WAITING,    /* handed; waiting for the appended/durable offset */
	LW_DONE,       /* outcome known, not reported yet */
	LW_REPORTED,   /* reported; the log may still read the bytes */
};

struct lw_entry {
	enum lw_state state;
	int16_t acks;
	uint32_t off;		/* the copy: mem[off, off + len); adopted */
	uint32_t len;		/* records take no ring bytes (len 0 at off) */
	void *adopted;		/* else NULL; given back through release */
	km_local_write_release_fn release;
	struct iovec iov;	/* the records as a one-segment chain, which */
	struct km_chain chain;	/* the batch views point at */
	struct km_batch batches[KM_LOCAL_WRITE_BATCHES_MAX];
	uint32_t n_batches;
	uint32_t n_done;	/* handed to the log (or duplicates) */
	int err;
	int64_t base_offset;	/* of batch 0: assigned, or the original's */
	int64_t wait_offset;	/* last offset the outcome waits for, or -1 */
	int64_t hold_offset;	/* last offset written from the copy, or -1 */
	int64_t append_time;	/* LogAppendTime given to its batches, or -1 */
	km_part_produced_fn done;
	void *arg;
	bool marker;		/* the coordinator's COMMIT/ABORT marker */
};

struct km_local_write {
	struct km_log *log;
	uint32_t batch_bytes_max;
	struct km_inflate *inflate; /* validation scratch */
	bool own_inflate;	/* created here, not the config's */
	uint8_t *mem;		/* ring of copies, allocated in entry order */
	uint32_t mem_bytes;
	uint32_t tail;		/* next free byte */
	uint32_t adopted_bytes;	/* records held by km_local_write_adopt() */
	struct lw_entry *ents;	/* ring of entries, submit order */
	uint32_t ents_max;
	uint32_t head;
	uint32_t count;
	bool pumping;		/* a roll inside an append polls the ring */
	bool txn_coordinated;	/* cfg: transactional batches accepted */
	bool coordinator_only;	/* cfg: every batch has COORDINATOR origin */
	struct km_local_write_stats st;
};

struct lw_report {
	km_part_produced_fn fn;
	void *arg;
	struct km_part_produced res;
};

/* The copy ring and the entry ring in mappings of their own, zero and
 * backed only where they are touched: both restart at 0 once empty, so a
 * writable partition holds as many pages as its deepest burst, and a quiet
 * one a page of each - not the 8 MiB and 256 entries (230 KiB) sized for
 * a busy one, which calloc from the heap would write whole. */
static void *lw_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void lw_unmap(void *p, size_t len)
{
	if (p != NULL)
		munmap(p, len);
}

int km_local_write_create(const struct km_local_write_config *cfg,
			  struct km_local_write **out)
{
	struct km_local_write *lw;

	if (cfg->log == NULL || cfg->mem_bytes == 0 || cfg->pending_max == 0 ||
	    cfg->batch_bytes_max > KM_BATCH_BYTES_MAX)
		return -EINVAL;
	lw = calloc(1, sizeof(*lw));
	if (lw == NULL)
		return -ENOMEM;
	lw->log = cfg->log;
	lw->batch_bytes_max = cfg->batch_bytes_max ? cfg->batch_bytes_max
						   : KM_BATCH_BYTES_MAX;
	lw->mem_bytes = cfg->mem_bytes;
	lw->ents_max = cfg->pending_max;
	lw->txn_coordinated = cfg->txn_coordinated;
	lw->coordinator_only = cfg->coordinator_only;
	lw->mem = lw_map(cfg->mem_bytes);
	lw->ents = lw_map((size_t)cfg->pending_max * sizeof(*lw->ents));
	lw->inflate = cfg->inflate;
	if (lw->inflate == NULL) {
		lw->own_inflate = true;
		(void)km_inflate_create(KM_INFLATE_BYTES_MAX, &lw->inflate);
	}
	if (lw->mem == NULL || lw->ents == NULL || lw->inflate == NULL) {
		km_local_write_destroy(lw);
		return -ENOMEM;
	}
	*out = lw;
	return 0;
}

static struct lw_entry *ent(struct km_local_write *lw, uint32_t i)
{
	return &lw->ents[(lw->head + i) % lw->ents_max];
}

/* Adopted records go back once the log is done with them. */
static void release_adopted(struct km_local_write *lw, struct lw_entry *e)
{
	if (e->adopted == NULL)
		return;
	lw->adopted_bytes -= e->len;
	e->release(e->adopted);
	e->adopted = NULL;
}

void km_local_write_destroy(struct km_local_write *lw)
{
	if (lw == NULL)
		return;
	for (uint32_t i = 0; lw->ents != NULL && i < lw->count; i++)
		release_adopted(lw, ent(lw, i));
	if (lw->own_inflate)
		km_inflate_destroy(lw->inflate);
	lw_unmap(lw->mem, lw->mem_bytes);
	lw_unmap(lw->ents, (size_t)lw->ents_max * sizeof(*lw->ents));
	free(lw);
}

/* Place len bytes in the ring after the newest copy: at the tail, or
 * wrapped to the start if the oldest copy leaves room there. Copies are
 * freed oldest first, so the free space is [tail, end) + [0, oldest) or,
 * once wrapped, [tail, oldest). */
static int mem_alloc(struct km_local_write *lw, uint32_t len, uint32_t *off)
{
	uint32_t oldest;

	if (lw->count == 0) {
		*off = 0;
	} else {
		oldest = ent(lw, 0)->off;
		if (lw->tail >= oldest && lw->mem_bytes - lw->tail >= len)
			*off = lw->tail;
		else if (lw->tail >= oldest && len < oldest)
			*off = 0;
		else if (lw->tail < oldest && oldest - lw->tail > len)
			*off = lw->tail;
		else
			return -ENOBUFS;
	}
	KM_ASSERT_HOT(*off + len <= lw->mem_bytes);
	lw->tail = *off + len;
	return 0;
}

/* What a client may not write here, though a broker's producer state would
 * take it:
 *  - control batches: Kafka's LogValidator refuses them from clients
 *    ("Clients are not allowed to write control records"); a client marker
 *    or MIRROR_PID_RESET barrier would end others' transactions or forget
 *    producers (R3);
 *  - transactional batches, unless the writer's config says a transaction
 *    coordinator stands behind the front-end (txn_coordinated): without
 *    one nothing would ever end the transaction and the LSO would stay
 *    behind it for good;
 *  - producer ids below -1: they are mirrored producers' (R1), whose state
 *    a local client must never touch. */
static int check_client_batch(const struct km_local_write *lw,
			      const struct km_batch *b)
{
	const char *why = NULL;

	if (km_batch_is_control(b))
		why = "control batch";
	else if (km_batch_is_transactional(b) && !lw->txn_coordinated)
		why = "transactional batch (transactions not supported here)";
	else if (km_batch_producer_id(b) < -1)
		why = "producer id of a mirrored producer";
	if (why == NULL)
		return 0;
	KM_WARN("local_write", "%s: produce refused: %s, producer id %lld",
		km_log_dir(lw->log), why, (long long)km_batch_producer_id(b));
	return -EPERM;
}

/* Kafka's LogValidator checks (kafka/validate.h): a batch whose header
 * disagrees with its records would leave offsets no record holds (a
 * lastOffsetDelta of 2^31 - 1 moves the log end by 2^31 for one record),
 * and every mirror downstream would copy the gap. */
static int check_records(const struct km_local_write *lw,
			 const struct km_batch *b, uint32_t index)
{
	char why[192];
	int rc = km_validate_batch(b, lw->inflate, why, sizeof(why));

	if (rc == 0)
		return 0;
	KM_WARN("local_write", "%s: produce refused (INVALID_RECORD): batch "
		"%u of the request (%s, %u bytes, producer id %lld): %s: %s",
		km_log_dir(lw->log), index, km_codec_name(km_batch_codec(b)),
		km_batch_size(b), (long long)km_batch_producer_id(b), why,
		km_strerror(rc));
	return rc;
}

/* The topic's max.message.bytes (synced from the source, kept with the
 * log): Kafka's UnifiedLog refuses a batch over it with
 * RecordTooLargeException (MESSAGE_TOO_LARGE), which KM_EBATCHMAX is to
 * the front-end. Only here: mirrored batches are never held to it. */
static int check_topic_rules(const struct km_local_write *lw,
			     const struct km_batch *b, uint32_t cap)
{
	if (cap == 0 || km_batch_size(b) <= cap)
		return 0;
	KM_WARN("local_write", "%s: produce refused (MESSAGE_TOO_LARGE): a "
		"batch of %u bytes, over the topic's max.message.bytes %u",
		km_log_dir(lw->log), km_batch_size(b), cap);
	return KM_EBATCHMAX;
}

/* message.timestamp.type=LogAppendTime: every batch of the request gets
 * the same broker time, as Kafka's LogValidator gives it, and the answer
 * says which (log_append_time_ms). Only once every batch passed. */
static void stamp_all(struct lw_entry *e)
{
	e->append_time = km_clock_wall_ms();
	for (uint32_t i = 0; i < e->n_batches; i++)
		km_batch_set_log_append_time(&e->batches[i], e->append_time);
}

/* Frame and validate every batch of the copy (STYLE 13: bounded by
 * KM_LOCAL_WRITE_BATCHES_MAX). Nothing is appended if one fails. */
static int parse_all(const struct km_local_write *lw, struct lw_entry *e)
{
	struct km_chain_cur cur = km_chain_start(&e->chain);
	uint32_t left = e->len, cap;
	bool append_time;

	km_log_client_rules(lw->log, &cap, &append_time);

	while (left > 0) {
		struct km_batch *b = &e->batches[e->n_batches];
		int rc;

		if (e->n_batches == KM_LOCAL_WRITE_BATCHES_MAX)
			return -E2BIG;
		rc = km_batch_parse(b, &e->chain, cur, lw->batch_bytes_max);
		if (rc == 0)
			return KM_EWIRETRUNC; /* the records end inside it */
		if (rc < 0)
			return rc;
		/* A marker is built here, not sent by a client; so is
		 * every batch of a coordinator_only writer (Kafka's
		 * LogValidator checks only CLIENT appends: a coordinator's
		 * transactional batch has no sequence). */
		if (!e->marker && !lw->coordinator_only &&
		    ((rc = check_client_batch(lw, b)) < 0 ||
		     (rc = check_topic_rules(lw, b, cap)) < 0 ||
		     (rc = check_records(lw, b, e->n_batches)) < 0))
			return rc;
		e->n_batches++;
		(void)km_chain_advance(&e->chain, &cur, km_batch_size(b));
		left -= km_batch_size(b);
	}
	if (append_time && !e->marker && !lw->coordinator_only)
		stamp_all(e);
	return 0;
}

static void note_appended(struct km_local_write *lw, struct lw_entry *e,
			  const struct km_log_append_result *res, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		lw->st.bytes += km_batch_size(&e->batches[e->n_done + i]);
	if (e->n_done == 0)
		e->base_offset = res->first_offset;
	if (res->appended > 0) {
		e->hold_offset = res->last_offset;
		if (res->last_offset > e->wait_offset)
			e->wait_offset = res->last_offset;
	}
	lw->st.batches += res->appended;
	e->n_done += n;
}

/* Kafka answers a resent batch with the original's offsets, once the
 * original is as durable as acks asks. */
static void note_duplicate(struct km_local_write *lw, struct lw_entry *e,
			   const struct km_log_append_result *res)
{
	if (e->n_done == 0)
		e->base_offset = res->dup_first_offset;
	if (res->dup_last_offset > e->wait_offset)
		e->wait_offset = res->dup_last_offset;
	lw->st.duplicates++;
	e->n_done++;
}

/* Hand e's batches to the log. @return false if the write queue is full
 * (the rest is retried by the next pump, in order). */
static bool append_entry(struct km_local_write *lw, struct lw_entry *e)
{
	/* Bounded: every pass consumes at least one batch, or returns. */
	while (e->n_done < e->n_batches) {
		struct km_log_append_result res;
		int rc = km_log_append_burst(lw->log, &e->batches[e->n_done],
					     e->n_batches - e->n_done,
					     e->marker || lw->coordinator_only
						     ? KM_ORIGIN_CONTROL
						     : KM_ORIGIN_CLIENT,
					     &res);

		if (rc == 0)
			return false;
		if (rc > 0) {
			note_appended(lw, e, &res, (uint32_t)rc);
		} else if (rc == KM_EDUPLICATE) {
			note_duplicate(lw, e, &res);
		} else {
			e->err = rc;
			break;
		}
	}
	e->state = e->err != 0 || e->wait_offset < 0 ? LW_DONE : LW_WAITING;
	return true;
}

/* Queued entries to the log in submit order; one flush for every acks=-1
 * entry handed over in this pass (a group commit). Not reentrant: a
 * segment roll inside km_log_append_burst() waits on the worker's ring,
 * whose other completions may submit more (they are queued, and appended
 * by this pass or the next). */
static void pump(struct km_local_write *lw)
{
	bool flush = false;

	if (lw->pumping)
		return;
	lw->pumping = true;
	for (uint32_t i = 0; i < lw->count; i++) {
		struct lw_entry *e = ent(lw, i);

		if (e->state != LW_QUEUED)
			continue;
		if (!append_entry(lw, e))
			break;
		flush |= e->acks == -1 && e->state == LW_WAITING;
	}
	if (flush)
		(void)km_log_flush(lw->log); /* a failure is sticky: poll sees it */
	lw->pumping = false;
}

/* The checks both submits make before anything is taken. */
static int check_submit(struct km_local_write *lw, uint32_t len, int16_t acks,
			km_part_produced_fn done)
{
	int rc;

	KM_ASSERT(done != NULL);
	if (len == 0 || (acks != 0 && acks != 1 && acks != -1))
		return -EINVAL;
	if ((rc = km_log_error(lw->log)) < 0)
		return rc;
	if (len > lw->mem_bytes)
		return KM_EBATCHMAX;
	if (lw->count == lw->ents_max) {
		lw->st.refused_full++;
		return -ENOBUFS;
	}
	return 0;
}

/* A new entry over records[0, len): the ring's bytes at off, or adopted
 * records, which hold an empty place in the ring's order at off. */
static struct lw_entry *push_entry(struct km_local_write *lw, uint8_t *records,
				   uint32_t off, uint32_t len, int16_t acks,
				   km_part_produced_fn done, void *arg)
{
	struct lw_entry *e = ent(lw, lw->count++);

	memset(e, 0, offsetof(struct lw_entry, batches));
	e->acks = acks;
	e->off = off;
	e->len = len;
	e->iov.iov_base = records;
	e->iov.iov_len = len;
	e->chain.iov = &e->iov;
	e->chain.n_iov = 1;
	e->n_batches = e->n_done = 0;
	e->base_offset = e->wait_offset = e->hold_offset = -1;
	e->append_time = -1;
	e->done = done;
	e->arg = arg;
	e->marker = false;
	lw->st.submits++;
	return e;
}

static void validate(struct km_local_write *lw, struct lw_entry *e)
{
	e->err = parse_all(lw, e);
	e->state = e->err != 0 ? LW_DONE : LW_QUEUED;
}

int km_local_write_submit(struct km_local_write *lw, const struct km_chain *c,
			  struct km_chain_cur cur, uint32_t len, int16_t acks,
			  km_part_produced_fn done, void *arg)
{
	struct lw_entry *e;
	uint32_t off;
	int rc = check_submit(lw, len, acks, done);

	if (rc < 0)
		return rc;
	/* The front-end bounds-checked the records against the frame. */
	KM_ASSERT_HOT(km_chain_has(c, cur, len));
	if (mem_alloc(lw, len, &off) < 0) {
		lw->st.refused_full++;
		return -ENOBUFS;
	}
	e = push_entry(lw, lw->mem + off, off, len, acks, done, arg);
	/* The one copy (local_write.h says why): receive chain -> ring. */
	(void)km_chain_copy(c, cur, lw->mem + off, len);
	validate(lw, e);
	return 0;
}

int km_local_write_marker(struct km_local_write *lw, int64_t producer_id,
			  int16_t producer_epoch, bool commit,
			  int32_t coordinator_epoch, int64_t timestamp_ms,
			  km_part_produced_fn done, void *arg)
{
	struct km_ctrl_spec s = { .base_offset = 0, .leader_epoch = -1,
				  .timestamp = timestamp_ms };
	struct lw_entry *e;
	uint32_t off;
	int len, rc = check_submit(lw, KM_CTRL_MARKER_BATCH_BYTES, -1, done);

	if (rc < 0)
		return rc;
	if (mem_alloc(lw, KM_CTRL_MARKER_BATCH_BYTES, &off) < 0) {
		lw->st.refused_full++;
		return -ENOBUFS;
	}
	len = km_ctrl_build_marker(lw->mem + off, KM_CTRL_MARKER_BATCH_BYTES,
				   &s, producer_id, producer_epoch, commit,
				   coordinator_epoch);
	KM_ASSERT(len == KM_CTRL_MARKER_BATCH_BYTES);
	e = push_entry(lw, lw->mem + off, off, (uint32_t)len, -1, done, arg);
	e->marker = true;
	validate(lw, e);
	return 0;
}

int km_local_write_adopt(struct km_local_write *lw, void *records,
			 uint32_t len, int16_t acks, km_part_produced_fn done,
			 void *arg, km_local_write_release_fn release)
{
	struct lw_entry *e;
	uint32_t off;
	int rc = check_submit(lw, len, acks, done);

	KM_ASSERT(release != NULL);
	if (rc < 0)
		return rc;
	if (len > lw->mem_bytes - lw->adopted_bytes) {
		lw->st.refused_full++;
		return -ENOBUFS;
	}
	/* No ring bytes, but a place in the ring's order: an empty region at
	 * the tail keeps mem_alloc's view of the oldest copy right. */
	(void)mem_alloc(lw, 0, &off);
	e = push_entry(lw, records, off, len, acks, done, arg);
	e->adopted = records;
	e->release = release;
	lw->adopted_bytes += len;
	validate(lw, e);
	return 0;
}

/* A waiting entry is done once its offset is appended (acks 0/1) or
 * durable (acks -1), or once the log failed short of it. */
static void check_waiting(struct km_local_write *lw, struct lw_entry *e)
{
	int64_t reached = e->acks == -1 ? km_log_durable_offset(lw->log)
					: km_log_appended_offset(lw->log);

	if (reached > e->wait_offset) {
		e->state = LW_DONE;
	} else if (km_log_error(lw->log) != 0) {
		e->err = km_log_error(lw->log);
		e->state = LW_DONE;
	}
}

static void make_report(struct km_local_write *lw, struct lw_entry *e,
			struct lw_report *r)
{
	KM_ASSERT(e->state == LW_DONE); /* reported exactly once */
	r->fn = e->done;
	r->arg = e->arg;
	r->res.err = e->err;
	r->res.base_offset = e->err != 0 ? -1 : e->base_offset;
	r->res.log_append_time = e->err != 0 ? -1 : e->append_time;
	r->res.log_start = km_log_start_offset(lw->log);
	lw->st.errors += e->err != 0;
	e->state = LW_REPORTED;
}

/* Free reported copies, oldest first, once the log has written them. After
 * a log failure the writes of a copy may still be in flight with no offset
 * to say when they end: such copies are kept until destroy. */
static void free_reported(struct km_local_write *lw)
{
	int64_t appended = km_log_appended_offset(lw->log);

	while (lw->count > 0) {
		struct lw_entry *e = ent(lw, 0);

		if (e->state != LW_REPORTED ||
		    (e->hold_offset >= 0 && appended <= e->hold_offset))
			break;
		release_adopted(lw, e);
		lw->head = (lw->head + 1) % lw->ents_max;
		lw->count--;
	}
	if (lw->count == 0)
		lw->head = 0; /* the ring's low entries, its only backed pages */
}

/* Collect up to REPORT_BURST finished outcomes, free what may be freed,
 * then run the callbacks. @return how many ran. */
static uint32_t report_burst(struct km_local_write *lw)
{
	struct lw_report reports[REPORT_BURST];
	uint32_t n = 0;

	for (uint32_t i = 0; i < lw->count && n < REPORT_BURST; i++) {
		struct lw_entry *e = ent(lw, i);

		if (e->state == LW_WAITING)
			check_waiting(lw, e);
		if (e->state == LW_DONE)
			make_report(lw, e, &reports[n++]);
	}
	free_reported(lw);
	for (uint32_t i = 0; i < n; i++)
		reports[i].fn(reports[i].arg, &reports[i].res);
	return n;
}

int km_local_write_poll(struct km_local_write *lw)
{
	uint32_t total = 0, n = REPORT_BURST;

	pump(lw);
	/* Bounded by pending_max: a callback may submit, but what it submits
	 * is only queued, not done. */
	for (uint32_t pass = 0; n == REPORT_BURST &&
				pass <= lw->ents_max / REPORT_BURST; pass++) {
		n = report_burst(lw);
		total += n;
	}
	return (int)total;
}

uint32_t km_local_write_pending(const struct km_local_write *lw)
{
	bool failed = km_log_error(lw->log) != 0;
	uint32_t n = 0;

	for (uint32_t i = 0; i < lw->count; i++) {
		const struct lw_entry *e =
			&lw->ents[(lw->head + i) % lw->ents_max];

		n += e->state != LW_REPORTED || !failed;
	}
	return n;
}

void km_local_write_get_stats(const struct km_local_write *lw,
			      struct km_local_write_stats *out)
{
	*out = lw->st;
}
