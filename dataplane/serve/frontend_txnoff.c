/* A transaction's consumer offsets (issue 20, phase 2b): AddOffsetsToTxn
 * and TxnOffsetCommit, Kafka's sendOffsetsToTransaction.
 *
 * AddOffsetsToTxn adds the group's offsets partition, `__consumer_offsets-0`
 * (the only one here: every group maps to it), to the producer's
 * transaction, as Kafka's KafkaApis does with partitionFor(groupId); its
 * COMMIT/ABORT marker is then written there with the others (frontend_txn.c
 * hands that one marker to km_frontend_txnoff_marker).
 *
 * TxnOffsetCommit checks, in Kafka's order, the group id, the coordinator's
 * load, the transaction (km_txncoord_verify: the partition must have been
 * added) and the member (km_group_txn_commit_check: ILLEGAL_GENERATION,
 * UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID), then writes the offsets as one
 * TRANSACTIONAL batch of the producer's id and epoch through the committed
 * offsets' write ring (frontend_offsets.c), answered once durable. Its
 * commits are pending in the table (km_goffsets_apply_batch): OffsetFetch
 * does not show them, and answers UNSTABLE_OFFSET_COMMIT for them when
 * asked for stable offsets (v7+), until the COMMIT marker is durable on
 * the partition (km_goffsets_end_txn from the marker's outcome); an ABORT
 * drops them. A replay of the partition applies the same batch and marker
 * in the same order, so a restart rebuilds the same table.
 *
 * Versions: AddOffsetsToTxn and TxnOffsetCommit up to 4, the last before
 * transaction.version 2 (v5 adds the partition implicitly), which is what
 * Kafka 4.x's Java producer sends to a broker without that feature.
 *
 * Memory: the request's partition table and the marker contexts, at init.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "dataplane/group/group.h"
#include "dataplane/group/txncoord.h"
#include "dataplane/serve/frontend_offsets_pvt.h"
#include "kafka/proto_txn.h"

/* Markers on the offsets partition in flight: one per transaction whose
 * markers are being written (frontend_txn.c's TXN_JOBS). */
#define TXNOFF_MARKERS 64u

struct fe_txnoff_marker {
	bool used;
	struct km_frontend *fe;
	int64_t pid;
	bool commit;
	km_part_produced_fn done;
	void *arg;
};

struct fe_txnoff {
	struct km_txncommit_part *parts;	/* parts_max */
	struct fe_txnoff_marker markers[TXNOFF_MARKERS];
};

int km_frontend_txnoff_init(struct km_frontend *fe)
{
	struct fe_txnoff *x = calloc(1, sizeof(*x));

	if (x == NULL)
		return -ENOMEM;
	x->parts = calloc(fe->parts_max, sizeof(*x->parts));
	if (x->parts == NULL) {
		free(x);
		return -ENOMEM;
	}
	fe->txnoff = x;
	return 0;
}

void km_frontend_txnoff_free(struct km_frontend *fe)
{
	if (fe->txnoff == NULL)
		return;
	free(fe->txnoff->parts);
	free(fe->txnoff);
	fe->txnoff = NULL;
}

/* PRODUCER_FENCED arrived with v2 of these APIs (KafkaApis maps it the
 * same way as frontend_txn.c does). */
static int16_t fenced_for(int16_t version, int16_t err)
{
	return err == KM_KERR_PRODUCER_FENCED && version < 2
		       ? KM_KERR_INVALID_PRODUCER_EPOCH : err;
}

/* ---- the marker on the offsets partition ---- */

static void on_go_marker(void *arg, const struct km_part_produced *res)
{
	struct fe_txnoff_marker *m = arg;
	struct km_frontend *fe = m->fe;
	km_part_produced_fn done = m->done;
	void *done_arg = m->arg;
	int n;

	/* An unloaded table reads the marker from the log when it loads. */
	if (res->err == 0 && fe->go.loaded && fe->go.load_err == 0 &&
	    (n = km_goffsets_end_txn(fe->go.table, m->pid, m->commit)) != 0)
		KM_INFO("groups", "%s-0: producer %lld's transaction %s: %d "
			"pending offsets %s", KM_GOFFSETS_TOPIC,
			(long long)m->pid, m->commit ? "committed" : "aborted",
			n, n < 0 ? "not applied" :
			       m->commit ? "committed" : "dropped");
	m->used = false;
	done(done_arg, res);
}

int km_frontend_txnoff_marker(struct km_frontend *fe, struct km_part *p,
			      int64_t pid, int16_t epoch, bool commit,
			      km_part_produced_fn done, void *arg)
{
	struct fe_txnoff_marker *m = NULL;
	int rc;

	for (uint32_t i = 0; i < TXNOFF_MARKERS && m == NULL; i++)
		if (!fe->txnoff->markers[i].used)
			m = &fe->txnoff->markers[i];
	if (m == NULL)
		return -ENOBUFS; /* more than TXN_JOBS: cannot be */
	*m = (struct fe_txnoff_marker){ true, fe, pid, commit, done, arg };
	rc = fe->ops->write_marker(fe->ops->ctx, p, pid, epoch, commit,
				   on_go_marker, m);
	if (rc < 0)
		m->used = false;
	return rc;
}

/* ---- AddOffsetsToTxn ---- */

int km_frontend_handle_addoffsets(struct fe_conn *fc, const struct km_reqhdr *h,
				  struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_addoffsets_req q;
	struct km_txn_resp m = { 0, 0, -1, -1 };
	struct km_wire_wr w;
	uint32_t slot;
	int rc = km_addoffsets_req_decode(r, h->api_version, &q);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed AddOffsetsToTxn v%d "
					     "request: %s", h->api_version,
					     km_strerror(rc));
	/* Kafka: Write on the transactional id, then Read on the group. */
	if (!km_frontend_allowed(fc, KM_ACL_OP_WRITE, KM_ACL_RES_TXNID,
				 q.transactional_id.s))
		m.error_code = KM_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	else if (!km_frontend_allowed(fc, KM_ACL_OP_READ, KM_ACL_RES_GROUP,
				      q.group_id.s))
		m.error_code = KM_KERR_GROUP_AUTHORIZATION_FAILED;
	else if (!km_frontend_txn_enabled(fe) || fe->go.part == NULL)
		m.error_code = KM_KERR_NOT_COORDINATOR;
	else if ((m.error_code = km_frontend_txnlog_ready(fe)) == 0)
		/* The wall clock, as every start the transaction log keeps
		 * (its timeout is judged against it). */
		m.error_code = fenced_for(h->api_version,
			km_txncoord_add_partition(
				km_frontend_txn_coord(fe),
				q.transactional_id.s, q.producer_id,
				q.producer_epoch, KM_GOFFSETS_TOPIC, 0,
				km_clock_wall_ms()));
	if ((rc = km_frontend_slot_open(fc, h, 32, &slot)) != 0)
		return rc;
	km_frontend_slot_begin(fc, slot, &w);
	km_txn_resp_encode(&w, KM_API_ADD_OFFSETS_TO_TXN, h->api_version, &m);
	/* The offsets partition joins the transaction's record, durable
	 * before the answer as AddPartitionsToTxn's: a restart must end the
	 * pending offsets with the transaction's marker. */
	return m.error_code != 0
		       ? km_frontend_slot_finish(fc, slot, &w, true)
		       : km_frontend_txnlog_answer(fc, slot, &w,
						   q.transactional_id.s);
}

/* ---- TxnOffsetCommit ---- */

/* A TxnOffsetCommit whose batch is being written: it and its response
 * arrays live in the slot's reservation, after the response's room. */
struct txncommit_op {
	struct fe_conn *fc;
	uint32_t slot;
	struct km_addparts_resp m;
	uint8_t *wrote;		/* per part: 1 if in the batch */
};

static size_t align8(size_t n)
{
	return (n + 7u) & ~(size_t)7u;
}

static size_t op_bytes(const struct km_txncommit_req *q)
{
	return align8(sizeof(struct txncommit_op)) +
	       align8(q->n_topics * sizeof(struct km_proto_topic)) +
	       align8(q->n_parts * sizeof(struct km_offcommit_resp_part)) +
	       align8(q->n_parts);
}

/* The request's verdict for every partition, in Kafka's order: group id,
 * the coordinator's load, the transaction, then the member. */
/* KafkaApis.handleTxnOffsetCommitRequest: Write on the transactional id,
 * then Read on the group, before anything else. */
static int16_t ids_denied(struct fe_conn *fc, const struct km_txncommit_req *q)
{
	if (!km_frontend_allowed(fc, KM_ACL_OP_WRITE, KM_ACL_RES_TXNID,
				 q->transactional_id.s))
		return KM_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	if (!km_frontend_allowed(fc, KM_ACL_OP_READ, KM_ACL_RES_GROUP,
				 q->group_id.s))
		return KM_KERR_GROUP_AUTHORIZATION_FAILED;
	return KM_KERR_NONE;
}

static int16_t group_err(struct km_frontend *fe, int16_t version,
			 const struct km_txncommit_req *q)
{
	int16_t e;

	if (!km_frontend_txn_enabled(fe))
		return KM_KERR_NOT_COORDINATOR;
	if (q->group_id.len <= 0)
		return KM_KERR_INVALID_GROUP_ID;
	if ((e = km_frontend_offsets_ready(fe)) != KM_KERR_NONE)
		return e;
	e = km_txncoord_verify(km_frontend_txn_coord(fe),
			       q->transactional_id.s, q->producer_id,
			       q->producer_epoch, KM_GOFFSETS_TOPIC, 0);
	if (e != KM_KERR_NONE)
		return fenced_for(version, e);
	return km_group_txn_commit_check(fe->groups, q->group_id.s,
					 q->member_id.s,
					 q->group_instance_id.len < 0
						 ? NULL : q->group_instance_id.s,
					 q->generation_id);
}

/* The commits that pass into the commit table, every partition's code
 * into oc_errs. @return how many commits. */
static uint32_t collect(struct fe_conn *fc, struct km_wire_rd *r,
			const struct km_txncommit_req *q, int16_t gerr)
{
	struct fe_omem *om = fc->fe->go.mem;
	uint32_t n = 0;

	km_frontend_span_reset(fc->fe);
	for (uint32_t t = 0; t < q->n_topics; t++) {
		/* Kafka: Read on each topic (the ids' verdicts first). */
		int16_t terr = gerr == KM_KERR_NONE &&
					       !km_frontend_allowed(
						       fc, KM_ACL_OP_READ,
						       KM_ACL_RES_TOPIC,
						       q->topics[t].name.s)
				       ? KM_KERR_TOPIC_AUTHORIZATION_FAILED
				       : gerr;

		for (uint32_t i = q->topics[t].first;
		     i < q->topics[t].first + q->topics[t].count; i++) {
			const struct km_txncommit_part *rp = &q->parts[i];
			int16_t e = terr ? terr
					 : km_frontend_commit_part_err(
						   fc->fe, q->topics[t].name.s,
						   rp->partition, rp->metadata.len);
			uint16_t ml = rp->metadata.len > 0
					      ? (uint16_t)rp->metadata.len : 0;
			const uint8_t *md = km_frontend_span_bytes(
				fc->fe, r->chain, &rp->metadata);

			if (e == KM_KERR_NONE && ml > 0 && md == NULL)
				e = KM_KERR_UNKNOWN_SERVER_ERROR; /* cannot be */
			om->oc_errs[i] = e;
			if (e != KM_KERR_NONE)
				continue;
			om->values[n] = (struct km_gorec_value){
				rp->committed_offset, rp->committed_leader_epoch,
				0, (const char *)md, ml };
			om->commits[n] = (struct km_goffsets_commit){
				q->group_id.s, q->topics[t].name.s,
				rp->partition, &om->values[n] };
			n++;
		}
	}
	return n;
}

static void respond(struct txncommit_op *op)
{
	struct fe_conn *fc = op->fc;
	struct km_wire_wr w;

	km_frontend_slot_begin(fc, op->slot, &w);
	km_txncommit_resp_encode(&w, fc->slots[op->slot].api_version, &op->m);
	km_frontend_slot_finish(fc, op->slot, &w, false);
}

static void on_committed(void *arg, int rc)
{
	struct txncommit_op *op = arg;
	struct fe_conn *fc = op->fc;
	int16_t e = rc == KM_EPRODUCERFENCED ? KM_KERR_PRODUCER_FENCED
					     : KM_KERR_COORDINATOR_NOT_AVAILABLE;

	for (uint32_t i = 0; rc < 0 && i < op->m.n_parts; i++)
		if (op->wrote[i])
			op->m.parts[i].error_code = e;
	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	if (fc->c != NULL && !fc->closing)
		respond(op);
	km_frontend_conn_maybe_free(fc);
}

static struct txncommit_op *op_place(struct fe_conn *fc, uint32_t slot,
				     uint32_t resp,
				     const struct km_txncommit_req *q)
{
	struct fe_slot *s = &fc->slots[slot];
	uint8_t *p = fc->buf + s->off + resp;
	struct txncommit_op *op = (struct txncommit_op *)p;
	struct km_proto_topic *topics;
	struct km_offcommit_resp_part *parts;

	s->data_off = resp;
	topics = (struct km_proto_topic *)(p + align8(sizeof(*op)));
	parts = (struct km_offcommit_resp_part *)
		((uint8_t *)topics + align8(q->n_topics * sizeof(*topics)));
	memcpy(topics, q->topics, q->n_topics * sizeof(*topics));
	*op = (struct txncommit_op){ .fc = fc, .slot = slot,
		.wrote = (uint8_t *)parts + align8(q->n_parts * sizeof(*parts)) };
	op->m = (struct km_addparts_resp){ 0, topics, q->n_topics, q->n_topics,
					   parts, q->n_parts, q->n_parts };
	for (uint32_t i = 0; i < q->n_parts; i++) {
		parts[i] = (struct km_offcommit_resp_part){
			q->parts[i].partition, fc->fe->go.mem->oc_errs[i] };
		op->wrote[i] = fc->fe->go.mem->oc_errs[i] == KM_KERR_NONE;
	}
	return op;
}

/* Room for the write first, then the slot: a full ring or a full
 * connection leaves the request queued with nothing taken. */
static int start(struct fe_conn *fc, const struct km_reqhdr *h,
		 const struct km_txncommit_req *q, uint32_t n)
{
	struct fe_omem *om = fc->fe->go.mem;
	uint32_t resp = (uint32_t)align8(32 + q->n_topics *
					 (KM_WIRE_NAME_BYTES_MAX + 8) +
					 q->n_parts * 8);
	struct fe_owrite *o = NULL;
	struct txncommit_op *op;
	uint32_t slot;
	int rc;

	if (n > 0 && (rc = km_frontend_offsets_wr_new(
			      fc->fe, km_goffsets_build_size(om->commits, n),
			      OW_COMMIT, &o)) < 0)
		return rc == -EAGAIN ? FE_WAIT
				     : km_frontend_conn_fail(fc, "TxnOffsetCommit: "
							     "%s", km_strerror(rc));
	rc = km_frontend_slot_open(fc, h, resp + (uint32_t)op_bytes(q), &slot);
	if (rc != 0) {
		if (o != NULL)
			km_frontend_offsets_wr_drop(om, o);
		return rc;
	}
	op = op_place(fc, slot, resp, q);
	fc->pending_ops++;
	if (o == NULL) {
		on_committed(op, 0); /* nothing to write: answer now */
		return 0;
	}
	o->fn = on_committed;
	o->arg = op;
	o->txn = true;
	o->pid = q->producer_id;
	o->epoch = q->producer_epoch;
	if ((rc = km_frontend_offsets_wr_build(fc->fe, o, om->commits, n)) < 0 ||
	    (rc = km_frontend_offsets_wr_submit(fc->fe, o)) < 0) {
		km_frontend_offsets_wr_drop(om, o);
		fc->pending_ops--;
		return km_frontend_conn_fail(fc, "TxnOffsetCommit: %s",
					     km_strerror(rc));
	}
	return 0;
}

int km_frontend_handle_txn_offset_commit(struct fe_conn *fc,
					 const struct km_reqhdr *h,
					 struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_txncommit_req q = { .topics = fe->lo_topics,
		.topics_max = fe->topics_max, .parts = fe->txnoff->parts,
		.parts_max = fe->parts_max };
	uint32_t n;
	int16_t denied;
	int rc = km_txncommit_req_decode(r, h->api_version, &q);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed TxnOffsetCommit v%d "
					     "request: %s", h->api_version,
					     km_strerror(rc));
	denied = ids_denied(fc, &q);
	n = collect(fc, r, &q, denied != KM_KERR_NONE
				       ? denied
				       : group_err(fe, h->api_version, &q));
	if (n > 0 && km_goffsets_batch_bytes(fe->go.mem->commits, n) >
			     KM_GOFFSETS_BATCH_BYTES_MAX) {
		/* Kafka: RECORD_LIST_TOO_LARGE -> INVALID_COMMIT_OFFSET_SIZE */
		for (uint32_t i = 0; i < q.n_parts; i++)
			if (fe->go.mem->oc_errs[i] == KM_KERR_NONE)
				fe->go.mem->oc_errs[i] =
					KM_KERR_INVALID_COMMIT_OFFSET_SIZE;
		n = 0;
	}
	return start(fc, h, &q, n);
}
