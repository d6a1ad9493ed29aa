/* kmirrord mirroring a real Apache Kafka 4.x broker (issue 14, suite
 * kafka-source): does what kmirror writes equal what Kafka itself wrote,
 * and does Kafka accept our files as its own?
 *
 * Method: one KRaft broker (kafka_broker.h) for the suite. Each test fills
 * topics with Kafka's own producer (kafka-producer-perf-test: plain,
 * idempotent, compressed) or librdkafka (plain, idempotent, transactional
 * with real COMMIT/ABORT markers), has kmirrord (a child process) mirror
 * them until its log end is the broker's, and then
 * - reads both sides with librdkafka consumers (check.crcs=true) and
 *   compares every record;
 * - compares kmirror's segment files byte for byte with the broker's own
 *   files for the same offsets: a batch whose source producerId p >= 0
 *   must carry -(p+2) (R1) and may differ only in those 8 bytes and its 4
 *   CRC bytes; every other byte, and every other batch, is identical;
 * - compares leader-epoch-checkpoint and partition.metadata (the source
 *   topic's id) byte for byte, and which files exist (a .txnindex only
 *   for a segment holding an aborted transaction, as Kafka);
 * - stops both (clean shutdowns) and runs Kafka's DumpLogSegments on both
 *   sides' .log (--deep-iteration), .index and .timeindex (plain,
 *   --index-sanity-check, --verify-index-only): no errors on ours, and
 *   the output equals the broker's once producerId and crc are masked.
 */
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_files.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

/* Bytes of disk a file occupies (its allocated blocks). */
int64_t allocated_bytes(const std::string &path)
{
	struct stat st;
	return stat(path.c_str(), &st) == 0 ? (int64_t)st.st_blocks * 512 : -1;
}

/* Once closed, our segments occupy the disk Kafka's occupy: the blocks
 * reserved ahead of the appends (64 MiB steps) are given back. */
void expect_same_footprint(const std::string &ours, const std::string &theirs)
{
	for (auto &n : files_of(ours, "log")) {
		int64_t a = allocated_bytes(ours + "/" + n);
		int64_t b = allocated_bytes(theirs + "/" + n);
		ASSERT_GE(b, 0) << theirs << "/" << n;
		EXPECT_LE(a, b + 4096) << ours << "/" << n << " holds " << a
				       << " bytes of disk, Kafka's copy " << b;
	}
}

/* How many control batches (transaction markers) a partition holds. */
int control_batches(const std::string &dir)
{
	Side s;
	EXPECT_EQ("", read_side(dir, &s));
	return (int)std::count_if(s.batches.begin(), s.batches.end(),
				  [](const Batch &b) { return b.control; });
}

class KafkaSource : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		broker_ = new KafkaBroker({ "log.flush.interval.messages=1000000" });
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
	}

	void SetUp() override
	{
		ASSERT_EQ("", dir_.error());
		if (!broker_->running()) {
			ASSERT_EQ("", broker_->start());
			fprintf(stderr, "kafka broker up in %lld ms\n",
				(long long)broker_->start_ms());
		}
	}

	/* kmirrord for the topics, started and caught up with the broker. */
	void mirror(Daemon &d, const std::vector<std::string> &topics,
		    std::map<std::string, int64_t> *ends)
	{
		ASSERT_EQ("", d.start());
		for (auto &t : topics)
			for (int p = 0; p < parts_.at(t); p++) {
				int64_t lo = -1, hi = -1;
				ASSERT_EQ("", watermarks(broker_->bootstrap(), t, p, &lo, &hi));
				(*ends)[t + ":" + std::to_string(p)] = hi;
			}
		ASSERT_EQ("", d.wait_status(
				      [&](const std::map<std::string, PartStatus> &st) {
					      for (auto &[k, end] : *ends) {
						      auto it = st.find(k);
						      if (it == st.end() || it->second.hw != end)
							      return false;
					      }
					      return true;
				      },
				      120000));
	}

	Daemon daemon_for(const std::vector<std::string> &topics,
			  std::vector<std::string> sets = {})
	{
		std::string list;
		for (auto &t : topics)
			list += (list.empty() ? "" : ",") + t;
		sets.push_back("source.bootstrap.servers=" + broker_->bootstrap());
		sets.push_back("topics=" + list);
		return Daemon(dir_.path(), sets);
	}

	void expect_same_records(const Daemon &d, const std::string &topic,
				 int p, bool read_committed = false)
	{
		expect_same_content(broker_->bootstrap(), d.bootstrap(), topic, p,
				    read_committed);
	}

	/* kafka-console-consumer with `isolation` reads the same lines on
	 * kmirrord as on the broker (as many records as librdkafka finds on
	 * the broker with that isolation). */
	void expect_java_consumer_alike(const Daemon &d, const std::string &topic,
					int p, const std::string &isolation)
	{
		std::vector<Message> want;
		ConsumeSpec cs;
		cs.topic = topic;
		cs.partition = p;
		cs.read_committed = isolation == "read_committed";
		ASSERT_EQ("", consume(broker_->bootstrap(), cs, &want));
		ASSERT_FALSE(want.empty());
		std::string on_kafka, on_ours;
		ASSERT_EQ("", console_consume(broker_->bootstrap(), topic, p,
					      (int64_t)want.size(), isolation, &on_kafka));
		ASSERT_EQ("", console_consume(d.bootstrap(), topic, p,
					      (int64_t)want.size(), isolation, &on_ours));
		EXPECT_TRUE(on_kafka == on_ours)
			<< isolation << ": " << first_difference(on_ours, on_kafka);
	}

	/* Content, then (both stopped) bytes and Kafka's own reading. */
	void judge(Daemon &d, const std::vector<std::string> &topics,
		   int expect_mapped_min)
	{
		for (auto &t : topics)
			for (int p = 0; p < parts_.at(t); p++)
				ASSERT_NO_FATAL_FAILURE(expect_same_records(d, t, p));
		ChildResult res;
		ASSERT_EQ("", d.stop(30000, &res));
		ASSERT_EQ(0, res.exit_code) << res.describe();
		ASSERT_EQ("", broker_->stop());
		int mapped = 0;
		std::vector<std::string> ours, theirs;
		for (auto &t : topics)
			for (int p = 0; p < parts_.at(t); p++) {
				ours.push_back(dir_.path() + "/" + t + "-" + std::to_string(p));
				theirs.push_back(broker_->partition_dir(t, p));
				ASSERT_NO_FATAL_FAILURE(
					expect_identical(ours.back(), theirs.back(), &mapped));
				expect_same_footprint(ours.back(), theirs.back());
				/* Kafka's text: the source's epochs, as it wrote them */
				EXPECT_EQ(read_file(theirs.back() + "/leader-epoch-checkpoint"),
					  read_file(ours.back() + "/leader-epoch-checkpoint"))
					<< ours.back();
				/* the source topic's id, in Kafka's bytes */
				EXPECT_EQ(read_file(theirs.back() + "/partition.metadata"),
					  read_file(ours.back() + "/partition.metadata"))
					<< ours.back();
			}
		EXPECT_GE(mapped, expect_mapped_min);
		expect_kafka_reads_alike(ours, theirs);
	}

	void create(const std::string &t, int parts,
		    const std::vector<std::string> &configs = {})
	{
		ASSERT_EQ("", broker_->create_topic(t, parts, configs));
		parts_[t] = parts;
	}

	static KafkaBroker *broker_;
	TempDir dir_{ "km-kafka-src" };
	std::map<std::string, int> parts_;
};

KafkaBroker *KafkaSource::broker_ = nullptr;

/* Kafka's own producer: without idempotence (producerId -1, nothing to
 * map), idempotent (one producer id per run, mapped), idempotent with
 * zstd, transactional (kafka-producer-perf-test --transactional-id: real
 * COMMIT markers), and the VerifiableProducer (acks=all, idempotence).
 * Linger and batch size give each partition many batches; 1 MiB segments
 * on both sides give several segments, which must roll at the same
 * offsets as Kafka's. The transactional topic reads alike with Kafka's
 * read_committed console consumer, and its LSO is the source's once every
 * transaction has ended. */
TEST_F(KafkaSource, JavaProducerTopicsMirrorByteForByte)
{
	const std::string seg = "segment.bytes=1048576";
	create("jplain", 2, { seg });
	create("jidem", 2, { seg });
	create("jzstd", 1, { seg });
	create("jtxn", 1, { seg });
	create("jverif", 1, { seg });
	std::vector<std::string> common = { "linger.ms=5", "batch.size=16384" };
	auto with = [&](std::vector<std::string> v) {
		v.insert(v.end(), common.begin(), common.end());
		return v;
	};
	ASSERT_EQ("", broker_->producer_perf("jplain", 40000, 120,
					      with({ "acks=1", "enable.idempotence=false" })));
	ASSERT_EQ("", broker_->producer_perf("jidem", 20000, 120,
					      with({ "acks=all", "enable.idempotence=true" })));
	ASSERT_EQ("", broker_->producer_perf("jzstd", 20000, 120,
					      with({ "acks=all", "enable.idempotence=true",
						     "compression.type=zstd" })));
	/* Transactions of 100 ms, each committed: COMMIT markers from the
	 * Java producer's coordinator. */
	ASSERT_EQ("", broker_->producer_perf("jtxn", 10000, 120, with({ "acks=all" }),
					      { "--transactional-id", "km-perf-txn",
						"--transaction-duration-ms", "100" }));
	ASSERT_EQ("", verifiable_produce(broker_->bootstrap(), "jverif", 10000, 0, 1));
	std::vector<std::string> topics = { "jplain", "jidem", "jzstd", "jtxn", "jverif" };
	Daemon d = daemon_for(topics, { seg });
	std::map<std::string, int64_t> ends;
	ASSERT_NO_FATAL_FAILURE(mirror(d, topics, &ends));
	for (auto &[k, end] : ends)
		EXPECT_GT(end, 0) << k;
	ASSERT_NO_FATAL_FAILURE(expect_same_records(d, "jtxn", 0, true));
	ASSERT_NO_FATAL_FAILURE(expect_java_consumer_alike(d, "jtxn", 0, "read_committed"));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ(ends["jtxn:0"], st["jtxn:0"].lso) << "the perf test commits its last transaction";
	judge(d, topics, 5);
	EXPECT_GT(control_batches(dir_.path() + "/jtxn-0"), 0) << "COMMIT markers";
	/* The producer's sticky partitioner need not split 4.8 MB evenly (one
	 * partition got under 1 MiB on a loaded machine): each partition
	 * holds the segments Kafka's holds, and some partition rolled. */
	size_t segs = 0;
	for (int p = 0; p < 2; p++) {
		size_t ours = files_of(dir_.path() + "/jplain-" + std::to_string(p),
				       "log").size();
		EXPECT_EQ(files_of(broker_->partition_dir("jplain", p), "log").size(),
			  ours) << "jplain-" << p;
		segs += ours;
	}
	EXPECT_GE(segs, 3u) << "the roll must be exercised";
}

/* librdkafka's producers: plain gzip with keys and headers, idempotent
 * snappy, and transactional lz4 with every third transaction aborted, so
 * the broker writes real COMMIT and ABORT markers (control batches with
 * the producer's id, mapped like its data). */
TEST_F(KafkaSource, LibrdkafkaTopicMirrorsByteForByte)
{
	create("rdk", 3);
	ProduceSpec a;
	a.topic = "rdk";
	a.partition = 0;
	a.count = 3000;
	a.compression = "gzip";
	a.keys = Keys::kRandom;
	a.headers = 2;
	a.seed = 7;
	a.flush_every = 100;
	a.value_size_of = [](int64_t s) { return s % 97 == 0 ? 0 : (size_t)300; };
	ASSERT_EQ("", produce(broker_->bootstrap(), a));
	ProduceSpec b = a;
	b.partition = 1;
	b.mode = ProducerMode::kIdempotent;
	b.compression = "snappy";
	ASSERT_EQ("", produce(broker_->bootstrap(), b));
	ProduceSpec c = a;
	c.partition = 2;
	c.mode = ProducerMode::kTransactional;
	c.compression = "lz4";
	c.keys = Keys::kSeq;
	c.txn_size = 100;
	c.abort_every = 3;
	c.flush_every = 50;
	ProduceResult cr;
	ASSERT_EQ("", produce(broker_->bootstrap(), c, &cr));
	ASSERT_GT(cr.aborted, 0);
	ASSERT_GT(cr.committed, 0);

	std::vector<std::string> topics = { "rdk" };
	Daemon d = daemon_for(topics);
	std::map<std::string, int64_t> ends;
	ASSERT_NO_FATAL_FAILURE(mirror(d, topics, &ends));
	/* Every transaction ended (the last marker is the end of the log):
	 * the LSO is the source's high watermark. */
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ(ends["rdk:2"], st["rdk:2"].lso);
	ASSERT_NO_FATAL_FAILURE(expect_same_records(d, "rdk", 2, true));
	/* Kafka's own Java consumer (read_uncommitted: every data record,
	 * aborted ones included) sees on kmirrord what it sees on the broker. */
	ASSERT_NO_FATAL_FAILURE(expect_java_consumer_alike(d, "rdk", 2, "read_uncommitted"));
	/* Every record as the broker serves its own files (read_committed on
	 * the transactional partition), to compare once it serves ours. */
	std::vector<Message> before[3];
	for (int p = 0; p < 3; p++) {
		ConsumeSpec cs;
		cs.topic = "rdk";
		cs.partition = p;
		cs.read_committed = p == 2;
		ASSERT_EQ("", consume(broker_->bootstrap(), cs, &before[p]));
	}
	/* data and markers of partitions 1 and 2 */
	ASSERT_NO_FATAL_FAILURE(judge(d, topics, 2 * (int)(3000 / 100)));
	for (int p = 0; p < 3; p++)
		ASSERT_NO_FATAL_FAILURE(give_kafka_ours(dir_.path() + "/rdk-" + std::to_string(p),
							broker_->partition_dir("rdk", p)));
	ASSERT_EQ("", broker_->start());
	for (int p = 0; p < 3; p++) {
		std::vector<Message> after;
		ConsumeSpec cs;
		cs.topic = "rdk";
		cs.partition = p;
		cs.read_committed = p == 2;
		ASSERT_EQ("", consume(broker_->bootstrap(), cs, &after)) << "partition " << p;
		ASSERT_EQ(before[p].size(), after.size()) << "partition " << p;
		for (size_t i = 0; i < after.size(); i++) {
			ASSERT_EQ(before[p][i].offset, after[i].offset);
			ASSERT_EQ(before[p][i].value, after[i].value);
		}
	}
}

/* Kafka's Java consumer filters aborted transactions only for batches that
 * "have a producer id", producerId > -1 (CompletedFetch.nextFetchedRecord,
 * DefaultRecordBatch.hasProducerId), and R1 maps every source id p >= 0 to
 * -(p+2) < -1: kmirrord's read_committed Fetch leaves those batches out
 * (frontend_fetch.c, read_committed). Kafka's console consumer
 * (read_committed) prints on kmirrord exactly the offsets, keys and values
 * it prints on the source, and librdkafka read_committed reads the same
 * records on both. */
TEST_F(KafkaSource, JavaReadCommittedConsumerSkipsAbortedOnMirror)
{
	create("jrc", 1);
	ProduceSpec c;
	c.topic = "jrc";
	c.count = 1000;
	c.mode = ProducerMode::kTransactional;
	c.txn_size = 100;
	c.abort_every = 3;
	c.flush_every = 50;
	ProduceResult cr;
	ASSERT_EQ("", produce(broker_->bootstrap(), c, &cr));
	ASSERT_GT(cr.aborted, 0);
	Daemon d = daemon_for({ "jrc" });
	std::map<std::string, int64_t> ends;
	ASSERT_NO_FATAL_FAILURE(mirror(d, { "jrc" }, &ends));
	ASSERT_NO_FATAL_FAILURE(expect_same_records(d, "jrc", 0, true));
	ASSERT_NO_FATAL_FAILURE(expect_java_consumer_alike(d, "jrc", 0, "read_committed"));
}

/* A 3-node source: the leader of a partition stops (a controlled
 * shutdown moves the leadership: a new leader epoch), data arrives under
 * the new leader, the old one comes back and a preferred election gives
 * it the partition again (another epoch), more data. kmirrord follows
 * every move: nothing lost or doubled, every batch byte-identical to the
 * leader's log (partitionLeaderEpoch included), and the same
 * leader-epoch-checkpoint as the leader's. */
class KafkaSourceCluster : public ::testing::Test {
protected:
	/* 500 idempotent records into each partition. */
	std::string produce_round(uint64_t seed)
	{
		for (int p = 0; p < 2; p++) {
			ProduceSpec s;
			s.topic = "lm";
			s.partition = p;
			s.count = 500;
			s.mode = ProducerMode::kIdempotent;
			s.compression = "lz4";
			s.seed = seed;
			s.first_seq = (int64_t)seed * 500;
			s.flush_every = 50;
			s.timeout_ms = 60000;
			if (std::string e = produce(c_.bootstrap(), s); !e.empty())
				return "partition " + std::to_string(p) + ": " + e;
		}
		return "";
	}

	std::string caught_up(Daemon &d)
	{
		std::map<std::string, int64_t> ends;
		for (int p = 0; p < 2; p++) {
			int64_t lo = -1, hi = -1;
			std::string e = watermarks(c_.bootstrap(), "lm", p, &lo, &hi, 30000);
			if (!e.empty())
				return e;
			ends["lm:" + std::to_string(p)] = hi;
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

	std::string leader_of(int p, int32_t *id)
	{
		std::string host;
		uint16_t port = 0;
		return partition_leader(c_.bootstrap(), "lm", p, id, &host, &port, 30000);
	}

	/* Stop node `first`, wait for another leader of partition 0, produce;
	 * bring it back and elect it again (once in sync), produce. */
	void move_leader_and_back(Daemon &d, int32_t first)
	{
		int32_t now = -1;
		ASSERT_EQ("", c_.node(first).stop());
		ASSERT_TRUE(poll_until([&] { return leader_of(0, &now).empty() &&
						    now > 0 && now != first; },
				       60000)) << "no new leader after node " << first << " stopped";
		ASSERT_EQ("", produce_round(1));
		ASSERT_EQ("", caught_up(d));
		ASSERT_EQ("", c_.node(first).start());
		ASSERT_TRUE(poll_until(
			[&] {
				kafka_tool("org.apache.kafka.tools.LeaderElectionCommand",
					   { "--bootstrap-server", c_.bootstrap(),
					     "--election-type", "PREFERRED",
					     "--all-topic-partitions" },
					   60000);
				return leader_of(0, &now).empty() && now == first;
			},
			120000)) << "node " << first << " did not lead again";
		ASSERT_EQ("", produce_round(2));
		ASSERT_EQ("", caught_up(d));
	}

	KafkaCluster c_{ 3 };
	TempDir dir_{ "km-kafka-lm" };
};

TEST_F(KafkaSourceCluster, LeaderMovesLoseAndDoubleNothing)
{
	ASSERT_EQ("", c_.start());
	fprintf(stderr, "kafka 3-node cluster up in %lld ms\n", (long long)c_.start_ms());
	ASSERT_EQ("", c_.node(1).create_topic("lm", 2, {}, 3));
	ASSERT_EQ("", produce_round(0));
	Daemon d(dir_.path(), { "source.bootstrap.servers=" + c_.bootstrap(), "topics=lm" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", caught_up(d));
	int32_t first = -1;
	ASSERT_EQ("", leader_of(0, &first));
	ASSERT_NO_FATAL_FAILURE(move_leader_and_back(d, first));

	for (int p = 0; p < 2; p++)
		ASSERT_NO_FATAL_FAILURE(expect_same_content(c_.bootstrap(), d.bootstrap(),
							    "lm", p, false));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_GT(st["lm:0"].reconnects, 0) << "the moves must have been seen";
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ(0, res.exit_code) << res.describe();
	int mapped = 0;
	for (int p = 0; p < 2; p++) {
		int32_t l = -1;
		ASSERT_EQ("", leader_of(p, &l));
		std::string ours = dir_.path() + "/lm-" + std::to_string(p);
		std::string theirs = c_.node(l).partition_dir("lm", p);
		ASSERT_NO_FATAL_FAILURE(expect_identical(ours, theirs, &mapped));
		std::string lec = read_file(theirs + "/leader-epoch-checkpoint");
		EXPECT_EQ(lec, read_file(ours + "/leader-epoch-checkpoint")) << ours;
		if (p == 0) { /* 3 entries: epochs 0, 1 (node `first` stopped), 2 (back) */
			EXPECT_EQ(0u, lec.find("0\n3\n")) << lec;
		}
	}
	EXPECT_GE(mapped, 2 * 30);
}

} // namespace
