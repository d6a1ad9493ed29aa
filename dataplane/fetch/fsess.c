/* Fetch sessions: the pool, the sessions of each bootstrap list, which
 * partition rides on which connection, and moving partitions between them.
 * See fsess.h. */
#include "dataplane/fetch/fetcher_pvt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"

/* ---- the pool ---- */

size_t km_fsess_pool_memsize(uint32_t sessions_max)
{
	return (size_t)sessions_max * sizeof(struct km_fsess);
}

int km_fsess_pool_init(struct km_fsess_pool *p, const struct km_fsess_pool_config *cfg,
		  struct km_net *net, void *mem)
{
	uint32_t bufs;

	if (!net || !mem || !cfg->scratch || cfg->sessions_max == 0 ||
	    cfg->sessions_max > KM_FSESS_POOL_MAX || cfg->rx_buf_bytes == 0)
		return -EINVAL;
	bufs = cfg->rx_bufs_max < KM_KFRAME_SEGS_MAX ? cfg->rx_bufs_max
						     : KM_KFRAME_SEGS_MAX;
	if ((uint64_t)bufs * cfg->rx_buf_bytes < KM_FETCHER_BUDGET_MIN)
		return -EINVAL;
	memset(p, 0, sizeof(*p));
	p->net = net;
	p->cfg = *cfg;
	p->sess = mem;
	memset(mem, 0, km_fsess_pool_memsize(cfg->sessions_max));
	return 0;
}

bool km_fsess_pool_idle(const struct km_fsess_pool *p)
{
	for (uint32_t i = 0; i < p->cfg.sessions_max; i++)
		if (p->sess[i].used)
			return false;
	return true;
}

const struct km_fsess *km_fsess_pool_session(const struct km_fsess_pool *p, uint32_t i)
{
	return i < p->cfg.sessions_max && p->sess[i].used ? &p->sess[i] : NULL;
}

static void stats_add(struct km_fsess_stats *to, const struct km_fsess_stats *s)
{
	const uint64_t *a = (const uint64_t *)s;
	uint64_t *b = (uint64_t *)to;

	/* Every field is a uint64_t counter. */
	for (size_t i = 0; i < sizeof(*s) / sizeof(uint64_t); i++)
		b[i] += a[i];
}

void km_fsess_pool_get_stats(const struct km_fsess_pool *p, struct km_fsess_pool_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->sessions_opened = p->opened;
	out->slots_exhausted = p->exhausted;
	out->sum = p->closed_sum;
	for (uint32_t i = 0; i < p->cfg.sessions_max; i++) {
		const struct km_fsess *s = &p->sess[i];

		if (!s->used)
			continue;
		out->sessions_open++;
		if (s->conn != NULL && s->phase == KM_FPH_READY)
			out->sessions_connected++;
		stats_add(&out->sum, &s->stats);
	}
}

uint32_t km_fsess_pool_conns(const struct km_fsess_pool *p, struct km_fsess_pool_conn *out,
			uint32_t cap)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < p->cfg.sessions_max && n < cap; i++) {
		const struct km_fsess *s = &p->sess[i];

		if (!s->used || s->conn == NULL || s->closed)
			continue;
		snprintf(out[n].peer, sizeof(out[n].peer), "%s:%u",
			 s->target_ip, (unsigned)s->target.port);
		km_net_conn_get_stats(s->conn, &out[n].st);
		out[n].fetch_session_id = s->fs_id;
		out[n].fetch_session_epoch = s->fs_epoch;
		n++;
	}
	return n;
}

/* ---- groups ---- */

static bool same_addr(const struct km_fetcher_addr *a,
		      const struct km_fetcher_addr *b)
{
	return a->port == b->port && strcmp(a->host, b->host) == 0;
}

/* Sessions of one bootstrap list (in its order) form a group. */
static bool same_group(const struct km_fsess *s,
		       const struct km_fetcher_addr *boot, uint32_t n)
{
	if (s->n_bootstrap != n)
		return false;
	for (uint32_t i = 0; i < n; i++)
		if (!same_addr(&s->bootstrap[i], &boot[i]))
			return false;
	return true;
}

static struct km_fsess *find_discovery(struct km_fsess_pool *p,
				       const struct km_fsess *like)
{
	for (uint32_t i = 0; i < p->cfg.sessions_max; i++) {
		struct km_fsess *s = &p->sess[i];

		if (s->used && !s->pinned && s != like &&
		    same_group(s, like->bootstrap, like->n_bootstrap))
			return s;
	}
	return NULL;
}

/* The group's session pinned to ip:port for f: f's own, else one with
 * room (KM_FSESS_MEMBERS_MAX), else, if full_ok, a full one; NULL if
 * none. f may be NULL (a session with room only). */
static struct km_fsess *find_pinned(struct km_fsess_pool *p,
				    const struct km_fsess *like,
				    const char *ip, uint16_t port,
				    const struct km_fetcher *f, bool full_ok)
{
	struct km_fsess *full = NULL;

	for (uint32_t i = 0; i < p->cfg.sessions_max; i++) {
		struct km_fsess *s = &p->sess[i];

		if (!s->used || !s->pinned || s->pin.port != port ||
		    strcmp(s->pin_ip, ip) != 0 ||
		    !same_group(s, like->bootstrap, like->n_bootstrap))
			continue;
		if ((f != NULL && s == f->sess) ||
		    s->n_members < KM_FSESS_MEMBERS_MAX)
			return s;
		full = full != NULL ? full : s;
	}
	return full_ok ? full : NULL;
}

static struct km_fsess *free_slot(struct km_fsess_pool *p)
{
	for (uint32_t i = 0; i < p->cfg.sessions_max; i++)
		if (!p->sess[i].used)
			return &p->sess[i];
	p->exhausted++;
	return NULL;
}

/* Receive budget and the clamped MaxBytes: one response queued behind a
 * held one must still fit (fetcher.h). */
static void set_budget(struct km_fsess *s)
{
	const struct km_fsess_pool_config *c = &s->pool->cfg;
	uint64_t half;

	s->budget_bufs = c->rx_bufs_max < KM_KFRAME_SEGS_MAX
				 ? c->rx_bufs_max : KM_KFRAME_SEGS_MAX;
	s->budget_bytes = (uint64_t)s->budget_bufs * c->rx_buf_bytes;
	half = s->budget_bytes / 2 - KM_FETCHER_RESP_OVERHEAD;
	s->max_bytes = (uint64_t)s->cfg_max_bytes < half ? s->cfg_max_bytes
							 : (int32_t)half;
}

/* A fresh session of f's group (its timing is f's). */
static struct km_fsess *open_from_config(struct km_fsess_pool *p,
					 const struct km_fetcher_config *c)
{
	struct km_fsess *s = free_slot(p);

	if (s == NULL)
		return NULL;
	memset(s, 0, sizeof(*s));
	s->pool = p;
	s->used = true;
	memcpy(s->bootstrap, c->bootstrap, sizeof(s->bootstrap));
	s->n_bootstrap = c->n_bootstrap;
	s->max_wait_ms = c->max_wait_ms;
	s->cfg_max_bytes = c->max_bytes;
	s->backoff_min_ms = s->backoff_ms = c->backoff_ms;
	s->backoff_max_ms = c->backoff_max_ms;
	s->request_timeout_ms = c->request_timeout_ms;
	s->throttle = c->throttle;
	s->v_api_ask = 3; /* the highest kafka/proto.h speaks */
	s->v_apiversions = s->v_metadata = s->v_listoffsets = s->v_fetch = -1;
	s->inflight = KM_FREQ_NONE;
	set_budget(s);
	p->opened++;
	return s;
}

/* A fresh session of from's group, knowing what from knows. */
static struct km_fsess *open_like(struct km_fsess *from)
{
	struct km_fsess *s = free_slot(from->pool);
	struct km_fsess_stats zero = {0};

	if (s == NULL)
		return NULL;
	memcpy(s, from, offsetof(struct km_fsess, members));
	s->members = NULL;
	s->n_members = 0;
	km_fsess_dirty_reset(s);
	km_fsess_inc_reset(s, false);
	s->pinned = false;
	s->rr = 0;
	s->backoff_ms = s->backoff_min_ms;
	s->conn = NULL;
	s->phase = KM_FPH_IDLE;
	s->dropping = s->closed = s->lost = s->connect_failed = false;
	s->healthy = s->versions_known = s->handover = false;
	s->refresh = s->overflow = false;
	s->v_api_ask = 3;
	s->v_apiversions = s->v_metadata = s->v_listoffsets = s->v_fetch = -1;
	s->inflight = KM_FREQ_NONE;
	s->send_busy = false;
	s->proto_streak = 0;
	s->quiet_until_ms = 0;
	s->n_asked = 0;
	s->frame = NULL;
	s->frame_users = 0;
	s->n_held = 0;
	s->look = s->wait_due = s->pre_due = s->fetch_due = true;
	s->done_held = false;
	s->look_at_ms = s->pre_at_ms = s->fetch_at_ms = 0;
	s->retry_at_ms = s->meta_at_ms = 0;
	s->stats = zero;
	set_budget(s);
	from->pool->opened++;
	return s;
}

/* ---- members ---- */

/* Both ways, with the tail, so that a join or a leave costs the same
 * whatever the session holds (issue 17: 10,000 partitions started in
 * O(N^2) walks to the tail). */
static void link_member(struct km_fsess *s, struct km_fetcher *f)
{
	/* At the tail: the rotation of Fetch requests starts at the head. */
	f->next = NULL;
	f->prev = s->tail;
	if (s->tail != NULL)
		s->tail->next = f;
	else
		s->members = f;
	s->tail = f;
	f->sess = s;
	s->n_members++;
	km_fsess_member_in(s, f);
	s->look = s->wait_due = s->pre_due = s->fetch_due = true;
}

static void unlink_member(struct km_fetcher *f)
{
	struct km_fsess *s = f->sess;

	KM_ASSERT(!f->in_frame);
	km_fsess_unask(f);
	km_fsess_inc_leave(s, f);
	km_fsess_member_out(s, f);
	f->in_meta = false;
	if (f->prev != NULL)
		f->prev->next = f->next;
	else
		s->members = f->next;
	if (f->next != NULL)
		f->next->prev = f->prev;
	else
		s->tail = f->prev;
	f->next = f->prev = NULL;
	f->sess = NULL;
	s->n_members--;
}

/* A partition joins s: it starts at once if s can fetch for it. */
static void join(struct km_fsess *s, struct km_fetcher *f)
{
	link_member(s, f);
	if (s->conn != NULL && s->phase == KM_FPH_READY && !s->dropping)
		f->opened_once = true; /* no new connection for it */
	if (f->phase == KM_FP_WAIT && s->pinned && km_fsess_ready(s))
		km_fetcher_start(f);
}

static void move(struct km_fetcher *f, struct km_fsess *to)
{
	struct km_fsess *from = f->sess;

	unlink_member(f);
	from->stats.moves_out++;
	to->stats.moves_in++;
	f->stats.session_moves++;
	f->moving_warned = false;
	join(to, f);
}

int km_fsess_attach(struct km_fsess_pool *p, struct km_fetcher *f)
{
	struct km_fsess *s = NULL;

	/* Its group's discovery session, else any of its sessions: they
	 * ask Metadata for it and send it on. */
	for (uint32_t i = 0; i < p->cfg.sessions_max; i++) {
		struct km_fsess *c = &p->sess[i];

		if (!c->used || !same_group(c, f->cfg.bootstrap,
					    f->cfg.n_bootstrap))
			continue;
		if (s == NULL || !c->pinned)
			s = c;
		if (!c->pinned)
			break;
	}
	if (s == NULL && (s = open_from_config(p, &f->cfg)) == NULL)
		return -ENOSPC;
	join(s, f);
	return 0;
}

/* ---- routing after Metadata ---- */

static void no_slot(struct km_fetcher *f)
{
	if (!f->moving_warned)
		KM_WARN("fsess", "%s-%d: no free fetch session for leader "
			"%s:%u (%u in use); retrying", f->cfg.topic,
			(int)f->cfg.partition, f->stats.leader.host,
			(unsigned)f->stats.leader.port,
			f->pool->cfg.sessions_max);
	f->moving_warned = true;
	km_fetcher_need_leader(f, km_fetcher_backoff(f));
}

/* A new session like s pinned to the broker at l (ip); NULL if no slot. */
static struct km_fsess *open_pinned(struct km_fsess *s,
				    const struct km_fetcher_addr *l,
				    const char *ip)
{
	struct km_fsess *t = open_like(s);

	if (t != NULL) {
		t->pinned = true;
		t->pin = *l;
		memcpy(t->pin_ip, ip, sizeof(t->pin_ip));
	}
	return t;
}

/* Where a partition goes for s's broker, s being over
 * KM_FSESS_MEMBERS_MAX or a discovery session: a pinned session with
 * room, else (the broker's being full) a new one; for a discovery session
 * with no slot free, a full one. NULL: none (a discovery session becomes
 * the broker's; a full one keeps it). */
static struct km_fsess *room_for(struct km_fsess *s)
{
	struct km_fsess *t = find_pinned(s->pool, s, s->target_ip,
					 s->target.port, NULL, false);
	struct km_fsess *full = find_pinned(s->pool, s, s->target_ip,
					    s->target.port, NULL, true);

	if (t == NULL && (full != NULL || s->pinned))
		t = open_pinned(s, &s->target, s->target_ip);
	return t != NULL || s->pinned ? t : full;
}

/* s is connected to f's leader: it stays, unless s holds more than one
 * Fetch asks (KM_FSESS_MEMBERS_MAX: thousands of partitions on one
 * broker take several sessions, each its own connection, issue 17). A
 * discovery session becomes the leader's session unless the group has
 * one. */
static void stay(struct km_fsess *s, struct km_fetcher *f)
{
	struct km_fsess *t = NULL;

	if (!s->pinned || s->n_members > KM_FSESS_MEMBERS_MAX)
		t = room_for(s);
	if (t != NULL && t != s) {
		f->phase = KM_FP_WAIT;
		move(f, t);
		return;
	}
	if (!s->pinned) {
		s->pinned = true;
		s->pin = s->target;
		memcpy(s->pin_ip, s->target_ip, sizeof(s->pin_ip));
	}
	f->phase = KM_FP_WAIT;
	km_fetcher_start(f);
}

void km_fsess_route(struct km_fsess *s, struct km_fetcher *f)
{
	const struct km_fetcher_addr *l = &f->stats.leader;
	char ip[KM_FETCHER_IPV4_BYTES];
	struct km_fsess *t;
	int rc = km_fetcher_resolve(s->pool, l->host, ip);

	if (rc == -EAGAIN) {
		km_fetcher_need_leader(f, km_fetcher_backoff(f));
		return;
	}
	if (rc < 0) {
		km_fetcher_fail(f, "leader %d at %s:%u: %s (not an IPv4 "
				"address, and no resolver maps it)",
				(int)f->stats.leader_id, l->host,
				(unsigned)l->port, km_strerror(rc));
		return;
	}
	if (km_fsess_ready(s) && strcmp(ip, s->target_ip) == 0 &&
	    l->port == s->target.port) {
		stay(s, f);
		return;
	}
	t = find_pinned(s->pool, s, ip, l->port, f, false);
	if (t == s) {
		/* Its session, closing meanwhile: it starts on reconnect. */
		f->phase = KM_FP_WAIT;
		s->wait_due = true;
		return;
	}
	if (t == NULL && (t = open_pinned(s, l, ip)) == NULL)
		t = find_pinned(s->pool, s, ip, l->port, f, true);
	if (t == NULL && !s->pinned && s->n_members == 1) {
		/* No slot for its leader's session, and this discovery session
		 * serves only it: become that session. */
		s->pinned = true;
		s->pin = *l;
		memcpy(s->pin_ip, ip, sizeof(s->pin_ip));
		f->phase = KM_FP_WAIT;
		s->wait_due = true;
		km_fsess_drop(s, false);
		return;
	}
	if (t == NULL) {
		no_slot(f);
		return;
	}
	f->phase = KM_FP_WAIT;
	move(f, t);
}

void km_fsess_rotate(struct km_fetcher *f)
{
	struct km_fsess *s = f->sess;
	struct km_fsess *d;

	if (!s->pinned) {
		/* Discovery: reconnect through the next broker. */
		km_fsess_drop(s, true);
		return;
	}
	d = find_discovery(s->pool, s);
	if (d == NULL && (d = open_like(s)) == NULL)
		return; /* stays: Metadata here again after backoff */
	move(f, d);
}

void km_fsess_start_waiting(struct km_fsess *s)
{
	struct km_fetcher *f;

	if (!s->wait_due || !s->pinned || !km_fsess_ready(s))
		return;
	s->wait_due = false;
	/* A member waiting is on the dirty list (fsess_dirty.c), and stays
	 * there as it starts. */
	for (f = s->dirty; f != NULL; f = f->dnext)
		if (f->phase == KM_FP_WAIT)
			km_fetcher_start(f);
}

/* ---- stepping ---- */

/* Partitions that FAILED or stopped leave once no write of theirs reads
 * the held frame. */
static int sweep(struct km_fsess *s)
{
	struct km_fetcher *f = s->members, *next;
	int n = 0;

	for (; f != NULL; f = next) {
		next = f->next;
		if (f->phase == KM_FP_DONE && !f->in_frame) {
			unlink_member(f);
			n++;
		}
	}
	return n;
}

/* The connection failed before it was of use: the broker may be gone.
 * Discovery takes the partitions (this session becomes it if the group
 * has none). */
static void hand_over(struct km_fsess *s)
{
	struct km_fsess *d = find_discovery(s->pool, s);
	struct km_fetcher *f, *next;

	s->handover = false;
	if (d == NULL) {
		s->pinned = false;
		return;
	}
	for (f = s->members; f != NULL; f = next) {
		next = f->next;
		km_fetcher_need_leader(f, 0);
		move(f, d);
	}
}

/* No partition left: close, then free the slot. */
static int close_empty(struct km_fsess *s)
{
	if (s->conn != NULL) {
		if (!s->dropping)
			km_fsess_drop(s, false);
		return 0;
	}
	if (s->frame != NULL)
		return 0;
	if (s->closed)
		km_fsess_conn_gone(s);
	km_kframe_reset(&s->kf);
	stats_add(&s->pool->closed_sum, &s->stats);
	s->used = false;
	return 1;
}

/* The stall watchdog over the members, and the earliest deadline it
 * keeps (a member CONNECTING since trouble, FAILED after unavailable_ms):
 * only when look says something changed, or at that deadline, so that
 * quiet members cost nothing per turn. */
static void look(struct km_fsess *s, uint64_t now)
{
	uint64_t at = 0;

	if (!s->look && (s->look_at_ms == 0 || now < s->look_at_ms))
		return;
	s->look = false;
	s->pool->looks++;
	for (struct km_fetcher *f = s->members; f != NULL; f = f->next) {
		uint64_t due;

		km_fetcher_watch(f, now);
		if (f->phase == KM_FP_DONE) {
			/* Swept now, or once the frame it is in goes. */
			s->look = true;
			s->done_held = s->done_held || f->in_frame;
			continue;
		}
		if (f->trouble_ms == 0 || f->state == KM_FETCHER_MIRRORING ||
		    f->cfg.unavailable_ms == 0)
			continue;
		due = f->trouble_ms + f->cfg.unavailable_ms;
		if (at == 0 || due < at)
			at = due;
	}
	s->look_at_ms = at;
}

static int sess_step(struct km_fsess *s, uint64_t now)
{
	int moved = 0;

	look(s, now);
	if (s->frame != NULL)
		moved |= km_fsess_drain(s);
	if (s->look) {
		moved |= sweep(s) > 0;
		s->look = false;
	}
	if (s->n_members == 0)
		return close_empty(s) | moved;
	if (s->handover && s->conn == NULL && s->frame == NULL) {
		hand_over(s);
		if (s->n_members == 0)
			return 1;
	}
	return km_fsess_conn_step(s) | moved;
}

int km_fsess_pool_step(struct km_fsess_pool *p)
{
	uint64_t now = km_fetcher_now_ms();
	int moved = 0;

	for (uint32_t i = 0; i < p->cfg.sessions_max; i++)
		if (p->sess[i].used)
			moved |= sess_step(&p->sess[i], now);
	return moved;
}
