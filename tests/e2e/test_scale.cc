/* Goal: kmirrord mirrors 2,000 partitions end to end with memory and disk
 * bounded per partition (issue 17), and restarts them.
 *  - Content: every partition of the mirror ends where the source's does,
 *    and each partition's .log is byte-identical to the source's.
 *  - Memory: the mirror's resident memory (status 'resources', VmRSS)
 *    minus that of a kmirrord mirroring one partition of the same source,
 *    over the 1,999 partitions more, is at most the 64 KiB each
 *    (see kMemPerPart; not asserted under ASan, whose shadow and
 *    quarantine scale with what is touched). Both are measured idle: once
 *    status says no log holds write state (logs_awake 0, KM_LOG_IDLE_MS
 *    after the last write).
 *  - Disk: du of the mirror's data.dir minus the bytes of its .log files is
 *    at most 1 MiB per partition (the target for an idle one; it
 *    was ~70 MB: a 64 MiB fallocate step and 2 x 3 MiB of allocated
 *    indexes), measured while it runs.
 *  - Open files: RLIMIT_NOFILE raised to the hard limit, reported in status
 *    with what the partitions need.
 *  - Metrics: kmirrorctl metrics carries every partition's series (a
 *    reply of megabytes).
 *  - Work follows events (issue 17): while 1,999 partitions are idle and
 *    records stream to one, the workers' visits at their ticks
 *    (kmirror_worker_partition_visits_total) stay within one per tick for
 *    the busy one plus one per idle partition a minute (the timer heap's
 *    backstop), where a sweep of every partition once a second makes
 *    2,000 a second and a scan at every 5 ms tick 400,000;
 *    the fetch sessions' stall watchdog makes no pass over the members
 *    (kmirror_fetch_watchdog_passes_total), and the busy partition is
 *    mirrored to the source's end, durable.
 *  - Restart: after a clean stop and after kill -9, every partition is
 *    MIRRORING again at the source's end, each within a generous bound;
 *    the times are printed.
 *  - Open files under a lower limit: a second mirror run under prlimit
 *    --nofile=4000 (and without CAP_SYS_RESOURCE, so it cannot raise it),
 *    where the 2,000 partitions would hold ~8,000 files, catches up with
 *    every .log byte-identical, holds fewer files than the limit, reports
 *    logs whose files it closed (the cache of open files was used), and
 *    does the same again after a clean restart under that limit.
 *  - One worker, 2,000 partitions of one broker (issue 17): the mirror
 *    runs workers=1, so it starts (and restarts) more partitions than a
 *    worker's message ring holds (1,024: the opens past it waited 10
 *    minutes, then failed), and its worker holds as many fetch sessions
 *    (connections, each with a KIP-227 session id) to the broker as 2,000
 *    over the 1,024 partitions one Fetch asks: one session of 2,000 asked
 *    the first 1,024 and the others waited their turn one per Fetch.
 * Method: kmirrord child processes (daemon.h): the source with
 * local.topics=s:1500,u:500,one:1, records produced to every partition by
 * one librdkafka producer; the mirror with topics=s,u; kmirrorctl status for
 * every figure; polls with deadlines, no sleeps. */
#include <librdkafka/rdkafka.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"

using namespace kmtest;

namespace {

/* Two topics, s of 1,500 partitions: past the 1,024 that local.topics
 * took at most per topic before issue 17 lifted it (the source refused to
 * start), so a topic of more is created, served and mirrored here. */
const char *const kTopics[] = { "s", "u" };
constexpr int kPerTopic[] = { 1500, 500 };
constexpr int kParts = kPerTopic[0] + kPerTopic[1];
constexpr int kRecords = 3; /* per partition */
/* A line per partition at INFO is 2,000 lines of nothing to look at. */
const char *const kQuiet = "log.level=warn";
/* meson test sets MALLOC_PERTURB_, which makes glibc write every block it
 * hands out (~750 MB resident for one partition's kmirrord instead of
 * ~175 MB): the memory measured is kmirrord's as it runs, without it. */
const std::vector<std::string> kNoPerturb = { "MALLOC_PERTURB_=0" };
/* The target, 64 KiB for an idle partition, is the bound: a
 * mirrored one with 3 records measured ~44 KiB here once a topic's
 * config store was one per topic and the log's struct touched 4 pages
 * (62-78 KiB before); 64.5 KiB with direct I/O (the tail cache's 2 MiB
 * registered buffers held warm, the tail block), then 42.7 KB once an
 * idle log gave its write state back and touched 4 pages of its mapping
 * (16 KiB), 33.4 KiB once the fetcher touched 2 pages (8 KiB) instead
 * of 4 (docs/bench.md, 'Memory per idle partition, by part'). It fails
 * for a table or buffer written whole per partition (the producer
 * table's 1.6 MB, a writer's 230 KiB entry ring, a config store per
 * partition). The figure is printed. */
constexpr int64_t kMemTarget = 64 * 1024;
constexpr int64_t kMemPerPart = kMemTarget;
constexpr int64_t kDiskPerPart = 1 << 20;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

/* One producer, kRecords records to each of n partitions of topic. */
std::string produce_all(const std::string &bootstrap, const char *topic, int n)
{
	char err[512];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap.c_str(), err,
			      sizeof(err)) != RD_KAFKA_CONF_OK ||
	    rd_kafka_conf_set(conf, "linger.ms", "20", err, sizeof(err)) !=
		    RD_KAFKA_CONF_OK)
		return err;
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (rk == nullptr)
		return err;
	std::string out;
	for (int p = 0; p < n && out.empty(); p++)
		for (int i = 0; i < kRecords; i++) {
			std::string v = "p" + std::to_string(p) + "-" + std::to_string(i);
			rd_kafka_resp_err_t e = rd_kafka_producev(
				rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(p),
				RD_KAFKA_V_VALUE(v.data(), v.size()),
				RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
			if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
				rd_kafka_poll(rk, 100);
				i--;
			} else if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
				out = rd_kafka_err2str(e);
				break;
			}
		}
	if (out.empty() && rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR)
		out = "flush timed out";
	if (out.empty() && rd_kafka_outq_len(rk) != 0)
		out = "records left unsent";
	rd_kafka_destroy(rk);
	return out;
}

/* status --json's "resources" object, one integer of it; -1 if absent. */
int64_t resource(const Daemon &d, const char *key)
{
	ChildResult r;
	if (ctl(d, { "status", "--json" }, &r) != "")
		return -1;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	json_t *v = json_object_get(json_object_get(root, "resources"), key);
	int64_t n = v && json_is_boolean(v) ? (int64_t)json_is_true(v)
		  : v ? (int64_t)json_integer_value(v) : -1;
	json_decref(root);
	return n;
}

/* Blocks used under dir and the bytes of its .log files. */
void disk_use(const std::string &dir, uint64_t *blocks, uint64_t *logs)
{
	ChildResult r = run_command({ "du", "-s", "-B1", dir }, 60000);
	*blocks = std::strtoull(r.out.c_str(), nullptr, 10);
	r = run_command({ "sh", "-c", "find '" + dir +
				      "' -name '*.log' -printf '%s\\n' | "
				      "awk '{s+=$1} END {print s+0}'" },
			60000);
	*logs = std::strtoull(r.out.c_str(), nullptr, 10);
}

/* A .log's bytes less the zeros it ends in: an open segment written with
 * direct I/O ends in up to a block of zeros, which a clean close cuts, so
 * two copies of one log compare equal only without them (a record's last
 * byte may be a zero too: both lose it alike). */
std::string without_padding(std::string b)
{
	size_t keep = b.find_last_not_of('\0');
	b.resize(keep == std::string::npos ? 0 : keep + 1);
	return b;
}

/* The sum over the workers of a kmirrord-wide counter of `kmirrorctl
 * metrics`; -1 if absent. */
int64_t metric_sum(const Daemon &d, const std::string &name)
{
	ChildResult m;
	if (ctl(d, { "metrics" }, &m) != "")
		return -1;
	std::regex series("\n" + name + "\\{[^}]*\\} ([0-9]+)");
	int64_t sum = -1;
	for (auto it = std::sregex_iterator(m.out.begin(), m.out.end(), series);
	     it != std::sregex_iterator(); ++it)
		sum = (sum < 0 ? 0 : sum) + std::stoll((*it)[1].str());
	return sum;
}

/* status --json's connections to peer, and how many of them hold a
 * KIP-227 fetch session. */
std::string source_sessions(const Daemon &d, const std::string &peer, int *conns,
			    int *sessions)
{
	ChildResult r;
	std::string e = ctl(d, { "status", "--json" }, &r);
	if (!e.empty())
		return e;
	json_t *root = json_loads(r.out.c_str(), 0, nullptr);
	json_t *list = json_object_get(root, "connections");
	*conns = *sessions = 0;
	for (size_t i = 0; i < json_array_size(list); i++) {
		json_t *c = json_array_get(list, i);
		const char *p = json_string_value(json_object_get(c, "peer"));
		if (p == nullptr || peer != p)
			continue;
		(*conns)++;
		*sessions += json_integer_value(json_object_get(c, "fetch_session_id")) != 0;
	}
	json_decref(root);
	return root == nullptr ? "status --json: not JSON" : "";
}

/* Every mirrored partition MIRRORING at the source's end. */
std::string wait_caught_up(Daemon &b, const std::map<std::string, PartStatus> &src,
			   int timeout_ms)
{
	return b.wait_status(
		[&](const std::map<std::string, PartStatus> &st) {
			int n = 0;
			for (auto &[k, s] : st)
				n += k.rfind("one:", 0) != 0 &&
				     s.state == "MIRRORING" &&
				     s.leo == src.at(k).leo;
			return n == kParts;
		},
		timeout_ms);
}

class Scale : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		ta_ = new TempDir("km-scale-a");
		a_ = new Daemon(ta_->path(),
				{ "local.topics=s:" + std::to_string(kPerTopic[0]) +
					  ",u:" + std::to_string(kPerTopic[1]) + ",one:1",
				  kQuiet });
		setup_ = a_->start(120000);
		for (int t = 0; t < 2; t++)
			if (setup_.empty())
				setup_ = produce_all(a_->bootstrap(), kTopics[t],
						     kPerTopic[t]);
		if (setup_.empty())
			setup_ = produce_all(a_->bootstrap(), "one", 1);
		if (setup_.empty())
			setup_ = a_->status(&src_);
	}
	static void TearDownTestSuite()
	{
		ChildResult r;
		if (a_ != nullptr)
			(void)a_->stop(60000, &r);
		delete a_;
		delete ta_;
	}
	void SetUp() override { ASSERT_EQ("", setup_); }
	static TempDir *ta_;
	static Daemon *a_;
	static std::string setup_;
	static std::map<std::string, PartStatus> src_;
};
TempDir *Scale::ta_;
Daemon *Scale::a_;
std::string Scale::setup_;
std::map<std::string, PartStatus> Scale::src_;

/* An idle partition's memory is measured once it is idle: KM_LOG_IDLE_MS
 * (5 s) after its last write a log gives back its write state (its tail
 * cache's 2 MiB write buffers, the tail block, the write ring), which
 * status counts as logs_awake. -1 if that did not come. */
int64_t idle_resident(const Daemon &d)
{
	if (!poll_until([&] { return resource(d, "logs_awake") == 0; }, 60000))
		return -1;
	return resource(d, "resident_bytes");
}

/* The fixed cost: one mirrored partition of the same source. */
int64_t one_partition_resident(const std::string &source)
{
	TempDir tc("km-scale-c");
	Daemon c(tc.path(), { "source.bootstrap.servers=" + source, "topics=one",
			      "workers=1", kQuiet });
	c.set_env(kNoPerturb);
	if (c.start(60000) != "")
		return -1;
	std::string e = c.wait_status(
		[](const std::map<std::string, PartStatus> &st) {
			return st.size() == 1 && st.begin()->second.state == "MIRRORING" &&
			       st.begin()->second.leo == kRecords;
		},
		60000);
	int64_t rss = e.empty() ? idle_resident(c) : -1;
	ChildResult r;
	(void)c.stop(60000, &r);
	return rss;
}

TEST_F(Scale, TwoThousandPartitionsMirrorWithBoundedMemoryAndDisk)
{
	for (int ti = 0; ti < 2; ti++)
		for (int p = 0; p < kPerTopic[ti]; p++)
			ASSERT_EQ(kRecords,
				  src_.at(kTopics[ti] + (":" + std::to_string(p))).leo)
				<< kTopics[ti] << p;
	int64_t base = one_partition_resident(a_->bootstrap());
	ASSERT_GT(base, 0);

	TempDir tb("km-scale-b");
	Daemon b(tb.path(), { "source.bootstrap.servers=" + a_->bootstrap(),
			      "topics=s,u", "workers=1", kQuiet });
	b.set_env(kNoPerturb);
	int64_t t0 = now_ms();
	ASSERT_EQ("", b.start(120000));
	ASSERT_EQ("", wait_caught_up(b, src_, 300000));
	int64_t first_ms = now_ms() - t0;

	/* One worker, one broker: a session per 1,024 partitions. */
	int to_source = 0, with_session = 0;
	ASSERT_EQ("", source_sessions(b, a_->bootstrap(), &to_source, &with_session));
	printf("[scale] one worker: %d connections to the source for %d "
	       "partitions, %d with a fetch session\n", to_source, kParts,
	       with_session);
	EXPECT_EQ((kParts + 1023) / 1024, to_source);
	EXPECT_EQ(to_source, with_session);

	/* Open files: raised to the hard limit, enough for these: every file
	 * held (nothing shed under the budget), none reopened. Needed: each
	 * partition's .log and its O_DIRECT twin (its directory and indexes
	 * can be shed). */
	struct rlimit rl;
	ASSERT_EQ(0, getrlimit(RLIMIT_NOFILE, &rl));
	EXPECT_EQ((int64_t)rl.rlim_max, resource(b, "open_files_limit"));
	EXPECT_GE(resource(b, "open_files_needed"), 2 * kParts);
	EXPECT_GE(resource(b, "open_files"), 4 * kParts);
	EXPECT_EQ(0, resource(b, "open_files_short"));
	EXPECT_EQ(0, resource(b, "log_files_reopens"));

	int64_t rss = idle_resident(b);
	ASSERT_GT(rss, 0) << "logs_awake never 0: " << resource(b, "logs_awake");
	int64_t per_part = (rss - base) / (kParts - 1);
	uint64_t blocks, logs;
	disk_use(tb.path(), &blocks, &logs);
	int64_t disk_per_part = (int64_t)(blocks - logs) / kParts;
	printf("[scale] %d partitions: caught up %lld ms after start; resident "
	       "%lld bytes, one partition's kmirrord %lld: %lld bytes per "
	       "partition; disk %llu bytes for %llu of .log: %lld per partition\n",
	       kParts, (long long)first_ms, (long long)rss, (long long)base,
	       (long long)per_part, (unsigned long long)blocks,
	       (unsigned long long)logs, (long long)disk_per_part);
	printf("[scale] memory target %lld bytes per partition: %s\n",
	       (long long)kMemTarget, per_part <= kMemTarget ? "met" : "not met");
	if (kAsan)
		printf("[scale] ASan build: the memory bound is not asserted\n");
	else
		EXPECT_LE(per_part, kMemPerPart);
	EXPECT_LE(disk_per_part, kDiskPerPart);

	/* Metrics of every partition through the control socket: megabytes
	 * at this scale (it was refused past 1 MiB, 'client too slow'). */
	ChildResult m;
	ASSERT_EQ("", ctl(b, { "metrics" }, &m)) << m.err;
	std::regex leo_series("\nkmirror_partition_log_end_offset\\{[^}]*topic=\"[su]\"");
	EXPECT_EQ(kParts, (int)std::distance(std::sregex_iterator(m.out.begin(), m.out.end(),
								  leo_series),
					     std::sregex_iterator()))
		<< m.out.size() << " bytes of metrics";

	/* Content: byte-identical logs. */
	for (int ti = 0; ti < 2; ti++)
		for (int p = 0; p < kPerTopic[ti]; p++) {
			const char *t = kTopics[ti];
			std::string f = "/" + std::string(t) + "-" + std::to_string(p) +
					"/00000000000000000000.log";
			std::string ea, eb;
			std::string da = without_padding(read_file(ta_->path() + f, &ea));
			std::string db = without_padding(read_file(tb.path() + f, &eb));
			ASSERT_EQ("", ea + eb);
			ASSERT_FALSE(da.empty()) << f;
			ASSERT_TRUE(da == db) << f << ": the mirror's log differs";
		}

	/* Idle partitions cost nothing per tick: records to s:0 alone. */
	int64_t v0 = metric_sum(b, "kmirror_worker_partition_visits_total");
	int64_t w0 = metric_sum(b, "kmirror_fetch_watchdog_passes_total");
	ASSERT_GE(v0, 0);
	ASSERT_GE(w0, 0);
	t0 = now_ms();
	for (int round = 0; round < 20; round++)
		ASSERT_EQ("", produce_all(a_->bootstrap(), "s", 1));
	ASSERT_EQ("", a_->status(&src_));
	int64_t busy_end = src_.at("s:0").leo;
	ASSERT_EQ(21 * kRecords, busy_end);
	ASSERT_EQ("", b.wait_status(
		[&](const std::map<std::string, PartStatus> &st) {
			return st.at("s:0").leo == busy_end && st.at("s:0").hw == busy_end;
		},
		60000));
	int64_t v1 = metric_sum(b, "kmirror_worker_partition_visits_total");
	int64_t w1 = metric_sum(b, "kmirror_fetch_watchdog_passes_total");
	double secs = (double)(now_ms() - t0) / 1000.0;
	/* The busy one: each 5 ms tick (at most), one second's slack; an idle
	 * one only at a deadline - here its backstop, once a
	 * KM_WORKER_IDLE_MS (60 s), which may fall in the window. A sweep of
	 * every partition once a second (as it was) makes kParts a second. */
	double bound = 200.0 * (secs + 1.0) + kParts * (1.0 + secs / 60.0);
	printf("[scale] %lld partition visits and %lld watchdog passes in %.1f s "
	       "with one partition of %d busy (bound %.0f; a scan per tick: "
	       "%.0f)\n", (long long)(v1 - v0), (long long)(w1 - w0), secs, kParts,
	       bound, kParts * 200.0 * secs);
	EXPECT_LE((double)(v1 - v0), bound);
	EXPECT_GE(v1 - v0, 1) << "the busy partition was visited";
	EXPECT_LE(w1 - w0, 10);

	/* Restart after a clean stop, then after kill -9. */
	ChildResult r;
	ASSERT_EQ("", b.stop(120000, &r));
	ASSERT_EQ(0, r.exit_code) << r.describe();
	t0 = now_ms();
	ASSERT_EQ("", b.start(120000));
	ASSERT_EQ("", wait_caught_up(b, src_, 120000));
	int64_t clean_ms = now_ms() - t0;
	ASSERT_EQ("", b.kill9());
	t0 = now_ms();
	ASSERT_EQ("", b.start(120000));
	ASSERT_EQ("", wait_caught_up(b, src_, 120000));
	int64_t crash_ms = now_ms() - t0;
	printf("[scale] restart to all %d MIRRORING: %lld ms after a clean stop, "
	       "%lld ms after kill -9\n", kParts, (long long)clean_ms,
	       (long long)crash_ms);
	ASSERT_EQ("", b.stop(120000, &r));
}

/* Whether this process may raise its hard limits (CAP_SYS_RESOURCE in
 * its effective set): a kmirrord it starts could then undo a lowered one. */
bool can_raise_limits()
{
	std::string err, st = read_file("/proc/self/status", &err);
	size_t at = st.find("CapEff:");
	if (at == std::string::npos)
		return false;
	unsigned long long eff = std::strtoull(st.c_str() + at + 7, nullptr, 16);
	return (eff >> 24) & 1; /* CAP_SYS_RESOURCE */
}

TEST_F(Scale, MirrorsWithAnOpenFileLimitBelowWhatThePartitionsHold)
{
	/* 2,000 partitions hold ~8,000 files; the sockets' share is about
	 * 2,336 of this limit, which leaves the logs ~1,660: a fifth. */
	constexpr int kLimit = 4000;
	std::vector<std::string> wrap = { "prlimit", "--nofile=" +
					  std::to_string(kLimit) + ":" +
					  std::to_string(kLimit) };
	if (can_raise_limits())
		wrap.insert(wrap.end(), { "setpriv", "--bounding-set=-sys_resource" });

	TempDir tb("km-scale-d");
	Daemon b(tb.path(), { "source.bootstrap.servers=" + a_->bootstrap(),
			      "topics=s,u", kQuiet });
	b.set_wrapper(wrap);
	for (int round = 0; round < 2; round++) {
		int64_t t0 = now_ms();
		ASSERT_EQ("", b.start(120000));
		ASSERT_EQ("", wait_caught_up(b, src_, 300000)) << "round " << round;
		int64_t ms = now_ms() - t0;
		EXPECT_EQ(kLimit, resource(b, "open_files_limit"));
		EXPECT_EQ(1, resource(b, "open_files_short"));
		int64_t open = resource(b, "open_files");
		EXPECT_LT(open, kLimit);
		int64_t closed = resource(b, "logs_with_files_closed");
		EXPECT_GT(closed, 0) << "the cache was not needed";
		printf("[scale] RLIMIT_NOFILE %d (round %d: %s): all %d "
		       "MIRRORING in %lld ms; %lld files open, %lld logs' "
		       "files closed, %lld reopens\n", kLimit, round,
		       round ? "after a clean restart" : "first start", kParts,
		       (long long)ms, (long long)open, (long long)closed,
		       (long long)resource(b, "log_files_reopens"));
		for (int ti = 0; ti < 2; ti++)
			for (int p = 0; p < kPerTopic[ti]; p++) {
				const char *t = kTopics[ti];
				std::string f = "/" + std::string(t) + "-" +
						std::to_string(p) +
						"/00000000000000000000.log";
				std::string ea, eb;
				std::string da = without_padding(read_file(ta_->path() + f, &ea));
				std::string db = without_padding(read_file(tb.path() + f, &eb));
				ASSERT_EQ("", ea + eb);
				ASSERT_TRUE(!da.empty() && da == db)
					<< f << ": the mirror's log differs ("
					<< db.size() << " bytes, the source's "
					<< da.size() << ", first difference at "
					<< std::mismatch(da.begin(), da.begin() +
							 std::min(da.size(), db.size()),
							 db.begin()).first - da.begin()
					<< ")";
			}
		ChildResult r;
		ASSERT_EQ("", b.stop(120000, &r));
		ASSERT_EQ(0, r.exit_code) << r.describe();
	}
}

} // namespace
