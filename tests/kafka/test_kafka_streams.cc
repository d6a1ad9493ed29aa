/* Kafka Streams across a failover (issue 20's headline test, suite
 * kafka-streams): does a Kafka Streams application with
 * processing.guarantee=exactly_once_v2, whose host is lost mid-stream
 * together with the source cluster, resume on kmirrord from its committed
 * offsets and state, so that its output read_committed is exactly what a
 * run that never failed over gives - no update lost, none counted twice?
 *
 * Method: one KRaft broker with topics `in` and `out`. kmirrord mirrors
 * `in`, `out` and the application's internal topics (topics.include
 * "in|out|sumapp-.*": the repartition topic of its groupBy and the
 * changelog of its state store, which the application creates on the
 * broker) and syncs its group (groups=sumapp). tests/kafka/StreamsSum.java
 * (a running sum per key, every update written to `out`) produces 300
 * records to the broker and processes them there, slowed down (10 ms per
 * update of its store), until it has summed 150; then it is killed with SIGKILL (its transaction left open
 * on the broker for 60 s: transaction.timeout.ms). Once kmirrord's high
 * watermarks are the broker's and its synced group offsets are the ones
 * kafka-consumer-groups shows on the broker, the broker is killed and
 * `kmirrorctl stop --all` cuts every partition at its LSO. 100 more records
 * go to kmirrord, and the application starts again on kmirrord with the
 * same application.id and an empty state directory (the host is gone), so
 * it must restore its store from the mirrored changelog. Kafka's console
 * consumer then reads `out` read_committed: the expected output is
 * computed from `in` as kmirrord serves it (each record's running sum of
 * its key, in order), never from the output. */
#include <jansson.h>
#include <signal.h>

#include <map>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_groups_util.h"

using namespace kmtest;

namespace {

const char *const kApp = "sumapp";
const char *const kRepartition = "sumapp-bykey-repartition";
const char *const kChangelog = "sumapp-sums-changelog";
constexpr int kFirst = 300, kSecond = 100, kKillAt = 150;

std::string program()
{
	const char *root = getenv("KM_SOURCE_ROOT");
	return std::string(root ? root : ".") + "/tests/kafka/StreamsSum.java";
}

/* (key, value) of each "Offset:N<TAB>key<TAB>value" line, in order. */
std::vector<std::pair<std::string, std::string>> records_in(const std::string &out)
{
	std::vector<std::pair<std::string, std::string>> v;
	std::regex re("Offset:[0-9]+\t([^\t]*)\t([^\n]*)");
	for (std::sregex_iterator it(out.begin(), out.end(), re), z; it != z; ++it)
		v.emplace_back((*it)[1], (*it)[2]);
	return v;
}

/* What the application writes for this input: for each record "kN:amount"
 * the new sum of kN, in input order (one thread, one partition each). */
std::vector<std::pair<std::string, std::string>>
running_sums(const std::vector<std::pair<std::string, std::string>> &in)
{
	std::map<std::string, long> sum;
	std::vector<std::pair<std::string, std::string>> out;
	for (auto &[k, v] : in) {
		size_t c = v.find(':');
		std::string key = v.substr(0, c);
		sum[key] += std::stol(v.substr(c + 1));
		out.emplace_back(key, std::to_string(sum[key]));
	}
	return out;
}

/* "topic:partition" -> latest offset, for the topics matching re. */
std::string latest(KafkaBroker &b, const std::string &re,
		   std::map<std::string, int64_t> *out)
{
	std::string text, why = b.get_offsets(re, -1, &text);
	std::istringstream in(text);
	std::string line;
	std::smatch m;
	while (std::getline(in, line))
		if (std::regex_match(line, m, std::regex("(.+:[0-9]+):([0-9]+)")))
			(*out)[m[1]] = std::stoll(m[2]);
	return why;
}

/* status --json "groups" rows of group: "topic:p" -> synced offset. */
std::map<std::string, int64_t> synced(const Daemon &d, const std::string &group)
{
	std::map<std::string, int64_t> out;
	ChildResult r;
	if (ctl(d, { "status", "--json" }, &r) != "")
		return out;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	size_t i;
	json_t *row;
	json_array_foreach(json_object_get(root, "groups"), i, row) {
		const char *g = json_string_value(json_object_get(row, "group"));
		const char *p = json_string_value(json_object_get(row, "partition"));
		if (g && p && group == g)
			out[p] = json_integer_value(json_object_get(row, "synced_offset"));
	}
	json_decref(root);
	return out;
}

/* Does status say the source has an open transaction on tp (its LSO
 * below its high watermark)? */
bool open_on_source(const Daemon &d, const std::string &tp)
{
	ChildResult r;
	bool open = false;
	if (ctl(d, { "status", "--json" }, &r) != "")
		return false;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	size_t i;
	json_t *row;
	json_array_foreach(json_object_get(root, "partitions"), i, row) {
		const char *p = json_string_value(json_object_get(row, "partition"));
		if (p && tp == p)
			open = json_integer_value(json_object_get(row, "source_lso")) <
			       json_integer_value(json_object_get(row, "source_hw"));
	}
	json_decref(root);
	return open;
}

/* removed_records of tp in `kmirrorctl stop --json`'s last line. */
int64_t removed(const std::string &out, const std::string &tp)
{
	size_t end = out.find_last_not_of('\n');
	size_t at = end == std::string::npos ? std::string::npos : out.rfind('\n', end);
	json_t *root = json_loads(out.substr(at == std::string::npos ? 0 : at + 1).c_str(), 0, nullptr);
	size_t i;
	json_t *row;
	int64_t n = -1;
	json_array_foreach(json_object_get(root, "partitions"), i, row) {
		const char *p = json_string_value(json_object_get(row, "partition"));
		if (p && tp == p)
			n = json_integer_value(json_object_get(row, "removed_records"));
	}
	json_decref(root);
	return n;
}

/* The broker's committed offsets of group (kafka-consumer-groups
 * --describe, once): "topic:p" -> offset. */
std::string committed(KafkaBroker &b, const std::string &group,
		      std::map<std::string, int64_t> *out)
{
	std::map<int, Row> rows;
	std::string text, why = describe(b.bootstrap(), group, "in", &rows, &text);
	std::istringstream in(text);
	std::string line;
	while (std::getline(in, line)) {
		std::istringstream f(line);
		std::string g, t, p, cur;
		if ((f >> g >> t >> p >> cur) && g == group && num_or_none(cur) >= 0)
			(*out)[t + ":" + p] = num_or_none(cur);
	}
	return why;
}

/* Lines of the running application until one starts with `want`. */
std::string wait_line(Child &app, const std::string &want, int timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	std::string line;
	while (line.rfind(want, 0) != 0) {
		int64_t left = deadline - now_ms();
		if (left <= 0)
			return "no \"" + want + "\" in time";
		std::string why = app.read_line((int)left, &line);
		if (!why.empty())
			return why + "; stderr: " + app.stderr_so_far().substr(0, 6000);
		if (line.rfind("FAILED", 0) == 0)
			return line + "; stderr: " + app.stderr_so_far().substr(0, 6000);
	}
	return "";
}

/* The broker, kmirrord mirroring it, the application's two lives, and
 * what the first left on the broker. */
class KafkaStreams : public ::testing::Test {
protected:
	/* The application on the broker until its kKillAt-th update is held
	 * in an open transaction there, then SIGKILL. */
	void first_life_killed()
	{
		ASSERT_EQ("", kafka_tool_spawn(&app_, program(),
					       { "run", broker_.bootstrap(), kApp,
						 state1_.path(), "10", std::to_string(kKillAt) }));
		ASSERT_EQ("", wait_line(app_, "HOLDING " + std::to_string(kKillAt), 120000));
		ASSERT_TRUE(poll_until([&] { return open_on_source(*d_, "out:0"); }, 30000))
			<< "the held transaction's records never reached the broker";
		ASSERT_EQ("", app_.kill(SIGKILL));
		ChildResult gone;
		ASSERT_EQ("", app_.wait(10000, &gone));
	}

	/* kmirrord has every record of the four topics and the group's
	 * committed offsets as the broker has them. */
	void caught_up()
	{
		std::map<std::string, int64_t> src;
		ASSERT_EQ("", latest(broker_, "in|out|sumapp-.*", &src));
		ASSERT_EQ(4u, src.size()) << "in, out, the repartition topic, the changelog";
		ASSERT_TRUE(src.count(std::string(kChangelog) + ":0"));
		ASSERT_EQ("", d_->wait_status(
				      [&](const std::map<std::string, PartStatus> &st) {
					      for (auto &[tp, end] : src)
						      if (!st.count(tp) || st.at(tp).hw != end)
							      return false;
					      return true;
				      },
				      60000));
		ASSERT_EQ("", committed(broker_, kApp, &want_));
		ASSERT_TRUE(want_.count("in:0") && want_.count(rp_))
			<< "the application committed on the broker";
		EXPECT_GT(want_[rp_], 0);
		EXPECT_LT(want_[rp_], src[rp_]) << "killed mid-stream";
		ASSERT_TRUE(poll_until([&] { return synced(*d_, kApp) == want_; }, 30000))
			<< "synced offsets never matched the broker's committed ones";
	}

	/* The broker is lost, kmirrord takes over and gets more input. */
	void failover()
	{
		ASSERT_EQ("", broker_.kill9());
		ChildResult r;
		ASSERT_EQ("", ctl(*d_, { "stop", "--all", "--json" }, &r)) << r.out;
		EXPECT_GT(removed(r.out, "out:0"), 0)
			<< "the open transaction's updates are cut: " << r.out;
		ChildResult p = kafka_tool(program(), { "produce", d_->bootstrap(), "in",
							std::to_string(kFirst),
							std::to_string(kSecond) }, 120000);
		ASSERT_EQ(0, p.exit_code) << p.describe();
	}

	/* Why `out` never had every update: status, the uncommitted output,
	 * the application's and kmirrord's logs. */
	std::string diagnose(const std::string &why)
	{
		ChildResult st, gone, dr;
		std::string u;
		ctl(*d_, { "status" }, &st);
		console_consume(d_->bootstrap(), "out", 0, kFirst + kSecond,
				"read_uncommitted", &u);
		app_.kill(SIGTERM);
		app_.wait(30000, &gone);
		d_->stop(30000, &dr);
		size_t tail = dr.err.size() > 12000 ? dr.err.size() - 12000 : 0;
		return why + "\nSTATUS " + st.out + "\nUNCOMMITTED " + u.substr(0, 3000) +
		       "\nAPP " + gone.out + gone.err.substr(0, 8000) + "\nDAEMON " +
		       dr.err.substr(tail);
	}

	KafkaBroker broker_;
	TempDir dir_{ "km-kstreams" }, state1_{ "km-kstreams-state" },
		state2_{ "km-kstreams-state" };
	std::unique_ptr<Daemon> d_;
	Child app_;
	std::map<std::string, int64_t> want_; /* the broker's committed offsets */
	const std::string rp_ = std::string(kRepartition) + ":0";
};

TEST_F(KafkaStreams, ExactlyOnceV2ResumesOnKmirrordAfterTheSourceIsLost)
{
	ASSERT_EQ("", broker_.start());
	ASSERT_EQ("", broker_.create_topic("in", 1));
	ASSERT_EQ("", broker_.create_topic("out", 1));
	ChildResult p = kafka_tool(program(), { "produce", broker_.bootstrap(), "in", "0",
						std::to_string(kFirst) }, 120000);
	ASSERT_EQ(0, p.exit_code) << p.describe();
	d_ = std::make_unique<Daemon>(
		dir_.path(), std::vector<std::string>{
				     "source.bootstrap.servers=" + broker_.bootstrap(),
				     "topics.include=in|out|sumapp-.*", "groups=" + std::string(kApp),
				     "metadata.refresh.interval.ms=500",
				     "group.sync.interval.ms=300", "config.sync.interval.ms=500" });
	ASSERT_EQ("", d_->start());
	ASSERT_NO_FATAL_FAILURE(first_life_killed());
	ASSERT_NO_FATAL_FAILURE(caught_up());
	ASSERT_NO_FATAL_FAILURE(failover());

	/* The application again, on kmirrord, with nothing on its disk. */
	ASSERT_EQ("", kafka_tool_spawn(&app_, program(),
				       { "run", d_->bootstrap(), kApp, state2_.path(), "0", "0" }));
	ASSERT_EQ("", wait_line(app_, "STATE RUNNING", 120000));
	std::string text;
	const int total = kFirst + kSecond;
	ASSERT_EQ("", console_consume(d_->bootstrap(), "in", 0, total, "read_committed", &text));
	auto expect = running_sums(records_in(text));
	ASSERT_EQ((size_t)total, expect.size());
	std::string why = console_consume(d_->bootstrap(), "out", 0, total, "read_committed", &text);
	if (!why.empty())
		FAIL() << diagnose(why);
	/* Streams purges what it consumed of its repartition topic
	 * (DeleteRecords), on kmirrord as on a broker. */
	EXPECT_TRUE(poll_until([&] {
		std::map<std::string, PartStatus> st;
		return d_->status(&st) == "" && st[rp_].log_start > want_[rp_];
	}, 15000)) << "no DeleteRecords on kmirrord";
	ChildResult gone;
	ASSERT_EQ("", app_.kill(SIGTERM));
	ASSERT_EQ("", app_.wait(60000, &gone));

	/* Everything it wrote, once it has closed: exactly one update per input. */
	ChildResult all = kafka_tool(
		"org.apache.kafka.tools.consumer.ConsoleConsumer",
		{ "--bootstrap-server", d_->bootstrap(), "--topic", "out", "--partition", "0",
		  "--offset", "earliest", "--timeout-ms", "5000", "--isolation-level",
		  "read_committed", "--formatter-property", "print.offset=true",
		  "--formatter-property", "print.key=true" },
		120000);
	auto got = records_in(all.out);
	EXPECT_EQ(expect, got);
	std::map<std::string, std::string> last_want, last_got;
	for (auto &[k, v] : expect)
		last_want[k] = v;
	for (auto &[k, v] : got)
		last_got[k] = v;
	EXPECT_EQ(last_want, last_got) << "each key's final sum";
	ChildResult r;
	ASSERT_EQ("", d_->stop(30000, &r));
}

} // namespace
