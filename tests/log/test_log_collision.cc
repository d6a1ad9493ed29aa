// Goal: (1) the seed's collision problem, at log level: two unrelated source
// producers that both have id 5 map to the same -7 (R1). Mirrored into one
// partition without a barrier between them, their state is silently merged
// into one entry - no append fails; only the mirror anomaly counter and a
// WARN show it (R2). With a MIRROR_PID_RESET barrier between them (R3) each
// is tracked on its own, the barrier survives reopen and crash replay, and
// a new producer reusing the id after the barrier is validated from scratch
// (CLIENT: sequence 0 accepted, a gap refused). (2) The truncate-mode
// hazard of R4: with T1 (producer A) from 10 committed at 50 and T2
// (producer B) open from 20, the clean cut is 10, not the LSO 20, and after
// truncating there no transaction is open and the LSO is the log end.
// Method: batches built with kafka/records.h, mapped with km_batch_map_pid
// exactly as the fetch path maps them, appended through a real log on real
// files; state read back with km_pstate_get / km_pstate_get_stats.
#include <sys/wait.h>

#include "log_check.h"

using namespace logtest;

namespace {

// Producer 5 of some source cluster, mapped as the mirror maps it.
std::vector<uint8_t> Mapped(int64_t off, int32_t seq, int n, int16_t epoch = 0)
{
	Batch b(Data(off, 5, epoch, seq, n));
	EXPECT_EQ(1, km_batch_map_pid(&b.view));
	EXPECT_EQ(-7, km_batch_producer_id(&b.view));
	EXPECT_EQ(0, km_batch_verify_crc(&b.view)) << "CRC patched in place";
	return b.bytes;
}

// Source A's producer 5: ten batches, sequences 0..19 at offsets 0..19.
void AppendSourceA(Log &l)
{
	for (int i = 0; i < 10; i++) {
		Batch b(Mapped(i * 2, i * 2, 2));
		ASSERT_EQ(1, l.Append(b));
	}
}

// Source B's producer 5, a different producer: starts again at sequence 0.
void AppendSourceB(Log &l, int64_t from)
{
	for (int i = 0; i < 3; i++) {
		Batch b(Mapped(from + i * 2, i * 2, 2));
		km_log_append_result res;
		ASSERT_EQ(1, l.Append(b, KM_ORIGIN_MIRROR, &res))
			<< "MIRROR appends are never rejected";
		EXPECT_EQ(1u, res.appended);
	}
}

km_pstate_stats Stats(Log &l)
{
	km_pstate_stats st;
	km_pstate_get_stats(km_log_pstate(l.log), &st);
	return st;
}

TEST(Collision, WithoutBarrierStateIsMergedAndOnlyCounted)
{
	TempDir td;
	Log l(td.path);
	AppendSourceA(l);
	AppendSourceB(l, 20);
	km_pstate *ps = km_log_pstate(l.log);
	EXPECT_EQ(1u, km_pstate_count(ps)) << "two producers, one entry";
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(ps, -7, &pi));
	EXPECT_EQ(5, pi.last_seq) << "B's sequence now";
	EXPECT_EQ(25, pi.last_offset);
	EXPECT_EQ(5u, pi.batch_count) << "A's batches and B's, mixed";
	EXPECT_EQ(-ENOENT, km_pstate_get(ps, 5, &pi)) << "nothing unmapped";
	km_pstate_stats st = Stats(l);
	EXPECT_EQ(1u, st.mirror_sequence_gaps) << "0 after 19: the one trace";
	EXPECT_EQ(0u, st.barriers_applied);
	EXPECT_EQ(0, km_log_error(l.log));
	EXPECT_EQ(26, km_log_end_offset(l.log));

	// The merged state now judges the id: a producer reusing -7 locally
	// is checked against B's sequence, not from scratch.
	Batch local(Data(0, -7, 0, 0, 1));
	EXPECT_EQ(KM_EOUTOFORDERSEQ, l.Append(local, KM_ORIGIN_CLIENT));
}

TEST(Collision, EpochGoingBackIsCountedToo)
{
	TempDir td;
	Log l(td.path);
	for (int i = 0; i < 3; i++) {
		Batch b(Mapped(i, i, 1, 4)); // source A's producer 5, epoch 4
		ASSERT_EQ(1, l.Append(b));
	}
	Batch b(Mapped(3, 0, 1, 0)); // source B's producer 5, epoch 0
	ASSERT_EQ(1, l.Append(b));
	EXPECT_EQ(1u, Stats(l).mirror_epoch_regressions);
	EXPECT_EQ(1u, km_pstate_count(km_log_pstate(l.log)));
}

TEST(Collision, BarrierSeparatesThem)
{
	TempDir td;
	{
		Log l(td.path);
		AppendSourceA(l);
		Batch bar(Barrier(0, "sourceA-cluster-id-xyz"));
		km_log_append_result res;
		ASSERT_EQ(1, l.Append(bar, KM_ORIGIN_CONTROL, &res));
		EXPECT_EQ(20, res.first_offset) << "local: placed at the log end";
		EXPECT_EQ(1u, res.barriers);
		EXPECT_EQ(1u, res.barrier_expired) << "A's -7";
		EXPECT_EQ(0u, km_pstate_count(km_log_pstate(l.log)));
		AppendSourceB(l, 21);

		km_producer_info pi;
		ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), -7, &pi));
		EXPECT_EQ(5, pi.last_seq);
		EXPECT_EQ(26, pi.last_offset);
		EXPECT_EQ(3u, pi.batch_count) << "B's batches only";
		km_pstate_stats st = Stats(l);
		EXPECT_EQ(0u, st.mirror_sequence_gaps) << "B started clean";
		EXPECT_EQ(1u, st.barriers_applied);
	}
	// Crash (no close): recovery replays the log, barrier included.
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(td.path);
		Batch more(Mapped(27, 6, 1));
		_exit(l.Append(more) == 1 ? 0 : 1); // no close
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	Log l(td.path);
	EXPECT_FALSE(l.rec.clean);
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), -7, &pi));
	EXPECT_EQ(6, pi.last_seq);
	EXPECT_EQ(1u, km_pstate_count(km_log_pstate(l.log)));
	EXPECT_EQ(0u, Stats(l).mirror_sequence_gaps)
		<< "replay met the barrier before B";
}

// After the barrier the id is free: a new local producer that reuses it is
// validated like any unknown producer, then held to its own sequence.
TEST(Collision, ReusedIdAfterBarrierValidatedFromScratch)
{
	TempDir td;
	Log l(td.path);
	AppendSourceA(l);
	Batch bar(Barrier(0));
	ASSERT_EQ(1, l.Append(bar, KM_ORIGIN_CONTROL));
	km_log_append_result res;
	Batch s0(Data(0, -7, 0, 0, 2));
	ASSERT_EQ(1, l.Append(s0, KM_ORIGIN_CLIENT, &res)) << "sequence 0";
	EXPECT_EQ(21, res.first_offset);
	Batch gap(Data(0, -7, 0, 5, 1));
	EXPECT_EQ(KM_EOUTOFORDERSEQ, l.Append(gap, KM_ORIGIN_CLIENT, &res));
	EXPECT_EQ(23, km_log_end_offset(l.log)) << "nothing of it written";
	Batch dup(Data(0, -7, 0, 0, 2));
	EXPECT_EQ(KM_EDUPLICATE, l.Append(dup, KM_ORIGIN_CLIENT, &res));
	EXPECT_EQ(21, res.dup_first_offset);
	EXPECT_EQ(22, res.dup_last_offset);
	Batch s2(Data(0, -7, 0, 2, 1));
	ASSERT_EQ(1, l.Append(s2, KM_ORIGIN_CLIENT, &res));
	EXPECT_EQ(23, res.first_offset);
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), -7, &pi));
	EXPECT_EQ(2, pi.last_seq);
	EXPECT_EQ(0u, Stats(l).mirror_sequence_gaps);
}

// A barrier is refused locally while a mirrored transaction is open (R3).
TEST(Collision, LocalBarrierRefusedWhileMirroredTxnOpen)
{
	TempDir td;
	Log l(td.path);
	Batch t(Data(0, -7, 0, 0, 2, true));
	ASSERT_EQ(1, l.Append(t));
	Batch bar(Barrier(0));
	EXPECT_EQ(KM_ETXNOPEN, l.Append(bar, KM_ORIGIN_CONTROL));
	EXPECT_EQ(2, km_log_end_offset(l.log));
	Batch abort_m(Marker(0, -7, 0, false));
	ASSERT_EQ(1, l.Append(abort_m, KM_ORIGIN_CONTROL));
	Batch bar2(Barrier(0));
	km_log_append_result res;
	ASSERT_EQ(1, l.Append(bar2, KM_ORIGIN_CONTROL, &res));
	EXPECT_EQ(1u, res.barrier_expired);
	EXPECT_EQ(km_log_end_offset(l.log), km_log_lso(l.log));
}

// ---- R4 truncate mode ----

struct CutCase {
	uint64_t segment_bytes;
};

class CleanCut : public ::testing::TestWithParam<CutCase> {};

// Offsets: 0..9 producer 9 (no txn); T1 = producer 3 from 10, T2 =
// producer 4 from 20 (never ends), more of T1 in between, COMMIT of T1 at
// 50, then more data of producer 9 and T2.
TEST_P(CleanCut, CutMovesBelowTransactionsCutInHalf)
{
	TempDir td;
	Log l(td.path, [](km_log_config &c) {
		c.segment_bytes = GetParam().segment_bytes;
		c.index_interval_bytes = 256;
	});
	std::vector<std::vector<uint8_t>> s;
	s.push_back(Data(0, 9, 0, 0, 10, false, 60));
	s.push_back(Data(10, 3, 0, 0, 5, true, 60)); // T1 opens at 10
	s.push_back(Data(15, 9, 0, 10, 5, false, 60));
	s.push_back(Data(20, 4, 0, 0, 5, true, 60)); // T2 opens at 20
	for (int i = 0; i < 5; i++)
		s.push_back(Data(25 + i * 5, 3, 0, 5 + i * 5, 5, true, 60));
	s.push_back(Marker(50, 3, 0, true)); // T1 committed
	s.push_back(Data(51, 9, 0, 15, 4, false, 60));
	s.push_back(Data(55, 4, 0, 5, 5, true, 60));
	for (auto &b : s) {
		Batch v(b);
		ASSERT_EQ(1, l.Append(v));
	}
	ASSERT_EQ(60, km_log_end_offset(l.log));
	EXPECT_EQ(20, km_log_lso(l.log)) << "T2 is open from 20";
	EXPECT_EQ(10, km_log_clean_cut(l.log))
		<< "cutting at 20 would keep half of T1 (10..49) without its commit";
	uint64_t bytes;
	uint32_t batches;
	ASSERT_EQ(10, km_log_truncate_to(l.log, 10, &bytes, &batches));
	EXPECT_EQ(s.size() - 1, batches);
	km_pstate *ps = km_log_pstate(l.log);
	EXPECT_EQ(-1, km_pstate_first_open_txn(ps));
	EXPECT_FALSE(km_pstate_has_open_negative_txn(ps));
	km_producer_info open[4];
	EXPECT_EQ(0u, km_pstate_open_txns(ps, open, 4));
	EXPECT_EQ(10, km_log_end_offset(l.log));
	EXPECT_EQ(10, km_log_lso(l.log));
	EXPECT_EQ(10, km_log_durable_offset(l.log));
	km_producer_info pi;
	EXPECT_EQ(-ENOENT, km_pstate_get(ps, 3, &pi));
	EXPECT_EQ(-ENOENT, km_pstate_get(ps, 4, &pi));
	ASSERT_EQ(0, km_pstate_get(ps, 9, &pi));
	EXPECT_EQ(9, pi.last_seq);
	// The cut is stable: nothing open, so it is the log end.
	EXPECT_EQ(10, km_log_clean_cut(l.log));
	ASSERT_EQ(0, l.Close());
	l.Open();
	EXPECT_EQ(10, km_log_lso(l.log));
	EXPECT_EQ(10, km_log_end_offset(l.log));
}

// A chain: T1 10..50, T2 30..70, T3 open from 60. LSO 60 -> T2 (marker 70)
// -> 30 -> T1 (marker 50) -> 10.
TEST_P(CleanCut, ChainOfTransactions)
{
	TempDir td;
	Log l(td.path, [](km_log_config &c) {
		c.segment_bytes = GetParam().segment_bytes;
	});
	std::vector<std::vector<uint8_t>> s;
	s.push_back(Data(0, 9, 0, 0, 10, false, 60));
	s.push_back(Data(10, 3, 0, 0, 20, true, 60)); // T1 10..
	s.push_back(Data(30, 4, 0, 0, 20, true, 60)); // T2 30..
	s.push_back(Marker(50, 3, 0, true));	      // T1 ends
	s.push_back(Data(51, 9, 0, 10, 9, false, 60));
	s.push_back(Data(60, 5, 0, 0, 10, true, 60)); // T3 60.. open
	s.push_back(Marker(70, 4, 0, false));	      // T2 aborted
	s.push_back(Data(71, 9, 0, 19, 5, false, 60));
	for (auto &b : s) {
		Batch v(b);
		ASSERT_EQ(1, l.Append(v));
	}
	EXPECT_EQ(60, km_log_lso(l.log));
	EXPECT_EQ(10, km_log_clean_cut(l.log));
	ASSERT_EQ(10, km_log_truncate_to(l.log, 10, nullptr, nullptr));
	EXPECT_EQ(10, km_log_lso(l.log));
	km_aborted_txn ab[4];
	EXPECT_EQ(0, km_log_aborted_txns(l.log, 0, 10, ab, 4))
		<< "T2's .txnindex entry went with its marker";
}

INSTANTIATE_TEST_SUITE_P(Segments, CleanCut,
			 ::testing::Values(CutCase{1 << 20}, CutCase{1024},
					   CutCase{1500}),
			 [](const ::testing::TestParamInfo<CutCase> &i) {
				 return "seg" + std::to_string(i.param.segment_bytes);
			 });

} // namespace
