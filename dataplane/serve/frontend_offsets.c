/* The group coordinator's committed offsets (issue 7): the table
 * (dataplane/group/goffsets.h) and its writes into `__consumer_offsets-0`.
 *
 * Every write, an OffsetCommit, an offset synced from the source, or
 * compaction's copy, is one batch given to ops->produce with acks=-1, as a
 * client's Produce would be (the partition's owner appends it, wherever it
 * runs); the table changes only once the batch is durable, so OffsetFetch
 * never shows a commit a crash could lose. Outcomes of one partition come
 * back in append order, so the table applies commits in log order, which
 * is also the order a restart replays them in.
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
#include "common/log.h"
#include "dataplane/serve/frontend_pvt.h"
#include "kafka/proto_group.h"

/* Compact when this many records were appended since the last compaction,
 * and more than COMPACT_RATIO times the live commits. */
#define COMPACT_MIN_RECORDS 10000u
#define COMPACT_RATIO 4u
#define COMPACT_BATCH_RECORDS 500u

/* One write in flight: its commits are applied to the table once durable. */
struct fe_owrite {
	struct km_frontend *fe;
	fe_owrite_fn done;
	void *arg;
	uint32_t n;
	struct km_goffsets_commit *c;	/* into the allocation below */
	struct km_gorec_value *v;
	/* compaction: the batch index (0 = first) and how many */
	int32_t compact_index;
	int32_t compact_total;
};

int fe_offsets_init(struct km_frontend *fe)
{
	fe->go.part = km_part_find(fe->table, KM_GOFFSETS_TOPIC, 0);
	return km_goffsets_create(&fe->go.table);
}

void fe_offsets_free(struct km_frontend *fe)
{
	km_goffsets_destroy(fe->go.table);
	fe->go.table = NULL;
}

/* The table is rebuilt from the partition the first time it is needed (its
 * owner may open the log after the front-end starts).
 * @return KM_KERR_NONE, or COORDINATOR_LOAD_IN_PROGRESS while the log is not
 *         open, COORDINATOR_NOT_AVAILABLE if it cannot be read. */
int16_t fe_offsets_ready(struct km_frontend *fe)
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

/* A private copy of the commits: names and metadata outlive the request. */
static struct fe_owrite *owrite_new(struct km_frontend *fe,
				    const struct km_goffsets_commit *c,
				    uint32_t n)
{
	size_t bytes = sizeof(struct fe_owrite) + n * (sizeof(*c) + sizeof(struct km_gorec_value));
	struct fe_owrite *o;
	char *strs;

	for (uint32_t i = 0; i < n; i++)
		bytes += strlen(c[i].group) + strlen(c[i].topic) + 2 +
			 (c[i].value ? c[i].value->metadata_len + 1u : 0u);
	if ((o = calloc(1, bytes)) == NULL)
		return NULL;
	o->fe = fe;
	o->n = n;
	o->c = (struct km_goffsets_commit *)(o + 1);
	o->v = (struct km_gorec_value *)(o->c + n);
	strs = (char *)(o->v + n);
	for (uint32_t i = 0; i < n; i++) {
		o->c[i] = c[i];
		o->c[i].group = strcpy(strs, c[i].group);
		strs += strlen(strs) + 1;
		o->c[i].topic = strcpy(strs, c[i].topic);
		strs += strlen(strs) + 1;
		if (c[i].value == NULL)
			continue;
		o->v[i] = *c[i].value;
		memcpy(strs, c[i].value->metadata ? c[i].value->metadata : "",
		       c[i].value->metadata_len);
		o->v[i].metadata = strs;
		strs += c[i].value->metadata_len + 1u;
		o->c[i].value = &o->v[i];
	}
	return o;
}

static void maybe_compact(struct km_frontend *fe);

static void on_written(void *arg, const struct km_part_produced *res)
{
	struct fe_owrite *o = arg;
	struct km_frontend *fe = o->fe;
	int rc = res->err;

	for (uint32_t i = 0; rc == 0 && o->compact_total == 0 && i < o->n; i++)
		rc = km_goffsets_put(fe->go.table, o->c[i].group, o->c[i].topic,
				     o->c[i].partition, o->c[i].value);
	if (o->compact_total > 0) {
		if (o->compact_index == 0)
			fe->go.compact_from = rc == 0 ? res->base_offset : -1;
		if (rc < 0)
			fe->go.compact_from = -1;
		if (o->compact_index + 1 == o->compact_total) {
			fe->go.compacting = false;
			if (fe->go.compact_from > 0)
				atomic_store_explicit(&fe->go.part->retain_below,
						      fe->go.compact_from,
						      memory_order_release);
			KM_INFO("groups", "%s-0: compacted: %u live commits "
				"copied from offset %" PRId64 "%s",
				KM_GOFFSETS_TOPIC, km_goffsets_count(fe->go.table),
				fe->go.compact_from,
				fe->go.compact_from > 0 ? "" : " (failed: kept all)");
		}
	} else if (rc == 0) {
		fe->go.since_compact += o->n;
	}
	if (rc < 0)
		KM_WARN("groups", "%s-0: writing %u commits: %s",
			KM_GOFFSETS_TOPIC, o->n, km_strerror(rc));
	fe->go.writes--;
	if (o->done != NULL)
		o->done(o->arg, rc);
	free(o);
	maybe_compact(fe);
}

static int submit(struct km_frontend *fe, struct fe_owrite *o,
		  const void *batch, uint32_t len)
{
	struct iovec iov = { (void *)batch, len };
	struct km_chain ch = { &iov, 1 };
	int rc = fe->ops->produce(fe->ops->ctx, fe->go.part, &ch,
				  km_chain_start(&ch), len, -1, on_written, o);

	if (rc == 0)
		fe->go.writes++;
	return rc;
}

int fe_offsets_write(struct km_frontend *fe, const struct km_goffsets_commit *c,
		     uint32_t n, fe_owrite_fn done, void *arg)
{
	size_t cap = km_goffsets_build_size(c, n);
	struct fe_owrite *o = owrite_new(fe, c, n);
	uint8_t *buf = malloc(cap);
	int rc = o && buf ? 0 : -ENOMEM;

	if (rc == 0)
		rc = km_goffsets_build(buf, cap, o->c, n, km_clock_wall_ms());
	if (rc > 0) {
		o->done = done;
		o->arg = arg;
		rc = submit(fe, o, buf, (uint32_t)rc);
	}
	free(buf); /* ops->produce copies the records */
	if (rc < 0)
		free(o);
	return rc < 0 ? rc : 0;
}

/* Every live commit again, COMPACT_BATCH_RECORDS per batch. */
static void compact(struct km_frontend *fe)
{
	uint8_t *all;
	size_t len, at = 0;
	int total = km_goffsets_build_all(fe->go.table, COMPACT_BATCH_RECORDS,
					  km_clock_wall_ms(), &all, &len);

	if (total <= 0)
		return;
	fe->go.compacting = true;
	fe->go.since_compact = 0;
	for (int i = 0; i < total; i++) {
		/* baseOffset int64, then batchLength int32 (the rest). */
		uint32_t blen = 12u + km_load_be32(all + at + 8);
		struct fe_owrite *o = calloc(1, sizeof(*o));

		if (o != NULL) {
			*o = (struct fe_owrite){ .fe = fe, .compact_index = i,
						 .compact_total = total };
		}
		if (o == NULL || submit(fe, o, all + at, blen) < 0) {
			/* The batches already given still complete; the
			 * last one's outcome never comes: give up this time. */
			free(o);
			fe->go.compacting = false;
			KM_WARN("groups", "%s-0: compaction not submitted",
				KM_GOFFSETS_TOPIC);
			break;
		}
		at += blen;
	}
	free(all);
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

struct sync_op {
	km_frontend_sync_fn done;
	void *arg;
};

static void on_synced(void *arg, int rc)
{
	struct sync_op *op = arg;

	op->done(op->arg, rc);
	free(op);
}

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

/* The commits that change something; *n of them. */
static struct km_goffsets_commit *sync_commits(struct km_frontend *fe,
					       struct km_group_sync *s,
					       struct km_gorec_value *vals,
					       uint32_t *n)
{
	struct km_goffsets_commit *c = calloc(s->n_parts ? s->n_parts : 1,
					      sizeof(*c));

	*n = 0;
	for (uint32_t i = 0; c != NULL && i < s->n_parts; i++) {
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
		vals[*n] = (struct km_gorec_value){ v, sp->leader_epoch,
						    km_clock_wall_ms(), "", 0 };
		c[*n] = (struct km_goffsets_commit){ s->group, sp->topic,
						     sp->partition, &vals[*n] };
		(*n)++;
	}
	return c;
}

int km_frontend_group_sync(struct km_frontend *fe, struct km_group_sync *s,
			   km_frontend_sync_fn done, void *arg)
{
	struct km_gorec_value *vals;
	struct km_goffsets_commit *c;
	struct sync_op *op;
	uint32_t n;
	int16_t kerr = fe_offsets_ready(fe);
	int rc;

	if (kerr != KM_KERR_NONE)
		return kerr == KM_KERR_COORDINATOR_LOAD_IN_PROGRESS
			       ? -EAGAIN : KM_EPARTOFFLINE;
	s->active = fe_groups_active(fe, s->group);
	if (s->active) {
		for (uint32_t i = 0; i < s->n_parts; i++)
			s->parts[i].stored = s->parts[i].previous = -1;
		done(arg, 0);
		return 0;
	}
	vals = calloc(s->n_parts ? s->n_parts : 1, sizeof(*vals));
	c = vals ? sync_commits(fe, s, vals, &n) : NULL;
	op = c ? malloc(sizeof(*op)) : NULL;
	rc = op ? 0 : -ENOMEM;
	if (rc == 0 && n == 0) {
		free(op);
		done(arg, 0);
	} else if (rc == 0) {
		*op = (struct sync_op){ done, arg };
		if ((rc = fe_offsets_write(fe, c, n, on_synced, op)) < 0)
			free(op);
	}
	free(c);
	free(vals);
	return rc;
}

/* ---- OffsetCommit ------------------------------------------------------------ */

/* An OffsetCommit whose batch is being written: its response arrays. */
struct commit_op {
	struct fe_conn *fc;
	uint32_t slot;
	struct km_offcommit_resp m;
	struct km_proto_topic *topics;
	struct km_offcommit_resp_part *parts;
	int16_t *wrote;		/* per part: 1 if in the batch */
};

static void commit_respond(struct commit_op *op)
{
	struct fe_conn *fc = op->fc;
	struct km_wire_wr w;

	fe_slot_begin(fc, op->slot, &w);
	km_offcommit_resp_encode(&w, fc->slots[op->slot].api_version, &op->m);
	fe_slot_finish(fc, op->slot, &w, false);
}

static void commit_op_free(struct commit_op *op)
{
	free(op->topics);
	free(op->parts);
	free(op->wrote);
	free(op);
}

static void on_committed(void *arg, int rc)
{
	struct commit_op *op = arg;
	struct fe_conn *fc = op->fc;

	for (uint32_t i = 0; rc < 0 && i < op->m.n_parts; i++)
		if (op->wrote[i])
			op->parts[i].error_code = KM_KERR_COORDINATOR_NOT_AVAILABLE;
	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	if (fc->c != NULL && !fc->closing)
		commit_respond(op);
	commit_op_free(op);
	fe_conn_maybe_free(fc);
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

static struct commit_op *commit_op_new(struct fe_conn *fc,
				       const struct km_offcommit_req *q)
{
	struct commit_op *op = calloc(1, sizeof(*op));
	uint32_t nt = q->n_topics ? q->n_topics : 1, np = q->n_parts ? q->n_parts : 1;

	if (op == NULL)
		return NULL;
	op->fc = fc;
	op->topics = calloc(nt, sizeof(*op->topics));
	op->parts = calloc(np, sizeof(*op->parts));
	op->wrote = calloc(np, sizeof(*op->wrote));
	if (!op->topics || !op->parts || !op->wrote) {
		commit_op_free(op);
		return NULL;
	}
	memcpy(op->topics, q->topics, q->n_topics * sizeof(*op->topics));
	op->m = (struct km_offcommit_resp){ .topics = op->topics,
		.topics_max = q->n_topics, .n_topics = q->n_topics,
		.parts = op->parts, .parts_max = q->n_parts, .n_parts = q->n_parts };
	return op;
}

/* The commits of the partitions that pass, with their metadata copied. */
static uint32_t commit_collect(struct fe_conn *fc, struct km_wire_rd *r,
			       const struct km_offcommit_req *q, int16_t gerr,
			       struct commit_op *op, struct km_goffsets_commit *c,
			       struct km_gorec_value *v, char *md)
{
	uint32_t n = 0;

	for (uint32_t t = 0; t < q->n_topics; t++)
		for (uint32_t i = q->topics[t].first;
		     i < q->topics[t].first + q->topics[t].count; i++) {
			const struct km_offcommit_req_part *rp = &q->parts[i];
			int16_t e = gerr ? gerr : commit_part_err(fc->fe, q->topics[t].name.s, rp);
			uint16_t ml = rp->metadata.len > 0 ? (uint16_t)rp->metadata.len : 0;

			op->parts[i] = (struct km_offcommit_resp_part){ rp->partition, e };
			if (e != KM_KERR_NONE)
				continue;
			if (ml)
				km_wire_span_copy(r->chain, &rp->metadata.span, md, ml);
			v[n] = (struct km_gorec_value){ rp->committed_offset,
				rp->committed_leader_epoch, 0, md, ml };
			md += ml;
			c[n] = (struct km_goffsets_commit){ q->group_id.s,
				q->topics[t].name.s, rp->partition, &v[n] };
			n++;
			op->wrote[i] = 1;
		}
	return n;
}

/* The group's verdict on the commit: the coordinator's, once loaded. */
static int16_t commit_group_err(struct fe_conn *fc, const struct km_offcommit_req *q)
{
	int16_t e = fe_offsets_ready(fc->fe);

	if (e != KM_KERR_NONE)
		return e;
	return km_group_commit_check(fc->fe->groups, q->group_id.s,
				     q->member_id.s,
				     q->group_instance_id.len < 0 ? NULL
								 : q->group_instance_id.s,
				     q->generation_id, fe_now_ms());
}

static int commit_submit(struct fe_conn *fc, struct km_wire_rd *r,
			 const struct km_offcommit_req *q, struct commit_op *op)
{
	uint32_t np = q->n_parts ? q->n_parts : 1;
	struct km_goffsets_commit *c = calloc(np, sizeof(*c));
	struct km_gorec_value *v = calloc(np, sizeof(*v));
	char *md = malloc((size_t)np * KM_GOREC_METADATA_MAX);
	uint32_t n = 0;
	int rc = c && v && md ? 0 : -ENOMEM;

	if (rc == 0)
		n = commit_collect(fc, r, q, commit_group_err(fc, q), op, c, v, md);
	fc->pending_ops++;
	if (rc == 0 && n > 0)
		rc = fe_offsets_write(fc->fe, c, n, on_committed, op);
	else if (rc == 0)
		on_committed(op, 0); /* nothing to write: answer now */
	if (rc < 0)
		fc->pending_ops--;
	free(c);
	free(v);
	free(md);
	return rc;
}

int fe_handle_offset_commit(struct fe_conn *fc, const struct km_reqhdr *h,
			    struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_offcommit_req q = { .topics = fe->lo_topics,
		.topics_max = fe->topics_max, .parts_max = fe->parts_max };
	struct commit_op *op;
	uint32_t slot;
	int rc;

	q.parts = calloc(fe->parts_max, sizeof(*q.parts));
	if (q.parts == NULL)
		return fe_conn_fail(fc, "OffsetCommit: out of memory");
	rc = km_offcommit_req_decode(r, h->api_version, &q);
	if (rc < 0) {
		free(q.parts);
		return fe_conn_fail(fc, "malformed OffsetCommit v%d request: %s",
				    h->api_version, km_strerror(rc));
	}
	rc = fe_slot_open(fc, h, 32 + q.n_topics * (KM_WIRE_NAME_BYTES_MAX + 8) +
				 q.n_parts * 8, &slot);
	op = rc == 0 ? commit_op_new(fc, &q) : NULL;
	if (rc == 0 && op == NULL)
		rc = fe_conn_fail(fc, "OffsetCommit: out of memory");
	if (op != NULL) {
		op->slot = slot;
		if ((rc = commit_submit(fc, r, &q, op)) < 0) {
			commit_op_free(op);
			rc = fe_conn_fail(fc, "OffsetCommit: %s", km_strerror(rc));
		}
	}
	free(q.parts);
	return rc;
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

int fe_handle_offset_fetch(struct fe_conn *fc, const struct km_reqhdr *h,
			   struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	int32_t *qparts = calloc(fe->parts_max, sizeof(*qparts));
	struct km_proto_topic *rtopics = calloc(fe->topics_max, sizeof(*rtopics));
	struct km_offfetch_resp_part *rparts = calloc(fe->parts_max, sizeof(*rparts));
	struct km_offfetch_req q = { .topics = fe->lo_topics, .topics_max = fe->topics_max,
				     .parts = qparts, .parts_max = fe->parts_max };
	struct km_offfetch_resp m = { .topics = rtopics, .topics_max = fe->topics_max,
				      .parts = rparts, .parts_max = fe->parts_max };
	struct km_wire_wr w;
	uint32_t slot;
	int16_t err;
	int rc = qparts && rtopics && rparts
			 ? km_offfetch_req_decode(r, h->api_version, &q) : -ENOMEM;

	if (rc < 0) {
		rc = fe_conn_fail(fc, "OffsetFetch v%d: %s", h->api_version,
				  km_strerror(rc));
		goto out;
	}
	err = fe_offsets_ready(fe);
	fetch_fill(fe, &q, &m, err, h->api_version);
	m.error_code = h->api_version >= 2 ? err : KM_KERR_NONE;
	if ((rc = fe_slot_open(fc, h, fetch_bound(&m), &slot)) == 0) {
		fe_slot_begin(fc, slot, &w);
		km_offfetch_resp_encode(&w, h->api_version, &m);
		rc = fe_slot_finish(fc, slot, &w, true);
	}
out:
	free(qparts);
	free(rtopics);
	free(rparts);
	return rc;
}
