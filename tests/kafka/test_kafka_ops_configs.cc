/* Topic config sync and loop detection (issue 19 items 2 and 7, suite
 * kafka-ops-configs), against a real Kafka broker.
 *
 * Goal: a topic config altered at the source with kafka-configs is
 * followed by kmirrord within config.sync.interval.ms: Kafka's own
 * kafka-configs --describe against kmirrord then lists the source's
 * dynamic configs but for the excluded ones (min.insync.replicas), a
 * --delete-config is followed too, and a synced retention.ms really
 * deletes kmirrord's old segments, but not those of a topic made
 * compact-only at the source nor of one kmirrord's config file gives a
 * retention; a restart without the source keeps
 * the synced configs. And a kmirrord configured to mirror
 * from a kmirror host that mirrors from it refuses, naming both clusters,
 * also around a ring of three (the chain upstream is named) and when the
 * ring is closed after the partition started (re-checked at every
 * metadata refresh). Local Produce after a stop meets the synced
 * max.message.bytes and message.timestamp.type as the broker's does.
 *
 * Method: one KRaft broker for the suite (SetUpTestSuite), whose own
 * retention never runs during the suite (its first check is an hour
 * away), so any segment kmirrord deletes is its own retention's doing.
 * Expectations come from the source: its dynamic topic configs as a
 * librdkafka DescribeConfigs reads them (polled, cheap) and then Kafka's
 * kafka-configs --describe against both, its watermarks. Every wait polls
 * kmirrorctl status or DescribeConfigs with a deadline. The loop case runs
 * two kmirrords, A mirroring the broker and B mirroring A, then restarts A
 * with B as its source; the ring cases three (A, B, C), and two on fixed
 * ports restarted in turn. The limits case sends the same records to the
 * broker and to kmirrord after `stop`: the broker's answers are the
 * expectations.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include <chrono>
#include <map>
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

const char *kConfigs = "kafka.admin.ConfigCommand";

/* "name" -> "value" of kafka-configs --describe (the dynamic configs of a
 * topic, as the tool prints them without --all). */
std::string describe_topic(const std::string &bootstrap, const std::string &topic,
			   std::map<std::string, std::string> *out)
{
	ChildResult r = kafka_tool(kConfigs, { "--bootstrap-server", bootstrap,
					       "--describe", "--entity-type", "topics",
					       "--entity-name", topic },
				   120000);
	out->clear();
	if (r.exit_code != 0)
		return "kafka-configs --describe: " + r.describe();
	std::regex re("^  ([a-z.]+)=([^ ]*) sensitive=false synonyms=.*$");
	size_t at = 0;
	while (at < r.out.size()) {
		size_t nl = r.out.find('\n', at);
		std::string l = r.out.substr(at, nl == std::string::npos ? nl : nl - at);
		std::smatch m;
		if (std::regex_match(l, m, re))
			(*out)[m[1]] = m[2];
		at = nl == std::string::npos ? r.out.size() : nl + 1;
	}
	return "";
}

/* "name" -> "value" of a topic's configs whose source is
 * DYNAMIC_TOPIC_CONFIG, with librdkafka's DescribeConfigs. */
std::string dynamic_configs(const std::string &bootstrap, const std::string &topic,
			    std::map<std::string, std::string> *out)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER, { { "bootstrap.servers", bootstrap } },
				    &err);
	if (rk == nullptr)
		return err;
	rd_kafka_ConfigResource_t *res =
		rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_TOPIC, topic.c_str());
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_DescribeConfigs(rk, &res, 1, nullptr, q);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 20000);
	out->clear();
	err = ev == nullptr ? "DescribeConfigs: no answer" : "";
	if (ev != nullptr && rd_kafka_event_error(ev))
		err = rd_kafka_event_error_string(ev);
	const rd_kafka_DescribeConfigs_result_t *r =
		ev && err.empty() ? rd_kafka_event_DescribeConfigs_result(ev) : nullptr;
	size_t n = 0, nc = 0;
	const rd_kafka_ConfigResource_t **rs =
		r ? rd_kafka_DescribeConfigs_result_resources(r, &n) : nullptr;
	if (n == 1 && rd_kafka_ConfigResource_error(rs[0]))
		err = rd_kafka_ConfigResource_error_string(rs[0]);
	const rd_kafka_ConfigEntry_t **es =
		n == 1 ? rd_kafka_ConfigResource_configs(rs[0], &nc) : nullptr;
	for (size_t i = 0; i < nc; i++)
		if (rd_kafka_ConfigEntry_source(es[i]) ==
		    RD_KAFKA_CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG)
			(*out)[rd_kafka_ConfigEntry_name(es[i])] =
				rd_kafka_ConfigEntry_value(es[i]) ?: "";
	if (ev != nullptr)
		rd_kafka_event_destroy(ev);
	rd_kafka_queue_destroy(q);
	rd_kafka_ConfigResource_destroy(res);
	rd_kafka_destroy(rk);
	return err;
}

std::string alter(const std::string &bootstrap, const std::string &topic,
		  const std::string &what, const std::string &configs)
{
	ChildResult r = kafka_tool(kConfigs, { "--bootstrap-server", bootstrap,
					       "--alter", "--entity-type", "topics",
					       "--entity-name", topic, what, configs },
				   120000);
	return r.exit_code == 0 ? "" : "kafka-configs --alter: " + r.describe();
}

/* The source's dynamic configs less config.sync.exclude's defaults. */
std::map<std::string, std::string> less_excluded(std::map<std::string, std::string> m)
{
	for (const char *x : { "min.insync.replicas", "unclean.leader.election.enable",
			       "follower.replication.throttled.replicas",
			       "leader.replication.throttled.replicas",
			       "message.timestamp.before.max.ms",
			       "message.timestamp.after.max.ms" })
		m.erase(x);
	return m;
}

std::string status_field(const Daemon &d, const char *field)
{
	ChildResult r;
	if (ctl(d, { "status", "--json" }, &r) != "")
		return "";
	json_t *j = json_loads(r.out.c_str(), 0, nullptr);
	std::string v = j ? (json_string_value(json_object_get(j, field)) ?: "") : "";
	json_decref(j);
	return v;
}

std::string flat(const std::map<std::string, std::string> &m)
{
	std::string s;
	for (auto &[k, v] : m)
		s += k + "=" + v + "\n";
	return s;
}

class KafkaOpsConfigs : public ::testing::Test {
protected:
	static KafkaBroker *broker_;
	static std::string start_error_;

	static void SetUpTestSuite()
	{
		if (broker_ != nullptr)
			return;
		broker_ = new KafkaBroker({ "log.retention.check.interval.ms=3600000",
					    "log.initial.task.delay.ms=3600000" });
		start_error_ = broker_->start();
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
	}
	void SetUp() override { ASSERT_EQ("", start_error_); }

	/* Poll kmirrord's DescribeConfigs until its dynamic topic configs
	 * are the source's, less the excluded names; *ours gets them. */
	void expect_follows(const Daemon &d, const std::string &topic,
			    std::map<std::string, std::string> *ours)
	{
		std::map<std::string, std::string> theirs;
		ASSERT_EQ("", dynamic_configs(broker_->bootstrap(), topic, &theirs));
		const auto want = less_excluded(theirs);
		ASSERT_TRUE(poll_until([&] {
			return dynamic_configs(d.bootstrap(), topic, ours) == "" &&
			       *ours == want;
		}, 30000)) << "want:\n" << flat(want) << "kmirrord:\n" << flat(*ours);
	}
};

KafkaBroker *KafkaOpsConfigs::broker_ = nullptr;
std::string KafkaOpsConfigs::start_error_;

/* kafka-configs --alter at the source, followed on kmirrord: set, changed,
 * deleted; min.insync.replicas stays out. Kafka's kafka-configs
 * --describe then prints on kmirrord what it prints on the broker, less
 * the excluded line; and a restart with the source gone keeps them. */
TEST_F(KafkaOpsConfigs, AlteredConfigsAreFollowedButTheExcludedOnes)
{
	ASSERT_EQ("", broker_->create_topic("cfg", 1, { "max.message.bytes=200000" }));
	TempDir dir("km-opscfg");
	Daemon d(dir.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
			       "topics=cfg", "config.sync.interval.ms=300" });
	ASSERT_EQ("", d.start());
	std::map<std::string, std::string> ours, theirs;
	/* synced at start: the config the topic was created with */
	ASSERT_NO_FATAL_FAILURE(expect_follows(d, "cfg", &ours));
	EXPECT_EQ("200000", ours["max.message.bytes"]) << flat(ours);

	ASSERT_EQ("", alter(broker_->bootstrap(), "cfg", "--add-config",
			    "retention.ms=86400000,cleanup.policy=[compact,delete],"
			    "max.message.bytes=300000,min.insync.replicas=1,"
			    "delete.retention.ms=1234"));
	ASSERT_NO_FATAL_FAILURE(expect_follows(d, "cfg", &ours));
	EXPECT_EQ("300000", ours["max.message.bytes"]) << flat(ours);
	EXPECT_EQ("compact,delete", ours["cleanup.policy"]) << flat(ours);
	EXPECT_EQ(0u, ours.count("min.insync.replicas")) << flat(ours);
	/* the tool's own view, on both sides */
	ASSERT_EQ("", describe_topic(broker_->bootstrap(), "cfg", &theirs));
	ASSERT_EQ("1", theirs["min.insync.replicas"]) << flat(theirs);
	ASSERT_EQ("", describe_topic(d.bootstrap(), "cfg", &ours));
	EXPECT_EQ(less_excluded(theirs), ours);

	ASSERT_EQ("", alter(broker_->bootstrap(), "cfg", "--delete-config",
			    "delete.retention.ms,max.message.bytes"));
	ASSERT_NO_FATAL_FAILURE(expect_follows(d, "cfg", &ours));
	EXPECT_EQ(0u, ours.count("delete.retention.ms")) << flat(ours);
	EXPECT_EQ(0u, ours.count("max.message.bytes")) << flat(ours);
	EXPECT_EQ(1u, ours.count("retention.ms")) << flat(ours);

	/* After a failover the source is gone: a restart keeps what was
	 * synced (nothing listens on port 1). */
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ(0, res.exit_code) << res.describe();
	Daemon again(dir.path(), { "source.bootstrap.servers=127.0.0.1:1", "topics=cfg",
				   "config.sync.interval.ms=300" });
	ASSERT_EQ("", again.start());
	std::map<std::string, std::string> kept;
	ASSERT_EQ("", dynamic_configs(again.bootstrap(), "cfg", &kept));
	EXPECT_EQ(ours, kept);
}

/* The earliest offset the broker still has of topic:0 (-1: unknown). */
int64_t source_earliest(KafkaBroker &b, const std::string &topic)
{
	int64_t low = -1, high = -1;
	return watermarks(b.bootstrap(), topic, 0, &low, &high) == "" ? low : -1;
}

/* A retention.ms set at the source deletes kmirrord's old segments while
 * the broker, whose retention has not run, still has them all. */
TEST_F(KafkaOpsConfigs, SyncedRetentionDeletesOldSegments)
{
	ASSERT_EQ("", broker_->create_topic("ret", 1));
	ProduceSpec spec = idempotent("ret", 0, 2000, 3);
	spec.compression = "none";
	ASSERT_EQ("", produce(broker_->bootstrap(), spec));
	int64_t low = -1, end = -1;
	ASSERT_EQ("", watermarks(broker_->bootstrap(), "ret", 0, &low, &end));
	ASSERT_EQ(2000, end);

	TempDir dir("km-opsret");
	Daemon d(dir.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
			       "topics=ret", "segment.bytes=16384",
			       "config.sync.interval.ms=300" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status([&](const std::map<std::string, PartStatus> &st) {
		return st.count("ret:0") && st.at("ret:0").hw == end;
	}, 60000));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	ASSERT_EQ(0, st.at("ret:0").log_start) << "kmirrord deleted before the sync";

	ASSERT_EQ("", alter(broker_->bootstrap(), "ret", "--add-config", "retention.ms=1000"));
	ASSERT_EQ("", d.wait_status([&](const std::map<std::string, PartStatus> &s) {
		return s.count("ret:0") && s.at("ret:0").log_start > 0;
	}, 60000)) << "kmirrord kept every segment";
	EXPECT_EQ(0, source_earliest(*broker_, "ret"))
		<< "the broker deleted too: the test proves nothing";
	ASSERT_EQ("", d.status(&st));
	EXPECT_LE(st.at("ret:0").log_start, end);
	std::map<std::string, std::string> ours;
	ASSERT_EQ("", dynamic_configs(d.bootstrap(), "ret", &ours));
	EXPECT_EQ("1000", ours["retention.ms"]) << flat(ours);
}

/* Where a synced retention.ms must not delete: a topic whose synced
 * cleanup.policy is compact only (Kafka deletes such a topic by no age),
 * and a topic kmirrord's own config file gives a retention (the file
 * wins). One worker, and the alters in order, the control topic last:
 * the control thread sends each round's limits to the worker and waits
 * for its reply before the next round, and the worker runs a retention
 * pass right after any new limits, so once the last topic has lost
 * segments the first two have had their pass under the synced values. */
TEST_F(KafkaOpsConfigs, CompactedAndFileSetTopicsKeepTheirSegments)
{
	const std::vector<std::string> topics = { "rca", "rcb", "rcz" };
	for (const std::string &t : topics) {
		ASSERT_EQ("", broker_->create_topic(t, 1));
		ProduceSpec spec = idempotent(t, 0, 1000, 7);
		spec.compression = "none";
		ASSERT_EQ("", produce(broker_->bootstrap(), spec));
	}
	TempDir dir("km-opskeep");
	Daemon d(dir.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
			       "topics=rca,rcb,rcz", "workers=1", "segment.bytes=16384",
			       "topic.retention.ms=rcb:-1", "config.sync.interval.ms=300" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status([&](const std::map<std::string, PartStatus> &st) {
		for (const std::string &t : topics)
			if (!st.count(t + ":0") || st.at(t + ":0").hw != 1000)
				return false;
		return true;
	}, 60000));
	auto synced = [&](const std::string &t, const std::string &k, const std::string &v) {
		std::map<std::string, std::string> m;
		return poll_until([&] {
			return dynamic_configs(d.bootstrap(), t, &m) == "" && m[k] == v;
		}, 30000);
	};
	ASSERT_EQ("", alter(broker_->bootstrap(), "rca", "--add-config",
			    "cleanup.policy=compact,retention.ms=1000"));
	ASSERT_TRUE(synced("rca", "cleanup.policy", "compact"));
	ASSERT_EQ("", alter(broker_->bootstrap(), "rcb", "--add-config", "retention.ms=1000"));
	ASSERT_TRUE(synced("rcb", "retention.ms", "1000"));
	ASSERT_EQ("", alter(broker_->bootstrap(), "rcz", "--add-config", "retention.ms=1000"));
	ASSERT_EQ("", d.wait_status([&](const std::map<std::string, PartStatus> &s) {
		return s.count("rcz:0") && s.at("rcz:0").log_start > 0;
	}, 60000)) << "the control topic kept every segment";
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ(0, st.at("rca:0").log_start) << "a compacted topic lost segments by age";
	EXPECT_EQ(0, st.at("rcb:0").log_start) << "the synced value beat the config file";
}

/* A mirrors the broker, B mirrors A; A restarted with B as its source is
 * a loop: its partition goes FAILED naming both cluster ids, and `start`
 * refuses it the same way. */
TEST_F(KafkaOpsConfigs, AMirrorLoopIsRefused)
{
	ASSERT_EQ("", broker_->create_topic("loop", 1));
	ASSERT_EQ("", produce(broker_->bootstrap(), idempotent("loop", 0, 50, 5)));
	TempDir da("km-opsloop-a"), db("km-opsloop-b");
	Daemon a(da.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
			      "topics=loop" });
	ASSERT_EQ("", a.start());
	auto caught_up = [&](const std::map<std::string, PartStatus> &st) {
		return st.count("loop:0") && st.at("loop:0").hw == 50;
	};
	ASSERT_EQ("", a.wait_status(caught_up, 60000));
	Daemon b(db.path(), { "source.bootstrap.servers=" + a.bootstrap(),
			      "topics=loop" });
	ASSERT_EQ("", b.start());
	ASSERT_EQ("", b.wait_status(caught_up, 60000)) << "B from A is no loop";
	const std::string a_id = status_field(a, "cluster_id");
	const std::string b_id = status_field(b, "cluster_id");
	ASSERT_NE("", a_id);
	ASSERT_NE("", b_id);
	ChildResult res;
	ASSERT_EQ("", a.stop(30000, &res));
	ASSERT_EQ(0, res.exit_code) << res.describe();

	Daemon a2(da.path(), { "source.bootstrap.servers=" + b.bootstrap(),
			       "topics=loop" });
	ASSERT_EQ("", a2.start());
	ASSERT_EQ("", a2.wait_status([&](const std::map<std::string, PartStatus> &st) {
		return st.count("loop:0") && st.at("loop:0").state == "FAILED";
	}, 30000));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", a2.status(&st));
	const std::string why = st.at("loop:0").reason;
	EXPECT_NE(std::string::npos, why.find("mirror loop")) << why;
	EXPECT_NE(std::string::npos, why.find(a_id)) << why;
	EXPECT_NE(std::string::npos, why.find(b_id)) << why;

	ChildResult r;
	EXPECT_NE("", ctl(a2, { "start", "loop:0" }, &r));
	const std::string said = r.out + r.err;
	EXPECT_NE(std::string::npos, said.find("mirror loop")) << said;
	EXPECT_NE(std::string::npos, said.find(a_id)) << said;
	EXPECT_NE(std::string::npos, said.find(b_id)) << said;
	ASSERT_EQ("", a2.status(&st));
	EXPECT_EQ("FAILED", st.at("loop:0").state);
}

int64_t wall_ms()
{
	return std::chrono::duration_cast<std::chrono::milliseconds>(
		       std::chrono::system_clock::now().time_since_epoch())
		.count();
}

/* One record of value_size bytes, timestamp ts (CreateTime as the
 * client gives it), to topic:0 with librdkafka: "" and the delivery
 * report's timestamp and type, or the delivery's error name. */
std::string produce_stamped(const std::string &bootstrap, const std::string &topic,
			    size_t value_size, int64_t ts, int64_t *ts_out,
			    rd_kafka_timestamp_type_t *type_out)
{
	struct Dr {
		std::string err = "no delivery report";
		int64_t ts = -1;
		rd_kafka_timestamp_type_t type = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
	} dr;
	std::string err;
	rd_kafka_t *rk = client_new(
		RD_KAFKA_PRODUCER, { { "bootstrap.servers", bootstrap }, { "linger.ms", "0" } },
		&err, [&](rd_kafka_conf_t *c) {
			rd_kafka_conf_set_opaque(c, &dr);
			rd_kafka_conf_set_dr_msg_cb(c, [](rd_kafka_t *, const rd_kafka_message_t *m,
							  void *o) {
				Dr *d = static_cast<Dr *>(o);
				d->err = m->err ? rd_kafka_err2name(m->err) : "";
				d->ts = rd_kafka_message_timestamp(m, &d->type);
			});
		});
	if (rk == nullptr)
		return err;
	std::string value(value_size, 'v');
	rd_kafka_resp_err_t e = rd_kafka_producev(
		rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(0),
		RD_KAFKA_V_VALUE(value.data(), value.size()), RD_KAFKA_V_TIMESTAMP(ts),
		RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
	if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
		dr.err = std::string("producev: ") + rd_kafka_err2name(e);
	else
		rd_kafka_flush(rk, 20000);
	rd_kafka_destroy(rk);
	*ts_out = dr.ts;
	*type_out = dr.type;
	return dr.err;
}

/* Kafka's ProducerPerformance (a Java producer) sending one record of
 * size bytes: what it printed, errors included. */
std::string java_produce_one(const std::string &bootstrap, const std::string &topic,
			     int size)
{
	ChildResult r = kafka_tool("org.apache.kafka.tools.ProducerPerformance",
				   { "--topic", topic, "--num-records", "1", "--record-size",
				     std::to_string(size), "--throughput", "-1",
				     "--producer-props", "bootstrap.servers=" + bootstrap,
				     "acks=all", "retries=0" },
				   120000);
	return r.out + r.err;
}

/* Kafka's console consumer from offset 0 of topic:0, n records, each
 * line "<TimestampType>:<ms>\tOffset:<n>\t..." as its formatter prints
 * them with print.timestamp. */
std::vector<std::string> timestamps(const std::string &bootstrap, const std::string &topic,
				    int n)
{
	ChildResult r = kafka_tool(
		"org.apache.kafka.tools.consumer.ConsoleConsumer",
		{ "--bootstrap-server", bootstrap, "--topic", topic, "--partition", "0",
		  "--offset", "earliest", "--max-messages", std::to_string(n),
		  "--timeout-ms", "30000", "--formatter-property", "print.timestamp=true",
		  "--formatter-property", "print.value=false" },
		120000);
	std::vector<std::string> v;
	std::regex re("((CreateTime|LogAppendTime):-?[0-9]+)");
	for (std::sregex_iterator it(r.out.begin(), r.out.end(), re), z; it != z; ++it)
		v.push_back((*it)[1]);
	return v;
}

/* max.message.bytes and message.timestamp.type, synced from the source,
 * hold for local Produce once the partition is stopped: the same sends
 * meet the same answers from kmirrord as from the broker. A batch over
 * max.message.bytes is refused with MESSAGE_TOO_LARGE (librdkafka) and
 * Kafka's Java producer reports RecordTooLargeException; a record sent
 * with CreateTime 1000 is stamped with the broker's time, its Produce
 * answer says so (log_append_time_ms: LOG_APPEND_TIME in the delivery
 * report) and Kafka's console consumer prints LogAppendTime:<that time>. */
TEST_F(KafkaOpsConfigs, SyncedMessageLimitsHoldForLocalProduce)
{
	ASSERT_EQ("", broker_->create_topic("lim", 1, { "max.message.bytes=4000",
						       "message.timestamp.type=LogAppendTime" }));
	int64_t ts = -1;
	rd_kafka_timestamp_type_t type;
	/* what the source answers: the expectations */
	const std::string src_big = produce_stamped(broker_->bootstrap(), "lim", 6000, 1000,
						    &ts, &type);
	ASSERT_NE("", src_big) << "the broker took a record over max.message.bytes";
	const std::string src_java = java_produce_one(broker_->bootstrap(), "lim", 6000);
	ASSERT_NE(std::string::npos, src_java.find("RecordTooLargeException")) << src_java;
	int64_t before = wall_ms();
	ASSERT_EQ("", produce_stamped(broker_->bootstrap(), "lim", 100, 1000, &ts, &type));
	ASSERT_EQ(RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME, type);
	ASSERT_GE(ts, before);
	int64_t low = -1, end = -1;
	ASSERT_EQ("", watermarks(broker_->bootstrap(), "lim", 0, &low, &end));

	TempDir dir("km-opslim");
	Daemon d(dir.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
			       "topics=lim", "config.sync.interval.ms=300" });
	ASSERT_EQ("", d.start());
	std::map<std::string, std::string> ours;
	ASSERT_NO_FATAL_FAILURE(expect_follows(d, "lim", &ours));
	ASSERT_EQ("LogAppendTime", ours["message.timestamp.type"]) << flat(ours);
	ASSERT_EQ("", d.wait_status([&](const std::map<std::string, PartStatus> &st) {
		return st.count("lim:0") && st.at("lim:0").hw == end;
	}, 60000));
	ChildResult r;
	ASSERT_EQ("", ctl(d, { "stop", "lim", "--json" }, &r));

	EXPECT_EQ(src_big, produce_stamped(d.bootstrap(), "lim", 6000, 1000, &ts, &type));
	const std::string ours_java = java_produce_one(d.bootstrap(), "lim", 6000);
	EXPECT_NE(std::string::npos, ours_java.find("RecordTooLargeException")) << ours_java;
	before = wall_ms();
	ASSERT_EQ("", produce_stamped(d.bootstrap(), "lim", 100, 1000, &ts, &type));
	const int64_t after = wall_ms();
	EXPECT_EQ(RD_KAFKA_TIMESTAMP_LOG_APPEND_TIME, type);
	EXPECT_GE(ts, before);
	EXPECT_LE(ts, after);

	/* The mirrored record as the broker's consumer reads it, then the
	 * barrier's offset, then ours stamped with the time the answer gave. */
	const std::vector<std::string> theirs = timestamps(broker_->bootstrap(), "lim", 1);
	const std::vector<std::string> read = timestamps(d.bootstrap(), "lim", 2);
	ASSERT_EQ(1u, theirs.size());
	ASSERT_EQ(2u, read.size());
	EXPECT_EQ(theirs[0], read[0]);
	EXPECT_EQ("LogAppendTime:" + std::to_string(ts), read[1]);
}

/* kmirror.source.cluster.ids of the one broker of bootstrap (librdkafka:
 * Metadata for its id, then DescribeConfigs of it), into *ids. */
std::string broker_sources(const std::string &bootstrap, std::string *ids)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_PRODUCER, { { "bootstrap.servers", bootstrap } },
				    &err);
	if (rk == nullptr)
		return err;
	const rd_kafka_metadata_t *md = nullptr;
	if (rd_kafka_metadata(rk, 0, nullptr, &md, 10000) != RD_KAFKA_RESP_ERR_NO_ERROR ||
	    md->broker_cnt != 1) {
		if (md != nullptr)
			rd_kafka_metadata_destroy(md);
		rd_kafka_destroy(rk);
		return "Metadata: no one broker";
	}
	std::string id = std::to_string(md->brokers[0].id);
	rd_kafka_metadata_destroy(md);
	rd_kafka_ConfigResource_t *res =
		rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, id.c_str());
	rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
	rd_kafka_DescribeConfigs(rk, &res, 1, nullptr, q);
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 20000);
	err = ev == nullptr ? "DescribeConfigs: no answer" : "";
	const rd_kafka_DescribeConfigs_result_t *r =
		ev ? rd_kafka_event_DescribeConfigs_result(ev) : nullptr;
	size_t n = 0, nc = 0;
	const rd_kafka_ConfigResource_t **rs =
		r ? rd_kafka_DescribeConfigs_result_resources(r, &n) : nullptr;
	const rd_kafka_ConfigEntry_t **es =
		n == 1 ? rd_kafka_ConfigResource_configs(rs[0], &nc) : nullptr;
	ids->clear();
	for (size_t i = 0; i < nc; i++)
		if (std::string(rd_kafka_ConfigEntry_name(es[i])) == "kmirror.source.cluster.ids")
			*ids = rd_kafka_ConfigEntry_value(es[i]) ?: "";
	if (ev != nullptr)
		rd_kafka_event_destroy(ev);
	rd_kafka_queue_destroy(q);
	rd_kafka_ConfigResource_destroy(res);
	rd_kafka_destroy(rk);
	return err;
}

bool lists(const std::string &ids, const std::string &id)
{
	return ("," + ids + ",").find("," + id + ",") != std::string::npos;
}

/* A loopback port nobody listens on now. */
uint16_t unused_port()
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {};
	socklen_t len = sizeof(a);
	uint16_t port = 0;

	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

auto caught_up_to(int64_t end)
{
	return [end](const std::map<std::string, PartStatus> &st) {
		return st.count("ring:0") && st.at("ring:0").hw == end;
	};
}

/* The ring's partition FAILED with a loop reason naming both ids. */
void expect_loop_refused(Daemon &d, const std::string &ours, const std::string &theirs)
{
	ASSERT_EQ("", d.wait_status([&](const std::map<std::string, PartStatus> &st) {
		return st.count("ring:0") && st.at("ring:0").state == "FAILED";
	}, 30000));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	const std::string why = st.at("ring:0").reason;
	EXPECT_NE(std::string::npos, why.find("mirror loop")) << why;
	EXPECT_NE(std::string::npos, why.find(ours)) << why;
	EXPECT_NE(std::string::npos, why.find(theirs)) << why;
	ChildResult r;
	ASSERT_EQ("", ctl(d, { "metrics" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("kmirror_mirror_loops_refused_total 1"))
		<< r.out.substr(0, 2000);
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	EXPECT_NE(std::string::npos, res.err.find("mirror loop refused")) << res.err;
}

/* A three-host ring: A mirrors the broker, B mirrors A, C mirrors B; C
 * names its whole chain (B, A and the broker's cluster) in
 * kmirror.source.cluster.ids, so A restarted with C as its source is
 * refused though C does not mirror from A directly. */
TEST_F(KafkaOpsConfigs, ARingOfThreeIsRefused)
{
	ASSERT_EQ("", broker_->create_topic("ring", 1));
	ASSERT_EQ("", produce(broker_->bootstrap(), idempotent("ring", 0, 30, 5)));
	TempDir da("km-ring-a"), db("km-ring-b"), dc("km-ring-c");
	const std::string fast = "metadata.refresh.interval.ms=300";
	Daemon a(da.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
			      "topics=ring", fast });
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", a.wait_status(caught_up_to(30), 60000));
	Daemon b(db.path(), { "source.bootstrap.servers=" + a.bootstrap(), "topics=ring", fast });
	ASSERT_EQ("", b.start());
	ASSERT_EQ("", b.wait_status(caught_up_to(30), 60000)) << "B from A is no loop";
	Daemon c(dc.path(), { "source.bootstrap.servers=" + b.bootstrap(), "topics=ring", fast });
	ASSERT_EQ("", c.start());
	ASSERT_EQ("", c.wait_status(caught_up_to(30), 60000)) << "C from B is no loop";
	const std::string a_id = status_field(a, "cluster_id"), b_id = status_field(b, "cluster_id"),
			  c_id = status_field(c, "cluster_id"),
			  k_id = status_field(a, "source_cluster_id");
	ASSERT_NE("", k_id);
	std::string ids;
	EXPECT_TRUE(poll_until([&] {
		return broker_sources(c.bootstrap(), &ids) == "" && lists(ids, b_id) &&
		       lists(ids, a_id) && lists(ids, k_id);
	}, 30000)) << "C names " << ids << "; want " << b_id << "," << a_id << "," << k_id;

	ChildResult res;
	ASSERT_EQ("", a.stop(30000, &res));
	Daemon a2(da.path(), { "source.bootstrap.servers=" + c.bootstrap(), "topics=ring", fast });
	ASSERT_EQ("", a2.start());
	ASSERT_NO_FATAL_FAILURE(expect_loop_refused(a2, a_id, c_id));
}

/* A ring closed after its hosts started. A mirrors the broker, B mirrors
 * A; both stop. A comes back with B as its source while B is down, so
 * its check at start has nobody to ask, and is paused at once (its
 * partition then names no source); B comes back mirroring from A, whose
 * answer names nobody, and catches up. Resumed, A's partition meets B
 * mirroring from A: at its next metadata refresh it is FAILED with the
 * loop as its reason (whether or not the source cluster id check, which
 * sees B answer for a log that mirrors the broker, failed it first),
 * logged and counted in kmirror_mirror_loops_refused_total. */
TEST_F(KafkaOpsConfigs, ARingClosedLaterIsRefusedAtTheNextRefresh)
{
	ASSERT_EQ("", broker_->create_topic("ring2", 1));
	ASSERT_EQ("", produce(broker_->bootstrap(), idempotent("ring2", 0, 30, 5)));
	TempDir da("km-ring2-a"), db("km-ring2-b");
	const std::string fast = "metadata.refresh.interval.ms=300";
	const std::string pa = "127.0.0.1:" + std::to_string(unused_port()),
			  pb = "127.0.0.1:" + std::to_string(unused_port());
	auto up = [](int64_t end) {
		return [end](const std::map<std::string, PartStatus> &st) {
			return st.count("ring2:0") && st.at("ring2:0").hw == end &&
			       st.at("ring2:0").state == "MIRRORING";
		};
	};
	Daemon a(da.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
			      "topics=ring2", "listeners=" + pa, fast });
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", a.wait_status(up(30), 60000));
	Daemon b(db.path(), { "source.bootstrap.servers=" + pa, "topics=ring2",
			      "listeners=" + pb, fast });
	ASSERT_EQ("", b.start());
	ASSERT_EQ("", b.wait_status(up(30), 60000));
	const std::string a_id = status_field(a, "cluster_id"), b_id = status_field(b, "cluster_id");
	ChildResult res;
	ASSERT_EQ("", b.stop(30000, &res));
	ASSERT_EQ("", a.stop(30000, &res));

	Daemon a2(da.path(), { "source.bootstrap.servers=" + pb, "topics=ring2",
			       "listeners=" + pa, fast });
	ASSERT_EQ("", a2.start());
	ChildResult r;
	ASSERT_EQ("", ctl(a2, { "pause", "ring2:0" }, &r));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", a2.status(&st));
	ASSERT_EQ("PAUSED", st.at("ring2:0").state) << st.at("ring2:0").reason;
	Daemon b2(db.path(), { "source.bootstrap.servers=" + pa, "topics=ring2",
			       "listeners=" + pb, fast });
	ASSERT_EQ("", b2.start());
	ASSERT_EQ("", b2.wait_status(up(30), 60000)) << "B's check at start saw no loop yet";
	ASSERT_EQ("", ctl(a2, { "resume", "ring2:0" }, &r));
	ASSERT_EQ("", a2.wait_status([&](const std::map<std::string, PartStatus> &s) {
		return s.count("ring2:0") && s.at("ring2:0").state == "FAILED" &&
		       s.at("ring2:0").reason.find("mirror loop") != std::string::npos;
	}, 30000));
	ASSERT_EQ("", a2.status(&st));
	const std::string why = st.at("ring2:0").reason;
	EXPECT_NE(std::string::npos, why.find(a_id)) << why;
	EXPECT_NE(std::string::npos, why.find(b_id)) << why;
	ASSERT_EQ("", ctl(a2, { "metrics" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("kmirror_mirror_loops_refused_total 1"));
	ASSERT_EQ("", a2.stop(30000, &res));
	EXPECT_NE(std::string::npos, res.err.find("mirror loop refused")) << res.err;
}

} // namespace
