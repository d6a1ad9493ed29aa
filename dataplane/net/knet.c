/* Kernel network backend: TCP over kernel sockets, every operation an
 * io_uring request on the worker's ring (iouring_log/uring.h), shared with
 * the worker's disk I/O.
 *
 * Requests. Each connection embeds one struct km_io_req per operation kind,
 * so a CQE's user_data names both the connection and the operation:
 *   r_connect + r_ltimeout  IORING_OP_CONNECT linked to a LINK_TIMEOUT;
 *   r_recv                  multishot RECV with IOSQE_BUFFER_SELECT from the
 *                           backend's provided buffer ring (kernel >= 6.0),
 *                           or single-shot RECV into a pool buffer;
 *   r_send                  SENDMSG of everything queued (one at a time, so
 *                           order holds; a short count is resubmitted);
 *   r_timer + r_tremove     the graceful-close timeout and its removal;
 *   r_cancel                ASYNC_CANCEL of every request on the fd.
 * c->inflight counts requests whose final CQE is still due; a connection
 * returns to the pool only when it is DEAD and that count is 0, so no CQE
 * can ever name a recycled slot.
 *
 * Needs. What a connection still has to submit is a bitmask (c->need);
 * km_knet_conn_service() submits what it can. A need that found the SQ
 * full puts the connection on the pending list (retried by km_net_poll());
 * a receive that found no free buffer puts it on the starved list (moved
 * to pending when buffers are released). Both lists are intrusive and
 * bounded by conns_max.
 *
 * Teardown. Whatever ends a connection (EOF, an error, abort, close timeout)
 * calls km_knet_conn_teardown() once: state DEAD, cancel everything on the
 * fd, and when the last request has completed conn_finalize() closes the fd
 * (with SO_LINGER 0 for an abortive close, so the peer gets a RST), fails
 * the unsent sends with -ECANCELED, reports on_close (or on_connect) and
 * frees the slot. The cancel always goes through the ring, so finalisation
 * (and with it every user callback) runs from the poll loop, never from
 * inside a km_net_* call.
 */
#include "dataplane/net/net.h"

#include <arpa/inet.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/container.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/net/knet_pvt.h"
#include "iouring_log/uring.h"

/* Pending connections serviced per km_net_poll() (STYLE 13). */
#define KNET_POLL_BUDGET 32u
/* Largest provided buffer ring the kernel takes (entries are u16 ids). */
#define KNET_BUFS_MAX 32768u
#define KNET_BUF_BYTES_MIN 512u
#define KNET_BUF_BYTES_MAX (16u << 20)
/* sendmsg takes at most UIO_MAXIOV (1024) iovecs. */
#define KNET_IOV_MAX 1024u
#define KNET_CONNS_MAX (1u << 20)
#define KNET_LISTENERS_MAX 1024u
#define KNET_SENDQ_MAX 65536u
#define KNET_CLOSE_TIMEOUT_MS 10000u
/* Destroy waits for at most this many completions of the worker's ring. */
#define KNET_DESTROY_ROUNDS (1u << 22)


/* ---- small helpers --------------------------------------------------- */

static void ms_to_ts(struct __kernel_timespec *ts, uint32_t ms)
{
	ts->tv_sec = ms / 1000;
	ts->tv_nsec = (long long)(ms % 1000) * 1000000;
}

int km_knet_parse_ipv4(const char *ipv4, uint16_t port, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (ipv4 == NULL || inet_pton(AF_INET, ipv4, &sa->sin_addr) != 1)
		return -EINVAL;
	return 0;
}

void km_knet_set_nodelay(int fd)
{
	int one = 1;

	/* Only fails on a socket that is not TCP: a programming error. */
	KM_ASSERT(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
			     sizeof(one)) == 0);
}

/* Close; with abortive, SO_LINGER {1, 0} turns the FIN into a RST. */
void km_knet_close_fd(int fd, bool abortive)
{
	if (abortive) {
		struct linger lg = { 1, 0 };

		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	}
	close(fd);
}

/* ---- submissions ---------------------------------------------------- */

static bool prep_connect(struct knet_conn *c)
{
	struct knet *kn = c->kn;
	bool timed = kn->cfg.connect_timeout_ms > 0;
	struct io_uring_sqe *sqe = knet_sqe(kn, timed ? 2 : 1);

	if (sqe == NULL)
		return false;
	io_uring_prep_connect(sqe, c->fd, (struct sockaddr *)&c->peer,
			      sizeof(c->peer));
	conn_op_start(c, sqe, &c->r_connect);
	if (timed) {
		/* The two SQEs are adjacent (knet_sqe reserved both), so the
		 * link holds: the timeout cancels the connect if it fires. */
		sqe->flags |= IOSQE_IO_LINK;
		sqe = io_uring_get_sqe(&kn->u->ring);
		KM_ASSERT(sqe != NULL);
		ms_to_ts(&c->ts_connect, kn->cfg.connect_timeout_ms);
		io_uring_prep_link_timeout(sqe, &c->ts_connect, 0);
		conn_op_start(c, sqe, &c->r_ltimeout);
	}
	c->need &= ~(uint32_t)NEED_CONNECT;
	return true;
}

static bool prep_timer(struct knet_conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->state != CONN_CLOSING || c->timer_armed) {
		c->need &= ~(uint32_t)NEED_TIMER;
		return true;
	}
	if ((sqe = knet_sqe(c->kn, 1)) == NULL)
		return false;
	ms_to_ts(&c->ts_close, c->kn->cfg.close_timeout_ms);
	io_uring_prep_timeout(sqe, &c->ts_close, 0, 0);
	conn_op_start(c, sqe, &c->r_timer);
	c->timer_armed = true;
	c->need &= ~(uint32_t)NEED_TIMER;
	return true;
}

static bool prep_cancel(struct knet_conn *c)
{
	struct io_uring_sqe *sqe = knet_sqe(c->kn, 1);

	if (sqe == NULL)
		return false;
	/* Every request on the fd: connect (its linked timeout follows),
	 * recv, sendmsg. Kernel >= 5.19. */
	io_uring_prep_cancel_fd(sqe, c->fd, IORING_ASYNC_CANCEL_ALL);
	conn_op_start(c, sqe, &c->r_cancel);
	c->need &= ~(uint32_t)NEED_CANCEL;
	return true;
}

static bool prep_tremove(struct knet_conn *c)
{
	struct io_uring_sqe *sqe;

	if (!c->timer_armed) {
		c->need &= ~(uint32_t)NEED_TREMOVE;
		return true;
	}
	if ((sqe = knet_sqe(c->kn, 1)) == NULL)
		return false;
	io_uring_prep_timeout_remove(sqe, (uint64_t)(uintptr_t)&c->r_timer, 0);
	conn_op_start(c, sqe, &c->r_tremove);
	c->need &= ~(uint32_t)NEED_TREMOVE;
	return true;
}

/* Submit what c needs; park it on the pending list if the SQ was full, on
 * the starved list if only a receive buffer is missing. */
void km_knet_conn_service(struct knet_conn *c)
{
	bool sq_full = false;
	int rc = 0;

	if (c->need & NEED_CANCEL)
		sq_full |= !prep_cancel(c);
	if (c->need & NEED_TREMOVE)
		sq_full |= !prep_tremove(c);
	if (c->need & NEED_CONNECT)
		sq_full |= !prep_connect(c);
	if (c->need & NEED_TIMER)
		sq_full |= !prep_timer(c);
	if (c->need & NEED_SEND)
		sq_full |= !km_knet_prep_send(c);
	if (c->need & NEED_RECV)
		rc = km_knet_prep_recv(c);
	if (sq_full || rc == -EBUSY) {
		conn_place(c, L_PENDING);
	} else if (rc == -ENOBUFS) {
		if (!c->stalled) {
			c->stalled = true;
			c->st.rx_stalls++;
			c->kn->st.rx_stalls++;
		}
		conn_place(c, L_STARVED);
	} else {
		conn_place(c, L_NONE);
	}
}

/* ---- connection life cycle ------------------------------------------ */

struct knet_conn *km_knet_conn_alloc(struct knet *kn)
{
	struct knet_conn *c;

	if (link_empty(&kn->free_list))
		return NULL;
	c = km_container_of(kn->free_list.next, struct knet_conn, link);
	conn_place(c, L_NONE);
	KM_ASSERT(c->state == CONN_FREE);
	KM_ASSERT(c->inflight == 0);
	c->need = 0;
	c->reason = 0;
	c->rx_bid = KNET_NO_BUF;
	c->established = c->abortive = c->shut_wr = c->stalled = false;
	c->recv_armed = c->send_armed = c->timer_armed = false;
	c->sq_head = c->sq_count = c->si_head = c->si_count = 0;
	memset(&c->st, 0, sizeof(c->st));
	kn->st.conns_used++;
	return c;
}

static void conn_free(struct knet_conn *c)
{
	struct knet *kn = c->kn;

	KM_ASSERT(c->inflight == 0);
	KM_ASSERT(c->sq_count == 0);
	c->state = CONN_FREE;
	c->fd = -1;
	c->pub.h = NULL;
	c->pub.ctx = NULL;
	kn->st.conns_used--;
	conn_place(c, L_FREE);
}

static void conn_count_close(struct knet *kn, int reason)
{
	kn->st.closes++;
	if (reason == -ECONNRESET)
		kn->st.resets++;
	else if (reason != 0 && reason != -ECONNABORTED)
		kn->st.errors++;
}

/* Last step: every request has completed. */
static void conn_finalize(struct knet_conn *c)
{
	const struct km_net_handler *h = c->pub.h;

	KM_ASSERT(c->state == CONN_DEAD);
	KM_ASSERT(c->inflight == 0);
	KM_ASSERT(c->rx_bid == KNET_NO_BUF);
	conn_place(c, L_NONE);
	c->need = 0;
	km_knet_close_fd(c->fd, c->abortive);
	km_knet_send_fail_all(c);
	if (c->established) {
		conn_count_close(c->kn, c->reason);
		if (h->on_close != NULL)
			h->on_close(&c->pub, c->reason);
	} else if (h->on_connect != NULL) {
		h->on_connect(&c->pub, c->reason);
	}
	conn_free(c);
}

/* A request of c reached its final CQE. */
void km_knet_conn_op_done(struct knet_conn *c)
{
	KM_ASSERT(c->inflight > 0);
	c->inflight--;
	c->kn->inflight--;
	if (c->state == CONN_DEAD && c->inflight == 0)
		conn_finalize(c);
}

void km_knet_conn_teardown(struct knet_conn *c, int reason, bool abortive)
{
	KM_ASSERT(c->state != CONN_FREE);
	if (c->state == CONN_DEAD)
		return; /* the first reason stands */
	c->state = CONN_DEAD;
	c->reason = reason;
	c->abortive = abortive;
	c->need = NEED_CANCEL;
	if (c->timer_armed)
		c->need |= NEED_TREMOVE;
	km_knet_conn_service(c);
}

void km_knet_conn_shut_wr(struct knet_conn *c)
{
	/* Fails only if the peer already reset (ENOTCONN): the receive
	 * reports that. */
	(void)shutdown(c->fd, SHUT_WR);
	c->shut_wr = true;
}

/* ---- completions ---------------------------------------------------- */

static void on_connect_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	struct knet_conn *c = km_container_of(req, struct knet_conn, r_connect);
	const struct km_net_handler *h = c->pub.h;

	(void)flags;
	if (c->state == CONN_CONNECTING && res == 0) {
		c->state = CONN_OPEN;
		c->established = true;
		c->kn->st.connects++;
		if (h->on_connect != NULL)
			h->on_connect(&c->pub, 0);
		if (conn_rx_live(c)) {
			c->need |= NEED_RECV | NEED_SEND;
			km_knet_conn_service(c);
		}
	} else if (c->state == CONN_CONNECTING) {
		/* Only the linked timeout cancels a connect we still want. */
		c->kn->st.connect_errors++;
		km_knet_conn_teardown(c, res == -ECANCELED ? -ETIMEDOUT : res,
				      false);
	}
	km_knet_conn_op_done(c);
}

static void on_ltimeout_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	/* -ETIME: fired (the connect then completes -ECANCELED); -ECANCELED
	 * or -ENOENT: the connect finished first. Nothing to do either way. */
	(void)res;
	(void)flags;
	km_knet_conn_op_done(
		km_container_of(req, struct knet_conn, r_ltimeout));
}

static void on_timer_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	struct knet_conn *c = km_container_of(req, struct knet_conn, r_timer);

	(void)flags;
	c->timer_armed = false;
	/* -ETIME: the peer's FIN did not come in time; -ECANCELED: removed. */
	if (res == -ETIME && c->state == CONN_CLOSING)
		km_knet_conn_teardown(c, -ETIMEDOUT, true);
	km_knet_conn_op_done(c);
}

static void on_tremove_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	(void)res; /* 0, or -ENOENT / -EALREADY if the timer fired first */
	(void)flags;
	km_knet_conn_op_done(km_container_of(req, struct knet_conn, r_tremove));
}

static void on_cancel_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	struct knet_conn *c = km_container_of(req, struct knet_conn, r_cancel);

	(void)flags;
	/* res: how many were cancelled, or -ENOENT (none left) / -EALREADY
	 * (running: its CQE follows). -EINVAL: the kernel predates
	 * IORING_ASYNC_CANCEL_FD, so wake the socket's requests instead. */
	if (res == -EINVAL)
		(void)shutdown(c->fd, SHUT_RDWR);
	km_knet_conn_op_done(c);
}

/* ---- public: connections -------------------------------------------- */

static int knet_connect(struct km_net *net, const char *ipv4, uint16_t port,
			const struct km_net_handler *h, void *ctx,
			struct km_net_conn **out)
{
	struct knet *kn = knet_of(net);
	struct sockaddr_in sa;
	struct knet_conn *c;
	int fd;

	KM_ASSERT(h != NULL);
	if (km_knet_parse_ipv4(ipv4, port, &sa) < 0)
		return -EINVAL;
	if ((c = km_knet_conn_alloc(kn)) == NULL)
		return -ENOBUFS;
	/* Blocking mode on purpose: io_uring then polls the socket itself;
	 * on an O_NONBLOCK one it would hand -EAGAIN back. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int rc = -errno;

		conn_free(c);
		return rc;
	}
	km_knet_set_nodelay(fd);
	c->fd = fd;
	c->peer = sa;
	c->pub.h = h;
	c->pub.ctx = ctx;
	c->state = CONN_CONNECTING;
	c->need = NEED_CONNECT;
	km_knet_conn_service(c);
	*out = &c->pub;
	return 0;
}

static int knet_close(struct km_net_conn *pc)
{
	struct knet_conn *c = conn_of(pc);

	switch (c->state) {
	case CONN_CONNECTING:
		km_knet_conn_teardown(c, -ECONNABORTED, true);
		return 0;
	case CONN_OPEN:
		c->state = CONN_CLOSING;
		if (c->si_count == 0 && !c->send_armed)
			km_knet_conn_shut_wr(c);
		c->need |= NEED_TIMER;
		km_knet_conn_service(c);
		return 0;
	case CONN_CLOSING:
	case CONN_DEAD:
		return -EALREADY;
	case CONN_FREE:
	default:
		KM_ASSERT(!"km_net_close on a free connection");
		return -EINVAL;
	}
}

static void knet_abort(struct km_net_conn *pc)
{
	struct knet_conn *c = conn_of(pc);

	KM_ASSERT(c->state != CONN_FREE);
	km_knet_conn_teardown(c, -ECONNABORTED, true);
}

/* ---- poll, stats ---------------------------------------------------- */

static int knet_poll(struct km_net *net)
{
	struct knet *kn = knet_of(net);
	uint32_t done = 0;

	while (done < KNET_POLL_BUDGET && !link_empty(&kn->pending)) {
		struct knet_conn *c = km_container_of(kn->pending.next,
						      struct knet_conn, link);

		conn_place(c, L_NONE);
		km_knet_conn_service(c);
		done++;
	}
	for (uint32_t i = 0;
	     kn->listeners_pending > 0 && i < kn->cfg.listeners_max; i++)
		if (kn->lsn[i].pending) {
			km_knet_listener_service(&kn->lsn[i]);
			done++;
		}
	return (int)done;
}

static bool knet_wants_poll(const struct km_net *net)
{
	const struct knet *kn = km_container_of(net, struct knet, pub);

	return !link_empty(&kn->pending) || kn->listeners_pending > 0;
}

static void knet_stats(const struct km_net *net, struct km_net_stats *out)
{
	const struct knet *kn = km_container_of(net, struct knet, pub);

	*out = kn->st;
	out->conns_max = kn->cfg.conns_max;
	out->rx_bufs_total = kn->cfg.rx_buf_count;
	out->rx_multishot = kn->multishot;
}

static void knet_conn_stats(const struct km_net_conn *pc,
			    struct km_net_conn_stats *out)
{
	const struct knet_conn *c =
		km_container_of(pc, const struct knet_conn, pub);

	*out = c->st;
	out->send_queued = c->sq_count;
}

/* ---- create, destroy ------------------------------------------------ */

static const struct km_io_req conn_reqs[] = {
	{ on_connect_cqe }, { on_ltimeout_cqe }, { km_knet_on_recv_cqe },
	{ km_knet_on_send_cqe },    { on_timer_cqe },	 { on_tremove_cqe },
	{ on_cancel_cqe },
};

static void conn_init(struct knet *kn, struct knet_conn *c, uint32_t i)
{
	const struct km_net_config *cfg = &kn->cfg;

	c->pub.net = &kn->pub;
	c->kn = kn;
	c->fd = -1;
	c->rx_bid = KNET_NO_BUF;
	c->state = CONN_FREE;
	c->r_connect = conn_reqs[0];
	c->r_ltimeout = conn_reqs[1];
	c->r_recv = conn_reqs[2];
	c->r_send = conn_reqs[3];
	c->r_timer = conn_reqs[4];
	c->r_tremove = conn_reqs[5];
	c->r_cancel = conn_reqs[6];
	c->sq = kn->slot_mem + (size_t)i * cfg->send_queue_max;
	c->sq_iov = kn->iov_mem + (size_t)i * cfg->send_iov_max * 2;
	c->tx_iov = c->sq_iov + cfg->send_iov_max;
	link_init(&c->link);
	c->list = L_NONE;
	conn_place(c, L_FREE);
}

static int conns_init(struct knet *kn)
{
	const struct km_net_config *cfg = &kn->cfg;
	size_t n = cfg->conns_max;

	link_init(&kn->free_list);
	link_init(&kn->pending);
	link_init(&kn->starved);
	kn->conns = calloc(n, sizeof(*kn->conns));
	kn->lsn = calloc(cfg->listeners_max + 1, sizeof(*kn->lsn));
	kn->slot_mem = calloc(n * cfg->send_queue_max, sizeof(*kn->slot_mem));
	kn->iov_mem = calloc(n * cfg->send_iov_max * 2, sizeof(*kn->iov_mem));
	if (kn->conns == NULL || kn->lsn == NULL || kn->slot_mem == NULL ||
	    kn->iov_mem == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < cfg->conns_max; i++)
		conn_init(kn, &kn->conns[i], i);
	for (uint32_t i = 0; i < cfg->listeners_max; i++)
		km_knet_listener_init(kn, &kn->lsn[i]);
	return 0;
}

static void conns_free_all(struct knet *kn)
{
	free(kn->conns);
	free(kn->lsn);
	free(kn->slot_mem);
	free(kn->iov_mem);
}

static void knet_destroy(struct km_net *net)
{
	struct knet *kn = knet_of(net);

	for (uint32_t i = 0; i < kn->cfg.conns_max; i++) {
		struct knet_conn *c = &kn->conns[i];

		if (c->state != CONN_FREE && c->state != CONN_DEAD)
			km_knet_conn_teardown(c, -ECONNABORTED, true);
	}
	for (uint32_t i = 0; i < kn->cfg.listeners_max; i++)
		if (kn->lsn[i].used && !kn->lsn[i].closing)
			km_knet_unlisten(&kn->lsn[i].pub);
	/* Each round completes at least one request of the ring. */
	for (uint32_t r = 0; r < KNET_DESTROY_ROUNDS; r++) {
		int rc;

		if (kn->inflight == 0 && !knet_wants_poll(net))
			break;
		knet_poll(net);
		rc = km_uring_poll(kn->u, kn->inflight > 0);
		KM_ASSERT(rc >= 0);
	}
	KM_ASSERT(kn->inflight == 0);
	KM_ASSERT(kn->st.conns_used == 0);
	km_knet_bufs_free_all(kn);
	conns_free_all(kn);
	free(kn);
}

static const struct km_net_ops knet_ops = {
	.destroy = knet_destroy,
	.poll = knet_poll,
	.wants_poll = knet_wants_poll,
	.connect = knet_connect,
	.listen = km_knet_listen,
	.unlisten = km_knet_unlisten,
	.send = km_knet_send,
	.release = km_knet_release,
	.close = knet_close,
	.abort = knet_abort,
	.stats = knet_stats,
	.conn_stats = knet_conn_stats,
};

static bool config_ok(const struct km_net_config *cfg)
{
	return cfg->uring != NULL && cfg->conns_max >= 1 &&
	       cfg->conns_max <= KNET_CONNS_MAX &&
	       cfg->listeners_max <= KNET_LISTENERS_MAX &&
	       cfg->rx_buf_count >= 1 && cfg->rx_buf_count <= KNET_BUFS_MAX &&
	       cfg->rx_buf_bytes >= KNET_BUF_BYTES_MIN &&
	       cfg->rx_buf_bytes <= KNET_BUF_BYTES_MAX &&
	       cfg->send_queue_max >= 1 && cfg->send_queue_max <= KNET_SENDQ_MAX &&
	       cfg->send_iov_max >= 1 && cfg->send_iov_max <= KNET_IOV_MAX &&
	       (cfg->rx_mode == KM_NET_RX_AUTO ||
		cfg->rx_mode == KM_NET_RX_SINGLE);
}

int km_knet_create(const struct km_net_config *cfg, struct km_net **out)
{
	struct knet *kn;
	int rc;

	if (!config_ok(cfg))
		return -EINVAL;
	if ((kn = calloc(1, sizeof(*kn))) == NULL)
		return -ENOMEM;
	kn->pub.ops = &knet_ops;
	kn->u = cfg->uring;
	kn->cfg = *cfg;
	if (kn->cfg.close_timeout_ms == 0)
		kn->cfg.close_timeout_ms = KNET_CLOSE_TIMEOUT_MS;
	if ((rc = conns_init(kn)) < 0)
		goto out_free;
	if ((rc = km_knet_bufs_init(kn)) < 0)
		goto out_free;
	KM_INFO("knet", "%u connections, %u x %u B receive buffers, %s recv",
		cfg->conns_max, cfg->rx_buf_count, cfg->rx_buf_bytes,
		kn->multishot ? "multishot" : "single-shot");
	*out = &kn->pub;
	return 0;
out_free:
	km_knet_bufs_free_all(kn);
	conns_free_all(kn);
	free(kn);
	return rc;
}
