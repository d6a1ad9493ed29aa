/* Kafka transaction coordinator as pure logic (issue 20): the state of each
 * transactional.id and the answers of InitProducerId (with a
 * transactional id), AddPartitionsToTxn, AddOffsetsToTxn and EndTxn, the
 * transaction.version 1 protocol (KIP-98, KIP-360 for InitProducerId v3+).
 * No I/O and no clock of its own: the front-end decodes a request, calls in
 * with the time, encodes the Kafka error code that comes back, and writes
 * the COMMIT/ABORT markers a completed EndTxn or an expired transaction
 * names (through each partition's owner), then calls
 * km_txncoord_markers_written().
 *
 * Model (Kafka's TransactionCoordinator / TransactionMetadata): per
 * transactional id a producer id and epoch, a state Empty -> Ongoing ->
 * PrepareCommit | PrepareAbort -> CompleteCommit | CompleteAbort (-> Ongoing
 * again), the partitions of the open transaction, its timeout and start.
 * Kafka rules kept:
 *  - InitProducerId: a new id gets a fresh producer id (the caller's
 *    allocator: R4 step 6, above every id seen) at epoch 0; a known one in
 *    Empty or Complete* gets its epoch bumped (a new producer id at epoch 0
 *    once the epoch would pass 32766); in Ongoing the transaction is
 *    aborted under a bumped epoch (the old producer is fenced) and the
 *    answer is CONCURRENT_TRANSACTIONS, so the client retries and bumps a
 *    second time; in Prepare* CONCURRENT_TRANSACTIONS. With v3+'s expected
 *    producer id and epoch, anything but the current pair (or the one
 *    before the last bump, a retry) is PRODUCER_FENCED. A timeout of 0 or
 *    over the maximum is INVALID_TRANSACTION_TIMEOUT.
 *  - AddPartitionsToTxn / AddOffsetsToTxn / EndTxn: an unknown id or
 *    another producer id is INVALID_PRODUCER_ID_MAPPING, another epoch
 *    PRODUCER_FENCED (the caller maps it to INVALID_PRODUCER_EPOCH below
 *    the version that knows it), Prepare* CONCURRENT_TRANSACTIONS.
 *  - EndTxn: Ongoing -> Prepare*; the same decision again once complete
 *    (a retry) is NONE; the other decision, or EndTxn on Empty, is
 *    INVALID_TXN_STATE (Kafka answers an abort of an Empty TV1 transaction
 *    the same way).
 *  - An Ongoing transaction older than its timeout is aborted under a
 *    bumped epoch (km_txncoord_expire), fencing its producer.
 *
 * Durability (frontend_txnlog.c): every change of an id marks it dirty;
 * the front-end takes the mark (km_txncoord_take_dirty), writes the id's
 * record (km_txncoord_record, Kafka's __transaction_state value) with the
 * id pending meanwhile (its requests are CONCURRENT_TRANSACTIONS, as
 * Kafka answers an id with a pending transition), and answers the client
 * once the record is durable. A restart replays the records
 * (km_txncoord_restore) and finishes what was Prepare*
 * (km_txncoord_prepared). A full table is POLICY_VIOLATION: an id is never
 * taken over, it would come back from the log; ids idle longer than
 * transactional.id.expiration.ms are forgotten with a tombstone
 * (km_txncoord_expire_id, km_txncoord_forget).
 *
 * Not here yet (later phases of issue 20): TxnOffsetCommit's pending
 * offsets, TV2's epoch bump per transaction.
 *
 * Threading: single-threaded, the front-end's worker. Memory: everything at
 * km_txncoord_create() (ids_max ids of parts_max partitions each).
 */
#ifndef KM_DATAPLANE_TXNCOORD_H
#define KM_DATAPLANE_TXNCOORD_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* transactional.id.expiration.ms's default (Kafka's: 7 days). */
#define KM_TXN_ID_EXPIRATION_MS 604800000
/* transaction.max.timeout.ms's default. */
#define KM_TXNCOORD_TIMEOUT_MAX_MS 900000
/* Longest transactional id / topic name kept (Kafka's topic limit). */
#define KM_TXNCOORD_NAME_MAX 249

enum km_txn_state {
	KM_TXN_EMPTY = 0,
	KM_TXN_ONGOING,
	KM_TXN_PREPARE_COMMIT,
	KM_TXN_PREPARE_ABORT,
	KM_TXN_COMPLETE_COMMIT,
	KM_TXN_COMPLETE_ABORT,
};

/* Hands out a producer id above every one seen (epoch ignored). */
typedef int (*km_txncoord_pid_fn)(void *ctx, int64_t *pid, int16_t *epoch);

struct km_txncoord_config {
	uint32_t ids_max;	/* transactional ids kept */
	uint32_t parts_max;	/* partitions in one transaction */
	km_txncoord_pid_fn alloc_pid;
	void *alloc_ctx;
};

struct km_txn_part {
	char topic[KM_TXNCOORD_NAME_MAX + 1];
	int32_t partition;
};

/* The markers an ended transaction needs: one control batch of this
 * producer and epoch on each partition. Valid until the next call. */
struct km_txn_markers {
	const char *transactional_id;
	int64_t producer_id;
	int16_t producer_epoch;
	bool commit;
	const struct km_txn_part *parts;
	uint32_t n_parts;
};

struct km_txncoord; /* opaque */

int km_txncoord_create(const struct km_txncoord_config *cfg,
		       struct km_txncoord **out);
void km_txncoord_destroy(struct km_txncoord *c);

/**
 * InitProducerId with a transactional id. expect_pid/expect_epoch: v3+'s
 * ProducerId/ProducerEpoch, else -1/-1. On NONE *pid and *epoch are the
 * producer's; when an Ongoing transaction was aborted (answer
 * CONCURRENT_TRANSACTIONS) *markers names its abort.
 * @return a Kafka error code (0: NONE).
 */
int16_t km_txncoord_init_pid(struct km_txncoord *c, const char *txn_id,
			     int32_t timeout_ms, int64_t expect_pid,
			     int16_t expect_epoch, int64_t now_ms,
			     int64_t *pid, int16_t *epoch,
			     struct km_txn_markers *markers);

/** AddPartitionsToTxn for one partition (call once per partition: the
 *  answer is per partition). @return a Kafka error code. */
int16_t km_txncoord_add_partition(struct km_txncoord *c, const char *txn_id,
				  int64_t pid, int16_t epoch,
				  const char *topic, int32_t partition,
				  int64_t now_ms);

/** EndTxn. On NONE with *markers->n_parts > 0 the caller writes them and
 *  then calls km_txncoord_markers_written(); n_parts 0 means nothing to
 *  write (a retry, or a transaction with no partition).
 *  @return a Kafka error code. */
int16_t km_txncoord_end(struct km_txncoord *c, const char *txn_id,
			int64_t pid, int16_t epoch, bool commit,
			struct km_txn_markers *markers);

/** Every marker of txn_id's Prepare* transaction is durable: Complete*.
 *  @return 0, or -ENOENT (unknown id) / -EINVAL (not Prepare*). */
int km_txncoord_markers_written(struct km_txncoord *c, const char *txn_id);

/**
 * Abort the first Ongoing transaction past its timeout at now_ms under a
 * bumped epoch (its producer is fenced).
 * @return 1 and *markers (write them, then km_txncoord_markers_written), or
 *         0 when none expired.
 */
int km_txncoord_expire(struct km_txncoord *c, int64_t now_ms,
		       struct km_txn_markers *markers);

/** May pid at epoch write transactional batches to topic/partition: an
 *  Ongoing transaction holds it. */
bool km_txncoord_may_write(const struct km_txncoord *c, int64_t pid,
			   int16_t epoch, const char *topic,
			   int32_t partition);

/** Kafka's transaction verification (handleVerifyPartitionsInTransaction)
 *  of a write for txn_id's producer at pid/epoch into topic/partition
 *  (TxnOffsetCommit's offsets partition): INVALID_PRODUCER_ID_MAPPING,
 *  PRODUCER_FENCED, CONCURRENT_TRANSACTIONS (Prepare*), INVALID_TXN_STATE
 *  (not Ongoing, or the partition was not added), or 0. */
int16_t km_txncoord_verify(const struct km_txncoord *c, const char *txn_id,
			   int64_t pid, int16_t epoch, const char *topic,
			   int32_t partition);

/** The state of txn_id, or -ENOENT. */
int km_txncoord_state(const struct km_txncoord *c, const char *txn_id);

struct km_txnrec_value;

/** Did txn_id change since the last call? If so its record's time is
 *  now_ms (wall clock) and the mark is cleared. */
bool km_txncoord_take_dirty(struct km_txncoord *c, const char *txn_id,
			    int64_t now_ms);

/** A record of txn_id is being written (true) or durable (false, once per
 *  true): while any is, its requests are CONCURRENT_TRANSACTIONS and it
 *  neither expires nor times out. @return 0 or -ENOENT. */
int km_txncoord_set_pending(struct km_txncoord *c, const char *txn_id,
			    bool pending);

/** txn_id's __transaction_state value now (partitions grouped by topic).
 *  @return 0, 1 (forgotten: write a tombstone), -ENOENT, -E2BIG. */
int km_txncoord_record(const struct km_txncoord *c, const char *txn_id,
		       struct km_txnrec_value *v);

/** Replay one record (v NULL: a tombstone) as Kafka's loading does: the
 *  id takes the record's state (PrepareEpochFence: PrepareAbort, Dead:
 *  forgotten). @return 0, -ENOSPC (the table is full), -EINVAL. */
int km_txncoord_restore(struct km_txncoord *c, const char *txn_id,
			const struct km_txnrec_value *v);

/** The next Prepare* transaction from *cursor (start at 0) whose markers
 *  a restart must write. @return 1 and *markers, or 0 when none is left. */
int km_txncoord_prepared(const struct km_txncoord *c, uint32_t *cursor,
			 struct km_txn_markers *markers);

/** An Empty or Complete* id whose last record is older than
 *  expiration_ms: it is marked forgotten (its record is a tombstone) and
 *  returned, or NULL. */
const char *km_txncoord_expire_id(struct km_txncoord *c, int64_t now_ms,
				  int64_t expiration_ms);

/** Drop an id km_txncoord_expire_id returned, once its tombstone is
 *  durable. @return 0, -ENOENT, -EINVAL (not forgotten). */
int km_txncoord_forget(struct km_txncoord *c, const char *txn_id);

/** The next live id from *cursor (start at 0), or NULL (compaction). */
const char *km_txncoord_next_id(const struct km_txncoord *c,
				uint32_t *cursor);

/** The largest producer id the table holds, or -1. */
int64_t km_txncoord_max_pid(const struct km_txncoord *c);

#ifdef __cplusplus
}
#endif

#endif
