/* The DPDK side of the backend: the port, its pools, rx and tx bursts. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_ip.h>
#include <rte_mempool.h>

#include "common/clock.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/dpdk/dnet_pvt.h"
#include "dataplane/dpdk/dpdk.h"

/* Buffer ids live in each mbuf's private area, set once when the pool is
 * made, so rx needs no id allocator and release is one table look-up. */
#define DNET_PRIV_BYTES RTE_ALIGN(sizeof(uint32_t), RTE_MBUF_PRIV_ALIGN)

/* Ports taken by a backend (one backend per port for now). Created and
 * destroyed on the control thread or in quiesce, never concurrently for
 * one port; atomic so that a mistaken double use is caught, not raced. */
static _Atomic uint8_t port_taken[RTE_MAX_ETHPORTS];
static _Atomic uint32_t pool_seq;

static inline uint32_t mbuf_id(struct rte_mbuf *m)
{
	return *(uint32_t *)rte_mbuf_to_priv(m);
}

static void set_id(struct rte_mempool *mp, void *arg, void *obj,
		   unsigned int idx)
{
	struct dnet *dn = arg;
	struct rte_mbuf *m = obj;

	(void)mp;
	*(uint32_t *)rte_mbuf_to_priv(m) = idx;
	dn->by_id[idx] = m;
}

/* "net_af_packet0,iface=veth0" -> the port named net_af_packet0; a vdev
 * absent from the EAL arguments is hot-plugged from the whole string. */
static int find_port(const char *devargs, uint16_t *port_id)
{
	char name[RTE_ETH_NAME_MAX_LEN];
	size_t n = strcspn(devargs, ",");
	int rc;

	if (n == 0 || n >= sizeof(name))
		return -EINVAL;
	memcpy(name, devargs, n);
	name[n] = '\0';
	if (rte_eth_dev_get_port_by_name(name, port_id) == 0)
		return 0;
	rc = rte_dev_probe(devargs);
	if (rc < 0) {
		KM_ERROR("dpdk", "port %s: not found, and probing \"%s\" failed: %s",
			 name, devargs, rte_strerror(-rc));
		return -ENODEV;
	}
	return rte_eth_dev_get_port_by_name(name, port_id) == 0 ? 0 : -ENODEV;
}

static int make_pools(struct dnet *dn)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	uint32_t seq = atomic_fetch_add(&pool_seq, 1);
	int socket = rte_eth_dev_socket_id(dn->port_id);

	if (socket < 0)
		socket = (int)rte_socket_id();
	snprintf(name, sizeof(name), "km_rx%u_%u", dn->port_id, seq);
	dn->rx_pool = rte_pktmbuf_pool_create(name, dn->n_bufs, DNET_POOL_CACHE,
					      DNET_PRIV_BYTES,
					      RTE_MBUF_DEFAULT_BUF_SIZE, socket);
	if (dn->rx_pool == NULL)
		return -rte_errno;
	snprintf(name, sizeof(name), "km_tx%u_%u", dn->port_id, seq);
	dn->tx_pool = rte_pktmbuf_pool_create(name, DNET_TX_POOL, DNET_POOL_CACHE,
					      0, RTE_MBUF_DEFAULT_BUF_SIZE,
					      socket);
	if (dn->tx_pool == NULL)
		return -rte_errno;
	rte_mempool_obj_iter(dn->rx_pool, set_id, dn);
	return 0;
}

/* Checksum offload when the port has both halves, else software. */
static void pick_offloads(struct dnet *dn, const struct rte_eth_dev_info *di,
			  struct rte_eth_conf *conf)
{
	uint64_t tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM |
		      RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
	uint64_t rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM |
		      RTE_ETH_RX_OFFLOAD_TCP_CKSUM;

	dn->csum_tx = (di->tx_offload_capa & tx) == tx;
	dn->csum_rx = (di->rx_offload_capa & rx) == rx;
	if (dn->csum_tx)
		conf->txmode.offloads |= tx;
	if (dn->csum_rx)
		conf->rxmode.offloads |= rx;
	if (di->tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
		conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
}

static int set_mac(struct dnet *dn)
{
	struct rte_ether_addr a;
	int rc;

	if (!dn->cfg.dpdk.mac_set) {
		if ((rc = rte_eth_macaddr_get(dn->port_id, &a)) < 0)
			return rc;
		memcpy(dn->mac, a.addr_bytes, 6);
		return 0;
	}
	memcpy(dn->mac, dn->cfg.dpdk.mac, 6);
	memcpy(a.addr_bytes, dn->mac, 6);
	if (rte_eth_dev_default_mac_addr_set(dn->port_id, &a) == 0)
		return 0;
	/* The port keeps its own address: receive everything instead. */
	rc = rte_eth_promiscuous_enable(dn->port_id);
	return rc == -ENOTSUP ? 0 : rc;
}

static int configure(struct dnet *dn)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info di;
	uint16_t nrx = DNET_RXD, ntx = DNET_TXD, mtu = 1500;
	int rc, sock = rte_eth_dev_socket_id(dn->port_id);

	memset(&conf, 0, sizeof(conf));
	if ((rc = rte_eth_dev_info_get(dn->port_id, &di)) < 0)
		return rc;
	pick_offloads(dn, &di, &conf);
	if ((rc = rte_eth_dev_configure(dn->port_id, 1, 1, &conf)) < 0 ||
	    (rc = rte_eth_dev_adjust_nb_rx_tx_desc(dn->port_id, &nrx, &ntx)) < 0)
		return rc;
	rc = rte_eth_rx_queue_setup(dn->port_id, 0, nrx, sock, NULL,
				    dn->rx_pool);
	if (rc < 0 || (rc = rte_eth_tx_queue_setup(dn->port_id, 0, ntx, sock,
						   NULL)) < 0)
		return rc;
	if ((rc = set_mac(dn)) < 0)
		return rc;
	if (rte_eth_dev_get_mtu(dn->port_id, &mtu) < 0)
		mtu = 1500;
	/* One frame per mbuf: frames we build are never chained. */
	dn->mtu = mtu < RTE_MBUF_DEFAULT_DATAROOM - RTE_ETHER_HDR_LEN
			  ? mtu
			  : RTE_MBUF_DEFAULT_DATAROOM - RTE_ETHER_HDR_LEN;
	return 0;
}

int dnet_port_open(struct dnet *dn)
{
	uint8_t no = 0;
	int rc;

	if (!km_dpdk_eal_ready())
		return -EPERM;
	if ((rc = find_port(dn->cfg.dpdk.port, &dn->port_id)) < 0)
		return rc;
	if (!atomic_compare_exchange_strong(&port_taken[dn->port_id], &no, 1))
		return -EBUSY;
	dn->port_owned = true;
	if ((rc = make_pools(dn)) < 0 || (rc = configure(dn)) < 0 ||
	    (rc = rte_eth_dev_start(dn->port_id)) < 0) {
		KM_ERROR("dpdk", "port %u (%s): set-up failed: %s", dn->port_id,
			 dn->cfg.dpdk.port, rte_strerror(-rc));
		return rc;
	}
	dn->port_started = true;
	KM_INFO("dpdk", "port %u (%s) up: MTU %u, %u receive mbufs, checksums in %s",
		dn->port_id, dn->cfg.dpdk.port, dn->mtu, dn->n_bufs,
		dn->csum_tx ? "the port" : "software");
	return 0;
}

/* Stopped, not closed: a vdev from the EAL arguments stays available to a
 * later backend in the same process. */
void dnet_port_close(struct dnet *dn)
{
	if (dn->imp.held != NULL)
		rte_pktmbuf_free(dn->imp.held);
	dn->imp.held = NULL;
	if (dn->port_started) {
		dnet_tx_flush(dn);
		rte_eth_dev_stop(dn->port_id);
		dn->port_started = false;
	}
	rte_mempool_free(dn->rx_pool);
	rte_mempool_free(dn->tx_pool);
	dn->rx_pool = NULL;
	dn->tx_pool = NULL;
	if (dn->port_owned)
		atomic_store(&port_taken[dn->port_id], 0);
	dn->port_owned = false;
}

uint64_t dnet_port_missed(const struct dnet *dn)
{
	struct rte_eth_stats es;

	if (!dn->port_started || rte_eth_stats_get(dn->port_id, &es) != 0)
		return 0;
	return es.imissed + es.rx_nombuf;
}

/* ---- threads ----------------------------------------------------------- */

/* A worker is not an EAL thread: registering gives it an lcore id, and with
 * it the mempool's per-lcore cache. Without one the pools still work,
 * through their shared ring. */
void dnet_thread_enter(struct dnet *dn)
{
	if (dn->registered || rte_lcore_id() != LCORE_ID_ANY)
		return;
	dn->registered = rte_thread_register() == 0;
	if (!dn->registered)
		KM_WARN("dpdk", "worker thread not registered with the EAL (%s): mempools run without a cache",
			rte_strerror(rte_errno));
}

void dnet_thread_leave(struct dnet *dn)
{
	if (dn->registered)
		rte_thread_unregister();
	dn->registered = false;
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
 * does not keep through dnet_buf_free). */
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
	rx_frame(dn, m);
}

static void rx_one(struct dnet *dn, struct rte_mbuf *m)
{
	if ((dn->imp.drop_every | dn->imp.swap_every) == 0) {
		rx_frame(dn, m);
		return;
	}
	if (impair(dn, m))
		return;
	rx_frame(dn, m);
	rx_release_held(dn);
}

void dnet_impair_init(struct dnet *dn)
{
	const char *v = getenv("KMIRROR_TEST_DPDK_IMPAIR");
	unsigned drop = 0, swap = 0;

	if (v == NULL)
		return;
	if (sscanf(v, "drop=%u,swap=%u", &drop, &swap) < 1)
		KM_WARN("dpdk", "KMIRROR_TEST_DPDK_IMPAIR=\"%s\": expected drop=N,swap=M", v);
	dn->imp.drop_every = drop;
	dn->imp.swap_every = swap;
	KM_WARN("dpdk", "test switch: dropping every %u-th and reordering every %u-th received data frame",
		drop, swap);
}

/* Up to DNET_RX_BURSTS_MAX bursts, one ACK decision per burst.
 * @return frames taken. */
int dnet_rx(struct dnet *dn)
{
	struct rte_mbuf *pkts[DNET_BURST];
	int total = 0;

	for (uint32_t b = 0; b < DNET_RX_BURSTS_MAX; b++) {
		uint16_t n = rte_eth_rx_burst(dn->port_id, dn->queue, pkts,
					      DNET_BURST);

		if (n == 0)
			break;
		for (uint16_t i = 0; i < n; i++)
			rx_one(dn, pkts[i]);
		rx_release_held(dn);
		km_tcp_input_burst_end(dn->ep);
		total += n;
		if (n < DNET_BURST)
			break;
	}
	return total;
}

void dnet_buf_free(void *ctx, const uint32_t *ids, uint32_t n)
{
	struct dnet *dn = ctx;

	for (uint32_t i = 0; i < n; i++) {
		KM_ASSERT_HOT(ids[i] < dn->n_bufs);
		rte_pktmbuf_free_seg(dn->by_id[ids[i]]);
	}
}

/* ---- transmit ----------------------------------------------------------- */

void dnet_tx_flush(struct dnet *dn)
{
	uint16_t sent;

	if (dn->tx_n == 0)
		return;
	sent = rte_eth_tx_burst(dn->port_id, dn->queue, dn->tx_pkts,
				(uint16_t)dn->tx_n);
	/* Retry the tail once: a driver may take a burst in pieces. */
	if (sent < dn->tx_n)
		sent += rte_eth_tx_burst(dn->port_id, dn->queue,
					 dn->tx_pkts + sent,
					 (uint16_t)(dn->tx_n - sent));
	for (uint32_t i = 0; i < sent; i++)
		dn->st.frame_bytes_out += dn->tx_pkts[i]->pkt_len;
	dn->st.frames_out += sent;
	/* The rest is lost like on a wire: TCP retransmits (STYLE 4: the
	 * unsent tail is ours to free). */
	for (uint32_t i = sent; i < dn->tx_n; i++) {
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
int dnet_tx(void *ctx, const struct iovec *iov, uint32_t n_iov,
	    uint32_t flags)
{
	struct dnet *dn = ctx;
	struct rte_mbuf *m;
	size_t total = 0;
	char *p;

	for (uint32_t i = 0; i < n_iov; i++)
		total += iov[i].iov_len;
	if (total > RTE_MBUF_DEFAULT_DATAROOM) {
		dn->st.tx_dropped++;
		return -EMSGSIZE;
	}
	if ((m = rte_pktmbuf_alloc(dn->tx_pool)) == NULL) {
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
		dnet_tx_flush(dn);
	return 0;
}
