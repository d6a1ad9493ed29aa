// Goal: the endpoint on a 9000-byte MTU (jumbo frames, issue 18.4): frames
// past 1500 bytes, each spread over several 2 KiB receive buffers, arrive
// byte-equal; our sender fills 8960-byte segments when the peer's MSS
// allows, and never passes the MSS a peer offers (1460); and the delayed
// ACK's "two full-sized segments" are the peer's segments, not our MTU's:
// a burst of two 1460-byte segments is acknowledged at the burst's end, as
// Linux does, and not 10 ms later.
// Method: crafted segments through the rig (fake port with 2 KiB buffers,
// fake clock): delivered bytes compared with what the peer sent, segment
// sizes and ACKs read from the frames the endpoint sent.
#include <gtest/gtest.h>

#include "tcp_rig.h"

using namespace tcptest;

namespace {

constexpr uint32_t kJumboMtu = 9000;
constexpr uint32_t kJumboMss = kJumboMtu - 40;

void Jumbo(km_tcp_config &c)
{
	c.mtu = kJumboMtu;
	c.rcv_buf_bytes = 8u << 20;
	c.delack_ms = 10;
}

TEST(TcpJumbo, FramesPastMtu1500ArriveByteEqualOneAckPerBurst)
{
	Rig r(Jumbo);
	uint32_t pn;
	km_tcp_conn *c = r.Establish(700, &pn, 65535, 7, kJumboMss);
	ASSERT_NE(nullptr, c);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(kJumboMss, i.snd_mss);
	const uint32_t n = 6;
	Bytes all = Pattern(n * kJumboMss, 4);
	for (uint32_t k = 0; k < n; k++) {
		Bytes part(all.begin() + k * kJumboMss,
			   all.begin() + (k + 1) * kJumboMss);
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + k * kJumboMss,
						i.snd_nxt, ACK, part)));
	}
	r.BurstEnd();
	EXPECT_EQ(all, r.rx[c]);
	ASSERT_EQ(1u, r.tx.size()) << "one ACK for the burst";
	EXPECT_EQ(pn + n * kJumboMss, r.Pop().ack);
	km_tcp_stats st = r.Stats();
	EXPECT_EQ(0u, st.tcp.drops[KM_TCP_DROP_FRAME_SEGS]);
	EXPECT_EQ(n * kJumboMss, st.tcp.bytes_in);
	EXPECT_EQ(r.BufsTotal(), r.BufsAtPort()) << "every buffer came back";
}

// Our sender's segments: MSS-sized, the whole request in order.
void SendAndCheck(Rig &r, km_tcp_conn *c, uint32_t pn, uint32_t mss,
		  uint32_t bytes)
{
	km_tcp_conn_info i = r.Info(c);
	Bytes req = Pattern(bytes, 8);
	iovec v = { req.data(), req.size() };
	ASSERT_EQ((ssize_t)bytes, km_tcp_send(c, &v, 1));
	Bytes got;
	uint32_t full = 0;
	for (int rounds = 0; got.size() < bytes && rounds < 100; rounds++) {
		std::vector<Out> o = r.TcpOut();
		ASSERT_FALSE(o.empty()) << "the sender stalled at " << got.size();
		for (auto &s : o) {
			ASSERT_EQ(i.snd_nxt + got.size(), s.seq);
			ASSERT_LE(s.data.size(), mss);
			full += s.data.size() == mss;
			got.insert(got.end(), s.data.begin(), s.data.end());
		}
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + got.size(),
						ACK, {}, 65535)));
	}
	EXPECT_EQ(req, got);
	EXPECT_EQ(bytes / mss, full) << "every segment but the last is full";
}

TEST(TcpJumbo, SenderFillsJumboSegments)
{
	Rig r(Jumbo);
	uint32_t pn;
	km_tcp_conn *c = r.Establish(900, &pn, 65535, 7, kJumboMss);
	ASSERT_NE(nullptr, c);
	SendAndCheck(r, c, pn, kJumboMss, 5 * kJumboMss + 123);
}

TEST(TcpJumbo, PeerOfferingMss1460IsRespected)
{
	Rig r(Jumbo);
	uint32_t pn;
	km_tcp_conn *c = r.Establish(900, &pn, 65535, 7, 1460);
	ASSERT_NE(nullptr, c);
	EXPECT_EQ(1460, r.Info(c).snd_mss);
	SendAndCheck(r, c, pn, 1460, 30000);
}

// RFC 1122 4.2.3.2 and RFC 5681 4.2: an ACK at least for every second
// full-sized segment. A peer with MSS 1460 never sends more than 1460, so
// measuring "full-sized" by our 8960 would hold every ACK for delack_ms
// and slow the peer to a few segments per timer.
TEST(TcpJumbo, TwoFullSegmentsOfAPeerWithMss1460AreAckedAtBurstEnd)
{
	Rig r(Jumbo);
	uint32_t pn;
	km_tcp_conn *c = r.Establish(900, &pn, 65535, 7, 1460);
	ASSERT_NE(nullptr, c);
	km_tcp_conn_info i = r.Info(c);
	Bytes data = Pattern(2 * 1460, 2);
	for (uint32_t k = 0; k < 2; k++)
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + k * 1460, i.snd_nxt, ACK,
						Bytes(data.begin() + k * 1460,
						      data.begin() + (k + 1) * 1460))));
	r.BurstEnd();
	EXPECT_EQ(data, r.rx[c]);
	ASSERT_EQ(1u, r.tx.size()) << "two full segments: ACK now, not delayed";
	EXPECT_EQ(pn + 2 * 1460, r.Pop().ack);
	// One segment alone still waits for the delayed-ACK timer.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 2 * 1460, i.snd_nxt, ACK,
					Bytes(1460, 'x'))));
	r.BurstEnd();
	EXPECT_TRUE(r.tx.empty()) << "one segment: delayed";
	r.Advance(r.cfg.delack_ms);
	ASSERT_EQ(1u, r.tx.size());
	EXPECT_EQ(pn + 3 * 1460, r.Pop().ack);
}

} // namespace
