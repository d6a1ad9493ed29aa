/* Passive open: listening ports, the lookup of passive connections by
 * 4-tuple, and the SYN that opens one (RFC 9293 3.10.7.2, LISTEN).
 *
 * A SYN to a listening port takes a free slot at once and answers with a
 * SYN-ACK (km_tcp_send_syn() in SYN-RECEIVED); the slot is the half-open
 * connection's whole state, so half-open connections are bounded by the
 * free slots and need no queue of their own. With none free the SYN is
 * dropped: the peer's retransmission may find one. The rest of the
 * handshake is tcp_input.c's (SYN-RECEIVED).
 */
#include <errno.h>

#include "common/km_assert.h"
#include "dataplane/net/tcp/tcp_pvt.h"
#include "dataplane/net/tcp/wire.h"

/* ---- listening ports ----------------------------------------------------- */

static int listen_index(const struct km_tcp_ep *ep, uint16_t port)
{
	for (uint32_t i = 0; i < ep->listen_n; i++)
		if (ep->listen_ports[i] == port)
			return (int)i;
	return -1;
}

bool km_tcp_listening(const struct km_tcp_ep *ep, uint16_t port)
{
	return listen_index(ep, port) >= 0;
}

int km_tcp_listen(struct km_tcp_ep *ep, uint16_t port)
{
	/* The ephemeral range maps ports to slots (tcp.c): a listening port
	 * inside it could share a 4-tuple with an active connection. */
	if (port == 0 || ep->ops->accept == NULL ||
	    (port >= ep->cfg.port_min && port <= ep->cfg.port_max))
		return -EINVAL;
	if (km_tcp_listening(ep, port))
		return -EADDRINUSE;
	if (ep->listen_n == KM_TCP_LISTEN_MAX)
		return -ENOBUFS;
	ep->listen_ports[ep->listen_n++] = port;
	return 0;
}

int km_tcp_unlisten(struct km_tcp_ep *ep, uint16_t port)
{
	int i = listen_index(ep, port);

	if (i < 0)
		return -ENOENT;
	ep->listen_ports[i] = ep->listen_ports[--ep->listen_n];
	ep->now = ep->ops->now_ms(ep->ctx);
	/* Half-open connections have no consumer yet: nobody else would
	 * end them. They go at the next burst end or poll (km_tcp_reap()). */
	for (uint32_t k = 0; k < ep->cfg.conns_max; k++) {
		struct km_tcp_conn *c = &ep->conns[k];

		if (c->state != KM_TCP_SYN_RCVD || c->lport != port ||
		    (c->flags & CF_REAP))
			continue;
		km_tcp_send_rst(c);
		km_tcp_conn_end(c, -ECONNABORTED);
	}
	return 0;
}

/* ---- lookup by 4-tuple --------------------------------------------------- */

static uint32_t tuple_hash(const struct km_tcp_ep *ep, uint32_t rip,
			   uint16_t rport, uint16_t lport)
{
	/* Keyed, so that a peer cannot aim every connection at one bucket;
	 * a bucket's list is bounded by conns_max all the same. */
	uint64_t x = ep->cfg.isn_secret ^
		     ((uint64_t)rip << 32 | (uint32_t)rport << 16 | lport);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x & ep->hash_mask;
}

struct km_tcp_conn *km_tcp_hash_find(struct km_tcp_ep *ep, uint32_t rip,
				  uint16_t rport, uint16_t lport)
{
	struct km_tcp_conn *c = ep->hash[tuple_hash(ep, rip, rport, lport)];

	while (c != NULL &&
	       (c->rip != rip || c->rport != rport || c->lport != lport))
		c = c->hash_next;
	return c;
}

static void hash_insert(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;
	uint32_t b = tuple_hash(ep, c->rip, c->rport, c->lport);

	c->hash_next = ep->hash[b];
	ep->hash[b] = c;
}

void km_tcp_hash_remove(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;
	struct km_tcp_conn **pp = &ep->hash[tuple_hash(ep, c->rip, c->rport,
						       c->lport)];

	while (*pp != NULL && *pp != c)
		pp = &(*pp)->hash_next;
	KM_ASSERT(*pp == c);
	*pp = c->hash_next;
	c->hash_next = NULL;
}

/* ---- the opening SYN ----------------------------------------------------- */

/* SYN-RECEIVED from the peer's SYN: its sequence, its options, our right
 * edge. Like our own SYN's, the SYN-ACK's window is never scaled (RFC 7323
 * 2.2), so the first edge is at most 65535 bytes out. */
static void passive_start(struct km_tcp_conn *c, const struct tcp_seg *s)
{
	struct km_tcp_ep *ep = c->ep;
	uint32_t syn_wnd = ep->cfg.rcv_buf_bytes > 65535 ?
			   65535 : ep->cfg.rcv_buf_bytes;

	km_tcp_conn_start(c, s->src_ip, s->sport, s->dport);
	c->state = KM_TCP_SYN_RCVD;
	c->flags |= CF_PASSIVE;
	c->irs = s->seq;
	c->rcv_nxt = s->seq + 1;
	c->rcv_acked = c->rcv_nxt;
	c->rcv_adv = c->rcv_nxt + syn_wnd;
	km_tcp_syn_options(c, s);
	c->snd_wnd = c->max_snd_wnd = s->win;
	c->snd_wl1 = s->seq;
	c->snd_wl2 = c->iss;
	hash_insert(c);
}

/* RFC 9293 3.10.7.2: in LISTEN "an incoming RST segment could not be
 * valid ... it should be ignored"; "any acknowledgment is bad ... form a
 * reset segment <SEQ=SEG.ACK><CTL=RST>"; a SYN opens the connection. Text
 * on the SYN is dropped (the peer sends it again after our ACK). */
void km_tcp_listen_input(struct km_tcp_ep *ep, struct tcp_seg *s)
{
	struct km_tcp_conn *c;

	if ((s->flags & (TCP_RST | TCP_ACK)) || !(s->flags & TCP_SYN)) {
		ep->st.tcp.drops[KM_TCP_DROP_NO_CONN]++;
		km_tcp_reply_rst(ep, s);
		km_tcp_pieces_free(ep, s);
		return;
	}
	km_tcp_pieces_free(ep, s);
	if ((c = km_tcp_conn_take(ep)) == NULL) {
		ep->st.tcp.drops[KM_TCP_DROP_LISTEN_FULL]++;
		return;
	}
	passive_start(c, s);
	CONN_COUNT(c, pkts_in, 1);
	km_tcp_send_syn(c);
}
