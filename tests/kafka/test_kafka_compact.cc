/* kmirrord mirroring a compacted topic of a real Apache Kafka 4.x broker
 * (issue 14, suite kafka-compact): after Kafka's log cleaner has run, the
 * source's log has offset gaps (between batches and inside them), batches
 * the cleaner rewrote, tombstones and transaction markers carrying a delete
 * horizon (attributes bit 6, base timestamp = the horizon), empty batches
 * kept for a producer's last sequence. Does kmirror copy that log as Kafka
 * wrote it, and serve it as Kafka serves it?
 *
 * Method: one KRaft broker for the suite, its cleaner woken every 100 ms.
 * Writers are Kafka's own Java VerifiableProducer (acks=all, idempotent,
 * keys repeating over a small set, so every key is overwritten many times),
 * librdkafka's transactional producer (committed and aborted transactions:
 * real markers, aborted data the cleaner drops) and librdkafka tombstones
 * (null values). Each wait polls an observable condition: the broker's
 * cleaner-offset-checkpoint reaching the active segment, the clock passing
 * the delete horizons read from the broker's files, kmirrord's status
 * reaching the source's high watermark (or FAILED).
 * - Cleaned first, then mirrored: two rounds of writes and cleaning, the
 *   first with a 1 s delete retention, so that the second removes the
 *   first round's tombstones and markers and gives its own long horizons.
 *   kmirrord then fetches the log, is killed (-9) and recovers it. Every
 *   batch is byte-identical to the broker's for the same offsets
 *   (producerId -> -(p+2) and crc masked), so the gaps are the source's
 *   exactly; Kafka's DumpLogSegments --deep-iteration prints the same
 *   batches and records on both sides (producerId, crc and file positions
 *   masked: our segments roll by size, the cleaner groups Kafka's), passes
 *   our indexes' sanity check, finds no index entry mismatching our .log,
 *   and prints the same producers in both sides' last snapshot; Kafka's
 *   console consumer reads the same offsets, keys and values (tombstones
 *   included) from both, in both isolation levels, as librdkafka does;
 *   high watermark and LSO equal the source's.
 * - Mirrored before the cleaner ran and on after it: kmirror keeps what it
 *   fetched (it never cleans a mirrored partition; docs/design.md says why) and serves every
 *   record the source still serves at the same offset plus the ones the
 *   cleaner dropped; stopped, and restarted after the source cleaned past
 *   its log end, its fetch offset lands in a gap and what it fetches from
 *   there on is byte-identical to the broker's.
 */
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/kafka/kafka_broker.h"
#include "tests/kafka/kafka_files.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

constexpr int16_t kDeleteHorizon = 0x40; /* attributes bit 6 */

/* The compacted topic's configs: small segments (the cleaner never
 * touches the active one), everything cleanable at once. The delete
 * retention is long enough that no tombstone's horizon passes while a
 * case runs: once set, the cleaned log stays as it is, so that kmirrord
 * and the comparison see the same files (a case that wants tombstones
 * gone sets it short, lets one cleaning set their horizons, and sets it
 * long again). */
const std::vector<std::string> kCompacted = {
	"cleanup.policy=compact", "internal.segment.bytes=16384",
	"min.cleanable.dirty.ratio=0.01", "min.compaction.lag.ms=0",
	"delete.retention.ms=600000", "segment.ms=600000",
};

/* The highest offset a .log file name holds in dir: the active segment's
 * base offset. */
int64_t active_base(const std::string &dir)
{
	std::vector<std::string> logs = files_of(dir, "log");
	return logs.empty() ? -1 : std::stoll(logs.back().substr(0, 20));
}

/* The cleaner's checkpoint for topic-p ("topic p offset" lines after a
 * version and a count), or -1 before the first cleaning. */
int64_t cleaned_to(const std::string &data_dir, const std::string &topic, int p)
{
	std::istringstream in(read_file(data_dir + "/cleaner-offset-checkpoint"));
	std::string t;
	int part = -1;
	int64_t off = -1, found = -1;
	in >> t >> t; /* version, count */
	while (in >> t >> part >> off)
		if (t == topic && part == p)
			found = off;
	return found;
}

/* One tombstone (null value) per key, with librdkafka, every delivery
 * reported without error. */
std::string tombstones(const std::string &bootstrap, const std::string &topic,
		       const std::vector<std::string> &keys)
{
	static std::atomic<int> failed;
	std::string err;
	failed = 0;
	rd_kafka_t *rk = client_new(
		RD_KAFKA_PRODUCER, { { "bootstrap.servers", bootstrap }, { "linger.ms", "5" } },
		&err, [](rd_kafka_conf_t *c) {
			rd_kafka_conf_set_dr_msg_cb(
				c, [](rd_kafka_t *, const rd_kafka_message_t *m, void *) {
					if (m->err)
						failed++;
				});
		});
	if (rk == nullptr)
		return err;
	for (auto &k : keys) {
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(0),
			RD_KAFKA_V_KEY(k.data(), k.size()), RD_KAFKA_V_VALUE(nullptr, 0),
			RD_KAFKA_V_END);
		if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
			err = rd_kafka_err2str(e);
	}
	rd_kafka_resp_err_t fe = rd_kafka_flush(rk, 30000);
	rd_kafka_destroy(rk);
	if (err.empty() && fe != RD_KAFKA_RESP_ERR_NO_ERROR)
		err = rd_kafka_err2str(fe);
	if (err.empty() && failed > 0)
		err = std::to_string(failed.load()) + " tombstones not delivered";
	return err;
}

/* What the cleaner left, counted from a partition's .log files. */
struct Cleaned {
	int gaps = 0;	   /* offsets missing between or inside batches */
	int horizons = 0;  /* batches carrying a delete horizon */
	int empty = 0;	   /* batches with no record left */
	int control = 0;   /* transaction markers */
	int64_t records = 0;
};

Cleaned cleaned_shape(const std::string &dir)
{
	Side s;
	Cleaned c;
	EXPECT_EQ("", read_side(dir, &s));
	int64_t next = 0;
	for (auto &b : s.batches) {
		c.gaps += b.base > next;
		c.gaps += b.count < b.last - b.base + 1;
		c.horizons += (b.attrs & kDeleteHorizon) != 0;
		c.empty += b.count == 0;
		c.control += b.control;
		c.records += b.count;
		next = b.last + 1;
	}
	return c;
}

/* DumpLogSegments --deep-iteration over a partition's .log files, as the
 * batch and record lines alone, with producerId, crc and the position in
 * the file masked: the batches and records Kafka reads, whichever
 * segments hold them. */
std::string deep_records(const std::string &dir, std::string *err)
{
	ChildResult r = dump_files(paths_of(dir, { "log" }), { "--deep-iteration" });
	if (r.exit_code != 0 || r.err.find("Exception") != std::string::npos)
		*err += dir + ": " + r.describe() + "\n";
	std::istringstream in(normalised(r.out, { dir }));
	std::string line, out;
	while (std::getline(in, line))
		if (line.rfind("baseOffset:", 0) == 0 || line.rfind("| offset:", 0) == 0)
			out += std::regex_replace(line, std::regex("position: [0-9]+"),
						  "position: N") + "\n";
	return out;
}

/* Kafka's checks of our indexes: the sanity check passes for every
 * .index and .timeindex, and no entry mismatches the .log. */
void expect_indexes_sane(const std::string &dir)
{
	std::vector<std::string> idx = paths_of(dir, { "index", "timeindex" });
	ASSERT_FALSE(idx.empty()) << dir;
	ChildResult a = dump_files(idx, { "--index-sanity-check" });
	EXPECT_EQ(0, a.exit_code) << a.describe();
	/* an index with no entry yet (a segment under 4 KiB) "is empty." */
	size_t passed = 0;
	for (const char *ok : { "passed sanity check", "is empty." })
		for (size_t at = 0; (at = a.out.find(ok, at)) != std::string::npos; at++)
			passed++;
	EXPECT_EQ(idx.size(), passed) << a.out << a.err;
	ChildResult v = dump_files(idx, { "--verify-index-only" });
	EXPECT_EQ(0, v.exit_code) << v.describe();
	EXPECT_EQ(std::string::npos, v.out.find("Mismatches")) << v.out;
	EXPECT_EQ(std::string::npos, v.err.find("Exception")) << v.err;
}

/* The number after "name: " in a line of Kafka's tools, or -1. */
int64_t field(const std::string &line, const std::string &name)
{
	std::smatch m;
	if (!std::regex_search(line, m, std::regex("(^| )" + name + ": (-?[0-9]+)")))
		return -1;
	return std::stoll(m[2]);
}

std::string with_field(const std::string &line, const std::string &name, int64_t v)
{
	return std::regex_replace(line, std::regex("(^| )" + name + ": -?[0-9]+"),
				  "$1" + name + ": " + std::to_string(v));
}

/* The lines of a DumpLogSegments run over files that start with `head`,
 * each through `fix`, producer ids masked, sorted (the order is a hash
 * map's, or the segments', which differ). */
template <class F>
std::string entries(const std::vector<std::string> &files, const std::string &head,
		    F fix)
{
	if (files.empty())
		return "";
	ChildResult r = dump_files(files, {});
	EXPECT_EQ(0, r.exit_code) << r.describe();
	std::istringstream in(r.out);
	std::vector<std::string> v;
	std::string line, out;
	while (std::getline(in, line))
		if (line.rfind(head, 0) == 0)
			v.push_back(normalised(fix(line), {}));
	std::sort(v.begin(), v.end());
	for (auto &l : v)
		out += l + "\n";
	return out;
}

/* The last batch of producer pid in side s (a marker included), or
 * nullptr. */
const Batch *last_of(const Side &s, int64_t pid)
{
	const Batch *last = nullptr;
	for (auto &b : s.batches)
		if (b.pid == pid)
			last = &b;
	return last;
}

/* Both sides' newest producer snapshot (each written at the log end by
 * the clean shutdown) holds the same producers as Kafka prints them, but
 * for what the cleaner changed after Kafka recorded it: a producer's
 * timestamp (one field in the file, printed twice) is its last batch's
 * maxTimestamp when appended, and a cleaned batch holds the largest of
 * the records left. A replica that fetches the cleaned log - Kafka's or
 * kmirror - can only take that one: the expectation is Kafka's entry
 * with its last batch's timestamp as the broker's file now holds it. */
void expect_same_last_snapshot(const std::string &ours, const std::string &theirs)
{
	std::vector<std::string> a = files_of(ours, "snapshot"), b = files_of(theirs, "snapshot");
	ASSERT_FALSE(a.empty()) << ours;
	ASSERT_FALSE(b.empty()) << theirs;
	ASSERT_EQ(b.back(), a.back()) << "snapshots at other offsets";
	Side src;
	ASSERT_EQ("", read_side(theirs, &src));
	int changed = 0;
	std::string u = entries({ ours + "/" + a.back() }, "producerId:",
				[](const std::string &l) { return l; });
	std::string v = entries({ theirs + "/" + b.back() }, "producerId:",
				[&](const std::string &l) {
					const Batch *at = last_of(src, field(l, "producerId"));
					if (at == nullptr || at->max_ts == field(l, "lastTimestamp"))
						return l;
					changed++;
					return with_field(with_field(l, "timestamp", at->max_ts),
							  "lastTimestamp", at->max_ts);
				});
	fprintf(stderr, "producer snapshot: %d timestamps the cleaner changed\n", changed);
	EXPECT_NE(std::string::npos, v.find("producerId: P")) << v;
	EXPECT_TRUE(u == v) << "producer state differs " << first_difference(u, v);
}

/* Both sides' .txnindex files list the same aborted transactions, but
 * for what the cleaner changed: Kafka's entry keeps the transaction's
 * first offset when appended, and once the cleaner has removed the
 * transaction's first batches (aborted data goes first), a replica of the
 * cleaned log sees it start at its first batch left. */
void expect_same_aborted(const std::string &ours, const std::string &theirs)
{
	Side src;
	ASSERT_EQ("", read_side(theirs, &src));
	int changed = 0;
	std::string u = entries(paths_of(ours, { "txnindex" }), "version:",
				[](const std::string &l) { return l; });
	std::string v = entries(paths_of(theirs, { "txnindex" }), "version:",
				[&](const std::string &l) {
					int64_t pid = field(l, "producerId");
					int64_t first = field(l, "firstOffset");
					for (auto &b : src.batches)
						if (b.pid == pid && !b.control && b.base >= first) {
							changed += b.base != first;
							return with_field(l, "firstOffset", b.base);
						}
					return l;
				});
	fprintf(stderr, "aborted transactions: %d first offsets the cleaner moved\n", changed);
	EXPECT_NE("", v) << "no aborted transaction left to compare";
	EXPECT_TRUE(u == v) << "other aborted transactions in the .txnindex files:\n"
			    << u << "--- Kafka's ---\n" << v;
}

/* ListOffsets by timestamp (librdkafka's offsetsForTimes) for each of
 * `times` on topic-0: the offsets, in order. */
std::string offsets_for_times(const std::string &bootstrap, const std::string &topic,
			      const std::vector<int64_t> &times, std::vector<int64_t> *out)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "group.id", "km-compact-times" } },
				    &err);
	if (rk == nullptr)
		return err;
	for (int64_t t : times) {
		rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
		rd_kafka_topic_partition_list_add(l, topic.c_str(), 0)->offset = t;
		rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(rk, l, 10000);
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
			e = l->elems[0].err;
		out->push_back(l->elems[0].offset);
		rd_kafka_topic_partition_list_destroy(l);
		if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
			err = "offsetsForTimes " + std::to_string(t) + ": " +
			      rd_kafka_err2str(e);
			break;
		}
	}
	rd_kafka_destroy(rk);
	return err;
}

/* Milliseconds since the epoch: the clock delete horizons are on. */
int64_t now_wall_ms()
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The console consumer's lines as "Offset:N<TAB>key<TAB>value" each. */
std::vector<std::string> lines_of(const std::string &text)
{
	std::vector<std::string> v;
	std::istringstream in(text);
	std::string line;
	while (std::getline(in, line))
		if (line.rfind("Offset:", 0) == 0)
			v.push_back(line);
	return v;
}

class KafkaCompact : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		broker_ = new KafkaBroker({ "log.cleaner.backoff.ms=100" });
	}
	static void TearDownTestSuite()
	{
		delete broker_;
		broker_ = nullptr;
	}

	void SetUp() override
	{
		ASSERT_EQ("", dir_.error());
		if (!broker_->running()) {
			ASSERT_EQ("", broker_->start());
			fprintf(stderr, "kafka broker up in %lld ms\n",
				(long long)broker_->start_ms());
		}
	}

	std::string data_dir() const
	{
		std::string d = broker_->partition_dir("x", 0);
		return d.substr(0, d.rfind('/'));
	}

	/* Until the cleaner has cleaned topic-0 up to its active segment
	 * (which it never cleans): nothing else is left for it to change. */
	void wait_cleaned(const std::string &topic)
	{
		std::string dir = broker_->partition_dir(topic, 0);
		int64_t active = -1, done = -1;
		ASSERT_TRUE(poll_until(
			[&] {
				active = active_base(dir);
				done = cleaned_to(data_dir(), topic, 0);
				return active > 0 && done >= active;
			},
			90000)) << topic << ": cleaned to " << done << ", active segment at "
				<< active << "\n" << broker_->log_tail();
	}

	/* The first writers: idempotent Java records over `keys` keys,
	 * librdkafka transactions (every third aborted), tombstones for the
	 * keys "keys".."keys+9", which no later record overwrites. */
	void write_round(const std::string &topic, int n, int keys, uint64_t seed)
	{
		ASSERT_EQ("", verifiable_produce(broker_->bootstrap(), topic, n, keys,
						 (int)seed * 10 + 1));
		ProduceSpec t;
		t.topic = topic;
		t.count = 300;
		t.mode = ProducerMode::kTransactional;
		t.transactional_id = "km-compact-" + topic;
		t.seed = seed;
		t.txn_size = 50;
		t.abort_every = 3;
		t.flush_every = 25;
		ProduceResult tr;
		ASSERT_EQ("", produce(broker_->bootstrap(), t, &tr));
		ASSERT_GT(tr.aborted, 0);
		std::vector<std::string> gone;
		for (int k = keys; k < keys + 10; k++)
			gone.push_back(std::to_string(k));
		ASSERT_EQ("", verifiable_produce(broker_->bootstrap(), topic, keys + 10,
						 keys + 10, (int)seed * 10 + 2));
		ASSERT_EQ("", tombstones(broker_->bootstrap(), topic, gone));
		/* overwrites after the tombstones push them out of the
		 * active segment, into what the cleaner cleans */
		ASSERT_EQ("", verifiable_produce(broker_->bootstrap(), topic, n, keys,
						 (int)seed * 10 + 3));
	}

	Daemon daemon_for(const std::string &topic)
	{
		return Daemon(dir_.path(), { "source.bootstrap.servers=" + broker_->bootstrap(),
					     "topics=" + topic, "segment.bytes=16384" });
	}

	/* Until kmirrord's high watermark of topic-0 is the source's. */
	void caught_up(Daemon &d, const std::string &topic, int64_t *end)
	{
		int64_t lo = -1;
		ASSERT_EQ("", watermarks(broker_->bootstrap(), topic, 0, &lo, end));
		std::string k = topic + ":0";
		PartStatus now;
		ASSERT_EQ("", d.wait_status(
				      [&](const std::map<std::string, PartStatus> &st) {
					      if (st.count(k))
						      now = st.at(k);
					      return now.hw == *end || now.state == "FAILED";
				      },
				      90000));
		ASSERT_NE("FAILED", now.state) << now.reason;
	}

	/* A lookup by time t is answered by Kafka (LogSegment's
	 * findOffsetByTimestamp) with the first record of timestamp >= t from
	 * where its indexes let the scan start: the batch of a time index entry
	 * of timestamp <= t, so every record before that start has a timestamp
	 * <= t. With producers' timestamps out of order across batches, records
	 * of timestamp exactly t before the entry are passed over, and which
	 * are depends on where the entries fall: the broker's (its appends, its
	 * cleaner's rewrite) and kmirrord's (the batches as fetched) fall
	 * elsewhere, as a Kafka follower's would. Both answers are then right:
	 * the record at o has a timestamp >= t and none before it one > t. */
	static bool by_time_right(const std::vector<Message> &all, int64_t t, int64_t o)
	{
		bool found = false;
		for (const Message &m : all) {
			if (m.offset == o)
				found = m.timestamp >= t;
			if (m.offset < o && m.timestamp > t)
				return false;
		}
		return found;
	}

	/* Reads that start where the source has no record (an offset the
	 * cleaner removed, inside a batch or between batches) and lookups by
	 * timestamp (every record's, and one past it) answer on kmirrord what
	 * they answer on the source. */
	void expect_gap_reads_alike(const Daemon &d, const std::string &topic)
	{
		std::vector<Message> all;
		ConsumeSpec cs;
		cs.topic = topic;
		ASSERT_EQ("", consume(broker_->bootstrap(), cs, &all));
		std::vector<int64_t> holes, times;
		for (size_t i = 0; i + 1 < all.size(); i++)
			if (all[i + 1].offset > all[i].offset + 1)
				holes.push_back(all[i].offset + 1);
		ASSERT_FALSE(holes.empty());
		int64_t lo = -1, hw = -1;
		ASSERT_EQ("", watermarks(broker_->bootstrap(), topic, 0, &lo, &hw));
		for (int64_t from : holes) {
			std::vector<Message> a, b;
			cs.from = from;
			cs.to = std::min(from + 50, hw); /* a read past hw waits for more */
			ASSERT_EQ("", consume(broker_->bootstrap(), cs, &a));
			ASSERT_EQ("", consume(d.bootstrap(), cs, &b)) << "from " << from;
			ASSERT_EQ(a.size(), b.size()) << "from " << from;
			for (size_t i = 0; i < a.size(); i++)
				ASSERT_EQ(a[i].offset, b[i].offset) << "from " << from;
		}
		std::set<int64_t> distinct;
		for (auto &m : all)
			distinct.insert({ m.timestamp, m.timestamp + 1 });
		times.assign(distinct.begin(), distinct.end());
		std::vector<int64_t> x, y;
		ASSERT_EQ("", offsets_for_times(broker_->bootstrap(), topic, times, &x));
		ASSERT_EQ("", offsets_for_times(d.bootstrap(), topic, times, &y));
		int ties = 0;
		for (size_t i = 0; i < times.size(); i++) {
			if (x[i] == y[i])
				continue;
			/* Only a tie may part them (see by_time_right). */
			ASSERT_TRUE(by_time_right(all, times[i], x[i]))
				<< "the broker's " << x[i] << " for " << times[i];
			ASSERT_TRUE(by_time_right(all, times[i], y[i]))
				<< "kmirrord's " << y[i] << " where the broker answered "
				<< x[i] << ", the first offset at or after " << times[i];
			ties++;
		}
		fprintf(stderr, "by time: %zu lookups, %d answered with another record "
			"of the same timestamp\n", times.size(), ties);
	}

	/* Kafka's console consumer reads the same lines from both. */
	void expect_console_alike(const Daemon &d, const std::string &topic,
				  const std::string &isolation)
	{
		std::vector<Message> want;
		ConsumeSpec cs;
		cs.topic = topic;
		cs.read_committed = isolation == "read_committed";
		ASSERT_EQ("", consume(broker_->bootstrap(), cs, &want));
		ASSERT_FALSE(want.empty());
		std::string on_kafka, on_ours;
		ASSERT_EQ("", console_consume(broker_->bootstrap(), topic, 0,
					      (int64_t)want.size(), isolation, &on_kafka));
		ASSERT_EQ("", console_consume(d.bootstrap(), topic, 0, (int64_t)want.size(),
					      isolation, &on_ours));
		EXPECT_NE(std::string::npos, on_kafka.find("\tnull\n")) << "no tombstone read";
		EXPECT_TRUE(on_kafka == on_ours)
			<< isolation << ": " << first_difference(on_ours, on_kafka);
	}

	/* kafka-configs --alter of one topic config. */
	std::string alter(const std::string &topic, const std::string &kv)
	{
		ChildResult r = kafka_tool("kafka.admin.ConfigCommand",
					   { "--bootstrap-server", broker_->bootstrap(),
					     "--entity-type", "topics", "--entity-name", topic,
					     "--alter", "--add-config", kv },
					   120000);
		return r.exit_code == 0 ? "" : "kafka-configs: " + r.describe();
	}

	/* The cleaner sets short delete horizons on the first round's
	 * tombstones and markers; once the clock has passed every one of them
	 * (read from the broker's files), the second round's cleaning removes
	 * them and gives the second round's tombstones long horizons. */
	void write_and_clean_twice(const std::string &topic)
	{
		ASSERT_EQ("", alter(topic, "delete.retention.ms=1000"));
		ASSERT_NO_FATAL_FAILURE(write_round(topic, 3000, 40, 1));
		ASSERT_NO_FATAL_FAILURE(wait_cleaned(topic));
		ASSERT_EQ("", alter(topic, "delete.retention.ms=600000"));
		Side first;
		ASSERT_EQ("", read_side(broker_->partition_dir(topic, 0), &first));
		int64_t horizon = -1;
		for (auto &b : first.batches)
			if (b.attrs & kDeleteHorizon)
				horizon = std::max(horizon, b.base_ts);
		ASSERT_GT(horizon, 0) << "the first cleaning set no delete horizon";
		ASSERT_TRUE(poll_until([&] { return now_wall_ms() > horizon; }, 30000));
		ASSERT_NO_FATAL_FAILURE(write_round(topic, 1000, 40, 2));
		ASSERT_NO_FATAL_FAILURE(wait_cleaned(topic));
		Side second;
		ASSERT_EQ("", read_side(broker_->partition_dir(topic, 0), &second));
		for (auto &b : second.batches)
			ASSERT_FALSE((b.attrs & kDeleteHorizon) && b.base_ts <= horizon)
				<< "a batch the first cleaning gave a horizon is still there";
	}

	/* Both stopped: our files against the broker's. */
	void judge_files(const std::string &ours, const std::string &theirs)
	{
		int mapped = 0;
		ASSERT_NO_FATAL_FAILURE(expect_identical(ours, theirs, &mapped));
		EXPECT_GT(mapped, 0);
		std::string err;
		std::string a = deep_records(ours, &err), b = deep_records(theirs, &err);
		EXPECT_EQ("", err);
		EXPECT_NE(std::string::npos, b.find("deleteHorizonMs: OptionalLong["))
			<< b.substr(0, 2000);
		EXPECT_TRUE(a == b) << "Kafka reads our files differently "
				    << first_difference(a, b);
		expect_indexes_sane(ours);
		expect_same_last_snapshot(ours, theirs);
		expect_same_aborted(ours, theirs);
	}

	static KafkaBroker *broker_;
	TempDir dir_{ "km-kafka-cmp" };
};

KafkaBroker *KafkaCompact::broker_ = nullptr;

/* The cleaner runs first; kmirrord then fetches the cleaned log. */
TEST_F(KafkaCompact, CleanedLogMirrorsByteForByte)
{
	ASSERT_EQ("", broker_->create_topic("cmp", 1, kCompacted));
	ASSERT_NO_FATAL_FAILURE(write_and_clean_twice("cmp"));
	std::string theirs = broker_->partition_dir("cmp", 0);
	Cleaned src = cleaned_shape(theirs);
	/* what the cleaner must have made, or this case tests nothing */
	ASSERT_GT(src.gaps, 0);
	ASSERT_GT(src.horizons, 0) << "no batch with a delete horizon";
	ASSERT_GT(src.empty, 0) << "no batch kept empty for a producer's last sequence";
	ASSERT_GT(src.control, 0) << "no transaction marker left";
	fprintf(stderr, "source: %d gaps, %d horizons, %d empty, %d markers, %lld records\n",
		src.gaps, src.horizons, src.empty, src.control, (long long)src.records);

	Daemon d = daemon_for("cmp");
	ASSERT_EQ("", d.start());
	int64_t end = -1;
	ASSERT_NO_FATAL_FAILURE(caught_up(d, "cmp", &end));
	/* recovery (R7) scans the gaps, horizons and empty batches again */
	ASSERT_EQ("", d.kill9());
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(caught_up(d, "cmp", &end));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ(end, st["cmp:0"].lso) << "every transaction ended: LSO = HW";
	ASSERT_NO_FATAL_FAILURE(expect_same_content(broker_->bootstrap(), d.bootstrap(),
						    "cmp", 0, false));
	ASSERT_NO_FATAL_FAILURE(expect_same_content(broker_->bootstrap(), d.bootstrap(),
						    "cmp", 0, true));
	ASSERT_NO_FATAL_FAILURE(expect_console_alike(d, "cmp", "read_uncommitted"));
	ASSERT_NO_FATAL_FAILURE(expect_console_alike(d, "cmp", "read_committed"));
	ASSERT_NO_FATAL_FAILURE(expect_gap_reads_alike(d, "cmp"));

	/* what the broker serves from its own files, for once it serves ours */
	std::vector<Message> before;
	ConsumeSpec cs;
	cs.topic = "cmp";
	ASSERT_EQ("", consume(broker_->bootstrap(), cs, &before));
	/* Our segments roll elsewhere than Kafka's, so its cleaner would
	 * clean what was its uncleaned active segment once it loads ours:
	 * no more cleaning, so that it serves the files as they are. */
	ASSERT_EQ("", alter("cmp", "cleanup.policy=delete"));

	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ(0, res.exit_code) << res.describe();
	ASSERT_EQ("", broker_->stop());
	std::string ours = dir_.path() + "/cmp-0";
	ASSERT_NO_FATAL_FAILURE(judge_files(ours, theirs));
	/* Kafka loads our copy of its cleaned log in place of its own and
	 * serves the same records from it */
	ASSERT_NO_FATAL_FAILURE(give_kafka_ours(ours, theirs));
	ASSERT_EQ("", broker_->start());
	std::vector<Message> after;
	ASSERT_EQ("", consume(broker_->bootstrap(), cs, &after));
	ASSERT_EQ(before.size(), after.size()) << broker_->log_tail();
	for (size_t i = 0; i < after.size(); i++) {
		ASSERT_EQ(before[i].offset, after[i].offset);
		ASSERT_EQ(before[i].key, after[i].key) << "offset " << after[i].offset;
		ASSERT_EQ(before[i].value, after[i].value) << "offset " << after[i].offset;
	}
}

/* Every line of `part` is in `whole` (both in offset order). */
void expect_subset(const std::vector<std::string> &part,
		   const std::vector<std::string> &whole)
{
	size_t j = 0;
	for (auto &l : part) {
		while (j < whole.size() && whole[j] != l)
			j++;
		ASSERT_LT(j, whole.size()) << "kmirrord does not serve: " << l;
	}
}

/* kmirrord mirrors the topic as it is written, keeps going while the
 * cleaner compacts the source (its copy keeps every record it fetched),
 * is stopped, and restarts after the source cleaned past its log end:
 * the fetch offset it resumes at is gone from the source. */
TEST_F(KafkaCompact, MirrorKeepsWhatItFetchedBeforeCompaction)
{
	ASSERT_EQ("", broker_->create_topic("cmq", 1, kCompacted));
	Daemon d = daemon_for("cmq");
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(write_round("cmq", 1500, 30, 2));
	int64_t e1 = -1, e2 = -1, e3 = -1;
	ASSERT_NO_FATAL_FAILURE(caught_up(d, "cmq", &e1));
	ASSERT_NO_FATAL_FAILURE(wait_cleaned("cmq"));
	ASSERT_EQ("", verifiable_produce(broker_->bootstrap(), "cmq", 600, 30, 24));
	ASSERT_NO_FATAL_FAILURE(caught_up(d, "cmq", &e2));
	ChildResult res;
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ(0, res.exit_code) << res.describe();
	std::string ours = dir_.path() + "/cmq-0", theirs = broker_->partition_dir("cmq", 0);
	Cleaned kept = cleaned_shape(ours);
	EXPECT_EQ(0, kept.gaps) << "kmirror compacted its copy";
	EXPECT_EQ(0, kept.horizons);

	/* every key overwritten again, so the cleaner drops e2 itself */
	ASSERT_EQ("", verifiable_produce(broker_->bootstrap(), "cmq", 1500, 30, 25));
	ASSERT_NO_FATAL_FAILURE(wait_cleaned("cmq"));
	Side src;
	ASSERT_EQ("", read_side(theirs, &src));
	for (auto &b : src.batches)
		ASSERT_FALSE(b.base <= e2 && e2 <= b.last && b.count == b.last - b.base + 1)
			<< "offset " << e2 << " is still a record on the source";
	ASSERT_EQ("", d.start());
	ASSERT_NO_FATAL_FAILURE(caught_up(d, "cmq", &e3));
	ASSERT_GT(e3, e2);

	/* what the source still serves, kmirrord serves at the same offsets;
	 * before e2 it serves more: what the cleaner has dropped since */
	std::vector<Message> want;
	ConsumeSpec cs;
	cs.topic = "cmq";
	ASSERT_EQ("", consume(broker_->bootstrap(), cs, &want));
	std::string on_kafka, on_ours;
	ASSERT_EQ("", console_consume(broker_->bootstrap(), "cmq", 0, (int64_t)want.size(),
				      "read_uncommitted", &on_kafka));
	int64_t all_ours = kept.records - kept.control +
			   (int64_t)std::count_if(want.begin(), want.end(),
						  [&](const Message &m) { return m.offset >= e2; });
	ASSERT_EQ("", console_consume(d.bootstrap(), "cmq", 0, all_ours, "read_uncommitted",
				      &on_ours));
	std::vector<std::string> a = lines_of(on_ours), b = lines_of(on_kafka);
	ASSERT_GT(a.size(), b.size());
	ASSERT_NO_FATAL_FAILURE(expect_subset(b, a));
	ASSERT_EQ("", d.stop(30000, &res));
	ASSERT_EQ(0, res.exit_code) << res.describe();
	ASSERT_EQ("", broker_->stop());
	int mapped = 0;
	ASSERT_NO_FATAL_FAILURE(expect_identical_from(ours, theirs, e2, &mapped));
	std::string err;
	deep_records(ours, &err);
	EXPECT_EQ("", err);
	expect_indexes_sane(ours);
}

} // namespace
