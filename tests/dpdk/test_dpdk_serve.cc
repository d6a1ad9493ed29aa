/* Goal: kmirrord serves Kafka clients on its DPDK port (issue 18 item 4): a
 * `listeners` entry whose host is dpdk.ip is accepted by kmirror's own TCP
 * endpoint (passive open) on the DPDK port, advertised as such in
 * Metadata; (a) a real, independent client (librdkafka over the Linux
 * kernel's TCP) produces to and consumes from it exactly what was
 * produced; (b) two kmirrord, a source serving its local topic over DPDK
 * and a mirror fetching it over DPDK, hold the same log bytes, and the
 * mirror's failover writes the barrier; listeners the DPDK port cannot
 * serve (TLS, ports of the endpoint's own range) are refused with the key
 * to fix.
 * Method: tests/dpdk/bed.h's two namespaces joined by a data veth; in (a)
 * the kernel end (dA) carries the client, in (b) both ends are DPDK ports
 * (net_af_packet, no kernel address) and the kernels talk over the
 * management link only (start-up Metadata, the producer). The data path
 * is shown by each daemon's DPDK counters (status "net"), which must carry
 * at least the log's bytes. Expectations come from the producer's own
 * payloads and the source's log, never from constants. Skips (saying why)
 * without root, hugepages or ip(8). */
#include <gtest/gtest.h>

#include <jansson.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/errors.h"
#include "control/config.h"
#include "tests/dpdk/bed.h"
#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

constexpr int64_t kRecords = 20000;
constexpr size_t kValueBytes = 1000;
const char *const kPort = "9092";	/* on a DPDK port: below 32768 */
const char *const kMgmtPort = "19093";	/* the source's kernel listener */

std::string segment(const std::string &dir)
{
	return read_file(dir + "/t-0/00000000000000000000.log");
}

ProduceSpec spec(int64_t n)
{
	ProduceSpec s;
	s.topic = "t";
	s.count = n;
	s.value_size = kValueBytes;
	s.seed = 11;
	s.flush_every = 2000;
	s.conf = { { "linger.ms", "5" } };
	return s;
}

/* Every record of t-0 read back through `bootstrap` (from inside ns) is the
 * producer's: offsets 0..n-1, values as produced. */
void expect_content(const std::string &ns, const std::string &bootstrap,
		    int64_t n)
{
	std::vector<Message> got;
	std::string e, in = in_ns(ns, [&] {
		ConsumeSpec cs;
		cs.topic = "t";
		cs.to = n;
		cs.timeout_ms = 60000;
		e = consume(bootstrap, cs, &got);
	});
	ASSERT_EQ("", in);
	ASSERT_EQ("", e);
	ASSERT_EQ((size_t)n, got.size());
	for (int64_t i = 0; i < n; i++) {
		ASSERT_EQ(i, got[i].offset);
		ASSERT_TRUE(got[i].value.has_value());
		ASSERT_EQ(payload_value(11, 0, i, kValueBytes), *got[i].value)
			<< "offset " << i;
	}
}

/* Kafka's ClientHost of a group member that joined through `bootstrap`
 * (ListGroups/DescribeGroups as librdkafka reports it): "" or what failed. */
std::string member_client_host(const std::string &bootstrap, std::string *host)
{
	std::string err;
	rd_kafka_t *c = client_new(RD_KAFKA_CONSUMER,
				   { { "bootstrap.servers", bootstrap },
				     { "group.id", "dpdk-serve" },
				     { "session.timeout.ms", "6000" },
				     { "heartbeat.interval.ms", "500" } },
				   &err);
	if (c == nullptr)
		return "client_new: " + err;
	rd_kafka_poll_set_consumer(c);
	rd_kafka_topic_partition_list_t *t = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(t, "t", RD_KAFKA_PARTITION_UA);
	rd_kafka_resp_err_t rc = rd_kafka_subscribe(c, t);
	rd_kafka_topic_partition_list_destroy(t);
	bool joined = rc == 0 && poll_until([&] {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(c, 100);
		if (m != nullptr)
			rd_kafka_message_destroy(m);
		rd_kafka_topic_partition_list_t *a = nullptr;
		bool any = rd_kafka_assignment(c, &a) == 0 && a->cnt > 0;
		if (a != nullptr)
			rd_kafka_topic_partition_list_destroy(a);
		return any;
	}, 30000);
	const rd_kafka_group_list *gl = nullptr;
	if (!joined)
		err = "no assignment within 30 s";
	else if ((rc = rd_kafka_list_groups(c, "dpdk-serve", &gl, 10000)) != 0)
		err = std::string("list_groups: ") + rd_kafka_err2str(rc);
	else if (gl->group_cnt != 1 || gl->groups[0].member_cnt != 1)
		err = "expected one group with one member";
	else
		*host = gl->groups[0].members[0].client_host;
	if (gl != nullptr)
		rd_kafka_group_list_destroy(gl);
	rd_kafka_consumer_close(c);
	rd_kafka_destroy(c);
	return err;
}

class DpdkServe : public ::testing::Test {
protected:
	void SetUp() override
	{
		std::string why = dpdk_bed_unavailable();
		if (!why.empty())
			GTEST_SKIP() << why;
	}

	std::string start(std::unique_ptr<Daemon> &d, const std::string &ns,
			  const std::string &dir, std::vector<std::string> sets)
	{
		d = std::make_unique<Daemon>(dir, sets);
		std::string e, in = in_ns(ns, [&] { e = d->start(60000); });
		return in.empty() ? e : in;
	}

	/* SIGTERM; "" or why it did not exit 0. *log: its stderr. */
	std::string stop(std::unique_ptr<Daemon> &d, std::string *log = nullptr)
	{
		ChildResult r;
		std::string e = d->stop(30000, &r);
		if (e.empty() && r.exit_code != 0)
			e = r.describe();
		if (log != nullptr)
			*log = d->child().stderr_so_far() + r.err;
		return e;
	}

	Bed bed_;
	TempDir a_dir_{ "km-dserve-a" }, b_dir_{ "km-dserve-b" };
	std::unique_ptr<Daemon> a_, b_;
};

/* (a) The kernel's client in namespace A, kmirrord's DPDK listener in B. */
TEST_F(DpdkServe, KernelClientProducesAndConsumesThroughTheDpdkListener)
{
	std::string e = bed_.up();
	if (!e.empty())
		GTEST_SKIP() << "cannot build the namespace test bed (veth?): " << e;
	std::vector<std::string> sets = bed_.dpdk_sets();
	std::string addr = bed_.mirror_ip() + ":" + kPort;
	sets.push_back("listeners=PLAINTEXT://" + addr);
	sets.push_back("local.topics=t:1");
	ASSERT_EQ("", start(b_, bed_.ns_b(), b_dir_.path(), sets));

	/* Metadata names the DPDK address: the client's every later request
	 * goes there too. */
	int32_t broker = -1;
	std::string host;
	uint16_t port = 0;
	ASSERT_EQ("", in_ns(bed_.ns_a(), [&] {
		e = partition_leader(addr, "t", 0, &broker, &host, &port);
	}));
	ASSERT_EQ("", e);
	EXPECT_EQ(bed_.mirror_ip(), host);
	EXPECT_EQ(atoi(kPort), port);

	ASSERT_EQ("", in_ns(bed_.ns_a(), [&] { e = produce(addr, spec(kRecords)); }));
	ASSERT_EQ("", e);
	/* Every delivery was acknowledged; the high watermark follows the
	 * writes' completion (polled, as a client would). */
	int64_t low = -1, high = -1;
	EXPECT_TRUE(poll_until([&] {
		in_ns(bed_.ns_a(), [&] { e = watermarks(addr, "t", 0, &low, &high); });
		return e.empty() && high == kRecords;
	}, 20000)) << e << " high " << high;
	EXPECT_EQ(0, low);
	expect_content(bed_.ns_a(), addr, kRecords);
	/* The endpoint knows its peer: Kafka's ClientHost is the client's. */
	std::string client_host;
	ASSERT_EQ("", in_ns(bed_.ns_a(), [&] { e = member_client_host(addr, &client_host); }));
	EXPECT_EQ("", e);
	EXPECT_EQ("/" + bed_.source_ip(), client_host);

	/* Both directions went through the DPDK port's endpoint: it took
	 * the records in and sent them back out. */
	size_t log = segment(b_dir_.path()).size();
	std::string backend;
	EXPECT_GE(status_figure_at_least(*b_, "net", "bytes_in", (int64_t)log, &backend),
		  (int64_t)log);
	EXPECT_EQ("dpdk", backend);
	EXPECT_GE(status_figure_at_least(*b_, "net", "bytes_out", (int64_t)log), (int64_t)log);
	EXPECT_GE(status_figure_at_least(*b_, "net", "accepts", 3), 3);
	std::string out;
	EXPECT_EQ("", stop(b_, &out));
	EXPECT_NE(std::string::npos, out.find("Kafka clients on PLAINTEXT " + addr))
		<< out;
}

/* Two workers, a queue pair each; the listener is worker 0's (the front
 * end's), and af_packet's fanout hash lands about half of the clients'
 * flows on queue 1, whose worker must pass their frames on to queue 0
 * (dnet_io.c): else its endpoint would reset them. Forty clients make a
 * flow on queue 1 certain (all on queue 0: 2^-40). */
TEST_F(DpdkServe, TwoQueuesPassTheListenersFramesToItsQueue)
{
	constexpr int64_t kFew = 2000;
	std::string e = bed_.up();
	if (!e.empty())
		GTEST_SKIP() << "cannot build the namespace test bed (veth?): " << e;
	std::vector<std::string> sets = bed_.dpdk_sets(2);
	std::string addr = bed_.mirror_ip() + ":" + kPort;
	sets.push_back("listeners=PLAINTEXT://" + addr);
	sets.push_back("local.topics=t:1");
	sets.push_back("workers=2");
	ASSERT_EQ("", start(b_, bed_.ns_b(), b_dir_.path(), sets));
	ASSERT_EQ("", in_ns(bed_.ns_a(), [&] { e = produce(addr, spec(kFew)); }));
	ASSERT_EQ("", e);
	for (int i = 0; i < 40; i++) {
		int32_t broker = -1;
		std::string host;
		uint16_t port = 0;
		ASSERT_EQ("", in_ns(bed_.ns_a(), [&] {
			e = partition_leader(addr, "t", 0, &broker, &host, &port, 5000);
		}));
		ASSERT_EQ("", e) << "client " << i;
	}
	expect_content(bed_.ns_a(), addr, kFew);

	ChildResult r;
	ASSERT_EQ("", ctl(*b_, { "status", "--json" }, &r));
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	json_t *rows = json_object_get(root, "net");
	ASSERT_EQ(2u, json_array_size(rows)) << r.out;
	auto field = [&](size_t w, const char *k) {
		return json_integer_value(json_object_get(json_array_get(rows, w), k));
	};
	EXPECT_GE(field(0, "accepts"), 42) << r.out;
	EXPECT_EQ(0, field(1, "accepts")) << r.out;
	/* Beyond the ARP replies every queue is given. */
	EXPECT_GT(field(1, "steered_out"), 40) << r.out;
	EXPECT_EQ(0, field(0, "steer_drops") + field(1, "steer_drops")) << r.out;
	json_decref(root);
	EXPECT_EQ("", stop(b_));
}

/* (b) A DPDK source and a DPDK mirror, then the mirror's failover. */
TEST_F(DpdkServe, DpdkSourceToDpdkMirrorThenFailover)
{
	std::string e = bed_.up(true);
	if (!e.empty())
		GTEST_SKIP() << "cannot build the namespace test bed (veth?): " << e;
	std::string data = bed_.source_ip() + ":" + kPort;
	std::string mgmt = bed_.source_mgmt_ip() + ":" + kMgmtPort;
	std::vector<std::string> sa = bed_.dpdk_sets_a();
	/* The producer reaches the source over the management link, whose
	 * listener advertises itself; the mirror's fetch sessions find the
	 * DPDK listener, which advertises the DPDK address. */
	sa.push_back("listeners=PLAINTEXT://" + data + ",MGMT://" + mgmt);
	sa.push_back("listener.security.protocol.map=PLAINTEXT:PLAINTEXT,MGMT:PLAINTEXT");
	sa.push_back("local.topics=t:1");
	ASSERT_EQ("", start(a_, bed_.ns_a(), a_dir_.path(), sa));
	ASSERT_EQ("", in_ns(bed_.ns_a(), [&] { e = produce(mgmt, spec(kRecords)); }));
	ASSERT_EQ("", e);

	/* The mirror's kernel has no route to the DPDK address, its DPDK port
	 * none to the management one: each takes the address it can reach. */
	std::vector<std::string> sb = bed_.dpdk_sets();
	sb.push_back("source.bootstrap.servers=" + data + "," + mgmt);
	sb.push_back("topics=t");
	ASSERT_EQ("", start(b_, bed_.ns_b(), b_dir_.path(), sb));
	ASSERT_EQ("", b_->wait_status(
		[&](const std::map<std::string, PartStatus> &st) {
			auto it = st.find("t:0");
			return it != st.end() && it->second.hw == kRecords;
		}, 120000));
	std::string src = segment(a_dir_.path()), mir = segment(b_dir_.path());
	ASSERT_GT(src.size(), (size_t)kRecords * kValueBytes);
	EXPECT_TRUE(src == mir) << "logs differ: " << src.size() << " vs " << mir.size();
	std::string backend;
	EXPECT_GE(status_figure_at_least(*a_, "net", "bytes_out", (int64_t)src.size(), &backend),
		  (int64_t)src.size());
	EXPECT_EQ("dpdk", backend);
	EXPECT_GE(status_figure_at_least(*b_, "net", "bytes_in", (int64_t)src.size(), &backend),
		  (int64_t)src.size());
	EXPECT_EQ("dpdk", backend);

	ChildResult r;
	ASSERT_EQ("", ctl(*b_, { "stop", "--all", "--json" }, &r));
	EXPECT_NE(std::string::npos,
		  r.out.find("\"barrier_offset\":" + std::to_string(kRecords)))
		<< r.out;
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", b_->status(&st));
	EXPECT_EQ("STOPPED", st["t:0"].state);
	EXPECT_EQ(kRecords + 1, st["t:0"].leo);
	EXPECT_EQ("", stop(b_));
	EXPECT_EQ("", stop(a_));
}

/* Listeners the DPDK port cannot serve are refused at load, naming why. */
TEST(DpdkServeConfig, ListenersTheDpdkPortCannotServeAreRefused)
{
	auto load = [](std::vector<const char *> extra, std::string *err) {
		std::vector<const char *> s = { "data.dir=/d", "net.mode=dpdk",
						"dpdk.port=net_af_packet0,iface=v",
						"dpdk.ip=10.0.0.2" };
		s.insert(s.end(), extra.begin(), extra.end());
		auto cfg = std::make_unique<km_config>();
		char buf[KM_CONFIG_ERR_BYTES_MAX] = "";
		int rc = km_config_load(cfg.get(), nullptr, s.data(),
					(uint32_t)s.size(), buf, sizeof(buf));
		*err = buf;
		return rc;
	};
	std::string err;

	EXPECT_EQ(0, load({ "listeners=PLAINTEXT://10.0.0.2:9092" }, &err)) << err;
	EXPECT_EQ(0, load({ "listeners=PLAINTEXT://10.0.0.2:32767" }, &err)) << err;
	EXPECT_EQ(KM_ECFGVALUE, load({ "listeners=PLAINTEXT://10.0.0.2:32768" }, &err));
	EXPECT_NE(std::string::npos, err.find("choose a port below 32768")) << err;
	EXPECT_EQ(KM_ECFGVALUE,
		  load({ "listeners=SSL://10.0.0.2:9093", "ssl.certificate.location=/c",
			 "ssl.key.location=/k" }, &err));
	EXPECT_NE(std::string::npos, err.find("serves PLAINTEXT and SASL_PLAINTEXT only, not SSL"))
		<< err;
	/* The same listener on another address is the kernel's: no limit. */
	EXPECT_EQ(0, load({ "listeners=PLAINTEXT://10.0.0.3:40000" }, &err)) << err;
	EXPECT_EQ(0, load({ "net.mode=kernel", "listeners=PLAINTEXT://10.0.0.2:40000" }, &err))
		<< err;
}

} // namespace
