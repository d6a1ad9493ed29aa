/* Segments out: frame building (Ethernet + IPv4 + TCP, checksums in
 * software unless offloaded), the data sender, SYN and SYN-ACK, ACK, RST,
 * probes.
 *
 * The sender has no Nagle delay (our requests are latency-bound, like
 * TCP_NODELAY) and follows RFC 5681 congestion control: slow start from 10
 * segments, congestion avoidance, one segment after a timeout (then
 * go-back-N from snd_una), fast retransmit on the third duplicate ACK and
 * NewReno's recovery (RFC 6582, tcp_input.c). The peer's SACK blocks are
 * not used. A bulk stream is bounded by the send ring: bytes stay there
 * until acknowledged, and the ring's space is reused as ACKs free it.
 */
#include <string.h>

#include "common/endian.h"
#include "common/km_assert.h"
#include "dataplane/net/tcp/csum.h"
#include "dataplane/net/tcp/tcp_pvt.h"
#include "dataplane/net/tcp/wire.h"

/* Segments one km_tcp_output() call sends at most (STYLE 13). */
#define OUTPUT_BURST_MAX 64u

/* What one segment carries. */
struct seg_out {
	uint32_t rip;
	uint16_t sport, dport;
	uint32_t seq, ack;
	uint8_t flags;
	uint16_t win;
	uint16_t mss;		/* SYN: our MSS and window scale options */
	uint8_t wscale;
	bool syn_ws, syn_sack;	/* SYN: offer WS, SACK-permitted */
	uint32_t n_sack;	/* ACK: SACK blocks (start, end) pairs */
	uint32_t sack[2 * TCP_SACK_BLOCKS_MAX];
	const struct iovec *pay;
	uint32_t n_pay;
	uint32_t pay_len;
};

static void build_ip(struct km_tcp_ep *ep, uint8_t *ip, uint32_t dst,
		     uint16_t tot, uint32_t *txf)
{
	memset(ip, 0, IP_HDR_LEN);
	ip[IP_OFF_VHL] = 0x45;
	km_store_be16(ip + IP_OFF_LEN, tot);
	km_store_be16(ip + IP_OFF_ID, ep->ip_id++);
	km_store_be16(ip + IP_OFF_FRAG, IP_FLAG_DF);
	ip[IP_OFF_TTL] = IP_TTL;
	ip[IP_OFF_PROTO] = IP_PROTO_TCP;
	km_store_be32(ip + IP_OFF_SRC, ep->cfg.ip);
	km_store_be32(ip + IP_OFF_DST, dst);
	if (ep->cfg.tx_csum_offload & KM_TCP_TX_CSUM_IP) {
		*txf |= KM_TCP_TX_CSUM_IP;
	} else {
		uint16_t v = km_csum_final(km_csum_add(0, ip, IP_HDR_LEN));

		memcpy(ip + IP_OFF_CSUM, &v, 2);
	}
}

/* MSS, [NOP, NOP, SACK-permitted], [NOP, WS] (RFC 9293, 2018, 7323):
 * each part 4 bytes, so any subset pads to 32 bits. */
static uint32_t syn_options(const struct seg_out *o, uint8_t *p)
{
	uint32_t n = 4;

	p[0] = TCPOPT_MSS;
	p[1] = TCPOPT_MSS_LEN;
	km_store_be16(p + 2, o->mss);
	if (o->syn_sack) {
		p[n] = TCPOPT_NOP;
		p[n + 1] = TCPOPT_NOP;
		p[n + 2] = TCPOPT_SACK_PERM;
		p[n + 3] = TCPOPT_SACK_PERM_LEN;
		n += 4;
	}
	if (o->syn_ws) {
		p[n] = TCPOPT_NOP;
		p[n + 1] = TCPOPT_WS;
		p[n + 2] = TCPOPT_WS_LEN;
		p[n + 3] = o->wscale;
		n += 4;
	}
	KM_ASSERT_HOT(n <= TCP_SYN_OPTS_LEN);
	return n;
}

/* NOP, NOP, SACK with n blocks (RFC 2018 3). */
static uint32_t sack_option(const struct seg_out *o, uint8_t *p)
{
	p[0] = TCPOPT_NOP;
	p[1] = TCPOPT_NOP;
	p[2] = TCPOPT_SACK;
	p[3] = (uint8_t)(2 + 8 * o->n_sack);
	for (uint32_t i = 0; i < 2 * o->n_sack; i++)
		km_store_be32(p + 4 + 4 * i, o->sack[i]);
	return 4 + 8 * o->n_sack;
}

static uint32_t build_tcp(const struct seg_out *o, uint8_t *t)
{
	uint32_t hl = TCP_HDR_LEN;

	memset(t, 0, TCP_HDR_LEN);
	km_store_be16(t + TCP_OFF_SPORT, o->sport);
	km_store_be16(t + TCP_OFF_DPORT, o->dport);
	km_store_be32(t + TCP_OFF_SEQ, o->seq);
	km_store_be32(t + TCP_OFF_ACK, o->ack);
	t[TCP_OFF_FLAGS] = o->flags;
	km_store_be16(t + TCP_OFF_WIN, o->win);
	if (o->flags & TCP_SYN)
		hl += syn_options(o, t + TCP_HDR_LEN);
	else if (o->n_sack)
		hl += sack_option(o, t + TCP_HDR_LEN);
	KM_ASSERT_HOT(hl % 4 == 0);
	t[TCP_OFF_DOFF] = (uint8_t)((hl / 4) << 4);
	return hl;
}

static void tcp_csum(struct km_tcp_ep *ep, const struct seg_out *o,
		     uint8_t *t, uint32_t hl, uint32_t *txf)
{
	uint16_t l4 = (uint16_t)(hl + o->pay_len);
	uint32_t sum = km_csum_pseudo(ep->cfg.ip, o->rip, IP_PROTO_TCP, l4);
	struct km_chain ch = { o->pay, o->n_pay };
	uint16_t v;

	if (ep->cfg.tx_csum_offload & KM_TCP_TX_CSUM_TCP) {
		*txf |= KM_TCP_TX_CSUM_TCP;
		v = km_csum_fold(sum);
	} else {
		sum = km_csum_add(sum, t, hl);
		KM_ASSERT(km_csum_chain(&ch, km_chain_start(&ch), o->pay_len,
					&sum) == 0);
		v = km_csum_final(sum);
	}
	memcpy(t + TCP_OFF_CSUM, &v, 2);
}

static void send_frame(struct km_tcp_ep *ep, const uint8_t mac[6],
		       const struct seg_out *o)
{
	uint8_t hdr[FRAME_HDR_MAX];
	struct iovec iov[3];
	uint32_t txf = 0, hl;

	KM_ASSERT_HOT(o->n_pay <= 2);
	memcpy(hdr + ETH_OFF_DST, mac, 6);
	memcpy(hdr + ETH_OFF_SRC, ep->cfg.mac, 6);
	km_store_be16(hdr + ETH_OFF_TYPE, ETH_TYPE_IPV4);
	hl = build_tcp(o, hdr + ETH_HDR_LEN + IP_HDR_LEN);
	build_ip(ep, hdr + ETH_HDR_LEN, o->rip,
		 (uint16_t)(IP_HDR_LEN + hl + o->pay_len), &txf);
	tcp_csum(ep, o, hdr + ETH_HDR_LEN + IP_HDR_LEN, hl, &txf);
	iov[0].iov_base = hdr;
	iov[0].iov_len = ETH_HDR_LEN + IP_HDR_LEN + hl;
	for (uint32_t i = 0; i < o->n_pay; i++)
		iov[1 + i] = o->pay[i];
	km_tcp_tx_frame(ep, iov, 1 + o->n_pay, txf);
}

/* Bytes [seq, seq + len) of the send ring as at most two iovecs. */
static uint32_t ring_iov(const struct km_tcp_conn *c, uint32_t seq,
			 uint32_t len, struct iovec *iov)
{
	uint32_t pos = (c->snd_head + (seq - c->snd_una)) & c->snd_mask;
	uint32_t first = c->snd_mask + 1 - pos;

	if (len == 0)
		return 0;
	KM_ASSERT_HOT(seq - c->snd_una + len <= c->snd_len);
	if (first >= len) {
		iov[0] = (struct iovec){ c->snd_ring + pos, len };
		return 1;
	}
	iov[0] = (struct iovec){ c->snd_ring + pos, first };
	iov[1] = (struct iovec){ c->snd_ring, len - first };
	return 2;
}

/* A SYN's window, never scaled (RFC 7323 2.2), and its options. A
 * SYN-ACK offers WS only "if it has received a Window Scale option in the
 * initial <SYN>" (RFC 7323 2.2), and SACK-permitted likewise. */
static void syn_fields(const struct km_tcp_conn *c, struct seg_out *o)
{
	struct km_tcp_ep *ep = c->ep;
	bool passive = c->flags & CF_PASSIVE;

	o->win = ep->cfg.rcv_buf_bytes > 65535 ?
		 65535 : (uint16_t)ep->cfg.rcv_buf_bytes;
	o->mss = ep->rcv_mss;
	o->wscale = ep->rcv_shift;
	o->syn_ws = !passive || (c->flags & CF_WSCALE);
	o->syn_sack = !passive || (c->flags & CF_SACK);
}

/* Send one segment of c; len payload bytes from the ring at seq. A
 * segment that carries ACK tells the peer everything up to rcv_nxt, so the
 * pending ACK work is done. A missing next hop is a loss (retransmission
 * or the ARP answer sends it again). */
static void emit(struct km_tcp_conn *c, uint8_t flags, uint32_t seq,
		 uint32_t len)
{
	struct km_tcp_ep *ep = c->ep;
	struct iovec pay[2];
	struct seg_out o;
	uint8_t mac[6];

	if (!km_tcp_resolve(ep, c->nexthop, mac)) {
		c->flags |= CF_ARP_WAIT;
		return;
	}
	c->flags |= CF_ARP_SEEN;
	memset(&o, 0, sizeof(o));
	o.rip = c->rip;
	o.sport = c->lport;
	o.dport = c->rport;
	o.seq = seq;
	o.flags = flags;
	o.pay = pay;
	o.n_pay = ring_iov(c, seq, len, pay);
	o.pay_len = len;
	if (flags & TCP_SYN)
		syn_fields(c, &o);
	if (flags & TCP_ACK) {
		o.ack = c->rcv_nxt;
		if (!(flags & (TCP_RST | TCP_SYN)))
			o.win = (uint16_t)km_tcp_rcv_window(c);
		if ((c->flags & CF_SACK) && !(flags & (TCP_RST | TCP_SYN)) &&
		    c->ooo_n)
			o.n_sack = km_tcp_sack_blocks(c, o.sack);
		c->rcv_acked = c->rcv_nxt;
		c->t_delack = 0;
		c->flags &= ~CF_ACK_NOW;
	}
	send_frame(ep, mac, &o);
	CONN_COUNT(c, pkts_out, 1);
	CONN_COUNT(c, bytes_out, len);
}

void km_tcp_ring_consume(struct km_tcp_conn *c, uint32_t n)
{
	KM_ASSERT_HOT(n <= c->snd_len);
	c->snd_head = (c->snd_head + n) & c->snd_mask;
	c->snd_len -= n;
}

/* Our SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED), first or again. */
void km_tcp_send_syn(struct km_tcp_conn *c)
{
	emit(c, c->state == KM_TCP_SYN_RCVD ? TCP_SYN | TCP_ACK : TCP_SYN,
	     c->iss, 0);
	c->snd_nxt = c->snd_max = c->iss + 1;
	if (!(c->flags & CF_SYN_RTX)) {
		c->flags |= CF_RTT;
		c->rtt_seq = c->iss;
		c->rtt_start_ms = c->ep->now;
	}
	c->t_rtx = c->ep->now + c->rto_ms;
}

static bool output_state(enum km_tcp_state s)
{
	return s == KM_TCP_ESTABLISHED || s == KM_TCP_CLOSE_WAIT ||
	       s == KM_TCP_FIN_WAIT_1 || s == KM_TCP_CLOSING ||
	       s == KM_TCP_LAST_ACK;
}

static uint32_t usable_window(const struct km_tcp_conn *c)
{
	uint32_t wnd = c->snd_wnd < c->cwnd ? c->snd_wnd : c->cwnd;
	uint32_t edge = c->snd_una + wnd;

	return seq_lt(c->snd_nxt, edge) ? edge - c->snd_nxt : 0;
}

/* Send one segment from snd_nxt if the windows allow; false if none. */
static bool output_one(struct km_tcp_conn *c)
{
	uint32_t fin_seq = c->snd_una + c->snd_len;
	uint32_t unsent, len, usable = usable_window(c);
	bool fin;
	uint8_t flags = TCP_ACK;

	if (seq_gt(c->snd_nxt, fin_seq))
		return false;
	unsent = fin_seq - c->snd_nxt;
	len = unsent < usable ? unsent : usable;
	if (len > c->snd_mss)
		len = c->snd_mss;
	fin = (c->flags & CF_FIN_QUEUED) && len == unsent;
	if (len == 0 && !fin)
		return false;
	if (len && len == unsent)
		flags |= TCP_PSH;
	if (fin)
		flags |= TCP_FIN;
	if (seq_lt(c->snd_nxt, c->snd_max))
		CONN_COUNT(c, retransmits, 1);
	else if (!(c->flags & CF_RTT)) {
		c->flags |= CF_RTT;
		c->rtt_seq = c->snd_nxt;
		c->rtt_start_ms = c->ep->now;
	}
	emit(c, flags, c->snd_nxt, len);
	c->snd_nxt += len + (fin ? 1 : 0);
	if (seq_gt(c->snd_nxt, c->snd_max))
		c->snd_max = c->snd_nxt;
	km_tcp_rtx_arm(c);
	return !fin;
}

void km_tcp_output(struct km_tcp_conn *c)
{
	uint32_t i;

	if (!output_state(c->state))
		return;
	for (i = 0; i < OUTPUT_BURST_MAX; i++)
		if (!output_one(c))
			break;
	/* RFC 9293 3.8.6.1: a zero window with data waiting and nothing in
	 * flight needs the persist timer, or a lost window update would
	 * deadlock the connection. */
	if (c->snd_una == c->snd_max && c->snd_len > 0 && c->snd_wnd == 0)
		km_tcp_rtx_arm(c);
}

void km_tcp_send_ack(struct km_tcp_conn *c)
{
	emit(c, TCP_ACK, c->snd_nxt, 0);
}

/* RFC 5961 7: challenge ACKs are rate limited per endpoint so that they
 * cannot be turned into an amplifier. */
void km_tcp_send_challenge_ack(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;

	if (ep->now >= ep->chack_window_ms + 1000) {
		ep->chack_window_ms = ep->now;
		ep->chack_count = 0;
	}
	if (ep->chack_count >= ep->cfg.challenge_acks_per_s) {
		ep->st.challenge_acks_limited++;
		return;
	}
	ep->chack_count++;
	CONN_COUNT(c, challenge_acks, 1);
	km_tcp_send_ack(c);
}

/* RFC 9293 3.10.4 ABORT: RST at the highest sequence sent, which is what
 * the peer expects next unless our last segments were lost. */
void km_tcp_send_rst(struct km_tcp_conn *c)
{
	if (c->state == KM_TCP_SYN_SENT)
		emit(c, TCP_RST, c->snd_max, 0);
	else
		emit(c, TCP_RST | TCP_ACK, c->snd_max, 0);
	CONN_COUNT(c, rst_out, 1);
}

/* A keepalive probe: an old sequence number, so the peer must ACK. */
void km_tcp_send_keepalive(struct km_tcp_conn *c)
{
	emit(c, TCP_ACK, c->snd_una - 1, 0);
	CONN_COUNT(c, keepalives, 1);
}

/* Zero-window probe. RFC 9293 3.8.6.1 lets the probe carry a byte of new
 * data; like Linux we send none and use an old sequence number instead:
 * any peer must answer that with an ACK carrying its window, and no
 * sequence space is taken that would need a retransmission later. */
void km_tcp_send_probe(struct km_tcp_conn *c)
{
	emit(c, TCP_ACK, c->snd_una - 1, 0);
	CONN_COUNT(c, window_probes, 1);
}

/* Fast retransmit (RFC 5681 3.2): the segment at snd_una again. */
void km_tcp_retransmit_one(struct km_tcp_conn *c)
{
	uint32_t len = c->snd_len < c->snd_mss ? c->snd_len : c->snd_mss;
	uint8_t flags = TCP_ACK;

	if (len == 0 && !(c->flags & CF_FIN_QUEUED))
		return;
	if ((c->flags & CF_FIN_QUEUED) && len == c->snd_len &&
	    seq_gt(c->snd_max, c->snd_una + c->snd_len))
		flags |= TCP_FIN;
	c->flags &= ~CF_RTT;
	emit(c, flags, c->snd_una, len);
	CONN_COUNT(c, retransmits, 1);
}

/* RFC 9293 3.10.7.1, a segment for no connection: "If the ACK bit is off,
 * sequence number zero is used, <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>;
 * if the ACK bit is on, <SEQ=SEG.ACK><CTL=RST>". An RST is never
 * answered. The frame goes back to the MAC it came from. */
void km_tcp_reply_rst(struct km_tcp_ep *ep, const struct tcp_seg *s)
{
	struct seg_out o;

	if (s->flags & TCP_RST)
		return;
	memset(&o, 0, sizeof(o));
	o.rip = s->src_ip;
	o.sport = s->dport;
	o.dport = s->sport;
	if (s->flags & TCP_ACK) {
		o.seq = s->ack;
		o.flags = TCP_RST;
	} else {
		o.ack = s->seq + s->len + ((s->flags & TCP_SYN) ? 1 : 0) +
			((s->flags & TCP_FIN) ? 1 : 0);
		o.flags = TCP_RST | TCP_ACK;
	}
	send_frame(ep, s->src_mac, &o);
	ep->st.tcp.rst_out++;
	ep->st.tcp.pkts_out++;
}
