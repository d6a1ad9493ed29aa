/* Receive text: in-order payload to the pending-delivery list, the rest to
 * a bounded out-of-order queue; both keep the received buffers by
 * reference. Also the receive window, the ACK policy and the delivery of
 * events at the burst end.
 *
 * Buffer accounting. Each buffer id is FREE (the port's), OOO (in a
 * queue), PEND (in order, not delivered yet) or USER (delivered). rx_held
 * counts the payload bytes of PEND and USER buffers: the advertised window
 * is rcv_buf_bytes - rx_held. Out-of-order bytes are not counted: they lie
 * inside a window already advertised, which that window already paid for.
 *
 * The out-of-order queue is sorted by sequence and its pieces are disjoint.
 * A new piece that covers queued ones replaces them; one that a queued
 * piece covers is a duplicate; partial overlaps are trimmed off the new
 * piece. Pieces are never split (one buffer, one piece), so "merging" is
 * logical: adjacent pieces simply drain together when the gap fills.
 */
#include <errno.h>
#include <string.h>

#include "common/km_assert.h"
#include "dataplane/net/tcp/tcp_pvt.h"
#include "dataplane/net/tcp/wire.h"

/* ---- buffer states ------------------------------------------------------- */

static void buf_set(struct km_tcp_conn *c, uint32_t id, uint32_t state,
		    uint32_t bytes)
{
	struct tcp_buf *b = &c->ep->bufs[id];

	b->slot = c->slot;
	b->gen = c->gen;
	b->state = state;
	b->bytes = bytes;
}

static void piece_to_ooo(struct km_tcp_conn *c, const struct tcp_piece *p)
{
	KM_ASSERT_HOT(c->ep->bufs[p->buf_id].state == BUF_FREE);
	buf_set(c, p->buf_id, BUF_OOO, 0);
	c->ep->st.bufs_queued++;
}

/* A piece leaves the queue (or never entered it) without delivery. */
static void piece_drop(struct km_tcp_conn *c, const struct tcp_piece *p,
		       bool queued)
{
	if (queued) {
		KM_ASSERT_HOT(c->ep->bufs[p->buf_id].state == BUF_OOO);
		c->ep->bufs[p->buf_id].state = BUF_FREE;
		c->ep->st.bufs_queued--;
	}
	km_tcp_buf_put(c->ep, p->buf_id);
}

static void pend_push(struct km_tcp_conn *c, const struct tcp_piece *p,
		      bool queued)
{
	KM_ASSERT(c->pend_n < c->ep->pend_max);
	c->pend_iov[c->pend_n].iov_base = p->base;
	c->pend_iov[c->pend_n].iov_len = p->len;
	c->pend_ids[c->pend_n++] = p->buf_id;
	if (!queued) {
		KM_ASSERT_HOT(c->ep->bufs[p->buf_id].state == BUF_FREE);
		c->ep->st.bufs_queued++;
	}
	buf_set(c, p->buf_id, BUF_PEND, p->len);
	c->rx_held += p->len;
	c->rcv_nxt += p->len;
}

void km_tcp_pieces_free(struct km_tcp_ep *ep, struct tcp_seg *s)
{
	for (uint32_t i = 0; i < s->n; i++)
		km_tcp_buf_put(ep, s->p[i].buf_id);
	s->n = 0;
}

void km_tcp_rx_drop_all(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;

	for (uint32_t i = 0; i < c->ooo_n; i++)
		piece_drop(c, &c->ooo[i], true);
	for (uint32_t i = 0; i < c->pend_n; i++) {
		ep->bufs[c->pend_ids[i]].state = BUF_FREE;
		ep->st.bufs_queued--;
		c->rx_held -= (uint32_t)c->pend_iov[i].iov_len;
		km_tcp_buf_put(ep, c->pend_ids[i]);
	}
	c->ooo_n = c->ooo_bytes = 0;
	c->pend_n = 0;
	c->flags &= ~CF_FIN_OOO;
}

/* ---- out-of-order queue ------------------------------------------------ */

static uint32_t piece_end(const struct tcp_piece *p)
{
	return p->seq + p->len;
}

static void ooo_remove(struct km_tcp_conn *c, uint32_t i)
{
	c->ooo_bytes -= c->ooo[i].len;
	memmove(&c->ooo[i], &c->ooo[i + 1],
		(c->ooo_n - i - 1) * sizeof(c->ooo[0]));
	c->ooo_n--;
}

/* Where p goes, after trimming p against its neighbours and dropping the
 * queued pieces p covers. false: nothing of p is new. */
static bool ooo_place(struct km_tcp_conn *c, struct tcp_piece *p,
		      uint32_t *at)
{
	uint32_t i = 0;

	while (i < c->ooo_n && seq_le(piece_end(&c->ooo[i]), p->seq))
		i++;
	if (i < c->ooo_n && seq_le(c->ooo[i].seq, p->seq)) {
		uint32_t e = piece_end(&c->ooo[i]);

		if (seq_ge(e, piece_end(p)))
			return false;
		p->base += e - p->seq;
		p->len -= e - p->seq;
		p->seq = e;
		i++;
	}
	while (i < c->ooo_n && seq_le(piece_end(&c->ooo[i]), piece_end(p))) {
		CONN_COUNT(c, dup_bytes, c->ooo[i].len);
		piece_drop(c, &c->ooo[i], true);
		ooo_remove(c, i);
	}
	if (i < c->ooo_n && seq_lt(c->ooo[i].seq, piece_end(p)))
		p->len = c->ooo[i].seq - p->seq;
	*at = i;
	return p->len > 0;
}

static void ooo_insert(struct km_tcp_conn *c, struct tcp_piece *p)
{
	uint32_t at, len0 = p->len;

	if (!ooo_place(c, p, &at)) {
		CONN_COUNT(c, dup_bytes, len0);
		km_tcp_buf_put(c->ep, p->buf_id);
		return;
	}
	CONN_COUNT(c, dup_bytes, len0 - p->len);
	if (c->ooo_n == c->ep->cfg.ooo_max) {
		/* Full. With SACK the newcomer goes: what we reported must
		 * stay (no reneging, RFC 2018 8). Without, keep what is
		 * nearest the gap: it is needed first. */
		conn_drop(c, KM_TCP_DROP_OOO_FULL);
		if (at == c->ooo_n || (c->flags & CF_SACK)) {
			km_tcp_buf_put(c->ep, p->buf_id);
			return;
		}
		piece_drop(c, &c->ooo[c->ooo_n - 1], true);
		ooo_remove(c, c->ooo_n - 1);
	}
	memmove(&c->ooo[at + 1], &c->ooo[at],
		(c->ooo_n - at) * sizeof(c->ooo[0]));
	c->ooo[at] = *p;
	c->ooo_n++;
	c->ooo_bytes += p->len;
	c->sack_recent = p->seq;
	piece_to_ooo(c, p);
	CONN_COUNT(c, ooo_segs, 1);
}

/* The gap before the queue's head closed: move what is now in order. */
static void ooo_drain(struct km_tcp_conn *c)
{
	while (c->ooo_n > 0 && seq_le(c->ooo[0].seq, c->rcv_nxt)) {
		struct tcp_piece p = c->ooo[0];

		ooo_remove(c, 0);
		if (seq_le(piece_end(&p), c->rcv_nxt)) {
			CONN_COUNT(c, dup_bytes, p.len);
			piece_drop(c, &p, true);
			continue;
		}
		p.base += c->rcv_nxt - p.seq;
		p.len -= c->rcv_nxt - p.seq;
		p.seq = c->rcv_nxt;
		pend_push(c, &p, true);
	}
	/* RFC 5681 4.2: ACK at once when a segment fills a gap. */
	c->flags |= CF_ACK_NOW;
	if ((c->flags & CF_FIN_OOO) && c->rcv_nxt == c->fin_seq)
		km_tcp_fin_received(c);
}

/* Contiguous queued data from piece *i on, as a SACK block [start, end);
 * *i moves past it. */
static void next_block(const struct km_tcp_conn *c, uint32_t *i,
		       uint32_t *start, uint32_t *end)
{
	*start = c->ooo[*i].seq;
	*end = piece_end(&c->ooo[*i]);
	while (++*i < c->ooo_n && c->ooo[*i].seq == *end)
		*end = piece_end(&c->ooo[*i]);
}

/* RFC 2018 4: "The first SACK block ... MUST specify the contiguous block
 * of data containing the segment which triggered this ACK"; the others
 * follow from the lowest up, so the holes nearest snd_una are described. */
uint32_t km_tcp_sack_blocks(const struct km_tcp_conn *c, uint32_t *blk)
{
	uint32_t n = 1, i = 0, a, b, ra = 0, rb = 0;

	while (i < c->ooo_n) {
		next_block(c, &i, &a, &b);
		if (seq_le(a, c->sack_recent) && seq_lt(c->sack_recent, b)) {
			ra = a;
			rb = b;
		}
	}
	if (ra == rb)
		n = 0;
	blk[0] = ra;
	blk[1] = rb;
	for (i = 0; i < c->ooo_n && n < TCP_SACK_BLOCKS_MAX;) {
		next_block(c, &i, &a, &b);
		if (a == ra && b == rb)
			continue;
		blk[2 * n] = a;
		blk[2 * n + 1] = b;
		n++;
	}
	return n;
}

/* ---- text ---------------------------------------------------------------- */

/* One piece: trim to [rcv_nxt, rcv_adv), then deliver or queue it.
 * Returns true if it went to the out-of-order queue. */
static bool rx_piece(struct km_tcp_conn *c, struct tcp_piece p)
{
	uint32_t right = c->rcv_adv;

	if (seq_ge(p.seq, right)) {
		CONN_COUNT(c, beyond_window, p.len);
		c->flags |= CF_ACK_NOW;
		km_tcp_buf_put(c->ep, p.buf_id);
		return false;
	}
	if (seq_gt(piece_end(&p), right)) {
		CONN_COUNT(c, beyond_window, piece_end(&p) - right);
		c->flags |= CF_ACK_NOW;
		p.len = right - p.seq;
	}
	if (seq_le(piece_end(&p), c->rcv_nxt)) {
		CONN_COUNT(c, dup_bytes, p.len);
		c->flags |= CF_ACK_NOW;
		km_tcp_buf_put(c->ep, p.buf_id);
		return false;
	}
	if (seq_lt(p.seq, c->rcv_nxt)) {
		uint32_t d = c->rcv_nxt - p.seq;

		CONN_COUNT(c, dup_bytes, d);
		p.base += d;
		p.len -= d;
		p.seq = c->rcv_nxt;
	}
	if (p.seq != c->rcv_nxt) {
		ooo_insert(c, &p);
		return true;
	}
	pend_push(c, &p, false);
	if (c->ooo_n > 0)
		ooo_drain(c);
	return false;
}

void km_tcp_rx_text(struct km_tcp_conn *c, struct tcp_seg *s, uint32_t seq)
{
	bool ooo = false;

	KM_ASSERT_HOT(s->n == 0 || s->p[0].seq == seq);
	(void)seq;
	for (uint32_t i = 0; i < s->n; i++)
		ooo |= rx_piece(c, s->p[i]);
	s->n = 0;
	/* RFC 5681 4.2: "a TCP receiver SHOULD send an immediate duplicate
	 * ACK when an out-of-order segment arrives", one per segment, so the
	 * sender's fast retransmit sees them. */
	if (ooo)
		km_tcp_send_ack(c);
}

void km_tcp_fin_received(struct km_tcp_conn *c)
{
	c->rcv_nxt++;
	c->flags = (c->flags & ~CF_FIN_OOO) | CF_ACK_NOW;
	c->ev |= EV_PEER_FIN;
	c->t_keep = 0;
	switch (c->state) {
	case KM_TCP_ESTABLISHED:
		c->state = KM_TCP_CLOSE_WAIT;
		break;
	case KM_TCP_FIN_WAIT_1:
		c->state = KM_TCP_CLOSING;
		break;
	case KM_TCP_FIN_WAIT_2:
		km_tcp_enter_time_wait(c);
		break;
	default:
		KM_ASSERT(!"FIN in a state without receive");
	}
}

/* RFC 9293 3.10.7.4 eighth step, for a FIN that follows all its data. A
 * FIN past a gap is remembered and taken when the gap fills. */
void km_tcp_rx_fin_check(struct km_tcp_conn *c, struct tcp_seg *s, uint32_t seq)
{
	uint32_t fin_seq = seq + s->len;

	if (!(s->flags & TCP_FIN))
		return;
	if (c->state != KM_TCP_ESTABLISHED && c->state != KM_TCP_FIN_WAIT_1 &&
	    c->state != KM_TCP_FIN_WAIT_2)
		return;
	if (seq_gt(fin_seq, c->rcv_adv))
		return;
	if (fin_seq == c->rcv_nxt) {
		km_tcp_fin_received(c);
	} else if (seq_gt(fin_seq, c->rcv_nxt)) {
		c->flags |= CF_FIN_OOO;
		c->fin_seq = fin_seq;
	}
}

/* ---- window and ACKs ----------------------------------------------------- */

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

/* The receiver's "full-sized segment" (RFC 1122 4.2.3.2, 4.2.3.3) is the
 * peer's: its MSS bounded by ours, which snd_mss already is. On a jumbo
 * MTU talking to a 1500-byte peer, ours would be six of its segments. */
static uint32_t peer_mss(const struct km_tcp_conn *c)
{
	return c->snd_mss;
}

static uint32_t rx_avail(const struct km_tcp_conn *c)
{
	uint32_t buf = c->ep->cfg.rcv_buf_bytes;

	return buf > c->rx_held ? buf - c->rx_held : 0;
}

/* The window field for the next segment, and the new right edge. The
 * edge never moves left (RFC 9293 3.8.6: "shrinking the window ... is
 * strongly discouraged"); it moves right only by at least
 * min(rcv_buf/2, MSS) (receiver SWS avoidance, 3.8.6.2.2); the field is
 * rounded down to the scale, so the edge never passes the buffer. */
uint32_t km_tcp_rcv_window(struct km_tcp_conn *c)
{
	uint32_t buf = c->ep->cfg.rcv_buf_bytes;
	uint32_t cur = seq_gt(c->rcv_adv, c->rcv_nxt) ?
		       c->rcv_adv - c->rcv_nxt : 0;
	uint32_t wnd = rx_avail(c), field, edge;

	if (wnd > cur && wnd - cur < min_u32(buf / 2, peer_mss(c)))
		wnd = cur;
	if (wnd < cur)
		wnd = cur;
	field = min_u32(wnd >> c->rcv_shift, 65535);
	edge = c->rcv_nxt + (field << c->rcv_shift);
	if (seq_gt(edge, c->rcv_adv))
		c->rcv_adv = edge;
	return field;
}

/* The consumer released buffers: tell the peer if the window grew by a
 * quarter of the buffer, or opened by two segments from nearly shut. */
void km_tcp_rx_released(struct km_tcp_conn *c)
{
	uint32_t buf = c->ep->cfg.rcv_buf_bytes, mss = peer_mss(c);
	uint32_t cur, avail = rx_avail(c);

	if (c->state != KM_TCP_ESTABLISHED && c->state != KM_TCP_FIN_WAIT_1 &&
	    c->state != KM_TCP_FIN_WAIT_2)
		return;
	cur = seq_gt(c->rcv_adv, c->rcv_nxt) ? c->rcv_adv - c->rcv_nxt : 0;
	if (avail <= cur)
		return;
	if (avail - cur >= buf / 4 || (cur < 2 * mss && avail - cur >= 2 * mss))
		km_tcp_send_ack(c);
}

/* One ACK per burst: now if asked for or two of the peer's full segments
 * are unacked, else after delack_ms. */
void km_tcp_rx_ack_decide(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;

	if (c->flags & CF_ACK_NOW ||
	    c->rcv_nxt - c->rcv_acked >= 2u * peer_mss(c) ||
	    (c->rcv_nxt != c->rcv_acked && ep->cfg.delack_ms == 0)) {
		km_tcp_send_ack(c);
		return;
	}
	if (c->rcv_nxt != c->rcv_acked && c->t_delack == 0)
		c->t_delack = ep->now + ep->cfg.delack_ms;
}

/* ---- delivery ------------------------------------------------------------ */

static void deliver_pending(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;
	struct km_chain ch = { c->pend_iov, c->pend_n };

	/* The consumer owns these from the call on, so the list is empty
	 * before it runs (it may release, send, close or abort). */
	c->pend_n = 0;
	for (uint32_t i = 0; i < ch.n_iov; i++)
		ep->bufs[c->pend_ids[i]].state = BUF_USER;
	ep->st.bufs_queued -= ch.n_iov;
	ep->st.bufs_user += ch.n_iov;
	if (ep->ops->deliver)
		ep->ops->deliver(ep->ctx, c, &ch, c->pend_ids);
	else
		km_tcp_release(ep, c->pend_ids, ch.n_iov);
}

static bool aborted(const struct km_tcp_conn *c)
{
	return (c->flags & CF_ABORTED) != 0;
}

static void event(struct km_tcp_conn *c, enum km_tcp_event ev, int res)
{
	if (c->ep->ops->event)
		c->ep->ops->event(c->ep->ctx, c, ev, res);
}

void km_tcp_rx_flush(struct km_tcp_conn *c)
{
	if (aborted(c))
		return;
	if (c->ev & EV_CONNECTED) {
		c->ev &= ~EV_CONNECTED;
		event(c, KM_TCP_EV_CONNECTED, 0);
		if (aborted(c))
			return;
	}
	if (c->ev & EV_ACCEPTED) {
		c->ev &= ~EV_ACCEPTED;
		c->ep->ops->accept(c->ep->ctx, c);
		if (aborted(c))
			return;
	}
	if (c->pend_n > 0) {
		deliver_pending(c);
		if (aborted(c))
			return;
	}
	if (c->acked_unreported > 0) {
		int n = (int)c->acked_unreported;

		c->acked_unreported = 0;
		event(c, KM_TCP_EV_SENT, n);
		if (aborted(c))
			return;
	}
	if (c->ev & EV_PEER_FIN) {
		c->ev &= ~EV_PEER_FIN;
		event(c, KM_TCP_EV_PEER_FIN, 0);
	}
}

/* Before a frame for c: room for its pieces plus everything the queue
 * could drain, or deliver what is pending now. */
void km_tcp_rx_prepare(struct km_tcp_conn *c, uint32_t n_pieces)
{
	if (c->ep->pend_max - c->pend_n < n_pieces + c->ooo_n)
		km_tcp_rx_flush(c);
}
