/* Failure handling against a real Apache Kafka 4.x broker (issue 19 item
 * 6; suite kafka-ops-retry): a partition FAILED by a transient cause (its
 * source broker killed) retries by itself with exponential backoff and
 * resumes, with no operator command, once the broker is back; a topic
 * made again at the source (a new topic id) stays FAILED for an operator,
 * never retried; a data-loss event (the source's log start moved past our
 * log end while the partition was paused) is counted and shown in status
 * and metrics, with mirror.offset.reset=none and =earliest alike.
 *
 * Method: one KRaft broker for the suite (kafka_broker.h), killed (kill
 * -9) and started again only by the last case. kmirrord runs as a child
 * (tests/e2e/daemon.h) with small timings (mirror.source.unavailable.ms,
 * mirror.failed.retry.*), so each case takes seconds. Every wait polls
 * kmirrorctl status or metrics with a deadline. Expected values come from
 * the broker: its watermarks (ListOffsets), its partition.metadata's topic
 * id, its records read back by a client; the backoffs from the configured
 * initial and maximum, each within the 20% jitter.
 */
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>

#include <jansson.h>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_files.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

constexpr int kInitialBackoffMs = 300, kMaxBackoffMs = 1200;

/* What status says of one partition's failure handling. */
struct Retry {
	std::string state, reason, last_failure, data_loss;
	int64_t leo = -1, retries = -1, attempt = -1, data_loss_events = -1;
	bool next_due = false; /* next_retry_ms is a number: one is scheduled */
};

int64_t int_of(json_t *row, const char *key, int64_t absent = -1)
{
	json_t *v = json_object_get(row, key);
	return json_is_integer(v) ? (int64_t)json_integer_value(v) : absent;
}

std::string str_of(json_t *row, const char *key)
{
	const char *s = json_string_value(json_object_get(row, key));
	return s ? s : "";
}

/* The status row of partition `part` ("topic:p"). */
std::string retry_of(const Daemon &d, const std::string &part, Retry *out)
{
	ChildResult r;
	if (std::string e = ctl(d, { "status", "--json" }, &r); !e.empty())
		return e;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr), *row;
	size_t i;
	std::string err = "no row " + part;
	json_array_foreach(json_object_get(root, "partitions"), i, row) {
		if (str_of(row, "partition") != part)
			continue;
		out->state = str_of(row, "state");
		out->reason = str_of(row, "reason");
		out->last_failure = str_of(row, "last_failure");
		out->data_loss = str_of(row, "data_loss");
		out->leo = int_of(row, "leo");
		/* Counts are shown once they are not 0. */
		out->retries = int_of(row, "retries", 0);
		out->attempt = int_of(row, "retry_attempt");
		out->data_loss_events = int_of(row, "data_loss_events", 0);
		out->next_due = json_is_integer(json_object_get(row, "next_retry_ms"));
		err = "";
	}
	json_decref(root);
	return err;
}

/* Until pred holds for the row of `part`; "" or the last row seen. */
template <class F>
std::string wait_retry(const Daemon &d, const std::string &part, F pred,
		       int timeout_ms, Retry *last)
{
	bool ok = poll_until([&] {
		*last = Retry();
		return retry_of(d, part, last).empty() && pred(*last);
	}, timeout_ms);
	return ok ? "" : part + " is " + last->state + " (" + last->reason +
			 "), attempt " + std::to_string(last->attempt);
}

/* One partition's Prometheus sample, or -1. */
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

/* kmirrord's stderr so far (a short read drains its pipe). */
const std::string &log_of(Daemon &d)
{
	std::string line;
	while (d.child().read_line(5, &line).empty())
		;
	return d.child().stderr_so_far();
}

/* The state kmirrord persisted for a partition (kmirror.state). */
std::string persisted_state(const std::string &dir)
{
	std::smatch m;
	std::string s = read_file(dir + "/kmirror.state");
	std::regex re("(^|\n)state=([A-Z]+)");
	return std::regex_search(s, m, re) ? m[2].str() : "";
}

/* The topic id a partition directory's partition.metadata names, or "". */
std::string topic_id_in(const std::string &dir)
{
	std::smatch m;
	std::string s = read_file(dir + "/partition.metadata");
	std::regex re("topic_id: ([A-Za-z0-9_-]+)");
	return std::regex_search(s, m, re) ? m[1].str() : "";
}

/* Every record of t-0 from offset `from`, as (offset, value). */
std::vector<std::pair<int64_t, std::string>> records_of(const std::string &bootstrap,
							const std::string &t, int64_t from)
{
	std::vector<Message> m;
	ConsumeSpec cs;
	cs.topic = t;
	cs.from = from;
	EXPECT_EQ("", consume(bootstrap, cs, &m)) << t << " at " << bootstrap;
	std::vector<std::pair<int64_t, std::string>> v;
	for (auto &x : m)
		v.emplace_back(x.offset, x.value.value_or("<null>"));
	return v;
}

class KafkaOpsRetry : public ::testing::Test {
protected:
	static void SetUpTestSuite() { broker_ = new KafkaBroker(); }
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

	Daemon daemon_for(const std::string &dir, const std::string &topic,
			  std::vector<std::string> sets = {})
	{
		sets.push_back("source.bootstrap.servers=" + broker_->bootstrap());
		sets.push_back("topics=" + topic);
		sets.push_back("mirror.source.unavailable.ms=1500");
		sets.push_back("mirror.failed.retry.initial.backoff.ms=" +
			       std::to_string(kInitialBackoffMs));
		sets.push_back("mirror.failed.retry.max.backoff.ms=" +
			       std::to_string(kMaxBackoffMs));
		return Daemon(dir, sets);
	}

	std::string produce_n(const std::string &t, int64_t n, uint64_t seed)
	{
		ProduceSpec s;
		s.topic = t;
		s.count = n;
		s.mode = ProducerMode::kIdempotent;
		s.seed = seed;
		s.value_size = 100;
		s.flush_every = 50;
		return produce(broker_->bootstrap(), s);
	}

	/* Until kmirrord's high watermark of t:0 is the broker's. */
	std::string caught_up(Daemon &d, const std::string &t, int64_t *hw = nullptr)
	{
		int64_t lo = -1, hi = -1;
		if (std::string e = watermarks(broker_->bootstrap(), t, 0, &lo, &hi, 30000);
		    !e.empty())
			return t + ": " + e;
		if (hw)
			*hw = hi;
		return d.wait_status([&](const std::map<std::string, PartStatus> &st) {
			return st.count(t + ":0") && st.at(t + ":0").hw == hi;
		}, 60000);
	}

	std::string topics_tool(const std::vector<std::string> &args)
	{
		std::vector<std::string> a = { "--bootstrap-server", broker_->bootstrap() };
		a.insert(a.end(), args.begin(), args.end());
		ChildResult r = kafka_tool("org.apache.kafka.tools.TopicCommand", a, 120000);
		return r.exit_code == 0 ? "" : "kafka-topics: " + r.describe() + "\n" + r.out;
	}

	static KafkaBroker *broker_;
	TempDir dir_{ "km-kafka-retry" };
};

KafkaBroker *KafkaOpsRetry::broker_ = nullptr;

/* A topic deleted and made again at the source under the same name (a new
 * topic id): FAILED with both ids in the reason, persisted FAILED at once
 * (an operator's cause), and no retry ever scheduled or made. */
TEST_F(KafkaOpsRetry, TopicMadeAgainStaysFailedWithoutRetries)
{
	ASSERT_EQ("", broker_->create_topic("rc", 1));
	ASSERT_EQ("", produce_n("rc", 200, 1));
	Daemon d = daemon_for(dir_.path(), "rc");
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", caught_up(d, "rc"));
	std::string old_id = topic_id_in(broker_->partition_dir("rc", 0));
	ASSERT_FALSE(old_id.empty());

	ASSERT_EQ("", topics_tool({ "--delete", "--topic", "rc" }));
	/* The deletion is asynchronous: creating may first find it there. */
	ASSERT_TRUE(poll_until([&] { return broker_->create_topic("rc", 1).empty(); },
			       60000));
	std::string new_id;
	ASSERT_TRUE(poll_until([&] {
		new_id = topic_id_in(broker_->partition_dir("rc", 0));
		return !new_id.empty() && new_id != old_id;
	}, 30000));
	ASSERT_EQ("", produce_n("rc", 300, 2));

	std::string mine = dir_.path() + "/rc-0";
	ASSERT_TRUE(poll_until([&] { return persisted_state(mine) == "FAILED"; }, 60000))
		<< "persisted " << persisted_state(mine) << "\n" << log_of(d);
	Retry r;
	ASSERT_EQ("", retry_of(d, "rc:0", &r));
	EXPECT_EQ("FAILED", r.state);
	EXPECT_NE(std::string::npos, r.reason.find(old_id)) << r.reason;
	EXPECT_NE(std::string::npos, r.reason.find(new_id)) << r.reason;
	EXPECT_EQ(0, r.retries);
	EXPECT_EQ(-1, r.attempt) << "no retry series";
	EXPECT_FALSE(r.next_due);
	EXPECT_EQ(0, metric_of(d, "kmirror_partition_failed_retries_total", "rc", 0));
	EXPECT_EQ(200, r.leo) << "nothing of the new topic appended";
	EXPECT_EQ(std::string::npos, log_of(d).find("transient FAILED"));
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
}

/* The source's log start moved past our log end while the partition was
 * paused (DeleteRecords, as retention or an admin would): a data-loss
 * event on resume, counted, logged at ERROR with the offsets lost and
 * shown in status (the range) and metrics, both when
 * mirror.offset.reset=none FAILS the partition (for an operator: no
 * retry) and when =earliest carries on from the source's log start. */
TEST_F(KafkaOpsRetry, DataLossWhilePausedIsCountedAndShown)
{
	ASSERT_EQ("", broker_->create_topic("dl", 1));
	ASSERT_EQ("", produce_n("dl", 200, 3));
	TempDir dn("km-kr-none"), de("km-kr-earliest");
	Daemon n = daemon_for(dn.path(), "dl");
	Daemon e = daemon_for(de.path(), "dl", { "mirror.offset.reset=earliest" });
	ChildResult r;
	for (Daemon *d : { &n, &e }) {
		ASSERT_EQ("", d->start());
		ASSERT_EQ("", caught_up(*d, "dl"));
		ASSERT_EQ("", ctl(*d, { "pause", "dl:0" }, &r));
	}
	Retry before;
	ASSERT_EQ("", retry_of(n, "dl:0", &before));
	ASSERT_EQ(0, before.data_loss_events);
	int64_t ours = before.leo;

	ASSERT_EQ("", produce_n("dl", 300, 4));
	int64_t lo = -1, hi = -1;
	ASSERT_EQ("", watermarks(broker_->bootstrap(), "dl", 0, &lo, &hi));
	std::string json = dir_.file("delete.json");
	std::ofstream(json) << "{\"version\":1,\"partitions\":[{\"topic\":\"dl\","
			       "\"partition\":0,\"offset\":" << (ours + hi) / 2 << "}]}";
	ChildResult del = kafka_tool("org.apache.kafka.tools.DeleteRecordsCommand",
				     { "--bootstrap-server", broker_->bootstrap(),
				       "--offset-json-file", json }, 120000);
	ASSERT_EQ(0, del.exit_code) << del.describe() << del.out;
	ASSERT_EQ("", watermarks(broker_->bootstrap(), "dl", 0, &lo, &hi));
	ASSERT_GT(lo, ours) << "the source's log start must pass our log end";
	std::string range = "offsets " + std::to_string(ours) + " to " +
			    std::to_string(lo - 1);

	for (Daemon *d : { &n, &e })
		ASSERT_EQ("", ctl(*d, { "resume", "dl:0" }, &r));
	Retry st;
	ASSERT_EQ("", wait_retry(n, "dl:0", [](const Retry &x) {
		return x.state == "FAILED";
	}, 60000, &st));
	ASSERT_EQ("", caught_up(e, "dl"));
	for (Daemon *d : { &n, &e }) {
		SCOPED_TRACE(d == &n ? "none" : "earliest");
		ASSERT_EQ("", retry_of(*d, "dl:0", &st));
		EXPECT_EQ(1, st.data_loss_events);
		EXPECT_EQ(range + " (" + std::to_string(lo - ours) +
				  ") deleted at the source unmirrored", st.data_loss);
		EXPECT_EQ(1, metric_of(*d, "kmirror_partition_data_loss_events_total", "dl", 0));
		EXPECT_EQ(ours, metric_of(*d, "kmirror_partition_data_loss_last_from_offset",
					  "dl", 0));
		EXPECT_EQ(lo - 1, metric_of(*d, "kmirror_partition_data_loss_last_to_offset",
					    "dl", 0));
		EXPECT_TRUE(std::regex_search(log_of(*d), std::regex("ERROR[^\n]*data loss: " +
								    range + " ")))
			<< log_of(*d);
	}
	/* none: an operator's cause, persisted, never retried. */
	ASSERT_TRUE(poll_until([&] { return persisted_state(dn.path() + "/dl-0") == "FAILED"; },
			       30000));
	ASSERT_EQ("", retry_of(n, "dl:0", &st));
	EXPECT_EQ(0, st.retries);
	EXPECT_FALSE(st.next_due);
	EXPECT_EQ(ours, st.leo) << "what it had stays";
	/* earliest: mirrors on from the source's log start. */
	ASSERT_EQ("", retry_of(e, "dl:0", &st));
	EXPECT_EQ("MIRRORING", st.state) << st.reason;
	EXPECT_EQ(records_of(broker_->bootstrap(), "dl", lo),
		  records_of(e.bootstrap(), "dl", lo));
	for (Daemon *d : { &n, &e })
		ASSERT_EQ("", d->stop(30000, &r));
}

/* Every "retry N in X ms" the log announced: X within the jitter of
 * min(initial * 2^(N-1), max). Returns how many it checked. */
int check_backoffs(const std::string &log)
{
	std::regex re("retry ([0-9]+) in ([0-9]+) ms");
	int n = 0;
	for (std::sregex_iterator it(log.begin(), log.end(), re), end; it != end; ++it) {
		int attempt = std::stoi((*it)[1]);
		double want = std::min((double)kMaxBackoffMs,
				       kInitialBackoffMs * std::pow(2.0, attempt - 1));
		double got = std::stod((*it)[2]);
		EXPECT_GE(got, std::floor(want * 0.8)) << "retry " << attempt;
		EXPECT_LE(got, std::ceil(want * 1.2)) << "retry " << attempt;
		n++;
	}
	return n;
}

/* The source broker killed (kill -9) long enough: the partition turns
 * FAILED by a transient cause (source unavailable), is not persisted
 * FAILED, and retries by itself, status showing the attempt, the next
 * retry and the last reason, the backoff doubling up to its maximum.
 * Once the broker is back it resumes alone: MIRRORING, every record the
 * source has, the series over. A second kmirrord with
 * mirror.failed.retry.max.attempts=2 gives up after two retries: FAILED
 * persisted, and it stays so once the broker is back. */
TEST_F(KafkaOpsRetry, SourceDownFailsTransientAndResumesAlone)
{
	ASSERT_EQ("", broker_->create_topic("rt", 1));
	ASSERT_EQ("", produce_n("rt", 300, 5));
	Daemon d = daemon_for(dir_.path(), "rt");
	TempDir dg("km-kr-gives-up");
	Daemon g = daemon_for(dg.path(), "rt", { "mirror.failed.retry.max.attempts=2" });
	for (Daemon *x : { &d, &g }) {
		ASSERT_EQ("", x->start());
		ASSERT_EQ("", caught_up(*x, "rt"));
	}

	ASSERT_EQ("", broker_->kill9());
	Retry st;
	/* Three retries failed: the backoff has reached its maximum. */
	ASSERT_EQ("", wait_retry(d, "rt:0", [](const Retry &x) {
		return x.state == "FAILED" && x.attempt >= 3 && x.next_due;
	}, 60000, &st)) << log_of(d);
	EXPECT_NE(std::string::npos, st.reason.find("source unavailable")) << st.reason;
	/* A retry fails at its first error, not after another
	 * mirror.source.unavailable.ms: the backoff paces the attempts. */
	EXPECT_NE(std::string::npos, st.reason.find("a retry of rt-0 failed at its first error"))
		<< st.reason;
	EXPECT_NE(std::string::npos, st.last_failure.find("source unavailable"))
		<< st.last_failure;
	EXPECT_GE(st.retries, st.attempt);
	EXPECT_EQ("MIRRORING", persisted_state(dir_.path() + "/rt-0"))
		<< "a transient FAILED is not persisted";
	EXPECT_GE(metric_of(d, "kmirror_partition_failed_retries_total", "rt", 0), 3);
	EXPECT_EQ(1, metric_of(d, "kmirror_partition_failed", "rt", 0));
	EXPECT_GE(check_backoffs(log_of(d)), 4);
	ChildResult start;
	EXPECT_NE("", ctl(d, { "start", "rt:0" }, &start)) << "it retries by itself";
	EXPECT_NE(std::string::npos, start.err.find("retries by itself")) << start.err;
	ASSERT_TRUE(poll_until([&] { return persisted_state(dg.path() + "/rt-0") == "FAILED"; },
			       30000)) << log_of(g);
	Retry gave;
	ASSERT_EQ("", retry_of(g, "rt:0", &gave));
	EXPECT_EQ(2, gave.retries) << "max.attempts=2";
	EXPECT_NE(std::string::npos, log_of(g).find("FAILED after 2 retries"));

	ASSERT_EQ("", broker_->start());
	ASSERT_EQ("", produce_n("rt", 200, 6));
	ASSERT_EQ("", caught_up(d, "rt")) << log_of(d);
	ASSERT_EQ("", wait_retry(d, "rt:0", [](const Retry &x) {
		return x.state == "MIRRORING" && x.attempt == -1;
	}, 30000, &st)) << "the series ends once it mirrors";
	EXPECT_GE(st.retries, 3);
	EXPECT_EQ(0, metric_of(d, "kmirror_partition_failed", "rt", 0));
	EXPECT_NE(std::string::npos, log_of(d).find("mirroring again after"));
	ASSERT_NO_FATAL_FAILURE(expect_same_content(broker_->bootstrap(), d.bootstrap(),
						    "rt", 0, false));
	/* d mirrors again: the one that gave up had the same chance. */
	ASSERT_EQ("", retry_of(g, "rt:0", &gave));
	EXPECT_EQ("FAILED", gave.state);
	EXPECT_EQ(2, gave.retries);
	EXPECT_EQ(300, gave.leo);
	ChildResult res;
	for (Daemon *x : { &d, &g })
		ASSERT_EQ("", x->stop(30000, &res));
}

} // namespace
