// Goal: passive open works and is bounded: a SYN to a listening port gets
// a SYN-ACK with our MSS and, only when the SYN offered them, window scale
// and SACK-permitted; the peer's options are honoured; the final ACK makes
// the connection ESTABLISHED and reports it once through ops->accept;
// SYN-RECEIVED retransmits its SYN-ACK with backoff and gives up after
// syn_retries, an RST there frees the slot, half-open connections never
// outnumber the slots, and SYNs to other ports still get an RST. Then the
// send path streams bulk data: two endpoints back to back, one listening,
// 64 MiB with and without loss, through a ring as large as the stream and
// through a small one that the stream wraps many times.
// Method: crafted frames through the rig (fake port, fake clock, an
// independent checksum oracle) for the handshake; for the stream, two rigs
// whose tx captures are fed to each other, losses drawn from a seeded
// generator, time advanced to the next timer whenever the wire is idle,
// and every delivered byte compared with the pattern sent.
#include <gtest/gtest.h>

#include <cerrno>
#include <random>

#include "tcp_rig.h"

using namespace tcptest;

namespace {

constexpr uint16_t kListenPort = 9000;
constexpr uint16_t kClientPort = 40000;
constexpr uint32_t kPeerIsn = 5000;

Bytes AllOpts(uint16_t mss = 1460, uint8_t ws = 7)
{
	Bytes o = OptMss(mss), s = OptSackPerm(), w = OptWs(ws);
	o.insert(o.end(), s.begin(), s.end());
	o.insert(o.end(), w.begin(), w.end());
	return o;
}

Seg PeerSyn(Bytes opts, uint16_t sport = kClientPort, uint32_t isn = kPeerIsn)
{
	Seg s;
	s.seq = isn;
	s.ack = 0;
	s.flags = SYN;
	s.win = 29200;
	s.opts = std::move(opts);
	s.sport = sport;
	s.dport = kListenPort;
	return s;
}

// A segment of the peer on the half-open or accepted connection.
Seg PeerToUs(uint32_t seq, uint32_t ack, uint8_t flags = ACK,
	     uint16_t sport = kClientPort, uint16_t win = 1000)
{
	Seg s;
	s.seq = seq;
	s.ack = ack;
	s.flags = flags;
	s.win = win;
	s.sport = sport;
	s.dport = kListenPort;
	return s;
}

// Answer an ARP request for the peer if one is waiting.
void AnswerArp(Rig &r)
{
	if (r.tx.empty() || !r.tx.front().is_arp())
		return;
	Out req = r.Pop();
	EXPECT_EQ(1, req.arp_op);
	EXPECT_EQ(kPeerIp, req.tpa);
	EXPECT_EQ(0, r.Input(BuildArp(2, kOurMac, kPeerMac, kPeerIp, kOurMac,
				      kOurIp)));
}

// Feed the SYN and return the SYN-ACK (after ARP on the first one).
Out SynAck(Rig &r, const Seg &syn)
{
	EXPECT_EQ(0, r.InputSeg(syn));
	r.BurstEnd();
	AnswerArp(r);
	Out o = r.Pop();
	EXPECT_TRUE(o.is_tcp());
	EXPECT_TRUE(o.tcp_csum_ok);
	EXPECT_TRUE(o.ip_csum_ok);
	EXPECT_EQ(SYN | ACK, o.flags);
	EXPECT_EQ(syn.seq + 1, o.ack);
	EXPECT_EQ(kListenPort, o.sport);
	EXPECT_EQ(syn.sport, o.dport);
	EXPECT_EQ(kPeerIp, o.dst_ip);
	return o;
}

// The whole handshake; returns the accepted connection.
km_tcp_conn *Accept(Rig &r, Bytes opts, Out *synack = nullptr,
		    uint16_t win = 1000)
{
	Out sa = SynAck(r, PeerSyn(std::move(opts)));
	EXPECT_TRUE(r.accepted.empty());
	EXPECT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1, sa.seq + 1, ACK,
					 kClientPort, win)));
	r.BurstEnd();
	if (synack)
		*synack = sa;
	EXPECT_EQ(1u, r.accepted.size());
	return r.accepted.empty() ? nullptr : r.accepted.back();
}

TEST(TcpListen, Api)
{
	Rig r;
	EXPECT_EQ(-EINVAL, km_tcp_listen(r.ep, 0));
	EXPECT_EQ(-EINVAL, km_tcp_listen(r.ep, r.cfg.port_min))
		<< "the ephemeral range is for active opens";
	EXPECT_EQ(-EINVAL, km_tcp_listen(r.ep, r.cfg.port_max));
	EXPECT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	EXPECT_EQ(-EADDRINUSE, km_tcp_listen(r.ep, kListenPort));
	for (uint16_t p = 1; p < KM_TCP_LISTEN_MAX; p++)
		EXPECT_EQ(0, km_tcp_listen(r.ep, (uint16_t)(kListenPort + p)));
	EXPECT_EQ(-ENOBUFS, km_tcp_listen(r.ep, 1));
	EXPECT_EQ(0, km_tcp_unlisten(r.ep, kListenPort + 3));
	EXPECT_EQ(-ENOENT, km_tcp_unlisten(r.ep, kListenPort + 3));
	EXPECT_EQ(0, km_tcp_listen(r.ep, 1));
	EXPECT_STREQ("SYN-RECEIVED", km_tcp_state_name(KM_TCP_SYN_RCVD));
	EXPECT_STREQ("listen_full", km_tcp_drop_name(KM_TCP_DROP_LISTEN_FULL));
}

TEST(TcpListen, HandshakeFromAPeerSyn)
{
	Rig r;
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	int tag = 0;
	r.on_accept = [&](km_tcp_conn *c) { km_tcp_conn_set_user(c, &tag); };
	Out sa;
	km_tcp_conn *c = Accept(r, AllOpts(), &sa);
	ASSERT_NE(nullptr, c);
	// Our SYN-ACK: MSS, SACK-permitted and WS (1 MiB needs shift 5),
	// the window unscaled.
	EXPECT_EQ(1460, sa.mss);
	EXPECT_EQ(5, sa.wscale);
	EXPECT_TRUE(sa.sack_perm);
	EXPECT_EQ(65535, sa.win);
	EXPECT_TRUE(sa.df);
	EXPECT_TRUE(r.tx.empty()) << "the final ACK needs no answer";
	EXPECT_EQ(&tag, km_tcp_conn_user(c));
	km_tcp_conn_info i = r.Info(c);
	EXPECT_EQ(KM_TCP_ESTABLISHED, i.state);
	EXPECT_EQ(kListenPort, i.local_port);
	EXPECT_EQ(kClientPort, i.remote_port);
	EXPECT_EQ(kPeerIp, i.remote_ip);
	EXPECT_EQ(sa.seq, i.iss);
	EXPECT_EQ(sa.seq + 1, i.snd_una);
	EXPECT_EQ(kPeerIsn + 1, i.rcv_nxt);
	EXPECT_TRUE(i.wscale_ok);
	EXPECT_EQ(7, i.snd_wscale);
	EXPECT_EQ(5, i.rcv_wscale);
	EXPECT_EQ(1460, i.snd_mss);
	EXPECT_EQ(1000u << 7, i.snd_wnd) << "the ACK's window is scaled";
	km_tcp_stats st = r.Stats();
	EXPECT_EQ(1u, st.conns_accepted);
	EXPECT_EQ(1u, st.conns_opened);
	EXPECT_EQ(1u, st.conns_used);
	EXPECT_TRUE(r.events.empty()) << "no CONNECTED for a passive open";

	// Data both ways on the existing data path.
	Seg d = PeerToUs(kPeerIsn + 1, sa.seq + 1, ACK | PSH);
	d.data = Pattern(300, 9);
	ASSERT_EQ(0, r.InputSeg(d));
	r.BurstEnd();
	EXPECT_EQ(Pattern(300, 9), r.rx[c]);
	r.Clear();
	Bytes out = Pattern(3000, 4);
	iovec v = { out.data(), out.size() };
	ASSERT_EQ(3000, km_tcp_send(c, &v, 1));
	std::vector<Out> o = r.TcpOut();
	ASSERT_EQ(3u, o.size());
	EXPECT_EQ(sa.seq + 1, o[0].seq);
	EXPECT_EQ(kPeerIsn + 301, o[0].ack);
	EXPECT_EQ(Bytes(out.begin(), out.begin() + 1460), o[0].data);
	// The peer closes, we close: both FINs, CLOSED(0) once.
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 301, sa.seq + 3001,
					 ACK | FIN)));
	r.BurstEnd();
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_PEER_FIN, 0));
	ASSERT_EQ(0, km_tcp_close(c));
	o = r.TcpOut();
	ASSERT_FALSE(o.empty());
	EXPECT_TRUE(o.back().flags & FIN);
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 302, sa.seq + 3002)));
	r.BurstEnd();
	EXPECT_TRUE(r.HasEvent(c, KM_TCP_EV_CLOSED, 0));
	EXPECT_EQ(0u, r.Stats().conns_used);
}

struct OptCase {
	const char *name;
	Bytes opts;
	int want_ws;		// in our SYN-ACK (-1: absent)
	bool want_sack;
	uint16_t snd_mss;	// what we then send
	int snd_wscale;		// the peer's shift we use (-1: scaling off)
};

class TcpListenOpts : public ::testing::TestWithParam<OptCase> {};

TEST_P(TcpListenOpts, PeerOptionsHonoured)
{
	const OptCase &p = GetParam();
	Rig r;
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	Out sa;
	km_tcp_conn *c = Accept(r, p.opts, &sa, 4000);
	ASSERT_NE(nullptr, c);
	EXPECT_EQ(1460, sa.mss) << "our MSS is always offered";
	EXPECT_EQ(p.want_ws, sa.wscale);
	EXPECT_EQ(p.want_sack, sa.sack_perm);
	km_tcp_conn_info i = r.Info(c);
	EXPECT_EQ(p.snd_mss, i.snd_mss);
	EXPECT_EQ(p.snd_wscale >= 0, i.wscale_ok);
	if (p.snd_wscale >= 0) {
		EXPECT_EQ(p.snd_wscale, i.snd_wscale);
		EXPECT_EQ(5, i.rcv_wscale);
		EXPECT_EQ(4000u << p.snd_wscale, i.snd_wnd);
	} else {
		EXPECT_EQ(0, i.rcv_wscale);
		EXPECT_EQ(4000u, i.snd_wnd);
	}
	// Segments are cut at the peer's MSS, within its window.
	Bytes out = Pattern(3000, 5);
	iovec v = { out.data(), out.size() };
	ASSERT_EQ(3000, km_tcp_send(c, &v, 1));
	size_t sent = 0;
	for (const Out &o : r.TcpOut()) {
		EXPECT_LE(o.data.size(), p.snd_mss);
		EXPECT_EQ(-1, o.mss);
		sent += o.data.size();
		// Our window field: scaled by our shift only if scaling is on.
		EXPECT_EQ(p.snd_wscale >= 0 ? (1u << 20) >> 5 : 65535u, o.win);
	}
	EXPECT_EQ(std::min<size_t>(3000, i.snd_wnd), sent);
}

INSTANTIATE_TEST_SUITE_P(
	Cases, TcpListenOpts,
	::testing::Values(
		OptCase{ "all", AllOpts(), 5, true, 1460, 7 },
		OptCase{ "mss_only", OptMss(536), -1, false, 536, -1 },
		OptCase{ "none", {}, -1, false, 536, -1 },
		OptCase{ "ws_no_sack", [] {
				 Bytes o = OptMss(1200), w = OptWs(3);
				 o.insert(o.end(), w.begin(), w.end());
				 return o;
			 }(), 5, false, 1200, 3 },
		OptCase{ "ws_above_14", AllOpts(1460, 15), 5, true, 1460, 14 },
		OptCase{ "jumbo_mss", AllOpts(8960, 0), 5, true, 1460, 0 }),
	[](const ::testing::TestParamInfo<OptCase> &i) {
		return std::string(i.param.name);
	});

TEST(TcpListen, SynAckRetransmittedWithBackoffThenGivesUp)
{
	Rig r([](km_tcp_config &c) { c.syn_retries = 3; });
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	Out sa = SynAck(r, PeerSyn(AllOpts()));
	EXPECT_EQ(1u, r.Stats().conns_used);
	// RFC 6298: 1 s, then doubled each time.
	uint64_t rto = r.cfg.rto_init_ms;
	for (uint32_t k = 0; k < r.cfg.syn_retries; k++) {
		r.Advance(rto - 1);
		EXPECT_TRUE(r.tx.empty()) << "retry " << k << " early";
		r.Advance(1);
		Out again = r.Pop();
		EXPECT_EQ(SYN | ACK, again.flags);
		EXPECT_EQ(sa.seq, again.seq);
		EXPECT_EQ(sa.ack, again.ack);
		EXPECT_EQ(sa.mss, again.mss);
		EXPECT_EQ(sa.wscale, again.wscale);
		rto *= 2;
	}
	// The last timeout gives up: nothing sent, slot free, no report.
	r.Advance(rto);
	EXPECT_TRUE(r.tx.empty());
	km_tcp_stats st = r.Stats();
	EXPECT_EQ(0u, st.conns_used);
	EXPECT_EQ(1u, st.accept_failures);
	EXPECT_EQ(r.cfg.syn_retries, st.tcp.retransmits);
	EXPECT_TRUE(r.accepted.empty());
	EXPECT_TRUE(r.events.empty());
	// A late ACK finds no connection: RST <SEQ=SEG.ACK>.
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1, sa.seq + 1)));
	Out rst = r.Pop();
	EXPECT_EQ(RST, rst.flags);
	EXPECT_EQ(sa.seq + 1, rst.seq);
	EXPECT_TRUE(r.accepted.empty());
}

TEST(TcpListen, LostSynAckAnsweredAgainOnTheRetransmittedSyn)
{
	Rig r;
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	Out sa = SynAck(r, PeerSyn(AllOpts()));
	// The peer's SYN again: the same SYN-ACK, same slot.
	ASSERT_EQ(0, r.InputSeg(PeerSyn(AllOpts())));
	Out again = r.Pop();
	EXPECT_EQ(SYN | ACK, again.flags);
	EXPECT_EQ(sa.seq, again.seq);
	EXPECT_EQ(1u, r.Stats().conns_used);
	// A SYN with another sequence number is a challenge, not a reset.
	ASSERT_EQ(0, r.InputSeg(PeerSyn(AllOpts(), kClientPort, 99999)));
	Out ch = r.Pop();
	EXPECT_EQ(ACK, ch.flags);
	EXPECT_EQ(kPeerIsn + 1, ch.ack);
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1, sa.seq + 1)));
	r.BurstEnd();
	ASSERT_EQ(1u, r.accepted.size());
	// Karn: the RTT of a repeated SYN-ACK is not sampled; RFC 6298 5.7.
	EXPECT_EQ(3000u, r.Info(r.accepted[0]).rto_ms);
}

TEST(TcpListen, UnacceptableAckInSynRcvdGetsRst)
{
	Rig r;
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	Out sa = SynAck(r, PeerSyn(AllOpts()));
	for (uint32_t bad : { sa.seq, sa.seq + 2, sa.seq - 100 }) {
		ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1, bad)));
		Out rst = r.Pop();
		EXPECT_EQ(RST, rst.flags);
		EXPECT_EQ(bad, rst.seq);
	}
	// Without ACK: dropped, no answer.
	ASSERT_EQ(-EBADMSG, r.InputSeg(PeerToUs(kPeerIsn + 1, 0, PSH)));
	EXPECT_EQ(1u, r.Drops(KM_TCP_DROP_TCP_FLAGS));
	EXPECT_TRUE(r.tx.empty());
	r.BurstEnd();
	EXPECT_TRUE(r.accepted.empty());
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1, sa.seq + 1)));
	r.BurstEnd();
	EXPECT_EQ(1u, r.accepted.size());
	EXPECT_EQ(3u, r.Drops(KM_TCP_DROP_ACK));
}

TEST(TcpListen, RstInSynRcvdFreesTheSlot)
{
	Rig r;
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	Out sa = SynAck(r, PeerSyn(AllOpts()));
	// RFC 5961: in the window but not exact: challenge ACK, slot kept.
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 10, 0, RST)));
	Out ch = r.Pop();
	EXPECT_EQ(ACK, ch.flags);
	EXPECT_EQ(kPeerIsn + 1, ch.ack);
	// Outside the window (which the challenge ACK, scaled, opened to
	// the whole 1 MiB buffer): ignored.
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1 + (2u << 20), 0, RST)));
	EXPECT_TRUE(r.tx.empty());
	r.BurstEnd();
	EXPECT_EQ(1u, r.Stats().conns_used);
	// Exact: the slot is freed, nothing is reported.
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1, sa.seq + 1, RST | ACK)));
	r.BurstEnd();
	km_tcp_stats st = r.Stats();
	EXPECT_EQ(0u, st.conns_used);
	EXPECT_EQ(1u, st.accept_failures);
	EXPECT_EQ(1u, st.tcp.rst_in);
	EXPECT_TRUE(r.tx.empty());
	EXPECT_TRUE(r.accepted.empty());
	EXPECT_TRUE(r.events.empty());
	// No SYN-ACK retransmission follows.
	r.Advance(10000);
	EXPECT_TRUE(r.tx.empty());
	// The peer may try again: a new half-open connection.
	Out sa2 = SynAck(r, PeerSyn(AllOpts(), kClientPort, 777));
	EXPECT_EQ(778u, sa2.ack);
}

TEST(TcpListen, SynToAPortNotListeningGetsRst)
{
	Rig r;
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	Seg syn = PeerSyn(AllOpts());
	syn.dport = kListenPort + 1;
	ASSERT_EQ(0, r.InputSeg(syn));
	Out rst = r.Pop();
	EXPECT_EQ(RST | ACK, rst.flags);
	EXPECT_EQ(0u, rst.seq);
	EXPECT_EQ(kPeerIsn + 1, rst.ack);
	EXPECT_EQ(1u, r.Drops(KM_TCP_DROP_NO_CONN));
	EXPECT_EQ(0u, r.Stats().conns_used);
	// And on the listening port, a segment that is not a SYN: RST too.
	ASSERT_EQ(0, r.InputSeg(PeerToUs(1, 12345)));
	rst = r.Pop();
	EXPECT_EQ(RST, rst.flags);
	EXPECT_EQ(12345u, rst.seq);
	// An RST is never answered.
	ASSERT_EQ(0, r.InputSeg(PeerToUs(1, 0, RST)));
	EXPECT_TRUE(r.tx.empty());
	EXPECT_EQ(0u, r.Stats().conns_used);
}

TEST(TcpListen, UnlistenResetsHalfOpenAndRefusesNewSyns)
{
	Rig r;
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	km_tcp_conn *est = Accept(r, AllOpts());
	ASSERT_NE(nullptr, est);
	Out sa = SynAck(r, PeerSyn(AllOpts(), kClientPort + 1));
	EXPECT_EQ(2u, r.Stats().conns_used);
	ASSERT_EQ(0, km_tcp_unlisten(r.ep, kListenPort));
	Out rst = r.Pop();
	EXPECT_TRUE(rst.flags & RST);
	EXPECT_EQ(kClientPort + 1, rst.dport);
	EXPECT_EQ(sa.seq + 1, rst.seq);
	r.Poll();
	EXPECT_EQ(1u, r.Stats().conns_used) << "the established one stays";
	EXPECT_EQ(KM_TCP_ESTABLISHED, km_tcp_conn_state(est));
	EXPECT_TRUE(r.events.empty());
	Seg syn = PeerSyn(AllOpts(), kClientPort + 2);
	ASSERT_EQ(0, r.InputSeg(syn));
	EXPECT_EQ(RST | ACK, r.Pop().flags);
}

TEST(TcpListen, HalfOpenBoundedByFreeSlots)
{
	Rig r;	// conns_max 4
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	std::vector<Out> sas;
	for (uint16_t k = 0; k < r.cfg.conns_max; k++)
		sas.push_back(SynAck(r, PeerSyn(AllOpts(), kClientPort + k)));
	EXPECT_EQ(r.cfg.conns_max, r.Stats().conns_used);
	// No slot: the SYN is dropped unanswered (the peer will retry).
	Seg extra = PeerSyn(AllOpts(), kClientPort + 100);
	ASSERT_EQ(0, r.InputSeg(extra));
	r.BurstEnd();
	EXPECT_TRUE(r.tx.empty());
	EXPECT_EQ(1u, r.Drops(KM_TCP_DROP_LISTEN_FULL));
	km_tcp_conn *c = nullptr;
	EXPECT_EQ(-ENOBUFS, km_tcp_connect(r.ep, kPeerIp, 9092, nullptr, &c));
	// One completes; the others are reset; the retry finds a slot.
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1, sas[0].seq + 1)));
	for (uint16_t k = 1; k < r.cfg.conns_max; k++)
		ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1, sas[k].seq + 1,
						 RST | ACK,
						 (uint16_t)(kClientPort + k))));
	r.BurstEnd();
	EXPECT_EQ(1u, r.accepted.size());
	EXPECT_EQ(1u, r.Stats().conns_used);
	Out sa = SynAck(r, extra);
	EXPECT_EQ(kClientPort + 100, sa.dport);
	// Four connections from one peer IP, told apart by their ports.
	ASSERT_EQ(0, r.InputSeg(PeerToUs(kPeerIsn + 1, sa.seq + 1, ACK,
					 kClientPort + 100)));
	r.BurstEnd();
	ASSERT_EQ(2u, r.accepted.size());
	EXPECT_EQ(kClientPort + 100, r.Info(r.accepted[1]).remote_port);
}

TEST(TcpListen, AbortInsideAcceptIsReportedAsClosed)
{
	Rig r;
	ASSERT_EQ(0, km_tcp_listen(r.ep, kListenPort));
	r.on_accept = [](km_tcp_conn *c) { km_tcp_abort(c); };
	km_tcp_conn *c = Accept(r, AllOpts());
	ASSERT_NE(nullptr, c);
	std::vector<Out> o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_TRUE(o[0].flags & RST);
	ASSERT_EQ(1u, r.events.size());
	EXPECT_EQ(KM_TCP_EV_CLOSED, r.events[0].ev);
	EXPECT_EQ(-ECONNABORTED, r.events[0].res);
	EXPECT_EQ(0u, r.Stats().conns_used);
}

// ---- the bulk send path -----------------------------------------------------

// RFC 6582: two holes in one window are both repaired without a timeout:
// the third duplicate retransmits the first, the partial ACK that follows
// retransmits the second at once, the full ACK ends recovery.
TEST(TcpBulkSend, NewRenoRepairsTwoHolesWithoutATimeout)
{
	Rig r;
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn, 65535, 7, 1000);
	km_tcp_conn_info i = r.Info(c);
	Bytes out = Pattern(10000, 8);
	iovec v = { out.data(), out.size() };
	ASSERT_EQ(10000, km_tcp_send(c, &v, 1));
	ASSERT_EQ(10u, r.TcpOut().size());
	uint32_t s0 = i.snd_nxt;
	// Segments 2 and 5 lost: ACK 1000, then a duplicate per later one.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, s0 + 1000)));
	for (int k = 0; k < 2; k++)
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, s0 + 1000)));
	EXPECT_TRUE(r.TcpOut().empty());
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, s0 + 1000)));
	std::vector<Out> o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_EQ(s0 + 1000, o[0].seq);
	for (int k = 0; k < 4; k++)
		ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, s0 + 1000)));
	EXPECT_TRUE(r.TcpOut().empty()) << "no second recovery, nothing new";
	// The retransmission fills hole 1: a partial ACK (up to hole 2).
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, s0 + 4000)));
	o = r.TcpOut();
	ASSERT_EQ(1u, o.size());
	EXPECT_EQ(s0 + 4000, o[0].seq);
	EXPECT_EQ(Bytes(out.begin() + 4000, out.begin() + 5000), o[0].data);
	// The full ACK ends recovery with cwnd = ssthresh: the flight at the
	// third duplicate (9000 bytes) halved.
	ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn, s0 + 10000)));
	km_tcp_counters cs;
	km_tcp_conn_get_stats(c, &cs);
	EXPECT_EQ(1u, cs.fast_retransmits);
	EXPECT_EQ(2u, cs.retransmits);
	EXPECT_EQ(0u, cs.rto_expiries);
	EXPECT_EQ(4500u, r.Info(c).cwnd);
	EXPECT_EQ(0u, r.Info(c).snd_queued);
}

// The send ring is reused as ACKs free it: a stream many times the ring
// goes through, wrapping, each byte sent once and in order.
TEST(TcpBulkSend, RingReusedAcrossWraps)
{
	Rig r([](km_tcp_config &c) { c.snd_buf_bytes = 4096; });
	uint32_t pn;
	km_tcp_conn *c = r.Establish(100, &pn, 65535, 7, 1000);
	km_tcp_conn_info i = r.Info(c);
	const size_t total = 100000;
	Bytes out = Pattern(total, 6), seen;
	size_t queued = 0;
	for (int round = 0; round < 1000 && seen.size() < total; round++) {
		if (queued < total && km_tcp_send_space(c) > 0) {
			size_t n = std::min<size_t>(total - queued, 1500);
			iovec v = { out.data() + queued, n };
			ssize_t k = km_tcp_send(c, &v, 1);
			ASSERT_GT(k, 0);
			queued += (size_t)k;
		}
		std::vector<Out> o = r.TcpOut();
		for (const Out &x : o) {
			ASSERT_EQ(i.snd_nxt + seen.size(), x.seq);
			seen.insert(seen.end(), x.data.begin(), x.data.end());
		}
		if (!o.empty()) {
			ASSERT_EQ(0, r.InputSeg(PeerSeg(i, pn,
							(uint32_t)(i.snd_nxt + seen.size()))));
		}
		EXPECT_LE(r.Info(c).snd_queued, 4096u);
	}
	EXPECT_EQ(out, seen);
}

// ---- two endpoints back to back -------------------------------------------

struct StreamCase {
	const char *name;
	uint32_t snd_buf_bytes;
	double loss;		// per frame, each direction, once established
	uint64_t bytes;
};

class TcpListenStream : public ::testing::TestWithParam<StreamCase> {};

// The client side: ip kOurIp (the rig's default); the server: kPeerIp.
void ServerConfig(km_tcp_config &c, uint32_t snd_buf)
{
	memcpy(c.mac, kPeerMac, 6);
	c.ip = kPeerIp;
	c.conns_max = 2;
	c.snd_buf_bytes = snd_buf;
	c.rto_min_ms = 200;
}

void ClientConfig(km_tcp_config &c)
{
	c.conns_max = 2;
	c.ooo_max = 1024;
	c.rcv_buf_bytes = 1u << 20;
}

struct Wire {
	Rig &a, &b;
	std::mt19937_64 rng{ 42 };
	double loss = 0;
	bool lossy = false;	// set once established
	uint64_t frames = 0, dropped = 0;

	// Frames from one rig into the other as one receive burst.
	size_t Move(Rig &from, Rig &to)
	{
		std::deque<Out> q;
		q.swap(from.tx);
		for (const Out &o : q) {
			frames++;
			if (lossy && o.is_tcp() &&
			    std::uniform_real_distribution<>(0, 1)(rng) < loss) {
				dropped++;
				continue;
			}
			EXPECT_EQ(0, to.Input(o.raw));
		}
		if (!q.empty())
			to.BurstEnd();
		return q.size();
	}

	// Until done() or stalled; time moves only when the wire is idle.
	bool Run(const std::function<bool()> &done, uint64_t rounds_max)
	{
		for (uint64_t k = 0; k < rounds_max; k++) {
			size_t moved = Move(a, b) + Move(b, a);
			if (done())
				return true;
			if (moved)
				continue;
			uint64_t t = std::min(km_tcp_next_timer_ms(a.ep),
					      km_tcp_next_timer_ms(b.ep));
			if (t == UINT64_MAX)
				return false;
			a.now = b.now = std::max(t, a.now);
			a.Poll();
			b.Poll();
		}
		return false;
	}
};

TEST_P(TcpListenStream, EndpointToEndpointEveryByte)
{
	const StreamCase &p = GetParam();
	Rig srv([&](km_tcp_config &c) { ServerConfig(c, p.snd_buf_bytes); });
	Rig cli([](km_tcp_config &c) { ClientConfig(c); });
	ASSERT_EQ(0, km_tcp_listen(srv.ep, kListenPort));
	Wire w{ cli, srv };
	w.loss = p.loss;

	// The server streams the pattern, refilling the ring on SENT.
	uint64_t queued = 0;
	km_tcp_conn *sc = nullptr;
	bool fin_sent = false;
	auto feed = [&] {
		while (queued < p.bytes && km_tcp_send_space(sc) > 0) {
			size_t n = std::min<uint64_t>(p.bytes - queued, 256u << 10);
			n = std::min<size_t>(n, km_tcp_send_space(sc));
			Bytes chunk = Pattern(n, 77, queued);
			iovec v = { chunk.data(), chunk.size() };
			ssize_t r = km_tcp_send(sc, &v, 1);
			ASSERT_GT(r, 0);
			queued += (uint64_t)r;
		}
		if (queued == p.bytes && !fin_sent) {
			fin_sent = true;
			EXPECT_EQ(0, km_tcp_close(sc));
		}
	};
	srv.on_accept = [&](km_tcp_conn *c) {
		sc = c;
		w.lossy = true;
		feed();
	};
	srv.on_event = [&](const Event &e) {
		if (e.ev == KM_TCP_EV_SENT)
			feed();
	};
	// The client checks bytes as they come (not kept: 64 MiB twice).
	uint64_t got = 0;
	bool bytes_ok = true;
	km_tcp_conn *cc = nullptr;
	cli.on_deliver = [&](km_tcp_conn *, const km_chain *d, const uint32_t *) {
		for (uint32_t i = 0; i < d->n_iov; i++) {
			const uint8_t *q = (const uint8_t *)d->iov[i].iov_base;
			Bytes want = Pattern(d->iov[i].iov_len, 77, got);
			if (memcmp(q, want.data(), want.size()) != 0)
				bytes_ok = false;
			got += d->iov[i].iov_len;
		}
		cli.rx.clear();
	};
	cli.on_event = [&](const Event &e) {
		if (e.ev == KM_TCP_EV_PEER_FIN) {
			EXPECT_EQ(0, km_tcp_close(e.c));
		}
	};
	ASSERT_EQ(0, km_tcp_connect(cli.ep, kPeerIp, kListenPort, nullptr, &cc));
	bool closed = w.Run([&] {
		return cli.HasEvent(cc, KM_TCP_EV_CLOSED, 0) && sc != nullptr &&
		       srv.HasEvent(sc, KM_TCP_EV_CLOSED, 0);
	}, 10000000);
	EXPECT_TRUE(closed) << "got " << got << " of " << p.bytes;
	EXPECT_TRUE(bytes_ok);
	EXPECT_EQ(p.bytes, got);
	ASSERT_NE(nullptr, sc);
	km_tcp_stats ss = srv.Stats(), cs = cli.Stats();
	EXPECT_EQ(1u, ss.conns_accepted);
	EXPECT_EQ(1u, cs.conns_opened);
	EXPECT_GE(ss.tcp.bytes_out, p.bytes);
	if (p.loss > 0) {
		EXPECT_GT(w.dropped, 0u);
		EXPECT_GT(ss.tcp.retransmits, 0u);
		EXPECT_GT(ss.tcp.fast_retransmits, 0u);
	} else {
		EXPECT_EQ(0u, ss.tcp.retransmits);
	}
	// Repair stays cheap: NewReno retransmits about what was lost.
	EXPECT_LT(ss.tcp.bytes_out - p.bytes, p.bytes / 8)
		<< "retransmitted " << ss.tcp.bytes_out - p.bytes;
	EXPECT_EQ(0u, cs.bufs_user);
	EXPECT_EQ(cli.BufsTotal(), cli.BufsAtPort());
	EXPECT_EQ(srv.BufsTotal(), srv.BufsAtPort());
	printf("[ stream   ] %s: %llu frames, %llu dropped, %llu retransmits "
	       "(%llu fast, %llu RTO), %llu bytes out\n", p.name,
	       (unsigned long long)w.frames, (unsigned long long)w.dropped,
	       (unsigned long long)ss.tcp.retransmits,
	       (unsigned long long)ss.tcp.fast_retransmits,
	       (unsigned long long)ss.tcp.rto_expiries,
	       (unsigned long long)ss.tcp.bytes_out);
}

INSTANTIATE_TEST_SUITE_P(
	Cases, TcpListenStream,
	::testing::Values(
		StreamCase{ "ring64m_clean", 64u << 20, 0.0, 64u << 20 },
		StreamCase{ "ring64m_loss1pct", 64u << 20, 0.01, 64u << 20 },
		StreamCase{ "ring256k_clean", 256u << 10, 0.0, 64u << 20 },
		StreamCase{ "ring256k_loss1pct", 256u << 10, 0.01, 64u << 20 },
		StreamCase{ "ring1m_loss5pct", 1u << 20, 0.05, 16u << 20 }),
	[](const ::testing::TestParamInfo<StreamCase> &i) {
		return std::string(i.param.name);
	});

} // namespace
