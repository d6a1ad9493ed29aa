/* The front-end's synchronous APIs: ApiVersions, Metadata, ListOffsets,
 * InitProducerId. Each answers at once into a slot of its own. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "dataplane/serve/frontend_pvt.h"
#include "kafka/batch.h"
#include "kafka/records.h"

/* Response header and top-level fields, generously. */
#define RESP_FIXED_BYTES 64u

static bool part_offline(const struct km_part *p)
{
	return p->log == NULL ||
	       atomic_load_explicit(&((struct km_part *)p)->error,
				    memory_order_acquire) != 0;
}

int16_t km_frontend_part_state_err(const struct km_part *p)
{
	if (p == NULL)
		return KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	/* Retriable: the client refreshes its metadata and comes back. */
	return part_offline(p) ? KM_KERR_NOT_LEADER_OR_FOLLOWER : KM_KERR_NONE;
}

int64_t km_frontend_part_lso(const struct km_frontend *fe, struct km_part *p)
{
	/* Relaxed, as the owner stores it: no other data hangs on the
	 * value, and a stale LSO is only ever behind the true one, which is
	 * safe to serve up to. */
	int64_t hw = km_log_durable_offset(p->log), lso;

	if (p->owner != fe->worker_id)
		lso = atomic_load_explicit(&p->stats.lso, memory_order_relaxed);
	else
		lso = km_log_lso(p->log);
	/* R6 whatever the snapshot says (a truncation may have moved the
	 * HW back since it was taken). */
	return lso < hw ? lso : hw;
}

/* ---- ApiVersions ---- */

int km_frontend_handle_apiversions(struct fe_conn *fc, const struct km_reqhdr *h,
			  struct km_wire_rd *r, bool unsupported)
{
	struct km_api_range keys[KM_PROTO_APIS];
	struct km_apiversions_resp m = { 0, keys, KM_PROTO_APIS, 0, 0 };
	struct km_apiversions_req req;
	struct km_reqhdr hv = *h;
	struct km_wire_wr w;
	uint32_t slot;
	int rc;

	if (!unsupported &&
	    (rc = km_apiversions_req_decode(r, h->api_version, &req)) < 0)
		return km_frontend_conn_fail(fc, "malformed ApiVersions v%d request: %s",
				    h->api_version, km_strerror(rc));
	rc = km_proto_supported(keys, KM_PROTO_APIS);
	m.n_keys = rc > 0 ? (uint32_t)rc : 0;
	if (unsupported) {
		/* KIP-511: a version the broker does not know is answered
		 * with UNSUPPORTED_VERSION in a v0 body that still lists the
		 * ranges, so the client can retry at one it knows. */
		m.error_code = KM_KERR_UNSUPPORTED_VERSION;
		hv.api_version = 0;
	}
	rc = km_frontend_slot_open(fc, &hv, RESP_FIXED_BYTES + 8 * KM_PROTO_APIS, &slot);
	if (rc != 0)
		return rc;
	km_frontend_slot_begin(fc, slot, &w);
	km_apiversions_resp_encode(&w, hv.api_version, &m);
	return km_frontend_slot_finish(fc, slot, &w, true);
}

/* ---- Metadata ---- */

/* The id Metadata names for p's topic: the log's (partition.metadata),
 * but for a mirrored partition only once its fetcher holds the source's.
 * Until then the log may hold an id drawn at open, which a kmirrord
 * mirroring this one would take for the topic's and then, when ours turns
 * into the source's, take for the topic made again (KM_ESOURCEID): Kafka's
 * "no id" (all zero) says nothing instead. */
static void md_topic_id(const struct km_part *p, uint8_t out[KM_WIRE_UUID_BYTES])
{
	struct km_part_source_view v;

	if (km_part_get_mode(p) != KM_PART_MIRROR) {
		km_part_topic_id_read(&p->stats.topic_id, out);
		return;
	}
	km_part_source_read(&p->stats.source, &v);
	memcpy(out, v.topic_id, KM_WIRE_UUID_BYTES);
}

static void md_add_topic(struct km_frontend *fe, struct km_metadata_resp *m,
			 const char *name, struct km_part *const *first,
			 uint32_t n)
{
	struct km_metadata_topic *t = &m->topics[m->n_topics++];

	t->error_code = n > 0 ? KM_KERR_NONE
			      : KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	if (km_wire_name_set(&t->name, name) < 0)
		km_wire_name_set(&t->name, "");
	t->is_internal = n > 0 && first[0]->internal;
	/* One id per topic: every partition's log holds the topic's. */
	memset(t->topic_id, 0, sizeof(t->topic_id));
	if (n > 0)
		md_topic_id(first[0], t->topic_id);
	t->first = m->n_parts;
	t->count = n;
	if (n == 0)
		fe->st.partition_errors++;
	for (uint32_t i = 0; i < n; i++) {
		struct km_metadata_part *p = &m->parts[m->n_parts++];
		bool offline = part_offline(first[i]);

		p->error_code = offline ? KM_KERR_LEADER_NOT_AVAILABLE
					: KM_KERR_NONE;
		p->partition = first[i]->partition;
		p->leader_id = offline ? -1 : fe->node_id;
		p->replicas_first = p->isr_first = 0; /* nodes[0]: us */
		p->replicas_count = p->isr_count = 1;
	}
}

/* Listing every topic, Kafka leaves out those the principal may not
 * Describe (KafkaApis.handleTopicMetadataRequest: "In case of all topics,
 * don't include topics unauthorized to Describe"). */
static void md_all_topics(struct fe_conn *fc, struct km_metadata_resp *m,
			  const struct km_part_index *ix)
{
	for (uint32_t i = 0; i < ix->n;) {
		struct km_part *const *first;
		uint32_t n = km_part_topic(ix, ix->p[i]->topic, &first);

		if (km_frontend_acl_sees(fc, KM_ACL_OP_DESCRIBE, KM_ACL_RES_TOPIC,
					 first[0]->topic))
			md_add_topic(fc->fe, m, first[0]->topic, first, n);
		i += n;
	}
}

/* A topic named (or, by id, name null) that the principal may not
 * Describe: TOPIC_AUTHORIZATION_FAILED, whether it exists or not. */
static void md_denied_topic(struct km_frontend *fe, struct km_metadata_resp *m,
			    const char *name, const uint8_t *id)
{
	struct km_metadata_topic *t = &m->topics[m->n_topics++];

	memset(t, 0, sizeof(*t));
	t->error_code = KM_KERR_TOPIC_AUTHORIZATION_FAILED;
	if (name == NULL || km_wire_name_set(&t->name, name) < 0)
		km_wire_name_set_null(&t->name);
	if (id != NULL)
		memcpy(t->topic_id, id, sizeof(t->topic_id));
	t->first = m->n_parts;
	fe->st.partition_errors++;
}

/* Kafka creates a topic for Metadata only with Create on the cluster or
 * on the topic. */
static bool md_may_create(struct fe_conn *fc, const char *topic)
{
	return km_frontend_allowed(fc, KM_ACL_OP_CREATE, KM_ACL_RES_CLUSTER,
				   KM_ACL_CLUSTER_NAME) ||
	       km_frontend_allowed(fc, KM_ACL_OP_CREATE, KM_ACL_RES_TOPIC, topic);
}

/* Whether the topic at table index idx is in the answer already (a stamp
 * per table topic), marking it if not. */
static bool md_seen_before(struct km_frontend *fe, uint32_t idx)
{
	if (fe->md_seen[idx] == fe->md_stamp)
		return true;
	fe->md_seen[idx] = fe->md_stamp;
	return false;
}

/* The table topic whose id is id: n partitions at *first, or 0. */
static uint32_t md_topic_by_id(const struct km_part_index *ix,
			       const uint8_t id[KM_WIRE_UUID_BYTES],
			       struct km_part *const **first)
{
	uint8_t have[KM_WIRE_UUID_BYTES];

	for (uint32_t i = 0; i < ix->n;) {
		uint32_t n = km_part_topic(ix, ix->p[i]->topic, first);

		md_topic_id(ix->p[i], have);
		if (memcmp(have, id, sizeof(have)) == 0)
			return n;
		i += n;
	}
	return 0;
}

/* Metadata v12 by topic id (KafkaApis: any non-zero id makes the request
 * one by ids, names aside): known ids as their topics, an unknown one as
 * UNKNOWN_TOPIC_ID with a null name and the id asked. */
static void md_topics_by_id(struct fe_conn *fc, struct km_metadata_resp *m,
			    const struct km_metadata_req *req,
			    const struct km_part_index *ix)
{
	static const uint8_t zero[KM_WIRE_UUID_BYTES];
	struct km_frontend *fe = fc->fe;

	for (int32_t i = 0; i < req->n_topics; i++) {
		struct km_part *const *first = NULL;
		struct km_metadata_topic *t;
		uint32_t n;

		if (memcmp(req->topic_ids[i], zero, sizeof(zero)) == 0)
			continue;
		n = md_topic_by_id(ix, req->topic_ids[i], &first);
		/* "Topic IDs are not considered sensitive information, so
		 * returning TOPIC_AUTHORIZATION_FAILED is OK" (KafkaApis). */
		if (n > 0 && !km_frontend_allowed(fc, KM_ACL_OP_DESCRIBE,
						  KM_ACL_RES_TOPIC,
						  first[0]->topic)) {
			md_denied_topic(fe, m, NULL, req->topic_ids[i]);
			continue;
		}
		if (n > 0) {
			if (!md_seen_before(fe, (uint32_t)(first - ix->p)))
				md_add_topic(fe, m, first[0]->topic, first, n);
			continue;
		}
		fe->st.partition_errors++;
		t = &m->topics[m->n_topics++];
		memset(t, 0, sizeof(*t));
		t->error_code = KM_KERR_UNKNOWN_TOPIC_ID;
		km_wire_name_set_null(&t->name);
		memcpy(t->topic_id, req->topic_ids[i], sizeof(t->topic_id));
		t->first = m->n_parts;
	}
}

static bool md_by_id(const struct km_metadata_req *req)
{
	static const uint8_t zero[KM_WIRE_UUID_BYTES];

	for (int32_t i = 0; req->topic_ids != NULL && i < req->n_topics; i++)
		if (memcmp(req->topic_ids[i], zero, sizeof(zero)) != 0)
			return true;
	return false;
}

/* The topics asked for, each once. */
static void md_named_topics(struct fe_conn *fc, struct km_metadata_resp *m,
			    const struct km_metadata_req *req,
			    const struct km_part_index *ix)
{
	struct km_frontend *fe = fc->fe;

	if (++fe->md_stamp == 0) {
		memset(fe->md_seen, 0, fe->table->cap * sizeof(*fe->md_seen));
		fe->md_stamp = 1;
	}
	if (md_by_id(req)) {
		md_topics_by_id(fc, m, req, ix);
		return;
	}
	for (int32_t i = 0; i < req->n_topics; i++) {
		struct km_part *const *first;
		uint32_t n = km_part_topic(ix, req->topics[i].s, &first);

		if (n > 0 && md_seen_before(fe, (uint32_t)(first - ix->p)))
			continue;
		if (!km_frontend_allowed(fc, KM_ACL_OP_DESCRIBE,
					 KM_ACL_RES_TOPIC, req->topics[i].s)) {
			md_denied_topic(fe, m, req->topics[i].s, NULL);
			continue;
		}
		if (n == 0 && req->allow_auto_topic_creation && fe->acls != NULL &&
		    fe->auto_create_topics && !md_may_create(fc, req->topics[i].s)) {
			md_denied_topic(fe, m, req->topics[i].s, NULL);
			continue;
		}
		md_add_topic(fe, m, req->topics[i].s, first, n);
		/* Kafka answers a topic it is creating for the client so. */
		if (n == 0 && req->allow_auto_topic_creation &&
		    km_frontend_admin_auto_create(fe, req->topics[i].s))
			m->topics[m->n_topics - 1].error_code =
				KM_KERR_LEADER_NOT_AVAILABLE;
	}
}

static uint32_t md_bound(const struct km_metadata_resp *m)
{
	uint32_t b = RESP_FIXED_BYTES + 32 + 2 * KM_WIRE_NAME_BYTES_MAX;

	/* A topic: error, name, id, internal, count, ops, tags (35 + name);
	 * a partition: at most 34 (v7-8: epoch and the offline array). */
	for (uint32_t i = 0; i < m->n_topics; i++)
		b += 40 + (uint32_t)(m->topics[i].name.len > 0
					     ? m->topics[i].name.len : 0);
	return b + 40 * m->n_parts;
}

int km_frontend_handle_metadata(struct fe_conn *fc, const struct km_reqhdr *h,
		       struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	/* Ids name topics from v12 (v10-11 carry them zero: Kafka refuses
	 * others there). */
	struct km_metadata_req req = {
		fe->names, fe->parts_max, 0, true,
		h->api_version >= 12 ? fe->md_ids : NULL,
	};
	struct km_metadata_broker broker;
	int32_t node = fe->node_id;
	struct km_metadata_resp m = {
		.brokers = &broker, .brokers_max = 1, .n_brokers = 1,
		.controller_id = fe->node_id,
		.topics = fe->md_topics, .topics_max = fe->md_topics_max,
		.parts = fe->md_parts, .parts_max = fe->table->cap,
		.nodes = &node, .nodes_max = 1, .n_nodes = 1,
	};
	/* One view for the whole answer: discovery may publish another. */
	const struct km_part_index *ix = km_part_index_get(fe->table);
	struct km_wire_wr w;
	uint32_t slot;
	int rc = km_metadata_req_decode(r, h->api_version, &req);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed Metadata v%d request: %s",
				    h->api_version, km_strerror(rc));
	broker.node_id = fe->node_id;
	km_wire_name_set(&broker.host, km_frontend_adv_host(fc));
	broker.port = km_frontend_adv_port(fc);
	km_wire_name_set_null(&broker.rack);
	km_wire_name_set(&m.cluster_id, fe->cluster_id);
	if (req.n_topics < 0)
		md_all_topics(fc, &m, ix);
	else
		md_named_topics(fc, &m, &req, ix);
	rc = km_frontend_slot_open(fc, h, md_bound(&m), &slot);
	if (rc != 0)
		return rc;
	km_frontend_slot_begin(fc, slot, &w);
	km_metadata_resp_encode(&w, h->api_version, &m);
	return km_frontend_slot_finish(fc, slot, &w, true);
}

/* ---- ListOffsets ---- */

/* Within the batch at buf, the first record at or after ts: Kafka answers
 * with that record. A compressed or LogAppendTime batch is answered with
 * its base offset and maxTimestamp (its records are not decompressed). */
static void lo_in_batch(const uint8_t *buf, uint32_t len, int64_t ts,
			struct km_listoffsets_resp_part *a)
{
	struct iovec v = { (void *)buf, len };
	struct km_chain ch = { &v, 1 };
	struct km_records_iter it;
	struct km_record rec;
	struct km_batch b;

	if (km_batch_parse(&b, &ch, km_chain_start(&ch),
			   len < KM_BATCH_BYTES_MAX ? len : KM_BATCH_BYTES_MAX) <= 0)
		return;
	a->offset = km_batch_base_offset(&b);
	a->timestamp = km_batch_max_timestamp(&b);
	if (km_batch_is_log_append_time(&b) || km_records_begin(&it, &b) < 0)
		return;
	/* Bounded by the batch's recordsCount. */
	while (km_records_next(&it, &rec) > 0)
		if (rec.timestamp >= ts) {
			a->offset = rec.offset;
			a->timestamp = rec.timestamp;
			return;
		}
}

/* A buffer to read one batch into for a record-level answer: a Fetch
 * buffer, or, when in-flight Fetch responses hold them all, one of the same
 * size for this lookup only. The answer must not depend on how busy the
 * Fetch path is (by-time lookups are rare; Fetch keeps its pool). */
static uint8_t *lo_buf_get(struct km_frontend *fe, bool *pooled)
{
	uint8_t *buf = km_frontend_fbuf_get(fe);

	*pooled = buf != NULL;
	return buf != NULL ? buf : malloc(fe->fetch_buf_bytes);
}

static void lo_buf_put(struct km_frontend *fe, uint8_t *buf, bool pooled)
{
	if (pooled)
		km_frontend_fbuf_put(fe, buf);
	else
		free(buf);
}

/* Offset by timestamp, below bound (Kafka: "lastFetchableOffset"). Only if
 * no memory is left at all is the batch's base offset given. */
static void lo_by_time(struct km_frontend *fe, struct km_log *log, int64_t ts,
		       int64_t bound, struct km_listoffsets_resp_part *a)
{
	struct km_log_read_result rr;
	int64_t off = -1;
	uint8_t *buf;
	bool pooled;

	if (km_log_offset_for_time(log, ts, &off) < 0 || off < 0 ||
	    off >= bound)
		return;
	a->offset = off;
	if ((buf = lo_buf_get(fe, &pooled)) == NULL)
		return;
	if (km_log_read(log, off, bound, 0, buf, fe->fetch_buf_bytes, &rr) == 0 &&
	    rr.batches > 0)
		lo_in_batch(buf, rr.bytes, ts, a);
	lo_buf_put(fe, buf, pooled);
}

/* Max timestamp (-3): the first record of the largest timestamp, in the
 * first batch that has it (Kafka's offsetOfMaxTimestamp), answered only
 * below bound as Kafka's allowed(). A compressed or LogAppendTime batch is
 * answered with its base offset, as lo_in_batch does. */
static void lo_max_time(struct km_frontend *fe, struct km_log *log,
			int64_t bound, struct km_listoffsets_resp_part *a)
{
	int64_t ts, base;
	uint8_t *buf;
	bool pooled;

	if (km_log_max_timestamp(log, &ts, &base) < 0 || base < 0)
		return;
	a->offset = base;
	a->timestamp = ts;
	if ((buf = lo_buf_get(fe, &pooled)) != NULL) {
		struct km_log_read_result rr;

		if (km_log_read(log, base, base + 1, 0, buf,
				fe->fetch_buf_bytes, &rr) == 0 && rr.batches > 0)
			lo_in_batch(buf, rr.bytes, ts, a);
		lo_buf_put(fe, buf, pooled);
	}
	if (a->offset >= bound) {
		a->offset = -1;
		a->timestamp = -1;
	}
}

/* Earliest local (-4): the log start, every segment being local; through
 * Kafka's allowed() like every lookup but -1 and -2, so none below an
 * empty log's bound. */
static void lo_earliest_local(struct km_log *log, int64_t bound,
			      struct km_listoffsets_resp_part *a)
{
	int64_t start = km_log_start_offset(log);

	if (start < bound)
		a->offset = start;
}

static void lo_answer(struct km_frontend *fe, const char *topic,
		      const struct km_listoffsets_req_part *q, bool committed,
		      bool denied, struct km_listoffsets_resp_part *a)
{
	struct km_part *p = km_part_find(fe->table, topic, q->partition);
	int64_t bound;

	a->partition = q->partition;
	a->error_code = denied ? KM_KERR_TOPIC_AUTHORIZATION_FAILED
			       : km_frontend_part_state_err(p);
	a->timestamp = -1;
	a->offset = -1;
	a->leader_epoch = -1;
	a->old_offsets_count = 0;
	if (a->error_code != KM_KERR_NONE) {
		fe->st.partition_errors++;
		return;
	}
	bound = committed ? km_frontend_part_lso(fe, p) : km_log_durable_offset(p->log);
	if (q->timestamp == -1)
		a->offset = bound; /* LATEST: the HW, or the LSO */
	else if (q->timestamp == -2)
		a->offset = km_log_start_offset(p->log); /* EARLIEST */
	else if (q->timestamp == -3)
		lo_max_time(fe, p->log, bound, a);
	else if (q->timestamp == -4)
		lo_earliest_local(p->log, bound, a);
	else if (q->timestamp == -5)
		; /* LATEST_TIERED: -1, Kafka's answer without tiered storage */
	else
		lo_by_time(fe, p->log, q->timestamp, bound, a);
	a->old_offsets_count = a->offset >= 0 ? 1 : 0;
}

int km_frontend_handle_listoffsets(struct fe_conn *fc, const struct km_reqhdr *h,
			  struct km_wire_rd *r)
{
	struct km_frontend *fe = fc->fe;
	struct km_listoffsets_req req = {
		.topics = fe->lo_topics, .topics_max = fe->topics_max,
		.parts = fe->lo_req, .parts_max = fe->parts_max,
	};
	struct km_listoffsets_resp m = {
		.topics = fe->lo_topics, .parts = fe->lo_resp,
	};
	uint32_t bound = RESP_FIXED_BYTES, slot;
	struct km_wire_wr w;
	int rc = km_listoffsets_req_decode(r, h->api_version, &req);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed ListOffsets v%d request: %s",
				    h->api_version, km_strerror(rc));
	for (uint32_t t = 0; t < req.n_topics; t++) {
		const struct km_proto_topic *tp = &req.topics[t];
		/* Kafka: Describe on the topic, else TOPIC_AUTHORIZATION_FAILED
		 * for each of its partitions. */
		bool denied = !km_frontend_allowed(fc, KM_ACL_OP_DESCRIBE,
						   KM_ACL_RES_TOPIC, tp->name.s);

		bound += 8 + (uint32_t)tp->name.len + 40 * tp->count;
		for (uint32_t i = tp->first; i < tp->first + tp->count; i++)
			lo_answer(fe, tp->name.s, &req.parts[i],
				  req.isolation_level == 1, denied,
				  &fe->lo_resp[i]);
	}
	m.n_topics = m.topics_max = req.n_topics;
	m.n_parts = m.parts_max = req.n_parts;
	rc = km_frontend_slot_open(fc, h, bound, &slot);
	if (rc != 0)
		return rc;
	km_frontend_slot_begin(fc, slot, &w);
	km_listoffsets_resp_encode(&w, h->api_version, &m);
	return km_frontend_slot_finish(fc, slot, &w, true);
}

/* ---- InitProducerId ---- */

static void initpid_answer(struct fe_conn *fc, const struct km_initpid_req *q,
			   struct km_initpid_resp *m)
{
	const struct km_part_ops *ops = fc->fe->ops;
	int rc;

	m->throttle_time_ms = 0;
	m->error_code = KM_KERR_NONE;
	m->producer_id = -1;
	m->producer_epoch = -1;
	if (q->transactional_id.len >= 0 && km_frontend_txn_enabled(fc->fe)) {
		m->error_code = km_frontend_txn_init_pid(
			fc->fe, q, &m->producer_id, &m->producer_epoch);
		if (m->error_code != KM_KERR_NONE) {
			m->producer_id = -1;
			m->producer_epoch = -1;
		}
		return;
	}
	if (q->transactional_id.len >= 0) {
		m->error_code = KM_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
		KM_WARN("frontend", "connection %u (client id \"%s\"): "
			"InitProducerId for transactional id \"%s\" refused "
			"(%s): transactions through the front-end are not "
			"supported", fc->id, fc->client_id,
			q->transactional_id.s, km_kerr_name(m->error_code));
		return;
	}
	rc = ops->alloc_pid(ops->ctx, &m->producer_id, &m->producer_epoch);
	if (rc < 0) {
		m->error_code = KM_KERR_UNKNOWN_SERVER_ERROR; /* retried */
		m->producer_id = -1;
		m->producer_epoch = -1;
		KM_WARN("frontend", "connection %u: no producer id: %s",
			fc->id, km_strerror(rc));
	}
}

/* KafkaApis.handleInitProducerIdRequest: Write on the transactional id,
 * or for an idempotent producer IdempotentWrite on the cluster or Write on
 * some topic (authorizeByResourceType). */
static int16_t initpid_denied(struct fe_conn *fc, const struct km_initpid_req *q)
{
	if (q->transactional_id.len >= 0)
		return km_frontend_allowed(fc, KM_ACL_OP_WRITE, KM_ACL_RES_TXNID,
					   q->transactional_id.s)
			       ? KM_KERR_NONE
			       : KM_KERR_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
	if (km_frontend_acl_sees(fc, KM_ACL_OP_IDEMPOTENT_WRITE,
				 KM_ACL_RES_CLUSTER, KM_ACL_CLUSTER_NAME) ||
	    km_frontend_acl_check_any(fc, KM_ACL_OP_WRITE, KM_ACL_RES_TOPIC))
		return KM_KERR_NONE;
	return KM_KERR_CLUSTER_AUTHORIZATION_FAILED;
}

int km_frontend_handle_initpid(struct fe_conn *fc, const struct km_reqhdr *h,
		      struct km_wire_rd *r)
{
	int16_t denied;
	struct km_initpid_req req;
	struct km_initpid_resp m;
	struct km_wire_wr w;
	uint32_t slot;
	int rc = km_initpid_req_decode(r, h->api_version, &req);

	if (rc < 0)
		return km_frontend_conn_fail(fc, "malformed InitProducerId v%d request: "
				    "%s", h->api_version, km_strerror(rc));
	denied = initpid_denied(fc, &req);
	/* Answered once the coordinator's record is durable. */
	if (denied == KM_KERR_NONE && req.transactional_id.len >= 0 &&
	    km_frontend_txn_enabled(fc->fe))
		return km_frontend_txn_handle_initpid(fc, h, &req);
	rc = km_frontend_slot_open(fc, h, RESP_FIXED_BYTES, &slot);
	if (rc != 0)
		return rc;
	if (denied != KM_KERR_NONE)
		m = (struct km_initpid_resp){ .error_code = denied,
					      .producer_id = -1,
					      .producer_epoch = -1 };
	else
		initpid_answer(fc, &req, &m);
	km_frontend_slot_begin(fc, slot, &w);
	km_initpid_resp_encode(&w, h->api_version, &m);
	return km_frontend_slot_finish(fc, slot, &w, true);
}
