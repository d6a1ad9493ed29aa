/* KIP-227 incremental fetch sessions against a real Apache Kafka 4.x broker
 * (issue 17; suite kafka-fsess): kmirrord's Fetches to the source carry
 * only the partitions that changed once a session is open, the copy stays
 * byte-identical, and a lost session (closed under it, or a broker
 * restart) or a broker with no session slot still mirrors everything; and
 * Kafka's Java consumer reading 200 partitions from kmirrord gets a
 * session there and reads every record.
 *
 * Method: one KRaft broker for the suite (SetUpTestSuite) with 202
 * partitions: fsidle (200, a few records each from Kafka's
 * VerifiableProducer, then idle) and fsbusy (2, which take records while
 * we watch). kmirrord mirrors both; its own counters (kmirrorctl metrics:
 * kmirror_fetch_requests_total by kind, kmirror_fetch_request_partitions_
 * total, kmirror_fetch_session_errors_total, kmirror_fetch_sessionless_
 * total) are read before and after each phase, and every expected end
 * offset is the broker's (kafka-get-offsets). The session is closed under
 * kmirrord by a raw Fetch (SessionId = the id status shows, epoch -1,
 * which Kafka's FetchManager answers by removing that session), so the
 * next incremental Fetch meets FETCH_SESSION_ID_NOT_FOUND on a live
 * connection. A second broker with max.incremental.fetch.session.cache.
 * slots=0 answers every Fetch without a session. kafka-console-consumer
 * (subscribed to fsidle on kmirrord) must read each offset below the
 * broker's end once and every value VerifiableProducer sent, while
 * kmirrord's listener counts a session made and incremental Fetches. Every
 * wait polls an observable condition with a deadline.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_files.h"
#include "tests/support/kafka_peers.h"

extern "C" {
#include "kafka/proto.h"
#include "kafka/wire.h"
}

using namespace kmtest;

namespace {

/* kmirrord's counters that matter here, summed over workers. */
struct Counts {
	double full = 0, incremental = 0, parts = 0, session_errors = 0,
	       sessionless = 0;
	double requests() const { return full + incremental; }
};

Counts operator-(const Counts &a, const Counts &b)
{
	return { a.full - b.full, a.incremental - b.incremental, a.parts - b.parts,
		 a.session_errors - b.session_errors, a.sessionless - b.sessionless };
}

std::string describe(const Counts &c)
{
	std::ostringstream o;
	o << "full " << c.full << ", incremental " << c.incremental
	  << ", partitions written " << c.parts << ", session errors "
	  << c.session_errors << ", sessionless " << c.sessionless;
	return o.str();
}

std::string scrape(const Daemon &d, Counts *c)
{
	ChildResult r;
	std::string err = ctl(d, { "metrics" }, &r);
	if (!err.empty())
		return "kmirrorctl metrics: " + err;
	*c = Counts();
	std::istringstream in(r.out);
	std::string line;
	auto starts = [&](const char *p) { return line.rfind(p, 0) == 0; };
	while (std::getline(in, line)) {
		if (line.empty() || line[0] == '#')
			continue;
		double v = atof(line.c_str() + line.rfind(' ') + 1);
		if (starts("kmirror_fetch_requests_total{"))
			(line.find("kind=\"full\"") != std::string::npos
				 ? c->full : c->incremental) += v;
		else if (starts("kmirror_fetch_request_partitions_total{"))
			c->parts += v;
		else if (starts("kmirror_fetch_session_errors_total{"))
			c->session_errors += v;
		else if (starts("kmirror_fetch_sessionless_total{"))
			c->sessionless += v;
	}
	return "";
}

/* Scrapes until pred holds for the counts (then ""), with a deadline;
 * *c is the last scrape either way. The fetch counters are published on
 * the worker's tick after the partition figures caught_up waits on, and a
 * tick whose publish meets the control thread reading them skips it, so
 * the scrape right after caught_up can miss the last answers. */
template <class F>
std::string scrape_until(const Daemon &d, Counts *c, F pred, int timeout_ms = 30000)
{
	std::string err;
	if (poll_until([&] { return (err = scrape(d, c)).empty() && pred(*c); }, timeout_ms))
		return "";
	return err.empty() ? "not reached within " + std::to_string(timeout_ms) +
				     " ms: " + describe(*c)
			   : err;
}

/* The fetch session ids status shows (one per worker connection). */
std::vector<int32_t> session_ids(const Daemon &d)
{
	std::vector<int32_t> ids;
	ChildResult r;
	if (!ctl(d, { "status", "--json" }, &r).empty())
		return ids;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	json_t *rows = root ? json_object_get(root, "connections") : nullptr;
	for (size_t i = 0; rows && i < json_array_size(rows); i++) {
		json_t *id = json_object_get(json_array_get(rows, i), "fetch_session_id");
		if (json_is_integer(id) && json_integer_value(id) != 0)
			ids.push_back((int32_t)json_integer_value(id));
	}
	json_decref(root);
	return ids;
}

std::string read_n(int fd, uint8_t *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		pollfd pf = { fd, POLLIN, 0 };
		if (poll(&pf, 1, 10000) <= 0)
			return "no answer within 10 s";
		ssize_t r = recv(fd, p + got, n - got, 0);
		if (r <= 0)
			return "connection closed";
		got += (size_t)r;
	}
	return "";
}

/* A Fetch v11 naming no partition with SessionId id and this epoch; with
 * epoch -1 Kafka removes session id (FetchManager.newContext: "Any
 * session specified in a FULL fetch request will be closed"). *err: its
 * top-level error. */
std::string raw_fetch(uint16_t port, int32_t id, int32_t epoch, int16_t *err)
{
	uint8_t buf[512];
	km_wire_wr w;
	km_reqhdr h = {};
	km_fetch_req m = {};
	km_wire_wr_init(&w, buf, sizeof(buf));
	h.api_key = KM_API_FETCH;
	h.api_version = 11;
	h.correlation_id = 7;
	km_wire_name_set(&h.client_id, "fsess-closer");
	km_proto_req_begin(&w, &h);
	m.replica_id = -1;
	m.min_bytes = 1;
	m.max_bytes = 1024;
	m.session_id = id;
	m.session_epoch = epoch;
	km_wire_name_set(&m.rack_id, "");
	km_fetch_req_encode(&w, 11, &m);
	int n = km_wire_wr_frame_end(&w);
	if (n <= 0)
		return "cannot encode the Fetch";
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || connect(fd, (sockaddr *)&a, sizeof(a)) != 0) {
		if (fd >= 0)
			close(fd);
		return "cannot connect to the broker";
	}
	std::string e = send(fd, buf, (size_t)n, MSG_NOSIGNAL) == n ? "" : "send failed";
	uint8_t sz[4];
	std::vector<uint8_t> body;
	if (e.empty())
		e = read_n(fd, sz, 4);
	if (e.empty()) {
		body.resize((size_t)sz[0] << 24 | (size_t)sz[1] << 16 | (size_t)sz[2] << 8 | sz[3]);
		e = read_n(fd, body.data(), body.size());
	}
	close(fd);
	if (!e.empty())
		return e;
	iovec v = { body.data(), body.size() };
	km_chain ch = { &v, 1 };
	km_wire_rd r;
	int32_t corr;
	km_fetch_resp_iter it;
	km_wire_rd_init(&r, &ch, km_chain_start(&ch), (uint32_t)body.size(),
			&km_wire_limits_default);
	if (km_resphdr_decode(&r, KM_API_FETCH, 11, &corr) < 0 ||
	    km_fetch_resp_begin(&it, &r, 11, nullptr, 0) < 0)
		return "cannot decode the answer";
	*err = it.error_code;
	return "";
}

uint16_t port_of(const std::string &bootstrap)
{
	return (uint16_t)atoi(bootstrap.substr(bootstrap.rfind(':') + 1).c_str());
}

constexpr int kIdleRecords = 1200, kIdlePrefix = 1;

class KafkaFsess : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		broker_ = new KafkaBroker({ "log.flush.interval.messages=1000000" });
		std::string err = broker_->start();
		if (err.empty())
			err = broker_->create_topic("fsidle", 200);
		if (err.empty())
			err = broker_->create_topic("fsbusy", 2);
		/* 400 keys: nearly every partition of fsidle holds records. */
		if (err.empty())
			err = verifiable_produce(broker_->bootstrap(), "fsidle",
						 kIdleRecords, 400, kIdlePrefix);
		setup_err_ = new std::string(err);
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
		delete setup_err_;
	}

	void SetUp() override
	{
		ASSERT_EQ("", *setup_err_);
		ASSERT_EQ("", dir_.error());
	}

	/* The broker's end offset of every partition of topic: asked with
	 * librdkafka for a few partitions, kafka-get-offsets for many. */
	static void source_ends(KafkaBroker &b, const std::string &topic,
				std::map<std::string, int64_t> *ends)
	{
		int n_small = topic == "fsbusy" ? 2 : topic == "fsnoslot" ? 8 : 0;
		for (int p = 0; p < n_small; p++) {
			int64_t lo = -1, hi = -1;
			ASSERT_EQ("", watermarks(b.bootstrap(), topic, p, &lo, &hi));
			(*ends)[topic + ":" + std::to_string(p)] = hi;
		}
		if (n_small > 0)
			return;
		std::string out;
		ASSERT_EQ("", b.get_offsets(topic, -1, &out));
		std::istringstream in(out);
		std::string line;
		int n = 0;
		while (std::getline(in, line)) {
			size_t c2 = line.rfind(':');
			if (c2 == std::string::npos || line.rfind(topic + ":", 0) != 0)
				continue;
			(*ends)[line.substr(0, c2)] = atoll(line.c_str() + c2 + 1);
			n++;
		}
		ASSERT_GT(n, 0) << out;
	}

	/* Until kmirrord's HW of every partition is the broker's end. */
	static void caught_up(Daemon &d, KafkaBroker &b,
			      const std::vector<std::string> &topics)
	{
		std::map<std::string, int64_t> ends;
		for (auto &t : topics)
			ASSERT_NO_FATAL_FAILURE(source_ends(b, t, &ends));
		std::string last;
		ASSERT_EQ("", d.wait_status(
				      [&](const std::map<std::string, PartStatus> &st) {
					      for (auto &[k, end] : ends) {
						      auto it = st.find(k);
						      if (it == st.end() || it->second.hw != end) {
							      last = k + " not at " + std::to_string(end);
							      return false;
						      }
					      }
					      return true;
				      },
				      120000))
			<< last;
	}

	/* Every partition's batches equal the broker's (kafka_files.h); one
	 * the broker holds nothing of is empty here too (caught_up saw HW 0).
	 * @return the partitions compared. */
	int expect_copy_identical(KafkaBroker &b, const std::string &topic)
	{
		std::map<std::string, int64_t> ends;
		int mapped = 0, n = 0;
		source_ends(b, topic, &ends);
		for (auto &[k, end] : ends) {
			int p = atoi(k.c_str() + k.rfind(':') + 1);
			if (end == 0)
				continue;
			expect_identical(dir_.path() + "/" + topic + "-" + std::to_string(p),
					 b.partition_dir(topic, p), &mapped);
			if (::testing::Test::HasFatalFailure())
				return n;
			n++;
		}
		return n;
	}

	Daemon daemon_for(KafkaBroker &b, const std::string &topics)
	{
		return Daemon(dir_.path(), { "source.bootstrap.servers=" + b.bootstrap(),
					     "topics=" + topics, "workers=1",
					     /* a line or two per partition at INFO:
					      * 400 lines to read past on a failure */
					     "log.level=warn" });
	}

	/* n records into each partition of fsbusy in batches of 50:
	 * kmirrord fetches many times while they come. */
	std::string produce_busy(int n)
	{
		for (int p = 0; p < 2; p++) {
			ProduceSpec s;
			s.topic = "fsbusy";
			s.partition = p;
			s.count = n;
			s.seed = (uint64_t)++busy_seed_;
			s.flush_every = 50;
			if (std::string e = produce(broker_->bootstrap(), s); !e.empty())
				return e;
		}
		return "";
	}

	int busy_seed_ = 0;

	/* Kafka's Java consumer (kafka-console-consumer, subscribed to all
	 * 200 partitions of fsidle on kmirrord) asks for a fetch session and
	 * gets one: kmirrord counts a session made and incremental Fetches
	 * served; the consumer reads every offset below the broker's end of
	 * each partition once, and every value VerifiableProducer sent. */
	void expect_java_consumer_reads_all(const Daemon &d)
	{
		std::map<std::string, int64_t> ends;
		ASSERT_NO_FATAL_FAILURE(source_ends(*broker_, "fsidle", &ends));
		int64_t total = 0;
		for (auto &[k, end] : ends)
			total += end;
		ASSERT_EQ(kIdleRecords, total);
		ChildResult r = kafka_tool(
			"org.apache.kafka.tools.consumer.ConsoleConsumer",
			{ "--bootstrap-server", d.bootstrap(), "--topic", "fsidle",
			  "--from-beginning", "--max-messages", std::to_string(total),
			  "--timeout-ms", "30000", "--formatter-property",
			  "print.partition=true", "--formatter-property",
			  "print.offset=true" },
			120000);
		ASSERT_EQ(0, r.exit_code) << r.describe() << r.err;
		std::set<std::string> seen, values;
		std::istringstream in(r.out);
		std::string line;
		while (std::getline(in, line)) {
			/* "Partition:P\tOffset:O\tVALUE" */
			size_t t1 = line.find('\t'), t2 = line.find('\t', t1 + 1);
			ASSERT_NE(std::string::npos, t2) << line;
			std::string part = line.substr(10, t1 - 10);
			int64_t off = atoll(line.c_str() + t1 + 8);
			ASSERT_LT(off, ends["fsidle:" + part]) << line;
			EXPECT_TRUE(seen.insert(part + ":" + std::to_string(off)).second)
				<< "twice: " << line;
			values.insert(line.substr(t2 + 1));
		}
		EXPECT_EQ((size_t)total, seen.size());
		for (int i = 0; i < kIdleRecords; i++)
			EXPECT_TRUE(values.count(std::to_string(kIdlePrefix) + "." +
						 std::to_string(i)))
				<< "value " << i << " not read";
		/* The listener's counters are published on the worker's
		 * tick: polled until they hold what is asserted below. */
		std::map<std::string, double> v;
		poll_until([&] {
			ChildResult m;
			if (!ctl(d, { "metrics" }, &m).empty())
				return false;
			v.clear();
			std::istringstream min(m.out);
			while (std::getline(min, line))
				if (!line.empty() && line[0] != '#')
					v[line.substr(0, line.find('{'))] +=
						atof(line.c_str() + line.rfind(' ') + 1);
			return v["kmirror_listener_fetch_sessions_created_total"] >= 1 &&
			       v["kmirror_listener_fetch_incremental_total"] >= 2;
		}, 30000);
		fprintf(stderr, "kmirrord served: sessions made %.0f, incremental %.0f, "
			"sessionless %.0f, session errors %.0f\n",
			v["kmirror_listener_fetch_sessions_created_total"],
			v["kmirror_listener_fetch_incremental_total"],
			v["kmirror_listener_fetch_sessionless_total"],
			v["kmirror_listener_fetch_session_errors_total"]);
		EXPECT_GE(v["kmirror_listener_fetch_sessions_created_total"], 1);
		EXPECT_GE(v["kmirror_listener_fetch_incremental_total"], 2);
	}

	static KafkaBroker *broker_;
	static std::string *setup_err_;
	TempDir dir_{ "km-kafka-fsess" };
};

KafkaBroker *KafkaFsess::broker_ = nullptr;
std::string *KafkaFsess::setup_err_ = nullptr;

/* 202 partitions, 2 of them taking records: after the session's one full
 * Fetch, every Fetch is incremental and writes only the busy partitions
 * (and those whose offset moved), not the 200 idle ones. Then the session
 * is closed under kmirrord (FETCH_SESSION_ID_NOT_FOUND on its next Fetch:
 * counted, a new session opened with a full Fetch) and the broker
 * restarts (a new connection, a new session); nothing is lost or doubled:
 * the copy is byte-identical to the broker's. */
TEST_F(KafkaFsess, IdlePartitionsRideAnIncrementalSession)
{
	Daemon d = daemon_for(*broker_, "fsidle,fsbusy");
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(caught_up(d, *broker_, { "fsidle", "fsbusy" }));
	/* Session errors as the broker answers them: an id it never gave,
	 * and an incremental epoch with no id. */
	for (auto [id, epoch] : { std::pair<int32_t, int32_t>{ 2000000011, 1 }, { 0, 3 } }) {
		int16_t theirs = -1, ours = -1;
		ASSERT_EQ("", raw_fetch(port_of(broker_->bootstrap()), id, epoch, &theirs));
		ASSERT_EQ("", raw_fetch(d.port(), id, epoch, &ours));
		EXPECT_EQ(theirs, ours) << "SessionId " << id << " epoch " << epoch;
		EXPECT_NE(0, theirs);
	}
	Counts c0, c1, c2, c3;
	ASSERT_EQ("", scrape(d, &c0));
	ASSERT_GE(c0.full, 1) << "the session opens with a full Fetch: " << describe(c0);

	ASSERT_EQ("", produce_busy(4000));
	ASSERT_NO_FATAL_FAILURE(caught_up(d, *broker_, { "fsbusy" }));
	EXPECT_EQ("", scrape_until(d, &c1, [&](const Counts &x) {
		return x.incremental - c0.incremental >= 5;
	}));
	Counts w = c1 - c0;
	fprintf(stderr, "while fsbusy took 8000 records: %s\n", describe(w).c_str());
	EXPECT_GE(w.incremental, 5) << describe(w);
	EXPECT_EQ(0, w.full) << "a full Fetch names all 202 partitions: " << describe(w);
	EXPECT_LE(w.parts, 4 * w.requests())
		<< "an incremental Fetch writes the 2 busy partitions, not the "
		   "200 idle ones: " << describe(w);
	EXPECT_EQ(0, w.session_errors) << describe(w);

	/* The broker drops the session: the next Fetch meets 70. */
	std::vector<int32_t> ids = session_ids(d);
	ASSERT_FALSE(ids.empty()) << "status shows no fetch session id";
	for (int32_t id : ids) {
		int16_t err = -1;
		ASSERT_EQ("", raw_fetch(port_of(broker_->bootstrap()), id, -1, &err));
		ASSERT_EQ(0, err);
	}
	ASSERT_EQ("", produce_busy(1000));
	ASSERT_NO_FATAL_FAILURE(caught_up(d, *broker_, { "fsbusy" }));
	ASSERT_TRUE(poll_until(
		[&] {
			return scrape(d, &c2).empty() && c2.session_errors > c1.session_errors &&
			       c2.incremental > c1.incremental + 2;
		},
		30000))
		<< "no FETCH_SESSION_ID_NOT_FOUND counted and recovered from: "
		<< describe(c2 - c1);
	w = c2 - c1;
	fprintf(stderr, "after the session was closed: %s\n", describe(w).c_str());
	EXPECT_GE(w.full, 1) << "a new session opens with a full Fetch: " << describe(w);

	/* A restart: the connection goes, a new one opens a new session. */
	ASSERT_EQ("", broker_->stop());
	ASSERT_EQ("", broker_->start());
	ASSERT_EQ("", produce_busy(1000));
	ASSERT_NO_FATAL_FAILURE(caught_up(d, *broker_, { "fsidle", "fsbusy" }));
	ASSERT_TRUE(poll_until(
		[&] { return scrape(d, &c3).empty() && c3.incremental > c2.incremental + 2; },
		30000))
		<< describe(c3 - c2);
	w = c3 - c2;
	fprintf(stderr, "across the broker's restart: %s\n", describe(w).c_str());
	EXPECT_GE(w.full, 1) << describe(w);

	EXPECT_EQ(2, expect_copy_identical(*broker_, "fsbusy"));
	ASSERT_FALSE(HasFatalFailure());
	EXPECT_GE(expect_copy_identical(*broker_, "fsidle"), 100);
	ASSERT_FALSE(HasFatalFailure());
	ASSERT_NO_FATAL_FAILURE(expect_java_consumer_reads_all(d));
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	EXPECT_EQ(0, res.exit_code) << res.describe();
}

/* A broker with no session slot answers every Fetch with session id 0:
 * kmirrord keeps sending full Fetches (counted as answered sessionless)
 * and mirrors everything. */
TEST_F(KafkaFsess, BrokerWithoutSessionSlotsStillMirrors)
{
	KafkaBroker b({ "max.incremental.fetch.session.cache.slots=0" });
	ASSERT_EQ("", b.start());
	ASSERT_EQ("", b.create_topic("fsnoslot", 8));
	auto fill = [&](uint64_t seed) {
		for (int p = 0; p < 8; p++) {
			ProduceSpec s;
			s.topic = "fsnoslot";
			s.partition = p;
			s.count = 200;
			s.seed = seed;
			s.flush_every = 50;
			if (std::string e = produce(b.bootstrap(), s); !e.empty())
				return e;
		}
		return std::string();
	};
	ASSERT_EQ("", fill(1));
	Daemon d = daemon_for(b, "fsnoslot");
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(caught_up(d, b, { "fsnoslot" }));
	ASSERT_EQ("", fill(2));
	ASSERT_NO_FATAL_FAILURE(caught_up(d, b, { "fsnoslot" }));
	Counts c;
	EXPECT_EQ("", scrape_until(d, &c, [](const Counts &x) { return x.sessionless >= 2; }));
	fprintf(stderr, "without session slots: %s\n", describe(c).c_str());
	EXPECT_EQ(0, c.incremental) << describe(c);
	EXPECT_GE(c.sessionless, 2) << describe(c);
	/* Every full Fetch answered was answered without a session (one may
	 * be in flight). */
	EXPECT_GE(c.sessionless + 1, c.full) << describe(c);
	EXPECT_TRUE(session_ids(d).empty());
	EXPECT_EQ(8, expect_copy_identical(b, "fsnoslot"));
	ASSERT_FALSE(HasFatalFailure());
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	EXPECT_EQ(0, res.exit_code) << res.describe();
}

} // namespace
