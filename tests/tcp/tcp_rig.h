// Test rig for the TCP endpoint core (dataplane/net/tcp/tcp.h): a fake port
// (a pool of numbered receive buffers whose ownership is tracked, so a
// buffer freed twice, freed while the consumer holds it, or never returned
// fails the test), a fake clock, a frame builder and a frame parser that
// check every checksum with their own RFC 1071 implementation (an oracle
// independent of dataplane/net/tcp/csum.c), and capture of every callback.
#ifndef KM_TESTS_TCP_TCP_RIG_H
#define KM_TESTS_TCP_TCP_RIG_H

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dataplane/net/tcp/tcp.h"

namespace tcptest {

using Bytes = std::vector<uint8_t>;

constexpr uint32_t IP(uint32_t a, uint32_t b, uint32_t c, uint32_t d)
{
	return a << 24 | b << 16 | c << 8 | d;
}

constexpr uint32_t kOurIp = IP(10, 0, 0, 1);
constexpr uint32_t kPeerIp = IP(10, 0, 0, 2);
constexpr uint32_t kGwIp = IP(10, 0, 0, 254);
constexpr uint32_t kFarIp = IP(192, 168, 7, 7);
constexpr uint16_t kPeerPort = 9092;
extern const uint8_t kOurMac[6];
extern const uint8_t kPeerMac[6];
extern const uint8_t kGwMac[6];
extern const uint8_t kBcast[6];

enum : uint8_t {
	FIN = 0x01,
	SYN = 0x02,
	RST = 0x04,
	PSH = 0x08,
	ACK = 0x10,
	URG = 0x20,
};

// RFC 1071 checksum, written independently of the code under test.
uint16_t OracleSum(const uint8_t *p, size_t n, uint32_t start = 0);

// A TCP segment to build into a frame.
struct Seg {
	uint32_t seq = 0;
	uint32_t ack = 0;
	uint8_t flags = ACK;
	uint16_t win = 65535;
	Bytes opts;
	Bytes data;
	uint16_t sport = kPeerPort;
	uint16_t dport = 0;
	uint32_t src = kPeerIp;
	uint32_t dst = kOurIp;
	const uint8_t *src_mac = kPeerMac;
	const uint8_t *dst_mac = kOurMac;
};

Bytes BuildTcp(const Seg &s);
Bytes BuildArp(uint16_t op, const uint8_t *eth_dst, const uint8_t *sha,
	       uint32_t spa, const uint8_t *tha, uint32_t tpa,
	       const uint8_t *eth_src = nullptr);
Bytes OptMss(uint16_t mss);
Bytes OptWs(uint8_t shift);
Bytes OptSackPerm();
// Rewrite the IPv4 and TCP checksums of a frame after a test edited it.
void FixChecksums(Bytes &f);

// One frame the endpoint sent, parsed and checked.
struct Out {
	Bytes raw;
	uint8_t dst_mac[6], src_mac[6];
	uint16_t eth_type = 0;
	// ARP
	uint16_t arp_op = 0;
	uint8_t sha[6], tha[6];
	uint32_t spa = 0, tpa = 0;
	// IPv4 + TCP
	uint32_t src_ip = 0, dst_ip = 0;
	bool df = false;
	uint8_t ttl = 0;
	bool ip_csum_ok = false, tcp_csum_ok = false;
	uint16_t sport = 0, dport = 0;
	uint32_t seq = 0, ack = 0;
	uint8_t flags = 0;
	uint16_t win = 0;
	int mss = -1, wscale = -1;
	bool sack_perm = false;
	std::vector<std::pair<uint32_t, uint32_t>> sack;	// blocks in order
	Bytes data;
	uint32_t tx_flags = 0;
	bool is_tcp() const { return eth_type == 0x0800; }
	bool is_arp() const { return eth_type == 0x0806; }
};

Out Parse(const Bytes &frame, uint32_t tx_flags);

struct Event {
	km_tcp_conn *c;
	km_tcp_event ev;
	int res;
};

class Rig {
public:
	using Tweak = std::function<void(km_tcp_config &)>;

	explicit Rig(const Tweak &tweak = nullptr, uint32_t buf_bytes = 2048);
	~Rig();

	km_tcp_ep *ep = nullptr;
	km_tcp_config cfg;
	uint64_t now = 1000000;
	std::deque<Out> tx;
	std::vector<Event> events;
	std::map<km_tcp_conn *, Bytes> rx;	  // delivered bytes per conn
	std::vector<uint32_t> held;		  // ids delivered, not released
	bool auto_release = true;		  // release inside deliver
	uint32_t deliver_calls = 0;
	uint32_t fixed_isn = 0;
	bool use_fixed_isn = false;
	int tx_result = 0;			  // what ops->tx returns
	std::function<void(km_tcp_conn *, const km_chain *, const uint32_t *)>
		on_deliver;
	std::function<void(const Event &)> on_event;
	std::vector<km_tcp_conn *> accepted;	  // ops->accept, in order
	std::function<void(km_tcp_conn *)> on_accept;

	// Feed one frame, copied into pool buffers split at the offsets in
	// splits (ascending); returns km_tcp_input()'s result.
	int Input(const Bytes &frame, const std::vector<size_t> &splits = {},
		  uint32_t rx_flags = 0);
	int InputSeg(const Seg &s, uint32_t rx_flags = 0);
	void BurstEnd() { km_tcp_input_burst_end(ep); }
	// Move the clock and run the timers.
	void Advance(uint64_t ms)
	{
		now += ms;
		km_tcp_poll(ep);
	}
	void Poll() { km_tcp_poll(ep); }
	Out Pop();
	// Drop all captured frames; returns how many there were.
	size_t Clear();
	std::vector<Out> TcpOut();
	void ReleaseAll();
	void Release(uint32_t id);
	km_tcp_stats Stats() const;
	uint64_t Drops(km_tcp_drop d) const { return Stats().tcp.drops[d]; }
	uint32_t BufsAtPort() const;	// buffers free in the fake port
	uint32_t BufsTotal() const { return (uint32_t)state_.size(); }
	const std::vector<Event> EventsOf(km_tcp_conn *c) const;
	bool HasEvent(km_tcp_conn *c, km_tcp_event ev, int res) const;

	// Connect to ip:port and answer ARP for the next hop with mac;
	// returns the connection, the SYN in *syn.
	km_tcp_conn *Connect(Out *syn, uint32_t ip = kPeerIp,
			     uint16_t port = kPeerPort,
			     const uint8_t *mac = kPeerMac, uint32_t arp_ip = 0);
	// Connect and complete the handshake (SYN-ACK with the options
	// given; wscale < 0: none); returns the connection, the peer's next
	// sequence number in *peer_nxt.
	km_tcp_conn *Establish(uint32_t peer_isn, uint32_t *peer_nxt,
			       uint16_t peer_win = 65535, int peer_wscale = 7,
			       int peer_mss = 1460);
	km_tcp_conn_info Info(km_tcp_conn *c) const;

	// Callbacks (public for the C trampolines).
	int OnTx(const iovec *iov, uint32_t n, uint32_t flags);
	void OnDeliver(km_tcp_conn *c, const km_chain *d, const uint32_t *ids);
	void OnEvent(km_tcp_conn *c, km_tcp_event ev, int res);
	void OnBufFree(const uint32_t *ids, uint32_t n);
	void OnAccept(km_tcp_conn *c);

private:
	enum BufState : uint8_t { kFree, kTcp, kUser, kReleasing };
	void *mem_ = nullptr;
	uint32_t buf_bytes_;
	std::vector<Bytes> pool_;
	std::vector<BufState> state_;
	std::vector<uint32_t> free_;
	km_tcp_ops ops_;
};

// A segment of an established connection c from the peer.
Seg PeerSeg(const km_tcp_conn_info &i, uint32_t seq, uint32_t ack,
	    uint8_t flags = ACK, Bytes data = {}, uint16_t win = 65535);

// Deterministic payload: byte i of stream seed.
Bytes Pattern(size_t n, uint32_t seed, uint64_t off = 0);

} // namespace tcptest

#endif
