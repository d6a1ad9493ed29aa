// Goal: the connection state machine of a TCP client is right at its
// edges: RST in every state with an exact, an in-window and an
// out-of-window sequence number (RFC 5961 3.2, RFC 1337 in TIME-WAIT),
// SYN and ACK checks (RFC 5961 4, 5), challenge-ACK rate limiting, FIN in
// both directions (active, passive, simultaneous close, TIME-WAIT and its
// re-ACK, the close timeout), and the end of each connection reported
// exactly once.
// Method: drive a connection to each state with crafted segments through
// the rig, then feed the segment under test and check state, frames sent,
// drop counters and events.
#include <gtest/gtest.h>

#include <cerrno>

#include "tcp_rig.h"

using namespace tcptest;

namespace {

// A connection in a chosen state; pn is the peer's next sequence number,
// our_fin_ack the ACK that acknowledges our FIN (when one was sent).
struct Driven {
	std::unique_ptr<Rig> r;
	km_tcp_conn *c = nullptr;
	uint32_t pn = 0;
	km_tcp_conn_info i;
};

Driven DriveTo(km_tcp_state st, const Rig::Tweak &tweak = nullptr)
{
	Driven d;
	d.r = std::make_unique<Rig>(tweak);
	Rig &r = *d.r;
	d.c = r.Establish(70000, &d.pn);
	d.i = r.Info(d.c);
	uint32_t fin_ack = d.i.snd_nxt + 1;
	bool close_first = st == KM_TCP_FIN_WAIT_1 || st == KM_TCP_FIN_WAIT_2 ||
			   st == KM_TCP_TIME_WAIT || st == KM_TCP_CLOSING;
	if (close_first) {
		EXPECT_EQ(0, km_tcp_close(d.c));
		Out fin = r.Pop();
		EXPECT_EQ(FIN | ACK, fin.flags);
	}
	if (st == KM_TCP_FIN_WAIT_2 || st == KM_TCP_TIME_WAIT) {
		EXPECT_EQ(0, r.InputSeg(PeerSeg(d.i, d.pn, fin_ack)));
	}
	if (st == KM_TCP_CLOSE_WAIT || st == KM_TCP_LAST_ACK ||
	    st == KM_TCP_TIME_WAIT || st == KM_TCP_CLOSING) {
		uint32_t ack = st == KM_TCP_TIME_WAIT ? fin_ack : d.i.snd_nxt;
		EXPECT_EQ(0, r.InputSeg(PeerSeg(d.i, d.pn, ack, FIN | ACK)));
		d.pn++;
	}
	if (st == KM_TCP_LAST_ACK) {
		EXPECT_EQ(0, km_tcp_close(d.c));
	}
	r.BurstEnd();
	r.Clear();
	EXPECT_EQ(st, km_tcp_conn_state(d.c)) << km_tcp_state_name(st);
	d.i = r.Info(d.c);
	return d;
}

enum RstKind { kExact, kInWindow, kOutOfWindow };

struct RstCase {
	km_tcp_state st;
	RstKind kind;
};

class RstEveryState : public ::testing::TestWithParam<RstCase> {};

TEST_P(RstEveryState, Rfc5961Rules)
{
	RstCase p = GetParam();
	Driven d = DriveTo(p.st);
	Rig &r = *d.r;
	uint32_t seq = d.i.rcv_nxt;
	if (p.kind == kInWindow)
		seq += 100;
	else if (p.kind == kOutOfWindow)
		seq += d.i.rcv_wnd + 1000;
	size_t ev0 = r.events.size();
	ASSERT_EQ(0, r.InputSeg(PeerSeg(d.i, seq, 0, RST)));
	r.BurstEnd();
	km_tcp_counters cs;
	km_tcp_conn_get_stats(d.c, &cs);
	if (p.st == KM_TCP_TIME_WAIT) {
		// RFC 1337: TIME-WAIT ignores every RST.
		EXPECT_EQ(KM_TCP_TIME_WAIT, km_tcp_conn_state(d.c));
		EXPECT_EQ(1u, cs.drops[KM_TCP_DROP_RST_TIMEWAIT]);
		EXPECT_TRUE(r.tx.empty());
		EXPECT_EQ(ev0, r.events.size());
		return;
	}
	if (p.kind == kExact) {
		EXPECT_TRUE(r.tx.empty()) << "an RST is never answered";
		ASSERT_EQ(ev0 + 1, r.events.size());
		EXPECT_EQ(KM_TCP_EV_CLOSED, r.events.back().ev);
		EXPECT_EQ(-ECONNRESET, r.events.back().res);
		EXPECT_EQ(0u, r.Stats().conns_used) << "slot freed";
		EXPECT_EQ(1u, r.Stats().tcp.rst_in);
		return;
	}
	EXPECT_EQ(p.st, km_tcp_conn_state(d.c));
	EXPECT_EQ(ev0, r.events.size());
	if (p.kind == kInWindow) {
		ASSERT_EQ(1u, r.tx.size()) << "a challenge ACK";
		Out a = r.Pop();
		EXPECT_EQ(ACK, a.flags);
		EXPECT_EQ(d.i.rcv_nxt, a.ack);
		EXPECT_EQ(d.i.snd_nxt, a.seq);
		EXPECT_EQ(1u, cs.drops[KM_TCP_DROP_RST_CHALLENGE]);
		EXPECT_EQ(1u, cs.challenge_acks);
	} else {
		EXPECT_TRUE(r.tx.empty());
		EXPECT_EQ(1u, cs.drops[KM_TCP_DROP_RST_WINDOW]);
	}
}

std::vector<RstCase> AllRstCases()
{
	std::vector<RstCase> v;
	for (km_tcp_state st : { KM_TCP_ESTABLISHED, KM_TCP_FIN_WAIT_1,
				 KM_TCP_FIN_WAIT_2, KM_TCP_CLOSE_WAIT,
				 KM_TCP_LAST_ACK, KM_TCP_CLOSING,
				 KM_TCP_TIME_WAIT })
		for (RstKind k : { kExact, kInWindow, kOutOfWindow })
			v.push_back({ st, k });
	return v;
}

std::string RstName(const ::testing::TestParamInfo<RstCase> &info)
{
	std::string s = km_tcp_state_name(info.param.st);
	for (auto &ch : s)
		if (ch == '-')
			ch = '_';
	const char *k[] = { "Exact", "InWindow", "OutOfWindow" };
	return s + "_" + k[info.param.kind];
}

INSTANTIATE_TEST_SUITE_P(Tcp, RstEveryState, ::testing::ValuesIn(AllRstCases()),
			 RstName);

std::string StateName(const ::testing::TestParamInfo<km_tcp_state> &p)
{
	std::string s = km_tcp_state_name(p.param);
	for (auto &ch : s)
		if (ch == '-')
			ch = '_';
	return s;
}

class AbortEveryState : public ::testing::TestWithParam<km_tcp_state> {};

TEST_P(AbortEveryState, SendsRstAndReportsAborted)
{
	Driven d = DriveTo(GetParam());
	Rig &r = *d.r;
	size_t ev0 = r.events.size();
	km_tcp_abort(d.c);
	Out rst = r.Pop();
	EXPECT_EQ(RST | ACK, rst.flags);
	EXPECT_EQ(d.i.snd_max, rst.seq);
	EXPECT_EQ(d.i.rcv_nxt, rst.ack);
	EXPECT_TRUE(rst.tcp_csum_ok);
	EXPECT_EQ(ev0, r.events.size()) << "reported later";
	r.Poll();
	ASSERT_EQ(ev0 + 1, r.events.size());
	EXPECT_EQ(KM_TCP_EV_CLOSED, r.events.back().ev);
	EXPECT_EQ(-ECONNABORTED, r.events.back().res);
	EXPECT_EQ(0u, r.Stats().conns_used);
	EXPECT_EQ(1u, r.Stats().tcp.rst_out);
}

INSTANTIATE_TEST_SUITE_P(Tcp, AbortEveryState,
			 ::testing::Values(KM_TCP_ESTABLISHED, KM_TCP_FIN_WAIT_1,
					   KM_TCP_FIN_WAIT_2, KM_TCP_CLOSE_WAIT,
					   KM_TCP_LAST_ACK, KM_TCP_CLOSING),
			 StateName);

TEST(TcpRst, SynSentExactInWindowOutOfWindow)
{
	// In SYN-SENT the ACK field decides (RFC 9293 3.10.7.3).
	for (int kind = 0; kind < 3; kind++) {
		Rig r;
		Out syn;
		km_tcp_conn *c = r.Connect(&syn);
		km_tcp_conn_info i = r.Info(c);
		uint32_t ack = kind == kExact ? syn.seq + 1 :
			       kind == kInWindow ? syn.seq : syn.seq + 100000;
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, 1234, ack, RST | ACK)));
		r.BurstEnd();
		EXPECT_TRUE(r.tx.empty()) << kind;
		if (kind == kExact) {
			ASSERT_EQ(1u, r.events.size());
			EXPECT_EQ(-ECONNREFUSED, r.events[0].res);
		} else {
			EXPECT_EQ(KM_TCP_SYN_SENT, km_tcp_conn_state(c));
			EXPECT_EQ(1u, r.Drops(KM_TCP_DROP_ACK));
		}
	}
}

TEST(TcpRst, ChallengeAcksAreRateLimited)
{
	Driven d = DriveTo(KM_TCP_ESTABLISHED, [](km_tcp_config &c) {
		c.challenge_acks_per_s = 2;
	});
	Rig &r = *d.r;
	for (int k = 0; k < 5; k++)
		ASSERT_EQ(0, r.InputSeg(PeerSeg(d.i, d.i.rcv_nxt + 10, 0, RST)));
	EXPECT_EQ(2u, r.tx.size());
	EXPECT_EQ(3u, r.Stats().challenge_acks_limited);
	r.now += 1000;
	r.Clear();
	ASSERT_EQ(0, r.InputSeg(PeerSeg(d.i, d.i.rcv_nxt + 10, 0, RST)));
	EXPECT_EQ(1u, r.tx.size());
}

TEST(TcpRst, SynAndBadAcksInEstablished)
{
	Driven d = DriveTo(KM_TCP_ESTABLISHED);
	Rig &r = *d.r;
	// RFC 5961 4.2: a SYN, even at RCV.NXT, gets a challenge ACK.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(d.i, d.i.rcv_nxt, 0, SYN)));
	EXPECT_EQ(1u, r.Drops(KM_TCP_DROP_SYN_CHALLENGE));
	EXPECT_EQ(ACK, r.Pop().flags);
	// ACK of data never sent: ACK back, drop (its data is not taken).
	ASSERT_EQ(0, r.InputSeg(PeerSeg(d.i, d.i.rcv_nxt, d.i.snd_nxt + 5, ACK,
					Bytes{ 'x' })));
	EXPECT_EQ(1u, r.Drops(KM_TCP_DROP_ACK));
	EXPECT_EQ(d.i.rcv_nxt, r.Pop().ack);
	// RFC 5961 5.2: an ACK older than SND.UNA - MAX.SND.WND.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(d.i, d.i.rcv_nxt, d.i.snd_una - 200000, ACK)));
	EXPECT_EQ(2u, r.Drops(KM_TCP_DROP_ACK));
	EXPECT_EQ(1u, r.tx.size());
	r.BurstEnd();
	EXPECT_TRUE(r.rx[d.c].empty());
	EXPECT_EQ(KM_TCP_ESTABLISHED, km_tcp_conn_state(d.c));
}

TEST(TcpRst, SegmentForNoConnectionIsAnsweredWithRst)
{
	Rig r;
	Seg s;
	s.dport = 40000;
	s.seq = 1000;
	s.ack = 5555;
	s.flags = ACK;
	s.data = Bytes(10, 'd');
	ASSERT_EQ(0, r.InputSeg(s));
	Out a = r.Pop();
	EXPECT_EQ(RST, a.flags) << "<SEQ=SEG.ACK><CTL=RST>";
	EXPECT_EQ(5555u, a.seq);
	EXPECT_EQ(0, memcmp(a.dst_mac, kPeerMac, 6));
	EXPECT_EQ(kPeerPort, a.dport);
	EXPECT_EQ(40000, a.sport);
	EXPECT_TRUE(a.tcp_csum_ok);
	s.flags = SYN;
	s.data.clear();
	ASSERT_EQ(0, r.InputSeg(s));
	Out b = r.Pop();
	EXPECT_EQ(RST | ACK, b.flags) << "<SEQ=0><ACK=SEG.SEQ+SEG.LEN>";
	EXPECT_EQ(0u, b.seq);
	EXPECT_EQ(1001u, b.ack);
	s.flags = RST;
	ASSERT_EQ(0, r.InputSeg(s));
	EXPECT_TRUE(r.tx.empty()) << "an RST is never answered";
	EXPECT_EQ(3u, r.Drops(KM_TCP_DROP_NO_CONN));
	EXPECT_EQ(r.BufsTotal(), r.BufsAtPort());
}

// ---- FIN ------------------------------------------------------------------------

TEST(TcpFin, ActiveCloseThroughTimeWait)
{
	Rig r([](km_tcp_config &c) { c.time_wait_ms = 500; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	iovec v = { (void *)"bye", 3 };
	ASSERT_EQ(3, km_tcp_send(c, &v, 1));
	r.Clear();
	ASSERT_EQ(0, km_tcp_close(c));
	EXPECT_EQ(-EALREADY, km_tcp_close(c));
	EXPECT_EQ(-EPIPE, km_tcp_send(c, &v, 1));
	Out fin = r.Pop();
	EXPECT_EQ(FIN | ACK, fin.flags);
	EXPECT_EQ(i.snd_nxt + 3, fin.seq);
	EXPECT_EQ(KM_TCP_FIN_WAIT_1, km_tcp_conn_state(c));
	// ACK of data and FIN: FIN-WAIT-2; data keeps arriving.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, fin.seq + 1, ACK, Bytes{ 'a', 'b' })));
	r.BurstEnd();
	EXPECT_EQ(KM_TCP_FIN_WAIT_2, km_tcp_conn_state(c));
	EXPECT_EQ((Bytes{ 'a', 'b' }), r.rx[c]);
	// The peer's FIN: TIME-WAIT, ACKed, and the end reported as orderly.
	r.Clear();
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 2, fin.seq + 1, FIN | ACK)));
	r.BurstEnd();
	EXPECT_EQ(KM_TCP_TIME_WAIT, km_tcp_conn_state(c));
	Out a = r.Pop();
	EXPECT_EQ(ACK, a.flags);
	EXPECT_EQ(pn + 3, a.ack);
	auto ev = r.EventsOf(c);
	ASSERT_GE(ev.size(), 3u);
	EXPECT_EQ(KM_TCP_EV_PEER_FIN, ev[ev.size() - 2].ev);
	EXPECT_EQ(KM_TCP_EV_CLOSED, ev.back().ev);
	EXPECT_EQ(0, ev.back().res);
	EXPECT_EQ(1u, r.Stats().conns_used) << "the slot waits out TIME-WAIT";
	// A retransmitted FIN is ACKed again and restarts the wait.
	r.Advance(300);
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 2, fin.seq + 1, FIN | ACK)));
	EXPECT_EQ(pn + 3, r.Pop().ack);
	r.Advance(499);
	EXPECT_EQ(1u, r.Stats().conns_used);
	size_t nev = r.events.size();
	r.Advance(1);
	EXPECT_EQ(0u, r.Stats().conns_used);
	EXPECT_EQ(nev, r.events.size()) << "the end was reported once";
	EXPECT_EQ(1u, r.Stats().conns_closed);
}

TEST(TcpFin, PassiveClose)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt, FIN | ACK, Bytes{ 'z' })));
	r.BurstEnd();
	EXPECT_EQ(KM_TCP_CLOSE_WAIT, km_tcp_conn_state(c));
	EXPECT_EQ(pn + 2, r.Pop().ack) << "FIN ACKed at once";
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_PEER_FIN, 0));
	EXPECT_EQ((Bytes{ 'z' }), r.rx[c]);
	// We may still send; then close: FIN, LAST-ACK, its ACK ends it.
	iovec v = { (void *)"last", 4 };
	ASSERT_EQ(4, km_tcp_send(c, &v, 1));
	EXPECT_EQ(4u, r.Pop().data.size());
	ASSERT_EQ(0, km_tcp_close(c));
	Out fin = r.Pop();
	EXPECT_EQ(FIN | ACK, fin.flags);
	EXPECT_EQ(KM_TCP_LAST_ACK, km_tcp_conn_state(c));
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 2, fin.seq + 1)));
	r.BurstEnd();
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_CLOSED, 0));
	EXPECT_EQ(0u, r.Stats().conns_used);
	EXPECT_TRUE(r.tx.empty());
}

TEST(TcpFin, SimultaneousCloseGoesThroughClosing)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(0, km_tcp_close(c));
	Out fin = r.Pop();
	// The peer's FIN crosses ours (it acks only our SYN).
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt, FIN | ACK)));
	r.BurstEnd();
	EXPECT_EQ(KM_TCP_CLOSING, km_tcp_conn_state(c));
	EXPECT_EQ(pn + 1, r.Pop().ack);
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 1, fin.seq + 1)));
	r.BurstEnd();
	EXPECT_EQ(KM_TCP_TIME_WAIT, km_tcp_conn_state(c));
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_CLOSED, 0));
}

TEST(TcpFin, FinAckingOurFinGoesStraightToTimeWait)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(0, km_tcp_close(c));
	Out fin = r.Pop();
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, fin.seq + 1, FIN | ACK)));
	r.BurstEnd();
	EXPECT_EQ(KM_TCP_TIME_WAIT, km_tcp_conn_state(c));
}

TEST(TcpFin, LostFinIsRetransmitted)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(0, km_tcp_close(c));
	Out fin = r.Pop();
	r.Advance(i.rto_ms);
	Out again = r.Pop();
	EXPECT_EQ(FIN | ACK, again.flags);
	EXPECT_EQ(fin.seq, again.seq);
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, fin.seq + 1)));
	EXPECT_EQ(KM_TCP_FIN_WAIT_2, km_tcp_conn_state(c));
}

TEST(TcpFin, FinWaitsBehindQueuedData)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn, 10, -1, 1460);
	km_tcp_conn_info i = r.Info(c);
	Bytes d = Pattern(30, 1);
	iovec v = { d.data(), d.size() };
	ASSERT_EQ(30, km_tcp_send(c, &v, 1));
	ASSERT_EQ(0, km_tcp_close(c));
	std::vector<Out> o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_EQ(10u, o[0].data.size());
	EXPECT_EQ(0, o[0].flags & FIN) << "20 bytes still wait for window";
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt + 10, ACK, {}, 100)));
	o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_EQ(FIN | ACK | PSH, o[0].flags) << "the FIN rides the last data";
	EXPECT_EQ(20u, o[0].data.size());
}

TEST(TcpFin, CloseTimeoutResets)
{
	Rig r([](km_tcp_config &c) { c.close_timeout_ms = 3000; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(0, km_tcp_close(c));
	Out fin = r.Pop();
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, fin.seq + 1)));
	r.BurstEnd();
	EXPECT_EQ(KM_TCP_FIN_WAIT_2, km_tcp_conn_state(c));
	r.Advance(2999);
	EXPECT_TRUE(r.events.size() == 1u);
	r.Advance(1);
	Out rst = r.Pop();
	EXPECT_EQ(RST | ACK, rst.flags);
	EXPECT_EQ(fin.seq + 1, rst.seq);
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_CLOSED, -ETIMEDOUT));
	EXPECT_EQ(0u, r.Stats().conns_used);
}

TEST(TcpFin, CloseWhileConnectingAborts)
{
	Rig r;
	Out syn;
	km_tcp_conn *c = r.Connect(&syn);
	ASSERT_EQ(0, km_tcp_close(c));
	Out rst = r.Pop();
	EXPECT_EQ(RST, rst.flags);
	EXPECT_EQ(syn.seq + 1, rst.seq);
	EXPECT_TRUE(r.events.empty()) << "reported later, not inside the call";
	r.Poll();
	ASSERT_EQ(1u, r.events.size());
	EXPECT_EQ(KM_TCP_EV_CONNECTED, r.events[0].ev);
	EXPECT_EQ(-ECONNABORTED, r.events[0].res);
}

// ---- abort and callbacks ------------------------------------------------------

TEST(TcpAbort, AbortSendsRstAndReportsOnce)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	r.auto_release = false;
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt, ACK, Bytes(10, 'a'))));
	r.BurstEnd();
	r.Clear();
	km_tcp_abort(c);
	Out rst = r.Pop();
	EXPECT_EQ(RST | ACK, rst.flags);
	EXPECT_EQ(i.snd_nxt, rst.seq);
	km_tcp_abort(c);
	EXPECT_TRUE(r.tx.empty()) << "a second abort does nothing";
	r.Poll();
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_CLOSED, -ECONNABORTED));
	EXPECT_EQ(2u, r.events.size());
	// The consumer may release after the end; nothing is owed after.
	r.ReleaseAll();
	EXPECT_EQ(r.BufsTotal(), r.BufsAtPort());
	// Segments for the dead connection get an RST.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 10, i.snd_nxt)));
	EXPECT_EQ(RST, r.Pop().flags);
}

TEST(TcpAbort, AbortFromInsideDeliver)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	r.on_deliver = [&](km_tcp_conn *cc, const km_chain *, const uint32_t *) {
		km_tcp_abort(cc);
	};
	// Data and FIN in one burst: the abort inside the delivery stops
	// every later callback (no PEER_FIN), and the end is -ECONNABORTED.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt, ACK, Bytes(10, 'a'))));
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 10, i.snd_nxt, FIN | ACK)));
	r.BurstEnd();
	auto ev = r.EventsOf(c);
	ASSERT_EQ(2u, ev.size());
	EXPECT_EQ(KM_TCP_EV_CONNECTED, ev[0].ev);
	EXPECT_EQ(KM_TCP_EV_CLOSED, ev[1].ev);
	EXPECT_EQ(-ECONNABORTED, ev[1].res);
	EXPECT_EQ(0u, r.Stats().conns_used);
	EXPECT_EQ(r.BufsTotal(), r.BufsAtPort());
}

TEST(TcpAbort, ResetDeliversWhatCameBeforeIt)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn);
	km_tcp_conn_info i = r.Info(c);
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, i.snd_nxt, ACK, Bytes(10, 'a'))));
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn + 10, 0, RST)));
	r.BurstEnd();
	EXPECT_EQ(Bytes(10, 'a'), r.rx[c]);
	auto ev = r.EventsOf(c);
	ASSERT_EQ(2u, ev.size());
	EXPECT_EQ(-ECONNRESET, ev[1].res);
}

} // namespace
