/* Goal: net.mode=dpdk mirrors a real Apache Kafka broker over TLS (an SSL
 * listener, and a SASL_SSL one with a SCRAM-SHA-256 login): TLS runs on
 * memory BIOs over kmirror's own TCP endpoint behind the DPDK port
 * (dataplane/net/snet.h over the DPDK backend), the copy is byte for byte
 * the broker's log (kafka_files.h's rule) and a consumer reads from
 * kmirrord what it reads from the broker, and the data did cross the DPDK
 * port (its bytes_in at least the log's size, the kernel's management
 * link under 64 KiB).
 * Method: tests/dpdk/bed.h's two namespaces; the Kafka broker (tests/kafka
 * harness) is started inside namespace A, its PLAINTEXT and controller
 * listeners on A's loopback (the harness's own tools run in A too) and
 * its SSL and SASL_SSL listeners on the data link's 10.77.9.1, advertised
 * so; its certificate (made with openssl) names IP:10.77.9.1 and is
 * checked (https endpoint identification). The topic is filled with
 * kafka-producer-perf-test; kmirrord runs in namespace B with the DPDK
 * port on the data veth. Skips (saying why) only without root, hugepages
 * or ip(8); fails without Kafka's jars. */
#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/dpdk/bed.h"
#include "tests/e2e/daemon.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_files.h"
#include "tests/support/certs.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const uint16_t kPlain = 29092, kCtl = 29093, kSsl = 29094, kSaslSsl = 29095;
const char *kUser = "dpdk", *kPass = "dpdk-secret";

bool put(const std::string &path, const std::string &text, mode_t mode)
{
	std::ofstream f(path, std::ios::trunc);
	f << text;
	f.close();
	return f.good() && chmod(path.c_str(), mode) == 0;
}

/* ca.pem, and broker.ks.pem (key + certificate naming ip). */
std::string make_certs(const std::string &d, const std::string &ip)
{
	std::string why = make_ca(d, "ca");

	return why.empty() ? make_cert(d, "ca", "broker", "/CN=broker", "IP:" + ip)
			   : why;
}

/* The listeners: the harness's on A's loopback, the secured ones on the
 * data link's address (a later key wins in server.properties). */
std::vector<std::string> broker_props(const std::string &ip,
				      const std::string &keystore)
{
	std::string lo = "127.0.0.1:", at = ip + ":";
	std::vector<std::string> v = {
		"listeners=PLAINTEXT://" + lo + std::to_string(kPlain) +
			",CONTROLLER://" + lo + std::to_string(kCtl) + ",SSL://" + at +
			std::to_string(kSsl) + ",SASL_SSL://" + at +
			std::to_string(kSaslSsl),
		"advertised.listeners=PLAINTEXT://" + lo + std::to_string(kPlain) +
			",SSL://" + at + std::to_string(kSsl) + ",SASL_SSL://" + at +
			std::to_string(kSaslSsl),
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,"
		"CONTROLLER:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL",
		"listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-256",
		"listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache."
		"kafka.common.security.scram.ScramLoginModule required;" };
	for (const char *l : { "ssl", "sasl_ssl" }) {
		std::string p = std::string("listener.name.") + l + ".";
		v.push_back(p + "ssl.keystore.type=PEM");
		v.push_back(p + "ssl.keystore.location=" + keystore);
	}
	return v;
}

/* name=value of the mirror's "dpdk: port N counters:" line, or -1. */
int64_t counter(const std::string &log, const std::string &name)
{
	std::smatch m;
	std::regex re(name + "=([0-9]+)");

	return std::regex_search(log, m, re) ? std::stoll(m[1]) : -1;
}

/* fn on this very thread inside namespace ns, then back. Not in_ns():
 * the broker's JVM dies with the thread that forked it (setpriv
 * --pdeathsig), so it must be forked by one that lives on. */
std::string on_this_thread_in_ns(const std::string &ns,
				 const std::function<void()> &fn)
{
	int back = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int fd = open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
	std::string err;

	if (back < 0 || fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
		err = "cannot enter namespace " + ns + ": " + strerror(errno);
	} else {
		fn();
		if (setns(back, CLONE_NEWNET) != 0)
			err = std::string("cannot come back from ") + ns + ": " +
			      strerror(errno);
	}
	if (fd >= 0)
		close(fd);
	if (back >= 0)
		close(back);
	return err;
}

} // namespace

class DpdkTls : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		if (!(skip_ = dpdk_bed_unavailable()).empty())
			return;
		bed_ = new Bed();
		if (!(skip_ = bed_->up()).empty()) {
			skip_ = "cannot build the namespace test bed (veth?): " + skip_;
			return;
		}
		certs_ = new TempDir("km-dpdk-tls-certs");
		std::string libs;
		if (!(error_ = kafka_libs(&libs)).empty() ||
		    !(error_ = make_certs(certs_->path(), bed_->source_ip())).empty())
			return;
		if (!put(certs_->file("pw"), std::string(kPass) + "\n", 0600)) {
			error_ = "cannot write the password file";
			return;
		}
		broker_ = new KafkaBroker(1, kPlain, kCtl,
					  "1@127.0.0.1:" + std::to_string(kCtl), "",
					  broker_props(bed_->source_ip(),
						       certs_->file("broker.ks.pem")));
		broker_->add_format_args({ "--add-scram",
					   std::string("SCRAM-SHA-256=[name=") + kUser +
						   ",password=" + kPass + "]" });
		std::string ns = on_this_thread_in_ns(bed_->ns_a(), [&] {
			error_ = broker_->start();
		});
		if (!ns.empty())
			error_ = ns;
		if (!error_.empty())
			error_ += "\n" + broker_->log_tail();
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
		delete certs_;
		certs_ = nullptr;
		delete bed_;
		bed_ = nullptr;
	}
	void SetUp() override
	{
		if (!skip_.empty())
			GTEST_SKIP() << skip_;
		ASSERT_EQ("", error_);
	}

	/* In namespace A: a topic of n records of `size` bytes; its end. */
	int64_t fill(const std::string &topic, int64_t n, int size)
	{
		std::string e;
		int64_t lo = -1, hi = -1;
		EXPECT_EQ("", in_ns(bed_->ns_a(), [&] {
			e = broker_->create_topic(topic, 1);
			if (e.empty())
				e = broker_->producer_perf(topic, n, size,
							   { "acks=all", "linger.ms=5" });
			if (e.empty())
				e = watermarks(broker_->bootstrap(), topic, 0, &lo, &hi);
		}));
		EXPECT_EQ("", e);
		return hi;
	}

	std::vector<Message> read_all(const std::string &ns,
				      const std::string &bootstrap,
				      const std::string &topic, int64_t end)
	{
		std::vector<Message> got;
		std::string e;
		EXPECT_EQ("", in_ns(ns, [&] {
			ConsumeSpec cs;
			cs.topic = topic;
			cs.to = end;
			cs.timeout_ms = 60000;
			e = consume(bootstrap, cs, &got);
		}));
		EXPECT_EQ("", e) << ns;
		return got;
	}

	/* kmirrord in B over the DPDK port from the broker's listener `port`
	 * with the security keys `sec`: mirrored to the broker's end, the same
	 * records and bytes, through the port. */
	void expect_mirrors(const std::string &topic, uint16_t port,
			    std::vector<std::string> sec)
	{
		int64_t end = fill(topic, 2000, 1000);
		ASSERT_GT(end, 0);
		TempDir dir("km-dpdk-tls-mir");
		std::vector<std::string> sets = bed_->dpdk_sets(1);
		sets.push_back("source.bootstrap.servers=" + bed_->source_ip() + ":" +
			       std::to_string(port));
		sets.push_back("topics=" + topic);
		sets.push_back("workers=1");
		sets.push_back("source.ssl.ca.location=" + certs_->file("ca.pem"));
		sets.insert(sets.end(), sec.begin(), sec.end());
		Daemon d(dir.path(), sets);
		int64_t mgmt0 = bed_->link_bytes(bed_->ns_b(), bed_->mgmt_b(), "rx");
		std::string e, ns = in_ns(bed_->ns_b(), [&] { e = d.start(60000); });
		ASSERT_EQ("", ns);
		ASSERT_EQ("", e);
		std::string k = topic + ":0";
		std::map<std::string, PartStatus> st;
		std::string why = d.wait_status(
			[&](const std::map<std::string, PartStatus> &s) {
				auto it = s.find(k);
				return it != s.end() && it->second.hw == end;
			},
			120000);
		d.status(&st);
		ASSERT_EQ("", why) << st[k].state << ": " << st[k].reason;
		auto theirs = read_all(bed_->ns_a(), broker_->bootstrap(), topic, end);
		auto ours = read_all(bed_->ns_b(), d.bootstrap(), topic, end);
		ASSERT_EQ((size_t)end, theirs.size());
		ASSERT_EQ(theirs.size(), ours.size());
		for (size_t i = 0; i < ours.size(); i++) {
			ASSERT_EQ(theirs[i].offset, ours[i].offset);
			ASSERT_TRUE(theirs[i].value == ours[i].value) << "offset " << i;
		}
		int64_t mgmt = bed_->link_bytes(bed_->ns_b(), bed_->mgmt_b(), "rx") - mgmt0;
		ChildResult res;
		ASSERT_EQ("", d.stop(30000, &res));
		EXPECT_EQ(0, res.exit_code) << res.describe();
		std::string log = d.child().stderr_so_far() + res.err;
		EXPECT_NE(std::string::npos,
			  log.find("source TLS: user-space TLS")) << log;
		int mapped = 0;
		expect_identical(dir.path() + "/" + topic + "-0",
				 broker_->partition_dir(topic, 0), &mapped);
		int64_t bytes = 0;
		std::string bdir = broker_->partition_dir(topic, 0);
		for (auto &f : files_of(bdir, "log"))
			bytes += (int64_t)read_file(bdir + "/" + f).size();
		/* The records came through DPDK (TLS adds to them); the kernel's
		 * management link carried the control thread's requests only. */
		EXPECT_GE(counter(log, "bytes_in"), bytes) << log;
		ASSERT_GE(mgmt0, 0);
		EXPECT_LT(mgmt, 64 * 1024) << "fetch data went over the kernel link";
	}

	static Bed *bed_;
	static TempDir *certs_;
	static KafkaBroker *broker_;
	static std::string skip_, error_;
};

Bed *DpdkTls::bed_ = nullptr;
TempDir *DpdkTls::certs_ = nullptr;
KafkaBroker *DpdkTls::broker_ = nullptr;
std::string DpdkTls::skip_, DpdkTls::error_;

TEST_F(DpdkTls, SslSourceMirrorsByteForByteThroughTheDpdkPort)
{
	expect_mirrors("dssl", kSsl, { "source.security.protocol=SSL" });
}

TEST_F(DpdkTls, SaslSslScramSourceMirrorsThroughTheDpdkPort)
{
	expect_mirrors("dsasl", kSaslSsl,
		       { "source.security.protocol=SASL_SSL",
			 "source.sasl.mechanism=SCRAM-SHA-256",
			 std::string("source.sasl.username=") + kUser,
			 "source.sasl.password.file=" + certs_->file("pw") });
}
