/* Control records: transaction markers (ABORT, COMMIT) and kmirror's
 * MIRROR_PID_RESET barrier (control type 7, the KIP-1279 prototype's value).
 *
 * A control batch holds one record whose key is `version int16 | type int16`
 * (ControlRecordType.java). Values:
 *   ABORT/COMMIT      `version int16 (0) | coordinatorEpoch int32`, 6 bytes,
 *                     in a batch with isTransactional = 1 and the
 *                     transaction's producerId/epoch (EndTransactionMarker);
 *   MIRROR_PID_RESET  MirrorPidResetRecord v0, flexible: `Version int16 |
 *                     SourceClusterId COMPACT_STRING | tagged fields`, in a
 *                     batch with producerId -1, epoch -1, baseSequence -1 and
 *                     isTransactional = 0 (R3).
 */
#ifndef KM_KAFKA_CONTROL_H
#define KM_KAFKA_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/km_limits.h"
#include "kafka/batch.h"
#include "kafka/records.h"

#ifdef __cplusplus
extern "C" {
#endif

enum km_ctrl_type {
	KM_CTRL_ABORT = 0,
	KM_CTRL_COMMIT = 1,
	KM_CTRL_LEADER_CHANGE = 2,
	KM_CTRL_SNAPSHOT_HEADER = 3,
	KM_CTRL_SNAPSHOT_FOOTER = 4,
	KM_CTRL_KRAFT_VERSION = 5,
	KM_CTRL_KRAFT_VOTERS = 6,
	KM_CTRL_MIRROR_PID_RESET = 7,
};

enum {
	KM_CTRL_KEY_BYTES = 4,
	KM_CTRL_MARKER_VALUE_BYTES = 6,
	KM_CTRL_MARKER_BATCH_BYTES = 78,
};

/* A decoded control record. Fields beyond type are filled only for the
 * types that carry them. */
struct km_ctrl {
	int16_t key_version;
	int16_t type;
	int16_t value_version;	   /* ABORT, COMMIT, MIRROR_PID_RESET */
	int32_t coordinator_epoch; /* ABORT, COMMIT */
	uint32_t cluster_id_len;   /* MIRROR_PID_RESET */
	char cluster_id[KM_CLUSTER_ID_BYTES_MAX + 1]; /* NUL-terminated */
};

/* Placement of a control batch to build. */
struct km_ctrl_spec {
	int64_t base_offset;
	int32_t leader_epoch;
	int64_t timestamp; /* base and max timestamp of the batch */
};

/**
 * Decode the control record of a validated control batch (its first record,
 * as Kafka's ProducerAppendInfo reads it).
 *
 * Key: at least 4 bytes, version >= 0; a higher version reads as v0
 * (ControlRecordType.parseTypeId). Values are checked only for ABORT, COMMIT
 * (6 bytes or more) and MIRROR_PID_RESET (a complete v0 value).
 * @return 0, or KM_ENOTCONTROL, KM_ECOMPRESSED, KM_ERECCOUNT (no record),
 *         KM_ECTRLKEY, KM_ECTRLVALUE, KM_ECLUSTERID, or a record-iteration
 *         error.
 */
int km_ctrl_parse(const struct km_batch *b, struct km_ctrl *out);

/**
 * Decode control record r of control batch b (any record, as
 * DumpLogSegments decodes each one). Same checks and codes as
 * km_ctrl_parse() except the record-iteration ones.
 */
int km_ctrl_parse_record(const struct km_batch *b, const struct km_record *r,
			 struct km_ctrl *out);

/**
 * Build an ABORT or COMMIT marker batch: 78 bytes.
 * @return bytes written, or KM_ENOSPACE.
 */
int km_ctrl_build_marker(void *buf, size_t cap, const struct km_ctrl_spec *s,
			 int64_t producer_id, int16_t producer_epoch,
			 bool commit, int32_t coordinator_epoch);

/**
 * Build the MIRROR_PID_RESET barrier batch (98 bytes for a 22-byte id).
 * @param source_cluster_id  the cluster whose producers are forgotten;
 *                           1..KM_CLUSTER_ID_BYTES_MAX bytes of UTF-8.
 * @return bytes written, KM_ECLUSTERID, or KM_ENOSPACE.
 */
int km_ctrl_build_pid_reset(void *buf, size_t cap, const struct km_ctrl_spec *s,
			    const char *source_cluster_id);

/** "ABORT", "COMMIT", ..., "MIRROR_PID_RESET", or "UNKNOWN". */
const char *km_ctrl_type_name(int type);

#ifdef __cplusplus
}
#endif

#endif
