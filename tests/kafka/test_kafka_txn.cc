/* Transactions on kmirrord after a failover (issue 20, suite kafka-txn):
 * does Kafka's own Java producer, with a transactional.id, commit and abort
 * transactions on a partition kmirrord mirrored and then stopped, and does
 * Kafka's Java console consumer with read_committed read exactly the
 * committed records after the mirrored ones? Does a second instance with
 * the same transactional.id fence the first, and end the transaction the
 * first left open?
 *
 * Method: one KRaft broker, a topic of one partition filled by
 * kafka-producer-perf-test; kmirrord mirrors it until its high watermark is
 * the broker's (kafka-get-offsets), `kmirrorctl stop --all`, the broker is
 * stopped. tests/kafka/TxnProducer.java (KafkaProducer, run as a
 * single-file program) then commits c1, aborts a1 (delivered first), leaves
 * o1 open, opens a second instance (which must fence the first and abort
 * o1), tries the first's commit, and commits c2 from the second. The
 * console consumer reads end + 18 records read_uncommitted (every record
 * the producer delivered, in order, after the mirrored ones) and end + 10
 * read_committed: the mirrored records, then exactly c1 and c2. Expected
 * values come from the program's own plan and the broker's log end, never
 * from kmirrord. */
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"

using namespace kmtest;

namespace {

/* (offset, value) of each "Offset:N<TAB>key<TAB>value" line. */
std::vector<std::pair<int64_t, std::string>> records_in(const std::string &out)
{
	std::vector<std::pair<int64_t, std::string>> v;
	std::regex re("Offset:([0-9]+)\t[^\t]*\t([^\n]*)");
	for (std::sregex_iterator it(out.begin(), out.end(), re), z; it != z; ++it)
		v.emplace_back(std::stoll((*it)[1]), (*it)[2]);
	return v;
}

std::vector<std::string> values(const std::string &txn, int n)
{
	std::vector<std::string> v;
	for (int i = 0; i < n; i++)
		v.push_back(txn + "-" + std::to_string(i));
	return v;
}

/* The values of records [from, end) of recs. */
std::vector<std::string> tail_values(
	const std::vector<std::pair<int64_t, std::string>> &recs, size_t from)
{
	std::vector<std::string> v;
	for (size_t i = from; i < recs.size(); i++)
		v.push_back(recs[i].second);
	return v;
}

TEST(KafkaTxn, JavaTransactionsAfterFailoverReadCommitted)
{
	const char *root = getenv("KM_SOURCE_ROOT");
	ASSERT_NE(nullptr, root) << "KM_SOURCE_ROOT is not set (tests/kafka/meson.build)";
	KafkaBroker broker;
	ASSERT_EQ("", broker.start());
	ASSERT_EQ("", broker.create_topic("orders", 1));
	ASSERT_EQ("", broker.producer_perf("orders", 50, 100, { "acks=all" }));
	std::string lines;
	ASSERT_EQ("", broker.get_offsets("orders", -1, &lines));
	std::smatch m;
	ASSERT_TRUE(std::regex_search(lines, m, std::regex("orders:0:([0-9]+)")))
		<< lines;
	const int64_t end = std::stoll(m[1]);

	TempDir dir("km-ktxn");
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

	ChildResult p = kafka_tool(std::string(root) + "/tests/kafka/TxnProducer.java",
				   { d.bootstrap(), "orders", "java-txn" }, 180000);
	ASSERT_EQ(0, p.exit_code) << p.describe() << "\n" << p.out;
	EXPECT_NE(std::string::npos, p.out.find("COMMITTED c1")) << p.out;
	EXPECT_NE(std::string::npos, p.out.find("ABORTED a1")) << p.out;
	EXPECT_NE(std::string::npos, p.out.find("OLD INSTANCE FENCED")) << p.out;
	EXPECT_NE(std::string::npos, p.out.find("COMMITTED c2")) << p.out;

	// Every delivered record, after the mirrored ones and the barrier.
	std::string out;
	ASSERT_EQ("", console_consume(d.bootstrap(), "orders", 0, end + 18,
				      "read_uncommitted", &out));
	auto all = records_in(out);
	ASSERT_EQ((size_t)end + 18, all.size()) << out;
	std::vector<std::string> want_all;
	for (const char *t : { "c1", "a1", "o1", "c2" })
		for (const std::string &v : values(t, std::string(t) == "o1" ? 3 : 5))
			want_all.push_back(v);
	EXPECT_EQ(want_all, tail_values(all, (size_t)end));
	EXPECT_GT(all[(size_t)end].first, end) << "the barrier precedes c1";

	// read_committed: exactly c1 and c2 after the mirrored records.
	ASSERT_EQ("", console_consume(d.bootstrap(), "orders", 0, end + 10,
				      "read_committed", &out));
	auto committed = records_in(out);
	ASSERT_EQ((size_t)end + 10, committed.size()) << out;
	std::vector<std::string> want = values("c1", 5);
	for (const std::string &v : values("c2", 5))
		want.push_back(v);
	EXPECT_EQ(want, tail_values(committed, (size_t)end));
}

} // namespace
