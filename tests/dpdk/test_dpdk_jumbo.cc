/* Goal: jumbo frames through the DPDK backend (issue 18.4). With
 * dpdk.mtu=9000 on a port that has no MTU of its own to set (net_memif),
 * the backend's endpoint offers MSS 8960, the port hands it 9014-byte
 * frames in one mbuf each, and a stream sent to it arrives byte-equal;
 * with dpdk.mtu unset the same port stays at MTU 1500.
 * Method: one process, a net_memif pair on one socket (server and client,
 * each copying into its own pool, as memif does between two processes):
 * the backend under test (km_net with KM_NET_DPDK, as kmirrord's fetch
 * sessions use it) on the client port connects to a km_tcp endpoint this
 * test drives on the server port (listening, MTU 9000, streaming 6 MiB of a
 * pattern, software checksums both ways: memif offloads none). One thread
 * polls both until every byte is in or a deadline passes. The peer's view
 * of the handshake (its connection's snd_mss: the MSS our SYN offered,
 * bounded by its own) and the backend's port counters (frame bytes per
 * frame in) say which frames went. That pair's slots hold 16 KiB
 * (bsize=16384). A second pair keeps memif's default 2 KiB slots, where a
 * 9014-byte frame would be chained over five and DPDK's memif leaves the
 * chain flag on slots it reuses: there the backend must lower its MTU to
 * what one slot holds (2034).
 * On a link that loses nothing, once no frame moves, the backend's
 * FRAMES_IN is exactly the frames the peer's port took for sending, and
 * the peer's received frames exactly the backend's FRAMES_OUT (the two
 * sides' counters must agree for an operator to trust them): each case
 * polls both sides until nothing moved for 300 ms (and 1,000 rounds) and
 * compares. A port that takes nothing for a while (its link not up yet,
 * its peer's ring full: the test switch KMIRROR_TEST_DPDK_TX_REFUSE) must
 * hold the frames it was given until it takes them, not drop them (a
 * dropped ARP request, SYN or ACK cost the flow a 1 s timeout).
 * Skips without root or hugepages. */
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

/* DPDK 22.11's headers shadow a struct with a function (rte_mp_reply):
 * fine in C, a -Wshadow error in C++. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#pragma GCC diagnostic pop

#include "common/clock.h"
#include "dataplane/net/dpdk/dpdk.h"
#include "dataplane/net/net.h"
#include "dataplane/net/tcp/tcp.h"
#include "tests/support/test_hooks.h"

namespace {

constexpr uint16_t kPeerPort = 9092;
constexpr uint32_t kPoolMbufs = 2047;
constexpr uint16_t kDataroom = RTE_PKTMBUF_HEADROOM + 10240;
constexpr size_t kStreamBytes = 6u << 20;
constexpr uint32_t kBurst = 32;

std::string sock_path()
{
	return "/tmp/km-dpdk-jumbo-" + std::to_string(getpid()) + ".sock";
}

/* The EAL with the memif pair, once per process. "" or why not. */
std::string eal_up()
{
	static std::string why = "unset";
	if (why != "unset")
		return why;
	if (geteuid() != 0)
		return why = "needs root (hugepages, memif socket)";
	std::string sock = sock_path();
	std::vector<std::string> a = {
		"test-dpdk-jumbo", "-l", "0", "--in-memory", "--no-pci",
		"--no-telemetry", "--log-level=lib.eal:error",
		"--vdev=net_memif1,role=server,id=0,bsize=16384,socket=" + sock,
		"--vdev=net_memif0,role=client,id=0,bsize=16384,socket=" + sock,
		"--vdev=net_memif3,role=server,id=0,socket=" + sock + "2",
		"--vdev=net_memif2,role=client,id=0,socket=" + sock + "2",
	};
	std::vector<char *> argv;
	for (auto &s : a)
		argv.push_back(s.data());
	int rc = km_dpdk_eal_init((int)argv.size(), argv.data());
	why = rc < 0 ? "the EAL did not start (hugepages?): " +
			       std::string(strerror(-rc))
		     : "";
	return why;
}

/* The peer: a km_tcp endpoint on net_memif1 (or 3) that streams `data`
 * to the first connection it accepts. Buffer ids live in the mbufs'
 * private area. frames_out: frames its port took for sending. */
struct Peer {
	explicit Peer(const char *n) : name(n) {}
	std::string name;
	uint16_t port = 0;
	uint64_t frames_in = 0, frames_out = 0;
	rte_mempool *pool = nullptr;
	std::vector<rte_mbuf *> by_id;
	std::vector<rte_mbuf *> tx;
	km_tcp_ops ops{};
	void *mem = nullptr;
	km_tcp_ep *ep = nullptr;
	km_tcp_conn *conn = nullptr;
	std::vector<uint8_t> data;
	size_t queued = 0;
	bool ended = false;
};

uint32_t &mbuf_id(rte_mbuf *m)
{
	return *(uint32_t *)rte_mbuf_to_priv(m);
}

void set_id(rte_mempool *, void *arg, void *obj, unsigned idx)
{
	auto *p = (Peer *)arg;
	mbuf_id((rte_mbuf *)obj) = idx;
	p->by_id[idx] = (rte_mbuf *)obj;
}

void feed(Peer *p)
{
	while (p->queued < p->data.size()) {
		iovec v = { p->data.data() + p->queued, p->data.size() - p->queued };
		ssize_t n = km_tcp_send(p->conn, &v, 1);
		if (n <= 0)
			return;
		p->queued += (size_t)n;
	}
}

int peer_tx(void *ctx, const iovec *iov, uint32_t n, uint32_t)
{
	auto *p = (Peer *)ctx;
	size_t total = 0;
	for (uint32_t i = 0; i < n; i++)
		total += iov[i].iov_len;
	rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
	char *d = m != nullptr ? rte_pktmbuf_append(m, (uint16_t)total) : nullptr;
	if (d == nullptr) {
		rte_pktmbuf_free(m);
		return -ENOBUFS;
	}
	for (uint32_t i = 0; i < n; d += iov[i].iov_len, i++)
		memcpy(d, iov[i].iov_base, iov[i].iov_len);
	p->tx.push_back(m);
	return 0;
}

uint64_t peer_now(void *) { return km_clock_ms(); }

void peer_free(void *ctx, const uint32_t *ids, uint32_t n)
{
	auto *p = (Peer *)ctx;
	for (uint32_t i = 0; i < n; i++)
		rte_pktmbuf_free_seg(p->by_id[ids[i]]);
}

void peer_event(void *ctx, km_tcp_conn *c, km_tcp_event ev, int)
{
	auto *p = (Peer *)ctx;
	if (ev == KM_TCP_EV_SENT)
		feed(p);
	else if (ev == KM_TCP_EV_PEER_FIN)
		km_tcp_close(c);
	else if (ev == KM_TCP_EV_CLOSED)
		p->ended = true;
}

void peer_accept(void *ctx, km_tcp_conn *c)
{
	auto *p = (Peer *)ctx;
	p->conn = c;
	feed(p);
}

/* The peer's port and endpoint; "" or what failed. */
std::string peer_up(Peer *p)
{
	if (rte_eth_dev_get_port_by_name(p->name.c_str(), &p->port) != 0)
		return "no " + p->name;
	if (p->pool == nullptr) {
		p->by_id.assign(kPoolMbufs, nullptr);
		p->pool = rte_pktmbuf_pool_create(("jp_" + p->name).c_str(), kPoolMbufs, 0,
						  RTE_ALIGN(sizeof(uint32_t), RTE_MBUF_PRIV_ALIGN),
						  kDataroom, (int)rte_socket_id());
		if (p->pool == nullptr)
			return "peer pool (hugepages?)";
		rte_mempool_obj_iter(p->pool, set_id, p);
		rte_eth_conf conf{};
		if (rte_eth_dev_configure(p->port, 1, 1, &conf) < 0 ||
		    rte_eth_rx_queue_setup(p->port, 0, 1024, rte_socket_id(), nullptr, p->pool) < 0 ||
		    rte_eth_tx_queue_setup(p->port, 0, 1024, rte_socket_id(), nullptr) < 0 ||
		    rte_eth_dev_start(p->port) < 0)
			return "peer port set-up";
	}
	km_tcp_config cfg;
	km_tcp_config_default(&cfg);
	memcpy(cfg.mac, (const uint8_t[6]){ 0x02, 0, 0, 0x77, 0x20, 2 }, 6);
	cfg.ip = ntohl(inet_addr("10.77.20.2"));
	cfg.mtu = 9000;
	cfg.conns_max = 4;
	cfg.bufs_max = kPoolMbufs;
	cfg.snd_buf_bytes = 1u << 20;
	p->ops = km_tcp_ops{};
	p->ops.tx = peer_tx;
	p->ops.now_ms = peer_now;
	p->ops.buf_free = peer_free;
	p->ops.event = peer_event;
	p->ops.accept = peer_accept;
	ssize_t need = km_tcp_memsize(&cfg);
	free(p->mem); /* the previous case's endpoint */
	p->mem = aligned_alloc(64, ((size_t)need + 63) & ~(size_t)63);
	if (km_tcp_init(p->mem, (size_t)need, &cfg, &p->ops, p, &p->ep) < 0 ||
	    km_tcp_listen(p->ep, kPeerPort) < 0)
		return "peer endpoint";
	return "";
}

void peer_step(Peer *p)
{
	rte_mbuf *pkts[kBurst];
	uint16_t n = rte_eth_rx_burst(p->port, 0, pkts, kBurst);
	p->frames_in += n;
	for (uint16_t i = 0; i < n; i++) {
		iovec iov[KM_TCP_FRAME_SEGS_MAX];
		uint32_t ids[KM_TCP_FRAME_SEGS_MAX], k = 0;
		for (rte_mbuf *s = pkts[i]; s != nullptr && k < KM_TCP_FRAME_SEGS_MAX; s = s->next, k++) {
			iov[k] = { rte_pktmbuf_mtod(s, void *), s->data_len };
			ids[k] = mbuf_id(s);
		}
		km_chain ch = { iov, k };
		km_tcp_input(p->ep, &ch, ids, 0);
	}
	km_tcp_input_burst_end(p->ep);
	km_tcp_poll(p->ep);
	uint16_t sent = p->tx.empty() ? 0 :
		rte_eth_tx_burst(p->port, 0, p->tx.data(), (uint16_t)p->tx.size());
	p->frames_out += sent;
	/* What the port did not take (its link not up yet) waits for the
	 * next step, as the backend's frames do: dropped, a SYN-ACK cost
	 * the case a 1 s retransmission timeout. */
	p->tx.erase(p->tx.begin(), p->tx.begin() + sent);
}

/* The backend under test, as kmirrord's fetch sessions see it. */
struct Client {
	std::vector<uint8_t> got;
	int connect_res = 1;
	int close_res = 1;
	km_net *net = nullptr;
};

void on_connect(km_net_conn *c, int res)
{
	((Client *)km_net_conn_ctx(c))->connect_res = res;
}

void on_recv(km_net_conn *c, const km_chain *d, const uint32_t *ids)
{
	auto *cl = (Client *)km_net_conn_ctx(c);
	for (uint32_t i = 0; i < d->n_iov; i++) {
		auto *b = (const uint8_t *)d->iov[i].iov_base;
		cl->got.insert(cl->got.end(), b, b + d->iov[i].iov_len);
	}
	km_net_release(cl->net, ids, d->n_iov);
}

void on_close(km_net_conn *c, int reason)
{
	((Client *)km_net_conn_ctx(c))->close_res = reason;
}

struct Outcome {
	std::vector<uint8_t> sent, got;
	uint16_t peer_snd_mss = 0;
	km_net_stats st{};
	uint64_t peer_frames_in = 0, peer_frames_out = 0;
	std::string err;
};

/* Their ports and pools live as long as the EAL. */
Peer peer_big("net_memif1"), peer_small("net_memif3");

/* Poll both sides until no frame moved for 300 ms and 1,000 rounds (a
 * lossless link is then empty both ways), at most 20 s; st: the
 * backend's counters then. */
void settle(km_net *net, Peer *p, km_net_stats *st)
{
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	auto quiet_since = std::chrono::steady_clock::now();
	uint64_t last = UINT64_MAX, rounds = 0;

	for (;;) {
		km_net_poll(net);
		peer_step(p);
		km_net_get_stats(net, st);
		uint64_t moved = st->frames_in + st->frames_out + p->frames_in + p->frames_out;
		auto now = std::chrono::steady_clock::now();
		if (moved != last) {
			last = moved;
			quiet_since = now;
			rounds = 0;
		} else if (++rounds >= 1000 &&
			   now - quiet_since >= std::chrono::milliseconds(300)) {
			return;
		}
		if (now > deadline)
			return;
	}
}

/* Stream the pattern from the peer on `pp` to a backend on `port` with
 * dpdk.mtu = mtu. */
Outcome stream(uint32_t mtu, Peer &peer = peer_big, const char *port = "net_memif0")
{
	Outcome o;
	if ((o.err = peer_up(&peer)) != "")
		return o;
	peer.data.resize(kStreamBytes);
	for (size_t i = 0; i < peer.data.size(); i++)
		peer.data[i] = (uint8_t)(i * 2654435761u >> 13);
	peer.queued = 0;
	peer.conn = nullptr;
	peer.ended = false;
	peer.frames_in = peer.frames_out = 0; /* from the backend's start */
	o.sent = peer.data;

	km_net_config nc{};
	nc.kind = KM_NET_DPDK;
	nc.conns_max = 4;
	nc.rx_buf_count = 16383;
	nc.send_queue_max = 8;
	nc.send_iov_max = 8;
	nc.connect_timeout_ms = 10000;
	nc.dpdk.port = port;
	nc.dpdk.ip_be = inet_addr("10.77.20.1");
	nc.dpdk.netmask_be = inet_addr("255.255.255.0");
	nc.dpdk.mtu = mtu;
	Client cl;
	int rc = km_net_create(&nc, &cl.net);
	if (rc < 0) {
		o.err = "km_net_create: " + std::to_string(rc);
		return o;
	}
	km_net_handler h{ on_connect, nullptr, on_recv, on_close };
	km_net_conn *conn = nullptr;
	rc = km_net_connect(cl.net, "10.77.20.2", kPeerPort, &h, &cl, &conn);
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
	/* 1: not reported yet; the loop ends at an error or a close. */
	while (rc == 0 && cl.got.size() < kStreamBytes && cl.close_res == 1 &&
	       (cl.connect_res == 1 || cl.connect_res == 0) &&
	       std::chrono::steady_clock::now() < deadline) {
		km_net_poll(cl.net);
		peer_step(&peer);
	}
	if (rc < 0 || cl.connect_res != 0)
		o.err = "connect: " + std::to_string(rc < 0 ? rc : cl.connect_res);
	if (o.err.empty() && cl.got.size() == kStreamBytes)
		settle(cl.net, &peer, &o.st);
	o.peer_frames_in = peer.frames_in;
	o.peer_frames_out = peer.frames_out;
	if (peer.conn != nullptr) {
		km_tcp_conn_info i;
		km_tcp_conn_get_info(peer.conn, &i);
		o.peer_snd_mss = i.snd_mss;
		km_tcp_abort(peer.conn);
		peer_step(&peer);
	}
	km_net_get_stats(cl.net, &o.st);
	o.got = std::move(cl.got);
	km_net_destroy(cl.net);
	return o;
}

class DpdkJumbo : public ::testing::Test {
protected:
	void SetUp() override
	{
		std::string why = eal_up();
		if (!why.empty())
			GTEST_SKIP() << why;
	}
	static void TearDownTestSuite()
	{
		/* Each peer port stops once memif's interrupt thread has taken
		 * its client's disconnect (link down): stopped while that
		 * thread handles it, the EAL's interrupt thread crashed in
		 * memif's handler about once in 15 runs. */
		for (Peer *p : { &peer_big, &peer_small }) {
			if (p->pool == nullptr)
				continue;
			auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
			rte_eth_link l{};
			while (rte_eth_link_get_nowait(p->port, &l) == 0 &&
			       l.link_status == RTE_ETH_LINK_UP &&
			       std::chrono::steady_clock::now() < deadline)
				std::this_thread::yield();
			rte_eth_dev_stop(p->port);
		}
		free(peer_small.mem);
		peer_small.mem = nullptr;
		free(peer_big.mem);
		peer_big.mem = nullptr;
		unlink(sock_path().c_str());
		unlink((sock_path() + "2").c_str());
		km_dpdk_eal_cleanup();
	}
};

TEST_F(DpdkJumbo, Mtu9000FramesArriveWholeAndByteEqual)
{
	Outcome o = stream(9000);
	ASSERT_EQ("", o.err);
	ASSERT_EQ(o.sent.size(), o.got.size()) << "the stream stopped short";
	EXPECT_TRUE(o.sent == o.got) << "bytes differ";
	EXPECT_EQ(8960, o.peer_snd_mss) << "our SYN offered MTU 9000's MSS";
	ASSERT_GT(o.st.frames_in, 0u);
	EXPECT_GT(o.st.frame_bytes_in / o.st.frames_in, 1514u)
		<< "no frame past MTU 1500's: " << o.st.frame_bytes_in << " bytes in "
		<< o.st.frames_in << " frames";
	EXPECT_EQ(0u, o.st.frames_dropped);
	RecordProperty("avg_frame_bytes", (int)(o.st.frame_bytes_in / o.st.frames_in));
	EXPECT_LE(o.st.frame_bytes_in / o.st.frames_in, 9014u) << "frames past the MTU";
	EXPECT_EQ(o.peer_frames_out, o.st.frames_in) << "the backend's FRAMES_IN against the frames the peer's port sent";
	EXPECT_EQ(o.peer_frames_in, o.st.frames_out) << "the frames the peer's port received against the backend's FRAMES_OUT";
	EXPECT_EQ(0u, o.st.tx_dropped);
}

/* memif's default slots (2 KiB): the MTU is lowered to one slot's 2034
 * bytes, the stream arrives whole, and each side counts what the other
 * does. With MTU 9000 frames over five slots the backend's port would
 * read frames again past the ring's tail: FRAMES_IN above what the peer
 * sent. */
TEST_F(DpdkJumbo, Mtu9000OnDefaultMemifSlotsIsLoweredAndCountsAgree)
{
	Outcome o = stream(9000, peer_small, "net_memif2");
	ASSERT_EQ("", o.err);
	ASSERT_EQ(o.sent.size(), o.got.size()) << "the stream stopped short";
	EXPECT_TRUE(o.sent == o.got) << "bytes differ";
	EXPECT_EQ(2034 - 40, o.peer_snd_mss) << "our SYN offered one memif slot's MSS";
	ASSERT_GT(o.st.frames_in, 0u);
	EXPECT_LE(o.st.frame_bytes_in / o.st.frames_in, 2048u);
	EXPECT_EQ(o.peer_frames_out, o.st.frames_in) << "the backend's FRAMES_IN against the frames the peer's port sent";
	EXPECT_EQ(o.peer_frames_in, o.st.frames_out) << "the frames the peer's port received against the backend's FRAMES_OUT";
	EXPECT_EQ(0u, o.st.frames_dropped);
}

TEST_F(DpdkJumbo, UnsetKeepsMtu1500)
{
	Outcome o = stream(0);
	ASSERT_EQ("", o.err);
	ASSERT_EQ(o.sent.size(), o.got.size()) << "the stream stopped short";
	EXPECT_TRUE(o.sent == o.got) << "bytes differ";
	EXPECT_EQ(1460, o.peer_snd_mss);
	ASSERT_GT(o.st.frames_in, 0u);
	EXPECT_LE(o.st.frame_bytes_in / o.st.frames_in, 1514u);
}

/* The first 300 transmit bursts take nothing: the ARP request (then
 * whatever follows) waits in the backend and goes once the port takes
 * it. Nothing is dropped, the stream arrives whole, and the counts of
 * both sides agree (a frame held is counted out once, when it goes). */
TEST_F(DpdkJumbo, FramesThePortRefusesWaitInsteadOfBeingDropped)
{
	KM_NEEDS_TEST_HOOKS();
	setenv("KMIRROR_TEST_DPDK_TX_REFUSE", "300", 1);
	Outcome o = stream(9000, peer_small, "net_memif2");
	unsetenv("KMIRROR_TEST_DPDK_TX_REFUSE");
	ASSERT_EQ("", o.err);
	ASSERT_EQ(o.sent.size(), o.got.size()) << "the stream stopped short";
	EXPECT_TRUE(o.sent == o.got) << "bytes differ";
	EXPECT_EQ(0u, o.st.tx_dropped) << "frames the port refused were dropped";
	EXPECT_EQ(o.peer_frames_out, o.st.frames_in);
	EXPECT_EQ(o.peer_frames_in, o.st.frames_out);
}

} // namespace
