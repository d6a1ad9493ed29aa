/* Exactly-once consume-transform-produce across a failover (issue 20,
 * suite kafka-txn-offsets): does a transactional application that commits
 * its consumer offsets inside its transactions (sendOffsetsToTransaction,
 * so AddOffsetsToTxn and TxnOffsetCommit) and is killed on the real Kafka
 * source resume on kmirrord after the failover with the same group and
 * transactional.id, so that its output read with read_committed holds the
 * transform of every input record exactly once?
 *
 * Method: one KRaft broker; `in` (one partition) filled by Kafka's
 * VerifiableProducer, `out` empty; kmirrord mirrors both and syncs the
 * group. tests/kafka/TxnTransform.java (Kafka 4.3's KafkaConsumer
 * read_committed + KafkaProducer with a transactional.id, one transaction
 * per poll) runs against the broker until it committed part of `in`, then
 * opens one more transaction, delivers its records and is killed with
 * SIGKILL (the transaction stays open on the source). Once kmirrord has
 * both partitions at the source's log end and the group's synced offset is
 * the source's committed one (kafka-consumer-groups --describe), the broker
 * is stopped, `kmirrorctl stop --all`, and the program runs again against
 * kmirrord to the end of `in`. A read_committed librdkafka consumer then
 * reads `out` on kmirrord to its end: its values must be exactly
 * {"out(" + v + ")" : v in `in`}, each once (`in` read from kmirrord with
 * read_committed too: it is the source's bytes). Nothing is written down:
 * the expectation is derived from `in` and the broker's offsets. */
#include <signal.h>

#include <map>
#include <set>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_groups_util.h"

using namespace kmtest;

namespace {

/* Every value of topic:0 from the start to its end at read_committed (the
 * LSO), with librdkafka; *why says what failed. */
std::vector<std::string> read_committed_values(const std::string &bootstrap,
					       const std::string &topic,
					       std::string *why)
{
	char err[512];
	std::vector<std::string> v;
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	const char *kv[][2] = { { "bootstrap.servers", bootstrap.c_str() },
				{ "group.id", "km-reader" },
				{ "enable.partition.eof", "true" },
				{ "isolation.level", "read_committed" },
				{ "enable.auto.commit", "false" } };
	for (auto &p : kv)
		rd_kafka_conf_set(c, p[0], p[1], err, sizeof(err));
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err));
	if (rk == nullptr) {
		*why = err;
		return v;
	}
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, topic.c_str(), 0)->offset =
		RD_KAFKA_OFFSET_BEGINNING;
	rd_kafka_assign(rk, l);
	rd_kafka_topic_partition_list_destroy(l);
	int64_t deadline = now_ms() + 60000;
	*why = "no end of partition in 60 s";
	while (now_ms() < deadline) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 500);
		if (m == nullptr)
			continue;
		bool eof = m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF;
		if (m->err == 0)
			v.emplace_back((const char *)m->payload, m->len);
		else if (!eof)
			*why = rd_kafka_message_errstr(m);
		rd_kafka_message_destroy(m);
		if (eof) {
			why->clear();
			break;
		}
	}
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	return v;
}

/* `kmirrorctl status --json`: the offset kmirrord stores for group on
 * topic:0, or -1. */
int64_t synced_offset(const Daemon &d, const std::string &group,
		      const std::string &topic)
{
	ChildResult r;
	int64_t off = -1;
	if (ctl(d, { "status", "--json" }, &r) != "")
		return -1;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	size_t i;
	json_t *row;
	json_array_foreach(json_object_get(root, "groups"), i, row) {
		const char *g = json_string_value(json_object_get(row, "group"));
		const char *p = json_string_value(json_object_get(row, "partition"));
		if (g && p && group == g && topic + ":0" == p)
			off = json_integer_value(json_object_get(row, "offset"));
	}
	json_decref(root);
	return off;
}

int64_t log_end(KafkaBroker &b, const std::string &topic)
{
	std::string lines;
	std::smatch m;
	if (b.get_offsets(topic, -1, &lines) != "" ||
	    !std::regex_search(lines, m, std::regex(topic + ":0:([0-9]+)")))
		return -1;
	return std::stoll(m[1]);
}

/* The last number after word in the program's output, or -1. */
int64_t last_after(const std::string &out, const std::string &word)
{
	std::regex re(word + " ([0-9]+)");
	int64_t v = -1;
	for (std::sregex_iterator it(out.begin(), out.end(), re), z; it != z; ++it)
		v = std::stoll((*it)[1]);
	return v;
}

const char *const kGroup = "ctp";
const char *const kTxnId = "ctp-app";

TEST(KafkaTxnOffsets, ConsumeTransformProduceExactlyOnceAcrossFailover)
{
	const char *root = getenv("KM_SOURCE_ROOT");
	ASSERT_NE(nullptr, root) << "KM_SOURCE_ROOT is not set (tests/kafka/meson.build)";
	const std::string app = std::string(root) + "/tests/kafka/TxnTransform.java";
	const int kIn = 600, kFirstRun = 200;
	KafkaBroker broker;
	ASSERT_EQ("", broker.start());
	ASSERT_EQ("", broker.create_topic("in", 1));
	ASSERT_EQ("", broker.create_topic("out", 1));
	ASSERT_EQ("", verifiable_produce(broker.bootstrap(), "in", kIn, 10, 7));
	const int64_t in_end = log_end(broker, "in");
	ASSERT_EQ(kIn, in_end) << "VerifiableProducer's records at 0..n-1";

	TempDir dir("km-ktxnoff");
	Daemon d(dir.path(), { "source.bootstrap.servers=" + broker.bootstrap(),
			       "topics=in,out", std::string("groups=") + kGroup,
			       "group.sync.interval.ms=300" });
	ASSERT_EQ("", d.start());

	// The first run, on the source: killed inside an open transaction.
	Child first;
	ASSERT_EQ("", kafka_tool_spawn(&first, app,
				       { broker.bootstrap(), "in", "out", kGroup,
					 kTxnId, "hang",
					 std::to_string(kFirstRun) }));
	std::string line, seen;
	while (line.rfind("OPEN", 0) != 0) {
		ASSERT_EQ("", first.read_line(120000, &line))
			<< seen << first.stderr_so_far();
		seen += line + "\n";
	}
	ASSERT_EQ("", first.kill(SIGKILL));
	ChildResult fr;
	first.wait(30000, &fr);
	const int64_t done_first = last_after(seen, "COMMITTED");
	ASSERT_GE(done_first, kFirstRun) << seen;
	ASSERT_LT(done_first, in_end) << "part of `in` is left for kmirrord";

	// What the source holds: its committed offset (the open transaction's
	// are pending there), `out` with the open transaction's records.
	std::map<int, Row> rows;
	ASSERT_EQ("", describe(broker.bootstrap(), kGroup, "in", &rows));
	ASSERT_EQ(done_first, rows[0].current)
		<< "the source's committed offset is the last committed "
		   "transaction's";
	const int64_t out_end = log_end(broker, "out");
	ASSERT_GT(out_end, done_first) << "the open transaction's records are there";
	ASSERT_EQ("", d.wait_status(
			      [&](const std::map<std::string, PartStatus> &st) {
				      return st.count("in:0") && st.count("out:0") &&
					     st.at("in:0").hw == in_end &&
					     st.at("out:0").hw == out_end &&
					     synced_offset(d, kGroup, "in") ==
						     done_first;
			      },
			      60000))
		<< "synced: " << synced_offset(d, kGroup, "in");
	ASSERT_EQ("", broker.stop());
	ChildResult r;
	ASSERT_EQ("", ctl(d, { "stop", "--all", "--json" }, &r));

	// The second run, on kmirrord, to the end of `in`.
	ChildResult second = kafka_tool(app, { d.bootstrap(), "in", "out", kGroup,
					       kTxnId, "all",
					       std::to_string(in_end) },
					180000);
	ASSERT_EQ(0, second.exit_code) << second.describe() << "\n" << second.out;
	EXPECT_EQ(in_end, last_after(second.out, "DONE")) << second.out;
	std::map<int, Row> here;
	ASSERT_EQ("", describe(d.bootstrap(), kGroup, "in", &here));
	EXPECT_EQ(in_end, here[0].current)
		<< "the group's committed offset on kmirrord is the end of `in`";

	std::string why;
	std::vector<std::string> in = read_committed_values(d.bootstrap(), "in", &why);
	ASSERT_EQ("", why);
	ASSERT_EQ((size_t)in_end, in.size());
	std::multiset<std::string> want, got;
	for (const std::string &v : in)
		want.insert("out(" + v + ")");
	ASSERT_EQ((size_t)in_end, want.size()) << "`in`'s values are distinct";
	std::vector<std::string> out = read_committed_values(d.bootstrap(), "out", &why);
	ASSERT_EQ("", why);
	got.insert(out.begin(), out.end());
	EXPECT_EQ(want.size(), out.size()) << "none lost, none twice";
	EXPECT_EQ(want, got);
}

} // namespace
