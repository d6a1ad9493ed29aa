/* Goal: with workers=2, mirrored partitions are spread over both workers
 * (issue 18: workers that scale), at start and when partitions are added
 * while kmirrord runs, and each is still mirrored byte for byte.
 *  - At start: a topic's 4 partitions land 2 and 2 on the workers, no two
 *    consecutive ones together, and two 1-partition topics on different
 *    workers: 3 and 3 of the 6 mirrored partitions. Owners came from a
 *    hash of topic and partition, which put all 4 of `wide` and both
 *    1-partition topics on worker 0 (these names were chosen so: the
 *    hash's owners are printed in the method below).
 *  - While running: a topic created at the source and found by
 *    topics.include takes the worker with fewer mirrored partitions each
 *    time: its 4 partitions land 2 and 2 (the hash gave 3 and 1).
 *  - Content: every mirrored partition ends at the source's end and its
 *    .log is byte-identical to the source's.
 *  - Local partitions are dealt on their own count: a topic the mirror
 *    auto-creates (4 partitions) lands 2 and 2, whatever the mirrored
 *    partitions' count says.
 * Method: kmirrord child processes (daemon.h). The source has
 * local.topics=wide:4,one:1,two:1 and auto.create.topics.enable with
 * num.partitions=4; a real librdkafka producer writes 500 records of 1 KiB
 * to every partition. The mirror runs workers=2 with
 * topics.include=wide,one,two,many and a 200 ms metadata refresh; `many`
 * is then produced to at the source (auto-created there), and `loc` at the
 * mirror (auto-created there, local and writable). Owners are read
 * from status's per-partition "worker" field; every wait polls status with
 * a deadline. (km_worker_hash's owners over 2 workers: wide 0 0 0 0,
 * one 0, two 0, many 1 1 1 0.) */
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"

using namespace kmtest;

namespace {

constexpr int kRecords = 500;
constexpr size_t kValueBytes = 1024;
const char *const kStartTopics[] = { "wide", "one", "two" };

std::string produce_topic(const std::string &bootstrap, const std::string &topic,
			  int partitions)
{
	for (int p = 0; p < partitions; p++) {
		ProduceSpec s;
		s.topic = topic;
		s.partition = p;
		s.count = kRecords;
		s.value_size = kValueBytes;
		s.seed = (uint64_t)p;
		s.flush_every = 100; /* several batches per partition */
		s.timeout_ms = 60000;
		std::string e = produce(bootstrap, s);
		if (!e.empty())
			return topic + ":" + std::to_string(p) + ": " + e;
	}
	return "";
}

/* The mirror's partitions of topic MIRRORING at the source's end. */
bool caught_up(const std::map<std::string, PartStatus> &mirror,
	       const std::map<std::string, PartStatus> &src, const std::string &topic,
	       int partitions)
{
	for (int p = 0; p < partitions; p++) {
		std::string k = topic + ":" + std::to_string(p);
		auto m = mirror.find(k);
		if (m == mirror.end() || m->second.state != "MIRRORING" ||
		    m->second.leo != src.at(k).leo)
			return false;
	}
	return true;
}

/* The source's status once it shows every record its producer had
 * acknowledged (a partition's figures are published a tick later). */
std::string source_status(Daemon &a, const std::vector<std::pair<std::string, int>> &topics,
			  std::map<std::string, PartStatus> *out)
{
	std::string e = a.wait_status(
		[&](const std::map<std::string, PartStatus> &st) {
			for (auto &[t, n] : topics)
				for (int p = 0; p < n; p++) {
					auto it = st.find(t + ":" + std::to_string(p));
					if (it == st.end() || it->second.leo != kRecords)
						return false;
				}
			return true;
		},
		30000);
	return e.empty() ? a.status(out) : e;
}

/* How many of topic's partitions each of 2 workers owns. */
std::vector<int> per_worker(const std::map<std::string, PartStatus> &st,
			    const std::string &topic, int partitions)
{
	std::vector<int> n(2, 0);
	for (int p = 0; p < partitions; p++) {
		int64_t w = st.at(topic + ":" + std::to_string(p)).worker;
		EXPECT_TRUE(w == 0 || w == 1) << topic << ":" << p << " on " << w;
		if (w == 0 || w == 1)
			n[(size_t)w]++;
	}
	return n;
}

void expect_same_logs(const std::string &a, const std::string &b,
		      const std::string &topic, int partitions)
{
	for (int p = 0; p < partitions; p++) {
		std::string f = "/" + topic + "-" + std::to_string(p) +
				"/00000000000000000000.log";
		std::string ea, eb;
		std::string da = read_file(a + f, &ea), db = read_file(b + f, &eb);
		ASSERT_EQ("", ea + eb);
		ASSERT_GE(da.size(), (size_t)kRecords * kValueBytes) << f;
		EXPECT_TRUE(da == db) << f << ": the mirror's log differs";
	}
}

TEST(Workers, BusyPartitionsSpreadOverTwoWorkersAtStartAndWhenAdded)
{
	TempDir ta("km-workers-a"), tb("km-workers-b");
	Daemon a(ta.path(), { "local.topics=wide:4,one:1,two:1",
			      "auto.create.topics.enable=true", "num.partitions=4" });
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce_topic(a.bootstrap(), "wide", 4));
	ASSERT_EQ("", produce_topic(a.bootstrap(), "one", 1));
	ASSERT_EQ("", produce_topic(a.bootstrap(), "two", 1));
	std::map<std::string, PartStatus> src;
	ASSERT_EQ("", source_status(a, { { "wide", 4 }, { "one", 1 }, { "two", 1 } }, &src));

	Daemon b(tb.path(), { "source.bootstrap.servers=" + a.bootstrap(),
			      "topics.include=wide,one,two,many",
			      "metadata.refresh.interval.ms=200", "workers=2",
			      "auto.create.topics.enable=true", "num.partitions=4" });
	ASSERT_EQ("", b.start());
	ASSERT_EQ("", b.wait_status(
			      [&](const std::map<std::string, PartStatus> &st) {
				      return caught_up(st, src, "wide", 4) &&
					     caught_up(st, src, "one", 1) &&
					     caught_up(st, src, "two", 1);
			      },
			      60000));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", b.status(&st));
	EXPECT_EQ((std::vector<int>{ 2, 2 }), per_worker(st, "wide", 4));
	for (int p = 0; p + 1 < 4; p++)
		EXPECT_NE(st.at("wide:" + std::to_string(p)).worker,
			  st.at("wide:" + std::to_string(p + 1)).worker)
			<< "wide:" << p << " and the next on one worker";
	EXPECT_NE(st.at("one:0").worker, st.at("two:0").worker);
	for (const char *t : kStartTopics)
		expect_same_logs(ta.path(), tb.path(), t, t[0] == 'w' ? 4 : 1);

	/* A topic made at the source while the mirror runs. */
	ASSERT_EQ("", produce_topic(a.bootstrap(), "many", 4));
	src.clear();
	ASSERT_EQ("", source_status(a, { { "many", 4 } }, &src))
		<< "auto-created with 4 partitions";
	ASSERT_EQ("", b.wait_status(
			      [&](const std::map<std::string, PartStatus> &s) {
				      return caught_up(s, src, "many", 4);
			      },
			      60000));
	st.clear();
	ASSERT_EQ("", b.status(&st));
	EXPECT_EQ((std::vector<int>{ 2, 2 }), per_worker(st, "many", 4));
	std::vector<int> all(2, 0);
	for (auto &[k, s] : st)
		if (k.rfind("__", 0) != 0 && (s.worker == 0 || s.worker == 1))
			all[(size_t)s.worker]++;
	EXPECT_EQ((std::vector<int>{ 5, 5 }), all) << "mirrored partitions per worker";
	expect_same_logs(ta.path(), tb.path(), "many", 4);

	/* A local topic the mirror itself auto-creates: dealt on the count of
	 * the partitions that are not mirrored. */
	ASSERT_EQ("", produce_topic(b.bootstrap(), "loc", 4));
	ASSERT_EQ("", b.wait_status(
			      [&](const std::map<std::string, PartStatus> &s) {
				      for (int p = 0; p < 4; p++) {
					      auto it = s.find("loc:" + std::to_string(p));
					      if (it == s.end() || it->second.state != "WRITABLE" ||
						  it->second.leo != kRecords)
						      return false;
				      }
				      return true;
			      },
			      30000));
	st.clear();
	ASSERT_EQ("", b.status(&st));
	EXPECT_EQ((std::vector<int>{ 2, 2 }), per_worker(st, "loc", 4));

	ChildResult r;
	ASSERT_EQ("", b.stop(60000, &r));
	EXPECT_EQ(0, r.exit_code) << r.describe();
	ASSERT_EQ("", a.stop(60000, &r));
}

} // namespace
