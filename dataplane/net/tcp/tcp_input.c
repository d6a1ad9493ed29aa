/* The segment state machine (RFC 9293 3.10.7), with the RFC 5961 checks
 * on RST, SYN and ACK, and NewReno's fast recovery (RFC 6582). Receive
 * text is tcp_rx.c's; LISTEN is tcp_listen.c's.
 *
 * Each received segment is counted against its connection; anything that
 * does not fit the connection's state is dropped and counted by reason.
 */
#include <errno.h>

#include "common/km_assert.h"
#include "dataplane/net/tcp/tcp_pvt.h"
#include "dataplane/net/tcp/wire.h"

/* RFC 6298 5.7: after a SYN timeout, data starts with an RTO of 3 s. */
#define RTO_AFTER_SYN_LOSS_MS 3000u
/* Smallest peer MSS we honour: below it headers would dominate. */
#define PEER_MSS_MIN 64u
/* cwnd stops growing here: the peer's window (at most 1 GiB scaled) is
 * the limit long before, and a bound keeps the sum from wrapping. */
#define CWND_MAX (1u << 30)

/* The peer's SYN options. Ours offer SACK and WS always, a SYN-ACK only
 * when the SYN did (tcp_output.c), so what the peer sent decides. */
void km_tcp_syn_options(struct km_tcp_conn *c, const struct tcp_seg *s)
{
	struct km_tcp_ep *ep = c->ep;
	uint32_t mss = s->mss ? s->mss : TCP_MSS_DEFAULT;

	if (mss < PEER_MSS_MIN)
		mss = PEER_MSS_MIN;
	if (mss > ep->rcv_mss)
		mss = ep->rcv_mss;
	c->snd_mss = (uint16_t)mss;
	/* RFC 2018 2: SACK only if the SYN permitted it (ours always does). */
	if (s->sack_ok)
		c->flags |= CF_SACK;
	/* RFC 7323 2.2: scaling is on only if both SYNs carried WS. */
	if (s->wscale >= 0) {
		c->flags |= CF_WSCALE;
		c->snd_shift = (uint8_t)s->wscale;
		c->rcv_shift = ep->rcv_shift;
	}
}

/* Either handshake is complete: our SYN is acknowledged. */
static void handshake_done(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;

	c->cwnd = 10u * c->snd_mss;
	if ((c->flags & CF_RTT) && !(c->flags & CF_SYN_RTX))
		km_tcp_rtt_sample(c, ep->now - c->rtt_start_ms);
	c->flags &= ~CF_RTT;
	if ((c->flags & CF_SYN_RTX) && c->rto_ms < RTO_AFTER_SYN_LOSS_MS)
		c->rto_ms = RTO_AFTER_SYN_LOSS_MS < ep->cfg.rto_max_ms ?
			    RTO_AFTER_SYN_LOSS_MS : ep->cfg.rto_max_ms;
	c->rtx_count = 0;
	c->t_rtx = 0;
	c->state = KM_TCP_ESTABLISHED;
	c->flags |= CF_EST;
	ep->st.conns_opened++;
	km_tcp_keep_arm(c);
}

static void established(struct km_tcp_conn *c, const struct tcp_seg *s)
{
	struct km_tcp_ep *ep = c->ep;
	uint32_t syn_wnd = ep->cfg.rcv_buf_bytes > 65535 ?
			   65535 : ep->cfg.rcv_buf_bytes;

	c->irs = s->seq;
	c->rcv_nxt = s->seq + 1;
	c->rcv_acked = s->seq;
	c->rcv_adv = c->rcv_nxt + syn_wnd;
	km_tcp_syn_options(c, s);
	c->snd_una = s->ack;
	c->snd_wnd = c->max_snd_wnd = s->win;
	c->snd_wl1 = s->seq;
	c->snd_wl2 = s->ack;
	handshake_done(c);
	c->flags |= CF_ACK_NOW;
	c->ev |= EV_CONNECTED;
}

/* RFC 9293 3.10.7.3, SYN-SENT. Simultaneous open (a SYN without ACK) is
 * not supported: a client never listens. */
static void syn_sent_input(struct km_tcp_conn *c, struct tcp_seg *s)
{
	bool has_ack = s->flags & TCP_ACK;

	/* "If SEG.ACK =< ISS or SEG.ACK > SND.NXT, send a reset (unless
	 * the RST bit is set, if so drop the segment and return)". */
	if (has_ack && (seq_le(s->ack, c->iss) || seq_gt(s->ack, c->snd_max))) {
		km_tcp_reply_rst(c->ep, s);
		conn_drop(c, KM_TCP_DROP_ACK);
		return;
	}
	if (s->flags & TCP_RST) {
		/* "If the ACK was acceptable, then signal to the user 'error:
		 * connection reset', drop the segment, enter CLOSED". */
		if (!has_ack) {
			conn_drop(c, KM_TCP_DROP_STATE);
			return;
		}
		CONN_COUNT(c, rst_in, 1);
		km_tcp_conn_end(c, -ECONNREFUSED);
		return;
	}
	if (!(s->flags & TCP_SYN) || !has_ack) {
		conn_drop(c, KM_TCP_DROP_STATE);
		return;
	}
	established(c, s);
	if (s->len)
		km_tcp_rx_text(c, s, s->seq + 1);
	km_tcp_rx_fin_check(c, s, s->seq + 1);
	km_tcp_output(c);
}

static uint32_t rcv_wnd(const struct km_tcp_conn *c)
{
	return seq_gt(c->rcv_adv, c->rcv_nxt) ? c->rcv_adv - c->rcv_nxt : 0;
}

/* RFC 9293 3.10.7.4 first check, with the zero-window case relaxed as
 * Linux does: a segment starting at RCV.NXT is acceptable (its ACK and
 * FIN count) though its data will not fit. */
static bool seq_acceptable(const struct km_tcp_conn *c, uint32_t seq,
			   uint32_t len)
{
	uint32_t wnd = rcv_wnd(c);

	if (len == 0)
		return seq == c->rcv_nxt ||
		       (seq_gt(seq, c->rcv_nxt) &&
			seq_lt(seq, c->rcv_nxt + wnd));
	if (wnd == 0)
		wnd = 1;
	return seq_lt(seq, c->rcv_nxt + wnd) && seq_gt(seq + len, c->rcv_nxt);
}

/* RFC 5961 3.2: "If the RST bit is set and the sequence number exactly
 * matches the next expected sequence number (RCV.NXT), then TCP MUST reset
 * the connection"; in the window, challenge ACK; outside, drop. RFC 1337:
 * TIME-WAIT ignores RSTs, so that none can cut it short. */
static void rst_input(struct km_tcp_conn *c, const struct tcp_seg *s)
{
	uint32_t wnd = rcv_wnd(c);

	if (c->state == KM_TCP_TIME_WAIT) {
		conn_drop(c, KM_TCP_DROP_RST_TIMEWAIT);
		return;
	}
	if (s->seq == c->rcv_nxt) {
		CONN_COUNT(c, rst_in, 1);
		km_tcp_conn_end(c, -ECONNRESET);
		return;
	}
	if (seq_gt(s->seq, c->rcv_nxt) &&
	    seq_lt(s->seq, c->rcv_nxt + (wnd ? wnd : 1))) {
		conn_drop(c, KM_TCP_DROP_RST_CHALLENGE);
		km_tcp_send_challenge_ack(c);
		return;
	}
	conn_drop(c, KM_TCP_DROP_RST_WINDOW);
}

void km_tcp_enter_time_wait(struct km_tcp_conn *c)
{
	c->state = KM_TCP_TIME_WAIT;
	c->flags &= ~CF_CLOSE_TIMER;
	c->t_rtx = c->t_keep = 0;
	c->t_state = c->ep->now + c->ep->cfg.time_wait_ms;
	km_tcp_conn_end(c, 0);
}

static void fin_acked(struct km_tcp_conn *c)
{
	switch (c->state) {
	case KM_TCP_FIN_WAIT_1:
		c->state = KM_TCP_FIN_WAIT_2;
		break;
	case KM_TCP_CLOSING:
		km_tcp_enter_time_wait(c);
		break;
	case KM_TCP_LAST_ACK:
		km_tcp_conn_end(c, 0);
		break;
	default:
		break;
	}
}

/* RFC 5681 3.1: slow start below ssthresh, else congestion avoidance,
 * both counting the bytes acknowledged (RFC 3465) rather than ACKs. A
 * receiver like ours ACKs once per receive burst: counting at most one
 * segment per ACK would grow cwnd by one segment per round trip in slow
 * start. Bursts stay bounded by OUTPUT_BURST_MAX (tcp_output.c). */
static void cwnd_grow(struct km_tcp_conn *c, uint32_t acked)
{
	uint64_t inc;

	c->dupacks = 0;
	if (c->cwnd >= CWND_MAX)
		return;
	if (c->cwnd < c->ssthresh) {
		inc = acked < c->ssthresh - c->cwnd ?
		      acked : c->ssthresh - c->cwnd;
	} else {
		inc = (uint64_t)c->snd_mss * acked / c->cwnd + 1;
	}
	c->cwnd = c->cwnd + inc > CWND_MAX ? CWND_MAX : (uint32_t)(c->cwnd + inc);
}

/* RFC 6582 3.2 steps 5 and 6. A full ACK (all that was out when recovery
 * began) ends it with cwnd = ssthresh. A partial ACK means the next hole
 * is lost too: retransmit it now, deflate cwnd by what was acked (plus a
 * segment), and stay in recovery, or each further hole of the window
 * would wait for an RTO. */
static void recovery_ack(struct km_tcp_conn *c, uint32_t ack, uint32_t acked)
{
	if (seq_ge(ack, c->recover)) {
		c->flags &= ~CF_RECOVERY;
		c->cwnd = c->ssthresh;
		c->dupacks = 0;
		return;
	}
	c->cwnd = c->cwnd > acked ? c->cwnd - acked : 0;
	c->cwnd += c->snd_mss;
	if (c->cwnd < c->snd_mss)
		c->cwnd = c->snd_mss;
	km_tcp_retransmit_one(c);
}

static void new_ack(struct km_tcp_conn *c, uint32_t ack)
{
	uint32_t acked = ack - c->snd_una;
	uint32_t data = acked < c->snd_len ? acked : c->snd_len;
	bool fin = acked > c->snd_len;

	km_tcp_ring_consume(c, data);
	c->snd_una = ack;
	if (seq_lt(c->snd_nxt, ack))
		c->snd_nxt = ack;
	if ((c->flags & CF_RTT) && seq_gt(ack, c->rtt_seq)) {
		c->flags &= ~CF_RTT;
		km_tcp_rtt_sample(c, c->ep->now - c->rtt_start_ms);
	}
	c->rtx_count = 0;
	c->acked_unreported += data;
	/* RFC 6298 5.2/5.3: stop the timer when all is acked, else restart. */
	c->t_rtx = c->snd_una == c->snd_max ? 0 : c->ep->now + c->rto_ms;
	if (c->flags & CF_RECOVERY)
		recovery_ack(c, ack, acked);
	else
		cwnd_grow(c, acked);
	if (fin)
		fin_acked(c);
}

/* RFC 5681 2: same ACK, no data, same window, data outstanding. */
static void dup_ack(struct km_tcp_conn *c, const struct tcp_seg *s,
		    bool same_wnd)
{
	uint32_t flight = c->snd_max - c->snd_una;

	if (s->ack != c->snd_una || s->len || (s->flags & TCP_FIN) ||
	    !same_wnd || flight == 0)
		return;
	CONN_COUNT(c, dup_acks, 1);
	/* RFC 6582 3.2 step 1: a third duplicate inside recovery does not
	 * start another one; it only inflates cwnd (step 4). */
	if (++c->dupacks == 3 && !(c->flags & CF_RECOVERY)) {
		c->ssthresh = flight / 2 > 2u * c->snd_mss ?
			      flight / 2 : 2u * c->snd_mss;
		c->cwnd = c->ssthresh + 3u * c->snd_mss;
		c->recover = c->snd_max;
		c->flags |= CF_RECOVERY;
		CONN_COUNT(c, fast_retransmits, 1);
		km_tcp_retransmit_one(c);
	} else if (c->dupacks >= 3) {
		c->cwnd += c->snd_mss;
	}
}

static void window_update(struct km_tcp_conn *c, const struct tcp_seg *s)
{
	/* RFC 9293 3.10.7.4: "If SND.WL1 < SEG.SEQ or (SND.WL1 = SEG.SEQ
	 * and SND.WL2 =< SEG.ACK), set SND.WND <- SEG.WND". */
	if (!seq_lt(c->snd_wl1, s->seq) &&
	    !(c->snd_wl1 == s->seq && seq_le(c->snd_wl2, s->ack)))
		return;
	c->snd_wnd = (uint32_t)s->win << c->snd_shift;
	c->snd_wl1 = s->seq;
	c->snd_wl2 = s->ack;
	if (c->snd_wnd > c->max_snd_wnd)
		c->max_snd_wnd = c->snd_wnd;
	/* The window opened with nothing in flight: the persist timer has
	 * done its job; km_tcp_output() re-arms for what it sends. */
	if (c->snd_wnd && c->snd_una == c->snd_max)
		c->t_rtx = 0;
}

/* RFC 9293 3.10.7.4 fifth check plus RFC 5961 5.2. false: drop. */
static bool ack_input(struct km_tcp_conn *c, const struct tcp_seg *s)
{
	bool same_wnd = ((uint32_t)s->win << c->snd_shift) == c->snd_wnd;

	if (seq_gt(s->ack, c->snd_max)) {
		conn_drop(c, KM_TCP_DROP_ACK);
		km_tcp_send_ack(c);
		return false;
	}
	if (seq_lt(s->ack, c->snd_una - c->max_snd_wnd)) {
		conn_drop(c, KM_TCP_DROP_ACK);
		km_tcp_send_challenge_ack(c);
		return false;
	}
	if (seq_gt(s->ack, c->snd_una))
		new_ack(c, s->ack);
	else
		dup_ack(c, s, same_wnd);
	window_update(c, s);
	return true;
}

static bool text_state(enum km_tcp_state st)
{
	return st == KM_TCP_ESTABLISHED || st == KM_TCP_FIN_WAIT_1 ||
	       st == KM_TCP_FIN_WAIT_2;
}

/* The checks before the ACK's, common to every synchronized state.
 * false: the segment was dealt with (dropped, or the end queued). */
static bool synced_checks(struct km_tcp_conn *c, struct tcp_seg *s)
{
	uint32_t seg_len = s->len + ((s->flags & TCP_FIN) ? 1 : 0);

	if (s->flags & TCP_RST) {
		rst_input(c, s);
		return false;
	}
	/* RFC 5961 4.2: a SYN in a synchronized state, whatever its
	 * sequence number, gets a challenge ACK and is dropped. */
	if (s->flags & TCP_SYN) {
		conn_drop(c, KM_TCP_DROP_SYN_CHALLENGE);
		km_tcp_send_challenge_ack(c);
		return false;
	}
	if (!seq_acceptable(c, s->seq, seg_len)) {
		conn_drop(c, KM_TCP_DROP_SEQ);
		/* A retransmitted FIN in TIME-WAIT restarts the 2MSL wait. */
		if (c->state == KM_TCP_TIME_WAIT && (s->flags & TCP_FIN))
			c->t_state = c->ep->now + c->ep->cfg.time_wait_ms;
		km_tcp_send_ack(c);
		return false;
	}
	return true;
}

/* RFC 9293 3.10.7.4 in SYN-RECEIVED (passive open only). A copy of the
 * peer's SYN means our SYN-ACK was lost: send it again. Else, past the
 * common checks: "If SND.UNA < SEG.ACK =< SND.NXT, then enter ESTABLISHED
 * state and continue processing"; "If the segment acknowledgment is not
 * acceptable, form a reset segment <SEQ=SEG.ACK><CTL=RST>". An RST that
 * ends it ends it unreported (tcp.c report_end). */
static bool syn_rcvd_input(struct km_tcp_conn *c, struct tcp_seg *s)
{
	if ((s->flags & (TCP_SYN | TCP_RST | TCP_ACK)) == TCP_SYN &&
	    s->seq == c->irs) {
		conn_drop(c, KM_TCP_DROP_STATE);
		c->flags = (c->flags | CF_SYN_RTX) & ~CF_RTT;
		CONN_COUNT(c, retransmits, 1);
		km_tcp_send_syn(c);
		return false;
	}
	if (!synced_checks(c, s))
		return false;
	if (!(s->flags & TCP_ACK)) {
		conn_drop(c, KM_TCP_DROP_STATE);
		return false;
	}
	if (seq_le(s->ack, c->snd_una) || seq_gt(s->ack, c->snd_max)) {
		conn_drop(c, KM_TCP_DROP_ACK);
		km_tcp_reply_rst(c->ep, s);
		return false;
	}
	c->snd_una = s->ack;
	c->snd_wnd = c->max_snd_wnd = (uint32_t)s->win << c->snd_shift;
	c->snd_wl1 = s->seq;
	c->snd_wl2 = s->ack;
	handshake_done(c);
	c->ev |= EV_ACCEPTED;
	c->ep->st.conns_accepted++;
	return true;
}

static void synced_input(struct km_tcp_conn *c, struct tcp_seg *s)
{
	if (c->state == KM_TCP_SYN_RCVD) {
		if (!syn_rcvd_input(c, s))
			return;
	} else if (!synced_checks(c, s)) {
		return;
	}
	if (!ack_input(c, s) || c->state == KM_TCP_CLOSED)
		return;
	if (text_state(c->state) && s->len)
		km_tcp_rx_text(c, s, s->seq);
	else if (s->len)
		conn_drop(c, KM_TCP_DROP_STATE);
	km_tcp_rx_fin_check(c, s, s->seq);
	km_tcp_output(c);
}

void km_tcp_segment(struct km_tcp_ep *ep, struct tcp_seg *s)
{
	struct km_tcp_conn *c = km_tcp_lookup(ep, s->src_ip, s->sport, s->dport);

	if (c == NULL && km_tcp_listening(ep, s->dport)) {
		km_tcp_listen_input(ep, s);
		return;
	}
	if (c != NULL)
		km_tcp_rx_prepare(c, s->n);
	/* The early delivery above may have let the consumer abort c. */
	if (c == NULL || c->state == KM_TCP_CLOSED) {
		ep->st.tcp.drops[KM_TCP_DROP_NO_CONN]++;
		km_tcp_reply_rst(ep, s);
		km_tcp_pieces_free(ep, s);
		return;
	}
	CONN_COUNT(c, pkts_in, 1);
	CONN_COUNT(c, bytes_in, s->len);
	km_tcp_touch(c);
	km_tcp_keep_arm(c);
	if (c->state == KM_TCP_SYN_SENT)
		syn_sent_input(c, s);
	else
		synced_input(c, s);
	km_tcp_pieces_free(ep, s);
}
