// Goal: what we send survives loss: RFC 6298 RTO estimation (first and
// later samples, the minimum, exponential backoff, Karn's rule), recovery
// when the ACK comes, go-back-N after a timeout with cwnd at one segment,
// fast retransmit on the third duplicate ACK, the retry limit, and
// keepalive probes on an idle connection.
// Method: the fake clock is an input, so each timer is stepped to exactly
// its deadline; frames sent are parsed and compared byte for byte.
#include <gtest/gtest.h>

#include <cerrno>

#include "tcp_rig.h"

using namespace tcptest;

namespace {

TEST(TcpRtx, LostRequestRtoDoublingKarnAndRecovery)
{
	Rig r;
	uint32_t pn;
	// The handshake measured 0 ms: RTO = max(G, 4 * 0) -> rto_min.
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(200u, i.rto_ms);
	Bytes req = Pattern(100, 7);
	iovec v = { req.data(), req.size() };
	ASSERT_EQ(100, km_tcp_send(c, &v, 1));
	Out first = r.Pop();
	EXPECT_EQ(req, first.data);
	uint64_t t0 = r.now;
	// Lost. The retransmissions come at +200, +600 (200 + 400),
	// +1400 (+ 800): the RTO doubles each time.
	std::vector<uint64_t> at;
	for (int k = 0; k < 3; k++) {
		r.Advance(km_tcp_next_timer_ms(r.ep) - r.now);
		Out o = r.Pop();
		EXPECT_EQ(first.seq, o.seq);
		EXPECT_EQ(req, o.data);
		at.push_back(r.now - t0);
	}
	EXPECT_EQ((std::vector<uint64_t>{ 200, 600, 1400 }), at);
	EXPECT_EQ(1600u, r.Info(c).rto_ms);
	EXPECT_EQ(3u, r.Info(c).rtx_count);
	// The ACK arrives 30 ms after the third copy. Karn: it may answer
	// any copy, so no sample; the backed-off RTO stays.
	r.now += 30;
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, first.seq + 100)));
	km_tcp_conn_info j = r.Info(c);
	EXPECT_EQ(0u, j.srtt_us);
	EXPECT_EQ(1600u, j.rto_ms);
	EXPECT_EQ(0u, j.rtx_count);
	EXPECT_EQ(j.snd_una, j.snd_max);
	EXPECT_EQ(UINT64_MAX, km_tcp_next_timer_ms(r.ep)) << "timer stopped";
	km_tcp_counters cs;
	km_tcp_conn_get_stats(c, &cs);
	EXPECT_EQ(3u, cs.retransmits);
	EXPECT_EQ(3u, cs.rto_expiries);
	// A request sent once and acked 80 ms later is a sample: RFC 6298
	// 2.3 with SRTT 0, RTTVAR 0, R' 80 ms: RTTVAR 20 ms, SRTT 10 ms,
	// RTO = 10 + 80 = 90 -> rto_min 200. The backoff is over.
	ASSERT_EQ(100, km_tcp_send(c, &v, 1));
	Out second = r.Pop();
	r.now += 80;
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, second.seq + 100)));
	j = r.Info(c);
	EXPECT_EQ(10000u, j.srtt_us);
	EXPECT_EQ(20000u, j.rttvar_us);
	EXPECT_EQ(200u, j.rto_ms);
}

TEST(TcpRtx, RtoFollowsLargeRtts)
{
	Rig r;
	uint32_t pn;
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	r.now += 400;
	ASSERT_EQ(0, r.InputSeg(PeerSeg(r.Info(c), 1, syn.seq + 1, SYN | ACK)));
	r.BurstEnd();
	pn = 2;
	km_tcp_conn_info i = r.Info(c);
	EXPECT_EQ(1200u, i.rto_ms) << "400 + 4 * 200";
	// R' = 600: RTTVAR = 3/4 200 + 1/4 200 = 200; SRTT = 7/8 400 + 75 =
	// 425; RTO = 425 + 800.
	iovec v = { (void *)"x", 1 };
	ASSERT_EQ(1, km_tcp_send(c, &v, 1));
	Out d = r.Pop();
	r.now += 600;
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, d.seq + 1)));
	i = r.Info(c);
	EXPECT_EQ(425000u, i.srtt_us);
	EXPECT_EQ(200000u, i.rttvar_us);
	EXPECT_EQ(1225u, i.rto_ms);
}

TEST(TcpRtx, GoBackNWithOneSegmentAfterATimeout)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn, 65535, 7, 1000);
	km_tcp_conn_info i = r.Info(c);
	Bytes req = Pattern(3000, 2);
	iovec v = { req.data(), req.size() };
	ASSERT_EQ(3000, km_tcp_send(c, &v, 1));
	EXPECT_EQ(3u, r.TcpOut().size());
	// All three lost: one segment after the timeout (cwnd = 1 MSS).
	r.Advance(200);
	std::vector<Out> o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_EQ(i.snd_nxt, o[0].seq);
	EXPECT_EQ(1000u, r.Info(c).cwnd);
	EXPECT_EQ(2000u, r.Info(c).ssthresh) << "max(FlightSize / 2, 2 * SMSS)";
	// Its ACK: slow start from one segment sends the next two.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 1000)));
	o = r.TcpOut();
	ASSERT_EQ(2u, o.size());
	EXPECT_EQ(i.snd_nxt + 1000, o[0].seq);
	EXPECT_EQ(i.snd_nxt + 2000, o[1].seq);
	EXPECT_EQ(Bytes(req.begin() + 2000, req.end()), o[1].data);
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 3000)));
	EXPECT_EQ(0u, r.Info(c).snd_queued);
}

TEST(TcpRtx, FastRetransmitOnTheThirdDuplicateAck)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn, 65535, 7, 1000);
	km_tcp_conn_info i = r.Info(c);
	Bytes req = Pattern(5000, 3);
	iovec v = { req.data(), req.size() };
	ASSERT_EQ(5000, km_tcp_send(c, &v, 1));
	EXPECT_EQ(5u, r.TcpOut().size());
	// Segment 2 lost: the peer acks 1000 once, then three duplicates.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 1000)));
	for (int k = 0; k < 2; k++)
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 1000)));
	EXPECT_TRUE(r.TcpOut().empty());
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 1000)));
	std::vector<Out> o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_EQ(i.snd_nxt + 1000, o[0].seq);
	EXPECT_EQ(Bytes(req.begin() + 1000, req.begin() + 2000), o[0].data);
	km_tcp_counters cs;
	km_tcp_conn_get_stats(c, &cs);
	EXPECT_EQ(3u, cs.dup_acks);
	EXPECT_EQ(1u, cs.fast_retransmits);
	EXPECT_EQ(1u, cs.retransmits);
	// A window change or data is not a duplicate ACK.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 1000, ACK, {}, 60000)));
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 1000, ACK, Bytes{ 'd' }, 60000)));
	km_tcp_conn_get_stats(c, &cs);
	EXPECT_EQ(3u, cs.dup_acks);
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 1, i.snd_nxt + 5000, ACK, {}, 60000)));
	EXPECT_EQ(0u, r.Info(c).snd_queued);
}

TEST(TcpRtx, RetryLimitEndsTheConnection)
{
	Rig r([](km_tcp_config &c) { c.retries = 3; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	iovec v = { (void *)"x", 1 };
	ASSERT_EQ(1, km_tcp_send(c, &v, 1));
	r.Clear();
	for (int k = 0; k < 4; k++)
		r.Advance(km_tcp_next_timer_ms(r.ep) - r.now);
	std::vector<Out> o = r.TcpOut();
	ASSERT_EQ(4u, o.size());
	EXPECT_EQ(RST | ACK, o.back().flags);
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_CLOSED, -ETIMEDOUT));
	EXPECT_EQ(0u, r.Stats().conns_used);
}

TEST(TcpRtx, TxRefusedIsALoss)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	r.tx_result = -ENOBUFS;
	iovec v = { (void *)"abc", 3 };
	ASSERT_EQ(3, km_tcp_send(c, &v, 1));
	EXPECT_EQ(1u, r.Stats().tx_errors);
	r.tx_result = 0;
	r.Advance(i.rto_ms);
	Out o = r.Pop();
	EXPECT_EQ((Bytes{ 'a', 'b', 'c' }), o.data);
}

TEST(TcpRtx, ChecksumOffloadLeavesThePseudoHeaderSum)
{
	Rig r([](km_tcp_config &c) {
		c.tx_csum_offload = KM_TCP_TX_CSUM_IP | KM_TCP_TX_CSUM_TCP;
	});
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	ASSERT_NE(nullptr, c);
	EXPECT_EQ(KM_TCP_TX_CSUM_IP | KM_TCP_TX_CSUM_TCP, syn.tx_flags);
	// The rig checks: IPv4 field 0, TCP field = folded pseudo sum.
	EXPECT_TRUE(syn.ip_csum_ok);
	EXPECT_TRUE(syn.tcp_csum_ok);
}

// ---- keepalive -------------------------------------------------------------

TEST(TcpKeepalive, ProbesAnIdleLineAndGivesUp)
{
	Rig r([](km_tcp_config &c) {
		c.keepalive_idle_ms = 10000;
		c.keepalive_intvl_ms = 1000;
		c.keepalive_probes = 3;
	});
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	r.Advance(9999);
	EXPECT_TRUE(r.tx.empty());
	r.Advance(1);
	Out p = r.Pop();
	EXPECT_EQ(ACK, p.flags);
	EXPECT_EQ(i.snd_una - 1, p.seq) << "an old sequence: the peer must ACK";
	EXPECT_TRUE(p.data.empty());
	// The peer answers: the line is alive, idle time starts again.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt)));
	r.Advance(9999);
	EXPECT_TRUE(r.tx.empty());
	r.Advance(1);
	EXPECT_EQ(1u, r.TcpOut().size());
	EXPECT_EQ(1u, r.Info(c).keepalive_probes);
	// No answers: two more probes a second apart, then RST and the end.
	r.Advance(1000);
	r.Advance(1000);
	EXPECT_EQ(2u, r.TcpOut().size());
	r.Advance(1000);
	std::vector<Out> o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_EQ(RST | ACK, o[0].flags);
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_CLOSED, -ETIMEDOUT));
	km_tcp_stats st = r.Stats();
	EXPECT_EQ(4u, st.tcp.keepalives);
}

} // namespace
