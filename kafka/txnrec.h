/* Records of the transaction log, `__transaction_state`, in Kafka's own
 * format (TransactionLog.keyToBytes / valueToBytes; the schemas
 * TransactionLogKey.json and TransactionLogValue.json), so that Kafka's
 * tools read the partition and a restart rebuilds the coordinator's table
 * from it, as __consumer_offsets rebuilds the committed offsets
 * (kafka/gorec.h):
 *
 *   key   version int16 = 0, TransactionalId STRING
 *   value version int16 (0: written here, as Kafka writes it below
 *         transaction.version 2; 1, flexible, is read too), ProducerId
 *         int64, ProducerEpoch int16, TransactionTimeoutMs int32,
 *         TransactionStatus int8, TransactionPartitions [Topic STRING,
 *         PartitionIds [int32]] (null when Empty),
 *         TransactionLastUpdateTimestampMs int64,
 *         TransactionStartTimestampMs int64; v1 adds tagged fields
 *         PreviousProducerId (0), NextProducerId (1) and
 *         ClientTransactionVersion (2). A null value (tombstone) removes
 *         the transactional id.
 *
 * Pure code, no I/O, contiguous buffers.
 */
#ifndef KM_KAFKA_TXNREC_H
#define KM_KAFKA_TXNREC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KM_TXNREC_TOPIC "__transaction_state"

enum {
	KM_TXNREC_NAME_MAX = 249,	/* Kafka's topic limit; ids kept too */
	KM_TXNREC_PARTS_MAX = 64,	/* partitions of one transaction */
};

/* TransactionState.id() in Kafka 4.3.1. */
enum km_txnrec_status {
	KM_TXNREC_EMPTY = 0,
	KM_TXNREC_ONGOING = 1,
	KM_TXNREC_PREPARE_COMMIT = 2,
	KM_TXNREC_PREPARE_ABORT = 3,
	KM_TXNREC_COMPLETE_COMMIT = 4,
	KM_TXNREC_COMPLETE_ABORT = 5,
	KM_TXNREC_DEAD = 6,
	KM_TXNREC_PREPARE_EPOCH_FENCE = 7,
};

struct km_txnrec_part {
	char topic[KM_TXNREC_NAME_MAX + 1];
	int32_t partition;
};

struct km_txnrec_value {
	int16_t version;		/* decode: as read; encode: 0 */
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t timeout_ms;
	int8_t status;			/* enum km_txnrec_status */
	struct km_txnrec_part parts[KM_TXNREC_PARTS_MAX]; /* topic order */
	uint32_t n_parts;
	int64_t last_update_ms;
	int64_t start_ms;		/* -1: none */
	int64_t prev_producer_id;	/* v1 tag 0, else -1 */
	int64_t next_producer_id;	/* v1 tag 1, else -1 */
	int16_t client_txn_version;	/* v1 tag 2, else 0 */
};

/**
 * Write the key of txn_id.
 * @return bytes written, -EINVAL (an id over KM_TXNREC_NAME_MAX), or
 *         KM_ENOSPACE.
 */
int km_txnrec_key_encode(void *buf, size_t cap, const char *txn_id);

/**
 * Read a key into id (NUL-terminated).
 * @return 0, or -EBADMSG: truncated, trailing bytes, a version other
 *         than 0, a negative or over-long string.
 */
int km_txnrec_key_decode(const void *buf, size_t len,
			 char id[KM_TXNREC_NAME_MAX + 1]);

/**
 * Write v as a version-0 value. Partitions of one topic must be adjacent
 * (they are grouped under it, as Kafka groups them); Empty writes a null
 * partition array as Kafka does.
 * @return bytes written, -EINVAL (a name over KM_TXNREC_NAME_MAX,
 *         n_parts over KM_TXNREC_PARTS_MAX), KM_ENOSPACE.
 */
int km_txnrec_value_encode(void *buf, size_t cap,
			   const struct km_txnrec_value *v);

/**
 * Read a version 0 or 1 value (unknown tags skipped).
 * @return 0, or -EBADMSG as km_txnrec_key_decode, -E2BIG (more than
 *         KM_TXNREC_PARTS_MAX partitions).
 */
int km_txnrec_value_decode(const void *buf, size_t len,
			   struct km_txnrec_value *v);

#ifdef __cplusplus
}
#endif

#endif
