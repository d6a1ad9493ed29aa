// Goal: the producer state manager (iouring_log/pstate.c) follows Kafka's
// ProducerStateManager / ProducerAppendInfo rules for local (CLIENT) writes,
// tolerates-but-reports anomalies on MIRROR appends (R2), applies the
// MIRROR_PID_RESET barrier (R3), keeps the LSO, and reads/writes Kafka's
// .snapshot format byte for byte (spec §3, §4).
// Method: real batches built with kafka/records.h and kafka/control.h (mapped
// with km_batch_map_pid where they simulate mirrored data) and parsed over a
// one-segment chain are fed to the state; every refused append is checked to
// leave the whole observable state unchanged; snapshot bytes are compared
// with bytes laid out field by field from the spec; the hash table is
// checked against a std::map under random inserts and barriers.
#include <gtest/gtest.h>

#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/chain.h"
#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "iouring_log/pstate.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/records.h"

namespace {

// ---- batches ----

// A parsed batch and the bytes it views (the view points into them, so the
// whole thing stays put on the heap).
struct Batch {
	std::vector<uint8_t> buf;
	struct iovec iov;
	km_chain chain;
	km_batch b;
};
using BatchPtr = std::unique_ptr<Batch>;

BatchPtr Parse(std::vector<uint8_t> bytes)
{
	BatchPtr p(new Batch());
	p->buf = std::move(bytes);
	p->iov.iov_base = p->buf.data();
	p->iov.iov_len = p->buf.size();
	p->chain.iov = &p->iov;
	p->chain.n_iov = 1;
	int rc = km_batch_parse(&p->b, &p->chain, km_chain_start(&p->chain),
				KM_BATCH_BYTES_MAX);
	EXPECT_EQ((int)p->buf.size(), rc);
	return p;
}

BatchPtr Build(int64_t off, int16_t attrs, int64_t pid, int16_t epoch,
	       int32_t seq, int n, int64_t ts, const void *key = nullptr,
	       int32_t key_len = -1, const void *value = "v",
	       int32_t value_len = 1)
{
	std::vector<km_record_spec> recs(n);
	for (auto &r : recs) {
		r = km_record_spec();
		r.key = key;
		r.key_len = key_len;
		r.value = value;
		r.value_len = value_len;
		r.timestamp = ts;
	}
	km_batch_spec spec = {off, 0, attrs, pid, epoch, seq};
	std::vector<uint8_t> out(4096);
	int rc = km_records_build(out.data(), out.size(), &spec, recs.data(), n);
	EXPECT_GT(rc, 0);
	out.resize(rc > 0 ? rc : 0);
	return Parse(out);
}

// A data batch of n records, sequences seq..seq+n-1, offsets off..off+n-1.
BatchPtr Data(int64_t off, int64_t pid, int16_t epoch, int32_t seq, int n,
	      bool txn = false, int64_t ts = 1000)
{
	return Build(off, txn ? KM_BATCH_ATTR_TRANSACTIONAL : 0, pid, epoch,
		     seq, n, ts);
}

BatchPtr Marker(int64_t off, int64_t pid, int16_t epoch, bool commit,
		int32_t coord, int64_t ts = 2000)
{
	std::vector<uint8_t> out(KM_CTRL_MARKER_BATCH_BYTES);
	km_ctrl_spec s = {off, 0, ts};
	int rc = km_ctrl_build_marker(out.data(), out.size(), &s, pid, epoch,
				      commit, coord);
	EXPECT_EQ(KM_CTRL_MARKER_BATCH_BYTES, rc);
	return Parse(out);
}

BatchPtr Barrier(int64_t off, const char *cluster = "Zm9vYmFyYmF6cXV4cXV1eA")
{
	std::vector<uint8_t> out(256);
	km_ctrl_spec s = {off, 0, 3000};
	int rc = km_ctrl_build_pid_reset(out.data(), out.size(), &s, cluster);
	EXPECT_GT(rc, 0);
	out.resize(rc > 0 ? rc : 0);
	return Parse(out);
}

// R1 as the mirror applies it: in place, CRC patched.
BatchPtr Mapped(BatchPtr b)
{
	EXPECT_GE(km_batch_map_pid(&b->b), 0);
	return b;
}

// ---- big-endian byte layout for expected snapshots ----

struct Bytes {
	std::vector<uint8_t> v;
	void I8(uint8_t x) { v.push_back(x); }
	void I16(uint16_t x) { I8(x >> 8); I8(x & 0xff); }
	void I32(uint32_t x) { I16(x >> 16); I16(x & 0xffff); }
	void I64(uint64_t x) { I32(x >> 32); I32(x & 0xffffffff); }
};

void FixCrc(std::vector<uint8_t> &s)
{
	km_store_be32(&s[2], km_crc32c_update(0, &s[6], s.size() - 6));
}

// ---- observable state, for "an error leaves the state unchanged" ----

struct State {
	std::vector<uint8_t> snapshot;
	std::vector<km_producer_info> infos; // per probed id, id -1 if absent
	std::vector<km_producer_info> open;
	km_pstate_stats stats;
	int64_t next_offset, max_pid, first_open;
	uint32_t count;
};

void ExpectInfoEq(const km_producer_info &a, const km_producer_info &b)
{
	EXPECT_EQ(a.producer_id, b.producer_id);
	EXPECT_EQ(a.epoch, b.epoch);
	EXPECT_EQ(a.coordinator_epoch, b.coordinator_epoch);
	EXPECT_EQ(a.last_timestamp, b.last_timestamp);
	EXPECT_EQ(a.txn_first_offset, b.txn_first_offset);
	EXPECT_EQ(a.batch_count, b.batch_count);
	EXPECT_EQ(a.first_seq, b.first_seq);
	EXPECT_EQ(a.last_seq, b.last_seq);
	EXPECT_EQ(a.first_offset, b.first_offset);
	EXPECT_EQ(a.last_offset, b.last_offset);
}

void ExpectSame(const State &a, const State &b)
{
	EXPECT_EQ(a.snapshot, b.snapshot);
	ASSERT_EQ(a.infos.size(), b.infos.size());
	for (size_t i = 0; i < a.infos.size(); i++)
		ExpectInfoEq(a.infos[i], b.infos[i]);
	ASSERT_EQ(a.open.size(), b.open.size());
	for (size_t i = 0; i < a.open.size(); i++)
		ExpectInfoEq(a.open[i], b.open[i]);
	EXPECT_EQ(a.stats.mirror_sequence_gaps, b.stats.mirror_sequence_gaps);
	EXPECT_EQ(a.stats.mirror_epoch_regressions,
		  b.stats.mirror_epoch_regressions);
	EXPECT_EQ(a.stats.mirror_stray_markers, b.stats.mirror_stray_markers);
	EXPECT_EQ(a.stats.barriers_applied, b.stats.barriers_applied);
	EXPECT_EQ(a.next_offset, b.next_offset);
	EXPECT_EQ(a.max_pid, b.max_pid);
	EXPECT_EQ(a.first_open, b.first_open);
	EXPECT_EQ(a.count, b.count);
}

class PState : public ::testing::Test {
protected:
	void SetUp() override { ps = Make(16, 8); }

	km_pstate *Make(uint32_t producers, uint32_t txns)
	{
		km_pstate_config cfg = {producers, txns};
		auto mem = std::make_unique<std::vector<uint64_t>>(
			km_pstate_memsize(&cfg) / 8 + 1);
		km_pstate *p = km_pstate_init(mem->data(), &cfg);
		EXPECT_NE(nullptr, p);
		mems.push_back(std::move(mem));
		return p;
	}

	// hw defaults to "everything appended so far is durable".
	int Append(const BatchPtr &b, km_origin o, int64_t hw = -1)
	{
		return AppendTo(ps, b, o, hw);
	}

	int AppendTo(km_pstate *p, const BatchPtr &b, km_origin o,
		     int64_t hw = -1)
	{
		if (hw < 0)
			hw = km_pstate_next_offset(p);
		return km_pstate_append(p, &b->b, o, hw, &res);
	}

	km_producer_info Get(int64_t pid, km_pstate *p = nullptr)
	{
		km_producer_info i;
		memset(&i, 0, sizeof(i));
		EXPECT_EQ(0, km_pstate_get(p ? p : ps, pid, &i)) << pid;
		return i;
	}

	km_pstate_stats Stats()
	{
		km_pstate_stats s;
		km_pstate_get_stats(ps, &s);
		return s;
	}

	static std::vector<uint8_t> Snap(const km_pstate *p)
	{
		std::vector<uint8_t> out(km_pstate_snapshot_size(p));
		int rc = km_pstate_snapshot_encode(p, out.data(), out.size());
		EXPECT_EQ((int)out.size(), rc);
		return out;
	}

	static std::vector<km_producer_info> Open(const km_pstate *p)
	{
		std::vector<km_producer_info> v(km_pstate_open_txns(p, nullptr, 0));
		EXPECT_EQ(v.size(), km_pstate_open_txns(p, v.data(), v.size()));
		return v;
	}

	State Capture(const std::vector<int64_t> &pids)
	{
		State s;
		s.snapshot = Snap(ps);
		for (int64_t pid : pids) {
			km_producer_info i;
			memset(&i, 0, sizeof(i));
			if (km_pstate_get(ps, pid, &i) != 0)
				i.producer_id = -1;
			s.infos.push_back(i);
		}
		s.open = Open(ps);
		km_pstate_get_stats(ps, &s.stats);
		s.next_offset = km_pstate_next_offset(ps);
		s.max_pid = km_pstate_max_positive_pid(ps);
		s.first_open = km_pstate_first_open_txn(ps);
		s.count = km_pstate_count(ps);
		return s;
	}

	// The append must fail with code and change nothing observable.
	void ExpectRefused(const BatchPtr &b, km_origin o, int code,
			   const std::vector<int64_t> &pids, int64_t hw = -1)
	{
		State before = Capture(pids);
		EXPECT_EQ(code, Append(b, o, hw));
		ExpectSame(before, Capture(pids));
	}

	std::vector<std::unique_ptr<std::vector<uint64_t>>> mems;
	km_pstate *ps = nullptr;
	km_pstate_result res;
};

// ---- init ----

TEST_F(PState, InitEmptyAndZeroCapacity)
{
	km_pstate_config zero = {0, 4};
	std::vector<uint64_t> mem(km_pstate_memsize(&zero) / 8 + 1);
	EXPECT_EQ(nullptr, km_pstate_init(mem.data(), &zero));
	zero = {4, 0};
	mem.assign(km_pstate_memsize(&zero) / 8 + 1, 0);
	EXPECT_EQ(nullptr, km_pstate_init(mem.data(), &zero));

	km_producer_info i;
	EXPECT_EQ(0u, km_pstate_count(ps));
	EXPECT_EQ(-1, km_pstate_max_positive_pid(ps));
	EXPECT_EQ(0, km_pstate_next_offset(ps));
	EXPECT_EQ(-1, km_pstate_first_open_txn(ps));
	EXPECT_EQ(77, km_pstate_lso(ps, 77));
	EXPECT_EQ(-ENOENT, km_pstate_get(ps, 1, &i));
	EXPECT_EQ(-ENOENT, km_pstate_get(ps, -1, &i));
	EXPECT_EQ(10u, km_pstate_snapshot_size(ps));
}

TEST_F(PState, NoProducerBatchesOnlyMoveNextOffset)
{
	ASSERT_EQ(0, Append(Data(0, -1, -1, -1, 5), KM_ORIGIN_MIRROR));
	EXPECT_EQ(5, km_pstate_next_offset(ps));
	// A marker without a producer id is skipped (!hasProducerId()).
	ASSERT_EQ(0, Append(Marker(5, -1, -1, true, 0), KM_ORIGIN_MIRROR));
	EXPECT_EQ(0u, km_pstate_count(ps));
	EXPECT_EQ(6, km_pstate_next_offset(ps));
	EXPECT_EQ(0u, Stats().mirror_stray_markers);
}

// ---- CLIENT rules ----

TEST_F(PState, ClientSequenceContinuity)
{
	ASSERT_EQ(0, Append(Data(0, 42, 0, 0, 3), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Data(3, 42, 0, 3, 2), KM_ORIGIN_CLIENT));
	ExpectRefused(Data(5, 42, 0, 6, 1), KM_ORIGIN_CLIENT,
		      KM_EOUTOFORDERSEQ, {42});
	// Overlaps the last batch without being an exact duplicate.
	ExpectRefused(Data(5, 42, 0, 4, 1), KM_ORIGIN_CLIENT,
		      KM_EOUTOFORDERSEQ, {42});
	ASSERT_EQ(0, Append(Data(5, 42, 0, 5, 1), KM_ORIGIN_CLIENT));
	km_producer_info i = Get(42);
	EXPECT_EQ(0, i.epoch);
	EXPECT_EQ(3u, i.batch_count);
	EXPECT_EQ(5, i.first_seq);
	EXPECT_EQ(5, i.last_seq);
	EXPECT_EQ(5, i.first_offset);
	EXPECT_EQ(5, i.last_offset);
	EXPECT_EQ(6, km_pstate_next_offset(ps));
	EXPECT_EQ(42, km_pstate_max_positive_pid(ps));
}

TEST_F(PState, ClientSequenceInt32Wrap)
{
	// Ends exactly at Int32.MAX: the next batch starts at 0.
	ASSERT_EQ(0, Append(Data(0, 7, 0, INT32_MAX - 1, 2), KM_ORIGIN_CLIENT));
	EXPECT_EQ(INT32_MAX, Get(7).last_seq);
	ExpectRefused(Data(2, 7, 0, 1, 1), KM_ORIGIN_CLIENT, KM_EOUTOFORDERSEQ,
		      {7});
	ExpectRefused(Data(2, 7, 0, INT32_MIN, 1), KM_ORIGIN_CLIENT,
		      KM_EOUTOFORDERSEQ, {7});
	ASSERT_EQ(0, Append(Data(2, 7, 0, 0, 1), KM_ORIGIN_CLIENT));

	// Wraps inside the batch: MAX, 0, 1.
	ASSERT_EQ(0, Append(Data(3, 8, 0, INT32_MAX, 3), KM_ORIGIN_CLIENT));
	EXPECT_EQ(INT32_MAX, Get(8).first_seq);
	EXPECT_EQ(1, Get(8).last_seq);
	ExpectRefused(Data(6, 8, 0, 0, 1), KM_ORIGIN_CLIENT, KM_EOUTOFORDERSEQ,
		      {8});
	ASSERT_EQ(0, Append(Data(6, 8, 0, 2, 1), KM_ORIGIN_CLIENT));
	// The wrapped batch is still a duplicate candidate.
	EXPECT_EQ(KM_EDUPLICATE,
		  Append(Data(7, 8, 0, INT32_MAX, 3), KM_ORIGIN_CLIENT));
	EXPECT_EQ(3, res.dup_first_offset);
	EXPECT_EQ(5, res.dup_last_offset);
}

TEST_F(PState, ClientDuplicateOfEachOfLastFive)
{
	// Six batches of two: seq 0-1 at 0-1, ..., seq 10-11 at 10-11.
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(0, Append(Data(2 * i, 42, 0, 2 * i, 2),
				    KM_ORIGIN_CLIENT));
	EXPECT_EQ(5u, Get(42).batch_count);
	for (int i = 1; i < 6; i++) {
		State before = Capture({42});
		EXPECT_EQ(KM_EDUPLICATE,
			  Append(Data(12, 42, 0, 2 * i, 2), KM_ORIGIN_CLIENT))
			<< i;
		EXPECT_EQ(2 * i, res.dup_first_offset);
		EXPECT_EQ(2 * i + 1, res.dup_last_offset);
		ExpectSame(before, Capture({42}));
	}
	// The sixth-newest is forgotten: it is now just out of order.
	ExpectRefused(Data(12, 42, 0, 0, 2), KM_ORIGIN_CLIENT,
		      KM_EOUTOFORDERSEQ, {42});
	EXPECT_EQ(-1, res.dup_first_offset);
	// Same first sequence, different last: not a duplicate.
	ExpectRefused(Data(12, 42, 0, 10, 1), KM_ORIGIN_CLIENT,
		      KM_EOUTOFORDERSEQ, {42});
	// MIRROR never dedupes: it appends what the source has.
	EXPECT_EQ(0, Append(Data(12, 42, 0, 10, 2), KM_ORIGIN_MIRROR));
}

TEST_F(PState, ClientEpochFencing)
{
	ASSERT_EQ(0, Append(Data(0, 42, 2, 0, 2), KM_ORIGIN_CLIENT));
	ExpectRefused(Data(2, 42, 1, 2, 1), KM_ORIGIN_CLIENT,
		      KM_EPRODUCERFENCED, {42});
	// A new epoch must start at sequence 0.
	ExpectRefused(Data(2, 42, 3, 5, 1), KM_ORIGIN_CLIENT,
		      KM_EOUTOFORDERSEQ, {42});
	ASSERT_EQ(0, Append(Data(2, 42, 3, 0, 1), KM_ORIGIN_CLIENT));
	km_producer_info i = Get(42);
	EXPECT_EQ(3, i.epoch);
	EXPECT_EQ(1u, i.batch_count); // the epoch change cleared the ring
	// The old epoch's batch is fenced, not a duplicate.
	ExpectRefused(Data(3, 42, 2, 0, 2), KM_ORIGIN_CLIENT,
		      KM_EPRODUCERFENCED, {42});
	EXPECT_EQ(KM_EDUPLICATE, Append(Data(3, 42, 3, 0, 1), KM_ORIGIN_CLIENT));
	EXPECT_EQ(2, res.dup_first_offset);
}

TEST_F(PState, ClientUnknownProducerAcceptsAnySequence)
{
	ASSERT_EQ(0, Append(Data(0, 77, 5, 1234, 2), KM_ORIGIN_CLIENT));
	EXPECT_EQ(1235, Get(77).last_seq);
	// Known now: continuity applies.
	ExpectRefused(Data(2, 77, 5, 1240, 1), KM_ORIGIN_CLIENT,
		      KM_EOUTOFORDERSEQ, {77});
	ASSERT_EQ(0, Append(Data(2, 77, 5, 1236, 1), KM_ORIGIN_CLIENT));
}

TEST_F(PState, ClientNonTransactionalBatchInOpenTxn)
{
	ASSERT_EQ(0, Append(Data(0, 9, 0, 0, 2, true), KM_ORIGIN_CLIENT));
	EXPECT_EQ(0, Get(9).txn_first_offset);
	ExpectRefused(Data(2, 9, 0, 2, 1, false), KM_ORIGIN_CLIENT,
		      KM_EINVALIDTXNSTATE, {9});
	ASSERT_EQ(0, Append(Data(2, 9, 0, 2, 1, true), KM_ORIGIN_CLIENT));
	EXPECT_EQ(0, Get(9).txn_first_offset); // still the same txn
	ASSERT_EQ(0, Append(Marker(3, 9, 0, true, 0), KM_ORIGIN_CONTROL));
	ASSERT_EQ(0, Append(Data(4, 9, 0, 3, 1, false), KM_ORIGIN_CLIENT));
	EXPECT_EQ(-1, Get(9).txn_first_offset);
}

TEST_F(PState, MarkerFencing)
{
	ASSERT_EQ(0, Append(Data(0, 9, 4, 0, 1, true), KM_ORIGIN_CLIENT));
	ExpectRefused(Marker(1, 9, 3, false, 0), KM_ORIGIN_CONTROL,
		      KM_EPRODUCERFENCED, {9});
	ASSERT_EQ(0, Append(Marker(1, 9, 4, false, 5), KM_ORIGIN_CONTROL));
	EXPECT_EQ(5, Get(9).coordinator_epoch);
	ASSERT_EQ(0, Append(Data(2, 9, 4, 1, 1, true), KM_ORIGIN_CLIENT));
	ExpectRefused(Marker(3, 9, 4, true, 4), KM_ORIGIN_CONTROL,
		      KM_ECOORDFENCED, {9});
	// A marker may bump the epoch (TV0/1: marker epoch >= current).
	ASSERT_EQ(0, Append(Marker(3, 9, 5, true, 5), KM_ORIGIN_CONTROL));
	EXPECT_EQ(5, Get(9).epoch);
	EXPECT_EQ(0u, Get(9).batch_count);
	// After an epoch bump by marker with no batch, the epoch starts at 0.
	ExpectRefused(Data(4, 9, 5, 2, 1), KM_ORIGIN_CLIENT, KM_EOUTOFORDERSEQ,
		      {9});
	EXPECT_EQ(0, Append(Data(4, 9, 5, 0, 1), KM_ORIGIN_CLIENT));
}

TEST_F(PState, TransactionalControlBatchMustBeAbortOrCommit)
{
	// A well-formed MIRROR_PID_RESET record (cluster id "x") in a
	// transactional batch with a producer id: not an end-txn marker.
	uint8_t key[4] = {0, 0, 0, 7};
	uint8_t value[5] = {0, 0, 2, 'x', 0};
	ExpectRefused(Build(0, KM_BATCH_ATTR_CONTROL | KM_BATCH_ATTR_TRANSACTIONAL,
			    5, 0, -1, 1, 1, key, 4, value, 5),
		      KM_ORIGIN_MIRROR, KM_ECTRLKEY, {5});
	// The same record, not transactional and without producer: a barrier.
	EXPECT_EQ(0, Append(Build(0, KM_BATCH_ATTR_CONTROL, -1, -1, -1, 1, 1,
				  key, 4, value, 5),
			    KM_ORIGIN_MIRROR));
	EXPECT_EQ(1u, Stats().barriers_applied);
	// A control key shorter than 4 bytes is refused by the parser.
	ExpectRefused(Build(1, KM_BATCH_ATTR_CONTROL, -1, -1, -1, 1, 1, key, 2),
		      KM_ORIGIN_MIRROR, KM_ECTRLKEY, {});
}

// ---- transactions and the LSO ----

TEST_F(PState, LsoTracksSmallestOpenTxnAndDecidedUntilHwPassesMarker)
{
	ASSERT_EQ(0, Append(Data(0, -1, -1, -1, 10), KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Data(10, 1, 0, 0, 2, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Data(12, -1, -1, -1, 8), KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Data(20, 2, 0, 0, 2, true), KM_ORIGIN_CLIENT));
	EXPECT_EQ(10, km_pstate_first_open_txn(ps));
	EXPECT_EQ(5, km_pstate_lso(ps, 5));   // hw below every txn
	EXPECT_EQ(10, km_pstate_lso(ps, 22)); // T1 holds it
	std::vector<km_producer_info> open = Open(ps);
	ASSERT_EQ(2u, open.size());
	EXPECT_EQ(1, open[0].producer_id);
	EXPECT_EQ(10, open[0].txn_first_offset);
	EXPECT_EQ(2, open[1].producer_id);
	EXPECT_EQ(20, open[1].txn_first_offset);
	km_producer_info one[2];
	one[1].producer_id = 99;
	// Returns how many there are; writes at most max.
	EXPECT_EQ(2u, km_pstate_open_txns(ps, one, 1));
	EXPECT_EQ(1, one[0].producer_id);
	EXPECT_EQ(99, one[1].producer_id);
	EXPECT_TRUE(km_pstate_has_open_negative_txn(ps) == false);

	ASSERT_EQ(0, Append(Marker(22, 1, 0, true, 0), KM_ORIGIN_CONTROL, 22));
	EXPECT_TRUE(res.txn_completed);
	EXPECT_FALSE(res.txn_aborted);
	EXPECT_EQ(1, res.txn_producer_id);
	EXPECT_EQ(10, res.txn_first_offset);
	EXPECT_EQ(22, res.txn_last_offset);
	EXPECT_EQ(-1, res.txn_last_stable_offset);
	EXPECT_EQ(20, km_pstate_first_open_txn(ps));
	// Decided, but its marker is not below hw yet: it still holds the LSO.
	EXPECT_EQ(10, km_pstate_lso(ps, 22));
	EXPECT_EQ(10, km_pstate_lso(ps, 22));
	EXPECT_EQ(20, km_pstate_lso(ps, 23));

	ASSERT_EQ(0, Append(Marker(23, 2, 0, false, 0), KM_ORIGIN_CONTROL, 23));
	EXPECT_TRUE(res.txn_completed);
	EXPECT_TRUE(res.txn_aborted);
	EXPECT_EQ(2, res.txn_producer_id);
	EXPECT_EQ(20, res.txn_first_offset);
	EXPECT_EQ(23, res.txn_last_offset);
	EXPECT_EQ(24, res.txn_last_stable_offset); // no other open txn
	EXPECT_EQ(-1, km_pstate_first_open_txn(ps));
	EXPECT_EQ(0u, km_pstate_open_txns(ps, nullptr, 0));
	EXPECT_EQ(20, km_pstate_lso(ps, 23));
	EXPECT_EQ(24, km_pstate_lso(ps, 24));
	EXPECT_EQ(-1, Get(1).txn_first_offset);
	EXPECT_EQ(0, Get(2).coordinator_epoch);
}

TEST_F(PState, AbortedTxnLastStableOffsetRule)
{
	ASSERT_EQ(0, Append(Data(30, 3, 0, 0, 1, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Data(31, 4, 0, 0, 1, true), KM_ORIGIN_CLIENT));
	// pid 3's txn is still open: it is the next incomplete one.
	ASSERT_EQ(0, Append(Marker(32, 4, 0, false, 0), KM_ORIGIN_CONTROL));
	EXPECT_EQ(30, res.txn_last_stable_offset);
	// pid 4's txn is decided, not open: marker + 1.
	ASSERT_EQ(0, Append(Marker(33, 3, 0, false, 0), KM_ORIGIN_CONTROL));
	EXPECT_EQ(34, res.txn_last_stable_offset);

	// The aborting producer's own txn is skipped even though it is first.
	ASSERT_EQ(0, Append(Data(40, 5, 0, 1, 1, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Data(41, 6, 0, 0, 1, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Marker(42, 5, 0, false, 0), KM_ORIGIN_CONTROL));
	EXPECT_EQ(5, res.txn_producer_id);
	EXPECT_EQ(40, res.txn_first_offset);
	EXPECT_EQ(42, res.txn_last_offset);
	EXPECT_EQ(41, res.txn_last_stable_offset);
}

// ---- the seed's collision problem, at state level ----

// Cluster A's producer 5 and cluster B's producer 5 both map to -7 (R1).
TEST_F(PState, CollisionWithoutBarrierMergesSilentlyButIsCounted)
{
	ASSERT_EQ(0, Append(Mapped(Data(0, 5, 0, 0, 10)), KM_ORIGIN_MIRROR));
	EXPECT_EQ(0u, Stats().mirror_sequence_gaps);
	testing::internal::CaptureStderr();
	ASSERT_EQ(0, Append(Mapped(Data(10, 5, 0, 0, 3)), KM_ORIGIN_MIRROR));
	std::string log = testing::internal::GetCapturedStderr();
	EXPECT_EQ(1u, km_pstate_count(ps)); // one entry for two producers
	km_producer_info i = Get(-7);
	EXPECT_EQ(2u, i.batch_count); // A's batch and B's batch, merged
	EXPECT_EQ(0, i.first_seq);
	EXPECT_EQ(10, i.first_offset);
	EXPECT_EQ(1u, Stats().mirror_sequence_gaps);
	EXPECT_NE(std::string::npos, log.find("WARN"));
	EXPECT_NE(std::string::npos, log.find("-7"));
	EXPECT_NE(std::string::npos, log.find("offset 10"));
}

TEST_F(PState, CollisionWithBarrierStartsClean)
{
	ASSERT_EQ(0, Append(Mapped(Data(0, 5, 0, 0, 10)), KM_ORIGIN_MIRROR));
	testing::internal::CaptureStderr();
	ASSERT_EQ(0, Append(Barrier(10), KM_ORIGIN_CONTROL));
	std::string log = testing::internal::GetCapturedStderr();
	EXPECT_EQ(1u, res.barrier_expired);
	EXPECT_EQ(0u, km_pstate_count(ps));
	EXPECT_NE(std::string::npos, log.find("INFO"));
	EXPECT_NE(std::string::npos, log.find("offset 10"));
	EXPECT_NE(std::string::npos, log.find("expired 1"));

	ASSERT_EQ(0, Append(Mapped(Data(11, 5, 0, 0, 3)), KM_ORIGIN_MIRROR));
	km_producer_info i = Get(-7);
	EXPECT_EQ(1u, i.batch_count);
	EXPECT_EQ(0, i.first_seq);
	EXPECT_EQ(2, i.last_seq);
	EXPECT_EQ(11, i.first_offset);
	km_pstate_stats s = Stats();
	EXPECT_EQ(0u, s.mirror_sequence_gaps);
	EXPECT_EQ(0u, s.mirror_epoch_regressions);
	EXPECT_EQ(1u, s.barriers_applied);
}

// ---- barrier ----

TEST_F(PState, ControlBarrierRefusedWhileNegativeTxnOpen)
{
	ASSERT_EQ(0, Append(Mapped(Data(0, 5, 0, 0, 2, true)), KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Mapped(Data(2, 7, 0, 0, 1)), KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Data(3, 42, 0, 0, 1), KM_ORIGIN_CLIENT));
	EXPECT_TRUE(km_pstate_has_open_negative_txn(ps));
	ExpectRefused(Barrier(4), KM_ORIGIN_CONTROL, KM_ETXNOPEN, {-7, -9, 42});
	ExpectRefused(Barrier(4), KM_ORIGIN_CLIENT, KM_ETXNOPEN, {-7, -9, 42});

	// R4 abort mode: ABORT markers first, then the barrier.
	ASSERT_EQ(0, Append(Marker(4, -7, 0, false, 0), KM_ORIGIN_CONTROL));
	EXPECT_TRUE(res.txn_aborted);
	EXPECT_FALSE(km_pstate_has_open_negative_txn(ps));
	ASSERT_EQ(0, Append(Barrier(5), KM_ORIGIN_CONTROL));
	EXPECT_EQ(2u, res.barrier_expired);
	EXPECT_EQ(1u, km_pstate_count(ps));
	km_producer_info i;
	EXPECT_EQ(-ENOENT, km_pstate_get(ps, -7, &i));
	EXPECT_EQ(-ENOENT, km_pstate_get(ps, -9, &i));
	EXPECT_EQ(0, Get(42).last_seq); // positive ids survive
	EXPECT_EQ(42, km_pstate_max_positive_pid(ps));
	EXPECT_EQ(1u, Stats().barriers_applied);
	EXPECT_EQ(6, km_pstate_next_offset(ps));
	// A positive-id open txn does not block a barrier.
	ASSERT_EQ(0, Append(Data(6, 42, 0, 1, 1, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Barrier(7), KM_ORIGIN_CONTROL));
	EXPECT_EQ(0u, res.barrier_expired);
	EXPECT_EQ(6, km_pstate_first_open_txn(ps));
}

TEST_F(PState, MirrorBarrierDropsOpenNegativeTxn)
{
	ASSERT_EQ(0, Append(Mapped(Data(0, 5, 0, 0, 1, true)), KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Data(1, 42, 0, 0, 1, true), KM_ORIGIN_CLIENT));
	testing::internal::CaptureStderr();
	ASSERT_EQ(0, Append(Barrier(2), KM_ORIGIN_MIRROR));
	std::string log = testing::internal::GetCapturedStderr();
	EXPECT_EQ(1u, res.barrier_expired);
	EXPECT_FALSE(km_pstate_has_open_negative_txn(ps));
	EXPECT_EQ(1, km_pstate_first_open_txn(ps));
	EXPECT_EQ(1, km_pstate_lso(ps, 3)); // not stuck at 0
	EXPECT_NE(std::string::npos, log.find("WARN"));
	EXPECT_NE(std::string::npos, log.find("-7"));
	// The forgotten producer's marker, should it come, is a stray one.
	ASSERT_EQ(0, Append(Marker(3, -7, 0, false, 0), KM_ORIGIN_MIRROR));
	EXPECT_FALSE(res.txn_completed);
	EXPECT_EQ(1u, Stats().mirror_stray_markers);
}

TEST_F(PState, MaxPositivePid)
{
	EXPECT_EQ(-1, km_pstate_max_positive_pid(ps));
	ASSERT_EQ(0, Append(Mapped(Data(0, 500, 0, 0, 1)), KM_ORIGIN_MIRROR));
	EXPECT_EQ(-1, km_pstate_max_positive_pid(ps)); // mapped: -502
	ASSERT_EQ(0, Append(Data(1, 42, 0, 0, 1), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Data(2, 17, 0, 0, 1), KM_ORIGIN_CLIENT));
	EXPECT_EQ(42, km_pstate_max_positive_pid(ps));
	ASSERT_EQ(0, Append(Marker(3, 100, 0, true, 0), KM_ORIGIN_CONTROL));
	EXPECT_EQ(100, km_pstate_max_positive_pid(ps));
	// A refused batch does not count.
	EXPECT_EQ(KM_EOUTOFORDERSEQ,
		  Append(Data(4, 42, 0, 9, 1), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Barrier(4), KM_ORIGIN_CONTROL));
	EXPECT_EQ(100, km_pstate_max_positive_pid(ps));
	std::vector<uint8_t> snap = Snap(ps);
	km_pstate_reset(ps);
	EXPECT_EQ(-1, km_pstate_max_positive_pid(ps));
	EXPECT_EQ(0u, km_pstate_count(ps));
	EXPECT_EQ(0u, Stats().barriers_applied);
	ASSERT_EQ(0, km_pstate_snapshot_decode(ps, snap.data(), snap.size(), 5));
	EXPECT_EQ(100, km_pstate_max_positive_pid(ps));
}

// ---- MIRROR tolerance ----

TEST_F(PState, MirrorToleratesGapEpochRegressionStrayMarker)
{
	ASSERT_EQ(0, Append(Data(0, -7, 3, 0, 2), KM_ORIGIN_MIRROR));
	testing::internal::CaptureStderr();
	ASSERT_EQ(0, Append(Data(2, -7, 3, 5, 1), KM_ORIGIN_MIRROR)); // gap
	std::string gap = testing::internal::GetCapturedStderr();
	EXPECT_EQ(5, Get(-7).first_seq);
	testing::internal::CaptureStderr();
	ASSERT_EQ(0, Append(Data(3, -7, 2, 0, 1), KM_ORIGIN_MIRROR)); // epoch
	std::string epoch = testing::internal::GetCapturedStderr();
	EXPECT_EQ(2, Get(-7).epoch);
	EXPECT_EQ(1u, Get(-7).batch_count);
	testing::internal::CaptureStderr();
	ASSERT_EQ(0, Append(Marker(4, -9, 1, true, 3), KM_ORIGIN_MIRROR));
	std::string stray = testing::internal::GetCapturedStderr();
	EXPECT_FALSE(res.txn_completed);
	EXPECT_EQ(3, Get(-9).coordinator_epoch);
	// Marker epoch regression and a stale coordinator epoch: applied too.
	ASSERT_EQ(0, Append(Marker(5, -9, 0, false, 1), KM_ORIGIN_MIRROR));
	EXPECT_EQ(0, Get(-9).epoch);
	EXPECT_EQ(1, Get(-9).coordinator_epoch);

	km_pstate_stats s = Stats();
	EXPECT_EQ(1u, s.mirror_sequence_gaps);
	EXPECT_EQ(2u, s.mirror_epoch_regressions);
	EXPECT_EQ(2u, s.mirror_stray_markers);
	EXPECT_NE(std::string::npos, gap.find("producer -7"));
	EXPECT_NE(std::string::npos, gap.find("offset 2"));
	EXPECT_NE(std::string::npos, epoch.find("producer -7"));
	EXPECT_NE(std::string::npos, epoch.find("offset 3"));
	EXPECT_NE(std::string::npos, stray.find("producer -9"));
	EXPECT_NE(std::string::npos, stray.find("offset 4"));

	// Int32 wrap is continuity, not a gap; a new epoch at 0 is fine.
	ASSERT_EQ(0, Append(Data(6, -11, 0, INT32_MAX, 1), KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Data(7, -11, 0, 0, 1), KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Data(8, -11, 1, 0, 1), KM_ORIGIN_MIRROR));
	EXPECT_EQ(1u, Stats().mirror_sequence_gaps);
	// A non-transactional batch inside a txn: applied, txn stays open.
	ASSERT_EQ(0, Append(Data(9, -11, 1, 1, 1, true), KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Data(10, -11, 1, 2, 1, false), KM_ORIGIN_MIRROR));
	EXPECT_EQ(9, Get(-11).txn_first_offset);
}

// ---- snapshots ----

// Spec §3 laid out by hand for: pid -7 (mirrored) with a stray ABORT at 0
// (coordinator epoch 5), then a transactional batch seq 0-1 at 1-2, ts 900;
// pid 42 (local) with seq 0-2 at 3-5, epoch 1, ts 1000.
std::vector<uint8_t> GoldenSnapshot()
{
	Bytes b;
	b.I16(1);	    // version
	b.I32(0);	    // crc, below
	b.I32(2);	    // count
	b.I64((uint64_t)-7); // producerId (sorted: -7 before 42)
	b.I16(0);	    // epoch
	b.I32(1);	    // lastSequence
	b.I64(2);	    // lastOffset
	b.I32(1);	    // offsetDelta
	b.I64(900);	    // timestamp
	b.I32(5);	    // coordinatorEpoch
	b.I64(1);	    // currentTxnFirstOffset
	b.I64(42);
	b.I16(1);
	b.I32(2);
	b.I64(5);
	b.I32(2);
	b.I64(1000);
	b.I32(0xffffffff);	   // coordinatorEpoch -1
	b.I64(0xffffffffffffffff); // currentTxnFirstOffset -1
	EXPECT_EQ(10u + 2 * 46, b.v.size());
	FixCrc(b.v);
	return b.v;
}

TEST_F(PState, SnapshotGoldenBytes)
{
	ASSERT_EQ(0, Append(Mapped(Marker(0, 5, 0, false, 5, 500)),
			    KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Mapped(Data(1, 5, 0, 0, 2, true, 900)),
			    KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Data(3, 42, 1, 0, 3, false, 1000),
			    KM_ORIGIN_CLIENT));
	std::vector<uint8_t> golden = GoldenSnapshot();
	EXPECT_EQ(golden, Snap(ps));

	// And the golden bytes load back into the same state.
	km_pstate *other = Make(16, 8);
	ASSERT_EQ(0, km_pstate_snapshot_decode(other, golden.data(),
					       golden.size(), 6));
	EXPECT_EQ(6, km_pstate_next_offset(other));
	EXPECT_EQ(1, km_pstate_lso(other, 6));
	km_producer_info m = Get(-7, other);
	EXPECT_EQ(0, m.epoch);
	EXPECT_EQ(5, m.coordinator_epoch);
	EXPECT_EQ(900, m.last_timestamp);
	EXPECT_EQ(1, m.txn_first_offset);
	EXPECT_EQ(1u, m.batch_count);
	EXPECT_EQ(0, m.first_seq);
	EXPECT_EQ(1, m.last_seq);
	EXPECT_EQ(1, m.first_offset);
	EXPECT_EQ(2, m.last_offset);
	km_producer_info p = Get(42, other);
	EXPECT_EQ(0, p.first_seq);
	EXPECT_EQ(3, p.first_offset);
	EXPECT_EQ(5, p.last_offset);
	EXPECT_EQ(-1, p.coordinator_epoch);
	EXPECT_EQ(42, km_pstate_max_positive_pid(other));
}

TEST_F(PState, SnapshotEntryWithoutBatch)
{
	// A marker alone leaves an entry with no batch metadata.
	ASSERT_EQ(0, Append(Marker(0, 9, 2, true, 4, 700), KM_ORIGIN_CONTROL));
	Bytes b;
	b.I16(1);
	b.I32(0);
	b.I32(1);
	b.I64(9);
	b.I16(2);
	b.I32(0xffffffff);	   // lastSequence -1
	b.I64(0xffffffffffffffff); // lastOffset -1
	b.I32(0);		   // offsetDelta 0
	b.I64(700);
	b.I32(4);
	b.I64(0xffffffffffffffff);
	FixCrc(b.v);
	EXPECT_EQ(b.v, Snap(ps));
	ASSERT_EQ(0, km_pstate_snapshot_decode(ps, b.v.data(), b.v.size(), 1));
	km_producer_info i = Get(9);
	EXPECT_EQ(0u, i.batch_count);
	EXPECT_EQ(-1, i.last_seq);
	EXPECT_EQ(-1, i.last_offset);
	EXPECT_EQ(700, i.last_timestamp);
	EXPECT_EQ(2, i.epoch);
	// Known epoch, no batch: the next batch of this epoch starts at 0.
	EXPECT_EQ(KM_EOUTOFORDERSEQ,
		  Append(Data(1, 9, 2, 3, 1), KM_ORIGIN_CLIENT));
	EXPECT_EQ(0, Append(Data(1, 9, 2, 0, 1), KM_ORIGIN_CLIENT));
}

TEST_F(PState, SnapshotRoundTripAndRebuiltTxns)
{
	// Open txns whose first offsets are not in producer-id order.
	ASSERT_EQ(0, Append(Data(0, 50, 0, 0, 2, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Mapped(Data(2, 3, 0, 0, 1)), KM_ORIGIN_MIRROR));
	ASSERT_EQ(0, Append(Data(3, 10, 1, 7, 3, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Marker(6, 11, 0, true, 2), KM_ORIGIN_CONTROL));
	ASSERT_EQ(0, Append(Mapped(Data(7, 1, 0, INT32_MAX, 2, true)),
			    KM_ORIGIN_MIRROR));
	std::vector<uint8_t> a = Snap(ps);
	int64_t lso = km_pstate_lso(ps, 9);
	std::vector<km_producer_info> open = Open(ps);
	ASSERT_EQ(3u, open.size());

	km_pstate *other = Make(16, 8);
	ASSERT_EQ(0, km_pstate_snapshot_decode(other, a.data(), a.size(), 9));
	EXPECT_EQ(a, Snap(other)); // encode -> decode -> encode
	EXPECT_EQ(5u, km_pstate_count(other));
	EXPECT_EQ(lso, km_pstate_lso(other, 9));
	EXPECT_EQ(0, km_pstate_lso(other, 9));
	EXPECT_EQ(km_pstate_first_open_txn(ps), km_pstate_first_open_txn(other));
	std::vector<km_producer_info> reopen = Open(other);
	ASSERT_EQ(open.size(), reopen.size());
	for (size_t i = 0; i < open.size(); i++)
		ExpectInfoEq(open[i], reopen[i]);
	EXPECT_EQ(50, reopen[0].producer_id);
	EXPECT_EQ(10, reopen[1].producer_id);
	EXPECT_EQ(-3, reopen[2].producer_id);
	EXPECT_TRUE(km_pstate_has_open_negative_txn(other));
	km_producer_info w = Get(-3, other);
	EXPECT_EQ(INT32_MAX, w.first_seq); // decrementSequence across the wrap
	EXPECT_EQ(0, w.last_seq);

	// Behaviour carries over: the newest batch is still a duplicate, the
	// txns close in order and the LSO follows.
	EXPECT_EQ(KM_EDUPLICATE,
		  AppendTo(other, Data(9, 10, 1, 7, 3, true), KM_ORIGIN_CLIENT));
	EXPECT_EQ(3, res.dup_first_offset);
	EXPECT_EQ(5, res.dup_last_offset);
	ASSERT_EQ(0, AppendTo(other, Marker(9, 50, 0, true, 0),
			      KM_ORIGIN_CONTROL));
	EXPECT_EQ(3, km_pstate_lso(other, 10));
}

TEST_F(PState, SnapshotCorruptionRejected)
{
	ASSERT_EQ(0, Append(Data(0, 50, 0, 0, 2, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Data(2, -7, 0, 0, 2), KM_ORIGIN_MIRROR));
	std::vector<uint8_t> good = Snap(ps);
	auto expect_bad = [&](std::vector<uint8_t> s, int code, const char *why) {
		ASSERT_EQ(0, km_pstate_snapshot_decode(ps, good.data(),
						       good.size(), 4));
		EXPECT_EQ(code, km_pstate_snapshot_decode(ps, s.data(),
							  s.size(), 4))
			<< why;
		EXPECT_EQ(0u, km_pstate_count(ps)) << why; // left empty
		EXPECT_EQ(-1, km_pstate_first_open_txn(ps)) << why;
		EXPECT_EQ(-1, km_pstate_max_positive_pid(ps)) << why;
	};
	for (size_t i = 0; i < good.size(); i++) {
		std::vector<uint8_t> s = good;
		s[i] ^= 0x10;
		expect_bad(s, KM_ESNAPSHOT, ("flipped byte " + std::to_string(i)).c_str());
	}
	std::vector<uint8_t> s = good;
	s.pop_back();
	expect_bad(s, KM_ESNAPSHOT, "truncated by one");
	s.resize(good.size() - 46);
	FixCrc(s);
	expect_bad(s, KM_ESNAPSHOT, "one entry short of count, CRC right");
	s = good;
	s.push_back(0);
	FixCrc(s);
	expect_bad(s, KM_ESNAPSHOT, "one byte too long, CRC right");
	s = good;
	km_store_be16(&s[0], 2); // the version is outside the CRC
	expect_bad(s, KM_ESNAPSHOT, "version 2");
	km_store_be16(&s[0], 0);
	expect_bad(s, KM_ESNAPSHOT, "version 0");
	s = good;
	km_store_be32(&s[6], 0xffffffff);
	FixCrc(s);
	expect_bad(s, KM_ESNAPSHOT, "negative count");
	s.assign(good.begin(), good.begin() + 9);
	expect_bad(s, KM_ESNAPSHOT, "shorter than the header");
	expect_bad(std::vector<uint8_t>(), KM_ESNAPSHOT, "empty");
	s = good;
	memcpy(&s[10 + 46], &s[10], 8); // two entries for one producer
	FixCrc(s);
	expect_bad(s, KM_ESNAPSHOT, "duplicate producer id");
	s = good;
	km_store_be64(&s[10], (uint64_t)-1);
	FixCrc(s);
	expect_bad(s, KM_ESNAPSHOT, "producer id -1");
}

TEST_F(PState, SnapshotCapacity)
{
	ASSERT_EQ(0, Append(Data(0, 1, 0, 0, 1, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Data(1, 2, 0, 0, 1, true), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Data(2, 3, 0, 0, 1), KM_ORIGIN_CLIENT));
	std::vector<uint8_t> s = Snap(ps);
	std::vector<uint8_t> small(s.size() - 1);
	EXPECT_EQ(KM_ENOSPACE,
		  km_pstate_snapshot_encode(ps, small.data(), small.size()));

	km_pstate *few = Make(2, 8);
	EXPECT_EQ(KM_EPSTATEFULL,
		  km_pstate_snapshot_decode(few, s.data(), s.size(), 3));
	EXPECT_EQ(0u, km_pstate_count(few));
	km_pstate *one_txn = Make(8, 1);
	EXPECT_EQ(KM_EPSTATEFULL,
		  km_pstate_snapshot_decode(one_txn, s.data(), s.size(), 3));
	EXPECT_EQ(0u, km_pstate_count(one_txn));
	EXPECT_EQ(-1, km_pstate_first_open_txn(one_txn));
	km_pstate *fits = Make(3, 2);
	EXPECT_EQ(0, km_pstate_snapshot_decode(fits, s.data(), s.size(), 3));
	EXPECT_EQ(s, Snap(fits));
}

// ---- capacity ----

TEST_F(PState, ProducerTableFull)
{
	ps = Make(2, 4);
	ASSERT_EQ(0, Append(Data(0, 1, 0, 0, 1), KM_ORIGIN_CLIENT));
	ASSERT_EQ(0, Append(Data(1, -7, 0, 0, 1), KM_ORIGIN_MIRROR));
	std::vector<int64_t> pids = {1, -7, 3};
	ExpectRefused(Data(2, 3, 0, 0, 1), KM_ORIGIN_CLIENT, KM_EPSTATEFULL, pids);
	ExpectRefused(Data(2, 3, 0, 0, 1), KM_ORIGIN_MIRROR, KM_EPSTATEFULL, pids);
	ExpectRefused(Marker(2, 3, 0, true, 0), KM_ORIGIN_CONTROL,
		      KM_EPSTATEFULL, pids);
	// Known producers go on.
	ASSERT_EQ(0, Append(Data(2, 1, 0, 1, 1), KM_ORIGIN_CLIENT));
	// A barrier frees the mirrored entry.
	ASSERT_EQ(0, Append(Barrier(3), KM_ORIGIN_CONTROL));
	ASSERT_EQ(0, Append(Data(4, 3, 0, 0, 1), KM_ORIGIN_CLIENT));
	EXPECT_EQ(2u, km_pstate_count(ps));
}

TEST_F(PState, TxnRingFullAndCompaction)
{
	ps = Make(8, 1);
	ASSERT_EQ(0, Append(Data(0, 1, 0, 0, 1, true), KM_ORIGIN_CLIENT));
	ExpectRefused(Data(1, 2, 0, 0, 1, true), KM_ORIGIN_CLIENT,
		      KM_EPSTATEFULL, {1, 2});
	ASSERT_EQ(0, Append(Marker(1, 1, 0, true, 0), KM_ORIGIN_CONTROL, 1));
	// Decided but its marker is not below hw: the slot is still taken.
	ExpectRefused(Data(2, 2, 0, 0, 1, true), KM_ORIGIN_CLIENT,
		      KM_EPSTATEFULL, {1, 2}, 1);
	EXPECT_EQ(0, km_pstate_lso(ps, 1));
	ASSERT_EQ(0, Append(Data(2, 2, 0, 0, 1, true), KM_ORIGIN_CLIENT, 2));
	EXPECT_EQ(2, km_pstate_lso(ps, 3));
}

// Many txns through a small ring: wrap-around, retire, compaction.
TEST_F(PState, TxnRingWrapsAround)
{
	ps = Make(8, 3);
	int64_t off = 0;
	for (int round = 0; round < 20; round++) {
		int64_t pid = round % 4;
		int32_t seq = round / 4;
		ASSERT_EQ(0, Append(Data(off, pid, 0, seq, 1, true),
				    KM_ORIGIN_CLIENT, off));
		EXPECT_EQ(off, km_pstate_first_open_txn(ps));
		EXPECT_EQ(off, km_pstate_lso(ps, off + 1));
		ASSERT_EQ(0, Append(Marker(off + 1, pid, 0, round % 2, 0),
				    KM_ORIGIN_CONTROL, off + 1));
		EXPECT_EQ(off, km_pstate_lso(ps, off + 1));
		off += 2;
	}
	EXPECT_EQ(off, km_pstate_lso(ps, off));
	EXPECT_EQ(-1, km_pstate_first_open_txn(ps));
}

// ---- hash table against a reference ----

TEST_F(PState, HashTableMatchesReferenceUnderBarriers)
{
	ps = Make(64, 8);
	std::mt19937 rng(1234);
	std::vector<int64_t> pool;
	for (int64_t p = -70; p < 70; p++)
		if (p != -1)
			pool.push_back(p);
	pool.push_back(INT64_MIN);
	pool.push_back(INT64_MAX);
	pool.push_back(-(int64_t(1) << 40));
	std::map<int64_t, int32_t> ref; // pid -> next sequence
	int64_t off = 0;
	for (int step = 0; step < 4000; step++) {
		if (rng() % 97 == 0) {
			size_t neg = 0;
			for (auto it = ref.begin(); it != ref.end();)
				if (it->first < 0) {
					it = ref.erase(it);
					neg++;
				} else {
					++it;
				}
			ASSERT_EQ(0, Append(Barrier(off++), KM_ORIGIN_MIRROR));
			ASSERT_EQ(neg, res.barrier_expired);
		} else {
			int64_t pid = pool[rng() % pool.size()];
			auto it = ref.find(pid);
			int32_t seq = it == ref.end() ? 0 : it->second;
			int rc = Append(Data(off, pid, 0, seq, 1),
					KM_ORIGIN_MIRROR);
			if (it == ref.end() && ref.size() == 64) {
				ASSERT_EQ(KM_EPSTATEFULL, rc);
				continue;
			}
			ASSERT_EQ(0, rc);
			ref[pid] = seq + 1;
			off++;
		}
		ASSERT_EQ(ref.size(), km_pstate_count(ps));
		if (step % 50 != 0)
			continue;
		for (int64_t pid : pool) {
			km_producer_info i;
			auto it = ref.find(pid);
			int rc = km_pstate_get(ps, pid, &i);
			if (it == ref.end()) {
				ASSERT_EQ(-ENOENT, rc) << pid;
			} else {
				ASSERT_EQ(0, rc) << pid;
				ASSERT_EQ(it->second - 1, i.last_seq) << pid;
			}
		}
	}
	EXPECT_EQ(0u, Stats().mirror_sequence_gaps);
	std::vector<uint8_t> s = Snap(ps);
	km_pstate *other = Make(64, 8);
	ASSERT_EQ(0, km_pstate_snapshot_decode(other, s.data(), s.size(), off));
	EXPECT_EQ(s, Snap(other));
	// Sorted by producer id.
	for (size_t i = 1; i < ref.size(); i++)
		EXPECT_LT((int64_t)km_load_be64(&s[10 + 46 * (i - 1)]),
			  (int64_t)km_load_be64(&s[10 + 46 * i]));
}

} // namespace
