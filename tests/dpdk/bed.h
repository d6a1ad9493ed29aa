/* A two-namespace test bed for DPDK mode, built by the test itself:
 *
 *   namespace A (source)                      namespace B (mirror)
 *   dA  10.77.9.1/24  <---- data veth ---->  dB  (no kernel address: DPDK
 *                                                net_af_packet, 10.77.9.2)
 *   mA  10.77.8.1/24  <---- mgmt veth ---->  mB  10.77.8.2/24, route to
 *                                                10.77.9.1 via 10.77.8.1
 *
 * The mirror's kernel reaches the source only over the management link,
 * which carries the control thread's start-up Metadata; the fetch sessions
 * go through DPDK on the data link. Comparing the two links' byte counts
 * shows which path the data took. On dA the kernel's tx checksum, TSO and
 * GSO are off (SIOCETHTOOL), or af_packet would hand DPDK frames with
 * partial checksums and 64 KiB super-frames (spec/test-peers.md).
 *
 * Functions return "" or what failed. in_ns() runs a function on a thread
 * that entered a namespace: children forked and librdkafka threads started
 * there live in it, while the test's own thread stays where it was.
 */
#ifndef KM_TESTS_DPDK_BED_H
#define KM_TESTS_DPDK_BED_H

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kmtest {

/* Why this machine cannot run the DPDK tests ("" if it can): root,
 * hugepages, ip(8). */
std::string dpdk_bed_unavailable();

/* Run fn on a fresh thread inside network namespace `ns` (a name under
 * /run/netns) and wait for it. "" or why it could not enter. */
std::string in_ns(const std::string &ns, const std::function<void()> &fn);

class Bed {
public:
	Bed();
	~Bed();
	Bed(const Bed &) = delete;
	Bed &operator=(const Bed &) = delete;

	/* Create namespaces, links, addresses, routes. both_dpdk: the
	 * source's end of the data link (dA) gets no kernel address either
	 * (a DPDK source kmirrord drives it, dpdk_sets_a()), and namespace B
	 * no route to 10.77.9.1: both kernels reach each other over the
	 * management link only. */
	std::string up(bool both_dpdk = false);

	const std::string &ns_a() const { return ns_a_; }
	const std::string &ns_b() const { return ns_b_; }
	const std::string &data_b() const { return data_b_; }
	std::string source_ip() const { return "10.77.9.1"; }
	std::string mirror_ip() const { return "10.77.9.2"; }
	/* A kernel interface's byte counter in a namespace, or -1. */
	int64_t link_bytes(const std::string &ns, const std::string &ifname,
			   const char *dir /* "rx" or "tx" */) const;
	const std::string &mgmt_b() const { return mgmt_b_; }
	/* Reset every TCP connection of the source to the mirror's DPDK
	 * address (ss -K in namespace A). *killed: how many ss reported. */
	std::string reset_source_conns(int *killed);

	/* dpdk.* and net.mode keys for a kmirrord on dB: its port on
	 * net_af_packet (or net_af_xdp with xdp) with `qpairs` queue pairs
	 * (one per worker). */
	std::vector<std::string> dpdk_sets(int qpairs = 1, bool xdp = false) const;
	/* The same for a kmirrord on dA (after up(true)): 10.77.9.1. */
	std::vector<std::string> dpdk_sets_a() const;
	std::string source_mgmt_ip() const { return "10.77.8.1"; }
	/* The MTU of the source's end of the data link (dA); the DPDK end
	 * is kmirrord's to set (dpdk.mtu). */
	std::string set_source_mtu(uint32_t mtu);

private:
	std::string ns_a_, ns_b_, data_a_, data_b_, mgmt_a_, mgmt_b_;
	bool made_ = false;
};

} // namespace kmtest

#endif
