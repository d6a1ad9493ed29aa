/* kmirror error codes.
 *
 * Functions return 0 or a count on success and a negative code on failure.
 * A code is either a negated errno (-ENOSPC) or one of the KM_E* values
 * below. The KM_E* block starts at -10000, well below the kernel's errno
 * range (-4095..-1), so the two kinds never collide; km_strerror() names
 * both (LMDB's MDB_* block and mdb_strerror follow the same scheme).
 */
#ifndef KM_COMMON_ERRORS_H
#define KM_COMMON_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

enum km_error {
	KM_EBASE = -10000,
	/* Record batch framing (kafka/batch.c), in the order they are checked. */
	KM_EBATCHLEN = -10001,	/* batchLength below the v2 minimum of 49 */
	KM_EBATCHMAX = -10002,	/* batch larger than the configured maximum */
	KM_EBADMAGIC = -10003,	/* magic is not 2 */
	KM_EBADCRC = -10004,	/* CRC32C does not match the batch bytes */
	KM_EBATCHHDR = -10005,	/* negative lastOffsetDelta or recordsCount */
	/* Producer id mapping (R1). */
	KM_EPIDMAX = -10010,	/* producerId INT64_MAX has no mapped value */
	/* Records inside a batch (kafka/records.c). */
	KM_EVARINT = -10020,	/* varint longer than its type allows, or cut */
	KM_ERECORD = -10021,	/* record fields overrun the record's length */
	KM_ERECCOUNT = -10022,	/* records do not fill the batch / match count */
	KM_ECOMPRESSED = -10023, /* record iteration asked of a compressed batch */
	/* Control records (kafka/control.c). */
	KM_ENOTCONTROL = -10030, /* control record asked of a data batch */
	KM_ECTRLKEY = -10031,	/* control key shorter than 4 bytes or version < 0 */
	KM_ECTRLVALUE = -10032,	/* control value malformed for its type */
	KM_ECLUSTERID = -10033,	/* cluster id empty or longer than the limit */
	KM_ENOSPACE = -10034,	/* caller's output buffer too small */
	/* Producer state (iouring_log/pstate.c), Kafka's error names. */
	KM_EDUPLICATE = -10040,	 /* batch already appended (DUPLICATE_SEQUENCE) */
	KM_EPRODUCERFENCED = -10041, /* producer epoch older than known */
	KM_EOUTOFORDERSEQ = -10042, /* sequence does not continue the last */
	KM_EINVALIDTXNSTATE = -10043, /* non-transactional write in a txn */
	KM_ECOORDFENCED = -10044, /* marker's coordinator epoch is older */
	KM_ETXNOPEN = -10045,	 /* barrier refused: a mirrored txn is open */
	KM_EPSTATEFULL = -10046, /* producer or transaction table full */
	KM_ESNAPSHOT = -10047,	 /* producer snapshot corrupt */
	/* Partition log (iouring_log/log*.c). */
	KM_EOFFSET = -10050,	 /* mirrored offsets overlap or go backwards */
	KM_ESEGMENTS = -10051,	 /* segments_max reached */
	KM_ECORRUPT = -10052,	 /* corrupt batch found in the log on disk */
	KM_ELAST = -10053,
};

/**
 * Name an error code.
 *
 * @param code  a negative return value (KM_E* or -errno); 0 and positive
 *              values read as "success".
 * @return a static string, never NULL.
 */
const char *km_strerror(int code);

#ifdef __cplusplus
}
#endif

#endif
