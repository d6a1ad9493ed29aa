/* Internals of the DPDK network backend (dnet.c, dnet_port.c); not for
 * inclusion elsewhere. */
#ifndef KM_DATAPLANE_DPDK_DNET_PVT_H
#define KM_DATAPLANE_DPDK_DNET_PVT_H

#include <stdbool.h>
#include <stdint.h>

#include <rte_mbuf.h>

#include "common/container.h"
#include "dataplane/net/net.h"
#include "dataplane/net/tcp/tcp.h"

/* Frames taken per rx burst, as DPDK's examples (STYLE 13). */
#define DNET_BURST 32u
/* Bursts per km_net_poll(): bounds a poll's work when the link is busy. */
#define DNET_RX_BURSTS_MAX 8u
/* Frames gathered before a tx burst; flushed at the end of every poll. */
#define DNET_TX_PKTS_MAX 64u
/* net_memif's slot size when its devargs name none (its default). */
#define DNET_MEMIF_BSIZE 2048u
/* Port descriptors per queue. */
#define DNET_RXD 1024u
#define DNET_TXD 1024u
/* Transmit pool: our frames are ACKs and small requests, freed by the
 * driver once sent. A pool of its own, so that a consumer holding every
 * receive buffer cannot stop the ACKs that reopen the window. 2^n - 1 as
 * rte_mempool prefers; about 9 MiB. */
#define DNET_TX_POOL 4095u
/* With jumbo mbufs (dpdk.mtu past one default mbuf's frame), 9 MiB too. */
#define DNET_TX_POOL_JUMBO 1023u
/* Receive mbufs per queue at least, when jumbo ones replace rx_buf_count
 * default ones (dnet_port.c's pick_mtu). */
#define DNET_JUMBO_BUFS_MIN 1023u
#define DNET_POOL_CACHE 256u
/* iovecs gathered per km_tcp_send() when feeding the endpoint. */
#define DNET_SEND_GATHER 64u
/* After the last received frame, keep the worker polling this long; then
 * it may sleep until its tick (KM_WORKER_TICK_MS). */
#define DNET_IDLE_MS 2u
/* Within that time: after this many polls in a row found nothing, nap
 * between polls, from DNET_NAP_MIN_US doubling up to DNET_NAP_MAX_US. The
 * most a nap leaves in the queue is what arrives in DNET_NAP_MAX_US: 100 us
 * at 10 Gb/s is about 80 full frames of DNET_RXD, and the spinning it saves
 * is a whole core per worker (what bench-dpdk measures). */
#define DNET_SPIN_POLLS 32u
#define DNET_NAP_MIN_US 10u
#define DNET_NAP_MAX_US 100u
/* Each backend connection may leave one endpoint slot in TIME-WAIT or
 * LAST-ACK behind it for a while: the endpoint has this many per slot. */
#define DNET_TCP_SLOTS_PER_CONN 4u
/* Local ports of the active opens: the upper half of the port space, cut
 * into one aligned block per queue (a power of two of them), so that one
 * masked TCP destination-port match names a queue's connections. */
#define DNET_PORT_BASE 32768u
#define DNET_PORT_SPACE 32768u
/* Listening ports lie below DNET_PORT_BASE (dnet_listen.c); port 0 asks
 * for the first free one from here. */
#define DNET_LISTEN_AUTO 16384u
/* Send ring of each endpoint slot when the backend listens: a server
 * streams Fetch responses, a client sends small requests (64 KiB). */
#define DNET_SERVER_SND_BUF (1u << 20)
#define DNET_SERVER_SND_TOTAL (128ull << 20)
/* Frames another queue received for this one, waiting to be taken. */
#define DNET_STEER_RING 1024u
/* Receive window per connection: the fetch sessions hold at most ~1.5 MiB
 * (KM_KFRAME_SEGS_MAX buffers) and pipeline one request. */
#define DNET_RCV_WINDOW (4u << 20)

enum dconn_state {
	DC_FREE = 0,
	DC_CONNECTING,
	DC_OPEN,
};

/* One queued km_net_send(): its iovecs are n_iov consecutive entries of the
 * connection's iovec ring from iov_first. */
struct dsend {
	km_net_sent_fn fn;
	void *arg;
	uint32_t total;
	uint32_t iov_first;
	uint32_t n_iov;
};

struct dconn {
	struct km_net_conn pub;	/* first: the handle users see */
	struct km_tcp_conn *tc;	/* NULL while free */
	enum dconn_state state;
	bool close_req;		/* km_net_close(): FIN once the queue drained */
	bool fin_sent;		/* km_tcp_close() done */
	bool aborting;		/* km_net_abort(): end reported by the endpoint */
	bool ending;		/* end being reported: sends refused */
	bool want;		/* on the service scan: sends to feed/report */
	/* Send queue ring [sq_head, sq_head + sq_count); the first sq_taken
	 * sends were copied whole into the endpoint and wait for their
	 * callback; cur_iov/cur_off is the progress inside the next one. */
	struct dsend *sq;
	uint32_t sq_head, sq_count, sq_taken;
	struct iovec *iov;
	uint32_t iov_head, iov_count;
	uint32_t cur_iov, cur_off;
	struct km_net_conn_stats st;
	struct dconn *next_free;
};

/* A listening port (km_net_listen): accepted connections take h. */
struct dlistener {
	struct km_net_listener pub;	/* first */
	const struct km_net_handler *h;
	bool used;
};

/* Test switch KMIRROR_TEST_DPDK_IMPAIR="drop=N,swap=M" (read at create, in
 * a build with -Dtest_hooks=true only):
 * of the received frames that carry data (over 100 bytes), drop every
 * N-th and deliver every M-th after the one that follows it, so that the
 * end-to-end tests get loss and reordering where no netem qdisc exists.
 * Off (zeros) otherwise. */
struct dnet_impair {
	uint32_t drop_every;
	uint32_t swap_every;
	uint64_t seen;
	uint64_t dropped;
	uint64_t swapped;
	struct rte_mbuf *held;
	/* KMIRROR_TEST_DPDK_TX_REFUSE=N: the first N transmit bursts take
	 * nothing, as a port whose link is not up yet or whose peer does not
	 * drain the ring. */
	uint32_t tx_refuse;
};

/* One receive queue of a port: its pool (buffer ids are pool indexes) and
 * the ring where other queues' workers put the frames they received for
 * this queue's connections (software steering). */
struct dqueue {
	struct rte_mempool *rx_pool;
	struct rte_mempool *tx_pool;	/* ACKs and requests of its backend */
	struct rte_mbuf **by_id;	/* [n_bufs]: buffer id -> mbuf */
	struct rte_ring *steer;		/* MP/SC; NULL with one queue */
	bool taken;			/* a backend drives this queue */
};

/* A port shared by the backends of all workers, one queue pair each. Set
 * up by the first backend that attaches (on the control thread, before the
 * workers run), stopped by the last one that detaches; dport_lock guards
 * attach and detach, nothing on the data path. */
struct dport {
	uint16_t port_id;
	uint16_t n_queues;
	uint32_t refs;
	uint32_t n_bufs;	/* receive mbufs per queue */
	uint32_t bufs_asked;	/* rx_buf_count (n_bufs is fewer if jumbo) */
	uint32_t ip;		/* our address, host order */
	uint32_t port_span;	/* local ports per queue block */
	bool started;
	bool csum_tx;		/* port computes IPv4 + TCP checksums */
	bool csum_rx;		/* port checks them (ol_flags) */
	bool rss;		/* the port spreads frames by RSS hash */
	bool flow_rules;	/* a flow rule per queue steers its ports */
	uint32_t mtu;
	uint16_t dataroom;	/* of every mbuf, rx and tx: one frame */
	uint8_t mac[6];
	char devargs[256];
	/* [DNET_PORT_BASE] with several queues, else NULL: 1 + the queue
	 * that listens on a port, 0 if none; written by the listening
	 * worker, read by every worker's steering (relaxed atomics). */
	uint8_t *listen_q;
	struct dqueue q[];	/* [n_queues] */
};

/* Software steering counters of one backend. */
struct dsteer_stats {
	uint64_t out;		/* frames handed to another queue */
	uint64_t in;		/* frames taken from this queue's ring */
	uint64_t drops;		/* ring full or no mbuf: lost, as on a wire */
};

struct dnet {
	struct km_net pub;	/* first */
	struct km_net_config cfg;
	struct dport *dp;	/* NULL until attached */
	uint16_t port_id;
	uint16_t queue;
	bool csum_rx;		/* copy of dp->csum_rx, read per frame */
	struct dqueue *dq;	/* &dp->q[queue] */
	uint32_t n_bufs;
	struct km_tcp_ep *ep;
	void *ep_mem;
	struct km_tcp_ops tops;
	struct dconn *conns;	/* [cfg.conns_max] */
	struct dconn *free_conns;
	struct dlistener *lsn;	/* [cfg.listeners_max] */
	uint32_t conns_used;
	uint32_t want_count;	/* connections with want set */
	struct rte_mbuf *tx_pkts[DNET_TX_PKTS_MAX];
	uint32_t tx_n;
	bool tx_stalled;	/* the last flush sent nothing of tx_n */
	uint64_t now_ms;	/* km_clock_ms() when the last poll began */
	uint64_t last_rx_ms;
	uint64_t timers_ms;	/* now_ms of the last km_tcp_poll() */
	uint32_t empty_polls;	/* polls in a row that found no work */
	uint64_t poll_busy_tsc;	/* TSC cycles in polls that found work */
	uint64_t poll_idle_tsc;	/* ... and in those that found none */
	bool registered;	/* this worker thread got an lcore id */
	struct dnet_impair imp;
	struct dsteer_stats steer;
	struct km_net_stats st;
};

/* dnet_port.c: the shared port */
int km_dnet_port_open(struct dnet *dn);
void km_dnet_port_close(struct dnet *dn);
uint64_t km_dnet_port_missed(const struct dnet *dn);
void km_dnet_port_log_eth(const struct dnet *dn);
void km_dnet_port_block(const struct dport *dp, uint16_t queue, uint16_t *lo,
		     uint16_t *hi);
void km_dnet_thread_enter(struct dnet *dn);
void km_dnet_port_listen(struct dport *dp, uint16_t port, uint16_t queue,
			 bool on);
int km_dnet_port_listener(const struct dport *dp, uint16_t port);
void km_dnet_thread_leave(struct dnet *dn);

/* dnet_io.c: rx bursts, software steering, tx bursts */
int km_dnet_rx(struct dnet *dn);
void km_dnet_rx_close(struct dnet *dn);
void km_dnet_tx_flush(struct dnet *dn);
void km_dnet_tx_discard(struct dnet *dn);
int km_dnet_tx(void *ctx, const struct iovec *iov, uint32_t n_iov,
	    uint32_t flags);
void km_dnet_buf_free(void *ctx, const uint32_t *ids, uint32_t n);
void km_dnet_impair_init(struct dnet *dn);

/* dnet_listen.c: listeners, accepted connections, peer addresses */
int km_dnet_listen(struct km_net *net, const char *ipv4, uint16_t port,
		   const struct km_net_handler *h, void *ctx,
		   struct km_net_listener **out);
void km_dnet_unlisten(struct km_net_listener *l);
void km_dnet_accept(void *ctx, struct km_tcp_conn *tc);
int km_dnet_peer(const struct km_net_conn *c, struct sockaddr_in *out);

/* dnet.c: connection slots, the endpoint's callbacks */
struct dconn *km_dnet_conn_alloc(struct dnet *dn);
void km_dnet_set_want(struct dnet *dn, struct dconn *dc, bool on);
void km_dnet_deliver(void *ctx, struct km_tcp_conn *tc,
		  const struct km_chain *data, const uint32_t *ids);
void km_dnet_event(void *ctx, struct km_tcp_conn *tc, enum km_tcp_event ev,
		int res);

#endif
