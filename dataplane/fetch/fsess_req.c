/* A fetch session's requests: which one goes next, and encoding it, each
 * naming every partition of the session that waits for it (grouped by
 * topic, as the wire wants); and the ApiVersions handshake. See fsess.h. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <errno.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"

/* Request bytes around the topics: size, header with the client id, the
 * top-level fields, the empty arrays that follow. */
#define REQ_FIXED_BYTES 96u
/* Bytes per partition at most: Fetch v9+ (partition, epoch, offset, log
 * start, max bytes); ListOffsets (partition, epoch, timestamp, count). */
#define FETCH_PART_BYTES 28u
#define LO_PART_BYTES 20u

void km_fsess_req_begin(struct km_fsess *s, struct km_wire_wr *w,
			int16_t api, int16_t version)
{
	km_kframe_req_begin(&s->kf, w, s->req, sizeof(s->req), api, version,
			    KM_FETCHER_CLIENT_ID, &s->corr);
	s->inflight_ver = version;
}

/* ---- choosing ---- */

static bool wants_meta(const struct km_fetcher *f, uint64_t now)
{
	return f->phase == KM_FP_META && f->ready_at_ms <= now;
}

static bool wants_offsets(const struct km_fetcher *f, uint64_t now)
{
	return f->phase == KM_FP_OFFSETS && f->ready_at_ms <= now &&
	       f->ask_slot < 0;
}

typedef bool (*pick_fn)(const struct km_fetcher *f, uint64_t now);

/* Metadata or ListOffsets wanted now (or KM_FREQ_NONE): the members are
 * scanned only after an event that may make one want them (pre_due) or
 * at the earliest a member backing off may, so that a session whose
 * partitions all fetch costs nothing here per turn (issue 17). */
static enum km_freq pre_fetch(struct km_fsess *s, uint64_t now)
{
	bool meta = false, offsets = false;
	uint64_t at = 0;

	if (!s->pre_due && (s->pre_at_ms == 0 || now < s->pre_at_ms))
		return KM_FREQ_NONE;
	/* Such a member is on the dirty list (fsess_dirty.c). */
	for (const struct km_fetcher *f = s->dirty; f != NULL; f = f->dnext) {
		if (f->phase != KM_FP_META && f->phase != KM_FP_OFFSETS)
			continue;
		meta |= wants_meta(f, now);
		offsets |= wants_offsets(f, now);
		if (f->ready_at_ms > now && (at == 0 || f->ready_at_ms < at))
			at = f->ready_at_ms;
	}
	/* Scanned again at each choice while one wants them. */
	s->pre_due = meta || offsets;
	s->pre_at_ms = at;
	return meta ? KM_FREQ_METADATA : offsets ? KM_FREQ_EARLIEST
						 : KM_FREQ_NONE;
}

/* Scanned again this often at most while none is ready (a throttle's
 * end, or an event missed), else at a backoff's end or after an event. */
#define FETCH_RESCAN_MS 5u

/* A member ready to fetch. The members are scanned after an event that
 * may make one ready (fetch_due) or at fetch_at_ms, not on every turn
 * spent writing an answer that every member is in (issue 17). */
static bool fetch_ready(struct km_fsess *s, uint64_t now)
{
	uint64_t at = now + FETCH_RESCAN_MS;
	bool all = km_fsess_walk_all(s);

	if (!s->fetch_due && now < s->fetch_at_ms)
		return false;
	/* A member off the dirty list is ready (fsess_dirty.c), unless a cap
	 * holds it back. */
	if (!all && s->n_dirty < s->n_members)
		return true;
	for (const struct km_fetcher *f = all ? s->members : s->dirty; f != NULL;
	     f = all ? f->next : f->dnext) {
		if (km_fetcher_fetchable(f, now))
			return true; /* fetch_due stays: scanned at each choice */
		if (f->phase == KM_FP_FETCH && f->ready_at_ms > now &&
		    f->ready_at_ms < at)
			at = f->ready_at_ms;
	}
	s->fetch_due = false;
	s->fetch_at_ms = at;
	return false;
}

enum km_freq km_fsess_choose(struct km_fsess *s, uint64_t now)
{
	enum km_freq pre;

	if (!s->versions_known)
		return KM_FREQ_APIVERSIONS;
	/* KIP-219: the broker mutes the channel for the throttle time it
	 * answered; a client sends nothing before then. */
	if (now < s->quiet_until_ms)
		return KM_FREQ_NONE;
	pre = pre_fetch(s, now);
	if (pre == KM_FREQ_METADATA)
		return pre;
	if (!s->pinned)
		return KM_FREQ_NONE; /* discovery only finds leaders */
	if (pre == KM_FREQ_EARLIEST)
		return pre;
	if (fetch_ready(s, now))
		return KM_FREQ_FETCH;
	return KM_FREQ_NONE;
}

/* ---- selecting partitions, grouped by topic ---- */

static uint32_t topic_index(const struct km_fetcher_scratch *sc, uint32_t nt,
			    const char *topic)
{
	for (uint32_t t = 0; t < nt; t++)
		if (strcmp(sc->req_topics[t].name.s, topic) == 0)
			return t;
	return nt;
}

/* The partitions pick() wants, in member order (or of the dirty list),
 * as many as the request buffer holds. @return how many, their topics in
 * *nt. */
static uint32_t select_parts(struct km_fsess *s, pick_fn pick, uint64_t now,
			     uint32_t part_bytes, bool dirty, uint32_t *nt)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;
	uint64_t bytes = REQ_FIXED_BYTES;
	uint32_t n = 0;

	*nt = 0;
	for (struct km_fetcher *f = dirty ? s->dirty : s->members; f != NULL;
	     f = dirty ? f->dnext : f->next) {
		uint32_t t, add = part_bytes;

		if (n == KM_FETCHER_ASK_MAX)
			break;
		if (!pick(f, now))
			continue;
		t = topic_index(sc, *nt, f->cfg.topic);
		if (t == *nt)
			add += 6u + (uint32_t)strlen(f->cfg.topic);
		if (bytes + add > KM_FSESS_REQ_BYTES)
			break; /* the rest next time */
		if (t == *nt) {
			km_wire_name_set(&sc->req_topics[t].name, f->cfg.topic);
			sc->topic_n[t] = 0;
			(*nt)++;
		}
		sc->sel[n] = f;
		sc->sel_topic[n] = t;
		sc->topic_n[t]++;
		bytes += add;
		n++;
	}
	return n;
}

/* Lay the selected partitions out topic by topic into s->asked (the order
 * of the request, and of its answer). */
static void group_parts(struct km_fsess *s, uint32_t n, uint32_t nt)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;
	uint32_t first = 0;

	for (uint32_t t = 0; t < nt; t++) {
		sc->req_topics[t].first = first;
		sc->req_topics[t].count = sc->topic_n[t];
		sc->topic_n[t] = first; /* now the topic's fill cursor */
		first += sc->req_topics[t].count;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t at = sc->topic_n[sc->sel_topic[i]]++;

		s->asked[at] = sc->sel[i];
		sc->sel[i]->ask_slot = (int32_t)at;
	}
	s->n_asked = n;
}

/* ---- ApiVersions ---- */

static int enc_apiversions(struct km_fsess *s, struct km_wire_wr *w)
{
	struct km_apiversions_req m;

	km_wire_name_set(&m.sw_name, KM_FETCHER_CLIENT_ID);
	km_wire_name_set(&m.sw_version, KM_FETCHER_SW_VERSION);
	km_fsess_req_begin(s, w, KM_API_API_VERSIONS, s->v_api_ask);
	return km_apiversions_req_encode(w, s->v_api_ask, &m);
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
static void step_down(struct km_fsess *s, const struct km_kframe_frame *fr,
		      const struct km_apiversions_resp *asked)
{
	const struct km_api_range *k = find_key(asked, KM_API_API_VERSIONS);
	struct km_apiversions_resp v0 = {0, s->pool->cfg.scratch->keys,
					 KM_FETCHER_API_KEYS_MAX, 0, 0};
	int16_t sent = s->inflight_ver;
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
		s->v_api_ask = 0;
	else
		s->v_api_ask = max < sent - 1 ? max : (int16_t)(sent - 1);
}

/* The highest version of key both sides speak, within [floor, ceil]. */
static int pick(struct km_fsess *s, const struct km_apiversions_resp *m,
		int16_t key, int16_t floor, int16_t ceil, const char *name,
		int16_t *out)
{
	const struct km_api_range *theirs = find_key(m, key);
	struct km_api_range ours;
	int16_t lo, hi;

	km_proto_client_versions(key, &ours); /* Metadata: up to v12 */
	lo = ours.min_version > floor ? ours.min_version : floor;
	hi = ours.max_version < ceil ? ours.max_version : ceil;
	if (theirs == NULL) {
		km_fsess_fail_all(s, "source broker %s:%u does not offer %s; "
				  "kmirror needs v%d-v%d", s->target.host,
				  (unsigned)s->target.port, name, (int)lo,
				  (int)hi);
		return -1;
	}
	if (theirs->max_version < lo || theirs->min_version > hi) {
		km_fsess_fail_all(s, "source broker %s:%u speaks %s v%d-v%d; "
				  "kmirror needs v%d-v%d", s->target.host,
				  (unsigned)s->target.port, name,
				  (int)theirs->min_version,
				  (int)theirs->max_version, (int)lo, (int)hi);
		return -1;
	}
	*out = theirs->max_version < hi ? theirs->max_version : hi;
	return 0;
}

void km_fsess_on_apiversions(struct km_fsess *s,
			     const struct km_kframe_frame *fr,
			     struct km_wire_rd *r)
{
	struct km_apiversions_resp m = {0, s->pool->cfg.scratch->keys,
					KM_FETCHER_API_KEYS_MAX, 0, 0};
	int rc = km_apiversions_resp_decode(r, s->inflight_ver, &m);

	if (m.error_code == KM_KERR_UNSUPPORTED_VERSION && s->inflight_ver > 0) {
		step_down(s, fr, &m);
		return;
	}
	if (rc < 0 || m.error_code) {
		km_fsess_protocol_error(s, "ApiVersions v%d: %s",
					(int)s->inflight_ver,
					rc < 0 ? km_strerror(rc)
					       : km_kerr_name(m.error_code));
		return;
	}
	/* Fetch v4 is the first with record batch v2 (magic 2) and
	 * IsolationLevel; ListOffsets v1 the first with one offset per
	 * partition. ListOffsets v4+ adds only leader epochs, which the
	 * session does not use, and librdkafka's mock cluster answers v4+
	 * with a LeaderEpoch of 8 bytes instead of 4: stay at v3. Metadata
	 * as high as both speak: v2+ names the cluster, v10+ the topic id
	 * (issue 21). */
	if (pick(s, &m, KM_API_FETCH, 4, INT16_MAX, "Fetch", &s->v_fetch) < 0 ||
	    pick(s, &m, KM_API_LIST_OFFSETS, 1, 3, "ListOffsets",
		 &s->v_listoffsets) < 0 ||
	    pick(s, &m, KM_API_METADATA, 0, INT16_MAX, "Metadata",
		 &s->v_metadata) < 0)
		return;
	s->v_apiversions = s->inflight_ver;
	s->versions_known = true;
	km_fsess_start_waiting(s);
}

/* ---- Metadata ---- */

/* The topics of the partitions waiting for a leader (each once); every
 * partition of those topics that waits is answered by it. */
static int enc_metadata(struct km_fsess *s, struct km_wire_wr *w,
			uint64_t now)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;
	struct km_metadata_req m = {sc->names, KM_FETCHER_META_TOPICS_MAX, 0,
				    false, NULL};
	uint64_t bytes = REQ_FIXED_BYTES;

	/* Members wanting Metadata are on the dirty list (fsess_dirty.c). */
	for (struct km_fetcher *f = s->dirty; f != NULL; f = f->dnext) {
		int32_t t;

		if (!wants_meta(f, now))
			continue;
		for (t = 0; t < m.n_topics; t++)
			if (strcmp(sc->names[t].s, f->cfg.topic) == 0)
				break;
		if (t == m.n_topics) {
			bytes += 2u + strlen(f->cfg.topic);
			if (t == (int32_t)KM_FETCHER_META_TOPICS_MAX ||
			    bytes > KM_FSESS_REQ_BYTES)
				continue;
			km_wire_name_set(&sc->names[m.n_topics++], f->cfg.topic);
		}
	}
	for (struct km_fetcher *f = s->dirty; f != NULL; f = f->dnext)
		for (int32_t t = 0; f->phase == KM_FP_META && t < m.n_topics; t++)
			if (strcmp(sc->names[t].s, f->cfg.topic) == 0)
				f->in_meta = true;
	km_fsess_req_begin(s, w, KM_API_METADATA, s->v_metadata);
	return km_metadata_req_encode(w, s->v_metadata, &m);
}

/* ---- ListOffsets ---- */

static int enc_listoffsets(struct km_fsess *s, struct km_wire_wr *w,
			   uint64_t now)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;
	struct km_listoffsets_req m;
	uint32_t nt, n = select_parts(s, wants_offsets, now, LO_PART_BYTES,
				      true, &nt);

	group_parts(s, n, nt);
	for (uint32_t i = 0; i < n; i++) {
		const struct km_fetcher *f = s->asked[i];
		struct km_listoffsets_req_part *p = &sc->lo_parts[i];

		p->partition = f->cfg.partition;
		p->current_leader_epoch = -1;
		p->timestamp = f->lo_want == KM_FREQ_LATEST ? -1 : -2;
		p->max_num_offsets = 1;
	}
	memset(&m, 0, sizeof(m));
	m.replica_id = -1;
	m.isolation_level = 0; /* latest = the high watermark */
	m.topics = sc->req_topics;
	m.topics_max = m.n_topics = nt;
	m.parts = sc->lo_parts;
	m.parts_max = m.n_parts = n;
	km_fsess_req_begin(s, w, KM_API_LIST_OFFSETS, s->v_listoffsets);
	return km_listoffsets_req_encode(w, s->v_listoffsets, &m);
}

/* ---- Fetch ---- */

/* MaxBytes for n partitions: within half the budget (fetcher.h) less
 * their overhead, and the stall-halved session maximum. */
static int32_t resp_max_bytes(const struct km_fsess *s, uint32_t n)
{
	uint64_t over = KM_FETCHER_RESP_OVERHEAD +
			(uint64_t)(n - 1) * KM_FETCHER_PART_OVERHEAD;
	uint64_t half = s->budget_bytes / 2;
	int64_t room = half > over ? (int64_t)(half - over) : 0;

	if (room < KM_FETCHER_MAX_BYTES_MIN)
		room = KM_FETCHER_MAX_BYTES_MIN;
	return s->max_bytes < room ? s->max_bytes : (int32_t)room;
}

static void fetch_part(struct km_fetcher *f, struct km_fetch_req_part *p,
		       int32_t max_bytes)
{
	/* A topic's cap asks no more than its credit (throttle.h). */
	if (km_throttle_on(f->cfg.throttle) ||
	    km_throttle_on(f->cfg.topic_throttle)) {
		f->asked_us = km_throttle_now_us();
		max_bytes = km_throttle_allow(f->cfg.topic_throttle,
					      f->asked_us, max_bytes);
	}
	p->partition = f->cfg.partition;
	p->current_leader_epoch = -1; /* no epoch fencing: any leader serves */
	p->fetch_offset = f->next_offset;
	p->last_fetched_epoch = -1;   /* a consumer, not a follower */
	p->log_start_offset = -1;
	p->partition_max_bytes = f->cfg.max_bytes < max_bytes
					 ? f->cfg.max_bytes : max_bytes;
	f->stats.max_bytes = p->partition_max_bytes;
	f->inflight_offset = f->next_offset;
	if (f->in_frame)
		f->stats.fetch_pipelined++;
}

/* The next full Fetch starts one partition later (fairness under
 * MaxBytes); the head goes to the tail. */
static void rotate_members(struct km_fsess *s)
{
	struct km_fetcher *head = s->members;

	if (head == NULL || head->next == NULL)
		return;
	s->members = head->next;
	s->members->prev = NULL;
	head->prev = s->tail;
	head->next = NULL;
	s->tail->next = head;
	s->tail = head;
}

static bool id_given(const uint8_t id[KM_WIRE_UUID_BYTES])
{
	static const uint8_t zero[KM_WIRE_UUID_BYTES];

	return memcmp(id, zero, KM_WIRE_UUID_BYTES) != 0;
}

/* Fetch v13 names each topic by the id its partitions hold (learned from
 * Metadata before any fetch): a source whose topic of that name was made
 * again answers UNKNOWN_TOPIC_ID, where a fetch by name would be served
 * the new topic's offsets and splice them onto the log. Below v13, or if
 * a partition holds no id (a source below Metadata v10) or another one
 * than its topic's first, by name. */
static int16_t fetch_version(struct km_fsess *s, uint32_t nt)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;

	if (s->v_fetch < 13)
		return s->v_fetch;
	for (uint32_t t = 0; t < nt; t++) {
		const struct km_proto_topic *tp = &sc->req_topics[t];
		const uint8_t *id = s->asked[tp->first]->topic_id;

		for (uint32_t i = tp->first; i < tp->first + tp->count; i++)
			if (!id_given(s->asked[i]->topic_id) ||
			    memcmp(s->asked[i]->topic_id, id,
				   KM_WIRE_UUID_BYTES) != 0)
				return 12;
		memcpy(sc->req_topic_ids[t], id, KM_WIRE_UUID_BYTES);
	}
	return s->v_fetch;
}

/* MaxBytes of the Fetch: an incremental answer may name any member, so
 * the overhead is reckoned over them all. A change of it changes every
 * member's PartitionMaxBytes: each line is looked at again. */
static int32_t fetch_max_bytes(struct km_fsess *s)
{
	int32_t max_bytes = resp_max_bytes(s, s->n_members ? s->n_members : 1);

	if (max_bytes != s->fs_line_max)
		km_fsess_dirty_all(s);
	s->fs_line_max = max_bytes;
	/* The host's cap: the response brings no more than its credit. */
	if (km_throttle_on(s->throttle))
		max_bytes = km_throttle_allow(s->throttle, km_throttle_now_us(),
					      max_bytes);
	return max_bytes;
}

/* Select and lay out the Fetch's partitions: from the dirty list for an
 * incremental Fetch (fsess_dirty.c), else every member ready. @return the
 * Fetch version, or -1: it must be full after all (nothing kept). */
static int16_t fetch_select(struct km_fsess *s, struct km_fetch_req *m,
			    int32_t max_bytes, bool inc, uint64_t now)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;
	uint32_t nt, n = select_parts(s, km_fetcher_fetchable, now,
				      FETCH_PART_BYTES, inc, &nt);
	int16_t version;

	KM_ASSERT(inc || n > 0);
	group_parts(s, n, nt);
	for (uint32_t i = 0; i < n; i++)
		fetch_part(s->asked[i], &sc->fetch_parts[i], max_bytes);
	memset(m, 0, sizeof(*m));
	m->topics = sc->req_topics;
	m->topics_max = m->n_topics = nt;
	m->parts = sc->fetch_parts;
	m->parts_max = m->n_parts = n;
	m->topic_ids = sc->req_topic_ids;
	version = fetch_version(s, nt);
	if (!inc)
		s->n_topics = 0;
	for (uint32_t t = 0; version >= 13 && t < nt; t++)
		km_fsess_topic_note(s, sc->req_topic_ids[t],
				    sc->req_topics[t].name.s);
	if (km_fsess_inc_build(s, m, version, inc) == 0)
		return version;
	for (uint32_t i = 0; i < n; i++)
		s->asked[i]->ask_slot = -1;
	s->n_asked = 0;
	return -1;
}

static int enc_fetch(struct km_fsess *s, struct km_wire_wr *w, uint64_t now)
{
	struct km_fetch_req m;
	int32_t max_bytes = fetch_max_bytes(s);
	bool inc = km_fsess_inc_possible(s);
	int16_t version;

	/* A cap's credit comes back with time, which no event says: every
	 * member is looked at. */
	if (inc && km_fsess_walk_all(s))
		km_fsess_dirty_all(s);
	version = fetch_select(s, &m, max_bytes, inc, now);
	if (version < 0)
		version = fetch_select(s, &m, max_bytes, false, now);
	m.replica_id = -1;
	m.max_wait_ms = s->max_wait_ms;
	m.min_bytes = 1;
	m.max_bytes = max_bytes;
	m.isolation_level = 0;	     /* read_uncommitted: all up to the HW */
	km_wire_name_set(&m.rack_id, "");
	if (s->fs_full)
		rotate_members(s);
	km_fsess_req_begin(s, w, KM_API_FETCH, version);
	return km_fetch_req_encode(w, version, &m);
}

int km_fsess_encode(struct km_fsess *s, struct km_wire_wr *w, enum km_freq r)
{
	uint64_t now = km_fetcher_now_ms();

	switch (r) {
	case KM_FREQ_APIVERSIONS:
		return enc_apiversions(s, w);
	case KM_FREQ_METADATA:
		return enc_metadata(s, w, now);
	case KM_FREQ_EARLIEST:
	case KM_FREQ_LATEST:
		return enc_listoffsets(s, w, now);
	case KM_FREQ_FETCH:
		return enc_fetch(s, w, now);
	case KM_FREQ_NONE:
	default:
		KM_ASSERT(!"no request to encode");
		return -EINVAL;
	}
}
