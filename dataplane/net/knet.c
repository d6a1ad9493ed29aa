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
 *
 * Files. This one creates, polls and destroys the backend; knet_conn.c runs
 * the connection life cycle above; knet_recv.c the receive buffers and
 * RECV; knet_send.c the send queue and SENDMSG; knet_listen.c listeners and
 * ACCEPT. knet_pvt.h holds the types they share.
 */
#include "dataplane/net/net.h"

#include <errno.h>
#include <stdlib.h>

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
	out->rx_buf_bytes = kn->cfg.rx_buf_bytes;
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

static int knet_conn_peer(const struct km_net_conn *pc, struct sockaddr_in *out)
{
	const struct knet_conn *c =
		km_container_of(pc, const struct knet_conn, pub);

	if (c->peer.sin_family != AF_INET)
		return -ENOTCONN;
	*out = c->peer;
	return 0;
}

/* ---- create, destroy ------------------------------------------------ */

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
		km_knet_conn_init(kn, &kn->conns[i], i);
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
	.connect = km_knet_connect,
	.listen = km_knet_listen,
	.unlisten = km_knet_unlisten,
	.send = km_knet_send,
	.release = km_knet_release,
	.close = km_knet_close,
	.abort = km_knet_abort,
	.recv_pause = km_knet_recv_pause,
	.stats = knet_stats,
	.conn_stats = knet_conn_stats,
	.peer = knet_conn_peer,
};

static bool config_ok(const struct km_net_config *cfg)
{
	return cfg->uring != NULL && cfg->conns_max >= 1 &&
	       cfg->conns_max <= KNET_CONNS_MAX &&
	       cfg->listeners_max <= KNET_LISTENERS_MAX &&
	       cfg->rx_buf_count >= 1 && cfg->rx_buf_count <= KNET_BUFS_MAX &&
	       cfg->rx_buf_bytes >= KNET_BUF_BYTES_MIN &&
	       cfg->rx_buf_bytes <= KNET_BUF_BYTES_MAX &&
	       cfg->send_queue_max >= 1 &&
	       cfg->send_queue_max <= KNET_SENDQ_MAX &&
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
