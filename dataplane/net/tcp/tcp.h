/* kmirror's user-space TCP endpoint: the protocol core of the DPDK mode
 * (DESIGN.md, decision record "DPDK TCP: purpose-built endpoint").
 *
 * First job: receive large Kafka Fetch responses fast as a TCP client and
 * send small requests. Second: accept connections on a few listening ports
 * (passive open, km_tcp_listen()) and stream bulk data to them from a send
 * ring of up to 64 MiB. Ethernet II + ARP + IPv4 (no options,
 * no fragments) + TCP (RFC 9293) with MSS and window scaling (RFC 7323),
 * RTO estimation (RFC 6298), RFC 5961's RST/SYN/ACK checks, an out-of-order
 * queue that keeps received buffers by reference and is described to the
 * sender by SACK blocks (RFC 2018: without them a Linux sender repairs one
 * hole per round trip and backs its RTO off to seconds), one ACK per
 * receive burst plus a delayed-ACK timer, keepalive, and software checksums
 * unless the port offloads them. Not supported: SACK blocks the peer sends
 * (our requests are small: go-back-N), timestamps, urgent data (URG is
 * ignored, its bytes are ordinary data), simultaneous open, IPv6, ICMP,
 * path MTU discovery, SYN cookies (half-open connections hold a slot each,
 * so at most the free slots are half open).
 *
 * Nothing here names a DPDK type: frames come in as buffer chains
 * (common/chain.h, one segment per mbuf of a chain) and go out through a
 * callback, so the core is driven by crafted frames and a fake clock in
 * tests, and by a port's queues in the DPDK backend.
 *
 * Threading: an endpoint belongs to one thread; no call is thread-safe.
 *
 * Event model. Callbacks (struct km_tcp_ops) run from inside
 * km_tcp_input(), km_tcp_input_burst_end(), km_tcp_poll() and, for tx only,
 * from any call that sends. A callback may call km_tcp_send(),
 * km_tcp_close(), km_tcp_abort(), km_tcp_release(), km_tcp_connect(),
 * km_tcp_listen() and km_tcp_unlisten(), but never km_tcp_input(),
 * km_tcp_input_burst_end() or km_tcp_poll().
 * Per connection, in this order:
 *   - an active open: KM_TCP_EV_CONNECTED exactly once: res 0, or a -errno
 *     and the handle is dead when the callback returns (no CLOSED follows);
 *   - a passive open: ops->accept exactly once, when the handshake is
 *     complete (ESTABLISHED), with the new handle (user pointer NULL: the
 *     callee sets it). A connection that never completes (RST, SYN-ACK
 *     retries spent, km_tcp_unlisten()) is never reported at all;
 *   - deliver (in-order payload), KM_TCP_EV_SENT, KM_TCP_EV_PEER_FIN;
 *   - KM_TCP_EV_CLOSED exactly once for a connection that was reported
 *     connected, after its last deliver; the handle is invalid once the
 *     callback returns (the slot may linger internally in TIME-WAIT).
 * Ends (CLOSED, or CONNECTED with an error) are reported from
 * km_tcp_input_burst_end() or km_tcp_poll(), never from inside the call
 * that caused them (km_tcp_abort() reports later, like km_net_abort()).
 *
 * Receive (zero copy), mirroring dataplane/net/net.h. km_tcp_input() takes
 * ownership of every buffer of the frame (buf_ids[i] owns frame->iov[i]).
 * Buffers that carry no payload the endpoint keeps are handed back through
 * ops->buf_free at once. In-order payload is delivered as segments that
 * point into the received buffers, each with its buffer id; the consumer
 * owns those ids from then on and hands each back exactly once with
 * km_tcp_release(), in any order, even after the connection ended.
 * Out-of-order payload is kept by reference in a bounded queue until the
 * gap fills. The advertised receive window is rcv_buf_bytes minus the bytes
 * the consumer holds (delivered and not released), so a consumer that holds
 * buffers closes the window on the peer; the right edge never moves left.
 *
 * Send. km_tcp_send() copies bytes into the connection's send ring; they
 * stay there until acknowledged, for retransmission. KM_TCP_EV_SENT
 * reports ring space freed by ACKs: a bulk sender refills the ring from
 * it. Loss is repaired by fast retransmit and NewReno recovery (RFC 6582),
 * else by go-back-N after a timeout.
 *
 * Addresses are IPv4 in host byte order; ports in host byte order.
 */
#ifndef KM_DATAPLANE_TCP_TCP_H
#define KM_DATAPLANE_TCP_TCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "common/chain.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_tcp_ep;
struct km_tcp_conn;

/* Frames handed to km_tcp_input() hold at most this many segments (a
 * 9000-byte jumbo frame in 2 KiB mbufs needs 5). */
#define KM_TCP_FRAME_SEGS_MAX 16u

/* rx_flags of km_tcp_input(): what the port already checked. Absent both
 * GOOD and BAD for a layer, the endpoint checks in software. */
#define KM_TCP_RX_IP_CSUM_GOOD (1u << 0)
#define KM_TCP_RX_IP_CSUM_BAD (1u << 1)
#define KM_TCP_RX_L4_CSUM_GOOD (1u << 2)
#define KM_TCP_RX_L4_CSUM_BAD (1u << 3)

/* tx_csum_offload of the config, and tx_flags of ops->tx(): the port
 * computes that checksum. With KM_TCP_TX_CSUM_IP the IPv4 checksum field is
 * 0; with KM_TCP_TX_CSUM_TCP the TCP checksum field holds the folded,
 * uncomplemented pseudo-header sum (what DPDK's offload expects). Every
 * frame we build has a 14-byte Ethernet and a 20-byte IPv4 header. */
#define KM_TCP_TX_CSUM_IP (1u << 0)
#define KM_TCP_TX_CSUM_TCP (1u << 1)

/* Ports one endpoint listens on at most (km_tcp_listen()). */
#define KM_TCP_LISTEN_MAX 8u

enum km_tcp_state {
	KM_TCP_CLOSED = 0,
	KM_TCP_SYN_SENT,
	KM_TCP_ESTABLISHED,
	KM_TCP_FIN_WAIT_1,
	KM_TCP_FIN_WAIT_2,
	KM_TCP_CLOSING,
	KM_TCP_TIME_WAIT,
	KM_TCP_CLOSE_WAIT,
	KM_TCP_LAST_ACK,
	/* Passive open: our SYN-ACK is out, the peer's ACK not in yet. Last so
	 * that the values above keep their numbers. */
	KM_TCP_SYN_RCVD,
};

enum km_tcp_event {
	/* Active open done. res: 0, or -ECONNREFUSED (RST), -ETIMEDOUT (SYN
	 * retries spent), -EHOSTUNREACH (ARP never resolved the next hop),
	 * -ECONNABORTED (km_tcp_abort()/km_tcp_close() while connecting). */
	KM_TCP_EV_CONNECTED = 0,
	/* res: bytes of the send ring freed by ACKs since the last report. */
	KM_TCP_EV_SENT,
	/* The peer sent FIN: nothing more will be delivered. res: 0. */
	KM_TCP_EV_PEER_FIN,
	/* The connection ended. res: 0 (orderly: both FINs exchanged);
	 * -ECONNRESET (RST from the peer); -ECONNABORTED (km_tcp_abort());
	 * -ETIMEDOUT (retransmissions or keepalive probes spent, or a graceful
	 * close waited close_timeout_ms). */
	KM_TCP_EV_CLOSED,
};

/* Why a frame or segment was dropped; each has a counter. Everything the
 * network sends is checked, never trusted (STYLE 11). */
enum km_tcp_drop {
	KM_TCP_DROP_ETH_SHORT = 0, /* frame shorter than its Ethernet header */
	KM_TCP_DROP_ETH_DST,	   /* not our MAC (broadcast only for ARP) */
	KM_TCP_DROP_ETH_SRC,	   /* source MAC zero or multicast */
	KM_TCP_DROP_ETH_TYPE,	   /* not IPv4 or ARP (VLAN tags included) */
	KM_TCP_DROP_FRAME_SEGS,	   /* chain longer than KM_TCP_FRAME_SEGS_MAX */
	KM_TCP_DROP_ARP_BAD,	   /* ARP not Ethernet/IPv4, bad op, short */
	KM_TCP_DROP_ARP_SRC,	   /* ARP sender is us, or not unicast */
	KM_TCP_DROP_IP_SHORT,	   /* truncated IPv4 header */
	KM_TCP_DROP_IP_VERSION,	   /* version is not 4 */
	KM_TCP_DROP_IP_HLEN,	   /* header length below 20 bytes */
	KM_TCP_DROP_IP_OPTIONS,	   /* IPv4 options (not supported) */
	KM_TCP_DROP_IP_LEN,	   /* total length below header or past frame */
	KM_TCP_DROP_IP_CSUM,	   /* IPv4 header checksum wrong */
	KM_TCP_DROP_IP_FRAG,	   /* a fragment (MF or offset set) */
	KM_TCP_DROP_IP_DST,	   /* not addressed to our IP */
	KM_TCP_DROP_IP_SRC,	   /* source zero, broadcast, multicast or us */
	KM_TCP_DROP_IP_PROTO,	   /* not TCP */
	KM_TCP_DROP_TCP_SHORT,	   /* segment shorter than 20 bytes */
	KM_TCP_DROP_TCP_DOFF,	   /* data offset below 5 or past the segment */
	KM_TCP_DROP_TCP_CSUM,	   /* TCP checksum wrong */
	KM_TCP_DROP_TCP_OPTS,	   /* malformed option list */
	KM_TCP_DROP_TCP_FLAGS,	   /* SYN+FIN, SYN+RST, no ACK/SYN/RST */
	KM_TCP_DROP_TCP_PORT,	   /* port 0 */
	KM_TCP_DROP_NO_CONN,	   /* no connection: answered with RST */
	KM_TCP_DROP_STATE,	   /* unexpected in the connection's state */
	KM_TCP_DROP_SEQ,	   /* outside the receive window: ACK sent */
	KM_TCP_DROP_ACK,	   /* acks unsent or ancient data (RFC 5961) */
	KM_TCP_DROP_RST_WINDOW,	   /* RST outside the window: ignored */
	KM_TCP_DROP_RST_CHALLENGE, /* RST in window, not exact: challenge ACK */
	KM_TCP_DROP_RST_TIMEWAIT,  /* RST in TIME-WAIT: ignored (RFC 1337) */
	KM_TCP_DROP_SYN_CHALLENGE, /* SYN when synchronized: challenge ACK */
	KM_TCP_DROP_OOO_FULL,	   /* out-of-order queue full: piece dropped */
	KM_TCP_DROP_LISTEN_FULL,   /* SYN to a listening port, no free slot */
	KM_TCP_DROP_COUNT
};

/* Counters kept per connection and, summed over every connection that
 * ever lived plus what no connection matched, per endpoint. */
struct km_tcp_counters {
	uint64_t pkts_in;	   /* TCP segments in */
	uint64_t bytes_in;	   /* their payload bytes */
	uint64_t pkts_out;	   /* TCP segments out */
	uint64_t bytes_out;	   /* their payload bytes (retransmits too) */
	uint64_t retransmits;	   /* segments sent again */
	uint64_t rto_expiries;	   /* retransmission timeouts */
	uint64_t fast_retransmits; /* on the third duplicate ACK */
	uint64_t window_probes;	   /* zero-window probes sent */
	uint64_t keepalives;	   /* keepalive probes sent */
	uint64_t ooo_segs;	   /* payload pieces queued out of order */
	uint64_t dup_bytes;	   /* payload received twice (trimmed) */
	uint64_t beyond_window;	   /* payload bytes past our window (trimmed) */
	uint64_t dup_acks;	   /* duplicate ACKs received */
	uint64_t challenge_acks;   /* RFC 5961 challenge ACKs sent */
	uint64_t rst_in;	   /* RSTs that ended a connection */
	uint64_t rst_out;	   /* RSTs sent */
	uint64_t drops[KM_TCP_DROP_COUNT];
};

struct km_tcp_stats {
	struct km_tcp_counters tcp;
	uint64_t frames_in;
	uint64_t frames_out;
	uint64_t tx_errors;	   /* frames ops->tx refused */
	uint64_t arp_in;	   /* valid ARP packets */
	uint64_t arp_requests_out;
	uint64_t arp_replies_out;
	uint64_t arp_resolved;	   /* entries that became (or were) resolved */
	uint64_t arp_misses;	   /* frames not sent: next hop unresolved */
	uint64_t arp_ignored;	   /* ARP for another host, not cached */
	uint64_t challenge_acks_limited; /* suppressed by the rate limit */
	uint64_t conns_opened;	   /* reached ESTABLISHED */
	uint64_t connect_failures;
	uint64_t conns_closed;	   /* CLOSED reports */
	uint64_t conns_accepted;   /* passive opens that reached ESTABLISHED */
	uint64_t accept_failures;  /* half-open ends: RST, retries, unlisten */
	uint32_t conns_used;	   /* slots in use (TIME-WAIT included) */
	uint32_t conns_max;
	uint32_t bufs_queued;	   /* buffers held in out-of-order queues */
	uint32_t bufs_user;	   /* delivered and not released */
};

/* A connection's variables, for tests and `kmirrorctl status`. */
struct km_tcp_conn_info {
	enum km_tcp_state state;
	uint32_t local_ip, remote_ip;
	uint16_t local_port, remote_port;
	uint32_t iss, snd_una, snd_nxt, snd_max;
	uint32_t snd_wnd;	/* peer's window, bytes (scaled) */
	uint32_t cwnd, ssthresh;
	uint16_t snd_mss;	/* largest payload we send */
	uint8_t snd_wscale;	/* peer's shift */
	uint8_t rcv_wscale;	/* our shift (0 unless both sides sent WS) */
	bool wscale_ok;
	uint32_t irs, rcv_nxt;
	uint32_t rcv_wnd;	/* window last advertised, bytes */
	uint32_t srtt_us, rttvar_us;
	uint32_t rto_ms;
	uint32_t rtx_count;	/* consecutive timeouts of the current data */
	uint32_t dupacks;
	uint32_t snd_queued;	/* bytes in the send ring, sent or not */
	uint32_t rx_held;	/* payload bytes the consumer holds */
	uint32_t ooo_pieces, ooo_bytes;
	uint32_t keepalive_probes;
};

/* Everything is sized at init (STYLE 9). Memory: about
 *   conns_max * (2.2 KiB + snd_buf_bytes + ooo_max * 44 B + 16 B)
 *   + bufs_max * 16 B + arp_entries * 40 B
 * (5 MiB with the defaults). Received bytes live in the port's buffers:
 * a connection keeps at most ooo_max of them queued, plus what its
 * consumer holds, which the window bounds to rcv_buf_bytes of payload. */
struct km_tcp_config {
	uint8_t mac[6];		    /* the port's unicast MAC */
	uint32_t ip;		    /* our IPv4 address */
	uint32_t netmask;	    /* contiguous, e.g. 0xffffff00 */
	uint32_t gateway;	    /* next hop off-link; 0: all on-link */
	uint32_t mtu;		    /* IP MTU, 576..9000 */
	uint32_t conns_max;	    /* 1..65535 */
	uint16_t port_min, port_max; /* local ports, >= conns_max of them */
	uint32_t bufs_max;	    /* buffer ids are below this, 1..2^24 */
	uint32_t rcv_buf_bytes;	    /* receive window per conn, 4 KiB..1 GiB */
	uint32_t snd_buf_bytes;	    /* send ring, power of two, 1 KiB..64 MiB */
	uint32_t ooo_max;	    /* out-of-order pieces per conn, 1..4096 */
	uint32_t arp_entries;	    /* 1..4096 */
	uint32_t arp_timeout_ms;    /* an entry is re-requested after this */
	uint32_t arp_retry_ms;	    /* one request per address per this */
	uint32_t rto_init_ms;	    /* RFC 6298 2.1: 1 s */
	uint32_t rto_min_ms;
	uint32_t rto_max_ms;
	uint32_t syn_retries;	    /* SYN retransmissions before -ETIMEDOUT */
	uint32_t retries;	    /* data retransmissions before -ETIMEDOUT */
	uint32_t delack_ms;	    /* delayed ACK: less than 2 segments came */
	uint32_t time_wait_ms;	    /* TIME-WAIT (a client's short 2MSL) */
	uint32_t close_timeout_ms;  /* graceful close: wait this long for the
				       peer's FIN, then reset */
	uint32_t keepalive_idle_ms; /* 0: no keepalive */
	uint32_t keepalive_intvl_ms;
	uint32_t keepalive_probes;
	uint32_t challenge_acks_per_s; /* RFC 5961 section 7 rate limit */
	uint32_t tx_csum_offload;   /* KM_TCP_TX_CSUM_* the port computes */
	uint64_t isn_secret;	    /* key of the ISN hash (RFC 6528) */
};

/* The caller's side. ctx is the pointer given to km_tcp_init(). */
struct km_tcp_ops {
	/**
	 * Send one frame, gathered from iov (valid only during the call: copy
	 * it). flags: the KM_TCP_TX_CSUM_* the port must compute.
	 * @return 0, or a negative code if the frame was not sent (counted in
	 *         tx_errors; TCP recovers as from a loss).
	 */
	int (*tx)(void *ctx, const struct iovec *iov, uint32_t n_iov,
		  uint32_t flags);
	/** Milliseconds of a monotonic clock (an input: tests fake it). */
	uint64_t (*now_ms)(void *ctx);
	/**
	 * In-order payload. data->iov[i] lies in the buffer buf_ids[i], which
	 * the consumer now owns: release each with km_tcp_release(). The
	 * arrays are valid only during the call, the bytes until release.
	 * NULL: buffers are released at once.
	 */
	void (*deliver)(void *ctx, struct km_tcp_conn *c,
			const struct km_chain *data, const uint32_t *buf_ids);
	/** A connection event (enum km_tcp_event); may be NULL. */
	void (*event)(void *ctx, struct km_tcp_conn *c, enum km_tcp_event ev,
		      int res);
	/** Hand n buffers back to the port's pool. */
	void (*buf_free)(void *ctx, const uint32_t *buf_ids, uint32_t n);
	/** Initial send sequence; NULL: RFC 6528 (keyed hash + 4 us clock). */
	uint32_t (*isn)(void *ctx, uint32_t lip, uint16_t lport, uint32_t rip,
			uint16_t rport);
	/**
	 * A passive open completed: c is ESTABLISHED, its user pointer NULL.
	 * The callee may set the user pointer, send, close or abort. Needed
	 * for km_tcp_listen(), else may be NULL. (A callback of its own rather
	 * than a km_tcp_event: consumers switch over that enum exhaustively.)
	 */
	void (*accept)(void *ctx, struct km_tcp_conn *c);
};

/** Fill cfg with defaults: MTU 1500, 8 MiB receive window, 64 KiB send
 *  ring, RTO 1 s (min 200 ms, max 60 s), TIME-WAIT 1 s, ...; the caller
 *  sets mac, ip, netmask and gateway. */
void km_tcp_config_default(struct km_tcp_config *cfg);

/**
 * Bytes of memory an endpoint with cfg needs (for km_tcp_init()).
 * @return the size, or -EINVAL if cfg is invalid (see km_tcp_init()).
 */
ssize_t km_tcp_memsize(const struct km_tcp_config *cfg);

/**
 * Set up an endpoint in caller memory (km_tcp_memsize(cfg) bytes, 64-byte
 * aligned). ops and mem must outlive the endpoint; nothing is allocated.
 * @return 0 and *out, or -EINVAL: a value out of the ranges in struct
 *         km_tcp_config (MAC not unicast, IP 0, netmask not contiguous,
 *         gateway off-subnet, port range smaller than conns_max, ...), mem
 *         too small or misaligned, ops without tx, now_ms or buf_free.
 */
int km_tcp_init(void *mem, size_t mem_bytes, const struct km_tcp_config *cfg,
		const struct km_tcp_ops *ops, void *ctx,
		struct km_tcp_ep **out);

/**
 * Process one received Ethernet frame. The endpoint takes every buffer of
 * it (see "Receive" above). Call km_tcp_input_burst_end() after each burst.
 * buf_ids[i] must be below bufs_max and not already held by the endpoint
 * or the consumer (asserted).
 * @return 0 if the frame was used, or -EBADMSG if it was dropped (the
 *         reason is counted in stats drops[]).
 */
int km_tcp_input(struct km_tcp_ep *ep, const struct km_chain *frame,
		 const uint32_t *buf_ids, uint32_t rx_flags);

/**
 * End of a receive burst: deliver what the burst made in order, report
 * events, send one ACK per connection that needs one (or arm its
 * delayed-ACK timer), report ends.
 * @return the number of connections serviced.
 */
int km_tcp_input_burst_end(struct km_tcp_ep *ep);

/**
 * Run the timers that are due (retransmission, persist, delayed ACK,
 * keepalive, TIME-WAIT, close timeout) and report ends. Call it at least
 * every few milliseconds, or at km_tcp_next_timer_ms().
 * @return the number of timers that fired plus ends reported.
 */
int km_tcp_poll(struct km_tcp_ep *ep);

/** The earliest timer deadline (ms of ops->now_ms), or UINT64_MAX. */
uint64_t km_tcp_next_timer_ms(const struct km_tcp_ep *ep);

/**
 * Active open to ip:port from a free local port; sends the SYN (after ARP
 * resolves the next hop). The outcome is KM_TCP_EV_CONNECTED.
 * @return 0 and *out, or -EINVAL (ip 0, broadcast, multicast or ours;
 *         port 0), -ENOBUFS (conns_max in use).
 */
int km_tcp_connect(struct km_tcp_ep *ep, uint32_t ip, uint16_t port,
		   void *user, struct km_tcp_conn **out);

/**
 * Accept connections on port: a SYN to it takes a free slot and gets a
 * SYN-ACK with our MSS, and window scale and SACK-permitted if the SYN
 * offered them (RFC 7323 2.2, RFC 2018 2); the SYN-ACK is retransmitted
 * with the RTO's backoff syn_retries times; the peer's ACK makes the
 * connection ESTABLISHED and calls ops->accept. With no free slot the SYN
 * is dropped (KM_TCP_DROP_LISTEN_FULL) and the peer's retry may find one.
 * @return 0, or -EINVAL (port 0, inside [port_min, port_max], which is for
 *         active opens, or ops->accept NULL), -EADDRINUSE (already
 *         listening), -ENOBUFS (KM_TCP_LISTEN_MAX ports listening).
 */
int km_tcp_listen(struct km_tcp_ep *ep, uint16_t port);

/**
 * Stop accepting on port: its half-open connections are reset and freed
 * (never reported); established ones are not touched. A later SYN to the
 * port gets an RST.
 * @return 0, or -ENOENT (not listening on port).
 */
int km_tcp_unlisten(struct km_tcp_ep *ep, uint16_t port);

/**
 * Copy up to the iovecs' total into the send ring and send what the
 * windows allow (queued before ESTABLISHED, sent once connected).
 * @return bytes taken (> 0; fewer than offered when the ring fills: retry
 *         after KM_TCP_EV_SENT), or -EAGAIN (ring full), -EINVAL (nothing
 *         offered), -EPIPE (closing or closed).
 */
ssize_t km_tcp_send(struct km_tcp_conn *c, const struct iovec *iov,
		    uint32_t n_iov);

/**
 * Graceful close: send FIN after the queued bytes, keep delivering until
 * the peer's FIN, reset after close_timeout_ms. While connecting this is
 * km_tcp_abort().
 * @return 0, or -EALREADY (already closing or ended).
 */
int km_tcp_close(struct km_tcp_conn *c);

/** Abortive close: drop queued bytes, send RST, report the end
 *  (-ECONNABORTED) later. Does nothing if the connection already ended. */
void km_tcp_abort(struct km_tcp_conn *c);

/**
 * Hand delivered buffers back (each exactly once; asserted). Opens the
 * receive window of their connection and, when it grew enough, sends a
 * window update.
 */
void km_tcp_release(struct km_tcp_ep *ep, const uint32_t *buf_ids,
		    uint32_t n);

/** Bytes km_tcp_send() would take now. */
uint32_t km_tcp_send_space(const struct km_tcp_conn *c);

enum km_tcp_state km_tcp_conn_state(const struct km_tcp_conn *c);
void *km_tcp_conn_user(const struct km_tcp_conn *c);
void km_tcp_conn_set_user(struct km_tcp_conn *c, void *user);
void km_tcp_conn_get_info(const struct km_tcp_conn *c,
			  struct km_tcp_conn_info *out);
void km_tcp_conn_get_stats(const struct km_tcp_conn *c,
			   struct km_tcp_counters *out);
void km_tcp_get_stats(const struct km_tcp_ep *ep, struct km_tcp_stats *out);

/** Names for logs and tests ("ESTABLISHED", "ip_frag", ...). */
const char *km_tcp_state_name(enum km_tcp_state s);
const char *km_tcp_drop_name(enum km_tcp_drop d);

#ifdef __cplusplus
}
#endif

#endif
