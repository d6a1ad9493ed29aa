/* A compacted topic stays compacted after a failover (issue 19 item 2,
 * suite kafka-ops-compact): kmirrord mirrors a cleanup.policy=compact
 * topic of a real Kafka 4.x broker, is stopped (kmirrorctl stop: the
 * barrier, writable), takes more updates and a tombstone from clients,
 * and compacts the partition itself (topic.cleanup.policy=NAME:compact):
 * does a consumer then read exactly the latest value of every key, each at
 * the offset it was written at, the deleted key gone once its tombstone's
 * delete horizon has passed, and does Kafka read the cleaned files?
 *
 * Method: one KRaft broker for the suite. Kafka's VerifiableProducer
 * (Java, acks=all, idempotent) writes keys repeating over a small set to
 * the broker, kmirrord mirrors them (1 KiB segments, so the log has many)
 * until its high watermark is the broker's, the stop puts the barrier
 * after them, then VerifiableProducer writes more updates of some of
 * those keys to kmirrord; librdkafka writes a tombstone (the Java tools
 * cannot send a null value) and a few large records of new keys, so that
 * every update lies below the active segment the cleaner never touches.
 * The expectation is derived from the producers' own acknowledgements
 * (key, value, offset): the last write of each key, none for the deleted
 * one. The wait polls kmirrord's segment files (decoded with kmirror's
 * batch and record parsers) until no key below the active segment appears
 * twice and the deleted key is gone (delete.retention.ms=2s; the cleaner
 * runs again when a horizon passes). Then Kafka's Java console consumer
 * reads the partition from offset 0 on kmirrord; kmirrord is stopped and
 * Kafka's DumpLogSegments reads every cleaned segment (--deep-iteration)
 * without an error, its index checks pass, the barrier is still there and
 * kmirror_partition_cleaner_runs_total counted the passes.
 */
#include <jansson.h>
#include <librdkafka/rdkafka.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/km_limits.h"
#include "kafka/batch.h"
#include "kafka/records.h"
#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_files.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

struct Sent {
	int64_t offset;
	std::string key, value;
};

/* VerifiableProducer: n records, keys "0".."keys-1" repeating, values
 * "prefix.N"; every acknowledgement (key, value, offset) in *sent. */
std::string java_produce(const std::string &bootstrap, const std::string &topic,
			 int n, int keys, int prefix, std::vector<Sent> *sent)
{
	TempDir tmp("km-kopsc");
	std::string cfg = tmp.file("producer.properties");
	FILE *f = fopen(cfg.c_str(), "w");
	if (f == nullptr)
		return "cannot write " + cfg;
	/* retries: the tool sets 0, which idempotence refuses */
	fputs("enable.idempotence=true\nretries=2147483647\nlinger.ms=5\n"
	      "batch.size=1024\n", f);
	fclose(f);
	ChildResult r = kafka_tool(
		"org.apache.kafka.tools.VerifiableProducer",
		{ "--bootstrap-server", bootstrap, "--topic", topic,
		  "--max-messages", std::to_string(n), "--acks", "-1",
		  "--value-prefix", std::to_string(prefix), "--repeating-keys",
		  std::to_string(keys), "--command-config", cfg },
		120000);
	if (r.exit_code != 0)
		return "VerifiableProducer: " + r.describe();
	std::istringstream in(r.out);
	std::string line;
	while (std::getline(in, line)) {
		json_t *j = json_loads(line.c_str(), 0, nullptr);
		if (j == nullptr)
			continue;
		const char *name = json_string_value(json_object_get(j, "name"));
		if (name && std::string(name) == "producer_send_success")
			sent->push_back(
				{ json_integer_value(json_object_get(j, "offset")),
				  json_string_value(json_object_get(j, "key")) ?: "",
				  json_string_value(json_object_get(j, "value")) ?: "" });
		json_decref(j);
	}
	if (sent->size() != (size_t)n)
		return "VerifiableProducer acknowledged " +
		       std::to_string(sent->size()) + " of " + std::to_string(n);
	return "";
}

/* librdkafka: each (key, value) in order (value nullopt: a tombstone),
 * the offsets from the delivery reports into *sent. */
std::string rd_produce(const std::string &bootstrap, const std::string &topic,
		       const std::vector<std::pair<std::string, const char *>> &kv,
		       std::vector<Sent> *sent)
{
	static std::vector<Sent> got;
	std::string err;
	got.clear();
	rd_kafka_t *rk = client_new(
		RD_KAFKA_PRODUCER,
		{ { "bootstrap.servers", bootstrap }, { "linger.ms", "0" },
		  { "max.in.flight", "1" } },
		&err, [](rd_kafka_conf_t *c) {
			rd_kafka_conf_set_dr_msg_cb(
				c, [](rd_kafka_t *, const rd_kafka_message_t *m, void *) {
					std::string k((const char *)m->key, m->key_len);
					std::string v = m->payload
						? std::string((const char *)m->payload, m->len)
						: std::string();
					got.push_back({ m->err ? -1 : m->offset, k, v });
				});
		});
	if (rk == nullptr)
		return err;
	for (auto &p : kv) {
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(0),
			RD_KAFKA_V_KEY(p.first.data(), p.first.size()),
			RD_KAFKA_V_VALUE((void *)p.second,
					 p.second ? strlen(p.second) : 0),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
		if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
			err = rd_kafka_err2str(e);
		rd_kafka_flush(rk, 30000); /* one at a time: offsets in order */
	}
	rd_kafka_destroy(rk);
	for (auto &s : got)
		if (s.offset < 0)
			err = "not delivered: " + s.key;
	*sent = got;
	return err;
}

struct FileRec {
	int64_t offset;
	std::string key;
	bool tombstone;
};

/* Every record of the partition's .log files, with kmirror's parsers, and
 * the active segment's base; false while the files change under it. */
bool read_records(const std::string &dir, std::vector<FileRec> *out,
		  int64_t *active_base)
{
	std::vector<std::string> logs = files_of(dir, "log");
	out->clear();
	if (logs.empty())
		return false;
	*active_base = std::stoll(logs.back().substr(0, 20));
	for (auto &name : logs) {
		std::string err, bytes = read_file(dir + "/" + name, &err);
		if (!err.empty())
			return false;
		size_t pos = 0;
		while (pos < bytes.size()) {
			iovec iov = { (void *)(bytes.data() + pos), bytes.size() - pos };
			km_chain ch = { &iov, 1 };
			km_batch b;
			int n = km_batch_parse(&b, &ch, km_chain_start(&ch),
					       KM_BATCH_BYTES_MAX);
			km_records_iter it;
			km_record r;
			/* An open segment written with direct I/O ends in
			 * zeros up to a block (cut when it is sealed). */
			if (n <= 0 &&
			    bytes.find_first_not_of('\0', pos) == std::string::npos)
				break;
			if (n <= 0)
				return false;
			pos += (size_t)n;
			if (km_batch_is_control(&b) || km_records_begin(&it, &b) < 0)
				continue;
			while (km_records_next(&it, &r) > 0) {
				std::string k((size_t)std::max(r.key_len, 0), '\0');
				km_chain_copy(&ch, r.key, k.data(), k.size());
				out->push_back({ r.offset, k, r.value_len < 0 });
			}
		}
	}
	return true;
}

/* The cleaner has done what it can: no key twice below the active
 * segment, and `gone` nowhere. */
bool compacted(const std::string &dir, const std::string &gone)
{
	std::vector<FileRec> recs;
	int64_t active = -1;
	std::set<std::string> seen;
	if (!read_records(dir, &recs, &active))
		return false;
	for (auto &r : recs) {
		if (r.key == gone)
			return false;
		if (r.offset < active && !seen.insert(r.key).second)
			return false;
	}
	return true;
}

/* "Offset:N<TAB>key<TAB>value" lines of the console consumer. */
std::vector<Sent> consumed(const std::string &out)
{
	std::vector<Sent> v;
	std::regex re("Offset:([0-9]+)\t([^\t\n]*)\t([^\n]*)");
	for (std::sregex_iterator it(out.begin(), out.end(), re), z; it != z; ++it)
		v.push_back({ std::stoll((*it)[1]), (*it)[2], (*it)[3] });
	return v;
}

int64_t metric(const Daemon &d, const std::string &name)
{
	ChildResult r;
	if (ctl(d, { "metrics" }, &r) != "")
		return -1;
	std::smatch m;
	std::regex re(name + "\\{topic=\"users\",partition=\"0\"\\} ([0-9]+)");
	return std::regex_search(r.out, m, re) ? std::stoll(m[1]) : -1;
}

class KafkaOpsCompact : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		broker_ = new KafkaBroker();
		start_error_ = broker_->start();
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
	}
	void SetUp() override { ASSERT_EQ("", start_error_); }

	static KafkaBroker *broker_;
	static std::string start_error_;
};

KafkaBroker *KafkaOpsCompact::broker_ = nullptr;
std::string KafkaOpsCompact::start_error_;

TEST_F(KafkaOpsCompact, AFailedOverCompactedTopicIsCompactedByKmirrord)
{
	ASSERT_EQ("", broker_->create_topic("users", 1, { "cleanup.policy=compact" }));
	std::vector<Sent> src, local, tail;
	ASSERT_EQ("", java_produce(broker_->bootstrap(), "users", 200, 20, 1, &src));
	const int64_t end = src.back().offset + 1;

	TempDir dir("km-kopsc-d");
	Daemon d(dir.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
			       "topics=users", "topic.cleanup.policy=users:compact",
			       "delete.retention.ms=2000", "segment.bytes=1024",
			       "min.cleanable.dirty.ratio=0.01" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status(
			      [&](const std::map<std::string, PartStatus> &st) {
				      return st.count("users:0") &&
					     st.at("users:0").hw == end;
			      },
			      60000));
	ChildResult r;
	ASSERT_EQ("", ctl(d, { "stop", "--all", "--json" }, &r));
	ASSERT_NE(std::string::npos,
		  r.out.find("\"barrier_offset\":" + std::to_string(end)))
		<< r.out;

	ASSERT_EQ("", java_produce(d.bootstrap(), "users", 100, 15, 2, &local));
	const std::string big(1500, 'z');
	ASSERT_EQ("", rd_produce(d.bootstrap(), "users",
				 { { "3", nullptr }, { "end-0", big.c_str() },
				   { "end-1", big.c_str() }, { "end-2", big.c_str() } },
				 &tail));

	/* The last write of each key, at its offset; "3" deleted. */
	std::map<std::string, Sent> want;
	for (auto *v : { &src, &local, &tail })
		for (auto &s : *v)
			want[s.key] = s;
	ASSERT_EQ(std::string(), want.at("3").value) << "the tombstone is last";
	want.erase("3");
	ASSERT_GT(local.front().offset, end) << "the barrier lies between";

	const std::string pdir = dir.path() + "/users-0";
	ASSERT_TRUE(poll_until([&] { return compacted(pdir, "3"); }, 30000))
		<< "kmirrord's log is not compacted";
	std::string out;
	ASSERT_EQ("", console_consume(d.bootstrap(), "users", 0, (int64_t)want.size(),
				      "read_uncommitted", &out));
	std::vector<Sent> got = consumed(out);
	ASSERT_EQ(want.size(), got.size()) << out;
	std::set<std::string> keys;
	for (auto &g : got) {
		ASSERT_TRUE(want.count(g.key)) << "key " << g.key << " at " << g.offset;
		EXPECT_TRUE(keys.insert(g.key).second) << "key " << g.key << " twice";
		EXPECT_EQ(want.at(g.key).offset, g.offset) << "key " << g.key;
		EXPECT_EQ(want.at(g.key).value, g.value) << "key " << g.key;
	}
	EXPECT_GE(metric(d, "kmirror_partition_cleaner_runs_total"), 2)
		<< "a pass, then one when the tombstone's horizon passed";
	EXPECT_GT(metric(d, "kmirror_partition_cleaner_bytes_removed_total"), 0);

	/* kafka-configs names the policy kmirrord compacts by, as the broker
	 * names the source topic's. */
	for (const std::string &b : { broker_->bootstrap(), d.bootstrap() }) {
		ChildResult c = kafka_tool(
			"kafka.admin.ConfigCommand",
			{ "--bootstrap-server", b, "--describe", "--entity-type", "topics",
			  "--entity-name", "users", "--all" },
			120000);
		EXPECT_EQ(0, c.exit_code) << c.describe();
		EXPECT_NE(std::string::npos, c.out.find("  cleanup.policy=compact "))
			<< b << "\n" << c.out;
	}
	ASSERT_EQ("", d.stop(30000, &r));
	ChildResult deep = dump_files(paths_of(pdir, { "log" }), { "--deep-iteration" });
	EXPECT_EQ(0, deep.exit_code) << deep.describe();
	EXPECT_EQ(std::string::npos, deep.err.find("Exception")) << deep.err;
	/* Kafka knows no control type 7: it prints it as UNKNOWN(7). */
	EXPECT_TRUE(std::regex_search(
		deep.out, std::regex("baseOffset: " + std::to_string(end) +
				     " [^\n]*isControl: true[^\n]*\n\\| offset: " +
				     std::to_string(end) +
				     " [^\n]*controlType: UNKNOWN\\(7\\)")))
		<< "the barrier stays at its offset:\n" << deep.out.substr(0, 3000);
	expect_indexes_pass_kafkas_checks(pdir);
}

} // namespace
