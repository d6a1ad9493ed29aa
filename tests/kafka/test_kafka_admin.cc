/* Topics an application creates on kmirrord (issue 20 item 2, suite
 * kafka-admin): do Kafka's own Admin client and tools create, grow, purge
 * and delete local topics on kmirrord as on a Kafka broker, with Kafka's
 * answers for what a broker refuses; does a created topic serve Kafka's
 * producer and consumer and survive a restart with its configs; does
 * DeleteRecords move the log start durably; does a Metadata request create
 * a topic with auto.create.topics.enable; is a mirrored topic refused until
 * it is stopped?
 *
 * Method: one KRaft broker and one kmirrord for the suite
 * (SetUpTestSuite), kmirrord mirroring the broker's topic `orders` and
 * allowing auto-creation with num.partitions=2.
 * tests/kafka/AdminTopics.java (Kafka's Admin client, one line per step)
 * runs the same steps against the broker and against kmirrord: the lines
 * must be equal, so the expected answers (exception classes, messages,
 * partition counts, configs) are the broker's. Records are written by
 * kafka-producer-perf-test and read by kafka-console-consumer; counts come
 * from what the producer sent and from ListOffsets. Restarts are SIGTERM
 * and start; every wait polls with a deadline. The cases run in order: the
 * last one stops the mirror. */
#include <signal.h>
#include <sys/stat.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"

using namespace kmtest;

namespace {

class KafkaAdmin : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		broker_ = new KafkaBroker({ "num.partitions=2",
					    "auto.create.topics.enable=true" });
		if ((error_ = broker_->start()) != "" ||
		    (error_ = broker_->create_topic("orders", 1)) != "" ||
		    (error_ = broker_->producer_perf("orders", 40, 100,
						     { "acks=all" })) != "")
			return;
		dir_ = new TempDir("km-kadmin");
		daemon_ = new Daemon(dir_->path(),
				     { "source.bootstrap.servers=" +
					       broker_->bootstrap(),
				       "topics=orders",
				       "auto.create.topics.enable=true",
				       "num.partitions=2" });
		error_ = daemon_->start();
	}
	static void TearDownTestSuite()
	{
		delete daemon_;
		delete dir_;
		delete broker_;
		daemon_ = nullptr;
		dir_ = nullptr;
		broker_ = nullptr;
	}
	void SetUp() override { ASSERT_EQ("", error_); }

	/* AdminTopics.java's lines for steps against bootstrap. */
	static std::string admin(const std::string &bootstrap,
				 std::vector<std::string> steps,
				 std::vector<std::string> *lines)
	{
		const char *root = getenv("KM_SOURCE_ROOT");
		if (root == nullptr)
			return "KM_SOURCE_ROOT is not set (tests/kafka/meson.build)";
		steps.insert(steps.begin(), bootstrap);
		ChildResult r = kafka_tool(std::string(root) +
						   "/tests/kafka/AdminTopics.java",
					   steps, 180000);
		if (r.exit_code != 0)
			return "AdminTopics: " + r.describe() + "\n" + r.out;
		lines->clear();
		std::istringstream in(r.out);
		for (std::string l; std::getline(in, l);)
			lines->push_back(l);
		if (lines->size() + 1 != steps.size())
			return "AdminTopics printed " +
			       std::to_string(lines->size()) + " lines:\n" + r.out;
		return "";
	}

	/* The one line of a single step. */
	static std::string one(const std::string &bootstrap,
			       const std::string &step)
	{
		std::vector<std::string> l;
		std::string e = admin(bootstrap, { step }, &l);
		return e.empty() ? l[0] : e;
	}

	/* ListOffsets latest of topic-partition on bootstrap, or -1. */
	static int64_t latest(const std::string &bootstrap,
			      const std::string &topic, int p)
	{
		std::string l = one(bootstrap, "latest:" + topic + ":" +
						       std::to_string(p));
		std::smatch m;
		return std::regex_search(l, m, std::regex(" OK ([0-9]+)$"))
			       ? std::stoll(m[1]) : -1;
	}

	static bool exists(const std::string &path)
	{
		struct stat st;
		return stat(path.c_str(), &st) == 0;
	}

	std::string restart()
	{
		ChildResult r;
		std::string e = daemon_->stop(60000, &r);
		if (!e.empty())
			return e;
		if (r.exit_code != 0)
			return "kmirrord exited " + r.describe();
		return daemon_->start();
	}

	static KafkaBroker *broker_;
	static TempDir *dir_;
	static Daemon *daemon_;
	static std::string error_;
};

KafkaBroker *KafkaAdmin::broker_ = nullptr;
TempDir *KafkaAdmin::dir_ = nullptr;
Daemon *KafkaAdmin::daemon_ = nullptr;
std::string KafkaAdmin::error_;

TEST_F(KafkaAdmin, AnswersAsTheBrokerDoes)
{
	const std::vector<std::string> steps = {
		"create:x-dup:1:1",
		"create:x-dup:1:1",
		"create:x-rf3:1:3",
		"create:x/bad:1:1",
		"create:x-unknown:1:1:foo.bar=1",
		"create:x-zero:0:1",
		"create:x-seg:1:1:segment.bytes=2048",
		"create:x-pol:1:1:cleanup.policy=sometimes",
		"create:x-cfg:2:1:cleanup.policy=compact,max.message.bytes=300000,retention.ms=3600000",
		"create:x-dflt:-1:-1",
		"validate:x-vo:2",
		"parts:x-dup:1",
		"parts:x-cfg:3",
		"parts:x-cfg:2",
		"create:x-..:1:1",
		"create:..:1:1",
		"parts:x-nope:2",
		"delrec:x-dup:0:5",
		"delete:x-nope",
		"create:x.col:1:1",
		"create:x_col:1:1",
		"describe:x-cfg",
		"describe:x-dflt",
		"delete:x-dup",
		"list:x-dup",
		"list:x-cfg",
	};
	std::vector<std::string> theirs, ours;
	ASSERT_EQ("", admin(broker_->bootstrap(), steps, &theirs));
	ASSERT_EQ("", admin(daemon_->bootstrap(), steps, &ours));
	for (size_t i = 0; i < steps.size(); i++)
		EXPECT_EQ(theirs[i], ours[i]) << "step " << steps[i];
	EXPECT_FALSE(exists(dir_->path() + "/x-dup-0")) << "deleted on disk";
}

TEST_F(KafkaAdmin, CreatedTopicServesAndSurvivesARestart)
{
	const std::string create =
		"create:events:3:1:retention.ms=86400000,max.message.bytes=400000";
	std::string want = one(broker_->bootstrap(), create);
	ASSERT_EQ(want, one(daemon_->bootstrap(), create));
	const std::string desc = one(daemon_->bootstrap(), "describe:events");
	EXPECT_EQ(one(broker_->bootstrap(), "describe:events"), desc);

	ASSERT_EQ("", broker_->producer_perf(
			      "events", 300, 100,
			      { "bootstrap.servers=" + daemon_->bootstrap(),
				"acks=all" }));
	int64_t total = 0, ends[3];
	for (int p = 0; p < 3; p++) {
		ends[p] = latest(daemon_->bootstrap(), "events", p);
		ASSERT_GE(ends[p], 0);
		total += ends[p];
	}
	EXPECT_EQ(300, total) << "every record the producer sent";
	int busiest = ends[0] >= ends[1] ? (ends[0] >= ends[2] ? 0 : 2)
					 : (ends[1] >= ends[2] ? 1 : 2);
	std::string before, after;
	ASSERT_EQ("", console_consume(daemon_->bootstrap(), "events", busiest,
				      ends[busiest], "read_uncommitted", &before));

	ASSERT_EQ("", restart());
	EXPECT_EQ(desc, one(daemon_->bootstrap(), "describe:events"))
		<< "partitions and configs kept";
	for (int p = 0; p < 3; p++)
		EXPECT_EQ(ends[p], latest(daemon_->bootstrap(), "events", p));
	ASSERT_EQ("", console_consume(daemon_->bootstrap(), "events", busiest,
				      ends[busiest], "read_uncommitted", &after));
	EXPECT_EQ(before, after);
	EXPECT_EQ("create:events:1:1 ERR TopicExistsException: Topic 'events' "
		  "already exists.",
		  one(daemon_->bootstrap(), "create:events:1:1"));
}

TEST_F(KafkaAdmin, DeleteRecordsMovesTheLogStartDurably)
{
	std::string b = daemon_->bootstrap();
	ASSERT_EQ("create:purge:1:1 OK partitions=1 rf=1 configs=",
		  one(b, "create:purge:1:1"));
	ASSERT_EQ("", broker_->producer_perf("purge", 100, 50,
					     { "bootstrap.servers=" + b,
					       "acks=all" }));
	const int64_t end = latest(b, "purge", 0);
	ASSERT_EQ(100, end);
	const int64_t cut = end * 2 / 5;
	EXPECT_EQ("delrec:purge:0:" + std::to_string(cut) + " OK low=" +
			  std::to_string(cut),
		  one(b, "delrec:purge:0:" + std::to_string(cut)));
	EXPECT_EQ("earliest:purge:0 OK " + std::to_string(cut),
		  one(b, "earliest:purge:0"));
	EXPECT_NE(std::string::npos,
		  one(b, "delrec:purge:0:" + std::to_string(end + 1))
			  .find("ERR OffsetOutOfRangeException"));

	ASSERT_EQ("", restart());
	EXPECT_EQ("earliest:purge:0 OK " + std::to_string(cut),
		  one(b = daemon_->bootstrap(), "earliest:purge:0"))
		<< "the log start is kept across a restart";
	std::string out;
	ASSERT_EQ("", console_consume(b, "purge", 0, end - cut,
				      "read_uncommitted", &out));
	EXPECT_EQ(0u, out.find("Offset:" + std::to_string(cut) + "\t")) << out;

	EXPECT_EQ("delete:purge OK", one(b, "delete:purge"));
	EXPECT_EQ("list:purge OK false", one(b, "list:purge"));
	EXPECT_FALSE(exists(dir_->path() + "/purge-0"));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", daemon_->status(&st));
	EXPECT_EQ(0u, st.count("purge:0")) << "kmirrorctl status no longer lists it";
	EXPECT_EQ(1u, st.count("events:2"));
	ASSERT_EQ("", restart());
	EXPECT_EQ("list:purge OK false", one(daemon_->bootstrap(), "list:purge"));
}

/* kill -9 after the first of two directories went (KMIRROR_TEST_CRASH,
 * -Dtest_hooks): the next start finishes the deletion from its marker. */
TEST_F(KafkaAdmin, ADeletionCutShortIsFinishedAtTheNextStart)
{
	ASSERT_EQ("create:doomed:2:1 OK partitions=2 rf=1 configs=",
		  one(daemon_->bootstrap(), "create:doomed:2:1"));
	ChildResult r;
	ASSERT_EQ("", daemon_->stop(60000, &r));
	daemon_->set_env({ "KMIRROR_TEST_CRASH=topic-delete" });
	ASSERT_EQ("", daemon_->start());
	daemon_->set_env({});
	const char *root = getenv("KM_SOURCE_ROOT");
	ASSERT_NE(nullptr, root);
	Child admin;
	ASSERT_EQ("", kafka_tool_spawn(&admin, std::string(root) +
						       "/tests/kafka/AdminTopics.java",
				       { daemon_->bootstrap(), "delete:doomed" }));
	ASSERT_TRUE(poll_until([&] { return daemon_->child().exited(); }, 60000))
		<< "kmirrord was not stopped at the crash point";
	admin.kill(SIGKILL);
	ChildResult ar, dr;
	admin.wait(10000, &ar);
	ASSERT_EQ("", daemon_->child().wait(10000, &dr));
	EXPECT_EQ(SIGKILL, dr.signal);
	const std::string dd = dir_->path();
	EXPECT_TRUE(exists(dd + "/.deleting-doomed")) << "the marker is there";
	EXPECT_NE(exists(dd + "/doomed-0"), exists(dd + "/doomed-1"))
		<< "one directory went, one is left";

	ASSERT_EQ("", daemon_->start());
	EXPECT_EQ("list:doomed OK false", one(daemon_->bootstrap(), "list:doomed"));
	EXPECT_FALSE(exists(dd + "/doomed-0"));
	EXPECT_FALSE(exists(dd + "/doomed-1"));
	EXPECT_FALSE(exists(dd + "/.deleting-doomed"));
}

TEST_F(KafkaAdmin, MetadataCreatesATopicWithAutoCreate)
{
	/* The broker was given the same num.partitions (2), and creates a
	 * topic a producer names by default. */
	ASSERT_EQ("", broker_->producer_perf("auto-made", 10, 20,
					     { "acks=all" }));
	ASSERT_EQ("", broker_->producer_perf(
			      "auto-made", 10, 20,
			      { "bootstrap.servers=" + daemon_->bootstrap(),
				"acks=all" }));
	EXPECT_EQ(one(broker_->bootstrap(), "describe:auto-made"),
		  one(daemon_->bootstrap(), "describe:auto-made"));
}

TEST_F(KafkaAdmin, AMirroredTopicIsRefusedUntilStopped)
{
	const std::string b = daemon_->bootstrap();
	std::string lines;
	ASSERT_EQ("", broker_->get_offsets("orders", -1, &lines));
	std::smatch m;
	ASSERT_TRUE(std::regex_search(lines, m, std::regex("orders:0:([0-9]+)")));
	const int64_t end = std::stoll(m[1]);
	ASSERT_EQ("", daemon_->wait_status(
			      [&](const std::map<std::string, PartStatus> &st) {
				      return st.count("orders:0") &&
					     st.at("orders:0").hw == end;
			      },
			      60000));
	const std::string refused = " ERR PolicyViolationException: Topic "
				    "'orders': mirrored from the source: stop "
				    "it first (kmirrorctl stop)";
	EXPECT_EQ("parts:orders:2" + refused, one(b, "parts:orders:2"));
	EXPECT_EQ("delete:orders" + refused, one(b, "delete:orders"));
	EXPECT_NE(std::string::npos, one(b, "delrec:orders:0:10")
					     .find("ERR PolicyViolationException"));
	EXPECT_EQ("create:orders:1:1 ERR TopicExistsException: Topic 'orders' "
		  "already exists.", one(b, "create:orders:1:1"));
	EXPECT_EQ("list:orders OK true", one(b, "list:orders"));

	ChildResult r;
	ASSERT_EQ("", ctl(*daemon_, { "stop", "--all", "--json" }, &r));
	/* Failed over, it is a local topic like any other. */
	EXPECT_EQ("parts:orders:2 OK", one(b, "parts:orders:2"));
	EXPECT_EQ("delrec:orders:0:10 OK low=10", one(b, "delrec:orders:0:10"));
}

} // namespace
