// Goal: the transaction coordinator's logic (dataplane/group/txncoord.c)
// answers InitProducerId, AddPartitionsToTxn and EndTxn as Kafka's
// TransactionCoordinator does (transaction.version 1): producer ids from
// the daemon's allocator, an epoch bump per InitProducerId, the old
// producer fenced, an open transaction aborted under a fencing epoch by a
// new instance or its timeout, and the COMMIT/ABORT markers named for
// exactly the partitions the transaction touched.
// Method: pure calls under a simulated clock; producer ids come from a
// counting allocator, so every expected id is derived from what it handed
// out, never written down.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "dataplane/group/txncoord.h"
#include "kafka/proto.h"
#include "kafka/txnrec.h"

namespace {

struct Alloc {
	int64_t next = 5000;
	int calls = 0;
};

int alloc_pid(void *ctx, int64_t *pid, int16_t *epoch)
{
	Alloc *a = static_cast<Alloc *>(ctx);
	*pid = a->next++;
	*epoch = 0;
	a->calls++;
	return 0;
}

class TxnCoord : public ::testing::Test {
protected:
	void SetUp() override
	{
		km_txncoord_config cfg = {4, 8, alloc_pid, &alloc};
		ASSERT_EQ(0, km_txncoord_create(&cfg, &c));
	}
	void TearDown() override { km_txncoord_destroy(c); }

	int16_t Init(const char *id, int64_t *pid, int16_t *epoch,
		     int64_t xpid = -1, int16_t xepoch = -1)
	{
		return km_txncoord_init_pid(c, id, 60000, xpid, xepoch, now,
					    pid, epoch, &m);
	}
	std::set<std::string> Parts() const
	{
		std::set<std::string> s;
		for (uint32_t i = 0; i < m.n_parts; i++)
			s.insert(std::string(m.parts[i].topic) + "-" +
				 std::to_string(m.parts[i].partition));
		return s;
	}

	Alloc alloc;
	km_txncoord *c = nullptr;
	km_txn_markers m = {};
	int64_t now = 1000;
};

TEST_F(TxnCoord, InitGivesAnAllocatedIdThenBumpsItsEpoch)
{
	int64_t pid, pid2;
	int16_t epoch, epoch2;

	ASSERT_EQ(0, Init("app", &pid, &epoch));
	EXPECT_EQ(alloc.next - 1, pid);
	EXPECT_EQ(0, epoch);
	ASSERT_EQ(0, Init("app", &pid2, &epoch2));
	EXPECT_EQ(pid, pid2);
	EXPECT_EQ(epoch + 1, epoch2);
	EXPECT_EQ(1, alloc.calls);
	EXPECT_EQ(KM_TXN_EMPTY, km_txncoord_state(c, "app"));
	ASSERT_EQ(0, Init("other", &pid2, &epoch2));
	EXPECT_NE(pid, pid2);
	EXPECT_EQ(KM_KERR_INVALID_TRANSACTION_TIMEOUT,
		  km_txncoord_init_pid(c, "app", 0, -1, -1, now, &pid, &epoch,
				       &m));
	EXPECT_EQ(KM_KERR_INVALID_TRANSACTION_TIMEOUT,
		  km_txncoord_init_pid(c, "app", KM_TXNCOORD_TIMEOUT_MAX_MS + 1,
				       -1, -1, now, &pid, &epoch, &m));
}

TEST_F(TxnCoord, CommitNamesEveryPartitionAddedOnce)
{
	int64_t pid;
	int16_t epoch;

	ASSERT_EQ(0, Init("app", &pid, &epoch));
	EXPECT_FALSE(km_txncoord_may_write(c, pid, epoch, "t", 0));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "app", pid, epoch, "t", 0, now));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "app", pid, epoch, "t", 2, now));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "app", pid, epoch, "t", 0, now));
	EXPECT_EQ(KM_TXN_ONGOING, km_txncoord_state(c, "app"));
	EXPECT_TRUE(km_txncoord_may_write(c, pid, epoch, "t", 2));
	EXPECT_FALSE(km_txncoord_may_write(c, pid, epoch, "t", 1));
	EXPECT_FALSE(km_txncoord_may_write(c, pid, epoch - 1, "t", 2));

	ASSERT_EQ(0, km_txncoord_end(c, "app", pid, epoch, true, &m));
	EXPECT_TRUE(m.commit);
	EXPECT_EQ(pid, m.producer_id);
	EXPECT_EQ(epoch, m.producer_epoch);
	EXPECT_EQ((std::set<std::string>{"t-0", "t-2"}), Parts());
	EXPECT_EQ(KM_TXN_PREPARE_COMMIT, km_txncoord_state(c, "app"));
	EXPECT_FALSE(km_txncoord_may_write(c, pid, epoch, "t", 2));
	// Until the markers are durable, the producer waits.
	EXPECT_EQ(KM_KERR_CONCURRENT_TRANSACTIONS,
		  km_txncoord_add_partition(c, "app", pid, epoch, "t", 1, now));
	EXPECT_EQ(KM_KERR_CONCURRENT_TRANSACTIONS,
		  km_txncoord_end(c, "app", pid, epoch, true, &m));
	EXPECT_EQ(KM_KERR_INVALID_TXN_STATE,
		  km_txncoord_end(c, "app", pid, epoch, false, &m));
	ASSERT_EQ(0, km_txncoord_markers_written(c, "app"));
	EXPECT_EQ(KM_TXN_COMPLETE_COMMIT, km_txncoord_state(c, "app"));
	// A retried commit is answered NONE with nothing to write; an abort
	// of the committed transaction is refused.
	EXPECT_EQ(0, km_txncoord_end(c, "app", pid, epoch, true, &m));
	EXPECT_EQ(0u, m.n_parts);
	EXPECT_EQ(KM_KERR_INVALID_TXN_STATE,
		  km_txncoord_end(c, "app", pid, epoch, false, &m));
	// The next transaction starts with no partition of the last one.
	ASSERT_EQ(0, km_txncoord_add_partition(c, "app", pid, epoch, "u", 3, now));
	ASSERT_EQ(0, km_txncoord_end(c, "app", pid, epoch, false, &m));
	EXPECT_FALSE(m.commit);
	EXPECT_EQ((std::set<std::string>{"u-3"}), Parts());
}

TEST_F(TxnCoord, ANewInstanceFencesTheOldAndAbortsItsTransaction)
{
	int64_t pid, pid2;
	int16_t epoch, epoch2;

	ASSERT_EQ(0, Init("app", &pid, &epoch));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "app", pid, epoch, "t", 0, now));
	// The new instance's first init aborts the open transaction under a
	// fencing epoch and tells it to retry.
	ASSERT_EQ(KM_KERR_CONCURRENT_TRANSACTIONS, Init("app", &pid2, &epoch2));
	EXPECT_FALSE(m.commit);
	EXPECT_EQ(pid, m.producer_id);
	EXPECT_EQ(epoch + 1, m.producer_epoch);
	EXPECT_EQ((std::set<std::string>{"t-0"}), Parts());
	EXPECT_EQ(KM_KERR_CONCURRENT_TRANSACTIONS, Init("app", &pid2, &epoch2));
	ASSERT_EQ(0, km_txncoord_markers_written(c, "app"));
	ASSERT_EQ(0, Init("app", &pid2, &epoch2));
	EXPECT_EQ(pid, pid2);
	EXPECT_EQ(epoch + 2, epoch2);
	// The old instance is fenced everywhere.
	EXPECT_EQ(KM_KERR_PRODUCER_FENCED,
		  km_txncoord_add_partition(c, "app", pid, epoch, "t", 0, now));
	EXPECT_EQ(KM_KERR_PRODUCER_FENCED,
		  km_txncoord_end(c, "app", pid, epoch, true, &m));
	EXPECT_EQ(KM_KERR_INVALID_PRODUCER_ID_MAPPING,
		  km_txncoord_add_partition(c, "app", pid + 1, epoch2, "t", 0, now));
	EXPECT_EQ(KM_KERR_INVALID_PRODUCER_ID_MAPPING,
		  km_txncoord_end(c, "nobody", pid, epoch2, true, &m));
	// EndTxn with nothing open is INVALID_TXN_STATE, as Kafka (TV1).
	EXPECT_EQ(KM_KERR_INVALID_TXN_STATE,
		  km_txncoord_end(c, "app", pid2, epoch2, true, &m));
}

TEST_F(TxnCoord, KIP360ExpectedProducerMustBeCurrentOrTheOneBefore)
{
	int64_t pid, pid2, pid3;
	int16_t epoch, epoch2, epoch3;

	ASSERT_EQ(0, Init("app", &pid, &epoch));
	ASSERT_EQ(0, Init("app", &pid2, &epoch2, pid, epoch));
	EXPECT_EQ(epoch + 1, epoch2);
	// The answer was lost: the same request again gets the same answer.
	ASSERT_EQ(0, Init("app", &pid3, &epoch3, pid, epoch));
	EXPECT_EQ(epoch2, epoch3);
	EXPECT_EQ(KM_KERR_PRODUCER_FENCED,
		  Init("app", &pid3, &epoch3, pid, (int16_t)(epoch2 + 5)));
}

TEST_F(TxnCoord, ATimedOutTransactionIsAbortedAndItsProducerFenced)
{
	int64_t pid;
	int16_t epoch;

	ASSERT_EQ(0, km_txncoord_init_pid(c, "app", 500, -1, -1, now, &pid,
					  &epoch, &m));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "app", pid, epoch, "t", 1, now));
	EXPECT_EQ(0, km_txncoord_expire(c, now + 500, &m));
	ASSERT_EQ(1, km_txncoord_expire(c, now + 501, &m));
	EXPECT_FALSE(m.commit);
	EXPECT_EQ(epoch + 1, m.producer_epoch);
	EXPECT_EQ((std::set<std::string>{"t-1"}), Parts());
	EXPECT_EQ(0, km_txncoord_expire(c, now + 10000, &m));
	ASSERT_EQ(0, km_txncoord_markers_written(c, "app"));
	EXPECT_EQ(KM_KERR_PRODUCER_FENCED,
		  km_txncoord_end(c, "app", pid, epoch, true, &m));
}

TEST_F(TxnCoord, AnExhaustedEpochGetsANewProducerId)
{
	int64_t pid, pid2;
	int16_t epoch = 0, epoch2;

	ASSERT_EQ(0, Init("app", &pid, &epoch));
	for (int i = 0; i < INT16_MAX - 1 && epoch < INT16_MAX - 1; i++)
		ASSERT_EQ(0, Init("app", &pid2, &epoch));
	EXPECT_EQ(INT16_MAX - 1, epoch);
	EXPECT_EQ(1, alloc.calls);
	ASSERT_EQ(0, Init("app", &pid2, &epoch2));
	EXPECT_EQ(2, alloc.calls);
	EXPECT_EQ(alloc.next - 1, pid2);
	EXPECT_NE(pid, pid2);
	EXPECT_EQ(0, epoch2);
}

TEST_F(TxnCoord, AFullTableRefusesNewIdsUntilAnIdleOneIsForgotten)
{
	int64_t pid[4];
	int16_t epoch[4];
	const char *ids[] = {"a", "b", "c", "d"};

	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(0, Init(ids[i], &pid[i], &epoch[i]));
		ASSERT_EQ(0, km_txncoord_add_partition(c, ids[i], pid[i],
						       epoch[i], "t", 0, now));
		ASSERT_TRUE(km_txncoord_take_dirty(c, ids[i], now));
	}
	int64_t p;
	int16_t e;
	EXPECT_EQ(KM_KERR_POLICY_VIOLATION, Init("e", &p, &e));
	ASSERT_EQ(0, km_txncoord_end(c, "b", pid[1], epoch[1], true, &m));
	ASSERT_EQ(0, km_txncoord_markers_written(c, "b"));
	ASSERT_TRUE(km_txncoord_take_dirty(c, "b", now));
	// A finished id is kept: it would come back from the log.
	EXPECT_EQ(KM_KERR_POLICY_VIOLATION, Init("e", &p, &e));
	// Not idle long enough; an Ongoing one never expires this way.
	EXPECT_EQ(nullptr, km_txncoord_expire_id(c, now + 1000, 1000));
	const char *gone = km_txncoord_expire_id(c, now + 1001, 1000);
	ASSERT_NE(nullptr, gone);
	EXPECT_STREQ("b", gone);
	// Its tombstone is the record now; forgotten once durable.
	km_txnrec_value v;
	EXPECT_EQ(1, km_txncoord_record(c, "b", &v));
	ASSERT_EQ(0, km_txncoord_forget(c, "b"));
	ASSERT_EQ(0, Init("e", &p, &e));
	EXPECT_EQ(-ENOENT, km_txncoord_state(c, "b"));
	EXPECT_EQ(KM_TXN_ONGOING, km_txncoord_state(c, "a"));
}

// Durability: every change marks the id dirty; its record, replayed into
// a fresh table, gives the same state, producer, epoch and partitions, and
// a Prepare* transaction is named for its markers again.
TEST_F(TxnCoord, RecordsReplayIntoTheSameTable)
{
	int64_t pa, pb;
	int16_t ea, eb;

	ASSERT_EQ(0, Init("a", &pa, &ea));
	EXPECT_TRUE(km_txncoord_take_dirty(c, "a", now));
	EXPECT_FALSE(km_txncoord_take_dirty(c, "a", now));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "a", pa, ea, "x", 1, now));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "a", pa, ea, "y", 0, now));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "a", pa, ea, "x", 0, now));
	EXPECT_TRUE(km_txncoord_take_dirty(c, "a", now));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "a", pa, ea, "y", 0, now));
	EXPECT_FALSE(km_txncoord_take_dirty(c, "a", now)) << "nothing changed";
	ASSERT_EQ(0, Init("b", &pb, &eb));
	ASSERT_EQ(0, km_txncoord_add_partition(c, "b", pb, eb, "x", 2, now));
	ASSERT_EQ(0, km_txncoord_end(c, "b", pb, eb, true, &m));
	EXPECT_TRUE(km_txncoord_take_dirty(c, "b", now + 5));

	km_txnrec_value va, vb;
	ASSERT_EQ(0, km_txncoord_record(c, "a", &va));
	ASSERT_EQ(0, km_txncoord_record(c, "b", &vb));
	EXPECT_EQ(KM_TXNREC_ONGOING, va.status);
	ASSERT_EQ(3u, va.n_parts);
	// Grouped by topic, as Kafka writes them.
	EXPECT_STREQ("x", va.parts[0].topic);
	EXPECT_STREQ("x", va.parts[1].topic);
	EXPECT_STREQ("y", va.parts[2].topic);
	EXPECT_EQ(now, va.start_ms);
	EXPECT_EQ(KM_TXNREC_PREPARE_COMMIT, vb.status);
	EXPECT_EQ(now + 5, vb.last_update_ms);

	Alloc alloc2;
	km_txncoord_config cfg = {4, 8, alloc_pid, &alloc2};
	km_txncoord *r = nullptr;
	ASSERT_EQ(0, km_txncoord_create(&cfg, &r));
	ASSERT_EQ(0, km_txncoord_restore(r, "a", &va));
	ASSERT_EQ(0, km_txncoord_restore(r, "b", &vb));
	EXPECT_EQ(KM_TXN_ONGOING, km_txncoord_state(r, "a"));
	EXPECT_EQ(KM_TXN_PREPARE_COMMIT, km_txncoord_state(r, "b"));
	EXPECT_TRUE(km_txncoord_may_write(r, pa, ea, "y", 0));
	EXPECT_FALSE(km_txncoord_may_write(r, pa, ea, "y", 1));
	EXPECT_EQ(pb > pa ? pb : pa, km_txncoord_max_pid(r));
	uint32_t cursor = 0;
	km_txn_markers mk;
	ASSERT_EQ(1, km_txncoord_prepared(r, &cursor, &mk));
	EXPECT_STREQ("b", mk.transactional_id);
	EXPECT_TRUE(mk.commit);
	EXPECT_EQ(pb, mk.producer_id);
	ASSERT_EQ(1u, mk.n_parts);
	EXPECT_EQ(2, mk.parts[0].partition);
	EXPECT_EQ(0, km_txncoord_prepared(r, &cursor, &mk));
	// The restored Ongoing one keeps its start: it times out as before.
	EXPECT_EQ(0, km_txncoord_expire(r, now + 60000, &mk));
	EXPECT_EQ(1, km_txncoord_expire(r, now + 60001, &mk));
	// A tombstone forgets.
	ASSERT_EQ(0, km_txncoord_restore(r, "a", nullptr));
	EXPECT_EQ(-ENOENT, km_txncoord_state(r, "a"));
	EXPECT_EQ(0, alloc2.calls) << "a replay hands out no id";
	km_txncoord_destroy(r);
}

// While a record of an id is being written its requests wait
// (CONCURRENT_TRANSACTIONS), as Kafka answers a pending transition.
TEST_F(TxnCoord, APendingIdIsConcurrent)
{
	int64_t p;
	int16_t e;

	ASSERT_EQ(0, Init("a", &p, &e));
	ASSERT_EQ(0, km_txncoord_set_pending(c, "a", true));
	EXPECT_EQ(KM_KERR_CONCURRENT_TRANSACTIONS,
		  km_txncoord_add_partition(c, "a", p, e, "t", 0, now));
	int64_t p2;
	int16_t e2;
	EXPECT_EQ(KM_KERR_CONCURRENT_TRANSACTIONS, Init("a", &p2, &e2));
	ASSERT_EQ(0, km_txncoord_set_pending(c, "a", false));
	EXPECT_EQ(0, km_txncoord_add_partition(c, "a", p, e, "t", 0, now));
	// An Ongoing transaction whose record is being written (a
	// compaction's copy of every live id, in the full run) is not in a
	// wrong state: EndTxn either way waits, then goes through.
	km_txn_markers mk;
	ASSERT_EQ(0, km_txncoord_set_pending(c, "a", true));
	EXPECT_EQ(KM_KERR_CONCURRENT_TRANSACTIONS,
		  km_txncoord_end(c, "a", p, e, true, &mk));
	EXPECT_EQ(KM_KERR_CONCURRENT_TRANSACTIONS,
		  km_txncoord_end(c, "a", p, e, false, &mk));
	ASSERT_EQ(0, km_txncoord_set_pending(c, "a", false));
	EXPECT_EQ(0, km_txncoord_end(c, "a", p, e, true, &mk));
	EXPECT_EQ(1u, mk.n_parts);
	// Once it is PrepareCommit, an abort is the wrong decision.
	EXPECT_EQ(KM_KERR_INVALID_TXN_STATE,
		  km_txncoord_end(c, "a", p, e, false, &mk));
}

} // namespace
