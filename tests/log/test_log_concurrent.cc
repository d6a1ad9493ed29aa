// Goal: the read path (km_log_read, km_log_offset_for_time,
// km_log_aborted_txns, km_log_start_offset) is safe on other threads while
// the owner appends, rolls, flushes, truncates, clean-cuts and resets (log.h,
// Threading). Readers must never see a half-written index entry, a size the
// bytes do not back, a closed fd or an unmapped index.
// Method: a real log (on tmpfs where there is one, so that the syncs of a
// roll do not throttle the rolls) with tiny segments (4 KiB) and indexes, so
// it rolls every few batches, also on a full index; a flush policy that
// leaves appended ahead of durable; three reader threads calling the read
// path in a tight loop with random offsets, bounds and sizes while the owner
// thread appends bursts of mirrored batches (two producers, transactions
// aborted and committed) and, every few dozen bursts, truncates to a random
// offset, truncates at the R4 clean cut, resets to a multiple of kResetStep
// (above or below the end) or syncs. Every batch's bytes are a function of
// its offset (timestamps 1000 + offset, the value ValueAt(base)), so any
// generation of the log says the same at an offset. Each read must return an
// error from the documented set (-ERANGE) or whole batches: CRC verified by
// km_batch_parse, the count and bytes reported, offsets increasing, the
// first holding the requested offset, all below the bound and below the
// highest end the owner ever published, with the value that belongs at
// their offset. km_log_offset_for_time must name the first batch reaching
// the timestamp (or a log start); every aborted-transaction entry must be
// whole and overlap the range asked for. The test also checks it exercised
// rolls, every structural operation and reads that returned data, so it
// cannot pass vacuously. A second test keeps readers at the appended edge
// of one segment that only grows (the lock-free publication alone). Run
// under ASan (the sanitizer build), a read through an unmapped index or a
// freed segment fails; built with -fsanitize=thread, so does a data race.
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "common/log.h"
#include "log_check.h"

using namespace logtest;

namespace {

constexpr int64_t kPlain = 3;
constexpr int64_t kTxn = 4;
constexpr int64_t kResetStep = 1000000;
constexpr int kRecsMax = 3; // records per data batch: 1..kRecsMax
constexpr int64_t kTs0 = 1000; // a record's timestamp is kTs0 + its offset

std::string ValueAt(int64_t base)
{
	return std::string(30 + (size_t)(base * 7 % 200), (char)('a' + base % 26));
}

std::vector<uint8_t> DataAt(int64_t base, int64_t pid, int32_t seq, int n,
			    bool txn)
{
	std::string v = ValueAt(base);
	std::vector<km_record_spec> recs(n);
	for (int i = 0; i < n; i++)
		recs[i] = {"k", 1, v.data(), (int32_t)v.size(), kTs0 + base + i,
			   nullptr, 0};
	km_batch_spec spec = {base, 0,
			      (int16_t)(txn ? KM_BATCH_ATTR_TRANSACTIONAL : 0),
			      pid, 0, seq};
	std::vector<uint8_t> out(km_records_build_size(recs.data(), n));
	km_records_build(out.data(), out.size(), &spec, recs.data(), n);
	return out;
}

uint64_t NowMs()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts); // the clock km_log_tick expects
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void StressConfig(km_log_config &c)
{
	c.segment_bytes = 4096;
	c.index_interval_bytes = 256;
	c.index_bytes_max = 96; // 12 offset entries: full before 4 KiB, too
	c.prealloc_bytes = 8192;
	c.flush_always = false;
	c.flush_bytes = 6000; // appended runs ahead of durable
	c.flush_interval_ms = 5;
	c.segments_max = 4096;
}

// What the threads share besides the log.
struct Shared {
	km_log *log = nullptr;
	std::atomic<bool> stop{false};
	// Highest log end the owner has had: no read may return beyond it.
	std::atomic<int64_t> end_max{0};
	std::mutex mu;
	std::vector<std::string> failures;
	std::atomic<uint64_t> reads{0}, reads_with_data{0}, batches_read{0};
	std::atomic<uint64_t> time_found{0}, aborted_seen{0};

	void Fail(const std::string &what)
	{
		std::lock_guard<std::mutex> g(mu);
		if (failures.size() < 20)
			failures.push_back(what);
		stop = true;
	}
};

// The batches in a km_log_read result, checked; "" if all is well.
std::string CheckRead(const km_log_read_result &rd, const uint8_t *buf,
		      int64_t offset, int64_t upto, uint32_t max_bytes,
		      int64_t end_max)
{
	std::ostringstream why;
	size_t at = 0;
	uint32_t n = 0;
	int64_t prev_last = -1;
	while (at < rd.bytes) {
		iovec iov = {(void *)(buf + at), rd.bytes - at};
		km_chain ch = {&iov, 1};
		km_batch b;
		int rc = km_batch_parse(&b, &ch, km_chain_start(&ch),
					KM_BATCH_BYTES_MAX);
		if (rc <= 0) {
			why << "batch " << n << " at byte " << at
			    << " does not parse: " << km_strerror(rc);
			return why.str();
		}
		int64_t base = km_batch_base_offset(&b), last = km_batch_last_offset(&b);
		if (n == 0 && (base != rd.first_offset || last < offset))
			why << "first batch " << base << ".." << last
			    << " does not hold " << offset << " (first_offset "
			    << rd.first_offset << ")";
		if (n > 0 && base <= prev_last)
			why << "offsets do not increase: " << base << " after "
			    << prev_last;
		if (base >= upto || last >= end_max)
			why << "batch " << base << ".." << last << " beyond upto "
			    << upto << " / end " << end_max;
		if (n > 0 && at + (size_t)rc > max_bytes)
			why << "more than max_bytes " << max_bytes;
		if (!km_batch_is_control(&b)) {
			std::string v = ValueAt(base);
			const uint8_t *p = buf + at;
			if (std::search(p, p + rc, v.begin(), v.end()) == p + rc)
				why << "batch at " << base << " lacks its value";
		}
		if (!why.str().empty())
			return why.str();
		prev_last = last;
		at += (size_t)rc;
		n++;
	}
	if (n != rd.batches)
		why << rd.batches << " batches reported, " << n << " found";
	else if (n > 0 && rd.next_offset != prev_last + 1)
		why << "next_offset " << rd.next_offset << " after " << prev_last;
	return why.str();
}

void ReadOnce(Shared &sh, std::mt19937_64 &rng, std::vector<uint8_t> &buf)
{
	int64_t start = km_log_start_offset(sh.log);
	int64_t appended = km_log_appended_offset(sh.log);
	int64_t span = std::max<int64_t>(appended - start, 1);
	int64_t offset = start - 2 + (int64_t)(rng() % (uint64_t)(span + 4));
	int64_t upto;
	switch (rng() % 4) {
	case 0: upto = INT64_MAX; break;
	case 1: upto = km_log_durable_offset(sh.log); break;
	case 2: upto = appended; break;
	default: upto = offset + (int64_t)(rng() % 40); break;
	}
	uint32_t max_bytes = 1 + (uint32_t)(rng() % 9000);
	km_log_read_result rd;
	int rc = km_log_read(sh.log, offset, upto, max_bytes, buf.data(),
			     buf.size(), &rd);
	sh.reads++;
	if (rc == -ERANGE)
		return;
	if (rc != 0) {
		sh.Fail("km_log_read(" + std::to_string(offset) + ") = " +
			km_strerror(rc));
		return;
	}
	std::string why = CheckRead(rd, buf.data(), offset, upto, max_bytes,
				    sh.end_max.load(std::memory_order_acquire));
	if (!why.empty())
		sh.Fail("km_log_read(" + std::to_string(offset) + ", " +
			std::to_string(upto) + "): " + why);
	sh.reads_with_data += rd.batches > 0;
	sh.batches_read += rd.batches;
}

// The first batch reaching ts: its records reach ts - kTs0, and the batch
// before it (whose last offset is below its base) does not - unless it is
// the first batch of the log, at 0 or at a reset offset.
void TimeOnce(Shared &sh, std::mt19937_64 &rng)
{
	int64_t start = km_log_start_offset(sh.log);
	int64_t span = std::max<int64_t>(km_log_appended_offset(sh.log) - start, 1);
	int64_t ts = kTs0 + start - 3 + (int64_t)(rng() % (uint64_t)(span + 6));
	int64_t off = -2;
	int rc = km_log_offset_for_time(sh.log, ts, &off);
	if (rc != 0) {
		sh.Fail(std::string("km_log_offset_for_time: ") + km_strerror(rc));
		return;
	}
	if (off == -1)
		return;
	int64_t want = ts - kTs0; // the first offset whose timestamp reaches ts
	bool log_start = off % kResetStep == 0;
	if (off < 0 || off + kRecsMax - 1 < want || (off > want && !log_start))
		sh.Fail("km_log_offset_for_time(" + std::to_string(ts) + ") = " +
			std::to_string(off));
	sh.time_found++;
}

void AbortedOnce(Shared &sh, std::mt19937_64 &rng)
{
	int64_t start = km_log_start_offset(sh.log);
	int64_t span = std::max<int64_t>(km_log_appended_offset(sh.log) - start, 1);
	int64_t from = start + (int64_t)(rng() % (uint64_t)span);
	int64_t upto = from + 1 + (int64_t)(rng() % 200);
	km_aborted_txn ab[64];
	int n = km_log_aborted_txns(sh.log, from, upto, ab, 64);
	if (n < 0) {
		sh.Fail(std::string("km_log_aborted_txns: ") + km_strerror(n));
		return;
	}
	int64_t prev = INT64_MIN;
	for (int i = 0; i < n && i < 64; i++) {
		const km_aborted_txn &t = ab[i];
		if (t.producer_id != kTxn || t.first_offset > t.last_offset ||
		    t.last_offset < from || t.first_offset >= upto ||
		    t.last_offset < prev) {
			sh.Fail("aborted txn " + std::to_string(t.producer_id) + " " +
				std::to_string(t.first_offset) + ".." +
				std::to_string(t.last_offset) + " for [" +
				std::to_string(from) + ", " + std::to_string(upto) + ")");
			return;
		}
		prev = t.last_offset;
	}
	sh.aborted_seen += (uint64_t)n;
}

void Reader(Shared &sh, int kind, uint64_t seed)
{
	std::mt19937_64 rng(seed);
	std::vector<uint8_t> buf(1 << 20);
	// Bounded: the owner stops everything after its time budget.
	for (uint64_t i = 0; i < (1ull << 32) && !sh.stop.load(); i++) {
		uint32_t r = (uint32_t)(rng() % 10);
		if (kind == 0 || (kind == 2 && r < 5))
			ReadOnce(sh, rng, buf);
		else if (r < 7)
			TimeOnce(sh, rng);
		else
			AbortedOnce(sh, rng);
	}
}

// The owner: appends and the structural operations, as a worker would.
struct Owner {
	Log &l;
	Shared &sh;
	std::mt19937 rng;
	std::map<int64_t, int32_t> seq;
	bool in_txn = false;
	// Appended batches' bytes stay valid until written (log.h).
	std::deque<std::unique_ptr<Batch>> pending;
	int truncations = 0, clean_cuts = 0, resets = 0, syncs = 0;
	size_t segments_max = 0; // seen before a structural operation

	Owner(Log &log, Shared &s, uint32_t seed) : l(log), sh(s), rng(seed) {}

	// Producer state after a truncation or reset, as the log sees it.
	void Resume()
	{
		km_pstate *ps = km_log_pstate(l.log);
		for (int64_t p : {kPlain, kTxn}) {
			km_producer_info pi;
			bool known = km_pstate_get(ps, p, &pi) == 0;
			seq[p] = known ? pi.last_seq + 1 : 0;
			if (p == kTxn)
				in_txn = known && pi.txn_first_offset >= 0;
		}
		pending.clear(); // every structural operation syncs first
	}

	std::unique_ptr<Batch> Next(int64_t off)
	{
		uint32_t r = rng() % 10;
		if (r < 2 && in_txn) {
			km_ctrl_spec s = {off, 0, kTs0 + off};
			std::vector<uint8_t> b(KM_CTRL_MARKER_BATCH_BYTES);
			km_ctrl_build_marker(b.data(), b.size(), &s, kTxn, 0,
					     rng() % 3 == 0, 0); // mostly ABORT
			in_txn = false;
			return std::unique_ptr<Batch>(new Batch(b));
		}
		int64_t p = r < 6 ? kTxn : kPlain;
		int n = 1 + (int)(rng() % kRecsMax);
		std::unique_ptr<Batch> b(
			new Batch(DataAt(off, p, seq[p], n, p == kTxn)));
		in_txn |= p == kTxn;
		seq[p] += n;
		return b;
	}

	void Burst()
	{
		int64_t off = km_log_end_offset(l.log);
		std::vector<km_batch> views;
		int k = 1 + (int)(rng() % 4);
		for (int j = 0; j < k; j++) {
			pending.push_back(Next(off));
			views.push_back(pending.back()->view);
			off = km_batch_last_offset(&views.back()) + 1;
		}
		// Before the append: a roll inside it may already publish some.
		if (off > sh.end_max.load())
			sh.end_max.store(off, std::memory_order_release);
		int done = 0;
		for (int guard = 0; done < k && guard < 10000; guard++) {
			km_log_append_result res;
			int rc = km_log_append_burst(l.log, views.data() + done,
						     (uint32_t)(k - done),
						     KM_ORIGIN_MIRROR, &res);
			ASSERT_GE(rc, 0) << km_strerror(rc);
			done += rc;
			if (done < k) { // the write queue is full: let it drain
				ASSERT_GE(km_uring_poll(&l.ring, true), 0);
			}
		}
		ASSERT_EQ(k, done);
		Publish();
	}

	void Publish()
	{
		int64_t end = km_log_end_offset(l.log);
		if (end > sh.end_max.load())
			sh.end_max.store(end, std::memory_order_release);
		int64_t appended = km_log_appended_offset(l.log);
		while (!pending.empty() &&
		       km_batch_last_offset(&pending.front()->view) < appended)
			pending.pop_front();
	}

	void Structural()
	{
		segments_max = std::max(segments_max, Bases(l.dir, ".log").size());
		int64_t start = km_log_start_offset(l.log);
		int64_t end = km_log_end_offset(l.log);
		uint32_t r = rng() % 10;
		if (r < 3) {
			int64_t to = start + (int64_t)(rng() % (uint64_t)(end - start + 1));
			ASSERT_GE(km_log_truncate_to(l.log, to, nullptr, nullptr), 0);
			truncations++;
		} else if (r < 5) {
			int64_t cut = km_log_clean_cut(l.log);
			ASSERT_GE(cut, 0) << km_strerror((int)cut);
			ASSERT_GE(km_log_truncate_to(l.log, cut, nullptr, nullptr), 0);
			clean_cuts++;
		} else if (r < 7) {
			// Above or below the end: offsets go back too.
			int64_t to = kResetStep * (1 + (int64_t)(rng() % 6));
			ASSERT_EQ(0, km_log_reset_to(l.log, to));
			ASSERT_EQ(to, km_log_start_offset(l.log));
			resets++;
		} else {
			ASSERT_EQ(0, km_log_flush(l.log));
			ASSERT_EQ(0, km_log_sync(l.log));
			syncs++;
		}
		Resume();
		Publish();
	}

	void Run(std::chrono::steady_clock::time_point deadline)
	{
		Resume();
		for (int round = 0; round < 1000000 && !sh.stop.load(); round++) {
			Burst();
			if (::testing::Test::HasFatalFailure())
				return;
			(void)km_uring_poll(&l.ring, false);
			km_log_tick(l.log, NowMs());
			Publish();
			if (round % 40 == 39) {
				Structural();
				if (::testing::Test::HasFatalFailure())
					return;
				if (std::chrono::steady_clock::now() > deadline)
					return;
			}
		}
	}
};

int CountSegments(const std::string &dir)
{
	return (int)Bases(dir, ".log").size();
}

TEST(Concurrent, ReadersWhileTheOwnerAppendsRollsTruncatesAndResets)
{
	km_log_set_level(KM_LOG_ERROR); // thousands of rolls, each at INFO
	FastTempDir td;
	Log l(td.path, StressConfig, 256);
	ASSERT_NE(nullptr, l.log);
	Shared sh;
	sh.log = l.log;
	Owner owner(l, sh, 20261201);
	std::vector<std::thread> readers;
	for (int k = 0; k < 3; k++)
		readers.emplace_back(Reader, std::ref(sh), k, 77 + (uint64_t)k);
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
	owner.Run(deadline);
	sh.stop = true;
	for (auto &t : readers)
		t.join();
	km_log_set_level(KM_LOG_INFO);
	for (auto &f : sh.failures)
		ADD_FAILURE() << f;
	ASSERT_FALSE(HasFailure());

	// Not vacuous: every kind of change happened, and reads found data.
	EXPECT_GT(owner.truncations, 0);
	EXPECT_GT(owner.clean_cuts, 0);
	EXPECT_GT(owner.resets, 0);
	EXPECT_GT(owner.segments_max, 5u) << "rolls";
	EXPECT_GT(sh.reads_with_data.load(), 1000u);
	EXPECT_GT(sh.time_found.load(), 100u);
	EXPECT_GT(sh.aborted_seen.load(), 0u);
	RecordProperty("reads", (int)std::min<uint64_t>(sh.reads, INT32_MAX));
	RecordProperty("batches_read", (int)std::min<uint64_t>(sh.batches_read, INT32_MAX));
	RecordProperty("resets", owner.resets);
	RecordProperty("truncations", owner.truncations + owner.clean_cuts);

	// The log the readers saw is still whole: read it all back, reopen.
	ASSERT_EQ(0, km_log_sync(l.log));
	int64_t start = km_log_start_offset(l.log), end = km_log_end_offset(l.log);
	std::vector<uint8_t> all = ReadAll(l.log, start, end, 1 << 16);
	ASSERT_EQ(0, l.Close());
	l.Open();
	EXPECT_EQ(start, km_log_start_offset(l.log));
	EXPECT_EQ(end, km_log_end_offset(l.log));
	EXPECT_EQ(all, ReadAll(l.log, start, end, 1 << 16));
}

// The lock-free half: with no structural change at all, readers chase the
// appended offset as closely as they can, so a size or an index entry
// published before its bytes would show (a torn header, a short pread).
TEST(Concurrent, ReadersAtTheAppendedEdge)
{
	km_log_set_level(KM_LOG_ERROR);
	FastTempDir td;
	Log l(td.path, [](km_log_config &c) {
		StressConfig(c);
		c.segment_bytes = 256 << 20; // one segment: no roll
		c.index_bytes_max = 4 << 20;
		c.index_interval_bytes = 64; // an entry for nearly every batch
	}, 256);
	ASSERT_NE(nullptr, l.log);
	Shared sh;
	sh.log = l.log;
	std::atomic<uint64_t> edge_reads{0};
	auto edge = [&](uint64_t seed) {
		std::mt19937_64 rng(seed);
		std::vector<uint8_t> buf(1 << 20);
		for (uint64_t i = 0; i < (1ull << 32) && !sh.stop.load(); i++) {
			int64_t a = km_log_appended_offset(l.log);
			int64_t off = std::max<int64_t>(0, a - (int64_t)(rng() % 4));
			km_log_read_result rd;
			int rc = km_log_read(l.log, off, INT64_MAX, 1 << 16, buf.data(),
					     buf.size(), &rd);
			if (rc != 0 && rc != -ERANGE) {
				sh.Fail(std::string("edge read: ") + km_strerror(rc));
				return;
			}
			std::string why = rc ? "" : CheckRead(rd, buf.data(), off, INT64_MAX,
							     1 << 16, sh.end_max.load());
			if (!why.empty()) {
				sh.Fail("edge read at " + std::to_string(off) + ": " + why);
				return;
			}
			// Appended only grows here: below it there is a batch to
			// return (a segment's readable bytes published after
			// the offset would show as an empty read).
			if (rc == 0 && off < a && rd.batches == 0) {
				sh.Fail("edge read at " + std::to_string(off) +
					" below appended " + std::to_string(a) +
					" returned nothing");
				return;
			}
			edge_reads += rd.batches > 0;
			int64_t found;
			if (km_log_offset_for_time(l.log, kTs0 + a, &found) != 0)
				sh.Fail("edge offset_for_time failed");
		}
	};
	std::vector<std::thread> readers;
	for (int k = 0; k < 2; k++)
		readers.emplace_back(edge, 5 + (uint64_t)k);
	Owner owner(l, sh, 99);
	owner.Resume();
	auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
	for (int round = 0; round < 200000 && !sh.stop.load(); round++) {
		owner.Burst();
		if (HasFatalFailure())
			break;
		(void)km_uring_poll(&l.ring, false);
		km_log_tick(l.log, NowMs());
		owner.Publish();
		if (round % 64 == 0 && std::chrono::steady_clock::now() > deadline)
			break;
		// Decided transactions leave producer state only once durable
		// passes their markers: let it catch up now and then.
		if (round % 32 == 31) {
			ASSERT_EQ(0, km_log_flush(l.log));
			ASSERT_EQ(0, km_log_sync(l.log));
		}
		if (km_log_end_offset(l.log) > 400000) // stay in one segment
			break;
	}
	sh.stop = true;
	for (auto &t : readers)
		t.join();
	km_log_set_level(KM_LOG_INFO);
	for (auto &f : sh.failures)
		ADD_FAILURE() << f;
	EXPECT_GT(edge_reads.load(), 100u);
	EXPECT_EQ(1, CountSegments(l.dir));
}

} // namespace
