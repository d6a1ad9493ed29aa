/* RTO estimation (RFC 6298) and the connection timers: retransmission
 * (which doubles as the persist timer when the peer's window is shut),
 * delayed ACK, keepalive, and the state timer (TIME-WAIT, or the graceful
 * close timeout). Deadlines are absolute ms of ops->now_ms(), 0 when off;
 * km_tcp_poll() runs what is due.
 */
#include <errno.h>

#include "common/km_assert.h"
#include "dataplane/net/tcp/tcp_pvt.h"

/* RFC 6298 2.3 G: the clock granularity, here 1 ms in microseconds. */
#define CLOCK_G_US 1000u

/* RFC 6298 2.2/2.3: the first measurement R sets SRTT <- R,
 * RTTVAR <- R/2; each later one RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R'|,
 * SRTT <- 7/8 SRTT + 1/8 R'; then RTO <- SRTT + max(G, 4 RTTVAR), rounded
 * up to whole ms and kept within [rto_min_ms, rto_max_ms]. A measurement
 * also ends any backoff (Karn: samples only come from segments sent once). */
void km_tcp_rtt_sample(struct km_tcp_conn *c, uint64_t rtt_ms)
{
	const struct km_tcp_config *cfg = &c->ep->cfg;
	uint64_t r = rtt_ms * 1000u, var4, rto_us, rto;

	if (r > UINT32_MAX / 8)
		r = UINT32_MAX / 8;
	if (!(c->flags & CF_HAVE_RTT)) {
		c->srtt_us = (uint32_t)r;
		c->rttvar_us = (uint32_t)(r / 2);
		c->flags |= CF_HAVE_RTT;
	} else {
		uint64_t d = c->srtt_us > r ? c->srtt_us - r : r - c->srtt_us;

		c->rttvar_us =
			(uint32_t)((3u * (uint64_t)c->rttvar_us + d) / 4);
		c->srtt_us = (uint32_t)((7u * (uint64_t)c->srtt_us + r) / 8);
	}
	var4 = 4u * (uint64_t)c->rttvar_us;
	rto_us = c->srtt_us + (var4 > CLOCK_G_US ? var4 : CLOCK_G_US);
	rto = (rto_us + 999) / 1000;
	if (rto < cfg->rto_min_ms)
		rto = cfg->rto_min_ms;
	if (rto > cfg->rto_max_ms)
		rto = cfg->rto_max_ms;
	c->rto_ms = (uint32_t)rto;
}

void km_tcp_rtx_arm(struct km_tcp_conn *c)
{
	if (c->t_rtx == 0)
		c->t_rtx = c->ep->now + c->rto_ms;
}

void km_tcp_keep_arm(struct km_tcp_conn *c)
{
	const struct km_tcp_config *cfg = &c->ep->cfg;

	if (cfg->keepalive_idle_ms == 0 ||
	    (c->state != KM_TCP_ESTABLISHED && c->state != KM_TCP_CLOSE_WAIT))
		return;
	c->keep_probes = 0;
	c->t_keep = c->ep->now + cfg->keepalive_idle_ms;
}

/* RFC 6298 5.5: "The host MUST set RTO <- RTO * 2 ("back off the
 * timer")", with the maximum of 2.5 applied. */
static void backoff(struct km_tcp_conn *c)
{
	uint64_t rto = (uint64_t)c->rto_ms * 2;

	c->rto_ms = rto > c->ep->cfg.rto_max_ms ?
		    c->ep->cfg.rto_max_ms : (uint32_t)rto;
}

/* Our SYN, or SYN-ACK, went unanswered. */
static void syn_timeout(struct km_tcp_conn *c)
{
	if (c->rtx_count >= c->ep->cfg.syn_retries) {
		km_tcp_conn_end(c, (c->flags & CF_ARP_SEEN) ?
				-ETIMEDOUT : -EHOSTUNREACH);
		return;
	}
	c->rtx_count++;
	backoff(c);
	/* Karn: an answer to a repeated SYN says nothing of the RTT. */
	c->flags = (c->flags | CF_SYN_RTX) & ~CF_RTT;
	CONN_COUNT(c, rto_expiries, 1);
	CONN_COUNT(c, retransmits, 1);
	km_tcp_send_syn(c);
}

/* RFC 6298 5.4-5.6 and RFC 5681 3.1 (ssthresh = max(FlightSize/2,
 * 2*SMSS), cwnd = 1 segment): go back to snd_una and send again. With the
 * peer's window shut this is the persist timer, and the segment a probe. */
static void rtx_timeout(struct km_tcp_conn *c)
{
	uint32_t flight = c->snd_max - c->snd_una;

	if (flight == 0 && c->snd_len == 0)
		return;
	if (flight == 0 && c->snd_wnd > 0) {
		km_tcp_output(c);
		return;
	}
	if (c->rtx_count >= c->ep->cfg.retries) {
		km_tcp_send_rst(c);
		km_tcp_conn_end(c, -ETIMEDOUT);
		return;
	}
	c->rtx_count++;
	backoff(c);
	c->flags &= ~CF_RTT;
	if (c->snd_wnd == 0 && c->snd_len > 0) {
		km_tcp_send_probe(c);
		km_tcp_rtx_arm(c);
		return;
	}
	CONN_COUNT(c, rto_expiries, 1);
	c->ssthresh = flight / 2 > 2u * c->snd_mss ?
		      flight / 2 : 2u * c->snd_mss;
	c->cwnd = c->snd_mss;
	c->dupacks = 0;
	/* RFC 6582 3.2: a timeout ends fast recovery. */
	c->flags &= ~CF_RECOVERY;
	c->snd_nxt = c->snd_una;
	km_tcp_output(c);
}

static void state_timeout(struct km_tcp_conn *c)
{
	if (c->state == KM_TCP_TIME_WAIT) {
		c->state = KM_TCP_CLOSED;
		km_tcp_conn_end(c, 0);
		return;
	}
	/* The graceful close waited close_timeout_ms for the peer. */
	km_tcp_send_rst(c);
	km_tcp_conn_end(c, -ETIMEDOUT);
}

static void keep_timeout(struct km_tcp_conn *c)
{
	const struct km_tcp_config *cfg = &c->ep->cfg;

	if (c->state != KM_TCP_ESTABLISHED && c->state != KM_TCP_CLOSE_WAIT)
		return;
	/* Data in flight has its own timer; probe only an idle line. */
	if (c->snd_una != c->snd_max) {
		c->t_keep = c->ep->now + cfg->keepalive_idle_ms;
		return;
	}
	if (c->keep_probes >= cfg->keepalive_probes) {
		km_tcp_send_rst(c);
		km_tcp_conn_end(c, -ETIMEDOUT);
		return;
	}
	c->keep_probes++;
	km_tcp_send_keepalive(c);
	c->t_keep = c->ep->now + cfg->keepalive_intvl_ms;
}

static bool due(uint64_t t, uint64_t now)
{
	return t != 0 && now >= t;
}

int km_tcp_timers_run(struct km_tcp_conn *c)
{
	uint64_t now = c->ep->now;
	int n = 0;

	if (due(c->t_state, now)) {
		c->t_state = 0;
		n++;
		state_timeout(c);
	}
	if (c->state != KM_TCP_CLOSED && due(c->t_rtx, now)) {
		c->t_rtx = 0;
		n++;
		if (state_opening(c->state))
			syn_timeout(c);
		else
			rtx_timeout(c);
	}
	if (c->state != KM_TCP_CLOSED && due(c->t_delack, now)) {
		c->t_delack = 0;
		n++;
		if (c->rcv_nxt != c->rcv_acked)
			km_tcp_send_ack(c);
	}
	if (c->state != KM_TCP_CLOSED && due(c->t_keep, now)) {
		c->t_keep = 0;
		n++;
		keep_timeout(c);
	}
	return n;
}

uint64_t km_tcp_conn_next_timer(const struct km_tcp_conn *c)
{
	const uint64_t t[4] = { c->t_rtx, c->t_delack, c->t_keep, c->t_state };
	uint64_t m = UINT64_MAX;

	if (c->state == KM_TCP_CLOSED)
		return m;
	for (int i = 0; i < 4; i++)
		if (t[i] != 0 && t[i] < m)
			m = t[i];
	return m;
}
