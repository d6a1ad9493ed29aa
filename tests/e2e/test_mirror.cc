/* kmirrord end to end, with real peers only: librdkafka's mock cluster as
 * the source, real librdkafka producers writing to it, kmirrord as a child
 * process mirroring it, and real librdkafka consumers (check.crcs=true)
 * and kcat reading both sides. */
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <regex>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

constexpr int kParts = 3;
const char *kTopic = "mir";


class Mirror : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ("", mock_.error());
		ASSERT_EQ("", mock_.create_topic(kTopic, kParts));
		ASSERT_EQ("", dir_.error());
	}

	std::vector<std::string> mirror_sets(std::vector<std::string> more = {})
	{
		std::vector<std::string> s = {
			"source.bootstrap.servers=" + mock_.bootstrap(),
			std::string("topics=") + kTopic,
		};
		s.insert(s.end(), more.begin(), more.end());
		return s;
	}

	/* Source HW of every partition. */
	std::map<std::string, int64_t> source_ends()
	{
		std::map<std::string, int64_t> m;

		for (int p = 0; p < kParts; p++) {
			int64_t lo = -1, hi = -1;
			EXPECT_EQ("", watermarks(mock_.bootstrap(), kTopic, p, &lo, &hi));
			m[std::string(kTopic) + ":" + std::to_string(p)] = hi;
		}
		return m;
	}

	/* Until kmirrord's log end equals the source's end everywhere. */
	std::string wait_caught_up(Daemon &d, int timeout_ms = 60000)
	{
		auto ends = source_ends();
		return d.wait_status(
			[&](const std::map<std::string, PartStatus> &st) {
				for (auto &[k, end] : ends) {
					auto it = st.find(k);
					if (it == st.end() || it->second.hw != end)
						return false;
				}
				return true;
			},
			timeout_ms);
	}

	/* Every message on both sides, partition by partition, identical. */
	void expect_same_content(const Daemon &d)
	{
		for (int p = 0; p < kParts; p++) {
			std::vector<Message> a, b;
			ConsumeSpec cs;
			cs.topic = kTopic;
			cs.partition = p;
			ASSERT_EQ("", consume(mock_.bootstrap(), cs, &a));
			ASSERT_EQ("", consume(d.bootstrap(), cs, &b));
			ASSERT_EQ(a.size(), b.size()) << "partition " << p;
			for (size_t i = 0; i < a.size(); i++) {
				ASSERT_EQ(a[i].offset, b[i].offset);
				ASSERT_EQ(a[i].key, b[i].key) << "offset " << a[i].offset;
				ASSERT_EQ(a[i].value, b[i].value) << "offset " << a[i].offset;
				ASSERT_EQ(a[i].headers, b[i].headers);
				ASSERT_EQ(a[i].timestamp, b[i].timestamp);
			}
		}
	}

	MockCluster mock_{ 3 };
	TempDir dir_{ "km-e2e" };
};

/* The three producer kinds, compressions, nulls, empties, big values. */
std::string produce_mix(const std::string &bootstrap, int64_t n, uint64_t seed)
{
	ProduceSpec a;
	a.topic = kTopic;
	a.partition = 0;
	a.count = n;
	a.compression = "gzip";
	a.keys = Keys::kNone;
	a.headers = 2;
	a.seed = seed;
	a.flush_every = 50;
	a.value_size_of = [](int64_t s) { return s % 97 == 0 ? 0 : 300; };
	if (std::string e = produce(bootstrap, a); !e.empty())
		return "plain: " + e;

	ProduceSpec b = a;
	b.partition = 1;
	b.mode = ProducerMode::kIdempotent;
	b.compression = "zstd";
	b.keys = Keys::kRandom;
	b.value_size_of = [](int64_t s) {
		/* near librdkafka's default message.max.bytes (1000000) */
		return s % 40 == 7 ? (size_t)(900 * 1000) : (size_t)200;
	};
	if (std::string e = produce(bootstrap, b); !e.empty())
		return "idempotent: " + e;

	ProduceSpec c = a;
	c.partition = 2;
	c.mode = ProducerMode::kTransactional;
	c.compression = "lz4";
	c.keys = Keys::kSeq;
	c.txn_size = 25;
	c.abort_every = 3;
	if (std::string e = produce(bootstrap, c); !e.empty())
		return "transactional: " + e;
	return "";
}

/* Every producerId the dump tool prints for data in dir. */
std::vector<int64_t> dumped_pids(const std::string &part_dir)
{
	const char *exe = getenv("KM_DUMP_LOG");
	std::vector<std::string> argv = { exe ? exe : "kmirror-dump-log", "--deep" };
	std::vector<int64_t> pids;
	DIR *dir = opendir(part_dir.c_str());
	struct dirent *e;

	while (dir && (e = readdir(dir)) != nullptr) {
		std::string n = e->d_name;
		if (n.size() > 4 && n.compare(n.size() - 4, 4, ".log") == 0)
			argv.push_back(part_dir + "/" + n);
	}
	if (dir)
		closedir(dir);
	ChildResult r = run_command(argv, 30000);
	EXPECT_EQ(0, r.exit_code) << r.describe();
	std::regex re("producerId: (-?[0-9]+)");
	for (std::sregex_iterator it(r.out.begin(), r.out.end(), re), end;
	     it != end; ++it)
		pids.push_back(std::stoll((*it)[1]));
	return pids;
}

TEST_F(Mirror, EqualContentMappedIdsAndCleanRestart)
{
	ASSERT_EQ("", produce_mix(mock_.bootstrap(), 400, 1));
	Daemon d(dir_.path(), mirror_sets());
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_caught_up(d));
	/* The fetch connections in status: the source's bytes came in on
	 * them, over the kernel backend. */
	std::string backend;
	EXPECT_GT(status_figure(d, "net", "bytes_in", &backend), 0);
	EXPECT_EQ("kernel", backend);
	EXPECT_GT(status_figure(d, "connections", "bytes_in"), 0);
	EXPECT_GT(status_figure(d, "connections", "packets_in"), 0);
	expect_same_content(d);

	/* Every producer id in our logs is mapped (R1): idempotent and
	 * transactional partitions hold ids < -1, plain ones -1. */
	for (int p = 0; p < kParts; p++) {
		auto pids = dumped_pids(dir_.path() + "/mir-" + std::to_string(p));
		ASSERT_FALSE(pids.empty());
		for (int64_t id : pids) {
			EXPECT_LE(id, -1);
			if (p > 0) {
				EXPECT_LT(id, -1) << "partition " << p;
			}
		}
	}

	/* SIGTERM: exit 0, every partition closed cleanly. */
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ(0, res.exit_code) << res.describe();
	for (int p = 0; p < kParts; p++)
		EXPECT_EQ(0, access((dir_.path() + "/mir-" + std::to_string(p) +
				     "/.kafka_cleanshutdown").c_str(), F_OK));
	EXPECT_NE(std::string::npos, res.err.find("stopped cleanly")) << res.err;

	/* More data while it is down; the restart resumes at the log end. */
	ASSERT_EQ("", produce_mix(mock_.bootstrap(), 100, 2));
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_caught_up(d));
	expect_same_content(d);
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	for (auto &[k, v] : st)
		EXPECT_EQ(0, v.corrupt) << k;
}

TEST_F(Mirror, KillNineMidStreamThenRestartCompletes)
{
	std::atomic<bool> stop{ false };
	std::string perr;
	std::thread producer([&] {
		for (uint64_t seed = 10; !stop.load() && perr.empty(); seed++)
			perr = produce_mix(mock_.bootstrap(), 60, seed);
	});
	struct Joiner {
		std::atomic<bool> &stop;
		std::thread &t;
		~Joiner()
		{
			stop = true;
			if (t.joinable())
				t.join();
		}
	} joiner{ stop, producer };
	Daemon d(dir_.path(), mirror_sets());
	ASSERT_EQ("", d.start());
	/* Kill once some data is mirrored, while more arrives. */
	ASSERT_EQ("", d.wait_status(
			      [](const std::map<std::string, PartStatus> &st) {
				      for (auto &[k, v] : st)
					      if (v.leo < 50)
						      return false;
				      return !st.empty();
			      },
			      60000));
	ASSERT_EQ("", d.kill9());
	stop = true;
	producer.join();
	ASSERT_EQ("", perr);
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_caught_up(d));
	expect_same_content(d);
}

/* Two workers: the front-end runs on worker 0, so Produce for partitions
 * worker 1 owns travels there and back as messages. */
TEST_F(Mirror, LocalWritableTopicTakesIdempotentProducer)
{
	constexpr int kLocal = 4;
	Daemon d(dir_.path(), mirror_sets({ "local.topics=loc:4", "workers=2" }));
	ASSERT_EQ("", d.start());

	for (int p = 0; p < kLocal; p++) {
		ProduceSpec s;
		s.topic = "loc";
		s.partition = p;
		s.count = 200;
		s.mode = ProducerMode::kIdempotent;
		s.compression = p % 2 ? "lz4" : "none";
		s.headers = 1;
		s.flush_every = 30;
		s.seed = (uint64_t)p;
		ASSERT_EQ("", produce(d.bootstrap(), s)) << "partition " << p;

		std::vector<Message> got;
		ConsumeSpec cs;
		cs.topic = "loc";
		cs.partition = p;
		ASSERT_EQ("", consume(d.bootstrap(), cs, &got));
		ASSERT_EQ(200u, got.size());
		for (size_t i = 0; i < got.size(); i++) {
			EXPECT_EQ((int64_t)i, got[i].offset);
			EXPECT_EQ(payload_value(s.seed, p, (int64_t)i, s.value_size),
				  got[i].value);
		}
		/* Local producers get positive ids. */
		for (int64_t id : dumped_pids(dir_.path() + "/loc-" + std::to_string(p)))
			EXPECT_GE(id, 0);
	}
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	std::set<int64_t> workers;
	for (int p = 0; p < kLocal; p++) {
		EXPECT_EQ("WRITABLE", st["loc:" + std::to_string(p)].state);
		workers.insert(st["loc:" + std::to_string(p)].worker);
	}
	EXPECT_EQ(2u, workers.size()) << "the owners must spread 4 partitions";

	/* The mirrored topic refuses writes, and nothing lands in it. */
	ProduceSpec m;
	m.topic = kTopic;
	m.partition = 0;
	m.count = 3;
	m.timeout_ms = 10000;
	ProduceResult pr;
	EXPECT_NE("", produce(d.bootstrap(), m, &pr));
	EXPECT_EQ(0, pr.delivered);
	st.clear();
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ(0, st["mir:0"].leo);

	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	EXPECT_EQ(0, res.exit_code) << res.describe();
}

/* Leaders move and requests fail on the source while producers write:
 * nothing lost, nothing duplicated. */
TEST_F(Mirror, SourceFaultsLoseAndDuplicateNothing)
{
	ASSERT_EQ("", produce_mix(mock_.bootstrap(), 100, 20));
	Daemon d(dir_.path(), mirror_sets());
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_caught_up(d));
	for (int round = 0; round < 3; round++) {
		for (int p = 0; p < kParts; p++)
			ASSERT_EQ("", mock_.set_leader(kTopic, p, 1 + (p + round + 1) % 3));
		mock_.push_request_errors(
			1 /* Fetch */,
			{ RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
			  RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
			  RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT });
		mock_.push_request_errors(
			3 /* Metadata */, { RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE });
		ASSERT_EQ("", produce_mix(mock_.bootstrap(), 60, 21 + round));
		ASSERT_EQ("", wait_caught_up(d));
	}
	expect_same_content(d);
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	int64_t reconnects = 0;
	for (auto &[k, v] : st) {
		EXPECT_EQ("MIRRORING", v.state) << k << " " << v.reason;
		reconnects += v.reconnects;
	}
	EXPECT_GT(reconnects, 0) << "the leader moves must have been seen";
}

/* pause removes a partition's fetch session (persisted across a restart);
 * resume picks up from the log end, and nothing is lost. */
TEST_F(Mirror, PauseSurvivesRestartAndResumeCatchesUp)
{
	ASSERT_EQ("", produce_mix(mock_.bootstrap(), 50, 30));
	Daemon d(dir_.path(), mirror_sets());
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_caught_up(d));
	const char *ctl_exe = getenv("KM_KMIRRORCTL");
	std::string ctl = ctl_exe ? ctl_exe : "kmirrorctl";
	ChildResult r = run_command({ ctl, "--socket", d.socket(), "pause", "mir:1" },
				    30000);
	ASSERT_EQ(0, r.exit_code) << r.describe();
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	int64_t paused_at = st["mir:1"].leo;
	EXPECT_EQ("PAUSED", st["mir:1"].state);

	/* New data everywhere; the others follow, mir:1 does not. */
	ASSERT_EQ("", produce_mix(mock_.bootstrap(), 50, 31));
	auto ends = source_ends();
	ASSERT_EQ("", d.wait_status(
			      [&](const std::map<std::string, PartStatus> &s) {
				      return s.at("mir:0").hw == ends["mir:0"] &&
					     s.at("mir:2").hw == ends["mir:2"];
			      },
			      60000));
	st.clear();
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ(paused_at, st["mir:1"].leo);

	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ("", d.start());
	st.clear();
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("PAUSED", st["mir:1"].state) << "kept across the restart";
	EXPECT_EQ(paused_at, st["mir:1"].leo);

	r = run_command({ ctl, "--socket", d.socket(), "resume", "mir:1" }, 30000);
	ASSERT_EQ(0, r.exit_code) << r.describe();
	ASSERT_EQ("", wait_caught_up(d));
	expect_same_content(d);
	/* Only a paused partition can be resumed. */
	r = run_command({ ctl, "--socket", d.socket(), "resume", "mir:0" }, 30000);
	EXPECT_EQ(1, r.exit_code) << r.describe();
}

} // namespace
