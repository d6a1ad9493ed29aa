/* kmirrord against a hostile source (the "Hostile source"): a fake
 * broker (fake_source.h) that sends garbage, frames with huge or negative
 * size fields, half a response then a close, the wrong correlation id, a
 * batch whose CRC no longer matches (once, or every time), garbage to the
 * startup discovery, and a stall mid-response followed by kill -9.
 *
 * Method: kmirrord runs as a child process (daemon.h) mirroring the fake's
 * one topic of two partitions, each 24 batches of 5 records built with
 * km_records_build and served at most 4 batches per Fetch, so every
 * partition takes several Fetches and a fault lands mid-stream, after some
 * data is on disk. Both partitions ride on one connection (one fetch
 * session per source broker), named together in each Fetch. A fault hook
 * picks the request to spoil (the second Fetch naming partition 0, say);
 * a CRC fault names the partition whose batch it spoils. Each test then waits on `kmirrorctl status` with a
 * deadline (never a fixed sleep) and checks, on the outcome:
 *  - kmirrord is alive (status answers) and, at the end, exits 0 on
 *    SIGTERM ("stopped cleanly"; a sanitizer report would fail the exit);
 *  - what the partition did (reconnects, corrupt count, FAILED reason);
 *  - the content: a librdkafka consumer (check.crcs=true) reads from
 *    kmirrord exactly the records served, and kmirror-dump-log shows
 *    exactly the batches served below the log end, each `isvalid: true`:
 *    nothing bad is persisted;
 *  - the log (kmirrord's stderr) has a WARN or ERROR line naming the
 *    problem (an EXPECT, so that the content checks still run). */
#include <dirent.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <regex>
#include <set>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/fake_source.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

constexpr int kParts = 2, kBatches = 24, kRecords = 5;
/* dataplane/fetch/fetcher.h KM_FETCHER_CORRUPT_MAX: rejections of one batch in a
 * row before the partition is FAILED. */
constexpr int kCorruptMax = 5;
constexpr int kWaitMs = 20000;

using StatusMap = std::map<std::string, PartStatus>;

std::string key_of(int p)
{
	return "hostile:" + std::to_string(p);
}

class Hostile : public ::testing::Test {
protected:
	void SetUp() override
	{
		FakeSourceConfig cfg;

		ASSERT_EQ("", dir_.error());
		want_.resize(kParts);
		for (int p = 0; p < kParts; p++) {
			cfg.partitions.push_back(
				build_batches(p, kBatches, kRecords, &want_[(size_t)p]));
			ASSERT_EQ((size_t)kBatches, cfg.partitions.back().size());
			batches_.push_back(cfg.partitions.back());
		}
		cfg.max_batches_per_fetch = 4;
		fake_ = std::make_unique<FakeSource>(cfg);
		ASSERT_EQ("", fake_->start());
	}

	void TearDown() override
	{
		if (fake_) {
			EXPECT_EQ("", fake_->error()) << "the fake's own protocol error";
		}
	}

	std::vector<std::string> sets()
	{
		return { "source.bootstrap.servers=" + fake_->bootstrap(),
			 "topics=" + fake_->topic() };
	}

	int64_t end(int p) const { return fake_->end_offset(p); }

	static bool caught_up(const StatusMap &st, int p, int64_t to)
	{
		auto it = st.find(key_of(p));
		return it != st.end() && it->second.leo == to && it->second.hw == to;
	}

	static bool any_failed(const StatusMap &st)
	{
		for (auto &[k, v] : st)
			if (v.state == "FAILED")
				return true;
		return false;
	}

	/* Until every partition has mirrored the whole source and `more`
	 * holds, or one of them FAILED (then the caller's state check says
	 * why, without waiting out the deadline). */
	template <class F> std::string wait_mirrored(Daemon &d, F more)
	{
		return d.wait_status(
			[&](const StatusMap &st) {
				if (any_failed(st))
					return true;
				for (int p = 0; p < kParts; p++)
					if (!caught_up(st, p, end(p)))
						return false;
				return more(st);
			},
			kWaitMs);
	}

	std::string wait_mirrored(Daemon &d)
	{
		return wait_mirrored(d, [](const StatusMap &) { return true; });
	}

	/* kmirrord's stderr so far (a short read_line drains the pipe: it
	 * prints nothing on stdout; 5 ms, as it counts whole milliseconds
	 * left and must poll once). */
	static std::string log_of(Daemon &d)
	{
		std::string line;

		(void)d.child().read_line(5, &line);
		return d.child().stderr_so_far();
	}

	/* A WARN or ERROR line matching `what` (case-insensitive). */
	static bool has_problem_line(const std::string &log, const std::string &what)
	{
		std::regex re("^\\S+ (WARN|ERROR) .*(" + what + ")",
			      std::regex::icase);
		size_t at = 0;

		while (at < log.size()) {
			size_t nl = log.find('\n', at);
			std::string line = log.substr(at, nl == std::string::npos
								  ? std::string::npos
								  : nl - at);
			if (std::regex_search(line, re))
				return true;
			if (nl == std::string::npos)
				break;
			at = nl + 1;
		}
		return false;
	}

	/* The records of partition p below `to`, read back from kmirrord by a
	 * librdkafka consumer verifying CRCs, equal the ones served. */
	void expect_content(const Daemon &d, int p, int64_t to)
	{
		std::vector<Message> got;
		ConsumeSpec cs;
		size_t n = 0;

		cs.topic = fake_->topic();
		cs.partition = p;
		cs.to = to;
		cs.check_crcs = true;
		ASSERT_EQ("", consume(d.bootstrap(), cs, &got)) << "partition " << p;
		for (const SourceRecord &r : want_[(size_t)p])
			n += r.offset < to;
		ASSERT_EQ(n, got.size()) << "partition " << p;
		for (size_t i = 0; i < n; i++) {
			const SourceRecord &w = want_[(size_t)p][i];
			ASSERT_EQ(w.offset, got[i].offset) << "partition " << p;
			EXPECT_EQ(w.key, got[i].key) << "offset " << w.offset;
			EXPECT_EQ(w.value, got[i].value) << "offset " << w.offset;
			EXPECT_EQ(w.headers, got[i].headers) << "offset " << w.offset;
			EXPECT_EQ(w.timestamp, got[i].timestamp) << "offset " << w.offset;
		}
	}

	std::vector<Dumped> dump(int p, std::string *invalid_tail)
	{
		return dump_batches(dir_.path() + "/hostile-" + std::to_string(p),
				    invalid_tail);
	}

	/* The log of partition p holds exactly the source's batches below
	 * `to`, each with a valid CRC, and nothing else. */
	void expect_dump(int p, int64_t to)
	{
		std::string tail;
		std::vector<Dumped> got = dump(p, &tail);
		std::vector<const std::string *> want;

		EXPECT_EQ("", tail) << "partition " << p;
		for (const std::string &b : batches_[(size_t)p])
			if (batch_base_offset(b) < to)
				want.push_back(&b);
		ASSERT_EQ(want.size(), got.size()) << "partition " << p;
		for (size_t i = 0; i < got.size(); i++) {
			EXPECT_EQ(batch_base_offset(*want[i]), got[i].base);
			EXPECT_EQ(batch_last_offset(*want[i]), got[i].last);
			EXPECT_TRUE(got[i].valid)
				<< "partition " << p << " batch at " << got[i].base;
		}
	}

	/* SIGTERM: exit 0 and "stopped cleanly" (under the sanitizer build a
	 * memory error or leak report would make the exit non-zero). */
	void expect_clean_stop(Daemon &d)
	{
		ChildResult res;

		ASSERT_EQ("", d.stop(30000, &res));
		EXPECT_EQ(0, res.exit_code) << res.describe();
		EXPECT_NE(std::string::npos, res.err.find("stopped cleanly"))
			<< res.err;
	}

	std::unique_ptr<FakeSource> fake_;
	std::vector<std::vector<SourceRecord>> want_;
	std::vector<std::vector<std::string>> batches_;
	TempDir dir_{ "km-hostile" };
};

/* ---- one fault on partition 0's second Fetch ---- */

struct FaultCase {
	Fault fault;
	const char *log_re; /* what the WARN/ERROR line must name */
};

void PrintTo(const FaultCase &c, std::ostream *os)
{
	*os << fault_name(c.fault);
}

class HostileFetch : public Hostile,
		     public ::testing::WithParamInterface<FaultCase> {};

/* The partition survives the fault: it reconnects and then mirrors all of
 * the source; partition 1 is untouched. Whatever the outcome, what is in
 * the log is good (checked first, so that a FAILED partition still shows
 * that nothing bad was persisted). */
TEST_P(HostileFetch, ReconnectsAndMirrorsEverything)
{
	const FaultCase fc = GetParam();
	fake_->set_fault_hook([fc](const FakeRequest &rq) {
		FaultAction a;
		const FakeRequest::Part *p0 = rq.part(0);
		if (rq.api_key == 1 && p0 && p0->count == 2)
			a.fault = fc.fault;
		return a;
	});
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_mirrored(d, [](const StatusMap &st) {
		return st.at(key_of(0)).reconnects >= 1;
	}));
	/* A FAILED partition's high watermark catches up with its log end
	 * within flush.ms. */
	ASSERT_EQ("", d.wait_status(
			      [](const StatusMap &st) {
				      return st.count(key_of(0)) &&
					     st.at(key_of(0)).hw == st.at(key_of(0)).leo;
			      },
			      kWaitMs));

	StatusMap st;
	ASSERT_EQ("", d.status(&st)) << "kmirrord must still answer";
	const PartStatus p0 = st[key_of(0)];
	EXPECT_EQ(1u, fake_->faults_applied(fc.fault));
	EXPECT_TRUE(has_problem_line(log_of(d), fc.log_re))
		<< "no WARN/ERROR line naming /" << fc.log_re << "/ for "
		<< fault_name(fc.fault) << "; log:\n" << log_of(d);
	EXPECT_EQ(0, p0.corrupt);
	EXPECT_EQ("MIRRORING", st[key_of(1)].state) << st[key_of(1)].reason;
	expect_content(d, 1, end(1));
	expect_dump(1, end(1));
	expect_content(d, 0, p0.hw);
	expect_dump(0, p0.hw);

	EXPECT_EQ("MIRRORING", p0.state)
		<< fault_name(fc.fault) << ": " << p0.reason;
	EXPECT_EQ(end(0), p0.leo) << "partition 0 mirrored all of the source";
	EXPECT_GE(p0.reconnects, 1);
	/* Both partitions share the fetch session of the fake's one broker
	 * (one connection per source broker per worker). */
	EXPECT_GE(fake_->connections(), 3u)
		<< "discovery + the broker's session + the reconnect";
	expect_clean_stop(d);
}

INSTANTIATE_TEST_SUITE_P(
	Faults, HostileFetch,
	::testing::Values(
		FaultCase{ Fault::kGarbage, "Fetch" },
		FaultCase{ Fault::kHugeSize, "frame|size|exceeds|larger" },
		FaultCase{ Fault::kNegativeSize, "negative" },
		FaultCase{ Fault::kTruncateClose,
			   "clos|disconnect|lost|reset|EOF" },
		FaultCase{ Fault::kWrongCorrelation, "correlation" }),
	[](const ::testing::TestParamInfo<FaultCase> &i) {
		std::string n = fault_name(i.param.fault);
		for (char &c : n)
			if (c == '-')
				c = '_';
		return n;
	});

/* ---- bad CRCs ---- */

/* One corrupt delivery of the batch holding offset 32 (third of the
 * answer from offset 20): the two batches before it are kept, it is
 * rejected, counted and fetched again from 30, and the log ends up equal to
 * the source. */
TEST_F(Hostile, BadCrcOnceIsRejectedCountedAndRefetched)
{
	/* Partition 0's FetchOffsets. The hook runs on the fake's thread and
	 * may outlive this scope by a request: it shares, never borrows. */
	struct Seen {
		std::mutex mu;
		std::vector<int64_t> offsets;
	};
	auto seen = std::make_shared<Seen>();
	FakeSource *fake = fake_.get();
	fake_->set_fault_hook([seen, fake](const FakeRequest &rq) {
		FaultAction a;
		const FakeRequest::Part *p0 = rq.part(0);
		if (rq.api_key != 1 || p0 == nullptr)
			return a;
		std::lock_guard<std::mutex> g(seen->mu);
		seen->offsets.push_back(p0->offset);
		if (fake->faults_applied(Fault::kBadCrc) == 0) {
			a.fault = Fault::kBadCrc;
			a.crc_offset = 32;
			a.crc_partition = 0;
		}
		return a;
	});
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_mirrored(d));

	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	ASSERT_EQ("MIRRORING", st[key_of(0)].state) << st[key_of(0)].reason;
	EXPECT_EQ(1u, fake_->faults_applied(Fault::kBadCrc));
	EXPECT_EQ(1, st[key_of(0)].corrupt);
	EXPECT_EQ(0, st[key_of(1)].corrupt);
	{
		std::lock_guard<std::mutex> g(seen->mu);
		std::vector<int64_t> head(
			seen->offsets.begin(),
			seen->offsets.begin() +
				(long)std::min<size_t>(4, seen->offsets.size()));
		EXPECT_EQ((std::vector<int64_t>{ 0, 20, 30, 50 }), head)
			<< "batches 20 and 25 kept, 30 fetched again";
	}
	for (int p = 0; p < kParts; p++) {
		expect_content(d, p, end(p));
		expect_dump(p, end(p));
	}
	EXPECT_TRUE(has_problem_line(log_of(d), "crc|corrupt"))
		<< "a rejected batch must be logged (DESIGN: counted, logged, "
		   "refetched); log:\n" << log_of(d);
	expect_clean_stop(d);
}

/* The batch holding offset 45 of partition 1 is corrupt every time: the
 * batch before it (40..44) is kept, then after kCorruptMax rejections in a
 * row the partition is FAILED with a reason naming the CRC and the offset,
 * nothing at or after 45 is in the log, and partition 0 keeps mirroring. */
TEST_F(Hostile, BadCrcAlwaysFailsThePartitionAndPersistsNothingBad)
{
	static constexpr int64_t bad = 45;
	fake_->set_fault_hook([](const FakeRequest &rq) {
		FaultAction a;
		if (rq.api_key == 1 && rq.part(1) != nullptr) {
			a.fault = Fault::kBadCrc;
			a.crc_offset = bad;
			a.crc_partition = 1;
		}
		return a;
	});
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &st) {
				      return caught_up(st, 0, end(0)) &&
					     st.count(key_of(1)) &&
					     st.at(key_of(1)).state == "FAILED" &&
					     st.at(key_of(1)).hw == bad;
			      },
			      kWaitMs));

	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	const PartStatus &p1 = st[key_of(1)];
	EXPECT_TRUE(std::regex_search(p1.reason, std::regex("CRC|corrupt",
							    std::regex::icase)))
		<< p1.reason;
	EXPECT_NE(std::string::npos, p1.reason.find(std::to_string(bad)))
		<< p1.reason;
	EXPECT_EQ(bad, p1.leo);
	EXPECT_EQ(kCorruptMax, p1.corrupt);
	EXPECT_EQ((uint64_t)kCorruptMax, fake_->faults_applied(Fault::kBadCrc));
	EXPECT_EQ("MIRRORING", st[key_of(0)].state) << st[key_of(0)].reason;

	/* Partition 1 asks no more; partition 0 goes on polling. */
	uint64_t f0 = fake_->fetches(0), f1 = fake_->fetches(1);
	ASSERT_TRUE(poll_until([&] { return fake_->fetches(0) >= f0 + 3; },
			       kWaitMs));
	EXPECT_EQ(f1, fake_->fetches(1));

	expect_content(d, 0, end(0));
	expect_dump(0, end(0));
	expect_content(d, 1, bad);
	expect_dump(1, bad);
	EXPECT_TRUE(has_problem_line(log_of(d), "FAILED.*(crc|corrupt)"))
		<< log_of(d);
	expect_clean_stop(d);

	/* FAILED is persisted: after a restart the partition is still FAILED
	 * with its reason and fetches nothing, even with the source healed,
	 * until the operator starts it; then it resumes at its log end. */
	EXPECT_NE(std::string::npos,
		  read_file(dir_.path() + "/hostile-1/kmirror.state")
			  .find("state=FAILED"));
	fake_->set_fault_hook([](const FakeRequest &) { return FaultAction(); });
	ASSERT_EQ("", d.start());
	f0 = fake_->fetches(0);
	f1 = fake_->fetches(1);
	ASSERT_TRUE(poll_until([&] { return fake_->fetches(0) >= f0 + 3; },
			       kWaitMs));
	EXPECT_EQ(f1, fake_->fetches(1));
	st.clear();
	ASSERT_EQ("", d.status(&st));
	EXPECT_EQ("FAILED", st[key_of(1)].state);
	EXPECT_NE(std::string::npos, st[key_of(1)].reason.find(std::to_string(bad)))
		<< st[key_of(1)].reason;
	ChildResult r;
	ASSERT_EQ("", ctl(d, { "start", key_of(1) }, &r));
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &s) {
				      return caught_up(s, 1, end(1)) &&
					     s.at(key_of(1)).state == "MIRRORING";
			      },
			      kWaitMs));
	expect_content(d, 1, end(1));
	expect_clean_stop(d);
}

/* ---- startup discovery ---- */

/* The first two Metadata requests of the startup discovery
 * (control/srcmeta.c) get garbage: kmirrord says so at WARN,
 * retries, and mirrors once the fake answers properly. */
TEST_F(Hostile, GarbageDuringDiscoveryIsRetried)
{
	/* Discovery's Metadata opens its connection (the fetch sessions
	 * start theirs with ApiVersions). */
	auto discovery = std::make_shared<std::atomic<int>>(0);
	fake_->set_fault_hook([discovery](const FakeRequest &rq) {
		FaultAction a;
		if (rq.api_key == 3 && rq.conn_request == 1 && ++*discovery <= 2)
			a.fault = Fault::kGarbage;
		return a;
	});
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start(kWaitMs));
	EXPECT_EQ(2u, fake_->faults_applied(Fault::kGarbage));
	EXPECT_EQ(3, discovery->load());
	std::string log = log_of(d);
	EXPECT_TRUE(has_problem_line(log, "Metadata.*retrying")) << log;
	ASSERT_EQ("", wait_mirrored(d));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	for (int p = 0; p < kParts; p++) {
		EXPECT_EQ("MIRRORING", st[key_of(p)].state) << st[key_of(p)].reason;
		expect_content(d, p, end(p));
		expect_dump(p, end(p));
	}
	expect_clean_stop(d);
}

/* ---- kill -9 during a stall ---- */

/* Partition 0's third Fetch gets half an answer and then silence; kmirrord
 * is killed with -9 while it waits, restarted against a source that now
 * behaves, and ends with the source's content (recovery, then resume at the
 * log end). */
TEST_F(Hostile, KillNineWhileSourceStallsMidResponse)
{
	auto stall = std::make_shared<std::atomic<bool>>(true);
	fake_->set_fault_hook([stall](const FakeRequest &rq) {
		FaultAction a;
		const FakeRequest::Part *p0 = rq.part(0);
		if (*stall && rq.api_key == 1 && p0 && p0->count == 3)
			a.fault = Fault::kTruncateStall;
		return a;
	});
	Daemon d(dir_.path(), sets());
	ASSERT_EQ("", d.start());
	/* Partition 1 rides on the same connection (one fetch session per
	 * source broker): the stall holds it too, wherever it had got to
	 * (that depends on when it joined the session). */
	ASSERT_EQ("", d.wait_status(
			      [&](const StatusMap &st) {
				      return fake_->faults_applied(
						     Fault::kTruncateStall) == 1 &&
					     st.count(key_of(0)) &&
					     st.at(key_of(0)).leo == 40 &&
					     st.count(key_of(1));
			      },
			      kWaitMs));
	ASSERT_EQ("", d.kill9());
	*stall = false;
	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_mirrored(d));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	for (int p = 0; p < kParts; p++) {
		EXPECT_EQ("MIRRORING", st[key_of(p)].state) << st[key_of(p)].reason;
		expect_content(d, p, end(p));
		expect_dump(p, end(p));
	}
	expect_clean_stop(d);
}

} // namespace
