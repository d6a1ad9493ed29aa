/* The source's identity, and the words an operator needs (issue 21 items 3
 * and 7, source side).
 *
 * Goal: kmirrord never splices two sources into one log, and never stays
 * silent where an operator needs a word:
 *  - another cluster behind the source address (a new cluster id), live or
 *    while kmirrord is down, FAILS the partitions with both ids in the
 *    status reason and the log, appends nothing more, stays FAILED across a
 *    restart, and only `start --from-start` takes the new source;
 *  - the topic deleted and made again (same cluster, a new topic id,
 *    Metadata v10+) does the same;
 *  - partition.metadata names the source topic's id once it is seen, keeps
 *    it while the partition is FAILED for another, and takes the new one
 *    only with `start --from-start`;
 *  - a batch whose baseOffset is damaged (outside the CRC) is refused with a
 *    WARN naming the partition and both offsets, the status reason says so
 *    while it is refetched, nothing of it is appended, and a damage that
 *    stays FAILS the partition;
 *  - a partition the source lacks gets one WARN and a status reason while
 *    kmirrord keeps asking, and mirrors again once it is back;
 *  - two librdkafka mock clusters behind a restart trip the same check.
 *
 * Method: kmirrord runs as a child process (daemon.h) against the fake broker
 * of fake_source.h (kmirror's own codecs; Metadata up to v12 with a topic
 * id), whose cluster can be replaced between two requests with every
 * connection closed (FakeSource::replace) or changed under its clients
 * (FakeSource::change). Every wait polls `kmirrorctl status` or a file
 * with a deadline; no fixed sleep. What the log holds is read back with
 * kmirror-dump-log and with a CRC-checking librdkafka consumer. */
#include <dirent.h>
#include <unistd.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/fake_source.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

constexpr int kParts = 2, kRecords = 5;
/* dataplane/fetch/fetcher.h KM_FETCHER_CORRUPT_MAX: a baseOffset wrong this
 * many times in a row at one offset fails the partition. */
constexpr int kRetriesMax = 5;
constexpr int kWaitMs = 20000;
const char kTopic[] = "ident";
const char kX[] = "cluster-X-3Ts0aWRlbnRpdHk";
const char kY[] = "cluster-Y-bmV3IGNsdXN0ZXI";

using StatusMap = std::map<std::string, PartStatus>;
using Batches = std::vector<std::vector<std::string>>;

std::string key_of(int p)
{
	return std::string(kTopic) + ":" + std::to_string(p);
}

/* Records of a source whose values carry `tag`, so two sources differ. */
struct Source {
	Batches batches;
	std::vector<std::vector<SourceRecord>> records;
};

Source make_source(int batches, const std::string &tag)
{
	Source s;

	s.records.resize(kParts);
	for (int p = 0; p < kParts; p++)
		s.batches.push_back(build_batches(p, batches, kRecords,
						  &s.records[(size_t)p], tag));
	return s;
}

class SourceIdentity : public ::testing::Test {
protected:
	void TearDown() override
	{
		if (fake_) {
			EXPECT_EQ("", fake_->error()) << "the fake's own protocol error";
		}
	}

	void start_fake(const Source &s, const std::string &cluster,
			const TopicId &tid, int max_batches = 0)
	{
		FakeSourceConfig cfg;

		cfg.topic = kTopic;
		cfg.cluster_id = cluster;
		cfg.topic_id = tid;
		cfg.metadata_max_version = 12;
		cfg.partitions = s.batches;
		cfg.max_batches_per_fetch = max_batches;
		fake_ = std::make_unique<FakeSource>(cfg);
		ASSERT_EQ("", fake_->start());
	}

	std::vector<std::string> sets()
	{
		return { "source.bootstrap.servers=" + fake_->bootstrap(),
			 "topics=" + std::string(kTopic) };
	}

	std::string part_dir(int p) const
	{
		return dir_.path() + "/" + kTopic + "-" + std::to_string(p);
	}

	std::string source_file(int p) const
	{
		return read_file(part_dir(p) + "/kmirror.source") + "; " +
		       read_file(part_dir(p) + "/partition.metadata");
	}

	/* kmirror.source of partition p names this cluster id and topic id,
	 * and its partition.metadata the topic id, in Kafka's bytes. */
	bool holds(int p, const std::string &cluster, const TopicId &tid) const
	{
		std::string f = read_file(part_dir(p) + "/kmirror.source");

		return f.find("source.cluster.id=" + cluster + "\n") !=
			       std::string::npos &&
		       f.find("source.topic.id=" + topic_id_text(tid) + "\n") !=
			       std::string::npos &&
		       read_file(part_dir(p) + "/partition.metadata") ==
			       "version: 0\ntopic_id: " + topic_id_text(tid);
	}

	static bool at(const StatusMap &st, int p, const char *state, int64_t leo)
	{
		auto it = st.find(key_of(p));
		return it != st.end() && it->second.state == state &&
		       it->second.leo == leo && it->second.hw == leo;
	}

	std::string wait_all(Daemon &d, const char *state, int64_t leo)
	{
		return d.wait_status(
			[&](const StatusMap &st) {
				for (int p = 0; p < kParts; p++)
					if (!at(st, p, state, leo))
						return false;
				return true;
			},
			kWaitMs);
	}

	/* Mirrored all of `before` batches per partition, and recorded the
	 * source's ids (the topic id once a fetcher saw it). */
	void mirror(Daemon &d, int64_t leo, const std::string &cluster,
		    const TopicId &tid)
	{
		ASSERT_EQ("", wait_all(d, "MIRRORING", leo));
		ASSERT_TRUE(poll_until(
			[&] {
				for (int p = 0; p < kParts; p++)
					if (!holds(p, cluster, tid))
						return false;
				return true;
			},
			kWaitMs))
			<< source_file(0);
	}

	static std::string log_of(Daemon &d)
	{
		std::string line;

		(void)d.child().read_line(5, &line);
		return d.child().stderr_so_far();
	}

	/* Lines at WARN or ERROR matching `what`. */
	static int problem_lines(const std::string &log, const std::string &what)
	{
		std::regex re("^\\S+ (WARN|ERROR) .*(" + what + ")");
		int n = 0;
		size_t at = 0;

		while (at < log.size()) {
			size_t nl = log.find('\n', at);
			std::string line = log.substr(at, nl == std::string::npos
								  ? std::string::npos
								  : nl - at);
			n += std::regex_search(line, re);
			if (nl == std::string::npos)
				break;
			at = nl + 1;
		}
		return n;
	}

	std::vector<Dumped> dump(int p)
	{
		std::string tail;
		std::vector<Dumped> out = dump_batches(part_dir(p), &tail);

		EXPECT_EQ("", tail);
		return out;
	}

	/* The log of partition p holds exactly src's batches below `to`, and a
	 * CRC-checking consumer reads exactly src's records below it. */
	void expect_log(const Daemon &d, int p, const Source &src, int64_t to)
	{
		std::vector<Dumped> got = dump(p);
		std::vector<const std::string *> want;

		for (const std::string &b : src.batches[(size_t)p])
			if (batch_base_offset(b) < to)
				want.push_back(&b);
		ASSERT_EQ(want.size(), got.size()) << "partition " << p;
		for (size_t i = 0; i < got.size(); i++) {
			EXPECT_EQ(batch_base_offset(*want[i]), got[i].base);
			EXPECT_EQ(batch_last_offset(*want[i]), got[i].last);
			EXPECT_TRUE(got[i].valid);
		}
		if (to == 0)
			return;
		std::vector<Message> msgs;
		ConsumeSpec cs;
		cs.topic = kTopic;
		cs.partition = p;
		cs.to = to;
		ASSERT_EQ("", consume(d.bootstrap(), cs, &msgs)) << "partition " << p;
		ASSERT_EQ((size_t)to, msgs.size()) << "partition " << p;
		for (size_t i = 0; i < msgs.size(); i++) {
			const SourceRecord &w = src.records[(size_t)p][i];
			ASSERT_EQ(w.offset, msgs[i].offset);
			EXPECT_EQ(w.value, msgs[i].value) << "offset " << w.offset;
		}
	}

	void expect_clean_stop(Daemon &d)
	{
		ChildResult res;

		ASSERT_EQ("", d.stop(30000, &res));
		EXPECT_EQ(0, res.exit_code) << res.describe();
	}

	std::unique_ptr<FakeSource> fake_;
	TempDir dir_{ "km-source-id" };
};

/* The reason of a FAILED partition names both ids, the address, and what
 * changed. */
void expect_both(const PartStatus &s, const std::string &what,
		 const std::string &had, const std::string &now,
		 const std::string &addr)
{
	EXPECT_EQ("FAILED", s.state);
	EXPECT_NE(std::string::npos, s.reason.find(what)) << s.reason;
	EXPECT_NE(std::string::npos, s.reason.find(had)) << s.reason;
	EXPECT_NE(std::string::npos, s.reason.find(now)) << s.reason;
	EXPECT_NE(std::string::npos, s.reason.find(addr)) << s.reason;
	EXPECT_NE(std::string::npos, s.reason.find("refusing to append"))
		<< s.reason;
}

/* ---- another cluster at the same address, live ---- */

class ClusterSwitch : public SourceIdentity,
		      public ::testing::WithParamInterface<int> {};

/* X is mirrored (GetParam() batches per partition, 0: nothing yet), then
 * cluster Y, with more and other records at the same offsets, takes X's
 * address. Both partitions FAIL naming X, Y and the address; the logs keep
 * exactly X's batches; a restart against Y keeps them FAILED; a plain
 * `start` is refused and names --from-start, which then mirrors Y from
 * scratch and records Y. */
TEST_P(ClusterSwitch, FailsNamingBothIdsAndAppendsNothingAcrossARestart)
{
	const int before = GetParam();
	const int64_t end_x = before * kRecords;
	Source x = make_source(before, "X"), y = make_source(16, "Y");
	const TopicId t1 = topic_id_of(0x11), t2 = topic_id_of(0x22);

	ASSERT_NO_FATAL_FAILURE(start_fake(x, kX, t1, 4));
	const std::string addr = fake_->bootstrap();
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(mirror(d, end_x, kX, t1));

	fake_->replace([&](FakeSourceConfig &c) {
		c.cluster_id = kY;
		c.topic_id = t2;
		c.partitions = y.batches;
	});
	ASSERT_EQ("", wait_all(d, "FAILED", end_x));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	for (int p = 0; p < kParts; p++)
		expect_both(st[key_of(p)], "source cluster id changed", kX, kY,
			    addr);
	std::string log = log_of(d);
	EXPECT_EQ(kParts, problem_lines(log, std::string("FAILED: source cluster "
							 "id changed.*") + kX +
						     ".*" + addr + ".*" + kY))
		<< log;
	for (int p = 0; p < kParts; p++) {
		EXPECT_TRUE(holds(p, kX, t1)) << source_file(p);
		expect_log(d, p, x, end_x);
	}
	expect_clean_stop(d);

	/* FAILED is kept across a restart against Y, with its reason. */
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_all(d, "FAILED", end_x));
	st.clear();
	ASSERT_EQ("", d.status(&st));
	for (int p = 0; p < kParts; p++)
		expect_both(st[key_of(p)], "source cluster id changed", kX, kY,
			    addr);

	/* The operator's way to take Y: not a plain start ... */
	ChildResult r;
	EXPECT_NE("", ctl(d, { "start", key_of(0) }, &r));
	const std::string refusal = r.out + r.err;
	EXPECT_NE(std::string::npos, refusal.find(kX)) << refusal;
	EXPECT_NE(std::string::npos, refusal.find(kY)) << refusal;
	EXPECT_NE(std::string::npos, refusal.find("--from-start")) << refusal;
	EXPECT_NE(std::string::npos, refusal.find("KM_ESOURCEID")) << refusal;
	EXPECT_TRUE(holds(0, kX, t1)) << source_file(0);
	/* ... but --from-start: the log starts over with Y's records. */
	ASSERT_EQ("", ctl(d, { "start", key_of(0), "--from-start" }, &r));
	const int64_t end_y = fake_->end_offset(0);
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &s) {
				      return at(s, 0, "MIRRORING", end_y);
			      },
			      kWaitMs));
	ASSERT_TRUE(poll_until([&] { return holds(0, kY, t2); }, kWaitMs))
		<< source_file(0);
	expect_log(d, 0, y, end_y);
	st.clear();
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("FAILED", st[key_of(1)].state);
	EXPECT_EQ(end_x, st[key_of(1)].leo);
	expect_clean_stop(d);
}

INSTANTIATE_TEST_SUITE_P(BatchesBefore, ClusterSwitch, ::testing::Values(0, 8));

/* ---- another source while kmirrord is down ---- */

struct RestartCase {
	const char *name;
	bool new_cluster; /* else: same cluster, the topic made again */
};

void PrintTo(const RestartCase &c, std::ostream *os)
{
	*os << c.name;
}

class RestartAgainst : public SourceIdentity,
		       public ::testing::WithParamInterface<RestartCase> {};

/* X (topic id t1) is mirrored and kmirrord stopped; the source becomes
 * another cluster, or the same cluster with the topic made again (t2, more
 * records). On the restart the persisted ids are compared, never taken:
 * FAILED naming both, nothing appended, kmirror.source unchanged. */
TEST_P(RestartAgainst, ThePersistedIdsAreComparedNeverTaken)
{
	const RestartCase rc = GetParam();
	Source x = make_source(6, "X"), y = make_source(12, "Y");
	const TopicId t1 = topic_id_of(0x33), t2 = topic_id_of(0x44);
	const int64_t end_x = 6 * kRecords;

	ASSERT_NO_FATAL_FAILURE(start_fake(x, kX, t1));
	const std::string addr = fake_->bootstrap();
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(mirror(d, end_x, kX, t1));
	expect_clean_stop(d);

	const char *now = rc.new_cluster ? kY : kX;
	fake_->replace([&](FakeSourceConfig &c) {
		c.cluster_id = now;
		c.topic_id = t2;
		c.partitions = y.batches;
	});
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_all(d, "FAILED", end_x));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	for (int p = 0; p < kParts; p++) {
		if (rc.new_cluster)
			expect_both(st[key_of(p)], "source cluster id changed",
				    kX, kY, addr);
		else
			expect_both(st[key_of(p)], "source topic id changed",
				    topic_id_text(t1), topic_id_text(t2), addr);
		EXPECT_TRUE(holds(p, kX, t1)) << source_file(p);
		expect_log(d, p, x, end_x);
	}
	std::string log = log_of(d);
	EXPECT_EQ(kParts, problem_lines(log, rc.new_cluster
						     ? "FAILED: source cluster id changed"
						     : "FAILED: source topic id changed"))
		<< log;
	expect_clean_stop(d);
}

INSTANTIATE_TEST_SUITE_P(
	Sources, RestartAgainst,
	::testing::Values(RestartCase{ "another_cluster", true },
			  RestartCase{ "topic_made_again", false }),
	[](const ::testing::TestParamInfo<RestartCase> &i) {
		return std::string(i.param.name);
	});

/* ---- the topic deleted and made again, live ---- */

/* While kmirrord mirrors, the topic goes (UNKNOWN_TOPIC_OR_PARTITION: the
 * partitions wait in CONNECTING with the reason "source has no partition",
 * one WARN each), then comes back with a new topic id and other records:
 * FAILED naming both topic ids, nothing of the new topic appended. */
TEST_F(SourceIdentity, TopicMadeAgainFailsNamingBothTopicIds)
{
	Source x = make_source(6, "X"), y = make_source(12, "R");
	const TopicId t1 = topic_id_of(0x55), t2 = topic_id_of(0x66);
	const int64_t end_x = 6 * kRecords;

	ASSERT_NO_FATAL_FAILURE(start_fake(x, kX, t1));
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(mirror(d, end_x, kX, t1));

	fake_->change([](FakeSourceConfig &c) { c.hidden_from = 0; });
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &st) {
				      for (int p = 0; p < kParts; p++) {
					      auto it = st.find(key_of(p));
					      if (it == st.end() ||
						  it->second.state != "CONNECTING" ||
						  it->second.reason.find(
							  "source has no partition " +
							  std::string(kTopic) + "-" +
							  std::to_string(p)) ==
							  std::string::npos)
						      return false;
				      }
				      return true;
			      },
			      kWaitMs));
	fake_->change([&](FakeSourceConfig &c) {
		c.hidden_from = -1;
		c.topic_id = t2;
		c.partitions = y.batches;
	});
	ASSERT_EQ("", wait_all(d, "FAILED", end_x));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	for (int p = 0; p < kParts; p++) {
		expect_both(st[key_of(p)], "source topic id changed",
			    topic_id_text(t1), topic_id_text(t2),
			    fake_->bootstrap());
		EXPECT_TRUE(holds(p, kX, t1)) << source_file(p);
		expect_log(d, p, x, end_x);
	}
	std::string log = log_of(d);
	for (int p = 0; p < kParts; p++)
		EXPECT_EQ(1, problem_lines(log, "source has no partition " +
							std::string(kTopic) + "-" +
							std::to_string(p)))
			<< log;
	EXPECT_EQ(kParts, problem_lines(log, "FAILED: source topic id changed"))
		<< log;
	expect_clean_stop(d);

	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_all(d, "FAILED", end_x));
	expect_clean_stop(d);
}

/* ---- damaged baseOffsets ---- */

struct DamageCase {
	const char *name;
	int64_t to;	    /* the baseOffset written into the batch at 20 */
	const char *why;    /* what the reason calls it */
};

void PrintTo(const DamageCase &c, std::ostream *os)
{
	*os << c.name;
}

class DamagedBase : public SourceIdentity,
		    public ::testing::WithParamInterface<DamageCase> {};

/* Every delivery of partition 0's batch 20..24 carries another baseOffset
 * (CRC intact). Each is refused with a WARN naming the partition, the
 * offset expected and the batch received; after kRetriesMax in a row the
 * partition FAILS saying so; the log ends at 20 with exactly the source's
 * batches, and partition 1 mirrors everything. */
TEST_P(DamagedBase, IsReportedAndNothingOfItIsAppended)
{
	const DamageCase dc = GetParam();
	Source x = make_source(12, "X");
	const int64_t end = 12 * kRecords;

	ASSERT_NO_FATAL_FAILURE(start_fake(x, kX, topic_id_of(0x77), 4));
	fake_->set_fault_hook([dc](const FakeRequest &rq) {
		FaultAction a;
		if (rq.api_key == 1 && rq.part(0) != nullptr) {
			a.fault = Fault::kBadBaseOffset;
			a.crc_offset = 20;
			a.crc_partition = 0;
			a.base_offset_to = dc.to;
		}
		return a;
	});
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &st) {
				      return at(st, 0, "FAILED", 20) &&
					     at(st, 1, "MIRRORING", end);
			      },
			      kWaitMs));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	const std::string &why = st[key_of(0)].reason;
	const std::string sent = std::to_string(dc.to) + ".." +
				 std::to_string(dc.to + kRecords - 1);
	EXPECT_NE(std::string::npos, why.find("expected a batch at offset 20"))
		<< why;
	EXPECT_NE(std::string::npos, why.find(sent)) << why;
	EXPECT_NE(std::string::npos, why.find(dc.why)) << why;
	EXPECT_NE(std::string::npos, why.find("baseOffset")) << why;
	EXPECT_EQ((uint64_t)kRetriesMax,
		  fake_->faults_applied(Fault::kBadBaseOffset));
	std::string log = log_of(d);
	EXPECT_EQ(kRetriesMax - 1,
		  problem_lines(log, std::string("fetcher: ") + kTopic +
					     "-0: expected a batch at offset 20, "
					     "the source sent " + sent))
		<< log;
	EXPECT_EQ(1, problem_lines(log, "FAILED: " + std::string(kTopic) +
					       "-0: expected a batch at offset 20"))
		<< log;
	expect_log(d, 0, x, 20);
	expect_log(d, 1, x, end);
	expect_clean_stop(d);
}

INSTANTIATE_TEST_SUITE_P(
	Damages, DamagedBase,
	::testing::Values(DamageCase{ "below", 5, "wholly below it" },
			  DamageCase{ "overlapping", 17, "overlapping the log end" },
			  DamageCase{ "past_the_hw", 1000,
				      "past the source's high watermark" }),
	[](const ::testing::TestParamInfo<DamageCase> &i) {
		return std::string(i.param.name);
	});

/* One damaged delivery: while the refetch is held back (the fake's hook
 * waits for the test), status shows MIRRORING with the reason; once it
 * comes right the reason goes and every record is mirrored. */
TEST_F(SourceIdentity, DamagedBaseOffsetOnceShowsTheReasonThenHeals)
{
	struct Gate {
		std::mutex mu;
		std::condition_variable cv;
		bool open = false;
		int damaged = 0;
	};
	auto gate = std::make_shared<Gate>();
	Source x = make_source(12, "X");
	const int64_t end = 12 * kRecords;

	ASSERT_NO_FATAL_FAILURE(start_fake(x, kX, topic_id_of(0x78), 4));
	fake_->set_fault_hook([gate](const FakeRequest &rq) {
		FaultAction a;
		const FakeRequest::Part *p0 = rq.part(0);
		if (rq.api_key != 1 || p0 == nullptr || p0->offset != 20)
			return a;
		std::unique_lock<std::mutex> g(gate->mu);
		if (gate->damaged++ == 0) {
			a.fault = Fault::kBadBaseOffset;
			a.crc_offset = 20;
			a.crc_partition = 0;
			a.base_offset_to = 3;
			return a;
		}
		/* The refetch waits until the test has seen the reason. */
		gate->cv.wait_for(g, std::chrono::milliseconds(kWaitMs),
				  [&] { return gate->open; });
		return a;
	});
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	std::string seen = d.wait_status(
		[&](const StatusMap &st) {
			auto it = st.find(key_of(0));
			return it != st.end() && it->second.state == "MIRRORING" &&
			       it->second.leo == 20 &&
			       it->second.reason.find("expected a batch at offset "
						      "20, the source sent 3..7") !=
				       std::string::npos;
		},
		kWaitMs);
	{
		std::lock_guard<std::mutex> g(gate->mu);
		gate->open = true;
	}
	gate->cv.notify_all();
	ASSERT_EQ("", seen);
	ASSERT_EQ("", wait_all(d, "MIRRORING", end));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("", st[key_of(0)].reason);
	std::string log = log_of(d);
	EXPECT_EQ(1, problem_lines(log, std::string(kTopic) +
					       "-0: expected a batch at offset 20"))
		<< log;
	for (int p = 0; p < kParts; p++)
		expect_log(d, p, x, end);
	expect_clean_stop(d);
}

/* ---- a partition the source lacks ---- */

/* Partition 1 goes from the source's Metadata: it waits in CONNECTING with
 * "source has no partition ident-1" as its reason and one WARN, however
 * often kmirrord asks again; partition 0 mirrors on. Once the partition is
 * back, the reason goes and it mirrors what was added. */
TEST_F(SourceIdentity, PartitionTheSourceLacksIsReportedOnce)
{
	Source x = make_source(6, "X"), more = make_source(10, "X");
	const int64_t end = 6 * kRecords, end2 = 10 * kRecords;

	ASSERT_NO_FATAL_FAILURE(start_fake(x, kX, topic_id_of(0x79)));
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_all(d, "MIRRORING", end));

	fake_->change([](FakeSourceConfig &c) { c.hidden_from = 1; });
	const std::string want = "source has no partition " +
				 std::string(kTopic) + "-1";
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &st) {
				      auto it = st.find(key_of(1));
				      return it != st.end() &&
					     it->second.state == "CONNECTING" &&
					     it->second.reason.find(want) !=
						     std::string::npos;
			      },
			      kWaitMs));
	/* It keeps asking (at a bounded rate), and says it once. */
	uint64_t asked = fake_->requests(3);
	int64_t t0 = now_ms();
	ASSERT_TRUE(poll_until([&] { return fake_->requests(3) >= asked + 4; },
			       kWaitMs));
	/* At the leader backoff (50 ms doubling up to 2 s, one request at
	 * once when it moves to another session), not in a loop: four take
	 * at least 50 + 100 + 200 ms. */
	EXPECT_GE(now_ms() - t0, 200) << "Metadata asked too often";
	fake_->change([&](FakeSourceConfig &c) { c.partitions[0] = more.batches[0]; });
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &st) {
				      return at(st, 0, "MIRRORING", end2);
			      },
			      kWaitMs));
	std::string log = log_of(d);
	EXPECT_EQ(1, problem_lines(log, want + " \\(topic " + kTopic +
						" has 1 partitions at " +
						fake_->bootstrap()))
		<< log;
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("CONNECTING", st[key_of(1)].state);

	fake_->change([&](FakeSourceConfig &c) {
		c.hidden_from = -1;
		c.partitions[1] = more.batches[1];
	});
	ASSERT_EQ("", wait_all(d, "MIRRORING", end2));
	st.clear();
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("", st[key_of(1)].reason);
	EXPECT_NE(std::string::npos,
		  log_of(d).find(std::string(kTopic) + "-1: source at " +
				 fake_->bootstrap() + " has the partition again"));
	for (int p = 0; p < kParts; p++)
		expect_log(d, p, more, end2);
	expect_clean_stop(d);
}

/* ---- librdkafka's mock clusters ---- */

/* Two mock clusters (each its own cluster id), the same topic on both:
 * kmirrord mirrors the first, is restarted against the second, and the
 * partition FAILS naming both ids, its log unchanged. */
TEST(SourceIdentityMock, TwoMockClustersBehindARestartTripTheCheck)
{
	TempDir dir("km-source-id-mock");
	MockCluster a(1), b(1);
	ASSERT_EQ("", a.error());
	ASSERT_EQ("", b.error());
	ASSERT_EQ("", a.create_topic("orders", 1));
	ASSERT_EQ("", b.create_topic("orders", 1));
	ASSERT_EQ("", produce(a.bootstrap(), idempotent("orders", 0, 50, 1)));
	ASSERT_EQ("", produce(b.bootstrap(), idempotent("orders", 0, 80, 2)));

	auto source_id = [](const Daemon &d) {
		ChildResult r;
		std::string id;
		if (ctl(d, { "status", "--json" }, &r) == "") {
			json_t *root = json_loads(r.out.c_str(), 0, nullptr);
			const char *s = json_string_value(
				json_object_get(root, "source_cluster_id"));
			id = s ? s : "";
			json_decref(root);
		}
		return id;
	};
	Daemon d1(dir.path(), { "source.bootstrap.servers=" + a.bootstrap(),
				"topics=orders" });
	ASSERT_EQ("", d1.start());
	ASSERT_EQ("", d1.wait_status(
			      [](const StatusMap &st) {
				      return st.count("orders:0") &&
					     st.at("orders:0").state == "MIRRORING" &&
					     st.at("orders:0").hw == 50;
			      },
			      kWaitMs));
	const std::string id_a = source_id(d1);
	ASSERT_NE("", id_a);
	ChildResult res;
	ASSERT_EQ("", d1.stop(30000, &res));

	Daemon d2(dir.path(), { "source.bootstrap.servers=" + b.bootstrap(),
				"topics=orders" });
	ASSERT_EQ("", d2.start());
	ASSERT_EQ("", d2.wait_status(
			      [](const StatusMap &st) {
				      return st.count("orders:0") &&
					     st.at("orders:0").state == "FAILED";
			      },
			      kWaitMs));
	const std::string id_b = source_id(d2);
	ASSERT_NE("", id_b);
	ASSERT_NE(id_a, id_b) << "two mock clusters, two cluster ids";
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d2.status(&st));
	expect_both(st["orders:0"], "source cluster id changed", id_a, id_b,
		    b.bootstrap());
	EXPECT_EQ(50, st["orders:0"].leo);
	ASSERT_EQ("", d2.stop(30000, &res));
	EXPECT_EQ(0, res.exit_code) << res.describe();
}

} // namespace
