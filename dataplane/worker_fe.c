/* The worker's Kafka side: the front-end (on the worker that listens) and
 * local writes, with Produce forwarded to the owning worker when the
 * front-end's worker does not own the partition (one writer per
 * partition). A forwarded Produce travels as one message: PRODUCE to the
 * owner with a copy of the records, back as PRODUCED with the outcome.
 * That copy is the records' only one: the owner's writer adopts it
 * (km_local_write_adopt) and frees it once its log has written it. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/log.h"
#include "dataplane/serve/frontend.h"
#include "dataplane/serve/local_write.h"
#include "dataplane/net/snet.h"
#include "dataplane/worker_pvt.h"

/* Records a writable partition holds in flight, and Produce requests. */
#define LW_MEM_BYTES (8u << 20)
#define LW_PENDING_MAX 256u

/* ---- local writers ------------------------------------------------------ */

int km_worker_fe_open_writer(struct km_worker *w, struct wpart *wp)
{
	struct km_local_write_config c = {
		.log = wp->log,
		.mem_bytes = LW_MEM_BYTES,
		.pending_max = LW_PENDING_MAX,
		.inflate = w->inflate,
		/* The front-end checks each transactional batch against its
		 * coordinator (frontend_txn.c) before it gets here. */
		.txn_coordinated = true,
		/* The front-end refuses clients' Produce to an internal
		 * partition: its writes are the group coordinator's. */
		.coordinator_only = wp->part->internal,
	};

	if (km_part_get_mode(wp->part) != KM_PART_WRITABLE)
		return 0;
	return km_local_write_create(&c, &wp->lw);
}

static bool writers_idle(struct km_worker *w)
{
	for (uint32_t i = 0; i < w->n_wparts; i++)
		if (w->wparts[i].lw && km_local_write_pending(w->wparts[i].lw))
			return false;
	return true;
}

/* ---- Produce, local or forwarded ------------------------------------------ */

/* The records are the owner's writer's by now (adopted), or freed. */
static void on_forward_done(void *arg, const struct km_part_produced *res)
{
	struct wmsg *m = arg;
	struct km_worker *owner = m->u.produce.owner;

	m->u.produce.res = *res;
	m->u.produce.bytes = NULL;
	m->type = WMSG_PRODUCED;
	km_worker_send(owner, m->u.produce.from, m);
}

/* On the owner: append a Produce another worker received. */
void km_worker_fe_on_produce(struct km_worker *w, struct wmsg *m)
{
	struct wpart *wp = km_worker_find(w, m->part);
	int rc = KM_EPARTOFFLINE;

	m->u.produce.owner = w;
	if (wp != NULL)
		km_worker_touch(w, wp); /* its writer is polled each turn */
	if (km_part_get_mode(m->part) != KM_PART_WRITABLE)
		rc = KM_EMIRRORED; /* a failback began after it was sent */
	else if (wp != NULL && wp->lw != NULL && !w->done && m->u.produce.marker)
		rc = km_local_write_marker(wp->lw, m->u.produce.pid,
					   m->u.produce.epoch,
					   m->u.produce.commit, 0,
					   km_clock_wall_ms(), on_forward_done, m);
	else if (wp != NULL && wp->lw != NULL && !w->done)
		rc = km_local_write_adopt(wp->lw, m->u.produce.bytes,
					  m->u.produce.len, m->u.produce.acks,
					  on_forward_done, m, free);
	if (rc < 0) {
		struct km_part_produced res = { .err = rc,
						.base_offset = -1,
						.log_start = -1,
						.log_append_time = -1 };

		free(m->u.produce.bytes); /* not adopted */
		on_forward_done(m, &res);
	}
}

/* On the front-end's worker: the owner's answer. */
void km_worker_fe_on_produced(struct km_worker *w, struct wmsg *m)
{
	w->fwd_pending--;
	m->u.produce.done(m->u.produce.arg, &m->u.produce.res);
	free(m);
}

/* The one copy of a forwarded Produce (local_write.h says why there must
 * be one), straight from the receive chain: the receive buffers are this
 * worker's backend's, which the owner may not release. */
static int forward(struct km_worker *w, struct km_part *p,
		   const struct km_chain *c, struct km_chain_cur cur,
		   uint32_t len, int16_t acks, km_part_produced_fn done,
		   void *arg)
{
	struct wmsg *m = calloc(1, sizeof(*m));

	if (m == NULL || (m->u.produce.bytes = malloc(len)) == NULL) {
		free(m);
		return -ENOMEM;
	}
	if (km_chain_copy(c, cur, m->u.produce.bytes, len) != len) {
		free(m->u.produce.bytes);
		free(m);
		return -EINVAL; /* the records run past the request */
	}
	m->type = WMSG_PRODUCE;
	m->part = p;
	m->u.produce.from = w->cfg.id;
	m->u.produce.acks = acks;
	m->u.produce.len = len;
	m->u.produce.done = done;
	m->u.produce.arg = arg;
	w->fwd_pending++;
	km_worker_send(w, p->owner, m);
	return 0;
}

/* The ops' ctx is the worker; the allocator has its own. */
int km_worker_fe_admin(void *ctx, struct km_admin_job *job)
{
	struct km_worker *w = ctx;

	return w->cfg.admin(w->cfg.admin_ctx, job);
}

int km_worker_fe_alloc_pid(void *ctx, int64_t *pid, int16_t *epoch)
{
	struct km_worker *w = ctx;

	if (w->cfg.alloc_pid == NULL)
		return -ENOTSUP;
	return w->cfg.alloc_pid(w->cfg.alloc_pid_ctx, pid, epoch);
}

int km_worker_fe_produce(void *ctx, struct km_part *p, const struct km_chain *c,
		   struct km_chain_cur cur, uint32_t len, int16_t acks,
		   km_part_produced_fn done, void *arg)
{
	struct km_worker *w = ctx;
	struct wpart *wp;

	if (km_part_get_mode(p) != KM_PART_WRITABLE)
		return KM_EMIRRORED;
	if (p->owner != w->cfg.id)
		return forward(w, p, c, cur, len, acks, done, arg);
	wp = km_worker_find(w, p);
	if (wp == NULL || wp->lw == NULL)
		return KM_EPARTOFFLINE;
	km_worker_touch(w, wp);
	return km_local_write_submit(wp->lw, c, cur, len, acks, done, arg);
}

int km_worker_fe_write_marker(void *ctx, struct km_part *p, int64_t pid,
			      int16_t epoch, bool commit,
			      km_part_produced_fn done, void *arg)
{
	struct km_worker *w = ctx;
	struct wpart *wp;
	struct wmsg *m;

	if (km_part_get_mode(p) != KM_PART_WRITABLE)
		return KM_EMIRRORED;
	if (p->owner == w->cfg.id) {
		wp = km_worker_find(w, p);
		if (wp == NULL || wp->lw == NULL)
			return KM_EPARTOFFLINE;
		km_worker_touch(w, wp);
		return km_local_write_marker(wp->lw, pid, epoch, commit, 0,
					     km_clock_wall_ms(), done, arg);
	}
	/* The owner's writer orders it after the producer's data, which
	 * went the same way (PRODUCE messages, in order). */
	if ((m = calloc(1, sizeof(*m))) == NULL)
		return -ENOMEM;
	m->type = WMSG_PRODUCE;
	m->part = p;
	m->u.produce.from = w->cfg.id;
	m->u.produce.marker = true;
	m->u.produce.commit = commit;
	m->u.produce.pid = pid;
	m->u.produce.epoch = epoch;
	m->u.produce.done = done;
	m->u.produce.arg = arg;
	w->fwd_pending++;
	km_worker_send(w, p->owner, m);
	return 0;
}

/* ---- the front-end ---------------------------------------------------------- */

/* TLS listeners need the front end's net wrapped (snet.h); the wrapper
 * owns the kernel net from now on. */
static int secure_fe_net(struct km_worker *w)
{
	struct km_net *s;
	int rc;

	if (!w->cfg.listen_tls || km_snet_is(w->net))
		return 0;
	if ((rc = km_snet_create(w->net, &w->cfg.net, NULL, &s)) < 0)
		return rc;
	if (w->fnet == w->net)
		w->fnet = s;
	w->net = s;
	return 0;
}

static int fe_create(struct km_worker *w, const char *ipv4)
{
	struct km_frontend_config c;
	int rc;

	if ((rc = secure_fe_net(w)) < 0)
		return rc;
	memset(&c, 0, sizeof(c));
	c.net = w->net;
	c.parts = w->cfg.parts;
	c.ops = &w->ops;
	c.cluster_id = w->cfg.cluster_id;
	c.node_id = w->cfg.node_id;
	c.worker_id = w->cfg.id;
	c.advertised_host = w->cfg.advertised_host[0] ? w->cfg.advertised_host
						      : ipv4;
	c.advertised_port = w->cfg.advertised_port;
	c.frame_bytes_max = w->cfg.frame_bytes_max;
	c.request_timeout_ms = w->cfg.request_timeout_ms;
	c.conns_max = w->cfg.net.conns_max / 2;
	c.fetch_buf_bytes = 8u << 20;
	c.fetch_bufs = 8;
	c.send_iov_max = w->cfg.net.send_iov_max;
	c.group_initial_rebalance_delay_ms = w->cfg.group_initial_rebalance_delay_ms;
	c.group_min_session_timeout_ms = w->cfg.group_min_session_timeout_ms;
	c.group_max_session_timeout_ms = w->cfg.group_max_session_timeout_ms;
	c.broker_log = w->cfg.broker_log;
	c.upstream = w->cfg.upstream;
	c.txn_ids_max = w->cfg.txn_ids_max;
	c.txn_id_expiration_ms = w->cfg.txn_id_expiration_ms;
	c.auto_create_topics = w->cfg.auto_create_topics;
	c.sasl = w->cfg.fe_sasl;
	c.acls = w->cfg.acls;
	c.fetch_session_slots = w->cfg.fetch_session_slots != 0
					? w->cfg.fetch_session_slots
					: KM_FRONTEND_FSESS_NONE;
	return km_frontend_create(&c, &w->fe);
}

/* A listener on dpdk.ip (the kernel has no such address) is placed on
 * the DPDK port: this worker's fetch net, polled by the same thread. */
static bool on_dpdk(const struct km_worker *w, const char *ipv4)
{
	struct in_addr a;

	if (w->cfg.fetch_net.kind != KM_NET_DPDK || w->fnet == NULL ||
	    w->fnet == w->net)
		return false;
	return inet_pton(AF_INET, ipv4, &a) == 1 &&
	       a.s_addr == w->cfg.fetch_net.dpdk.ip_be;
}

/* The first listener creates the front end; l NULL is a PLAINTEXT one
 * advertised as the worker's config says. */
int km_worker_fe_listen(struct km_worker *w,
			const struct km_frontend_listener *l,
			const char *ipv4, uint16_t port, uint16_t *bound)
{
	struct km_frontend_listener dl;
	bool created = false;
	int rc;

	if (l != NULL && on_dpdk(w, ipv4)) {
		if (l->tls != NULL)
			return -EOPNOTSUPP; /* config_check.c refuses it */
		dl = *l;
		dl.net = w->fnet;
		l = &dl;
	}

	if (w->fe == NULL) {
		if ((rc = fe_create(w, ipv4)) < 0)
			return rc;
		created = true;
	} else if (l == NULL) {
		return -EALREADY;
	}
	rc = l != NULL ? km_frontend_listen_as(w->fe, l, ipv4, port)
		       : km_frontend_listen(w->fe, ipv4, port);
	if (rc < 0) {
		if (created) {
			km_frontend_destroy(w->fe);
			w->fe = NULL;
		}
		return rc;
	}
	*bound = l != NULL ? km_frontend_listener_port(w->fe, (uint32_t)rc)
			   : km_frontend_port(w->fe);
	return 0;
}

/* ---- offset sync from the source ------------------------------------------- */

static void on_group_synced(void *arg, int rc)
{
	struct wmsg *m = arg;
	struct km_worker *w = m->u.sync.w;

	km_worker_reply_done(w, m->reply, rc, rc < 0 ? km_strerror(rc) : "");
	free(m);
}

void km_worker_fe_on_group_sync(struct km_worker *w, struct wmsg *m)
{
	int rc = w->fe ? 0 : KM_EPARTOFFLINE;

	m->u.sync.w = w;
	if (rc == 0)
		rc = km_frontend_group_sync(w->fe, m->u.sync.s, on_group_synced, m);
	if (rc < 0) {
		km_worker_reply_done(w, m->reply, rc, km_strerror(rc));
		free(m);
	}
}

int km_worker_group_sync(struct km_worker *w, struct km_group_sync *s,
			 struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_GROUP_SYNC, NULL, reply);

	if (m == NULL)
		return -ENOMEM;
	m->u.sync.s = s;
	return km_worker_post(w, m);
}

/* The writers with work are on the ready list: a write submitted touches
 * its partition, which stays there while the writer has any pending. */
void km_worker_fe_poll(struct km_worker *w)
{
	for (uint32_t j = 0; j < w->n_act; j++) {
		struct wpart *wp = &w->wparts[w->act[j]];

		if (wp->lw != NULL)
			km_local_write_poll(wp->lw);
	}
	if (w->fe != NULL)
		km_frontend_tick(w->fe, w->now_ms);
}

void km_worker_fe_stop(struct km_worker *w)
{
	if (w->fe != NULL)
		km_frontend_stop(w->fe);
}

bool km_worker_fe_idle(struct km_worker *w)
{
	if (w->fwd_pending > 0 || !writers_idle(w))
		return false;
	return w->fe == NULL || km_frontend_idle(w->fe);
}

void km_worker_fe_free(struct km_worker *w)
{
	if (w->fe != NULL)
		km_frontend_destroy(w->fe);
	w->fe = NULL;
}

/* After the logs are closed: nothing reads the copies any more. */
void km_worker_fe_free_writers(struct km_worker *w)
{
	for (uint32_t i = 0; i < w->n_wparts; i++) {
		if (w->wparts[i].lw != NULL)
			km_local_write_destroy(w->wparts[i].lw);
		w->wparts[i].lw = NULL;
	}
}
