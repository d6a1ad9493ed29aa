/* The transaction coordinator on the front-end (issue 20, first phase):
 * dataplane/group/txncoord.c's logic behind FindCoordinator(transaction),
 * InitProducerId with a transactional id, AddPartitionsToTxn and EndTxn,
 * and the COMMIT/ABORT markers an ended, fenced or expired transaction
 * needs, written by each partition's owner (ops->write_marker: one writer
 * per partition). EndTxn is answered once every marker is durable, so a
 * read_committed consumer that saw the answer finds the transaction
 * decided. Every change is a record of __transaction_state-0
 * (frontend_txnlog.c) and the client is answered once it is durable; an
 * ended transaction goes Prepare* (durable) -> its markers (durable) ->
 * Complete*, so a restart finds it Prepare* and writes them again, or
 * Complete*. A marker that fails is tried again with a backoff, never
 * dropped: the transaction stays Prepare* until every one is durable.
 *
 * Only when the daemon gives ops->write_marker; without it transactional
 * ids are refused as before. Memory: the coordinator's table and
 * TXN_JOBS marker jobs, at init. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/clock.h"
#include "common/log.h"
#include "dataplane/group/txncoord.h"
#include "dataplane/serve/frontend_pvt.h"
#include "kafka/batch.h"
#include "kafka/proto_txn.h"

#define TXN_IDS 1024u
#define TXN_PARTS 64u	 /* partitions of one transaction */
#define TXN_JOBS 64u	 /* transactions whose markers are being written */
#define ADD_TOPICS_MAX 64u
#define ADD_PARTS_MAX 256u
/* Timeouts are seconds long: a scan of the table every loop turn of a
 * polling worker would cost more than it finds. */
#define EXPIRE_EVERY_MS 100u

#define MARKER_RETRY_FIRST_MS 100u
#define MARKER_RETRY_MAX_MS 5000u

struct fe_txn_job;

/* One marker of a job: which partition its outcome is for. */
struct fe_txn_mref {
	struct fe_txn_job *j;
	uint32_t i;
};

/* One transaction's markers in flight, and the EndTxn waiting on them. */
struct fe_txn_job {
	bool used;
	struct km_frontend *fe;
	struct fe_conn *fc;	/* NULL: nobody waits (fence, expiry) */
	uint32_t slot;
	char id[KM_TXNCOORD_NAME_MAX + 1];
	uint32_t pending;
	int err;
	struct km_txn_markers mk;	/* parts: the coordinator's, stable
					 * while Prepare* */
	struct fe_txn_mref refs[TXN_PARTS];
	uint64_t durable;		/* bit i: marker of mk.parts[i] */
	uint32_t attempts;
	uint64_t retry_at_ms;		/* 0: no retry waiting */
};

struct fe_txn {
	struct km_txncoord *coord;
	struct fe_txn_job jobs[TXN_JOBS];
	struct km_proto_topic topics[ADD_TOPICS_MAX];
	int32_t parts[ADD_PARTS_MAX];
	struct km_offcommit_resp_part results[ADD_PARTS_MAX];
	uint64_t next_expire_ms;
	uint32_t ids_max;
	bool stopping;		/* km_frontend_txn_stop: nobody waits on retries */
};

static int alloc_pid(void *ctx, int64_t *pid, int16_t *epoch)
{
	const struct km_part_ops *ops = ctx;

	return ops->alloc_pid(ops->ctx, pid, epoch);
}

int km_frontend_txn_init(struct km_frontend *fe, uint32_t ids_max,
			 int64_t expiration_ms)
{
	struct km_txncoord_config c = { ids_max ? ids_max : TXN_IDS, TXN_PARTS,
					alloc_pid, (void *)fe->ops };
	int rc;

	if (fe->ops->write_marker == NULL)
		return 0;
	fe->txn = calloc(1, sizeof(*fe->txn));
	if (fe->txn == NULL)
		return -ENOMEM;
	fe->txn->ids_max = c.ids_max;
	if ((rc = km_txncoord_create(&c, &fe->txn->coord)) < 0 ||
	    (rc = km_frontend_txnlog_init(fe, fe->txn->coord, c.ids_max,
					  TXN_JOBS, expiration_ms > 0
					  ? expiration_ms
					  : KM_TXN_ID_EXPIRATION_MS)) < 0) {
		km_txncoord_destroy(fe->txn->coord);
		free(fe->txn);
		fe->txn = NULL;
	}
	return rc;
}

void km_frontend_txn_free(struct km_frontend *fe)
{
	if (fe->txn == NULL)
		return;
	km_frontend_txnlog_free(fe);
	km_txncoord_destroy(fe->txn->coord);
	free(fe->txn);
	fe->txn = NULL;
}

bool km_frontend_txn_enabled(const struct km_frontend *fe)
{
	return fe->txn != NULL;
}

struct km_txncoord *km_frontend_txn_coord(struct km_frontend *fe)
{
	return fe->txn->coord;
}

static void endtxn_respond(struct fe_conn *fc, uint32_t slot, int16_t err)
{
	struct km_txn_resp m = { 0, err, -1, -1 };
	struct km_wire_wr w;

	km_frontend_slot_begin(fc, slot, &w);
	km_txn_resp_encode(&w, KM_API_END_TXN, fc->slots[slot].api_version,
			   &m);
	km_frontend_slot_finish(fc, slot, &w, false);
}

/* The Complete* record is durable: the transaction is over. */
static void job_complete(struct km_frontend *fe, void *arg)
{
	struct fe_txn_job *j = arg;
	struct fe_conn *fc = j->fc;

	(void)fe;
	j->used = false;
	if (fc == NULL)
		return;
	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	if (fc->c != NULL && !fc->closing)
		endtxn_respond(fc, j->slot, KM_KERR_NONE);
	km_frontend_conn_maybe_free(fc);
}

/* The EndTxn waiting on j goes unanswered: the front-end stops, and a
 * connection held by a retry would keep it from draining. */
static void job_release(struct fe_txn_job *j)
{
	struct fe_conn *fc = j->fc;

	if (fc == NULL)
		return;
	j->fc = NULL;
	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	km_frontend_conn_maybe_free(fc);
}

/* Every marker is in: the transaction completes once all are durable; a
 * failed one is tried again after a backoff (the transaction stays
 * Prepare*, its producer told CONCURRENT_TRANSACTIONS meanwhile). */
static void job_end(struct fe_txn_job *j)
{
	uint32_t backoff = MARKER_RETRY_FIRST_MS;

	if (j->err != 0) {
		for (uint32_t i = 0; i < j->attempts && backoff <
		     MARKER_RETRY_MAX_MS; i++)
			backoff *= 2;
		backoff = backoff < MARKER_RETRY_MAX_MS ? backoff
							: MARKER_RETRY_MAX_MS;
		if (j->attempts++ == 0 || j->attempts % 20 == 0)
			KM_WARN("frontend", "transaction \"%s\": a marker "
				"failed: %s; trying it again in %u ms", j->id,
				km_strerror(j->err), backoff);
		j->err = 0;
		j->retry_at_ms = km_frontend_now_ms() + backoff;
		if (j->fe->txn->stopping)
			job_release(j);
		return;
	}
	km_frontend_txn_crash_point("txn-after-markers");
	(void)km_txncoord_markers_written(j->fe->txn->coord, j->id);
	if (km_frontend_txnlog_persist(j->fe, j->id, job_complete, j) < 0)
		job_complete(j->fe, j);
}

static void on_marker(void *arg, const struct km_part_produced *res)
{
	struct fe_txn_mref *r = arg;
	struct fe_txn_job *j = r->j;

	if (res->err != 0 && j->err == 0)
		j->err = res->err;
	if (res->err == 0) {
		if (j->durable == 0 && j->mk.n_parts > 1)
			km_frontend_txn_crash_point("txn-after-first-marker");
		j->durable |= UINT64_C(1) << r->i;
	}
	KM_ASSERT(j->pending > 0);
	if (--j->pending == 0)
		job_end(j);
}

static struct fe_txn_job *job_new(struct km_frontend *fe, const char *id)
{
	for (uint32_t i = 0; i < TXN_JOBS; i++) {
		struct fe_txn_job *j = &fe->txn->jobs[i];

		if (!j->used) {
			memset(j, 0, sizeof(*j));
			j->used = true;
			j->fe = fe;
			snprintf(j->id, sizeof(j->id), "%s", id);
			return j;
		}
	}
	return NULL;
}

/* Hand each marker not yet durable to its partition's owner. The pending
 * count holds one extra until every marker is handed over, so a marker
 * that completes at once cannot end the job early. A partition no longer
 * served is skipped, as Kafka skips a deleted one. */
static void job_run(struct fe_txn_job *j)
{
	const struct km_part_ops *ops = j->fe->ops;
	const struct km_txn_markers *mk = &j->mk;

	j->pending = 1;
	j->retry_at_ms = 0;
	for (uint32_t i = 0; i < mk->n_parts; i++) {
		struct km_part *p = km_part_find(j->fe->table,
						 mk->parts[i].topic,
						 mk->parts[i].partition);
		int rc;

		if (j->durable & (UINT64_C(1) << i))
			continue;
		if (p == NULL) {
			KM_WARN("frontend", "transaction \"%s\": %s-%d is not "
				"served: no marker there", j->id,
				mk->parts[i].topic, mk->parts[i].partition);
			j->durable |= UINT64_C(1) << i;
			continue;
		}
		j->refs[i] = (struct fe_txn_mref){ j, i };
		/* The offsets partition's marker also ends the pending
		 * offsets of the group coordinator's table. */
		rc = p == j->fe->go.part
			     ? km_frontend_txnoff_marker(j->fe, p, mk->producer_id,
							 mk->producer_epoch,
							 mk->commit, on_marker,
							 &j->refs[i])
			     : ops->write_marker(ops->ctx, p, mk->producer_id,
						 mk->producer_epoch, mk->commit,
						 on_marker, &j->refs[i]);
		if (rc < 0 && j->err == 0)
			j->err = rc;
		j->pending += rc == 0;
	}
	if (--j->pending == 0)
		job_end(j);
}

/* The Prepare* record is durable: the decision stands, the markers go. */
static void job_prepared(struct km_frontend *fe, void *arg)
{
	(void)fe;
	km_frontend_txn_crash_point("txn-after-prepare");
	job_run(arg);
}

/* The job's transaction is Prepare* in the table: its record, then its
 * markers. */
static void job_start(struct fe_txn_job *j, const struct km_txn_markers *mk)
{
	j->mk = *mk;
	j->mk.transactional_id = j->id;
	j->durable = 0;
	if (km_frontend_txnlog_persist(j->fe, j->id, job_prepared, j) < 0)
		job_prepared(j->fe, j); /* logged; the markers still go */
}

/* Markers nobody waits for: a fenced or expired transaction's abort. */
static void write_unawaited(struct km_frontend *fe,
			    const struct km_txn_markers *mk)
{
	struct fe_txn_job *j = job_new(fe, mk->transactional_id);

	if (j == NULL) {
		KM_WARN("frontend", "transaction \"%s\": no marker job free; "
			"its abort waits", mk->transactional_id);
		return;
	}
	job_start(j, mk);
}

void km_frontend_txn_resume(struct km_frontend *fe,
			    const struct km_txn_markers *mk)
{
	struct fe_txn_job *j = job_new(fe, mk->transactional_id);

	if (j == NULL) {
		KM_WARN("frontend", "transaction \"%s\": no marker job free; "
			"it stays Prepare*", mk->transactional_id);
		return;
	}
	j->mk = *mk;
	j->mk.transactional_id = j->id;
	job_run(j);
}

void km_frontend_txn_stop(struct km_frontend *fe)
{
	if (fe->txn == NULL)
		return;
	fe->txn->stopping = true;
	for (uint32_t i = 0; i < TXN_JOBS; i++)
		if (fe->txn->jobs[i].used && fe->txn->jobs[i].retry_at_ms != 0)
			job_release(&fe->txn->jobs[i]);
	km_frontend_txnlog_stop(fe);
}

/* Markers whose backoff passed are tried again. */
static void retry_markers(struct km_frontend *fe, uint64_t now_ms)
{
	for (uint32_t i = 0; i < TXN_JOBS; i++) {
		struct fe_txn_job *j = &fe->txn->jobs[i];

		if (j->used && j->retry_at_ms != 0 && j->retry_at_ms <= now_ms)
			job_run(j);
	}
}

int16_t km_frontend_txn_init_pid(struct km_frontend *fe,
				 const struct km_initpid_req *q,
				 int64_t *pid, int16_t *epoch)
{
	struct km_txn_markers mk;
	int16_t err = km_frontend_txnlog_ready(fe);

	if (err != KM_KERR_NONE)
		return err;
	err = km_txncoord_init_pid(fe->txn->coord, q->transactional_id.s,
				   q->transaction_timeout_ms, q->producer_id,
				   q->producer_epoch, km_clock_wall_ms(), pid,
				   epoch, &mk);
	if (err == KM_KERR_POLICY_VIOLATION)
		KM_WARN("frontend", "InitProducerId for transactional id "
			"\"%s\" refused (%s): transaction.ids.max=%u ids are "
			"kept, none has been idle for "
			"transactional.id.expiration.ms", q->transactional_id.s,
			km_kerr_name(err), fe->txn->ids_max);
	if (mk.n_parts > 0)
		write_unawaited(fe, &mk);
	return err;
}

void km_frontend_txn_tick(struct km_frontend *fe, uint64_t now_ms)
{
	struct km_txn_markers mk;

	if (fe->txn == NULL || now_ms < fe->txn->next_expire_ms)
		return;
	fe->txn->next_expire_ms = now_ms + EXPIRE_EVERY_MS;
	km_frontend_txnlog_tick(fe, now_ms);
	if (km_frontend_txnlog_ready(fe) != KM_KERR_NONE)
		return;
	retry_markers(fe, now_ms);
	/* Bounded: one expiry per tick is enough for timeouts of seconds. */
	if (km_txncoord_expire(fe->txn->coord, km_clock_wall_ms(), &mk) == 1) {
		KM_INFO("frontend", "transaction \"%s\" timed out: aborted, "
			"producer %lld fenced at epoch %d",
			mk.transactional_id, (long long)mk.producer_id,
			mk.producer_epoch);
		if (mk.n_parts > 0) {
			write_unawaited(fe, &mk);
		} else {
			(void)km_txncoord_markers_written(fe->txn->coord,
							  mk.transactional_id);
			(void)km_frontend_txnlog_persist(
				fe, mk.transactional_id, NULL, NULL);
		}
	}
}

/* ---- AddPartitionsToTxn ---- */

/* Kafka's answer for a partition that cannot join: unknown, or one that
 * refuses writes (mirrored: the producer's data would be refused too). */
static int16_t part_err(struct km_frontend *fe, const char *topic,
			int32_t partition)
{
	struct km_part *p = km_part_find(fe->table, topic, partition);

	if (p == NULL)
		return KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	if (km_part_get_mode(p) != KM_PART_WRITABLE || p->internal)
		return KM_KERR_POLICY_VIOLATION;
	return km_frontend_part_state_err(p);
}

/* Every partition's answer; Kafka answers OPERATION_NOT_ATTEMPTED for the
 * rest when one fails its checks, so none is added then. */
static void addparts_fill(struct fe_conn *fc,
			  const struct km_addparts_req *q,
			  struct km_addparts_resp *m)
{
	struct km_frontend *fe = fc->fe;
	int16_t bad = 0, err, ready = km_frontend_txnlog_ready(fe);

	/* Kafka: Write on the transactional id, else every partition
	 * TRANSACTIONAL_ID_AUTHORIZATION_FAILED; then Write on each topic,
	 * before it is looked up. */
	if (!km_frontend_allowed(fc, KM_ACL_OP_WRITE, KM_ACL_RES_TXNID,
				 q->transactional_id.s))
		ready = KM_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	for (uint32_t t = 0; t < q->n_topics; t++) {
		int16_t terr = ready == KM_KERR_NONE &&
					       !km_frontend_allowed(
						       fc, KM_ACL_OP_WRITE,
						       KM_ACL_RES_TOPIC,
						       q->topics[t].name.s)
				       ? KM_KERR_TOPIC_AUTHORIZATION_FAILED
				       : ready;

		for (uint32_t i = 0; i < q->topics[t].count; i++) {
			uint32_t k = q->topics[t].first + i;

			m->parts[k].partition = q->parts[k];
			m->parts[k].error_code = terr != KM_KERR_NONE ? terr :
				part_err(fe, q->topics[t].name.s, q->parts[k]);
			bad |= m->parts[k].error_code != 0;
		}
	}
	for (uint32_t t = 0; t < q->n_topics; t++)
		for (uint32_t i = 0; i < q->topics[t].count; i++) {
			uint32_t k = q->topics[t].first + i;

			if (bad) {
				if (m->parts[k].error_code == 0)
					m->parts[k].error_code =
					    KM_KERR_OPERATION_NOT_ATTEMPTED;
				continue;
			}
			err = km_txncoord_add_partition(
				fe->txn->coord, q->transactional_id.s,
				q->producer_id, q->producer_epoch,
				q->topics[t].name.s, q->parts[k],
				km_clock_wall_ms());
			m->parts[k].error_code = err;
		}
}

/* PRODUCER_FENCED arrived with v2 of these APIs; older clients know it
 * as INVALID_PRODUCER_EPOCH (Kafka's KafkaApis maps it the same way). */
static int16_t fenced_for(int16_t version, int16_t err)
{
	return err == KM_KERR_PRODUCER_FENCED && version < 2
		       ? KM_KERR_INVALID_PRODUCER_EPOCH : err;
}

int km_frontend_handle_addparts(struct fe_conn *fc, const struct km_reqhdr *h,
				struct km_wire_rd *r)
{
	struct fe_txn *tx = fc->fe->txn;
	struct km_addparts_req q = { .topics = tx->topics,
				     .topics_max = ADD_TOPICS_MAX,
				     .parts = tx->parts,
				     .parts_max = ADD_PARTS_MAX };
	struct km_addparts_resp m = { 0, tx->topics, ADD_TOPICS_MAX, 0,
				      tx->results, ADD_PARTS_MAX, 0 };
	int rc = km_addparts_req_decode(r, h->api_version, &q);
	uint32_t slot;
	struct km_wire_wr w;

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed AddPartitionsToTxn "
					     "v%d request: %s", h->api_version,
					     km_strerror(rc));
	m.n_topics = q.n_topics;
	m.n_parts = q.n_parts;
	addparts_fill(fc, &q, &m);
	for (uint32_t k = 0; k < m.n_parts; k++)
		m.parts[k].error_code = fenced_for(h->api_version,
						   m.parts[k].error_code);
	rc = km_frontend_slot_open(fc, h, 64 + q.n_topics * 260 +
					  q.n_parts * 8, &slot);
	if (rc != 0)
		return rc;
	km_frontend_slot_begin(fc, slot, &w);
	km_addparts_resp_encode(&w, h->api_version, &m);
	return km_frontend_txnlog_answer(fc, slot, &w, q.transactional_id.s);
}

/* ---- EndTxn ---- */

static int endtxn_now(struct fe_conn *fc, const struct km_reqhdr *h,
		      int16_t err)
{
	struct km_txn_resp m = { 0, fenced_for(h->api_version, err), -1, -1 };
	uint32_t slot;
	struct km_wire_wr w;
	int rc = km_frontend_slot_open(fc, h, 32, &slot);

	if (rc != 0)
		return rc;
	km_frontend_slot_begin(fc, slot, &w);
	km_txn_resp_encode(&w, KM_API_END_TXN, h->api_version, &m);
	return km_frontend_slot_finish(fc, slot, &w, true);
}

int km_frontend_handle_endtxn(struct fe_conn *fc, const struct km_reqhdr *h,
			      struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_endtxn_req q;
	struct km_txn_markers mk;
	struct fe_txn_job *j;
	int16_t err;
	uint32_t slot;
	int rc = km_endtxn_req_decode(r, h->api_version, &q);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed EndTxn v%d "
					     "request: %s", h->api_version,
					     km_strerror(rc));
	if (!km_frontend_allowed(fc, KM_ACL_OP_WRITE, KM_ACL_RES_TXNID,
				 q.transactional_id.s))
		return endtxn_now(fc, h,
				  KM_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
	if ((err = km_frontend_txnlog_ready(fe)) != KM_KERR_NONE)
		return endtxn_now(fc, h, err);
	/* A job first: once the coordinator moved to Prepare*, the markers
	 * must be written. */
	if ((j = job_new(fe, q.transactional_id.s)) == NULL)
		return endtxn_now(fc, h, KM_KERR_COORDINATOR_LOAD_IN_PROGRESS);
	err = km_txncoord_end(fe->txn->coord, q.transactional_id.s,
			      q.producer_id, q.producer_epoch, q.committed, &mk);
	if (err != 0 || mk.n_parts == 0) {
		j->used = false;
		return endtxn_now(fc, h, err);
	}
	if ((rc = km_frontend_slot_open(fc, h, 32, &slot)) != 0) {
		j->used = false; /* the decision stands; nobody waits */
		write_unawaited(fe, &mk);
		return rc;
	}
	j->fc = fc;
	j->slot = slot;
	fc->pending_ops++;
	job_start(j, &mk);
	return 0;
}

/* ---- Produce ---- */

/* A transactional batch is taken only from a producer whose Ongoing
 * transaction holds the partition (Kafka 3.6+'s
 * transaction.partition.verification). Every batch's header is read:
 * the writer would take a transactional one anywhere in the records. */
int16_t km_frontend_txn_check_records(struct fe_conn *fc,
				      const struct km_chain *c,
				      const char *topic, int32_t partition,
				      const struct km_wire_span *records)
{
	struct km_chain_cur cur = records->cur;
	uint32_t at = 0, len = (uint32_t)records->len;
	uint8_t hdr[KM_BATCH_HEADER_BYTES];

	for (uint32_t n = 0; at + sizeof(hdr) <= len && n < 64; n++) {
		struct km_chain_cur hc = cur;
		uint32_t size;

		if (km_chain_copy(c, hc, hdr, sizeof(hdr)) != sizeof(hdr))
			return 0; /* the writer refuses what is cut */
		size = 12u + km_load_be32(hdr + KM_BATCH_OFF_LENGTH);
		/* A control batch is the writer's to refuse
		 * (INVALID_RECORD, as Kafka's LogValidator). */
		if ((km_load_be16(hdr + KM_BATCH_OFF_ATTRIBUTES) &
		     (KM_BATCH_ATTR_TRANSACTIONAL | KM_BATCH_ATTR_CONTROL)) ==
			    KM_BATCH_ATTR_TRANSACTIONAL &&
		    (fc->fe->txn == NULL ||
		     !km_txncoord_may_write(
			     fc->fe->txn->coord,
			     (int64_t)km_load_be64(hdr + KM_BATCH_OFF_PRODUCER_ID),
			     (int16_t)km_load_be16(hdr + KM_BATCH_OFF_PRODUCER_EPOCH),
			     topic, partition)))
			return KM_KERR_INVALID_TXN_STATE;
		if (size > len - at ||
		    km_chain_advance(c, &cur, size) < 0)
			return 0;
		at += size;
	}
	return 0;
}
