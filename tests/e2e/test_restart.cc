/* Goal: what a restart may and may not change (issue 21 items 4, 5, 7).
 *  - One kmirrord per data.dir: a second start, with the same control
 *    socket or another, is refused naming the holder's pid, and the first
 *    keeps mirroring and serving with its log intact; the lock goes with
 *    the process, after a clean exit and after kill -9.
 *  - A partition's role survives a change of lists: a mirror moved to
 *    local.topics or dropped from topics is held (FAILED with the reason,
 *    Produce refused, no barrier-less write) until `kmirrorctl stop`; a
 *    stopped partition stays writable in either list; a local partition
 *    listed in topics stays writable and is not mirrored; data in neither
 *    list is named at start.
 *  - Addresses are reported as what they are: an IPv6 listener is refused
 *    as unsupported, an unknown host as a name that does not resolve.
 *  - Local producer ids stay above every positive id in the logs across
 *    kill -9 and a clean stop, the allocator's own file removed (R4 step
 *    6); a batch damaged mid-log while kmirrord was down is reported at
 *    ERROR as corruption with file and position, not as a torn tail (R7).
 *  - Every partition of a topic the source names no id for (a local one,
 *    a source without topic ids) has the same topic id in its
 *    partition.metadata, and restarts keep it.
 * Method: kmirrord as a child process (daemon.h) against librdkafka's mock
 * cluster, real librdkafka producers and consumers, kmirrorctl for status
 * and verbs; every wait is a deadline on an observable condition. */
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

constexpr int kWaitMs = 60000;
const char *kMir = "m";	  /* mirrored from the mock */
const char *kLoc = "loc"; /* local, writable */

/* kmirrord run to completion with these --set values (a start that must
 * be refused), data.dir and listeners included by the caller. */
ChildResult run_kmirrord(const std::vector<std::string> &sets)
{
	const char *exe = getenv("KM_KMIRRORD");
	std::vector<std::string> argv = { exe ? exe : "kmirrord" };

	for (auto &s : sets) {
		argv.push_back("--set");
		argv.push_back(s);
	}
	return run_command(argv, 30000);
}

bool contains(const std::string &hay, const std::string &needle)
{
	return hay.find(needle) != std::string::npos;
}

class Restart : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ("", mock_.error());
		ASSERT_EQ("", mock_.create_topic(kMir, 1));
		ASSERT_EQ("", dir_.error());
	}

	std::vector<std::string> mirror_sets(std::vector<std::string> more = {})
	{
		std::vector<std::string> s = {
			"source.bootstrap.servers=" + mock_.bootstrap(),
			std::string("topics=") + kMir,
		};
		s.insert(s.end(), more.begin(), more.end());
		return s;
	}

	std::string produce_to(const std::string &bootstrap, const char *topic,
			       int64_t n, uint64_t seed)
	{
		ProduceSpec s = idempotent(topic, 0, n, seed);
		return produce(bootstrap, s);
	}

	/* A Produce that must be refused: nothing delivered. */
	void expect_refused(const Daemon &d, const char *topic)
	{
		ProduceSpec s;
		s.topic = topic;
		s.count = 3;
		s.timeout_ms = 8000;
		ProduceResult pr;
		EXPECT_NE("", produce(d.bootstrap(), s, &pr)) << topic;
		EXPECT_EQ(0, pr.delivered) << topic;
	}

	std::string wait_hw(Daemon &d, const std::string &part, int64_t hw)
	{
		return d.wait_status(
			[&](const std::map<std::string, PartStatus> &st) {
				auto it = st.find(part);
				return it != st.end() && it->second.hw == hw;
			},
			kWaitMs);
	}

	PartStatus status_of(Daemon &d, const std::string &part)
	{
		std::map<std::string, PartStatus> st;
		EXPECT_EQ("", d.status(&st));
		return st[part];
	}

	std::string part_dir(const char *topic) const
	{
		return dir_.path() + "/" + topic + "-0";
	}

	std::string log_of(const char *topic) const
	{
		return dump(part_dir(topic) + "/00000000000000000000.log");
	}

	void clean_stop(Daemon &d)
	{
		ChildResult res;
		ASSERT_EQ("", d.stop(30000, &res));
		EXPECT_EQ(0, res.exit_code) << res.describe();
		stderr_ += res.err;
	}

	/* Every message of topic:0 on d, in order, as a client reads it. */
	std::vector<Message> read_all(const Daemon &d, const char *topic)
	{
		std::vector<Message> got;
		ConsumeSpec cs;
		cs.topic = topic;
		EXPECT_EQ("", consume(d.bootstrap(), cs, &got)) << topic;
		return got;
	}

	MockCluster mock_{ 1 };
	TempDir dir_{ "km-restart" };
	std::string stderr_; /* of the daemons stopped so far */
};

/* ---- item 4: one kmirrord per data.dir ------------------------------- */

TEST_F(Restart, SecondDaemonOnTheSameDataDirIsRefusedAndTheFirstKeepsServing)
{
	Daemon a(dir_.path(), mirror_sets({ std::string("local.topics=") + kLoc + ":1" }));
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce_to(mock_.bootstrap(), kMir, 200, 1));
	ASSERT_EQ("", produce_to(a.bootstrap(), kLoc, 100, 2));
	ASSERT_EQ("", wait_hw(a, "m:0", 200));
	std::string port_file = read_file(dir_.path() + "/kmirrord.port");
	std::string pid = std::to_string(a.child().pid());

	/* The same control socket (data.dir's default) and another one. */
	for (const std::string &sock : { a.socket(), dir_.path() + "/other.sock" }) {
		std::vector<std::string> sets = mirror_sets(
			{ "data.dir=" + dir_.path(), "listeners=127.0.0.1:0",
			  "control.socket=" + sock,
			  std::string("local.topics=") + kLoc + ":1" });
		ChildResult r = run_kmirrord(sets);
		EXPECT_EQ(1, r.exit_code) << r.describe();
		EXPECT_TRUE(contains(r.err, "data.dir " + dir_.path() +
						     " is in use by kmirrord pid " + pid +
						     " (control socket " + a.socket()))
			<< r.err;
		EXPECT_TRUE(contains(r.err, "refusing to start")) << r.err;
		EXPECT_TRUE(contains(r.err, "(-10086)")) << r.err;
		EXPECT_FALSE(contains(r.err, "serving")) << r.err;
	}
	EXPECT_EQ(port_file, read_file(dir_.path() + "/kmirrord.port"));
	EXPECT_TRUE(contains(read_file(dir_.path() + "/.lock"), "pid=" + pid + "\n"));

	/* The first still answers on its socket, mirrors and takes writes. */
	ASSERT_EQ("", produce_to(mock_.bootstrap(), kMir, 100, 3));
	ASSERT_EQ("", produce_to(a.bootstrap(), kLoc, 100, 4));
	ASSERT_EQ("", wait_hw(a, "m:0", 300));
	ASSERT_EQ("", wait_hw(a, "loc:0", 200));
	std::vector<Message> src, got = read_all(a, kMir);
	ConsumeSpec cs;
	cs.topic = kMir;
	ASSERT_EQ("", consume(mock_.bootstrap(), cs, &src));
	ASSERT_EQ(300u, got.size());
	for (size_t i = 0; i < got.size(); i++)
		ASSERT_EQ(src[i].value, got[i].value) << i;

	/* And what it acknowledged is all there after its own restart. */
	clean_stop(a);
	ASSERT_EQ("", a.start());
	got = read_all(a, kLoc);
	ASSERT_EQ(200u, got.size());
	for (int64_t i = 0; i < 200; i++)
		EXPECT_EQ(payload_value(i < 100 ? 2 : 4, 0, i % 100, 100),
			  got[(size_t)i].value) << i;
	EXPECT_EQ(300u, read_all(a, kMir).size());
}

TEST_F(Restart, LockGoesWithTheProcessAfterAnExitAndAfterKill9)
{
	Daemon a(dir_.path(), { std::string("local.topics=") + kLoc + ":1" });
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce_to(a.bootstrap(), kLoc, 50, 1));
	clean_stop(a);

	ASSERT_EQ("", a.start());
	EXPECT_TRUE(contains(read_file(dir_.path() + "/.lock"),
			     "pid=" + std::to_string(a.child().pid()) + "\n"));
	ASSERT_EQ("", produce_to(a.bootstrap(), kLoc, 50, 2));
	ASSERT_EQ("", a.kill9());

	/* The file still names the dead holder; its lock died with it. */
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", wait_hw(a, "loc:0", 100));
	EXPECT_EQ(100u, read_all(a, kLoc).size());
}

/* ---- partition.metadata: one topic id per topic ---------------------- */

/* Kafka has one topic id per topic, and moves a partition directory whose
 * partition.metadata names another aside. With no source topic id to take
 * (a local topic; librdkafka's mock sends none), every partition of a
 * topic names the same one, in Kafka's bytes, each topic its own, and
 * restarts (clean, and after kill -9) keep them. */
TEST_F(Restart, EveryPartitionOfATopicNamesOneTopicIdAcrossRestarts)
{
	ASSERT_EQ("", mock_.create_topic("m3", 3));
	auto sets = std::vector<std::string>{
		"source.bootstrap.servers=" + mock_.bootstrap(), "topics=m3",
		std::string("local.topics=") + kLoc + ":3" };
	auto ids = [&](const std::string &t) {
		std::vector<std::string> v;
		for (int p = 0; p < 3; p++)
			v.push_back(read_file(dir_.path() + "/" + t + "-" +
					      std::to_string(p) + "/partition.metadata"));
		return v;
	};
	const std::regex kafka("version: 0\ntopic_id: [A-Za-z0-9_-]{22}");
	Daemon a(dir_.path(), sets);
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce_to(mock_.bootstrap(), "m3", 20, 1));
	ASSERT_EQ("", wait_hw(a, "m3:0", 20));
	std::vector<std::string> m = ids("m3"), l = ids(kLoc);
	for (auto *v : { &m, &l }) {
		EXPECT_TRUE(std::regex_match((*v)[0], kafka)) << (*v)[0];
		EXPECT_EQ((*v)[0], (*v)[1]);
		EXPECT_EQ((*v)[0], (*v)[2]);
	}
	EXPECT_NE(m[0], l[0]) << "one id per topic, not per daemon";
	clean_stop(a);
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", wait_hw(a, "m3:0", 20));
	EXPECT_EQ(m, ids("m3")) << "after a clean restart";
	EXPECT_EQ(l, ids(kLoc));
	ASSERT_EQ("", a.kill9());
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", wait_hw(a, "m3:0", 20));
	EXPECT_EQ(m, ids("m3")) << "after kill -9";
	EXPECT_EQ(l, ids(kLoc));
	clean_stop(a);
}

/* ---- item 5: roles across a restart --------------------------------- */

TEST_F(Restart, MirrorMovedToLocalTopicsIsHeldUntilStopped)
{
	{
		Daemon a(dir_.path(), mirror_sets());
		ASSERT_EQ("", a.start());
		ASSERT_EQ("", produce_to(mock_.bootstrap(), kMir, 200, 1));
		ASSERT_EQ("", wait_hw(a, "m:0", 200));
		clean_stop(a);
	}
	std::string state = read_file(part_dir(kMir) + "/kmirror.state");
	EXPECT_TRUE(contains(state, "role=mirror\n")) << state;
	EXPECT_TRUE(contains(state, "state=MIRRORING\n")) << state;
	EXPECT_FALSE(contains(state, "source.cluster.id=\n")) << state;

	/* In local.topics, with no source at all: held, not writable. */
	Daemon b(dir_.path(), { std::string("local.topics=") + kMir + ":1" });
	ASSERT_EQ("", b.start());
	PartStatus s = status_of(b, "m:0");
	EXPECT_EQ("FAILED", s.state);
	EXPECT_TRUE(contains(s.reason, "its topic is in local.topics")) << s.reason;
	EXPECT_TRUE(contains(s.reason, "kmirrorctl stop m:0")) << s.reason;
	expect_refused(b, kMir);
	EXPECT_EQ(200, status_of(b, "m:0").leo);
	EXPECT_FALSE(contains(log_of(kMir), "MirrorPidReset"));
	/* The hold is not persisted: the state on disk is still the mirror's. */
	EXPECT_EQ(state, read_file(part_dir(kMir) + "/kmirror.state"));
	clean_stop(b);
	EXPECT_TRUE(contains(stderr_, "WARN  daemon: partition m-0: a mirror (MIRRORING, no barrier) but its topic is in local.topics"))
		<< stderr_;

	/* Back in topics it mirrors on, from where it was. */
	{
		Daemon a(dir_.path(), mirror_sets());
		ASSERT_EQ("", a.start());
		ASSERT_EQ("", produce_to(mock_.bootstrap(), kMir, 50, 2));
		ASSERT_EQ("", wait_hw(a, "m:0", 250));
		clean_stop(a);
	}

	/* Held again; `stop` is the way to writable: barrier, then Produce. */
	ASSERT_EQ("", b.start());
	EXPECT_EQ("FAILED", status_of(b, "m:0").state);
	ChildResult r;
	ASSERT_EQ("", ctl(b, { "stop", "m:0", "--json" }, &r));
	EXPECT_TRUE(contains(r.out, "\"barrier_offset\":250")) << r.out;
	ASSERT_EQ("", produce_to(b.bootstrap(), kMir, 20, 3));
	ASSERT_EQ("", wait_hw(b, "m:0", 271));
	EXPECT_EQ("STOPPED", status_of(b, "m:0").state);
	std::string text = log_of(kMir);
	std::string cid = state.substr(state.find("source.cluster.id=") + 18);
	cid = cid.substr(0, cid.find('\n'));
	EXPECT_TRUE(contains(text, "MirrorPidReset {\"version\":0,\"sourceClusterId\":\"" +
					   cid + "\"}"))
		<< cid;
	clean_stop(b);
}

TEST_F(Restart, StoppedPartitionStaysWritableInEitherList)
{
	Daemon a(dir_.path(), mirror_sets());
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce_to(mock_.bootstrap(), kMir, 100, 1));
	ASSERT_EQ("", wait_hw(a, "m:0", 100));
	ChildResult r;
	ASSERT_EQ("", ctl(a, { "stop", "m:0" }, &r));
	ASSERT_EQ("", produce_to(a.bootstrap(), kMir, 10, 2));
	ASSERT_EQ("", wait_hw(a, "m:0", 111));
	clean_stop(a);

	int64_t hw = 111;
	const std::vector<std::vector<std::string>> configs = {
		{ std::string("local.topics=") + kMir + ":1" },
		mirror_sets(),
		{ std::string("local.topics=") + kLoc + ":1" }, /* neither */
	};
	for (size_t k = 0; k < configs.size(); k++) {
		Daemon b(dir_.path(), configs[k]);
		ASSERT_EQ("", b.start()) << k;
		EXPECT_EQ("STOPPED", status_of(b, "m:0").state) << k;
		ASSERT_EQ("", produce_to(b.bootstrap(), kMir, 10, 3 + k)) << k;
		hw += 10;
		ASSERT_EQ("", wait_hw(b, "m:0", hw)) << k;
		clean_stop(b);
	}
	EXPECT_TRUE(contains(stderr_, "partition m-0: in neither topics nor local.topics; stopped (barrier at 100), so it stays writable"))
		<< stderr_;
	ASSERT_EQ("", a.start());
	EXPECT_EQ((size_t)hw - 1, read_all(a, kMir).size())
		<< "every record but the barrier";
	clean_stop(a);
}

/* Positive producer ids in topic-0's log, in log order. */
std::vector<int64_t> local_pids(const std::string &log_text)
{
	std::vector<int64_t> out;
	for (int64_t id : pids_in(log_text))
		if (id >= 0 && (out.empty() || out.back() != id))
			out.push_back(id);
	return out;
}

/* R4 step 6: after a stop, InitProducerId hands out ids above the largest
 * positive id ever seen in the log - the logs, not only the allocator's
 * own producer-id-block file. The file is set to 5000 before the first
 * start so that the stopped mirror's log gets local producer 5000, then
 * removed before each restart (partition directories carried to a fresh
 * data.dir have none): each new producer, on the other partition each
 * time, must get an id above every one in either log - after kill -9
 * (recovery replays the local batches) and after a clean stop (producer
 * snapshots only). */
TEST_F(Restart, LocalProducerIdsStayAboveEveryIdInTheLogs)
{
	const std::string block = dir_.path() + "/producer-id-block";
	auto sets = mirror_sets({ std::string("local.topics=") + kLoc + ":1" });
	FILE *f = fopen(block.c_str(), "w");
	ASSERT_NE(nullptr, f);
	fputs("5000\n", f);
	ASSERT_EQ(0, fclose(f));
	Daemon a(dir_.path(), sets);
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce_to(mock_.bootstrap(), kMir, 20, 1));
	ASSERT_EQ("", wait_hw(a, "m:0", 20));
	ChildResult r;
	ASSERT_EQ("", ctl(a, { "stop", "m:0" }, &r));
	ASSERT_EQ("", produce_to(a.bootstrap(), kMir, 10, 2));
	ASSERT_EQ("", wait_hw(a, "m:0", 31));
	std::vector<int64_t> m_ids = local_pids(log_of(kMir));
	ASSERT_EQ(1u, m_ids.size()) << log_of(kMir);
	ASSERT_GE(m_ids[0], 5000);
	EXPECT_TRUE(local_pids(log_of(kLoc)).empty());

	ASSERT_EQ("", a.kill9());
	ASSERT_EQ(0, unlink(block.c_str()));
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce_to(a.bootstrap(), kLoc, 10, 3));
	ASSERT_EQ("", wait_hw(a, "loc:0", 10));
	std::vector<int64_t> loc_ids = local_pids(log_of(kLoc));
	ASSERT_EQ(1u, loc_ids.size()) << log_of(kLoc);
	EXPECT_GT(loc_ids[0], m_ids[0]) << "after kill -9";

	clean_stop(a);
	ASSERT_EQ(0, unlink(block.c_str()));
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce_to(a.bootstrap(), kMir, 10, 4));
	ASSERT_EQ("", wait_hw(a, "m:0", 41));
	m_ids = local_pids(log_of(kMir));
	ASSERT_EQ(2u, m_ids.size()) << log_of(kMir);
	EXPECT_GT(m_ids[1], loc_ids[0]) << "after a clean stop";
	EXPECT_GT(m_ids[1], m_ids[0]) << "after a clean stop";
	clean_stop(a);
}

/* R7 as the operator sees it: a batch damaged in the middle of a local
 * partition's log while kmirrord was down (after kill -9, so the restart
 * recovers) is named as corruption, with the file and byte position, at
 * ERROR - not as a torn tail - and the partition serves up to the cut. */
TEST_F(Restart, CorruptionMidLogIsNamedAsCorruptionNotATornTail)
{
	Daemon a(dir_.path(), { std::string("local.topics=") + kLoc + ":1" });
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce_to(a.bootstrap(), kLoc, 100, 1));
	ASSERT_EQ("", wait_hw(a, "loc:0", 100));
	ASSERT_EQ("", a.kill9());

	struct At {
		int64_t base;
		uint64_t pos, size;
	};
	std::vector<At> batches;
	std::string text = log_of(kLoc);
	std::regex re("baseOffset: ([0-9]+) lastOffset: [0-9]+ .* position: "
		      "([0-9]+) [A-Za-z]+: -?[0-9]+ size: ([0-9]+)");
	for (std::sregex_iterator it(text.begin(), text.end(), re), end;
	     it != end; ++it)
		batches.push_back({ std::stoll((*it)[1]), std::stoull((*it)[2]),
				    std::stoull((*it)[3]) });
	ASSERT_GE(batches.size(), 3u) << text;
	const At &bad = batches[1];
	std::string seg = part_dir(kLoc) + "/00000000000000000000.log";
	int fd = open(seg.c_str(), O_RDWR);
	ASSERT_GE(fd, 0);
	uint8_t byte;
	off_t at = (off_t)(bad.pos + bad.size - 3);
	ASSERT_EQ(1, pread(fd, &byte, 1, at));
	byte = (uint8_t)~byte;
	ASSERT_EQ(1, pwrite(fd, &byte, 1, at));
	close(fd);

	ASSERT_EQ("", a.start());
	ASSERT_EQ("", wait_hw(a, "loc:0", bad.base));
	clean_stop(a);
	std::string pos = std::to_string(bad.pos);
	EXPECT_TRUE(contains(stderr_, "ERROR daemon: partition loc-0: recovered from corruption (not a torn tail): bad batch at position " +
					      pos + " of 00000000000000000000.log; cut at offset " +
					      std::to_string(bad.base)))
		<< stderr_;
	EXPECT_TRUE(contains(stderr_, ": corrupt batch at position " + pos))
		<< stderr_;
	EXPECT_FALSE(contains(stderr_, "torn batch")) << stderr_;
}

TEST_F(Restart, LocalPartitionListedInTopicsStaysWritableAndIsNotMirrored)
{
	ASSERT_EQ("", mock_.create_topic(kLoc, 1));
	ASSERT_EQ("", produce_to(mock_.bootstrap(), kLoc, 300, 9));
	{
		Daemon a(dir_.path(), { std::string("local.topics=") + kLoc + ":1" });
		ASSERT_EQ("", a.start());
		ASSERT_EQ("", produce_to(a.bootstrap(), kLoc, 100, 1));
		clean_stop(a);
	}
	EXPECT_TRUE(contains(read_file(part_dir(kLoc) + "/kmirror.state"), "role=local\n"));

	Daemon b(dir_.path(), { "source.bootstrap.servers=" + mock_.bootstrap(),
				std::string("topics=") + kMir + "," + kLoc });
	ASSERT_EQ("", b.start());
	EXPECT_EQ("WRITABLE", status_of(b, "loc:0").state);
	ASSERT_EQ("", produce_to(b.bootstrap(), kLoc, 10, 2));
	ASSERT_EQ("", wait_hw(b, "loc:0", 110));
	/* Only local writes: none of the source's 300 records. */
	std::vector<Message> got = read_all(b, kLoc);
	ASSERT_EQ(110u, got.size());
	EXPECT_EQ(payload_value(1, 0, 99, 100), got[99].value);
	EXPECT_EQ(payload_value(2, 0, 0, 100), got[100].value);
	clean_stop(b);
	EXPECT_TRUE(contains(stderr_, "partition loc-0: its log holds local writes (created from local.topics) but loc is in topics: it stays writable and is not mirrored"))
		<< stderr_;
}

TEST_F(Restart, DataInNeitherListIsNamedAtStart)
{
	const std::string other = std::string("local.topics=other:1");
	{
		Daemon a(dir_.path(), mirror_sets({ std::string("local.topics=") + kLoc + ":1," + "old:1" }));
		ASSERT_EQ("", a.start());
		ASSERT_EQ("", produce_to(mock_.bootstrap(), kMir, 30, 1));
		ASSERT_EQ("", produce_to(a.bootstrap(), kLoc, 20, 2));
		ASSERT_EQ("", produce_to(a.bootstrap(), "old", 20, 3));
		ASSERT_EQ("", wait_hw(a, "m:0", 30));
		clean_stop(a);
	}
	/* old-0 as a data.dir from before roles were recorded. */
	ASSERT_EQ(0, ::remove((part_dir("old") + "/kmirror.state").c_str()));

	Daemon b(dir_.path(), { other });
	ASSERT_EQ("", b.start());
	PartStatus m = status_of(b, "m:0");
	EXPECT_EQ("FAILED", m.state);
	EXPECT_TRUE(contains(m.reason, "neither topics nor local.topics")) << m.reason;
	expect_refused(b, kMir);
	EXPECT_EQ("WRITABLE", status_of(b, "loc:0").state);
	ASSERT_EQ("", produce_to(b.bootstrap(), kLoc, 5, 4));
	EXPECT_EQ("SERVING", status_of(b, "old:0").state);
	expect_refused(b, "old");
	EXPECT_EQ(20u, read_all(b, "old").size());
	clean_stop(b);
	EXPECT_TRUE(contains(stderr_, "partition m-0: a mirror (MIRRORING, no barrier) but its topic is in neither topics nor local.topics: not mirrored, writes refused; `kmirrorctl stop m:0`"))
		<< stderr_;
	EXPECT_TRUE(contains(stderr_, "partition loc-0: in neither topics nor local.topics; it holds local writes and stays writable"))
		<< stderr_;
	EXPECT_TRUE(contains(stderr_, "partition old-0: data in " + dir_.path() +
					      " but in neither topics nor local.topics, and no kmirror.state says who wrote it: served read-only"))
		<< stderr_;
}

/* ---- item 7: addresses ---------------------------------------------- */

TEST_F(Restart, Ipv6ListenerAndUnknownHostsAreReportedAsWhatTheyAre)
{
	ChildResult r = run_kmirrord({ "data.dir=" + dir_.path(), "listeners=[::1]:0" });
	EXPECT_EQ(2, r.exit_code) << r.describe();
	EXPECT_EQ("kmirrord: --set: listeners: invalid value \"[::1]:0\": \"[::1]:0\": IPv6 is not supported yet (use an IPv4 address, 0.0.0.0 for all, or a host name)\n",
		  r.err);

	r = run_kmirrord({ "data.dir=" + dir_.path(), "control.socket=" + dir_.file("c.sock"),
			   "listeners=no-such-host.invalid:0" });
	EXPECT_EQ(1, r.exit_code) << r.describe();
	EXPECT_TRUE(contains(r.err, "ERROR daemon: listeners no-such-host.invalid:0: cannot resolve host 'no-such-host.invalid': "))
		<< r.err;
	EXPECT_TRUE(contains(r.err, "(-10088)")) << r.err;
	EXPECT_FALSE(contains(r.err, "No route to host")) << r.err;
	EXPECT_FALSE(contains(r.err, "0.0.0.0")) << r.err;

	/* failback --source: the same words, before any partition moves. */
	Daemon d(dir_.path(), { std::string("local.topics=") + kLoc + ":1" });
	ASSERT_EQ("", d.start());
	EXPECT_NE("", ctl(d, { "failback", "loc:0", "--source", "[::1]:9092" }, &r));
	EXPECT_TRUE(contains(r.err, "--source [::1]:9092: IPv6 is not supported yet")) << r.err;
	EXPECT_TRUE(contains(r.err, "EAFNOSUPPORT")) << r.err;
	EXPECT_NE("", ctl(d, { "failback", "loc:0", "--source", "no-such-host.invalid:9092" }, &r));
	EXPECT_TRUE(contains(r.err, "upstream no-such-host.invalid:9092: cannot resolve host 'no-such-host.invalid': "))
		<< r.err;
	EXPECT_TRUE(contains(r.err, "KM_ERESOLVE, code -10088")) << r.err;
	EXPECT_EQ("WRITABLE", status_of(d, "loc:0").state);
	ASSERT_EQ("", produce_to(d.bootstrap(), kLoc, 5, 1));
	clean_stop(d);
}

} // namespace
