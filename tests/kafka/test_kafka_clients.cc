/* Kafka's own clients and tools against kmirrord (issue 14, suite
 * kafka-clients): do Kafka's console consumer, get-offsets, topics,
 * configs, cluster and api-versions tools and its Java producer work on
 * kmirrord as they do on Kafka, while it mirrors a real broker and after
 * failover, and do the calls kmirrord does not serve fail as Kafka's
 * clients expect, with the front end serving on?
 *
 * Method: one KRaft broker for the suite (kafka_broker.h), two topics: "ctx"
 * (librdkafka transactions, every third aborted: real COMMIT and ABORT
 * markers) and "cplain" (2 partitions, Kafka's producer-perf-test,
 * idempotent), both with 1 MiB segments. kmirrord mirrors them until its
 * high watermarks are the broker's. Every expectation comes from the
 * broker: the same tool run against it, or librdkafka's reading of it.
 * - kafka-console-consumer, read_uncommitted and read_committed, prints on
 *   kmirrord exactly what it prints on the broker;
 * - kafka-get-offsets (latest, earliest, a record's timestamp, and the
 *   max timestamp, earliest local and latest tiered of ListOffsets v7-9)
 *   prints the same lines;
 * - kafka-topics --describe prints the broker's TopicId (Metadata v10+),
 *   the one kmirrord's partition.metadata holds, and --topic-id finds it;
 * - kafka-topics --describe / --list, kafka-configs --describe (topic,
 *   broker, unknown topic), kafka-cluster cluster-id and
 *   kafka-broker-api-versions answer (DescribeConfigs, DescribeCluster);
 * - kafka-acls --list and kafka-configs --alter fail with the client's
 *   UnsupportedVersionException naming the API (kmirrord does not
 *   advertise it, so Kafka's client never sends it); kafka-topics --delete
 *   and kafka-delete-records of the mirrored topic are refused with
 *   PolicyViolationException (served since issue 20: a mirrored topic is
 *   the source's until stopped; kafka-admin tests them); kmirrord counts no
 *   protocol error and answers the next request; a request with an API key
 *   Kafka does not know, or does not serve on its broker listener, closes
 *   the connection on both, and ApiVersions at an unknown version gets
 *   UNSUPPORTED_VERSION on both (what SocketServer does);
 * - after `kmirrorctl stop --all`: the consumers still read what the
 *   broker serves, get-offsets' latest is the barrier + 1, and Kafka's
 *   verifiable producer (acks=all, idempotent) gets every record
 *   acknowledged at offsets barrier + 1, + 2 ..., which the console
 *   consumer then reads back exactly.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const std::string kSeg = "segment.bytes=1048576";

std::vector<std::string> lines_of(const std::string &text)
{
	std::vector<std::string> v;
	std::istringstream in(text);
	for (std::string l; std::getline(in, l);)
		if (!l.empty())
			v.push_back(l);
	return v;
}

std::string sorted_lines(const std::string &text)
{
	std::vector<std::string> v = lines_of(text);
	std::sort(v.begin(), v.end());
	std::string s;
	for (auto &l : v)
		s += l + "\n";
	return s;
}

ChildResult tool(const std::string &cls, std::vector<std::string> args)
{
	return kafka_tool(cls, args, 120000);
}

const char *kTopics = "org.apache.kafka.tools.TopicCommand";
const char *kConfigs = "kafka.admin.ConfigCommand";
const char *kOffsets = "org.apache.kafka.tools.GetOffsetShell";

/* "topic:partition:offset" lines of kafka-get-offsets for one topic. */
std::string get_offsets(const std::string &bootstrap, const std::string &topic,
			const std::string &time, std::string *out)
{
	ChildResult r = tool(kOffsets, { "--bootstrap-server", bootstrap, "--topic",
					 topic, "--time", time });
	*out = sorted_lines(r.out);
	return r.exit_code == 0 ? "" : "kafka-get-offsets: " + r.describe();
}

/* "name=value sensitive=... synonyms={...}" lines of kafka-configs
 * --describe --all, by name. */
std::map<std::string, std::string> config_lines(const std::string &out)
{
	std::map<std::string, std::string> m;
	std::regex re("^  ([a-z.]+)=([^ ]*) sensitive=false synonyms=\\{(.*)\\}$");
	for (auto &l : lines_of(out)) {
		std::smatch s;
		if (std::regex_match(l, s, re))
			m[s[1]] = s[2].str() + " {" + s[3].str() + "}";
	}
	return m;
}

/* The value of a config line ("value {synonyms}"). */
std::string value_of(const std::string &line)
{
	return line.substr(0, line.find(' '));
}

/* Raw Kafka request over TCP: send one frame, read the answer. Returns
 * "closed" if the peer closed the connection without answering, else the
 * answer's error code (int16 after the correlation id: ApiVersions). */
std::string raw_request(uint16_t port, int16_t key, int16_t version,
			bool flexible_header, int16_t *error_code)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
		if (fd >= 0)
			close(fd);
		return "connect failed";
	}
	std::string body;
	auto be16 = [&](int16_t v) {
		body += (char)((uint16_t)v >> 8);
		body += (char)(v & 0xff);
	};
	be16(key);
	be16(version);
	body += std::string("\0\0\0\x2a", 4); /* correlation id 42 */
	be16(4);
	body += "test";
	if (flexible_header)
		body += '\0'; /* no tagged fields */
	body += std::string(8, '\0'); /* some body bytes */
	uint32_t n = htonl((uint32_t)body.size());
	std::string frame((const char *)&n, 4);
	frame += body;
	if (write(fd, frame.data(), frame.size()) != (ssize_t)frame.size()) {
		close(fd);
		return "write failed";
	}
	std::string in;
	struct pollfd p = { fd, POLLIN, 0 };
	int64_t deadline = now_ms() + 10000;
	while (in.size() < 10 && now_ms() < deadline) {
		if (poll(&p, 1, 200) <= 0)
			continue;
		char buf[256];
		ssize_t got = read(fd, buf, sizeof(buf));
		if (got <= 0)
			break;
		in.append(buf, (size_t)got);
	}
	close(fd);
	if (in.empty())
		return "closed";
	if (in.size() < 10)
		return "short answer";
	*error_code = (int16_t)((uint8_t)in[8] << 8 | (uint8_t)in[9]);
	return "answered";
}

/* The stop reply's barrier offset of each "topic:p". */
std::map<std::string, int64_t> barriers_of(const std::string &out)
{
	std::map<std::string, int64_t> m;
	std::regex re("\\{\"partition\": ?\"([^\"]+)\"[^}]*\"barrier_offset\": ?([0-9]+)");
	for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
		m[(*it)[1]] = std::stoll((*it)[2]);
	return m;
}

class KafkaClients : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		broker_ = new KafkaBroker({ "log.flush.interval.messages=1000000" });
		std::string e = broker_->start();
		if (!e.empty()) {
			setup_error_ = "broker: " + e;
			return;
		}
		fprintf(stderr, "kafka broker up in %lld ms\n",
			(long long)broker_->start_ms());
		setup_error_ = fill();
	}

	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
	}

	/* The topics and their records, on the broker. */
	static std::string fill()
	{
		std::string e;
		if (!(e = broker_->create_topic("ctx", 1, { kSeg })).empty() ||
		    !(e = broker_->create_topic("cplain", 2, { kSeg })).empty())
			return e;
		ProduceSpec c;
		c.topic = "ctx";
		c.count = 600;
		c.mode = ProducerMode::kTransactional;
		c.txn_size = 50;
		c.abort_every = 3;
		c.flush_every = 25;
		c.keys = Keys::kSeq;
		ProduceResult cr;
		if (!(e = produce(broker_->bootstrap(), c, &cr)).empty())
			return "ctx: " + e;
		if (cr.aborted == 0 || cr.committed == 0)
			return "ctx: no aborted or no committed transaction";
		return broker_->producer_perf("cplain", 4000, 100,
					      { "acks=all", "enable.idempotence=true",
						"linger.ms=5" });
	}

	void SetUp() override
	{
		ASSERT_EQ("", setup_error_);
		ASSERT_EQ("", dir_.error());
	}

	/* A kmirrord mirroring both topics, caught up with the broker. */
	void mirror(Daemon &d)
	{
		ASSERT_EQ("", d.start());
		std::map<std::string, int64_t> ends;
		for (auto &[t, n] : parts_)
			for (int p = 0; p < n; p++) {
				int64_t lo = -1, hi = -1;
				ASSERT_EQ("", watermarks(broker_->bootstrap(), t, p, &lo, &hi));
				ends[t + ":" + std::to_string(p)] = hi;
			}
		ASSERT_EQ("", d.wait_status(
				      [&](const std::map<std::string, PartStatus> &st) {
					      for (auto &[k, end] : ends)
						      if (!st.count(k) || st.at(k).hw != end)
							      return false;
					      return true;
				      },
				      120000));
	}

	Daemon daemon()
	{
		return Daemon(dir_.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
					     "topics=ctx,cplain", kSeg });
	}

	/* Records librdkafka reads on the broker with this isolation. */
	int64_t count_on_broker(const std::string &t, int p, bool committed)
	{
		std::vector<Message> v;
		ConsumeSpec cs;
		cs.topic = t;
		cs.partition = p;
		cs.read_committed = committed;
		EXPECT_EQ("", consume(broker_->bootstrap(), cs, &v));
		return (int64_t)v.size();
	}

	/* kafka-console-consumer prints the same on kmirrord as on the broker. */
	void expect_console_alike(const Daemon &d, const std::string &t, int p,
				  const std::string &isolation)
	{
		int64_t n = count_on_broker(t, p, isolation == "read_committed");
		ASSERT_GT(n, 0);
		std::string theirs, ours;
		ASSERT_EQ("", console_consume(broker_->bootstrap(), t, p, n, isolation, &theirs));
		ASSERT_EQ("", console_consume(d.bootstrap(), t, p, n, isolation, &ours));
		EXPECT_EQ((size_t)n, lines_of(ours).size()) << t << ":" << p;
		EXPECT_TRUE(theirs == ours) << t << ":" << p << " " << isolation;
	}

	static KafkaBroker *broker_;
	static std::string setup_error_;
	const std::map<std::string, int> parts_ = { { "ctx", 1 }, { "cplain", 2 } };
	TempDir dir_{ "km-kafka-cl" };
};

KafkaBroker *KafkaClients::broker_ = nullptr;
std::string KafkaClients::setup_error_;

TEST_F(KafkaClients, ConsoleConsumerReadsAsOnKafkaWhileMirroring)
{
	Daemon d = daemon();
	ASSERT_NO_FATAL_FAILURE(mirror(d));
	for (const char *iso : { "read_uncommitted", "read_committed" })
		ASSERT_NO_FATAL_FAILURE(expect_console_alike(d, "ctx", 0, iso));
	ASSERT_NO_FATAL_FAILURE(expect_console_alike(d, "cplain", 1, "read_uncommitted"));
}

/* Latest, earliest, and the offset of a record's timestamp (the first at
 * or after it), for every partition of both topics. */
TEST_F(KafkaClients, GetOffsetsAsOnKafkaWhileMirroring)
{
	Daemon d = daemon();
	ASSERT_NO_FATAL_FAILURE(mirror(d));
	for (const char *t : { "ctx", "cplain" }) {
		/* The earliest of the partitions' middle records' timestamps,
		 * so that every partition has a record at or after it (one
		 * partition's alone left the other, produced earlier, with
		 * none: the tool then prints no line for it). */
		int64_t mid_ts = INT64_MAX;
		for (int p = 0; p < parts_.at(t); p++) {
			std::vector<Message> v;
			ConsumeSpec cs;
			cs.topic = t;
			cs.partition = p;
			ASSERT_EQ("", consume(broker_->bootstrap(), cs, &v));
			ASSERT_GT(v.size(), 100u);
			mid_ts = std::min(mid_ts, v[v.size() / 2].timestamp);
		}
		std::string mid = std::to_string(mid_ts);
		for (const std::string &time : { std::string("-1"), std::string("-2"), mid }) {
			std::string theirs, ours;
			ASSERT_EQ("", get_offsets(broker_->bootstrap(), t, time, &theirs));
			ASSERT_EQ("", get_offsets(d.bootstrap(), t, time, &ours));
			EXPECT_EQ((size_t)parts_.at(t), lines_of(theirs).size()) << theirs;
			EXPECT_EQ(theirs, ours) << t << " --time " << time;
		}
	}
	/* Max timestamp (ListOffsets v7), earliest local (v8), latest tiered
	 * (v9), both topics in one run each (--topic is a pattern). The tool
	 * prints no line for an offset of -1, all latest tiered gives without
	 * tiered storage: there it must only succeed (the client refuses the
	 * call below v9). */
	for (const std::string time : { "-3", "-4", "-5" }) {
		std::string theirs, ours;
		ASSERT_EQ("", get_offsets(broker_->bootstrap(), "ctx|cplain", time, &theirs));
		ASSERT_EQ("", get_offsets(d.bootstrap(), "ctx|cplain", time, &ours));
		EXPECT_EQ(time == "-5" ? 0u : 3u, lines_of(theirs).size()) << theirs;
		EXPECT_EQ(theirs, ours) << "--time " << time;
	}
}

/* The partition lines of kafka-topics --describe, without the fields of
 * DescribeTopicPartitions kmirrord does not serve (Elr, LastKnownElr). */
std::vector<std::string> partition_lines(const std::string &out)
{
	std::vector<std::string> v;
	std::regex re("^\\s*Topic: (\\S+)\\s+Partition: ([0-9]+)\\s+Leader: ([0-9-]+)"
		      "\\s+Replicas: (\\S+)\\s+Isr: (\\S+).*");
	for (auto &l : lines_of(out)) {
		std::smatch m;
		if (std::regex_match(l, m, re))
			v.push_back(m[1].str() + ":" + m[2].str() + " leader " + m[3].str() +
				    " replicas " + m[4].str() + " isr " + m[5].str());
	}
	return v;
}

/* The "TopicId: X" of kafka-topics --describe ("" if none). */
std::string topic_id_of(const std::string &out)
{
	std::smatch m;
	std::regex re("TopicId: (\\S+)");
	return std::regex_search(out, m, re) ? m[1].str() : "";
}

/* The id a partition directory's partition.metadata names. */
std::string metadata_topic_id(const std::string &dir)
{
	std::smatch m;
	std::string text = read_file(dir + "/partition.metadata");
	std::regex re("topic_id: (\\S+)");
	return std::regex_search(text, m, re) ? m[1].str() : "";
}

/* kafka-topics --describe: as on the broker (one node there too), with its
 * TopicId (Metadata v10+), the one partition.metadata holds in every
 * partition directory under data_dir (if given); and --list. */
void expect_topics_alike(const std::string &theirs_b, const std::string &ours_b,
			 const std::map<std::string, int> &parts,
			 const std::string &data_dir = "")
{
	for (auto &[t, n] : parts) {
		ChildResult theirs = tool(kTopics, { "--bootstrap-server", theirs_b,
						     "--describe", "--topic", t });
		ChildResult ours = tool(kTopics, { "--bootstrap-server", ours_b,
						   "--describe", "--topic", t });
		ASSERT_EQ(0, theirs.exit_code) << theirs.describe();
		ASSERT_EQ(0, ours.exit_code) << ours.describe();
		EXPECT_EQ((size_t)n, partition_lines(ours.out).size()) << ours.out;
		EXPECT_EQ(partition_lines(theirs.out), partition_lines(ours.out)) << ours.out;
		std::string count = "PartitionCount: " + std::to_string(n);
		EXPECT_NE(std::string::npos, ours.out.find(count)) << ours.out;
		std::string id = topic_id_of(theirs.out);
		EXPECT_EQ(22u, id.size()) << theirs.out;
		EXPECT_EQ(id, topic_id_of(ours.out)) << ours.out;
		for (int p = 0; !data_dir.empty() && p < n; p++)
			EXPECT_EQ(id, metadata_topic_id(data_dir + "/" + t + "-" +
							std::to_string(p)));
	}
	/* By topic id (the tool checks the id among all topics' first, then
	 * describes it by id): the topic, as on the broker. An id no topic
	 * has never reaches the wire (the tool's own "does not exist"):
	 * Raw.MetadataNamesTopicIdsAndFindsTopicsById has it. */
	ChildResult named = tool(kTopics, { "--bootstrap-server", theirs_b, "--describe",
					    "--topic", "ctx" });
	std::string id = topic_id_of(named.out);
	ASSERT_FALSE(id.empty()) << named.describe();
	for (const std::string &b : { theirs_b, ours_b }) {
		ChildResult by_id = tool(kTopics, { "--bootstrap-server", b, "--describe",
						    "--topic-id", id });
		ASSERT_EQ(0, by_id.exit_code) << b << ": " << by_id.describe();
		EXPECT_EQ(partition_lines(named.out), partition_lines(by_id.out)) << by_id.out;
		EXPECT_EQ(id, topic_id_of(by_id.out)) << by_id.out;
	}
	ChildResult lt = tool(kTopics, { "--bootstrap-server", theirs_b, "--list",
					 "--exclude-internal" });
	ChildResult lo = tool(kTopics, { "--bootstrap-server", ours_b, "--list",
					 "--exclude-internal" });
	ASSERT_EQ(0, lo.exit_code) << lo.describe();
	EXPECT_EQ(sorted_lines(lt.out), sorted_lines(lo.out));
}

/* kafka-configs --describe --all of a topic: only Kafka's topic config
 * names, the values kmirror behaves by equal to the broker's where both
 * follow Kafka's defaults or the same setting; the broker's own configs;
 * an unknown topic fails as on the broker. */
void expect_configs(const std::string &theirs_b, const std::string &ours_b)
{
	std::vector<std::string> topic = { "--describe", "--entity-type", "topics",
					   "--entity-name", "cplain", "--all" };
	auto with = [&](const std::string &b, std::vector<std::string> a) {
		a.insert(a.begin(), { "--bootstrap-server", b });
		return tool(kConfigs, a);
	};
	ChildResult ct = with(theirs_b, topic), co = with(ours_b, topic);
	ASSERT_EQ(0, ct.exit_code) << ct.describe();
	ASSERT_EQ(0, co.exit_code) << co.describe();
	auto theirs = config_lines(ct.out), ours = config_lines(co.out);
	ASSERT_GE(ours.size(), 8u) << co.out;
	for (auto &[name, line] : ours)
		EXPECT_TRUE(theirs.count(name)) << name << " is no Kafka topic config";
	for (const char *same : { "cleanup.policy", "compression.type", "segment.bytes",
				  "message.timestamp.type", "index.interval.bytes" })
		EXPECT_EQ(value_of(theirs[same]), value_of(ours[same])) << same << "\n" << co.out;
	/* kmirrord's own setting, named as the broker's static config */
	EXPECT_NE(std::string::npos,
		  ours["segment.bytes"].find("STATIC_BROKER_CONFIG:log.segment.bytes=1048576"))
		<< co.out;
	/* the broker (node id 1, kmirrord's default) */
	ChildResult cb = with(ours_b, { "--describe", "--entity-type", "brokers",
					"--entity-name", "1", "--all" });
	ASSERT_EQ(0, cb.exit_code) << cb.describe();
	EXPECT_NE(std::string::npos, cb.out.find("  log.segment.bytes=1048576 ")) << cb.out;
	for (const std::string &b : { theirs_b, ours_b }) {
		ChildResult u = with(b, { "--describe", "--entity-type", "topics",
					  "--entity-name", "nosuch", "--all" });
		EXPECT_NE(0, u.exit_code) << b;
		EXPECT_NE(std::string::npos,
			  (u.out + u.err).find("UnknownTopicOrPartitionException"))
			<< b << "\n" << u.out << u.err;
	}
}

/* kafka-cluster cluster-id (DescribeCluster): kmirrord's own id; and
 * kafka-broker-api-versions lists the describe APIs. */
void expect_cluster_tools(const Daemon &d)
{
	ChildResult st;
	ASSERT_EQ("", ctl(d, { "status", "--json" }, &st));
	json_t *j = json_loads(st.out.c_str(), 0, nullptr);
	ASSERT_NE(nullptr, j) << st.out;
	std::string cluster = json_string_value(json_object_get(j, "cluster_id")) ?: "";
	json_decref(j);
	ASSERT_FALSE(cluster.empty());
	ChildResult ci = tool("org.apache.kafka.tools.ClusterTool",
			      { "cluster-id", "--bootstrap-server", d.bootstrap() });
	ASSERT_EQ(0, ci.exit_code) << ci.describe();
	EXPECT_EQ("Cluster ID: " + cluster + "\n", ci.out);
	ChildResult av = tool("org.apache.kafka.tools.BrokerApiVersionsCommand",
			      { "--bootstrap-server", d.bootstrap() });
	ASSERT_EQ(0, av.exit_code) << av.describe();
	EXPECT_NE(std::string::npos, av.out.find("DescribeConfigs(32): 1 to 4 [usable: 4]")) << av.out;
	EXPECT_NE(std::string::npos, av.out.find("DescribeCluster(60): 0 to 2 [usable: 2]")) << av.out;
}

TEST_F(KafkaClients, DescribeToolsAnswerWhileMirroring)
{
	Daemon d = daemon();
	ASSERT_NO_FATAL_FAILURE(mirror(d));
	ASSERT_NO_FATAL_FAILURE(expect_topics_alike(broker_->bootstrap(), d.bootstrap(), parts_,
						    d.data_dir()));
	ASSERT_NO_FATAL_FAILURE(expect_configs(broker_->bootstrap(), d.bootstrap()));
	ASSERT_NO_FATAL_FAILURE(expect_cluster_tools(d));
}

/* What Kafka's network layer does with a request it does not serve
 * (SocketServer.parseRequestHeader: an API key ApiKeys does not know, or
 * one not enabled on the listener, throws and the connection closes;
 * ApiVersions at any version is answered, UNSUPPORTED_VERSION when too
 * new): kmirrord does the same. */
void expect_raw_like_kafka(uint16_t kafka_port, uint16_t our_port)
{
	struct Case {
		int16_t key, version;
		bool flexible;
		const char *what;
	};
	const Case cases[] = {
		{ 99, 0, false, "an API key Kafka does not know" },
		{ 52, 0, true, "Vote: a controller API, not on a broker listener" },
		{ 18, 99, true, "ApiVersions at an unknown version" },
	};
	for (const Case &c : cases) {
		int16_t ek = -1, eo = -1;
		std::string theirs = raw_request(kafka_port, c.key, c.version, c.flexible, &ek);
		std::string ours = raw_request(our_port, c.key, c.version, c.flexible, &eo);
		EXPECT_EQ(theirs, ours) << c.what;
		EXPECT_EQ(ek, eo) << c.what;
	}
	int16_t e = -1;
	EXPECT_EQ("answered", raw_request(our_port, 18, 99, true, &e));
	EXPECT_EQ(35, e) << "UNSUPPORTED_VERSION";
}

TEST_F(KafkaClients, UnsupportedCallsGetKafkasErrorsAndServingGoesOn)
{
	Daemon d = daemon();
	ASSERT_NO_FATAL_FAILURE(mirror(d));
	TempDir tmp("km-kafka-cl-tmp");
	std::string json = tmp.file("delete.json");
	{
		FILE *f = fopen(json.c_str(), "w");
		ASSERT_NE(nullptr, f);
		fputs("{\"partitions\":[{\"topic\":\"cplain\",\"partition\":0,\"offset\":10}],"
		      "\"version\":1}", f);
		fclose(f);
	}
	const std::string b = d.bootstrap();
	struct Call {
		const char *cls;
		std::vector<std::string> args;
		const char *api;
		bool exits_nonzero; /* kafka-delete-records reports per partition */
		bool served;	    /* refused for the mirrored topic, not unknown */
	};
	const std::vector<Call> calls = {
		{ kTopics, { "--bootstrap-server", b, "--delete", "--topic", "cplain" },
		  "DELETE_TOPICS", true, true },
		{ "org.apache.kafka.tools.AclCommand", { "--bootstrap-server", b, "--list" },
		  "DESCRIBE_ACLS", true, false },
		{ kConfigs, { "--bootstrap-server", b, "--alter", "--entity-type", "topics",
			      "--entity-name", "cplain", "--add-config", "retention.ms=1000" },
		  "INCREMENTAL_ALTER_CONFIGS", true, false },
		{ "org.apache.kafka.tools.DeleteRecordsCommand",
		  { "--bootstrap-server", b, "--offset-json-file", json }, "DELETE_RECORDS", false,
		  true },
	};
	for (const Call &c : calls) {
		ChildResult r = tool(c.cls, c.args);
		std::string all = r.out + r.err;
		if (c.exits_nonzero) {
			EXPECT_NE(0, r.exit_code) << c.api << "\n" << all;
		}
		if (c.served) {
			EXPECT_NE(std::string::npos, all.find("PolicyViolationException"))
				<< c.api << "\n" << all;
		} else {
			/* the client's own refusal: ApiVersions did not list it */
			EXPECT_TRUE(all.find("does not support " + std::string(c.api)) !=
					    std::string::npos ||
				    all.find("The " + std::string(c.api) +
					     " API is not supported") != std::string::npos)
				<< c.api << "\n" << all;
		}
		int64_t lo = -1, hi = -1;
		EXPECT_EQ("", watermarks(b, "cplain", 0, &lo, &hi)) << "after " << c.api;
	}
	EXPECT_EQ(0, status_figure(d, "listener", "protocol_errors"));
	/* nothing changed: the topics are still there with every record */
	std::string ours, theirs;
	ASSERT_EQ("", get_offsets(d.bootstrap(), "cplain", "-1", &ours));
	ASSERT_EQ("", get_offsets(broker_->bootstrap(), "cplain", "-1", &theirs));
	EXPECT_EQ(theirs, ours);
	std::string hp = broker_->bootstrap();
	expect_raw_like_kafka((uint16_t)std::stoi(hp.substr(hp.rfind(':') + 1)), d.port());
	int64_t lo = -1, hi = -1;
	EXPECT_EQ("", watermarks(b, "ctx", 0, &lo, &hi)) << "after the raw requests";
}

/* One acknowledgement of kafka-verifiable-producer. */
struct Acked {
	int partition;
	int64_t offset;
	std::string value;
};

std::string parse_acks(const std::string &out, std::vector<Acked> *acks, int64_t *acked)
{
	*acked = -1;
	for (auto &l : lines_of(out)) {
		json_t *j = json_loads(l.c_str(), 0, nullptr);
		if (!j)
			continue;
		std::string name = json_string_value(json_object_get(j, "name")) ?: "";
		if (name == "producer_send_success")
			acks->push_back({ (int)json_integer_value(json_object_get(j, "partition")),
					  json_integer_value(json_object_get(j, "offset")),
					  json_string_value(json_object_get(j, "value")) ?: "" });
		else if (name == "producer_send_error")
			return "send error: " + l;
		else if (name == "tool_data")
			*acked = json_integer_value(json_object_get(j, "acked"));
		json_decref(j);
	}
	return "";
}

/* Kafka's verifiable producer, acks=all and idempotent: n records on
 * topic, every acknowledgement in *acks. */
void produce_verifiable(const std::string &bootstrap, const std::string &topic,
			int64_t n, std::vector<Acked> *acks)
{
	TempDir tmp("km-kafka-cl-prod");
	std::string props = tmp.file("producer.properties");
	FILE *f = fopen(props.c_str(), "w");
	ASSERT_NE(nullptr, f);
	/* retries: the tool sets 0, which idempotence refuses */
	fputs("acks=all\nenable.idempotence=true\nretries=2147483647\n"
	      "linger.ms=5\n", f);
	fclose(f);
	ChildResult pr = tool("org.apache.kafka.tools.VerifiableProducer",
			      { "--bootstrap-server", bootstrap, "--topic", topic,
				"--max-messages", std::to_string(n), "--acks", "-1",
				"--value-prefix", "9", "--command-config", props });
	ASSERT_EQ(0, pr.exit_code) << pr.describe();
	int64_t acked = -1;
	ASSERT_EQ("", parse_acks(pr.out, acks, &acked));
	EXPECT_EQ(n, acked) << pr.out;
	ASSERT_EQ((size_t)n, acks->size());
}

/* Every batch after the barrier, in any segment of the partition, carries
 * the id InitProducerId gave (a producer without idempotence writes -1). */
void expect_idempotent_batches(const std::string &dir, int64_t barrier)
{
	std::string text;
	DIR *dh = opendir(dir.c_str());
	ASSERT_NE(nullptr, dh) << dir;
	for (struct dirent *e; (e = readdir(dh)) != nullptr;) {
		std::string n = e->d_name;
		if (n.size() > 4 && n.compare(n.size() - 4, 4, ".log") == 0)
			text += dump(dir + "/" + n);
	}
	closedir(dh);
	std::regex batch("baseOffset: ([0-9]+) .*producerId: (-?[0-9]+)");
	int after = 0;
	for (std::sregex_iterator it(text.begin(), text.end(), batch), z; it != z; ++it)
		if (std::stoll((*it)[1]) > barrier) {
			after++;
			EXPECT_GE(std::stoll((*it)[2]), 0) << dir << "\n" << (*it)[0];
		}
	EXPECT_GT(after, 0) << dir << "\n" << text;
}

TEST_F(KafkaClients, AfterFailoverJavaClientsReadAndWrite)
{
	Daemon d = daemon();
	ASSERT_NO_FATAL_FAILURE(mirror(d));
	ChildResult sr;
	ASSERT_EQ("", ctl(d, { "stop", "--all", "--json" }, &sr));
	std::map<std::string, int64_t> bar = barriers_of(sr.out);
	ASSERT_EQ(3u, bar.size()) << sr.out;
	/* the barrier is invisible to consumers: they read what the broker
	 * serves */
	for (const char *iso : { "read_uncommitted", "read_committed" })
		ASSERT_NO_FATAL_FAILURE(expect_console_alike(d, "ctx", 0, iso));
	std::string ours, theirs;
	ASSERT_EQ("", get_offsets(d.bootstrap(), "cplain", "-2", &ours));
	ASSERT_EQ("", get_offsets(broker_->bootstrap(), "cplain", "-2", &theirs));
	EXPECT_EQ(theirs, ours);
	ASSERT_EQ("", get_offsets(d.bootstrap(), "cplain", "-1", &ours));
	EXPECT_EQ("cplain:0:" + std::to_string(bar["cplain:0"] + 1) + "\ncplain:1:" +
			  std::to_string(bar["cplain:1"] + 1) + "\n",
		  ours);

	std::vector<Acked> acks;
	ASSERT_NO_FATAL_FAILURE(produce_verifiable(d.bootstrap(), "cplain", 300, &acks));
	std::map<int, std::vector<Acked>> by_part;
	for (auto &a : acks)
		by_part[a.partition].push_back(a);
	std::string want;
	for (int p = 0; p < 2; p++) {
		std::string k = "cplain:" + std::to_string(p);
		int64_t n = by_part.count(p) ? (int64_t)by_part.at(p).size() : 0;
		want += k + ":" + std::to_string(bar[k] + 1 + n) + "\n";
	}
	for (auto &[p, v] : by_part) {
		std::string k = "cplain:" + std::to_string(p);
		std::sort(v.begin(), v.end(),
			  [](const Acked &x, const Acked &y) { return x.offset < y.offset; });
		for (size_t i = 0; i < v.size(); i++)
			ASSERT_EQ(bar[k] + 1 + (int64_t)i, v[i].offset)
				<< k << ": offsets continue right after the barrier";
		expect_idempotent_batches(d.data_dir() + "/cplain-" + std::to_string(p), bar[k]);
		/* read back: the source's records, then exactly these */
		int64_t before = count_on_broker("cplain", p, false);
		std::string out;
		ASSERT_EQ("", console_consume(d.bootstrap(), "cplain", p,
					      before + (int64_t)v.size(), "read_uncommitted", &out));
		std::vector<std::string> got = lines_of(out);
		ASSERT_EQ((size_t)before + v.size(), got.size());
		for (size_t i = 0; i < v.size(); i++)
			EXPECT_EQ("Offset:" + std::to_string(v[i].offset) + "\tnull\t" + v[i].value,
				  got[(size_t)before + i]) << k;
	}
	ASSERT_EQ("", get_offsets(d.bootstrap(), "cplain", "-1", &ours));
	EXPECT_EQ(want, ours);
	ChildResult td = tool(kTopics, { "--bootstrap-server", d.bootstrap(), "--describe",
					 "--topic", "cplain" });
	ASSERT_EQ(0, td.exit_code) << td.describe();
	EXPECT_EQ(2u, partition_lines(td.out).size()) << td.out;
}

} // namespace
