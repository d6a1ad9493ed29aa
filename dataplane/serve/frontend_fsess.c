/* KIP-227 incremental fetch sessions served to clients, as Kafka's
 * FetchManager and FetchSessionCache serve them (Kafka's Java consumer
 * asks for them from Fetch v7; librdkafka 2.0.2 does not).
 *
 * - SessionEpoch -1 (FINAL) or 0 (INITIAL) is a full Fetch: a session it
 *   names is removed; with epoch 0 a new session holding every partition
 *   of the request is made if a slot is free (else the answer says
 *   SessionId 0 and the client goes on with full Fetches).
 * - A positive epoch names a session: unknown id FETCH_SESSION_ID_NOT_FOUND
 *   (70), another epoch INVALID_FETCH_SESSION_EPOCH (71), both with no
 *   partition and SessionId 0, as Kafka's SessionErrorContext. Else the
 *   request's partitions are added or updated (offset, MaxBytes), its
 *   ForgottenTopicsData removed, the epoch moves on, and the Fetch is
 *   evaluated over every partition of the session; the answer names only
 *   those with records, an error, or a high watermark, last stable offset
 *   or log start other than last answered (Kafka compares no LSO: ours
 *   may move on its own a tick after the high watermark for a partition
 *   of another worker, and a read_committed client must see it). A
 *   partition answered with records moves to the end of the session, as
 *   Kafka's IncrementalFetchContext moves it, so that the partitions with
 *   records in one response (KM_FRONTEND_GAPS_MAX) take turns.
 * - A session left empty is removed and the request answered without one.
 * - A partition not here (unknown topic or partition) is never kept in a
 *   session: a full Fetch naming one makes none, an incremental one adding
 *   one removes the session; either is answered over the partitions it
 *   names with SessionId 0, which Kafka's client takes as "full Fetches
 *   from now on". So is an incremental Fetch the entry pool has no room
 *   for.
 *
 * The cache belongs to the worker's front end (one per listening worker):
 * a session made through one worker's listener is not found through
 * another's (70: the client starts a new one). Slots: max.incremental.
 * fetch.session.cache.slots. Eviction when full, as Kafka's tryEvict for
 * clients (no session here is a follower's): the least recently used
 * session unused for 120 s; else the smallest session made at least 120 s
 * ago, if no larger than the new one; else no session. Ids carry their
 * slot: id = gen * slots + slot + 1, so a lookup is one comparison.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/km_assert.h"
#include "dataplane/serve/frontend_pvt.h"

#define NIL UINT32_MAX
/* Kafka's evictionMs (KafkaBroker.MIN_INCREMENTAL_FETCH_SESSION_
 * EVICTION_MS). */
#define EVICT_MS 120000u
/* A partition's bytes in a response at most: fields and its own topic
 * (fetch_bound's terms). */
#define ENT_BOUND(p) (48u + 8u + (uint32_t)strlen((p)->topic))

int km_frontend_fsess_init(struct km_frontend *fe, uint32_t slots,
			   uint32_t ents_max)
{
	struct fe_fscache *c = &fe->fsc;

	memset(c, 0, sizeof(*c));
	c->free_head = NIL;
	if (slots == 0)
		return 0;
	c->sess = calloc(slots, sizeof(*c->sess));
	c->ents = calloc(ents_max, sizeof(*c->ents));
	c->topics = calloc(fe->topics_max, sizeof(*c->topics));
	c->first = calloc(fe->topics_max, sizeof(*c->first));
	if (c->sess == NULL || c->ents == NULL || c->topics == NULL ||
	    c->first == NULL) {
		km_frontend_fsess_free(fe);
		return -ENOMEM;
	}
	c->slots = slots;
	c->ents_max = ents_max;
	for (uint32_t i = 0; i < slots; i++)
		c->sess[i].head = c->sess[i].tail = NIL;
	for (uint32_t i = 0; i < ents_max; i++)
		c->ents[i].next = i + 1 < ents_max ? i + 1 : NIL;
	c->free_head = 0;
	c->gen = (uint32_t)(km_frontend_now_ms() * 2654435761u);
	return 0;
}

void km_frontend_fsess_free(struct km_frontend *fe)
{
	free(fe->fsc.sess);
	free(fe->fsc.ents);
	free(fe->fsc.topics);
	free(fe->fsc.first);
	memset(&fe->fsc, 0, sizeof(fe->fsc));
}

static struct fe_fsession *find(struct fe_fscache *c, int32_t id)
{
	struct fe_fsession *s;

	if (id <= 0 || c->slots == 0)
		return NULL;
	s = &c->sess[(uint32_t)(id - 1) % c->slots];
	return s->id == id ? s : NULL;
}

static void drop(struct km_frontend *fe, struct fe_fsession *s)
{
	struct fe_fscache *c = &fe->fsc;
	uint32_t e = s->head, next;

	for (; e != NIL; e = next) {
		next = c->ents[e].next;
		c->ents[e].next = c->free_head;
		c->free_head = e;
	}
	memset(s, 0, sizeof(*s));
	s->head = s->tail = NIL;
	fe->st.fetch_sessions--;
}

static uint32_t ent_new(struct fe_fscache *c)
{
	uint32_t e = c->free_head;

	if (e != NIL) {
		c->free_head = c->ents[e].next;
		c->ents[e].next = NIL;
	}
	return e;
}

static void append(struct fe_fscache *c, struct fe_fsession *s, uint32_t e)
{
	c->ents[e].next = NIL;
	if (s->tail == NIL)
		s->head = e;
	else
		c->ents[s->tail].next = e;
	s->tail = e;
}

/* A slot for a session of n partitions: a free one, else an evicted one
 * (see the top), else NULL. */
static struct fe_fsession *take_slot(struct km_frontend *fe, uint32_t n,
				     uint64_t now)
{
	struct fe_fscache *c = &fe->fsc;
	struct fe_fsession *stale = NULL, *small = NULL;

	for (uint32_t i = 0; i < c->slots; i++) {
		struct fe_fsession *s = &c->sess[i];

		if (s->id == 0)
			return s;
		if (now - s->used_ms > EVICT_MS &&
		    (stale == NULL || s->used_ms < stale->used_ms))
			stale = s;
		if (now - s->created_ms > EVICT_MS &&
		    (small == NULL || s->n < small->n))
			small = s;
	}
	if (stale == NULL && small != NULL && small->n <= n)
		stale = small;
	if (stale == NULL)
		return NULL;
	drop(fe, stale);
	fe->st.fetch_sessions_evicted++;
	return stale;
}

/* Epoch 0: a session of every partition the request names, if all are
 * here and a slot and the entries are free. */
static void create(struct fe_conn *fc, uint64_t now)
{
	struct km_frontend *fe = fc->fe;
	struct fe_fscache *c = &fe->fsc;
	struct fe_fetch *f = fc->fetch;
	struct fe_fsession *s;
	uint32_t n = f->req.n_parts;

	for (uint32_t i = 0; i < n; i++)
		if (f->res[i].p == NULL)
			return;
	if (n == 0 || (s = take_slot(fe, n, now)) == NULL)
		return;
	s->head = s->tail = NIL;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t e = ent_new(c);

		if (e == NIL) {
			s->n = 0;
			fe->st.fetch_sessions++; /* drop() counts it out */
			drop(fe, s);
			return;
		}
		c->ents[e] = (struct fe_fsent){ f->res[i].p,
			f->parts[i].fetch_offset, f->parts[i].partition_max_bytes,
			-1, -1, -1, NIL };
		append(c, s, e);
		f->res[i].fs_ent = e;
		s->bound += ENT_BOUND(f->res[i].p);
	}
	s->n = n;
	/* A new generation each time, so that a client holding an evicted
	 * session's id meets 70, not another client's session. */
	c->gen++;
	s->id = (int32_t)((uint64_t)(c->gen % ((INT32_MAX - c->slots) / c->slots)) *
			  c->slots + (uint32_t)(s - c->sess) + 1);
	KM_ASSERT(find(c, s->id) == s);
	s->epoch = 1;
	s->created_ms = s->used_ms = now;
	fe->st.fetch_sessions++;
	f->fs = s;
	f->fs_resp_id = s->id;
	f->fs_epoch = s->epoch;
}

/* The entry of partition p in s, or NIL. */
static uint32_t lookup(const struct fe_fscache *c, const struct fe_fsession *s,
		       const struct km_part *p)
{
	for (uint32_t e = s->head; e != NIL; e = c->ents[e].next)
		if (c->ents[e].p == p)
			return e;
	return NIL;
}

/* Take e out of s's list (not freed). */
static void detach(struct fe_fscache *c, struct fe_fsession *s, uint32_t e)
{
	uint32_t *pp = &s->head, prev = NIL;

	while (*pp != e) {
		prev = *pp;
		pp = &c->ents[*pp].next;
	}
	*pp = c->ents[e].next;
	if (s->tail == e)
		s->tail = prev;
	c->ents[e].next = NIL;
}

/* Apply the request's partitions and ForgottenTopicsData to s.
 * @return false: a partition is not here, or no entry is free. */
static bool apply(struct fe_conn *fc, struct fe_fsession *s)
{
	struct fe_fscache *c = &fc->fe->fsc;
	struct fe_fetch *f = fc->fetch;
	const struct km_fetch_req *q = &f->req;

	for (uint32_t t = 0; t < q->n_topics; t++) {
		const struct km_proto_topic *tp = &q->topics[t];

		for (uint32_t i = tp->first; i < tp->first + tp->count; i++) {
			struct km_part *p = km_part_find(fc->fe->table, tp->name.s,
							 f->parts[i].partition);
			uint32_t e = p != NULL ? lookup(c, s, p) : NIL;

			if (p == NULL)
				return false;
			if (e == NIL) {
				if ((e = ent_new(c)) == NIL)
					return false;
				c->ents[e] = (struct fe_fsent){ p, 0, 0, -1, -1,
								-1, NIL };
				append(c, s, e);
				s->n++;
				s->bound += ENT_BOUND(p);
			}
			c->ents[e].fetch_offset = f->parts[i].fetch_offset;
			c->ents[e].max_bytes = f->parts[i].partition_max_bytes;
		}
	}
	for (uint32_t t = 0; t < q->n_forgotten; t++) {
		const struct km_proto_topic *tp = &q->forgotten[t];

		for (uint32_t i = tp->first; i < tp->first + tp->count; i++) {
			struct km_part *p = km_part_find(fc->fe->table, tp->name.s,
							 q->forgotten_parts[i]);
			uint32_t e = p != NULL ? lookup(c, s, p) : NIL;

			if (e == NIL)
				continue;
			s->bound -= ENT_BOUND(p);
			detach(c, s, e);
			c->ents[e].next = c->free_head;
			c->free_head = e;
			s->n--;
		}
	}
	return true;
}

/* The topic index of name among c->topics[0, *nt), added if new.
 * @return the index, or NIL: more topics than the request may name. */
static uint32_t topic_of(struct fe_fscache *c, const char *name, uint32_t *nt,
			 uint32_t nt_max)
{
	for (uint32_t t = 0; t < *nt; t++)
		if (strcmp(c->topics[t], name) == 0)
			return t;
	if (*nt == nt_max)
		return NIL;
	c->topics[*nt] = name;
	c->first[*nt] = 0;
	return (*nt)++;
}

/* The Fetch is now every partition of s, grouped by topic (in the order
 * of each topic's first partition), in session order within a topic.
 * @return false: s holds more topics than a request may name (nothing
 * written). */
static bool rewrite(struct fe_conn *fc, struct fe_fsession *s)
{
	struct fe_fscache *c = &fc->fe->fsc;
	struct fe_fetch *f = fc->fetch;
	struct km_fetch_req *q = &f->req;
	uint32_t nt = 0, at = 0;

	for (uint32_t e = s->head; e != NIL; e = c->ents[e].next) {
		uint32_t t = topic_of(c, c->ents[e].p->topic, &nt,
				      fc->fe->topics_max);

		if (t == NIL)
			return false;
		c->first[t]++; /* a count, for now */
	}
	for (uint32_t t = 0; t < nt; t++) {
		km_wire_name_set(&q->topics[t].name, c->topics[t]);
		q->topics[t].first = at;
		q->topics[t].count = 0;
		at += c->first[t];
	}
	for (uint32_t e = s->head; e != NIL; e = c->ents[e].next) {
		const struct fe_fsent *x = &c->ents[e];
		uint32_t t = topic_of(c, x->p->topic, &nt, nt);
		uint32_t i = q->topics[t].first + q->topics[t].count++;

		f->parts[i] = (struct km_fetch_req_part){ x->p->partition, -1,
			x->fetch_offset, -1, x->max_bytes, -1 };
		f->res[i].p = x->p;
		f->res[i].fs_ent = e;
	}
	q->n_topics = nt;
	q->n_parts = at;
	return true;
}

uint32_t km_frontend_fsess_bound(const struct fe_conn *fc, int16_t version)
{
	const struct km_fetch_req *q = &fc->fetch->req;
	const struct fe_fsession *s;

	if (version < 7 || q->session_epoch <= 0)
		return 0;
	s = find(&fc->fe->fsc, q->session_id);
	return s != NULL ? s->bound : 0;
}

static int16_t incremental(struct fe_conn *fc, uint64_t now)
{
	struct km_frontend *fe = fc->fe;
	struct fe_fetch *f = fc->fetch;
	struct fe_fsession *s = find(&fe->fsc, f->req.session_id);

	if (s == NULL || s->epoch != f->req.session_epoch) {
		fe->st.fetch_session_errors++;
		/* SessionId 0 with epoch > 0 too: Kafka looks session 0 up
		 * (kafka-fsess compares with the broker's answer). */
		return s != NULL ? KM_KERR_INVALID_FETCH_SESSION_EPOCH
				 : KM_KERR_FETCH_SESSION_ID_NOT_FOUND;
	}
	if (!apply(fc, s) || s->n == 0 || s->n > fe->parts_max ||
	    !rewrite(fc, s)) {
		/* Answered over what it names, without a session. */
		drop(fe, s);
		fe->st.fetch_sessionless++;
		return -1;
	}
	s->epoch = s->epoch == INT32_MAX ? 1 : s->epoch + 1;
	s->used_ms = now;
	f->fs = s;
	f->fs_full = false;
	f->fs_resp_id = s->id;
	f->fs_epoch = s->epoch;
	fe->st.fetch_incremental++;
	return KM_KERR_NONE;
}

int16_t km_frontend_fsess_begin(struct fe_conn *fc, int16_t version,
				bool *resolved)
{
	struct km_frontend *fe = fc->fe;
	struct fe_fetch *f = fc->fetch;
	const struct km_fetch_req *q = &f->req;
	uint64_t now = km_frontend_now_ms();
	struct fe_fsession *old;
	int16_t err;

	f->fs = NULL;
	f->fs_full = true;
	f->fs_resp_id = 0;
	*resolved = false;
	if (version < 7) {
		fe->st.fetch_sessionless++;
		return KM_KERR_NONE;
	}
	if (q->session_epoch > 0) {
		err = incremental(fc, now);
		if (err != -1) {
			*resolved = err == KM_KERR_NONE;
			return err;
		}
		return KM_KERR_NONE; /* sessionless over what it names */
	}
	if (q->session_id != 0 && (old = find(&fe->fsc, q->session_id)) != NULL)
		drop(fe, old);
	km_frontend_fetch_resolve(fc);
	*resolved = true;
	if (q->session_epoch == 0 && fe->fsc.slots > 0)
		create(fc, now);
	if (f->fs != NULL)
		fe->st.fetch_full++;
	else
		fe->st.fetch_sessionless++;
	return KM_KERR_NONE;
}

/* Must partition i be in an incremental answer? Then its figures are the
 * session's from now on (Kafka's CachedPartition.maybeUpdateResponseData;
 * an error makes the next answer name it again). */
static bool must_answer(struct fe_fsent *x, const struct fe_fpart *r)
{
	bool must = r->rec_len > 0 || r->err != KM_KERR_NONE ||
		    x->hw != r->hw || x->lso != r->lso ||
		    x->log_start != r->log_start;

	x->hw = r->err != KM_KERR_NONE ? -1 : r->hw;
	x->lso = r->lso;
	x->log_start = r->log_start;
	return must;
}

void km_frontend_fsess_answer(struct fe_conn *fc)
{
	struct fe_fetch *f = fc->fetch;
	struct fe_fscache *c = &fc->fe->fsc;
	struct fe_fsession *s = f->fs;
	uint32_t moved = NIL, moved_tail = NIL;

	/* Another Fetch of the session came meanwhile (another connection),
	 * or it was evicted: its entries are not ours to read any more. The
	 * answer names everything, without a session (the client starts a
	 * new one). */
	if (s != NULL && (s->id != f->fs_resp_id || s->epoch != f->fs_epoch)) {
		f->fs = s = NULL;
		f->fs_full = true;
		f->fs_resp_id = 0;
	}
	for (uint32_t i = 0; i < f->req.n_parts; i++) {
		struct fe_fpart *r = &f->res[i];
		bool must;

		if (s == NULL) {
			r->skip = false;
			continue;
		}
		must = must_answer(&c->ents[r->fs_ent], r);
		r->skip = !f->fs_full && !must;
		if (f->fs_full || r->rec_len == 0)
			continue;
		/* Records: to the end of the session, in answer order. */
		detach(c, s, r->fs_ent);
		if (moved == NIL)
			moved = r->fs_ent;
		else
			c->ents[moved_tail].next = r->fs_ent;
		moved_tail = r->fs_ent;
	}
	if (moved == NIL)
		return;
	if (s->tail == NIL)
		s->head = moved;
	else
		c->ents[s->tail].next = moved;
	s->tail = moved_tail;
}
