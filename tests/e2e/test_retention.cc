/* Retention end to end (issue 7). librdkafka's mock cluster keeps about
 * 5 MiB per partition and drops the oldest data beyond: kmirrord's log start
 * follows it, whole segments at a time. A local retention.bytes bounds the
 * disk under a long stream. Readers below the log start get
 * OFFSET_OUT_OF_RANGE. While data.dir is short of space (a small tmpfs
 * here), mirroring pauses with its reason in status and resumes when space
 * returns, also across a restart. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const char *kTopic = "r";
const char *kKey = "r:0";
const int64_t kSegment = 256 * 1024;
using StatusMap = std::map<std::string, PartStatus>;

/* Base offsets of the partition's files with this suffix, ascending. */
std::vector<int64_t> bases(const std::string &part_dir, const std::string &ext)
{
	std::vector<int64_t> v;
	DIR *d = opendir(part_dir.c_str());
	struct dirent *e;

	while (d != nullptr && (e = readdir(d)) != nullptr) {
		std::string n = e->d_name;
		if (n.size() == 20 + ext.size() &&
		    n.compare(20, std::string::npos, ext) == 0)
			v.push_back(std::stoll(n.substr(0, 20)));
	}
	if (d != nullptr)
		closedir(d);
	std::sort(v.begin(), v.end());
	return v;
}

int64_t st_log_start(Daemon &d, const std::string &key)
{
	std::map<std::string, PartStatus> st;
	if (d.status(&st) != "" || !st.count(key))
		return -2;
	return st.at(key).log_start;
}

class Retention : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ("", mock_.error());
		ASSERT_EQ("", mock_.create_topic(kTopic, 1));
		ASSERT_EQ("", dir_.error());
	}

	std::vector<std::string> sets(std::vector<std::string> more = {})
	{
		std::vector<std::string> s = {
			"source.bootstrap.servers=" + mock_.bootstrap(),
			std::string("topics=") + kTopic,
			"segment.bytes=" + std::to_string(kSegment),
		};
		s.insert(s.end(), more.begin(), more.end());
		return s;
	}

	/* 1 MiB more on the source: 256 records of 4 KiB. */
	void produce_mib(int round)
	{
		ProduceSpec ps;
		ps.topic = kTopic;
		ps.count = 256;
		ps.value_size = 4096;
		ps.first_seq = round * 256;
		ps.seed = 77;
		ps.flush_every = 16;
		ProduceResult pr;
		ASSERT_EQ("", produce(mock_.bootstrap(), ps, &pr));
		ASSERT_EQ(256, pr.delivered);
	}

	void source_marks(int64_t *lo, int64_t *hi)
	{
		ASSERT_EQ("", watermarks(mock_.bootstrap(), kTopic, 0, lo, hi));
	}

	std::string wait_caught_up(Daemon &d)
	{
		int64_t lo, hi;
		source_marks(&lo, &hi);
		return d.wait_status(
			[&](const StatusMap &st) {
				return st.count(kKey) && st.at(kKey).hw == hi;
			},
			60000);
	}

	/* The same records at the same offsets on both sides, over [from, to). */
	void expect_same(const Daemon &d, int64_t from, int64_t to)
	{
		std::vector<Message> a, b;
		ConsumeSpec cs;
		cs.topic = kTopic;
		cs.from = from;
		cs.to = to;
		ASSERT_EQ("", consume(mock_.bootstrap(), cs, &a));
		ASSERT_EQ("", consume(d.bootstrap(), cs, &b));
		ASSERT_EQ(size_t(to - from), b.size());
		ASSERT_EQ(a.size(), b.size());
		for (size_t i = 0; i < a.size(); i++) {
			EXPECT_EQ(a[i].offset, b[i].offset) << i;
			EXPECT_EQ(a[i].value, b[i].value) << i;
		}
	}

	/* A reader positioned below the log start, told to fail rather than
	 * reset: Kafka's OFFSET_OUT_OF_RANGE. */
	std::string read_below(const Daemon &d, int64_t offset)
	{
		std::vector<Message> got;
		ConsumeSpec cs;
		cs.topic = kTopic;
		cs.from = offset;
		cs.conf = { { "auto.offset.reset", "error" } };
		cs.timeout_ms = 10000;
		return consume(d.bootstrap(), cs, &got);
	}

	/* The fetch network in `status --json`: how many fetch-session
	 * connections are open, and the bytes every worker has sent. */
	static bool fetch_net(const Daemon &d, int *conns, int64_t *bytes_out)
	{
		ChildResult r;
		if (ctl(d, { "status", "--json" }, &r) != "")
			return false;
		json_t *root = json_loads(r.out.c_str(), 0, nullptr);
		json_t *net = json_object_get(root, "net");
		*conns = (int)json_array_size(json_object_get(root, "connections"));
		*bytes_out = 0;
		for (size_t i = 0; i < json_array_size(net); i++)
			*bytes_out += json_integer_value(
				json_object_get(json_array_get(net, i), "bytes_out"));
		bool ok = root != nullptr && json_array_size(net) > 0;
		json_decref(root);
		return ok;
	}

	/* The pause ends the fetch session: once status shows no fetch
	 * connection, nothing can fetch, and the fetch network sends no byte
	 * between before 1 MiB more is on the source and after; the log end
	 * stays at leo. */
	void expect_paused_fetches_nothing(Daemon &d, int64_t leo)
	{
		int conns = -1;
		int64_t out0 = -1, out1 = -1, lo, hi;
		StatusMap st;

		ASSERT_TRUE(poll_until([&] { return fetch_net(d, &conns, &out0) && conns == 0; },
				       10000))
			<< conns << " fetch connections while paused";
		produce_mib(1);
		source_marks(&lo, &hi);
		ASSERT_EQ(leo + 256, hi) << "the new data is on the source";
		ASSERT_TRUE(fetch_net(d, &conns, &out1));
		EXPECT_EQ(0, conns) << "a fetch connection while paused";
		EXPECT_EQ(out0, out1) << "the fetch network sent requests while paused";
		ASSERT_EQ("", d.status(&st));
		EXPECT_EQ("PAUSED", st.at(kKey).state);
		EXPECT_EQ(leo, st.at(kKey).leo) << "mirrored while paused for space";
	}

	std::string part_dir(const Daemon &d)
	{
		return d.data_dir() + "/" + kTopic + "-0";
	}

	MockCluster mock_{ 1 };
	TempDir dir_{ "km-retain" };
};

/* Whole segments below the source's log start go, with their index, time
 * index and snapshot files; what stays is the source's data from its log
 * start on, byte for byte, and survives a restart. */
TEST_F(Retention, LogStartFollowsTheSource)
{
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	for (int round = 0; round < 9; round++) {
		produce_mib(round);
		ASSERT_EQ("", wait_caught_up(d)) << "round " << round;
	}
	int64_t lo, hi;
	source_marks(&lo, &hi);
	ASSERT_GT(lo, 0) << "the mock kept everything: nothing to follow";

	/* First segment kept: starts at or below the source's log start,
	 * the next one above it (a segment goes only when wholly below). */
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &st) {
				      auto b = bases(part_dir(d), ".log");
				      /* Deletion runs a burst a second and
				       * status is published per tick: wait
				       * for both to be done and agree. */
				      return st.at(kKey).log_start > 0 &&
					     b.size() >= 2 && b[1] > lo &&
					     st.at(kKey).log_start == b[0];
			      },
			      10000));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	int64_t start = st.at(kKey).log_start;
	auto logs = bases(part_dir(d), ".log");
	EXPECT_LE(start, lo);
	EXPECT_EQ(start, logs.front());
	EXPECT_GT(logs[1], lo);
	EXPECT_EQ(st.at(kKey).disk_bytes > 0, true);
	for (const char *ext : { ".index", ".timeindex", ".snapshot" })
		for (int64_t b : bases(part_dir(d), ext))
			EXPECT_GE(b, start) << ext << " left behind at " << b;

	EXPECT_NE(std::string::npos, read_below(d, 0).find("out of range"))
		<< read_below(d, 0);
	expect_same(d, lo, hi);

	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &s) {
				      return s.at(kKey).log_start == start &&
					     s.at(kKey).hw == hi;
			      },
			      10000));
}

/* topic.retention.bytes keeps the partition's disk use bounded while the
 * stream goes on; the log start then moves past the source's. */
TEST_F(Retention, RetentionBytesBoundsTheDisk)
{
	const int64_t cap = 1 << 20;
	Daemon d(dir_.path(),
		 sets({ "retention.bytes=-1",
			"topic.retention.bytes=" + std::string(kTopic) + ":" +
				std::to_string(cap) }));
	ASSERT_EQ("", d.start());
	for (int round = 0; round < 8; round++) {
		produce_mib(round);
		ASSERT_EQ("", wait_caught_up(d)) << "round " << round;
		ASSERT_EQ("", d.wait_status(
				      [&](const StatusMap &st) {
					      return st.at(kKey).disk_bytes <= cap;
				      },
				      10000))
			<< "round " << round;
	}
	int64_t lo, hi;
	source_marks(&lo, &hi);
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_GT(st.at(kKey).log_start, lo);
	EXPECT_EQ(st.at(kKey).log_start, bases(part_dir(d), ".log").front());
	EXPECT_NE(std::string::npos, read_below(d, lo).find("out of range"));
	expect_same(d, st.at(kKey).log_start, hi);
}

TEST_F(Retention, PausesWhileDataDirIsShortOfSpace)
{
	if (geteuid() != 0)
		GTEST_SKIP() << "mounting a tmpfs for data.dir needs root";
	const uint64_t min = 16 << 20;
	Tmpfs fs(dir_.file("fs"), "64m");
	ASSERT_EQ("", fs.error());
	std::string filler = dir_.file("fs") + "/filler";
	Daemon d(dir_.file("fs") + "/data",
		 sets({ "disk.free.min.bytes=" + std::to_string(min) }));
	ASSERT_EQ("", d.start());
	produce_mib(0);
	ASSERT_EQ("", wait_caught_up(d));

	ASSERT_EQ("", fill_to(filler, min - (4 << 20)));
	ASSERT_EQ("", d.wait_status(
			      [](const StatusMap &st) {
				      return st.at(kKey).state == "PAUSED";
			      },
			      10000));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_NE(std::string::npos, st.at(kKey).reason.find("disk.free.min.bytes"))
		<< st.at(kKey).reason;
	ChildResult r;
	ASSERT_EQ("", ctl(d, { "metrics" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\nkmirror_disk_paused 1\n"));
	EXPECT_NE("", ctl(d, { "resume", "r:0" }, &r)) << "resume must refuse";
	EXPECT_NE(std::string::npos, (r.out + r.err).find("disk.free.min.bytes"))
		<< r.out << r.err;

	/* New source data stays there while paused; the mirror still serves. */
	int64_t leo = st.at(kKey).leo;
	expect_paused_fetches_nothing(d, leo);
	expect_same(d, 0, leo);

	ASSERT_EQ(0, unlink(filler.c_str()));
	ASSERT_EQ("", wait_caught_up(d));
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("MIRRORING", st.at(kKey).state);

	/* Short of space at a restart: held before any fetch; the pause is
	 * not persisted, so space back means mirroring again. */
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ("", fill_to(filler, min - (4 << 20)));
	produce_mib(2);
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("PAUSED", st.at(kKey).state);
	EXPECT_NE(std::string::npos, st.at(kKey).reason.find("disk.free.min.bytes"));
	/* No state file means MIRRORING (mstate.c); PAUSED is never written. */
	EXPECT_EQ(std::string::npos,
		  read_file(part_dir(d) + "/kmirror.state").find("PAUSED"));
	ASSERT_EQ(0, unlink(filler.c_str()));
	ASSERT_EQ("", wait_caught_up(d));
	int64_t lo, hi;
	source_marks(&lo, &hi);
	expect_same(d, 0, hi);
}

/* Retention by age reaches a partition nothing happens to (issue 17): a
 * worker visits an idle partition when its oldest segment ages out (a
 * timer heap keyed by the deadline), not once a second in a sweep of
 * every partition, and not only at the backstop (KM_WORKER_IDLE_MS, 60 s).
 * A local topic (no fetcher: no Fetch answer touches it) gets records in
 * several segments, then nothing; every segment but the active one must go
 * within 40 s of the last record - by which time the only visits left to
 * find them are the deadline's - and not before it aged out. */
TEST_F(Retention, AgeRetentionReachesAnIdlePartition)
{
	const int64_t kAgeMs = 5000;
	const std::string key = "l:0";
	Daemon d(dir_.path(), { "local.topics=l:1", "segment.bytes=16384",
				"topic.retention.ms=l:" + std::to_string(kAgeMs) });
	ASSERT_EQ("", d.start());
	ProduceSpec ps;
	ps.topic = "l";
	ps.count = 64;
	ps.value_size = 1024;
	ps.flush_every = 4;
	ProduceResult pr;
	int64_t first_ms = now_ms();
	ASSERT_EQ("", produce(d.bootstrap(), ps, &pr));
	ASSERT_EQ(64, pr.delivered);
	int64_t last_ms = now_ms(); /* no record is stamped later */
	std::string dir = d.data_dir() + "/l-0";
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &st) {
				      return st.count(key) && st.at(key).hw == 64;
			      },
			      20000));
	auto logs = bases(dir, ".log");
	ASSERT_GE(logs.size(), 3u) << "the records took fewer segments";
	int64_t active = logs.back();
	/* The segments the records filled are not yet old enough, unless the
	 * produce itself took that long. */
	if (now_ms() - first_ms < kAgeMs) {
		EXPECT_EQ(0, st_log_start(d, key)) << "deleted before its age";
	}
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &st) {
				      return st.at(key).log_start == active &&
					     bases(dir, ".log").size() == 1;
			      },
			      (int)(last_ms + 40000 - now_ms())))
		<< "the idle partition's aged segments never went: "
		<< bases(dir, ".log").size() << " segments";
	EXPECT_GE(now_ms() - first_ms, kAgeMs) << "deleted before its age";
	EXPECT_EQ(std::vector<int64_t>{ active }, bases(dir, ".index"));
	EXPECT_EQ(std::vector<int64_t>{ active }, bases(dir, ".timeindex"));
}

} // namespace
