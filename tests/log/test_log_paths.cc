// Goal: the log's read-side queries and append edge paths give the answers
// their contracts in log.h promise: km_log_read across segment boundaries,
// offset gaps and upper bounds; km_log_offset_for_time (ListOffsets by time)
// against a brute-force answer, also after a truncation; km_log_aborted_txns
// (read_committed) for every transaction overlapping the range, even when its
// marker sits in a later segment; appends of batches held in chains of many
// iovecs write the right bytes; a burst larger than the write queue returns
// a short count and the rest goes in after km_uring_poll; a burst that rolls
// many segments does not fail the log; a segment's sync is submitted only
// after the writes it covers completed (never the durable offset past the
// appended one).
// Method: real files and a real io_uring; small segments; every answer is
// compared with one computed here from the list of appended batches.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "log_check.h"

using namespace logtest;

namespace {

struct Meta {
	int64_t base, last, max_ts;
};

Meta MetaOf(const std::vector<uint8_t> &b)
{
	return {(int64_t)GetBE(b.data(), 8),
		(int64_t)GetBE(b.data(), 8) + (int32_t)GetBE(b.data() + 23, 4),
		(int64_t)GetBE(b.data() + 35, 8)};
}

// Appends each batch alone (durable before the next).
void AppendAll(Log &l, const std::vector<std::vector<uint8_t>> &bs)
{
	for (auto &b : bs) {
		Batch v(b);
		ASSERT_EQ(1, l.Append(v)) << "at " << MetaOf(b).base;
	}
}

// "Offset of the first batch whose maxTimestamp >= ts", in offset order.
int64_t BruteTime(const std::vector<std::vector<uint8_t>> &bs, int64_t ts)
{
	for (auto &b : bs)
		if (MetaOf(b).max_ts >= ts)
			return MetaOf(b).base;
	return -1;
}

TEST(Read, AcrossSegmentBoundariesGapsAndBounds)
{
	TempDir td;
	Log l(td.path, [](km_log_config &c) {
		c.segment_bytes = 1500;
		c.index_interval_bytes = 200;
	});
	std::vector<std::vector<uint8_t>> bs;
	int64_t off = 0;
	int32_t seq = 0;
	for (int i = 0; i < 30; i++) {
		int n = 1 + i % 3;
		bs.push_back(Data(off, 3, 0, seq, n, false, 150 + 20 * (i % 5)));
		seq += n;
		off += n + (i % 7 == 6 ? 5 : 0); // a compaction gap now and then
	}
	AppendAll(l, bs);
	int64_t leo = MetaOf(bs.back()).last + 1;
	std::vector<int64_t> bases = Bases(l.dir, ".log");
	ASSERT_GE(bases.size(), 4u);

	// From every offset (inside batches, in gaps), a read returns whole
	// batches starting at the one holding it (or the next one after a gap),
	// never a batch starting at or past upto.
	std::vector<uint8_t> buf(1 << 16);
	for (int64_t o = 0; o < leo; o++) {
		size_t first = 0;
		while (MetaOf(bs[first]).last < o)
			first++;
		for (int64_t upto : {leo, MetaOf(bs[first]).base + 1, leo - 1}) {
			if (upto <= o)
				continue; // no offset is both >= o and < upto
			km_log_read_result rd;
			ASSERT_EQ(0, km_log_read(l.log, o, upto, 1 << 16, buf.data(),
						 buf.size(), &rd));
			if (MetaOf(bs[first]).base >= upto) {
				EXPECT_EQ(0u, rd.batches) << o << " " << upto;
				continue;
			}
			ASSERT_GE(rd.batches, 1u) << o;
			EXPECT_EQ(MetaOf(bs[first]).base, rd.first_offset) << o;
			// The bytes are bs[first..first+batches).
			std::vector<uint8_t> want;
			for (uint32_t k = 0; k < rd.batches; k++)
				want.insert(want.end(), bs[first + k].begin(),
					    bs[first + k].end());
			ASSERT_EQ(want.size(), rd.bytes) << o;
			EXPECT_EQ(0, memcmp(want.data(), buf.data(), rd.bytes)) << o;
			EXPECT_EQ(MetaOf(bs[first + rd.batches - 1]).last + 1,
				  rd.next_offset);
			EXPECT_LT(MetaOf(bs[first + rd.batches - 1]).base, upto);
		}
	}
	// Whole log, chunk by chunk, crossing every boundary.
	std::vector<uint8_t> all;
	for (auto &b : bs)
		all.insert(all.end(), b.begin(), b.end());
	EXPECT_EQ(all, ReadAll(l.log, 0, leo, 1));
	EXPECT_EQ(all, ReadAll(l.log, 0, leo, 1000));
	km_log_read_result rd;
	EXPECT_EQ(-ERANGE, km_log_read(l.log, leo + 1, leo + 5, 100, buf.data(),
				       buf.size(), &rd));
	EXPECT_EQ(KM_ENOSPACE, km_log_read(l.log, 0, leo, 100, buf.data(), 10, &rd))
		<< "the first batch does not fit cap";
}

TEST(Read, OffsetForTimeMatchesBruteForce)
{
	TempDir td;
	Log l(td.path, [](km_log_config &c) {
		c.segment_bytes = 2000;
		c.index_interval_bytes = 300;
	});
	std::vector<std::vector<uint8_t>> bs;
	uint32_t x = 7;
	int64_t off = 0;
	for (int i = 0; i < 60; i++) {
		x = x * 1103515245u + 12345u;
		int64_t ts = 1000 + (x >> 8) % 5000;
		bs.push_back(Data(off, 3, 0, (int32_t)off, 2, false, 100, ts));
		off += 2;
	}
	AppendAll(l, bs);
	for (int round = 0; round < 2; round++) {
		for (int64_t ts = 900; ts <= 6100; ts += 37) {
			int64_t got;
			ASSERT_EQ(0, km_log_offset_for_time(l.log, ts, &got));
			EXPECT_EQ(BruteTime(bs, ts), got) << "ts " << ts << " round " << round;
		}
		ASSERT_EQ(0, l.Close());
		l.Open();
	}
}

// After a truncation the segment's largest timestamp must still be known
// (Kafka's LogSegment.truncateTo re-reads it: loadLargestTimestamp), or a
// later ListOffsets skips the segment.
TEST(Read, OffsetForTimeAfterTruncation)
{
	TempDir td;
	Log l(td.path, [](km_log_config &c) {
		c.segment_bytes = 4000;
		c.index_interval_bytes = 1000;
	});
	std::vector<std::vector<uint8_t>> bs;
	for (int i = 0; i < 11; i++) // ~200 bytes each; X = the 9th
		bs.push_back(Data(i, 3, 0, i, 1, false, 120, i == 8 ? 9000 : 1000 + i));
	AppendAll(l, bs);
	// Keep 0..9: X (offset 8) stays; no index entry was due after it.
	ASSERT_EQ(10, km_log_truncate_to(l.log, 10, nullptr, nullptr));
	bs.resize(10);
	int64_t got;
	ASSERT_EQ(0, km_log_offset_for_time(l.log, 5000, &got));
	EXPECT_EQ(8, got);
	// Roll away from the segment: it is sealed with what it believes is
	// its largest timestamp.
	for (int i = 10; i < 40; i++)
		bs.push_back(Data(i, 3, 0, i, 1, false, 120, 2000));
	AppendAll(l, std::vector<std::vector<uint8_t>>(bs.begin() + 10, bs.end()));
	ASSERT_GE(Bases(l.dir, ".log").size(), 2u);
	ASSERT_EQ(0, km_log_offset_for_time(l.log, 5000, &got));
	EXPECT_EQ(8, got) << "the batch with timestamp 9000 is at offset 8";
	ASSERT_EQ(0, l.Close());
	l.Open();
	ASSERT_EQ(0, km_log_offset_for_time(l.log, 5000, &got));
	EXPECT_EQ(8, got) << "after reopen";
}

std::vector<uint8_t> Mk(int64_t off, int64_t pid, bool commit, int32_t ce = 0)
{
	km_ctrl_spec s = {off, 0, 1000};
	std::vector<uint8_t> out(KM_CTRL_MARKER_BATCH_BYTES);
	km_ctrl_build_marker(out.data(), out.size(), &s, pid, 0, commit, ce);
	return out;
}

// read_committed: the aborted transactions a fetch of [from, upto) needs
// are all those with lastOffset >= from and firstOffset < upto, wherever
// their entry (kept with the marker's segment) lives.
TEST(AbortedTxns, MarkerInALaterSegment)
{
	TempDir td;
	Log l(td.path, [](km_log_config &c) { c.segment_bytes = 1024; });
	AppendAll(l, {
		Data(0, 3, 0, 0, 1, true, 600), // A opens at 0
		Data(1, 4, 0, 0, 1, true, 600), // B opens at 1: rolls
		Mk(2, 3, false),		// A aborted at 2
	});
	ASSERT_EQ(2u, Bases(l.dir, ".log").size());
	ASSERT_EQ(1, km_log_lso(l.log)) << "B is still open";
	// A read_committed fetch from 0 is bounded by the LSO: [0, 1). Offset
	// 0 belongs to A's aborted transaction, so the fetch must carry it.
	km_aborted_txn ab[4];
	int n = km_log_aborted_txns(l.log, 0, 1, ab, 4);
	ASSERT_EQ(1, n);
	EXPECT_EQ(3, ab[0].producer_id);
	EXPECT_EQ(0, ab[0].first_offset);
	EXPECT_EQ(2, ab[0].last_offset);
	EXPECT_EQ(1, ab[0].last_stable_offset);
}

TEST(AbortedTxns, MatchBruteForceAcrossSegments)
{
	TempDir td;
	Log l(td.path, [](km_log_config &c) { c.segment_bytes = 1500; });
	// Producers 3..6 each run transactions of 1-3 batches, interleaved;
	// every other one aborted.
	std::vector<std::vector<uint8_t>> bs;
	std::vector<km_aborted_txn> aborted;
	std::map<int64_t, int64_t> open; // pid -> first offset
	std::map<int64_t, int32_t> seq;
	int64_t off = 0;
	uint32_t x = 99;
	for (int i = 0; i < 80; i++) {
		x = x * 1103515245u + 12345u;
		int64_t pid = 3 + (x >> 8) % 4;
		bool close = open.count(pid) && (x >> 16) % 3 == 0;
		if (close) {
			bool commit = (x >> 20) % 2;
			bs.push_back(Mk(off, pid, commit));
			if (!commit) {
				int64_t lso = off + 1;
				for (auto &kv : open)
					if (kv.first != pid && kv.second < lso)
						lso = kv.second;
				aborted.push_back({pid, open[pid], off, lso});
			}
			open.erase(pid);
			off += 1;
		} else {
			if (!open.count(pid))
				open[pid] = off;
			bs.push_back(Data(off, pid, 0, seq[pid], 2, true, 150));
			seq[pid] += 2;
			off += 2;
		}
	}
	AppendAll(l, bs);
	ASSERT_GE(Bases(l.dir, ".log").size(), 4u);
	ASSERT_GE(aborted.size(), 5u);
	for (int64_t from = 0; from < off; from += 3)
		for (int64_t upto = from + 1; upto <= off; upto += 7) {
			std::vector<km_aborted_txn> want;
			for (auto &a : aborted)
				if (a.last_offset >= from && a.first_offset < upto)
					want.push_back(a);
			km_aborted_txn got[64];
			int n = km_log_aborted_txns(l.log, from, upto, got, 64);
			ASSERT_EQ((int)want.size(), n) << "[" << from << ", " << upto << ")";
			for (int k = 0; k < n; k++) {
				EXPECT_EQ(want[k].producer_id, got[k].producer_id);
				EXPECT_EQ(want[k].first_offset, got[k].first_offset);
				EXPECT_EQ(want[k].last_offset, got[k].last_offset);
				EXPECT_EQ(want[k].last_stable_offset,
					  got[k].last_stable_offset);
			}
		}
}

// A batch held in `pieces` separate, non-adjacent runs of memory.
struct ChainedBatch {
	std::vector<uint8_t> bytes; // the batch, contiguous, for comparison
	std::vector<uint8_t> arena; // pieces with a gap byte between them
	std::vector<iovec> iov;
	km_chain chain;
	km_batch view;

	ChainedBatch(std::vector<uint8_t> b, size_t pieces) : bytes(std::move(b))
	{
		arena.resize(bytes.size() + 2 * pieces);
		size_t at = 0, in = 0;
		for (size_t k = 0; k < pieces; k++) {
			size_t len = bytes.size() / pieces +
				     (k < bytes.size() % pieces ? 1 : 0);
			memcpy(&arena[at], &bytes[in], len);
			iov.push_back({&arena[at], len});
			at += len + 2; // never adjacent: no merging into one iovec
			in += len;
		}
		chain = {iov.data(), (uint32_t)iov.size()};
		int rc = km_batch_parse(&view, &chain, km_chain_start(&chain),
					KM_BATCH_BYTES_MAX);
		EXPECT_EQ((int)bytes.size(), rc);
	}
	ChainedBatch(const ChainedBatch &) = delete;
};

// KM_LOG_WRITE_IOV_MAX (32) iovecs go in one write; a batch in more pieces
// spans writes, each of which must land at its own file position.
TEST(Append, ChainedBatchesWriteTheRightBytes)
{
	TempDir td;
	Log l(td.path);
	std::vector<std::unique_ptr<ChainedBatch>> keep;
	std::vector<uint8_t> all;
	int64_t off = 0;
	// Alone, one append each.
	for (size_t pieces : {1, 2, 3, 31, 32, 33, 40, 64, 65, 70, 100}) {
		keep.emplace_back(new ChainedBatch(
			Data(off, 3, 0, (int32_t)off, 5, false, 200), pieces));
		all.insert(all.end(), keep.back()->bytes.begin(),
			   keep.back()->bytes.end());
		km_log_append_result res;
		ASSERT_EQ(1, km_log_append_burst(l.log, &keep.back()->view, 1,
						 KM_ORIGIN_MIRROR, &res))
			<< pieces << " pieces";
		ASSERT_EQ(0, km_log_sync(l.log));
		off += 5;
	}
	// And in one burst, so pieces of different batches share writes.
	std::vector<km_batch> views;
	for (size_t pieces : {7, 30, 9, 45, 1, 33}) {
		keep.emplace_back(new ChainedBatch(
			Data(off, 3, 0, (int32_t)off, 5, false, 200), pieces));
		all.insert(all.end(), keep.back()->bytes.begin(),
			   keep.back()->bytes.end());
		views.push_back(keep.back()->view);
		off += 5;
	}
	km_log_append_result res;
	ASSERT_EQ((int)views.size(), km_log_append_burst(l.log, views.data(),
							 views.size(),
							 KM_ORIGIN_MIRROR, &res));
	ASSERT_EQ(0, km_log_sync(l.log));
	EXPECT_EQ(off, km_log_durable_offset(l.log));
	std::vector<FileBatch> fb = WalkLog(l.dir + "/" + SegName(0, ".log"));
	EXPECT_EQ(keep.size(), fb.size());
	// Every byte of the .log parses (but a direct write's zero padding).
	EXPECT_EQ(all, ReadOpenLog(l.dir + "/" + SegName(0, ".log")));
	EXPECT_EQ(all, ReadAll(l.log, 0, off));
}

// "when the write queue is full the rest stay the caller's, to retry after
// km_log_poll()": KM_LOG_WRITES_MAX (64) writes of up to 32 iovecs each.
TEST(Append, BurstLargerThanTheWriteQueueIsShort)
{
	TempDir td;
	// The writev queue is the buffered path's: a direct write copies the
	// batches into the worker's buffers, a burst is short there only once
	// they are all in flight (80 MiB).
	Log l(td.path, [](km_log_config &c) {
		c.flush_always = false;
		c.direct_io = false;
	}, 256);
	const int n = 64 * 32 + 500;
	std::vector<std::unique_ptr<Batch>> keep;
	std::vector<km_batch> views;
	std::vector<uint8_t> all;
	for (int i = 0; i < n; i++) {
		keep.emplace_back(new Batch(Data(i, 3, 0, i, 1, false, 10)));
		views.push_back(keep.back()->view);
		all.insert(all.end(), keep.back()->bytes.begin(),
			   keep.back()->bytes.end());
	}
	km_log_append_result res;
	int got = km_log_append_burst(l.log, views.data(), n, KM_ORIGIN_MIRROR, &res);
	ASSERT_GT(got, 0);
	EXPECT_LT(got, n) << "the burst needs more writes than the queue holds";
	EXPECT_EQ((uint32_t)got, res.appended);
	EXPECT_EQ(got - 1, res.last_offset);
	EXPECT_EQ(0, km_log_error(l.log));
	EXPECT_EQ(got, km_log_end_offset(l.log));
	// The rest goes in once completions are reaped.
	int done = got;
	for (int guard = 0; done < n && guard < 1000; guard++) {
		int rc = km_uring_poll(&l.ring, true);
		ASSERT_GE(rc, 0);
		rc = km_log_append_burst(l.log, views.data() + done, n - done,
					 KM_ORIGIN_MIRROR, &res);
		ASSERT_GE(rc, 0) << km_strerror(rc);
		done += rc;
	}
	ASSERT_EQ(n, done);
	ASSERT_EQ(0, km_log_flush(l.log));
	ASSERT_EQ(0, km_log_sync(l.log));
	EXPECT_EQ(n, km_log_durable_offset(l.log));
	EXPECT_EQ(all, ReadAll(l.log, 0, n));
}

// One burst that rolls more segments than there are pending-sync slots
// (KM_LOG_FLUSHES_MAX, 8): a full sync queue is back-pressure like a full
// write queue (a short count), not a failure of the log.
TEST(Append, BurstAcrossManyRollsDoesNotFailTheLog)
{
	TempDir td;
	Log l(td.path, [](km_log_config &c) {
		c.segment_bytes = 1024;
		c.prealloc_bytes = 4096;
	});
	const int n = 24;
	std::vector<std::unique_ptr<Batch>> keep;
	std::vector<km_batch> views;
	std::vector<uint8_t> all;
	for (int i = 0; i < n; i++) {
		keep.emplace_back(new Batch(Data(i, 3, 0, i, 1, false, 600)));
		views.push_back(keep.back()->view);
		all.insert(all.end(), keep.back()->bytes.begin(),
			   keep.back()->bytes.end());
	}
	int done = 0;
	for (int guard = 0; done < n && guard < 100; guard++) {
		km_log_append_result res;
		int rc = km_log_append_burst(l.log, views.data() + done, n - done,
					     KM_ORIGIN_MIRROR, &res);
		ASSERT_GE(rc, 0) << km_strerror(rc);
		ASSERT_EQ(0, km_log_error(l.log)) << km_strerror(km_log_error(l.log));
		done += rc;
		ASSERT_GE(km_uring_poll(&l.ring, true), 0);
	}
	ASSERT_EQ(n, done);
	ASSERT_EQ(0, km_log_sync(l.log));
	EXPECT_EQ(n, km_log_durable_offset(l.log));
	EXPECT_EQ(all, ReadAll(l.log, 0, n));
	EXPECT_GE(Bases(l.dir, ".log").size(), (size_t)n - 1);
}

// The worker's ring is shared with its sockets (uring.h: multishot recv
// "stays in flight until a CQE without IORING_CQE_F_MORE ends it"). Waiting
// for the log's own writes and syncs must not wait for those.
TEST(Append, SyncWaitsOnlyForTheLogsOwnRequests)
{
	TempDir td;
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		alarm(3); // the watchdog: a hang ends as SIGALRM
		Log l(td.path);
		int sv[2];
		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0)
			_exit(2);
		static km_io_req sock_req;
		sock_req.fn = [](km_io_req *, int, uint32_t) {};
		io_uring_sqe *sqe = io_uring_get_sqe(&l.ring.ring);
		io_uring_prep_poll_multishot(sqe, sv[0], POLLIN);
		io_uring_sqe_set_data(sqe, &sock_req);
		km_uring_note_queued(&l.ring);
		Batch b(Data(0, 3, 0, 0, 1));
		km_log_append_result res;
		if (km_log_append_burst(l.log, &b.view, 1, KM_ORIGIN_MIRROR, &res) != 1)
			_exit(3);
		if (km_log_sync(l.log) != 0 || km_log_durable_offset(l.log) != 1)
			_exit(4);
		if (km_log_truncate_to(l.log, 1, nullptr, nullptr) != 1)
			_exit(5);
		_exit(0); // the socket request is still armed: no ring teardown
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		<< (WIFSIGNALED(status) ? strsignal(WTERMSIG(status))
					: std::to_string(WEXITSTATUS(status)))
		<< ": km_log_sync waited for a socket request on the shared ring";
}

// The requests the log prepared on ring since sqe_tail was `from` (liburing
// leaves prepared SQEs in place after submitting them).
std::vector<io_uring_sqe> PreparedSince(km_uring *ring, unsigned from)
{
	const io_uring_sq *sq = &ring->ring.sq;
	std::vector<io_uring_sqe> out;
	EXPECT_LE(sq->sqe_tail - from, sq->ring_entries) << "SQEs overwritten";
	for (unsigned i = from; i != sq->sqe_tail; i++)
		out.push_back(sq->sqes[i & sq->ring_mask]);
	return out;
}

std::string FdPath(int fd)
{
	char buf[4096];
	ssize_t n = readlink(("/proc/self/fd/" + std::to_string(fd)).c_str(), buf,
			    sizeof(buf) - 1);
	return n > 0 ? std::string(buf, (size_t)n) : "";
}

// R6: the durable offset (the HW clients are served up to) never passes the
// appended one. io_uring orders nothing between requests that are neither
// linked (IOSQE_IO_LINK) nor drained (IOSQE_IO_DRAIN): an fdatasync
// submitted with the writes it must cover may complete before them and
// publish bytes that are not written yet. So the log submits a segment's
// sync only once those writes have completed, and then submits it. The
// requests the log prepares are read back from the test's ring after the
// appends and the flush, before any completion is reaped (so none of those
// writes can have completed), and again once the sync has completed.
TEST(Append, ASyncIsSubmittedOnlyAfterTheWritesItCovers)
{
	FastTempDir td;
	Log l(td.path, [](km_log_config &c) { c.flush_always = false; });
	std::vector<std::unique_ptr<Batch>> keep;
	int64_t off = 0;
	for (int round = 0; round < 5; round++) {
		SCOPED_TRACE("round " + std::to_string(round));
		unsigned from = l.ring.ring.sq.sqe_tail;
		for (int i = 0; i < 3; i++, off += 2) {
			keep.emplace_back(new Batch(Data(off, 3, 0, (int32_t)off, 2)));
			km_log_append_result res;
			ASSERT_EQ(1, km_log_append_burst(l.log, &keep.back()->view, 1,
							 KM_ORIGIN_MIRROR, &res));
		}
		ASSERT_EQ(0, km_log_flush(l.log));
		std::vector<io_uring_sqe> sub = PreparedSince(&l.ring, from);
		int writes = 0, unordered_syncs = 0;
		for (size_t k = 0; k < sub.size(); k++) {
			writes += sub[k].opcode == IORING_OP_WRITEV ||
				  sub[k].opcode == IORING_OP_WRITE ||
				  sub[k].opcode == IORING_OP_WRITE_FIXED;
			bool ordered = (sub[k].flags & IOSQE_IO_DRAIN) ||
				       (k > 0 && (sub[k - 1].flags & IOSQE_IO_LINK));
			unordered_syncs += sub[k].opcode == IORING_OP_FSYNC && !ordered;
		}
		ASSERT_GT(writes, 0) << "the appends' writes were submitted";
		EXPECT_EQ(0, unordered_syncs)
			<< "a sync submitted with the writes it must cover";
		EXPECT_EQ(off - 6, km_log_durable_offset(l.log));

		from = l.ring.ring.sq.sqe_tail;
		for (int n = 0; n < 1000 && km_log_durable_offset(l.log) < off; n++) {
			ASSERT_LE(0, km_uring_poll(&l.ring, true));
			ASSERT_LE(km_log_durable_offset(l.log),
				  km_log_appended_offset(l.log));
		}
		ASSERT_EQ(off, km_log_durable_offset(l.log));
		int syncs = 0;
		for (const io_uring_sqe &e : PreparedSince(&l.ring, from))
			syncs += e.opcode == IORING_OP_FSYNC &&
				 EndsWith(FdPath(e.fd), ".log");
		EXPECT_EQ(1, syncs) << "one fdatasync of the segment, after its writes";
		keep.clear();
	}
}

// A mirrored batch that producer state refuses (here a transactional
// control batch whose type is not ABORT/COMMIT: KM_ECTRLKEY) must leave the
// log as it was, even when it arrived after an offset gap and needed a new
// segment: the next valid batch, in that gap, is appended normally.
// Malformed network input is never an assertion (STYLE 11).
TEST(Append, RefusedBatchThatWouldRollLeavesTheLogUsable)
{
	TempDir td;
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(td.path, [](km_log_config &c) { c.segment_bytes = 1024; });
		Batch a(Data(0, 3, 0, 0, 2, false, 400));
		if (l.Append(a) != 1)
			_exit(2);
		// Control + transactional, producer 3, key type 5 (KRAFT_VERSION),
		// large enough to need a new segment, after a gap (2..99).
		uint8_t key[4] = {0, 0, 0, 5};
		std::string big(700, 'x');
		km_record_spec r = {key, 4, big.data(), (int32_t)big.size(), 1000,
				    nullptr, 0};
		km_batch_spec spec = {100, 0,
				      (int16_t)(KM_BATCH_ATTR_CONTROL |
						KM_BATCH_ATTR_TRANSACTIONAL),
				      3, 0, -1};
		std::vector<uint8_t> bad(km_records_build_size(&r, 1));
		if (km_records_build(bad.data(), bad.size(), &spec, &r, 1) !=
		    (int)bad.size())
			_exit(7);
		Batch b(bad);
		km_log_append_result res;
		int rc = km_log_append_burst(l.log, &b.view, 1, KM_ORIGIN_MIRROR, &res);
		if (rc != KM_ECTRLKEY)
			_exit(3);
		if (km_log_end_offset(l.log) != 2 || km_log_error(l.log) != 0)
			_exit(4);
		Batch c(Data(50, 3, 0, 2, 1, false, 400)); // in the gap 2..99
		if (l.Append(c) != 1 || km_log_durable_offset(l.log) != 51)
			_exit(5);
		std::vector<uint8_t> all = ReadAll(l.log, 0, 51);
		if (all.size() != a.bytes.size() + c.bytes.size())
			_exit(6);
		_exit(0);
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
		<< (WIFSIGNALED(status) ? strsignal(WTERMSIG(status))
					: "exit " + std::to_string(WEXITSTATUS(status)));
}

// ---- truncation end offsets ----

// The first index entry of the active segment: (last offset of the indexed
// batch, its position).
std::pair<int64_t, uint32_t> FirstIndexEntry(const std::string &dir, int64_t base)
{
	std::vector<uint8_t> idx = ReadFile(dir + "/" + SegName(base, ".index"));
	if (idx.size() < 8)
		return {-1, 0};
	return {base + (int32_t)GetBE(&idx[0], 4), (uint32_t)GetBE(&idx[4], 4)};
}

// Cutting at the last offset of a batch that has an index entry cuts that
// batch: the end is the offset after the batch before it.
TEST(Truncate, AtTheLastOffsetOfAnIndexedBatch)
{
	TempDir td;
	Log l(td.path, [](km_log_config &c) { c.index_interval_bytes = 300; });
	std::vector<std::vector<uint8_t>> bs;
	for (int i = 0; i < 12; i++)
		bs.push_back(Data(i * 3, 3, 0, i * 3, 3, false, 80));
	AppendAll(l, bs);
	auto e = FirstIndexEntry(l.dir, 0);
	ASSERT_GT(e.first, 0) << "an index entry was written";
	ASSERT_GT(e.second, 0u);
	int64_t batch_base = e.first - 2; // 3 records per batch
	uint64_t bytes;
	uint32_t batches;
	EXPECT_EQ(batch_base, km_log_truncate_to(l.log, e.first, &bytes, &batches))
		<< "cut at " << e.first << ", inside the batch " << batch_base
		<< ".." << e.first;
	EXPECT_EQ(batch_base, km_log_end_offset(l.log));
	EXPECT_EQ(e.second, ReadFile(l.dir + "/" + SegName(0, ".log")).size())
		<< "the .log is cut at the batch's position";
	EXPECT_EQ((uint32_t)(12 - batch_base / 3), batches);
	// The log goes on from there.
	Batch next(Data(batch_base, 3, 0, (int32_t)batch_base, 1, false, 80));
	ASSERT_EQ(1, l.Append(next));
	EXPECT_EQ(batch_base + 1, km_log_durable_offset(l.log));
}

// A cut inside the first batch of a segment that starts after a compaction
// gap leaves nothing of that segment: the end must be the same as for a cut
// at the segment's base (and as for a log that never had the segment).
TEST(Truncate, CutThatEmptiesASegmentAfterAGap)
{
	for (int64_t extra : {0, 1, 2}) {
		SCOPED_TRACE("cut at the segment base + " + std::to_string(extra));
		TempDir td;
		Log l(td.path, [](km_log_config &c) { c.segment_bytes = 1024; });
		// 0..4 in segment 0 (2 x ~500 B), then a gap, then 10..12.
		AppendAll(l, {Data(0, 3, 0, 0, 2, false, 200),
			      Data(2, 3, 0, 2, 3, false, 150),
			      Data(10, 3, 0, 5, 3, false, 500)});
		ASSERT_EQ((std::vector<int64_t>{0, 10}), Bases(l.dir, ".log"));
		EXPECT_EQ(5, km_log_truncate_to(l.log, 10 + extra, nullptr, nullptr));
		EXPECT_EQ(5, km_log_end_offset(l.log));
		EXPECT_EQ((std::vector<int64_t>{0}), Bases(l.dir, ".log"));
	}
}

} // namespace
