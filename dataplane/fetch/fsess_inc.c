/* KIP-227 incremental fetch sessions with the source broker, as Kafka's
 * own FetchSessionHandler keeps them.
 *
 * A session's first Fetch is full (SessionId 0 or the old id, epoch 0):
 * it names every partition ready to fetch, and a broker with a free slot
 * answers with a session id. Each later Fetch carries that id and the
 * next epoch, and writes only the partitions that joined the session or
 * whose FetchOffset or PartitionMaxBytes moved since the Fetch that last
 * wrote them; a member of the session not ready to fetch this time
 * (backing off, throttled, its records still being appended), or one
 * that left (stopped, failed, moved to another broker), goes into
 * ForgottenTopicsData: the broker keeps fetching a session partition from
 * its cached offset, so one we are not following must not stay there.
 * The broker answers only the partitions with records, an error, or a new
 * high watermark or log start; one absent is unchanged.
 *
 * A broker that answers session id 0 (no slot: max.incremental.fetch.
 * session.cache.slots=0, or a quota's empty answer) keeps getting full
 * Fetches with epoch 0, as Kafka's client sends them.
 * FETCH_SESSION_ID_NOT_FOUND (70: evicted, or the broker restarted),
 * INVALID_FETCH_SESSION_EPOCH (71) and FETCH_SESSION_TOPIC_ID_ERROR (106)
 * start a new session with a full Fetch at once, counted; so does a new
 * connection (the old one's answer may be lost with it) and a Fetch
 * version that changes (a session holds topics by id or by name, not
 * both). Sessions are per connection to one broker, so per worker. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"

/* FETCH_SESSION_TOPIC_ID_ERROR: the session's topics are held by id and
 * the Fetch names them by name, or the other way round. */
#define KERR_FETCH_SESSION_TOPIC_ID 106
/* Bytes per partition of ForgottenTopicsData. */
#define FG_PART_BYTES 4u
/* Request bytes kept free for the header and top-level fields. */
#define FG_FIXED_BYTES 128u

void km_fsess_inc_reset(struct km_fsess *s, bool keep_id)
{
	if (!keep_id)
		s->fs_id = 0;
	s->fs_epoch = 0;
	s->fs_full = false;
	s->n_forget = 0;
	s->forget_overflow = false;
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next) {
		km_fsess_dirty_add(s, f); /* before fs_in: its count folds */
		f->fs_in = false;
	}
}

void km_fsess_inc_leave(struct km_fsess *s, struct km_fetcher *f)
{
	struct km_fsess_forget *g;

	km_fsess_dirty_add(s, f); /* before fs_in: its count folds */
	if (!f->fs_in)
		return;
	f->fs_in = false;
	if (s->n_forget == KM_FSESS_FORGET_MAX) {
		s->forget_overflow = true; /* the next Fetch is full */
		return;
	}
	g = &s->forget[s->n_forget++];
	snprintf(g->topic, sizeof(g->topic), "%s", f->cfg.topic);
	memcpy(g->topic_id, f->topic_id, KM_WIRE_UUID_BYTES);
	g->partition = f->cfg.partition;
}

bool km_fsess_inc_session_error(int16_t err)
{
	return err == KM_KERR_FETCH_SESSION_ID_NOT_FOUND ||
	       err == KM_KERR_INVALID_FETCH_SESSION_EPOCH ||
	       err == KERR_FETCH_SESSION_TOPIC_ID;
}

/* The members in the session that this Fetch does not ask (all on the
 * dirty list: one off it is asked without a word), then those that left,
 * into sc->fg. @return how many, or -1: more than fit. */
static int gather_forgotten(struct km_fsess *s)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;
	uint32_t n = 0;

	if (s->forget_overflow)
		return -1;
	for (const struct km_fetcher *f = s->dirty; f != NULL; f = f->dnext) {
		if (!f->fs_in || f->ask_slot >= 0)
			continue;
		if (n == KM_FETCHER_ASK_MAX)
			return -1;
		sc->fg[n++] = (struct km_fetcher_fg){ f->cfg.topic, f->topic_id,
						      f->cfg.partition };
	}
	for (uint32_t i = 0; i < s->n_forget; i++) {
		const struct km_fsess_forget *g = &s->forget[i];

		if (n == KM_FETCHER_ASK_MAX)
			return -1;
		sc->fg[n++] = (struct km_fetcher_fg){ g->topic, g->topic_id,
						      g->partition };
	}
	return (int)n;
}

/* sc->fg[0, n) grouped by topic into the request's ForgottenTopicsData
 * (by id from v13). @return its bytes on the wire at most. */
static uint64_t layout_forgotten(struct km_fsess *s, struct km_fetch_req *m,
				 uint32_t n)
{
	struct km_fetcher_scratch *sc = s->pool->cfg.scratch;
	uint64_t bytes = 0;
	uint32_t nt = 0, at = 0;

	for (uint32_t i = 0; i < n; i++) {
		uint32_t t;

		for (t = 0; t < nt; t++)
			if (strcmp(sc->fg_topics[t].name.s, sc->fg[i].topic) == 0)
				break;
		if (t == nt) {
			km_wire_name_set(&sc->fg_topics[t].name, sc->fg[i].topic);
			memcpy(sc->fg_ids[t], sc->fg[i].topic_id,
			       KM_WIRE_UUID_BYTES);
			sc->fg_topics[t].count = 0;
			nt++;
			bytes += 24u + strlen(sc->fg[i].topic);
		}
		sc->fg_topics[t].count++;
		bytes += FG_PART_BYTES;
	}
	for (uint32_t t = 0; t < nt; t++) {
		sc->fg_topics[t].first = at;
		at += sc->fg_topics[t].count;
		sc->fg_topics[t].count = 0; /* now the fill cursor */
	}
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t t = 0; t < nt; t++)
			if (strcmp(sc->fg_topics[t].name.s, sc->fg[i].topic) == 0) {
				struct km_proto_topic *tp = &sc->fg_topics[t];

				sc->fg_parts[tp->first + tp->count++] =
					sc->fg[i].partition;
				break;
			}
	m->forgotten = sc->fg_topics;
	m->forgotten_max = m->n_forgotten = nt;
	m->forgotten_parts = sc->fg_parts;
	m->forgotten_parts_max = m->n_forgotten_parts = n;
	m->forgotten_ids = sc->fg_ids;
	return bytes;
}

static bool changed(const struct km_fetcher *f)
{
	/* fetch_part() left the values it wrote in inflight_offset and
	 * stats.max_bytes. */
	return !f->fs_in || f->fs_offset != f->inflight_offset ||
	       f->fs_max_bytes != f->stats.max_bytes;
}

/* The bytes of the partitions of m that changed, with their topics. */
static uint64_t changed_bytes(const struct km_fsess *s,
			      const struct km_fetch_req *m)
{
	uint64_t bytes = 0;

	for (uint32_t t = 0; t < m->n_topics; t++) {
		const struct km_proto_topic *tp = &m->topics[t];
		uint32_t n = 0;

		for (uint32_t i = tp->first; i < tp->first + tp->count; i++)
			n += changed(s->asked[i]);
		if (n > 0)
			bytes += 24u + (uint64_t)tp->name.len + 28u * n;
	}
	return bytes;
}

/* Keep, in place, the partitions of m that changed (m->parts[i] is
 * s->asked[i]'s); topics left with none go. */
static void keep_changed(struct km_fsess *s, struct km_fetch_req *m)
{
	uint32_t nt = 0, np = 0;

	for (uint32_t t = 0; t < m->n_topics; t++) {
		struct km_proto_topic tp = m->topics[t];
		uint32_t first = np;

		for (uint32_t i = tp.first; i < tp.first + tp.count; i++)
			if (changed(s->asked[i]))
				m->parts[np++] = m->parts[i];
		if (np == first)
			continue;
		m->topics[nt] = tp;
		m->topics[nt].first = first;
		m->topics[nt].count = np - first;
		if (m->topic_ids != NULL)
			memcpy(m->topic_ids[nt], m->topic_ids[t],
			       KM_WIRE_UUID_BYTES);
		nt++;
	}
	m->n_topics = nt;
	m->n_parts = np;
}

/* f is in the session at the line this Fetch gave it, or out. */
static void sent(struct km_fsess *s, struct km_fetcher *f)
{
	if (f->ask_slot < 0) {
		km_fsess_dirty_add(s, f);
		f->fs_in = false;
		return;
	}
	f->fs_in = true;
	f->fs_offset = f->inflight_offset;
	f->fs_max_bytes = f->stats.max_bytes;
	km_fsess_dirty_clean(s, f);
}

/* The members this Fetch asks are the session now, with what it says of
 * them; the others are out (forgotten, or never in). A full Fetch says so
 * of every member, an incremental one of the dirty only: the others are
 * in, unchanged. */
static void mark_sent(struct km_fsess *s, uint32_t written, bool full)
{
	struct km_fetcher *f, *next;

	for (f = full ? s->members : s->dirty; f != NULL; f = next) {
		next = full ? f->next : f->dnext;
		sent(s, f);
	}
	s->n_forget = 0;
	s->forget_overflow = false;
	s->fs_written = written;
}

bool km_fsess_inc_possible(const struct km_fsess *s)
{
	return s->v_fetch >= 7 && s->fs_id != 0 && s->fs_epoch > 0 &&
	       !s->forget_overflow;
}

int km_fsess_inc_build(struct km_fsess *s, struct km_fetch_req *m,
		       int16_t version, bool from_dirty)
{
	bool full = !from_dirty || version < 7 || s->fs_id == 0 ||
		    s->fs_epoch <= 0 || version != s->fs_ver;
	int n_fg = full ? -1 : gather_forgotten(s);

	m->n_forgotten = m->n_forgotten_parts = 0;
	if (n_fg >= 0 &&
	    FG_FIXED_BYTES + changed_bytes(s, m) +
	    layout_forgotten(s, m, (uint32_t)n_fg) > KM_FSESS_REQ_BYTES)
		n_fg = -1;
	if (n_fg < 0 && from_dirty)
		return 1; /* a full Fetch names every member ready */
	if (n_fg < 0) {
		m->n_forgotten = m->n_forgotten_parts = 0;
		s->fs_full = true;
		s->fs_ver = version;
		m->session_id = s->fs_id;
		m->session_epoch = version >= 7 ? 0 : -1;
		s->stats.fetch_full++;
	} else {
		keep_changed(s, m);
		s->fs_full = false;
		m->session_id = s->fs_id;
		m->session_epoch = s->fs_epoch;
		s->stats.fetch_incremental++;
		s->stats.fetch_forgotten += (uint32_t)n_fg;
	}
	s->fs_forgot = n_fg > 0 ? (uint32_t)n_fg : 0;
	mark_sent(s, m->n_parts, n_fg < 0);
	return 0;
}

void km_fsess_inc_unsent(struct km_fsess *s)
{
	/* The Fetch was built, and the session's view of each partition
	 * moved with it, but the connection did not take it (its queue full,
	 * or re-authenticating: snet.c): the broker's session still holds
	 * the offsets before it. An incremental Fetch that then left out a
	 * partition whose offset we believe was sent had the broker serve it
	 * from its old offset, below ours, forever (seen under KIP-368). A
	 * full Fetch with the session's id replaces the broker's view. */
	if (s->fs_full)
		s->stats.fetch_full--;
	else
		s->stats.fetch_incremental--;
	s->stats.fetch_forgotten -= s->fs_forgot;
	km_fsess_inc_reset(s, true);
}

void km_fsess_inc_answered(struct km_fsess *s, int32_t session_id)
{
	if (s->inflight_ver < 7)
		return;
	if (session_id == 0) {
		/* No session: the next Fetch is full again (and may get one). */
		if (s->fs_full)
			s->stats.fetch_sessionless++;
		km_fsess_inc_reset(s, false);
		return;
	}
	if (s->fs_full) {
		s->fs_id = session_id;
		s->fs_epoch = 1;
		return;
	}
	s->fs_epoch = s->fs_epoch == INT32_MAX ? 1 : s->fs_epoch + 1;
}

void km_fsess_inc_error(struct km_fsess *s, int16_t err)
{
	s->stats.fetch_session_errors++;
	KM_INFO("fsess", "source %s:%u answered a Fetch of session %d epoch %d "
		"with %s; opening a new session with a full Fetch",
		s->target.host, (unsigned)s->target.port, (int)s->fs_id,
		(int)s->fs_epoch, km_kerr_name(err));
	/* Kafka's client closes the session it had on an epoch error and
	 * forgets the id that was not found. */
	km_fsess_inc_reset(s, err != KM_KERR_FETCH_SESSION_ID_NOT_FOUND);
}
