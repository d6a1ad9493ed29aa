/* Goal: net.mode=dpdk mirrors a partition end to end through a DPDK port
 * (net_af_packet on a veth) and kmirror's own TCP endpoint, against a real,
 * independent TCP (the Linux kernel's) serving a real source (kmirrord with
 * a writable topic, filled by a real librdkafka producer): identical log
 * bytes and consumer-visible content, a reset mid-stream resumed, loss and
 * reordering repaired, and a failover (kmirrorctl stop) writing the
 * MIRROR_PID_RESET barrier exactly as in kernel mode.
 * Method: tests/dpdk/bed.h builds two network namespaces joined by a data
 * veth (DPDK side has no kernel address) and a management veth (the
 * control thread's start-up Metadata); the daemons run as child processes
 * inside them; the DPDK port's counters come from the mirror's shutdown
 * log line. Skips (saying why) without root, hugepages or ip(8). */
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <regex>
#include <thread>
#include <string>
#include <vector>

#include <jansson.h>

#include "common/errors.h"
#include "control/config.h"
#include "tests/dpdk/bed.h"
#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"
#include "tests/support/test_hooks.h"

using namespace kmtest;

namespace {

constexpr int64_t kRecords = 20000;
constexpr size_t kValueBytes = 1000;
const char *const kSourcePort = "19092";

std::string cluster_id_of(const std::string &data_dir)
{
	std::string s = read_file(data_dir + "/meta.properties");
	std::smatch m;
	std::regex re("cluster\\.id=([A-Za-z0-9_.-]+)");

	return std::regex_search(s, m, re) ? m[1].str() : "";
}

/* name=value of the mirror's "dpdk: port N counters:" line, or -1. */
int64_t counter(const std::string &log, const std::string &name)
{
	std::smatch m;
	std::regex re(name + "=([0-9]+)");

	return std::regex_search(log, m, re) ? std::stoll(m[1]) : -1;
}

std::string segment(const std::string &dir, int partition = 0)
{
	return read_file(dir + "/t-" + std::to_string(partition) +
			 "/00000000000000000000.log");
}

/* The status' "net" rows (one per worker), as JSON; the caller frees. */
json_t *net_rows(const Daemon &d)
{
	ChildResult r;
	if (ctl(d, { "status", "--json" }, &r) != "")
		return nullptr;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	json_t *rows = json_incref(json_object_get(root, "net"));
	json_decref(root);
	return rows;
}

int64_t row_int(json_t *row, const char *key)
{
	json_t *v = json_object_get(row, key);
	return json_is_integer(v) ? json_integer_value(v) : -1;
}

std::string row_str(json_t *row, const char *key)
{
	const char *v = json_string_value(json_object_get(row, key));
	return v != nullptr ? v : "";
}

ProduceSpec spec(int64_t first, int64_t n, int32_t partition = 0)
{
	ProduceSpec s;
	s.topic = "t";
	s.partition = partition;
	s.count = n;
	s.first_seq = first;
	s.value_size = kValueBytes;
	s.seed = 7;
	s.flush_every = 500;
	s.conf = { { "linger.ms", "5" } };
	return s;
}

class DpdkMirror : public ::testing::Test {
protected:
	void SetUp() override
	{
		std::string why = dpdk_bed_unavailable();
		if (!why.empty())
			GTEST_SKIP() << why;
		std::string e = bed_.up();
		if (!e.empty())
			GTEST_SKIP() << "cannot build the namespace test bed (veth?): " << e;
	}

	std::string source_addr() const
	{
		return bed_.source_ip() + ":" + kSourcePort;
	}

	std::string start_source(int partitions = 1)
	{
		src_ = std::make_unique<Daemon>(
			src_dir_.path(),
			std::vector<std::string>{ "listeners=" + source_addr(),
						  "local.topics=t:" + std::to_string(partitions),
						  "workers=1" });
		std::string e, ns = in_ns(bed_.ns_a(), [&] { e = src_->start(); });
		return ns.empty() ? e : ns;
	}

	std::string produce_to_source(int64_t first, int64_t n,
				      int32_t partition = 0)
	{
		std::string e, ns = in_ns(bed_.ns_a(), [&] {
			e = produce(source_addr(), spec(first, n, partition));
		});
		return ns.empty() ? e : ns;
	}

	std::string start_mirror(std::vector<std::string> env = {},
				 int workers = 1, int qpairs = 1,
				 const std::vector<std::string> &more = {})
	{
		std::vector<std::string> sets = bed_.dpdk_sets(qpairs);
		sets.insert(sets.end(), more.begin(), more.end());
		sets.push_back("source.bootstrap.servers=" + source_addr());
		sets.push_back("topics=t");
		sets.push_back("workers=" + std::to_string(workers));
		mir_ = std::make_unique<Daemon>(mir_dir_.path(), sets);
		mir_->set_env(std::move(env));
		std::string e, ns = in_ns(bed_.ns_b(), [&] { e = mir_->start(60000); });
		return ns.empty() ? e : ns;
	}

	std::string wait_mirrored(int64_t n, PartStatus *last = nullptr)
	{
		return mir_->wait_status(
			[&](const std::map<std::string, PartStatus> &st) {
				auto it = st.find("t:0");
				if (it != st.end() && last != nullptr)
					*last = it->second;
				return it != st.end() && it->second.hw == n;
			},
			120000);
	}

	/* Read the mirror back through its Kafka front-end (kernel sockets in
	 * namespace B) with a CRC-checking librdkafka consumer. */
	void expect_consumer_content(int64_t n)
	{
		std::vector<Message> got;
		std::string e, ns = in_ns(bed_.ns_b(), [&] {
			ConsumeSpec cs;
			cs.topic = "t";
			cs.to = n;
			cs.timeout_ms = 60000;
			e = consume(mir_->bootstrap(), cs, &got);
		});
		ASSERT_EQ("", ns);
		ASSERT_EQ("", e);
		ASSERT_EQ((size_t)n, got.size());
		for (int64_t i = 0; i < n; i++) {
			ASSERT_EQ(i, got[i].offset);
			ASSERT_TRUE(got[i].value.has_value());
			ASSERT_EQ(payload_value(7, 0, i, kValueBytes), *got[i].value)
				<< "offset " << i;
		}
	}

	/* SIGTERM the mirror; its stderr (with the port counters). */
	std::string stop_mirror()
	{
		ChildResult r;
		EXPECT_EQ("", mir_->stop(30000, &r));
		EXPECT_EQ(0, r.exit_code) << r.describe();
		return mir_->child().stderr_so_far() + r.err;
	}

	Bed bed_;
	TempDir src_dir_{ "km-dpdk-src" }, mir_dir_{ "km-dpdk-mir" };
	std::unique_ptr<Daemon> src_, mir_;
};

TEST(DpdkConfig, DpdkModeRunsOneWorkerUnlessAskedForMore)
{
	std::vector<const char *> base = { "data.dir=/d", "net.mode=dpdk",
					   "dpdk.port=net_af_packet0,iface=v",
					   "dpdk.ip=10.0.0.2" };
	auto load = [&](const char *extra, km_config *cfg, char *err) {
		std::vector<const char *> s = base;
		if (extra != nullptr)
			s.push_back(extra);
		return km_config_load(cfg, nullptr, s.data(), (uint32_t)s.size(),
				      err, KM_CONFIG_ERR_BYTES_MAX);
	};
	auto cfg = std::make_unique<km_config>();
	char err[KM_CONFIG_ERR_BYTES_MAX];

	ASSERT_EQ(0, load(nullptr, cfg.get(), err)) << err;
	EXPECT_EQ(1u, cfg->workers); /* unset: one queue pair, whatever the cores */
	ASSERT_EQ(0, load("workers=2", cfg.get(), err)) << err;
	EXPECT_EQ(2u, cfg->workers);
}

TEST_F(DpdkMirror, MirrorsByteForByteThroughTheDpdkPort)
{
	ASSERT_EQ("", start_source());
	ASSERT_EQ("", produce_to_source(0, kRecords));
	int64_t mgmt_before = bed_.link_bytes(bed_.ns_b(), bed_.mgmt_b(), "rx");
	ASSERT_EQ("", start_mirror());
	ASSERT_EQ("", wait_mirrored(kRecords));

	std::string a = segment(src_dir_.path()), b = segment(mir_dir_.path());
	ASSERT_GT(a.size(), (size_t)kRecords * kValueBytes);
	EXPECT_TRUE(a == b) << "logs differ: " << a.size() << " vs " << b.size();
	expect_consumer_content(kRecords);

	/* The data came through DPDK: the port saw at least the log's bytes,
	 * the management link (kernel) only the start-up Metadata. */
	int64_t mgmt = bed_.link_bytes(bed_.ns_b(), bed_.mgmt_b(), "rx") - mgmt_before;
	std::string log = stop_mirror();
	EXPECT_GE(counter(log, "bytes_in"), (int64_t)a.size()) << log;
	EXPECT_GT(counter(log, "frames_out"), 0) << log;
	EXPECT_EQ(0, counter(log, "tx_dropped")) << log;
	/* The start-up Metadata did come over the management link (no IPv6
	 * there, bed.cc), so its counter is read and moves: under 64 KiB is
	 * then a measurement, not a failed read. */
	ASSERT_GE(mgmt_before, 0) << "cannot read " << bed_.mgmt_b() << "'s rx_bytes";
	EXPECT_GT(mgmt, 0) << "the start-up Metadata did not come over the management link";
	EXPECT_LT(mgmt, 64 * 1024) << "fetch data went over the kernel link";
	RecordProperty("mgmt_rx_bytes", (int)mgmt);
}

/* dpdk.mtu on a port that refuses it (issue 18.4): DPDK 22.11's
 * af_packet reports a largest frame of 1518 bytes, so MTU 9000 is refused
 * by the ethdev layer. kmirrord says so, keeps the port's 1500 (with
 * frames no larger) and mirrors byte for byte, even with the source's end
 * of the link at 9000: our SYN's MSS (1460) keeps its segments small.
 * Jumbo frames through a port that takes them: test_dpdk_jumbo.cc. */
TEST_F(DpdkMirror, MtuThePortRefusesKeepsItsOwn)
{
	ASSERT_EQ("", bed_.set_source_mtu(9000));
	ASSERT_EQ("", start_source());
	ASSERT_EQ("", produce_to_source(0, kRecords));
	ASSERT_EQ("", start_mirror({}, 1, 1, { "dpdk.mtu=9000" }));
	ASSERT_EQ("", wait_mirrored(kRecords));

	std::string a = segment(src_dir_.path()), b = segment(mir_dir_.path());
	ASSERT_GT(a.size(), (size_t)kRecords * kValueBytes);
	EXPECT_TRUE(a == b) << "logs differ: " << a.size() << " vs " << b.size();
	std::string log = stop_mirror();
	EXPECT_NE(std::string::npos, log.find("refuses MTU 9000")) << log;
	EXPECT_NE(std::string::npos, log.find(", MTU 1500,")) << log;
	int64_t frames = counter(log, "frames_in"), bytes = counter(log, "bytes_in");
	ASSERT_GT(frames, 0) << log;
	EXPECT_LE(bytes / frames, 1514) << log;
}

TEST_F(DpdkMirror, ResetMidStreamResumesWhereItStopped)
{
	ASSERT_EQ("", start_source());
	ASSERT_EQ("", produce_to_source(0, kRecords / 2));
	ASSERT_EQ("", start_mirror());
	PartStatus st;
	ASSERT_EQ("", wait_mirrored(kRecords / 2, &st));
	int64_t reconnects = st.reconnects;

	/* The source's kernel resets the fetch connection (RST to DPDK), then
	 * again while the second half streams. */
	int killed = 0, more = 0;
	ASSERT_EQ("", bed_.reset_source_conns(&killed));
	if (killed == 0)
		GTEST_SKIP() << "ss -K destroyed no socket (kernel without INET_DIAG_DESTROY?)";
	std::string perr, stalled, rerr;
	std::thread producer([&] { perr = produce_to_source(kRecords / 2, kRecords / 2); });
	/* Each time the mirror has moved its log end past where the last reset
	 * found it (it reconnected and resumed), reset again; stop early once
	 * everything is mirrored. The thread is joined before any assertion. */
	int64_t last = st.leo;
	for (int i = 0; i < 5 && stalled.empty() && rerr.empty(); i++) {
		int k = 0;
		int64_t leo = -1;
		if (!poll_until([&] {
			    std::map<std::string, PartStatus> s;
			    leo = mir_->status(&s) == "" ? s["t:0"].leo : -1;
			    return leo > last;
		    }, 20000)) {
			stalled = "no progress after reset " + std::to_string(i) +
				  ": log end " + std::to_string(leo) + ", was " +
				  std::to_string(last);
			break;
		}
		if (leo >= kRecords)
			break;
		last = leo;
		rerr = bed_.reset_source_conns(&k);
		more += k;
	}
	producer.join();
	ASSERT_EQ("", perr);
	ASSERT_EQ("", rerr);
	ASSERT_EQ("", stalled);
	ASSERT_EQ("", wait_mirrored(kRecords, &st));
	EXPECT_GT(st.reconnects, reconnects) << "no reconnect after the resets";
	EXPECT_TRUE(segment(src_dir_.path()) == segment(mir_dir_.path()));
	expect_consumer_content(kRecords);
	std::string log = stop_mirror();
	EXPECT_GE(counter(log, "resets"), 1) << log;
	RecordProperty("resets_mid_stream", more);
}

TEST_F(DpdkMirror, LossAndReorderingAreRepaired)
{
	KM_NEEDS_TEST_HOOKS();
	ASSERT_EQ("", start_source());
	ASSERT_EQ("", produce_to_source(0, kRecords));
	/* No netem qdisc here: the mirror's test switch drops every 50th and
	 * reorders every 17th data frame it receives, before its TCP. */
	ASSERT_EQ("", start_mirror({ "KMIRROR_TEST_DPDK_IMPAIR=drop=50,swap=17" }));
	ASSERT_EQ("", wait_mirrored(kRecords));
	EXPECT_TRUE(segment(src_dir_.path()) == segment(mir_dir_.path()));
	expect_consumer_content(kRecords);
	/* Observability: the port's and the fetch connection's counters in
	 * status and metrics while the mirror runs. */
	std::string backend;
	EXPECT_GT(status_figure_at_least(*mir_, "net", "frames_in", 1, &backend), 0);
	EXPECT_EQ("dpdk", backend);
	EXPECT_GT(status_figure_at_least(*mir_, "net", "out_of_order", 101), 100);
	EXPECT_GE(status_figure_at_least(*mir_, "connections", "bytes_in",
					 (int64_t)kRecords * kValueBytes),
		  (int64_t)kRecords * kValueBytes);
	EXPECT_GT(status_figure_at_least(*mir_, "connections", "out_of_order", 101), 100);
	EXPECT_GT(status_figure_at_least(*mir_, "connections", "packets_in", 1), 0);
	ChildResult m;
	ASSERT_EQ("", ctl(*mir_, { "metrics" }, &m));
	EXPECT_TRUE(std::regex_search(m.out, std::regex(
		"\nkmirror_net_out_of_order_total[{]worker=\"0\",backend=\"dpdk\"[}] [1-9]")))
		<< m.out;
	EXPECT_NE(std::string::npos, m.out.find("kmirror_fetch_conn_retransmits_total{worker=\"0\",peer="));
	std::string log = stop_mirror();
	EXPECT_GT(counter(log, "impaired_drops"), 100) << log;
	EXPECT_GT(counter(log, "impaired_swaps"), 100) << log;
	EXPECT_GT(counter(log, "out_of_order"), 100) << log;
}

TEST_F(DpdkMirror, FailoverWritesTheBarrier)
{
	ASSERT_EQ("", start_source());
	ASSERT_EQ("", produce_to_source(0, 3000));
	ASSERT_EQ("", start_mirror());
	ASSERT_EQ("", wait_mirrored(3000));

	const char *ctl = getenv("KM_KMIRRORCTL");
	ChildResult r = run_command({ ctl ? ctl : "kmirrorctl", "--socket",
				      mir_->socket(), "stop", "--all", "--json" },
				    60000);
	ASSERT_EQ(0, r.exit_code) << r.describe();
	EXPECT_NE(std::string::npos, r.out.find("\"barrier_offset\":3000")) << r.out;

	const char *dump = getenv("KM_DUMP_LOG");
	ChildResult d = run_command({ dump ? dump : "kmirror-dump-log", "--deep",
				      mir_dir_.path() + "/t-0/00000000000000000000.log" },
				    30000);
	ASSERT_EQ(0, d.exit_code) << d.describe();
	std::string src_id = cluster_id_of(src_dir_.path());
	ASSERT_FALSE(src_id.empty());
	EXPECT_NE(std::string::npos,
		  d.out.find("MirrorPidReset {\"version\":0,\"sourceClusterId\":\"" +
			     src_id + "\"}"));
	EXPECT_NE(std::string::npos,
		  d.out.find("baseOffset: 3000 lastOffset: 3000 count: 1 "
			     "baseSequence: -1 lastSequence: -1 producerId: -1"));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", mir_->status(&st));
	EXPECT_EQ("STOPPED", st["t:0"].state);
	EXPECT_EQ(3001, st["t:0"].leo);
	stop_mirror();
}

/* Two workers, each on its own queue pair of the port with its own TCP
 * endpoint and its own block of local ports. net_af_packet spreads frames
 * over its two sockets by the kernel's fanout hash, which knows nothing of
 * the blocks: what lands on the wrong queue is passed on by the worker that
 * took it. Every partition must still be byte for byte the source's, and
 * both workers must have fetched through their own queue. */
TEST_F(DpdkMirror, TwoWorkersEachDriveTheirOwnQueuePair)
{
	constexpr int kParts = 4;
	constexpr int64_t kEach = 5000;

	ASSERT_EQ("", start_source(kParts));
	for (int p = 0; p < kParts; p++)
		ASSERT_EQ("", produce_to_source(0, kEach, p));
	ASSERT_EQ("", start_mirror({}, 2, 2));
	ASSERT_EQ("", mir_->wait_status(
		[&](const std::map<std::string, PartStatus> &st) {
			for (int p = 0; p < kParts; p++) {
				auto it = st.find("t:" + std::to_string(p));
				if (it == st.end() || it->second.hw != kEach)
					return false;
			}
			return true;
		}, 120000));
	for (int p = 0; p < kParts; p++) {
		std::string a = segment(src_dir_.path(), p), b = segment(mir_dir_.path(), p);
		ASSERT_GT(a.size(), (size_t)kEach * kValueBytes);
		EXPECT_TRUE(a == b) << "partition " << p << " differs";
	}

	json_t *rows = net_rows(*mir_);
	ASSERT_NE(nullptr, rows);
	ASSERT_EQ(2u, json_array_size(rows));
	int64_t out = 0, in = 0;
	for (size_t w = 0; w < 2; w++) {
		json_t *row = json_array_get(rows, w);
		EXPECT_EQ("dpdk", row_str(row, "backend"));
		EXPECT_EQ((int64_t)w, row_int(row, "queue"));
		EXPECT_EQ("software", row_str(row, "steering"));
		EXPECT_GT(row_int(row, "bytes_in"), (int64_t)kEach * kValueBytes)
			<< "worker " << w << " fetched nothing through its queue";
		EXPECT_GT(row_int(row, "frames_in"), 0);
		out += row_int(row, "steered_out");
		in += row_int(row, "steered_in");
	}
	json_decref(rows);
	/* What one queue passed on, the other took (up to the last tick); an
	 * ARP reply is passed to every queue, so something always was. */
	EXPECT_GE(out, in);
	EXPECT_GE(in, 1) << "no frame passed between the queues";
	std::string log = stop_mirror();
	EXPECT_NE(std::string::npos, log.find("2 queue pair(s)")) << log;
	EXPECT_NE(std::string::npos, log.find("queue 1 counters:")) << log;
	EXPECT_EQ(0, counter(log, "steer_drops")) << log;
	RecordProperty("steered_out", (int)out);
}

/* Two workers under loss and reordering, then a failover: each worker's
 * endpoint repairs its own connection (frames the other queue passes on
 * included), and stop writes the barrier at the end of every partition,
 * whichever worker owns it. */
TEST_F(DpdkMirror, TwoWorkersRepairLossThenFailOverWithTheBarrier)
{
	KM_NEEDS_TEST_HOOKS();
	constexpr int kParts = 4;
	constexpr int64_t kEach = 3000;

	ASSERT_EQ("", start_source(kParts));
	for (int p = 0; p < kParts; p++)
		ASSERT_EQ("", produce_to_source(0, kEach, p));
	ASSERT_EQ("", start_mirror({ "KMIRROR_TEST_DPDK_IMPAIR=drop=50,swap=17" }, 2, 2));
	ASSERT_EQ("", mir_->wait_status(
		[&](const std::map<std::string, PartStatus> &st) {
			for (int p = 0; p < kParts; p++) {
				auto it = st.find("t:" + std::to_string(p));
				if (it == st.end() || it->second.hw != kEach)
					return false;
			}
			return true;
		}, 120000));
	for (int p = 0; p < kParts; p++)
		EXPECT_TRUE(segment(src_dir_.path(), p) == segment(mir_dir_.path(), p))
			<< "partition " << p << " differs";
	json_t *rows = net_rows(*mir_);
	ASSERT_NE(nullptr, rows);
	ASSERT_EQ(2u, json_array_size(rows));
	for (size_t w = 0; w < 2; w++)
		EXPECT_GT(row_int(json_array_get(rows, w), "out_of_order"), 0)
			<< "worker " << w << " repaired nothing";
	json_decref(rows);

	ChildResult r;
	ASSERT_EQ("", ctl(*mir_, { "stop", "--all", "--json" }, &r));
	size_t barriers = 0;
	for (size_t at = 0; (at = r.out.find("\"barrier_offset\":3000", at)) != std::string::npos; at++)
		barriers++;
	EXPECT_EQ((size_t)kParts, barriers) << r.out;
	const char *dump = getenv("KM_DUMP_LOG");
	for (int p = 0; p < kParts; p++) {
		ChildResult d = run_command({ dump ? dump : "kmirror-dump-log", "--deep",
					      mir_dir_.path() + "/t-" + std::to_string(p) +
						      "/00000000000000000000.log" },
					    30000);
		ASSERT_EQ(0, d.exit_code) << d.describe();
		EXPECT_NE(std::string::npos, d.out.find("baseOffset: 3000 lastOffset: 3000 count: 1 "
							"baseSequence: -1 lastSequence: -1 producerId: -1"))
			<< "partition " << p;
		EXPECT_NE(std::string::npos, d.out.find("MirrorPidReset")) << "partition " << p;
	}
	std::string log = stop_mirror();
	EXPECT_GT(counter(log, "impaired_drops"), 0) << log;
}

/* More workers than the port has queue pairs: the mirror refuses to start
 * and says which vdev argument adds them. */
TEST_F(DpdkMirror, MoreWorkersThanQueuePairsIsRefused)
{
	ASSERT_EQ("", start_source());
	std::string e = start_mirror({}, 2, 1);
	ASSERT_NE("", e) << "kmirrord started with 2 workers on 1 queue pair";
	EXPECT_NE(std::string::npos, e.find("exit 1")) << e;
	EXPECT_NE(std::string::npos, e.find("offers 1 receive and 1 transmit queue(s); 2 workers need 2")) << e;
	EXPECT_NE(std::string::npos, e.find("qpairs=2")) << e;
}

} // namespace
