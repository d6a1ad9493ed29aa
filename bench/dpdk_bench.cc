/* bench dpdk: CPU per mirrored byte, net.mode=dpdk vs kernel, on the same
 * veth link, side by side in one run.
 *
 * The bed of tests/dpdk (two namespaces, a data veth with the kernel's tx
 * checksum/TSO/GSO off on the source side, a management veth). A kernel-
 * mode kmirrord in namespace A serves a writable partition preloaded with
 * MIB MiB (16 KiB messages in batches of at most 256 KiB: a
 * DPDK fetch session holds at most KM_KFRAME_SEGS_MAX buffers of one
 * 1460-byte segment, ~1.4 MiB, so 1 MiB batches cannot be fetched yet). Then, one after the other, into fresh data
 * dirs in namespace B:
 *   kernel: kmirrord net.mode=kernel, the data veth given a kernel address
 *           (the same link, kernel TCP + io_uring sockets);
 *   dpdk:   kmirrord net.mode=dpdk on net_af_packet over that veth.
 * Measured from the first mirrored record to the last: wall time, the
 * mirror process's CPU time (utime + stime), and the whole machine's busy
 * CPU (/proc/stat: source, softirqs and all; the kernel path does part of
 * its receive work in softirq context that is not the mirror's). Cycles
 * are CPU time x the nominal clock of /proc/cpuinfo (no hardware counters
 * here), so the ratio is the figure to read. A DPDK worker busy-polls while
 * frames arrive: that is part of its cost and is counted.
 * Kernel and DPDK runs alternate for ROUNDS rounds; the medians compare.
 * usage: bench-dpdk [MIB [ROUNDS]]   (exit 77: no root, hugepages or ip(8));
 *        KM_BENCH_XDP=1 runs DPDK on net_af_xdp instead of net_af_packet
 */
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "tests/dpdk/bed.h"
#include "tests/e2e/daemon.h"
#include "bench/proc_cpu.h"

using namespace kmtest;

namespace {

struct Cpu {
	double proc_s = 0, machine_busy_s = 0;
};

double ticks_to_s(long long t)
{
	return (double)t / (double)sysconf(_SC_CLK_TCK);
}


double machine_busy_s()
{
	std::ifstream in("/proc/stat");
	std::string cpu;
	long long v[8] = {};

	in >> cpu >> v[0] >> v[1] >> v[2] >> v[3] >> v[4] >> v[5] >> v[6] >> v[7];
	return ticks_to_s(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]);
}

double mhz()
{
	std::ifstream in("/proc/cpuinfo");
	std::string line;

	while (std::getline(in, line))
		if (line.rfind("cpu MHz", 0) == 0)
			return atof(line.substr(line.find(':') + 1).c_str());
	return 0;
}

int64_t leo_of(Daemon &d)
{
	std::map<std::string, PartStatus> st;

	return d.status(&st) == "" && st.count("t:0") ? st["t:0"].hw : -1;
}

struct Run {
	std::string name;
	double wall_s = 0, proc_s = 0, busy_s = 0;
	bool ok = false;
	std::string port; /* the mirror's "dpdk: port ... up" line */
	std::string counters; /* and its port counters at shutdown */
};

std::string port_line(const std::string &log)
{
	size_t at = log.find("dpdk: port ");

	if (at == std::string::npos)
		return "";
	return log.substr(at, log.find('\n', at) - at);
}

/* Start the mirror, wait for its first record, sample, wait for all. */
Run mirror(Bed &bed, const std::string &name, std::vector<std::string> sets,
	   int64_t records)
{
	TempDir dir("km-bench-dpdk-" + name);
	Run r;
	r.name = name;
	sets.push_back("source.bootstrap.servers=" + bed.source_ip() + ":19092");
	sets.push_back("topics=t");
	sets.push_back("flush.ms=1000");
	Daemon d(dir.path(), sets);
	std::string e, ns = in_ns(bed.ns_b(), [&] { e = d.start(60000); });
	if (!ns.empty() || !e.empty()) {
		fprintf(stderr, "%s: %s%s\n", name.c_str(), ns.c_str(), e.c_str());
		return r;
	}
	if (!poll_until([&] { return leo_of(d) > 0; }, 60000))
		return r;
	int64_t t0 = now_ms();
	double p0 = proc_cpu_s(d.child().pid()), m0 = machine_busy_s();
	if (!poll_until([&] { return leo_of(d) == records; }, 600000))
		return r;
	r.wall_s = (double)(now_ms() - t0) / 1000.0;
	r.proc_s = proc_cpu_s(d.child().pid()) - p0;
	r.busy_s = machine_busy_s() - m0;
	r.ok = true;
	ChildResult res;
	d.stop(60000, &res);
	std::string log = d.child().stderr_so_far() + res.err;
	r.port = port_line(log);
	if (size_t at = log.find("counters: "); at != std::string::npos)
		r.counters = log.substr(at, log.find('\n', at) - at);
	return r;
}

void report(const Run &r, double bytes, double ghz)
{
	printf("%-7s %8.2f s %8.1f MB/s  mirror CPU %6.2f s = %6.2f ns/B (~%5.2f cycles/B)  machine busy %6.2f s = %6.2f ns/B\n",
	       r.name.c_str(), r.wall_s, bytes / r.wall_s / 1e6, r.proc_s,
	       r.proc_s * 1e9 / bytes, r.proc_s * 1e9 / bytes * ghz, r.busy_s,
	       r.busy_s * 1e9 / bytes);
}

} // namespace

/* The data veth gets the mirror's address and the management route goes,
 * so kernel TCP runs over the same link as DPDK; both are undone after. */
Run kernel_run(Bed &bed, int64_t records)
{
	run_command({ "ip", "netns", "exec", bed.ns_b(), "ip", "addr", "add",
		      bed.mirror_ip() + "/24", "dev", bed.data_b() }, 10000);
	run_command({ "ip", "netns", "exec", bed.ns_b(), "ip", "route", "del",
		      bed.source_ip() + "/32" }, 10000);
	Run k = mirror(bed, "kernel", { "net.mode=kernel", "workers=1" }, records);
	run_command({ "ip", "netns", "exec", bed.ns_b(), "ip", "addr", "del",
		      bed.mirror_ip() + "/24", "dev", bed.data_b() }, 10000);
	run_command({ "ip", "netns", "exec", bed.ns_b(), "ip", "route", "add",
		      bed.source_ip() + "/32", "via", "10.77.8.1" }, 10000);
	return k;
}

/* Each figure's median over the rounds (the machine is shared: one slow
 * round says little). */
Run median(std::vector<Run> v)
{
	Run m = v[0];
	auto pick = [&](double Run::*f) {
		std::vector<double> x;
		for (const Run &r : v)
			x.push_back(r.*f);
		std::sort(x.begin(), x.end());
		m.*f = x[x.size() / 2];
	};
	pick(&Run::wall_s);
	pick(&Run::proc_s);
	pick(&Run::busy_s);
	return m;
}

int main(int argc, char **argv)
{
	int mib = argc > 1 ? atoi(argv[1]) : 512;
	int rounds = argc > 2 ? atoi(argv[2]) : 3;
	int64_t records = (int64_t)mib * 64; /* 16 KiB each */
	std::string why = dpdk_bed_unavailable();
	Bed bed;

	if (!why.empty() || !(why = bed.up()).empty()) {
		printf("bench dpdk: skipped: %s\n", why.c_str());
		return 77;
	}
	TempDir src_dir("km-bench-dpdk-src");
	Daemon src(src_dir.path(), { "listeners=" + bed.source_ip() + ":19092",
				     "local.topics=t:1", "workers=1", "flush.ms=1000" });
	std::string e, ns = in_ns(bed.ns_a(), [&] { e = src.start(); });
	if (!ns.empty() || !e.empty()) {
		fprintf(stderr, "source: %s%s\n", ns.c_str(), e.c_str());
		return 1;
	}
	const char *prod = getenv("KM_PRODUCE");
	ChildResult pr;
	in_ns(bed.ns_a(), [&] {
		pr = run_command({ prod ? prod : "kmirror-produce", "--bootstrap",
				   bed.source_ip() + ":19092", "--topic", "t",
				   "--partition", "0", "--count",
				   std::to_string(records), "--size", "16384",
				   "--keys", "none", "--batch-size", "262144",
				   "--linger-ms", "20" },
				 600000);
	});
	if (pr.exit_code != 0 ||
	    !poll_until([&] { return leo_of(src) == records; }, 120000)) {
		fprintf(stderr, "preload failed: %s\n", pr.describe().c_str());
		return 1;
	}
	double bytes = (double)atoll(
		run_command({ "stat", "-c", "%s",
			      src_dir.path() + "/t-0/00000000000000000000.log" },
			    10000).out.c_str());
	double ghz = mhz() / 1000.0;
	printf("bench dpdk: %d MiB (%lld records of 16 KiB, %.0f log bytes) over one veth, nominal %.2f GHz\n",
	       mib, (long long)records, bytes, ghz);

	std::vector<Run> ks, ds;
	bool xdp = getenv("KM_BENCH_XDP") != nullptr;
	for (int round = 1; round <= rounds; round++) {
		Run k = kernel_run(bed, records), d = mirror(bed, "dpdk", bed.dpdk_sets(1, xdp), records);
		if (!k.ok || !d.ok) {
			fprintf(stderr, "bench dpdk: a run did not finish (kernel %d, dpdk %d)\n",
				k.ok, d.ok);
			return 1;
		}
		printf("round %d\n", round);
		report(k, bytes, ghz);
		report(d, bytes, ghz);
		printf("        %s\n", d.counters.c_str());
		ks.push_back(k);
		ds.push_back(d);
	}
	Run k = median(ks), d = median(ds);
	printf("median of %d rounds\n", rounds);
	report(k, bytes, ghz);
	report(d, bytes, ghz);
	printf("dpdk run: %s\n", ds.back().port.c_str());
	printf("ratio dpdk/kernel: mirror CPU per byte %.2f, machine CPU per byte %.2f, throughput %.2f\n",
	       d.proc_s / k.proc_s, d.busy_s / k.busy_s, k.wall_s / d.wall_s);
	ChildResult res;
	src.stop(60000, &res);
	return 0;
}
