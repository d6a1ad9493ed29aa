/* The transaction coordinator's log on kmirrord (issue 20, phase 2a,
 * suite kafka-txnlog): is kmirrord's `__transaction_state-0` Kafka's own
 * format, so that Kafka's DumpLogSegments --transaction-log-decoder reads
 * every record of it, and does it hold every step of Kafka's transaction
 * state machine, in order, for what Kafka's Java producer did? Does a
 * restart rebuild the coordinator from it, so that the same
 * transactional.id goes on with its producer id at the next epoch?
 *
 * Method: kmirrord alone (no broker: nothing is mirrored) with a local
 * topic; tests/kafka/TxnProducer.java (Kafka 4.3.1's KafkaProducer) runs
 * its plan on it: commit c1, abort a1, leave o1 open, a second instance
 * fences the first, commit c2. kmirrord is stopped and Kafka's
 * DumpLogSegments decodes the partition: every batch's record is
 * decoded (a payload per record, no decoder error), each names the
 * transactional id, and the states follow from the plan by Kafka's
 * transaction.version 1 rules (the decoder prints a state as its
 * TransactionState id; the names here are Kafka's for those ids). kmirrord is started again, the program runs again on the
 * same id and must succeed; the records it adds continue the first run's
 * producer id at the next epochs (Kafka's decoder again). */
#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_files.h"

using namespace kmtest;

namespace {

struct TxnRecord {
	int64_t offset = -1;
	std::string id, state, partitions;
	int64_t producer_id = -1;
	int epoch = -1;
	bool tombstone = false;	/* Kafka's decoder: "payload: <DELETE>" */
};

/* Kafka's TransactionState for the id its decoder prints
 * (TransactionState.fromId). */
std::string state_name(int id)
{
	static const char *names[] = { "Empty", "Ongoing", "PrepareCommit",
				       "PrepareAbort", "CompleteCommit",
				       "CompleteAbort", "Dead",
				       "PrepareEpochFence" };
	return id >= 0 && id < 8 ? names[id] : "unknown " + std::to_string(id);
}

/* The records Kafka's decoder printed, and how many batches it saw. */
std::vector<TxnRecord> decode(const std::string &dir, int *batches,
			      std::string *raw)
{
	std::vector<std::string> files;
	for (const std::string &n : files_of(dir, "log"))
		files.push_back(dir + "/" + n);
	std::string list;
	for (auto &f : files)
		list += (list.empty() ? "" : ",") + f;
	ChildResult r = kafka_dump_log_segments(
		{ "--transaction-log-decoder", "--files", list });
	*raw = r.describe() + "\n" + r.out + r.err;
	std::vector<TxnRecord> v;
	*batches = 0;
	std::regex batch("baseOffset: [0-9]+ lastOffset");
	for (std::sregex_iterator it(r.out.begin(), r.out.end(), batch), z;
	     it != z; ++it)
		(*batches)++;
	std::regex rec("\\| offset: ([0-9]+)[^\n]*key: [^\n]*"
		       "\"transactionalId\":\"([^\"]*)\"[^\n]*payload:"
		       "([^\n]*)");
	for (std::sregex_iterator it(r.out.begin(), r.out.end(), rec), z;
	     it != z; ++it) {
		TxnRecord t;
		std::string p = (*it)[3];
		std::smatch m;
		t.offset = std::stoll((*it)[1]);
		t.id = (*it)[2];
		t.tombstone = p == " <DELETE>";
		if (std::regex_search(p, m, std::regex("\"producerId\":([0-9]+)")))
			t.producer_id = std::stoll(m[1]);
		if (std::regex_search(p, m, std::regex("\"producerEpoch\":([0-9]+)")))
			t.epoch = std::stoi(m[1]);
		if (std::regex_search(p, m, std::regex("\"transactionStatus\":([0-9]+)")))
			t.state = state_name(std::stoi(m[1]));
		if (std::regex_search(p, m, std::regex("\"transactionPartitions\":(null|\\[[^\\]]*\\]\\}?\\]?)")))
			t.partitions = m[1];
		v.push_back(t);
	}
	return v;
}

/* Kafka's transaction.version 1 states for TxnProducer.java's plan, and
 * by how much the epoch moved before each record. */
struct Step {
	const char *state;
	int epoch_bump;
};
const Step kPlan[] = {
	{ "Empty", 0 },				/* p: InitProducerId */
	{ "Ongoing", 0 }, { "PrepareCommit", 0 }, { "CompleteCommit", 0 }, /* c1 */
	{ "Ongoing", 0 }, { "PrepareAbort", 0 }, { "CompleteAbort", 0 },    /* a1 */
	{ "Ongoing", 0 },			/* o1 */
	{ "PrepareAbort", 1 }, { "CompleteAbort", 0 }, /* q fences p */
	{ "Empty", 1 },				/* q's retried init */
	{ "Ongoing", 0 }, { "PrepareCommit", 0 }, { "CompleteCommit", 0 }, /* c2 */
};

std::string run_plan(const Daemon &d)
{
	const char *root = getenv("KM_SOURCE_ROOT");
	if (root == nullptr)
		return "KM_SOURCE_ROOT is not set (tests/kafka/meson.build)";
	ChildResult p = kafka_tool(std::string(root) + "/tests/kafka/TxnProducer.java",
				   { d.bootstrap(), "orders", "java-txn" }, 180000);
	for (const char *line : { "COMMITTED c1", "ABORTED a1",
				  "OLD INSTANCE FENCED", "COMMITTED c2" })
		if (p.exit_code != 0 || p.out.find(line) == std::string::npos)
			return std::string("no \"") + line + "\": " +
			       p.describe() + "\n" + p.out;
	return "";
}

/* recs[from, from + size of kPlan) follow the plan from producer pid at
 * epoch: Kafka's names of the states, the partition named while a
 * transaction holds it, the epoch bumps. */
void expect_plan(const std::vector<TxnRecord> &recs, size_t from,
		 int64_t pid, int epoch)
{
	const size_t n = sizeof(kPlan) / sizeof(kPlan[0]);
	ASSERT_GE(recs.size(), from + n);
	for (size_t i = 0; i < n; i++) {
		const TxnRecord &r = recs[from + i];
		SCOPED_TRACE("record at offset " + std::to_string(r.offset));
		epoch += kPlan[i].epoch_bump;
		EXPECT_EQ("java-txn", r.id);
		EXPECT_EQ(kPlan[i].state, r.state);
		EXPECT_EQ(pid, r.producer_id);
		EXPECT_EQ(epoch, r.epoch);
		const bool holds = r.state == "Ongoing" ||
				   r.state.rfind("Prepare", 0) == 0;
		EXPECT_EQ(holds ? "[{\"topic\":\"orders\",\"partitionIds\":[0]}]"
				: r.state == "Empty" ? "null" : "[]",
			  r.partitions);
	}
}

TEST(KafkaTxnLog, KafkaDecodesOurTransactionLogAndARestartRebuildsIt)
{
	TempDir dir("km-ktxnlog");
	Daemon d(dir.path(), { "local.topics=orders:1" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", run_plan(d));
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));

	const std::string tdir = dir.path() + "/__transaction_state-0";
	int batches = 0;
	std::string raw;
	std::vector<TxnRecord> first = decode(tdir, &batches, &raw);
	const size_t n = sizeof(kPlan) / sizeof(kPlan[0]);
	ASSERT_EQ(n, first.size()) << raw;
	EXPECT_EQ((int)n, batches) << "one record per batch, all decoded\n" << raw;
	EXPECT_EQ(std::string::npos, raw.find("Exception")) << raw;
	ASSERT_NE("", first[0].state) << raw;
	ASSERT_NO_FATAL_FAILURE(expect_plan(first, 0, first[0].producer_id,
					    first[0].epoch));
	EXPECT_EQ(0, first[0].epoch);

	// The rebuilt coordinator goes on with the same producer, the
	// next epoch: what the log said, not a fresh id.
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", run_plan(d));
	ASSERT_EQ("", d.stop(30000, &res));
	std::vector<TxnRecord> both = decode(tdir, &batches, &raw);
	ASSERT_EQ(2 * n, both.size()) << raw;
	ASSERT_NO_FATAL_FAILURE(expect_plan(both, n, first[0].producer_id,
					    first[n - 1].epoch + 1));
}

/* A librdkafka transactional producer's InitProducerId: "" or the
 * error. */
std::string init_txn(const std::string &bootstrap, const std::string &id,
		     int timeout_ms = 20000)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER,
				    { { "bootstrap.servers", bootstrap },
				      { "transactional.id", id } },
				    &err);
	if (rk == nullptr)
		return err;
	rd_kafka_error_t *e = rd_kafka_init_transactions(rk, timeout_ms);
	if (e != nullptr) {
		err = rd_kafka_error_string(e);
		rd_kafka_error_destroy(e);
	}
	rd_kafka_destroy(rk);
	return err;
}

/* transaction.ids.max and transactional.id.expiration.ms: a full table
 * refuses a new id (POLICY_VIOLATION, which the client names, and the log
 * says why) until the idle ids are forgotten, each with a tombstone
 * Kafka's decoder reads as one; a restart replays the tombstones, so the
 * ids that took their places are rebuilt and go on with their producers
 * at the next epoch. */
TEST(KafkaTxnLog, AFullTableRefusesUntilIdleIdsAreForgottenWithTombstones)
{
	constexpr int64_t kExpireMs = 6000;
	TempDir dir("km-ktxnlog-full");
	Daemon d(dir.path(), { "local.topics=orders:1", "transaction.ids.max=2",
			       "transactional.id.expiration.ms=" +
				       std::to_string(kExpireMs) });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", init_txn(d.bootstrap(), "a"));
	ASSERT_EQ("", init_txn(d.bootstrap(), "b"));
	const int64_t idle_from = now_ms();
	std::string refused = init_txn(d.bootstrap(), "c", 3000);
	EXPECT_NE(std::string::npos, refused.find("olicy")) << refused;
	std::string last;
	ASSERT_TRUE(poll_until([&] {
		return (last = init_txn(d.bootstrap(), "c")).empty();
	}, 30000)) << last;
	// The coordinator's clock is the wall clock: 100 ms of slack.
	EXPECT_GE(now_ms() - idle_from, kExpireMs - 100);
	// Both idle ids go: room for a fourth.
	ASSERT_TRUE(poll_until([&] {
		return (last = init_txn(d.bootstrap(), "d")).empty();
	}, 30000)) << last;
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	EXPECT_NE(std::string::npos, res.err.find("transaction.ids.max=2"))
		<< res.err;

	const std::string tdir = dir.path() + "/__transaction_state-0";
	int batches = 0;
	std::string raw;
	std::vector<TxnRecord> recs = decode(tdir, &batches, &raw);
	std::map<std::string, int> tombstones;
	const TxnRecord *c = nullptr;
	for (const TxnRecord &r : recs) {
		if (r.tombstone)
			tombstones[r.id]++;
		else if (r.id == "c")
			c = &r;
	}
	EXPECT_EQ(1, tombstones["a"]) << raw;
	EXPECT_EQ(1, tombstones["b"]) << raw;
	EXPECT_EQ(0, tombstones["c"]) << raw;
	ASSERT_NE(nullptr, c) << raw;
	const TxnRecord first_c = *c;

	// Not idle long enough to go again now: what is left is the replay.
	Daemon d2(dir.path(), { "local.topics=orders:1", "transaction.ids.max=2",
				"transactional.id.expiration.ms=600000" });
	ASSERT_EQ("", d2.start());
	ASSERT_EQ("", init_txn(d2.bootstrap(), "c"));
	ASSERT_EQ("", d2.stop(30000, &res));
	recs = decode(tdir, &batches, &raw);
	ASSERT_FALSE(recs.empty()) << raw;
	EXPECT_EQ("c", recs.back().id) << raw;
	EXPECT_EQ(first_c.producer_id, recs.back().producer_id) << raw;
	EXPECT_EQ(first_c.epoch + 1, recs.back().epoch) << raw;
}

/* R4 step 6 for the coordinator's ids: a producer id handed out after a
 * restart is above every id the transaction log names, even one no
 * partition ever saw (a transactional id that only initialised) and with
 * data.dir/producer-id-block lost (what a restart otherwise starts from). */
TEST(KafkaTxnLog, ProducerIdsAfterARestartStayAboveTheTransactionLogs)
{
	TempDir dir("km-ktxnlog-pid");
	Daemon d(dir.path(), { "local.topics=orders:1" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", init_txn(d.bootstrap(), "x"));
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ(0, unlink((dir.path() + "/producer-id-block").c_str()));
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", init_txn(d.bootstrap(), "y"));
	ASSERT_EQ("", d.stop(30000, &res));

	int batches = 0;
	std::string raw;
	std::vector<TxnRecord> recs =
		decode(dir.path() + "/__transaction_state-0", &batches, &raw);
	ASSERT_EQ(2u, recs.size()) << raw;
	ASSERT_EQ("x", recs[0].id);
	ASSERT_EQ("y", recs[1].id);
	EXPECT_GT(recs[1].producer_id, recs[0].producer_id) << raw;
}

/* Base offsets of a partition directory's segments, oldest first. */
std::vector<int64_t> segment_bases(const std::string &dir)
{
	std::vector<int64_t> v;
	for (const std::string &n : files_of(dir, "log"))
		v.push_back(std::stoll(n));
	std::sort(v.begin(), v.end());
	return v;
}

/* Compaction of __transaction_state-0: once far more records were written
 * than ids are live, every live id is written again and the segments below
 * that copy go; a restart (kill -9) rebuilds from what is left both the
 * busy id and one idle since its first record, each going on with its
 * producer at the next epoch. */
TEST(KafkaTxnLog, CompactionKeepsEveryLiveIdAndDropsOldSegments)
{
	constexpr int kTxns = 400; /* three records each */
	TempDir dir("km-ktxnlog-compact");
	Daemon d(dir.path(), { "local.topics=orders:1", "segment.bytes=16384" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", init_txn(d.bootstrap(), "idle"));
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER,
				    { { "bootstrap.servers", d.bootstrap() },
				      { "transactional.id", "busy" },
				      { "linger.ms", "0" } },
				    &err);
	ASSERT_NE(nullptr, rk) << err;
	std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t *)> guard(rk,
								   rd_kafka_destroy);
	auto ok = [](rd_kafka_error_t *e) {
		std::string s = e ? rd_kafka_error_string(e) : "";
		if (e)
			rd_kafka_error_destroy(e);
		return s;
	};
	ASSERT_EQ("", ok(rd_kafka_init_transactions(rk, 30000)));
	for (int i = 0; i < kTxns; i++) {
		ASSERT_EQ("", ok(rd_kafka_begin_transaction(rk))) << i;
		std::string v = "t" + std::to_string(i);
		ASSERT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR,
			  rd_kafka_producev(rk, RD_KAFKA_V_TOPIC("orders"),
					    RD_KAFKA_V_PARTITION(0),
					    RD_KAFKA_V_VALUE((void *)v.data(), v.size()),
					    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					    RD_KAFKA_V_END)) << i;
		ASSERT_EQ("", ok(rd_kafka_commit_transaction(rk, 30000))) << i;
	}
	guard.reset();
	const std::string tdir = dir.path() + "/__transaction_state-0";
	ASSERT_TRUE(poll_until([&] {
		auto s = segment_bases(tdir);
		return !s.empty() && s.front() > 0;
	}, 30000)) << "no segment of __transaction_state-0 was deleted";
	int batches = 0;
	std::string raw;
	std::vector<TxnRecord> before = decode(tdir, &batches, &raw);
	std::map<std::string, TxnRecord> last;
	for (const TxnRecord &r : before)
		last[r.id] = r;
	ASSERT_EQ(2u, last.size()) << raw;

	ASSERT_EQ("", d.kill9());
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", init_txn(d.bootstrap(), "busy"));
	ASSERT_EQ("", init_txn(d.bootstrap(), "idle"));
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	std::vector<TxnRecord> after = decode(tdir, &batches, &raw);
	ASSERT_GE(after.size(), 2u) << raw;
	for (const TxnRecord &r : { after[after.size() - 2], after.back() }) {
		SCOPED_TRACE(r.id);
		ASSERT_EQ(1u, last.count(r.id));
		EXPECT_EQ(last[r.id].producer_id, r.producer_id);
		EXPECT_EQ(last[r.id].epoch + 1, r.epoch);
		EXPECT_EQ("Empty", r.state);
	}
}

} // namespace
