// Goal: km_local_write, the owner-side writer behind local Produce, appends
// client batches with Kafka's CLIENT rules and reports each outcome exactly
// once, from km_local_write_poll() only: after the append for acks 0/1,
// after the data is durable for acks -1 (without waiting for the log's
// flush timer), with the original offset for a duplicate, and with a code
// for every refused batch (corrupt, control, transactional, a mirrored
// producer's id, truncated, too many batches) while nothing of it is
// written. Memory and pending slots are bounded and come back once the log
// is done with the copies; a full write queue is retried in order.
// Method: a real km_log on a real io_uring in a temporary directory, driven
// on the test thread (poll with a deadline, no sleeps); batches are built
// with km_records_build / km_ctrl_build_marker.
#include <gtest/gtest.h>

#include <liburing.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "common/endian.h"
#include "common/errors.h"
#include "dataplane/serve/local_write.h"
#include "fe_support.h"
#include "iouring_log/log.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/records.h"

namespace {

using Bytes = std::vector<uint8_t>;
using Clock = std::chrono::steady_clock;

// One uncompressed batch of n records, valued "v<i>" padded to value_bytes.
Bytes Batch(int n, int64_t pid = -1, int16_t epoch = -1, int32_t seq = -1,
	    int16_t attrs = 0, size_t value_bytes = 16)
{
	std::vector<std::string> vals(n);
	std::vector<km_record_spec> recs(n);
	for (int i = 0; i < n; i++) {
		vals[i] = "v" + std::to_string(i);
		vals[i].resize(value_bytes, 'x');
		recs[i] = {};
		recs[i].key = nullptr;
		recs[i].key_len = -1;
		recs[i].value = vals[i].data();
		recs[i].value_len = (int32_t)vals[i].size();
		recs[i].timestamp = 1700000000000LL + i;
	}
	km_batch_spec spec = {0, -1, attrs, pid, epoch, seq};
	int size = km_records_build_size(recs.data(), n);
	EXPECT_GT(size, 0);
	Bytes out(size > 0 ? size : 0);
	EXPECT_EQ(size, km_records_build(out.data(), out.size(), &spec,
					 recs.data(), n));
	return out;
}

class LocalWrite : public ::testing::Test {
protected:
	void SetUp() override
	{
		char tmpl[] = "/tmp/km-lw-XXXXXX";
		ASSERT_NE(nullptr, mkdtemp(tmpl));
		dir_ = tmpl;
		ASSERT_EQ(0, km_uring_init(&ring_, 256));
		km_log_config lc;
		km_log_config_defaults(&lc, dir_.c_str(), "t", 0);
		lc.segment_bytes = 1 << 20;
		lc.index_bytes_max = 64 * 1024;
		lc.prealloc_bytes = 1 << 20;
		// Only an explicit flush makes data durable here: acks=-1
		// must not wait for a timer.
		lc.flush_interval_ms = 3600 * 1000;
		lc.flush_bytes = 1ull << 40;
		int rc = km_log_open(&log_, &lc, &ring_, nullptr);
		ASSERT_EQ(0, rc) << km_strerror(rc);
		ASSERT_NO_FATAL_FAILURE(Create(1 << 20, 256));
	}
	void TearDown() override
	{
		if (log_) {
			EXPECT_EQ(0, km_log_close(log_));
		}
		km_local_write_destroy(lw_);
		km_uring_exit(&ring_);
		if (!dir_.empty()) {
			EXPECT_EQ(0, system(("rm -rf " + dir_).c_str()));
		}
	}
	void Create(uint32_t mem, uint32_t pending, bool txn = false)
	{
		km_local_write_destroy(lw_);
		lw_ = nullptr;
		km_local_write_config c = {};
		c.log = log_;
		c.mem_bytes = mem;
		c.pending_max = pending;
		c.txn_coordinated = txn;
		ASSERT_EQ(0, km_local_write_create(&c, &lw_));
	}
	int Marker(int64_t pid, int16_t epoch, bool commit, fe_outcome *o)
	{
		*o = {};
		o->log = log_;
		return fe_lw_marker(lw_, pid, epoch, commit, o);
	}
	int Submit(const Bytes &b, int16_t acks, fe_outcome *o)
	{
		*o = {};
		o->log = log_;
		return fe_lw_submit(lw_, b.data(), (uint32_t)b.size(), acks, o);
	}
	void Pump()
	{
		ASSERT_GE(km_uring_submit(&ring_), 0);
		if (km_uring_busy(&ring_) > 0) {
			__kernel_timespec ts{0, 5 * 1000000LL};
			io_uring_cqe *cqe;
			(void)io_uring_wait_cqe_timeout(&ring_.ring, &cqe, &ts);
		}
		ASSERT_GE(km_uring_poll(&ring_, false), 0);
		km_local_write_poll(lw_);
	}
	template <class P> void Until(P pred)
	{
		auto end = Clock::now() + std::chrono::seconds(10);
		while (!pred() && Clock::now() < end)
			ASSERT_NO_FATAL_FAILURE(Pump());
		ASSERT_TRUE(pred()) << "timed out";
	}
	void Done(const fe_outcome &o)
	{
		Until([&] { return o.done > 0; });
	}

	std::string dir_;
	km_uring ring_ = {};
	km_log *log_ = nullptr;
	km_local_write *lw_ = nullptr;
};

TEST_F(LocalWrite, AppendsAndReportsOnlyFromPoll)
{
	fe_outcome a, b;
	ASSERT_EQ(0, Submit(Batch(3), 1, &a));
	ASSERT_EQ(0, Submit(Batch(2), 0, &b));
	EXPECT_EQ(0, a.done) << "reported from inside submit";
	EXPECT_EQ(0, b.done);
	ASSERT_NO_FATAL_FAILURE(Done(a));
	ASSERT_NO_FATAL_FAILURE(Done(b));
	EXPECT_EQ(0, a.err);
	EXPECT_EQ(0, a.base_offset);
	EXPECT_EQ(0, b.err);
	EXPECT_EQ(3, b.base_offset);
	EXPECT_EQ(0, a.log_start);
	// acks 0/1: answered once appended.
	EXPECT_GE(a.appended_at_done, 3);
	EXPECT_EQ(5, km_log_end_offset(log_));
	for (int i = 0; i < 20; i++)
		ASSERT_NO_FATAL_FAILURE(Pump());
	EXPECT_EQ(1, a.done) << "reported twice";
	EXPECT_EQ(1, b.done);
	EXPECT_EQ(0u, km_local_write_pending(lw_));
	km_local_write_stats st;
	km_local_write_get_stats(lw_, &st);
	EXPECT_EQ(2u, st.submits);
	EXPECT_EQ(2u, st.batches);
	EXPECT_EQ(0u, st.errors);
}

// acks=-1 is answered once the batch is durable (R6), and the writer
// flushes itself: the log's timer would take an hour here. The ring is
// stepped by hand to hold the moment between the two: the log issues its
// fdatasync only from the write's completion, and it reaches the kernel
// only at the next submit, so after the completion that publishes the
// appended offset nothing is synced yet, whatever the disk's speed.
TEST_F(LocalWrite, AcksAllWaitsForDurable)
{
	fe_outcome a;
	ASSERT_EQ(0, Submit(Batch(4), -1, &a));
	km_local_write_poll(lw_); // hands the batch to the log, asks a sync
	auto end = Clock::now() + std::chrono::seconds(10);
	while (km_log_appended_offset(log_) < 4 && Clock::now() < end)
		ASSERT_GE(km_uring_poll(&ring_, true), 0); // reaps, no submit after
	ASSERT_EQ(4, km_log_appended_offset(log_));
	ASSERT_EQ(0, km_log_durable_offset(log_));
	km_local_write_poll(lw_);
	EXPECT_EQ(0, a.done) << "acks=-1 answered before its batch was synced";
	ASSERT_EQ(0, km_log_durable_offset(log_)) << "the check ran held";
	ASSERT_NO_FATAL_FAILURE(Done(a));
	EXPECT_EQ(0, a.err);
	EXPECT_EQ(0, a.base_offset);
	EXPECT_GE(a.durable_at_done, 4);
	EXPECT_EQ(4, km_log_durable_offset(log_));
	// acks=1 is not held back for durability: nothing flushes it.
	fe_outcome b;
	ASSERT_EQ(0, Submit(Batch(1), 1, &b));
	ASSERT_NO_FATAL_FAILURE(Done(b));
	EXPECT_EQ(4, b.base_offset);
	EXPECT_EQ(4, km_log_durable_offset(log_));
}

// Kafka answers a resent batch with the original's offsets (and so a
// retried Produce succeeds); a sequence gap is refused.
TEST_F(LocalWrite, DuplicateGetsOriginalOffsetAndGapIsRefused)
{
	fe_outcome a, dup, gap;
	ASSERT_EQ(0, Submit(Batch(2), 1, &a));
	ASSERT_NO_FATAL_FAILURE(Done(a));
	Bytes idem = Batch(3, 1000, 0, 0);
	ASSERT_EQ(0, Submit(idem, -1, &a));
	ASSERT_NO_FATAL_FAILURE(Done(a));
	ASSERT_EQ(0, a.err);
	EXPECT_EQ(2, a.base_offset);
	ASSERT_EQ(0, Submit(idem, -1, &dup));
	ASSERT_NO_FATAL_FAILURE(Done(dup));
	EXPECT_EQ(0, dup.err) << km_strerror(dup.err);
	EXPECT_EQ(2, dup.base_offset);
	EXPECT_EQ(5, km_log_end_offset(log_));
	ASSERT_EQ(0, Submit(Batch(1, 1000, 0, 7), -1, &gap));
	ASSERT_NO_FATAL_FAILURE(Done(gap));
	EXPECT_EQ(KM_EOUTOFORDERSEQ, gap.err);
	EXPECT_EQ(-1, gap.base_offset);
	ASSERT_EQ(0, Submit(Batch(1, 1000, 0, 3), 1, &a));
	ASSERT_NO_FATAL_FAILURE(Done(a));
	EXPECT_EQ(0, a.err);
	EXPECT_EQ(5, a.base_offset);
	km_local_write_stats st;
	km_local_write_get_stats(lw_, &st);
	EXPECT_EQ(1u, st.duplicates);
}

// Everything a client may not write, or that is not a whole valid batch,
// is refused with its own code and nothing of the submit is written.
TEST_F(LocalWrite, RefusedBatchesWriteNothing)
{
	struct Case {
		const char *what;
		Bytes bytes;
		int err;
	};
	std::vector<Case> cases;
	Bytes bad = Batch(2);
	bad.back() ^= 0x01;
	cases.push_back({"bad crc", bad, KM_EBADCRC});
	Bytes marker(KM_CTRL_MARKER_BATCH_BYTES);
	km_ctrl_spec cs = {0, 0, 1700000000000LL};
	ASSERT_EQ((int)marker.size(),
		  km_ctrl_build_marker(marker.data(), marker.size(), &cs, 1000,
				       0, false, 0));
	cases.push_back({"control batch", marker, -EPERM});
	cases.push_back({"transactional", Batch(1, 1000, 0, 0,
						KM_BATCH_ATTR_TRANSACTIONAL),
			 -EPERM});
	cases.push_back({"mirrored producer id", Batch(1, -7, 0, 0), -EPERM});
	Bytes cut = Batch(2);
	cut.resize(cut.size() - 5);
	cases.push_back({"truncated", cut, KM_EWIRETRUNC});
	Bytes two = Batch(1);
	Bytes second = Batch(1);
	second[KM_BATCH_OFF_MAGIC] = 1; // a valid first batch, then garbage
	two.insert(two.end(), second.begin(), second.end());
	cases.push_back({"second batch bad magic", two, KM_EBADMAGIC});
	Bytes many;
	for (int i = 0; i < KM_LOCAL_WRITE_BATCHES_MAX + 1; i++) {
		Bytes b = Batch(1);
		many.insert(many.end(), b.begin(), b.end());
	}
	cases.push_back({"too many batches", many, -E2BIG});
	for (const Case &c : cases) {
		fe_outcome o;
		ASSERT_EQ(0, Submit(c.bytes, -1, &o)) << c.what;
		ASSERT_NO_FATAL_FAILURE(Done(o));
		EXPECT_EQ(c.err, o.err) << c.what << ": " << km_strerror(o.err);
		EXPECT_EQ(-1, o.base_offset) << c.what;
	}
	EXPECT_EQ(0, km_log_end_offset(log_));
	fe_outcome o;
	ASSERT_EQ(0, Submit(Batch(1), 1, &o)); // still writable
	ASSERT_NO_FATAL_FAILURE(Done(o));
	EXPECT_EQ(0, o.base_offset);
	EXPECT_EQ(-EINVAL, Submit(Batch(1), 2, &o));
	EXPECT_EQ(-EINVAL, fe_lw_submit(lw_, "", 0, 1, &o));
}

// Memory and slots are bounded: a submit that does not fit now is
// -ENOBUFS (retry later), one that can never fit is KM_EBATCHMAX; both
// come back once the log has written the copies.
TEST_F(LocalWrite, BoundedMemoryAndSlots)
{
	Bytes b = Batch(1, -1, -1, -1, 0, 1500); // ~1.6 KB
	ASSERT_NO_FATAL_FAILURE(Create((uint32_t)b.size() * 2 + 100, 3));
	fe_outcome o[4];
	ASSERT_EQ(0, Submit(b, 1, &o[0]));
	ASSERT_EQ(0, Submit(b, 1, &o[1]));
	EXPECT_EQ(-ENOBUFS, Submit(b, 1, &o[2])) << "memory is full";
	Bytes huge = Batch(1, -1, -1, -1, 0, 4000);
	EXPECT_EQ(KM_EBATCHMAX, Submit(huge, 1, &o[3]));
	ASSERT_NO_FATAL_FAILURE(Done(o[0]));
	ASSERT_NO_FATAL_FAILURE(Done(o[1]));
	Until([&] { return km_local_write_pending(lw_) == 0; });
	Bytes small = Batch(1);
	ASSERT_EQ(0, Submit(small, 1, &o[0]));
	ASSERT_EQ(0, Submit(small, 1, &o[1]));
	ASSERT_EQ(0, Submit(small, 1, &o[2]));
	EXPECT_EQ(-ENOBUFS, Submit(small, 1, &o[3])) << "slots are full";
	for (int i = 0; i < 3; i++)
		ASSERT_NO_FATAL_FAILURE(Done(o[i]));
	EXPECT_EQ(2, o[0].base_offset);
	EXPECT_EQ(4, o[2].base_offset);
	km_local_write_stats st;
	km_local_write_get_stats(lw_, &st);
	EXPECT_EQ(2u, st.refused_full);
}

// More submits than the log's write queue takes at once: the rest wait in
// order and go in on later polls; offsets follow submit order.
TEST_F(LocalWrite, FullWriteQueueIsRetriedInOrder)
{
	const int n = 200;
	std::vector<fe_outcome> o(n);
	Bytes b = Batch(2);
	for (int i = 0; i < n; i++)
		ASSERT_EQ(0, Submit(b, i % 2 ? -1 : 1, &o[i])) << i;
	EXPECT_LT(km_log_end_offset(log_), 2 * n) << "the queue never filled";
	Until([&] {
		for (const fe_outcome &x : o)
			if (x.done == 0)
				return false;
		return true;
	});
	for (int i = 0; i < n; i++) {
		EXPECT_EQ(0, o[i].err) << i;
		EXPECT_EQ(2 * i, o[i].base_offset) << i;
	}
	EXPECT_EQ(2 * n, km_log_end_offset(log_));
}

// Records as the network delivers them, cut across receive buffers: the
// writer copies them once, into its own memory, and never writes into the
// caller's (the buffers go back to the network when submit returns); the
// log holds the same bytes, with the offset and leader epoch the log gave.
TEST_F(LocalWrite, RecordsStraddlingBuffersAreCopiedOnceAndLeftAlone)
{
	Bytes a = Batch(3, -1, -1, -1, 0, 700), b = Batch(2, -1, -1, -1, 0, 90);
	Bytes a0 = a, b0 = b;
	fe_outcome oa = {}, ob = {};
	oa.log = ob.log = log_;
	ASSERT_EQ(0, fe_lw_submit_split(lw_, a.data(), (uint32_t)a.size(), 5,
					1, &oa));
	ASSERT_EQ(0, fe_lw_submit_split(lw_, b.data(), (uint32_t)b.size(), 16,
					-1, &ob));
	EXPECT_EQ(a0, a) << "submit wrote into the caller's buffers";
	// The caller reuses its buffers at once, as the network does.
	std::fill(a.begin(), a.end(), 0xee);
	std::fill(b.begin(), b.end(), 0xee);
	ASSERT_NO_FATAL_FAILURE(Done(oa));
	ASSERT_NO_FATAL_FAILURE(Done(ob));
	ASSERT_EQ(0, oa.err) << km_strerror(oa.err);
	ASSERT_EQ(0, ob.err) << km_strerror(ob.err);
	EXPECT_EQ(3, ob.base_offset);
	Bytes got(a0.size() + b0.size());
	km_log_read_result res;
	ASSERT_EQ(0, km_log_read(log_, 0, 5, (uint32_t)got.size(), got.data(),
				 got.size(), &res));
	ASSERT_EQ(got.size(), res.bytes);
	// baseOffset and partitionLeaderEpoch are the log's; from magic on,
	// every byte is the client's.
	EXPECT_TRUE(std::equal(a0.begin() + KM_BATCH_OFF_MAGIC, a0.end(),
			       got.begin() + KM_BATCH_OFF_MAGIC));
	EXPECT_TRUE(std::equal(b0.begin() + KM_BATCH_OFF_MAGIC, b0.end(),
			       got.begin() + a0.size() + KM_BATCH_OFF_MAGIC));
	EXPECT_EQ(3, (int64_t)km_load_be64(got.data() + a0.size()));
}

int g_released;
void *g_last_released;

void CountRelease(void *p)
{
	g_released++;
	g_last_released = p;
	free(p);
}

// A forwarded Produce's copy is adopted, not copied again: the writer
// appends from it, gives it back once the log has written it (after the
// outcome), refuses more than mem_bytes of such copies at once (the
// caller keeps a refused one), and gives back what it still holds when
// destroyed.
TEST_F(LocalWrite, AdoptedRecordsAreReleasedOnceWritten)
{
	Bytes b = Batch(2, -1, -1, -1, 0, 1500);
	ASSERT_NO_FATAL_FAILURE(Create((uint32_t)b.size() * 2 + 100, 8));
	g_released = 0;
	auto copy = [&] {
		void *p = malloc(b.size());
		memcpy(p, b.data(), b.size());
		return p;
	};
	fe_outcome o[4] = {};
	void *p0 = copy(), *p1 = copy(), *p2 = copy();
	for (fe_outcome &x : o)
		x.log = log_;
	ASSERT_EQ(0, fe_lw_adopt(lw_, p0, (uint32_t)b.size(), -1, &o[0],
				 CountRelease));
	ASSERT_EQ(0, fe_lw_adopt(lw_, p1, (uint32_t)b.size(), 1, &o[1],
				 CountRelease));
	EXPECT_EQ(-ENOBUFS, fe_lw_adopt(lw_, p2, (uint32_t)b.size(), 1, &o[2],
					CountRelease))
		<< "adopted bytes are bounded by mem_bytes";
	// The ring is not taken by adopted records.
	ASSERT_EQ(0, Submit(b, 1, &o[3]));
	EXPECT_EQ(0, g_released) << "released before the write";
	ASSERT_NO_FATAL_FAILURE(Done(o[0]));
	ASSERT_NO_FATAL_FAILURE(Done(o[1]));
	ASSERT_NO_FATAL_FAILURE(Done(o[3]));
	EXPECT_EQ(0, o[0].err);
	EXPECT_EQ(0, o[0].base_offset);
	EXPECT_EQ(2, o[1].base_offset);
	EXPECT_EQ(4, o[3].base_offset);
	Until([&] { return km_local_write_pending(lw_) == 0; });
	EXPECT_EQ(2, g_released);
	// A refused copy stayed ours; this time it fits.
	ASSERT_EQ(0, fe_lw_adopt(lw_, p2, (uint32_t)b.size(), 1, &o[2],
				 CountRelease));
	EXPECT_EQ(2, g_released);
	// Destroyed before it was appended: given back all the same.
	km_local_write_destroy(lw_);
	lw_ = nullptr;
	EXPECT_EQ(3, g_released);
	EXPECT_EQ(p2, g_last_released);
}

} // namespace

// Issue 20: behind a transaction coordinator (txn_coordinated) a
// producer's transactional batches are taken, and the coordinator's
// COMMIT/ABORT markers (km_local_write_marker) end its transactions in
// submit order, answered once durable: the LSO stays at the open
// transaction's first offset until its marker, then passes it, and an
// aborted transaction is listed for read_committed Fetch with the offsets
// it took. A client's own marker is still refused.
TEST_F(LocalWrite, CoordinatorMarkersEndTransactionalBatches)
{
	// Three slots: the client's marker below reuses a marker's slot.
	ASSERT_NO_FATAL_FAILURE(Create(1 << 20, 3, true));
	const int64_t pid = 1000;
	fe_outcome a, m;
	ASSERT_EQ(0, Submit(Batch(3, pid, 0, 0, KM_BATCH_ATTR_TRANSACTIONAL),
			    -1, &a));
	ASSERT_NO_FATAL_FAILURE(Done(a));
	ASSERT_EQ(0, a.err) << km_strerror(a.err);
	const int64_t first = a.base_offset;
	EXPECT_EQ(first, km_log_lso(log_)) << "open transaction not held";
	ASSERT_EQ(0, Marker(pid, 0, true, &m));
	ASSERT_NO_FATAL_FAILURE(Done(m));
	ASSERT_EQ(0, m.err) << km_strerror(m.err);
	EXPECT_EQ(first + 3, m.base_offset);
	EXPECT_GE(m.durable_at_done, m.base_offset + 1);
	EXPECT_EQ(km_log_end_offset(log_), km_log_lso(log_));

	ASSERT_EQ(0, Submit(Batch(2, pid, 0, 3, KM_BATCH_ATTR_TRANSACTIONAL),
			    -1, &a));
	ASSERT_NO_FATAL_FAILURE(Done(a));
	ASSERT_EQ(0, a.err) << km_strerror(a.err);
	const int64_t second = a.base_offset;
	EXPECT_EQ(second, km_log_lso(log_));
	ASSERT_EQ(0, Marker(pid, 0, false, &m));
	ASSERT_NO_FATAL_FAILURE(Done(m));
	ASSERT_EQ(0, m.err) << km_strerror(m.err);
	EXPECT_EQ(km_log_end_offset(log_), km_log_lso(log_));
	km_aborted_txn ab[4];
	ASSERT_EQ(1, km_log_aborted_txns(log_, 0, km_log_end_offset(log_), ab,
					 4));
	EXPECT_EQ(pid, ab[0].producer_id);
	EXPECT_EQ(second, ab[0].first_offset);
	EXPECT_EQ(m.base_offset, ab[0].last_offset);

	Bytes marker(KM_CTRL_MARKER_BATCH_BYTES);
	km_ctrl_spec cs = {0, 0, 1700000000000LL};
	ASSERT_EQ((int)marker.size(),
		  km_ctrl_build_marker(marker.data(), marker.size(), &cs, pid,
				       0, true, 0));
	ASSERT_EQ(0, Submit(marker, -1, &a));
	ASSERT_NO_FATAL_FAILURE(Done(a));
	EXPECT_EQ(-EPERM, a.err);
}

// A restart writes the markers of a transaction it found PrepareCommit
// again, some perhaps already on disk (issue 20, phase 2a): a marker for a
// producer with no open transaction is appended and harmless - the LSO
// stays the log end, no aborted transaction appears, and the producer's
// next transaction is held and ended as before.
TEST_F(LocalWrite, ARepeatedMarkerOfAnEndedTransactionIsHarmless)
{
	ASSERT_NO_FATAL_FAILURE(Create(1 << 20, 4, true));
	const int64_t pid = 1000;
	fe_outcome a, m;
	ASSERT_EQ(0, Submit(Batch(3, pid, 0, 0, KM_BATCH_ATTR_TRANSACTIONAL),
			    -1, &a));
	ASSERT_NO_FATAL_FAILURE(Done(a));
	ASSERT_EQ(0, a.err) << km_strerror(a.err);
	for (int i = 0; i < 2; i++) {
		ASSERT_EQ(0, Marker(pid, 0, true, &m));
		ASSERT_NO_FATAL_FAILURE(Done(m));
		ASSERT_EQ(0, m.err) << i << ": " << km_strerror(m.err);
		EXPECT_EQ(km_log_end_offset(log_), km_log_lso(log_)) << i;
	}
	km_aborted_txn ab[4];
	EXPECT_EQ(0, km_log_aborted_txns(log_, 0, km_log_end_offset(log_), ab,
					 4));
	ASSERT_EQ(0, Submit(Batch(2, pid, 0, 3, KM_BATCH_ATTR_TRANSACTIONAL),
			    -1, &a));
	ASSERT_NO_FATAL_FAILURE(Done(a));
	ASSERT_EQ(0, a.err) << km_strerror(a.err);
	EXPECT_EQ(a.base_offset, km_log_lso(log_)) << "the next one is held";
	ASSERT_EQ(0, Marker(pid, 0, true, &m));
	ASSERT_NO_FATAL_FAILURE(Done(m));
	ASSERT_EQ(0, m.err) << km_strerror(m.err);
	EXPECT_EQ(km_log_end_offset(log_), km_log_lso(log_));
}
