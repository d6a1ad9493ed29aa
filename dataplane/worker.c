/* The worker thread: loop, messages, partitions, fetch sessions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/container.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "common/resolve.h"
#include "dataplane/serve/local_write.h"
#include "dataplane/worker_pvt.h"
#include "dataplane/net/snet.h"
#include "kafka/inflate.h"

static uint64_t now_ms(void)
{
	return km_clock_ms();
}

/* ---- replies and rings ---------------------------------------------- */

void km_worker_reply_done(struct km_worker *w, struct km_worker_reply *r,
			  int rc, const char *msg)
{
	uint64_t one = 1;

	if (r == NULL)
		return;
	r->rc = rc;
	snprintf(r->msg, sizeof(r->msg), "%s", msg ? msg : km_strerror(rc));
	atomic_store_explicit(&r->done, 1, memory_order_release);
	if (write(w->cfg.ctl_efd, &one, sizeof(one)) < 0)
		KM_WARN("worker", "worker %u: control wake-up failed: %s", w->cfg.id,
			strerror(errno));
}

int km_worker_wait(int ctl_efd, struct km_worker_reply *reply,
		   int timeout_ms)
{
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

	while (!atomic_load_explicit(&reply->done, memory_order_acquire)) {
		uint64_t v, t = now_ms();
		struct timespec ts = { 0, 1000000 };

		if (timeout_ms >= 0 && t >= deadline)
			return -ETIMEDOUT;
		/* The eventfd is shared by every reply: a read may consume
		 * another's wake-up, so recheck after a short bounded nap
		 * rather than trust one read per reply. */
		if (read(ctl_efd, &v, sizeof(v)) < 0 && errno == EAGAIN)
			nanosleep(&ts, NULL);
	}
	return reply->rc;
}

static void wake(struct km_worker *w)
{
	uint64_t one = 1;

	if (write(w->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		KM_WARN("worker", "worker %u: wake-up failed: %s", w->cfg.id,
			strerror(errno));
}

/* Sender side (worker `from` == w->cfg.id): queue m to worker `to`; a full
 * ring keeps it in the outbox, retried every loop turn. */
bool km_worker_send(struct km_worker *w, uint32_t to, struct wmsg *m)
{
	struct km_worker *peer = w->cfg.peers[to];

	m->next = NULL;
	if (w->outbox == NULL && km_spsc_push(&peer->peer_q[w->cfg.id], m)) {
		wake(peer);
		return true;
	}
	*w->outbox_tail = m;
	w->outbox_tail = &m->next;
	return false;
}

static uint32_t msg_target(const struct km_worker *w, const struct wmsg *m)
{
	return m->type == WMSG_PRODUCE ? m->part->owner : m->u.produce.from;
	(void)w;
}

static int flush_outbox(struct km_worker *w)
{
	int n = 0;

	while (w->outbox != NULL) {
		struct wmsg *m = w->outbox;
		uint32_t to = msg_target(w, m);

		if (!km_spsc_push(&w->cfg.peers[to]->peer_q[w->cfg.id], m))
			break;
		wake(w->cfg.peers[to]);
		w->outbox = m->next;
		n++;
	}
	if (w->outbox == NULL)
		w->outbox_tail = &w->outbox;
	return n;
}

int km_worker_post(struct km_worker *w, struct wmsg *m)
{
	if (!km_spsc_push(&w->ctl_q, m)) {
		free(m);
		return KM_EWORKERQ;
	}
	wake(w);
	return 0;
}

struct wmsg *km_worker_msg_new(enum wmsg_type type, struct km_part *p,
			       struct km_worker_reply *reply)
{
	struct wmsg *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	m->type = type;
	m->part = p;
	m->reply = reply;
	if (reply != NULL)
		atomic_store_explicit(&reply->done, 0, memory_order_relaxed);
	return m;
}

/* ---- control requests ------------------------------------------------ */

int km_worker_open(struct km_worker *w, struct km_part *p,
		   const struct km_log_config *cfg,
		   struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_OPEN, p, reply);

	if (m == NULL)
		return -ENOMEM;
	m->u.open = *cfg;
	return km_worker_post(w, m);
}

int km_worker_fetch(struct km_worker *w, struct km_part *p,
		    const struct km_fetcher_config *cfg,
		    struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_FETCH, p, reply);

	if (m == NULL)
		return -ENOMEM;
	m->u.fetch = *cfg;
	return km_worker_post(w, m);
}

int km_worker_set_limits(struct km_worker *w, struct km_part *p,
			 const struct km_log_limits *l,
			 struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_LIMITS, p, reply);

	if (m == NULL)
		return -ENOMEM;
	m->u.limits = *l;
	return km_worker_post(w, m);
}

int km_worker_delete_records(struct km_worker *w, struct km_part *p,
			     int64_t offset, struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_DELETE_RECORDS, p, reply);

	if (m == NULL)
		return -ENOMEM;
	m->u.delete_below = offset;
	return km_worker_post(w, m);
}

int km_worker_drop(struct km_worker *w, struct km_part *p,
		   struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_DROP, p, reply);

	if (m == NULL)
		return -ENOMEM;
	return km_worker_post(w, m);
}

int km_worker_listen(struct km_worker *w, const char *ipv4, uint16_t port,
		     struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_LISTEN, NULL, reply);

	if (m == NULL)
		return -ENOMEM;
	snprintf(m->u.listen.host, sizeof(m->u.listen.host), "%s", ipv4);
	m->u.listen.port = port;
	return km_worker_post(w, m);
}

int km_worker_listen_as(struct km_worker *w,
			const struct km_frontend_listener *l, const char *ipv4,
			uint16_t port, struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_LISTEN, NULL, reply);

	if (m == NULL)
		return -ENOMEM;
	snprintf(m->u.listen.host, sizeof(m->u.listen.host), "%s", ipv4);
	m->u.listen.port = port;
	m->u.listen.named = true;
	m->u.listen.l = *l;
	return km_worker_post(w, m);
}

int km_worker_shutdown(struct km_worker *w, struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_SHUTDOWN, NULL, reply);

	if (m == NULL)
		return -ENOMEM;
	return km_worker_post(w, m);
}

/* ---- message handlers (worker thread) --------------------------------- */

struct wpart *km_worker_find(struct km_worker *w, const struct km_part *p)
{
	if (p->wslot < w->n_wparts && w->wparts[p->wslot].part == p)
		return &w->wparts[p->wslot];
	for (uint32_t i = 0; i < w->n_wparts; i++)
		if (w->wparts[i].part == p)
			return &w->wparts[i];
	return NULL;
}

static void on_open(struct km_worker *w, struct wmsg *m)
{
	struct km_worker_reply *r = m->reply;
	struct wpart *wp;
	int rc;

	if (w->n_wparts == w->cfg.parts_max + w->cfg.parts_extra ||
	    m->part->owner != w->cfg.id) {
		km_worker_reply_done(w, r, -EINVAL, "not this worker's");
		return;
	}
	wp = &w->wparts[w->n_wparts];
	memset(wp, 0, sizeof(*wp));
	wp->part = m->part;
	rc = km_log_open(&wp->log, &m->u.open, &w->ring, r ? &r->rec : NULL);
	if (rc == 0)
		rc = km_worker_fe_open_writer(w, wp);
	if (rc < 0) {
		if (wp->log != NULL)
			km_log_close(wp->log);
		km_worker_reply_done(w, r, rc, NULL);
		return;
	}
	w->n_wparts++;
	km_worker_hook(w, wp);
	km_worker_touch(w, wp);
	if (r != NULL)
		r->max_pid = km_pstate_max_positive_pid(km_log_pstate(wp->log));
	/* Fresh figures (the topic id too) before the reply and before a
	 * front end may see the log. */
	km_worker_publish(wp);
	m->part->log = wp->log;
	km_worker_reply_done(w, r, 0, "opened");
}

/* Leader host names from Metadata; bootstrap names are resolved the same
 * way. Blocking, but only on a (re)connect. */
static int resolve(void *ctx, const char *host,
		   char ipv4[KM_FETCHER_IPV4_BYTES])
{
	(void)ctx;
	return km_resolve_ipv4(host, ipv4, KM_FETCHER_IPV4_BYTES);
}

/* A source behind TLS or SASL: the fetch sessions' own network, wrapped
 * (the front end's listener stays as it is). */
static int secure_fetch_net(struct km_worker *w)
{
	struct km_net *s;
	int rc;

	if (w->cfg.source_sec == NULL || w->fnet == w->net)
		return 0;
	if ((rc = km_snet_create(w->fnet, &w->cfg.fetch_net, w->cfg.source_sec,
				 &s)) < 0)
		return rc;
	w->fnet = s;
	return 0;
}

/* Fetch sessions: one per source broker (and bootstrap list), so at most
 * one per partition, plus a discovery session, and at most
 * KM_FSESS_POOL_MAX. Each may hold an equal share of the fetch pool (half
 * of a pool shared with the front-end), so that no session can starve the
 * others. */
static int fetch_pool_init(struct km_worker *w)
{
	bool own = w->fnet != w->net; /* the front-end is not on it */
	const struct km_net_config *nc = own ? &w->cfg.fetch_net : &w->cfg.net;
	struct km_fsess_pool_config pc = {0};
	uint32_t n = w->cfg.parts_max + w->cfg.parts_extra + 1;
	uint32_t share;

	if (n > KM_FSESS_POOL_MAX)
		n = KM_FSESS_POOL_MAX;
	/* Sessions are per broker, not per partition: the partitions known
	 * at start bound them well enough for the shares, and partitions
	 * added later mostly join sessions that exist. */
	share = nc->rx_buf_count / (own ? 1 : 2) /
		(w->cfg.parts_max + 1 < n ? w->cfg.parts_max + 1 : n);
	pc.sessions_max = n;
	pc.rx_buf_bytes = nc->rx_buf_bytes;
	pc.rx_bufs_max = share > 4 ? share : 4;
	pc.scratch = w->scratch;
	pc.resolve = resolve;
	pc.resolve_ctx = w;
	if ((w->fsess_mem = malloc(km_fsess_pool_memsize(n))) == NULL)
		return -ENOMEM;
	return km_fsess_pool_init(&w->fpool, &pc, w->fnet, w->fsess_mem);
}

/* A mapping per fetcher, zero and backed only where touched: its burst
 * array (KM_FETCHER_BURST parsed batches, 24 KiB) is filled as deep as a
 * round's batches go, so a quiet partition holds a page or two of it
 * rather than the whole of a malloc'd (reused, resident) chunk. */
static struct km_fetcher *fetcher_alloc(void)
{
	void *p = mmap(NULL, sizeof(struct km_fetcher), PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void fetcher_free(struct km_fetcher *f)
{
	if (f != NULL)
		munmap(f, sizeof(*f));
}

static void on_fetch(struct km_worker *w, struct wmsg *m)
{
	struct wpart *wp = km_worker_find(w, m->part);
	int rc;

	if (wp == NULL || wp->fetcher != NULL) {
		km_worker_reply_done(w, m->reply, -EINVAL,
				     wp ? "already fetching" : "not open");
		return;
	}
	/* Resumed after a full disk: the log takes appends again first. */
	if ((rc = km_worker_clear_space_error(wp)) < 0) {
		km_worker_reply_done(w, m->reply, rc, "the log's disk is full");
		return;
	}
	if ((wp->fetcher = fetcher_alloc()) == NULL) {
		km_worker_reply_done(w, m->reply, -ENOMEM, NULL);
		return;
	}
	wp->fetch_failed_logged = false;
	rc = km_fetcher_init(wp->fetcher, &m->u.fetch, &w->fpool, wp->log);
	if (rc < 0) {
		fetcher_free(wp->fetcher);
		wp->fetcher = NULL;
	} else {
		km_worker_hook(w, wp);
		km_worker_touch(w, wp);
		/* Before the reply: the control thread never takes a previous
		 * fetcher's source ids for this one's (issue 21). */
		km_worker_publish(wp);
	}
	km_worker_reply_done(w, m->reply, rc, rc ? NULL : "fetching");
}

/* The owner is the log's only writer, its config included: retention
 * runs here and reads it. */
static void on_limits(struct km_worker *w, struct wmsg *m)
{
	struct wpart *wp = km_worker_find(w, m->part);
	int rc = wp ? km_log_set_limits(wp->log, &m->u.limits) : -EINVAL;

	if (rc == 0) {
		wp->retain_at_ms = 0; /* a shorter retention acts now */
		km_worker_touch(w, wp);
	}
	km_worker_reply_done(w, m->reply, rc, wp ? NULL : "not open");
}

static void on_delete_records(struct km_worker *w, struct wmsg *m)
{
	struct wpart *wp = km_worker_find(w, m->part);
	int64_t low = -1;
	int rc = wp ? km_log_delete_records(wp->log, m->u.delete_below, &low)
		    : -EINVAL;

	if (m->reply != NULL)
		m->reply->low_watermark = low;
	if (wp != NULL)
		km_worker_publish(wp); /* ListOffsets' earliest, status */
	km_worker_reply_done(w, m->reply, rc, wp ? NULL : "not open");
}

static void on_drop(struct km_worker *w, struct wmsg *m)
{
	struct wpart *wp = km_worker_find(w, m->part);
	struct km_log **r;
	int rc;

	if (wp == NULL || wp->fetcher != NULL) {
		km_worker_reply_done(w, m->reply, -EINVAL,
				     wp ? "mirrored" : "not open");
		return;
	}
	r = realloc(w->retired, (w->n_retired + 1) * sizeof(*r));
	if (r == NULL) {
		km_worker_reply_done(w, m->reply, -ENOMEM, NULL);
		return;
	}
	w->retired = r;
	/* The writer's copies go once the log has no write of them in
	 * flight. */
	rc = km_log_sync(wp->log);
	if (wp->lw != NULL)
		km_local_write_destroy(wp->lw);
	w->retired[w->n_retired++] = wp->log;
	km_log_set_touch(wp->log, NULL, NULL);
	km_worker_unlist(w, (uint32_t)(wp - w->wparts));
	*wp = w->wparts[--w->n_wparts]; /* but its hooks: set again */
	if (wp < w->wparts + w->n_wparts)
		km_worker_hook(w, wp);
	km_worker_reply_done(w, m->reply, rc < 0 ? rc : 0, "dropped");
}

static void on_listen(struct km_worker *w, struct wmsg *m)
{
	uint16_t bound = 0;
	int rc = km_worker_fe_listen(w, m->u.listen.named ? &m->u.listen.l
							 : NULL,
				     m->u.listen.host, m->u.listen.port, &bound);

	if (m->reply != NULL)
		m->reply->port = bound;
	km_worker_reply_done(w, m->reply, rc, rc ? NULL : "listening");
}

static void on_shutdown(struct km_worker *w, struct wmsg *m)
{
	w->stopping = true;
	w->shutdown_reply = m->reply;
	km_worker_fe_stop(w);
	for (uint32_t i = 0; i < w->n_wparts; i++)
		if (w->wparts[i].fetcher != NULL)
			km_fetcher_stop(w->wparts[i].fetcher);
}

static void handle(struct km_worker *w, struct wmsg *m)
{
	struct wpart *wp;

	/* A message for a partition of ours: visited at the next tick (its
	 * figures, a stop, a retention that acts now). */
	if (m->type != WMSG_OPEN && m->part != NULL &&
	    m->part->owner == w->cfg.id &&
	    (wp = km_worker_find(w, m->part)) != NULL) {
		km_worker_touch(w, wp);
		w->stops_pending |= m->type == WMSG_STOP;
	}
	switch (m->type) {
	case WMSG_OPEN:
		on_open(w, m);
		break;
	case WMSG_FETCH:
		on_fetch(w, m);
		break;
	case WMSG_LISTEN:
		on_listen(w, m);
		break;
	case WMSG_SHUTDOWN:
		on_shutdown(w, m);
		break;
	case WMSG_STOP:
		km_worker_stop_on_stop(w, m);
		return; /* kept until the fetcher has ended */
	case WMSG_WRITABLE:
		km_worker_stop_on_writable(w, m);
		break;
	case WMSG_PRODUCE:
		km_worker_fe_on_produce(w, m);
		return; /* the message travels back: not freed here */
	case WMSG_PRODUCED:
		km_worker_fe_on_produced(w, m);
		return;
	case WMSG_GROUP_SYNC:
		km_worker_fe_on_group_sync(w, m);
		return; /* freed once the commits are durable */
	case WMSG_LIMITS:
		on_limits(w, m);
		break;
	case WMSG_DELETE_RECORDS:
		on_delete_records(w, m);
		break;
	case WMSG_DROP:
		on_drop(w, m);
		break;
	}
	free(m);
}

/* Bounded per turn (STYLE 13) so that a flood of messages cannot starve
 * the sockets and the disk. */
static int drain(struct km_worker *w)
{
	int n = 0;
	struct wmsg *m;

	while (n < 64 && (m = km_spsc_pop(&w->ctl_q)) != NULL) {
		handle(w, m);
		n++;
	}
	for (uint32_t i = 0; i < w->cfg.n_workers; i++)
		for (int k = 0; k < 64 && (m = km_spsc_pop(&w->peer_q[i])); k++) {
			handle(w, m);
			n++;
		}
	return n + flush_outbox(w);
}

/* ---- wake-ups on the ring -------------------------------------------- */

static void arm_efd(struct km_worker *w);
static void arm_tick(struct km_worker *w);

static void on_efd(struct km_io_req *req, int res, uint32_t flags)
{
	struct km_worker *w = km_container_of(req, struct km_worker, efd_req);

	(void)flags;
	w->efd_armed = false;
	if (res < 0 && res != -EAGAIN && res != -EINTR && res != -ECANCELED)
		KM_WARN("worker", "worker %u: eventfd read: %s", w->cfg.id,
			km_strerror(res));
}

static void on_tick(struct km_io_req *req, int res, uint32_t flags)
{
	struct km_worker *w = km_container_of(req, struct km_worker, tick_req);

	(void)res;
	(void)flags;
	w->tick_armed = false;
}

static void arm_efd(struct km_worker *w)
{
	struct io_uring_sqe *sqe;

	if (w->efd_armed || (sqe = io_uring_get_sqe(&w->ring.ring)) == NULL)
		return;
	io_uring_prep_read(sqe, w->efd, &w->efd_val, sizeof(w->efd_val), 0);
	w->efd_req.fn = on_efd;
	io_uring_sqe_set_data(sqe, &w->efd_req);
	km_uring_note_queued(&w->ring);
	w->efd_armed = true;
}

static void arm_tick(struct km_worker *w)
{
	struct io_uring_sqe *sqe;

	if (w->tick_armed || (sqe = io_uring_get_sqe(&w->ring.ring)) == NULL)
		return;
	w->tick_ts.tv_sec = 0;
	w->tick_ts.tv_nsec = (long long)KM_WORKER_TICK_MS * 1000000;
	io_uring_prep_timeout(sqe, &w->tick_ts, 0, 0);
	w->tick_req.fn = on_tick;
	io_uring_sqe_set_data(sqe, &w->tick_req);
	km_uring_note_queued(&w->ring);
	w->tick_armed = true;
}

/* ---- partitions ------------------------------------------------------ */

/* The fetcher's note and source identity, for status and for the control
 * thread to persist (issue 21); only when they changed. */
static void publish_source(struct km_part_source *src,
			   const struct km_fetcher *f)
{
	struct km_part_source_view v;

	snprintf(v.note, sizeof(v.note), "%s", km_fetcher_note(f));
	snprintf(v.cluster_id, sizeof(v.cluster_id), "%s",
		 km_fetcher_cluster_id(f));
	memcpy(v.topic_id, km_fetcher_topic_id(f), sizeof(v.topic_id));
	km_part_source_publish(src, &v);
	src->pub_gen = km_fetcher_pub_gen(f);
}

void km_worker_fetcher_free(struct wpart *wp)
{
	const struct km_fetcher_stats *fs;

	if (wp->fetcher == NULL)
		return;
	fs = km_fetcher_get_stats(wp->fetcher);
	wp->gone.bytes += fs->bytes;
	wp->gone.batches += fs->batches;
	wp->gone.duplicates += fs->duplicates;
	wp->gone.corrupt += fs->corrupt;
	wp->gone.reconnects += fs->reconnects;
	wp->gone.log_resets += fs->log_resets;
	wp->gone.offsets_skipped += fs->offsets_skipped;
	wp->gone.fetched_bytes += fs->fetched_bytes;
	wp->gone.fetched_records += fs->fetched_records;
	wp->gone.records += fs->records;
	if (fs->data_loss_events != 0) {
		wp->gone.data_loss_from = fs->data_loss_from;
		wp->gone.data_loss_to = fs->data_loss_to;
	}
	wp->gone.data_loss_events += fs->data_loss_events;
	wp->gone.fetches += fs->fetches;
	fetcher_free(wp->fetcher);
	wp->fetcher = NULL;
}

/* The last data-loss event's range is that of the newest fetcher that
 * saw one. */
static void publish_data_loss(struct km_part_stats *s,
			      const struct km_fetcher_stats *last,
			      uint64_t events)
{
	if (events == 0)
		return;
	atomic_store_explicit(&s->data_loss_from, last->data_loss_from,
			      memory_order_relaxed);
	atomic_store_explicit(&s->data_loss_to, last->data_loss_to,
			      memory_order_relaxed);
	atomic_store_explicit(&s->data_loss_events, events,
			      memory_order_relaxed);
}

/* The counters are the partition's since its log was opened (earlier
 * fetchers' in gone, fs the current one's or zeros): Prometheus counters
 * never go down. */
static void publish_counts(struct km_part_stats *s,
			   const struct km_fetcher_stats *gone,
			   const struct km_fetcher_stats *fs)
{
	atomic_store_explicit(&s->mirrored_bytes, gone->bytes + fs->bytes,
			      memory_order_relaxed);
	atomic_store_explicit(&s->mirrored_batches,
			      gone->batches + fs->batches, memory_order_relaxed);
	atomic_store_explicit(&s->duplicates, gone->duplicates + fs->duplicates,
			      memory_order_relaxed);
	atomic_store_explicit(&s->corrupt, gone->corrupt + fs->corrupt,
			      memory_order_relaxed);
	atomic_store_explicit(&s->reconnects,
			      gone->reconnects + fs->reconnects,
			      memory_order_relaxed);
	atomic_store_explicit(&s->offset_resets, gone->log_resets + fs->log_resets,
			      memory_order_relaxed);
	atomic_store_explicit(&s->offsets_skipped,
			      gone->offsets_skipped + fs->offsets_skipped,
			      memory_order_relaxed);
	atomic_store_explicit(&s->fetched_bytes,
			      gone->fetched_bytes + fs->fetched_bytes,
			      memory_order_relaxed);
	atomic_store_explicit(&s->fetched_records,
			      gone->fetched_records + fs->fetched_records,
			      memory_order_relaxed);
	atomic_store_explicit(&s->mirrored_records, gone->records + fs->records,
			      memory_order_relaxed);
	publish_data_loss(s, fs->data_loss_events ? fs : gone,
			  gone->data_loss_events + fs->data_loss_events);
	atomic_store_explicit(&s->fetch_answers, gone->fetches + fs->fetches,
			      memory_order_relaxed);
}

/* Time lag (metrics): the moment the log end last reached the source's
 * high watermark, checked every tick while a fetcher runs - Kafka's
 * lastCaughtUpTime of a follower. */
static void publish_caught_up(struct km_part_stats *s, int64_t source_hw)
{
	int64_t leo = atomic_load_explicit(&s->leo, memory_order_relaxed);

	if (source_hw >= 0 && leo >= source_hw)
		atomic_store_explicit(&s->caught_up_ms, km_clock_ms(),
				      memory_order_relaxed);
}

static void publish_fetch(struct km_part *p, const struct km_fetcher *f,
			  const struct km_fetcher_stats *gone)
{
	struct km_part_stats *s = &p->stats;
	int st = KM_PART_FETCH_CONNECTING;

	atomic_store_explicit(&s->source_hw, km_fetcher_high_watermark(f),
			      memory_order_relaxed);
	atomic_store_explicit(&s->source_lso,
			      km_fetcher_get_stats(f)->last_stable_offset,
			      memory_order_relaxed);
	publish_caught_up(s, km_fetcher_high_watermark(f));
	publish_counts(s, gone, km_fetcher_get_stats(f));
	if (km_fetcher_get_state(f) == KM_FETCHER_MIRRORING)
		st = KM_PART_FETCH_MIRRORING;
	else if (km_fetcher_no_space(f))
		st = KM_PART_FETCH_NOSPACE;
	else if (km_fetcher_get_state(f) == KM_FETCHER_FAILED)
		st = KM_PART_FETCH_FAILED;
	if (st >= KM_PART_FETCH_FAILED &&
	    atomic_load_explicit(&s->fetch_state, memory_order_relaxed) != st) {
		snprintf(s->reason, sizeof(s->reason), "%s",
			 km_fetcher_reason(f));
		atomic_store_explicit(&s->fetch_transient,
				      km_fetcher_transient(f),
				      memory_order_relaxed);
	}
	atomic_store_explicit(&s->fetch_state, st, memory_order_release);
	if (s->source.pub_gen != km_fetcher_pub_gen(f))
		publish_source(&s->source, f);
}

void km_worker_publish(struct wpart *wp)
{
	struct km_part_stats *s = &wp->part->stats;
	struct km_pstate_stats ps;
	uint8_t id[KM_WIRE_UUID_BYTES];

	atomic_store_explicit(&s->log_start, km_log_start_offset(wp->log),
			      memory_order_relaxed);
	atomic_store_explicit(&s->leo, km_log_end_offset(wp->log),
			      memory_order_relaxed);
	atomic_store_explicit(&s->hw, km_log_durable_offset(wp->log),
			      memory_order_relaxed);
	atomic_store_explicit(&s->lso, km_log_lso(wp->log),
			      memory_order_relaxed);
	atomic_store_explicit(&s->disk_bytes, km_log_size_bytes(wp->log),
			      memory_order_relaxed);
	km_pstate_get_stats(km_log_pstate(wp->log), &ps);
	atomic_store_explicit(&s->sequence_gaps, ps.mirror_sequence_gaps,
			      memory_order_relaxed);
	atomic_store_explicit(&s->epoch_regressions,
			      ps.mirror_epoch_regressions, memory_order_relaxed);
	atomic_store_explicit(&s->barriers_applied, ps.barriers_applied,
			      memory_order_relaxed);
	km_log_topic_id(wp->log, id);
	km_part_topic_id_publish(&s->topic_id, id);
	if (wp->fetcher != NULL)
		publish_fetch(wp->part, wp->fetcher, &wp->gone);
	else
		publish_counts(&wp->part->stats, &wp->gone,
			       &(const struct km_fetcher_stats){ 0 });
}

static void fetch_failed(struct km_worker *w, struct wpart *wp)
{
	if (wp->fetch_failed_logged)
		return;
	wp->fetch_failed_logged = true;
	if (km_fetcher_no_space(wp->fetcher))
		KM_WARN("worker", "partition %s-%d: mirroring waits for disk "
			"space: %s (worker %u)", wp->part->topic,
			wp->part->partition, km_fetcher_reason(wp->fetcher),
			w->cfg.id);
	else if (km_fetcher_transient(wp->fetcher))
		/* The control thread's retry line is the WARN: one per
		 * attempt here would double it. */
		KM_INFO("worker", "partition %s-%d: mirroring FAILED, transient "
			"(retried with mirror.failed.retry.*): %s (worker %u)",
			wp->part->topic, wp->part->partition,
			km_fetcher_reason(wp->fetcher), w->cfg.id);
	else
		KM_ERROR("worker", "partition %s-%d: mirroring FAILED: %s "
			 "(worker %u)", wp->part->topic, wp->part->partition,
			 km_fetcher_reason(wp->fetcher), w->cfg.id);
}

int km_worker_clear_space_error(struct wpart *wp)
{
	int rc = km_log_error(wp->log);

	if (rc == 0 || !km_log_is_space_error(rc))
		return rc;
	return km_log_clear_error(wp->log);
}

static void compact(struct wpart *wp);

/* Retention, once a second: what the source dropped (its log start, from
 * the fetch session) and the local caps (issue 7). */
static void retain(struct km_worker *w, struct wpart *wp)
{
	const struct km_fetcher *f = wp->fetcher;
	struct km_log_retained out;
	int64_t below;
	int rc;

	if (wp->stopping != NULL)
		return;
	if (w->now_ms < wp->retain_at_ms) {
		wp->retain_owed = true; /* when it is quiet (worker_ready.c) */
		return;
	}
	wp->retain_owed = false;
	wp->retain_at_ms = w->now_ms + KM_WORKER_RETAIN_MS;
	/* A log failed for space with no fetcher to restart it (a writable
	 * partition) takes appends again once space is back. */
	if (f == NULL && km_log_error(wp->log) != 0)
		(void)km_worker_clear_space_error(wp);
	below = atomic_load_explicit(&wp->part->retain_below,
				     memory_order_acquire);
	if (f != NULL && km_fetcher_get_stats(f)->log_start_offset > below)
		below = km_fetcher_get_stats(f)->log_start_offset;
	rc = km_log_retain_policy(wp->log, below > 0 ? below : -1,
				  km_clock_wall_ms(), &out);
	if (rc < 0)
		KM_WARN("worker", "partition %s-%d: retention: %s",
			wp->part->topic, wp->part->partition, km_strerror(rc));
	compact(wp);
}

static uint64_t earlier(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

uint64_t km_worker_next_due(struct km_worker *w, struct wpart *wp)
{
	uint64_t due = w->now_ms + KM_WORKER_IDLE_MS;
	uint64_t paced = wp->retain_at_ms > w->now_ms ? wp->retain_at_ms
						      : w->now_ms;
	int64_t at = km_log_retain_due(wp->log), wall;

	if (wp->retain_owed)
		due = earlier(due, paced);
	/* Retried or run at retention's pace, as retain() does them. */
	if ((wp->fetcher == NULL && km_log_error(wp->log) != 0) ||
	    (km_part_get_mode(wp->part) == KM_PART_WRITABLE &&
	     km_log_config_get(wp->log)->compact))
		due = earlier(due, w->now_ms + KM_WORKER_RETAIN_MS);
	if (at >= 0) {
		wall = km_clock_wall_ms();
		due = earlier(due, at > wall ? w->now_ms + (uint64_t)(at - wall)
					     : w->now_ms);
		due = due > paced ? due : paced;
	}
	/* An idle log gives its write memory back at a tick (issue 17). */
	return earlier(due, km_log_idle_due(wp->log, w->now_ms));
}

/* Compaction (issue 19): a compacted topic's partition stays compacted
 * once it is writable. Mirrored partitions are the source's bytes (R6):
 * the source's cleaner compacts them. Runs at retention's pace; the log
 * does nothing when there is nothing new to clean. */
static void compact(struct wpart *wp)
{
	struct km_log_clean_stats st;
	int rc;

	if (km_part_get_mode(wp->part) != KM_PART_WRITABLE ||
	    !km_log_config_get(wp->log)->compact)
		return;
	rc = km_log_clean(wp->log, km_clock_wall_ms(), &st);
	if (rc < 0)
		KM_WARN("worker", "partition %s-%d: compaction: %s",
			wp->part->topic, wp->part->partition, km_strerror(rc));
	if (rc <= 0)
		return;
	atomic_fetch_add_explicit(&wp->part->stats.cleaner_runs, 1,
				  memory_order_relaxed);
	if (st.bytes_read > st.bytes_written)
		atomic_fetch_add_explicit(&wp->part->stats.cleaner_bytes_removed,
					  st.bytes_read - st.bytes_written,
					  memory_order_relaxed);
}

/* The fetch network's figures for status; skipped this tick if the
 * control thread is reading them. */
static void publish_net(struct km_worker *w)
{
	struct km_worker_net *p = &w->net_pub;

	if (w->fnet == NULL || pthread_mutex_trylock(&w->net_lock) != 0)
		return;
	p->dpdk = w->fnet != w->net && w->cfg.fetch_net.kind == KM_NET_DPDK;
	km_net_get_stats(w->fnet, &p->net);
	p->n_conns = km_fsess_pool_conns(&w->fpool, p->conns, KM_WORKER_NET_CONNS);
	km_fsess_pool_get_stats(&w->fpool, &p->fpool);
	p->part_visits = w->part_visits;
	p->fetch_looks = w->fpool.looks;
	p->listener = w->fe != NULL;
	if (w->fe != NULL) {
		km_frontend_get_stats(w->fe, &p->fe);
		km_net_get_stats(w->net, &p->fe_net);
	}
	pthread_mutex_unlock(&w->net_lock);
}

void km_worker_net_snapshot(struct km_worker *w, struct km_worker_net *out)
{
	pthread_mutex_lock(&w->net_lock);
	*out = w->net_pub;
	pthread_mutex_unlock(&w->net_lock);
}

void km_worker_visit(struct km_worker *w, struct wpart *wp)
{
	w->part_visits++;
	if (wp->fetcher != NULL && !w->stopping &&
	    km_fetcher_get_state(wp->fetcher) == KM_FETCHER_FAILED)
		fetch_failed(w, wp);
	km_log_tick(wp->log, w->now_ms);
	retain(w, wp);
	km_worker_publish(wp);
}

/* Stops run each turn, over the ready list only: a stopping partition
 * stays on it until its stop is done. */
static int step_stops(struct km_worker *w)
{
	bool more = false;
	int n = 0;

	if (!w->stops_pending)
		return 0;
	for (uint32_t j = 0; j < w->n_act; j++) {
		struct wpart *wp = &w->wparts[w->act[j]];

		if (wp->stopping != NULL)
			n += km_worker_stop_step(w, wp);
		more |= wp->stopping != NULL;
	}
	w->stops_pending = more;
	return n;
}

static int step_parts(struct km_worker *w, bool tick)
{
	int n = km_fsess_pool_step(&w->fpool);

	n += step_stops(w);
	if (tick) {
		km_worker_visit_all(w);
		publish_net(w);
	}
	return n;
}

/* ---- shutdown ---------------------------------------------------------- */

/* Every partition has left its session and every session is closed (no
 * connection, no receive buffer held). */
static bool fetchers_idle(struct km_worker *w)
{
	for (uint32_t i = 0; i < w->n_wparts; i++)
		if (w->wparts[i].fetcher != NULL &&
		    !km_fetcher_idle(w->wparts[i].fetcher))
			return false;
	return w->fsess_mem == NULL || km_fsess_pool_idle(&w->fpool);
}

/* Every log at once: their syncs go through the ring together
 * (km_log_close_many). @return the first error. */
static int close_all(struct km_worker *w, struct km_log **logs, int *rcs)
{
	int first = 0;

	for (uint32_t i = 0; i < w->n_wparts; i++) {
		logs[i] = w->wparts[i].log;
		w->wparts[i].log = NULL;
	}
	(void)km_log_close_many(logs, w->n_wparts, rcs);
	for (uint32_t i = 0; i < w->n_wparts; i++)
		if (rcs[i] < 0) {
			KM_ERROR("worker", "partition %s-%d: close: %s",
				 w->wparts[i].part->topic,
				 w->wparts[i].part->partition,
				 km_strerror(rcs[i]));
			first = first ? first : rcs[i];
		}
	return first;
}

static int close_logs(struct km_worker *w)
{
	struct km_log **logs = calloc(w->n_wparts + 1, sizeof(*logs));
	int *rcs = calloc(w->n_wparts + 1, sizeof(*rcs));
	int first = 0;

	for (uint32_t i = 0; i < w->n_retired; i++)
		km_log_abandon(w->retired[i]);
	free(w->retired);
	w->retired = NULL;
	w->n_retired = 0;

	for (uint32_t i = 0; i < w->n_wparts; i++) {
		struct wpart *wp = &w->wparts[i];

		km_worker_publish(wp);
		km_worker_fetcher_free(wp);
		wp->part->log = NULL;
		if (logs == NULL || rcs == NULL) { /* one at a time, then */
			int rc = km_log_close(wp->log);

			wp->log = NULL;
			first = first ? first : rc;
		}
	}
	if (logs != NULL && rcs != NULL)
		first = close_all(w, logs, rcs);
	free(logs);
	free(rcs);
	return first;
}

/* Once every fetcher and front-end connection is quiet: close the logs,
 * then report. */
static bool finish_shutdown(struct km_worker *w)
{
	int rc;

	if (!fetchers_idle(w) || !km_worker_fe_idle(w) || w->outbox != NULL)
		return false;
	km_worker_fe_free(w);
	rc = close_logs(w);
	km_worker_fe_free_writers(w);
	w->done = true;
	km_worker_reply_done(w, w->shutdown_reply, rc,
			     rc ? NULL : "closed cleanly");
	return true;
}

/* ---- the loop ---------------------------------------------------------- */

static int turn(struct km_worker *w, bool *tick)
{
	int n = 0, rc;
	uint64_t t = now_ms();

	*tick = t - w->now_ms >= KM_WORKER_TICK_MS;
	if (*tick)
		w->now_ms = t;
	n += drain(w);
	rc = km_net_poll(w->net);
	n += rc > 0 ? rc : 0;
	if (w->fnet != w->net) {
		rc = km_net_poll(w->fnet);
		n += rc > 0 ? rc : 0;
	}
	n += step_parts(w, *tick);
	km_worker_fe_poll(w);
	return n;
}

static void on_cancelled(struct km_io_req *req, int res, uint32_t flags)
{
	(void)req;
	(void)res;
	(void)flags;
}

static void cancel(struct km_worker *w, struct km_io_req *target,
		   struct km_io_req *req)
{
	struct io_uring_sqe *sqe;

	if ((sqe = io_uring_get_sqe(&w->ring.ring)) == NULL) {
		km_uring_submit(&w->ring);
		sqe = io_uring_get_sqe(&w->ring.ring);
	}
	KM_ASSERT(sqe != NULL);
	io_uring_prep_cancel(sqe, target, 0);
	req->fn = on_cancelled;
	io_uring_sqe_set_data(sqe, req);
	km_uring_note_queued(&w->ring);
}

/* Leave the ring with nothing in flight, so that it can be torn down:
 * the backend ends its sockets, then the wake-up read and the tick are
 * cancelled. */
static void destroy_nets(struct km_worker *w)
{
	if (w->fnet != NULL && w->fnet != w->net)
		km_net_destroy(w->fnet);
	w->fnet = NULL;
	if (w->net != NULL)
		km_net_destroy(w->net);
	w->net = NULL;
}

static void quiesce(struct km_worker *w)
{
	struct km_io_req c1, c2;

	destroy_nets(w); /* on this thread: a DPDK net registered it */
	if (w->efd_armed)
		cancel(w, &w->efd_req, &c1);
	if (w->tick_armed)
		cancel(w, &w->tick_req, &c2);
	km_uring_drain(&w->ring);
}

enum { WAIT_NONE = 0, WAIT_TICK = UINT32_MAX };

/* How long the next io_uring wait may block, in microseconds: not at all
 * while there is work, until a completion (at the latest the tick) when
 * both networks are idle, and a nap when only the polled fetch network
 * waits for frames. */
static uint32_t next_wait_us(struct km_worker *w, bool worked)
{
	if (worked || w->outbox != NULL || km_net_wants_poll(w->net))
		return WAIT_NONE;
	if (w->fnet != w->net && km_net_wants_poll(w->fnet))
		return w->cfg.fetch_net.kind == KM_NET_DPDK
			       ? km_net_nap_us(w->fnet) : WAIT_NONE;
	return WAIT_TICK;
}

static int wait_io(struct km_worker *w, uint32_t wait_us)
{
	if (wait_us == WAIT_NONE || wait_us == WAIT_TICK)
		return km_uring_poll(&w->ring, wait_us == WAIT_TICK);
	return km_uring_poll_for(&w->ring, wait_us);
}

static void *worker_main(void *arg)
{
	struct km_worker *w = arg;
	uint32_t wait_us = WAIT_NONE;
	bool tick;

	while (!w->done) {
		int rc;

		arm_efd(w);
		arm_tick(w);
		rc = wait_io(w, wait_us);
		if (rc < 0 && rc != -EINTR && rc != -ETIME) {
			KM_ERROR("worker", "worker %u: io_uring: %s", w->cfg.id,
				 km_strerror(rc));
			break;
		}
		wait_us = next_wait_us(w, turn(w, &tick) > 0);
		if (w->stopping && finish_shutdown(w))
			break;
	}
	quiesce(w);
	return NULL;
}

/* ---- life cycle -------------------------------------------------------- */

static int alloc_rings(struct km_worker *w)
{
	uint32_t n = w->cfg.n_workers + 1, s = KM_WORKER_RING_SLOTS;
	int rc;

	w->slots = calloc((size_t)n * s, sizeof(void *));
	w->peer_q = calloc(w->cfg.n_workers, sizeof(*w->peer_q));
	if (w->slots == NULL || w->peer_q == NULL)
		return -ENOMEM;
	if ((rc = km_spsc_init(&w->ctl_q, w->slots, s)) < 0)
		return rc;
	for (uint32_t i = 0; i < w->cfg.n_workers; i++)
		if ((rc = km_spsc_init(&w->peer_q[i], w->slots + (i + 1) * s,
				       s)) < 0)
			return rc;
	return 0;
}

static int setup(struct km_worker *w)
{
	int rc;

	w->outbox_tail = &w->outbox;
	if ((w->scratch = malloc(sizeof(*w->scratch))) == NULL)
		return -ENOMEM;
	/* Local writes validate compressed batches here (kafka/inflate.h). */
	if ((rc = km_inflate_create(KM_INFLATE_BYTES_MAX, &w->inflate)) < 0)
		return rc;
	w->wparts = calloc(w->cfg.parts_max + w->cfg.parts_extra + 1,
			   sizeof(*w->wparts));
	w->act = calloc(w->cfg.parts_max + w->cfg.parts_extra + 1,
			sizeof(*w->act));
	w->heap = calloc(w->cfg.parts_max + w->cfg.parts_extra + 1,
			 sizeof(*w->heap));
	if (w->wparts == NULL || w->act == NULL || w->heap == NULL)
		return -ENOMEM;
	if ((rc = alloc_rings(w)) < 0)
		return rc;
	if ((w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return -errno;
	rc = km_uring_init(&w->ring, w->cfg.uring_entries ? w->cfg.uring_entries
							  : 1024);
	if (rc < 0)
		return rc;
	w->cfg.net.uring = &w->ring;
	if ((rc = km_net_create(&w->cfg.net, &w->net)) < 0) {
		w->net = NULL;
		return rc;
	}
	w->fnet = w->net;
	if (w->cfg.fetch_net.kind == KM_NET_KERNEL)
		w->cfg.fetch_net.uring = &w->ring;
	if (w->cfg.fetch_net.conns_max > 0 &&
	    (rc = km_net_create(&w->cfg.fetch_net, &w->fnet)) < 0) {
		w->fnet = NULL;
		return rc;
	}
	if ((rc = secure_fetch_net(w)) < 0)
		return rc;
	if ((rc = fetch_pool_init(w)) < 0)
		return rc;
	w->ops.produce = km_worker_fe_produce;
	w->ops.alloc_pid = km_worker_fe_alloc_pid;
	w->ops.write_marker = km_worker_fe_write_marker;
	w->ops.admin = w->cfg.admin ? km_worker_fe_admin : NULL;
	w->ops.ctx = w;
	w->now_ms = now_ms();
	return 0;
}

static void teardown(struct km_worker *w)
{
	destroy_nets(w);
	if (w->cfg.net.uring != NULL)
		km_uring_exit(&w->ring);
	if (w->efd >= 0)
		close(w->efd);
	free(w->wparts);
	free(w->act);
	free(w->heap);
	free(w->fsess_mem);
	free(w->scratch);
	km_inflate_destroy(w->inflate);
	free(w->slots);
	free(w->peer_q);
}

int km_worker_create(const struct km_worker_config *cfg,
		     struct km_worker **out)
{
	struct km_worker *w = calloc(1, sizeof(*w));
	int rc;

	if (w == NULL)
		return -ENOMEM;
	w->cfg = *cfg;
	w->cfg.net.uring = NULL;
	w->efd = -1;
	pthread_mutex_init(&w->net_lock, NULL);
	if ((rc = setup(w)) < 0) {
		teardown(w);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

int km_worker_start(struct km_worker *w)
{
	int rc = pthread_create(&w->thread, NULL, worker_main, w);
	char name[16];

	if (rc != 0)
		return -rc;
	w->started = true;
	/* Named, so top -H, perf and the bench tell the workers apart. */
	snprintf(name, sizeof(name), "km-worker-%u", w->cfg.id);
	pthread_setname_np(w->thread, name);
	return 0;
}

void km_worker_destroy(struct km_worker *w)
{
	if (w == NULL)
		return;
	if (w->started)
		pthread_join(w->thread, NULL);
	teardown(w);
	pthread_mutex_destroy(&w->net_lock);
	free(w);
}
