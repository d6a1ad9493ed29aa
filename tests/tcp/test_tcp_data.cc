// Goal: data moves correctly both ways: in-order delivery by reference to
// the received buffers, one ACK per burst plus the delayed ACK, the
// advertised window following what the consumer holds (and never moving
// its right edge left), the peer's window respected by our sender
// (including zero-window probes), sequence numbers across 2^32, and the
// out-of-order queue (gaps, overlaps, duplicates, its bound).
// Method: crafted segments through the rig, with the fake port checking
// that every buffer comes back exactly once and the fake clock driving the
// timers; delivered bytes are compared with what the peer sent.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tcp_rig.h"

using namespace tcptest;

namespace {

// ---- receive path ------------------------------------------------------------

TEST(TcpRecv, InOrderDeliveredByReferenceOneAckPerBurst)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(500, &pn);
	km_tcp_conn_info i = r.Info(c);
	Bytes all = Pattern(10 * 1460, 1);
	r.auto_release = false;
	for (int k = 0; k < 10; k++) {
		Bytes part(all.begin() + k * 1460, all.begin() + (k + 1) * 1460);
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + k * 1460, i.snd_nxt, ACK, part)));
	}
	EXPECT_EQ(0u, r.deliver_calls) << "delivery waits for the burst end";
	EXPECT_TRUE(r.tx.empty());
	r.BurstEnd();
	EXPECT_EQ(1u, r.deliver_calls) << "one delivery for the burst";
	EXPECT_EQ(all, r.rx[c]);
	EXPECT_EQ(10u, r.held.size());
	ASSERT_EQ(1u, r.tx.size()) << "one ACK for the burst";
	Out a = r.Pop();
	EXPECT_EQ(pn + 10 * 1460, a.ack);
	EXPECT_EQ(10u, r.Stats().bufs_user);
	EXPECT_EQ(10u * 1460, r.Info(c).rx_held);
	r.ReleaseAll();
	EXPECT_EQ(0u, r.Stats().bufs_user);
	EXPECT_EQ(r.BufsTotal(), r.BufsAtPort());
	km_tcp_counters cs;
	km_tcp_conn_get_stats(c, &cs);
	EXPECT_EQ(11u, cs.pkts_in);
	EXPECT_EQ(10u * 1460, cs.bytes_in);
}

TEST(TcpRecv, SmallSegmentGetsTheDelayedAck)
{
	Rig r([](km_tcp_config &c) { c.delack_ms = 20; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(500, &pn);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt, ACK, Bytes(100, 'a'))));
	r.BurstEnd();
	EXPECT_TRUE(r.tx.empty()) << "less than two segments: delayed";
	EXPECT_EQ(r.now + 20, km_tcp_next_timer_ms(r.ep));
	r.Advance(19);
	EXPECT_TRUE(r.tx.empty());
	r.Advance(1);
	ASSERT_EQ(1u, r.tx.size());
	EXPECT_EQ(pn + 100, r.Pop().ack);
	// Our own data carries the ACK and cancels the delayed one.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 100, i.snd_nxt, ACK, Bytes(10, 'b'))));
	r.BurstEnd();
	iovec v = { (void *)"req", 3 };
	ASSERT_EQ(3, km_tcp_send(c, &v, 1));
	Out d = r.Pop();
	EXPECT_EQ(pn + 110, d.ack);
	r.Advance(50);
	EXPECT_TRUE(r.tx.empty());
}

TEST(TcpRecv, FramesSplitAcrossBuffersAtOddOffsets)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(500, &pn);
	km_tcp_conn_info i = r.Info(c);
	Bytes data = Pattern(1001, 9);
	Bytes f = BuildTcp(PeerSeg(i, pn, i.snd_nxt, ACK, data));
	// Header split inside the IPv4 header; payload in three pieces of
	// odd sizes; one buffer that holds only header bytes.
	ASSERT_EQ(0, r.Input(f, { 20, 54, 55, 300, 777 }));
	// Ethernet padding after a tiny segment is not payload.
	Bytes g = BuildTcp(PeerSeg(i, pn + 1001, i.snd_nxt, ACK, Bytes{ 'z' }));
	g.resize(60, 0xee);
	ASSERT_EQ(0, r.Input(g));
	r.BurstEnd();
	data.push_back('z');
	EXPECT_EQ(data, r.rx[c]);
	EXPECT_EQ(r.BufsTotal(), r.BufsAtPort());
}

TEST(TcpRecv, AdvertisedWindowFollowsHeldBuffers)
{
	// 64 KiB window: shift 1 (65536 >> 1 fits), MSS 1460.
	Rig r([](km_tcp_config &c) { c.rcv_buf_bytes = 65536; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(500, &pn);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(1, i.rcv_wscale);
	r.auto_release = false;
	uint32_t edge0 = pn + 65535;	// the SYN's unscaled window
	uint32_t sent = 0;
	// Fill in bursts of 4 segments; each ACK's window is exactly what is
	// left of the edge, and the edge never moves left.
	for (int b = 0; b < 11; b++) {
		for (int k = 0; k < 4 && sent + 1460 <= 65535; k++, sent += 1460)
			ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + sent, i.snd_nxt, ACK,
							 Pattern(1460, 2, sent))));
		r.BurstEnd();
		Out a = r.Pop();
		uint32_t wnd = (uint32_t)a.win << 1;
		EXPECT_EQ(pn + sent, a.ack);
		EXPECT_GE(a.ack + wnd, edge0 - 1) << "the edge moved left";
		EXPECT_LE(wnd, 65536 - sent) << "more than the buffer left";
	}
	EXPECT_EQ(44u * 1460, sent);
	// Window nearly shut: the peer's next full segment is trimmed to it.
	uint32_t left = r.Info(c).rcv_wnd;
	ASSERT_LT(left, 1460u);
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + sent, i.snd_nxt, ACK, Pattern(1460, 2, sent))));
	r.BurstEnd();
	Out a = r.Pop();
	EXPECT_EQ(pn + sent + left, a.ack);
	sent += left;
	EXPECT_EQ(0, a.win) << "shut, and SWS avoidance keeps it shut";
	km_tcp_counters cs;
	km_tcp_conn_get_stats(c, &cs);
	EXPECT_EQ(1460u - left, cs.beyond_window);
	// Releasing one buffer (1460 B) is below the update threshold; the
	// second opens two segments of a shut window: an update goes.
	r.Release(r.held.front());
	EXPECT_TRUE(r.tx.empty());
	r.Release(r.held.front());
	ASSERT_EQ(1u, r.tx.size());
	Out u = r.Pop();
	EXPECT_EQ(pn + sent, u.ack);
	EXPECT_GE((uint32_t)u.win << 1, 2u * 1460);
	EXPECT_EQ(r.Info(c).rcv_wnd, (uint32_t)u.win << 1);
	// From an open window, the next update waits for a quarter of the
	// buffer (16 KiB) to come free.
	uint32_t freed = 0;
	while (r.tx.empty() && !r.held.empty()) {
		r.Release(r.held.front());
		freed += 1460;
	}
	ASSERT_EQ(1u, r.tx.size());
	EXPECT_GE(freed, 16384u);
	EXPECT_LT(freed, 16384u + 1460);
	u = r.Pop();
	EXPECT_EQ(r.Info(c).rcv_wnd, (uint32_t)u.win << 1);
	// Everything released: the full buffer again (after the next data).
	r.ReleaseAll();
	r.Clear();
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + sent, i.snd_nxt, ACK, Bytes(2920, 'q'))));
	r.BurstEnd();
	Out full = r.Pop();
	EXPECT_EQ((65536u - 2920) >> 1, full.win);
}

TEST(TcpRecv, ZeroWindowProbeIsAnsweredWithoutTakingData)
{
	Rig r([](km_tcp_config &c) { c.rcv_buf_bytes = 8192; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(500, &pn, 65535, -1);
	km_tcp_conn_info i = r.Info(c);
	r.auto_release = false;
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt, ACK, Bytes(8192, 'x'))));
	r.BurstEnd();
	Out a = r.Pop();
	EXPECT_EQ(0, a.win);
	// The peer probes with one byte: ACKed, window 0, byte not taken.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 8192, i.snd_nxt, ACK, Bytes{ 'p' })));
	r.BurstEnd();
	Out p = r.Pop();
	EXPECT_EQ(pn + 8192, p.ack);
	EXPECT_EQ(0, p.win);
	EXPECT_EQ(8192u, r.rx[c].size());
	r.ReleaseAll();
	Out upd = r.Pop();
	EXPECT_EQ(8192, upd.win) << "window update after the release";
}

TEST(TcpRecv, SillyWindowAvoidance)
{
	// RFC 9293 3.8.6.2.2: a shut window opens only by min(buf/2, MSS).
	Rig r([](km_tcp_config &c) { c.rcv_buf_bytes = 8192; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(500, &pn, 65535, -1);
	km_tcp_conn_info i = r.Info(c);
	r.auto_release = false;
	uint32_t off = 0;
	while (off < 8192) {
		uint32_t n = std::min<uint32_t>(500, 8192 - off);
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + off, i.snd_nxt, ACK, Bytes(n, 's'))));
		off += n;
	}
	r.BurstEnd();
	EXPECT_EQ(0, r.Pop().win);
	auto probe = [&] {
		EXPECT_EQ(0, r.InputSeg(PeerSeg(i, pn + off, i.snd_nxt, ACK, Bytes{ 'p' })));
		r.BurstEnd();
		return r.Pop().win;
	};
	r.Release(r.held.front());	// 500 bytes free
	EXPECT_TRUE(r.tx.empty());
	EXPECT_EQ(0, probe()) << "500 < MSS: still shut";
	r.Release(r.held.front());
	r.Release(r.held.front());	// 1500 >= MSS 1460
	EXPECT_TRUE(r.tx.empty()) << "below the update threshold";
	EXPECT_EQ(1500, probe());
}

// ---- send path ------------------------------------------------------------

TEST(TcpSend, NeverBeyondThePeersWindow)
{
	Rig r([](km_tcp_config &c) { c.rto_min_ms = 200; });
	uint32_t pn;
	// Peer: window 3000 unscaled, MSS 1000.
	km_tcp_conn *c = r.Establish(500, &pn, 3000, -1, 1000);
	km_tcp_conn_info i = r.Info(c);
	Bytes req = Pattern(10000, 3);
	iovec v = { req.data(), req.size() };
	ASSERT_EQ(10000, km_tcp_send(c, &v, 1));
	std::vector<Out> o = r.TcpOut();
	ASSERT_EQ(3u, o.size());
	for (int k = 0; k < 3; k++) {
		EXPECT_EQ(i.snd_nxt + 1000u * k, o[k].seq);
		EXPECT_EQ(Bytes(req.begin() + k * 1000, req.begin() + (k + 1) * 1000), o[k].data);
		EXPECT_TRUE(o[k].tcp_csum_ok);
	}
	// ACK 1000 with the same window: 1000 more may go.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 1000, ACK, {}, 3000)));
	o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_EQ(i.snd_nxt + 3000, o[0].seq);
	// ACK all four with window 0: nothing goes.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 4000, ACK, {}, 0)));
	EXPECT_TRUE(r.TcpOut().empty());
	EXPECT_EQ(0u, r.Info(c).snd_wnd);
	// The persist timer probes with one byte, backing off.
	uint32_t rto = r.Info(c).rto_ms;
	r.Advance(rto);
	o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_EQ(i.snd_nxt + 4000 - 1, o[0].seq) << "an old sequence number";
	EXPECT_TRUE(o[0].data.empty());
	EXPECT_EQ(i.snd_nxt + 4000, r.Info(c).snd_nxt) << "no sequence space taken";
	r.Advance(2 * rto - 1);
	EXPECT_TRUE(r.TcpOut().empty());
	r.Advance(1);
	EXPECT_EQ(1u, r.TcpOut().size());
	km_tcp_counters cs;
	km_tcp_conn_get_stats(c, &cs);
	EXPECT_EQ(2u, cs.window_probes);
	// The window opens (the probe byte was not taken): the rest flows,
	// still within 3000 bytes of window.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 4000, ACK, {}, 3000)));
	o = r.TcpOut();
	ASSERT_EQ(3u, o.size());
	EXPECT_EQ(i.snd_nxt + 4000, o[0].seq);
	EXPECT_EQ(i.snd_nxt + 6000, o[2].seq);
	uint32_t una = i.snd_nxt + 4000;
	for (auto &s : o)
		EXPECT_LE(s.seq + s.data.size(), una + 3000);
}

TEST(TcpSend, RingBoundsAndSendSpace)
{
	Rig r([](km_tcp_config &c) { c.snd_buf_bytes = 1024; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(500, &pn, 100, -1, 1460);
	km_tcp_conn_info i = r.Info(c);
	Bytes big = Pattern(1500, 4);
	iovec v[2] = { { big.data(), 700 }, { big.data() + 700, 800 } };
	EXPECT_EQ(1024, km_tcp_send(c, v, 2)) << "partial: the ring holds 1024";
	EXPECT_EQ(0u, km_tcp_send_space(c));
	EXPECT_EQ(-EAGAIN, km_tcp_send(c, v, 1));
	EXPECT_EQ(-EINVAL, km_tcp_send(c, v, 0));
	r.Clear();
	// An ACK of 100 frees 100 bytes and reports them.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 100, ACK, {}, 100)));
	r.BurstEnd();
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_SENT, 100));
	EXPECT_EQ(100u, km_tcp_send_space(c));
	// The ring wraps: bytes 1024.. go where 0..99 were.
	iovec w = { big.data() + 1024, 100 };
	EXPECT_EQ(100, km_tcp_send(c, &w, 1));
	Bytes got;
	uint32_t una = i.snd_nxt + 100;
	for (int k = 0; k < 20 && una != i.snd_nxt + 1124; k++) {
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, una, ACK, {}, 1460)));
		for (auto &o : r.TcpOut())
			if (o.seq == i.snd_nxt + 100 + got.size())
				got.insert(got.end(), o.data.begin(), o.data.end());
		una = i.snd_nxt + 100 + (uint32_t)got.size();
	}
	EXPECT_EQ(Bytes(big.begin() + 100, big.begin() + 1124), got);
}

// ---- sequence wrap-around ----------------------------------------------------

TEST(TcpWrap, TransferAcrossTwoToThe32)
{
	Rig r;
	r.use_fixed_isn = true;
	r.fixed_isn = 0xfffffc00u;	// our requests cross 2^32 after 1 KiB
	uint32_t peer_isn = 0xffff0000u; // the peer's data after 64 KiB
	uint32_t pn;
	km_tcp_conn *c = r.Establish(peer_isn, &pn, 65535, 7, 1460);
	km_tcp_conn_info i = r.Info(c);
	EXPECT_EQ(0xfffffc01u, i.snd_nxt);
	// Our side: 3000 bytes of requests in 300-byte sends, acked as they
	// go: the sequence wraps mid-stream.
	Bytes req = Pattern(3000, 5);
	Bytes seen;
	for (int k = 0; k < 10; k++) {
		iovec v = { req.data() + k * 300, 300 };
		ASSERT_EQ(300, km_tcp_send(c, &v, 1));
		for (auto &o : r.TcpOut()) {
			seen.insert(seen.end(), o.data.begin(), o.data.end());
			ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, o.seq + (uint32_t)o.data.size())));
		}
	}
	EXPECT_EQ(req, seen);
	i = r.Info(c);
	EXPECT_EQ(0xfffffc01u + 3000, i.snd_una);
	EXPECT_EQ(i.snd_una, i.snd_nxt);
	EXPECT_EQ(0u, i.snd_queued);
	// Their side: 1 MiB in 1460-byte segments across the wrap, in
	// bursts of 16 with each burst's second segment arriving last.
	const size_t total = 1u << 20;
	Bytes data = Pattern(total, 6);
	size_t off = 0;
	while (off < total) {
		std::vector<std::pair<size_t, size_t>> burst;
		for (int k = 0; k < 16 && off < total; k++) {
			size_t n = std::min<size_t>(1460, total - off);
			burst.push_back({ off, n });
			off += n;
		}
		if (burst.size() > 2)
			std::rotate(burst.begin() + 1, burst.begin() + 2, burst.end());
		for (auto &[o, n] : burst)
			ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + (uint32_t)o, i.snd_nxt, ACK,
							 Bytes(data.begin() + (long)o, data.begin() + (long)(o + n)))));
		r.BurstEnd();
	}
	EXPECT_EQ(data, r.rx[c]);
	EXPECT_EQ(pn + (uint32_t)total, r.Info(c).rcv_nxt);
	EXPECT_LT(r.Info(c).rcv_nxt, peer_isn) << "the sequence wrapped";
	EXPECT_EQ(r.BufsTotal(), r.BufsAtPort());
}

// ---- out-of-order queue ---------------------------------------------------------

class Ooo : public ::testing::Test {
protected:
	void SetUp() override
	{
		rig = std::make_unique<Rig>([](km_tcp_config &c) { c.ooo_max = 4; });
		conn = rig->Establish(1000, &pn);
		i = rig->Info(conn);
		data = Pattern(20000, 8);
	}
	// Send bytes [a, b) of the stream as one segment.
	void Send(size_t a, size_t b)
	{
		ASSERT_EQ(0, rig->InputSeg(PeerSeg(i, pn + (uint32_t)a, i.snd_nxt, ACK,
						   Bytes(data.begin() + (long)a, data.begin() + (long)b))));
	}
	Bytes Upto(size_t n) { return Bytes(data.begin(), data.begin() + (long)n); }
	std::unique_ptr<Rig> rig;
	km_tcp_conn *conn = nullptr;
	km_tcp_conn_info i;
	uint32_t pn = 0;
	Bytes data;
};

TEST_F(Ooo, GapFilledLater)
{
	Send(1000, 2000);
	// An out-of-order segment gets an immediate duplicate ACK.
	ASSERT_EQ(1u, rig->tx.size());
	EXPECT_EQ(pn, rig->Pop().ack);
	Send(3000, 4000);
	EXPECT_EQ(pn, rig->Pop().ack);
	rig->BurstEnd();
	EXPECT_TRUE(rig->rx[conn].empty());
	EXPECT_EQ(2u, rig->Info(conn).ooo_pieces);
	EXPECT_EQ(2000u, rig->Info(conn).ooo_bytes);
	EXPECT_EQ(2u, rig->Stats().bufs_queued);
	// The first gap fills: 0..2000 delivered, 3000.. still waits.
	Send(0, 1000);
	rig->BurstEnd();
	EXPECT_EQ(Upto(2000), rig->rx[conn]);
	EXPECT_EQ(pn + 2000, rig->tx.back().ack) << "immediate ACK on a gap fill";
	Send(2000, 3000);
	rig->BurstEnd();
	EXPECT_EQ(Upto(4000), rig->rx[conn]);
	EXPECT_EQ(0u, rig->Info(conn).ooo_pieces);
	km_tcp_counters cs;
	km_tcp_conn_get_stats(conn, &cs);
	EXPECT_EQ(2u, cs.ooo_segs);
	EXPECT_EQ(0u, cs.dup_bytes);
	EXPECT_EQ(rig->BufsTotal(), rig->BufsAtPort());
}

TEST_F(Ooo, OverlapsAndDuplicatesAreTrimmed)
{
	Send(1000, 2000);	// queued
	Send(1500, 2500);	// overlaps its tail: trimmed to 2000..2500
	Send(1200, 1800);	// inside a queued piece: duplicate
	Send(800, 1100);	// overlaps its head: trimmed to 800..1000
	Send(3000, 3500);
	Send(2900, 3600);	// covers 3000..3500: replaces it
	EXPECT_EQ(4u, rig->Info(conn).ooo_pieces);
	km_tcp_counters cs;
	km_tcp_conn_get_stats(conn, &cs);
	EXPECT_EQ(500u + 600 + 100 + 500, cs.dup_bytes);
	Send(0, 900);		// in order, overlapping the queue's head
	rig->BurstEnd();
	EXPECT_EQ(Upto(2500), rig->rx[conn]);
	Send(2400, 2950);	// overlaps both sides of the gap
	rig->BurstEnd();
	EXPECT_EQ(Upto(3600), rig->rx[conn]);
	// An old duplicate is not acceptable: ACK, drop.
	rig->Clear();
	Send(100, 200);
	EXPECT_EQ(1u, rig->Drops(KM_TCP_DROP_SEQ));
	EXPECT_EQ(pn + 3600, rig->Pop().ack);
	rig->BurstEnd();
	EXPECT_EQ(Upto(3600), rig->rx[conn]);
	EXPECT_EQ(rig->BufsTotal(), rig->BufsAtPort());
}

TEST_F(Ooo, BoundKeepsWhatIsNearestTheGap)
{
	Send(5000, 6000);
	Send(3000, 4000);
	Send(4000, 5000);
	Send(2000, 3000);	// queue full (4)
	EXPECT_EQ(4u, rig->Info(conn).ooo_pieces);
	Send(6000, 7000);	// beyond everything: dropped
	EXPECT_EQ(1u, rig->Drops(KM_TCP_DROP_OOO_FULL));
	Send(1000, 2000);	// nearer the gap: evicts 5000..6000
	EXPECT_EQ(2u, rig->Drops(KM_TCP_DROP_OOO_FULL));
	EXPECT_EQ(4u, rig->Info(conn).ooo_pieces);
	Send(0, 1000);
	rig->BurstEnd();
	EXPECT_EQ(Upto(5000), rig->rx[conn]);
	EXPECT_EQ(0u, rig->Info(conn).ooo_pieces);
	// The dropped data comes again (the peer retransmits).
	Send(5000, 7000);
	rig->BurstEnd();
	EXPECT_EQ(Upto(7000), rig->rx[conn]);
	EXPECT_EQ(rig->BufsTotal(), rig->BufsAtPort());
}

TEST_F(Ooo, RandomArrivalOrderDeliversTheStream)
{
	rig = std::make_unique<Rig>([](km_tcp_config &c) { c.ooo_max = 64; });
	conn = rig->Establish(0x7ffffff0u, &pn);
	i = rig->Info(conn);
	std::mt19937 rng(11);
	size_t total = data.size(), have = 0;
	// Pieces of random size, duplicated and shuffled within windows of 8.
	std::vector<std::pair<size_t, size_t>> segs;
	for (size_t o = 0; o < total;) {
		size_t n = std::min<size_t>(1 + rng() % 1460, total - o);
		size_t back = std::min<size_t>(rng() % 200, o);
		segs.push_back({ o - back, o + n });
		if (rng() % 5 == 0)
			segs.push_back({ o - back, o + n });
		o += n;
	}
	for (size_t k = 0; k < segs.size(); k += 8)
		std::shuffle(segs.begin() + (long)k,
			     segs.begin() + (long)std::min(k + 8, segs.size()), rng);
	for (size_t k = 0; k < segs.size(); k++) {
		Send(segs[k].first, segs[k].second);
		if (k % 5 == 4)
			rig->BurstEnd();
	}
	rig->BurstEnd();
	have = rig->rx[conn].size();
	EXPECT_EQ(total, have);
	EXPECT_EQ(data, rig->rx[conn]);
	EXPECT_EQ(rig->BufsTotal(), rig->BufsAtPort());
}

TEST_F(Ooo, FinAfterAGapWaitsForIt)
{
	ASSERT_EQ(0, rig->InputSeg(PeerSeg(i, pn + 1000, i.snd_nxt, ACK | FIN,
					   Bytes(data.begin() + 1000, data.begin() + 2000))));
	rig->BurstEnd();
	EXPECT_EQ(KM_TCP_ESTABLISHED, km_tcp_conn_state(conn));
	Send(0, 1000);
	rig->BurstEnd();
	EXPECT_EQ(Upto(2000), rig->rx[conn]);
	EXPECT_EQ(KM_TCP_CLOSE_WAIT, km_tcp_conn_state(conn));
	EXPECT_EQ(pn + 2001, rig->tx.back().ack);
	EXPECT_TRUE(rig->HasEvent(conn, KM_TCP_EV_PEER_FIN, 0));
}

TEST_F(Ooo, EarlyDeliveryWhenThePendingListFills)
{
	// 64 + ooo_max pending slots: 200 one-byte... segments of 10 bytes
	// in one burst still arrive whole, in several deliveries.
	for (int k = 0; k < 200; k++)
		Send((size_t)k * 10, (size_t)k * 10 + 10);
	EXPECT_GE(rig->deliver_calls, 2u);
	rig->BurstEnd();
	EXPECT_EQ(Upto(2000), rig->rx[conn]);
}

// ---- SACK (RFC 2018), receiver side ----------------------------------------------

class Sack : public ::testing::Test {
protected:
	void SetUp() override
	{
		rig = std::make_unique<Rig>([](km_tcp_config &c) { c.ooo_max = 8; });
		Out syn;
		conn = rig->Connect(&syn);
		EXPECT_TRUE(syn.sack_perm) << "our SYN permits SACK";
		Seg s = PeerSeg(rig->Info(conn), 0, syn.seq + 1, SYN | ACK);
		s.opts = OptMss(1460);
		for (Bytes o : { OptSackPerm(), OptWs(7) })
			s.opts.insert(s.opts.end(), o.begin(), o.end());
		EXPECT_EQ(0, rig->InputSeg(s));
		rig->BurstEnd();
		rig->Clear();
		i = rig->Info(conn);
		pn = 1;
		data = Pattern(20000, 12);
	}
	// Bytes [a, b) of the stream; returns the ACK it drew, if any.
	Out Send(size_t a, size_t b)
	{
		EXPECT_EQ(0, rig->InputSeg(PeerSeg(i, pn + (uint32_t)a, i.snd_nxt, ACK,
						   Bytes(data.begin() + (long)a,
							 data.begin() + (long)b))));
		rig->BurstEnd();
		Out o;
		while (!rig->tx.empty())
			o = rig->Pop();
		return o;
	}
	using Blocks = std::vector<std::pair<uint32_t, uint32_t>>;
	Blocks B(std::initializer_list<std::pair<size_t, size_t>> l)
	{
		Blocks v;
		for (auto &p : l)
			v.push_back({ pn + (uint32_t)p.first, pn + (uint32_t)p.second });
		return v;
	}
	std::unique_ptr<Rig> rig;
	km_tcp_conn *conn = nullptr;
	km_tcp_conn_info i;
	uint32_t pn = 0;
	Bytes data;
};

TEST_F(Sack, BlocksDescribeTheQueueMostRecentFirst)
{
	Out a = Send(1000, 2000);
	EXPECT_EQ(pn, a.ack);
	EXPECT_EQ(B({ { 1000, 2000 } }), a.sack);
	EXPECT_TRUE(a.tcp_csum_ok);
	a = Send(3000, 4000);
	EXPECT_EQ(B({ { 3000, 4000 }, { 1000, 2000 } }), a.sack);
	a = Send(4000, 5000);	// adjacent pieces form one block
	EXPECT_EQ(B({ { 3000, 5000 }, { 1000, 2000 } }), a.sack);
	Send(7000, 8000);
	Send(9000, 10000);
	a = Send(11000, 12000);	// five blocks: the recent one, then the lowest
	EXPECT_EQ(B({ { 11000, 12000 }, { 1000, 2000 }, { 3000, 5000 }, { 7000, 8000 } }),
		  a.sack);
	a = Send(0, 1000);	// the first gap fills
	EXPECT_EQ(pn + 2000, a.ack);
	EXPECT_EQ(B({ { 11000, 12000 }, { 3000, 5000 }, { 7000, 8000 }, { 9000, 10000 } }),
		  a.sack);
	Send(2000, 3000);
	Send(5000, 7000);
	Send(8000, 9000);
	a = Send(10000, 11000);
	EXPECT_EQ(pn + 12000, a.ack);
	EXPECT_TRUE(a.sack.empty()) << "nothing queued, no SACK option";
	EXPECT_EQ(Bytes(data.begin(), data.begin() + 12000), rig->rx[conn]);
}

TEST_F(Sack, FullQueueNeverRenegesOnWhatWasReported)
{
	for (size_t k = 0; k < 8; k++)
		Send(2000 + k * 1000, 2500 + k * 1000);
	EXPECT_EQ(8u, rig->Info(conn).ooo_pieces);
	// Nearer the gap, but the queue is full: the newcomer goes, every
	// reported block stays.
	Out a = Send(1000, 1500);
	EXPECT_EQ(1u, rig->Drops(KM_TCP_DROP_OOO_FULL));
	EXPECT_EQ(8u, rig->Info(conn).ooo_pieces);
	ASSERT_FALSE(a.sack.empty());
	EXPECT_EQ(pn + 2000, a.sack[1].first) << "the lowest block is still there";
	// In-order data is never refused: it drains the queue.
	Send(0, 2500);
	EXPECT_EQ(Bytes(data.begin(), data.begin() + 2500), rig->rx[conn]);
	EXPECT_EQ(7u, rig->Info(conn).ooo_pieces);
}

} // namespace
