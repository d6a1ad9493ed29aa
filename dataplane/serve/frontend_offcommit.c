/* OffsetCommit and OffsetFetch on the committed offsets kept by
 * frontend_offsets.c: a commit becomes one write of that file (answered
 * once durable), a fetch reads the table. Nothing is allocated per request:
 * the request tables are frontend_offsets.c's (frontend_offsets_pvt.h), a
 * commit's response arrays live in its slot's reservation.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "dataplane/serve/frontend_offsets_pvt.h"
#include "kafka/proto_group.h"

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

int16_t km_frontend_commit_part_err(struct km_frontend *fe, const char *topic,
				    int32_t partition, int32_t metadata_len)
{
	struct km_part *p = km_part_find(fe->table, topic, partition);

	if (p == NULL || p->internal)
		return KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	if (metadata_len > KM_GOREC_METADATA_MAX)
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
	for (uint32_t t = 0; t < q->n_topics; t++) {
		/* Kafka: Read on each topic, else TOPIC_AUTHORIZATION_FAILED
		 * for its partitions (the group's verdict first). */
		int16_t terr = gerr == KM_KERR_NONE &&
					       !km_frontend_allowed(
						       fc, KM_ACL_OP_READ,
						       KM_ACL_RES_TOPIC,
						       q->topics[t].name.s)
				       ? KM_KERR_TOPIC_AUTHORIZATION_FAILED
				       : gerr;

		for (uint32_t i = q->topics[t].first;
		     i < q->topics[t].first + q->topics[t].count; i++) {
			const struct km_offcommit_req_part *rp = &q->parts[i];
			int16_t e = terr ? terr
					 : km_frontend_commit_part_err(
						   fc->fe, q->topics[t].name.s,
						   rp->partition, rp->metadata.len);
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
	}
	return n;
}

/* The group's verdict on the commit: the coordinator's, once loaded. */
static int16_t commit_group_err(struct fe_conn *fc, const struct km_offcommit_req *q)
{
	int16_t e = km_frontend_offsets_ready(fc->fe);

	/* Kafka: Read on the group before anything about it. */
	if (!km_frontend_allowed(fc, KM_ACL_OP_READ, KM_ACL_RES_GROUP,
				 q->group_id.s))
		return KM_KERR_GROUP_AUTHORIZATION_FAILED;
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

	if (n > 0 && (rc = km_frontend_offsets_wr_new(fc->fe, km_goffsets_build_size(om->commits, n),
				  OW_COMMIT, &o)) < 0)
		return rc == -EAGAIN ? FE_WAIT
				     : km_frontend_conn_fail(fc, "OffsetCommit: %s",
						    km_strerror(rc));
	rc = km_frontend_slot_open(fc, h, resp + (uint32_t)commit_op_bytes(q), &slot);
	if (rc != 0) {
		if (o != NULL)
			km_frontend_offsets_wr_drop(om, o);
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
	if ((rc = km_frontend_offsets_wr_build(fc->fe, o, om->commits, n)) < 0 ||
	    (rc = km_frontend_offsets_wr_submit(fc->fe, o)) < 0) {
		km_frontend_offsets_wr_drop(om, o);
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
	struct fe_conn *fc;
	struct km_offfetch_resp *m;
	uint32_t cap;
	const struct km_goffsets *table;
	bool require_stable;
};

/* Kafka's answer for a partition an open transaction holds a commit of,
 * when stable offsets are required (OffsetFetch v7+, a read_committed
 * consumer): UNSTABLE_OFFSET_COMMIT, no offset; the client asks again. */
static bool unstable(const struct km_goffsets *t, bool require_stable,
		     const char *group, const char *topic, int32_t partition)
{
	return require_stable && km_goffsets_pending(t, group, topic, partition);
}

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
	bool u = unstable(a->table, a->require_stable, group, topic, partition);

	/* Kafka leaves out the topics the principal may not Describe. */
	if (m->n_parts == a->cap ||
	    !km_frontend_acl_sees(a->fc, KM_ACL_OP_DESCRIBE, KM_ACL_RES_TOPIC,
				  topic))
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
	fetch_part(&m->parts[m->n_parts++], partition, u ? NULL : o,
		   u ? KM_KERR_UNSTABLE_OFFSET_COMMIT : KM_KERR_NONE);
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

static void fetch_fill(struct fe_conn *fc, const struct km_offfetch_req *q,
		       struct km_offfetch_resp *m, int16_t err, int16_t version)
{
	struct km_frontend *fe = fc->fe;
	struct fetch_all a = { fc, m, m->parts_max, fe->go.table,
			       q->require_stable };

	if (q->all_topics) {
		if (err == KM_KERR_NONE)
			km_goffsets_each(fe->go.table, q->group_id.s, add_any, &a);
		return;
	}
	memcpy(m->topics, q->topics, q->n_topics * sizeof(*m->topics));
	m->n_topics = q->n_topics;
	m->n_parts = q->n_parts;
	for (uint32_t i = 0; i < q->n_topics; i++) {
		bool denied = err == KM_KERR_NONE &&
			      !km_frontend_allowed(fc, KM_ACL_OP_DESCRIBE,
						   KM_ACL_RES_TOPIC,
						   q->topics[i].name.s);

		for (uint32_t k = q->topics[i].first;
		     k < q->topics[i].first + q->topics[i].count; k++) {
			bool u = err == KM_KERR_NONE && !denied &&
				 unstable(fe->go.table, q->require_stable,
					  q->group_id.s, q->topics[i].name.s,
					  q->parts[k]);

			if (denied) {
				fetch_part(&m->parts[k], q->parts[k], NULL,
					   KM_KERR_TOPIC_AUTHORIZATION_FAILED);
				continue;
			}
			fetch_part(&m->parts[k], q->parts[k],
				   err || u ? NULL
					    : km_goffsets_get(fe->go.table,
							      q->group_id.s,
							      q->topics[i].name.s,
							      q->parts[k]),
				   u ? KM_KERR_UNSTABLE_OFFSET_COMMIT
				     : version < 2 ? err : KM_KERR_NONE);
		}
	}
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
	/* Kafka: Describe on the group, else GROUP_AUTHORIZATION_FAILED. */
	err = km_frontend_allowed(fc, KM_ACL_OP_DESCRIBE, KM_ACL_RES_GROUP,
				  q.group_id.s)
		      ? km_frontend_offsets_ready(fe)
		      : KM_KERR_GROUP_AUTHORIZATION_FAILED;
	fetch_fill(fc, &q, &m, err, h->api_version);
	m.error_code = h->api_version >= 2 ? err : KM_KERR_NONE;
	if ((rc = km_frontend_slot_open(fc, h, fetch_bound(&m), &slot)) == 0) {
		km_frontend_slot_begin(fc, slot, &w);
		km_offfetch_resp_encode(&w, h->api_version, &m);
		rc = km_frontend_slot_finish(fc, slot, &w, true);
	}
	return rc;
}
