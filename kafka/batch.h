/* RecordBatch v2 (magic 2): framing, validation, header access and the R1
 * producer-id mapping, over a buffer chain.
 *
 * Layout (DefaultRecordBatch.java), all big-endian:
 *   0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 |
 *   16 magic int8 | 17 crc uint32 | 21 attributes int16 |
 *   23 lastOffsetDelta int32 | 27 baseTimestamp int64 | 35 maxTimestamp int64 |
 *   43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32 |
 *   57 recordsCount int32 | 61 records...
 * The CRC covers attributes through the end of the batch.
 */
#ifndef KM_KAFKA_BATCH_H
#define KM_KAFKA_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "common/chain.h"
#include "common/endian.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	KM_BATCH_OFF_BASE_OFFSET = 0,
	KM_BATCH_OFF_LENGTH = 8,
	KM_BATCH_OFF_LEADER_EPOCH = 12,
	KM_BATCH_OFF_MAGIC = 16,
	KM_BATCH_OFF_CRC = 17,
	KM_BATCH_OFF_ATTRIBUTES = 21,
	KM_BATCH_OFF_LAST_OFFSET_DELTA = 23,
	KM_BATCH_OFF_BASE_TIMESTAMP = 27,
	KM_BATCH_OFF_MAX_TIMESTAMP = 35,
	KM_BATCH_OFF_PRODUCER_ID = 43,
	KM_BATCH_OFF_PRODUCER_EPOCH = 51,
	KM_BATCH_OFF_BASE_SEQUENCE = 53,
	KM_BATCH_OFF_RECORDS_COUNT = 57,
	KM_BATCH_HEADER_BYTES = 61,	/* RECORD_BATCH_OVERHEAD */
	KM_BATCH_LOG_OVERHEAD = 12,	/* baseOffset + batchLength */
	/* batchLength counts the bytes after itself: 61 - 12. */
	KM_BATCH_LENGTH_MIN = KM_BATCH_HEADER_BYTES - KM_BATCH_LOG_OVERHEAD,
	KM_BATCH_MAGIC = 2,
};

/* Attribute bits (RecordBatch.java). */
enum {
	KM_BATCH_ATTR_CODEC_MASK = 0x07,
	KM_BATCH_ATTR_LOG_APPEND_TIME = 0x08,
	KM_BATCH_ATTR_TRANSACTIONAL = 0x10,
	KM_BATCH_ATTR_CONTROL = 0x20,
	KM_BATCH_ATTR_DELETE_HORIZON = 0x40,
};

enum km_codec {
	KM_CODEC_NONE = 0,
	KM_CODEC_GZIP = 1,
	KM_CODEC_SNAPPY = 2,
	KM_CODEC_LZ4 = 3,
	KM_CODEC_ZSTD = 4,
};

/* A validated batch inside a chain. The header is copied out (61 bytes) so
 * accessors never care where segments break; the records stay in place.
 * Fields are private: use the accessors. Valid as long as the chain's
 * segments are, and until they are modified by anything but this API. */
struct km_batch {
	uint8_t hdr[KM_BATCH_HEADER_BYTES];
	const struct km_chain *chain;
	struct km_chain_cur start; /* first byte (baseOffset) */
	uint32_t size_bytes;	   /* batchLength + 12 */
	uint8_t *base;		   /* the whole batch if in one segment, else
				    * NULL: the hot path skips the chain walk */
	/* Framed by km_batch_frame: the CRC is not checked yet, and a
	 * producer-id map went into hdr only (the chain's bytes are as they
	 * came). wire_crc is the crc field as it came. */
	bool crc_pending;
	uint32_t wire_crc;
};

/**
 * Frame and validate the batch that starts at cur.
 *
 * Checks, in this order, each with its own code (DefaultRecordBatch):
 *  1. batchLength >= 49 ("sizeInBytes < RECORD_BATCH_OVERHEAD" is corrupt)
 *                                                        -> KM_EBATCHLEN
 *  2. batchLength + 12 <= size_bytes_max                 -> KM_EBATCHMAX
 *     (checked as soon as the length is readable, so a hostile length
 *     never makes the caller wait for gigabytes)
 *  3. the whole batch is in the chain                    -> 0, need more
 *  4. magic == 2                                         -> KM_EBADMAGIC
 *  5. CRC-32C over attributes..end equals the crc field  -> KM_EBADCRC
 *  6. lastOffsetDelta >= 0 and recordsCount >= 0         -> KM_EBATCHHDR
 *
 * @param size_bytes_max  largest batch accepted, at most KM_BATCH_BYTES_MAX.
 * @return the batch size in bytes (> 0) with *b filled, 0 if the chain ends
 *         before the batch does, or a negative KM_E* code. After
 *         KM_EBADCRC and KM_EBATCHHDR the batch is framed and *b is filled
 *         all the same (header accessors, km_batch_size), so tools can report
 *         it; nothing else may use such a view.
 */
int km_batch_parse(struct km_batch *b, const struct km_chain *chain,
		   struct km_chain_cur cur, uint32_t size_bytes_max);

/**
 * R1: map producerId p >= 0 to -(p + 2) in place and patch the CRC in O(1).
 *
 * Negative ids (-1 = none, or already mapped upstream) are left alone, so the
 * map is idempotent along chains of mirrors. Writes 8 + 4 bytes into the
 * chain, wherever its segments break.
 * @return 1 if the id was mapped, 0 if it was already negative, KM_EPIDMAX
 *         for INT64_MAX (the batch is untouched).
 */
int km_batch_map_pid(struct km_batch *b);

/**
 * km_batch_parse without check 5 (the CRC): the batch is framed with
 * crc_pending set, for a caller that checks the CRC as it copies the bytes
 * (the log's direct writer, km_log_verifies_crc), so that they are read
 * from memory once. Same codes otherwise (checks 1-4 and 6).
 */
int km_batch_frame(struct km_batch *b, const struct km_chain *chain,
		   struct km_chain_cur cur, uint32_t size_bytes_max);

/**
 * Settle a batch framed by km_batch_frame for a writer that takes its
 * bytes from the chain: check the CRC of the bytes as they came against
 * the crc field as it came, then store hdr's producer id and crc (a map
 * made in hdr only) into the chain. A batch not pending is left alone.
 * @return 0, or KM_EBADCRC (nothing stored).
 */
int km_batch_settle(struct km_batch *b);

/**
 * The mirror's per-batch work on one contiguous batch, for a caller that
 * holds its bytes in one buffer (a write buffer the batch was copied
 * into): km_batch_parse's checks in its order, the CRC over the bytes as
 * they came, then km_batch_map_pid in place. One pass over the bytes.
 *
 * @param p               the batch's first byte (baseOffset)
 * @param avail           bytes readable (and writable) at p
 * @param size_bytes_max  as for km_batch_parse
 * @return the batch size (> 0) with the id mapped and the CRC patched, 0 if
 *         avail ends inside the batch, or km_batch_parse's negative code,
 *         or KM_EPIDMAX (producerId INT64_MAX); on any code <= 0 the bytes
 *         are as they came.
 */
int km_batch_verify_map(uint8_t *p, size_t avail, uint32_t size_bytes_max);

/**
 * The R1 function alone: *out = p if p < 0, else -(p + 2).
 * @return 0, or KM_EPIDMAX for p == INT64_MAX (no int64 is -(INT64_MAX + 2)).
 */
int km_pid_map(int64_t p, int64_t *out);

/**
 * Recompute the CRC of b from its bytes.
 * @return 0 if it matches the header's crc field, else KM_EBADCRC.
 */
int km_batch_verify_crc(const struct km_batch *b);

/**
 * Kafka's LogValidator for a topic whose message.timestamp.type is
 * LogAppendTime: maxTimestamp becomes now_ms and the timestamp-type
 * attribute bit is set (consumers then read now_ms as every record's
 * timestamp), the CRC patched in O(1). A batch that says so already is
 * left as it is, as Kafka's setMaxTimestamp leaves it.
 */
void km_batch_set_log_append_time(struct km_batch *b, int64_t now_ms);

/** Overwrite baseOffset (not covered by the CRC) in the chain and view. */
void km_batch_set_base_offset(struct km_batch *b, int64_t base_offset);

/** Overwrite partitionLeaderEpoch (not covered by the CRC). */
void km_batch_set_leader_epoch(struct km_batch *b, int32_t epoch);

/** Name of a compression codec id: none, gzip, snappy, lz4, zstd, unknown. */
const char *km_codec_name(int codec);

/* Header accessors. */
static inline int64_t km_batch_base_offset(const struct km_batch *b)
{
	return (int64_t)km_load_be64(b->hdr + KM_BATCH_OFF_BASE_OFFSET);
}

static inline int32_t km_batch_length(const struct km_batch *b)
{
	return (int32_t)km_load_be32(b->hdr + KM_BATCH_OFF_LENGTH);
}

static inline uint32_t km_batch_size(const struct km_batch *b)
{
	return b->size_bytes;
}

static inline int32_t km_batch_leader_epoch(const struct km_batch *b)
{
	return (int32_t)km_load_be32(b->hdr + KM_BATCH_OFF_LEADER_EPOCH);
}

static inline int8_t km_batch_magic(const struct km_batch *b)
{
	return (int8_t)b->hdr[KM_BATCH_OFF_MAGIC];
}

static inline uint32_t km_batch_crc(const struct km_batch *b)
{
	return km_load_be32(b->hdr + KM_BATCH_OFF_CRC);
}

static inline int16_t km_batch_attributes(const struct km_batch *b)
{
	return (int16_t)km_load_be16(b->hdr + KM_BATCH_OFF_ATTRIBUTES);
}

static inline int32_t km_batch_last_offset_delta(const struct km_batch *b)
{
	return (int32_t)km_load_be32(b->hdr + KM_BATCH_OFF_LAST_OFFSET_DELTA);
}

static inline int64_t km_batch_last_offset(const struct km_batch *b)
{
	/* Wraps rather than overflow on a hostile baseOffset. */
	return (int64_t)((uint64_t)km_batch_base_offset(b) +
			 (uint64_t)km_batch_last_offset_delta(b));
}

static inline int64_t km_batch_base_timestamp(const struct km_batch *b)
{
	return (int64_t)km_load_be64(b->hdr + KM_BATCH_OFF_BASE_TIMESTAMP);
}

static inline int64_t km_batch_max_timestamp(const struct km_batch *b)
{
	return (int64_t)km_load_be64(b->hdr + KM_BATCH_OFF_MAX_TIMESTAMP);
}

static inline int64_t km_batch_producer_id(const struct km_batch *b)
{
	return (int64_t)km_load_be64(b->hdr + KM_BATCH_OFF_PRODUCER_ID);
}

static inline int16_t km_batch_producer_epoch(const struct km_batch *b)
{
	return (int16_t)km_load_be16(b->hdr + KM_BATCH_OFF_PRODUCER_EPOCH);
}

static inline int32_t km_batch_base_sequence(const struct km_batch *b)
{
	return (int32_t)km_load_be32(b->hdr + KM_BATCH_OFF_BASE_SEQUENCE);
}

static inline int32_t km_batch_records_count(const struct km_batch *b)
{
	return (int32_t)km_load_be32(b->hdr + KM_BATCH_OFF_RECORDS_COUNT);
}

/* Attribute decoding. */
static inline int km_batch_codec(const struct km_batch *b)
{
	return km_batch_attributes(b) & KM_BATCH_ATTR_CODEC_MASK;
}

static inline bool km_batch_is_log_append_time(const struct km_batch *b)
{
	return (km_batch_attributes(b) & KM_BATCH_ATTR_LOG_APPEND_TIME) != 0;
}

static inline bool km_batch_is_transactional(const struct km_batch *b)
{
	return (km_batch_attributes(b) & KM_BATCH_ATTR_TRANSACTIONAL) != 0;
}

static inline bool km_batch_is_control(const struct km_batch *b)
{
	return (km_batch_attributes(b) & KM_BATCH_ATTR_CONTROL) != 0;
}

static inline bool km_batch_has_delete_horizon(const struct km_batch *b)
{
	return (km_batch_attributes(b) & KM_BATCH_ATTR_DELETE_HORIZON) != 0;
}

/** lastSequence = baseSequence + lastOffsetDelta, wrapping past INT32_MAX
 *  to 0 (incrementSequence); -1 when the batch has no sequence. */
static inline int32_t km_batch_last_sequence(const struct km_batch *b)
{
	int32_t base = km_batch_base_sequence(b);
	uint32_t delta = (uint32_t)km_batch_last_offset_delta(b);

	if (base == -1)
		return -1;
	/* Java int arithmetic, in uint32: a negative delta in an unvalidated
	 * header must not overflow. */
	if (base > (int32_t)((uint32_t)INT32_MAX - delta))
		return (int32_t)(delta - ((uint32_t)INT32_MAX - (uint32_t)base) - 1u);
	return (int32_t)((uint32_t)base + delta);
}

#ifdef __cplusplus
}
#endif

#endif
