/* Private to dataplane/net/tcp/: the endpoint and connection structs and the
 * helpers the tcp_*.c files share. Not for inclusion elsewhere (STYLE 6).
 *
 * Files: tcp.c (init, connection slots, user calls, stats), tcp_eth.c
 * (frame parsing, ARP, dispatch), tcp_listen.c (listening ports, the
 * lookup of passive connections, the SYN that opens one), tcp_input.c
 * (the segment state machine),
 * tcp_rx.c (receive text: out-of-order queue, delivery, window, buffer
 * accounting), tcp_output.c (segments, ACK, RST, frame building),
 * tcp_timer.c (RTO estimation and every timer).
 */
#ifndef KM_DATAPLANE_TCP_TCP_PVT_H
#define KM_DATAPLANE_TCP_TCP_PVT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "dataplane/net/tcp/arp.h"
#include "dataplane/net/tcp/tcp.h"

/* Sequence arithmetic modulo 2^32 (RFC 9293 3.4): a precedes b when the
 * signed distance from a to b is positive. */
static inline bool seq_lt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline bool seq_le(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) <= 0;
}

static inline bool seq_gt(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) > 0;
}

static inline bool seq_ge(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) >= 0;
}

/* Connection flags. */
enum {
	CF_FIN_QUEUED = 1u << 0,   /* close(): FIN follows the queued bytes */
	CF_ACK_NOW = 1u << 1,	   /* burst end must ACK (not delay) */
	CF_TOUCHED = 1u << 2,	   /* on the endpoint's touched list */
	CF_REAP = 1u << 3,	   /* on the reap list */
	CF_REPORTED = 1u << 4,	   /* its end was reported to the consumer */
	CF_WSCALE = 1u << 5,	   /* both SYNs carried window scale */
	CF_SYN_RTX = 1u << 6,	   /* SYN retransmitted: no RTT from it */
	CF_ARP_WAIT = 1u << 7,	   /* a frame found the next hop unresolved */
	CF_ARP_SEEN = 1u << 8,	   /* the next hop resolved at least once */
	CF_FIN_OOO = 1u << 9,	   /* peer's FIN seen beyond a gap (fin_seq) */
	CF_EST = 1u << 10,	   /* reached ESTABLISHED: ends are CLOSED */
	CF_RTT = 1u << 11,	   /* timing rtt_seq */
	CF_CLOSE_TIMER = 1u << 12, /* t_state is the close timeout */
	CF_ABORTED = 1u << 13,	   /* km_tcp_abort(): no more callbacks */
	CF_HAVE_RTT = 1u << 14,	   /* srtt/rttvar hold a measurement */
	CF_WND_CHECK = 1u << 15,   /* on the release list */
	CF_SACK = 1u << 16,	   /* the peer's SYN permitted SACK */
	CF_PASSIVE = 1u << 17,	   /* opened by a SYN to a listening port */
	CF_RECOVERY = 1u << 18,	   /* fast recovery until snd_una >= recover */
};

/* Events waiting for the burst end, in report order. */
enum {
	EV_CONNECTED = 1u << 0,
	EV_PEER_FIN = 1u << 1,
	EV_ACCEPTED = 1u << 2,
};

/* A received payload piece: one buffer's bytes [seq, seq + len). */
struct tcp_piece {
	uint8_t *base;
	uint32_t seq;
	uint32_t len;
	uint32_t buf_id;
};

struct km_tcp_conn {
	struct km_tcp_ep *ep;
	void *user;
	uint32_t slot;
	uint32_t gen;		/* bumped when the slot is freed */
	uint32_t port_gen;	/* picks the slot's next local port */
	enum km_tcp_state state;
	uint32_t flags;		/* CF_* */
	uint32_t ev;		/* EV_* waiting for the burst end */
	int end_reason;
	uint32_t rip;
	uint16_t lport, rport;
	uint32_t nexthop;
	/* Send side (RFC 9293 3.3.1). snd_max is the highest snd_nxt: after
	 * a timeout snd_nxt goes back to snd_una (go-back-N). */
	uint32_t iss, snd_una, snd_nxt, snd_max;
	uint32_t snd_wnd, snd_wl1, snd_wl2, max_snd_wnd;
	uint32_t cwnd, ssthresh;
	uint32_t dupacks;
	uint32_t recover;	/* snd_max when fast recovery began (RFC 6582) */
	uint32_t acked_unreported; /* for KM_TCP_EV_SENT */
	uint16_t snd_mss;
	uint8_t snd_shift, rcv_shift;
	/* Send ring: bytes [snd_una, snd_una + snd_len) at ring offset
	 * snd_head. A queued FIN sits at sequence snd_una + snd_len. */
	uint8_t *snd_ring;
	uint32_t snd_mask;
	uint32_t snd_head, snd_len;
	/* RTT (RFC 6298). */
	uint32_t srtt_us, rttvar_us, rto_ms;
	uint32_t rtx_count;
	uint32_t rtt_seq;
	uint64_t rtt_start_ms;
	/* Receive side. rcv_adv is the right edge last advertised: it never
	 * moves left. rcv_acked is the ACK last sent. */
	uint32_t irs, rcv_nxt, rcv_adv, rcv_acked;
	uint32_t fin_seq;	/* with CF_FIN_OOO */
	uint32_t rx_held;	/* delivered or pending, not released */
	struct tcp_piece *ooo;	/* sorted by seq, disjoint */
	uint32_t ooo_n, ooo_bytes;
	uint32_t sack_recent;	/* seq of the latest piece queued (RFC 2018) */
	struct iovec *pend_iov;	/* in-order payload waiting for delivery */
	uint32_t *pend_ids;
	uint32_t pend_n;
	/* Timers: a deadline in ms, 0 when off. */
	uint64_t t_rtx, t_delack, t_keep, t_state;
	uint32_t keep_probes;
	struct km_tcp_conn *touch_next, *reap_next, *free_next, *wnd_next;
	struct km_tcp_conn *hash_next;	/* passive: the lookup bucket's list */
	struct km_tcp_counters st;
};

/* Who holds a buffer id. */
enum { BUF_FREE = 0, BUF_OOO, BUF_PEND, BUF_USER };

struct tcp_buf {
	uint32_t slot;
	uint32_t gen;
	uint32_t bytes;	/* payload bytes accounted in the conn's rx_held */
	uint32_t state;
};

/* Buffers handed back to the port in one ops->buf_free call. */
#define TCP_FREE_BATCH 64u

struct km_tcp_ep {
	struct km_tcp_config cfg;
	const struct km_tcp_ops *ops;
	void *ctx;
	uint64_t now;		/* ops->now_ms(), read once per entry */
	uint32_t pend_max;	/* pending-delivery slots per conn */
	uint16_t rcv_mss;	/* our MSS: mtu - 40 */
	uint8_t rcv_shift;	/* the shift our SYN offers */
	uint16_t ip_id;
	struct km_tcp_conn *conns;
	struct km_tcp_conn *free_list;
	struct km_tcp_conn *touched;
	struct km_tcp_conn *reap;
	/* Passive connections by 4-tuple (their local port is a listening
	 * one, shared, so the slot cannot come from it): hash_mask + 1
	 * buckets, a power of two >= conns_max. */
	struct km_tcp_conn **hash;
	uint32_t hash_mask;
	uint32_t listen_n;
	uint16_t listen_ports[KM_TCP_LISTEN_MAX];
	struct tcp_buf *bufs;
	struct km_arp arp;
	uint64_t chack_window_ms;  /* start of the current 1 s window */
	uint32_t chack_count;
	uint32_t free_n;
	uint32_t free_ids[TCP_FREE_BATCH];
	struct km_tcp_stats st;
};

/* A parsed TCP segment: header fields plus its payload pieces. */
struct tcp_seg {
	uint32_t src_ip;
	uint16_t sport, dport;
	uint32_t seq, ack;
	uint8_t flags;
	uint16_t win;		/* raw field */
	uint16_t mss;		/* option, 0 if absent */
	int16_t wscale;		/* option, -1 if absent */
	bool sack_ok;		/* SACK-permitted option */
	uint32_t len;		/* payload bytes */
	uint8_t src_mac[6];
	uint32_t n;		/* pieces (at most KM_TCP_FRAME_SEGS_MAX) */
	struct tcp_piece p[KM_TCP_FRAME_SEGS_MAX];
};

/* Count a connection event in the connection and the endpoint. */
#define CONN_COUNT(c, field, v)                                                \
	do {                                                                   \
		(c)->st.field += (v);                                          \
		(c)->ep->st.tcp.field += (v);                                  \
	} while (0)

static inline void conn_drop(struct km_tcp_conn *c, enum km_tcp_drop why)
{
	c->st.drops[why]++;
	c->ep->st.tcp.drops[why]++;
}

/* rcv_nxt is known: every state but CLOSED and SYN-SENT. */
static inline bool state_synced(enum km_tcp_state s)
{
	return s != KM_TCP_CLOSED && s != KM_TCP_SYN_SENT;
}

static inline bool state_opening(enum km_tcp_state s)
{
	return s == KM_TCP_SYN_SENT || s == KM_TCP_SYN_RCVD;
}

/* tcp.c */
struct km_tcp_conn *km_tcp_conn_take(struct km_tcp_ep *ep);
void km_tcp_conn_start(struct km_tcp_conn *c, uint32_t ip, uint16_t port,
		    uint16_t lport);
void km_tcp_touch(struct km_tcp_conn *c);
void km_tcp_conn_end(struct km_tcp_conn *c, int reason);
int km_tcp_reap(struct km_tcp_ep *ep);
struct km_tcp_conn *km_tcp_lookup(struct km_tcp_ep *ep, uint32_t rip,
			       uint16_t rport, uint16_t lport);
void km_tcp_buf_put(struct km_tcp_ep *ep, uint32_t id);
void km_tcp_bufs_flush(struct km_tcp_ep *ep);
void km_tcp_arp_resolved(struct km_tcp_ep *ep, uint32_t ip);

/* tcp_eth.c */
bool km_tcp_resolve(struct km_tcp_ep *ep, uint32_t nexthop, uint8_t mac[6]);
void km_tcp_tx_frame(struct km_tcp_ep *ep, const struct iovec *iov,
		  uint32_t n_iov, uint32_t flags);

/* tcp_listen.c */
bool km_tcp_listening(const struct km_tcp_ep *ep, uint16_t port);
void km_tcp_listen_input(struct km_tcp_ep *ep, struct tcp_seg *s);
struct km_tcp_conn *km_tcp_hash_find(struct km_tcp_ep *ep, uint32_t rip,
				  uint16_t rport, uint16_t lport);
void km_tcp_hash_remove(struct km_tcp_conn *c);

/* tcp_input.c */
void km_tcp_syn_options(struct km_tcp_conn *c, const struct tcp_seg *s);
void km_tcp_segment(struct km_tcp_ep *ep, struct tcp_seg *s);
void km_tcp_enter_time_wait(struct km_tcp_conn *c);

/* tcp_rx.c */
void km_tcp_rx_text(struct km_tcp_conn *c, struct tcp_seg *s, uint32_t seq);
void km_tcp_rx_fin_check(struct km_tcp_conn *c, struct tcp_seg *s,
		      uint32_t seq);
uint32_t km_tcp_rcv_window(struct km_tcp_conn *c);
uint32_t km_tcp_sack_blocks(const struct km_tcp_conn *c, uint32_t *blk);
void km_tcp_rx_flush(struct km_tcp_conn *c);
void km_tcp_rx_prepare(struct km_tcp_conn *c, uint32_t n_pieces);
void km_tcp_rx_drop_all(struct km_tcp_conn *c);
void km_tcp_pieces_free(struct km_tcp_ep *ep, struct tcp_seg *s);
void km_tcp_rx_released(struct km_tcp_conn *c);
void km_tcp_rx_ack_decide(struct km_tcp_conn *c);
void km_tcp_fin_received(struct km_tcp_conn *c);

/* tcp_output.c */
void km_tcp_output(struct km_tcp_conn *c);
void km_tcp_send_syn(struct km_tcp_conn *c);
void km_tcp_send_ack(struct km_tcp_conn *c);
void km_tcp_send_challenge_ack(struct km_tcp_conn *c);
void km_tcp_send_rst(struct km_tcp_conn *c);
void km_tcp_send_keepalive(struct km_tcp_conn *c);
void km_tcp_send_probe(struct km_tcp_conn *c);
void km_tcp_retransmit_one(struct km_tcp_conn *c);
void km_tcp_reply_rst(struct km_tcp_ep *ep, const struct tcp_seg *s);
void km_tcp_ring_consume(struct km_tcp_conn *c, uint32_t n);

/* tcp_timer.c */
void km_tcp_rtt_sample(struct km_tcp_conn *c, uint64_t rtt_ms);
void km_tcp_rtx_arm(struct km_tcp_conn *c);
void km_tcp_keep_arm(struct km_tcp_conn *c);
int km_tcp_timers_run(struct km_tcp_conn *c);
uint64_t km_tcp_conn_next_timer(const struct km_tcp_conn *c);

#endif
