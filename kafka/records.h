/* Records inside an uncompressed RecordBatch v2: iteration and building.
 *
 * Record (DefaultRecord.java), all varints ZigZag + LEB128:
 *   length varint | attributes int8 | timestampDelta varlong |
 *   offsetDelta varint | keyLength varint (-1 = null) | key |
 *   valueLength varint (-1 = null) | value | headersCount varint |
 *   headers: keyLength varint, key, valueLength varint (-1 = null), value
 */
#ifndef KM_KAFKA_RECORDS_H
#define KM_KAFKA_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "common/chain.h"
#include "kafka/batch.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One decoded record. key/value/headers are positions in the batch's chain;
 * copy them out with km_chain_copy() or get a pointer with km_chain_contig().
 * Valid as long as the batch view is. */
struct km_record {
	int64_t offset;		/* baseOffset + offsetDelta */
	int64_t timestamp;	/* baseTimestamp + timestampDelta */
	int32_t offset_delta;
	int32_t sequence;	/* baseSequence + offsetDelta, or -1 */
	int32_t key_len;	/* -1 = null */
	int32_t value_len;	/* -1 = null */
	int32_t header_count;
	struct km_chain_cur key;
	struct km_chain_cur value;
	struct km_chain_cur headers; /* first header */
	uint32_t size_bytes;	/* the whole record, length varint included */
};

/* One record header, as km_record_header_next() returns it. */
struct km_record_header {
	int32_t key_len;
	int32_t value_len; /* -1 = null */
	struct km_chain_cur key;
	struct km_chain_cur value;
};

/* Header iteration state. Private fields. */
struct km_record_headers_iter {
	struct km_chain_cur cur;
	uint32_t left_bytes;
	int32_t left_headers;
};

/* Iteration state. Private fields. */
struct km_records_iter {
	const struct km_batch *batch;
	struct km_chain_cur cur;
	uint32_t left_bytes;	/* record bytes not yet consumed */
	int32_t left_records;	/* recordsCount not yet returned */
};

/**
 * Start iterating b's records.
 * @return 0, or KM_ECOMPRESSED if the batch is compressed (the records are
 *         one compressed blob; decompression is not this module's job).
 */
int km_records_begin(struct km_records_iter *it, const struct km_batch *b);

/**
 * Decode the next record.
 * @return the record's size in bytes (> 0), 0 after the last record (when the
 *         records exactly fill the batch and match recordsCount), or
 *         KM_EVARINT, KM_ERECORD or KM_ERECCOUNT naming the first malformed
 *         field. After an error the iterator is not usable.
 */
int km_records_next(struct km_records_iter *it, struct km_record *r);

/**
 * Decode header number i (0-based, i < r->header_count) of record r, walking
 * from the first header. Headers were bounds-checked by km_records_next().
 * @return 0, or a negative code if the batch bytes changed since.
 */
int km_record_header_get(const struct km_batch *b, const struct km_record *r,
			 int32_t i, struct km_record_header *h);

/** Start walking r's headers in order. */
void km_record_headers_begin(struct km_record_headers_iter *it,
			     const struct km_record *r);

/**
 * Decode r's next header; linear in the record, unlike calling
 * km_record_header_get() for every i.
 * @return 1 with *h filled, 0 after the last header, or a negative code if
 *         the batch bytes changed since km_records_next().
 */
int km_record_header_next(const struct km_batch *b,
			  struct km_record_headers_iter *it,
			  struct km_record_header *h);

/* ---- building ---- */

struct km_record_header_spec {
	const char *key; /* not null */
	const void *value;
	int32_t value_len; /* -1 = null */
};

/* One record to build. key/value NULL with len -1 means null. */
struct km_record_spec {
	const void *key;
	int32_t key_len;
	const void *value;
	int32_t value_len;
	int64_t timestamp;
	const struct km_record_header_spec *headers;
	int32_t header_count;
};

/* Batch-level fields of a batch to build. Records get offsetDelta 0..n-1. */
struct km_batch_spec {
	int64_t base_offset;
	int32_t leader_epoch;
	int16_t attributes; /* codec must be none */
	int64_t producer_id;
	int16_t producer_epoch;
	int32_t base_sequence;
};

/**
 * Bytes km_records_build() would write for these records.
 * @return a size, or KM_ERECORD if a length is below -1 or the total
 *         exceeds KM_BATCH_BYTES_MAX.
 */
int km_records_build_size(const struct km_record_spec *recs, int32_t n);

/**
 * Write an uncompressed RecordBatch v2 holding recs[0..n) into buf, with
 * baseTimestamp = first record's timestamp, maxTimestamp = the largest, and
 * a correct CRC.
 * @return bytes written, KM_ENOSPACE if cap is too small, or KM_ERECORD.
 */
int km_records_build(void *buf, size_t cap, const struct km_batch_spec *spec,
		     const struct km_record_spec *recs, int32_t n);

#ifdef __cplusplus
}
#endif

#endif
