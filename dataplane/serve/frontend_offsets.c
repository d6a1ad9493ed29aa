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
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "dataplane/serve/frontend_offsets_pvt.h"
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
	uint32_t n = fe->parts_max > fe->table->cap ? fe->parts_max : fe->table->cap;

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
int km_frontend_offsets_wr_new(struct km_frontend *fe, size_t len,
			       enum fe_owrite_kind kind,
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

void km_frontend_offsets_wr_drop(struct fe_omem *om, struct fe_owrite *o)
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
int km_frontend_offsets_wr_build(struct km_frontend *fe, struct fe_owrite *o,
				 const struct km_goffsets_commit *c,
				 uint32_t n)
{
	struct fe_omem *om = fe->go.mem;
	int rc = o->txn ? km_goffsets_build_txn(om->ring + o->off, o->len, c,
						n, km_clock_wall_ms(), o->pid,
						o->epoch)
			: km_goffsets_build(om->ring + o->off, o->len, c, n,
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
int km_frontend_offsets_wr_submit(struct km_frontend *fe, struct fe_owrite *o)
{
	struct iovec iov = { fe->go.mem->ring + o->off, o->len };
	struct km_chain ch = { &iov, 1 };
	int rc = fe->ops->produce(fe->ops->ctx, fe->go.part, &ch,
				  km_chain_start(&ch), o->len, -1, on_written, o);

	if (rc == 0)
		fe->go.writes++;
	return rc;
}

/* The durable batch into the table, as a replay would apply it: at its
 * offset in the log (the header's base offset is not in the CRC). */
static int wr_apply(struct km_frontend *fe, const struct fe_owrite *o,
		    int64_t base_offset)
{
	struct iovec iov = { fe->go.mem->ring + o->off, o->len };
	struct km_chain ch = { &iov, 1 };
	struct km_batch b;
	int rc;

	km_store_be64(fe->go.mem->ring + o->off, (uint64_t)base_offset);
	rc = km_batch_parse(&b, &ch, km_chain_start(&ch), o->len);
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
	else if (rc == 0 && (rc = wr_apply(fe, o, res->base_offset)) == 0)
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
	if ((rc = km_frontend_offsets_wr_new(fe, km_goffsets_build_size(c, n), OW_COMMIT, &o)) < 0)
		return rc == -E2BIG ? KM_EBATCHMAX : rc;
	o->fn = done;
	o->arg = arg;
	if ((rc = km_frontend_offsets_wr_build(fe, o, c, n)) < 0 || (rc = km_frontend_offsets_wr_submit(fe, o)) < 0) {
		km_frontend_offsets_wr_drop(fe->go.mem, o);
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
	if (km_frontend_offsets_wr_new(fe, km_goffsets_build_size(om->commits, x->n), OW_COMPACT,
		   &o) < 0) {
		x->failed = true;
		return;
	}
	o->compact_first = x->batches == 0;
	if (km_frontend_offsets_wr_build(fe, o, om->commits, x->n) < 0 || km_frontend_offsets_wr_submit(fe, o) < 0) {
		km_frontend_offsets_wr_drop(om, o);
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
	/* A pending transactional commit below the copy would go with its
	 * segment, and its COMMIT marker would then find nothing. */
	if (fe->go.compacting || fe->go.writes > 0 ||
	    km_goffsets_pending_count(fe->go.table) > 0 ||
	    fe->go.since_compact < COMPACT_MIN_RECORDS ||
	    fe->go.since_compact < (uint64_t)live * COMPACT_RATIO)
		return;
	compact(fe);
}

/* ---- offset sync from the source ------------------------------------------- */

/* max(log start, min(source, durable offset[, a stop's cut])), or -1 if
 * we do not have it. The durable offset is the high watermark clients see
 * (R6): a group sent past it would get OFFSET_OUT_OF_RANGE and reset,
 * perhaps to the start. Past a stop's cut are our own writes: a group
 * sent there would skip them. */
static int64_t clamp(struct km_frontend *fe, const struct km_group_sync_part *sp)
{
	struct km_part *p = km_part_find(fe->table, sp->topic, sp->partition);
	int64_t start, end, v = sp->source_offset;

	if (p == NULL || p->internal || p->log == NULL || v < 0)
		return -1;
	start = km_log_start_offset(p->log);
	end = km_log_durable_offset(p->log);
	if (sp->at_stop && sp->cut < end)
		end = sp->cut;
	v = v < end ? v : end;
	return v > start ? v : start;
}

/* What to store for sp given o (committed here), or -1 for nothing. Never
 * backwards: a group that consumed here (then left) must not be sent back
 * to re-read what it has processed; but an offset past a stop's cut points
 * at records the cut removed, whose offsets our own writes take next. */
static int64_t sync_target(struct km_frontend *fe,
			   const struct km_group_sync_part *sp,
			   const struct km_goffset *o)
{
	int64_t v = clamp(fe, sp);

	if (v >= 0 && o != NULL && sp->at_stop && o->offset > sp->cut)
		return v > sp->cut ? v : sp->cut;
	if (v < 0 || (o != NULL && o->offset >= v))
		return -1;
	return v;
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
		int64_t v = sync_target(fe, sp, o);

		sp->previous = o ? o->offset : -1;
		if (v < 0) {
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
