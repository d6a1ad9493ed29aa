/* The metrics an operator graphs and alerts on (issue 19 items 9 and 10;
 * suite kafka-ops-metrics), against a real Apache Kafka 4.x broker: lag in
 * offsets and in time, the source's last stable offset, bytes and records
 * fetched and written, one gauge per partition state, data-loss events,
 * and the HTTP endpoint Prometheus scrapes (metrics.listener) with the
 * Grafana dashboard in docs/grafana/kmirror.json.
 *
 * Method: one KRaft broker for the suite (SetUpTestSuite), a kmirrord per
 * case with metrics.listener on an ephemeral port, scraped with curl as
 * Prometheus would (GET /metrics). Every expected figure comes from the
 * broker: its high watermark (ListOffsets, read_uncommitted), its last
 * stable offset (ListOffsets, read_committed) and what was produced to
 * it. While the source takes records the lag may only name a high
 * watermark the source has reached; once it stops, or while a partition
 * is paused, the figures must be the broker's exactly. The text is read
 * by Prometheus's own parser (python3-prometheus-client,
 * tests/kafka/check_metrics.py: HELP and TYPE for every family, counters
 * in _total, no series twice), which also checks that every metric a
 * dashboard panel queries is one kmirrord emits. Every wait polls an
 * observable condition with a deadline.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

/* One scrape: every sample by its series ("name{labels}" as written). */
struct Scrape {
	std::string status_line, content_type, text;
	std::map<std::string, double> v;
	int64_t before_ms = 0, after_ms = 0; /* wall time around it */

	bool has(const std::string &series) const { return v.count(series) != 0; }
	double at(const std::string &series) const
	{
		auto it = v.find(series);
		return it == v.end() ? -1e18 : it->second;
	}
};

std::string part_series(const std::string &name, const std::string &topic, int p,
			const std::string &more = "")
{
	return name + "{topic=\"" + topic + "\",partition=\"" + std::to_string(p) +
	       "\"" + more + "}";
}

std::string state_series(const std::string &topic, int p, const std::string &state)
{
	return part_series("kmirror_partition_state", topic, p,
			   ",state=\"" + state + "\"");
}

void parse_samples(Scrape *s)
{
	std::istringstream in(s->text);
	std::string line;
	while (std::getline(in, line)) {
		if (line.empty() || line[0] == '#')
			continue;
		size_t sp = line.rfind(' ');
		if (sp != std::string::npos)
			s->v[line.substr(0, sp)] = atof(line.c_str() + sp + 1);
	}
}

/* A scrape's samples of mirrored partitions, for failure messages. */
std::string partition_lines(const Scrape &s)
{
	std::string out;
	for (auto &[k, v] : s.v)
		if (k.find("topic=\"om") != std::string::npos)
			out += k + " " + std::to_string(v) + "\n";
	return out;
}

/* GET path from kmirrord's metrics.listener with curl; the headers and
 * the body apart. */
std::string http_get(uint16_t port, const std::string &path, Scrape *s)
{
	s->before_ms = now_ms();
	ChildResult r = run_command({ "curl", "-sS", "-i", "--max-time", "10",
				      "http://127.0.0.1:" + std::to_string(port) + path },
				    20000);
	s->after_ms = now_ms();
	if (r.exit_code != 0)
		return "curl: " + r.describe();
	size_t end = r.out.find("\r\n\r\n");
	if (end == std::string::npos)
		return "no header end in: " + r.out.substr(0, 200);
	std::string head = r.out.substr(0, end);
	s->status_line = head.substr(0, head.find("\r\n"));
	size_t ct = head.find("Content-Type: ");
	if (ct != std::string::npos)
		s->content_type = head.substr(ct + 14, head.find("\r\n", ct) - ct - 14);
	s->text = r.out.substr(end + 4);
	parse_samples(s);
	return "";
}

/* Prometheus's own parser and naming checks over a metrics text, and the
 * dashboard's queries against it; "" or what it found. */
std::string prometheus_check(const std::string &text, const std::string &file,
			     std::string *out = nullptr)
{
	const char *root = getenv("KM_SOURCE_ROOT");
	if (root == nullptr)
		return "KM_SOURCE_ROOT is not set (tests/kafka/meson.build)";
	std::ofstream(file) << text;
	ChildResult r = run_command({ "/usr/bin/python3",
				      std::string(root) + "/tests/kafka/check_metrics.py",
				      file, "--dashboard",
				      std::string(root) + "/docs/grafana/kmirror.json" },
				    30000);
	if (out)
		*out = r.out;
	return r.exit_code == 0 ? "" : "check_metrics.py: " + r.describe() + r.out;
}

/* The metrics_port status gives (metrics.listener=127.0.0.1:0). */
uint16_t metrics_port(const Daemon &d)
{
	ChildResult r;
	if (!ctl(d, { "status", "--json" }, &r).empty())
		return 0;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	json_t *p = root ? json_object_get(root, "metrics_port") : nullptr;
	uint16_t port = json_is_integer(p) ? (uint16_t)json_integer_value(p) : 0;
	json_decref(root);
	return port;
}

/* ListOffsets latest at an isolation level (librdkafka asks it with the
 * consumer's isolation.level): read_uncommitted the source's high
 * watermark, read_committed its last stable offset. */
std::string source_latest(const std::string &bootstrap, const std::string &topic,
			  int p, const char *isolation, int64_t *out)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "isolation.level", isolation } },
				    &err);
	if (rk == nullptr)
		return err;
	int64_t lo = -1;
	rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(
		rk, topic.c_str(), p, &lo, out, 10000);
	rd_kafka_destroy(rk);
	return e ? rd_kafka_err2str(e) : "";
}

std::string source_lso(const std::string &bootstrap, const std::string &topic,
		       int p, int64_t *lso)
{
	return source_latest(bootstrap, topic, p, "read_committed", lso);
}

/* Every counter sample of a is in b and not below it: the partitions',
 * the workers' and the syncs' (a fetch connection's series is that
 * connection's: a new one starts its own). */
void expect_counters_monotonic(const Scrape &a, const Scrape &b, const char *when)
{
	int n = 0;
	for (auto &[k, v] : a.v) {
		if (k.find("_total") == std::string::npos ||
		    k.rfind("kmirror_fetch_conn_", 0) == 0)
			continue;
		n++;
		ASSERT_TRUE(b.has(k)) << when << ": " << k << " is gone";
		EXPECT_GE(b.at(k), v) << when << ": counter " << k << " went down";
	}
	EXPECT_GT(n, 10) << "too few counters in the scrape";
}

/* The "sync" word of status's first group row ("" without one), and how
 * long ago that round was. */
std::string group_sync_word(const Daemon &d, int64_t *ago = nullptr)
{
	ChildResult r;
	if (!ctl(d, { "status", "--json" }, &r).empty())
		return "";
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	json_t *row = json_array_get(json_object_get(root, "groups"), 0);
	const char *w = json_string_value(json_object_get(row, "sync"));
	std::string word = w ? w : "";
	if (ago)
		*ago = json_integer_value(json_object_get(row, "synced_ms_ago"));
	json_decref(root);
	return word;
}

/* status says what metrics says: the one state whose gauge is 1, and
 * the lag (the source is idle: both read the same figures). */
void expect_agrees_with_status(const Daemon &d, const Scrape &s,
			       const std::string &topic, const std::vector<int> &parts)
{
	static const char *const states[] = { "CONNECTING", "MIRRORING", "PAUSED",
					      "FAILED", "STOPPING", "STOPPED",
					      "PREPARING", "WRITABLE", "SERVING" };
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", const_cast<Daemon &>(d).status(&st));
	for (int p : parts) {
		std::string k = topic + ":" + std::to_string(p);
		ASSERT_TRUE(st.count(k)) << k;
		int ones = 0;
		for (const char *x : states) {
			double v = s.at(state_series(topic, p, x));
			ASSERT_TRUE(v == 0 || v == 1) << k << " " << x << ": " << v;
			ones += v == 1;
			if (v == 1) {
				EXPECT_EQ(st.at(k).state, x) << k;
			}
		}
		EXPECT_EQ(1, ones) << k << ": one state at a time";
		std::string lag = part_series("kmirror_partition_offset_lag", topic, p);
		if (st.at(k).lag >= 0) {
			EXPECT_EQ(st.at(k).lag, s.at(lag)) << k;
		} else {
			EXPECT_FALSE(s.has(lag)) << k << ": a lag where status has none";
		}
	}
}

/* The control thread serves the scrapes: a client that connects to
 * metrics.listener and never sends its request holds it 500 ms at most
 * (daemon_http.c), so `kmirrorctl status` still answers soon, and the
 * next scrape too. */
void expect_silent_client_bounded(const Daemon &d, uint16_t port)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_GE(fd, 0);
	struct sockaddr_in a = {};
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	ASSERT_EQ(0, connect(fd, (struct sockaddr *)&a, sizeof(a)));
	int64_t t0 = now_ms();
	ChildResult r;
	EXPECT_EQ("", ctl(d, { "status" }, &r));
	int64_t took = now_ms() - t0;
	close(fd);
	EXPECT_LT(took, 3000) << "a silent scraper held the control thread";
	Scrape s;
	ASSERT_EQ("", http_get(port, "/metrics", &s));
	EXPECT_EQ("HTTP/1.1 200 OK", s.status_line);
}

class KafkaOpsMetrics : public ::testing::Test {
protected:
	static void SetUpTestSuite() { broker_ = new KafkaBroker(); }
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
	}

	void SetUp() override
	{
		if (!broker_->running()) {
			ASSERT_EQ("", broker_->start());
			fprintf(stderr, "kafka broker up in %lld ms\n",
				(long long)broker_->start_ms());
		}
	}

	/* kmirrord mirroring topics, metrics on HTTP; *port its port. */
	std::unique_ptr<Daemon> mirror(const std::string &topics, uint16_t *port,
				       std::vector<std::string> sets = {})
	{
		sets.push_back("source.bootstrap.servers=" + broker_->bootstrap());
		sets.push_back("topics=" + topics);
		sets.push_back("metrics.listener=127.0.0.1:0");
		sets.push_back("fetch.max.wait.ms=100");
		auto d = std::make_unique<Daemon>(dir_.path() + "/" + topics, sets);
		std::string e = d->start();
		EXPECT_EQ("", e);
		*port = e.empty() ? metrics_port(*d) : 0;
		EXPECT_NE(0, *port) << "status names no metrics_port";
		return d;
	}

	/* Not watermarks(): librdkafka's consumer is read_committed by
	 * default, which answers the LSO. */
	int64_t source_hw(const std::string &topic, int p)
	{
		int64_t hi = -1;
		EXPECT_EQ("", source_latest(broker_->bootstrap(), topic, p,
					    "read_uncommitted", &hi));
		return hi;
	}

	std::string produce_n(const std::string &t, int p, int64_t n, uint64_t seed)
	{
		ProduceSpec s;
		s.topic = t;
		s.partition = p;
		s.count = n;
		s.seed = seed;
		s.flush_every = 50;
		return produce(broker_->bootstrap(), s);
	}

	/* Until a scrape satisfies pred (the last one in *s). */
	template <class F>
	std::string scrape_until(uint16_t port, Scrape *s, F pred, int timeout_ms = 30000)
	{
		std::string err;
		bool ok = poll_until([&] {
			*s = Scrape();
			err = http_get(port, "/metrics", s);
			return err.empty() && pred(*s);
		}, timeout_ms);
		return ok ? "" : "no scrape met the condition in " +
				 std::to_string(timeout_ms) + " ms " + err +
				 "\nlast, the partitions' lines:\n" + partition_lines(*s);
	}

	/* Caught up with the source: our log end and the high watermark
	 * kmirrord last heard are the broker's HW, and both lags are 0.
	 * The heard high watermark is checked too because Kafka
	 * reads a Fetch answer's high watermark before its records, so the
	 * records can reach the log end while the answer names an older high
	 * watermark (lag 0 then); the next answer names the new one (CI,
	 * 2026-12-05: log end 6700 with the source's high watermark 6650). */
	std::string caught_up(uint16_t port, const std::string &t, int p, Scrape *s)
	{
		int64_t hw = source_hw(t, p);
		return scrape_until(port, s, [&](const Scrape &x) {
			return x.at(part_series("kmirror_partition_log_end_offset", t, p)) == hw &&
			       x.at(part_series("kmirror_partition_source_high_watermark", t, p)) == hw &&
			       x.at(part_series("kmirror_partition_offset_lag", t, p)) == 0 &&
			       x.at(part_series("kmirror_partition_time_lag_seconds", t, p)) == 0;
		});
	}

	static KafkaBroker *broker_;
	TempDir dir_{ "km-kafka-ops-metrics" };
};

KafkaBroker *KafkaOpsMetrics::broker_ = nullptr;

} // namespace

/* A scrape of a caught-up mirror: Prometheus's parser reads it (HELP and
 * TYPE for every family, counters in _total, no series twice), every
 * metric the Grafana dashboard queries is in it, and its figures are the
 * broker's: the source's high watermark and last stable offset
 * (ListOffsets, both isolation levels), as many records written as the
 * source holds offsets (plain records: one per offset, none twice), one
 * state gauge at 1, MIRRORING. status and `kmirrorctl metrics` say the
 * same (state, lag, the same series). */
TEST_F(KafkaOpsMetrics, ScrapeIsValidExpositionAndTheBrokersFigures)
{
	ASSERT_EQ("", broker_->create_topic("om", 2));
	ASSERT_EQ("", produce_n("om", 0, 300, 1));
	ASSERT_EQ("", produce_n("om", 1, 200, 2));
	uint16_t port = 0;
	auto d = mirror("om", &port);
	ASSERT_NE(0, port);
	Scrape s;
	for (int p : { 0, 1 })
		ASSERT_EQ("", caught_up(port, "om", p, &s));
	EXPECT_EQ("HTTP/1.1 200 OK", s.status_line);
	EXPECT_EQ("text/plain; version=0.0.4; charset=utf-8", s.content_type);
	std::string out;
	EXPECT_EQ("", prometheus_check(s.text, dir_.file("scrape.txt"), &out));
	fprintf(stderr, "%s", out.c_str());
	for (int p : { 0, 1 }) {
		int64_t hw = source_hw("om", p), lso = -1;
		ASSERT_EQ("", source_lso(broker_->bootstrap(), "om", p, &lso));
		auto at = [&](const char *n) { return s.at(part_series(n, "om", p)); };
		EXPECT_EQ(hw, at("kmirror_partition_source_high_watermark"));
		EXPECT_EQ(lso, at("kmirror_partition_source_last_stable_offset"));
		EXPECT_EQ(0, at("kmirror_partition_stable_offset_lag"));
		EXPECT_EQ(hw, at("kmirror_partition_mirrored_records_total"));
		EXPECT_GE(at("kmirror_partition_fetched_records_total"),
			  at("kmirror_partition_mirrored_records_total"));
		EXPECT_GT(at("kmirror_partition_mirrored_bytes_total"), 0);
		EXPECT_GE(at("kmirror_partition_fetched_bytes_total"),
			  at("kmirror_partition_mirrored_bytes_total"));
		EXPECT_EQ(0, at("kmirror_partition_data_loss_events_total"));
		EXPECT_EQ(1, s.at(state_series("om", p, "MIRRORING")));
	}
	ASSERT_NO_FATAL_FAILURE(expect_agrees_with_status(*d, s, "om", { 0, 1 }));
	/* kmirrorctl metrics: the same text, the same series. */
	ChildResult r;
	ASSERT_EQ("", ctl(*d, { "metrics" }, &r));
	Scrape c;
	c.text = r.out;
	parse_samples(&c);
	EXPECT_EQ(s.v.size(), c.v.size());
	for (auto &[k, v] : s.v)
		EXPECT_TRUE(c.has(k)) << k << " is not in kmirrorctl metrics";
	Scrape bad;
	ASSERT_EQ("", http_get(port, "/nope", &bad));
	EXPECT_EQ("HTTP/1.1 404 Not Found", bad.status_line);
	ASSERT_NO_FATAL_FAILURE(expect_silent_client_bounded(*d, port));
}

/* While the source takes records, each scrape's lag names only offsets
 * the source had reached: kmirrord's view of the source's high watermark
 * is at most what ListOffsets answers right after the scrape, and the lag
 * at most that minus the log end the same scrape shows. Once the source
 * stops, the figures are the broker's exactly. */
TEST_F(KafkaOpsMetrics, LagWhileTheSourceProducesNamesOnlyWhatItReached)
{
	ASSERT_EQ("", broker_->create_topic("om2", 1));
	ASSERT_EQ("", produce_n("om2", 0, 100, 3));
	uint16_t port = 0;
	auto d = mirror("om2", &port);
	ASSERT_NE(0, port);
	Scrape s;
	ASSERT_EQ("", caught_up(port, "om2", 0, &s));
	std::atomic<bool> stop{ false };
	std::string perr;
	std::thread producer([&] {
		for (uint64_t seed = 10; !stop && perr.empty(); seed++)
			perr = produce_n("om2", 0, 200, seed);
	});
	auto at = [&](const char *n) { return s.at(part_series(n, "om2", 0)); };
	/* At least 15 scrapes, and on until three of them saw the source
	 * move under them: the producer is a process that takes its time
	 * to start, and under ASan on 2 cores 15 scrapes could all come
	 * before its first record (CI, 2026-12-05). */
	int moved = 0;
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
	for (int i = 0; i < 15 || (moved < 3 && std::chrono::steady_clock::now() < deadline);
	     i++) {
		int64_t before = source_hw("om2", 0);
		s = Scrape();
		ASSERT_EQ("", http_get(port, "/metrics", &s));
		int64_t after = source_hw("om2", 0);
		double leo = at("kmirror_partition_log_end_offset");
		double src = at("kmirror_partition_source_high_watermark");
		double lag = at("kmirror_partition_offset_lag");
		/* Not leo <= src: Kafka reads a Fetch answer's high
		 * watermark before its records, which go up to the high
		 * watermark when they are read, so a log end past the
		 * HW kmirrord knows is Kafka's own race (lag 0 then). */
		EXPECT_LE(src, after) << "a high watermark the source never had";
		EXPECT_GE(lag, 0);
		EXPECT_LE(lag, after - leo);
		EXPECT_GE(at("kmirror_partition_time_lag_seconds"), 0);
		moved += after > before;
	}
	stop = true;
	producer.join();
	ASSERT_EQ("", perr);
	EXPECT_GT(moved, 0) << "the source never moved while it was scraped";
	ASSERT_EQ("", caught_up(port, "om2", 0, &s));
	int64_t hw = source_hw("om2", 0);
	EXPECT_EQ(hw, at("kmirror_partition_source_high_watermark"));
	EXPECT_EQ(hw, at("kmirror_partition_mirrored_records_total"));
}

/* Pause, resume and stop, as the gauges and counters show them: PAUSED
 * flips its gauge (MIRRORING to 0); while paused the lag is the broker's
 * high watermark minus the log end the pause left, status the same, and
 * the time lag grows with the wall clock between two scrapes; resume
 * brings MIRRORING and lag 0 back, stop STOPPED and no lag series at
 * all. No counter ever goes down across the five scrapes. */
TEST_F(KafkaOpsMetrics, PauseResumeStopFlipTheGaugesAndNoCounterGoesDown)
{
	ASSERT_EQ("", broker_->create_topic("om3", 1));
	ASSERT_EQ("", produce_n("om3", 0, 300, 4));
	uint16_t port = 0;
	auto d = mirror("om3", &port);
	ASSERT_NE(0, port);
	Scrape s0, s1, s2, s3, s4, s5;
	ASSERT_EQ("", caught_up(port, "om3", 0, &s0));
	auto at = [](const Scrape &s, const char *n) {
		return s.at(part_series(n, "om3", 0));
	};
	ChildResult r;
	int64_t paused_ms = now_ms();
	ASSERT_EQ("", ctl(*d, { "pause", "om3:0" }, &r));
	ASSERT_EQ("", scrape_until(port, &s1, [](const Scrape &x) {
		return x.at(state_series("om3", 0, "PAUSED")) == 1 &&
		       x.at(state_series("om3", 0, "MIRRORING")) == 0;
	}));
	double leo = at(s1, "kmirror_partition_log_end_offset");
	ASSERT_EQ("", produce_n("om3", 0, 200, 5));
	int64_t hw = source_hw("om3", 0);
	ASSERT_EQ("", scrape_until(port, &s2, [&](const Scrape &x) {
		return at(x, "kmirror_partition_offset_lag") == hw - leo &&
		       at(x, "kmirror_partition_time_lag_seconds") > 0;
	}));
	EXPECT_EQ(leo, at(s2, "kmirror_partition_log_end_offset"));
	EXPECT_LE(at(s2, "kmirror_partition_time_lag_seconds"),
		  (s2.after_ms - paused_ms) / 1000.0 + 0.01)
		<< "behind since before the pause";
	ASSERT_NO_FATAL_FAILURE(expect_agrees_with_status(*d, s2, "om3", { 0 }));
	/* A second later by the wall clock, the time lag is that much more. */
	ASSERT_TRUE(poll_until([&] { return now_ms() >= s2.after_ms + 1000; }, 5000));
	ASSERT_EQ("", http_get(port, "/metrics", &s3));
	double grew = at(s3, "kmirror_partition_time_lag_seconds") -
		      at(s2, "kmirror_partition_time_lag_seconds");
	EXPECT_GE(grew, (s3.before_ms - s2.after_ms) / 1000.0 - 0.01);
	EXPECT_LE(grew, (s3.after_ms - s2.before_ms) / 1000.0 + 0.01);
	ASSERT_EQ("", ctl(*d, { "resume", "om3:0" }, &r));
	ASSERT_EQ("", caught_up(port, "om3", 0, &s4));
	EXPECT_EQ(1, s4.at(state_series("om3", 0, "MIRRORING")));
	EXPECT_EQ(0, s4.at(state_series("om3", 0, "PAUSED")));
	EXPECT_EQ(hw, at(s4, "kmirror_partition_mirrored_records_total"));
	ASSERT_EQ("", ctl(*d, { "stop", "om3:0" }, &r));
	ASSERT_EQ("", scrape_until(port, &s5, [](const Scrape &x) {
		return x.at(state_series("om3", 0, "STOPPED")) == 1;
	}));
	EXPECT_FALSE(s5.has(part_series("kmirror_partition_offset_lag", "om3", 0)));
	EXPECT_FALSE(s5.has(part_series("kmirror_partition_time_lag_seconds", "om3", 0)));
	ASSERT_NO_FATAL_FAILURE(expect_agrees_with_status(*d, s5, "om3", { 0 }));
	const Scrape *seq[] = { &s0, &s1, &s2, &s3, &s4, &s5 };
	for (int i = 0; i + 1 < 6; i++)
		ASSERT_NO_FATAL_FAILURE(expect_counters_monotonic(
			*seq[i], *seq[i + 1], ("scrape " + std::to_string(i + 1)).c_str()));
}

/* A transaction left open at the source holds its last stable offset
 * below its high watermark: kmirrord's source LSO is the broker's
 * read_committed ListOffsets answer, ours the same once mirrored (the
 * stable lag 0), and both move on to the broker's when it commits. */
TEST_F(KafkaOpsMetrics, SourceLastStableOffsetFollowsAnOpenTransaction)
{
	ASSERT_EQ("", broker_->create_topic("om4", 1));
	ASSERT_EQ("", produce_n("om4", 0, 50, 6));
	std::string err;
	rd_kafka_t *tx = client_new(RD_KAFKA_PRODUCER,
				    { { "bootstrap.servers", broker_->bootstrap() },
				      { "transactional.id", "om4-open" } },
				    &err);
	ASSERT_NE(nullptr, tx) << err;
	std::unique_ptr<rd_kafka_t, void (*)(rd_kafka_t *)> hold(tx, rd_kafka_destroy);
	rd_kafka_error_t *e = rd_kafka_init_transactions(tx, 30000);
	ASSERT_EQ(nullptr, e) << rd_kafka_error_string(e);
	ASSERT_EQ(nullptr, rd_kafka_begin_transaction(tx));
	for (int i = 0; i < 10; i++)
		ASSERT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR,
			  rd_kafka_producev(tx, RD_KAFKA_V_TOPIC("om4"),
					    RD_KAFKA_V_PARTITION(0),
					    RD_KAFKA_V_VALUE((void *)"open", 4),
					    RD_KAFKA_V_END));
	ASSERT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR, rd_kafka_flush(tx, 30000));
	int64_t lso = -1, hw = source_hw("om4", 0);
	ASSERT_EQ("", source_lso(broker_->bootstrap(), "om4", 0, &lso));
	ASSERT_LT(lso, hw) << "the transaction is open: the LSO stays behind";
	uint16_t port = 0;
	auto d = mirror("om4", &port);
	ASSERT_NE(0, port);
	Scrape s;
	auto at = [&](const Scrape &x, const char *n) {
		return x.at(part_series(n, "om4", 0));
	};
	/* Our LSO follows our durable HW (flush.ms): polled with the rest,
	 * not expected at the moment the log end arrives (seen 0 under ASan
	 * in a full run). */
	ASSERT_EQ("", scrape_until(port, &s, [&](const Scrape &x) {
		return at(x, "kmirror_partition_log_end_offset") == hw &&
		       at(x, "kmirror_partition_source_last_stable_offset") == lso &&
		       at(x, "kmirror_partition_last_stable_offset") == lso;
	}));
	EXPECT_EQ(lso, at(s, "kmirror_partition_last_stable_offset"));
	EXPECT_EQ(0, at(s, "kmirror_partition_stable_offset_lag"));
	EXPECT_EQ(0, at(s, "kmirror_partition_offset_lag"));
	e = rd_kafka_commit_transaction(tx, 30000);
	ASSERT_EQ(nullptr, e) << rd_kafka_error_string(e);
	int64_t committed = -1;
	ASSERT_TRUE(poll_until([&] {
		return source_lso(broker_->bootstrap(), "om4", 0, &committed).empty() &&
		       committed == source_hw("om4", 0);
	}, 30000));
	ASSERT_GT(committed, lso);
	ASSERT_EQ("", scrape_until(port, &s, [&](const Scrape &x) {
		return at(x, "kmirror_partition_source_last_stable_offset") == committed &&
		       at(x, "kmirror_partition_last_stable_offset") == committed;
	}));
	EXPECT_EQ(0, at(s, "kmirror_partition_stable_offset_lag"));
}

/* The source deletes records past the end of a paused mirror
 * (DeleteRecords, as retention would): on resume the partition FAILS
 * (mirror.offset.reset=none), kmirror_partition_data_loss_events_total
 * counts the event once, the FAILED gauge is 1 and status agrees. */
TEST_F(KafkaOpsMetrics, DataLossIsCountedAndFailedShows)
{
	ASSERT_EQ("", broker_->create_topic("om5", 1));
	ASSERT_EQ("", produce_n("om5", 0, 100, 7));
	uint16_t port = 0;
	auto d = mirror("om5", &port);
	ASSERT_NE(0, port);
	Scrape s;
	ASSERT_EQ("", caught_up(port, "om5", 0, &s));
	ChildResult r;
	ASSERT_EQ("", ctl(*d, { "pause", "om5:0" }, &r));
	ASSERT_EQ("", scrape_until(port, &s, [](const Scrape &x) {
		return x.at(state_series("om5", 0, "PAUSED")) == 1;
	}));
	ASSERT_EQ("", produce_n("om5", 0, 100, 8));
	int64_t hw = source_hw("om5", 0);
	std::string json = dir_.file("delete.json");
	std::ofstream(json) << "{\"version\":1,\"partitions\":[{\"topic\":\"om5\","
			       "\"partition\":0,\"offset\":" << hw << "}]}";
	r = kafka_tool("org.apache.kafka.tools.DeleteRecordsCommand",
		       { "--bootstrap-server", broker_->bootstrap(),
			 "--offset-json-file", json }, 120000);
	ASSERT_EQ(0, r.exit_code) << r.describe() << r.out;
	ASSERT_EQ("", ctl(*d, { "resume", "om5:0" }, &r));
	/* A scrape is not one atomic snapshot: the state, the FAILED gauge,
	 * the counter and the lags are each read as they are printed, so
	 * the scrape that first shows the state may predate the rest. Wait
	 * for one that shows all three, then check a later one agrees. */
	const std::string loss =
		part_series("kmirror_partition_data_loss_events_total", "om5", 0);
	const std::string failed = part_series("kmirror_partition_failed", "om5", 0);
	ASSERT_EQ("", scrape_until(port, &s, [&](const Scrape &x) {
		return x.at(state_series("om5", 0, "FAILED")) == 1 &&
		       x.at(failed) == 1 && x.has(loss) && x.at(loss) >= 1;
	}));
	ASSERT_EQ("", scrape_until(port, &s, [](const Scrape &) { return true; }));
	EXPECT_EQ(1, s.at(loss)) << "one event, counted once";
	EXPECT_EQ(1, s.at(failed));
	ASSERT_NO_FATAL_FAILURE(expect_agrees_with_status(*d, s, "om5", { 0 }));
}

/* The groups' sync rounds fail while the source is down, and
 * kmirror_sync_errors_total{kind="groups"} counts them: still while the
 * broker answers round after round (status's row says each one's word;
 * a fresh broker's first FindCoordinator may answer
 * COORDINATOR_NOT_AVAILABLE, counted before that), then growing once it
 * is stopped, as status's group row names the error. Last in the suite:
 * it stops the broker (SetUp starts it again for any case after). */
TEST_F(KafkaOpsMetrics, GroupSyncErrorsAreCountedWhileTheSourceIsDown)
{
	ASSERT_EQ("", broker_->create_topic("om6", 1));
	ASSERT_EQ("", produce_n("om6", 0, 50, 9));
	uint16_t port = 0;
	auto d = mirror("om6", &port, { "groups=om6-group", "group.sync.interval.ms=200" });
	ASSERT_NE(0, port);
	Scrape s;
	ASSERT_EQ("", caught_up(port, "om6", 0, &s));
	const std::string errors = "kmirror_sync_errors_total{kind=\"groups\"}";
	ASSERT_TRUE(poll_until([&] { return group_sync_word(*d) == "no offsets on the source"; },
			       30000)) << "no sync round answered: " << group_sync_word(*d);
	ASSERT_EQ("", http_get(port, "/metrics", &s));
	double answered = s.at(errors);
	int64_t ago = -1, last = INT64_MAX;
	int rounds = 0;
	ASSERT_TRUE(poll_until([&] {
		if (group_sync_word(*d, &ago) == "no offsets on the source" && ago < last)
			rounds += last != INT64_MAX;
		last = ago;
		return rounds >= 3;
	}, 30000)) << "no three more rounds answered";
	ASSERT_EQ("", http_get(port, "/metrics", &s));
	EXPECT_EQ(answered, s.at(errors)) << "a round the source answered was counted";
	ASSERT_EQ("", broker_->stop());
	double first = -1;
	ASSERT_EQ("", scrape_until(port, &s, [&](const Scrape &x) {
		if (first < 0 && x.at(errors) > 0)
			first = x.at(errors);
		return first > 0 && x.at(errors) > first;
	})) << "the failed rounds were not counted";
	std::string word = group_sync_word(*d);
	EXPECT_NE("no offsets on the source", word);
	EXPECT_NE("synced", word);
}
