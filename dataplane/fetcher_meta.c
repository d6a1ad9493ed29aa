/* Fetch session: version negotiation, finding the leader, where to start,
 * and what OFFSET_OUT_OF_RANGE means. See fetcher.h. */
#include "dataplane/fetcher_pvt.h"

#include <errno.h>
#include <string.h>

#include "common/errors.h"

/* ---- ApiVersions ---- */

int km_fetcher_enc_apiversions(struct km_fetcher *f, struct km_wire_wr *w)
{
	struct km_apiversions_req m;

	km_wire_name_set(&m.sw_name, KM_FETCHER_CLIENT_ID);
	km_wire_name_set(&m.sw_version, KM_FETCHER_SW_VERSION);
	km_fetcher_req_begin(f, w, KM_API_API_VERSIONS, f->v_api_ask);
	return km_apiversions_req_encode(w, f->v_api_ask, &m);
}

/* The broker's range for key in a (possibly partly) decoded response, or
 * NULL. */
static const struct km_api_range *
find_key(const struct km_apiversions_resp *m, int16_t key)
{
	for (uint32_t i = 0; i < m->n_keys; i++)
		if (m->keys[i].api_key == key &&
		    m->keys[i].min_version <= m->keys[i].max_version)
			return &m->keys[i];
	return NULL;
}

/* UNSUPPORTED_VERSION: ask again at min(sent - 1, the broker's ApiVersions
 * maximum), or v0 when the answer does not say (as librdkafka does). The
 * body may be of another version than asked (Kafka answers v0), so it is
 * read as sent and, failing that, as v0. */
static void step_down(struct km_fetcher *f, const struct km_kframe_frame *fr,
		      const struct km_apiversions_resp *asked)
{
	const struct km_api_range *k = find_key(asked, KM_API_API_VERSIONS);
	struct km_apiversions_resp v0 = {0, f->cfg.scratch->keys,
					 KM_FETCHER_API_KEYS_MAX, 0, 0};
	int16_t sent = f->inflight_ver;
	int16_t max = -1;
	struct km_wire_rd r;
	int32_t corr;

	if (k != NULL) {
		max = k->max_version;
	} else {
		km_wire_rd_init(&r, &fr->chain, fr->body, fr->body_len,
				&km_wire_limits_default);
		km_resphdr_decode(&r, KM_API_API_VERSIONS, 0, &corr);
		km_apiversions_resp_decode(&r, 0, &v0);
		if ((k = find_key(&v0, KM_API_API_VERSIONS)) != NULL)
			max = k->max_version;
	}
	if (max < 0)
		f->v_api_ask = 0;
	else
		f->v_api_ask = max < sent - 1 ? max : (int16_t)(sent - 1);
	km_fetcher_want(f, KM_FREQ_APIVERSIONS, 0);
}

/* The highest version of key both sides speak, within [floor, ceil]. */
static int pick(struct km_fetcher *f, const struct km_apiversions_resp *m,
		int16_t key, int16_t floor, int16_t ceil, const char *name,
		int16_t *out)
{
	const struct km_api_range *theirs = find_key(m, key);
	struct km_api_range ours;
	int16_t lo, hi;

	km_proto_versions(key, &ours);
	lo = ours.min_version > floor ? ours.min_version : floor;
	hi = ours.max_version < ceil ? ours.max_version : ceil;
	if (theirs == NULL) {
		km_fetcher_fail(f, "source broker %s:%u does not offer %s; "
				"kmirror needs v%d-v%d", f->target.host,
				(unsigned)f->target.port, name, (int)lo, (int)hi);
		return -1;
	}
	if (theirs->max_version < lo || theirs->min_version > hi) {
		km_fetcher_fail(f, "source broker %s:%u speaks %s v%d-v%d; "
				"kmirror needs v%d-v%d", f->target.host,
				(unsigned)f->target.port, name,
				(int)theirs->min_version,
				(int)theirs->max_version, (int)lo, (int)hi);
		return -1;
	}
	*out = theirs->max_version < hi ? theirs->max_version : hi;
	return 0;
}

/* Versions known: Metadata if the leader is not this broker (or not known,
 * or in doubt), else straight to fetching. */
static void after_handshake(struct km_fetcher *f)
{
	if (f->need_metadata || !f->target_leader)
		km_fetcher_want(f, KM_FREQ_METADATA, 0);
	else
		km_fetcher_start_fetching(f);
}

void km_fetcher_on_apiversions(struct km_fetcher *f,
			       const struct km_kframe_frame *fr,
			       struct km_wire_rd *r)
{
	struct km_apiversions_resp m = {0, f->cfg.scratch->keys,
					KM_FETCHER_API_KEYS_MAX, 0, 0};
	struct km_fetcher_stats *s = &f->stats;
	int rc = km_apiversions_resp_decode(r, f->inflight_ver, &m);

	if (m.error_code == KM_KERR_UNSUPPORTED_VERSION && f->inflight_ver > 0) {
		step_down(f, fr, &m);
		return;
	}
	if (rc < 0) {
		km_fetcher_fail(f, "ApiVersions v%d: %s", (int)f->inflight_ver,
				km_strerror(rc));
		return;
	}
	if (m.error_code) {
		km_fetcher_kafka_error(f, "ApiVersions", KM_FREQ_APIVERSIONS,
				       m.error_code);
		return;
	}
	/* Fetch v4 is the first with record batch v2 (magic 2) and
	 * IsolationLevel; ListOffsets v1 the first with one offset per
	 * partition. ListOffsets v4+ adds only leader epochs, which the
	 * session does not use, and librdkafka's mock cluster answers v4+
	 * with a LeaderEpoch of 8 bytes instead of 4: stay at v3. */
	if (pick(f, &m, KM_API_FETCH, 4, INT16_MAX, "Fetch", &s->v_fetch) < 0 ||
	    pick(f, &m, KM_API_LIST_OFFSETS, 1, 3, "ListOffsets",
		 &s->v_listoffsets) < 0 ||
	    pick(f, &m, KM_API_METADATA, 0, INT16_MAX, "Metadata",
		 &s->v_metadata) < 0)
		return;
	s->v_apiversions = f->inflight_ver;
	after_handshake(f);
}

/* ---- Metadata ---- */

int km_fetcher_enc_metadata(struct km_fetcher *f, struct km_wire_wr *w)
{
	struct km_wire_name topic;
	struct km_metadata_req m;

	km_wire_name_set(&topic, f->cfg.topic);
	m.topics = &topic;
	m.topics_max = 1;
	m.n_topics = 1;
	m.allow_auto_topic_creation = false;
	km_fetcher_req_begin(f, w, KM_API_METADATA, f->stats.v_metadata);
	return km_metadata_req_encode(w, f->stats.v_metadata, &m);
}

/* Our partition, or NULL with *err (topic error or not there). */
static const struct km_metadata_part *
find_part(const struct km_fetcher *f, const struct km_metadata_resp *m,
	  int16_t *err)
{
	*err = KM_KERR_UNKNOWN_TOPIC_OR_PARTITION;
	for (uint32_t t = 0; t < m->n_topics; t++) {
		const struct km_metadata_topic *tp = &m->topics[t];

		if (strcmp(tp->name.s, f->cfg.topic) != 0)
			continue;
		if (tp->error_code) {
			*err = tp->error_code;
			return NULL;
		}
		for (uint32_t i = tp->first; i < tp->first + tp->count; i++)
			if (m->parts[i].partition == f->cfg.partition)
				return &m->parts[i];
	}
	return NULL;
}

static bool port_ok(int32_t port)
{
	return port > 0 && port <= UINT16_MAX;
}

/* Every broker named (up to the capacity) joins the rotation. */
static void remember_brokers(struct km_fetcher *f,
			     const struct km_metadata_resp *m)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < m->n_brokers && n < KM_FETCHER_BROKERS_MAX;
	     i++) {
		const struct km_metadata_broker *b = &m->brokers[i];

		if (b->host.len <= 0 || !port_ok(b->port))
			continue;
		f->brokers[n].id = b->node_id;
		memcpy(f->brokers[n].addr.host, b->host.s,
		       (size_t)b->host.len + 1);
		f->brokers[n].addr.port = (uint16_t)b->port;
		n++;
	}
	f->n_brokers = n;
}

/* Record the leader's address. @return false if Metadata names none. */
static bool set_leader(struct km_fetcher *f, const struct km_metadata_resp *m,
		       int32_t id)
{
	struct km_fetcher_stats *s = &f->stats;

	for (uint32_t i = 0; i < m->n_brokers; i++) {
		const struct km_metadata_broker *b = &m->brokers[i];

		if (b->node_id != id || b->host.len <= 0 || !port_ok(b->port))
			continue;
		if (s->leader_id >= 0 &&
		    (s->leader_id != id || s->leader.port != b->port ||
		     strcmp(s->leader.host, b->host.s) != 0))
			s->leader_changes++;
		s->leader_id = id;
		memcpy(s->leader.host, b->host.s, (size_t)b->host.len + 1);
		s->leader.port = (uint16_t)b->port;
		return true;
	}
	return false;
}

/* Fetch here if this connection is to the leader, else go there. */
static void go_to_leader(struct km_fetcher *f)
{
	char ip[KM_FETCHER_IPV4_BYTES];
	int rc = km_fetcher_resolve(f, f->stats.leader.host, ip);

	if (rc == -EAGAIN) {
		km_fetcher_want(f, KM_FREQ_METADATA, km_fetcher_backoff(f));
		return;
	}
	if (rc < 0) {
		km_fetcher_fail(f, "leader %d at %s:%u: %s (not an IPv4 "
				"address, and no resolver maps it)",
				(int)f->stats.leader_id, f->stats.leader.host,
				(unsigned)f->stats.leader.port, km_strerror(rc));
		return;
	}
	if (strcmp(ip, f->target_ip) == 0 &&
	    f->stats.leader.port == f->target.port) {
		f->target_leader = true;
		km_fetcher_start_fetching(f);
		return;
	}
	f->quick_reconnect = true;
	km_fetcher_drop(f);
}

/* The partition's error, with what Kafka clients ignore taken out. */
static int16_t part_error(const struct km_metadata_part *p)
{
	/* A follower being down does not stop its leader from serving. */
	if (p->error_code == KM_KERR_REPLICA_NOT_AVAILABLE && p->leader_id >= 0)
		return 0;
	if (p->error_code == 0 && p->leader_id < 0)
		return KM_KERR_LEADER_NOT_AVAILABLE;
	return p->error_code;
}

void km_fetcher_on_metadata(struct km_fetcher *f, struct km_wire_rd *r)
{
	struct km_fetcher_scratch *s = f->cfg.scratch;
	struct km_metadata_resp m = {
		.brokers = s->brokers, .brokers_max = KM_FETCHER_META_BROKERS_MAX,
		.topics = s->topics, .topics_max = 4,
		.parts = s->parts, .parts_max = KM_FETCHER_META_PARTS_MAX,
		.nodes = s->nodes, .nodes_max = KM_FETCHER_META_NODES_MAX,
	};
	const struct km_metadata_part *p;
	int16_t err;
	int rc = km_metadata_resp_decode(r, f->inflight_ver, &m);

	if (rc < 0) {
		km_fetcher_fail(f, "Metadata v%d: %s%s", (int)f->inflight_ver,
				km_strerror(rc), rc == KM_EWIRECAPACITY
				? " (more brokers, partitions or replicas "
				  "than struct km_fetcher_scratch holds)" : "");
		return;
	}
	f->stats.metadata_refreshes++;
	remember_brokers(f, &m);
	if (m.cluster_id.len > 0)
		memcpy(f->cluster_id, m.cluster_id.s,
		       (size_t)m.cluster_id.len + 1);
	p = find_part(f, &m, &err);
	if (p != NULL)
		err = part_error(p);
	if (!err && !set_leader(f, &m, p->leader_id))
		err = KM_KERR_LEADER_NOT_AVAILABLE;
	if (err) {
		km_fetcher_kafka_error(f, "Metadata", KM_FREQ_METADATA, err);
		return;
	}
	f->need_metadata = false;
	go_to_leader(f);
}

/* ---- ListOffsets ---- */

int km_fetcher_enc_listoffsets(struct km_fetcher *f, struct km_wire_wr *w,
			       int64_t timestamp)
{
	struct km_proto_topic t;
	struct km_listoffsets_req_part p = {f->cfg.partition, -1, timestamp, 1};
	struct km_listoffsets_req m;

	memset(&t, 0, sizeof(t));
	km_wire_name_set(&t.name, f->cfg.topic);
	t.count = 1;
	memset(&m, 0, sizeof(m));
	m.replica_id = -1;
	m.isolation_level = 0; /* latest = the high watermark */
	m.topics = &t;
	m.topics_max = m.n_topics = 1;
	m.parts = &p;
	m.parts_max = m.n_parts = 1;
	km_fetcher_req_begin(f, w, KM_API_LIST_OFFSETS, f->stats.v_listoffsets);
	return km_listoffsets_req_encode(w, f->stats.v_listoffsets, &m);
}

/* Below the source's log start: FAILED, or restart the log there. */
static void behind_source(struct km_fetcher *f, int64_t start, int64_t hw)
{
	int64_t end = km_log_end_offset(f->log);
	int rc;

	if (!f->cfg.offset_reset_earliest) {
		km_fetcher_fail(f, "OFFSET_OUT_OF_RANGE for %s-%d: the source "
				"log now starts at offset %lld, past our log "
				"end %lld (source high watermark %lld); set "
				"mirror.offset.reset=earliest to continue from "
				"%lld", f->cfg.topic, (int)f->cfg.partition,
				(long long)start, (long long)end,
				(long long)hw, (long long)start);
		return;
	}
	rc = km_log_reset_to(f->log, start);
	if (rc < 0) {
		km_fetcher_fail(f, "mirror.offset.reset=earliest: resetting "
				"the log of %s-%d from %lld to %lld: %s",
				f->cfg.topic, (int)f->cfg.partition,
				(long long)end, (long long)start,
				km_strerror(rc));
		return;
	}
	f->stats.log_resets++;
	f->next_offset = start;
	km_fetcher_want(f, KM_FREQ_FETCH, 0);
}

/* OFFSET_OUT_OF_RANGE, with the source's log start and high watermark in
 * hand. Runs with no frame held, so no append of ours is in flight. */
static void resolve_oor(struct km_fetcher *f, int64_t start, int64_t hw)
{
	int64_t want = f->next_offset;

	f->oor = false;
	if (want > hw) {
		km_fetcher_fail(f, "OFFSET_OUT_OF_RANGE for %s-%d: our log "
				"end %lld is above the source high watermark "
				"%lld (source log start %lld): the source lost "
				"data, and mirrored data is never truncated "
				"silently", f->cfg.topic, (int)f->cfg.partition,
				(long long)km_log_end_offset(f->log),
				(long long)hw, (long long)start);
		return;
	}
	if (want >= start) {
		/* In range again (a leader change raced the Fetch). */
		km_fetcher_want(f, KM_FREQ_FETCH, km_fetcher_backoff(f));
		return;
	}
	if (km_log_end_offset(f->log) == km_log_start_offset(f->log)) {
		/* Nothing mirrored yet: start where the source does. */
		f->next_offset = start;
		km_fetcher_want(f, KM_FREQ_FETCH, 0);
		return;
	}
	behind_source(f, start, hw);
}

static const struct km_listoffsets_resp_part *
lo_part(const struct km_fetcher *f, const struct km_listoffsets_resp *m)
{
	for (uint32_t t = 0; t < m->n_topics; t++) {
		const struct km_proto_topic *tp = &m->topics[t];

		if (strcmp(tp->name.s, f->cfg.topic) != 0)
			continue;
		for (uint32_t i = tp->first; i < tp->first + tp->count; i++)
			if (m->parts[i].partition == f->cfg.partition)
				return &m->parts[i];
	}
	return NULL;
}

void km_fetcher_on_listoffsets(struct km_fetcher *f, struct km_wire_rd *r,
			       enum km_freq req)
{
	struct km_proto_topic topics[4];
	struct km_listoffsets_resp_part parts[16];
	struct km_listoffsets_resp m = {0, topics, 4, 0, parts, 16, 0};
	const struct km_listoffsets_resp_part *p;
	int rc = km_listoffsets_resp_decode(r, f->inflight_ver, &m);

	if (rc < 0 || (p = lo_part(f, &m)) == NULL) {
		km_fetcher_fail(f, "ListOffsets v%d: %s", (int)f->inflight_ver,
				rc < 0 ? km_strerror(rc) : "partition missing");
		return;
	}
	if (p->error_code) {
		km_fetcher_kafka_error(f, "ListOffsets", req, p->error_code);
		return;
	}
	f->err_streak = 0;
	if (req == KM_FREQ_LATEST) {
		f->stats.high_watermark = p->offset;
		resolve_oor(f, f->oor_start, p->offset);
		return;
	}
	f->stats.log_start_offset = p->offset;
	if (f->oor) {
		f->oor_start = p->offset;
		km_fetcher_want(f, KM_FREQ_LATEST, 0);
		return;
	}
	/* An empty log: from the source's start, or our end if later. */
	f->next_offset = p->offset > km_log_end_offset(f->log)
				 ? p->offset
				 : km_log_end_offset(f->log);
	km_fetcher_want(f, KM_FREQ_FETCH, 0);
}
