/* The data path of the DPDK backend: receive bursts from this backend's
 * queue, software steering between queues (dnet_port.c explains when it
 * carries frames), transmit bursts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_arp.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_ring.h>
#include <rte_tcp.h>

#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/net/dpdk/dnet_pvt.h"

static inline uint32_t mbuf_id(struct rte_mbuf *m)
{
	return *(uint32_t *)rte_mbuf_to_priv(m);
}

/* ---- receive ------------------------------------------------------------ */

static uint32_t rx_flags(const struct rte_mbuf *m)
{
	uint64_t ip = m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK;
	uint64_t l4 = m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK;
	uint32_t f = 0;

	if (ip == RTE_MBUF_F_RX_IP_CKSUM_GOOD)
		f |= KM_TCP_RX_IP_CSUM_GOOD;
	else if (ip == RTE_MBUF_F_RX_IP_CKSUM_BAD)
		f |= KM_TCP_RX_IP_CSUM_BAD;
	if (l4 == RTE_MBUF_F_RX_L4_CKSUM_GOOD)
		f |= KM_TCP_RX_L4_CSUM_GOOD;
	else if (l4 == RTE_MBUF_F_RX_L4_CKSUM_BAD)
		f |= KM_TCP_RX_L4_CSUM_BAD;
	return f;
}

/* One frame to the endpoint: each mbuf segment is a chain segment with its
 * own buffer id; the endpoint owns them all from here (it frees what it
 * does not keep through km_dnet_buf_free). */
static void rx_frame(struct dnet *dn, struct rte_mbuf *m)
{
	struct iovec iov[KM_TCP_FRAME_SEGS_MAX];
	uint32_t ids[KM_TCP_FRAME_SEGS_MAX], n = 0;
	struct km_chain ch;

	dn->st.frames_in++;
	dn->st.frame_bytes_in += m->pkt_len;
	if (m->nb_segs > KM_TCP_FRAME_SEGS_MAX) {
		dn->st.frames_dropped++;
		rte_pktmbuf_free(m);
		return;
	}
	for (struct rte_mbuf *s = m; s != NULL; s = s->next, n++) {
		iov[n].iov_base = rte_pktmbuf_mtod(s, void *);
		iov[n].iov_len = s->data_len;
		ids[n] = mbuf_id(s);
		KM_ASSERT_HOT(ids[n] < dn->n_bufs);
	}
	ch.iov = iov;
	ch.n_iov = n;
	if (km_tcp_input(dn->ep, &ch, ids, dn->csum_rx ? rx_flags(m) : 0) < 0)
		dn->st.frames_dropped++;
}

/* ---- software steering -------------------------------------------------- */

enum { STEER_HERE = -1, STEER_ALL = -2 };

/* The queue a frame belongs to: that of the block its TCP destination port
 * is in, or the queue listening on it; ARP replies to every queue (each
 * endpoint keeps its own cache); anything else to whoever took it (an ARP
 * request is answered by any endpoint, a stray segment reset by any). Only
 * the first segment is read: drivers put the headers there. */
static int steer_target(const struct dport *dp, const struct rte_mbuf *m)
{
	const struct rte_ether_hdr *eth =
		rte_pktmbuf_mtod(m, const struct rte_ether_hdr *);
	const struct rte_ipv4_hdr *ip = (const void *)(eth + 1);
	const struct rte_arp_hdr *arp = (const void *)(eth + 1);
	const struct rte_tcp_hdr *tcp;
	uint32_t port;

	if (m->data_len < sizeof(*eth) + sizeof(*arp))
		return STEER_HERE;
	if (eth->ether_type == RTE_BE16(RTE_ETHER_TYPE_ARP))
		return arp->arp_opcode == RTE_BE16(RTE_ARP_OP_REPLY) ? STEER_ALL
								     : STEER_HERE;
	if (eth->ether_type != RTE_BE16(RTE_ETHER_TYPE_IPV4) ||
	    ip->next_proto_id != IPPROTO_TCP ||
	    m->data_len < sizeof(*eth) + rte_ipv4_hdr_len(ip) + sizeof(*tcp))
		return STEER_HERE;
	tcp = (const void *)((const uint8_t *)ip + rte_ipv4_hdr_len(ip));
	port = rte_be_to_cpu_16(tcp->dst_port);
	if (port < DNET_PORT_BASE) { /* a listening port's, or a stray */
		int q = km_dnet_port_listener(dp, (uint16_t)port);

		return q >= 0 ? q : STEER_HERE;
	}
	port = (port - DNET_PORT_BASE) / dp->port_span;
	return port < dp->n_queues ? (int)port : STEER_HERE;
}

/* A copy in the target queue's pool, since buffer ids are pool indexes
 * and the target's endpoint releases what it is given. */
static void steer_to(struct dnet *dn, const struct rte_mbuf *m, uint16_t q)
{
	struct dqueue *dq = &dn->dp->q[q];
	struct rte_mbuf *c = rte_pktmbuf_copy(m, dq->rx_pool, 0, UINT32_MAX);

	if (c != NULL && rte_ring_mp_enqueue(dq->steer, c) == 0) {
		dn->steer.out++;
		return;
	}
	rte_pktmbuf_free(c);
	dn->steer.drops++;
}

/* True if m went to other queues only. */
static bool steer(struct dnet *dn, struct rte_mbuf *m)
{
	const struct dport *dp = dn->dp;
	int t;

	if (dp->n_queues < 2)
		return false;
	t = steer_target(dp, m);
	if (t == STEER_HERE || t == dn->queue)
		return false;
	if (t != STEER_ALL) {
		steer_to(dn, m, (uint16_t)t);
		rte_pktmbuf_free(m);
		return true;
	}
	for (uint16_t q = 0; q < dp->n_queues; q++)
		if (q != dn->queue)
			steer_to(dn, m, q);
	return false;
}

/* Frames other queues passed to this one, as one more burst. */
static int rx_steered(struct dnet *dn)
{
	struct rte_mbuf *pkts[DNET_BURST];
	struct rte_ring *r = dn->dp->q[dn->queue].steer;
	unsigned n;

	if (r == NULL)
		return 0;
	n = rte_ring_sc_dequeue_burst(r, (void **)pkts, DNET_BURST, NULL);
	if (n == 0)
		return 0;
	for (unsigned i = 0; i < n; i++)
		rx_frame(dn, pkts[i]);
	km_tcp_input_burst_end(dn->ep);
	dn->steer.in += n;
	return (int)n;
}

/* To this queue's endpoint, or passed on to the queue it belongs to. */
static void rx_deliver(struct dnet *dn, struct rte_mbuf *m)
{
	if (!steer(dn, m))
		rx_frame(dn, m);
}

#ifdef KM_TEST_HOOKS
/* The test switch (dnet_pvt.h): true if it took m. */
static bool impair(struct dnet *dn, struct rte_mbuf *m)
{
	struct dnet_impair *im = &dn->imp;

	if (m->pkt_len <= 100)
		return false;
	im->seen++;
	if (im->drop_every != 0 && im->seen % im->drop_every == 0) {
		im->dropped++;
		rte_pktmbuf_free(m);
		return true;
	}
	if (im->swap_every != 0 && im->held == NULL &&
	    im->seen % im->swap_every == 0) {
		im->held = m;
		return true;
	}
	return false;
}

static void rx_release_held(struct dnet *dn)
{
	struct rte_mbuf *m = dn->imp.held;

	if (m == NULL)
		return;
	dn->imp.held = NULL;
	dn->imp.swapped++;
	rx_deliver(dn, m);
}

/* The test switch impairs what the port delivers, as a wire would,
 * before any steering. */
static void rx_one(struct dnet *dn, struct rte_mbuf *m)
{
	if ((dn->imp.drop_every | dn->imp.swap_every) == 0) {
		rx_deliver(dn, m);
		return;
	}
	if (impair(dn, m))
		return;
	rx_deliver(dn, m);
	rx_release_held(dn);
}

void km_dnet_impair_init(struct dnet *dn)
{
	const char *v = getenv("KMIRROR_TEST_DPDK_IMPAIR");
	const char *r = getenv("KMIRROR_TEST_DPDK_TX_REFUSE");
	unsigned drop = 0, swap = 0;

	if (r != NULL) {
		dn->imp.tx_refuse = (uint32_t)strtoul(r, NULL, 10);
		KM_WARN("dpdk", "test switch: the first %u transmit bursts take nothing",
			dn->imp.tx_refuse);
	}
	if (v == NULL)
		return;
	if (sscanf(v, "drop=%u,swap=%u", &drop, &swap) < 1)
		KM_WARN("dpdk", "KMIRROR_TEST_DPDK_IMPAIR=\"%s\": expected drop=N,swap=M", v);
	dn->imp.drop_every = drop;
	dn->imp.swap_every = swap;
	KM_WARN("dpdk", "test switch: dropping every %u-th and reordering every %u-th received data frame",
		drop, swap);
}
#else
/* A release build (no -Dtest_hooks) has no impairment switch. */
static void rx_one(struct dnet *dn, struct rte_mbuf *m)
{
	rx_deliver(dn, m);
}

static void rx_release_held(struct dnet *dn)
{
	(void)dn;
}

void km_dnet_impair_init(struct dnet *dn)
{
	(void)dn;
}
#endif

/* Up to DNET_RX_BURSTS_MAX bursts, one ACK decision per burst.
 * @return frames taken. */
int km_dnet_rx(struct dnet *dn)
{
	struct rte_mbuf *pkts[DNET_BURST];
	int total = 0;

	for (uint32_t b = 0; b < DNET_RX_BURSTS_MAX; b++) {
		uint16_t n = rte_eth_rx_burst(dn->port_id, dn->queue, pkts,
					      DNET_BURST);

		if (n == 0)
			break;
		/* The burst's mbuf headers and ids load while the first frames
		 * are parsed (bench-ring: +7% per core at MTU 1500). */
		for (uint16_t i = 0; i < n; i++) {
			rte_prefetch0(pkts[i]);
			rte_prefetch0(rte_mbuf_to_priv(pkts[i]));
		}
		for (uint16_t i = 0; i < n; i++)
			rx_one(dn, pkts[i]);
		rx_release_held(dn);
		km_tcp_input_burst_end(dn->ep);
		total += n;
		if (n < DNET_BURST)
			break;
	}
	return total + rx_steered(dn);
}

void km_dnet_rx_close(struct dnet *dn)
{
	if (dn->imp.held != NULL)
		rte_pktmbuf_free(dn->imp.held);
	dn->imp.held = NULL;
}

void km_dnet_buf_free(void *ctx, const uint32_t *ids, uint32_t n)
{
	struct dnet *dn = ctx;

	for (uint32_t i = 0; i < n; i++) {
		KM_ASSERT_HOT(ids[i] < dn->n_bufs);
		rte_pktmbuf_free_seg(dn->dq->by_id[ids[i]]);
	}
}

/* ---- transmit ----------------------------------------------------------- */

static uint16_t tx_burst(struct dnet *dn, struct rte_mbuf **pkts, uint16_t n)
{
#ifdef KM_TEST_HOOKS
	if (dn->imp.tx_refuse > 0) {
		dn->imp.tx_refuse--;
		return 0;
	}
#endif
	return rte_eth_tx_burst(dn->port_id, dn->queue, pkts, n);
}

void km_dnet_tx_flush(struct dnet *dn)
{
	uint16_t sent;

	if (dn->tx_n == 0)
		return;
	sent = tx_burst(dn, dn->tx_pkts, (uint16_t)dn->tx_n);
	/* Retry the tail once: a driver may take a burst in pieces. */
	if (sent > 0 && sent < dn->tx_n)
		sent += tx_burst(dn, dn->tx_pkts + sent,
				 (uint16_t)(dn->tx_n - sent));
	for (uint32_t i = 0; i < sent; i++)
		dn->st.frame_bytes_out += dn->tx_pkts[i]->pkt_len;
	dn->st.frames_out += sent;
	/* What the port did not take waits, in order, for the next flush, as
	 * a kernel's qdisc holds it: freed, a lost ACK or SYN cost the flow
	 * an RTO (1 s) when a link came up late or a napping peer left its
	 * ring full. km_dnet_tx drops only when all DNET_TX_PKTS_MAX wait. */
	if (sent > 0 && sent < dn->tx_n)
		memmove(dn->tx_pkts, dn->tx_pkts + sent,
			(dn->tx_n - sent) * sizeof(dn->tx_pkts[0]));
	dn->tx_n -= sent;
	dn->tx_stalled = dn->tx_n > 0 && sent == 0;
}

/* At the port's close: what never went is lost (STYLE 4: ours to free). */
void km_dnet_tx_discard(struct dnet *dn)
{
	for (uint32_t i = 0; i < dn->tx_n; i++) {
		rte_pktmbuf_free(dn->tx_pkts[i]);
		dn->st.tx_dropped++;
	}
	dn->tx_n = 0;
}

static void tx_offload(struct rte_mbuf *m, uint32_t flags)
{
	if (flags == 0)
		return;
	m->l2_len = RTE_ETHER_HDR_LEN;
	m->l3_len = sizeof(struct rte_ipv4_hdr);
	m->ol_flags |= RTE_MBUF_F_TX_IPV4;
	if (flags & KM_TCP_TX_CSUM_IP)
		m->ol_flags |= RTE_MBUF_F_TX_IP_CKSUM;
	if (flags & KM_TCP_TX_CSUM_TCP)
		m->ol_flags |= RTE_MBUF_F_TX_TCP_CKSUM;
}

/* The endpoint's ops->tx: copy the frame into one mbuf of the tx pool. */
int km_dnet_tx(void *ctx, const struct iovec *iov, uint32_t n_iov,
	    uint32_t flags)
{
	struct dnet *dn = ctx;
	struct rte_mbuf *m;
	size_t total = 0;
	char *p;

	for (uint32_t i = 0; i < n_iov; i++)
		total += iov[i].iov_len;
	if (total > (size_t)dn->dp->dataroom - RTE_PKTMBUF_HEADROOM) {
		dn->st.tx_dropped++;
		return -EMSGSIZE;
	}
	if (dn->tx_n == DNET_TX_PKTS_MAX)
		km_dnet_tx_flush(dn);
	if (dn->tx_n == DNET_TX_PKTS_MAX) { /* lost as on a wire */
		dn->st.tx_dropped++;
		return -ENOBUFS;
	}
	if ((m = rte_pktmbuf_alloc(dn->dq->tx_pool)) == NULL) {
		dn->st.tx_dropped++;
		return -ENOBUFS;
	}
	p = rte_pktmbuf_append(m, (uint16_t)total);
	KM_ASSERT(p != NULL);
	for (uint32_t i = 0; i < n_iov; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	tx_offload(m, flags);
	dn->tx_pkts[dn->tx_n++] = m;
	if (dn->tx_n == DNET_TX_PKTS_MAX)
		km_dnet_tx_flush(dn);
	return 0;
}
