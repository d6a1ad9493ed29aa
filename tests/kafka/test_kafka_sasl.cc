/* Goal: SASL on kmirrord's own listener (issue 16, suite kafka-sasl) -
 * Kafka's clients log in to kmirrord as they log in to a broker (PLAIN,
 * SCRAM-SHA-256, SCRAM-SHA-512 with users kmirror-users made), read the
 * mirror, are refused as a broker refuses them, a user removed from
 * sasl.users.file is refused without a restart, and KIP-368 sessions end
 * and are renewed (connections.max.reauth.ms).
 *
 * Method: one KRaft broker (kafka_broker.h) is the source of a topic
 * filled with kafka-producer-perf-test; each case starts kmirrord with
 * sasl.users.file (written by the kmirror-users tool, the password on its
 * standard input) and waits until its high watermark is the broker's
 * (ListOffsets). Reading: librdkafka 2.0.2 (the library kcat is built on)
 * and Kafka's Java ConsoleConsumer and producer (kafka-producer-perf-test)
 * with a config file naming the mechanism and JAAS login; what they read
 * is compared with what librdkafka reads from the broker. Refusals: the
 * error text the client shows (librdkafka's error callback, the Java
 * consumer's exception), kmirrord's log once stopped and its counters
 * (kmirrorctl status --json, listener rows). Re-authentication: a Java consumer reads a local topic
 * across several session lifetimes while records are produced after each
 * re-authentication the counter shows; a librdkafka 2.0.2 consumer, which
 * cannot re-authenticate, is disconnected at its first request after the
 * session's end (as Kafka does) and reconnects. kmirrord listens on a
 * PLAINTEXT and a SASL_PLAINTEXT listener (SASL_SSL in one case, with a CA
 * and certificate made by openssl). */
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/certs.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const char *kTopic = "sasl-src", *kLocal = "sasl-loc";
const int kRecords = 300;

bool put(const std::string &path, const std::string &text, mode_t mode)
{
	std::ofstream f(path, std::ios::trunc);
	f << text;
	f.close();
	return f.good() && chmod(path.c_str(), mode) == 0;
}

/* The listener counters summed over workers (kmirrorctl status --json). */
std::string listener_counter(const Daemon &d, const char *name, int64_t *out)
{
	const char *exe = getenv("KM_KMIRRORCTL");
	ChildResult r = run_command({ exe ? exe : "kmirrorctl", "--socket",
				      d.socket(), "status", "--json" },
				    10000);
	json_error_t jerr;
	json_t *root = json_loads(r.out.c_str(), 0, &jerr), *row;
	size_t i;

	if (r.exit_code != 0 || root == nullptr)
		return "kmirrorctl status: " + r.describe() + r.err;
	*out = 0;
	json_array_foreach(json_object_get(root, "listener"), i, row) {
		json_t *v = json_object_get(row, name);
		if (!json_is_integer(v)) {
			json_decref(root);
			return std::string("no ") + name + " in the listener rows";
		}
		*out += json_integer_value(v);
	}
	json_decref(root);
	return "";
}

/* Also drains kmirrord's stderr (Daemon::status), so that its logging
 * never blocks on a full pipe. */
int64_t counter(Daemon &d, const char *name)
{
	std::map<std::string, PartStatus> st;
	int64_t v = -1;
	d.status(&st);
	EXPECT_EQ("", listener_counter(d, name, &v));
	return v;
}

Props rdk_sasl(const std::string &mech, const std::string &user,
	       const std::string &pw)
{
	return { { "security.protocol", "SASL_PLAINTEXT" },
		 { "sasl.mechanism", mech },
		 { "sasl.username", user },
		 { "sasl.password", pw } };
}

std::string java_sasl(const std::string &mech, const std::string &user,
		      const std::string &pw)
{
	std::string module = mech == "PLAIN" ? "plain.PlainLoginModule"
					     : "scram.ScramLoginModule";
	return "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=" + mech +
	       "\nsasl.jaas.config=org.apache.kafka.common.security." + module +
	       " required username=\"" + user + "\" password=\"" + pw + "\";\n";
}

/* kmirrord's log, once stopped. */
std::string stop_log(Daemon &d)
{
	ChildResult res;
	EXPECT_EQ("", d.stop(30000, &res));
	EXPECT_EQ(0, res.exit_code) << res.describe();
	return res.err;
}

/* Compared whole; a mismatch prints the counts and the first difference
 * rather than 300 values. */
std::string same(const std::vector<std::string> &want,
		 const std::vector<std::string> &got)
{
	if (want == got)
		return "";
	size_t i = 0;
	while (i < want.size() && i < got.size() && want[i] == got[i])
		i++;
	return std::to_string(got.size()) + " records, not " +
	       std::to_string(want.size()) + "; first difference at " +
	       std::to_string(i) + ": " + (i < got.size() ? got[i] : "<none>");
}

std::vector<std::string> values(const std::vector<Message> &msgs)
{
	std::vector<std::string> v;
	for (auto &m : msgs)
		v.push_back(std::to_string(m.offset) + ":" + m.value.value_or("<null>"));
	return v;
}

} // namespace

class KafkaSasl : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		broker_ = new KafkaBroker();
		if ((setup_error_ = broker_->start()).empty())
			fprintf(stderr, "kafka broker up in %lld ms\n",
				(long long)broker_->start_ms());
		if (setup_error_.empty())
			setup_error_ = broker_->create_topic(kTopic, 1);
		if (setup_error_.empty())
			setup_error_ = broker_->producer_perf(kTopic, kRecords, 100,
							      { "acks=all" });
		if (setup_error_.empty())
			setup_error_ = watermarks(broker_->bootstrap(), kTopic, 0,
						  &lo_, &end_);
		if (setup_error_.empty()) {
			/* What the broker's own consumer reads: the truth. */
			ConsumeSpec c;
			c.topic = kTopic;
			c.to = end_;
			std::vector<Message> m;
			setup_error_ = consume(broker_->bootstrap(), c, &m);
			truth_ = new std::vector<std::string>(values(m));
		}
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
		delete truth_;
		truth_ = nullptr;
	}

	void SetUp() override
	{
		ASSERT_EQ("", setup_error_) << (broker_ ? broker_->log_tail() : "");
		ASSERT_EQ("", dir_.error());
		ASSERT_GT(end_, 0);
		users_ = dir_.file("users");
		for (auto &u : { std::make_pair("alice", "alice-pw"),
				 std::make_pair("carol", "carol-pw") }) {
			ChildResult r = kmirror_users({ "add", users_, u.first }, u.second);
			ASSERT_EQ(0, r.exit_code) << r.describe() << r.err;
		}
		ChildResult r = kmirror_users({ "add", users_, "bob", "--mechanism",
					     "SCRAM-SHA-512", "--iterations", "8192" },
					   "bob-pw");
		ASSERT_EQ(0, r.exit_code) << r.describe() << r.err;
	}

	/* kmirrord mirroring kTopic (and serving kLocal) behind SASL, caught
	 * up with the broker. */
	void start(Daemon **out, std::vector<std::string> sets)
	{
		sets.push_back("source.bootstrap.servers=" + broker_->bootstrap());
		sets.push_back(std::string("topics=") + kTopic);
		sets.push_back(std::string("local.topics=") + kLocal + ":1");
		sets.push_back("sasl.users.file=" + users_);
		bool given = false;
		for (auto &kv : sets)
			given = given || kv.rfind("listeners=", 0) == 0;
		if (!given)
			sets.push_back("listeners=PLAINTEXT://127.0.0.1:0,"
				       "SASL_PLAINTEXT://127.0.0.1:0");
		*out = new Daemon(dir_.file("data"), sets);
		Daemon &d = **out;
		ASSERT_EQ("", d.start());
		ASSERT_EQ("", listener_port(d, "SASL_", &sasl_port_));
		std::string k = std::string(kTopic) + ":0";
		ASSERT_EQ("", d.wait_status(
				      [&](const std::map<std::string, PartStatus> &st) {
					      auto it = st.find(k);
					      return it != st.end() && it->second.hw == end_;
				      },
				      60000));
	}

	std::string sasl_bs() const { return "127.0.0.1:" + std::to_string(sasl_port_); }

	/* librdkafka's consumer of the mirror. */
	std::string rdk_read(const std::string &bs, const Props &p,
			     std::vector<std::string> *got, int timeout_ms = 20000)
	{
		ConsumeSpec c;
		c.topic = kTopic;
		c.to = end_;
		c.conf = p;
		c.timeout_ms = timeout_ms;
		std::vector<Message> m;
		std::string e = consume(bs, c, &m);
		*got = values(m);
		return e;
	}

	/* Kafka's ConsoleConsumer with a SASL consumer.config. */
	ChildResult java_read(const std::string &bs, const std::string &topic,
			      const std::string &conf, int64_t max, int timeout_ms)
	{
		std::string f = dir_.file("consumer-" + std::to_string(++files_));
		EXPECT_TRUE(put(f, conf, 0600));
		return kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
				  { "--bootstrap-server", bs, "--topic", topic,
				    "--partition", "0", "--offset", "earliest",
				    "--max-messages", std::to_string(max), "--timeout-ms",
				    std::to_string(timeout_ms), "--consumer.config", f,
				    "--formatter-property", "print.offset=true" },
				  120000);
	}

	/* "N:value" lines of ConsoleConsumer's "Offset:N<TAB>value" output. */
	static std::vector<std::string> java_values(const std::string &out)
	{
		std::vector<std::string> v;
		size_t at = 0;
		while (at < out.size()) {
			size_t nl = out.find('\n', at);
			std::string line = out.substr(at, nl == std::string::npos ? nl : nl - at);
			at = nl == std::string::npos ? out.size() : nl + 1;
			size_t tab = line.find('\t');
			if (line.rfind("Offset:", 0) == 0 && tab != std::string::npos)
				v.push_back(line.substr(7, tab - 7) + ":" + line.substr(tab + 1));
		}
		return v;
	}

	static KafkaBroker *broker_;
	static std::string setup_error_;
	static int64_t lo_, end_;
	static std::vector<std::string> *truth_;
	TempDir dir_{ "km-kafka-sasl" };
	std::string users_;
	int files_ = 0;
	uint16_t sasl_port_ = 0;
};

KafkaBroker *KafkaSasl::broker_ = nullptr;
std::string KafkaSasl::setup_error_;
int64_t KafkaSasl::lo_ = -1, KafkaSasl::end_ = -1;
std::vector<std::string> *KafkaSasl::truth_ = nullptr;

/* The users file holds no password, only Kafka's salted credentials, and
 * is private to its owner. */
TEST_F(KafkaSasl, UsersFileIsSaltedAndPrivate)
{
	std::string text = read_file(users_);
	for (const char *pw : { "alice-pw", "bob-pw", "carol-pw" })
		EXPECT_EQ(std::string::npos, text.find(pw));
	EXPECT_NE(std::string::npos, text.find("alice SCRAM-SHA-256 salt="));
	struct stat st;
	ASSERT_EQ(0, stat(users_.c_str(), &st));
	EXPECT_EQ(0600u, st.st_mode & 0777);
	ChildResult r = kmirror_users({ "list", users_ }, "");
	EXPECT_EQ(0, r.exit_code);
	EXPECT_EQ("alice SCRAM-SHA-256 iterations=4096\n"
		  "alice SCRAM-SHA-512 iterations=4096\n"
		  "carol SCRAM-SHA-256 iterations=4096\n"
		  "carol SCRAM-SHA-512 iterations=4096\n"
		  "bob SCRAM-SHA-512 iterations=8192\n", r.out);
	r = kmirror_users({ "remove", users_, "nobody" }, "");
	EXPECT_EQ(1, r.exit_code);
	EXPECT_NE(std::string::npos, r.err.find("no user nobody")) << r.err;
}

/* librdkafka (kcat's library) with each mechanism reads exactly what the
 * broker's consumer reads; a client without SASL is closed unanswered. */
TEST_F(KafkaSasl, LibrdkafkaReadsTheMirrorWithEachMechanism)
{
	Daemon *dp;
	ASSERT_NO_FATAL_FAILURE(start(&dp, { "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" }));
	std::unique_ptr<Daemon> d(dp);
	const struct {
		const char *mech, *user, *pw;
	} logins[] = { { "SCRAM-SHA-256", "alice", "alice-pw" },
		       { "SCRAM-SHA-512", "bob", "bob-pw" },
		       { "PLAIN", "alice", "alice-pw" },
		       { "PLAIN", "bob", "bob-pw" } }; /* a SCRAM-SHA-512 credential */
	for (auto &l : logins) {
		std::vector<std::string> got;
		EXPECT_EQ("", rdk_read(sasl_bs(), rdk_sasl(l.mech, l.user, l.pw), &got))
			<< l.mech << " " << l.user;
		EXPECT_EQ("", same(*truth_, got)) << l.mech << " " << l.user;
	}
	EXPECT_GE(counter(*d, "sasl_authentications"), 4);
	EXPECT_EQ(0, counter(*d, "sasl_failed_authentications"));
	EXPECT_NE("", rdk_login_error(sasl_bs(), {})) << "a PLAINTEXT client was answered";
	/* The PLAINTEXT listener beside it needs no login. */
	std::vector<std::string> got;
	ConsumeSpec c;
	c.topic = kTopic;
	c.to = end_;
	std::vector<Message> m;
	EXPECT_EQ("", consume(d->bootstrap(), c, &m));
	EXPECT_EQ("", same(*truth_, values(m)));
	std::string log = stop_log(*d);
	EXPECT_NE(std::string::npos,
		  log.find("Unexpected Kafka request of type Metadata during SASL handshake"))
		<< log;
}

/* Kafka's Java ConsoleConsumer with each mechanism; the Java producer
 * (kafka-producer-perf-test) writes to a local topic with SCRAM-SHA-512
 * and librdkafka reads it back. */
TEST_F(KafkaSasl, JavaClientsWithEachMechanism)
{
	Daemon *dp;
	ASSERT_NO_FATAL_FAILURE(start(&dp, { "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" }));
	std::unique_ptr<Daemon> d(dp);
	for (auto &m : { std::make_pair("SCRAM-SHA-256", "alice"),
			 std::make_pair("SCRAM-SHA-512", "bob"),
			 std::make_pair("PLAIN", "alice") }) {
		std::string pw = std::string(m.second) + "-pw";
		ChildResult r = java_read(sasl_bs(), kTopic, java_sasl(m.first, m.second, pw),
					  end_, 30000);
		EXPECT_EQ(0, r.exit_code) << m.first << ": " << r.describe() << r.err;
		EXPECT_EQ("", same(*truth_, java_values(r.out))) << m.first << ": " << r.err;
	}
	std::string f = dir_.file("producer.properties");
	ASSERT_TRUE(put(f, java_sasl("SCRAM-SHA-512", "bob", "bob-pw"), 0600));
	ChildResult r = kafka_tool(
		"org.apache.kafka.tools.ProducerPerformance",
		{ "--topic", kLocal, "--num-records", "50", "--record-size", "100",
		  "--throughput", "-1", "--producer.config", f, "--producer-props",
		  "bootstrap.servers=" + sasl_bs(), "acks=all" },
		120000);
	ASSERT_EQ(0, r.exit_code) << r.describe() << r.err;
	ASSERT_NE(std::string::npos, r.out.find("50 records sent")) << r.out << r.err;
	ConsumeSpec c;
	c.topic = kLocal;
	c.to = 50;
	c.conf = rdk_sasl("SCRAM-SHA-256", "alice", "alice-pw");
	std::vector<Message> got;
	ASSERT_EQ("", consume(sasl_bs(), c, &got));
	EXPECT_EQ(50u, got.size());
}

/* A wrong password, an unknown user and a mechanism not enabled are
 * refused with Kafka's error codes and words, and counted. */
TEST_F(KafkaSasl, WrongCredentialsAreRefusedAsKafkaRefusesThem)
{
	Daemon *dp;
	ASSERT_NO_FATAL_FAILURE(start(&dp, {})); /* SCRAM-SHA-256,SCRAM-SHA-512 */
	std::unique_ptr<Daemon> d(dp);
	const std::string invalid = "Authentication failed during authentication due "
				    "to invalid credentials with SASL mechanism ";
	std::string e = rdk_login_error(sasl_bs(), rdk_sasl("SCRAM-SHA-256", "alice", "wrong"));
	EXPECT_NE(std::string::npos, e.find(invalid + "SCRAM-SHA-256")) << e;
	e = rdk_login_error(sasl_bs(), rdk_sasl("SCRAM-SHA-512", "mallory", "alice-pw"));
	EXPECT_NE(std::string::npos, e.find(invalid + "SCRAM-SHA-512")) << e;
	/* bob has no SCRAM-SHA-256 credential. */
	e = rdk_login_error(sasl_bs(), rdk_sasl("SCRAM-SHA-256", "bob", "bob-pw"));
	EXPECT_NE(std::string::npos, e.find(invalid + "SCRAM-SHA-256")) << e;
	e = rdk_login_error(sasl_bs(), rdk_sasl("PLAIN", "alice", "alice-pw"));
	EXPECT_NE(std::string::npos, e.find("SCRAM-SHA-256,SCRAM-SHA-512")) << e;

	ChildResult r = java_read(sasl_bs(), kTopic, java_sasl("SCRAM-SHA-256", "alice", "wrong"),
				  end_, 10000);
	EXPECT_NE(std::string::npos, r.err.find("SaslAuthenticationException")) << r.err;
	EXPECT_NE(std::string::npos, r.err.find(invalid + "SCRAM-SHA-256")) << r.err;
	EXPECT_TRUE(java_values(r.out).empty()) << r.out;
	EXPECT_GE(counter(*d, "sasl_failed_authentications"), 5);
	EXPECT_EQ(0, counter(*d, "sasl_authentications"));
}

/* kmirror-users remove: the user's next connection is refused, no restart;
 * a file that does not parse, or that others may read, keeps the users
 * read before (and says why); a user added later logs in. */
TEST_F(KafkaSasl, UsersFileChangesApplyWithoutRestart)
{
	Daemon *dp;
	ASSERT_NO_FATAL_FAILURE(start(&dp, {}));
	std::unique_ptr<Daemon> d(dp);
	std::vector<std::string> got;
	auto carol = rdk_sasl("SCRAM-SHA-256", "carol", "carol-pw");
	auto alice = rdk_sasl("SCRAM-SHA-512", "alice", "alice-pw");
	ASSERT_EQ("", rdk_read(sasl_bs(), carol, &got));
	EXPECT_EQ("", same(*truth_, got));
	ChildResult r = kmirror_users({ "remove", users_, "carol" }, "");
	ASSERT_EQ(0, r.exit_code) << r.err;
	std::string e = rdk_login_error(sasl_bs(), carol);
	EXPECT_NE(std::string::npos, e.find("invalid credentials")) << e;
	EXPECT_EQ("", rdk_read(sasl_bs(), alice, &got));
	EXPECT_GE(counter(*d, "sasl_users_file_reloads"), 1);

	std::string good = read_file(users_);
	ASSERT_TRUE(put(users_, good + "dave SCRAM-SHA-256 salt=notbase64\n", 0600));
	EXPECT_EQ("", rdk_read(sasl_bs(), alice, &got)) << "the old table must stay";
	EXPECT_EQ("", same(*truth_, got));
	int64_t errors = counter(*d, "sasl_users_file_errors");
	EXPECT_GE(errors, 1);
	ASSERT_TRUE(put(users_, good, 0644));
	EXPECT_EQ("", rdk_read(sasl_bs(), alice, &got));
	EXPECT_GT(counter(*d, "sasl_users_file_errors"), errors);

	ASSERT_EQ(0, chmod(users_.c_str(), 0600));
	r = kmirror_users({ "add", users_, "dave" }, "dave-pw");
	ASSERT_EQ(0, r.exit_code) << r.err;
	EXPECT_EQ("", rdk_read(sasl_bs(), rdk_sasl("SCRAM-SHA-256", "dave", "dave-pw"), &got));
	EXPECT_EQ("", same(*truth_, got));
	std::string log = stop_log(*d);
	EXPECT_NE(std::string::npos, log.find("line 6:")) << log;
	EXPECT_NE(std::string::npos, log.find("chmod 600")) << log;
}

/* KIP-368: sessions of 2 s. Kafka's Java consumer re-authenticates on its
 * connection and keeps reading; librdkafka 2.0.2, which cannot, is
 * disconnected at its first request after the session ends (as a broker
 * disconnects it) and reads on over a new connection. */
TEST_F(KafkaSasl, SessionsEndAndJavaClientsReauthenticate)
{
	Daemon *dp;
	ASSERT_NO_FATAL_FAILURE(start(&dp, { "connections.max.reauth.ms=2000" }));
	std::unique_ptr<Daemon> d(dp);
	const int rounds = 4, per = 10;
	std::string f = dir_.file("reauth.properties");
	ASSERT_TRUE(put(f, java_sasl("SCRAM-SHA-256", "alice", "alice-pw"), 0600));
	Child c;
	ASSERT_EQ("", kafka_tool_spawn(&c, "org.apache.kafka.tools.consumer.ConsoleConsumer",
				       { "--bootstrap-server", sasl_bs(), "--topic",
					 kLocal, "--partition", "0", "--offset", "earliest",
					 "--max-messages", std::to_string(rounds * per),
					 "--timeout-ms", "60000", "--consumer.config", f,
					 "--formatter-property", "print.offset=true" }));
	std::vector<std::string> lines;
	auto read_lines = [&](size_t want, int ms) {
		int64_t end = now_ms() + ms;
		std::string line;
		while (lines.size() < want && now_ms() < end)
			if (c.read_line(200, &line).empty() && line.rfind("Offset:", 0) == 0)
				lines.push_back(line);
	};
	int64_t base = 0;
	for (int i = 0; i < rounds; i++) {
		ProduceSpec p;
		p.topic = kLocal;
		p.count = per;
		p.first_seq = i * per;
		p.conf = rdk_sasl("SCRAM-SHA-256", "alice", "alice-pw");
		ASSERT_EQ("", produce(sasl_bs(), p)) << "round " << i;
		read_lines((size_t)(i + 1) * per, 30000);
		ASSERT_EQ((size_t)(i + 1) * per, lines.size()) << "round " << i;
		if (i == 0)
			base = counter(*d, "sasl_reauthentications");
		if (i + 1 == rounds)
			break; /* the consumer ends with its last record */
		/* The next round after the consumer re-authenticated once more. */
		ASSERT_TRUE(poll_until([&] { return counter(*d, "sasl_reauthentications") > base + i; },
				       15000))
			<< "no re-authentication within 15 s (round " << i << ")";
	}
	for (int i = 0; i < rounds * per; i++)
		EXPECT_EQ(0u, lines[(size_t)i].rfind("Offset:" + std::to_string(i) + "\t", 0))
			<< lines[(size_t)i];
	EXPECT_GE(counter(*d, "sasl_reauthentications"), base + rounds - 1);
	c.kill(SIGKILL);
	ChildResult cr;
	c.wait(10000, &cr);

	/* librdkafka: held past its session, then one more record. */
	int64_t expired = counter(*d, "sasl_expired_connections_killed");
	std::string err;
	Props props = rdk_sasl("SCRAM-SHA-256", "alice", "alice-pw");
	props.push_back({ "group.id", "kafka-sasl-expiry" });
	props.push_back({ "bootstrap.servers", sasl_bs() });
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER, props, &err);
	ASSERT_NE(nullptr, rk) << err;
	rd_kafka_topic_partition_list_t *tp = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(tp, kLocal, 0)->offset = rounds * per;
	ASSERT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR, rd_kafka_assign(rk, tp));
	rd_kafka_topic_partition_list_destroy(tp);
	bool killed = poll_until(
		[&] {
			rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
			if (m)
				rd_kafka_message_destroy(m);
			return counter(*d, "sasl_expired_connections_killed") > expired;
		},
		15000);
	EXPECT_TRUE(killed) << "librdkafka's session did not end it";
	ProduceSpec p;
	p.topic = kLocal;
	p.count = 1;
	p.conf = rdk_sasl("SCRAM-SHA-512", "bob", "bob-pw");
	ASSERT_EQ("", produce(sasl_bs(), p));
	int64_t got_offset = -1;
	poll_until(
		[&] {
			rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
			if (m && !m->err)
				got_offset = m->offset;
			if (m)
				rd_kafka_message_destroy(m);
			return got_offset >= 0;
		},
		20000);
	EXPECT_EQ(rounds * per, got_offset) << "librdkafka did not read on";
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	std::string log = stop_log(*d);
	EXPECT_NE(std::string::npos, log.find("expired (connections.max.reauth.ms)")) << log;
}

/* SASL_SSL (TLS on the listener, wt-lsn's, with SASL inside it): a CA and
 * kmirrord's certificate made with openssl; librdkafka and Kafka's Java
 * consumer (a PEM truststore) log in over TLS and read the mirror; a wrong
 * password over TLS gets Kafka's words. */
TEST_F(KafkaSasl, SaslSslListener)
{
	std::string d = dir_.path();
	ASSERT_EQ("", make_ca(d, "ca"));
	ASSERT_EQ("", make_cert(d, "ca", "srv", "/CN=kmirrord",
				"DNS:localhost,IP:127.0.0.1"));
	Daemon *dp;
	ASSERT_NO_FATAL_FAILURE(start(&dp, { "listeners=PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
					     "ssl.certificate.location=" + d + "/srv.pem",
					     "ssl.key.location=" + d + "/srv.key",
					     "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" }));
	std::unique_ptr<Daemon> dm(dp);
	auto tls = [&](Props p) {
		p[0].second = "SASL_SSL";
		p.push_back({ "ssl.ca.location", d + "/ca.pem" });
		return p;
	};
	std::vector<std::string> got;
	EXPECT_EQ("", rdk_read(sasl_bs(), tls(rdk_sasl("SCRAM-SHA-512", "bob", "bob-pw")), &got));
	EXPECT_EQ("", same(*truth_, got));
	EXPECT_EQ("", rdk_read(sasl_bs(), tls(rdk_sasl("PLAIN", "alice", "alice-pw")), &got));
	EXPECT_EQ("", same(*truth_, got));
	std::string e = rdk_login_error(sasl_bs(), tls(rdk_sasl("SCRAM-SHA-256", "alice", "wrong")));
	EXPECT_NE(std::string::npos, e.find("Authentication failed during authentication due to "
					    "invalid credentials with SASL mechanism SCRAM-SHA-256"))
		<< e;
	std::string conf = java_sasl("SCRAM-SHA-256", "alice", "alice-pw");
	conf.replace(conf.find("SASL_PLAINTEXT"), 14, "SASL_SSL");
	conf += "ssl.truststore.type=PEM\nssl.truststore.location=" + d + "/ca.pem\n";
	ChildResult r = java_read(sasl_bs(), kTopic, conf, end_, 30000);
	EXPECT_EQ(0, r.exit_code) << r.describe() << r.err;
	EXPECT_EQ("", same(*truth_, java_values(r.out))) << r.err;
	EXPECT_GE(counter(*dm, "sasl_authentications"), 3);
	EXPECT_EQ(1, counter(*dm, "sasl_failed_authentications"));
}
