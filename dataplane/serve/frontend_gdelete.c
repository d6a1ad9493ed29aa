/* DeleteGroups (kafka-consumer-groups --delete) and OffsetDelete
 * (--delete-offsets: the same tombstones for the partitions named, refused
 * per partition while the group has members). DeleteGroups has Kafka's
 * coordinator's answers: a group with members here (or joining) is NON_EMPTY_GROUP, one
 * with neither an entry nor committed offsets GROUP_ID_NOT_FOUND; any
 * other loses every committed offset - one tombstone each, all in one
 * write of __consumer_offsets-0, answered once durable (the table applies
 * them then, as OffsetCommit's) - and its entry in the coordinator.
 * Nothing is allocated per request: the tombstones go into the commit
 * table of frontend_offsets.c, the answer's results into the slot's
 * reservation, as an OffsetCommit's. */
#include <errno.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "dataplane/serve/frontend_offsets_pvt.h"
#include "kafka/proto_group.h"

/* Groups one request may name: kafka-consumer-groups sends those given
 * with --group (a longer request closes the connection, naming this). */
#define DELETE_GROUPS_MAX 16u

struct delete_op {
	struct fe_conn *fc;
	uint32_t slot;
	struct km_delgroups_resp m;
	bool wrote[DELETE_GROUPS_MAX]; /* its tombstones are in the write */
};

struct tombs {
	struct fe_omem *om;
	uint32_t n;
	bool full;
};

static void add_tomb(void *arg, const char *group, const char *topic,
		     int32_t partition, const struct km_goffset *o)
{
	struct tombs *t = arg;

	(void)o;
	if (t->n == t->om->commits_max) {
		t->full = true;
		return;
	}
	t->om->commits[t->n++] = (struct km_goffsets_commit){ group, topic, partition, NULL };
}

/* One group's answer; its tombstones appended to t when NONE. */
static int16_t verdict(struct km_frontend *fe, const char *group, struct tombs *t)
{
	struct km_group_description d;
	uint32_t before = t->n;
	int16_t e = km_frontend_offsets_ready(fe);

	if (e != KM_KERR_NONE)
		return e;
	if (km_frontend_groups_active(fe, group))
		return KM_KERR_NON_EMPTY_GROUP;
	km_goffsets_each(fe->go.table, group, add_tomb, t);
	if (t->full || km_goffsets_batch_bytes(t->om->commits, t->n) >
			       KM_GOFFSETS_BATCH_BYTES_MAX) {
		KM_WARN("frontend", "DeleteGroups of group %s: its %u committed "
			"offsets do not fit one write", group, t->n - before);
		t->n = before;
		t->full = false;
		return KM_KERR_UNKNOWN_SERVER_ERROR;
	}
	km_group_describe(fe->groups, group, &d, NULL, 0);
	if (t->n == before && d.state == KM_GROUP_DEAD)
		return KM_KERR_GROUP_ID_NOT_FOUND;
	return KM_KERR_NONE;
}

static void delete_respond(struct delete_op *op)
{
	struct fe_conn *fc = op->fc;
	struct km_wire_wr w;

	km_frontend_slot_begin(fc, op->slot, &w);
	km_delgroups_resp_encode(&w, fc->slots[op->slot].api_version, &op->m);
	km_frontend_slot_finish(fc, op->slot, &w, false);
}

static void on_deleted(void *arg, int rc)
{
	struct delete_op *op = arg;
	struct fe_conn *fc = op->fc;

	for (uint32_t i = 0; rc < 0 && i < op->m.n_results; i++)
		if (op->wrote[i])
			op->m.results[i].error_code = KM_KERR_COORDINATOR_NOT_AVAILABLE;
	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	if (fc->c != NULL && !fc->closing)
		delete_respond(op);
	km_frontend_conn_maybe_free(fc);
}

/* The op and its results, in the slot past the response's room. */
static struct delete_op *op_place(struct fe_conn *fc, uint32_t slot, uint32_t resp,
				  const struct km_delgroups_req *q, const int16_t *errs)
{
	struct fe_slot *s = &fc->slots[slot];
	struct delete_op *op = (struct delete_op *)(fc->buf + s->off + resp);
	struct km_delgroups_result *res = (struct km_delgroups_result *)(op + 1);

	s->data_off = resp;
	*op = (struct delete_op){ .fc = fc, .slot = slot };
	op->m = (struct km_delgroups_resp){ .results = res,
		.results_max = q->n_groups, .n_results = q->n_groups };
	for (uint32_t i = 0; i < q->n_groups; i++) {
		res[i] = (struct km_delgroups_result){ q->groups[i], errs[i] };
		op->wrote[i] = errs[i] == KM_KERR_NONE;
	}
	return op;
}

/* Room for the write first, then the slot (as OffsetCommit): a full ring
 * or connection leaves the request queued with nothing taken. The entries
 * go once the write is under way. */
static int delete_start(struct fe_conn *fc, const struct km_reqhdr *h,
			const struct km_delgroups_req *q, const int16_t *errs,
			uint32_t n)
{
	struct fe_omem *om = fc->fe->go.mem;
	uint32_t resp = 32 + q->n_groups * (KM_WIRE_NAME_BYTES_MAX + 8);
	struct fe_owrite *o = NULL;
	struct delete_op *op;
	uint32_t slot;
	int rc;

	resp = (resp + 7u) & ~7u;
	if (n > 0 && (rc = km_frontend_offsets_wr_new(fc->fe, km_goffsets_build_size(om->commits, n),
				  OW_COMMIT, &o)) < 0)
		return rc == -EAGAIN ? FE_WAIT
				     : km_frontend_conn_fail(fc, "DeleteGroups: %s",
						    km_strerror(rc));
	rc = km_frontend_slot_open(fc, h, resp + (uint32_t)sizeof(*op) +
				   q->n_groups * (uint32_t)sizeof(struct km_delgroups_result),
				   &slot);
	if (rc != 0) {
		if (o != NULL)
			km_frontend_offsets_wr_drop(om, o);
		return rc;
	}
	op = op_place(fc, slot, resp, q, errs);
	fc->pending_ops++;
	if (o == NULL) {
		on_deleted(op, 0); /* nothing to write: answer now */
		return 0;
	}
	o->fn = on_deleted;
	o->arg = op;
	if ((rc = km_frontend_offsets_wr_build(fc->fe, o, om->commits, n)) < 0 ||
	    (rc = km_frontend_offsets_wr_submit(fc->fe, o)) < 0) {
		km_frontend_offsets_wr_drop(om, o);
		fc->pending_ops--;
		return km_frontend_conn_fail(fc, "DeleteGroups: %s", km_strerror(rc));
	}
	for (uint32_t i = 0; i < q->n_groups; i++)
		if (errs[i] == KM_KERR_NONE)
			km_group_delete(fc->fe->groups, q->groups[i].s);
	return 0;
}

int km_frontend_handle_delete_groups(struct fe_conn *fc, const struct km_reqhdr *h,
				     struct km_wire_rd *r)
{
	struct km_wire_name names[DELETE_GROUPS_MAX];
	struct km_delgroups_req q = { .groups = names, .groups_max = DELETE_GROUPS_MAX };
	struct tombs t = { .om = fc->fe->go.mem };
	int16_t errs[DELETE_GROUPS_MAX];
	int rc = km_delgroups_req_decode(r, h->api_version, &q);

	if (rc == KM_EWIRECAPACITY)
		return km_frontend_conn_fail(fc, "DeleteGroups v%d names more than %u "
				    "groups", h->api_version, DELETE_GROUPS_MAX);
	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed DeleteGroups v%d request: %s",
				    h->api_version, km_strerror(rc));
	/* Kafka: Delete on each group, else GROUP_AUTHORIZATION_FAILED. */
	for (uint32_t i = 0; i < q.n_groups; i++)
		errs[i] = km_frontend_allowed(fc, KM_ACL_OP_DELETE,
					      KM_ACL_RES_GROUP, names[i].s)
				  ? verdict(fc->fe, names[i].s, &t)
				  : KM_KERR_GROUP_AUTHORIZATION_FAILED;
	return delete_start(fc, h, &q, errs, t.n);
}

/* ---- OffsetDelete ------------------------------------------------------------ */

/* An OffsetDelete whose tombstones are being written: it and its response
 * arrays live in the slot's reservation, after the response's room. */
struct odel_op {
	struct fe_conn *fc;
	uint32_t slot;
	struct km_offdelete_resp m;
};

static void odel_respond(struct odel_op *op)
{
	struct fe_conn *fc = op->fc;
	struct km_wire_wr w;

	km_frontend_slot_begin(fc, op->slot, &w);
	km_offdelete_resp_encode(&w, fc->slots[op->slot].api_version, &op->m);
	km_frontend_slot_finish(fc, op->slot, &w, false);
}

static void on_odeleted(void *arg, int rc)
{
	struct odel_op *op = arg;
	struct fe_conn *fc = op->fc;

	if (rc < 0)
		op->m.error_code = KM_KERR_COORDINATOR_NOT_AVAILABLE;
	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	if (fc->c != NULL && !fc->closing)
		odel_respond(op);
	km_frontend_conn_maybe_free(fc);
}

static void count_only(void *arg, const char *group, const char *topic,
		       int32_t partition, const struct km_goffset *o)
{
	(void)arg, (void)group, (void)topic, (void)partition, (void)o;
}

/* The group's verdict (Kafka's top-level error), and each partition's
 * into errs; the tombstones of the committed ones into the commit table.
 * A group with members here may be reading any of its partitions: every
 * partition is GROUP_SUBSCRIBED_TO_TOPIC (Kafka looks at the members'
 * subscriptions). @return the top-level error; *n: tombstones. */
static int16_t odel_verdict(struct km_frontend *fe, const struct km_offdelete_req *q,
			    int16_t *errs, uint32_t *n)
{
	struct fe_omem *om = fe->go.mem;
	struct km_group_description d;
	int16_t e = km_frontend_offsets_ready(fe);
	bool active;

	*n = 0;
	if (e != KM_KERR_NONE)
		return e;
	km_group_describe(fe->groups, q->group_id.s, &d, NULL, 0);
	if (d.state == KM_GROUP_DEAD && km_goffsets_each(fe->go.table, q->group_id.s,
							 count_only, NULL) == 0)
		return KM_KERR_GROUP_ID_NOT_FOUND;
	active = km_frontend_groups_active(fe, q->group_id.s);
	for (uint32_t t = 0; t < q->n_topics; t++)
		for (uint32_t i = q->topics[t].first;
		     i < q->topics[t].first + q->topics[t].count; i++) {
			const char *topic = q->topics[t].name.s;

			errs[i] = active ? KM_KERR_GROUP_SUBSCRIBED_TO_TOPIC : KM_KERR_NONE;
			if (active || *n == om->commits_max ||
			    km_goffsets_get(fe->go.table, q->group_id.s, topic,
					    q->parts[i]) == NULL)
				continue;
			om->commits[(*n)++] = (struct km_goffsets_commit){
				q->group_id.s, topic, q->parts[i], NULL };
		}
	return KM_KERR_NONE;
}

/* The op and its arrays, in the slot past the response's room. */
static struct odel_op *odel_place(struct fe_conn *fc, uint32_t slot, uint32_t resp,
				  const struct km_offdelete_req *q, const int16_t *errs,
				  int16_t top)
{
	struct fe_slot *s = &fc->slots[slot];
	struct odel_op *op = (struct odel_op *)(fc->buf + s->off + resp);
	struct km_proto_topic *topics = (struct km_proto_topic *)(op + 1);
	struct km_offcommit_resp_part *parts =
		(struct km_offcommit_resp_part *)(topics + q->n_topics);

	s->data_off = resp;
	memcpy(topics, q->topics, q->n_topics * sizeof(*topics));
	*op = (struct odel_op){ .fc = fc, .slot = slot };
	op->m = (struct km_offdelete_resp){ .error_code = top, .topics = topics,
		.topics_max = q->n_topics, .n_topics = top ? 0 : q->n_topics,
		.parts = parts, .parts_max = q->n_parts, .n_parts = top ? 0 : q->n_parts };
	for (uint32_t i = 0; i < q->n_parts; i++)
		parts[i] = (struct km_offcommit_resp_part){ q->parts[i], errs[i] };
	return op;
}

static int odel_start(struct fe_conn *fc, const struct km_reqhdr *h,
		      const struct km_offdelete_req *q, const int16_t *errs,
		      int16_t top, uint32_t n)
{
	struct fe_omem *om = fc->fe->go.mem;
	uint32_t resp = 32 + q->n_topics * (KM_WIRE_NAME_BYTES_MAX + 8) + q->n_parts * 8;
	struct fe_owrite *o = NULL;
	struct odel_op *op;
	uint32_t slot;
	int rc;

	resp = (resp + 7u) & ~7u;
	if (n > 0 && (rc = km_frontend_offsets_wr_new(fc->fe, km_goffsets_build_size(om->commits, n),
				  OW_COMMIT, &o)) < 0)
		return rc == -EAGAIN ? FE_WAIT
				     : km_frontend_conn_fail(fc, "OffsetDelete: %s",
						    km_strerror(rc));
	rc = km_frontend_slot_open(fc, h, resp + (uint32_t)(sizeof(*op) +
				   q->n_topics * sizeof(struct km_proto_topic) +
				   q->n_parts * sizeof(struct km_offcommit_resp_part)), &slot);
	if (rc != 0) {
		if (o != NULL)
			km_frontend_offsets_wr_drop(om, o);
		return rc;
	}
	op = odel_place(fc, slot, resp, q, errs, top);
	fc->pending_ops++;
	if (o == NULL) {
		on_odeleted(op, 0); /* nothing to write: answer now */
		return 0;
	}
	o->fn = on_odeleted;
	o->arg = op;
	if ((rc = km_frontend_offsets_wr_build(fc->fe, o, om->commits, n)) < 0 ||
	    (rc = km_frontend_offsets_wr_submit(fc->fe, o)) < 0) {
		km_frontend_offsets_wr_drop(om, o);
		fc->pending_ops--;
		return km_frontend_conn_fail(fc, "OffsetDelete: %s", km_strerror(rc));
	}
	return 0;
}

int km_frontend_handle_offset_delete(struct fe_conn *fc, const struct km_reqhdr *h,
				     struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct fe_omem *om = fe->go.mem;
	struct km_offdelete_req q = { .topics = fe->lo_topics,
		.topics_max = fe->topics_max, .parts = om->of_parts,
		.parts_max = fe->parts_max };
	uint32_t n;
	int16_t top;
	int rc = km_offdelete_req_decode(r, h->api_version, &q);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed OffsetDelete v%d request: %s",
				    h->api_version, km_strerror(rc));
	/* the per-partition codes go where OffsetCommit keeps its own */
	/* Kafka: Delete on the group first (its whole answer). */
	if (!km_frontend_allowed(fc, KM_ACL_OP_DELETE, KM_ACL_RES_GROUP,
				 q.group_id.s)) {
		for (uint32_t i = 0; i < q.n_parts; i++)
			om->oc_errs[i] = KM_KERR_NONE;
		return odel_start(fc, h, &q, om->oc_errs,
				  KM_KERR_GROUP_AUTHORIZATION_FAILED, 0);
	}
	top = odel_verdict(fe, &q, om->oc_errs, &n);
	if (n > 0 && km_goffsets_batch_bytes(om->commits, n) > KM_GOFFSETS_BATCH_BYTES_MAX) {
		KM_WARN("frontend", "OffsetDelete of group %s: %u tombstones do not "
			"fit one write", q.group_id.s, n);
		top = KM_KERR_UNKNOWN_SERVER_ERROR;
		n = 0;
	}
	return odel_start(fc, h, &q, om->oc_errs, top, top ? 0 : n);
}
