/* Producer state (R2): per partition, per producer id != -1 (negative ids
 * included, unlike Apache Kafka), what Kafka's ProducerStateManager keeps:
 * epoch, the last 5 batches' sequence/offset metadata, the open
 * transaction's first offset, coordinator epoch and last timestamp; plus the
 * partition-wide set of ongoing transactions that defines the LSO.
 *
 * Pure state, no I/O: the log feeds it every batch it appends (live) or
 * replays (recovery), so live state equals replayed state (DESIGN.md).
 * Snapshots are encoded to / decoded from caller buffers in Kafka's
 * `.snapshot` format (ProducerSnapshot.json v1).
 *
 * Memory: everything lives in one caller-provided block sized by
 * km_pstate_memsize(); nothing is allocated after km_pstate_init().
 */
#ifndef KM_IOURING_LOG_PSTATE_H
#define KM_IOURING_LOG_PSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kafka/batch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where an append comes from; decides which checks apply. */
enum km_origin {
	/* Mirrored from the source (and recovery replay): never rejected, state
	 * updated. A sequence gap, an epoch going back, or a marker without an
	 * open transaction is counted and logged at WARN with the producer id
	 * and offset, so a collision is never silent. */
	KM_ORIGIN_MIRROR = 0,
	/* Local Produce: Kafka's CLIENT rules (dedupe over the last 5 batches,
	 * epoch fencing, sequence continuity with Int32 wrap). */
	KM_ORIGIN_CLIENT = 1,
	/* Written by kmirror itself: ABORT markers and the barrier on stop. */
	KM_ORIGIN_CONTROL = 2,
};

/* Batches remembered per producer for duplicate detection (Kafka: 5). */
#define KM_PSTATE_BATCHES 5

struct km_pstate; /* opaque */

/* Capacities, fixed at init. */
struct km_pstate_config {
	uint32_t producers_max; /* live producer entries */
	uint32_t txns_max;	/* ongoing + decided-but-not-yet-below-HW txns */
};

/* What one append did, beyond success. */
struct km_pstate_result {
	/* KM_EDUPLICATE: the offsets the original batch was written at. */
	int64_t dup_first_offset;
	int64_t dup_last_offset;
	/* A transaction marker completed a transaction. */
	bool txn_completed;
	bool txn_aborted;
	/* For a completed one: producer, first offset and marker offset (-1
	 * otherwise); for an aborted one these plus txn_last_stable_offset
	 * form the .txnindex entry (AbortedTxn). */
	int64_t txn_producer_id;
	int64_t txn_first_offset;
	int64_t txn_last_offset;	/* the marker's offset */
	int64_t txn_last_stable_offset; /* first offset of the next open txn of
					 * another producer, else marker + 1;
					 * -1 unless aborted */
	/* A MIRROR_PID_RESET barrier applied, and how many producers (id < 0)
	 * it removed. */
	bool barrier;
	uint32_t barrier_expired;
};

/* Anomalies tolerated on MIRROR appends, for metrics. */
struct km_pstate_stats {
	uint64_t mirror_sequence_gaps;
	uint64_t mirror_epoch_regressions;
	uint64_t mirror_stray_markers;
	uint64_t barriers_applied;
};

/* One producer's entry, as read by km_pstate_get() and snapshots. */
struct km_producer_info {
	int64_t producer_id;
	int16_t epoch;
	int32_t coordinator_epoch;	/* -1 until a marker */
	int64_t last_timestamp;
	int64_t txn_first_offset;	/* -1 = no open transaction */
	uint32_t batch_count;		/* 0..KM_PSTATE_BATCHES remembered */
	int32_t first_seq;		/* of the newest batch, -1 if none */
	int32_t last_seq;
	int64_t first_offset;
	int64_t last_offset;
};

/** Bytes of memory a state with these capacities needs. */
size_t km_pstate_memsize(const struct km_pstate_config *cfg);

/**
 * Initialise an empty state in mem (km_pstate_memsize() bytes, 8-aligned,
 * zeroed: the table is not written, so that the pages of a fresh mapping
 * stay unbacked until producers come). @return the state, or NULL if a
 * capacity is 0.
 */
struct km_pstate *km_pstate_init(void *mem, const struct km_pstate_config *cfg);

/** Forget everything (for a rebuild); capacities stay. */
void km_pstate_reset(struct km_pstate *ps);

/**
 * Validate batch b, to be written at its baseOffset..lastOffset, and apply
 * it to the state. On any error the state is unchanged.
 * Batches come in offset order: baseOffset >= km_pstate_next_offset() (the
 * log's R6 check; asserted). res must not be NULL.
 *
 * Data batches with producerId -1 only move timestamps/HW bookkeeping.
 * Control batches: ABORT/COMMIT close the producer's transaction;
 * MIRROR_PID_RESET removes every producer with id < 0 (R3), logs the count
 * and offset at INFO, and with origin CONTROL is refused while a producer with
 * id < 0 has an open transaction.
 *
 * CLIENT checks (ProducerAppendInfo), in order:
 *  - duplicate of one of the last 5 batches (same epoch, first and last
 *    sequence)                                 -> KM_EDUPLICATE, offsets in res
 *  - epoch older than the producer's           -> KM_EPRODUCERFENCED
 *  - new epoch not starting at sequence 0, or same epoch not continuing at
 *    lastSeq + 1 (Int32.MAX wraps to 0); any sequence when no state is
 *    known                                     -> KM_EOUTOFORDERSEQ
 *  - non-transactional batch while the producer's transaction is open
 *                                              -> KM_EINVALIDTXNSTATE
 * Markers (CLIENT/CONTROL): epoch older than current -> KM_EPRODUCERFENCED;
 * coordinator epoch older than known -> KM_ECOORDFENCED.
 *
 * @param hw  the current high watermark (durable offset), used to retire
 *            decided transactions from the LSO computation.
 * @return 0, or a negative code above, or KM_ETXNOPEN (barrier refused),
 *         KM_EPSTATEFULL (producers_max or txns_max reached),
 *         or a control-record parse error (KM_ECTRLKEY also for a
 *         transactional control batch whose type is not ABORT/COMMIT).
 */
int km_pstate_append(struct km_pstate *ps, const struct km_batch *b,
		     enum km_origin origin, int64_t hw,
		     struct km_pstate_result *res);

/**
 * Last stable offset: the smallest first offset of a transaction that is
 * open, or decided with its marker at or above hw; hw if that is not below.
 * Retires decided transactions whose marker is below hw.
 */
int64_t km_pstate_lso(struct km_pstate *ps, int64_t hw);

/** First offset of the oldest open transaction, or -1 if none is open. */
int64_t km_pstate_first_open_txn(const struct km_pstate *ps);

/**
 * Open transactions, oldest first (for stop mode abort and the R4 cut).
 * @return how many there are; at most max are written to out.
 */
uint32_t km_pstate_open_txns(const struct km_pstate *ps,
			     struct km_producer_info *out, uint32_t max);

/** True if some producer with id < 0 has an open transaction. */
bool km_pstate_has_open_negative_txn(const struct km_pstate *ps);

/** Look one producer up. @return 0, or -ENOENT. */
int km_pstate_get(const struct km_pstate *ps, int64_t producer_id,
		  struct km_producer_info *out);

/** Live producer entries. */
uint32_t km_pstate_count(const struct km_pstate *ps);

/** Largest producer id >= 0 ever applied (live or replayed), or -1. */
int64_t km_pstate_max_positive_pid(const struct km_pstate *ps);

/** Offset up to which the state has been applied (last appended + 1). */
int64_t km_pstate_next_offset(const struct km_pstate *ps);

/** Counters of tolerated anomalies. */
void km_pstate_get_stats(const struct km_pstate *ps, struct km_pstate_stats *out);

/** Bytes km_pstate_snapshot_encode() needs now: 10 + 46 per producer. */
size_t km_pstate_snapshot_size(const struct km_pstate *ps);

/**
 * Encode Kafka's producer snapshot (version 1): version int16 | crc uint32
 * (CRC-32C of bytes 6..end) | count int32 | count x 46-byte entries
 * (producerId, epoch, lastSequence, lastOffset, offsetDelta, timestamp,
 * coordinatorEpoch, currentTxnFirstOffset), newest batch per producer only,
 * sorted by producer id.
 * @return bytes written, or KM_ENOSPACE.
 */
int km_pstate_snapshot_encode(const struct km_pstate *ps, void *buf,
			      size_t cap);

/**
 * Replace the state with a decoded snapshot that covers offsets below
 * next_offset. Open transactions are rebuilt from currentTxnFirstOffset.
 * @return 0, or KM_ESNAPSHOT (bad version, CRC, count or length; state
 *         left empty), or KM_EPSTATEFULL.
 */
int km_pstate_snapshot_decode(struct km_pstate *ps, const void *buf,
			      size_t len, int64_t next_offset);

#ifdef __cplusplus
}
#endif

#endif
