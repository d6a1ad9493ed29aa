/* Consumers that stop mid-partition after a failover (issue 19 item 4,
 * suite kafka-barrier): after `kmirrorctl stop` of a mirror of a real
 * Kafka broker, does a group consumer that reads a few records and exits
 * resume, in its next run, exactly at the first record it did not get -
 * never past the barrier that follows the data?
 *
 * Method: one KRaft broker (kafka_broker.h), a topic of one partition
 * filled by kafka-producer-perf-test; kmirrord mirrors it until its high
 * watermark is the broker's (kafka-get-offsets), then stops it (the barrier
 * right after the data). Kafka's Java console consumer, in a group on
 * kmirrord, reads 4 records (--max-messages) and exits; the group's
 * committed offset (librdkafka's committed()) must be its first offset + 4
 * and a second console consumer run of the group must print the next two
 * offsets. Kafka's Java consumer passes a control record only once it has
 * returned every record before it, and the console consumer seeks back to
 * its first unprinted record before the closing commit, so this holds
 * with or without kmirrord serving the barrier alone: it guards that
 * nothing else in kmirrord's group path (OffsetCommit, OffsetFetch, the
 * barrier's offset) moves the group. librdkafka consumers are not
 * asserted here: whether one that closes early commits past the barrier
 * depends on its fetching ahead (docs/design.md); the frontend suite's
 * TxnServe.TheBarrierComesAlone proves what kmirrord serves. */
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

/* Every "Offset:N" the console consumer printed. */
std::vector<int64_t> offsets_in(const std::string &out)
{
	std::vector<int64_t> v;
	std::regex re("Offset:([0-9]+)");
	for (std::sregex_iterator it(out.begin(), out.end(), re), z; it != z; ++it)
		v.push_back(std::stoll((*it)[1]));
	return v;
}

/* kafka-console-consumer in group `group` on the topic (subscribed, from
 * the earliest offset when the group has none): `max` records, then exit. */
std::string java_group_consume(const std::string &bootstrap,
			       const std::string &group, const std::string &topic,
			       int max, std::vector<int64_t> *offsets)
{
	ChildResult r = kafka_tool(
		"org.apache.kafka.tools.consumer.ConsoleConsumer",
		{ "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
		  "--consumer-property", "auto.offset.reset=earliest",
		  "--max-messages", std::to_string(max), "--timeout-ms", "30000",
		  "--formatter-property", "print.offset=true" },
		120000);
	*offsets = offsets_in(r.out);
	if (r.exit_code != 0)
		return "kafka-console-consumer: " + r.describe();
	return "";
}

int64_t committed_offset(const std::string &bootstrap, const std::string &group,
			 const std::string &topic)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "group.id", group } },
				    &err);
	int64_t off = -2;
	if (rk == nullptr)
		return off;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, topic.c_str(), 0);
	if (rd_kafka_committed(rk, l, 10000) == 0)
		off = l->elems[0].offset;
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_destroy(rk);
	return off;
}

TEST(KafkaBarrier, GroupConsumersStoppingEarlyResumeWhereTheyStopped)
{
	KafkaBroker broker;
	ASSERT_EQ("", broker.start());
	ASSERT_EQ("", broker.create_topic("orders", 1));
	ASSERT_EQ("", broker.producer_perf("orders", 300, 100, { "acks=all" }));
	std::string lines;
	ASSERT_EQ("", broker.get_offsets("orders", -1, &lines));
	std::smatch m;
	ASSERT_TRUE(std::regex_search(lines, m, std::regex("orders:0:([0-9]+)")))
		<< lines;
	const int64_t end = std::stoll(m[1]);
	ASSERT_EQ(300, end);

	TempDir dir("km-kbarrier");
	Daemon d(dir.path(), { "source.bootstrap.servers=" + broker.bootstrap(),
			       "topics=orders" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status(
			      [&](const std::map<std::string, PartStatus> &st) {
				      return st.count("orders:0") &&
					     st.at("orders:0").hw == end;
			      },
			      60000));
	ChildResult r;
	ASSERT_EQ("", ctl(d, { "stop", "--all", "--json" }, &r));
	ASSERT_NE(std::string::npos,
		  r.out.find("\"barrier_offset\":" + std::to_string(end)))
		<< r.out;
	ASSERT_EQ("", broker.stop());

	std::vector<int64_t> first, second;
	ASSERT_EQ("", java_group_consume(d.bootstrap(), "java-app", "orders", 4,
					 &first));
	ASSERT_EQ((std::vector<int64_t>{ 0, 1, 2, 3 }), first);
	EXPECT_EQ(4, committed_offset(d.bootstrap(), "java-app", "orders"))
		<< "the barrier is at " << end;
	ASSERT_EQ("", java_group_consume(d.bootstrap(), "java-app", "orders", 2,
					 &second));
	EXPECT_EQ((std::vector<int64_t>{ 4, 5 }), second);
}

} // namespace
