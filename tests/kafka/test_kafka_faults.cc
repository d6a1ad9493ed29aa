/* kmirrord mirroring a real Apache Kafka 4.x broker that misbehaves (issue
 * 14 section 2, "Faults"; suite kafka-faults): the broker restarts (SIGTERM,
 * then kill -9 and its own recovery) under a running producer, a topic is
 * deleted and made again under the same name (a new topic id), partitions
 * are added, and the source's log start moves past a mirror that is
 * behind. Nothing may be lost, doubled or spliced from another topic.
 * Topic discovery (issue 19 item 1) is here too, as topics and partitions
 * made and deleted at the source while kmirrord runs.
 *
 * Method: one KRaft broker (kafka_broker.h) for the suite, restarted only
 * by the restart case. Each case fills its own topics with librdkafka
 * producers (idempotent where the broker restarts: retries must not
 * double), runs kmirrord (a child process, tests/e2e/daemon.h) until its
 * log end is the broker's, and then compares every record with the
 * broker's own (offset, key, value, headers, timestamp) and the segments
 * byte for byte (kafka_files.h: only the mapped producerId and the CRC
 * may differ). Expected values come from the broker: its watermarks, its
 * files (partition.metadata's topic id, leader-epoch-checkpoint, which
 * segments it still holds), and its consumers' output. Faults are made
 * with Kafka's own tools: TopicCommand --delete / --alter, and
 * DeleteRecordsCommand to move the log start.
 */
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <regex>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_files.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

/* The topic id a partition directory's partition.metadata names, or "". */
std::string topic_id_in(const std::string &dir)
{
	std::smatch m;
	std::string s = read_file(dir + "/partition.metadata");
	std::regex re("topic_id: ([A-Za-z0-9_-]+)");
	return std::regex_search(s, m, re) ? m[1].str() : "";
}

/* The value of one partition's Prometheus metric, or -1. */
int64_t metric_of(const Daemon &d, const std::string &name,
		  const std::string &topic, int p)
{
	ChildResult r;
	if (!ctl(d, { "metrics" }, &r).empty())
		return -1;
	std::smatch m;
	std::regex re(name + "\\{topic=\"" + topic + "\",partition=\"" +
		      std::to_string(p) + "\"\\} (-?[0-9]+)");
	return std::regex_search(r.out, m, re) ? std::stoll(m[1].str()) : -1;
}

/* Until kmirrord's stderr holds text (a short read drains its pipe). */
bool logged(Daemon &d, const std::string &text)
{
	return poll_until([&] {
		std::string line;
		(void)d.child().read_line(5, &line);
		return d.child().stderr_so_far().find(text) != std::string::npos;
	}, 10000);
}

/* The leader epochs in a leader-epoch-checkpoint (its second line). */
int epoch_entries(const std::string &dir)
{
	std::string s = read_file(dir + "/leader-epoch-checkpoint");
	size_t nl = s.find('\n');
	return nl == std::string::npos ? -1 : atoi(s.c_str() + nl + 1);
}

/* Idempotent librdkafka producers, one after the other, 200 records each,
 * until told to stop: a producer is running across whatever the test
 * does to the broker. Record seq of the run is payload (seed, 0, seq). */
class Producing {
public:
	Producing(std::string bootstrap, std::string topic, uint64_t seed)
		: bootstrap_(std::move(bootstrap)), topic_(std::move(topic)),
		  seed_(seed)
	{
		t_ = std::thread([this] { run(); });
	}
	~Producing() { finish(); }

	int64_t sent() const { return sent_; }
	/* Stop after the current producer; "" or its error. */
	std::string finish()
	{
		stop_ = true;
		if (t_.joinable())
			t_.join();
		return err_;
	}

private:
	void run()
	{
		while (!stop_) {
			ProduceSpec s;
			s.topic = topic_;
			s.count = 200;
			s.mode = ProducerMode::kIdempotent;
			s.seed = seed_;
			s.first_seq = sent_;
			s.value_size = 200;
			s.flush_every = 50;
			s.timeout_ms = 180000; /* outlives a broker restart */
			if (std::string e = produce(bootstrap_, s); !e.empty()) {
				err_ = "records from " + std::to_string(sent_) + ": " + e;
				return;
			}
			sent_ += s.count;
		}
	}

	std::string bootstrap_, topic_, err_;
	uint64_t seed_;
	std::atomic<bool> stop_{ false };
	std::atomic<int64_t> sent_{ 0 };
	std::thread t_;
};

class KafkaFaults : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		/* The broker deletes the segments below a moved log start at
		 * once, so its files say which ones a mirror must drop. */
		broker_ = new KafkaBroker({ "log.retention.check.interval.ms=1000",
					    "log.initial.task.delay.ms=0" });
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
	}

	void SetUp() override
	{
		if (!broker_->running()) {
			ASSERT_EQ("", broker_->start());
			fprintf(stderr, "kafka broker up in %lld ms\n",
				(long long)broker_->start_ms());
		}
	}

	Daemon daemon_for(const std::string &dir, const std::vector<std::string> &topics,
			  std::vector<std::string> sets = {})
	{
		std::string list;
		for (auto &t : topics)
			list += (list.empty() ? "" : ",") + t;
		sets.push_back("source.bootstrap.servers=" + broker_->bootstrap());
		sets.push_back("topics=" + list);
		return Daemon(dir, sets);
	}

	/* Until kmirrord's high watermark of each topic-p is the broker's. */
	std::string caught_up(Daemon &d, const std::vector<std::string> &parts)
	{
		std::map<std::string, int64_t> ends;
		for (auto &k : parts) {
			size_t c = k.rfind(':');
			int64_t lo = -1, hi = -1;
			std::string e = watermarks(broker_->bootstrap(), k.substr(0, c),
						   atoi(k.c_str() + c + 1), &lo, &hi, 30000);
			if (!e.empty())
				return k + ": " + e;
			ends[k] = hi;
		}
		return d.wait_status(
			[&](const std::map<std::string, PartStatus> &st) {
				for (auto &[k, end] : ends)
					if (!st.count(k) || st.at(k).hw != end)
						return false;
				return true;
			},
			120000);
	}

	std::string topics_tool(const std::vector<std::string> &args)
	{
		std::vector<std::string> a = { "--bootstrap-server", broker_->bootstrap() };
		a.insert(a.end(), args.begin(), args.end());
		ChildResult r = kafka_tool("org.apache.kafka.tools.TopicCommand", a, 120000);
		return r.exit_code == 0 ? "" : "kafka-topics: " + r.describe() + "\n" + r.out;
	}

	/* Delete topic t and make it again (1 partition): returns once the
	 * broker holds the new topic's partition under a new id. */
	void make_again(const std::string &t, const std::string &old_id)
	{
		ASSERT_EQ("", topics_tool({ "--delete", "--topic", t }));
		/* The deletion is asynchronous: creating may first find the
		 * topic still there. */
		ASSERT_TRUE(poll_until([&] { return broker_->create_topic(t, 1).empty(); },
				       60000)) << "cannot make " << t << " again";
		std::string dir = broker_->partition_dir(t, 0);
		ASSERT_TRUE(poll_until([&] {
			std::string id = topic_id_in(dir);
			return !id.empty() && id != old_id;
		}, 30000)) << dir << " names no new topic id";
	}

	std::string produce_n(const std::string &t, int p, int64_t n, uint64_t seed,
			      size_t value_size = 100)
	{
		ProduceSpec s;
		s.value_size = value_size;
		s.topic = t;
		s.partition = p;
		s.count = n;
		s.mode = ProducerMode::kIdempotent;
		s.seed = seed;
		s.flush_every = 100;
		return produce(broker_->bootstrap(), s);
	}

	std::string dir_of(const std::string &t, int p) const
	{
		return dir_.path() + "/" + t + "-" + std::to_string(p);
	}

	static KafkaBroker *broker_;
	TempDir dir_{ "km-kafka-faults" };
};

KafkaBroker *KafkaFaults::broker_ = nullptr;

/* Every record kmirrord serves of t-p, as (offset, value). */
std::vector<std::pair<int64_t, std::string>> records_of(const std::string &bootstrap,
							const std::string &t, int p,
							int64_t from = 0)
{
	std::vector<Message> m;
	ConsumeSpec cs;
	cs.topic = t;
	cs.partition = p;
	cs.from = from;
	EXPECT_EQ("", consume(bootstrap, cs, &m)) << t << "-" << p << " at " << bootstrap;
	std::vector<std::pair<int64_t, std::string>> v;
	for (auto &x : m)
		v.emplace_back(x.offset, x.value.value_or("<null>"));
	return v;
}

/* A topic deleted and made again at the source (a new topic id, KIP-516):
 * its offsets start over, so nothing of it may be appended onto the log
 * of the old one, which stays servable. Shown twice: made again while
 * kmirrord is down (the id partition.metadata names vs the source's at
 * the restart), and while it mirrors. Each new topic gets more records
 * than the old had, so a fetch by name at our log end would find data. */
TEST_F(KafkaFaults, TopicMadeAgainFailsNamingBothIdsAndKeepsTheOldLog)
{
	const std::vector<std::string> topics = { "again", "again2" };
	for (auto &t : topics) {
		ASSERT_EQ("", broker_->create_topic(t, 1));
		ASSERT_EQ("", produce_n(t, 0, 300, 1));
	}
	Daemon d = daemon_for(dir_.path(), topics);
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", caught_up(d, { "again:0", "again2:0" }));
	std::map<std::string, std::string> old_id;
	std::map<std::string, std::vector<std::pair<int64_t, std::string>>> old;
	for (auto &t : topics) {
		old_id[t] = topic_id_in(broker_->partition_dir(t, 0));
		ASSERT_FALSE(old_id[t].empty());
		ASSERT_EQ(old_id[t], topic_id_in(dir_of(t, 0)));
		old[t] = records_of(broker_->bootstrap(), t, 0);
		ASSERT_EQ(300u, old[t].size());
	}
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));

	/* Made again while kmirrord is down. */
	ASSERT_NO_FATAL_FAILURE(make_again("again2", old_id["again2"]));
	ASSERT_EQ("", produce_n("again2", 0, 600, 2));
	std::map<std::string, std::string> new_id;
	new_id["again2"] = topic_id_in(broker_->partition_dir("again2", 0));
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status([](const std::map<std::string, PartStatus> &st) {
		return st.count("again2:0") && st.at("again2:0").state == "FAILED";
	}, 60000));

	/* Made again while kmirrord mirrors. */
	ASSERT_NO_FATAL_FAILURE(make_again("again", old_id["again"]));
	ASSERT_EQ("", produce_n("again", 0, 600, 3));
	new_id["again"] = topic_id_in(broker_->partition_dir("again", 0));
	ASSERT_EQ("", d.wait_status([](const std::map<std::string, PartStatus> &st) {
		return st.count("again:0") && st.at("again:0").state == "FAILED";
	}, 60000));

	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	for (auto &t : topics) {
		const PartStatus &s = st[t + ":0"];
		SCOPED_TRACE(t);
		EXPECT_NE(std::string::npos, s.reason.find(old_id[t])) << s.reason;
		EXPECT_NE(std::string::npos, s.reason.find(new_id[t])) << s.reason;
		EXPECT_TRUE(logged(d, s.reason)) << "the log must say it";
		EXPECT_EQ(1, metric_of(d, "kmirror_partition_failed", t, 0));
		EXPECT_EQ(300, s.leo) << "nothing of the new topic appended";
		EXPECT_EQ(old[t], records_of(d.bootstrap(), t, 0)) << "the old log is served";
		EXPECT_EQ(old_id[t], topic_id_in(dir_of(t, 0)));
	}
	ASSERT_EQ("", d.stop(30000, &res));
}

/* The hazard of fetching by topic name (Fetch v4-12): kmirrord frozen
 * (SIGSTOP) with its connection open while the topic is deleted, made
 * again and filled past our log end; thawed, its next Fetch names the
 * topic, not the old topic's id. It must still fail the partition rather
 * than append the new topic's offsets 300.. onto the old log. */
TEST_F(KafkaFaults, TopicMadeAgainUnderAFrozenMirrorIsNeverSpliced)
{
	ASSERT_EQ("", broker_->create_topic("frz", 1));
	ASSERT_EQ("", produce_n("frz", 0, 300, 1));
	Daemon d = daemon_for(dir_.path(), { "frz" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", caught_up(d, { "frz:0" }));
	std::string was = topic_id_in(broker_->partition_dir("frz", 0));
	auto old = records_of(broker_->bootstrap(), "frz", 0);
	ASSERT_EQ("", d.child().kill(SIGSTOP));
	ASSERT_NO_FATAL_FAILURE(make_again("frz", was));
	ASSERT_EQ("", produce_n("frz", 0, 600, 4));
	ASSERT_EQ("", d.child().kill(SIGCONT));
	ASSERT_EQ("", d.wait_status([](const std::map<std::string, PartStatus> &st) {
		return st.count("frz:0") && st.at("frz:0").state == "FAILED";
	}, 60000));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ(300, st["frz:0"].leo) << st["frz:0"].reason;
	EXPECT_EQ(old, records_of(d.bootstrap(), "frz", 0));
}

/* Partitions added at the source to a topic named in topics=: mirrored
 * from offset 0 while kmirrord runs (topic discovery's refresh, every
 * metadata.refresh.interval.ms), content equal; the partition that was
 * there mirrors on undisturbed. */
TEST_F(KafkaFaults, PartitionsAddedAreMirroredFromZero)
{
	ASSERT_EQ("", broker_->create_topic("grow", 1));
	ASSERT_EQ("", produce_n("grow", 0, 300, 1));
	Daemon d = daemon_for(dir_.path(), { "grow" }, { "metadata.refresh.interval.ms=300" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", caught_up(d, { "grow:0" }));
	ASSERT_EQ("", topics_tool({ "--alter", "--topic", "grow", "--partitions", "3" }));
	for (int p = 1; p < 3; p++)
		ASSERT_TRUE(poll_until([&] { return produce_n("grow", p, 200, 5).empty(); },
				       60000)) << "partition " << p;
	ASSERT_EQ("", produce_n("grow", 0, 100, 6));
	ASSERT_EQ("", caught_up(d, { "grow:0", "grow:1", "grow:2" }));
	EXPECT_TRUE(logged(d, "partition grow-2: discovered at the source"));
	int mapped = 0;
	for (int p = 0; p < 3; p++) {
		ASSERT_NO_FATAL_FAILURE(expect_same_content(broker_->bootstrap(), d.bootstrap(),
							    "grow", p, false));
		ASSERT_NO_FATAL_FAILURE(expect_identical(dir_of("grow", p),
							 broker_->partition_dir("grow", p), &mapped));
	}
	EXPECT_GE(mapped, 3);
	/* Kafka's own client finds the new partitions on kmirrord. */
	ChildResult r = kafka_tool("org.apache.kafka.tools.TopicCommand",
				   { "--bootstrap-server", d.bootstrap(), "--describe",
				     "--topic", "grow" }, 60000);
	EXPECT_NE(std::string::npos, r.out.find("PartitionCount: 3")) << r.out;
}

/* topics.include / topics.exclude (issue 19 item 1): anchored expressions,
 * exclude wins, the source's internal topics stay out; a topic made at the
 * source after the start is mirrored from offset 0 without a restart, and
 * one deleted there stops being fetched: FAILED with its reason, its log
 * kept and served. */
TEST_F(KafkaFaults, TopicsIncludeFollowsTheSourceLive)
{
	ASSERT_EQ("", broker_->create_topic("disc.a", 1));
	ASSERT_EQ("", broker_->create_topic("disc.skip.x", 1));
	ASSERT_EQ("", broker_->create_topic("xdisc.a", 1));
	ASSERT_EQ("", produce_n("disc.a", 0, 150, 21));
	ASSERT_EQ("", produce_n("disc.skip.x", 0, 10, 22));
	ASSERT_EQ("", produce_n("xdisc.a", 0, 10, 23));
	Daemon d(dir_.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
				"topics.include=disc\\..*, other", "topics.exclude=disc\\.skip\\..*,__.*",
				"metadata.refresh.interval.ms=300" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", caught_up(d, { "disc.a:0" }));
	ASSERT_EQ("", broker_->create_topic("disc.b", 2));
	for (int p = 0; p < 2; p++)
		ASSERT_TRUE(poll_until([&] { return produce_n("disc.b", p, 120, 24 + p).empty(); },
				       60000)) << "partition " << p;
	ASSERT_EQ("", caught_up(d, { "disc.a:0", "disc.b:0", "disc.b:1" }));
	for (int p = 0; p < 2; p++)
		ASSERT_NO_FATAL_FAILURE(expect_same_content(broker_->bootstrap(), d.bootstrap(),
							    "disc.b", p, false));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ(0u, st.count("disc.skip.x:0")) << "exclude wins";
	EXPECT_EQ(0u, st.count("xdisc.a:0")) << "expressions are anchored";
	for (auto &[k, v] : st)
		EXPECT_TRUE(k.rfind("__consumer_offsets:", 0) != 0 || v.state != "MIRRORING")
			<< k << " mirrored from the source";
	auto kept = records_of(d.bootstrap(), "disc.b", 0);
	ASSERT_EQ(120u, kept.size());
	ASSERT_EQ("", topics_tool({ "--delete", "--topic", "disc.b" }));
	ASSERT_EQ("", d.wait_status(
		[&](const std::map<std::string, PartStatus> &s) {
			for (const char *k : { "disc.b:0", "disc.b:1" })
				if (!s.count(k) || s.at(k).state != "FAILED" ||
				    s.at(k).reason.find("deleted at the source") == std::string::npos)
					return false;
			return true;
		}, 60000));
	EXPECT_EQ(kept, records_of(d.bootstrap(), "disc.b", 0)) << "the log is kept and served";
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("MIRRORING", st["disc.a:0"].state);
	ASSERT_EQ("", produce_n("disc.a", 0, 30, 26));
	ASSERT_EQ("", caught_up(d, { "disc.a:0" }));
}

/* The broker's partition directory's .log base offsets. */
std::vector<int64_t> segment_bases(const std::string &dir)
{
	std::vector<int64_t> v;
	for (auto &f : files_of(dir, "log"))
		v.push_back(atoll(f.c_str()));
	return v;
}

/* The source's log start moves (DeleteRecords, as retention or an admin
 * would) past the end of two mirrors that were down: with
 * mirror.offset.reset=none one FAILS naming both offsets and keeps its
 * data; with earliest the other restarts at the source's log start and
 * the gap shows (WARN line, kmirror_partition_offset_resets_total and
 * _offsets_skipped_total). A third mirror, caught up all along, drops
 * exactly the whole segments the source dropped (docs/design.md: the
 * source's log start drives retention), not one record more. A fourth,
 * started afterwards with an empty log, begins inside the source's first
 * batch and restarts at its base as the second one does. */
TEST_F(KafkaFaults, SourceLogStartMovesPastMirrorsBehind)
{
	const std::string seg = "segment.bytes=1048576";
	ASSERT_EQ("", broker_->create_topic("ret", 1, { seg }));
	ASSERT_EQ("", produce_n("ret", 0, 4000, 1, 400));
	TempDir da("km-kf-a"), db("km-kf-b"), dc("km-kf-c");
	Daemon a = daemon_for(da.path(), { "ret" }, { seg });
	Daemon b = daemon_for(db.path(), { "ret" }, { seg, "mirror.offset.reset=none" });
	Daemon c = daemon_for(dc.path(), { "ret" }, { seg, "mirror.offset.reset=earliest" });
	for (Daemon *d : { &a, &b, &c }) {
		ASSERT_EQ("", d->start());
		ASSERT_EQ("", caught_up(*d, { "ret:0" }));
	}
	int64_t lo = -1, behind = -1;
	ASSERT_EQ("", watermarks(broker_->bootstrap(), "ret", 0, &lo, &behind));
	ChildResult res;
	ASSERT_EQ("", b.stop(30000, &res));
	ASSERT_EQ("", c.stop(30000, &res));
	ASSERT_EQ("", produce_n("ret", 0, 12000, 2, 400));
	ASSERT_EQ("", caught_up(a, { "ret:0" }));

	/* The new log start: inside a batch of the next-to-last segment. */
	std::string theirs = broker_->partition_dir("ret", 0);
	std::vector<int64_t> bases = segment_bases(theirs);
	ASSERT_GE(bases.size(), 4u);
	int64_t keep_from = bases[bases.size() - 2];
	int64_t start = keep_from + 1;
	ASSERT_GT(start, behind);
	std::string json = dir_.file("delete.json");
	std::ofstream(json) << "{\"version\":1,\"partitions\":[{\"topic\":\"ret\","
			       "\"partition\":0,\"offset\":" << start << "}]}";
	ChildResult r = kafka_tool("org.apache.kafka.tools.DeleteRecordsCommand",
				   { "--bootstrap-server", broker_->bootstrap(),
				     "--offset-json-file", json }, 120000);
	ASSERT_EQ(0, r.exit_code) << r.describe() << r.out;
	int64_t hi = -1;
	ASSERT_EQ("", watermarks(broker_->bootstrap(), "ret", 0, &lo, &hi));
	ASSERT_EQ(start, lo);
	ASSERT_TRUE(poll_until([&] { return segment_bases(theirs).front() == keep_from; },
			       60000)) << "the broker keeps its segments below " << start;

	/* Caught up: our segments are the broker's. */
	ASSERT_EQ("", a.wait_status([&](const std::map<std::string, PartStatus> &st) {
		return st.count("ret:0") && st.at("ret:0").log_start == keep_from;
	}, 60000));
	EXPECT_EQ(segment_bases(theirs), segment_bases(da.path() + "/ret-0"));
	int mapped = 0;
	ASSERT_NO_FATAL_FAILURE(expect_identical(da.path() + "/ret-0", theirs, &mapped));
	EXPECT_EQ(records_of(broker_->bootstrap(), "ret", 0, start),
		  records_of(a.bootstrap(), "ret", 0, start));

	/* Behind, none: FAILED naming both offsets; what it had stays. */
	ASSERT_EQ("", b.start());
	ASSERT_EQ("", b.wait_status([](const std::map<std::string, PartStatus> &st) {
		return st.count("ret:0") && st.at("ret:0").state == "FAILED";
	}, 60000));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", b.status(&st));
	EXPECT_NE(std::string::npos, st["ret:0"].reason.find("OFFSET_OUT_OF_RANGE"));
	EXPECT_NE(std::string::npos, st["ret:0"].reason.find(std::to_string(start)));
	EXPECT_NE(std::string::npos, st["ret:0"].reason.find(std::to_string(behind)));
	EXPECT_EQ(behind, st["ret:0"].leo);
	EXPECT_EQ((size_t)behind, records_of(b.bootstrap(), "ret", 0).size());

	/* Behind, earliest: continues at the source's start, gap shown. The
	 * start is inside a batch: the log restarts at that batch's base, as
	 * a Kafka follower's does, and takes it whole. */
	Side src_side;
	ASSERT_EQ("", read_side(theirs, &src_side));
	int64_t inside = -1;
	for (auto &bt : src_side.batches)
		if (bt.base <= start && start <= bt.last)
			inside = bt.base;
	ASSERT_EQ(keep_from, inside) << "the start must be inside the first batch";
	ASSERT_EQ("", c.start());
	ASSERT_EQ("", caught_up(c, { "ret:0" }));
	ASSERT_EQ("", c.status(&st));
	EXPECT_EQ("MIRRORING", st["ret:0"].state) << st["ret:0"].reason;
	EXPECT_EQ(inside, st["ret:0"].log_start);
	EXPECT_EQ(1, metric_of(c, "kmirror_partition_offset_resets_total", "ret", 0));
	EXPECT_EQ(inside - behind,
		  metric_of(c, "kmirror_partition_offsets_skipped_total", "ret", 0));
	EXPECT_TRUE(logged(c, "offsets " + std::to_string(behind) + " to " +
				 std::to_string(start - 1)))
		<< c.child().stderr_so_far();
	EXPECT_EQ(records_of(broker_->bootstrap(), "ret", 0, start),
		  records_of(c.bootstrap(), "ret", 0, start));
	mapped = 0;
	ASSERT_NO_FATAL_FAILURE(expect_identical(dc.path() + "/ret-0", theirs, &mapped));

	/* A mirror that never had the partition starts where the source's
	 * log does, inside that batch: the same restart at its base, not a
	 * misplaced batch refetched until FAILED (how Kafka Streams' purged
	 * repartition topics look to a new mirror). */
	TempDir de("km-kf-e");
	Daemon e = daemon_for(de.path(), { "ret" }, { seg });
	ASSERT_EQ("", e.start());
	ASSERT_EQ("", caught_up(e, { "ret:0" }));
	ASSERT_EQ("", e.status(&st));
	EXPECT_EQ("MIRRORING", st["ret:0"].state) << st["ret:0"].reason;
	EXPECT_EQ(inside, st["ret:0"].log_start);
	EXPECT_EQ(records_of(broker_->bootstrap(), "ret", 0, start),
		  records_of(e.bootstrap(), "ret", 0, start));
	mapped = 0;
	ASSERT_NO_FATAL_FAILURE(expect_identical(de.path() + "/ret-0", theirs, &mapped));
}

/* The broker restarts under a running idempotent producer: first a
 * controlled shutdown (SIGTERM), then kill -9 (its own log recovery on the
 * next start). kmirrord reconnects each time and resumes at its log end:
 * every record once, the segments byte-identical, the same leader epochs
 * as the broker's (a lone KRaft node may or may not start a new epoch;
 * kafka-source's 3-node case moves leaders for sure). */
TEST_F(KafkaFaults, BrokerRestartAndKill9UnderAProducer)
{
	const std::string seg = "segment.bytes=1048576";
	ASSERT_EQ("", broker_->create_topic("rst", 1, { seg }));
	std::string theirs = broker_->partition_dir("rst", 0);
	Daemon d = daemon_for(dir_.path(), { "rst" }, { seg });
	ASSERT_EQ("", d.start());
	Producing prod(broker_->bootstrap(), "rst", 9);
	int epochs = -1;
	/* Mirrored some of what the producer sent, after each start. */
	auto progress = [&](int64_t above) {
		return d.wait_status([&](const std::map<std::string, PartStatus> &st) {
			return st.count("rst:0") && st.at("rst:0").hw > above + 400;
		}, 120000);
	};
	ASSERT_EQ("", progress(0));
	for (bool unclean : { false, true }) {
		SCOPED_TRACE(unclean ? "kill -9" : "SIGTERM");
		std::map<std::string, PartStatus> st;
		epochs = epoch_entries(theirs);
		ASSERT_EQ("", d.status(&st));
		ASSERT_EQ("", unclean ? broker_->kill9() : broker_->stop());
		ASSERT_EQ("", broker_->start());
		ASSERT_EQ("", progress(st["rst:0"].hw)) << broker_->log_tail();
		/* A single node may lead on in its epoch after a restart
		 * (the 3-node case of kafka-source asserts new epochs);
		 * whichever it did, ours must be the broker's. */
		EXPECT_GE(epoch_entries(theirs), epochs);
		fprintf(stderr, "%s: leader epochs %d -> %d\n",
			unclean ? "kill -9" : "SIGTERM", epochs, epoch_entries(theirs));
	}
	ASSERT_EQ("", prod.finish());
	ASSERT_EQ("", caught_up(d, { "rst:0" }));

	/* The source holds every record once, in order; so do we. */
	auto src = records_of(broker_->bootstrap(), "rst", 0);
	ASSERT_EQ((size_t)prod.sent(), src.size());
	for (size_t i = 0; i < src.size(); i++)
		ASSERT_EQ(payload_value(9, 0, (int64_t)i, 200), src[i].second) << "offset " << i;
	ASSERT_NO_FATAL_FAILURE(expect_same_content(broker_->bootstrap(), d.bootstrap(),
						    "rst", 0, false));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("MIRRORING", st["rst:0"].state);
	EXPECT_GE(st["rst:0"].reconnects, 2);
	int mapped = 0;
	ASSERT_NO_FATAL_FAILURE(expect_identical(dir_of("rst", 0), theirs, &mapped));
	EXPECT_GE(mapped, 3) << "one producer id per round at least";
	EXPECT_EQ(read_file(theirs + "/leader-epoch-checkpoint"),
		  read_file(dir_of("rst", 0) + "/leader-epoch-checkpoint"));
}

} // namespace
