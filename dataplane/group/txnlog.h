/* The transaction coordinator's log, `__transaction_state-0` (issue 20):
 * one record per change of a transactional id, in Kafka's key/value format
 * (kafka/txnrec.h), one record per batch (producer id -1), as Kafka's
 * TransactionStateManager appends them. Replaying the records in offset
 * order (the last value of an id wins, a null value forgets it) rebuilds
 * the coordinator's table; the producer ids they name also bound the
 * daemon's allocator at start (R4 step 6).
 *
 * No state: building writes into the caller's buffer; loading reads the
 * log through km_log_read (any thread) into a buffer it allocates for the
 * call.
 */
#ifndef KM_DATAPLANE_TXNLOG_H
#define KM_DATAPLANE_TXNLOG_H

#include <stddef.h>
#include <stdint.h>

#include "kafka/txnrec.h"

#ifdef __cplusplus
extern "C" {
#endif

struct km_log;

#define KM_TXNLOG_TOPIC KM_TXNREC_TOPIC

/* The largest batch km_txnlog_build writes: the header, one record's
 * overhead, the key and a value of KM_TXNREC_PARTS_MAX partitions of
 * topics of the longest name (each under its own topic). */
#define KM_TXNLOG_BATCH_MAX                                                 \
	(61u + 31u + (4u + KM_TXNREC_NAME_MAX) +                            \
	 (64u + KM_TXNREC_PARTS_MAX * (2u + KM_TXNREC_NAME_MAX + 4u + 4u)))

/* The room km_txnlog_build needs: the batch and the value staged. */
#define KM_TXNLOG_BUILD_BYTES (2u * KM_TXNLOG_BATCH_MAX)

/**
 * One batch holding txn_id's record: its value v, or a tombstone (v NULL),
 * timestamped now_ms.
 * buf holds KM_TXNLOG_BUILD_BYTES.
 * @return bytes written, or the codec's code (-EINVAL, KM_ENOSPACE).
 */
int km_txnlog_build(void *buf, size_t cap, const char *txn_id,
		    const struct km_txnrec_value *v, int64_t now_ms);

/* One record replayed: v NULL for a tombstone. */
typedef void (*km_txnlog_fn)(void *arg, const char *txn_id,
			     const struct km_txnrec_value *v, int64_t offset);

/**
 * Read [log start, appended offset) and call fn for every record in offset
 * order. A record that cannot be decoded is logged and skipped (the rest
 * still replays).
 * @return records read, or a negative code from reading the log.
 */
int km_txnlog_load(struct km_log *log, km_txnlog_fn fn, void *arg);

/**
 * The largest producer id the log's records name (ProducerId and, in v1,
 * the previous and next ids), -1 if none.
 * @return 0 and *max, or a negative code from reading the log.
 */
int km_txnlog_max_pid(struct km_log *log, int64_t *max);

#ifdef __cplusplus
}
#endif

#endif
