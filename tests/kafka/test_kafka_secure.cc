/* Issue 16 end to end (suite kafka-secure): a SASL_SSL source whose ACLs
 * kmirrord follows, and kmirrord's own SASL_SSL listener enforcing them,
 * the README's worked example as a test.
 *
 * Method: one KRaft broker with Kafka's StandardAuthorizer and a SASL_SSL
 * listener (SCRAM-SHA-512; its certificate from a CA the test makes with
 * openssl); super.users=User:ANONYMOUS only for the harness's PLAINTEXT
 * listener (topics, records, kafka-acls). kafka-acls gives User:mirror
 * Read, Describe and DescribeConfigs on the topic prefix sec-, Describe
 * on the group prefix sec- and on the cluster (what mirroring, group
 * offset sync and DescribeAcls need), User:alice Read and
 * Write on sec-orders and Read on the group sec-app, User:bob Read on
 * both, carol nothing. kmirrord logs in to the SASL_SSL listener as mirror
 * (source.* keys, the password from a 0600 file), syncs the group sec-app
 * and the ACLs of its topic and group (acls.sync) and serves a single SASL_SSL listener with its own
 * certificate and the users kmirror-users wrote. The clients are
 * librdkafka (kcat's library) and Kafka's Java console tools, over
 * TLS with SCRAM-SHA-512, as an application that fails over would use.
 * - alice reads exactly what the broker's own consumer reads; a wrong
 *   password is refused with Kafka's words; carol's Metadata does not
 *   list sec-orders while alice's does (Describe is implied by Read);
 * - after kmirrorctl stop --all, bob (Read only) is refused the write with
 *   TOPIC_AUTHORIZATION_FAILED and nothing is appended, alice's Java
 *   producer writes and her Java consumer reads those records back after
 *   the mirrored ones. */
#include <jansson.h>
#include <sys/stat.h>

#include <fstream>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/certs.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const char *kTopic = "sec-orders";
const int kRecords = 200;
const char *kMirrorPass = "mirror-pw-7";

bool put(const std::string &path, const std::string &text, mode_t mode)
{
	{
		std::ofstream f(path, std::ios::trunc);
		f << text;
		if (!f.good())
			return false;
	}
	return chmod(path.c_str(), mode) == 0;
}

/* A CA and two certificates it signs for 127.0.0.1 and localhost: the
 * broker's (with its PEM keystore, key then chain) and kmirrord's. */
std::string make_certs(const std::string &d)
{
	std::string why = make_ca(d, "ca");

	for (const char *n : { "broker", "kmirrord" })
		if (why.empty())
			why = make_cert(d, "ca", n, std::string("/CN=") + n,
					"DNS:localhost,IP:127.0.0.1");
	return why;
}

std::string acls(const std::string &bootstrap, std::vector<std::string> args)
{
	args.insert(args.begin(), { "--bootstrap-server", bootstrap, "--add" });
	ChildResult r = kafka_tool("org.apache.kafka.tools.AclCommand", args, 120000);
	return r.exit_code == 0 ? "" : "kafka-acls: " + r.describe() + r.out;
}

std::vector<std::string> values(const std::vector<Message> &msgs)
{
	std::vector<std::string> v;
	for (auto &m : msgs)
		v.push_back(std::to_string(m.offset) + ":" + m.value.value_or("<null>"));
	return v;
}

/* "N:value" of ConsoleConsumer's "Offset:N<TAB>value" lines. */
std::vector<std::string> java_values(const std::string &out)
{
	std::vector<std::string> v;
	std::istringstream in(out);
	std::string line;
	while (std::getline(in, line)) {
		size_t tab = line.find('\t');
		if (line.rfind("Offset:", 0) == 0 && tab != std::string::npos)
			v.push_back(line.substr(7, tab - 7) + ":" + line.substr(tab + 1));
	}
	return v;
}

} // namespace

class KafkaSecure : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		certs_ = new TempDir("km-secure-certs");
		const std::string &d = certs_->path();
		if ((setup_error_ = make_certs(d)).empty()) {
			const std::string p = "listener.name.sasl_ssl.";
			broker_ = new KafkaBroker(
				{ "authorizer.class.name=org.apache.kafka.metadata."
				  "authorizer.StandardAuthorizer",
				  "super.users=User:ANONYMOUS",
				  p + "ssl.keystore.type=PEM",
				  p + "ssl.keystore.location=" + d + "/broker.ks.pem",
				  p + "sasl.enabled.mechanisms=SCRAM-SHA-512",
				  p + "scram-sha-512.sasl.jaas.config=org.apache.kafka."
				      "common.security.scram.ScramLoginModule required;" });
			sasl_ssl_ = broker_->add_listener("SASL_SSL", "SASL_SSL");
			/* The mirror's credential at format time, as an operator
			 * of a new KRaft cluster gives it. */
			broker_->add_format_args({ "--add-scram",
						   std::string("SCRAM-SHA-512=[name=mirror,"
							       "password=") + kMirrorPass + "]" });
		}
		if (setup_error_.empty())
			setup_error_ = broker_->start();
		if (setup_error_.empty())
			fprintf(stderr, "kafka broker up in %lld ms\n",
				(long long)broker_->start_ms());
		if (setup_error_.empty())
			setup_error_ = prepare_source();
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
		delete certs_;
		certs_ = nullptr;
		delete truth_;
		truth_ = nullptr;
	}

	static std::string prepare_source()
	{
		std::string b = broker_->bootstrap(), why;
		if (!(why = broker_->create_topic(kTopic, 1)).empty())
			return why;
		ProduceSpec s;
		s.topic = kTopic;
		s.count = kRecords;
		s.flush_every = 50;
		if (!(why = produce(b, s)).empty())
			return why;
		const std::vector<std::vector<std::string>> rules = {
			{ "--allow-principal", "User:mirror", "--operation", "Read",
			  "--operation", "Describe", "--operation", "DescribeConfigs",
			  "--topic", "sec-", "--resource-pattern-type", "prefixed" },
			{ "--allow-principal", "User:mirror", "--operation", "Describe",
			  "--cluster" },
			{ "--allow-principal", "User:mirror", "--operation", "Describe",
			  "--group", "sec-", "--resource-pattern-type", "prefixed" },
			{ "--allow-principal", "User:alice", "--operation", "Read",
			  "--operation", "Write", "--topic", kTopic },
			{ "--allow-principal", "User:alice", "--allow-principal",
			  "User:bob", "--operation", "Read", "--group", "sec-app" },
			{ "--allow-principal", "User:bob", "--operation", "Read",
			  "--topic", kTopic },
		};
		for (auto &r : rules)
			if (!(why = acls(b, r)).empty())
				return why;
		ConsumeSpec c;
		c.topic = kTopic;
		std::vector<Message> m;
		if (!(why = consume(b, c, &m)).empty())
			return why;
		truth_ = new std::vector<std::string>(values(m));
		end_ = (int64_t)m.size();
		return end_ == kRecords ? "" : "the broker holds " + std::to_string(end_);
	}

	void SetUp() override
	{
		ASSERT_EQ("", setup_error_) << (broker_ ? broker_->log_tail() : "");
		ASSERT_EQ("", dir_.error());
	}

	/* kmirrord as the worked example configures it, caught up. */
	void start(std::unique_ptr<Daemon> *out)
	{
		const std::string &c = certs_->path();
		std::string users = dir_.file("users"), pw = dir_.file("mirror.pw");
		ASSERT_TRUE(put(pw, kMirrorPass, 0600));
		for (auto &u : { std::make_pair("alice", "alice-pw"),
				 std::make_pair("bob", "bob-pw"),
				 std::make_pair("carol", "carol-pw") }) {
			ChildResult r = kmirror_users({ "add", users, u.first, "--mechanism",
							"SCRAM-SHA-512" },
						       u.second);
			ASSERT_EQ(0, r.exit_code) << r.describe() << r.err;
		}
		auto d = std::make_unique<Daemon>(
			dir_.file("data"),
			std::vector<std::string>{
				"source.bootstrap.servers=127.0.0.1:" +
					std::to_string(sasl_ssl_),
				"source.security.protocol=SASL_SSL",
				"source.ssl.ca.location=" + c + "/ca.pem",
				"source.sasl.mechanism=SCRAM-SHA-512",
				"source.sasl.username=mirror",
				"source.sasl.password.file=" + pw,
				std::string("topics=") + kTopic, "groups=sec-app",
				"acls.sync=true",
				"listeners=SASL_SSL://127.0.0.1:0",
				"ssl.certificate.location=" + c + "/kmirrord.pem",
				"ssl.key.location=" + c + "/kmirrord.key",
				"sasl.users.file=" + users,
				"sasl.enabled.mechanisms=SCRAM-SHA-512" });
		ASSERT_EQ("", d->start());
		ASSERT_EQ("", d->wait_status(
				      [&](const std::map<std::string, PartStatus> &st) {
					      auto it = st.find(std::string(kTopic) + ":0");
					      return it != st.end() && it->second.hw == end_;
				      },
				      60000));
		ASSERT_NO_FATAL_FAILURE(wait_acls_synced(*d));
		ASSERT_EQ("", listener_port(*d, "SASL_SSL", &port_));
		*out = std::move(d);
	}

	/* status --json's acls object says the source's round went well. */
	void wait_acls_synced(Daemon &d)
	{
		const char *exe = getenv("KM_KMIRRORCTL");
		std::string last;
		bool ok = poll_until(
			[&] {
				ChildResult r = run_command({ exe ? exe : "kmirrorctl", "--socket",
							      d.socket(), "status", "--json" },
							    10000);
				json_error_t e;
				json_t *root = json_loads(r.out.c_str(), 0, &e);
				json_t *a = root ? json_object_get(root, "acls") : nullptr;
				const char *sync = a ? json_string_value(json_object_get(a, "sync"))
						     : nullptr;
				from_source_ = a ? json_integer_value(json_object_get(a, "from_source"))
						 : -1;
				last = sync ? sync : r.out;
				json_decref(root);
				return last == "ok";
			},
			30000);
		ASSERT_TRUE(ok) << "acls.sync: " << last;
	}

	std::string bs() const { return "127.0.0.1:" + std::to_string(port_); }

	Props rdk(const std::string &user, const std::string &pw) const
	{
		return { { "security.protocol", "SASL_SSL" },
			 { "ssl.ca.location", certs_->path() + "/ca.pem" },
			 { "sasl.mechanism", "SCRAM-SHA-512" },
			 { "sasl.username", user },
			 { "sasl.password", pw } };
	}

	std::string java_conf(const std::string &user, const std::string &pw)
	{
		std::string f = dir_.file("client-" + user + ".properties");
		EXPECT_TRUE(put(f,
				"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
				"sasl.jaas.config=org.apache.kafka.common.security.scram."
				"ScramLoginModule required username=\"" + user +
					"\" password=\"" + pw + "\";\n"
					"ssl.truststore.type=PEM\nssl.truststore.location=" +
					certs_->path() + "/ca.pem\n",
				0600));
		return f;
	}

	/* The topics a Metadata of every topic lists to user (kcat -L). */
	std::set<std::string> listed(const std::string &user, const std::string &pw,
				     std::string *err)
	{
		std::vector<std::string> argv = { "kcat", "-b", bs(), "-L", "-m", "10" };
		for (auto &kv : rdk(user, pw)) {
			argv.push_back("-X");
			argv.push_back(kv.first + "=" + kv.second);
		}
		ChildResult r = run_command(argv, 30000);
		std::set<std::string> out;
		std::regex re("topic \"([^\"]+)\" with");
		for (std::sregex_iterator it(r.out.begin(), r.out.end(), re), end;
		     it != end; ++it)
			out.insert((*it)[1]);
		*err = r.exit_code == 0 ? "" : "kcat -L: " + r.describe() + r.err;
		return out;
	}

	static KafkaBroker *broker_;
	static TempDir *certs_;
	static std::string setup_error_;
	static uint16_t sasl_ssl_;
	static int64_t end_;
	static std::vector<std::string> *truth_;
	TempDir dir_{ "km-kafka-secure" };
	uint16_t port_ = 0;
	int64_t from_source_ = -1;
};

KafkaBroker *KafkaSecure::broker_ = nullptr;
TempDir *KafkaSecure::certs_ = nullptr;
std::string KafkaSecure::setup_error_;
uint16_t KafkaSecure::sasl_ssl_ = 0;
int64_t KafkaSecure::end_ = -1;
std::vector<std::string> *KafkaSecure::truth_ = nullptr;

TEST_F(KafkaSecure, SaslSslSourceAndListenerWithTheSourcesAcls)
{
	std::unique_ptr<Daemon> d;
	ASSERT_NO_FATAL_FAILURE(start(&d));
	/* The ACLs of sec-orders (mirror's prefixed three, alice's two,
	 * bob's one) and of the synced group sec-app (mirror's prefixed
	 * Describe, alice's and bob's Read); the cluster's stay behind. */
	EXPECT_EQ(9, from_source_);

	/* librdkafka asks FindCoordinator for its group.id even when it only
	 * assigns partitions: alice reads as the group she may read. */
	ConsumeSpec c;
	c.topic = kTopic;
	c.conf = rdk("alice", "alice-pw");
	c.conf.push_back({ "group.id", "sec-app" });
	std::vector<Message> m;
	ASSERT_EQ("", consume(bs(), c, &m));
	EXPECT_EQ(*truth_, values(m)) << "alice over SASL_SSL";

	std::string e = rdk_login_error(bs(), rdk("alice", "not-her-password"));
	EXPECT_NE(std::string::npos, e.find("Authentication failed during authentication "
					    "due to invalid credentials with SASL "
					    "mechanism SCRAM-SHA-512"))
		<< e;

	std::string err;
	std::set<std::string> alice = listed("alice", "alice-pw", &err);
	EXPECT_EQ("", err);
	EXPECT_EQ(1u, alice.count(kTopic)) << "Read implies Describe";
	std::set<std::string> carol = listed("carol", "carol-pw", &err);
	EXPECT_EQ("", err);
	EXPECT_EQ(0u, carol.count(kTopic)) << "carol may not describe it";

	ChildResult r;
	ASSERT_EQ("", ctl(*d, { "stop", "--all" }, &r)) << r.err;

	ProduceSpec bob;
	bob.topic = kTopic;
	bob.count = 5;
	bob.conf = rdk("bob", "bob-pw");
	bob.timeout_ms = 15000;
	e = produce(bs(), bob);
	EXPECT_NE(std::string::npos, e.find("authoriz")) << "bob wrote: " << e;

	ChildResult p = kafka_tool("org.apache.kafka.tools.ProducerPerformance",
				   { "--topic", kTopic, "--num-records", "40",
				     "--record-size", "64", "--throughput", "-1",
				     "--producer.config", java_conf("alice", "alice-pw"),
				     "--producer-props", "bootstrap.servers=" + bs(),
				     "acks=all" },
				   120000);
	ASSERT_EQ(0, p.exit_code) << p.describe() << p.out << p.err;

	/* Everything: the mirrored records as the source has them (the
	 * barrier between them is a control batch, no record), then
	 * alice's 40 and none of bob's. */
	r = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
		       { "--bootstrap-server", bs(), "--topic", kTopic, "--partition",
			 "0", "--offset", "earliest", "--max-messages",
			 std::to_string(kRecords + 40), "--timeout-ms", "30000",
			 "--consumer.config", java_conf("alice", "alice-pw"),
			 "--formatter-property", "print.offset=true" },
		       120000);
	EXPECT_EQ(0, r.exit_code) << r.describe() << r.err;
	std::vector<std::string> got = java_values(r.out);
	ASSERT_EQ((size_t)kRecords + 40, got.size()) << r.err;
	EXPECT_EQ(*truth_, std::vector<std::string>(got.begin(), got.begin() + kRecords));
	int64_t first_new = std::stoll(got[kRecords].substr(0, got[kRecords].find(':')));
	EXPECT_GT(first_new, end_) << "alice's records follow the barrier";
}
