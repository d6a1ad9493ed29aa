// Goal: the TCP endpoint's building blocks and its start-up are right:
// the Internet checksum over any chain split, configuration checks, ARP
// (resolve, reply, cache, timeout, pacing, gateway), and the 3-way
// handshake with the MSS and window-scale options parsed and sent.
// Method: crafted frames into km_tcp_input() through the rig (a fake port
// and a fake clock); every frame the endpoint sends is parsed and its
// checksums checked by an independent RFC 1071 implementation.
#include <gtest/gtest.h>

#include <cerrno>
#include <random>

#include "dataplane/net/tcp/arp.h"
#include "dataplane/net/tcp/csum.h"
#include "tcp_rig.h"

using namespace tcptest;

namespace {

TEST(TcpCsum, ChainMatchesOracleAtEverySplit)
{
	std::mt19937 rng(7);
	for (int round = 0; round < 300; round++) {
		// Some jumbo-sized, some all ones: the 64-bit sums carry often.
		size_t n = 1 + rng() % (round % 10 == 0 ? 9000 : 300);
		Bytes b(n);
		for (auto &x : b)
			x = round % 7 == 0 ? 0xff : (uint8_t)rng();
		// Oracle: checksum of the bytes with a start sum.
		uint32_t start = rng() & 0xffff;
		uint16_t want = OracleSum(b.data(), n, start);
		// Split into 1..5 segments at random points.
		std::vector<iovec> iov;
		size_t at = 0;
		while (at < n) {
			size_t len = 1 + rng() % (n - at);
			if (rng() % 3 == 0)
				iov.push_back({ b.data() + at, 0 });
			iov.push_back({ b.data() + at, len });
			at += len;
		}
		km_chain ch = { iov.data(), (uint32_t)iov.size() };
		// Our sums are in host (little-endian) order: feed the start
		// the same way.
		uint32_t sum = __builtin_bswap16((uint16_t)start);
		ASSERT_EQ(0, km_csum_chain(&ch, km_chain_start(&ch), n, &sum));
		uint16_t got = __builtin_bswap16(km_csum_final(sum));
		ASSERT_EQ(want, got) << "n=" << n << " segs=" << iov.size();
		// Flat buffer at an odd address, same answer.
		Bytes odd(n + 1);
		std::copy(b.begin(), b.end(), odd.begin() + 1);
		uint32_t s2 = __builtin_bswap16((uint16_t)start);
		s2 = km_csum_add(s2, odd.data() + 1, n);
		ASSERT_EQ(want, __builtin_bswap16(km_csum_final(s2)));
	}
}

TEST(TcpCsum, ShortChainIsRange)
{
	uint8_t b[4] = { 1, 2, 3, 4 };
	iovec iov = { b, 4 };
	km_chain ch = { &iov, 1 };
	uint32_t sum = 0;
	EXPECT_EQ(-ERANGE, km_csum_chain(&ch, km_chain_start(&ch), 5, &sum));
}

TEST(TcpConfig, RejectsInvalid)
{
	km_tcp_config base;
	km_tcp_config_default(&base);
	memcpy(base.mac, kOurMac, 6);
	base.ip = kOurIp;
	ASSERT_GT(km_tcp_memsize(&base), 0);

	std::vector<std::function<void(km_tcp_config &)>> bad = {
		[](km_tcp_config &c) { c.mac[0] = 0x01; },	   // multicast
		[](km_tcp_config &c) { memset(c.mac, 0, 6); },
		[](km_tcp_config &c) { c.ip = 0; },
		[](km_tcp_config &c) { c.ip = IP(224, 0, 0, 1); },
		[](km_tcp_config &c) { c.netmask = 0xff00ff00u; },
		[](km_tcp_config &c) { c.gateway = IP(10, 9, 9, 9); },
		[](km_tcp_config &c) { c.gateway = kOurIp; },
		[](km_tcp_config &c) { c.mtu = 500; },
		[](km_tcp_config &c) { c.mtu = 9001; },
		[](km_tcp_config &c) { c.conns_max = 0; },
		[](km_tcp_config &c) { c.port_min = 100; c.port_max = 101; },
		[](km_tcp_config &c) { c.snd_buf_bytes = 3000; },
		[](km_tcp_config &c) { c.rcv_buf_bytes = 100; },
		[](km_tcp_config &c) { c.ooo_max = 0; },
		[](km_tcp_config &c) { c.bufs_max = 0; },
		[](km_tcp_config &c) { c.rto_min_ms = 2000; },
		[](km_tcp_config &c) { c.rto_max_ms = 10; },
		[](km_tcp_config &c) { c.close_timeout_ms = 0; },
		[](km_tcp_config &c) { c.tx_csum_offload = 4; },
		[](km_tcp_config &c) { c.keepalive_idle_ms = 5; c.keepalive_probes = 0; },
	};
	for (size_t i = 0; i < bad.size(); i++) {
		km_tcp_config c = base;
		bad[i](c);
		EXPECT_EQ(-EINVAL, km_tcp_memsize(&c)) << "case " << i;
	}
	// init: memory too small or misaligned, ops incomplete.
	ssize_t need = km_tcp_memsize(&base);
	void *mem = aligned_alloc(64, (size_t)need + 64);
	km_tcp_ops ops{};
	km_tcp_ep *ep = nullptr;
	EXPECT_EQ(-EINVAL, km_tcp_init(mem, (size_t)need, &base, &ops, nullptr, &ep));
	ops.tx = [](void *, const iovec *, uint32_t, uint32_t) { return 0; };
	ops.now_ms = [](void *) -> uint64_t { return 1; };
	ops.buf_free = [](void *, const uint32_t *, uint32_t) {};
	EXPECT_EQ(-EINVAL, km_tcp_init(mem, (size_t)need - 1, &base, &ops, nullptr, &ep));
	EXPECT_EQ(-EINVAL, km_tcp_init((char *)mem + 8, (size_t)need, &base, &ops, nullptr, &ep));
	EXPECT_EQ(0, km_tcp_init(mem, (size_t)need, &base, &ops, nullptr, &ep));
	free(mem);
}

TEST(TcpConnect, RejectsBadTargetsAndFullTable)
{
	Rig r;
	km_tcp_conn *c;
	EXPECT_EQ(-EINVAL, km_tcp_connect(r.ep, 0, 80, nullptr, &c));
	EXPECT_EQ(-EINVAL, km_tcp_connect(r.ep, kOurIp, 80, nullptr, &c));
	EXPECT_EQ(-EINVAL, km_tcp_connect(r.ep, IP(239, 1, 1, 1), 80, nullptr, &c));
	EXPECT_EQ(-EINVAL, km_tcp_connect(r.ep, IP(10, 0, 0, 255), 80, nullptr, &c));
	EXPECT_EQ(-EINVAL, km_tcp_connect(r.ep, kPeerIp, 0, nullptr, &c));
	for (uint32_t i = 0; i < r.cfg.conns_max; i++)
		ASSERT_EQ(0, km_tcp_connect(r.ep, kPeerIp, 80, nullptr, &c));
	EXPECT_EQ(-ENOBUFS, km_tcp_connect(r.ep, kPeerIp, 80, nullptr, &c));
	EXPECT_EQ(r.cfg.conns_max, r.Stats().conns_used);
}

// ---- ARP -----------------------------------------------------------------

TEST(TcpArp, ResolveThenSyn)
{
	Rig r;
	km_tcp_conn *c = nullptr;
	ASSERT_EQ(0, km_tcp_connect(r.ep, kPeerIp, kPeerPort, nullptr, &c));
	// Only the ARP request goes out: the SYN waits for the MAC.
	ASSERT_EQ(1u, r.tx.size());
	Out req = r.Pop();
	ASSERT_TRUE(req.is_arp());
	EXPECT_EQ(0, memcmp(req.dst_mac, kBcast, 6));
	EXPECT_EQ(0, memcmp(req.src_mac, kOurMac, 6));
	EXPECT_EQ(1, req.arp_op);
	EXPECT_EQ(0, memcmp(req.sha, kOurMac, 6));
	EXPECT_EQ(kOurIp, req.spa);
	EXPECT_EQ(kPeerIp, req.tpa);
	EXPECT_EQ(60u, req.raw.size());
	EXPECT_EQ(1u, r.Stats().arp_requests_out);
	EXPECT_EQ(1u, r.Stats().arp_misses);

	// The reply sends the SYN at once, to the peer's MAC.
	ASSERT_EQ(0, r.Input(BuildArp(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp)));
	ASSERT_EQ(1u, r.tx.size());
	Out syn = r.Pop();
	ASSERT_TRUE(syn.is_tcp());
	EXPECT_EQ(SYN, syn.flags);
	EXPECT_EQ(0, memcmp(syn.dst_mac, kPeerMac, 6));
	EXPECT_EQ(1u, r.Stats().arp_resolved);
	// Every frame's buffers are back at the port.
	EXPECT_EQ(r.BufsTotal(), r.BufsAtPort());
}

TEST(TcpArp, AnswersRequestsForUsOnly)
{
	Rig r;
	// For us: a reply to the asker, and the asker is cached (no request
	// when we then connect to it).
	ASSERT_EQ(0, r.Input(BuildArp(1, kBcast, kPeerMac, kPeerIp, kBcast, kOurIp)));
	ASSERT_EQ(1u, r.tx.size());
	Out rep = r.Pop();
	ASSERT_TRUE(rep.is_arp());
	EXPECT_EQ(2, rep.arp_op);
	EXPECT_EQ(0, memcmp(rep.dst_mac, kPeerMac, 6));
	EXPECT_EQ(0, memcmp(rep.sha, kOurMac, 6));
	EXPECT_EQ(kOurIp, rep.spa);
	EXPECT_EQ(0, memcmp(rep.tha, kPeerMac, 6));
	EXPECT_EQ(kPeerIp, rep.tpa);
	EXPECT_EQ(1u, r.Stats().arp_replies_out);

	// For another host: no answer, not cached.
	uint8_t other[6] = { 0x02, 0, 0, 0, 0, 0x33 };
	ASSERT_EQ(0, r.Input(BuildArp(1, kBcast, other, IP(10, 0, 0, 3), kBcast, IP(10, 0, 0, 9))));
	EXPECT_TRUE(r.tx.empty());
	EXPECT_EQ(1u, r.Stats().arp_ignored);

	km_tcp_conn *c;
	ASSERT_EQ(0, km_tcp_connect(r.ep, kPeerIp, kPeerPort, nullptr, &c));
	Out syn = r.Pop();
	EXPECT_TRUE(syn.is_tcp()) << "the asker was cached";
	ASSERT_EQ(0, km_tcp_connect(r.ep, IP(10, 0, 0, 3), kPeerPort, nullptr, &c));
	EXPECT_TRUE(r.Pop().is_arp()) << "a host we only overheard was not";
}

TEST(TcpArp, BadPacketsAreCountedAndDropped)
{
	Rig r;
	Bytes good = BuildArp(1, kBcast, kPeerMac, kPeerIp, kBcast, kOurIp);
	Bytes f = good;
	f[14 + 1] = 6; // hardware type 6
	EXPECT_EQ(-EBADMSG, r.Input(f));
	f = good;
	f[14 + 4] = 8; // hardware length 8
	EXPECT_EQ(-EBADMSG, r.Input(f));
	f = good;
	f[14 + 7] = 3; // op 3
	EXPECT_EQ(-EBADMSG, r.Input(f));
	f = good;
	f.resize(14 + 20); // truncated
	EXPECT_EQ(-EBADMSG, r.Input(f));
	EXPECT_EQ(4u, r.Drops(KM_TCP_DROP_ARP_BAD));
	// A sender claiming our address, or a multicast sender MAC.
	EXPECT_EQ(-EBADMSG, r.Input(BuildArp(1, kBcast, kPeerMac, kOurIp, kBcast, kOurIp)));
	uint8_t mc[6] = { 0x01, 0, 0x5e, 0, 0, 1 };
	EXPECT_EQ(-EBADMSG, r.Input(BuildArp(1, kBcast, mc, kPeerIp, kBcast, kOurIp, kPeerMac)));
	EXPECT_EQ(2u, r.Drops(KM_TCP_DROP_ARP_SRC));
	// Unicast to another MAC.
	uint8_t other[6] = { 0x02, 0, 0, 0, 0, 0x44 };
	EXPECT_EQ(-EBADMSG, r.Input(BuildArp(1, other, kPeerMac, kPeerIp, kBcast, kOurIp)));
	EXPECT_EQ(1u, r.Drops(KM_TCP_DROP_ETH_DST));
	EXPECT_TRUE(r.tx.empty());
	EXPECT_EQ(r.BufsTotal(), r.BufsAtPort());
}

TEST(TcpArp, RequestsArePacedAndEntriesExpire)
{
	Rig r([](km_tcp_config &c) {
		c.arp_retry_ms = 500;
		c.arp_timeout_ms = 5000;
	});
	km_tcp_conn *c;
	ASSERT_EQ(0, km_tcp_connect(r.ep, kPeerIp, kPeerPort, nullptr, &c));
	EXPECT_TRUE(r.Pop().is_arp());
	// The SYN timer (1 s) fires: the SYN cannot go, the ARP is asked
	// again because 500 ms passed.
	r.Advance(1000);
	ASSERT_EQ(1u, r.tx.size());
	EXPECT_TRUE(r.Pop().is_arp());
	EXPECT_EQ(2u, r.Stats().arp_requests_out);
	ASSERT_EQ(0, r.Input(BuildArp(2, kOurMac, kPeerMac, kPeerIp, kOurMac, kOurIp)));
	Out syn = r.Pop();
	ASSERT_TRUE(syn.is_tcp());
	// Established traffic within the timeout asks nothing.
	Seg s = PeerSeg(r.Info(c), 5000, syn.seq + 1, SYN | ACK);
	ASSERT_EQ(0, r.InputSeg(s));
	r.BurstEnd();
	EXPECT_TRUE(r.Pop().is_tcp());
	EXPECT_EQ(2u, r.Stats().arp_requests_out);
	// After the timeout the entry is stale: the next frame still goes
	// to the known MAC, and a request refreshes it, at most every 500 ms.
	r.now += 5001;
	km_tcp_conn_info i = r.Info(c);
	iovec v = { (void *)"ping", 4 };
	ASSERT_EQ(4, km_tcp_send(c, &v, 1));
	ASSERT_EQ(2u, r.tx.size());
	EXPECT_TRUE(r.Pop().is_arp());
	Out d = r.Pop();
	ASSERT_TRUE(d.is_tcp());
	EXPECT_EQ(0, memcmp(d.dst_mac, kPeerMac, 6));
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, 5001, d.seq + 4)));
	r.BurstEnd();
	ASSERT_EQ(2, km_tcp_send(c, &v, 1) - 2);
	EXPECT_EQ(1u, r.tx.size()) << "no second request within 500 ms";
	r.Clear();
	// A reply (to anyone's request) refreshes the entry with a new MAC.
	uint8_t moved[6] = { 0x02, 0, 0, 0, 0, 0x77 };
	ASSERT_EQ(0, r.Input(BuildArp(2, kOurMac, moved, kPeerIp, kOurMac, kOurIp)));
	r.Advance(1000);	// retransmission of the unacked bytes
	Out rt = r.Pop();
	ASSERT_TRUE(rt.is_tcp());
	EXPECT_EQ(0, memcmp(rt.dst_mac, moved, 6));
}

TEST(TcpArp, OffSubnetGoesThroughGateway)
{
	Rig r([](km_tcp_config &c) { c.gateway = kGwIp; });
	Out syn;
	km_tcp_conn *c = r.Connect(&syn, kFarIp, 443, kGwMac, kGwIp);
	ASSERT_NE(nullptr, c);
	EXPECT_EQ(0, memcmp(syn.dst_mac, kGwMac, 6));
	EXPECT_EQ(kFarIp, syn.dst_ip);
	EXPECT_EQ(443, syn.dport);
}

TEST(TcpArp, UnansweredArpFailsTheConnectWithHostUnreachable)
{
	Rig r([](km_tcp_config &c) { c.syn_retries = 2; });
	km_tcp_conn *c;
	ASSERT_EQ(0, km_tcp_connect(r.ep, kPeerIp, kPeerPort, nullptr, &c));
	for (int i = 0; i < 3 && r.events.empty(); i++)
		r.Advance(km_tcp_next_timer_ms(r.ep) - r.now);
	ASSERT_EQ(1u, r.events.size());
	EXPECT_EQ(KM_TCP_EV_CONNECTED, r.events[0].ev);
	EXPECT_EQ(-EHOSTUNREACH, r.events[0].res);
	EXPECT_EQ(0u, r.Stats().conns_used);
	EXPECT_EQ(1u, r.Stats().connect_failures);
	for (auto &o : r.tx)
		EXPECT_TRUE(o.is_arp());
}

TEST(TcpArp, CacheEvictsLeastRecentlyUsed)
{
	km_arp a;
	std::vector<uint8_t> mem(km_arp_memsize(2));
	ASSERT_EQ(0, km_arp_init(&a, mem.data(), 2, 1000, 100));
	uint8_t m1[6] = { 2, 0, 0, 0, 0, 1 }, m2[6] = { 2, 0, 0, 0, 0, 2 };
	uint8_t got[6];
	bool req, valid;
	EXPECT_TRUE(km_arp_update(&a, 1, m1, 10, true));
	EXPECT_TRUE(km_arp_update(&a, 2, m2, 20, true));
	EXPECT_FALSE(km_arp_update(&a, 2, m2, 21, true)) << "already resolved";
	EXPECT_EQ(0, km_arp_resolve(&a, 1, 30, got, &req));
	EXPECT_FALSE(req);
	EXPECT_EQ(0, memcmp(got, m1, 6));
	// A third address evicts 2 (used at 21), not 1 (used at 30).
	EXPECT_EQ(-EAGAIN, km_arp_resolve(&a, 3, 40, got, &req));
	EXPECT_TRUE(req);
	EXPECT_TRUE(km_arp_known(&a, 1, &valid));
	EXPECT_TRUE(valid);
	EXPECT_FALSE(km_arp_known(&a, 2, &valid));
	EXPECT_TRUE(km_arp_known(&a, 3, &valid));
	EXPECT_FALSE(valid);
	// Paced: not again within 100 ms, again after.
	EXPECT_EQ(-EAGAIN, km_arp_resolve(&a, 3, 139, got, &req));
	EXPECT_FALSE(req);
	EXPECT_EQ(-EAGAIN, km_arp_resolve(&a, 3, 140, got, &req));
	EXPECT_TRUE(req);
	// Merge without create does not add.
	EXPECT_FALSE(km_arp_update(&a, 9, m1, 50, false));
	EXPECT_FALSE(km_arp_known(&a, 9, &valid));
}

// ---- handshake -------------------------------------------------------------

TEST(TcpHandshake, OptionsSentAndParsed)
{
	Rig r([](km_tcp_config &c) {
		c.rcv_buf_bytes = 8u << 20;
		c.mtu = 9000;
	});
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	ASSERT_NE(nullptr, c);
	// Our SYN: MSS = MTU - 40, WS = the smallest shift that covers 8 MiB
	// (8 MiB >> 8 = 32768), window unscaled and capped at 65535.
	EXPECT_EQ(8960, syn.mss);
	EXPECT_EQ(8, syn.wscale);
	EXPECT_EQ(65535, syn.win);
	EXPECT_EQ(kOurIp, syn.src_ip);
	EXPECT_EQ(kPeerIp, syn.dst_ip);
	EXPECT_EQ(kPeerPort, syn.dport);
	EXPECT_GE(syn.sport, r.cfg.port_min);
	EXPECT_LE(syn.sport, r.cfg.port_max);
	EXPECT_TRUE(syn.ip_csum_ok);
	EXPECT_TRUE(syn.tcp_csum_ok);
	EXPECT_TRUE(syn.df);
	EXPECT_EQ(64, syn.ttl);
	EXPECT_EQ(0u, syn.ack);
	EXPECT_EQ(KM_TCP_SYN_SENT, km_tcp_conn_state(c));

	Seg s = PeerSeg(r.Info(c), 0x12345678, syn.seq + 1, SYN | ACK);
	s.win = 29200;
	s.opts = OptMss(1000);
	Bytes ws = OptWs(7);
	s.opts.insert(s.opts.end(), ws.begin(), ws.end());
	ASSERT_EQ(0, r.InputSeg(s));
	EXPECT_TRUE(r.events.empty()) << "events wait for the burst end";
	r.BurstEnd();
	ASSERT_EQ(1u, r.events.size());
	EXPECT_EQ(KM_TCP_EV_CONNECTED, r.events[0].ev);
	EXPECT_EQ(0, r.events[0].res);
	Out ack = r.Pop();
	EXPECT_EQ(ACK, ack.flags);
	EXPECT_EQ(syn.seq + 1, ack.seq);
	EXPECT_EQ(0x12345679u, ack.ack);
	EXPECT_EQ(-1, ack.mss) << "options only on the SYN";
	// Scaled: 8 MiB of window in units of 256.
	EXPECT_EQ((8u << 20) >> 8, ack.win);
	km_tcp_conn_info i = r.Info(c);
	EXPECT_EQ(KM_TCP_ESTABLISHED, i.state);
	EXPECT_EQ(1000, i.snd_mss);
	EXPECT_TRUE(i.wscale_ok);
	EXPECT_EQ(7, i.snd_wscale);
	EXPECT_EQ(8, i.rcv_wscale);
	EXPECT_EQ(29200u, i.snd_wnd) << "the SYN-ACK's window is never scaled";
	EXPECT_EQ(8u << 20, i.rcv_wnd);
	EXPECT_EQ(1u, r.Stats().conns_opened);
	// A later window is scaled by the peer's shift.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, 0x12345679, syn.seq + 1, ACK, {}, 100)));
	EXPECT_EQ(100u << 7, r.Info(c).snd_wnd);
}

TEST(TcpHandshake, NoWindowScaleFromPeerMeansNoScaling)
{
	Rig r([](km_tcp_config &c) { c.rcv_buf_bytes = 4u << 20; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(1000, &pn, 5000, -1, -1);
	ASSERT_NE(nullptr, c);
	km_tcp_conn_info i = r.Info(c);
	EXPECT_FALSE(i.wscale_ok);
	EXPECT_EQ(0, i.rcv_wscale);
	EXPECT_EQ(0, i.snd_wscale);
	EXPECT_EQ(536, i.snd_mss) << "RFC 9293: no MSS option means 536";
	// Our window field is then capped at 65535 bytes.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt, ACK | PSH, Bytes(3000, 'x'))));
	r.BurstEnd();
	Out a = r.Pop();
	EXPECT_EQ(65535, a.win);
	EXPECT_EQ(pn + 3000, a.ack);
}

TEST(TcpHandshake, DataInSynAckAndHugeShiftClamped)
{
	Rig r;
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	Seg s = PeerSeg(r.Info(c), 77, syn.seq + 1, SYN | ACK, Bytes{ 'h', 'i' });
	s.opts = OptWs(20);
	ASSERT_EQ(0, r.InputSeg(s));
	r.BurstEnd();
	EXPECT_EQ(14, r.Info(c).snd_wscale) << "RFC 7323: above 14 means 14";
	EXPECT_EQ((Bytes{ 'h', 'i' }), r.rx[c]);
	EXPECT_EQ(80u, r.Pop().ack);
	// CONNECTED comes before the data's delivery.
	ASSERT_FALSE(r.events.empty());
	EXPECT_EQ(KM_TCP_EV_CONNECTED, r.events[0].ev);
}

TEST(TcpHandshake, QueuedRequestGoesWithTheHandshakeAck)
{
	Rig r;
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	iovec v = { (void *)"GET", 3 };
	ASSERT_EQ(3, km_tcp_send(c, &v, 1));
	EXPECT_TRUE(r.tx.empty()) << "nothing before ESTABLISHED";
	ASSERT_EQ(0, r.InputSeg(PeerSeg(r.Info(c), 9, syn.seq + 1, SYN | ACK)));
	Out d = r.Pop();
	EXPECT_EQ(ACK | PSH, d.flags);
	EXPECT_EQ((Bytes{ 'G', 'E', 'T' }), d.data);
	EXPECT_EQ(10u, d.ack);
	r.BurstEnd();
	EXPECT_TRUE(r.tx.empty()) << "the data segment carried the ACK";
}

TEST(TcpHandshake, SynSentRejectsBadAckRstAndStraySegments)
{
	Rig r;
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	km_tcp_conn_info i = r.Info(c);
	// SYN-ACK acking the wrong number: RST <SEQ=SEG.ACK>, stay.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, 5, syn.seq + 7, SYN | ACK)));
	Out rst = r.Pop();
	EXPECT_EQ(RST, rst.flags);
	EXPECT_EQ(syn.seq + 7, rst.seq);
	EXPECT_EQ(1u, r.Drops(KM_TCP_DROP_ACK));
	// RST without ACK: dropped. A plain ACK: dropped. A SYN without ACK
	// (simultaneous open): dropped.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, 5, 0, RST)));
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, 5, syn.seq + 1, ACK)));
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, 5, 0, SYN)));
	EXPECT_EQ(3u, r.Drops(KM_TCP_DROP_STATE));
	EXPECT_EQ(KM_TCP_SYN_SENT, km_tcp_conn_state(c));
	EXPECT_TRUE(r.tx.empty());
	// RST with an acceptable ACK: refused.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, 0, syn.seq + 1, RST | ACK)));
	r.BurstEnd();
	ASSERT_EQ(1u, r.events.size());
	EXPECT_EQ(KM_TCP_EV_CONNECTED, r.events[0].ev);
	EXPECT_EQ(-ECONNREFUSED, r.events[0].res);
	EXPECT_EQ(0u, r.Stats().conns_used);
}

TEST(TcpHandshake, SynRetransmittedWithBackoffThenTimeout)
{
	Rig r([](km_tcp_config &c) { c.syn_retries = 3; });
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	uint64_t t0 = r.now;
	std::vector<uint64_t> at;
	while (r.events.empty()) {
		r.Advance(km_tcp_next_timer_ms(r.ep) - r.now);
		for (auto &o : r.TcpOut()) {
			EXPECT_EQ(SYN, o.flags);
			EXPECT_EQ(syn.seq, o.seq);
			at.push_back(r.now - t0);
		}
	}
	EXPECT_EQ((std::vector<uint64_t>{ 1000, 3000, 7000 }), at);
	EXPECT_EQ(15000u, r.now - t0);
	EXPECT_EQ(-ETIMEDOUT, r.events[0].res);
	(void)c;
}

TEST(TcpHandshake, AnswerToRetransmittedSynGivesNoRttSample)
{
	Rig r;
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	r.Advance(1000);
	EXPECT_EQ(1u, r.TcpOut().size());
	r.now += 5;
	ASSERT_EQ(0, r.InputSeg(PeerSeg(r.Info(c), 1, syn.seq + 1, SYN | ACK)));
	r.BurstEnd();
	km_tcp_conn_info i = r.Info(c);
	EXPECT_EQ(0u, i.srtt_us) << "Karn: no sample from a repeated SYN";
	EXPECT_EQ(3000u, i.rto_ms) << "RFC 6298 5.7: 3 s after a SYN loss";
}

TEST(TcpHandshake, RttFromTheSynSetsTheRto)
{
	Rig r;
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	r.now += 100;
	ASSERT_EQ(0, r.InputSeg(PeerSeg(r.Info(c), 1, syn.seq + 1, SYN | ACK)));
	km_tcp_conn_info i = r.Info(c);
	// RFC 6298 2.2: SRTT = R, RTTVAR = R/2, RTO = SRTT + 4 RTTVAR.
	EXPECT_EQ(100000u, i.srtt_us);
	EXPECT_EQ(50000u, i.rttvar_us);
	EXPECT_EQ(300u, i.rto_ms);
}

TEST(TcpHandshake, PortsRotatePerSlotAndLookupUsesThem)
{
	Rig r([](km_tcp_config &c) {
		c.conns_max = 2;
		c.port_min = 40000;
		c.port_max = 40005;
	});
	std::vector<uint16_t> ports;
	for (int k = 0; k < 4; k++) {
		km_tcp_conn *c;
		ASSERT_EQ(0, km_tcp_connect(r.ep, kPeerIp, kPeerPort, nullptr, &c));
		ports.push_back(r.Info(c).local_port);
		km_tcp_abort(c);
		r.Poll();
	}
	// Slot 0 (the stack hands it out first) walks 40000, 40002, 40004.
	EXPECT_EQ(ports[0], 40000);
	EXPECT_EQ(ports[1], 40002);
	EXPECT_EQ(ports[2], 40004);
	EXPECT_EQ(ports[3], 40000);
}

} // namespace
