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

TEST(KafkaStreams, ExactlyOnceV2ResumesOnKmirrordAfterTheSourceIsLost)
{
	KafkaBroker broker;
	ASSERT_EQ("", broker.start());
	ASSERT_EQ("", broker.create_topic("in", 1));
	ASSERT_EQ("", broker.create_topic("out", 1));
	ChildResult p = kafka_tool(program(), { "produce", broker.bootstrap(), "in", "0",
						std::to_string(kFirst) }, 120000);
	ASSERT_EQ(0, p.exit_code) << p.describe();

	TempDir dir("km-kstreams"), state1("km-kstreams-state"), state2("km-kstreams-state");
	Daemon d(dir.path(), { "source.bootstrap.servers=" + broker.bootstrap(),
			       "topics.include=in|out|sumapp-.*", "groups=" + std::string(kApp),
			       "metadata.refresh.interval.ms=500",
			       "group.sync.interval.ms=300", "config.sync.interval.ms=500" });
	ASSERT_EQ("", d.start());

	/* The application on the broker, killed mid-stream. */
	Child app;
	ASSERT_EQ("", kafka_tool_spawn(&app, program(),
				       { "run", broker.bootstrap(), kApp, state1.path(), "10",
					 std::to_string(kKillAt) }));
	ASSERT_EQ("", wait_line(app, "HOLDING " + std::to_string(kKillAt), 120000));
	ASSERT_TRUE(poll_until([&] { return open_on_source(d, "out:0"); }, 30000))
		<< "the held transaction's records never reached the broker";
	ASSERT_EQ("", app.kill(SIGKILL));
	ChildResult gone;
	ASSERT_EQ("", app.wait(10000, &gone));

	/* kmirrord caught up with every partition and with the group. */
	std::map<std::string, int64_t> src;
	ASSERT_EQ("", latest(broker, "in|out|sumapp-.*", &src));
	ASSERT_EQ(4u, src.size()) << "in, out, the repartition topic, the changelog";
	ASSERT_TRUE(src.count(std::string(kChangelog) + ":0"));
	ASSERT_EQ("", d.wait_status(
			      [&](const std::map<std::string, PartStatus> &st) {
				      for (auto &[tp, end] : src)
					      if (!st.count(tp) || st.at(tp).hw != end)
						      return false;
				      return true;
			      },
			      60000));
	std::map<std::string, int64_t> want;
	ASSERT_EQ("", committed(broker, kApp, &want));
	const std::string rp = std::string(kRepartition) + ":0";
	ASSERT_TRUE(want.count("in:0") && want.count(rp)) << "the application committed on the broker";
	EXPECT_GT(want[rp], 0);
	EXPECT_LT(want[rp], src[rp]) << "killed mid-stream";
	ASSERT_TRUE(poll_until([&] { return synced(d, kApp) == want; }, 30000))
		<< "synced offsets never matched the broker's committed ones";

	/* The source is lost; kmirrord takes over. */
	ASSERT_EQ("", broker.kill9());
	ChildResult r;
	ASSERT_EQ("", ctl(d, { "stop", "--all", "--json" }, &r)) << r.out;
	EXPECT_GT(removed(r.out, "out:0"), 0) << "the open transaction's updates are cut: " << r.out;
	p = kafka_tool(program(), { "produce", d.bootstrap(), "in", std::to_string(kFirst),
				    std::to_string(kSecond) }, 120000);
	ASSERT_EQ(0, p.exit_code) << p.describe();

	/* The application again, on kmirrord, with nothing on its disk. */
	ASSERT_EQ("", kafka_tool_spawn(&app, program(),
				       { "run", d.bootstrap(), kApp, state2.path(), "0", "0" }));
	ASSERT_EQ("", wait_line(app, "STATE RUNNING", 120000));

	std::string text;
	const int total = kFirst + kSecond;
	ASSERT_EQ("", console_consume(d.bootstrap(), "in", 0, total, "read_committed", &text));
	auto expect = running_sums(records_in(text));
	ASSERT_EQ((size_t)total, expect.size());
	std::string why = console_consume(d.bootstrap(), "out", 0, total, "read_committed", &text);
	if (!why.empty()) {
		ChildResult st;
		ctl(d, { "status" }, &st);
		std::string u;
		console_consume(d.bootstrap(), "out", 0, total, "read_uncommitted", &u);
		app.kill(SIGTERM);
		app.wait(30000, &gone);
		ChildResult dr;
		d.stop(30000, &dr);
		FAIL() << why << "\nSTATUS " << st.out << "\nUNCOMMITTED " << u.substr(0, 3000)
		       << "\nAPP " << gone.out << gone.err.substr(0, 8000) << "\nDAEMON "
		       << dr.out.substr(0, 4000) << dr.err.substr(dr.err.size() > 12000 ? dr.err.size() - 12000 : 0);
	}
	ASSERT_EQ("", app.kill(SIGTERM));
	ASSERT_EQ("", app.wait(60000, &gone));
	/* Everything it wrote, once it has closed: exactly one update per input. */
	ChildResult all = kafka_tool(
		"org.apache.kafka.tools.consumer.ConsoleConsumer",
		{ "--bootstrap-server", d.bootstrap(), "--topic", "out", "--partition", "0",
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
	/* Streams purged what it had consumed of its repartition topic on
	 * kmirrord (DeleteRecords), as it does on a broker. */
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_GT(st[rp].log_start, want[rp]) << "no DeleteRecords on kmirrord";
	ASSERT_EQ("", d.stop(30000, &r));
}

} // namespace
