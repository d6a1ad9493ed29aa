/* bench-ring: kmirror's TCP endpoint against the kernel's TCP, with no
 * wire and no kernel in the km_tcp path (issue 18.4).
 *
 * Goal: what the user-space endpoint costs per byte streamed from a
 * listening source to a fetching sink that verifies every Kafka batch,
 * next to the same bytes through kernel TCP on loopback: bytes per second
 * per polling core against the kernel's bytes per CPU second.
 *
 * Method: one process, one buffer of valid RecordBatch v2 batches (built by
 * km_records_build, real CRC-32C; baseOffsets consecutive). km_tcp runs:
 * two DPDK ethdev ports made by rte_eth_from_rings() over two rte_rings,
 * crossed (A sends into what B receives and back), each driven by a km_tcp
 * endpoint: B listens and streams the buffer through its send ring, A
 * connects, takes the payload zero-copy (mbuf data through the deliver
 * callback), verifies each complete batch with km_batch_parse (the
 * mirror's hot-path verification: magic, length, CRC-32C) across the mbufs
 * it spans, checks the offsets follow, then releases the mbufs. The glue
 * is this file's: rx burst -> km_tcp_input, ops->tx -> copy into an mbuf
 * -> tx burst; buffer ids live in each mbuf's private area; the clock is
 * read once per loop pass (as dnet does). Four kinds: MTU 1500 or 9000
 * (jumbo: one 9 KiB mbuf a frame), and either a poll thread per endpoint
 * ("2thr": they spin, so their CPU is their wall time, and on a shared
 * machine one spins while the other waits for a core) or ONE poll thread
 * driving both endpoints ("1thr": its CPU time is the whole cost of both
 * ends, so bytes per CPU second are what one polling core moves). Kernel
 * runs: the same buffer from a send() thread to a recv() thread over a TCP
 * socket pair on 127.0.0.1, the receiver verifying batches the same way in
 * its 1 MiB buffer, with the threads free ("2cpu") or pinned to one CPU
 * ("1cpu": the receiver reads what the sender wrote from the same caches,
 * as in the 1thr run). Every run copies each byte twice (into the send
 * ring or the socket, then into an mbuf or the receive buffer). CPU is
 * each thread's CLOCK_THREAD_CPUTIME_ID, the kernel's including its system
 * time and the softirqs run in its context; ksoftirqd's CPU during a
 * kernel run is shown apart (it is anyone's). The target compares the
 * 1thr jumbo run with the better of the two kernel runs.
 * Checksums: a NIC computes them, and loopback skips them, so the km_tcp
 * runs let the "port" do so by default (argv[2] = "sw": in software on
 * both sides); Kafka's bytes are still verified end to end, by the sink's
 * CRC-32C of every batch.
 *
 * Usage: bench-ring [MiB, default 512] [hw|sw] [V: km_tcp kind V alone, for
 * a profiler]. Exit 0 when every run delivered and verified every batch,
 * 77 when the EAL or hugepages are missing, 1 otherwise.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_cycles.h>
#include <rte_mbuf.h>
#include <rte_prefetch.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include "common/chain.h"
#include "common/endian.h"
#include "common/km_limits.h"
#include "dataplane/net/tcp/tcp.h"
#include "kafka/batch.h"
#include "kafka/records.h"

#define EXIT_SKIP 77
#define BURST 32u
#define RING_SLOTS 8192u		/* per direction; > the window in frames */
#define POOL_MBUFS 32767u		/* shared by both ports (2^n - 1) */
#define POOL_CACHE 256u
/* Jumbo frames (MTU 9000) in one mbuf each: the ring is the wire, so no
 * scatter is needed. Fewer of them: the window holds a sixth as many. */
#define JUMBO_MTU 9000u
#define JUMBO_MBUFS 8191u
#define JUMBO_DATAROOM (RTE_PKTMBUF_HEADROOM + 9216u)
#define PRIV_BYTES RTE_ALIGN(sizeof(uint32_t), RTE_MBUF_PRIV_ALIGN)
#define TX_PKTS_MAX 64u
#define SRC_PORT 9000u
/* Bounds the bytes in flight. Nothing here needs more (the ring pair's
 * round trip is a poll loop's), and a larger ring only copies through
 * memory the caches no longer hold: 16 MiB ran at about half the rate. */
#define SRC_RING_BYTES (2u << 20)
#define ROUNDS 3			/* a then b, interleaved; medians */
#define BASE_BYTES (8u << 20)		/* distinct batches, then repeated */
#define REC_PER_BATCH 100
#define POOL_RAND_BYTES (1u << 20)
#define RUN_SECONDS_MAX 300
#define SOCK_RECV_BYTES (1u << 20)
#define SEGS_MAX (2u * POOL_MBUFS)
#define VARIANTS 4		/* km_tcp runs per round */
#define SPIN_POLLS 32u		/* dnet's DNET_SPIN_POLLS, NAP_MIN/MAX_US */
#define NAP_MIN_US 10u
#define NAP_MAX_US 100u
#define KVARIANTS 2		/* kernel runs per round */

/* ---- the batches --------------------------------------------------------- */

struct stream {
	uint8_t *buf;
	uint64_t bytes;
	uint64_t batches;
	int64_t next_offset;	/* after the last batch */
};

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* One batch of REC_PER_BATCH records (keys 8-24 B, values 80-240 B). */
static int build_batch(uint8_t *dst, size_t cap, int64_t base,
		       const uint8_t *pool, uint64_t *rng)
{
	struct km_record_spec recs[REC_PER_BATCH];
	struct km_batch_spec spec = { .base_offset = base, .producer_id = 5000 };

	for (int i = 0; i < REC_PER_BATCH; i++) {
		recs[i] = (struct km_record_spec){
			.key = pool + rng_next(rng) % (POOL_RAND_BYTES - 256),
			.key_len = (int32_t)(8 + rng_next(rng) % 17),
			.value = pool + rng_next(rng) % (POOL_RAND_BYTES - 256),
			.value_len = (int32_t)(80 + rng_next(rng) % 161),
			.timestamp = 1700000000000 + i,
		};
	}
	return km_records_build(dst, cap, &spec, recs, REC_PER_BATCH);
}

/* bytes_max of batches: BASE_BYTES built, the rest copies of them with
 * their baseOffset moved on (the CRC does not cover it). */
static int stream_make(struct stream *st, uint64_t bytes_max)
{
	uint8_t *pool = malloc(POOL_RAND_BYTES);
	uint64_t rng = 0x9E3779B97F4A7C15ull, base_end = 0, at = 0;
	int64_t off = 0;

	st->buf = malloc(bytes_max);
	if (pool == NULL || st->buf == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < POOL_RAND_BYTES; i++)
		pool[i] = (uint8_t)rng_next(&rng);
	st->batches = 0;
	for (;;) { /* bounded: each pass adds a batch or stops */
		uint8_t *dst = st->buf + at;
		int n;

		if (at < BASE_BYTES) {
			n = build_batch(dst, bytes_max - at, off, pool, &rng);
			if (n < 0)
				break;
			base_end = at + (uint64_t)n;
		} else {
			const uint8_t *srcb = st->buf + (at - base_end) % base_end;
			uint32_t len = km_load_be32(srcb + KM_BATCH_OFF_LENGTH);

			n = (int)(len + KM_BATCH_LOG_OVERHEAD);
			if ((at - base_end) % base_end + (uint64_t)n > base_end ||
			    at + (uint64_t)n > bytes_max)
				break;
			memcpy(dst, srcb, (size_t)n);
			km_store_be64(dst + KM_BATCH_OFF_BASE_OFFSET, (uint64_t)off);
		}
		off += REC_PER_BATCH;
		at += (uint64_t)n;
		st->batches++;
	}
	free(pool);
	st->bytes = at;
	st->next_offset = off;
	return 0;
}

/* ---- the batch check, shared by both runs -------------------------------- */

struct verify {
	int64_t next_offset;
	uint64_t batches;
	uint64_t bytes;
	int error;		/* first KM_E* code or -EPROTO (offset gap) */
};

/* Verify the batches that start at cur and are complete in ch, as the
 * fetcher does (km_batch_parse: length, magic, CRC-32C, header); *cur
 * moves past them. Returns batches verified, or -1 after an error. */
static int verify_chain(struct verify *v, const struct km_chain *ch,
			struct km_chain_cur *cur)
{
	int n = 0;

	for (;;) { /* bounded by the bytes in ch: each pass consumes a batch */
		struct km_batch b;
		int rc = km_batch_parse(&b, ch, *cur, KM_BATCH_BYTES_MAX);

		if (rc == 0)
			return n;
		if (rc < 0 || km_batch_base_offset(&b) != v->next_offset) {
			v->error = rc < 0 ? rc : -EPROTO;
			return -1;
		}
		v->next_offset = km_batch_last_offset(&b) + 1;
		v->batches++;
		v->bytes += (uint64_t)rc;
		km_chain_advance(ch, cur, (size_t)rc);
		n++;
	}
}

/* ---- timing -------------------------------------------------------------- */

static double now_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* CPU of the kernel's softirq threads (s, /proc/PID/schedstat): loopback
 * hands part of its receive work to them when the machine is busy, and
 * their time is charged to no thread of ours. */
static double ksoftirqd_s(void)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	double total = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) { /* bounded by /proc's entries */
		char path[300], comm[32] = "";
		unsigned long long ns;
		FILE *f;

		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/comm", e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(comm, sizeof(comm), f) == NULL)
			comm[0] = '\0';
		fclose(f);
		if (strncmp(comm, "ksoftirqd/", 10) != 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/schedstat", e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fscanf(f, "%llu", &ns) == 1)
			total += (double)ns * 1e-9;
		fclose(f);
	}
	closedir(d);
	return total;
}

struct result {
	const char *what;
	uint64_t bytes, batches;
	double seconds, cpu_src, cpu_sink;
	double cpu_extra;	/* kernel: ksoftirqd during the run */
	uint32_t cores;		/* polling threads (km_tcp), 0: kernel */
	int error;
	uint64_t retransmits, tx_drops, frames;
};

/* ---- run a: km_tcp over net_ring ------------------------------------------ */

/* One kind of km_tcp run: the frame size and whether both endpoints share
 * one polling thread. Sharing one makes its CPU time the whole cost of both
 * ends with no spinning while the other thread is off the CPU (this machine
 * is shared): bytes per CPU second are what one polling core moves. */
struct variant {
	const char *what;
	uint32_t mtu;
	bool one_thread;
};

static const struct variant variants[VARIANTS] = {
	{ "km_tcp 1500 2thr", 1500, false },
	{ "km_tcp 9000 2thr", JUMBO_MTU, false },
	{ "km_tcp 1500 1thr", 1500, true },
	{ "km_tcp 9000 1thr", JUMBO_MTU, true },
};

/* An mbuf pool and its buffer ids (the pool's object indexes). */
struct pool {
	struct rte_mempool *mp;
	struct rte_mbuf **by_id;
	uint32_t n;
};

static struct pool pool_std, pool_jumbo;

struct side {
	const char *name;
	uint16_t port;
	const struct pool *pool;
	struct km_tcp_ep *ep;
	void *ep_mem;
	size_t ep_bytes;
	struct km_tcp_ops ops;
	struct km_tcp_conn *conn;
	struct rte_mbuf *tx_pkts[TX_PKTS_MAX];
	uint32_t tx_n;
	uint64_t tx_drops;
	uint64_t now_ms;	/* read once per loop pass, as dnet does */
	uint32_t idle;
	bool csum_offload;
	bool done;		/* CLOSED reported */
	int end_res;
	double cpu;
	/* source */
	const struct stream *st;
	uint64_t queued;
	/* sink: delivered segments not yet released, oldest first */
	struct iovec *seg_iov;
	uint32_t *seg_ids;
	uint32_t seg_head, seg_n;
	struct km_chain_cur cur;	/* relative to seg_head */
	struct verify v;
	uint64_t total;
	double t_end;
	_Atomic bool *stop;
};

static inline uint32_t mbuf_id(const struct rte_mbuf *m)
{
	return *(const uint32_t *)rte_mbuf_to_priv((struct rte_mbuf *)m);
}

static void set_id(struct rte_mempool *mp, void *arg, void *obj,
		   unsigned int idx)
{
	struct rte_mbuf **by_id = arg;

	(void)mp;
	*(uint32_t *)rte_mbuf_to_priv((struct rte_mbuf *)obj) = idx;
	by_id[idx] = obj;
}

/* The TSC costs a fraction of a vDSO clock_gettime(); the endpoints read
 * the clock at every call, so the loop reads it once per pass. */
static uint64_t tsc_per_ms;

static void side_clock(struct side *s)
{
	s->now_ms = rte_rdtsc() / tsc_per_ms;
}

static uint64_t ring_now_ms(void *ctx)
{
	return ((const struct side *)ctx)->now_ms;
}

static void ring_buf_free(void *ctx, const uint32_t *ids, uint32_t n)
{
	struct side *s = ctx;

	for (uint32_t i = 0; i < n; i++)
		rte_pktmbuf_free_seg(s->pool->by_id[ids[i]]);
}

static void tx_flush(struct side *s)
{
	uint16_t sent;

	if (s->tx_n == 0)
		return;
	sent = rte_eth_tx_burst(s->port, 0, s->tx_pkts, (uint16_t)s->tx_n);
	/* The unsent tail is ours (STYLE 4): lost like on a wire. */
	for (uint32_t i = sent; i < s->tx_n; i++)
		rte_pktmbuf_free(s->tx_pkts[i]);
	s->tx_drops += s->tx_n - sent;
	s->tx_n = 0;
}

static int ring_tx(void *ctx, const struct iovec *iov, uint32_t n_iov,
		   uint32_t flags)
{
	struct side *s = ctx;
	struct rte_mbuf *m = rte_pktmbuf_alloc(s->pool->mp);
	size_t total = 0;
	char *p;

	(void)flags;	/* the ring is the wire: offloaded sums stay partial */
	if (m == NULL)
		return -ENOBUFS;
	for (uint32_t i = 0; i < n_iov; i++)
		total += iov[i].iov_len;
	p = rte_pktmbuf_append(m, (uint16_t)total);
	if (p == NULL) {
		rte_pktmbuf_free(m);
		return -EMSGSIZE;
	}
	for (uint32_t i = 0; i < n_iov; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	s->tx_pkts[s->tx_n++] = m;
	if (s->tx_n == TX_PKTS_MAX)
		tx_flush(s);
	return 0;
}

/* Source: keep the send ring full; FIN after the last byte. */
static void src_feed(struct side *s)
{
	while (s->queued < s->st->bytes) {
		struct iovec v = { s->st->buf + s->queued,
				   s->st->bytes - s->queued };
		ssize_t n = km_tcp_send(s->conn, &v, 1);

		if (n <= 0)
			return;
		s->queued += (uint64_t)n;
	}
	km_tcp_close(s->conn);
}

static void src_accept(void *ctx, struct km_tcp_conn *c)
{
	struct side *s = ctx;

	if (s->conn != NULL) {
		km_tcp_abort(c);
		return;
	}
	s->conn = c;
	src_feed(s);
}

static void ring_event(void *ctx, struct km_tcp_conn *c, enum km_tcp_event ev,
		       int res)
{
	struct side *s = ctx;

	switch (ev) {
	case KM_TCP_EV_CONNECTED:
		if (res < 0) {
			s->done = true;
			s->end_res = res;
		}
		break;
	case KM_TCP_EV_SENT:
		if (s->st != NULL)
			src_feed(s);
		break;
	case KM_TCP_EV_PEER_FIN:
		km_tcp_close(c);
		break;
	case KM_TCP_EV_CLOSED:
		s->done = true;
		s->end_res = res;
		break;
	}
}

/* Sink: release the segments the cursor has passed. */
static void sink_release(struct side *s)
{
	uint32_t k = s->cur.seg;

	if (k == 0)
		return;
	km_tcp_release(s->ep, s->seg_ids + s->seg_head, k);
	s->seg_head += k;
	s->seg_n -= k;
	s->cur.seg = 0;
	/* Keep the live tail at the front once it has drifted far. */
	if (s->seg_head > SEGS_MAX / 2) {
		memmove(s->seg_iov, s->seg_iov + s->seg_head,
			s->seg_n * sizeof(s->seg_iov[0]));
		memmove(s->seg_ids, s->seg_ids + s->seg_head,
			s->seg_n * sizeof(s->seg_ids[0]));
		s->seg_head = 0;
	}
}

static void sink_deliver(void *ctx, struct km_tcp_conn *c,
			 const struct km_chain *data, const uint32_t *ids)
{
	struct side *s = ctx;
	struct km_chain ch;

	(void)c;
	if (s->seg_head + s->seg_n + data->n_iov > SEGS_MAX) {
		s->v.error = -ENOSPC;
		km_tcp_release(s->ep, ids, data->n_iov);
		return;
	}
	memcpy(s->seg_iov + s->seg_head + s->seg_n, data->iov,
	       data->n_iov * sizeof(data->iov[0]));
	memcpy(s->seg_ids + s->seg_head + s->seg_n, ids,
	       data->n_iov * sizeof(ids[0]));
	s->seg_n += data->n_iov;
	ch.iov = s->seg_iov + s->seg_head;
	ch.n_iov = s->seg_n;
	if (s->v.error == 0 && verify_chain(&s->v, &ch, &s->cur) < 0)
		km_tcp_abort(s->conn);
	sink_release(s);
	if (s->v.bytes == s->total && s->t_end == 0)
		s->t_end = now_s(CLOCK_MONOTONIC);
}

static void rx_burst(struct side *s, struct rte_mbuf **pkts, uint16_t n)
{
	uint32_t flags = s->csum_offload ?
			 KM_TCP_RX_IP_CSUM_GOOD | KM_TCP_RX_L4_CSUM_GOOD : 0;

	/* The burst's mbuf headers and ids load while the first frames are
	 * parsed, as in dnet_io.c (their first touch was this loop's top cost
	 * in perf; +7% per core at MTU 1500, A/B interleaved). */
	for (uint16_t i = 0; i < n; i++) {
		rte_prefetch0(pkts[i]);
		rte_prefetch0(rte_mbuf_to_priv(pkts[i]));
	}
	for (uint16_t i = 0; i < n; i++) {
		struct iovec iov = { rte_pktmbuf_mtod(pkts[i], void *),
				     pkts[i]->data_len };
		struct km_chain ch = { &iov, 1 };
		uint32_t id = mbuf_id(pkts[i]);

		km_tcp_input(s->ep, &ch, &id, flags);
	}
	km_tcp_input_burst_end(s->ep);
}

/* One pass of a side's poll loop: a receive burst, the timers when the
 * burst was empty (and now and then when busy), the transmit burst. */
static uint16_t side_step(struct side *s)
{
	struct rte_mbuf *pkts[BURST];
	uint16_t n;

	side_clock(s);
	n = rte_eth_rx_burst(s->port, 0, pkts, BURST);
	if (n > 0)
		rx_burst(s, pkts, n);
	if (n == 0 || ++s->idle % 64 == 0)
		km_tcp_poll(s->ep);
	tx_flush(s);
	return n;
}

static bool side_start(struct side *s)
{
	side_clock(s);
	if (s->st == NULL &&
	    km_tcp_connect(s->ep, RTE_IPV4(10, 0, 0, 2), SRC_PORT, s,
			   &s->conn) < 0)
		return false;
	tx_flush(s);
	return true;
}

/* One side's thread: the bench's only loop without a count, ended by the
 * connection's end or the run's time limit. Like dnet's worker, it naps
 * after SPIN_POLLS empty passes (10 us doubling to 100 us), so that on a
 * shared machine a waiting side gives its core to the other. */
static void *side_main(void *arg)
{
	struct side *s = arg;
	double t0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	uint32_t empty = 0, nap_us = NAP_MIN_US;

	rte_thread_register();
	if (!side_start(s))
		s->done = true;
	while (!s->done && !atomic_load(s->stop)) {
		if (side_step(s) > 0) {
			empty = 0;
			nap_us = NAP_MIN_US;
		} else if (++empty >= SPIN_POLLS) {
			usleep(nap_us);
			nap_us = nap_us * 2 > NAP_MAX_US ? NAP_MAX_US : nap_us * 2;
		}
	}
	s->cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	rte_thread_unregister();
	return NULL;
}

static struct side side_a, side_b;
static _Atomic bool stop_all;

/* Both endpoints on one thread: the source's pass, then the sink's. Its CPU
 * is split between them by nothing: it is the cost of both ends. */
static void *duo_main(void *arg)
{
	struct side *a = &side_a, *b = &side_b;
	double t0 = now_s(CLOCK_THREAD_CPUTIME_ID);

	(void)arg;
	rte_thread_register();
	if (!side_start(b) || !side_start(a))
		a->done = b->done = true;
	while (!(a->done && b->done) && !atomic_load(&stop_all)) {
		if (!b->done)
			side_step(b);
		if (!a->done)
			side_step(a);
	}
	a->cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	b->cpu = 0;
	rte_thread_unregister();
	return NULL;
}

static int port_make(const char *name, struct rte_ring *rx,
		     struct rte_ring *tx, struct rte_mempool *mp,
		     uint16_t *port)
{
	struct rte_eth_conf conf;
	int rc = rte_eth_from_rings(name, &rx, 1, &tx, 1, (unsigned)rte_socket_id());

	if (rc < 0)
		return -rte_errno;
	*port = (uint16_t)rc;
	memset(&conf, 0, sizeof(conf));
	if ((rc = rte_eth_dev_configure(*port, 1, 1, &conf)) < 0 ||
	    (rc = rte_eth_rx_queue_setup(*port, 0, RING_SLOTS, rte_socket_id(),
					 NULL, mp)) < 0 ||
	    (rc = rte_eth_tx_queue_setup(*port, 0, RING_SLOTS, rte_socket_id(),
					 NULL)) < 0 ||
	    (rc = rte_eth_dev_start(*port)) < 0)
		return rc;
	/* net_ring has no MTU to set (-ENOTSUP): it moves mbufs of any size. */
	rc = rte_eth_dev_set_mtu(*port, JUMBO_MTU);
	return rc == -ENOTSUP ? 0 : rc;
}

static int side_init(struct side *s, uint8_t last, bool offload,
		     const struct variant *var)
{
	struct km_tcp_config cfg;
	ssize_t need;

	km_tcp_config_default(&cfg);
	memcpy(cfg.mac, (uint8_t[6]){ 0x02, 0, 0, 0, 0, last }, 6);
	cfg.ip = RTE_IPV4(10, 0, 0, last);
	cfg.mtu = var->mtu;
	cfg.conns_max = 1;
	s->pool = var->mtu > 1500 ? &pool_jumbo : &pool_std;
	cfg.bufs_max = s->pool->n;
	cfg.ooo_max = 1024;
	cfg.snd_buf_bytes = s->st ? SRC_RING_BYTES : 64u << 10;
	cfg.tx_csum_offload = offload ? KM_TCP_TX_CSUM_IP | KM_TCP_TX_CSUM_TCP : 0;
	cfg.isn_secret = 0x5eed0000u + last;
	s->csum_offload = offload;
	s->ops = (struct km_tcp_ops){ .tx = ring_tx, .now_ms = ring_now_ms,
		.buf_free = ring_buf_free, .event = ring_event,
		.deliver = s->st ? NULL : sink_deliver,
		.accept = s->st ? src_accept : NULL };
	need = km_tcp_memsize(&cfg);
	if (need < 0)
		return (int)need;
	if (s->ep_mem != NULL && s->ep_bytes < (size_t)need) {
		free(s->ep_mem);
		s->ep_mem = NULL;
	}
	if (s->ep_mem == NULL) {
		s->ep_bytes = ((size_t)need + 63) & ~(size_t)63;
		s->ep_mem = aligned_alloc(64, s->ep_bytes);
	}
	if (s->ep_mem == NULL)
		return -ENOMEM;
	side_clock(s);
	return km_tcp_init(s->ep_mem, (size_t)need, &cfg, &s->ops, s, &s->ep);
}

/* The sink's segment queue: one iovec and id per delivered mbuf. */
static int sink_alloc(struct side *s, uint64_t total)
{
	s->seg_iov = calloc(SEGS_MAX, sizeof(*s->seg_iov));
	s->seg_ids = calloc(SEGS_MAX, sizeof(*s->seg_ids));
	s->total = total;
	return s->seg_iov && s->seg_ids ? 0 : -ENOMEM;
}

static int pool_make(struct pool *p, const char *name, uint32_t n,
		     uint16_t dataroom)
{
	p->by_id = calloc(n, sizeof(*p->by_id));
	p->mp = rte_pktmbuf_pool_create(name, n, POOL_CACHE, PRIV_BYTES,
					dataroom, (int)rte_socket_id());
	if (p->mp == NULL || p->by_id == NULL)
		return p->mp == NULL ? -rte_errno : -ENOMEM;
	p->n = n;
	rte_mempool_obj_iter(p->mp, set_id, p->by_id);
	return 0;
}

/* The ports and the pools, once for every round. */
static int ring_setup(struct side *a, struct side *b)
{
	struct rte_ring *ab, *ba;
	int rc;

	if ((rc = pool_make(&pool_std, "bench_pool", POOL_MBUFS,
			    RTE_MBUF_DEFAULT_BUF_SIZE)) < 0 ||
	    (rc = pool_make(&pool_jumbo, "bench_jumbo", JUMBO_MBUFS,
			    JUMBO_DATAROOM)) < 0)
		return rc;
	ab = rte_ring_create("bench_ab", RING_SLOTS, rte_socket_id(),
			     RING_F_SP_ENQ | RING_F_SC_DEQ);
	ba = rte_ring_create("bench_ba", RING_SLOTS, rte_socket_id(),
			     RING_F_SP_ENQ | RING_F_SC_DEQ);
	if (ab == NULL || ba == NULL)
		return -rte_errno;
	if ((rc = port_make("net_ring_a", ba, ab, pool_std.mp, &a->port)) < 0 ||
	    (rc = port_make("net_ring_b", ab, ba, pool_std.mp, &b->port)) < 0)
		return rc;
	return 0;
}

/* A fresh side for a round: what a round changed goes, frames a previous
 * round left in the rings too (they belong to its connection). */
static void side_reset(struct side *s)
{
	struct side keep = *s;
	struct rte_mbuf *pkts[BURST];

	for (uint32_t i = 0; i <= RING_SLOTS / BURST; i++) {
		uint16_t n = rte_eth_rx_burst(s->port, 0, pkts, BURST);

		if (n == 0)
			break;
		rte_pktmbuf_free_bulk(pkts, n);
	}
	memset(s, 0, sizeof(*s));
	s->name = keep.name;
	s->port = keep.port;
	s->ep_mem = keep.ep_mem;
	s->ep_bytes = keep.ep_bytes;
	s->st = keep.st;
	s->seg_iov = keep.seg_iov;
	s->seg_ids = keep.seg_ids;
	s->total = keep.total;
	s->stop = keep.stop;
}

static void ring_result(struct result *r, const struct side *a,
			const struct side *b, double t0,
			const struct variant *var)
{
	struct km_tcp_stats st, sa;

	km_tcp_get_stats(b->ep, &st);
	km_tcp_get_stats(a->ep, &sa);
	r->what = var->what;
	r->cores = var->one_thread ? 1 : 2;
	r->bytes = a->v.bytes;
	r->batches = a->v.batches;
	r->seconds = (a->t_end ? a->t_end : now_s(CLOCK_MONOTONIC)) - t0;
	r->cpu_src = b->cpu;
	r->cpu_sink = a->cpu;
	r->error = a->v.error ? a->v.error : a->end_res ? a->end_res : b->end_res;
	r->retransmits = st.tcp.retransmits;
	r->tx_drops = a->tx_drops + b->tx_drops;
	r->frames = st.frames_out + sa.frames_out;
}

static int ring_prepare(const struct stream *st)
{
	int rc;

	side_a.name = "sink";
	side_b.name = "source";
	side_b.st = st;
	side_a.stop = side_b.stop = &stop_all;
	if ((rc = sink_alloc(&side_a, st->bytes)) < 0)
		return rc;
	return ring_setup(&side_a, &side_b);
}

static int run_ring(bool offload, const struct variant *var, struct result *r)
{
	struct side *a = &side_a, *b = &side_b;
	pthread_t ta, tb;
	double t0;
	int rc;

	side_reset(a);
	side_reset(b);
	atomic_store(&stop_all, false);
	if ((rc = side_init(a, 1, offload, var)) < 0 ||
	    (rc = side_init(b, 2, offload, var)) < 0 ||
	    (rc = km_tcp_listen(b->ep, SRC_PORT)) < 0)
		return rc;
	t0 = now_s(CLOCK_MONOTONIC);
	/* Named for a profiler's --comm. */
	if (var->one_thread) {
		pthread_create(&ta, NULL, duo_main, NULL);
		pthread_setname_np(ta, "ring-both");
	} else {
		pthread_create(&tb, NULL, side_main, b);
		pthread_create(&ta, NULL, side_main, a);
		pthread_setname_np(tb, "ring-source");
		pthread_setname_np(ta, "ring-sink");
	}
	while (!(a->done && b->done) &&
	       now_s(CLOCK_MONOTONIC) - t0 < RUN_SECONDS_MAX)
		usleep(1000);
	atomic_store(&stop_all, true);
	pthread_join(ta, NULL);
	if (!var->one_thread)
		pthread_join(tb, NULL);
	ring_result(r, a, b, t0, var);
	return 0;
}
/* ---- run b: kernel TCP over loopback -------------------------------------- */

struct ksock {
	int fd;
	const struct stream *st;
	struct verify v;
	double cpu, t_end;
	int error;
};

static void *ksend_main(void *arg)
{
	struct ksock *k = arg;
	double t0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	uint64_t at = 0;

	while (at < k->st->bytes) { /* bounded: each pass sends or fails */
		ssize_t n = send(k->fd, k->st->buf + at, k->st->bytes - at, 0);

		if (n <= 0) {
			k->error = n < 0 ? -errno : -EPIPE;
			break;
		}
		at += (uint64_t)n;
	}
	shutdown(k->fd, SHUT_WR);
	k->cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	return NULL;
}

static void *krecv_main(void *arg)
{
	struct ksock *k = arg;
	double t0 = now_s(CLOCK_THREAD_CPUTIME_ID);
	uint8_t *buf = malloc(SOCK_RECV_BYTES);
	size_t have = 0;

	for (;;) { /* bounded by the stream: ends at EOF or an error */
		struct iovec iov;
		struct km_chain ch = { &iov, 1 };
		struct km_chain_cur cur = { 0, 0 };
		ssize_t n = recv(k->fd, buf + have, SOCK_RECV_BYTES - have, 0);

		if (n <= 0) {
			k->error = n < 0 ? -errno : 0;
			break;
		}
		have += (size_t)n;
		iov = (struct iovec){ buf, have };
		if (verify_chain(&k->v, &ch, &cur) < 0)
			break;
		/* Move the partial batch left over to the front. */
		size_t used = cur.seg == 1 ? have : cur.off;
		memmove(buf, buf + used, have - used);
		have -= used;
	}
	/* After an error the sender must not wait for us. */
	shutdown(k->fd, SHUT_RDWR);
	k->t_end = now_s(CLOCK_MONOTONIC);
	k->cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - t0;
	free(buf);
	return NULL;
}

static int tcp_pair(int fds[2])
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(l, 1) < 0 || getsockname(l, (struct sockaddr *)&sa, &len) < 0)
		return -errno;
	fds[0] = socket(AF_INET, SOCK_STREAM, 0);
	if (fds[0] < 0 || connect(fds[0], (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	fds[1] = accept(l, NULL, NULL);
	close(l);
	if (fds[1] < 0)
		return -errno;
	setsockopt(fds[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* pin: both threads on the CPU the caller runs on, so the receiver reads
 * what the sender wrote from the same caches, as the one-thread km_tcp run
 * does (and pays the context switches instead). */
static int run_kernel(const struct stream *st, bool pin, struct result *r)
{
	struct ksock tx = { .st = st }, rx = { .st = st };
	int fds[2] = { -1, -1 }, rc = tcp_pair(fds);
	pthread_attr_t attr;
	pthread_t tt, tr;
	double t0, softirq0;

	if (rc < 0)
		return rc;
	pthread_attr_init(&attr);
	if (pin) {
		cpu_set_t one;

		CPU_ZERO(&one);
		CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
		pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
	}
	tx.fd = fds[0];
	rx.fd = fds[1];
	softirq0 = ksoftirqd_s();
	t0 = now_s(CLOCK_MONOTONIC);
	pthread_create(&tr, &attr, krecv_main, &rx);
	pthread_create(&tt, &attr, ksend_main, &tx);
	pthread_join(tt, NULL);
	pthread_join(tr, NULL);
	pthread_attr_destroy(&attr);
	close(fds[0]);
	close(fds[1]);
	*r = (struct result){ .what = pin ? "kernel lo 1cpu" : "kernel lo 2cpu",
		.bytes = rx.v.bytes, .batches = rx.v.batches,
		.seconds = rx.t_end - t0, .cpu_src = tx.cpu, .cpu_sink = rx.cpu,
		.cpu_extra = ksoftirqd_s() - softirq0,
		.error = rx.v.error ? rx.v.error : rx.error ? rx.error : tx.error };
	return 0;
}

/* ---- main ---------------------------------------------------------------- */

/* The EAL pins the main thread to lcore 0, and threads inherit that:
 * put its mask back so that nothing is pinned. */
static int eal_start(void)
{
	char *args[] = { "bench-ring", "-l", "0", "--in-memory", "--no-pci",
			 "--no-telemetry", "--log-level=lib.eal:error", NULL };
	cpu_set_t all;
	int rc;

	if (sched_getaffinity(0, sizeof(all), &all) < 0)
		return -errno;
	rc = rte_eal_init(7, args);
	if (rc < 0)
		return -rte_errno;
	if (sched_setaffinity(0, sizeof(all), &all) < 0)
		return -errno;
	tsc_per_ms = rte_get_tsc_hz() / 1000;
	return tsc_per_ms ? 0 : -ENOTSUP;
}

static double per_core(const struct result *r)
{
	double cpu = r->cpu_src + r->cpu_sink;

	return cpu > 0 ? (double)r->bytes / 1e9 / cpu : 0.0;
}

static void print_row(const char *round, const struct result *r)
{
	double gb = (double)r->bytes / 1e9, cpu = r->cpu_src + r->cpu_sink;

	printf("%-6s %-16s %7" PRIu64 " %7.3f %6.3f %7.3f %7.3f %7.3f %8.3f %8.3f  %s\n",
	       round, r->what, r->batches, r->seconds, gb / r->seconds,
	       r->cpu_src, r->cpu_sink, r->cpu_extra, gb > 0 ? cpu / gb : 0.0,
	       per_core(r), r->error ? "FAILED" : "ok");
}

static bool result_ok(const struct result *r, const struct stream *st)
{
	return r->error == 0 && r->bytes == st->bytes &&
	       r->batches == st->batches;
}

/* The round with the median bytes per CPU second (ROUNDS is odd). */
static const struct result *median(const struct result *r, int stride)
{
	for (int i = 0; i < ROUNDS; i++) {
		int below = 0, above = 0;
		double x = per_core(&r[i * stride]);

		for (int k = 0; k < ROUNDS; k++) {
			double y = per_core(&r[k * stride]);

			below += k != i && y < x;
			above += k != i && y > x;
		}
		if (below <= ROUNDS / 2 && above <= ROUNDS / 2)
			return &r[i * stride];
	}
	return &r[0];
}

static void header(const struct stream *st, bool offload)
{
	printf("bench-ring: %" PRIu64 " bytes in %" PRIu64 " Kafka v2 batches "
	       "(avg %" PRIu64 " B), source -> sink, every batch verified at "
	       "the sink (km_batch_parse: CRC-32C; offsets in order); %d "
	       "rounds, runs interleaved, medians compared\n",
	       st->bytes, st->batches, st->bytes / st->batches, ROUNDS);
	printf("  km_tcp MTU NTHR: source km_tcp_listen + sink km_tcp_connect "
	       "on 2 ethdev ports over crossed rte_rings (net_ring), MTU 1500 "
	       "or 9000 (one mbuf a frame), %u KiB send ring, zero-copy "
	       "receive, checksums %s;\n"
	       "    2thr: a poll thread each (napping after %u empty polls, "
	       "as dnet's worker); 1thr: ONE poll thread drives both "
	       "endpoints, so its CPU time is the whole cost of both ends\n",
	       SRC_RING_BYTES >> 10,
	       offload ? "left to the port (as a NIC's offload; the sink's "
			 "CRC-32C still checks every Kafka byte)" :
			 "in software", SPIN_POLLS);
	printf("  kernel lo: send() thread -> recv() thread, TCP over "
	       "127.0.0.1 (MTU 65536), 1 MiB receive buffer; 2cpu: threads "
	       "free, 1cpu: both pinned to one CPU\n");
	printf("  cpu: thread CPU time (src, sink; 1thr: all in sink); "
	       "softirq: ksoftirqd's CPU during a kernel run (anyone's "
	       "softirqs; not in cpu_s/GB);\n  GB/cpu-s: GB per CPU second "
	       "= GB/s per polling core\n");
	printf("%-6s %-16s %7s %7s %6s %7s %7s %7s %8s %8s\n", "round",
	       "what", "batches", "seconds", "GB/s", "cpu_src", "cpu_snk",
	       "softirq", "cpu_s/GB", "GB/cpu-s");
}

/* Each km_tcp variant against the kernel's better configuration, per
 * polling core; the target is judged on the one-thread jumbo run
 * (one core, both ends). */
static void report(const struct result *ra, const struct result *rb)
{
	const struct result *b = NULL, *a[VARIANTS];
	double kb, kb_soft;

	for (int v = 0; v < VARIANTS; v++) {
		a[v] = median(ra + v, VARIANTS);
		print_row("median", a[v]);
	}
	for (int v = 0; v < KVARIANTS; v++) {
		const struct result *m = median(rb + v, KVARIANTS);

		print_row("median", m);
		if (b == NULL || per_core(m) > per_core(b))
			b = m;
	}
	kb = per_core(b);
	kb_soft = (double)b->bytes / 1e9 /
		  (b->cpu_src + b->cpu_sink + b->cpu_extra);
	printf("kernel reference: %s (the more GB per CPU second of the two)\n",
	       b->what);
	for (int v = 0; v < VARIANTS; v++)
		printf("%-16s vs kernel: GB per CPU second %.2fx, throughput "
		       "%.2fx; %" PRIu64 " frames, %" PRIu64 " retransmits, "
		       "%" PRIu64 " tx drops\n", a[v]->what,
		       per_core(a[v]) / kb,
		       (a[v]->bytes / a[v]->seconds) /
		       (b->bytes / b->seconds),
		       a[v]->frames, a[v]->retransmits, a[v]->tx_drops);
	printf("target (issue 18.4): km_tcp moves >= the kernel's bytes/s "
	       "per polling core: %s %.2f GB/s per core vs %s %.2f GB per "
	       "CPU second (%.2f with ksoftirqd's time) = %.2fx: %s\n",
	       a[VARIANTS - 1]->what, per_core(a[VARIANTS - 1]), b->what, kb,
	       kb_soft, per_core(a[VARIANTS - 1]) / kb,
	       per_core(a[VARIANTS - 1]) >= kb ? "met" :
	       "not met (see the rows: per-frame and copy costs)");
}

static int run_rounds(const struct stream *st, bool offload,
		      struct result *ra, struct result *rb)
{
	char name[8];
	int rc;

	for (int i = 0; i < ROUNDS; i++) {
		snprintf(name, sizeof(name), "%d", i + 1);
		for (int v = 0; v < VARIANTS; v++) {
			struct result *r = &ra[i * VARIANTS + v];

			if ((rc = run_ring(offload, &variants[v], r)) < 0) {
				printf("bench-ring: SKIP: net_ring endpoints: "
				       "%s\n", strerror(-rc));
				return EXIT_SKIP;
			}
			print_row(name, r);
		}
		for (int v = 0; v < KVARIANTS; v++) {
			struct result *r = &rb[i * KVARIANTS + v];

			if ((rc = run_kernel(st, v == 1, r)) < 0) {
				printf("bench-ring: kernel socket pair: %s\n",
				       strerror(-rc));
				return 1;
			}
			print_row(name, r);
		}
	}
	return 0;
}

/* bench-ring MIB hw|sw V: km_tcp variant V alone, ROUNDS times, rows only
 * (for a profiler). */
static int run_one(const struct stream *st, bool offload, int v)
{
	struct result r;
	bool ok = true;
	int rc;

	for (int i = 0; i < ROUNDS; i++) {
		if ((rc = run_ring(offload, &variants[v], &r)) < 0)
			return EXIT_SKIP;
		print_row("only", &r);
		ok = ok && result_ok(&r, st);
	}
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 512;
	bool offload = !(argc > 2 && strcmp(argv[2], "sw") == 0);

	struct result ra[ROUNDS * VARIANTS], rb[ROUNDS * KVARIANTS];
	struct stream st;
	bool ok = true;
	int rc;

	if (mib == 0 || mib > 4096) {
		fprintf(stderr, "usage: bench-ring [MiB 1..4096] [hw|sw] [variant 0..%d]\n", VARIANTS - 1);
		return 1;
	}
	if ((rc = eal_start()) < 0) {
		printf("bench-ring: SKIP: the DPDK EAL did not start (%s): "
		       "hugepages or permissions missing?\n", rte_strerror(-rc));
		return EXIT_SKIP;
	}
	if ((rc = stream_make(&st, mib << 20)) < 0) {
		printf("bench-ring: cannot build the batches: %s\n", strerror(-rc));
		return 1;
	}
	if ((rc = ring_prepare(&st)) < 0) {
		printf("bench-ring: SKIP: net_ring ports or mbuf pools: %s "
		       "(hugepages short?)\n", rte_strerror(-rc));
		return EXIT_SKIP;
	}
	header(&st, offload);
	if (argc > 3 && atoi(argv[3]) >= 0 && atoi(argv[3]) < VARIANTS)
		return run_one(&st, offload, atoi(argv[3]));
	if ((rc = run_rounds(&st, offload, ra, rb)) != 0)
		return rc;
	report(ra, rb);
	for (int i = 0; i < ROUNDS * VARIANTS; i++)
		ok = ok && result_ok(&ra[i], &st);
	for (int i = 0; i < ROUNDS * KVARIANTS; i++)
		ok = ok && result_ok(&rb[i], &st);
	printf("bench-ring: %s\n", ok ? "PASS: every batch of every run "
	       "arrived and verified" : "FAIL: a run lost or broke batches");
	rte_eal_cleanup();
	return ok ? 0 : 1;
}
