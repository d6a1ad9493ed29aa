/* Authorization with Kafka's ACL semantics (issue 16, suite kafka-acls):
 * kmirrord enforces the ACLs a real Kafka source holds for its mirrored
 * topics and groups (acls.sync) and those of its acls.file, as Kafka's
 * StandardAuthorizer would.
 *
 * Method: one KRaft broker (kafka_broker.h) with Kafka's StandardAuthorizer
 * and super.users=User:ANONYMOUS (its own PLAINTEXT listeners and the
 * harness's clients), three topics filled by librdkafka, and ACLs for
 * User:ANONYMOUS made with Kafka's own kafka-acls: Read on acl-read and on
 * acl-elsewhere (not mirrored), Read+Write on the prefix acl-rw-, Read on
 * the group acl-app; none on acl-hidden. kmirrord mirrors acl-read,
 * acl-rw-1 and acl-hidden; its clients (kcat, librdkafka, Kafka's Java
 * console consumer) reach it over PLAINTEXT, as User:ANONYMOUS, for whom
 * kmirrord has no super user: what they may do is what the ACLs say.
 * - acls.sync: kmirrord's count of synced ACLs is what `kafka-acls --list`
 *   shows for the mirrored topics and the group; Metadata of every topic
 *   (kcat -L) hides acl-hidden; the Java console consumer reads acl-read as
 *   it reads it on the broker and is refused acl-hidden and a group it has
 *   no ACL for with Kafka's own exceptions; an ACL added on the source
 *   with kafka-acls shows acl-hidden within the sync interval, and its
 *   removal hides it again; after stop --all, a producer is refused
 *   acl-read (Read only: TOPIC_AUTHORIZATION_FAILED) and writes acl-rw-1.
 * - acls.file: another kmirrord with only a file (Read on acl-hidden):
 *   the listing shows acl-hidden alone, acl-read is refused to a
 *   librdkafka consumer; a DENY appended to the file is enforced once
 *   re-read; a malformed line is named in status while the ACLs in force
 *   stay. */
#include <jansson.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const int kRecords = 50;
const char *kTopics[] = { "acl-read", "acl-rw-1", "acl-hidden" };

/* kafka-acls with args against the broker. */
std::string acls(const std::string &bootstrap,
		 const std::vector<std::string> &args, std::string *out = nullptr)
{
	std::vector<std::string> a = { "--bootstrap-server", bootstrap };
	a.insert(a.end(), args.begin(), args.end());
	ChildResult r = kafka_tool("org.apache.kafka.tools.AclCommand", a, 120000);
	if (out)
		*out = r.out;
	return r.exit_code == 0 ? "" : "kafka-acls: " + r.describe() + r.out;
}

/* The topics a Metadata of every topic shows (kcat -L). */
std::string listed(const std::string &bootstrap, std::set<std::string> *out)
{
	ChildResult r = run_command({ "kcat", "-b", bootstrap, "-L", "-m", "10" },
				    30000);
	std::regex re("topic \"([^\"]+)\" with");

	out->clear();
	for (std::sregex_iterator it(r.out.begin(), r.out.end(), re), end;
	     it != end; ++it)
		out->insert((*it)[1]);
	return r.exit_code == 0 ? "" : "kcat -L: " + r.describe();
}

/* kcat reading a partition from its start to its end (no group): what it
 * printed, its errors included ("Topic authorization failed"; librdkafka's
 * assigned consumer reports none and just gets no data). */
std::string kcat_read(const std::string &bootstrap, const std::string &topic)
{
	ChildResult r = run_command({ "kcat", "-b", bootstrap, "-C", "-t", topic,
				      "-p", "0", "-o", "beginning", "-e", "-m",
				      "10" },
				    30000);
	return r.out + r.err;
}

/* kmirrord's status "acls" object, or null. */
json_t *acl_status(const Daemon &d)
{
	ChildResult r;
	json_error_t e;
	if (ctl(d, { "status", "--json" }, &r) != "")
		return nullptr;
	json_t *root = json_loads(r.out.c_str(), 0, &e);
	json_t *a = root ? json_incref(json_object_get(root, "acls")) : nullptr;
	json_decref(root);
	return a;
}

int64_t acl_figure(const Daemon &d, const char *key)
{
	json_t *a = acl_status(d);
	int64_t v = a ? json_integer_value(json_object_get(a, key)) : -1;
	json_decref(a);
	return v;
}

std::string acl_text(const Daemon &d, const char *key)
{
	json_t *a = acl_status(d);
	const char *s = a ? json_string_value(json_object_get(a, key)) : nullptr;
	std::string v = s ? s : "";
	json_decref(a);
	return v;
}

/* The ACLs `kafka-acls --list` shows whose pattern covers one of the
 * topics or groups: what acls.sync is to copy. */
int covering(const std::string &list, const std::vector<std::string> &topics,
	     const std::vector<std::string> &groups)
{
	std::regex res("resourceType=(TOPIC|GROUP|CLUSTER|TRANSACTIONAL_ID), "
		       "name=([^,]+), patternType=(LITERAL|PREFIXED)");
	std::regex acl("\\(principal=");
	int n = 0;
	bool on = false;
	std::istringstream in(list);
	std::string line;
	while (std::getline(in, line)) {
		std::smatch m;
		if (std::regex_search(line, m, res)) {
			const auto &names = m[1] == "TOPIC" ? topics : groups;
			std::string name = m[2], type = m[1];
			on = false;
			if (type != "TOPIC" && type != "GROUP")
				continue;
			for (const auto &t : names)
				on |= m[3] == "PREFIXED" ? t.rfind(name, 0) == 0
							 : (name == "*" || name == t);
		} else if (on && std::regex_search(line, acl)) {
			n++;
		}
	}
	return n;
}

bool put(const std::string &path, const std::string &text)
{
	std::ofstream f(path, std::ios::trunc);
	f << text;
	return f.good();
}

} // namespace

class KafkaAcls : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		broker_ = new KafkaBroker(
			{ "authorizer.class.name=org.apache.kafka.metadata."
			  "authorizer.StandardAuthorizer",
			  "super.users=User:ANONYMOUS" });
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
	}

	void SetUp() override
	{
		ASSERT_EQ("", dir_.error());
		if (!ready_) {
			ASSERT_NO_FATAL_FAILURE(prepare());
		}
	}

	static void prepare()
	{
		std::string b;
		ASSERT_EQ("", broker_->start()) << broker_->log_tail();
		fprintf(stderr, "kafka broker up in %lld ms\n",
			(long long)broker_->start_ms());
		b = broker_->bootstrap();
		for (const char *t : kTopics) {
			ASSERT_EQ("", broker_->create_topic(t, 1));
			ProduceSpec s;
			s.topic = t;
			s.count = kRecords;
			ASSERT_EQ("", produce(b, s));
			int64_t lo, hi;
			ASSERT_EQ("", watermarks(b, t, 0, &lo, &hi));
			end_[t] = hi;
		}
		ASSERT_EQ("", acls(b, { "--add", "--allow-principal",
					"User:ANONYMOUS", "--operation", "Read",
					"--topic", "acl-read", "--topic",
					"acl-elsewhere", "--group", "acl-app" }));
		ASSERT_EQ("", acls(b, { "--add", "--allow-principal",
					"User:ANONYMOUS", "--operation", "Read",
					"--operation", "Write", "--topic", "acl-rw-",
					"--resource-pattern-type", "prefixed" }));
		ready_ = true;
	}

	Daemon daemon(const std::string &name, std::vector<std::string> sets)
	{
		sets.push_back("source.bootstrap.servers=" + broker_->bootstrap());
		sets.push_back("topics=acl-read,acl-rw-1,acl-hidden");
		return Daemon(dir_.file(name), sets);
	}

	/* Every topic mirrored to the broker's end. */
	void wait_mirrored(Daemon &d)
	{
		ASSERT_EQ("", d.wait_status(
				      [&](const std::map<std::string, PartStatus> &st) {
					      for (const char *t : kTopics) {
						      auto it = st.find(std::string(t) + ":0");
						      if (it == st.end() ||
							  it->second.hw != end_[t])
							      return false;
					      }
					      return true;
				      },
				      60000));
	}

	static KafkaBroker *broker_;
	static bool ready_;
	static std::map<std::string, int64_t> end_;
	TempDir dir_{ "km-kafka-acls" };
};

KafkaBroker *KafkaAcls::broker_ = nullptr;
bool KafkaAcls::ready_ = false;
std::map<std::string, int64_t> KafkaAcls::end_;

TEST_F(KafkaAcls, SyncedAclsFromTheSourceHold)
{
	Daemon d = daemon("data-sync", { "acls.sync=true",
					 "acls.sync.interval.ms=1000",
					 "groups=acl-app" });
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(wait_mirrored(d));

	/* What kmirrord took is what the source lists for its topics and
	 * group (acl-elsewhere's ACL stays behind). */
	std::string list;
	ASSERT_EQ("", acls(broker_->bootstrap(), { "--list" }, &list));
	int want = covering(list, { "acl-read", "acl-rw-1", "acl-hidden" },
			    { "acl-app" });
	ASSERT_EQ(4, want) << list; // Read, Read+Write prefixed, group Read
	ASSERT_TRUE(poll_until([&] { return acl_figure(d, "from_source") == want; },
			       30000))
		<< "from_source " << acl_figure(d, "from_source") << ", sync: "
		<< acl_text(d, "sync");
	EXPECT_EQ("ok", acl_text(d, "sync"));

	std::set<std::string> seen;
	ASSERT_EQ("", listed(d.bootstrap(), &seen));
	EXPECT_EQ(1u, seen.count("acl-read"));
	EXPECT_EQ(1u, seen.count("acl-rw-1"));
	EXPECT_EQ(0u, seen.count("acl-hidden")) << "no Describe: hidden";
	ASSERT_EQ("", listed(broker_->bootstrap(), &seen));
	EXPECT_EQ(1u, seen.count("acl-hidden")) << "the super user sees it there";

	/* Kafka's Java consumer: the same records as on the broker. */
	std::string on_broker, on_us;
	ASSERT_EQ("", console_consume(broker_->bootstrap(), "acl-read", 0,
				      end_["acl-read"], "read_uncommitted",
				      &on_broker));
	ASSERT_EQ("", console_consume(d.bootstrap(), "acl-read", 0,
				      end_["acl-read"], "read_uncommitted", &on_us));
	EXPECT_EQ(on_broker, on_us);
	ChildResult r = kafka_tool(
		"org.apache.kafka.tools.consumer.ConsoleConsumer",
		{ "--bootstrap-server", d.bootstrap(), "--topic", "acl-hidden",
		  "--partition", "0", "--offset", "earliest", "--max-messages",
		  "1", "--timeout-ms", "20000" },
		120000);
	EXPECT_NE(std::string::npos,
		  r.err.find("Not authorized to access topics: [acl-hidden]"))
		<< r.err;
	r = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
		       { "--bootstrap-server", d.bootstrap(), "--topic",
			 "acl-read", "--group", "other-app", "--from-beginning",
			 "--max-messages", "1", "--timeout-ms", "20000" },
		       120000);
	EXPECT_NE(std::string::npos,
		  r.err.find("Not authorized to access group: other-app"))
		<< r.err;

	/* The source's ACLs change: kmirrord follows. */
	std::vector<std::string> describe = { "--allow-principal", "User:ANONYMOUS",
					      "--operation", "Describe", "--topic",
					      "acl-hidden" };
	std::vector<std::string> add = { "--add" }, rm = { "--remove", "--force" };
	add.insert(add.end(), describe.begin(), describe.end());
	rm.insert(rm.end(), describe.begin(), describe.end());
	ASSERT_EQ("", acls(broker_->bootstrap(), add));
	EXPECT_TRUE(poll_until([&] {
		return listed(d.bootstrap(), &seen) == "" && seen.count("acl-hidden");
	}, 30000)) << "an ACL added on the source";
	ASSERT_EQ("", acls(broker_->bootstrap(), rm));
	EXPECT_TRUE(poll_until([&] {
		return listed(d.bootstrap(), &seen) == "" &&
		       seen.count("acl-read") && !seen.count("acl-hidden");
	}, 30000)) << "an ACL removed on the source";

	/* After the failover: Write where the source gave it, else
	 * TOPIC_AUTHORIZATION_FAILED. */
	ChildResult sr;
	ASSERT_EQ("", ctl(d, { "stop", "--all", "--json" }, &sr));
	ProduceSpec p;
	ProduceResult pr;
	p.topic = "acl-read";
	p.count = 5;
	p.timeout_ms = 10000;
	EXPECT_NE("", produce(d.bootstrap(), p, &pr));
	EXPECT_EQ(0, pr.delivered);
	EXPECT_NE(std::string::npos,
		  pr.first_error.find("Topic authorization failed"))
		<< pr.first_error;
	p.topic = "acl-rw-1";
	EXPECT_EQ("", produce(d.bootstrap(), p, &pr));
	EXPECT_EQ(5, pr.delivered);
	int64_t lo, hi = -1;
	EXPECT_TRUE(poll_until([&] {
		return watermarks(d.bootstrap(), "acl-rw-1", 0, &lo, &hi) == "" &&
		       hi >= end_["acl-rw-1"] + 5;
	}, 20000)) << "high watermark " << hi;
	json_t *a = acl_status(d);
	ASSERT_NE(nullptr, a);
	EXPECT_GT(json_integer_value(
			  json_object_get(json_object_get(a, "denied"), "topic")),
		  0);
	EXPECT_GT(json_integer_value(
			  json_object_get(json_object_get(a, "denied"), "group")),
		  0);
	json_decref(a);
}

TEST_F(KafkaAcls, AclsFileEnforcedAndReread)
{
	std::string file = dir_.file("acls");
	/* librdkafka's consumer (kafka_peers.h) names a group kmtest-...:
	 * it asks for its coordinator even when it only assigns. */
	const std::string group = "User:ANONYMOUS ALLOW Read GROUP PREFIXED kmtest-\n";
	ASSERT_TRUE(put(file, "# only the hidden topic\n" + group +
			      "User:ANONYMOUS ALLOW Read TOPIC LITERAL acl-hidden\n"));
	Daemon d = daemon("data-file", { "acls.file=" + file });
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(wait_mirrored(d));
	EXPECT_EQ(2, acl_figure(d, "from_file"));
	EXPECT_EQ(0, acl_figure(d, "from_source"));

	std::set<std::string> seen;
	ASSERT_EQ("", listed(d.bootstrap(), &seen));
	EXPECT_EQ(std::set<std::string>{ "acl-hidden" }, seen);
	std::vector<Message> got;
	ConsumeSpec c;
	c.topic = "acl-hidden";
	c.to = end_["acl-hidden"];
	ASSERT_EQ("", consume(d.bootstrap(), c, &got));
	EXPECT_EQ((size_t)end_["acl-hidden"], got.size());
	std::string e = kcat_read(d.bootstrap(), "acl-read");
	EXPECT_NE(std::string::npos, e.find("Topic authorization failed")) << e;

	/* A DENY appended: enforced once the file is read again. */
	ASSERT_TRUE(put(file, group +
			      "User:ANONYMOUS ALLOW Read TOPIC LITERAL acl-hidden\n"
			      "User:* DENY Read TOPIC PREFIXED acl-h host=*\n"));
	ASSERT_TRUE(poll_until([&] { return acl_figure(d, "from_file") == 3; },
			       10000));
	e = kcat_read(d.bootstrap(), "acl-hidden");
	EXPECT_NE(std::string::npos, e.find("Topic authorization failed")) << e;

	/* A malformed line: named, and the ACLs in force stay. */
	ASSERT_TRUE(put(file, group + "User:ANONYMOUS ALLOW Read TOPIC acl-read\n"
			      "User:ANONYMOUS ALOW Read TOPIC acl-hidden\n"));
	ASSERT_TRUE(poll_until([&] { return acl_text(d, "file_error") != ""; },
			       10000));
	EXPECT_NE(std::string::npos, acl_text(d, "file_error").find("line 3"))
		<< acl_text(d, "file_error");
	EXPECT_EQ(3, acl_figure(d, "from_file"));
	e = kcat_read(d.bootstrap(), "acl-read");
	EXPECT_NE(std::string::npos, e.find("Topic authorization failed")) << e;
}

/* Two SASL users on kmirrord's listener (sasl.users.file, made with
 * kmirror-users from a password on standard input), each with its own
 * ACLs in acls.file: kcat logged in as each sees and reads only its own
 * topic and is refused the other's. */
TEST_F(KafkaAcls, SaslUsersGetTheirOwnRights)
{
	std::string users = dir_.file("users"), file = dir_.file("acls-sasl");
	struct {
		const char *name, *password, *topic, *other;
	} who[] = { { "alice", "alice-secret", "acl-read", "acl-hidden" },
		    { "bob", "bob-secret", "acl-hidden", "acl-read" } };
	for (auto &u : who) {
		ChildResult r = kmirror_users({ "add", users, u.name, "--mechanism",
						"SCRAM-SHA-256" },
					       u.password);
		ASSERT_EQ(0, r.exit_code) << r.describe() << r.err;
	}
	ASSERT_TRUE(put(file, "User:alice ALLOW Read TOPIC LITERAL acl-read\n"
			      "User:bob ALLOW Read TOPIC LITERAL acl-hidden\n"));
	Daemon d = daemon("data-sasl", { "acls.file=" + file,
					 "sasl.users.file=" + users,
					 "listeners=SASL_PLAINTEXT://127.0.0.1:0" });
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(wait_mirrored(d));
	uint16_t port = 0;
	ASSERT_EQ("", listener_port(d, "SASL_PLAINTEXT", &port));
	const std::string bs = "127.0.0.1:" + std::to_string(port);
	for (auto &u : who) {
		std::vector<std::string> login = {
			"-X", "security.protocol=SASL_PLAINTEXT", "-X",
			"sasl.mechanisms=SCRAM-SHA-256", "-X",
			std::string("sasl.username=") + u.name, "-X",
			std::string("sasl.password=") + u.password };
		std::vector<std::string> ls = { "kcat", "-b", bs, "-L",
						"-m", "10" };
		ls.insert(ls.end(), login.begin(), login.end());
		ChildResult r = run_command(ls, 30000);
		EXPECT_NE(std::string::npos,
			  r.out.find(std::string("topic \"") + u.topic + "\""))
			<< u.name << ": " << r.out << r.err;
		EXPECT_EQ(std::string::npos,
			  r.out.find(std::string("topic \"") + u.other + "\""))
			<< u.name << ": " << r.out;
		auto read_cmd = [&](const char *topic) {
			std::vector<std::string> v = { "kcat", "-b", bs,
						       "-C", "-t", topic, "-p", "0",
						       "-o", "beginning", "-e", "-f",
						       "%o\\n" };
			v.insert(v.end(), login.begin(), login.end());
			return v;
		};
		r = run_command(read_cmd(u.topic), 30000);
		EXPECT_EQ(end_[u.topic],
			  (int64_t)std::count(r.out.begin(), r.out.end(), '\n'))
			<< u.name << ": " << r.err;
		std::vector<std::string> rd = read_cmd(u.other);
		r = run_command(rd, 30000);
		EXPECT_NE(std::string::npos,
			  (r.out + r.err).find("Topic authorization failed"))
			<< u.name << ": " << r.out << r.err;
	}
	EXPECT_GE(acl_figure(d, "count"), 2);
}
