/* Failover with real transactions open (issue 14, suite kafka-failover):
 * does `kmirrorctl stop` settle the transactions a real Kafka broker still
 * holds open at the cut, in both modes, at exactly the right offsets?
 *
 * Method: one KRaft broker (kafka_broker.h), two topics of 2 partitions,
 * "fa" (stopped with --mode abort) and "ft" (--mode truncate). Each
 * partition first gets committed transactions (librdkafka, real COMMIT
 * markers); then, per topic, librdkafka transactional producer A begins a
 * transaction on both partitions and producer B one on partition 0 only,
 * both flushed and never ended (kept alive until after the stop, with a
 * transaction timeout far beyond the test). The expected offsets come from
 * the producers' delivery reports and are checked against the broker's
 * ListOffsets (read_uncommitted: the end; read_committed: the LSO, the
 * first open offset). kmirrord mirrors both topics until its log end and
 * high watermark are the broker's, then each topic is stopped and judged
 * from the stop's JSON reply, kmirror-dump-log of kmirror's segment and
 * librdkafka read_committed consumers:
 * - abort: nothing removed; one ABORT control batch per open transaction
 *   at offsets END, END+1..., each carrying -(p+2) of the source producer
 *   id p of that transaction (as the broker's log shows it) and its
 *   epoch, each id once; then one MIRROR_PID_RESET barrier naming the
 *   broker's cluster id; the log end right after it;
 * - truncate: cut at the LSO (END - LSO records removed, no marker), the
 *   barrier at the LSO, the log end LSO + 1;
 * - read_committed on kmirrord returns exactly the committed records
 *   (offsets and values as the broker serves them below its LSO).
 */
#include <jansson.h>

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

constexpr int kParts = 2;

/* One delivery report's outcome, filled by the producer's callback. */
struct Delivered {
	std::map<int32_t, std::vector<int64_t>> offsets; /* by partition */
	std::string error;
};

void on_delivery(rd_kafka_t *, const rd_kafka_message_t *m, void *)
{
	auto *d = static_cast<Delivered *>(m->_private);
	if (m->err)
		d->error = rd_kafka_err2str(m->err);
	else
		d->offsets[m->partition].push_back(m->offset);
}

/* A transactional producer whose transaction stays open: begun, its
 * records delivered (flushed), never committed or aborted. */
class OpenTxn {
public:
	~OpenTxn()
	{
		if (rk_)
			rd_kafka_destroy(rk_);
	}

	std::string open(const std::string &bootstrap, const std::string &id,
			 const std::string &topic, const std::vector<int32_t> &parts,
			 int n)
	{
		std::string err;
		rk_ = client_new(RD_KAFKA_PRODUCER,
				 { { "bootstrap.servers", bootstrap },
				   { "transactional.id", id },
				   { "transaction.timeout.ms", "600000" },
				   { "linger.ms", "0" } },
				 &err, [](rd_kafka_conf_t *c) {
					 rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
				 });
		if (!rk_)
			return err;
		if (std::string e = check(rd_kafka_init_transactions(rk_, 30000)); !e.empty())
			return "init_transactions: " + e;
		if (std::string e = check(rd_kafka_begin_transaction(rk_)); !e.empty())
			return "begin_transaction: " + e;
		for (int i = 0; i < n; i++)
			for (int32_t p : parts) {
				std::string v = id + "-" + std::to_string(p) + "-" +
						std::to_string(i);
				rd_kafka_resp_err_t rerr = rd_kafka_producev(
					rk_, RD_KAFKA_V_TOPIC(topic.c_str()),
					RD_KAFKA_V_PARTITION(p),
					RD_KAFKA_V_VALUE(v.data(), v.size()),
					RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
					RD_KAFKA_V_OPAQUE(&got_), RD_KAFKA_V_END);
				if (rerr)
					return std::string("produce: ") + rd_kafka_err2str(rerr);
			}
		rd_kafka_flush(rk_, 30000);
		if (!got_.error.empty())
			return "delivery: " + got_.error;
		for (int32_t p : parts)
			if (got_.offsets[p].size() != (size_t)n)
				return "not every record delivered to partition " +
				       std::to_string(p);
		return "";
	}

	/* The offsets this transaction's records took on partition p. */
	const std::vector<int64_t> &offsets(int32_t p) { return got_.offsets[p]; }

private:
	static std::string check(rd_kafka_error_t *e)
	{
		if (!e)
			return "";
		std::string s = rd_kafka_error_string(e);
		rd_kafka_error_destroy(e);
		return s;
	}

	rd_kafka_t *rk_ = nullptr;
	Delivered got_;
};

/* The high watermark ListOffsets gives a consumer with this isolation:
 * the log end (read_uncommitted) or the last stable offset. */
std::string end_offset(const std::string &bootstrap, const std::string &topic,
		       int32_t p, const char *isolation, int64_t *out)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "isolation.level", isolation } },
				    &err);
	if (!rk)
		return err;
	int64_t lo = -1;
	rd_kafka_resp_err_t rerr = rd_kafka_query_watermark_offsets(
		rk, topic.c_str(), p, &lo, out, 10000);
	rd_kafka_destroy(rk);
	return rerr ? rd_kafka_err2str(rerr) : "";
}

/* One batch of kmirror-dump-log --deep output, with its control type. */
struct Line {
	int64_t base = -1, last = -1, pid = 0;
	int epoch = 0;
	bool control = false;
	std::string marker; /* "ABORT", "COMMIT", "MirrorPidReset:<id>" */
};

std::vector<Line> batches_of(const std::string &text)
{
	std::vector<Line> v;
	std::regex batch("^baseOffset: (-?[0-9]+) lastOffset: (-?[0-9]+) .*"
			 "producerId: (-?[0-9]+) producerEpoch: (-?[0-9]+) .*"
			 "isControl: (true|false)");
	std::regex marker("endTxnMarker: ([A-Z]+)");
	std::regex reset("MirrorPidReset \\{\"version\":0,\"sourceClusterId\":\"([^\"]*)\"\\}");
	size_t pos = 0;

	while (pos < text.size()) {
		size_t nl = text.find('\n', pos);
		if (nl == std::string::npos)
			nl = text.size();
		std::string line = text.substr(pos, nl - pos);
		pos = nl + 1;
		std::smatch m;
		if (std::regex_search(line, m, batch)) {
			Line l;
			l.base = std::stoll(m[1]);
			l.last = std::stoll(m[2]);
			l.pid = std::stoll(m[3]);
			l.epoch = std::stoi(m[4]);
			l.control = m[5] == "true";
			v.push_back(l);
		} else if (!v.empty() && std::regex_search(line, m, marker)) {
			v.back().marker = m[1];
		} else if (!v.empty() && std::regex_search(line, m, reset)) {
			v.back().marker = "MirrorPidReset:" + m[1].str();
		}
	}
	return v;
}

/* The batch holding offset o, or nullptr. */
const Line *batch_at(const std::vector<Line> &v, int64_t o)
{
	for (auto &l : v)
		if (l.base <= o && o <= l.last)
			return &l;
	return nullptr;
}

/* The stop reply's row for "topic:p" (the reply may come with progress
 * lines before it). */
std::map<std::string, int64_t> stop_row(const std::string &out, const std::string &name)
{
	std::map<std::string, int64_t> row;
	std::regex re("\\{\"partition\": ?\"" + name + "\"[^}]*\\}");
	std::smatch m;

	if (!std::regex_search(out, m, re))
		return row;
	json_t *j = json_loads(m[0].str().c_str(), 0, nullptr);
	const char *k;
	json_t *v;
	json_object_foreach(j, k, v) {
		if (json_is_integer(v))
			row[k] = json_integer_value(v);
	}
	json_decref(j);
	return row;
}

class KafkaFailover : public ::testing::Test {
protected:
	KafkaBroker broker_{ { "log.flush.interval.messages=1000000" } };
	TempDir dir_{ "km-kafka-fo" };
};

/* What the source holds of one partition before the stop. */
struct Expect {
	int64_t end = -1, lso = -1;
	/* source producer id and epoch of each open transaction here */
	std::set<std::pair<int64_t, int>> open;
	std::vector<Message> committed; /* read_committed on the broker */
};

TEST_F(KafkaFailover, StopSettlesOpenTransactionsInBothModes)
{
	ASSERT_EQ("", dir_.error());
	ASSERT_EQ("", broker_.start());
	const std::vector<std::string> topics = { "fa", "ft" };
	for (auto &t : topics)
		ASSERT_EQ("", broker_.create_topic(t, kParts));
	for (auto &t : topics)
		for (int p = 0; p < kParts; p++) {
			ProduceSpec c;
			c.topic = t;
			c.partition = p;
			c.count = 40 + 10 * p;
			c.mode = ProducerMode::kTransactional;
			c.txn_size = 10;
			c.flush_every = 5;
			c.seed = 3 + p;
			c.transactional_id = "fo-committed-" + t + "-" + std::to_string(p);
			ProduceResult r;
			ASSERT_EQ("", produce(broker_.bootstrap(), c, &r));
			ASSERT_EQ(c.count / 10, r.committed);
		}
	/* Per topic: A open on both partitions, then B on partition 0. */
	std::map<std::string, OpenTxn> a, b;
	for (auto &t : topics) {
		ASSERT_EQ("", a[t].open(broker_.bootstrap(), "fo-open-a-" + t, t, { 0, 1 }, 7));
		ASSERT_EQ("", b[t].open(broker_.bootstrap(), "fo-open-b-" + t, t, { 0 }, 5));
	}

	std::map<std::string, Expect> want;
	for (auto &t : topics)
		for (int p = 0; p < kParts; p++) {
			std::string k = t + ":" + std::to_string(p);
			Expect &e = want[k];
			std::vector<int64_t> open = a[t].offsets(p);
			if (p == 0)
				open.insert(open.end(), b[t].offsets(0).begin(),
					    b[t].offsets(0).end());
			int64_t first = *std::min_element(open.begin(), open.end());
			int64_t last = *std::max_element(open.begin(), open.end());
			ASSERT_EQ("", end_offset(broker_.bootstrap(), t, p,
						 "read_uncommitted", &e.end));
			ASSERT_EQ("", end_offset(broker_.bootstrap(), t, p,
						 "read_committed", &e.lso));
			ASSERT_EQ(last + 1, e.end) << k << ": nothing after the open records";
			ASSERT_EQ(first, e.lso) << k << ": the LSO is the first open offset";
			/* the producers' ids as the broker wrote them */
			std::vector<Line> src = batches_of(
				dump(broker_.partition_dir(t, p) + "/00000000000000000000.log"));
			std::vector<std::vector<int64_t>> txns = { a[t].offsets(p) };
			if (p == 0)
				txns.push_back(b[t].offsets(0));
			for (auto &offs : txns) {
				const Line *l = batch_at(src, offs.front());
				ASSERT_NE(nullptr, l) << k << " offset " << offs.front();
				ASSERT_GE(l->pid, 0) << k;
				e.open.insert({ l->pid, l->epoch });
			}
			ASSERT_EQ(txns.size(), e.open.size()) << k << ": two producers, two ids";
			ConsumeSpec cs;
			cs.topic = t;
			cs.partition = p;
			cs.read_committed = true;
			cs.to = e.lso;
			ASSERT_EQ("", consume(broker_.bootstrap(), cs, &e.committed));
			ASSERT_EQ((size_t)(40 + 10 * p), e.committed.size()) << k;
		}

	Daemon d(dir_.path(), { "source.bootstrap.servers=" + broker_.bootstrap(),
				"topics=fa,ft" });
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status(
			      [&](const std::map<std::string, PartStatus> &st) {
				      for (auto &[k, e] : want)
					      if (!st.count(k) || st.at(k).leo != e.end ||
						  st.at(k).hw != e.end)
						      return false;
				      return true;
			      },
			      60000));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	for (auto &[k, e] : want)
		EXPECT_EQ(e.lso, st[k].lso) << k << ": the mirrored transactions are open";

	ChildResult ra, rt;
	ASSERT_EQ("", ctl(d, { "stop", "fa", "--mode", "abort", "--json" }, &ra));
	ASSERT_EQ("", ctl(d, { "stop", "ft", "--mode", "truncate", "--json" }, &rt));
	std::string cluster = cluster_id_of(broker_.partition_dir("fa", 0) + "/..");
	ASSERT_FALSE(cluster.empty());

	for (int p = 0; p < kParts; p++) {
		std::string k = "fa:" + std::to_string(p);
		const Expect &e = want[k];
		int64_t n = (int64_t)e.open.size();
		auto row = stop_row(ra.out, k);
		EXPECT_EQ(0, row["removed_records"]) << ra.out;
		EXPECT_EQ(n, row["aborted"]) << ra.out;
		EXPECT_EQ(e.end + n, row["barrier_offset"]) << ra.out;
		std::string text = dump(dir_.path() + "/fa-" + std::to_string(p) +
					"/00000000000000000000.log");
		std::vector<Line> v = batches_of(text);
		ASSERT_GE(v.size(), (size_t)n + 1) << text;
		/* the last n + 1 batches: the ABORTs, then the barrier */
		std::vector<Line> tail(v.end() - (n + 1), v.end());
		ASSERT_EQ(e.end - 1, v[v.size() - n - 2].last) << k << ": data kept\n" << text;
		std::set<std::pair<int64_t, int>> aborted;
		for (int64_t i = 0; i < n; i++) {
			const Line &l = tail[i];
			EXPECT_EQ(e.end + i, l.base) << k << "\n" << text;
			EXPECT_EQ(l.base, l.last) << k;
			EXPECT_TRUE(l.control) << k;
			EXPECT_EQ("ABORT", l.marker) << k << " at " << l.base;
			aborted.insert({ -(l.pid + 2), l.epoch });
		}
		EXPECT_EQ(e.open, aborted) << k << ": one ABORT per open transaction, "
					       "with its mapped id and epoch";
		const Line &bar = tail[n];
		EXPECT_EQ(e.end + n, bar.base) << k;
		EXPECT_EQ(bar.base, bar.last) << k;
		EXPECT_EQ(-1, bar.pid) << k;
		EXPECT_TRUE(bar.control) << k;
		EXPECT_EQ("MirrorPidReset:" + cluster, bar.marker) << k;
		EXPECT_EQ(1, std::count_if(v.begin(), v.end(), [](const Line &l) {
				  return l.marker.rfind("MirrorPidReset", 0) == 0;
			  })) << k;
		EXPECT_EQ(n, std::count_if(v.begin(), v.end(), [](const Line &l) {
				  return l.marker == "ABORT";
			  })) << k;
	}
	for (int p = 0; p < kParts; p++) {
		std::string k = "ft:" + std::to_string(p);
		const Expect &e = want[k];
		auto row = stop_row(rt.out, k);
		EXPECT_EQ(e.lso, row["cut_offset"]) << rt.out;
		EXPECT_EQ(e.end - e.lso, row["removed_records"]) << rt.out;
		EXPECT_EQ(0, row["aborted"]) << rt.out;
		EXPECT_EQ(e.lso, row["barrier_offset"]) << rt.out;
		std::string text = dump(dir_.path() + "/ft-" + std::to_string(p) +
					"/00000000000000000000.log");
		std::vector<Line> v = batches_of(text);
		ASSERT_GE(v.size(), 2u) << text;
		EXPECT_EQ(e.lso - 1, v[v.size() - 2].last) << k << ": cut at the LSO\n" << text;
		EXPECT_EQ(e.lso, v.back().base) << k << "\n" << text;
		EXPECT_EQ(e.lso, v.back().last) << k;
		EXPECT_EQ("MirrorPidReset:" + cluster, v.back().marker) << k;
		EXPECT_EQ(0, std::count_if(v.begin(), v.end(), [](const Line &l) {
				  return l.marker == "ABORT";
			  })) << k;
	}

	/* Every transaction settled: the LSO is the log end, which is right
	 * after the barrier, and read_committed reads exactly the committed
	 * records, at the source's offsets. */
	std::map<std::string, int64_t> leo;
	for (auto &[k, e] : want)
		leo[k] = (k[1] == 'a' ? e.end + (int64_t)e.open.size() : e.lso) + 1;
	ASSERT_EQ("", d.wait_status(
			      [&](const std::map<std::string, PartStatus> &s) {
				      for (auto &[k, end] : leo)
					      if (!s.count(k) || s.at(k).leo != end ||
						  s.at(k).lso != end)
						      return false;
				      return true;
			      },
			      10000));
	ASSERT_EQ("", d.status(&st));
	for (auto &[k, e] : want) {
		EXPECT_EQ("STOPPED", st[k].state) << k;
		std::vector<Message> got;
		ConsumeSpec cs;
		cs.topic = k.substr(0, 2);
		cs.partition = k[3] - '0';
		cs.read_committed = true;
		ASSERT_EQ("", consume(d.bootstrap(), cs, &got)) << k;
		ASSERT_EQ(e.committed.size(), got.size()) << k;
		for (size_t i = 0; i < got.size(); i++) {
			EXPECT_EQ(e.committed[i].offset, got[i].offset) << k;
			EXPECT_EQ(e.committed[i].value, got[i].value) << k;
		}
	}
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	EXPECT_EQ(0, res.exit_code) << res.describe();
	/* the open producers stay alive until here (a and b) */
}

} // namespace
