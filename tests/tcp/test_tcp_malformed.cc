// Goal: nothing the network sends is trusted: every malformed or
// unexpected frame (bad checksums, bad or truncated lengths, IPv4 options
// and fragments, wrong addresses, other protocols, impossible flag
// combinations, broken TCP options) is dropped and counted under its own
// reason, leaves the connection untouched, and gives its buffers back.
// Method: take a valid data segment of an established connection, break
// one thing at a time, feed it, and check the drop counter, that nothing
// was delivered or sent, and that the valid segment still works after.
#include <gtest/gtest.h>

#include <cerrno>

#include "tcp_rig.h"

using namespace tcptest;

namespace {

class Malformed : public ::testing::Test {
protected:
	void SetUp() override
	{
		conn = rig.Establish(100, &pn);
		i = rig.Info(conn);
		good = BuildTcp(PeerSeg(i, pn, i.snd_nxt, ACK | PSH, Bytes(64, 'g')));
	}
	// Feed f; expect it dropped under why, with no effect.
	void ExpectDrop(const Bytes &f, km_tcp_drop why, uint32_t rx_flags = 0,
			const std::vector<size_t> &splits = {})
	{
		uint64_t before = rig.Drops(why);
		EXPECT_EQ(-EBADMSG, rig.Input(f, splits, rx_flags)) << km_tcp_drop_name(why);
		rig.BurstEnd();
		EXPECT_EQ(before + 1, rig.Drops(why)) << km_tcp_drop_name(why);
		EXPECT_TRUE(rig.tx.empty()) << km_tcp_drop_name(why);
		EXPECT_TRUE(rig.rx[conn].empty()) << km_tcp_drop_name(why);
		EXPECT_EQ(rig.BufsTotal(), rig.BufsAtPort());
		EXPECT_EQ(KM_TCP_ESTABLISHED, km_tcp_conn_state(conn));
		EXPECT_EQ(pn, rig.Info(conn).rcv_nxt);
	}
	Rig rig;
	km_tcp_conn *conn = nullptr;
	km_tcp_conn_info i;
	uint32_t pn = 0;
	Bytes good;
	static constexpr size_t kIp = 14, kTcp = 34;
};

TEST_F(Malformed, Ethernet)
{
	ExpectDrop(Bytes(good.begin(), good.begin() + 13), KM_TCP_DROP_ETH_SHORT);
	Bytes f = good;
	f[0] = 0x02;
	f[5] = 0x99;	// another host's MAC
	ExpectDrop(f, KM_TCP_DROP_ETH_DST);
	f = good;
	memset(f.data(), 0xff, 6); // IPv4 to broadcast
	ExpectDrop(f, KM_TCP_DROP_ETH_DST);
	f = good;
	f[6] = 0x01;	// multicast source
	ExpectDrop(f, KM_TCP_DROP_ETH_SRC);
	f = good;
	memset(f.data() + 6, 0, 6);	// zero source
	ExpectDrop(f, KM_TCP_DROP_ETH_SRC);
	f = good;
	f[12] = 0x81;	// VLAN tag
	f[13] = 0x00;
	ExpectDrop(f, KM_TCP_DROP_ETH_TYPE);
	f = good;
	f[12] = 0x86;	// IPv6
	f[13] = 0xdd;
	ExpectDrop(f, KM_TCP_DROP_ETH_TYPE);
	// More chain segments than a frame may have.
	std::vector<size_t> many;
	for (size_t k = 1; k <= KM_TCP_FRAME_SEGS_MAX; k++)
		many.push_back(k * 4);
	ExpectDrop(good, KM_TCP_DROP_FRAME_SEGS, 0, many);
}

TEST_F(Malformed, Ipv4)
{
	ExpectDrop(Bytes(good.begin(), good.begin() + 30), KM_TCP_DROP_IP_SHORT);
	Bytes f = good;
	f[kIp] = 0x65;	// version 6
	FixChecksums(f);
	ExpectDrop(f, KM_TCP_DROP_IP_VERSION);
	f = good;
	f[kIp] = 0x44;	// IHL 16 bytes
	ExpectDrop(f, KM_TCP_DROP_IP_HLEN);
	f = good;
	f[kIp] = 0x46;	// IHL 24: options
	ExpectDrop(f, KM_TCP_DROP_IP_OPTIONS);
	f = good;
	f[kIp + 2] = 0x40;	// total length beyond the frame
	ExpectDrop(f, KM_TCP_DROP_IP_LEN);
	f = good;
	f[kIp + 2] = 0;
	f[kIp + 3] = 19;	// below the header
	ExpectDrop(f, KM_TCP_DROP_IP_LEN);
	f = good;
	f[kIp + 10] ^= 0x01;	// header checksum
	ExpectDrop(f, KM_TCP_DROP_IP_CSUM);
	// The port said the IPv4 checksum is bad.
	ExpectDrop(good, KM_TCP_DROP_IP_CSUM, KM_TCP_RX_IP_CSUM_BAD);
	f = good;
	f[kIp + 6] = 0x20;	// MF
	FixChecksums(f);
	ExpectDrop(f, KM_TCP_DROP_IP_FRAG);
	f = good;
	f[kIp + 6] = 0x00;
	f[kIp + 7] = 0x10;	// offset 128
	FixChecksums(f);
	ExpectDrop(f, KM_TCP_DROP_IP_FRAG);
	f = good;
	f[kIp + 19] = 9;	// 10.0.0.9: not us
	FixChecksums(f);
	ExpectDrop(f, KM_TCP_DROP_IP_DST);
	for (uint32_t src : { 0u, IP(10, 0, 0, 1), IP(10, 0, 0, 255), IP(224, 0, 0, 5) }) {
		f = good;
		f[kIp + 12] = (uint8_t)(src >> 24);
		f[kIp + 13] = (uint8_t)(src >> 16);
		f[kIp + 14] = (uint8_t)(src >> 8);
		f[kIp + 15] = (uint8_t)src;
		FixChecksums(f);
		ExpectDrop(f, KM_TCP_DROP_IP_SRC);
	}
	f = good;
	f[kIp + 9] = 17;	// UDP
	FixChecksums(f);
	ExpectDrop(f, KM_TCP_DROP_IP_PROTO);
}

TEST_F(Malformed, TcpHeader)
{
	// Total length that leaves less than a TCP header.
	Bytes f = good;
	f[kIp + 2] = 0;
	f[kIp + 3] = 20 + 12;
	f.resize(kTcp + 12);
	f[kIp + 10] = f[kIp + 11] = 0;
	uint16_t s = OracleSum(f.data() + kIp, 20);
	f[kIp + 10] = (uint8_t)(s >> 8);
	f[kIp + 11] = (uint8_t)s;
	ExpectDrop(f, KM_TCP_DROP_TCP_SHORT);
	f = good;
	f[kTcp + 12] = 0x40;	// data offset 16 bytes
	FixChecksums(f);
	ExpectDrop(f, KM_TCP_DROP_TCP_DOFF);
	f = good;
	f[kTcp + 12] = 0xf0;	// 60 bytes: past the 84-byte segment? no:
	f.resize(kTcp + 40);	// cut the segment to 40 bytes
	f[kIp + 2] = 0;
	f[kIp + 3] = 60;
	FixChecksums(f);
	ExpectDrop(f, KM_TCP_DROP_TCP_DOFF);
	f = good;
	f.back() ^= 0x5a;	// payload bit flip
	ExpectDrop(f, KM_TCP_DROP_TCP_CSUM);
	// The checksum is also checked over a chain split at odd offsets.
	ExpectDrop(f, KM_TCP_DROP_TCP_CSUM, 0, { 37, 61, 99 });
	// The port said the L4 checksum is bad.
	ExpectDrop(good, KM_TCP_DROP_TCP_CSUM, KM_TCP_RX_L4_CSUM_BAD);
	f = good;
	f[kTcp] = 0;	// source port 0
	f[kTcp + 1] = 0;
	FixChecksums(f);
	ExpectDrop(f, KM_TCP_DROP_TCP_PORT);
}

TEST_F(Malformed, TcpFlagsAndOptions)
{
	for (uint8_t fl : { (uint8_t)(SYN | FIN | ACK), (uint8_t)(SYN | RST | ACK),
			    (uint8_t)0, (uint8_t)FIN, (uint8_t)(PSH | URG) }) {
		Bytes f = BuildTcp(PeerSeg(i, pn, i.snd_nxt, fl, Bytes(4, 'f')));
		ExpectDrop(f, KM_TCP_DROP_TCP_FLAGS);
	}
	std::vector<Bytes> bad_opts = {
		{ 1, 2, 4, 5 },		// MSS cut by the header end
		{ 2, 3, 5, 0 },		// MSS length 3
		{ 3, 4, 7, 0 },		// WS length 4
		{ 8, 1, 0, 0 },		// option length 1
		{ 1, 1, 1, 8 },		// kind without a length byte
		{ 8, 12, 0, 0 },	// length past the header
	};
	for (auto &o : bad_opts) {
		Seg sg = PeerSeg(i, pn, i.snd_nxt, ACK, Bytes(4, 'o'));
		sg.opts = o;
		ExpectDrop(BuildTcp(sg), KM_TCP_DROP_TCP_OPTS);
	}
	// Unknown but well-formed options (timestamps, SACK-permitted) pass.
	Seg sg = PeerSeg(i, pn, i.snd_nxt, ACK, Bytes(4, 'o'));
	sg.opts = { 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 4, 2 };
	ASSERT_EQ(0, rig.InputSeg(sg));
	rig.BurstEnd();
	EXPECT_EQ(Bytes(4, 'o'), rig.rx[conn]);
}

TEST_F(Malformed, PortVouchedChecksumsAreNotRecomputed)
{
	// With both GOOD flags a frame whose checksum fields are wrong is
	// taken: the port checked what it says it checked.
	Bytes f = good;
	f[kIp + 10] ^= 0xff;
	f[kTcp + 16] ^= 0xff;
	ASSERT_EQ(0, rig.Input(f, {}, KM_TCP_RX_IP_CSUM_GOOD | KM_TCP_RX_L4_CSUM_GOOD));
	rig.BurstEnd();
	EXPECT_EQ(Bytes(64, 'g'), rig.rx[conn]);
}

TEST_F(Malformed, TheValidSegmentStillWorks)
{
	ExpectDrop(Bytes(good.begin(), good.begin() + 20), KM_TCP_DROP_IP_SHORT);
	ASSERT_EQ(0, rig.Input(good));
	rig.BurstEnd();
	EXPECT_EQ(Bytes(64, 'g'), rig.rx[conn]);
	km_tcp_stats st = rig.Stats();
	uint64_t drops = 0;
	for (int d = 0; d < KM_TCP_DROP_COUNT; d++)
		drops += st.tcp.drops[d];
	EXPECT_EQ(1u, drops);
	for (int d = 0; d < KM_TCP_DROP_COUNT; d++)
		EXPECT_STRNE("?", km_tcp_drop_name((km_tcp_drop)d));
}

} // namespace
