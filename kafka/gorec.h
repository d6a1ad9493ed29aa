/* Records of the committed-offsets partition, `__consumer_offsets-0`, in
 * Kafka's own formats (GroupCoordinatorRecordSerde; the schemas
 * OffsetCommitKey.json and OffsetCommitValue.json), so that Kafka's tools
 * can read the partition:
 *
 *   key   version int16 (0 or 1: an offset commit; 2: group metadata, which
 *         kmirror does not write and skips), group STRING, topic STRING,
 *         partition int32
 *   value version int16 = 3, offset int64, leaderEpoch int32 (-1 = none),
 *         metadata STRING, commitTimestamp int64
 *         (versions 0 and 1 lack leaderEpoch; 1 and 2 are read too; a null
 *         value is a tombstone: the commit is deleted)
 *
 * Non-flexible STRINGs: int16 length then bytes. Pure code, no I/O; the
 * caller gives contiguous buffers (records are small and copied out of the
 * batch first).
 */
#ifndef KM_KAFKA_GOREC_H
#define KM_KAFKA_GOREC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
	/* Kafka's offset.metadata.max.bytes default. */
	KM_GOREC_METADATA_MAX = 4096,
	/* Group ids and topic names kept (Kafka: topics <= 249). */
	KM_GOREC_NAME_MAX = 255,
	/* The largest key and value this codec writes. */
	KM_GOREC_KEY_MAX = 2 + 2 + KM_GOREC_NAME_MAX + 2 + KM_GOREC_NAME_MAX + 4,
	KM_GOREC_VALUE_MAX = 2 + 8 + 4 + 2 + KM_GOREC_METADATA_MAX + 8,
};

/* A decoded key; names NUL-terminated. */
struct km_gorec_key {
	int16_t version;	/* 0/1: offset commit; 2: group metadata */
	char group[KM_GOREC_NAME_MAX + 1];
	char topic[KM_GOREC_NAME_MAX + 1];
	int32_t partition;
};

struct km_gorec_value {
	int64_t offset;
	int32_t leader_epoch;	/* -1: none */
	int64_t commit_ts;	/* ms since the epoch */
	const char *metadata;	/* decode: points into the caller's buffer */
	uint16_t metadata_len;
};

/**
 * Write an offset-commit key (version 1).
 * @return bytes written, or KM_EGOREC (a name longer than
 *         KM_GOREC_NAME_MAX), KM_ENOSPACE (cap too small).
 */
int km_gorec_key_encode(void *buf, size_t cap, const char *group,
			const char *topic, int32_t partition);

/**
 * Write an offset-commit value (version 3).
 * @return bytes written, or KM_EGOREC (metadata over
 *         KM_GOREC_METADATA_MAX), KM_ENOSPACE.
 */
int km_gorec_value_encode(void *buf, size_t cap, const struct km_gorec_value *v);

/**
 * Read a key. A group-metadata key (version 2) is read as far as its group
 * (topic empty, partition -1).
 * @return 0, or KM_EGOREC: truncated, trailing bytes, an unknown version,
 *         a negative or over-long string.
 */
int km_gorec_key_decode(const void *buf, size_t len, struct km_gorec_key *k);

/**
 * Read an offset-commit value of version 0-3; v->metadata points into buf.
 * @return 0, or KM_EGOREC as km_gorec_key_decode.
 */
int km_gorec_value_decode(const void *buf, size_t len, struct km_gorec_value *v);

#ifdef __cplusplus
}
#endif

#endif
