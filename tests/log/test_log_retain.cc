// Goal: km_log_retain (issue 7) deletes the oldest WHOLE segments a rule
// names - below the source's log start, older than max_age_ms, while the
// log is bigger than max_bytes - never the active one, moves the log start
// to the first remaining base (also after a reopen), takes each deleted
// segment's four files and the snapshots below the new start with it, and
// is safe for a reader on another thread reading all the while.
// km_log_delete_records (DeleteRecords, issue 20) moves the log start to
// any offset up to the durable one, inside a batch too, keeps it across a
// reopen, and no retention pass moves it back.
// Method: real files and io_uring, 2 KiB segments.
#include <atomic>
#include <thread>

#include "log_check.h"

using namespace logtest;

namespace {

std::vector<uint8_t> Plain(int64_t base, int n)
{
	std::string v(120, (char)('a' + base % 26));
	std::vector<km_record_spec> recs(n);
	for (int i = 0; i < n; i++)
		recs[i] = {"k", 1, v.data(), (int32_t)v.size(), 1000 + base + i,
			   nullptr, 0};
	km_batch_spec spec = {base, 1, 0, -1, -1, -1};
	std::vector<uint8_t> out(km_records_build_size(recs.data(), n));
	km_records_build(out.data(), out.size(), &spec, recs.data(), n);
	return out;
}

void Small(km_log_config &c)
{
	c.segment_bytes = 2048;
	c.index_interval_bytes = 300;
	c.index_bytes_max = 1024;
	c.prealloc_bytes = 8192;
}

// 0..(3 * batches) in 2 KiB segments. Returns the end.
int64_t Fill(Log &l, int batches)
{
	for (int i = 0; i < batches; i++) {
		Batch b(Plain(3 * i, 3));
		EXPECT_EQ(1, l.Append(b));
	}
	return 3 * batches;
}

int Retain(Log &l, km_log_retained *out, int64_t below, int64_t age,
	   int64_t bytes, int64_t now = 0)
{
	km_log_retention r = { below, age, bytes, now };
	return km_log_retain(l.log, &r, out);
}

TEST(Retain, BelowTheSourceStartWholeSegmentsGo)
{
	TempDir td;
	Log l(td.path, Small);
	int64_t end = Fill(l, 40);
	std::vector<int64_t> bases = Bases(l.dir, ".log");
	ASSERT_GE(bases.size(), 5u);
	std::vector<int64_t> snaps = Bases(l.dir, ".snapshot");
	ASSERT_FALSE(snaps.empty());

	// The source starts inside segment 2: segments 0 and 1 go, 2 stays.
	km_log_retained out;
	ASSERT_EQ(0, Retain(l, &out, bases[2] + 1, -1, -1));
	EXPECT_EQ(2u, out.segments);
	EXPECT_EQ(bases[2], out.start);
	EXPECT_EQ(bases[2], km_log_start_offset(l.log));
	EXPECT_EQ(end, km_log_end_offset(l.log));
	/* (no .txnindex: these segments hold no aborted transaction) */
	for (const char *suf : { ".log", ".index", ".timeindex" }) {
		EXPECT_FALSE(Exists(l.dir + "/" + SegName(bases[0], suf))) << suf;
		EXPECT_FALSE(Exists(l.dir + "/" + SegName(bases[1], suf))) << suf;
		EXPECT_TRUE(Exists(l.dir + "/" + SegName(bases[2], suf))) << suf;
	}
	for (int64_t s : Bases(l.dir, ".snapshot"))
		EXPECT_GE(s, bases[2]);
	std::vector<uint8_t> buf(1 << 16);
	km_log_read_result rd;
	EXPECT_EQ(-ERANGE, km_log_read(l.log, bases[2] - 1, INT64_MAX, 1 << 16,
				       buf.data(), buf.size(), &rd));
	EXPECT_EQ(0, km_log_read(l.log, bases[2], INT64_MAX, 1 << 16, buf.data(),
				 buf.size(), &rd));
	EXPECT_EQ(bases[2], rd.first_offset);
	EXPECT_EQ(end - bases[2], (int64_t)ReadAll(l.log, bases[2], end).size() /
					  (int64_t)Plain(0, 3).size() * 3);

	// Nothing more to do for the same rule; the log reopens the same.
	ASSERT_EQ(0, Retain(l, &out, bases[2] + 1, -1, -1));
	EXPECT_EQ(0u, out.segments);
	ASSERT_EQ(0, l.Close());
	l.Open();
	EXPECT_EQ(bases[2], km_log_start_offset(l.log));
	EXPECT_EQ(end, km_log_end_offset(l.log));
	Batch more(Plain(end, 3));
	EXPECT_EQ(1, l.Append(more));
}

TEST(Retain, SizeAndAgeCapsNeverTakeTheActiveSegment)
{
	TempDir td;
	Log l(td.path, Small);
	int64_t end = Fill(l, 40);
	uint64_t total = km_log_size_bytes(l.log);
	size_t n = Bases(l.dir, ".log").size();

	// Size: the oldest go until the log fits.
	km_log_retained out;
	ASSERT_EQ(0, Retain(l, &out, -1, -1, (int64_t)total / 2));
	EXPECT_GT(out.segments, 0u);
	EXPECT_LE(km_log_size_bytes(l.log), total / 2);
	EXPECT_EQ(total - out.bytes, km_log_size_bytes(l.log));
	EXPECT_EQ(n - out.segments, Bases(l.dir, ".log").size());

	// Age: every batch is from 1970; all but the active segment go, in
	// bursts of KM_LOG_RETAIN_BURST.
	int64_t now = 1800000000000;
	do
		ASSERT_EQ(0, Retain(l, &out, -1, 86400000, -1, now));
	while (out.segments > 0);
	EXPECT_EQ(1u, Bases(l.dir, ".log").size());
	EXPECT_EQ(end, km_log_end_offset(l.log));
	EXPECT_EQ(Bases(l.dir, ".log")[0], km_log_start_offset(l.log));

	// The config's caps through km_log_retain_policy: none by default.
	EXPECT_EQ(-1, l.cfg.retention_ms);
	EXPECT_EQ(-1, l.cfg.retention_bytes);
	ASSERT_EQ(0, km_log_retain_policy(l.log, -1, now, &out));
	EXPECT_EQ(0u, out.segments);
}

// km_log_set_limits (a topic config synced from the source): the next
// km_log_retain_policy follows the new caps, the next roll the new size,
// and a size the log cannot take is refused with nothing changed.
TEST(Retain, SetLimitsChangesTheNextPassAndRoll)
{
	TempDir td;
	Log l(td.path, Small);
	Fill(l, 40);
	const int64_t now = 1800000000000;
	km_log_retained out;
	ASSERT_EQ(0, km_log_retain_policy(l.log, -1, now, &out));
	EXPECT_EQ(0u, out.segments) << "no caps yet";

	km_log_limits bad = { 86400000, -1, 1023, false, false, 0, 0, 0, false };
	EXPECT_EQ(-EINVAL, km_log_set_limits(l.log, &bad));
	EXPECT_EQ(-1, km_log_config_get(l.log)->retention_ms);
	km_log_limits lim = { 86400000, -1, 4096, false, false, 0, 0, 0, false };
	ASSERT_EQ(0, km_log_set_limits(l.log, &lim));
	ASSERT_EQ(0, km_log_retain_policy(l.log, -1, now, &out));
	EXPECT_GT(out.segments, 0u) << "every batch is from 1970";

	// The next segments roll at 4 KiB: fewer files for the same bytes.
	size_t before = Bases(l.dir, ".log").size();
	for (int i = 0; i < 40; i++) {
		Batch b(Plain(120 + 3 * i, 3));
		EXPECT_EQ(1, l.Append(b));
	}
	size_t added = Bases(l.dir, ".log").size() - before;
	EXPECT_GT(added, 0u);
	EXPECT_LT(added, 8u) << "40 batches of ~450 B roll about 9 times at 2 KiB";
}

// A reader on another thread reads from the log start in a loop while the
// owner appends and deletes: every read is whole CRC-valid batches or
// -ERANGE (the start moved past it), never an error or torn bytes.
TEST(Retain, ReadersInFlightAreSafe)
{
	TempDir td;
	Log l(td.path, Small);
	int64_t end = Fill(l, 20);
	std::atomic<bool> stop{ false };
	std::atomic<int> reads{ 0 }, bad{ 0 };

	std::thread reader([&] {
		std::vector<uint8_t> buf(1 << 16);
		while (!stop.load()) {
			km_log_read_result rd;
			int64_t from = km_log_start_offset(l.log);
			int rc = km_log_read(l.log, from, INT64_MAX, 1 << 15,
					     buf.data(), buf.size(), &rd);
			if (rc == -ERANGE)
				continue;
			if (rc != 0 || (rd.batches > 0 && rd.first_offset < from)) {
				bad++;
				continue;
			}
			for (uint32_t at = 0, k = 0; k < rd.batches; k++) {
				iovec iov = { &buf[at], rd.bytes - at };
				km_chain ch = { &iov, 1 };
				km_batch b;
				int n = km_batch_parse(&b, &ch, km_chain_start(&ch),
						       KM_BATCH_BYTES_MAX);
				if (n <= 0) {
					bad++;
					break;
				}
				at += (uint32_t)n;
			}
			reads++;
		}
	});
	for (int round = 0; round < 200; round++) {
		Batch b(Plain(end, 3));
		ASSERT_EQ(1, l.Append(b));
		end += 3;
		km_log_retained out;
		ASSERT_EQ(0, Retain(l, &out, end - 12, -1, -1));
	}
	while (reads.load() < 100)
		std::this_thread::yield();
	stop = true;
	reader.join();
	EXPECT_EQ(0, bad.load());
	EXPECT_GT(km_log_start_offset(l.log), 0);
	EXPECT_LE(Bases(l.dir, ".log").size(), 3u);
}

} // namespace

// More snapshot files than one directory listing holds (256; one per roll):
// a truncation takes every snapshot past the cut, retention every one below
// the new start, and a log with more segments on disk than segments_max is
// refused at open rather than opened with some of them out of view.
TEST(Retain, MoreFilesThanOneListingHolds)
{
	TempDir td;
	Log l(td.path, Small);
	const int kBatches = 300;  // one 10-record batch fills a 2 KiB segment
	for (int i = 0; i < kBatches; i++) {
		Batch b(Plain(10 * i, 10));
		ASSERT_EQ(1, l.Append(b));
	}
	ASSERT_GT(Bases(l.dir, ".snapshot").size(), 256u);

	const int64_t cut = 10 * 40;
	ASSERT_EQ(cut, km_log_truncate_to(l.log, cut, nullptr, nullptr));
	for (int64_t s : Bases(l.dir, ".snapshot"))
		EXPECT_LE(s, cut);

	for (int i = 40; i < kBatches + 40; i++) {
		Batch b(Plain(10 * i, 10));
		ASSERT_EQ(1, l.Append(b));
	}
	std::vector<int64_t> bases = Bases(l.dir, ".log");
	ASSERT_GT(bases.size(), 300u);
	ASSERT_GT(Bases(l.dir, ".snapshot").size(), 256u);
	km_log_retained out;
	do	// a call deletes a bounded number of segments
		ASSERT_EQ(0, Retain(l, &out, bases[290], -1, -1));
	while (out.segments > 0);
	EXPECT_EQ(bases[290], km_log_start_offset(l.log));
	for (int64_t s : Bases(l.dir, ".snapshot"))
		EXPECT_GE(s, bases[290]);

	ASSERT_EQ(0, l.Close());
	size_t on_disk = Bases(l.dir, ".log").size();
	ASSERT_GT(on_disk, 5u);
	l.cfg.segments_max = 5;
	km_log *refused = nullptr;
	EXPECT_EQ(KM_ESEGMENTS, km_log_open(&refused, &l.cfg, &l.ring, nullptr));
	EXPECT_EQ(nullptr, refused);
	EXPECT_EQ(on_disk, Bases(l.dir, ".log").size()) << "nothing deleted";
	l.cfg.segments_max = 1024;
	l.Open();
	EXPECT_EQ(bases[290], km_log_start_offset(l.log));
}

TEST(Retain, DeleteRecordsStartInsideABatchIsKept)
{
	TempDir td;
	Log l(td.path, Small);
	int64_t end = Fill(l, 40), low = -1;
	ASSERT_EQ(0, km_log_checkpoint(l.log));
	std::vector<int64_t> bases = Bases(l.dir, ".log");
	ASSERT_GE(bases.size(), 5u);
	const int64_t cut = bases[2] + 4; /* batches of 3: inside one */

	ASSERT_EQ(0, km_log_delete_records(l.log, cut, &low));
	EXPECT_EQ(cut, low);
	EXPECT_EQ(cut, km_log_start_offset(l.log));
	EXPECT_FALSE(Exists(l.dir + "/" + SegName(bases[1], ".log")));
	EXPECT_TRUE(Exists(l.dir + "/" + SegName(bases[2], ".log")));
	std::vector<uint8_t> buf(1 << 16);
	km_log_read_result rd;
	EXPECT_EQ(-ERANGE, km_log_read(l.log, cut - 1, INT64_MAX, 1 << 16,
				       buf.data(), buf.size(), &rd));
	ASSERT_EQ(0, km_log_read(l.log, cut, INT64_MAX, 1 << 16, buf.data(),
				 buf.size(), &rd));
	EXPECT_EQ(cut - 1, rd.first_offset) << "the batch holding it";

	// Lower is nothing; past the durable end is refused.
	ASSERT_EQ(0, km_log_delete_records(l.log, bases[1], &low));
	EXPECT_EQ(cut, low);
	EXPECT_EQ(-ERANGE, km_log_delete_records(l.log, end + 1, &low));
	// A retention pass below it does not move it back to a segment base.
	km_log_retained out;
	ASSERT_EQ(0, Retain(l, &out, bases[2] + 1, -1, -1));
	EXPECT_EQ(cut, km_log_start_offset(l.log));

	ASSERT_EQ(0, l.Close());
	l.Open();
	EXPECT_EQ(cut, km_log_start_offset(l.log)) << "kept in log-start-offset";
	EXPECT_EQ(end, km_log_end_offset(l.log));
}
