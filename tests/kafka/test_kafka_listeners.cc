/* Several listeners and TLS on kmirrord's own listener (issue 16, the
 * listener side; suite kafka-listeners).
 *
 * Goal: kmirrord with a PLAINTEXT and an SSL listener serves Kafka's clients
 * over both alike; Metadata answers each client with the advertised address
 * of the listener it came in on; ssl.client.auth=required lets in only a
 * client whose certificate the CA signed; a produce after failover over SSL
 * lands; hostile clients on the TLS port are closed within the bound while
 * a good client reads and the mirror goes on mirroring.
 *
 * Method: the suite makes a CA, kmirrord's certificate (localhost,
 * 127.0.0.1), a client certificate and a stranger's (another CA) with
 * `openssl`; one KRaft broker (kafka_broker.h) is the source, its topics
 * filled with kafka-producer-perf-test. One kmirrord mirrors them with
 * listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0 (the SSL listener
 * advertised as localhost), the bound ports read from `kmirrorctl status
 * --json`. Expectations come from the source: what kcat and Kafka's Java
 * console consumer read from the broker must be what they read from
 * kmirrord over each listener; the HW to reach is the broker's (ListOffsets).
 * Hostile clients are raw sockets and OpenSSL (libssl, and `openssl
 * s_client -tls1_2` for the renegotiation) on threads; every wait polls an
 * observable condition under a deadline. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <jansson.h>

#include "tests/e2e/daemon.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/certs.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

bool put(const std::string &path, const std::string &text)
{
	std::ofstream f(path, std::ios::trunc);
	f << text;
	f.close();
	return f.good();
}

ChildResult kcat(const std::vector<std::string> &args, int timeout_ms = 60000)
{
	std::vector<std::string> argv = { "kcat" };
	argv.insert(argv.end(), args.begin(), args.end());
	return run_command(argv, timeout_ms);
}

/* Every record of topic-0 as kcat prints it ("offset|key|value"), read
 * to the partition's end through bootstrap with `sec` (-X settings). */
std::string kcat_read(const std::string &bootstrap,
		      const std::vector<std::string> &sec,
		      const std::string &topic, std::string *out)
{
	std::vector<std::string> a = { "-b", bootstrap };
	a.insert(a.end(), sec.begin(), sec.end());
	for (const char *s : { "-C", "-p", "0", "-o", "beginning", "-e", "-q",
			       "-f", "%o|%k|%s\\n", "-t" })
		a.push_back(s);
	a.push_back(topic);
	ChildResult r = kcat(a);
	*out = r.out;
	return r.exit_code == 0 && !r.out.empty() ? "" : "kcat -C: " + r.describe();
}

int64_t lines(const std::string &s)
{
	return (int64_t)std::count(s.begin(), s.end(), '\n');
}

/* The first line where a and b differ, for failure messages. */
std::string first_diff(const std::string &a, const std::string &b)
{
	size_t i = 0, line = 1;
	while (i < a.size() && i < b.size() && a[i] == b[i])
		line += a[i++] == '\n';
	size_t sa = a.rfind('\n', i ? i - 1 : 0), sb = b.rfind('\n', i ? i - 1 : 0);
	sa = sa == std::string::npos ? 0 : sa + 1;
	sb = sb == std::string::npos ? 0 : sb + 1;
	return "line " + std::to_string(line) + ": '" +
	       a.substr(sa, a.find('\n', sa) - sa) + "' vs '" +
	       b.substr(sb, b.find('\n', sb) - sb) + "' (" +
	       std::to_string(a.size()) + " vs " + std::to_string(b.size()) +
	       " bytes)";
}

/* Kafka's console consumer (Java) through bootstrap with "key=value"
 * consumer properties: n records of topic-0, "Offset:N<TAB>key<TAB>value". */
std::string java_read(const std::string &bootstrap,
		      const std::vector<std::string> &props,
		      const std::string &topic, int64_t n, std::string *out)
{
	std::vector<std::string> a = {
		"--bootstrap-server", bootstrap, "--topic", topic, "--partition",
		"0", "--offset", "earliest", "--max-messages", std::to_string(n),
		"--timeout-ms", "30000", "--formatter-property", "print.offset=true",
		"--formatter-property", "print.key=true"
	};
	for (const std::string &p : props) {
		a.push_back("--command-property"); /* 4.3's name */
		a.push_back(p);
	}
	ChildResult r = kafka_tool("org.apache.kafka.tools.consumer.ConsoleConsumer",
				   a, 120000);
	*out = r.out;
	if (r.exit_code != 0)
		return "kafka-console-consumer: " + r.describe();
	std::string done = "Processed a total of " + std::to_string(n) + " messages";
	return r.err.find(done) != std::string::npos
		       ? "" : "kafka-console-consumer: " + r.err;
}

/* The brokers kcat -L lists ("broker 1 at HOST:PORT"). */
std::string kcat_brokers(const std::string &bootstrap,
			 const std::vector<std::string> &sec, std::string *out)
{
	std::vector<std::string> a = { "-b", bootstrap, "-L" };
	a.insert(a.end(), sec.begin(), sec.end());
	ChildResult r = kcat(a, 30000);
	out->clear();
	size_t at = 0;
	while ((at = r.out.find("  broker ", at)) != std::string::npos) {
		size_t end = r.out.find('\n', at);
		*out += r.out.substr(at + 2, end - at - 2) + "\n";
		at = end;
	}
	return r.exit_code == 0 ? "" : "kcat -L: " + r.describe();
}

int dial(uint16_t port)
{
	sockaddr_in sa{};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_family = AF_INET;
	sa.sin_port = htons(port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	/* The threads' own bound, well past the server's 3 s. */
	timeval tv{ 20, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Until the server ends the connection: its time in ms, or -1 if the
 * thread's 20 s bound passed first. */
int64_t ms_until_closed(int fd, int64_t t0)
{
	char buf[4096];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return now_ms() - t0;
		if (n < 0)
			return -1;
	}
}

/* Until kmirrord's stderr holds text (a short read drains its pipe). */
bool logged(Daemon &d, const std::string &text)
{
	return poll_until([&] {
		std::string line;
		(void)d.child().read_line(5, &line);
		return d.child().stderr_so_far().find(text) != std::string::npos;
	}, 10000);
}

int count(const std::string &s, const std::string &what)
{
	int n = 0;
	for (size_t at = s.find(what); at != std::string::npos;
	     at = s.find(what, at + 1))
		n++;
	return n;
}

} // namespace

class KafkaListeners : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		signal(SIGPIPE, SIG_IGN); /* hostile writers after the close */
		certs_ = new TempDir("km-lsn-certs");
		const std::string &d = certs_->path();
		std::string e = make_ca(d, "ca");
		if (e.empty())
			e = make_ca(d, "otherca");
		if (e.empty())
			e = make_cert(d, "ca", "kmirrord", "/CN=kmirrord",
				      "DNS:localhost,IP:127.0.0.1");
		if (e.empty())
			e = make_cert(d, "ca", "alice", "/O=x/OU=apps/CN=alice", "");
		if (e.empty())
			e = make_cert(d, "otherca", "mallory", "/CN=mallory", "");
		setup_error_ = e;
		broker_ = new KafkaBroker();
	}
	static void TearDownTestSuite()
	{
		delete mirror_;
		mirror_ = nullptr;
		delete broker_;
		broker_ = nullptr;
		delete data_;
		data_ = nullptr;
		delete certs_;
		certs_ = nullptr;
	}

	void SetUp() override
	{
		ASSERT_EQ("", setup_error_);
		if (mirror_ != nullptr)
			return;
		ASSERT_EQ("", broker_->start()) << broker_->log_tail();
		for (const char *t : { "tl", "tfail" }) {
			ASSERT_EQ("", broker_->create_topic(t, 1));
			ASSERT_EQ("", broker_->producer_perf(t, 2000, 100,
							      { "acks=all", "linger.ms=5" }));
		}
		data_ = new TempDir("km-lsn");
		uint16_t want = free_port();
		ASSERT_NE(0, want);
		std::string sp = std::to_string(want);
		mirror_ = new Daemon(
			data_->file("data"),
			{ "source.bootstrap.servers=" + broker_->bootstrap(),
			  "topics=tl,tfail",
			  "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:" + sp,
			  /* Metadata over SSL must say localhost: the listener's
			   * own advertised address, not the PLAINTEXT one's. */
			  "advertised.listeners=SSL://localhost:" + sp,
			  "ssl.certificate.location=" + cert("kmirrord.pem"),
			  "ssl.key.location=" + cert("kmirrord.key"),
			  "listener.request.timeout.ms=3000" });
		ASSERT_EQ("", mirror_->start());
		ASSERT_EQ("", ports(*mirror_, &plain_, &ssl_));
		for (const char *t : { "tl", "tfail" })
			ASSERT_NO_FATAL_FAILURE(wait_mirrored(*mirror_, t));
	}

	static std::string cert(const std::string &f) { return certs_->file(f); }

	/* A loopback port free now (the kernel's pick, released). */
	static uint16_t free_port()
	{
		sockaddr_in sa{};
		socklen_t len = sizeof(sa);
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		uint16_t port = 0;
		if (bind(fd, (sockaddr *)&sa, sizeof(sa)) == 0 &&
		    getsockname(fd, (sockaddr *)&sa, &len) == 0)
			port = ntohs(sa.sin_port);
		close(fd);
		return port;
	}

	/* The bound ports of the PLAINTEXT and SSL listeners (status). */
	static std::string ports(Daemon &d, uint16_t *plain, uint16_t *ssl)
	{
		const char *exe = getenv("KM_KMIRRORCTL");
		ChildResult r = run_command({ exe ? exe : "kmirrorctl", "--socket",
					      d.socket(), "status", "--json" },
					    10000);
		json_error_t jerr;
		json_t *root = json_loads(r.out.c_str(), 0, &jerr), *row;
		size_t i;
		if (root == nullptr)
			return "status: " + r.describe();
		json_array_foreach(json_object_get(root, "listeners"), i, row) {
			std::string name = json_string_value(json_object_get(row, "name"));
			int port = (int)json_integer_value(json_object_get(row, "port"));
			(name == "SSL" ? *ssl : *plain) = (uint16_t)port;
		}
		json_decref(root);
		return *plain != 0 && *ssl != 0 ? "" : "no listener ports: " + r.out;
	}

	/* kmirrord's HW of topic-0 is the broker's end. */
	void wait_mirrored(Daemon &d, const std::string &topic)
	{
		int64_t lo = -1, end = -1;
		ASSERT_EQ("", watermarks(broker_->bootstrap(), topic, 0, &lo, &end));
		std::string k = topic + ":0";
		std::string why = d.wait_status(
			[&](const std::map<std::string, PartStatus> &st) {
				auto it = st.find(k);
				return it != st.end() && it->second.hw == end;
			},
			60000);
		ASSERT_EQ("", why) << topic << " never reached " << end;
	}

	static std::string at(uint16_t port)
	{
		return "127.0.0.1:" + std::to_string(port);
	}
	std::vector<std::string> kcat_ssl(const std::string &who = "") const
	{
		std::vector<std::string> v = { "-X", "security.protocol=ssl", "-X",
					       "ssl.ca.location=" + cert("ca.pem") };
		if (!who.empty())
			v.insert(v.end(), { "-X", "ssl.certificate.location=" +
						  cert(who + ".pem"),
					    "-X", "ssl.key.location=" + cert(who + ".key") });
		return v;
	}
	std::vector<std::string> java_ssl() const
	{
		return { "security.protocol=SSL", "ssl.truststore.type=PEM",
			 "ssl.truststore.location=" + cert("ca.pem") };
	}

	static TempDir *certs_, *data_;
	static KafkaBroker *broker_;
	static Daemon *mirror_;
	static std::string setup_error_;
	static uint16_t plain_, ssl_;
};

TempDir *KafkaListeners::certs_ = nullptr;
TempDir *KafkaListeners::data_ = nullptr;
KafkaBroker *KafkaListeners::broker_ = nullptr;
Daemon *KafkaListeners::mirror_ = nullptr;
std::string KafkaListeners::setup_error_;
uint16_t KafkaListeners::plain_ = 0, KafkaListeners::ssl_ = 0;

/* kcat and Kafka's Java console consumer read the mirrored topic over SSL
 * exactly as they read it over PLAINTEXT, and as they read it from the
 * source broker. */
TEST_F(KafkaListeners, SslServesWhatPlaintextServes)
{
	std::string src, plain, tls;
	ASSERT_EQ("", kcat_read(broker_->bootstrap(), {}, "tl", &src));
	ASSERT_EQ("", kcat_read(at(plain_), {}, "tl", &plain));
	ASSERT_EQ("", kcat_read(at(ssl_), kcat_ssl(), "tl", &tls));
	int64_t n = lines(src);
	ASSERT_GE(n, 2000);
	EXPECT_TRUE(src == plain) << "PLAINTEXT vs source: " << first_diff(plain, src);
	EXPECT_TRUE(plain == tls) << "SSL vs PLAINTEXT: " << first_diff(tls, plain);
	std::string jsrc, jplain, jtls;
	ASSERT_EQ("", java_read(broker_->bootstrap(), {}, "tl", n, &jsrc));
	ASSERT_EQ("", java_read(at(plain_), {}, "tl", n, &jplain));
	ASSERT_EQ("", java_read(at(ssl_), java_ssl(), "tl", n, &jtls));
	EXPECT_EQ(n, lines(jtls));
	EXPECT_TRUE(jsrc == jplain) << "Java PLAINTEXT vs source: "
				    << first_diff(jplain, jsrc);
	EXPECT_TRUE(jplain == jtls) << "Java SSL vs PLAINTEXT: "
				    << first_diff(jtls, jplain);
}

/* Metadata and FindCoordinator name the listener the client came in on:
 * over PLAINTEXT the
 * broker is 127.0.0.1:<plaintext port> (its own address), over SSL it is
 * localhost:<ssl port> (advertised.listeners=SSL://localhost:<port>). */
TEST_F(KafkaListeners, MetadataAdvertisesTheListenerConnectedOn)
{
	std::string plain, tls;
	ASSERT_EQ("", kcat_brokers(at(plain_), {}, &plain));
	ASSERT_EQ("", kcat_brokers(at(ssl_), kcat_ssl(), &tls));
	EXPECT_EQ("broker 1 at 127.0.0.1:" + std::to_string(plain_) +
			  " (controller)\n", plain);
	EXPECT_EQ("broker 1 at localhost:" + std::to_string(ssl_) +
			  " (controller)\n", tls);
	/* FindCoordinator too: a group consumer over SSL reaches its
	 * coordinator at the SSL listener's address (at the PLAINTEXT one
	 * its TLS handshake would never end) and reads the topic. */
	std::string src, grp;
	ASSERT_EQ("", kcat_read(broker_->bootstrap(), {}, "tl", &src));
	std::vector<std::string> a = { "-b", at(ssl_) };
	auto sec = kcat_ssl();
	a.insert(a.end(), sec.begin(), sec.end());
	for (const char *x : { "-X", "auto.offset.reset=earliest", "-e", "-q",
			       "-f", "%o|%k|%s\\n", "-G", "lsn-group", "tl" })
		a.push_back(x);
	ChildResult r = kcat(a, 30000);
	ASSERT_EQ(0, r.exit_code) << r.describe();
	EXPECT_EQ(src, r.out.substr(0, src.size())) << first_diff(r.out, src);
}

/* ssl.client.auth=required on a second kmirrord serving what the first
 * one mirrored (a copy of its data): no certificate and a certificate
 * another CA signed are refused; alice's is let in and reads what the
 * PLAINTEXT listener serves. */
TEST_F(KafkaListeners, ClientAuthRequiredRefusesAllButTheCasClients)
{
	Daemon d(data_->file("auth"),
		 { "local.topics=tauth:1",
		   "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		   "ssl.certificate.location=" + cert("kmirrord.pem"),
		   "ssl.key.location=" + cert("kmirrord.key"),
		   "ssl.ca.location=" + cert("ca.pem"),
		   "ssl.client.auth=required" });
	ASSERT_EQ("", d.start());
	uint16_t plain = 0, ssl = 0;
	ASSERT_EQ("", ports(d, &plain, &ssl));
	std::string in = data_->file("auth.in");
	ASSERT_TRUE(put(in, "k1:v1\nk2:v2\nk3:v3\n"));
	ChildResult w = kcat({ "-b", at(plain), "-P", "-t", "tauth", "-p", "0",
			       "-K", ":", "-l", in });
	ASSERT_EQ(0, w.exit_code) << w.describe();
	std::string want, got;
	ASSERT_EQ("", kcat_read(at(plain), {}, "tauth", &want));
	ASSERT_EQ("", kcat_read(at(ssl), kcat_ssl("alice"), "tauth", &got));
	EXPECT_EQ(3, lines(want));
	EXPECT_EQ(want, got);
	for (const char *who : { "", "mallory" }) {
		std::vector<std::string> a = { "-b", at(ssl), "-L", "-m", "5" };
		auto sec = kcat_ssl(who);
		a.insert(a.end(), sec.begin(), sec.end());
		ChildResult r = kcat(a, 30000);
		EXPECT_NE(0, r.exit_code) << "'" << who << "' got in: " << r.out;
		EXPECT_EQ(std::string::npos, r.out.find("broker 1 at")) << who;
	}
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	/* Each refusal is in kmirrord's log with OpenSSL's reason. */
	EXPECT_NE(std::string::npos, res.err.find("peer did not return a certificate"))
		<< res.err;
	EXPECT_NE(std::string::npos, res.err.find("certificate verify failed"))
		<< res.err;
}

/* After failover (stop tfail:0) Kafka's Java producer writes to kmirrord
 * over SSL; the records are there, read back over PLAINTEXT. */
TEST_F(KafkaListeners, ProduceAfterFailoverOverSsl)
{
	int64_t lo = -1, before = -1, after = -1;
	const char *exe = getenv("KM_KMIRRORCTL");
	ChildResult s = run_command({ exe ? exe : "kmirrorctl", "--socket",
				      mirror_->socket(), "stop", "tfail:0" },
				    60000);
	ASSERT_EQ(0, s.exit_code) << s.describe();
	ASSERT_EQ("", watermarks(at(plain_), "tfail", 0, &lo, &before));
	std::vector<std::string> props = { "bootstrap.servers=" + at(ssl_),
					   "acks=all" };
	auto sec = java_ssl();
	props.insert(props.end(), sec.begin(), sec.end());
	std::vector<std::string> args = { "--topic", "tfail", "--num-records",
					  "300", "--record-size", "100",
					  "--throughput", "-1", "--producer-props" };
	args.insert(args.end(), props.begin(), props.end());
	ChildResult r = kafka_tool("org.apache.kafka.tools.ProducerPerformance",
				   args, 120000);
	ASSERT_EQ(0, r.exit_code) << r.describe() << r.out;
	ASSERT_EQ("", watermarks(at(plain_), "tfail", 0, &lo, &after));
	EXPECT_EQ(before + 300, after);
	std::string src, tls;
	ASSERT_EQ("", kcat_read(broker_->bootstrap(), {}, "tfail", &src));
	ASSERT_EQ("", kcat_read(at(ssl_), kcat_ssl(), "tfail", &tls));
	EXPECT_EQ(lines(src) + 300, lines(tls));
	EXPECT_EQ(src, tls.substr(0, src.size())) << "the mirrored part";
}

/* Hostile clients on the TLS port, all at once: garbage before the
 * handshake, garbage after it, silent ones and half a ClientHello (past
 * the 3 s bound), a TLS 1.2 renegotiation (openssl s_client, then R).
 * Each is closed by kmirrord within its bound; meanwhile a good client
 * reads the whole topic over SSL and the source's new records (2000 more,
 * written during the attack) are mirrored. */
TEST_F(KafkaListeners, HostileClientsAreClosedWhileServingAndMirroring)
{
	std::atomic<int> closed{ 0 }, done{ 0 };
	std::atomic<int64_t> slowest{ 0 };
	const int kRaw = 12;
	auto record = [&](int64_t ms) {
		if (ms >= 0)
			closed++;
		int64_t s = slowest;
		while (ms > s && !slowest.compare_exchange_weak(s, ms)) {
		}
		if (ms < 0)
			slowest = 1 << 30;
		done++;
	};
	const std::string half("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11);
	std::vector<std::thread> ts;
	for (int i = 0; i < kRaw; i++)
		ts.emplace_back([&, i] {
			int64_t t0 = now_ms();
			int fd = dial(ssl_);
			if (i % 3 == 1)
				(void)send(fd, "\x00\x00\x00\x10garbage-garbage!", 20,
					   MSG_NOSIGNAL);
			else if (i % 3 == 2)
				(void)send(fd, half.data(), half.size(), MSG_NOSIGNAL);
			record(ms_until_closed(fd, t0));
			close(fd);
		});
	/* Garbage after the handshake: raw bytes on the TLS connection. */
	ts.emplace_back([&] {
		SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
		SSL_CTX_load_verify_locations(ctx, cert("ca.pem").c_str(), nullptr);
		SSL *ssl = SSL_new(ctx);
		int64_t t0 = now_ms();
		int fd = dial(ssl_);
		SSL_set_fd(ssl, fd);
		int64_t ms = -1;
		if (SSL_connect(ssl) == 1) {
			(void)send(fd, "\x17\x03\x03\x00\x05hello", 10, MSG_NOSIGNAL);
			ms = ms_until_closed(fd, t0);
		}
		if (ms < 0)
			ADD_FAILURE() << "garbage after the handshake: not closed";
		record(ms);
		SSL_free(ssl);
		close(fd);
		SSL_CTX_free(ctx);
	});
	/* s_client's stdin stays open (a writer holding a FIFO for the
	 * thread's 20 s bound) after R: only the server's close ends it. */
	ts.emplace_back([&] {
		int64_t t0 = now_ms();
		std::string fifo = data_->file("reneg.fifo");
		ChildResult r = run_command(
			{ "sh", "-c",
			  "mkfifo " + fifo + "; (echo R; exec sleep 20) > " + fifo +
			  " & w=$!; openssl s_client -tls1_2 -connect 127.0.0.1:" +
			  std::to_string(ssl_) + " -CAfile " + cert("ca.pem") +
			  " < " + fifo + "; rc=$?; kill $w; rm -f " + fifo +
			  "; exit $rc" },
			30000);
		bool reneg = (r.out + r.err).find("RENEGOTIATING") != std::string::npos;
		if (!reneg || r.timed_out)
			ADD_FAILURE() << "s_client: " << r.describe() << r.out;
		record(reneg && !r.timed_out && now_ms() - t0 < 15000
			       ? now_ms() - t0 : -1);
	});
	/* Meanwhile: a good client, and the source's new records. */
	std::string src, tls;
	ASSERT_EQ("", kcat_read(broker_->bootstrap(), {}, "tl", &src));
	std::atomic<int> good{ -1 };
	std::thread reader([&] {
		good = kcat_read(at(ssl_), kcat_ssl(), "tl", &tls).empty() ? 1 : 0;
	});
	ASSERT_EQ("", broker_->producer_perf("tl", 2000, 100, { "acks=all" }));
	reader.join();
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(1, good);
	/* It read at least what the source had before the new records. */
	EXPECT_EQ(src, tls.substr(0, src.size())) << first_diff(tls, src);
	EXPECT_EQ(kRaw + 2, done);
	EXPECT_EQ(kRaw + 2, closed) << "some were not closed in time";
	EXPECT_LT(slowest, 15000) << "the 3 s bound (listener.request.timeout.ms)";
	ASSERT_NO_FATAL_FAILURE(wait_mirrored(*mirror_, "tl"));
	/* Closed by kmirrord, not by the clients giving up (s_client ends
	 * itself on the no_renegotiation alert OpenSSL would send): its log
	 * names each. */
	EXPECT_TRUE(logged(*mirror_, "the peer started a TLS renegotiation: refused"));
	EXPECT_TRUE(logged(*mirror_, "TLS read:")) << "garbage after the handshake";
	EXPECT_TRUE(logged(*mirror_, "no TLS handshake within 3000 ms"));
	EXPECT_EQ(2 * kRaw / 3, count(mirror_->child().stderr_so_far(),
				      "no TLS handshake within 3000 ms"));
}
