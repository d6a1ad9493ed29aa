/* Kernel network backend: the connection life cycle. Whatever file set a
 * connection's needs, km_knet_conn_service() submits them from here, so the
 * order in which they go out is decided in one place. Also here: connect
 * (linked to its timeout), graceful close (its timer), abort and teardown
 * (cancel everything on the fd, finalise once the last request has
 * completed), and the socket helpers accept shares. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/container.h"
#include "common/km_assert.h"
#include "dataplane/net/knet_pvt.h"

/* ---- sockets -------------------------------------------------------- */

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
	if (c->need & NEED_RXCANCEL)
		sq_full |= !km_knet_prep_rxcancel(c);
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
	c->rx_paused = c->rx_cancelling = false;
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

/* ---- setup ---------------------------------------------------------- */

static const struct km_io_req conn_reqs[] = {
	{ on_connect_cqe }, { on_ltimeout_cqe }, { km_knet_on_recv_cqe },
	{ km_knet_on_send_cqe }, { on_timer_cqe }, { on_tremove_cqe },
	{ on_cancel_cqe }, { km_knet_on_rxcancel_cqe },
};

void km_knet_conn_init(struct knet *kn, struct knet_conn *c, uint32_t i)
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
	c->r_rxcancel = conn_reqs[7];
	c->sq = kn->slot_mem + (size_t)i * cfg->send_queue_max;
	c->sq_iov = kn->iov_mem + (size_t)i * cfg->send_iov_max * 2;
	c->tx_iov = c->sq_iov + cfg->send_iov_max;
	link_init(&c->link);
	c->list = L_NONE;
	conn_place(c, L_FREE);
}

/* ---- public: connections -------------------------------------------- */

int km_knet_connect(struct km_net *net, const char *ipv4, uint16_t port,
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

int km_knet_close(struct km_net_conn *pc)
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

void km_knet_abort(struct km_net_conn *pc)
{
	struct knet_conn *c = conn_of(pc);

	KM_ASSERT(c->state != CONN_FREE);
	km_knet_conn_teardown(c, -ECONNABORTED, true);
}
