/* Kernel network backend: listeners. Each accepts on its socket with one
 * multishot ACCEPT (single-shot before kernel 5.19) and hands every new
 * socket to a pooled connection, or resets it when the pool is full. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/container.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/net/knet_pvt.h"

static int listen_socket(const struct sockaddr_in *sa, uint16_t *port)
{
	struct sockaddr_in bound;
	socklen_t len = sizeof(bound);
	int one = 1, rc;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 ||
	    listen(fd, SOMAXCONN) < 0 ||
	    getsockname(fd, (struct sockaddr *)&bound, &len) < 0)
		goto out_close;
	*port = ntohs(bound.sin_port);
	return fd;
out_close:
	rc = -errno;
	close(fd);
	return rc;
}

static void listener_set_pending(struct knet_listener *l, bool pending)
{
	if (l->pending == pending)
		return;
	l->pending = pending;
	if (pending)
		l->kn->listeners_pending++;
	else
		l->kn->listeners_pending--;
}

static void listener_op_done(struct knet_listener *l)
{
	KM_ASSERT(l->inflight > 0);
	l->inflight--;
	l->kn->inflight--;
	if (l->closing && l->inflight == 0) {
		listener_set_pending(l, false);
		close(l->fd);
		l->fd = -1;
		l->used = false;
	}
}

static bool listener_prep(struct knet_listener *l, struct km_io_req *req)
{
	struct io_uring_sqe *sqe = knet_sqe(l->kn, 1);

	if (sqe == NULL)
		return false;
	if (req == &l->r_cancel)
		io_uring_prep_cancel(sqe, &l->r_accept, 0);
	else if (l->multishot)
		io_uring_prep_multishot_accept(sqe, l->fd, NULL, NULL,
					       SOCK_CLOEXEC);
	else
		io_uring_prep_accept(sqe, l->fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data(sqe, req);
	km_uring_note_queued(l->kn->u);
	l->inflight++;
	l->kn->inflight++;
	return true;
}

void km_knet_listener_service(struct knet_listener *l)
{
	if (l->need_cancel && listener_prep(l, &l->r_cancel))
		l->need_cancel = false;
	if (l->closing)
		l->need_arm = false;
	if (l->need_arm && !l->armed && listener_prep(l, &l->r_accept)) {
		l->armed = true;
		l->need_arm = false;
	}
	listener_set_pending(l, l->need_cancel || l->need_arm);
}

/* A connection arrived; take it into the pool or turn it away. */
static void accept_conn(struct knet_listener *l, int fd)
{
	struct knet *kn = l->kn;
	struct knet_conn *c = km_knet_conn_alloc(kn);
	socklen_t len = sizeof(c->peer);

	if (c == NULL) {
		kn->st.accepts_refused++;
		KM_DEBUG("knet", "pool full (%u): connection reset",
			 kn->cfg.conns_max);
		km_knet_close_fd(fd, true);
		return;
	}
	km_knet_set_nodelay(fd);
	c->fd = fd;
	if (getpeername(fd, (struct sockaddr *)&c->peer, &len) < 0)
		memset(&c->peer, 0, sizeof(c->peer)); /* the peer is gone */
	c->pub.h = l->h;
	c->pub.ctx = l->pub.ctx;
	c->state = CONN_OPEN;
	c->established = true;
	kn->st.accepts++;
	if (l->h->on_accept != NULL)
		l->h->on_accept(&c->pub);
	if (conn_rx_live(c)) {
		c->need |= NEED_RECV | NEED_SEND;
		km_knet_conn_service(c);
	}
}

static void on_accept_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	struct knet_listener *l =
		km_container_of(req, struct knet_listener, r_accept);
	bool final = !(flags & IORING_CQE_F_MORE);

	if (res >= 0 && l->closing)
		close(res);
	else if (res >= 0)
		accept_conn(l, res);
	else if (res == -EINVAL && l->multishot)
		l->multishot = false; /* kernel < 5.19: single-shot accepts */
	else if (res != -ECANCELED && res != -EINTR && res != -ECONNABORTED)
		KM_WARN("knet", "accept on port %u: %s", l->pub.port,
			strerror(-res)); /* -EMFILE, -ENFILE, -ENOMEM */
	if (final) {
		l->armed = false;
		l->need_arm = !l->closing;
		/* After an error, re-arm from km_net_poll(), not here: a
		 * persistent -EMFILE would otherwise spin inside one poll. */
		if (res >= 0 || res == -EINVAL)
			km_knet_listener_service(l);
		else
			listener_set_pending(l, l->need_arm);
		listener_op_done(l);
	}
}

static void on_lcancel_cqe(struct km_io_req *req, int res, uint32_t flags)
{
	(void)res;
	(void)flags;
	listener_op_done(km_container_of(req, struct knet_listener, r_cancel));
}

void km_knet_listener_init(struct knet *kn, struct knet_listener *l)
{
	l->pub.net = &kn->pub;
	l->kn = kn;
	l->fd = -1;
	l->r_accept.fn = on_accept_cqe;
	l->r_cancel.fn = on_lcancel_cqe;
}

int km_knet_listen(struct km_net *net, const char *ipv4, uint16_t port,
		   const struct km_net_handler *h, void *ctx,
		   struct km_net_listener **out)
{
	struct knet *kn = knet_of(net);
	struct knet_listener *l = NULL;
	struct sockaddr_in sa;
	uint16_t bound = 0;
	int fd;

	KM_ASSERT(h != NULL);
	if (km_knet_parse_ipv4(ipv4, port, &sa) < 0)
		return -EINVAL;
	for (uint32_t i = 0; i < kn->cfg.listeners_max && l == NULL; i++)
		if (!kn->lsn[i].used)
			l = &kn->lsn[i];
	if (l == NULL)
		return -ENOBUFS;
	if ((fd = listen_socket(&sa, &bound)) < 0)
		return fd;
	KM_ASSERT(l->inflight == 0);
	l->used = true;
	l->closing = l->armed = l->need_cancel = l->pending = false;
	l->multishot = true;
	l->need_arm = true;
	l->fd = fd;
	l->h = h;
	l->pub.ctx = ctx;
	l->pub.port = bound;
	km_knet_listener_service(l);
	*out = &l->pub;
	return 0;
}

void km_knet_unlisten(struct km_net_listener *pl)
{
	struct knet_listener *l =
		km_container_of(pl, struct knet_listener, pub);

	KM_ASSERT(l->used);
	KM_ASSERT(!l->closing);
	l->closing = true;
	l->need_arm = false;
	if (l->armed) {
		l->need_cancel = true;
		km_knet_listener_service(l);
	} else if (l->inflight == 0) {
		listener_set_pending(l, false);
		close(l->fd);
		l->fd = -1;
		l->used = false;
	}
}
