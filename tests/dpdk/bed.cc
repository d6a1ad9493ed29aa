#include "tests/dpdk/bed.h"

#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/process.h"

namespace kmtest {

static int64_t meminfo(const char *key)
{
	std::ifstream in("/proc/meminfo");
	std::string line;

	while (std::getline(in, line))
		if (line.compare(0, strlen(key), key) == 0)
			return atoll(line.c_str() + strlen(key));
	return -1;
}

std::string dpdk_bed_unavailable()
{
	if (geteuid() != 0)
		return "needs root (network namespaces, veth pairs, DPDK)";
	if (meminfo("HugePages_Free:") < 64)
		return "needs free 2 MiB hugepages (./kmirror setup reserves 512 as root)";
	if (access("/usr/sbin/ip", X_OK) != 0 && access("/sbin/ip", X_OK) != 0 &&
	    access("/usr/bin/ip", X_OK) != 0)
		return "needs ip(8) from iproute2";
	return "";
}

std::string in_ns(const std::string &ns, const std::function<void()> &fn)
{
	std::string err;
	std::thread t([&] {
		int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);

		if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
			err = "cannot enter namespace " + ns + ": " + strerror(errno);
			if (fd >= 0)
				close(fd);
			return;
		}
		close(fd);
		fn();
	});
	t.join();
	return err;
}

static std::string ip(const std::vector<std::string> &args)
{
	std::vector<std::string> argv = { "ip" };

	argv.insert(argv.end(), args.begin(), args.end());
	ChildResult r = run_command(argv, 10000);
	if (r.exit_code == 0)
		return "";
	std::string cmd;
	for (auto &a : argv)
		cmd += a + " ";
	return cmd + ": " + r.describe();
}

static std::string nsip(const std::string &ns, std::vector<std::string> args)
{
	args.insert(args.begin(), { "netns", "exec", ns, "ip" });
	return ip(args);
}

/* Kernel tx checksum, TSO and GSO off (the legacy ethtool commands, which
 * the kernel maps onto its feature flags). */
static std::string offloads_off(const std::string &ns, const std::string &ifname)
{
	std::string err;
	std::string e = in_ns(ns, [&] {
		int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		uint32_t cmds[] = { ETHTOOL_STXCSUM, ETHTOOL_STSO, ETHTOOL_SGSO };

		for (uint32_t cmd : cmds) {
			struct ethtool_value ev = { cmd, 0 };
			struct ifreq ifr;

			memset(&ifr, 0, sizeof(ifr));
			snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s",
				 ifname.c_str());
			ifr.ifr_data = (char *)&ev;
			if (ioctl(fd, SIOCETHTOOL, &ifr) != 0 && err.empty())
				err = "SIOCETHTOOL on " + ifname + ": " + strerror(errno);
		}
		close(fd);
	});
	return e.empty() ? err : e;
}

Bed::Bed()
{
	std::string tag = std::to_string(getpid() % 100000);

	ns_a_ = "kmdA" + tag;
	ns_b_ = "kmdB" + tag;
	data_a_ = "kdA" + tag;
	data_b_ = "kdB" + tag;
	mgmt_a_ = "kmA" + tag;
	mgmt_b_ = "kmB" + tag;
}

Bed::~Bed()
{
	if (!made_)
		return;
	/* Deleting a namespace destroys its veth ends, and with them the peers. */
	ip({ "netns", "del", ns_a_ });
	ip({ "netns", "del", ns_b_ });
}

std::string Bed::up(bool both_dpdk)
{
	std::vector<std::vector<std::string>> steps = {
		{ "netns", "add", ns_a_ },
		{ "netns", "add", ns_b_ },
		{ "link", "add", data_a_, "type", "veth", "peer", "name", data_b_ },
		{ "link", "add", mgmt_a_, "type", "veth", "peer", "name", mgmt_b_ },
		{ "link", "set", data_a_, "netns", ns_a_ },
		{ "link", "set", mgmt_a_, "netns", ns_a_ },
		{ "link", "set", data_b_, "netns", ns_b_ },
		{ "link", "set", mgmt_b_, "netns", ns_b_ },
	};
	std::string e;

	made_ = true;
	for (auto &s : steps)
		if (!(e = ip(s)).empty())
			return e;
	/* No IPv6 chatter (router solicitations, MLD) on the DPDK link or the
	 * management link, before they come up: the management link's byte
	 * counters then count the control thread's traffic only. */
	for (auto &[ns, dev] : { std::make_pair(ns_b_, data_b_),
				 std::make_pair(ns_a_, mgmt_a_),
				 std::make_pair(ns_b_, mgmt_b_),
				 std::make_pair(ns_a_, both_dpdk ? data_a_ : mgmt_a_) })
		run_command({ "ip", "netns", "exec", ns, "sysctl", "-qw",
			      "net.ipv6.conf." + dev + ".disable_ipv6=1" },
			    10000);
	std::vector<std::pair<std::string, std::vector<std::string>>> cfg = {
		{ ns_a_, { "addr", "add", "10.77.9.1/24", "dev", data_a_ } },
		{ ns_a_, { "addr", "add", "10.77.8.1/24", "dev", mgmt_a_ } },
		{ ns_b_, { "addr", "add", "10.77.8.2/24", "dev", mgmt_b_ } },
		{ ns_a_, { "link", "set", "lo", "up" } },
		{ ns_a_, { "link", "set", data_a_, "up" } },
		{ ns_a_, { "link", "set", mgmt_a_, "up" } },
		{ ns_b_, { "link", "set", "lo", "up" } },
		{ ns_b_, { "link", "set", data_b_, "up" } },
		{ ns_b_, { "link", "set", mgmt_b_, "up" } },
		{ ns_b_, { "route", "add", "10.77.9.1/32", "via", "10.77.8.1" } },
	};
	if (both_dpdk) {
		cfg.erase(cfg.begin()); /* dA's address */
		cfg.pop_back();		/* B's route to it */
	}
	for (auto &[ns, args] : cfg)
		if (!(e = nsip(ns, args)).empty())
			return e;
	return offloads_off(ns_a_, data_a_);
}

std::string Bed::set_source_mtu(uint32_t mtu)
{
	return nsip(ns_a_, { "link", "set", data_a_, "mtu", std::to_string(mtu) });
}

int64_t Bed::link_bytes(const std::string &ns, const std::string &ifname,
			const char *dir) const
{
	ChildResult r = run_command({ "ip", "netns", "exec", ns, "cat",
				      "/sys/class/net/" + ifname + "/statistics/" +
					      dir + "_bytes" },
				    10000);
	return r.exit_code == 0 ? atoll(r.out.c_str()) : -1;
}

std::string Bed::reset_source_conns(int *killed)
{
	ChildResult r = run_command({ "ip", "netns", "exec", ns_a_, "ss", "-K",
				      "-tn", "dst", mirror_ip() },
				    10000);
	std::istringstream in(r.out);
	std::string line;

	*killed = 0;
	if (r.exit_code != 0)
		return "ss -K: " + r.describe();
	while (std::getline(in, line))
		if (line.find(mirror_ip()) != std::string::npos)
			(*killed)++;
	return "";
}

std::vector<std::string> Bed::dpdk_sets(int qpairs, bool xdp) const
{
	std::string vdev = (xdp ? "net_af_xdp0,iface=" : "net_af_packet0,iface=") + data_b_;

	if (qpairs > 1)
		vdev += (xdp ? ",queue_count=" : ",qpairs=") + std::to_string(qpairs);
	return { "net.mode=dpdk",
		 "dpdk.eal.args=-l 0 --in-memory --no-pci --no-telemetry --vdev=" + vdev,
		 "dpdk.port=" + vdev, "dpdk.ip=" + mirror_ip(),
		 "dpdk.netmask=24" };
}

std::vector<std::string> Bed::dpdk_sets_a() const
{
	std::string vdev = "net_af_packet0,iface=" + data_a_;

	return { "net.mode=dpdk",
		 "dpdk.eal.args=-l 0 --in-memory --no-pci --no-telemetry --vdev=" + vdev,
		 "dpdk.port=" + vdev, "dpdk.ip=" + source_ip(),
		 "dpdk.netmask=24" };
}

} // namespace kmtest
