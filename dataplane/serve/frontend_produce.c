/* The front-end's Produce (v3-7): every partition goes to ops->produce
 * (the owner's local writer), whose outcomes come back later through
 * tickets; the response is encoded once the last one is in. The records
 * are handed over as they lie in the receive buffers, however many they
 * straddle: ops->produce makes their one copy. See frontend.h for the
 * error codes and why a mirrored partition gets POLICY_VIOLATION. */
#include <errno.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/serve/frontend_pvt.h"

#define RESP_FIXED_BYTES 64u
/* Index, error, base offset, append time, log start. */
#define RESP_PART_BYTES 32u

static size_t align8(size_t n)
{
	return (n + 7u) & ~(size_t)7u;
}

int16_t km_frontend_kerr_from_km(int err)
{
	switch (err) {
	case 0:
		return KM_KERR_NONE;
	case KM_EOUTOFORDERSEQ:
		return KM_KERR_OUT_OF_ORDER_SEQUENCE_NUMBER;
	case KM_EPRODUCERFENCED:
		return KM_KERR_INVALID_PRODUCER_EPOCH;
	case KM_EINVALIDTXNSTATE:
		return KM_KERR_INVALID_TXN_STATE;
	case KM_EDUPLICATE:
		return KM_KERR_DUPLICATE_SEQUENCE_NUMBER;
	case KM_EBATCHLEN:
	case KM_EBADMAGIC:
	case KM_EBADCRC:
	case KM_EWIRETRUNC:
	case KM_ECORRUPT:
		return KM_KERR_CORRUPT_MESSAGE;
	/* LogValidator's InvalidRecordException: a header that disagrees
	 * with its records (kafka/validate.h). */
	case KM_EBATCHHDR:
	case KM_EBATCHCOUNT:
	case KM_ERECOFFSET:
	case KM_ERECORD:
	case KM_ERECCOUNT:
	case KM_EVARINT:
	case KM_EINFLATE:
	case KM_EINFLATEMAX:
		return KM_KERR_INVALID_RECORD;
	case KM_EBATCHMAX:
		return KM_KERR_MESSAGE_TOO_LARGE;
	case -EPERM:
	case -E2BIG:
	case -EINVAL:
		return KM_KERR_INVALID_RECORD;
	case KM_EMIRRORED:
		return KM_KERR_POLICY_VIOLATION;
	case KM_EUNKNOWNPART:
		return KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	case KM_EPARTOFFLINE:
	case KM_ESHUTDOWN:
		return KM_KERR_NOT_LEADER_OR_FOLLOWER;
	case -ENOBUFS:
	case -ENOMEM:
	case -EAGAIN:
	case KM_EWORKERQ:
		/* Busy: librdkafka retries NOT_ENOUGH_REPLICAS and counts the
		 * messages as not persisted, which is the truth here. */
		return KM_KERR_NOT_ENOUGH_REPLICAS;
	case -ENOSPC:
	case -EIO:
	case -EDQUOT:
	case -EBUSY:
	case KM_ESEGMENTS:
		return KM_KERR_KAFKA_STORAGE_ERROR;
	default:
		return KM_KERR_UNKNOWN_SERVER_ERROR;
	}
}

/* ---- the arrays a Produce slot keeps in the connection's buffer ---- */

static size_t topics_bytes(uint32_t n)
{
	return align8(n * sizeof(struct km_proto_topic));
}

static size_t parts_bytes(uint32_t n)
{
	return align8(n * sizeof(struct km_produce_resp_part));
}

static struct km_proto_topic *slot_topics(struct fe_conn *fc,
					  const struct fe_slot *s)
{
	return (struct km_proto_topic *)(fc->buf + s->off + s->data_off);
}

static struct km_produce_resp_part *slot_parts(struct fe_conn *fc,
					       const struct fe_slot *s)
{
	return (struct km_produce_resp_part *)((uint8_t *)slot_topics(fc, s) +
					       topics_bytes(s->n_topics));
}

static struct fe_ticket *slot_tickets(struct fe_conn *fc,
				      const struct fe_slot *s)
{
	return (struct fe_ticket *)((uint8_t *)slot_parts(fc, s) +
				    parts_bytes(s->n_parts));
}

/* ---- request ---- */

struct produce_count {
	int16_t acks;
	uint32_t topics;
	uint32_t parts;
	uint32_t name_bytes;
};

/* A first pass over a copy of the reader: sizes, and the whole body
 * checked before anything is submitted. */
static int produce_count(struct km_wire_rd r, int16_t version,
			 struct produce_count *c)
{
	struct km_produce_req_iter it;
	struct km_produce_part pp;
	int32_t topic = -1;
	int rc;

	memset(c, 0, sizeof(*c));
	if ((rc = km_produce_req_begin(&it, &r, version)) < 0)
		return rc;
	c->acks = it.acks;
	/* Bounded by the frame: each partition consumes bytes. */
	while ((rc = km_produce_req_next_partition(&it, &pp)) == 1) {
		if (it.cur.topic_index != topic) {
			topic = it.cur.topic_index;
			c->topics++;
			c->name_bytes += (uint32_t)it.cur.topic.len;
		}
		c->parts++;
	}
	return rc;
}

/* The request's transactional id, checked once for all its partitions
 * (the handler runs to completion: precheck reads it right after). */
static void txn_check(struct fe_conn *fc, const struct km_produce_req_iter *it)
{
	fc->fe->produce_txn_denied =
		it->transactional_id.len >= 0 &&
		!km_frontend_allowed(fc, KM_ACL_OP_WRITE, KM_ACL_RES_TXNID,
				     it->transactional_id.s);
}

/* Kafka's checks before an append, in its order. */
static int16_t precheck(struct fe_conn *fc, const struct km_part *p,
			const char *topic, int32_t partition, int16_t acks,
			const struct km_wire_span *records)
{
	if (acks != 0 && acks != 1 && acks != -1)
		return KM_KERR_INVALID_REQUIRED_ACKS;
	/* Kafka: Write on the transactional id for the whole request, then
	 * Write on each topic, before it looks the partition up (a topic the
	 * principal may not write is TOPIC_AUTHORIZATION_FAILED whether it
	 * exists or not). */
	if (fc->fe->produce_txn_denied)
		return KM_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	if (!km_frontend_allowed(fc, KM_ACL_OP_WRITE, KM_ACL_RES_TOPIC, topic))
		return KM_KERR_TOPIC_AUTHORIZATION_FAILED;
	if (p == NULL)
		return KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	if (km_part_get_mode(p) == KM_PART_MIRROR) {
		fc->fe->st.produce_refused_mirror++;
		KM_WARN("frontend", "connection %u (client id \"%s\"): Produce "
			"to %s-%d refused with POLICY_VIOLATION: the partition "
			"is mirrored, writes are refused until it is stopped",
			fc->id, fc->client_id, topic, (int)partition);
		return KM_KERR_POLICY_VIOLATION;
	}
	if (p->internal) {
		/* Kafka: "Cannot append to internal topic". */
		KM_WARN("frontend", "connection %u (client id \"%s\"): Produce "
			"to %s-%d refused with INVALID_TOPIC_EXCEPTION: the "
			"topic is internal (committed offsets)", fc->id,
			fc->client_id, topic, (int)partition);
		return KM_KERR_INVALID_TOPIC_EXCEPTION;
	}
	if (km_frontend_part_state_err(p) != KM_KERR_NONE)
		return km_frontend_part_state_err(p);
	/* "Produce requests with version >= 3 must have at least one record
	 * batch" (ProduceRequest.validateRecords). */
	if (records->len <= 0)
		return KM_KERR_INVALID_RECORD;
	return KM_KERR_NONE;
}

static void log_outcome(struct fe_conn *fc, const char *topic, int32_t part,
			int err)
{
	KM_WARN("frontend", "connection %u (client id \"%s\"): Produce to "
		"%s-%d failed: %s (%s)", fc->id, fc->client_id, topic,
		(int)part, km_strerror(err),
		km_kerr_name(km_frontend_kerr_from_km(err)));
}

static void produce_respond(struct fe_conn *fc, uint32_t slot)
{
	struct fe_slot *s = &fc->slots[slot];
	struct km_produce_resp m = {
		.topics = slot_topics(fc, s), .topics_max = s->n_topics,
		.n_topics = s->n_topics, .parts = slot_parts(fc, s),
		.parts_max = s->n_parts, .n_parts = s->n_parts,
		.throttle_time_ms = 0,
	};
	struct km_wire_wr w;

	km_frontend_slot_begin(fc, slot, &w);
	km_produce_resp_encode(&w, s->api_version, &m);
	km_frontend_slot_finish(fc, slot, &w, false);
}

static const char *topic_of(struct fe_conn *fc, const struct fe_slot *s,
			    uint32_t part)
{
	const struct km_proto_topic *t = slot_topics(fc, s);

	for (uint32_t i = 0; i < s->n_topics; i++)
		if (part >= t[i].first && part < t[i].first + t[i].count)
			return t[i].name.s;
	return "?";
}

static void on_produced(void *arg, const struct km_part_produced *res)
{
	struct fe_ticket *t = arg;
	struct fe_conn *fc = t->fc;
	struct fe_slot *s = &fc->slots[t->slot];
	struct km_produce_resp_part *a = &slot_parts(fc, s)[t->part];

	a->error_code = km_frontend_kerr_from_km(res->err);
	a->base_offset = res->err != 0 ? -1 : res->base_offset;
	a->log_start_offset = res->log_start;
	a->log_append_time_ms = res->err == 0 && res->log_append_time > 0
					? res->log_append_time : -1;
	if (res->err != 0) {
		fc->fe->st.partition_errors++;
		log_outcome(fc, topic_of(fc, s, t->part), a->partition,
			    res->err);
	}
	KM_ASSERT(fc->pending_ops > 0);
	KM_ASSERT(s->pending > 0);
	fc->pending_ops--;
	if (--s->pending == 0 && fc->c != NULL && !fc->closing)
		produce_respond(fc, t->slot);
	km_frontend_conn_maybe_free(fc);
}

/* acks=0: nothing is answered, so a failure closes the connection, as
 * Kafka's KafkaApis does: closing is the only way the client hears of it. */
static void on_produced_noack(void *arg, const struct km_part_produced *res)
{
	struct fe_conn *fc = arg;

	KM_ASSERT(fc->pending_ops > 0);
	fc->pending_ops--;
	if (res->err != 0 && fc->c != NULL)
		km_frontend_conn_fail(fc, "acks=0 Produce failed: %s (%s)",
			     km_strerror(res->err),
			     km_kerr_name(km_frontend_kerr_from_km(res->err)));
	km_frontend_conn_maybe_free(fc);
}

/* Submit one partition; its answer comes through its ticket. */
static void produce_one(struct fe_conn *fc, uint32_t slot, uint32_t i,
			const char *topic, const struct km_produce_part *pp,
			const struct km_chain *ch, int16_t acks)
{
	struct km_frontend *fe = fc->fe;
	struct fe_slot *s = &fc->slots[slot];
	struct km_produce_resp_part *a = &slot_parts(fc, s)[i];
	struct fe_ticket *t = &slot_tickets(fc, s)[i];
	struct km_part *p = km_part_find(fe->table, topic, pp->partition);
	int16_t err = precheck(fc, p, topic, pp->partition, acks, &pp->records);
	int rc;

	if (err == KM_KERR_NONE)
		err = km_frontend_txn_check_records(fc, ch, topic, pp->partition,
						    &pp->records);

	a->partition = pp->partition;
	a->base_offset = a->log_append_time_ms = a->log_start_offset = -1;
	a->error_code = err;
	if (err == KM_KERR_NONE) {
		t->fc = fc;
		t->slot = slot;
		t->part = i;
		rc = fe->ops->produce(fe->ops->ctx, p, ch, pp->records.cur,
				      (uint32_t)pp->records.len, acks,
				      on_produced, t);
		if (rc == 0) {
			s->pending++;
			fc->pending_ops++;
			return;
		}
		a->error_code = km_frontend_kerr_from_km(rc);
		log_outcome(fc, topic, pp->partition, rc);
	}
	fe->st.partition_errors++;
}

/* Second pass: fill the slot's arrays and submit every partition. */
static void produce_submit(struct fe_conn *fc, uint32_t slot,
			   struct km_wire_rd *r)
{
	struct fe_slot *s = &fc->slots[slot];
	struct km_proto_topic *topics = slot_topics(fc, s);
	struct km_produce_req_iter it;
	struct km_produce_part pp;
	int32_t topic = -1;
	uint32_t t = 0, i = 0;

	km_produce_req_begin(&it, r, s->api_version);
	txn_check(fc, &it);
	while (i < s->n_parts && km_produce_req_next_partition(&it, &pp) == 1) {
		if (it.cur.topic_index != topic) {
			topic = it.cur.topic_index;
			topics[t].name = it.cur.topic;
			topics[t].first = i;
			topics[t++].count = 0;
		}
		topics[t - 1].count++;
		produce_one(fc, slot, i++, it.cur.topic.s, &pp, r->chain,
			    it.acks);
	}
	/* The first pass counted the same body. */
	KM_ASSERT(t == s->n_topics);
	KM_ASSERT(i == s->n_parts);
	if (s->pending == 0)
		produce_respond(fc, slot);
}

static int produce_noack(struct fe_conn *fc, struct km_wire_rd *r,
			 int16_t version)
{
	struct km_frontend *fe = fc->fe;
	struct km_produce_req_iter it;
	struct km_produce_part pp;

	km_produce_req_begin(&it, r, version);
	txn_check(fc, &it);
	while (km_produce_req_next_partition(&it, &pp) == 1) {
		struct km_part *p = km_part_find(fe->table, it.cur.topic.s,
						 pp.partition);
		int16_t err = precheck(fc, p, it.cur.topic.s, pp.partition, 0,
				       &pp.records);
		int rc = 0;

		if (err == KM_KERR_NONE)
			err = km_frontend_txn_check_records(
				fc, r->chain, it.cur.topic.s, pp.partition,
				&pp.records);

		if (err == KM_KERR_NONE)
			rc = fe->ops->produce(fe->ops->ctx, p, r->chain,
					      pp.records.cur,
					      (uint32_t)pp.records.len, 0,
					      on_produced_noack, fc);
		if (err == KM_KERR_NONE && rc == 0) {
			fc->pending_ops++;
			continue;
		}
		return km_frontend_conn_fail(fc, "acks=0 Produce to %s-%d refused: %s",
				    it.cur.topic.s, (int)pp.partition,
				    km_kerr_name(err ? err : km_frontend_kerr_from_km(rc)));
	}
	return 0;
}

int km_frontend_handle_produce(struct fe_conn *fc, const struct km_reqhdr *h,
		      struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct produce_count n;
	size_t resp, data;
	uint32_t slot;
	int rc = produce_count(*r, h->api_version, &n);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed Produce v%d request: %s",
				    h->api_version, km_strerror(rc));
	if (n.parts > fe->parts_max)
		return km_frontend_conn_fail(fc, "Produce names %u partitions, more "
				    "than %u", n.parts, fe->parts_max);
	if (n.acks == 0)
		return produce_noack(fc, r, h->api_version);
	resp = align8(RESP_FIXED_BYTES + 8 * n.topics + n.name_bytes +
		      RESP_PART_BYTES * n.parts);
	data = topics_bytes(n.topics) + parts_bytes(n.parts) +
	       n.parts * sizeof(struct fe_ticket);
	rc = km_frontend_slot_open(fc, h, (uint32_t)(resp + data), &slot);
	if (rc != 0)
		return rc;
	fc->slots[slot].data_off = (uint32_t)resp;
	fc->slots[slot].n_topics = n.topics;
	fc->slots[slot].n_parts = n.parts;
	produce_submit(fc, slot, r);
	return 0;
}
