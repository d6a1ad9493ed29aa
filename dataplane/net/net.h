/* Network backend: the TCP connections of one dataplane worker.
 *
 * A backend instance belongs to one worker thread and is never touched by
 * another: no locks, no atomics. Two implementations sit behind the same
 * narrow ops table: the kernel backend (dataplane/net/knet.c: kernel sockets
 * driven by the worker's io_uring, the default, runs anywhere) and the DPDK
 * backend (dataplane/net/dpdk/dnet.c: one queue pair of a DPDK port with
 * kmirror's own user-space TCP endpoint, dataplane/net/tcp/; listening ports
 * below 32768, the endpoint's own outgoing connections taking the rest).
 * Nothing here names an io_uring or DPDK type.
 *
 * Event model. Every callback runs on the worker thread, from the worker's
 * poll loop (km_uring_poll() for the kernel backend, then km_net_poll()),
 * never from inside a km_net_* call, so a callback may call any km_net_*
 * function, including km_net_abort() on its own connection. Per connection:
 *   - an active open reports on_connect exactly once: 0, or -errno and then
 *     the handle is dead (no on_close follows);
 *   - an accepted connection reports on_accept once, before any data;
 *   - every established connection reports on_close exactly once, whoever
 *     ended it, after its last on_recv and after every send callback; the
 *     handle is invalid once on_close returns and its slot is back in the
 *     pool.
 *
 * Receive (zero copy). Bytes arrive in backend-owned buffers, each delivered
 * to on_recv as a segment of a struct km_chain together with its buffer id.
 * The consumer (the Kafka framing parser) may keep any buffer past the
 * callback, across later callbacks and past on_close, until a frame is
 * complete or until the disk write that reads straight from it has finished,
 * and must then hand it back with km_net_release(). The chain and id arrays
 * passed to on_recv are valid only during the callback (copy the iovecs you
 * keep); the bytes are valid until their buffer is released.
 *
 * Backpressure. The receive buffers are one pool per backend, shared by its
 * connections. A consumer that holds buffers holds back reception: when the
 * pool is empty, reading stops (the kernel's socket buffer fills and TCP's
 * window closes on the peer), and it resumes on the next km_net_poll() after
 * buffers are released. No byte is lost or reordered. A consumer must
 * therefore release what it no longer needs promptly; holding the whole pool
 * stalls every connection of the worker.
 *
 * Send. km_net_send() queues a chain of iovecs; the backend copies the iovec
 * array but not the bytes, which must stay valid until the send's callback.
 * Sends on a connection go out in order, all of each before any of the next;
 * the callback runs once the kernel (or the TCP endpoint) has taken every
 * byte, short writes being resubmitted internally. The queue per connection is
 * bounded (send_queue_max sends, send_iov_max iovecs): a full queue is
 * -EAGAIN, and the caller retries after a send callback.
 */
#ifndef KM_DATAPLANE_NET_H
#define KM_DATAPLANE_NET_H

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/chain.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_uring;
struct km_net;
struct km_net_conn;
struct km_net_listener;

enum km_net_kind {
	KM_NET_KERNEL = 0, /* kernel TCP sockets on the worker's io_uring */
	KM_NET_DPDK = 1,   /* DPDK port + kmirror's TCP endpoint */
};

enum km_net_rx_mode {
	/* Kernel backend: multishot recv into a provided buffer ring when the
	 * kernel accepts it (probed at create), else single-shot recv. */
	KM_NET_RX_AUTO = 0,
	/* Kernel backend: always single-shot recv into the pool's buffers (the
	 * fallback path, selectable so that it stays tested). Each connection
	 * waiting for data then holds one buffer, so size rx_buf_count well
	 * above conns_max. */
	KM_NET_RX_SINGLE = 1,
};

/* KM_NET_DPDK: the port and the endpoint's addresses. The port is found by
 * name (a vdev given in the EAL arguments, or a PCI address the EAL
 * probed), else hot-plugged from the devargs. The EAL must be up
 * (km_dpdk_eal_init(), dataplane/net/dpdk/dpdk.h). With this backend
 * rx_buf_count is the number of mbufs in the receive pool (2 KiB of data
 * each, on hugepages) and rx_buf_bytes the payload a consumer may count on
 * per buffer (the MSS; frames are never larger than one mbuf). */
struct km_net_dpdk_config {
	const char *port;	/* "net_af_packet0,iface=veth0", "0000:01:00.0" */
	uint16_t queue;		/* queue pair of this backend, < queues */
	uint16_t queues;	/* queue pairs of the port, one per worker's
				   backend; 0 or 1: one */
	uint32_t ip_be;		/* our IPv4 address, network byte order */
	uint32_t netmask_be;
	uint32_t gateway_be;	/* 0: every peer is on-link */
	uint8_t mac[6];
	bool mac_set;		/* else the port's own MAC */
	uint32_t mtu;		/* 0: the port's own (at most one default
				   mbuf's frame); else set on the port, with
				   mbufs that hold a frame of it */
};

/* Static capacities: everything is allocated by km_net_create() (STYLE 9).
 * Memory: rx_buf_count * rx_buf_bytes for the receive pool, plus per
 * connection about 512 B + send_queue_max * 40 B + send_iov_max * 32 B. */
struct km_net_config {
	enum km_net_kind kind;
	uint32_t conns_max;	     /* connections, active and accepted, >= 1 */
	uint32_t listeners_max;	     /* listening sockets, may be 0 */
	uint32_t rx_buf_count;	     /* receive buffers, 1..32768 */
	uint32_t rx_buf_bytes;	     /* bytes per receive buffer, 512..16 MiB */
	uint32_t send_queue_max;     /* queued sends per connection, >= 1 */
	uint32_t send_iov_max;	     /* queued iovecs per connection, 1..1024 */
	uint32_t connect_timeout_ms; /* 0: the kernel's SYN retries (~2 min) */
	uint32_t close_timeout_ms;   /* graceful close: wait this long for the
					peer's FIN, then reset; 0: 10 s */
	enum km_net_rx_mode rx_mode;
	struct km_uring *uring;	     /* KM_NET_KERNEL: the worker's ring */
	struct km_net_dpdk_config dpdk; /* KM_NET_DPDK only */
};

/* The five callbacks of a connection (STYLE 7: function-pointer typedefs). */

/** Active open finished: 0, or -ECONNREFUSED, -ETIMEDOUT (connect_timeout_ms
 *  passed), -ENETUNREACH, -EHOSTUNREACH, -ECONNABORTED (closed locally
 *  while connecting), or another -errno from connect(2). */
typedef void (*km_net_connect_fn)(struct km_net_conn *c, int res);

/** A listener accepted c. Its ctx starts as the listener's ctx; set another
 *  with km_net_conn_set_ctx(), or km_net_abort() it to turn it away. */
typedef void (*km_net_accept_fn)(struct km_net_conn *c);

/**
 * Bytes arrived, in stream order.
 * @param data     segments; data->iov and buf_ids live only during the call.
 * @param buf_ids  buf_ids[i] owns data->iov[i]: release each exactly once.
 */
typedef void (*km_net_recv_fn)(struct km_net_conn *c,
			       const struct km_chain *data,
			       const uint32_t *buf_ids);

/**
 * The connection ended; reported exactly once per established connection.
 * @param reason  0: orderly end (the peer's FIN arrived; after km_net_close()
 *                this is the normal outcome);
 *                -ECONNRESET: reset by the peer;
 *                -ECONNABORTED: km_net_abort() (or km_net_close() while
 *                connecting);
 *                -ETIMEDOUT: the kernel timed the connection out, or a
 *                graceful close waited close_timeout_ms for the peer's FIN
 *                and then reset the connection;
 *                -EPIPE, -EHOSTUNREACH, ...: another socket error.
 */
typedef void (*km_net_close_fn)(struct km_net_conn *c, int reason);

/**
 * A send finished.
 * @param res  the send's total bytes once all were taken; or -ECANCELED if
 *             the connection closed first (its on_close gives the reason).
 */
typedef void (*km_net_sent_fn)(struct km_net_conn *c, void *arg, int res);

/* A connection's callbacks; the struct must outlive the connection. Any may
 * be NULL: a NULL on_recv releases buffers at once. */
struct km_net_handler {
	km_net_connect_fn on_connect;
	km_net_accept_fn on_accept;
	km_net_recv_fn on_recv;
	km_net_close_fn on_close;
};

struct km_net_conn_stats {
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t recvs;	      /* receive completions with bytes ("packets in") */
	uint64_t sends;	      /* send completions with bytes ("packets out") */
	uint64_t short_sends; /* sends the kernel took only part of */
	uint64_t rx_stalls;   /* times reception stopped: no free buffer */
	uint32_t send_queued; /* sends waiting or in flight */
	/* KM_NET_DPDK (kmirror's TCP); 0 with the kernel backend. */
	uint64_t retransmits;  /* segments sent again */
	uint64_t out_of_order; /* payload pieces queued out of order */
};

struct km_net_stats {
	uint64_t bytes_in;
	uint64_t bytes_out;
	uint64_t recvs;
	uint64_t sends;
	uint64_t short_sends;
	uint64_t connects;	  /* active opens that succeeded */
	uint64_t connect_errors;  /* active opens that failed */
	uint64_t accepts;	  /* connections accepted into the pool */
	uint64_t accepts_refused; /* accepted then reset: the pool was full */
	uint64_t closes;	  /* on_close reports */
	uint64_t resets;	  /* ... of which -ECONNRESET */
	uint64_t errors;	  /* ... of which another socket error */
	uint64_t rx_stalls;	  /* reception stopped for lack of buffers */
	uint64_t send_queue_full; /* km_net_send() answered -EAGAIN */
	uint32_t conns_used;	  /* slots in use: connecting, open, closing */
	uint32_t conns_max;
	uint32_t rx_bufs_total;
	uint32_t rx_bufs_held;	  /* delivered and not yet released */
	/* Kernel: each receive buffer's capacity, every delivered segment
	 * starting at its buffer's first byte (so that a consumer may pack
	 * more into it); 0 (DPDK): segments are parts of mbufs. */
	uint32_t rx_buf_bytes;
	bool rx_multishot;	  /* kernel: multishot recv + buffer ring */
	/* Port counters (KM_NET_DPDK; 0 with the kernel backend, where the
	 * kernel keeps them). */
	uint64_t frames_in;	  /* frames taken off the port */
	uint64_t frames_out;	  /* frames the port accepted */
	uint64_t frame_bytes_in;  /* their bytes, Ethernet header included */
	uint64_t frame_bytes_out;
	uint64_t frames_dropped;  /* malformed or unexpected: counted, freed */
	uint64_t tx_dropped;	  /* frames the port or the pool refused */
	uint64_t rx_missed;	  /* port: no descriptor or mbuf (imissed +
				     rx_nombuf) */
	uint64_t retransmits;	  /* TCP segments sent again */
	uint64_t out_of_order;	  /* payload pieces queued out of order */
	/* Steering (KM_NET_DPDK with several queues, dnet_port.c): frames
	 * this queue took for another one and passed on, frames it got from
	 * the others, and those lost on the way (ring full, no mbuf). */
	uint64_t steered_out;
	uint64_t steered_in;
	uint64_t steer_drops;
	/* KM_NET_DPDK: microseconds spent in km_net_poll() calls that found
	 * work, and in those that found none: a polled port burns its core
	 * by design, and the second is that burn (naps excluded). */
	uint64_t poll_busy_us;
	uint64_t poll_idle_us;
	uint16_t queue;		  /* the port queue pair of this backend */
	uint16_t queues;	  /* the port's queue pairs */
	bool flow_rules;	  /* the port steers by flow rule, not RSS */
	bool csum_offload;	  /* the port computes our checksums */
};

/* Backend vtable: one per implementation. Private: call the km_net_*
 * wrappers below. */
struct km_net_ops {
	void (*destroy)(struct km_net *net);
	int (*poll)(struct km_net *net);
	bool (*wants_poll)(const struct km_net *net);
	uint32_t (*nap_us)(const struct km_net *net); /* NULL: never naps */
	int (*connect)(struct km_net *net, const char *ipv4, uint16_t port,
		       const struct km_net_handler *h, void *ctx,
		       struct km_net_conn **out);
	int (*listen)(struct km_net *net, const char *ipv4, uint16_t port,
		      const struct km_net_handler *h, void *ctx,
		      struct km_net_listener **out);
	void (*unlisten)(struct km_net_listener *l);
	int (*send)(struct km_net_conn *c, const struct iovec *iov,
		    uint32_t n_iov, km_net_sent_fn fn, void *arg);
	void (*release)(struct km_net *net, const uint32_t *buf_ids,
			uint32_t n);
	int (*close)(struct km_net_conn *c);
	void (*abort)(struct km_net_conn *c);
	int (*recv_pause)(struct km_net_conn *c, bool paused); /* NULL: none */
	void (*stats)(const struct km_net *net, struct km_net_stats *out);
	void (*conn_stats)(const struct km_net_conn *c,
			   struct km_net_conn_stats *out);
	int (*peer)(const struct km_net_conn *c,
		    struct sockaddr_in *out); /* NULL: none */
};

/* The three handles are visible only so that the wrappers below inline the
 * dispatch (STYLE 5); their fields are private to the backends, which embed
 * them first in their own structs. */
struct km_net {
	const struct km_net_ops *ops;
};

struct km_net_conn {
	struct km_net *net;
	const struct km_net_handler *h;
	void *ctx;
};

struct km_net_listener {
	struct km_net *net;
	void *ctx;
	uint16_t port;
};

/**
 * Create a kernel-socket backend on cfg->uring (which must outlive it).
 * Probes multishot recv on a scratch ring, registers a provided buffer ring
 * on cfg->uring under the first free buffer group id, and allocates the
 * connection pool and the receive buffers.
 * @return 0 and *out, or -EINVAL (a capacity out of range, no ring),
 *         -ENOMEM, or -errno from io_uring_register_buf_ring.
 */
int km_knet_create(const struct km_net_config *cfg, struct km_net **out);

/**
 * Create a DPDK backend (dataplane/net/dpdk/dnet.c): find the port, set up its
 * receive and transmit pools on hugepages, configure and start the port
 * with one queue pair, and an endpoint of dataplane/net/tcp/ on cfg->dpdk's
 * addresses (listeners_max <= 8: the endpoint's listening ports). The port
 * stays this backend's
 * until km_net_destroy() (one backend per port for now).
 * @return 0 and *out, or -EINVAL (capacities, addresses), -ENODEV (no such
 *         port), -EBUSY (the port is in use by another backend), -ENOMEM
 *         (hugepages), -EPERM (EAL not initialised), or -errno from DPDK.
 */
int km_dnet_create(const struct km_net_config *cfg, struct km_net **out);

/**
 * Create the backend cfg->kind names.
 * @return as km_knet_create() or km_dnet_create(), or -EOPNOTSUPP for an
 *         unknown kind.
 */
static inline int km_net_create(const struct km_net_config *cfg,
				struct km_net **out)
{
	switch (cfg->kind) {
	case KM_NET_KERNEL:
		return km_knet_create(cfg, out);
	case KM_NET_DPDK:
		return km_dnet_create(cfg, out);
	default:
		return -EOPNOTSUPP;
	}
}

/**
 * Abort every connection and listener, wait for the backend's operations to
 * end (on_connect / on_close callbacks run from here), free everything.
 * Buffers the consumer still holds become invalid.
 */
static inline void km_net_destroy(struct km_net *net)
{
	net->ops->destroy(net);
}

/**
 * Deferred work: re-arm reception after buffers were released, retry
 * submissions that found the submission queue full. Bounded per call
 * (STYLE 13). The worker calls it once per loop turn, after km_uring_poll().
 * @return the number of items of work done (>= 0).
 */
static inline int km_net_poll(struct km_net *net)
{
	return net->ops->poll(net);
}

/** True when km_net_poll() has work left: the worker must not block. */
static inline bool km_net_wants_poll(const struct km_net *net)
{
	return net->ops->wants_poll(net);
}

/**
 * While km_net_wants_poll() is true: how long the caller may block (in
 * microseconds, on its io_uring) before the next km_net_poll(). 0: poll
 * again at once. A polled backend (DPDK) that found nothing for a while
 * says how long its queue can hold what arrives meanwhile, so that a
 * waiting worker naps instead of spinning.
 */
static inline uint32_t km_net_nap_us(const struct km_net *net)
{
	return net->ops->nap_us != NULL ? net->ops->nap_us(net) : 0;
}

/**
 * Open a TCP connection to ipv4:port (numeric dotted quad) without
 * blocking; on_connect reports the outcome. Sends may be queued at once and
 * go out when the connection is up. TCP_NODELAY is set.
 * @return 0 and *out (valid until on_connect fails or on_close returns), or
 *         -EINVAL (not an IPv4 address), -ENOBUFS (conns_max in use),
 *         -errno from socket(2).
 */
static inline int km_net_connect(struct km_net *net, const char *ipv4,
				 uint16_t port, const struct km_net_handler *h,
				 void *ctx, struct km_net_conn **out)
{
	return net->ops->connect(net, ipv4, port, h, ctx, out);
}

/**
 * Listen on ipv4:port (port 0: any; read it back with
 * km_net_listener_port()) with SO_REUSEADDR, and accept until
 * km_net_unlisten(). Accepted connections take h and start with ctx; when
 * the pool is full, a new connection is reset at once (accepts_refused).
 * @return 0 and *out, or -EINVAL (address), -ENOBUFS (listeners_max in
 *         use), -EADDRINUSE, -EACCES, or another -errno from bind/listen.
 *         The DPDK backend listens on its port's one address (ipv4 is it
 *         or 0.0.0.0, else -EADDRNOTAVAIL), on ports below 32768 only
 *         (-EINVAL: the rest are its outgoing connections'); port 0 takes
 *         the first free one from 16384. Its SYN-RECEIVED connections
 *         are the endpoint's alone: on_accept comes once the handshake is
 *         complete.
 */
static inline int km_net_listen(struct km_net *net, const char *ipv4,
				uint16_t port, const struct km_net_handler *h,
				void *ctx, struct km_net_listener **out)
{
	return net->ops->listen(net, ipv4, port, h, ctx, out);
}

/** Stop accepting and close the listener; l is invalid on return.
 *  Connections it accepted are not affected. */
static inline void km_net_unlisten(struct km_net_listener *l)
{
	l->net->ops->unlisten(l);
}

/** The port a listener is bound to (host byte order). */
static inline uint16_t km_net_listener_port(const struct km_net_listener *l)
{
	return l->port;
}

/**
 * Queue n_iov iovecs (the array is copied, the bytes are not: they must stay
 * valid until fn runs). fn (may be NULL) runs once with the total or
 * -ECANCELED.
 * @return 0, or -EAGAIN (queue full: retry after a send callback),
 *         -EINVAL (n_iov is 0 or above send_iov_max, or the total is 0
 *         or above INT32_MAX),
 *         -EPIPE (km_net_close() was called or the connection is ending).
 */
static inline int km_net_send(struct km_net_conn *c, const struct iovec *iov,
			      uint32_t n_iov, km_net_sent_fn fn, void *arg)
{
	return c->net->ops->send(c, iov, n_iov, fn, arg);
}

/**
 * Give n receive buffers back to the pool (all of them: all-or-nothing,
 * in any order, from any connection of this backend, even a closed one).
 * Releasing a buffer not held is a programming error and asserts.
 */
static inline void km_net_release(struct km_net *net, const uint32_t *buf_ids,
				  uint32_t n)
{
	net->ops->release(net, buf_ids, n);
}

/**
 * Graceful close: refuse new sends, flush the queued ones, shut the write
 * side (FIN), keep delivering what the peer still sends until its FIN, then
 * report on_close(0). If the peer's FIN does not come within
 * close_timeout_ms the connection is reset (on_close(-ETIMEDOUT)). While
 * connecting this is km_net_abort().
 * @return 0, or -EALREADY (already closing or ending).
 */
static inline int km_net_close(struct km_net_conn *c)
{
	return c->net->ops->close(c);
}

/**
 * Abortive close: drop queued sends (their callbacks get -ECANCELED), reset
 * the connection (RST), report on_close(-ECONNABORTED) (or on_connect with
 * it while connecting). Does nothing if the connection is already ending.
 */
static inline void km_net_abort(struct km_net_conn *c)
{
	c->net->ops->abort(c);
}

/**
 * Stop (paused) or resume reading from c: the consumer's own backpressure,
 * for a connection that may not take more of the shared pool. Bytes the
 * kernel had already placed in buffers may still arrive after a pause
 * (bounded by the socket's receive buffer); then no more bytes until
 * resumed. The peer's FIN or an error may still end the connection while
 * it is paused.
 * @return 0, or -EOPNOTSUPP (the backend cannot pause).
 */
static inline int km_net_recv_pause(struct km_net_conn *c, bool paused)
{
	if (c->net->ops->recv_pause == NULL)
		return -EOPNOTSUPP;
	return c->net->ops->recv_pause(c, paused);
}

static inline void *km_net_conn_ctx(const struct km_net_conn *c)
{
	return c->ctx;
}

static inline void km_net_conn_set_ctx(struct km_net_conn *c, void *ctx)
{
	c->ctx = ctx;
}

/** Counters of the backend (for `kmirrorctl status`). */
static inline void km_net_get_stats(const struct km_net *net,
				    struct km_net_stats *out)
{
	net->ops->stats(net, out);
}

/** Counters of one connection. */
static inline void km_net_conn_get_stats(const struct km_net_conn *c,
					 struct km_net_conn_stats *out)
{
	c->net->ops->conn_stats(c, out);
}

/** The peer's address of a connection (an accepted one: the client's, for
 *  Kafka's ClientHost). -EOPNOTSUPP if the backend keeps none,
 *  -ENOTCONN if it has none for this connection. */
static inline int km_net_conn_peer(const struct km_net_conn *c,
				   struct sockaddr_in *out)
{
	if (c->net->ops->peer == NULL)
		return -EOPNOTSUPP;
	return c->net->ops->peer(c, out);
}

#ifdef __cplusplus
}
#endif

#endif
