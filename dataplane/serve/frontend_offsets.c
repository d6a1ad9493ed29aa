/* The group coordinator's committed offsets (issue 7): the table
 * (dataplane/group/goffsets.h) and its writes into `__consumer_offsets-0`.
 *
 * Every write, an OffsetCommit, an offset synced from the source, or
 * compaction's copy, is one batch given to ops->produce with acks=-1, as a
 * client's Produce would be (the partition's owner appends it, wherever it
 * runs); the table changes only once the batch is durable, so OffsetFetch
 * never shows a commit a crash could lose. It then changes exactly as a
 * replay of the log would change it: the batch, kept until then, is
 * applied to it (km_goffsets_apply_batch). Outcomes of one partition come
 * back in append order, so the table applies commits in log order, which
 * is also the order a restart replays them in.
 *
 * Memory: nothing per request. The request tables are made by
 * km_frontend_offsets_init(); a write takes a header of the write ring and the room
 * its batch is built in from the byte ring (common/km_limits.h), trimmed
 * to the batch, until its outcome is in; an OffsetCommit's response arrays
 * live in its slot's reservation, as a Produce's do. An OffsetCommit whose
 * batch would pass KM_GOFFSETS_BATCH_BYTES_MAX is answered
 * INVALID_COMMIT_OFFSET_SIZE, as Kafka answers one over its offsets
 * topic's message size; one that finds the rings full waits in the
 * receive queue until earlier writes are durable.
 *
 * Compaction: once the records appended since the last one exceed a few
 * times what is live, every live commit is appended again and the
 * partition's retain_below is set to where that copy starts; the owner's
 * retention then deletes the whole segments below it (worker.c).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "dataplane/serve/frontend_group_pvt.h"
#include "kafka/batch.h"
#include "kafka/proto_group.h"

/* Compact when this many records were appended since the last compaction,
 * and more than COMPACT_RATIO times the live commits. */
#define COMPACT_MIN_RECORDS 10000u
#define COMPACT_RATIO 4u
#define COMPACT_BATCH_RECORDS 500u

/* The largest write's room (km_goffsets_build_size): its batch, its keys
 * and values staged again (no more than the batch), and a 56 B record spec
 * per record (at least 41 B of batch each: overhead and an empty key). */
_Static_assert(KM_GOFFSETS_WRITE_RING_BYTES >=
		       2 * KM_GOFFSETS_BATCH_BYTES_MAX +
		       KM_GOFFSETS_BATCH_BYTES_MAX / 41 * 56 + 64,
	       "the write ring must hold the largest write");

enum fe_owrite_kind {
	OW_COMMIT = 0,	/* an OffsetCommit, or one batch of a sync */
	OW_COMPACT,	/* compaction's copy: nothing to apply */
};

/* One write in flight, in submit order in the write ring. */
struct fe_owrite {
	struct km_frontend *fe;
	enum fe_owrite_kind kind;
	bool done;		/* outcome in: reclaimed in order */
	uint32_t off;		/* its batch: ring[off, off + len) */
	uint32_t len;
	uint32_t prev_tail;	/* the byte ring's tail before it */
	uint32_t n;		/* commits in the batch */
	fe_owrite_fn fn;
	void *arg;
	bool compact_first;	/* compaction: the copy starts here */
	bool compact_last;	/* ... and is whole once this is durable */
};

/* The tables of the handlers (one request at a time) and the rings. */
struct fe_omem {
	uint32_t commits_max;
	struct km_goffsets_commit *commits;	/* commits_max */
	struct km_gorec_value *values;		/* commits_max */
	struct km_offcommit_req_part *oc_parts;	/* parts_max */
	int16_t *oc_errs;			/* parts_max */
	int32_t *of_parts;			/* parts_max */
	struct km_proto_topic *of_topics;	/* topics_max */
	struct km_offfetch_resp_part *of_resp;	/* parts_max */
	struct fe_owrite *writes;		/* KM_GOFFSETS_WRITES_MAX */
	uint32_t w_head;
	uint32_t w_count;
	uint8_t *ring;				/* KM_GOFFSETS_WRITE_RING_BYTES */
	uint32_t tail;
	/* The sync in progress (the daemon waits for each one's answer). */
	struct {
		bool active;
		uint32_t left;		/* batches given, outcome not yet in */
		int err;		/* the first failure */
		km_frontend_sync_fn done;
		void *arg;
	} sync;
};

static void omem_free(struct fe_omem *om)
{
	if (om == NULL)
		return;
	free(om->commits);
	free(om->values);
	free(om->oc_parts);
	free(om->oc_errs);
	free(om->of_parts);
	free(om->of_topics);
	free(om->of_resp);
	free(om->writes);
	free(om->ring);
	free(om);
}

/* A sync names partitions of the table; compaction writes its batches. */
static uint32_t commits_max(const struct km_frontend *fe)
{
	uint32_t n = fe->parts_max > fe->table->n ? fe->parts_max : fe->table->n;

	return n > COMPACT_BATCH_RECORDS ? n : COMPACT_BATCH_RECORDS;
}

static int omem_alloc(struct km_frontend *fe)
{
	struct fe_omem *om = calloc(1, sizeof(*om));

	fe->go.mem = om;
	if (om == NULL)
		return -ENOMEM;
	om->commits_max = commits_max(fe);
	om->commits = calloc(om->commits_max, sizeof(*om->commits));
	om->values = calloc(om->commits_max, sizeof(*om->values));
	om->oc_parts = calloc(fe->parts_max, sizeof(*om->oc_parts));
	om->oc_errs = calloc(fe->parts_max, sizeof(*om->oc_errs));
	om->of_parts = calloc(fe->parts_max, sizeof(*om->of_parts));
	om->of_topics = calloc(fe->topics_max, sizeof(*om->of_topics));
	om->of_resp = calloc(fe->parts_max, sizeof(*om->of_resp));
	om->writes = calloc(KM_GOFFSETS_WRITES_MAX, sizeof(*om->writes));
	om->ring = malloc(KM_GOFFSETS_WRITE_RING_BYTES);
	if (!om->commits || !om->values || !om->oc_parts || !om->oc_errs ||
	    !om->of_parts || !om->of_topics || !om->of_resp || !om->writes ||
	    !om->ring)
		return -ENOMEM;
	return 0;
}

int km_frontend_offsets_init(struct km_frontend *fe)
{
	int rc = omem_alloc(fe);

	if (rc < 0)
		return rc;
	fe->go.part = km_part_find(fe->table, KM_GOFFSETS_TOPIC, 0);
	return km_goffsets_create(&fe->go.table);
}

void km_frontend_offsets_free(struct km_frontend *fe)
{
	km_goffsets_destroy(fe->go.table);
	fe->go.table = NULL;
	omem_free(fe->go.mem);
	fe->go.mem = NULL;
}

/* The table is rebuilt from the partition the first time it is needed (its
 * owner may open the log after the front-end starts).
 * @return KM_KERR_NONE, or COORDINATOR_LOAD_IN_PROGRESS while the log is not
 *         open, COORDINATOR_NOT_AVAILABLE if it cannot be read. */
int16_t km_frontend_offsets_ready(struct km_frontend *fe)
{
	struct km_log *log;
	int n;

	if (fe->go.loaded)
		return fe->go.load_err ? KM_KERR_COORDINATOR_NOT_AVAILABLE
				       : KM_KERR_NONE;
	if (fe->go.part == NULL)
		return KM_KERR_COORDINATOR_NOT_AVAILABLE;
	log = fe->go.part->log;
	if (log == NULL || atomic_load(&fe->go.part->error) != 0)
		return KM_KERR_COORDINATOR_LOAD_IN_PROGRESS;
	n = km_goffsets_load(fe->go.table, log);
	fe->go.loaded = true;
	if (n < 0) {
		fe->go.load_err = n;
		KM_ERROR("groups", "%s-0: cannot rebuild the committed offsets: "
			 "%s", KM_GOFFSETS_TOPIC, km_strerror(n));
		return KM_KERR_COORDINATOR_NOT_AVAILABLE;
	}
	KM_INFO("groups", "%s-0: %u committed offsets rebuilt from %d records "
		"[%" PRId64 ", %" PRId64 ")", KM_GOFFSETS_TOPIC,
		km_goffsets_count(fe->go.table), n, km_log_start_offset(log),
		km_log_appended_offset(log));
	return KM_KERR_NONE;
}

/* ---- the write ring -------------------------------------------------------- */

static struct fe_owrite *wr_at(struct fe_omem *om, uint32_t i)
{
	return &om->writes[(om->w_head + i) % KM_GOFFSETS_WRITES_MAX];
}

/* As local_write.c's ring: batches are freed oldest first, so the free
 * bytes are [tail, end) + [0, oldest), or [tail, oldest) once wrapped. */
static int ring_alloc(struct fe_omem *om, size_t len, uint32_t *off)
{
	uint32_t cap = KM_GOFFSETS_WRITE_RING_BYTES, oldest;

	if (len > cap)
		return -E2BIG;
	if (om->w_count == 0) {
		*off = 0;
	} else {
		oldest = wr_at(om, 0)->off;
		if (om->tail >= oldest && cap - om->tail >= len)
			*off = om->tail;
		else if (om->tail >= oldest && len < oldest)
			*off = 0;
		else if (om->tail < oldest && oldest - om->tail > len)
			*off = om->tail;
		else
			return -EAGAIN;
	}
	om->tail = *off + (uint32_t)len;
	return 0;
}

/* The newest write, with len bytes to build its batch in.
 * @return 0, -EAGAIN (no room now), -E2BIG (never room). */
static int wr_new(struct km_frontend *fe, size_t len, enum fe_owrite_kind kind,
		  struct fe_owrite **out)
{
	struct fe_omem *om = fe->go.mem;
	uint32_t prev = om->tail, off;
	struct fe_owrite *o;
	int rc;

	if (om->w_count == KM_GOFFSETS_WRITES_MAX)
		return -EAGAIN;
	if ((rc = ring_alloc(om, len, &off)) < 0)
		return rc;
	o = wr_at(om, om->w_count++);
	*o = (struct fe_owrite){ .fe = fe, .kind = kind, .off = off,
				 .len = (uint32_t)len, .prev_tail = prev };
	*out = o;
	return 0;
}

/* Only the newest write shrinks or goes back (its batch is built, or it
 * was not submitted after all). */
static void wr_trim(struct fe_omem *om, struct fe_owrite *o, uint32_t len)
{
	KM_ASSERT(o == wr_at(om, om->w_count - 1));
	KM_ASSERT(len <= o->len);
	o->len = len;
	om->tail = o->off + len;
}

static void wr_drop(struct fe_omem *om, struct fe_owrite *o)
{
	KM_ASSERT(o == wr_at(om, om->w_count - 1));
	om->tail = o->prev_tail;
	om->w_count--;
}

/* Outcomes normally come in submit order; a failure may not: a write is
 * reclaimed once it and every older one are in. */
static void wr_reclaim(struct fe_omem *om)
{
	while (om->w_count > 0 && wr_at(om, 0)->done) {
		om->w_head = (om->w_head + 1) % KM_GOFFSETS_WRITES_MAX;
		om->w_count--;
	}
	if (om->w_count == 0)
		om->tail = 0;
}

/* Build c[0, n) into o's room and keep only the batch. */
static int wr_build(struct km_frontend *fe, struct fe_owrite *o,
		    const struct km_goffsets_commit *c, uint32_t n)
{
	struct fe_omem *om = fe->go.mem;
	int rc = km_goffsets_build(om->ring + o->off, o->len, c, n,
				   km_clock_wall_ms());

	if (rc < 0)
		return rc;
	wr_trim(om, o, (uint32_t)rc);
	o->n = n;
	return 0;
}

static void on_written(void *arg, const struct km_part_produced *res);

/* ops->produce copies the batch (the one copy of a write): o keeps its
 * own until the outcome, to apply it. */
static int wr_submit(struct km_frontend *fe, struct fe_owrite *o)
{
	struct iovec iov = { fe->go.mem->ring + o->off, o->len };
	struct km_chain ch = { &iov, 1 };
	int rc = fe->ops->produce(fe->ops->ctx, fe->go.part, &ch,
				  km_chain_start(&ch), o->len, -1, on_written, o);

	if (rc == 0)
		fe->go.writes++;
	return rc;
}

/* The durable batch into the table, as a replay would apply it. */
static int wr_apply(struct km_frontend *fe, const struct fe_owrite *o)
{
	struct iovec iov = { fe->go.mem->ring + o->off, o->len };
	struct km_chain ch = { &iov, 1 };
	struct km_batch b;
	int rc = km_batch_parse(&b, &ch, km_chain_start(&ch), o->len);

	if (rc <= 0)
		return rc < 0 ? rc : KM_EWIRETRUNC; /* our own batch: a bug */
	rc = km_goffsets_apply_batch(fe->go.table, &b);
	return rc < 0 ? rc : 0;
}

/* ---- writes ---------------------------------------------------------------- */

static void maybe_compact(struct km_frontend *fe);

static void compact_outcome(struct km_frontend *fe, const struct fe_owrite *o,
			    const struct km_part_produced *res)
{
	if (o->compact_first)
		fe->go.compact_from = res->err == 0 ? res->base_offset : -1;
	if (res->err < 0)
		fe->go.compact_from = -1;
	if (!o->compact_last)
		return;
	fe->go.compacting = false;
	if (fe->go.compact_from > 0)
		atomic_store_explicit(&fe->go.part->retain_below,
				      fe->go.compact_from, memory_order_release);
	KM_INFO("groups", "%s-0: compacted: %u live commits copied from offset "
		"%" PRId64 "%s", KM_GOFFSETS_TOPIC,
		km_goffsets_count(fe->go.table), fe->go.compact_from,
		fe->go.compact_from > 0 ? "" : " (failed: kept all)");
}

static void on_written(void *arg, const struct km_part_produced *res)
{
	struct fe_owrite *o = arg;
	struct km_frontend *fe = o->fe;
	fe_owrite_fn fn = o->fn;
	void *fn_arg = o->arg;
	uint32_t n = o->n;
	int rc = res->err;

	if (o->kind == OW_COMPACT)
		compact_outcome(fe, o, res);
	else if (rc == 0 && (rc = wr_apply(fe, o)) == 0)
		fe->go.since_compact += n;
	if (rc < 0)
		KM_WARN("groups", "%s-0: writing %u commits: %s",
			KM_GOFFSETS_TOPIC, n, km_strerror(rc));
	fe->go.writes--;
	o->done = true;
	wr_reclaim(fe->go.mem);
	if (fn != NULL)
		fn(fn_arg, rc);
	maybe_compact(fe);
}

/* One batch of n commits, done(arg, rc) once durable and in the table.
 * @return 0, KM_EBATCHMAX (over KM_GOFFSETS_BATCH_BYTES_MAX), -EAGAIN (the
 *         rings are full now), or the build's or ops->produce's code. */
int km_frontend_offsets_write(struct km_frontend *fe, const struct km_goffsets_commit *c,
		     uint32_t n, fe_owrite_fn done, void *arg)
{
	struct fe_owrite *o;
	int rc;

	if (km_goffsets_batch_bytes(c, n) > KM_GOFFSETS_BATCH_BYTES_MAX)
		return KM_EBATCHMAX;
	if ((rc = wr_new(fe, km_goffsets_build_size(c, n), OW_COMMIT, &o)) < 0)
		return rc == -E2BIG ? KM_EBATCHMAX : rc;
	o->fn = done;
	o->arg = arg;
	if ((rc = wr_build(fe, o, c, n)) < 0 || (rc = wr_submit(fe, o)) < 0) {
		wr_drop(fe->go.mem, o);
		return rc;
	}
	return 0;
}

/* ---- compaction -------------------------------------------------------------- */

/* Every live commit again, in batches of COMPACT_BATCH_RECORDS records or
 * KM_GOFFSETS_BATCH_BYTES_MAX bytes, straight from the table: it does not
 * change while km_goffsets_each runs (outcomes come from the loop), so the
 * commits may point into it. */
struct compact_run {
	struct km_frontend *fe;
	uint32_t n;		/* commits gathered */
	size_t bytes;		/* their batch's bound */
	uint32_t batches;
	struct fe_owrite *last;
	bool failed;
};

/* Submit the gathered commits; their copy is ops->produce's, so the
 * write keeps no bytes. */
static void compact_flush(struct compact_run *x)
{
	struct km_frontend *fe = x->fe;
	struct fe_omem *om = fe->go.mem;
	struct fe_owrite *o;

	if (x->failed || x->n == 0)
		return;
	if (wr_new(fe, km_goffsets_build_size(om->commits, x->n), OW_COMPACT,
		   &o) < 0) {
		x->failed = true;
		return;
	}
	o->compact_first = x->batches == 0;
	if (wr_build(fe, o, om->commits, x->n) < 0 || wr_submit(fe, o) < 0) {
		wr_drop(om, o);
		x->failed = true;
		return;
	}
	wr_trim(om, o, 0);
	x->last = o;
	x->batches++;
	x->n = 0;
	x->bytes = km_goffsets_batch_bytes(NULL, 0);
}

static void compact_one(void *arg, const char *group, const char *topic,
			int32_t partition, const struct km_goffset *g)
{
	struct compact_run *x = arg;
	struct fe_omem *om = x->fe->go.mem;
	struct km_goffsets_commit c = { group, topic, partition, NULL };
	size_t rec;

	if (x->failed)
		return;
	rec = km_goffsets_batch_bytes(&c, 1) - km_goffsets_batch_bytes(NULL, 0) +
	      g->metadata_len + 24u;
	if (x->n == COMPACT_BATCH_RECORDS ||
	    x->bytes + rec > KM_GOFFSETS_BATCH_BYTES_MAX)
		compact_flush(x);
	if (x->failed)
		return;
	om->values[x->n] = (struct km_gorec_value){ g->offset, g->leader_epoch,
						    g->commit_ts, g->metadata,
						    g->metadata_len };
	om->commits[x->n] = c;
	om->commits[x->n].value = &om->values[x->n];
	x->n++;
	x->bytes += rec;
}

static void compact(struct km_frontend *fe)
{
	struct compact_run x = { .fe = fe,
				 .bytes = km_goffsets_batch_bytes(NULL, 0) };

	fe->go.compacting = true;
	fe->go.since_compact = 0;
	km_goffsets_each(fe->go.table, NULL, compact_one, &x);
	compact_flush(&x);
	if (!x.failed && x.last != NULL) {
		/* Its outcome cannot be in yet: outcomes come from the loop. */
		x.last->compact_last = true;
		return;
	}
	/* The batches already given still complete; none is the last: give
	 * up this time. */
	fe->go.compacting = false;
	if (x.failed)
		KM_WARN("groups", "%s-0: compaction not submitted (%u batches "
			"given)", KM_GOFFSETS_TOPIC, x.batches);
}

static void maybe_compact(struct km_frontend *fe)
{
	uint32_t live = km_goffsets_count(fe->go.table);

	/* A write in flight would land below the copy, in a segment that
	 * may go, while the copy does not hold it yet. */
	if (fe->go.compacting || fe->go.writes > 0 ||
	    fe->go.since_compact < COMPACT_MIN_RECORDS ||
	    fe->go.since_compact < (uint64_t)live * COMPACT_RATIO)
		return;
	compact(fe);
}

/* ---- offset sync from the source ------------------------------------------- */

/* max(log start, min(source, log end)), or -1 if we do not have it. */
static int64_t clamp(struct km_frontend *fe, const struct km_group_sync_part *sp)
{
	struct km_part *p = km_part_find(fe->table, sp->topic, sp->partition);
	int64_t start, end, v = sp->source_offset;

	if (p == NULL || p->internal || p->log == NULL || v < 0)
		return -1;
	start = km_log_start_offset(p->log);
	end = km_log_appended_offset(p->log);
	v = v < end ? v : end;
	return v > start ? v : start;
}

/* The commits that change something, into the commit table. @return how
 * many. */
static uint32_t sync_commits(struct km_frontend *fe, struct km_group_sync *s)
{
	struct fe_omem *om = fe->go.mem;
	uint32_t n = 0;

	for (uint32_t i = 0; i < s->n_parts; i++) {
		struct km_group_sync_part *sp = &s->parts[i];
		const struct km_goffset *o =
			km_goffsets_get(fe->go.table, s->group, sp->topic,
					sp->partition);
		int64_t v = clamp(fe, sp);

		sp->previous = o ? o->offset : -1;
		/* Never backwards: a group that consumed here (then left)
		 * must not be sent back to re-read what it has processed. */
		if (v < 0 || (o != NULL && o->offset >= v)) {
			sp->stored = sp->previous;
			continue;
		}
		sp->stored = v;
		om->values[n] = (struct km_gorec_value){ v, sp->leader_epoch,
							 km_clock_wall_ms(), "", 0 };
		om->commits[n] = (struct km_goffsets_commit){
			s->group, sp->topic, sp->partition, &om->values[n]
		};
		n++;
	}
	return n;
}

static void on_sync_batch(void *arg, int rc)
{
	struct km_frontend *fe = arg;
	struct fe_omem *om = fe->go.mem;

	if (rc < 0 && om->sync.err == 0)
		om->sync.err = rc;
	KM_ASSERT(om->sync.left > 0);
	if (--om->sync.left > 0)
		return;
	om->sync.active = false;
	om->sync.done(om->sync.arg, om->sync.err);
}

/* Commits from c[0] that fit one batch (at least one). */
static uint32_t batch_run(const struct km_goffsets_commit *c, uint32_t n)
{
	size_t bytes = km_goffsets_batch_bytes(c, 1);
	uint32_t k = 1;

	/* Each record adds its own bound: the header counts once. */
	while (k < n && (bytes += km_goffsets_batch_bytes(&c[k], 1) -
				  km_goffsets_batch_bytes(NULL, 0)) <=
				 KM_GOFFSETS_BATCH_BYTES_MAX)
		k++;
	return k;
}

/* The commits in as many batches as KM_GOFFSETS_BATCH_BYTES_MAX asks.
 * @return batches given (their outcomes follow), or a code if none was. */
static int sync_write(struct km_frontend *fe, uint32_t n)
{
	struct fe_omem *om = fe->go.mem;
	uint32_t at = 0, given = 0;
	int rc = 0;

	while (at < n) {
		uint32_t k = batch_run(om->commits + at, n - at);

		if ((rc = km_frontend_offsets_write(fe, om->commits + at, k, on_sync_batch,
					   fe)) < 0)
			break;
		om->sync.left++;
		given++;
		at += k;
	}
	if (rc < 0)
		om->sync.err = rc; /* what was given completes, with this */
	return given > 0 ? (int)given : rc;
}

int km_frontend_group_sync(struct km_frontend *fe, struct km_group_sync *s,
			   km_frontend_sync_fn done, void *arg)
{
	struct fe_omem *om = fe->go.mem;
	int16_t kerr = km_frontend_offsets_ready(fe);
	uint32_t n;
	int rc;

	if (kerr != KM_KERR_NONE)
		return kerr == KM_KERR_COORDINATOR_LOAD_IN_PROGRESS
			       ? -EAGAIN : KM_EPARTOFFLINE;
	if (om->sync.active)
		return -EBUSY; /* the daemon syncs one group at a time */
	if (s->n_parts > om->commits_max)
		return -E2BIG; /* it names only partitions of the table */
	s->active = km_frontend_groups_active(fe, s->group);
	if (s->active) {
		for (uint32_t i = 0; i < s->n_parts; i++)
			s->parts[i].stored = s->parts[i].previous = -1;
		done(arg, 0);
		return 0;
	}
	if ((n = sync_commits(fe, s)) == 0) {
		done(arg, 0);
		return 0;
	}
	om->sync.active = true;
	om->sync.left = 0;
	om->sync.err = 0;
	om->sync.done = done;
	om->sync.arg = arg;
	if ((rc = sync_write(fe, n)) < 0) {
		om->sync.active = false;
		return rc;
	}
	return 0;
}

/* ---- OffsetCommit ------------------------------------------------------------ */

/* An OffsetCommit whose batch is being written: it and its response
 * arrays live in the slot's reservation, after the response's room. */
struct commit_op {
	struct fe_conn *fc;
	uint32_t slot;
	struct km_offcommit_resp m;
	int16_t *wrote;		/* per part: 1 if in the batch */
};

static size_t align8(size_t n)
{
	return (n + 7u) & ~(size_t)7u;
}

static size_t commit_op_bytes(const struct km_offcommit_req *q)
{
	return align8(sizeof(struct commit_op)) +
	       align8(q->n_topics * sizeof(struct km_proto_topic)) +
	       align8(q->n_parts * sizeof(struct km_offcommit_resp_part)) +
	       align8(q->n_parts * sizeof(int16_t));
}

static void commit_respond(struct commit_op *op)
{
	struct fe_conn *fc = op->fc;
	struct km_wire_wr w;

	km_frontend_slot_begin(fc, op->slot, &w);
	km_offcommit_resp_encode(&w, fc->slots[op->slot].api_version, &op->m);
	km_frontend_slot_finish(fc, op->slot, &w, false);
}

static void on_committed(void *arg, int rc)
{
	struct commit_op *op = arg;
	struct fe_conn *fc = op->fc;

	for (uint32_t i = 0; rc < 0 && i < op->m.n_parts; i++)
		if (op->wrote[i])
			op->m.parts[i].error_code = KM_KERR_COORDINATOR_NOT_AVAILABLE;
	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	if (fc->c != NULL && !fc->closing)
		commit_respond(op);
	km_frontend_conn_maybe_free(fc);
}

/* Kafka's per-partition checks; NONE if the offset may be written. */
static int16_t commit_part_err(struct km_frontend *fe, const char *topic,
			       const struct km_offcommit_req_part *rp)
{
	struct km_part *p = km_part_find(fe->table, topic, rp->partition);

	if (p == NULL || p->internal)
		return KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	if (rp->metadata.len > KM_GOREC_METADATA_MAX)
		return KM_KERR_OFFSET_METADATA_TOO_LARGE;
	return KM_KERR_NONE;
}

/* The commits of the partitions that pass, into the commit table (their
 * metadata in place, or in the staging area), and every partition's code
 * into oc_errs. @return how many commits. */
static uint32_t commit_collect(struct fe_conn *fc, struct km_wire_rd *r,
			       const struct km_offcommit_req *q, int16_t gerr)
{
	struct fe_omem *om = fc->fe->go.mem;
	uint32_t n = 0;

	km_frontend_span_reset(fc->fe);
	for (uint32_t t = 0; t < q->n_topics; t++)
		for (uint32_t i = q->topics[t].first;
		     i < q->topics[t].first + q->topics[t].count; i++) {
			const struct km_offcommit_req_part *rp = &q->parts[i];
			int16_t e = gerr ? gerr : commit_part_err(fc->fe, q->topics[t].name.s, rp);
			uint16_t ml = rp->metadata.len > 0 ? (uint16_t)rp->metadata.len : 0;
			const uint8_t *md = km_frontend_span_bytes(fc->fe, r->chain, &rp->metadata);

			if (e == KM_KERR_NONE && ml > 0 && md == NULL)
				e = KM_KERR_UNKNOWN_SERVER_ERROR; /* cannot be */
			om->oc_errs[i] = e;
			if (e != KM_KERR_NONE)
				continue;
			om->values[n] = (struct km_gorec_value){ rp->committed_offset,
				rp->committed_leader_epoch, 0, (const char *)md, ml };
			om->commits[n] = (struct km_goffsets_commit){ q->group_id.s,
				q->topics[t].name.s, rp->partition, &om->values[n] };
			n++;
		}
	return n;
}

/* The group's verdict on the commit: the coordinator's, once loaded. */
static int16_t commit_group_err(struct fe_conn *fc, const struct km_offcommit_req *q)
{
	int16_t e = km_frontend_offsets_ready(fc->fe);

	if (e != KM_KERR_NONE)
		return e;
	return km_group_commit_check(fc->fe->groups, q->group_id.s,
				     q->member_id.s,
				     q->group_instance_id.len < 0 ? NULL
								 : q->group_instance_id.s,
				     q->generation_id, km_frontend_now_ms());
}

/* The op and its arrays, in the slot past the response's room. */
static struct commit_op *commit_op_place(struct fe_conn *fc, uint32_t slot,
					 uint32_t resp,
					 const struct km_offcommit_req *q)
{
	struct fe_slot *s = &fc->slots[slot];
	uint8_t *p = fc->buf + s->off + resp;
	struct commit_op *op = (struct commit_op *)p;
	struct km_proto_topic *topics;
	struct km_offcommit_resp_part *parts;

	s->data_off = resp;
	topics = (struct km_proto_topic *)(p + align8(sizeof(*op)));
	parts = (struct km_offcommit_resp_part *)
		((uint8_t *)topics + align8(q->n_topics * sizeof(*topics)));
	memcpy(topics, q->topics, q->n_topics * sizeof(*topics));
	*op = (struct commit_op){ .fc = fc, .slot = slot,
		.wrote = (int16_t *)((uint8_t *)parts +
				     align8(q->n_parts * sizeof(*parts))) };
	op->m = (struct km_offcommit_resp){ .topics = topics,
		.topics_max = q->n_topics, .n_topics = q->n_topics,
		.parts = parts, .parts_max = q->n_parts, .n_parts = q->n_parts };
	for (uint32_t i = 0; i < q->n_parts; i++) {
		parts[i] = (struct km_offcommit_resp_part){ q->parts[i].partition,
							    fc->fe->go.mem->oc_errs[i] };
		op->wrote[i] = 0;
	}
	return op;
}

/* Too large a batch: Kafka's answer to a commit over the offsets topic's
 * message size (GroupMetadataManager: RECORD_LIST_TOO_LARGE ->
 * INVALID_COMMIT_OFFSET_SIZE). */
static void commit_too_large(struct fe_conn *fc, const struct km_offcommit_req *q)
{
	struct fe_omem *om = fc->fe->go.mem;

	KM_WARN("frontend", "connection %u (client id \"%s\"): OffsetCommit of "
		"group %s: its batch would pass %u bytes: answered "
		"INVALID_COMMIT_OFFSET_SIZE", fc->id, fc->client_id,
		q->group_id.s, KM_GOFFSETS_BATCH_BYTES_MAX);
	for (uint32_t i = 0; i < q->n_parts; i++)
		if (om->oc_errs[i] == KM_KERR_NONE)
			om->oc_errs[i] = KM_KERR_INVALID_COMMIT_OFFSET_SIZE;
}

/* Room for the write first, then the slot: a full ring or a full
 * connection leaves the request queued with nothing taken. */
static int commit_start(struct fe_conn *fc, const struct km_reqhdr *h,
			const struct km_offcommit_req *q, uint32_t n)
{
	struct fe_omem *om = fc->fe->go.mem;
	uint32_t resp = (uint32_t)align8(32 + q->n_topics * (KM_WIRE_NAME_BYTES_MAX + 8) +
					  q->n_parts * 8);
	struct fe_owrite *o = NULL;
	struct commit_op *op;
	uint32_t slot;
	int rc;

	if (n > 0 && (rc = wr_new(fc->fe, km_goffsets_build_size(om->commits, n),
				  OW_COMMIT, &o)) < 0)
		return rc == -EAGAIN ? FE_WAIT
				     : km_frontend_conn_fail(fc, "OffsetCommit: %s",
						    km_strerror(rc));
	rc = km_frontend_slot_open(fc, h, resp + (uint32_t)commit_op_bytes(q), &slot);
	if (rc != 0) {
		if (o != NULL)
			wr_drop(om, o);
		return rc;
	}
	op = commit_op_place(fc, slot, resp, q);
	fc->pending_ops++;
	if (o == NULL) {
		on_committed(op, 0); /* nothing to write: answer now */
		return 0;
	}
	for (uint32_t i = 0; i < q->n_parts; i++)
		op->wrote[i] = om->oc_errs[i] == KM_KERR_NONE;
	o->fn = on_committed;
	o->arg = op;
	if ((rc = wr_build(fc->fe, o, om->commits, n)) < 0 ||
	    (rc = wr_submit(fc->fe, o)) < 0) {
		wr_drop(om, o);
		fc->pending_ops--;
		return km_frontend_conn_fail(fc, "OffsetCommit: %s", km_strerror(rc));
	}
	return 0;
}

int km_frontend_handle_offset_commit(struct fe_conn *fc, const struct km_reqhdr *h,
			    struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_offcommit_req q = { .topics = fe->lo_topics,
		.topics_max = fe->topics_max, .parts = fe->go.mem->oc_parts,
		.parts_max = fe->parts_max };
	uint32_t n;
	int rc = km_offcommit_req_decode(r, h->api_version, &q);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed OffsetCommit v%d request: %s",
				    h->api_version, km_strerror(rc));
	n = commit_collect(fc, r, &q, commit_group_err(fc, &q));
	if (n > 0 && km_goffsets_batch_bytes(fe->go.mem->commits, n) >
			     KM_GOFFSETS_BATCH_BYTES_MAX) {
		commit_too_large(fc, &q);
		n = 0;
	}
	return commit_start(fc, h, &q, n);
}

/* ---- OffsetFetch ------------------------------------------------------------- */

struct fetch_all {
	struct km_offfetch_resp *m;
	uint32_t cap;
};

static void fetch_part(struct km_offfetch_resp_part *rp, int32_t partition,
		       const struct km_goffset *o, int16_t err)
{
	*rp = (struct km_offfetch_resp_part){
		.partition = partition, .committed_offset = o ? o->offset : -1,
		.committed_leader_epoch = o ? o->leader_epoch : -1,
		.metadata = { .p = o ? o->metadata : "", .len = o ? o->metadata_len : 0 },
		.error_code = err,
	};
}

/* "All topics" (v2+): the group's commits, a topic run each. */
static void add_any(void *arg, const char *group, const char *topic,
		    int32_t partition, const struct km_goffset *o)
{
	struct fetch_all *a = arg;
	struct km_offfetch_resp *m = a->m;
	struct km_proto_topic *t = m->n_topics ? &m->topics[m->n_topics - 1] : NULL;

	(void)group;
	if (m->n_parts == a->cap)
		return;
	if (t == NULL || strcmp(t->name.s, topic) != 0 ||
	    t->first + t->count != m->n_parts) {
		if (m->n_topics == m->topics_max)
			return;
		t = &m->topics[m->n_topics++];
		km_wire_name_set(&t->name, topic);
		t->first = m->n_parts;
		t->count = 0;
	}
	fetch_part(&m->parts[m->n_parts++], partition, o, KM_KERR_NONE);
	t->count++;
}

static uint32_t fetch_bound(const struct km_offfetch_resp *m)
{
	uint32_t b = 32 + m->n_topics * (KM_WIRE_NAME_BYTES_MAX + 8);

	for (uint32_t i = 0; i < m->n_parts; i++)
		b += 32 + (uint32_t)(m->parts[i].metadata.len > 0
					     ? m->parts[i].metadata.len : 0);
	return b;
}

static void fetch_fill(struct km_frontend *fe, const struct km_offfetch_req *q,
		       struct km_offfetch_resp *m, int16_t err, int16_t version)
{
	struct fetch_all a = { m, m->parts_max };

	if (q->all_topics) {
		if (err == KM_KERR_NONE)
			km_goffsets_each(fe->go.table, q->group_id.s, add_any, &a);
		return;
	}
	memcpy(m->topics, q->topics, q->n_topics * sizeof(*m->topics));
	m->n_topics = q->n_topics;
	m->n_parts = q->n_parts;
	for (uint32_t i = 0; i < q->n_topics; i++)
		for (uint32_t k = q->topics[i].first;
		     k < q->topics[i].first + q->topics[i].count; k++)
			fetch_part(&m->parts[k], q->parts[k],
				   err ? NULL : km_goffsets_get(fe->go.table,
							   q->group_id.s,
							   q->topics[i].name.s,
							   q->parts[k]),
				   version < 2 ? err : KM_KERR_NONE);
}

int km_frontend_handle_offset_fetch(struct fe_conn *fc, const struct km_reqhdr *h,
			   struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct fe_omem *om = fe->go.mem;
	struct km_offfetch_req q = { .topics = fe->lo_topics,
		.topics_max = fe->topics_max, .parts = om->of_parts,
		.parts_max = fe->parts_max };
	struct km_offfetch_resp m = { .topics = om->of_topics,
		.topics_max = fe->topics_max, .parts = om->of_resp,
		.parts_max = fe->parts_max };
	struct km_wire_wr w;
	uint32_t slot;
	int16_t err;
	int rc = km_offfetch_req_decode(r, h->api_version, &q);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "OffsetFetch v%d: %s", h->api_version,
				    km_strerror(rc));
	err = km_frontend_offsets_ready(fe);
	fetch_fill(fe, &q, &m, err, h->api_version);
	m.error_code = h->api_version >= 2 ? err : KM_KERR_NONE;
	if ((rc = km_frontend_slot_open(fc, h, fetch_bound(&m), &slot)) == 0) {
		km_frontend_slot_begin(fc, slot, &w);
		km_offfetch_resp_encode(&w, h->api_version, &m);
		rc = km_frontend_slot_finish(fc, slot, &w, true);
	}
	return rc;
}
