/* The DPDK side of the backend: the port, shared by every worker's backend
 * with one queue pair each, its pools, and the steering of each queue's
 * connections to it.
 *
 * Steering. Queue q's connections use the local ports of block q
 * (km_dnet_port_block). Where the port accepts flow rules, one rule per queue
 * sends TCP to our address with a destination port in block q to queue q:
 * the port itself steers. Otherwise the port's RSS (or, for net_af_packet,
 * the kernel's fanout hash) spreads frames over the queues as it likes,
 * and the worker that takes a frame for another queue's block passes it
 * on through that queue's ring (dnet_io.c). The rings run in both cases,
 * so that a frame the port misplaces is moved, never lost.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_flow.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "dataplane/net/dpdk/dnet_pvt.h"
#include "dataplane/net/dpdk/dpdk.h"

/* Buffer ids live in each mbuf's private area, set once when the pool is
 * made, so rx needs no id allocator and release is one table look-up. */
#define DNET_PRIV_BYTES RTE_ALIGN(sizeof(uint32_t), RTE_MBUF_PRIV_ALIGN)

static pthread_mutex_t dport_lock = PTHREAD_MUTEX_INITIALIZER;
static struct dport *dports[RTE_MAX_ETHPORTS];

struct id_fill {
	struct rte_mbuf **by_id;
};

static void set_id(struct rte_mempool *mp, void *arg, void *obj,
		   unsigned int idx)
{
	struct id_fill *f = arg;
	struct rte_mbuf *m = obj;

	(void)mp;
	*(uint32_t *)rte_mbuf_to_priv(m) = idx;
	f->by_id[idx] = m;
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

static int socket_of(const struct dport *dp)
{
	int socket = rte_eth_dev_socket_id(dp->port_id);

	return socket < 0 ? (int)rte_socket_id() : socket;
}

static int make_queue(struct dport *dp, uint16_t q)
{
	char name[RTE_MEMPOOL_NAMESIZE];
	struct dqueue *dq = &dp->q[q];
	struct id_fill f;

	if ((dq->by_id = calloc(dp->n_bufs, sizeof(*dq->by_id))) == NULL)
		return -ENOMEM;
	snprintf(name, sizeof(name), "km_rx%u_%u", dp->port_id, q);
	dq->rx_pool = rte_pktmbuf_pool_create(name, dp->n_bufs, DNET_POOL_CACHE,
					      DNET_PRIV_BYTES, dp->dataroom,
					      socket_of(dp));
	if (dq->rx_pool == NULL)
		return -rte_errno;
	f.by_id = dq->by_id;
	rte_mempool_obj_iter(dq->rx_pool, set_id, &f);
	/* The port's, not the backend's: a queue's transmit descriptors may
	 * hold its mbufs until the port stops, after its backend is gone. */
	snprintf(name, sizeof(name), "km_tx%u_%u", dp->port_id, q);
	dq->tx_pool = rte_pktmbuf_pool_create(name,
					      dp->dataroom > RTE_MBUF_DEFAULT_BUF_SIZE ?
					      DNET_TX_POOL_JUMBO : DNET_TX_POOL,
					      DNET_POOL_CACHE, 0, dp->dataroom,
					      socket_of(dp));
	if (dq->tx_pool == NULL)
		return -rte_errno;
	if (dp->n_queues == 1)
		return 0;
	snprintf(name, sizeof(name), "km_st%u_%u", dp->port_id, q);
	dq->steer = rte_ring_create(name, DNET_STEER_RING, socket_of(dp),
				    RING_F_SC_DEQ);
	return dq->steer == NULL ? -rte_errno : 0;
}

/* Checksum offload when the port has both halves, else software. */
static void pick_offloads(struct dport *dp, const struct rte_eth_dev_info *di,
			  struct rte_eth_conf *conf)
{
	uint64_t tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM |
		      RTE_ETH_TX_OFFLOAD_TCP_CKSUM;
	uint64_t rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM |
		      RTE_ETH_RX_OFFLOAD_TCP_CKSUM;

	dp->csum_tx = (di->tx_offload_capa & tx) == tx;
	dp->csum_rx = (di->rx_offload_capa & rx) == rx;
	if (dp->csum_tx)
		conf->txmode.offloads |= tx;
	if (dp->csum_rx)
		conf->rxmode.offloads |= rx;
	if (di->tx_offload_capa & RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE)
		conf->txmode.offloads |= RTE_ETH_TX_OFFLOAD_MBUF_FAST_FREE;
}

/* With several queues, RSS over TCP/IPv4 where the port hashes: frames
 * of one connection then stay on one queue, the flow rules or the rings
 * finish the job. */
static void pick_rss(struct dport *dp, const struct rte_eth_dev_info *di,
		     struct rte_eth_conf *conf)
{
	uint64_t hf = di->flow_type_rss_offloads & RTE_ETH_RSS_NONFRAG_IPV4_TCP;

	if (dp->n_queues < 2 || hf == 0)
		return;
	conf->rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
	conf->rx_adv_conf.rss_conf.rss_hf = hf;
	dp->rss = true;
}

static int set_mac(struct dport *dp, const struct km_net_dpdk_config *c)
{
	struct rte_ether_addr a;
	int rc;

	if (!c->mac_set) {
		if ((rc = rte_eth_macaddr_get(dp->port_id, &a)) < 0)
			return rc;
		memcpy(dp->mac, a.addr_bytes, 6);
		return 0;
	}
	memcpy(dp->mac, c->mac, 6);
	memcpy(a.addr_bytes, dp->mac, 6);
	if (rte_eth_dev_default_mac_addr_set(dp->port_id, &a) == 0)
		return 0;
	/* The port keeps its own address: receive everything instead. */
	rc = rte_eth_promiscuous_enable(dp->port_id);
	return rc == -ENOTSUP ? 0 : rc;
}

static int check_queues(const struct dport *dp,
			const struct rte_eth_dev_info *di)
{
	if (di->max_rx_queues >= dp->n_queues &&
	    di->max_tx_queues >= dp->n_queues)
		return 0;
	KM_ERROR("dpdk", "port %s offers %u receive and %u transmit queue(s); %u workers need %u of each (one queue pair per worker: for net_af_packet add qpairs=%u, for net_af_xdp queue_count=%u to dpdk.port, or set fewer workers)",
		 dp->devargs, di->max_rx_queues, di->max_tx_queues,
		 dp->n_queues, dp->n_queues, dp->n_queues, dp->n_queues);
	return KM_ECFGVALUE; /* workers, for this port */
}

static int setup_queues(struct dport *dp)
{
	uint16_t nrx = DNET_RXD, ntx = DNET_TXD;
	int rc;

	if ((rc = rte_eth_dev_adjust_nb_rx_tx_desc(dp->port_id, &nrx, &ntx)) < 0)
		return rc;
	for (uint16_t q = 0; q < dp->n_queues; q++) {
		if ((rc = make_queue(dp, q)) < 0 ||
		    (rc = rte_eth_rx_queue_setup(dp->port_id, q, nrx,
						 socket_of(dp), NULL,
						 dp->q[q].rx_pool)) < 0 ||
		    (rc = rte_eth_tx_queue_setup(dp->port_id, q, ntx,
						 socket_of(dp), NULL)) < 0)
			return rc;
	}
	return 0;
}

/* net_memif's bytes per ring slot (its bsize devarg), 0 if the port is
 * not memif. */
static uint32_t memif_slot_bytes(const struct rte_eth_dev_info *di)
{
	const struct rte_devargs *da;
	const char *b;

	if (di->driver_name == NULL || strcmp(di->driver_name, "net_memif") != 0)
		return 0;
	da = di->device != NULL ? rte_dev_devargs(di->device) : NULL;
	b = da != NULL && da->args != NULL ? strstr(da->args, "bsize=") : NULL;
	return b != NULL ? (uint32_t)strtoul(b + 6, NULL, 0) : DNET_MEMIF_BSIZE;
}

/* A frame past one memif slot is chained over several, and DPDK's memif
 * (22.11, and its copy transmit since) never clears the chain flag of a
 * packet's first slot: once a slot has carried the middle of a frame, any
 * later frame starting there is chained onto the slots after it, and the
 * receiver reads on past the ring's tail, delivering stale frames again
 * (dpdk-e2e: 2.4x the bytes the source sent, a flood of duplicate ACKs).
 * So a frame must fit one slot: the MTU gives way, said once. */
static uint16_t fit_memif(const struct dport *dp,
			  const struct rte_eth_dev_info *di, uint16_t mtu)
{
	uint32_t slot = memif_slot_bytes(di);

	if (slot == 0 || (uint32_t)mtu + RTE_ETHER_HDR_LEN <= slot)
		return mtu;
	KM_WARN("dpdk", "port %s: MTU %u lowered to %u: net_memif corrupts frames longer than its slots (bsize=%u); add bsize=%u to its devargs for MTU %u",
		dp->devargs, mtu, slot - RTE_ETHER_HDR_LEN, slot,
		mtu + RTE_ETHER_HDR_LEN, mtu);
	return (uint16_t)(slot - RTE_ETHER_HDR_LEN);
}

/* The MTU the endpoint uses and the mbufs' data room. Unset dpdk.mtu:
 * the port's own, at most what one default mbuf holds. Set: asked of the
 * port. A port with no MTU to set (-ENOTSUP: net_ring, net_memif, which
 * move frames of any size whatever their dev_info says) is taken at the
 * operator's word, memif up to its slot size (fit_memif); one that refuses
 * (af_packet, tap: a frame past their max_rx_pktlen) keeps its own,
 * logged. One mbuf holds a whole frame either way (frames we build are
 * never chained, and a jumbo frame in one mbuf is one buffer id, not 5). */
static void pick_mtu(struct dport *dp, const struct km_net_dpdk_config *c,
		     const struct rte_eth_dev_info *di)
{
	uint16_t mtu = 1500;
	uint32_t cap = RTE_MBUF_DEFAULT_DATAROOM - RTE_ETHER_HDR_LEN;
	int rc = 0;

	dp->dataroom = RTE_MBUF_DEFAULT_BUF_SIZE;
	if (c->mtu != 0)
		rc = rte_eth_dev_set_mtu(dp->port_id, (uint16_t)c->mtu);
	if (rte_eth_dev_get_mtu(dp->port_id, &mtu) < 0)
		mtu = 1500;
	if (c->mtu != 0 && rc == -ENOTSUP)
		mtu = fit_memif(dp, di, (uint16_t)c->mtu);
	else if (c->mtu != 0 && rc < 0)
		KM_WARN("dpdk", "port %s refuses MTU %u (%s): it keeps MTU %u",
			dp->devargs, c->mtu, rte_strerror(-rc), mtu);
	if (c->mtu != 0 && mtu > cap) {
		if (mtu > c->mtu)
			mtu = (uint16_t)c->mtu;
		cap = RTE_ALIGN_CEIL(mtu + RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN, 1024);
		dp->dataroom = (uint16_t)(RTE_PKTMBUF_HEADROOM + cap);
		cap -= RTE_ETHER_HDR_LEN + RTE_VLAN_HLEN;
		/* As many bytes of mbufs as asked for in default ones: the
		 * window they hold stays, the hugepages too. */
		dp->n_bufs = (uint32_t)((uint64_t)dp->n_bufs *
					RTE_MBUF_DEFAULT_BUF_SIZE / dp->dataroom);
		if (dp->n_bufs < DNET_JUMBO_BUFS_MIN)
			dp->n_bufs = DNET_JUMBO_BUFS_MIN;
	}
	dp->mtu = mtu < cap ? mtu : cap;
}

static int configure(struct dport *dp, const struct km_net_dpdk_config *c)
{
	struct rte_eth_conf conf;
	struct rte_eth_dev_info di;
	int rc;

	memset(&conf, 0, sizeof(conf));
	if ((rc = rte_eth_dev_info_get(dp->port_id, &di)) < 0 ||
	    (rc = check_queues(dp, &di)) < 0)
		return rc;
	pick_offloads(dp, &di, &conf);
	pick_rss(dp, &di, &conf);
	if ((rc = rte_eth_dev_configure(dp->port_id, dp->n_queues, dp->n_queues,
					&conf)) < 0)
		return rc;
	pick_mtu(dp, c, &di);
	if ((rc = setup_queues(dp)) < 0 || (rc = set_mac(dp, c)) < 0)
		return rc;
	return 0;
}

/* ---- flow rules ---------------------------------------------------------- */

static uint16_t pow2_at_least(uint16_t n)
{
	uint16_t p = 1;

	while (p < n)
		p <<= 1;
	return p;
}

void km_dnet_port_block(const struct dport *dp, uint16_t queue, uint16_t *lo,
		     uint16_t *hi)
{
	*lo = (uint16_t)(DNET_PORT_BASE + queue * dp->port_span);
	*hi = (uint16_t)(*lo + dp->port_span - 1);
}

/* TCP to our address, destination port in queue q's block -> queue q. */
static int flow_rule(const struct dport *dp, uint16_t q, bool create,
		     struct rte_flow_error *err)
{
	struct rte_flow_attr attr = { .ingress = 1 };
	struct rte_flow_item_ipv4 ip = { .hdr.dst_addr = rte_cpu_to_be_32(dp->ip) };
	struct rte_flow_item_ipv4 ip_mask = { .hdr.dst_addr = UINT32_MAX };
	struct rte_flow_item_tcp tcp, tcp_mask;
	struct rte_flow_action_queue to = { .index = q };
	uint16_t lo, hi;

	km_dnet_port_block(dp, q, &lo, &hi);
	memset(&tcp, 0, sizeof(tcp));
	memset(&tcp_mask, 0, sizeof(tcp_mask));
	tcp.hdr.dst_port = rte_cpu_to_be_16(lo);
	tcp_mask.hdr.dst_port = rte_cpu_to_be_16((uint16_t)~(dp->port_span - 1));
	const struct rte_flow_item pattern[] = {
		{ .type = RTE_FLOW_ITEM_TYPE_ETH },
		{ .type = RTE_FLOW_ITEM_TYPE_IPV4, .spec = &ip, .mask = &ip_mask },
		{ .type = RTE_FLOW_ITEM_TYPE_TCP, .spec = &tcp, .mask = &tcp_mask },
		{ .type = RTE_FLOW_ITEM_TYPE_END },
	};
	const struct rte_flow_action actions[] = {
		{ .type = RTE_FLOW_ACTION_TYPE_QUEUE, .conf = &to },
		{ .type = RTE_FLOW_ACTION_TYPE_END },
	};

	if (!create)
		return rte_flow_validate(dp->port_id, &attr, pattern, actions,
					 err);
	return rte_flow_create(dp->port_id, &attr, pattern, actions, err) != NULL
		       ? 0
		       : -rte_errno;
}

/* All rules or none: a port that takes some would steer some queues'
 * frames and spread the others', which the rings fix but nobody wants. */
static void install_flow_rules(struct dport *dp)
{
	struct rte_flow_error err = { 0 };
	uint16_t q;
	int rc = 0;

	if (dp->n_queues < 2)
		return;
	for (q = 0; q < dp->n_queues && rc == 0; q++)
		rc = flow_rule(dp, q, false, &err);
	for (q = 0; q < dp->n_queues && rc == 0; q++)
		rc = flow_rule(dp, q, true, &err);
	dp->flow_rules = rc == 0;
	if (rc == 0) {
		KM_INFO("dpdk", "port %u: %u flow rules steer each queue's TCP ports to it",
			dp->port_id, dp->n_queues);
		return;
	}
	rte_flow_flush(dp->port_id, &err);
	KM_INFO("dpdk", "port %u: no flow rules (%s); %s spreads frames over %u queues and the workers pass on what is not theirs",
		dp->port_id, err.message != NULL ? err.message : rte_strerror(-rc),
		dp->rss ? "RSS" : "the port", dp->n_queues);
}

/* ---- listening ports ------------------------------------------------------ */

/* One queue listens on a port (dnet_listen.c); with one queue there is
 * nobody to tell. */
void km_dnet_port_listen(struct dport *dp, uint16_t port, uint16_t queue,
			 bool on)
{
	if (dp->listen_q == NULL || port >= DNET_PORT_BASE)
		return;
	__atomic_store_n(&dp->listen_q[port], on ? (uint8_t)(queue + 1) : 0,
			 __ATOMIC_RELAXED);
}

/* The queue that listens on port, or -1. */
int km_dnet_port_listener(const struct dport *dp, uint16_t port)
{
	uint8_t q;

	if (dp->listen_q == NULL || port >= DNET_PORT_BASE)
		return -1;
	q = __atomic_load_n(&dp->listen_q[port], __ATOMIC_RELAXED);
	return q == 0 ? -1 : q - 1;
}

/* ---- attach, detach ------------------------------------------------------- */

static void dport_free(struct dport *dp)
{
	struct rte_flow_error err;
	struct rte_mbuf *m;

	if (dp->started) {
		if (dp->flow_rules)
			rte_flow_flush(dp->port_id, &err);
		rte_eth_dev_stop(dp->port_id);
	}
	for (uint16_t q = 0; q < dp->n_queues; q++) {
		struct dqueue *dq = &dp->q[q];

		while (dq->steer != NULL &&
		       rte_ring_dequeue(dq->steer, (void **)&m) == 0)
			rte_pktmbuf_free(m);
		rte_ring_free(dq->steer);
		rte_mempool_free(dq->rx_pool);
		rte_mempool_free(dq->tx_pool);
		free(dq->by_id);
	}
	free(dp->listen_q);
	free(dp);
}

static int dport_create(const struct km_net_config *c, uint16_t port_id,
			struct dport **out)
{
	uint16_t n = c->dpdk.queues > 1 ? c->dpdk.queues : 1;
	struct dport *dp = calloc(1, sizeof(*dp) + n * sizeof(dp->q[0]));
	int rc;

	if (dp == NULL)
		return -ENOMEM;
	dp->port_id = port_id;
	dp->n_queues = n;
	dp->n_bufs = dp->bufs_asked = c->rx_buf_count;
	dp->ip = rte_be_to_cpu_32(c->dpdk.ip_be);
	dp->port_span = DNET_PORT_SPACE / pow2_at_least(n);
	if (n > 1 && (dp->listen_q = calloc(DNET_PORT_BASE, 1)) == NULL) {
		free(dp);
		return -ENOMEM;
	}
	snprintf(dp->devargs, sizeof(dp->devargs), "%s", c->dpdk.port);
	if ((rc = configure(dp, &c->dpdk)) < 0 ||
	    (rc = rte_eth_dev_start(port_id)) < 0) {
		KM_ERROR("dpdk", "port %u (%s): set-up failed: %s", port_id,
			 c->dpdk.port,
			 rc <= KM_EBASE ? km_strerror(rc) : rte_strerror(-rc));
		dport_free(dp);
		return rc;
	}
	dp->started = true;
	install_flow_rules(dp);
	KM_INFO("dpdk", "port %u (%s) up: %u queue pair(s), MTU %u, %u receive mbufs per queue, checksums in %s",
		port_id, c->dpdk.port, n, dp->mtu, dp->n_bufs,
		dp->csum_tx ? "the port" : "software");
	*out = dp;
	return 0;
}

/* The port as every backend of it must see it: same queue count, same
 * address, a queue nobody drives yet. */
static int dport_join(struct dport *dp, const struct km_net_config *c)
{
	uint16_t n = c->dpdk.queues > 1 ? c->dpdk.queues : 1;

	if (n != dp->n_queues || c->dpdk.queue >= n ||
	    rte_be_to_cpu_32(c->dpdk.ip_be) != dp->ip ||
	    c->rx_buf_count != dp->bufs_asked)
		return -EINVAL;
	return dp->q[c->dpdk.queue].taken ? -EBUSY : 0;
}

static int attach(struct dnet *dn)
{
	const struct km_net_config *c = &dn->cfg;
	uint16_t port_id;
	int rc;

	if ((rc = find_port(c->dpdk.port, &port_id)) < 0)
		return rc;
	if (dports[port_id] == NULL) {
		if (c->dpdk.queue >= (c->dpdk.queues > 1 ? c->dpdk.queues : 1))
			return -EINVAL;
		if ((rc = dport_create(c, port_id, &dports[port_id])) < 0)
			return rc;
	} else if ((rc = dport_join(dports[port_id], c)) < 0) {
		return rc;
	}
	dn->dp = dports[port_id];
	dn->n_bufs = dn->dp->n_bufs;	/* fewer with jumbo mbufs */
	dn->dp->refs++;
	dn->dp->q[c->dpdk.queue].taken = true;
	return 0;
}

int km_dnet_port_open(struct dnet *dn)
{
	int rc;

	if (!km_dpdk_eal_ready())
		return -EPERM;
	pthread_mutex_lock(&dport_lock);
	rc = attach(dn);
	pthread_mutex_unlock(&dport_lock);
	if (rc < 0)
		return rc;
	dn->port_id = dn->dp->port_id;
	dn->queue = dn->cfg.dpdk.queue;
	dn->csum_rx = dn->dp->csum_rx;
	dn->dq = &dn->dp->q[dn->queue];
	return 0;
}

/* The last backend stops the port; stopped, not closed: a vdev from the
 * EAL arguments stays available to a later backend in the process. */
void km_dnet_port_close(struct dnet *dn)
{
	struct dport *dp = dn->dp;

	km_dnet_rx_close(dn);
	if (dp == NULL)
		return;
	km_dnet_tx_flush(dn);
	km_dnet_tx_discard(dn);
	pthread_mutex_lock(&dport_lock);
	dp->q[dn->queue].taken = false;
	if (--dp->refs == 0) {
		dports[dp->port_id] = NULL;
		dport_free(dp);
	}
	pthread_mutex_unlock(&dport_lock);
	dn->dp = NULL;
	dn->dq = NULL;
}

/* Port-wide figures, reported by queue 0's backend only so that the
 * workers' rows add up. */
uint64_t km_dnet_port_missed(const struct dnet *dn)
{
	struct rte_eth_stats es;

	if (dn->dp == NULL || dn->queue != 0 ||
	    rte_eth_stats_get(dn->port_id, &es) != 0)
		return 0;
	return es.imissed + es.rx_nombuf;
}

/* The driver's own count of the port, beside ours at exit (queue 0 only:
 * it is port-wide), so that an operator can tell our counting from the
 * driver's. */
void km_dnet_port_log_eth(const struct dnet *dn)
{
	struct rte_eth_stats es;

	if (dn->dp == NULL || dn->queue != 0 ||
	    rte_eth_stats_get(dn->port_id, &es) != 0)
		return;
	KM_INFO("dpdk", "port %u driver counters: ipackets=%llu opackets=%llu ibytes=%llu obytes=%llu imissed=%llu ierrors=%llu oerrors=%llu rx_nombuf=%llu",
		dn->port_id, (unsigned long long)es.ipackets,
		(unsigned long long)es.opackets, (unsigned long long)es.ibytes,
		(unsigned long long)es.obytes, (unsigned long long)es.imissed,
		(unsigned long long)es.ierrors, (unsigned long long)es.oerrors,
		(unsigned long long)es.rx_nombuf);
}

/* ---- threads ----------------------------------------------------------- */

/* A worker is not an EAL thread: registering gives it an lcore id, and with
 * it the mempool's per-lcore cache. Without one the pools still work,
 * through their shared ring. */
void km_dnet_thread_enter(struct dnet *dn)
{
	if (dn->registered || rte_lcore_id() != LCORE_ID_ANY)
		return;
	dn->registered = rte_thread_register() == 0;
	if (!dn->registered)
		KM_WARN("dpdk", "worker thread not registered with the EAL (%s): mempools run without a cache",
			rte_strerror(rte_errno));
}

void km_dnet_thread_leave(struct dnet *dn)
{
	if (dn->registered)
		rte_thread_unregister();
	dn->registered = false;
}

