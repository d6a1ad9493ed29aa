/* Endpoint set-up, connection slots and the calls a consumer makes.
 *
 * Slots. An active connection in slot i always uses local ports
 * port_min + i + k * conns_max, k advancing at each reuse, so an incoming
 * segment finds its connection from the destination port in O(1), and a
 * reused slot does not reuse the 4-tuple of its previous connection at
 * once. A passive connection's local port is its listening port, outside
 * that range, and is found by 4-tuple in a hash (tcp_listen.c).
 *
 * Ends. Whatever ends a connection calls km_tcp_conn_end(): it records the
 * reason and queues the connection on the reap list; km_tcp_reap() (from the
 * burst end and from km_tcp_poll()) reports it and frees the slot, so a
 * slot is never freed under a caller's feet, not even inside a callback.
 */
#include "dataplane/net/tcp/tcp.h"

#include <errno.h>
#include <string.h>

#include "common/km_assert.h"
#include "dataplane/net/tcp/tcp_pvt.h"
#include "dataplane/net/tcp/wire.h"

#define ALIGN64(x) (((x) + 63u) & ~(size_t)63u)
#define MTU_MIN 576u
#define MTU_MAX 9000u
#define RCV_BUF_MIN 4096u
#define RCV_BUF_MAX (65535u << TCP_WS_MAX)
#define SND_BUF_MIN 1024u
#define SND_BUF_MAX (64u << 20)
#define OOO_MAX 4096u
#define BUFS_MAX (1u << 24)
#define ARP_ENTRIES_MAX 4096u
/* Pending-delivery slots beyond the out-of-order queue's: room for a
 * burst's worth of frames before an early delivery is needed. */
#define PEND_EXTRA 64u
/* RFC 6928: an initial window of 10 segments. */
#define INIT_CWND_SEGS 10u

void km_tcp_config_default(struct km_tcp_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->netmask = 0xffffff00u;
	cfg->mtu = 1500;
	cfg->conns_max = 64;
	cfg->port_min = 32768;
	cfg->port_max = 60999;
	cfg->bufs_max = 8192;
	cfg->rcv_buf_bytes = 8u << 20;
	cfg->snd_buf_bytes = 64u << 10;
	cfg->ooo_max = 256;
	cfg->arp_entries = 64;
	cfg->arp_timeout_ms = 60000;
	cfg->arp_retry_ms = 1000;
	cfg->rto_init_ms = 1000;
	cfg->rto_min_ms = 200;
	cfg->rto_max_ms = 60000;
	cfg->syn_retries = 6;
	cfg->retries = 15;
	cfg->delack_ms = 10;
	cfg->time_wait_ms = 1000;
	cfg->close_timeout_ms = 10000;
	cfg->keepalive_intvl_ms = 1000;
	cfg->keepalive_probes = 5;
	cfg->challenge_acks_per_s = 100;
}

static bool mac_unicast(const uint8_t mac[6])
{
	static const uint8_t zero[6];

	return (mac[0] & 1) == 0 && memcmp(mac, zero, 6) != 0;
}

static bool ip_unicast(uint32_t ip)
{
	return ip != 0 && ip < 0xe0000000u;
}

static bool addr_ok(const struct km_tcp_config *c)
{
	uint32_t host = ~c->netmask;

	if (!mac_unicast(c->mac) || !ip_unicast(c->ip))
		return false;
	if ((host & (host + 1)) != 0)
		return false;
	if (c->gateway == 0)
		return true;
	return (c->gateway & c->netmask) == (c->ip & c->netmask) &&
	       c->gateway != c->ip && ip_unicast(c->gateway);
}

static bool sizes_ok(const struct km_tcp_config *c)
{
	if (c->mtu < MTU_MIN || c->mtu > MTU_MAX)
		return false;
	if (c->conns_max == 0 || c->conns_max > 65535 || c->port_min == 0)
		return false;
	if (c->port_max < c->port_min ||
	    (uint32_t)(c->port_max - c->port_min) + 1 < c->conns_max)
		return false;
	if (c->bufs_max == 0 || c->bufs_max > BUFS_MAX)
		return false;
	if (c->rcv_buf_bytes < RCV_BUF_MIN || c->rcv_buf_bytes > RCV_BUF_MAX)
		return false;
	if (c->snd_buf_bytes < SND_BUF_MIN || c->snd_buf_bytes > SND_BUF_MAX ||
	    (c->snd_buf_bytes & (c->snd_buf_bytes - 1)) != 0)
		return false;
	if (c->ooo_max == 0 || c->ooo_max > OOO_MAX)
		return false;
	return c->arp_entries != 0 && c->arp_entries <= ARP_ENTRIES_MAX;
}

static bool times_ok(const struct km_tcp_config *c)
{
	if (c->rto_min_ms == 0 || c->rto_min_ms > c->rto_init_ms ||
	    c->rto_init_ms > c->rto_max_ms)
		return false;
	if (c->arp_timeout_ms == 0 || c->arp_retry_ms == 0)
		return false;
	if (c->close_timeout_ms == 0 || c->challenge_acks_per_s == 0)
		return false;
	if (c->keepalive_idle_ms &&
	    (c->keepalive_intvl_ms == 0 || c->keepalive_probes == 0))
		return false;
	return (c->tx_csum_offload & ~(KM_TCP_TX_CSUM_IP | KM_TCP_TX_CSUM_TCP))
	       == 0;
}

struct layout {
	size_t conns, ring, ooo, pend_iov, pend_ids, bufs, hash, arp, total;
	uint32_t pend_max, hash_n;
};

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

static void layout(const struct km_tcp_config *c, struct layout *l)
{
	size_t n = c->conns_max;

	l->pend_max = c->ooo_max + PEND_EXTRA;
	l->conns = ALIGN64(sizeof(struct km_tcp_ep));
	l->ring = l->conns + ALIGN64(n * sizeof(struct km_tcp_conn));
	l->ooo = l->ring + n * ALIGN64(c->snd_buf_bytes);
	l->pend_iov = l->ooo +
		      n * ALIGN64(c->ooo_max * sizeof(struct tcp_piece));
	l->pend_ids = l->pend_iov +
		      n * ALIGN64(l->pend_max * sizeof(struct iovec));
	l->bufs = l->pend_ids + n * ALIGN64(l->pend_max * sizeof(uint32_t));
	l->hash_n = pow2_at_least(c->conns_max);
	l->hash = l->bufs +
		  ALIGN64((size_t)c->bufs_max * sizeof(struct tcp_buf));
	l->arp = l->hash + ALIGN64(l->hash_n * sizeof(struct km_tcp_conn *));
	l->total = l->arp + ALIGN64(km_arp_memsize(c->arp_entries));
}

ssize_t km_tcp_memsize(const struct km_tcp_config *cfg)
{
	struct layout l;

	if (!addr_ok(cfg) || !sizes_ok(cfg) || !times_ok(cfg))
		return -EINVAL;
	layout(cfg, &l);
	return (ssize_t)l.total;
}

/* RFC 7323 2.2: the smallest shift that expresses the whole buffer. */
static uint8_t wscale_for(uint32_t bytes)
{
	uint8_t s = 0;

	while (s < TCP_WS_MAX && (bytes >> s) > 65535u)
		s++;
	return s;
}

static void conns_init(struct km_tcp_ep *ep, uint8_t *mem,
		       const struct layout *l)
{
	const struct km_tcp_config *cfg = &ep->cfg;

	for (uint32_t i = cfg->conns_max; i-- > 0;) {
		struct km_tcp_conn *c = &ep->conns[i];

		c->ep = ep;
		c->slot = i;
		c->snd_ring = mem + l->ring + i * ALIGN64(cfg->snd_buf_bytes);
		c->snd_mask = cfg->snd_buf_bytes - 1;
		c->ooo = (struct tcp_piece *)(void *)(mem + l->ooo + i *
			ALIGN64(cfg->ooo_max * sizeof(struct tcp_piece)));
		c->pend_iov = (struct iovec *)(void *)(mem + l->pend_iov + i *
			ALIGN64(l->pend_max * sizeof(struct iovec)));
		c->pend_ids = (uint32_t *)(void *)(mem + l->pend_ids + i *
			ALIGN64(l->pend_max * sizeof(uint32_t)));
		c->free_next = ep->free_list;
		ep->free_list = c;
	}
}

int km_tcp_init(void *mem, size_t mem_bytes, const struct km_tcp_config *cfg,
		const struct km_tcp_ops *ops, void *ctx,
		struct km_tcp_ep **out)
{
	struct km_tcp_ep *ep = mem;
	ssize_t need = km_tcp_memsize(cfg);
	struct layout l;

	if (need < 0 || mem == NULL || mem_bytes < (size_t)need ||
	    ((uintptr_t)mem & 63u) != 0)
		return -EINVAL;
	if (ops == NULL || !ops->tx || !ops->now_ms || !ops->buf_free)
		return -EINVAL;
	layout(cfg, &l);
	memset(mem, 0, l.total);
	ep->cfg = *cfg;
	ep->ops = ops;
	ep->ctx = ctx;
	ep->pend_max = l.pend_max;
	ep->rcv_mss = (uint16_t)(cfg->mtu - IP_HDR_LEN - TCP_HDR_LEN);
	ep->rcv_shift = wscale_for(cfg->rcv_buf_bytes);
	ep->conns = (struct km_tcp_conn *)(void *)((uint8_t *)mem + l.conns);
	ep->bufs = (struct tcp_buf *)(void *)((uint8_t *)mem + l.bufs);
	ep->hash = (struct km_tcp_conn **)(void *)((uint8_t *)mem + l.hash);
	ep->hash_mask = l.hash_n - 1;
	conns_init(ep, mem, &l);
	KM_ASSERT(km_arp_init(&ep->arp, (uint8_t *)mem + l.arp,
			      cfg->arp_entries, cfg->arp_timeout_ms,
			      cfg->arp_retry_ms) == 0);
	ep->st.conns_max = cfg->conns_max;
	*out = ep;
	return 0;
}

/* ---- slots --------------------------------------------------------------- */

struct km_tcp_conn *km_tcp_lookup(struct km_tcp_ep *ep, uint32_t rip,
			       uint16_t rport, uint16_t lport)
{
	struct km_tcp_conn *c;

	if (lport < ep->cfg.port_min || lport > ep->cfg.port_max)
		return km_tcp_hash_find(ep, rip, rport, lport);
	c = &ep->conns[(uint32_t)(lport - ep->cfg.port_min) %
		       ep->cfg.conns_max];
	if (c->state == KM_TCP_CLOSED || c->lport != lport ||
	    c->rport != rport || c->rip != rip)
		return NULL;
	return c;
}

static uint16_t slot_port(struct km_tcp_conn *c)
{
	const struct km_tcp_config *cfg = &c->ep->cfg;
	uint32_t range = (uint32_t)(cfg->port_max - cfg->port_min) + 1;
	uint32_t ports = (range - 1 - c->slot) / cfg->conns_max + 1;
	uint32_t k = c->port_gen++ % ports;

	return (uint16_t)(cfg->port_min + c->slot + k * cfg->conns_max);
}

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* RFC 6528: ISN = M + F(localip, localport, remoteip, remoteport,
 * secretkey), M a 4-microsecond timer. F here is a keyed 64-bit mix, not
 * a cryptographic PRF: enough against blind guessing on a private link. */
static uint32_t isn_for(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;
	uint64_t h;

	if (ep->ops->isn)
		return ep->ops->isn(ep->ctx, ep->cfg.ip, c->lport, c->rip,
				    c->rport);
	h = mix64(ep->cfg.isn_secret ^ ((uint64_t)ep->cfg.ip << 32 | c->rip));
	h = mix64(h ^ ((uint64_t)c->lport << 16 | c->rport));
	return (uint32_t)h + (uint32_t)(ep->now * 250u);
}

static void conn_reset_vars(struct km_tcp_conn *c)
{
	uint32_t slot = c->slot, gen = c->gen, port_gen = c->port_gen;
	struct km_tcp_ep *ep = c->ep;
	uint8_t *ring = c->snd_ring;
	struct tcp_piece *ooo = c->ooo;
	struct iovec *pend_iov = c->pend_iov;
	uint32_t *pend_ids = c->pend_ids;

	memset(c, 0, sizeof(*c));
	c->ep = ep;
	c->slot = slot;
	c->gen = gen;
	c->port_gen = port_gen;
	c->snd_ring = ring;
	c->snd_mask = ep->cfg.snd_buf_bytes - 1;
	c->ooo = ooo;
	c->pend_iov = pend_iov;
	c->pend_ids = pend_ids;
}

/* A free slot, or NULL: the caller starts it at once. */
struct km_tcp_conn *km_tcp_conn_take(struct km_tcp_ep *ep)
{
	struct km_tcp_conn *c = ep->free_list;

	if (c != NULL)
		ep->free_list = c->free_next;
	return c;
}

/* Fresh variables for a connection to ip:port from lport (0: the slot's
 * next port); the state and the receive side are the caller's. */
void km_tcp_conn_start(struct km_tcp_conn *c, uint32_t ip, uint16_t port,
		    uint16_t lport)
{
	struct km_tcp_ep *ep = c->ep;
	uint32_t mask = ep->cfg.netmask;

	conn_reset_vars(c);
	c->rip = ip;
	c->rport = port;
	c->lport = lport ? lport : slot_port(c);
	c->nexthop = ep->cfg.gateway && (ip & mask) != (ep->cfg.ip & mask) ?
		     ep->cfg.gateway : ip;
	c->iss = isn_for(c);
	c->snd_una = c->snd_nxt = c->snd_max = c->iss;
	c->snd_mss = TCP_MSS_DEFAULT;
	c->rto_ms = ep->cfg.rto_init_ms;
	c->ssthresh = UINT32_MAX;
	c->cwnd = INIT_CWND_SEGS * ep->rcv_mss;
	ep->st.conns_used++;
}

int km_tcp_connect(struct km_tcp_ep *ep, uint32_t ip, uint16_t port,
		   void *user, struct km_tcp_conn **out)
{
	struct km_tcp_conn *c;

	if (!ip_unicast(ip) || ip == ep->cfg.ip || port == 0 ||
	    (ip | ep->cfg.netmask) == UINT32_MAX)
		return -EINVAL;
	if ((c = km_tcp_conn_take(ep)) == NULL)
		return -ENOBUFS;
	ep->now = ep->ops->now_ms(ep->ctx);
	km_tcp_conn_start(c, ip, port, 0);
	c->user = user;
	c->state = KM_TCP_SYN_SENT;
	km_tcp_send_syn(c);
	*out = c;
	return 0;
}

static void conn_free(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;

	km_tcp_rx_drop_all(c);
	if (c->flags & CF_PASSIVE)
		km_tcp_hash_remove(c);
	c->state = KM_TCP_CLOSED;
	c->gen++;
	c->free_next = ep->free_list;
	ep->free_list = c;
	KM_ASSERT(ep->st.conns_used > 0);
	ep->st.conns_used--;
}

void km_tcp_touch(struct km_tcp_conn *c)
{
	if (c->flags & CF_TOUCHED)
		return;
	c->flags |= CF_TOUCHED;
	c->touch_next = c->ep->touched;
	c->ep->touched = c;
}

void km_tcp_conn_end(struct km_tcp_conn *c, int reason)
{
	if (!(c->flags & CF_REPORTED) && !(c->flags & CF_REAP))
		c->end_reason = reason;
	if (c->state != KM_TCP_TIME_WAIT) {
		c->state = KM_TCP_CLOSED;
		c->t_rtx = c->t_delack = c->t_keep = c->t_state = 0;
	}
	if (c->flags & CF_REAP)
		return;
	c->flags |= CF_REAP;
	c->reap_next = c->ep->reap;
	c->ep->reap = c;
}

static void report_end(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;
	bool est = c->flags & CF_EST;

	c->flags |= CF_REPORTED;
	/* A half-open passive connection was never reported: none of its
	 * ends is the consumer's business. */
	if (!est && (c->flags & CF_PASSIVE)) {
		ep->st.accept_failures++;
		return;
	}
	if (est)
		ep->st.conns_closed++;
	else
		ep->st.connect_failures++;
	if (ep->ops->event)
		ep->ops->event(ep->ctx, c,
			       est ? KM_TCP_EV_CLOSED : KM_TCP_EV_CONNECTED,
			       c->end_reason);
}

int km_tcp_reap(struct km_tcp_ep *ep)
{
	int n = 0;

	/* Bounded: a connection is queued at most once per end, and a
	 * callback can end at most every other connection. */
	while (ep->reap != NULL) {
		struct km_tcp_conn *c = ep->reap;

		ep->reap = c->reap_next;
		c->flags &= ~CF_REAP;
		if (!(c->flags & CF_REPORTED)) {
			km_tcp_rx_flush(c);
			report_end(c);
			n++;
		}
		if (c->state == KM_TCP_CLOSED)
			conn_free(c);
	}
	return n;
}

/* ---- buffers ------------------------------------------------------------- */

void km_tcp_bufs_flush(struct km_tcp_ep *ep)
{
	if (ep->free_n == 0)
		return;
	ep->ops->buf_free(ep->ctx, ep->free_ids, ep->free_n);
	ep->free_n = 0;
}

void km_tcp_buf_put(struct km_tcp_ep *ep, uint32_t id)
{
	ep->free_ids[ep->free_n++] = id;
	if (ep->free_n == TCP_FREE_BATCH)
		km_tcp_bufs_flush(ep);
}

void km_tcp_release(struct km_tcp_ep *ep, const uint32_t *buf_ids,
		    uint32_t n)
{
	struct km_tcp_conn *wnd = NULL;

	ep->now = ep->ops->now_ms(ep->ctx);
	for (uint32_t i = 0; i < n; i++) {
		struct tcp_buf *b;
		struct km_tcp_conn *c;

		KM_ASSERT(buf_ids[i] < ep->cfg.bufs_max);
		b = &ep->bufs[buf_ids[i]];
		KM_ASSERT(b->state == BUF_USER);
		c = &ep->conns[b->slot];
		b->state = BUF_FREE;
		ep->st.bufs_user--;
		km_tcp_buf_put(ep, buf_ids[i]);
		if (c->gen != b->gen || c->state == KM_TCP_CLOSED)
			continue;
		KM_ASSERT(c->rx_held >= b->bytes);
		c->rx_held -= b->bytes;
		if (!(c->flags & CF_WND_CHECK)) {
			c->flags |= CF_WND_CHECK;
			c->wnd_next = wnd;
			wnd = c;
		}
	}
	/* One window decision per connection, not per buffer. */
	while (wnd != NULL) {
		struct km_tcp_conn *c = wnd;

		wnd = c->wnd_next;
		c->flags &= ~CF_WND_CHECK;
		km_tcp_rx_released(c);
	}
	km_tcp_bufs_flush(ep);
}

/* A next hop resolved: frames that found it missing go out now. */
void km_tcp_arp_resolved(struct km_tcp_ep *ep, uint32_t ip)
{
	for (uint32_t i = 0; i < ep->cfg.conns_max; i++) {
		struct km_tcp_conn *c = &ep->conns[i];

		if (c->state == KM_TCP_CLOSED || c->nexthop != ip ||
		    !(c->flags & CF_ARP_WAIT))
			continue;
		c->flags &= ~CF_ARP_WAIT;
		if (state_opening(c->state)) {
			km_tcp_send_syn(c);
			continue;
		}
		c->snd_nxt = c->snd_una;
		km_tcp_output(c);
	}
}

/* ---- user calls ---------------------------------------------------------- */

static uint32_t iov_total(const struct iovec *iov, uint32_t n)
{
	uint64_t t = 0;

	for (uint32_t i = 0; i < n; i++)
		t += iov[i].iov_len;
	return t > UINT32_MAX ? UINT32_MAX : (uint32_t)t;
}

static void ring_put(struct km_tcp_conn *c, const uint8_t *p, uint32_t n)
{
	uint32_t at = (c->snd_head + c->snd_len) & c->snd_mask;
	uint32_t first = c->snd_mask + 1 - at;

	if (first > n)
		first = n;
	memcpy(c->snd_ring + at, p, first);
	memcpy(c->snd_ring, p + first, n - first);
	c->snd_len += n;
}

uint32_t km_tcp_send_space(const struct km_tcp_conn *c)
{
	return c->snd_mask + 1 - c->snd_len;
}

ssize_t km_tcp_send(struct km_tcp_conn *c, const struct iovec *iov,
		    uint32_t n_iov)
{
	uint32_t total = iov_total(iov, n_iov), space, done = 0;

	if (c->state != KM_TCP_SYN_SENT && c->state != KM_TCP_ESTABLISHED &&
	    c->state != KM_TCP_CLOSE_WAIT)
		return -EPIPE;
	if (c->flags & (CF_FIN_QUEUED | CF_REAP))
		return -EPIPE;
	if (total == 0)
		return -EINVAL;
	space = km_tcp_send_space(c);
	if (space == 0)
		return -EAGAIN;
	for (uint32_t i = 0; i < n_iov && done < space; i++) {
		uint32_t n = (uint32_t)iov[i].iov_len;

		if (n > space - done)
			n = space - done;
		ring_put(c, iov[i].iov_base, n);
		done += n;
	}
	c->ep->now = c->ep->ops->now_ms(c->ep->ctx);
	if (c->state != KM_TCP_SYN_SENT)
		km_tcp_output(c);
	return done;
}

int km_tcp_close(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;

	if (c->flags & (CF_REAP | CF_REPORTED))
		return -EALREADY;
	ep->now = ep->ops->now_ms(ep->ctx);
	switch (c->state) {
	case KM_TCP_SYN_SENT:
		km_tcp_abort(c);
		return 0;
	case KM_TCP_ESTABLISHED:
		c->state = KM_TCP_FIN_WAIT_1;
		break;
	case KM_TCP_CLOSE_WAIT:
		c->state = KM_TCP_LAST_ACK;
		break;
	default:
		return -EALREADY;
	}
	c->flags |= CF_FIN_QUEUED | CF_CLOSE_TIMER;
	c->t_state = ep->now + ep->cfg.close_timeout_ms;
	c->t_keep = 0;
	km_tcp_output(c);
	return 0;
}

void km_tcp_abort(struct km_tcp_conn *c)
{
	struct km_tcp_ep *ep = c->ep;

	if (c->state == KM_TCP_CLOSED || c->state == KM_TCP_TIME_WAIT ||
	    (c->flags & (CF_REAP | CF_REPORTED)))
		return;
	ep->now = ep->ops->now_ms(ep->ctx);
	c->ev = 0;
	c->flags |= CF_ABORTED;
	km_tcp_rx_drop_all(c);
	km_tcp_send_rst(c);
	km_tcp_conn_end(c, -ECONNABORTED);
	km_tcp_bufs_flush(ep);
}

/* ---- burst end, poll ----------------------------------------------------- */

int km_tcp_input_burst_end(struct km_tcp_ep *ep)
{
	int n = 0;

	ep->now = ep->ops->now_ms(ep->ctx);
	while (ep->touched != NULL) {
		struct km_tcp_conn *c = ep->touched;

		ep->touched = c->touch_next;
		c->flags &= ~CF_TOUCHED;
		n++;
		km_tcp_rx_flush(c);
		/* SYN-RECEIVED's only ACK is its SYN-ACK's. */
		if (state_synced(c->state) && c->state != KM_TCP_SYN_RCVD)
			km_tcp_rx_ack_decide(c);
	}
	km_tcp_reap(ep);
	km_tcp_bufs_flush(ep);
	return n;
}

int km_tcp_poll(struct km_tcp_ep *ep)
{
	int n = 0;

	ep->now = ep->ops->now_ms(ep->ctx);
	for (uint32_t i = 0; i < ep->cfg.conns_max; i++)
		if (ep->conns[i].state != KM_TCP_CLOSED)
			n += km_tcp_timers_run(&ep->conns[i]);
	n += km_tcp_reap(ep);
	km_tcp_bufs_flush(ep);
	return n;
}

uint64_t km_tcp_next_timer_ms(const struct km_tcp_ep *ep)
{
	uint64_t t = UINT64_MAX;

	for (uint32_t i = 0; i < ep->cfg.conns_max; i++) {
		uint64_t ct = km_tcp_conn_next_timer(&ep->conns[i]);

		if (ct < t)
			t = ct;
	}
	return t;
}

/* ---- introspection ------------------------------------------------------- */

enum km_tcp_state km_tcp_conn_state(const struct km_tcp_conn *c)
{
	return c->state;
}

void *km_tcp_conn_user(const struct km_tcp_conn *c)
{
	return c->user;
}

void km_tcp_conn_set_user(struct km_tcp_conn *c, void *user)
{
	c->user = user;
}

void km_tcp_conn_get_info(const struct km_tcp_conn *c,
		      struct km_tcp_conn_info *o)
{
	memset(o, 0, sizeof(*o));
	o->state = c->state;
	o->local_ip = c->ep->cfg.ip;
	o->remote_ip = c->rip;
	o->local_port = c->lport;
	o->remote_port = c->rport;
	o->iss = c->iss;
	o->snd_una = c->snd_una;
	o->snd_nxt = c->snd_nxt;
	o->snd_max = c->snd_max;
	o->snd_wnd = c->snd_wnd;
	o->cwnd = c->cwnd;
	o->ssthresh = c->ssthresh;
	o->snd_mss = c->snd_mss;
	o->snd_wscale = c->snd_shift;
	o->rcv_wscale = c->rcv_shift;
	o->wscale_ok = c->flags & CF_WSCALE;
	o->irs = c->irs;
	o->rcv_nxt = c->rcv_nxt;
	o->rcv_wnd = state_synced(c->state) ? c->rcv_adv - c->rcv_nxt : 0;
	o->srtt_us = c->srtt_us;
	o->rttvar_us = c->rttvar_us;
	o->rto_ms = c->rto_ms;
	o->rtx_count = c->rtx_count;
	o->dupacks = c->dupacks;
	o->snd_queued = c->snd_len;
	o->rx_held = c->rx_held;
	o->ooo_pieces = c->ooo_n;
	o->ooo_bytes = c->ooo_bytes;
	o->keepalive_probes = c->keep_probes;
}

void km_tcp_conn_get_stats(const struct km_tcp_conn *c,
		       struct km_tcp_counters *out)
{
	*out = c->st;
}

void km_tcp_get_stats(const struct km_tcp_ep *ep, struct km_tcp_stats *out)
{
	*out = ep->st;
}

const char *km_tcp_state_name(enum km_tcp_state s)
{
	static const char *const names[] = {
		"CLOSED", "SYN-SENT", "ESTABLISHED", "FIN-WAIT-1",
		"FIN-WAIT-2", "CLOSING", "TIME-WAIT", "CLOSE-WAIT",
		"LAST-ACK", "SYN-RECEIVED",
	};

	if ((unsigned)s >= sizeof(names) / sizeof(names[0]))
		return "?";
	return names[s];
}

const char *km_tcp_drop_name(enum km_tcp_drop d)
{
	static const char *const names[KM_TCP_DROP_COUNT] = {
		"eth_short", "eth_dst", "eth_src", "eth_type", "frame_segs", "arp_bad",
		"arp_src", "ip_short", "ip_version", "ip_hlen", "ip_options",
		"ip_len", "ip_csum", "ip_frag", "ip_dst", "ip_src", "ip_proto",
		"tcp_short", "tcp_doff", "tcp_csum", "tcp_opts", "tcp_flags",
		"tcp_port", "no_conn", "state", "seq", "ack", "rst_window",
		"rst_challenge", "rst_timewait", "syn_challenge", "ooo_full",
		"listen_full",
	};

	if ((unsigned)d >= KM_TCP_DROP_COUNT)
		return "?";
	return names[d];
}
