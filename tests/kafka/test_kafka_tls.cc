/* TLS and SASL to the source (issue 16, suite kafka-tls): kmirrord mirrors
 * a real Apache Kafka 4.x broker over SSL, SASL_SSL and SASL_PLAINTEXT
 * listeners, and refuses clearly what a real client would refuse.
 *
 * Method: the suite makes a CA and two broker certificates with `openssl`
 * (one naming localhost and 127.0.0.1, one naming only other.example), and
 * one KRaft broker (kafka_broker.h) with a PLAINTEXT listener for the
 * harness's own clients plus SSL, SASL_SSL, SASL_PLAINTEXT and WRONGHOST
 * (SSL with the other.example certificate) listeners; PLAIN users come
 * from the listeners' JAAS config, SCRAM users are made with Kafka's own
 * kafka-configs (--add-config 'SCRAM-SHA-256=[password=...]'). Topics are
 * filled with kafka-producer-perf-test. Each case starts kmirrord with the
 * source.* security keys against one listener and
 * - right settings: waits until kmirrord's high watermark is the broker's
 *   (ListOffsets), then compares every record through both listeners
 *   (librdkafka, CRCs checked) and the segment files byte for byte
 *   (kafka_files.h: only the mapped producer ids and CRCs may differ);
 * - wrong password, a CA that did not sign the broker's certificate, a
 *   certificate for another host: waits until the partition is FAILED with
 *   a reason naming the broker and the cause (the TLS verify error, the
 *   broker's SASL error), and checks that kmirrord wrote no record.
 * An MTLS listener requires a client certificate: kmirrord's has an
 * encrypted key (source.ssl.key.password.file).
 * KIP-368 (the SASL_PLAINTEXT listener's SCRAM-SHA-512 sessions last 2 s):
 * the fetch connection re-authenticates; the control thread's client
 * (control/kclient.h, linked in) asks ApiVersions on one connection over
 * three sessions and more; and the group-offset sync carries offsets
 * committed on the broker (librdkafka) before and after the third
 * expiry to kmirrord's OffsetFetch. */
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>

#include "common/errors.h"
#include "control/kclient.h"
#include "dataplane/net/ktls.h"
#include "dataplane/net/secconn.h"
#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_files.h"
#include "tests/support/certs.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const char *kScramUser = "bob", *kScramPass = "bob-secret";
const char *kPlainUser = "alice", *kPlainPass = "alice-secret";

bool put(const std::string &path, const std::string &text, mode_t mode)
{
	std::ofstream f(path, std::ios::trunc);
	f << text;
	f.close();
	return f.good() && chmod(path.c_str(), mode) == 0;
}

/* listener.name.<l>.KEY=value lines of one secured listener. */
std::vector<std::string> listener_props(const std::string &l,
					const std::string &keystore, bool sasl)
{
	std::string p = "listener.name." + l + ".";
	std::vector<std::string> v;
	if (!keystore.empty()) {
		v.push_back(p + "ssl.keystore.type=PEM");
		v.push_back(p + "ssl.keystore.location=" + keystore);
	}
	if (!sasl)
		return v;
	v.push_back(p + "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512");
	v.push_back(p + "plain.sasl.jaas.config=org.apache.kafka.common.security."
		    "plain.PlainLoginModule required user_" +
		    std::string(kPlainUser) + "=\"" + kPlainPass + "\";");
	for (const char *m : { "scram-sha-256", "scram-sha-512" })
		v.push_back(p + m + ".sasl.jaas.config=org.apache.kafka.common."
			    "security.scram.ScramLoginModule required;");
	return v;
}

/* A group's memberless commit of topic:0 (librdkafka): "" once acked. */
std::string commit_offset(const std::string &bootstrap, const std::string &group,
			  const std::string &topic, int64_t offset)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "group.id", group } },
				    &err);
	if (rk == nullptr)
		return err;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, topic.c_str(), 0)->offset = offset;
	rd_kafka_resp_err_t e = rd_kafka_commit(rk, l, 0);
	if (e == RD_KAFKA_RESP_ERR_NO_ERROR && l->elems[0].err)
		e = l->elems[0].err;
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_destroy(rk);
	return e ? std::string("commit: ") + rd_kafka_err2str(e) : "";
}

/* The group's committed offset of topic:0 (OffsetFetch), -1 if none. */
int64_t committed(const std::string &bootstrap, const std::string &group,
		  const std::string &topic)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "group.id", group } },
				    &err);
	int64_t off = -1;
	if (rk == nullptr)
		return -1;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, topic.c_str(), 0);
	if (rd_kafka_committed(rk, l, 10000) == 0 && !l->elems[0].err)
		off = l->elems[0].offset;
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_destroy(rk);
	return off;
}

} // namespace

class KafkaTls : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		certs_ = new TempDir("km-tls-certs");
		const std::string &d = certs_->path();
		setup_error_ = make_ca(d, "ca");
		if (setup_error_.empty())
			setup_error_ = make_ca(d, "otherca");
		if (setup_error_.empty())
			setup_error_ = make_cert(d, "ca", "broker", "/CN=broker",
						 "DNS:localhost,IP:127.0.0.1");
		if (setup_error_.empty())
			setup_error_ = make_cert(d, "ca", "stranger", "/CN=stranger",
						 "DNS:other.example");
		/* A client certificate for mutual TLS whose key is encrypted
		 * (AES-256, pass "client-key-pw"). */
		if (setup_error_.empty())
			setup_error_ = openssl({ "req", "-newkey", "rsa:2048", "-passout",
						 "pass:client-key-pw", "-keyout",
						 d + "/client.key", "-out", d + "/client.csr",
						 "-subj", "/CN=mirror-client" });
		if (setup_error_.empty())
			setup_error_ = openssl({ "x509", "-req", "-in", d + "/client.csr",
						 "-CA", d + "/ca.pem", "-CAkey", d + "/ca.key",
						 "-CAcreateserial", "-out", d + "/client.pem",
						 "-days", "2" });
		std::vector<std::string> props;
		for (auto &v : { listener_props("ssl", d + "/broker.ks.pem", false),
				 listener_props("sasl_ssl", d + "/broker.ks.pem", true),
				 listener_props("sasl_plaintext", "", true),
				 /* KIP-368: sessions of 2 s on this listener's
				  * SCRAM-SHA-512 (for every client of it). */
				 std::vector<std::string>{
					 "listener.name.sasl_plaintext.scram-sha-512."
					 "connections.max.reauth.ms=2000" },
				 listener_props("wronghost", d + "/stranger.ks.pem",
						false),
				 /* MTLS: SSL that requires a client certificate
				  * signed by the CA. */
				 listener_props("mtls", d + "/broker.ks.pem", false),
				 std::vector<std::string>{
					 "listener.name.mtls.ssl.client.auth=required",
					 "listener.name.mtls.ssl.truststore.type=PEM",
					 "listener.name.mtls.ssl.truststore.location=" + d +
						 "/ca.pem" } })
			props.insert(props.end(), v.begin(), v.end());
		broker_ = new KafkaBroker(props);
		ssl_ = broker_->add_listener("SSL", "SSL");
		sasl_ssl_ = broker_->add_listener("SASL_SSL", "SASL_SSL");
		sasl_plain_ = broker_->add_listener("SASL_PLAINTEXT", "SASL_PLAINTEXT");
		wronghost_ = broker_->add_listener("WRONGHOST", "SSL");
		mtls_ = broker_->add_listener("MTLS", "SSL");
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
		delete certs_;
		certs_ = nullptr;
	}

	void SetUp() override
	{
		ASSERT_EQ("", setup_error_);
		ASSERT_EQ("", dir_.error());
		if (broker_->running())
			return;
		ASSERT_EQ("", broker_->start()) << broker_->log_tail();
		fprintf(stderr, "kafka broker up in %lld ms\n",
			(long long)broker_->start_ms());
		ASSERT_EQ("", add_scram_user());
	}

	/* Kafka's own tool, as an administrator would; one mechanism per
	 * call (the broker refuses a user's two credentials in one request:
	 * "A user credential cannot be altered twice in the same request"). */
	static std::string add_scram_user()
	{
		for (const char *m : { "SCRAM-SHA-256=[iterations=4096,password=",
				       "SCRAM-SHA-512=[password=" }) {
			ChildResult r = kafka_tool(
				"kafka.admin.ConfigCommand",
				{ "--bootstrap-server", broker_->bootstrap(), "--alter",
				  "--add-config", std::string(m) + kScramPass + "]",
				  "--entity-type", "users", "--entity-name", kScramUser },
				120000);
			if (r.exit_code != 0)
				return "kafka-configs: " + r.describe() + r.out;
		}
		return "";
	}

	static std::string at(uint16_t port)
	{
		return "127.0.0.1:" + std::to_string(port);
	}

	/* A topic of n records, and its end on the broker. */
	int64_t fill(const std::string &topic, int n)
	{
		EXPECT_EQ("", broker_->create_topic(topic, 1));
		EXPECT_EQ("", broker_->producer_perf(topic, n, 100,
						      { "acks=all", "linger.ms=5" }));
		int64_t lo = -1, hi = -1;
		EXPECT_EQ("", watermarks(broker_->bootstrap(), topic, 0, &lo, &hi));
		return hi;
	}

	std::string secret(const std::string &name, const std::string &pw)
	{
		std::string p = dir_.file(name);
		return put(p, pw + "\n", 0600) ? p : "";
	}

	Daemon daemon_for(const std::string &topic, const std::string &source,
			  std::vector<std::string> sets)
	{
		sets.push_back("source.bootstrap.servers=" + source);
		sets.push_back("topics=" + topic);
		sets.push_back("mirror.failed.retry.initial.backoff.ms=60000");
		return Daemon(dir_.file("data-" + topic), sets);
	}

	/* Mirrored to the broker's end, then alike record for record and
	 * byte for byte. */
	void expect_mirrors(const std::string &topic, const std::string &source,
			    const std::vector<std::string> &sets)
	{
		int64_t end = fill(topic, 3000);
		ASSERT_GT(end, 0);
		Daemon d = daemon_for(topic, source, sets);
		ASSERT_EQ("", d.start());
		std::string k = topic + ":0";
		std::string why = d.wait_status(
			[&](const std::map<std::string, PartStatus> &st) {
				auto it = st.find(k);
				return it != st.end() && it->second.hw == end;
			},
			60000);
		std::map<std::string, PartStatus> st;
		d.status(&st);
		ASSERT_EQ("", why) << st[k].state << ": " << st[k].reason;
		ASSERT_NO_FATAL_FAILURE(
			expect_same_content(broker_->bootstrap(), d.bootstrap(), topic, 0,
					    false));
		bool tls = false;
		for (auto &s : sets)
			tls |= s == "source.security.protocol=SSL" ||
			       s == "source.security.protocol=SASL_SSL";
		std::string tls_line = tls ? expected_tls_line() : "";
		if (tls) {
			/* Which TLS, and the kTLS probe's answer, in status. */
			ChildResult sr;
			ASSERT_EQ("", ctl(d, { "status", "--json" }, &sr));
			json_t *root = json_loads(sr.out.c_str(), 0, nullptr);
			const char *v = json_string_value(
				json_object_get(root, "source_tls"));
			EXPECT_EQ(tls_line, v ? v : "(none)") << sr.out;
			json_decref(root);
		}
		ChildResult res;
		ASSERT_EQ("", d.stop(30000, &res));
		EXPECT_EQ(0, res.exit_code) << res.describe();
		if (tls) {
			EXPECT_NE(std::string::npos,
				  res.err.find("source TLS: " + tls_line))
				<< res.err;
		}
		for (const char *pw : { kScramPass, kPlainPass })
			EXPECT_EQ(std::string::npos, (res.out + res.err).find(pw))
				<< "a password in kmirrord's output";
		int mapped = 0;
		expect_identical(d.data_dir() + "/" + topic + "-0",
				 broker_->partition_dir(topic, 0), &mapped);
	}

	/* Wrong settings (bad) refused with every one of `want` said:
	 * - at the first start (the source must name the topics before
	 *   mirroring starts), kmirrord does not serve, its log says why
	 *   and no partition directory is made;
	 * - on a restart after the partition was mirrored with the right
	 *   settings (good) and the broker got more records, the partition
	 *   is FAILED with that reason, a transient one the daemon retries
	 *   with its backoff, and kmirrord's log end stays where it was:
	 *   nothing written. */
	void expect_refused(const std::string &topic, const std::string &good_src,
			    const std::vector<std::string> &good,
			    const std::string &bad_src,
			    const std::vector<std::string> &bad,
			    const std::vector<std::string> &want)
	{
		int64_t end = fill(topic, 100);
		ASSERT_GT(end, 0);
		std::string k = topic + ":0", dir = dir_.file("data-" + topic);
		{
			Daemon d = daemon_for(topic, bad_src, bad);
			std::string e = d.start(4000);
			for (auto &w : want)
				EXPECT_NE(std::string::npos, e.find(w))
					<< "'" << w << "' not in: " << e;
			struct stat st;
			EXPECT_NE(0, stat((dir + "/" + topic + "-0").c_str(), &st));
		}
		{
			Daemon d = daemon_for(topic, good_src, good);
			ASSERT_EQ("", d.start());
			ASSERT_EQ("", d.wait_status(
					      [&](const std::map<std::string, PartStatus> &s) {
						      auto it = s.find(k);
						      return it != s.end() && it->second.hw == end;
					      },
					      60000));
			ChildResult res;
			ASSERT_EQ("", d.stop(30000, &res));
		}
		ASSERT_EQ("", broker_->producer_perf(topic, 100, 100, { "acks=all" }));
		Daemon d = daemon_for(topic, bad_src, bad);
		ASSERT_EQ("", d.start());
		std::map<std::string, PartStatus> st;
		std::string why = d.wait_status(
			[&](const std::map<std::string, PartStatus> &s) {
				auto it = s.find(k);
				return it != s.end() && it->second.state == "FAILED";
			},
			30000);
		d.status(&st);
		ASSERT_EQ("", why) << st[k].state << ": " << st[k].reason;
		for (auto &w : want)
			EXPECT_NE(std::string::npos, st[k].reason.find(w))
				<< "'" << w << "' not in: " << st[k].reason;
		EXPECT_EQ(end, st[k].leo) << "nothing may be written";
		ChildResult res;
		ASSERT_EQ("", d.stop(30000, &res));
		/* On the FAILED retry machinery, not persisted for an operator. */
		EXPECT_NE(std::string::npos, res.err.find("transient FAILED")) << res.err;
	}

	std::string ca() const { return certs_->file("ca.pem"); }

	/* What kmirrord must say it uses: user-space TLS, and the kernel's
	 * answer to the kTLS probe (ktls.h), asked here of the same kernel. */
	static std::string expected_tls_line()
	{
		km_ktls_answer p;
		char user[128];
		km_ktls_user_tls(user, sizeof(user));
		EXPECT_EQ(0, km_ktls_probe(&p));
		return std::string(user) + "; " + p.why;
	}

	static TempDir *certs_;
	static KafkaBroker *broker_;
	static std::string setup_error_;
	static uint16_t ssl_, sasl_ssl_, sasl_plain_, wronghost_, mtls_;
	TempDir dir_{ "km-kafka-tls" };
};

TempDir *KafkaTls::certs_ = nullptr;
KafkaBroker *KafkaTls::broker_ = nullptr;
std::string KafkaTls::setup_error_;
uint16_t KafkaTls::ssl_ = 0, KafkaTls::sasl_ssl_ = 0,
	 KafkaTls::sasl_plain_ = 0, KafkaTls::wronghost_ = 0, KafkaTls::mtls_ = 0;

/* SSL: the broker's certificate checked against the CA and, by default
 * (https), against the address kmirrord reached it by (its IP SAN). */
TEST_F(KafkaTls, SslSourceMirrorsByteForByte)
{
	expect_mirrors("tssl", at(ssl_),
		       { "source.security.protocol=SSL",
			 "source.ssl.ca.location=" + ca() });
}

/* SASL_SSL with SCRAM-SHA-256, the user made by kafka-configs. */
TEST_F(KafkaTls, SaslSslScramSha256MirrorsByteForByte)
{
	expect_mirrors("tscram256", at(sasl_ssl_),
		       { "source.security.protocol=SASL_SSL",
			 "source.ssl.ca.location=" + ca(),
			 "source.sasl.mechanism=SCRAM-SHA-256",
			 std::string("source.sasl.username=") + kScramUser,
			 "source.sasl.password.file=" + secret("pw", kScramPass) });
}

/* SASL_SSL with PLAIN (a JAAS user), SASL_PLAINTEXT with SCRAM-SHA-512. */
TEST_F(KafkaTls, SaslPlainAndScramSha512Mirror)
{
	expect_mirrors("tplain", at(sasl_ssl_),
		       { "source.security.protocol=SASL_SSL",
			 "source.ssl.ca.location=" + ca(),
			 "source.sasl.mechanism=PLAIN",
			 std::string("source.sasl.username=") + kPlainUser,
			 "source.sasl.password.file=" + secret("pw1", kPlainPass) });
	expect_mirrors("tscram512", at(sasl_plain_),
		       { "source.security.protocol=SASL_PLAINTEXT",
			 "source.sasl.mechanism=SCRAM-SHA-512",
			 std::string("source.sasl.username=") + kScramUser,
			 "source.sasl.password.file=" + secret("pw2", kScramPass) });
}

std::vector<std::string> scram256(const std::string &pw_file)
{
	return { "source.security.protocol=SASL_SSL",
		 "source.sasl.mechanism=SCRAM-SHA-256",
		 std::string("source.sasl.username=") + kScramUser,
		 "source.sasl.password.file=" + pw_file };
}

/* A wrong password: the broker's own words, the mechanism, the broker. */
TEST_F(KafkaTls, WrongPasswordFailsClearlyAndWritesNothing)
{
	auto good = scram256(secret("pw", kScramPass));
	auto bad = scram256(secret("badpw", "not-it"));
	good.push_back("source.ssl.ca.location=" + ca());
	bad.push_back("source.ssl.ca.location=" + ca());
	expect_refused("twrongpw", at(sasl_ssl_), good, at(sasl_ssl_), bad,
		       { "SASL authentication", at(sasl_ssl_), "SCRAM-SHA-256",
			 "invalid credentials" });
}

/* A CA that did not sign the broker's certificate. */
TEST_F(KafkaTls, WrongCaFailsClearlyAndWritesNothing)
{
	expect_refused("twrongca", at(ssl_),
		       { "source.security.protocol=SSL",
			 "source.ssl.ca.location=" + ca() },
		       at(ssl_),
		       { "source.security.protocol=SSL",
			 "source.ssl.ca.location=" + certs_->file("otherca.pem") },
		       { "TLS handshake", at(ssl_), "certificate verify failed",
			 "unable to get local issuer certificate" });
}

/* A certificate signed by the right CA for another host: the listener
 * whose certificate names only other.example, reached as 127.0.0.1. */
TEST_F(KafkaTls, CertificateForAnotherHostFailsClearly)
{
	std::vector<std::string> ssl = { "source.security.protocol=SSL",
					 "source.ssl.ca.location=" + ca() };
	expect_refused("twronghost", at(ssl_), ssl, at(wronghost_), ssl,
		       { "TLS handshake", at(wronghost_),
			 "certificate verify failed", "IP address mismatch" });
}

/* KIP-368: the SASL_PLAINTEXT listener grants SCRAM-SHA-512 sessions of
 * 2 s and closes a connection whose session ended. kmirrord mirrors a
 * topic written to in rounds for 7 s (librdkafka, 50 records a round,
 * each round waited for on kmirrord): it re-authenticates on its fetch
 * connection (its log says so, more than once) and that connection is
 * never lost (no reconnect of the partition). */
TEST_F(KafkaTls, ReauthenticatesBeforeTheSessionEnds)
{
	const std::string topic = "treauth", k = topic + ":0";
	ASSERT_GT(fill(topic, 100), 0);
	Daemon d = daemon_for(
		topic, at(sasl_plain_),
		{ "source.security.protocol=SASL_PLAINTEXT",
		  "source.sasl.mechanism=SCRAM-SHA-512",
		  std::string("source.sasl.username=") + kScramUser,
		  "source.sasl.password.file=" + secret("pw", kScramPass) });
	ASSERT_EQ("", d.start());
	int64_t t0 = now_ms(), seq = 0;
	int rounds = 0;
	std::map<std::string, PartStatus> st;
	while (now_ms() - t0 < 7000) {
		ProduceSpec ps;
		ps.topic = topic;
		ps.count = 50;
		ps.first_seq = seq;
		seq += 50;
		ASSERT_EQ("", produce(broker_->bootstrap(), ps));
		int64_t lo = -1, end = -1;
		ASSERT_EQ("", watermarks(broker_->bootstrap(), topic, 0, &lo, &end));
		std::string why = d.wait_status(
			[&](const std::map<std::string, PartStatus> &s) {
				auto it = s.find(k);
				return it != s.end() && it->second.hw == end;
			},
			30000);
		d.status(&st);
		ASSERT_EQ("", why) << st[k].state << ": " << st[k].reason;
		rounds++;
	}
	EXPECT_EQ(0, st[k].reconnects) << "the broker closed an expired session";
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	size_t n = 0;
	for (size_t at = 0; (at = res.err.find("re-authenticated", at)) !=
			    std::string::npos; at++)
		n++;
	EXPECT_GE(n, 2u) << rounds << " rounds; " << res.err;
	/* A Fetch built while the connection re-authenticated, and so not
	 * sent, must not leave the broker's fetch session at an older offset
	 * than ours (fsess_inc.c km_fsess_inc_unsent). */
	EXPECT_EQ(std::string::npos, res.err.find("expected a batch at offset"))
		<< res.err;
	int mapped = 0;
	expect_identical(d.data_dir() + "/" + topic + "-0",
			 broker_->partition_dir(topic, 0), &mapped);
}

/* KIP-368 on the control thread's client (control/kclient.h, which asks
 * Metadata, DescribeConfigs, FindCoordinator, OffsetFetch): one connection
 * to the 2 s SCRAM-SHA-512 listener asked ApiVersions every 250 ms for
 * 7 s (three sessions and more) answers every call on the same socket,
 * re-authenticating before each session ends. */
TEST_F(KafkaTls, ControlClientReauthenticatesAcrossSessions)
{
	km_netsec_config cfg{};
	km_netsec sec{};
	char why[512] = "";
	cfg.protocol = KM_SEC_SASL_PLAINTEXT;
	cfg.mech = KM_SASL_SCRAM_SHA_512;
	cfg.user = kScramUser;
	cfg.password = kScramPass;
	ASSERT_EQ(0, km_netsec_init(&sec, &cfg, why, sizeof(why))) << why;
	km_kclient_set_security(&sec);
	km_config_addr a{};
	km_kclient c{};
	snprintf(a.host, sizeof(a.host), "127.0.0.1");
	a.port = sasl_plain_;
	ASSERT_EQ(0, km_kclient_open(&c, &a, 30000)) << c.why;
	int fd = c.fd, calls = 0;
	for (int64_t t0 = now_ms(); now_ms() - t0 < 7000; calls++) {
		bool yes = false;
		int rc = km_kclient_supports(&c, KM_API_METADATA, 0, &yes);
		ASSERT_EQ(0, rc) << "call " << calls << " at " << now_ms() - t0
				 << " ms: " << km_strerror(rc) << " " << c.why;
		EXPECT_TRUE(yes);
		/* The client's own pace, not a wait for anything. */
		usleep(250000);
	}
	EXPECT_EQ(fd, c.fd);
	EXPECT_GE(c.reauths, 3u) << calls << " calls";
	km_kclient_close(&c);
	km_kclient_set_security(nullptr);
	km_netsec_free(&sec);
}

/* The group-offset sync to kmirrord keeps working across the source's
 * session expiries (the 2 s SCRAM-SHA-512 listener): offsets committed
 * on the broker before and after the third expiry each show up in
 * kmirrord's OffsetFetch. */
TEST_F(KafkaTls, GroupSyncOutlivesSessionExpiries)
{
	const std::string topic = "tgsync", group = "gsync";
	int64_t end = fill(topic, 200);
	ASSERT_GT(end, 0);
	Daemon d = daemon_for(
		topic, at(sasl_plain_),
		{ "source.security.protocol=SASL_PLAINTEXT",
		  "source.sasl.mechanism=SCRAM-SHA-512",
		  std::string("source.sasl.username=") + kScramUser,
		  "source.sasl.password.file=" + secret("pw", kScramPass),
		  "groups=" + group, "group.sync.interval.ms=200" });
	ASSERT_EQ("", d.start());
	int64_t t0 = now_ms(), off = 0;
	int after_third = 0;
	while (after_third < 2) {
		off += end / 20;
		ASSERT_EQ("", commit_offset(broker_->bootstrap(), group, topic, off));
		int64_t deadline = now_ms() + 20000, got = -1;
		while ((got = committed(d.bootstrap(), group, topic)) != off &&
		       now_ms() < deadline)
			;
		ASSERT_EQ(off, got) << "committed on the source at "
				    << now_ms() - t0 << " ms";
		if (now_ms() - t0 > 6500)
			after_third++;
	}
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	EXPECT_EQ(std::string::npos, res.err.find("re-authentication failed"))
		<< res.err;
}

/* Mutual TLS with an encrypted client key (source.ssl.key.password.file)
 * against a listener that requires a client certificate: a wrong password
 * is refused at start naming the certificate; the right one mirrors byte
 * for byte. */
TEST_F(KafkaTls, EncryptedClientKeyMutualTls)
{
	std::vector<std::string> sets = {
		"source.security.protocol=SSL", "source.ssl.ca.location=" + ca(),
		"source.ssl.certificate.location=" + certs_->file("client.pem"),
		"source.ssl.key.location=" + certs_->file("client.key") };
	{
		std::vector<std::string> bad = sets;
		bad.push_back("source.ssl.key.password.file=" +
			      secret("kpw-wrong", "not-the-password"));
		Daemon d = daemon_for("tmtls-bad", at(mtls_), bad);
		std::string e = d.start(10000);
		EXPECT_NE(std::string::npos,
			  e.find("cannot load certificate '" + certs_->file("client.pem")))
			<< e;
	}
	sets.push_back("source.ssl.key.password.file=" +
		       secret("kpw", "client-key-pw"));
	expect_mirrors("tmtls", at(mtls_), sets);
}

/* A password file group or others may read is refused at start, naming
 * the key and the fix; kmirrord does not serve. */
TEST_F(KafkaTls, PasswordFileOthersMayReadIsRefused)
{
	std::string pw = secret("pw-open", kScramPass);
	ASSERT_EQ(0, chmod(pw.c_str(), 0644));
	Daemon d = daemon_for("topen", at(sasl_ssl_),
			      { "source.security.protocol=SASL_SSL",
				"source.ssl.ca.location=" + ca(),
				"source.sasl.mechanism=SCRAM-SHA-256",
				std::string("source.sasl.username=") + kScramUser,
				"source.sasl.password.file=" + pw });
	std::string e = d.start(10000);
	EXPECT_NE(std::string::npos, e.find("source.sasl.password.file")) << e;
	EXPECT_NE(std::string::npos, e.find("mode 0644")) << e;
	EXPECT_NE(std::string::npos, e.find("chmod 600")) << e;
	EXPECT_EQ(std::string::npos, e.find(kScramPass)) << e;
}
