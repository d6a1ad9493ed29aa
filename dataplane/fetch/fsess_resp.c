/* A fetch session's answers, partition by partition: Metadata (leaders,
 * then each partition stays or moves), ListOffsets, and Fetch (each
 * partition's records span, appended from the held frame, which is
 * released once every partition is done with it). See fsess.h. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"

/* read_uncommitted responses carry none (Kafka sends null); a source that
 * sends more than this fails the decode, a protocol error. */
#define ABORTED_MAX 256u

/* Asked by the request in flight: written into it, or, for an
 * incremental Fetch, in the broker's session and off the dirty list
 * (fsess_dirty.c: carried without a word). */
static bool asked(const struct km_fsess *s, const struct km_fetcher *f,
		  bool fetch)
{
	return f->ask_slot >= 0 ||
	       (fetch && !s->fs_full && f->fs_in && !f->dirty);
}

/* The partition asked at position *k, or anywhere in the request, whose
 * answer this is; NULL if none (it left, or was never asked). th: the
 * topic name's hash, 0 to have it made. */
static struct km_fetcher *match(struct km_fsess *s, uint32_t *k,
				const char *topic, uint32_t th,
				int32_t partition, bool fetch)
{
	struct km_fetcher *f;

	if (*k < s->n_asked && (f = s->asked[*k]) != NULL &&
	    f->cfg.partition == partition && strcmp(f->cfg.topic, topic) == 0) {
		(*k)++;
		return f;
	}
	/* An incremental answer names only the partitions with news: the
	 * session's index finds each in one look (issue 17). */
	f = km_fsess_find(s, topic, th ? th : km_fsess_name_hash(topic),
			  partition);
	if (f == NULL || !asked(s, f, fetch))
		return NULL;
	if (f->ask_slot >= 0)
		*k = (uint32_t)f->ask_slot + 1;
	return f;
}

/* Partitions asked and not answered: the source broke the request. */
static void missing(struct km_fsess *s, const char *api)
{
	for (uint32_t i = 0; i < s->n_asked; i++) {
		struct km_fetcher *f = s->asked[i];

		if (f == NULL)
			continue;
		km_fsess_unask(f);
		km_fetcher_fail(f, "%s v%d: partition missing", api,
				(int)s->inflight_ver);
	}
	s->n_asked = 0;
}

static void unask_all(struct km_fsess *s)
{
	for (uint32_t i = 0; i < s->n_asked; i++)
		if (s->asked[i] != NULL)
			km_fsess_unask(s->asked[i]);
	s->n_asked = 0;
}

/* The answer to an incremental Fetch left these out: unchanged. Those off
 * the dirty list count it lazily (fs_answers), the others here. */
static void unchanged_all(struct km_fsess *s)
{
	for (uint32_t i = 0; i < s->n_asked; i++)
		if (s->asked[i] != NULL && s->asked[i]->dirty)
			s->asked[i]->stats.fetches++;
	s->fs_answers++;
	unask_all(s);
}

/* ---- Metadata ---- */

static bool port_ok(int32_t port)
{
	return port > 0 && port <= UINT16_MAX;
}

/* Every broker named (up to the capacity) joins the rotation. */
static void remember_brokers(struct km_fsess *s,
			     const struct km_metadata_resp *m)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < m->n_brokers && n < KM_FETCHER_BROKERS_MAX;
	     i++) {
		const struct km_metadata_broker *b = &m->brokers[i];

		if (b->host.len <= 0 || !port_ok(b->port))
			continue;
		s->brokers[n].id = b->node_id;
		memcpy(s->brokers[n].addr.host, b->host.s,
		       (size_t)b->host.len + 1);
		s->brokers[n].addr.port = (uint16_t)b->port;
		n++;
	}
	s->n_brokers = n;
	if (m->cluster_id.len > 0)
		memcpy(s->cluster_id, m->cluster_id.s,
		       (size_t)m->cluster_id.len + 1);
}

static void meta_decode_failed(struct km_fsess *s, int rc)
{
	if (rc != KM_EWIRECAPACITY) {
		km_fsess_protocol_error(s, "Metadata v%d: %s",
					(int)s->inflight_ver, km_strerror(rc));
		return;
	}
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next)
		if (f->in_meta)
			km_fetcher_fail(f, "Metadata v%d: %s (more brokers, "
					"partitions or replicas than struct "
					"km_fetcher_scratch holds)",
					(int)s->inflight_ver, km_strerror(rc));
}

void km_fsess_on_metadata(struct km_fsess *s, struct km_wire_rd *r)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;
	struct km_metadata_resp m = {
		.brokers = sc->brokers,
		.brokers_max = KM_FETCHER_META_BROKERS_MAX,
		.topics = sc->topics, .topics_max = KM_FETCHER_META_TOPICS_MAX,
		.parts = sc->parts, .parts_max = KM_FETCHER_META_PARTS_MAX,
		.nodes = sc->nodes, .nodes_max = KM_FETCHER_META_NODES_MAX,
	};
	struct km_fetcher *f, *next;
	int rc = km_metadata_resp_decode(r, s->inflight_ver, &m);

	if (rc < 0) {
		meta_decode_failed(s, rc);
		return;
	}
	s->healthy = true;
	remember_brokers(s, &m);
	/* Each partition asked stays, moves (the list changes under us:
	 * next is taken first), or waits to ask again. */
	for (f = s->members; f != NULL; f = next) {
		int16_t err;

		next = f->next;
		if (!f->in_meta)
			continue;
		f->in_meta = false;
		err = km_fetcher_on_metadata(f, &m);
		if (f->failed)
			continue; /* another source behind the address */
		if (err)
			km_fetcher_kafka_error(f, "Metadata", KM_FREQ_METADATA,
					       err);
		else
			km_fsess_route(s, f);
	}
}

/* ---- ListOffsets ---- */

void km_fsess_on_listoffsets(struct km_fsess *s, struct km_wire_rd *r)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;
	struct km_listoffsets_resp m = {0, sc->req_topics, KM_FETCHER_ASK_MAX,
					0, sc->lo_resp, KM_FETCHER_ASK_MAX, 0};
	int rc = km_listoffsets_resp_decode(r, s->inflight_ver, &m);
	uint32_t k = 0;

	if (rc < 0) {
		unask_all(s);
		km_fsess_protocol_error(s, "ListOffsets v%d: %s",
					(int)s->inflight_ver, km_strerror(rc));
		return;
	}
	s->healthy = true;
	for (uint32_t t = 0; t < m.n_topics; t++) {
		const struct km_proto_topic *tp = &m.topics[t];

		for (uint32_t i = tp->first; i < tp->first + tp->count; i++) {
			const struct km_listoffsets_resp_part *p = &m.parts[i];
			struct km_fetcher *f = match(s, &k, tp->name.s, 0,
						     p->partition, false);

			if (f == NULL)
				continue;
			km_fsess_unask(f);
			km_fetcher_on_listoffsets(f, p, f->lo_want,
						  s->inflight_ver);
		}
	}
	missing(s, "ListOffsets");
}

/* ---- Fetch ---- */

/* The whole request failed (v7+ top-level ErrorCode): each partition
 * asked takes the error. */
static void fetch_failed(struct km_fsess *s, int16_t err)
{
	struct km_fetcher *f, *next;

	/* Those carried without a word first (a walk: a rare event). */
	for (f = s->members; f != NULL; f = next) {
		next = f->next;
		if (f->ask_slot < 0 && asked(s, f, true))
			km_fetcher_kafka_error(f, "Fetch", KM_FREQ_FETCH, err);
	}
	for (uint32_t i = 0; i < s->n_asked; i++) {
		if ((f = s->asked[i]) == NULL)
			continue;
		km_fsess_unask(f);
		km_fetcher_kafka_error(f, "Fetch", KM_FREQ_FETCH, err);
	}
	s->n_asked = 0;
}

/* A malformed answer: nothing of it is appended. */
static void fetch_malformed(struct km_fsess *s, int rc)
{
	km_fsess_inc_reset(s, true);
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next)
		f->in_frame = false;
	s->n_held = 0;
	unask_all(s);
	km_fsess_protocol_error(s, "Fetch v%d answer: %s", (int)s->inflight_ver,
				km_strerror(rc));
}

/* The topic of the partitions asked that hold this id (Fetch v13+), or
 * NULL if none does any more: the session's topics (fsess_dirty.c). */
static const char *topic_with_id(const struct km_fsess *s,
				 const uint8_t id[KM_WIRE_UUID_BYTES])
{
	return km_fsess_topic_name(s, id);
}

/* The answer's topic of this partition, and its hash: looked up once per
 * topic of the answer, not per partition. */
struct topic_memo {
	int32_t index;
	const char *name;
	uint32_t hash;
};

static const char *answer_topic(const struct km_fsess *s,
				const struct km_fetch_resp_iter *it,
				struct topic_memo *t)
{
	if (t->index == it->cur.topic_index)
		return t->name;
	t->index = it->cur.topic_index;
	t->name = s->inflight_ver >= 13 ? topic_with_id(s, it->cur.topic_id)
					: it->cur.topic.s;
	t->hash = t->name != NULL ? km_fsess_name_hash(t->name) : 0;
	return t->name;
}

/* Hand each partition its part. @return partitions now appending, or a
 * wire error. */
static int fetch_parts(struct km_fsess *s, struct km_fetch_resp_iter *it,
		       const struct km_kframe_frame *fr)
{
	struct topic_memo t = { -1, NULL, 0 };
	uint32_t k = 0;
	int users = 0;

	for (uint32_t i = 0; i <= KM_FETCHER_ASK_MAX * 4u; i++) {
		struct km_fetch_part p;
		struct km_fetcher *f;
		const char *name;
		int rc = km_fetch_resp_next_partition(it, &p);

		if (rc != 1)
			return rc < 0 ? rc : users;
		name = answer_topic(s, it, &t);
		f = name != NULL ? match(s, &k, name, t.hash, p.partition, true)
				 : NULL;
		if (f == NULL || (s->inflight_ver >= 13 &&
				  memcmp(f->topic_id, it->cur.topic_id,
					 KM_WIRE_UUID_BYTES) != 0))
			continue; /* it left the session meanwhile */
		km_fsess_dirty_add(s, f); /* its line moves */
		km_fsess_unask(f);
		/* A topic's cap: its record sets as they came (throttle.h). */
		if (p.records.len > 0 && f->cfg.topic_throttle != NULL)
			km_throttle_charge(f->cfg.topic_throttle,
					   (uint64_t)p.records.len, f->asked_us,
					   km_throttle_now_us());
		km_fetcher_on_fetch(f, &p, fr);
		users += f->in_frame;
		if (f->in_frame && s->n_held < KM_FETCHER_ASK_MAX)
			s->held[s->n_held++] = f;
	}
	return KM_EWIRECAPACITY;
}

bool km_fsess_on_fetch(struct km_fsess *s, const struct km_kframe_frame *fr,
		       struct km_wire_rd *r)
{
	struct km_fetch_aborted aborted[ABORTED_MAX];
	struct km_fetch_resp_iter it;
	int rc = km_fetch_resp_begin(&it, r, s->inflight_ver, aborted,
				     ABORTED_MAX);
	bool full;

	if (rc == 0 && it.throttle_time_ms > 0) {
		/* A quota of the source (KIP-219): from Fetch v8 the broker
		 * answers at once and mutes the channel, and the client waits
		 * as long as it says before its next request to this broker
		 * (FetchResponse.shouldClientThrottle); below v8 the broker
		 * delayed the answer itself. */
		if (s->inflight_ver >= 8) /* +1: the clock truncates */
			s->quiet_until_ms = km_fetcher_now_ms() + 1 +
					    (uint64_t)it.throttle_time_ms;
		s->stats.source_throttle_ms += (uint64_t)it.throttle_time_ms;
		km_throttle_source(s->throttle, it.throttle_time_ms);
	}
	if (rc == 0 && km_fsess_inc_session_error(it.error_code)) {
		/* The broker lost our session (KIP-227): not the partitions'
		 * fault; a full Fetch goes at once. */
		unask_all(s);
		km_fsess_inc_error(s, it.error_code);
		return false;
	}
	if (rc == 0 && it.error_code) {
		fetch_failed(s, it.error_code);
		km_fsess_inc_reset(s, true);
		return false;
	}
	s->n_held = 0;
	if (rc == 0)
		rc = fetch_parts(s, &it, fr);
	if (rc < 0) {
		fetch_malformed(s, rc);
		return false;
	}
	s->healthy = true;
	s->proto_streak = 0;
	s->backoff_ms = s->backoff_min_ms;
	full = s->fs_full;
	km_fsess_inc_answered(s, it.session_id);
	/* An incremental answer leaves out the partitions with nothing new
	 * (KIP-227): they are unchanged, not missing, and the answer says so
	 * as much as one naming them (a planned stop waits for that). */
	if (!full)
		unchanged_all(s);
	/* KIP-219: a broker over its quota answers a full Fetch with no
	 * partition at all and the time to wait (Kafka's
	 * SessionlessFetchContext.getThrottledResponse); its clients ask
	 * again after it (FetchSessionHandler.handleResponse). Not a
	 * partition missing. */
	if (it.throttle_time_ms > 0)
		unask_all(s);
	missing(s, "Fetch");
	if (rc == 0)
		return false;
	s->frame = fr;
	s->frame_users = (uint32_t)rc;
	km_fsess_drain(s);
	return true;
}

int km_fsess_drain(struct km_fsess *s)
{
	uint64_t now = km_fetcher_now_ms();
	uint32_t k = 0;
	int moved = 0;

	KM_ASSERT(s->frame != NULL);
	for (uint32_t i = 0; i < s->n_held; i++) {
		struct km_fetcher *f = s->held[i];
		uint32_t done = f->n_done;

		if (!f->in_frame)
			continue;
		if (km_fetcher_drain(f)) {
			s->frame_users--;
			moved = 1;
			s->fetch_due = true;
			continue;
		}
		moved |= f->n_done != done;
		/* Parsed and queued: it may fetch on while its writes run. */
		s->fetch_due |= km_fetcher_fetchable(f, now);
		s->held[k++] = f;
	}
	s->n_held = k;
	if (s->frame_users > 0)
		return moved;
	km_kframe_release(&s->kf);
	s->frame = NULL;
	if (s->done_held) /* members done while in it may leave now */
		s->look = true;
	s->done_held = false;
	return 1;
}
