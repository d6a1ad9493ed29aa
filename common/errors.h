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
	KM_EBATCHHDR = -10005,	/* negative lastOffsetDelta or recordsCount,
				 * or (km_validate) a producer id without a
				 * sequence */
	/* Local-write validation (kafka/validate.c, kafka/inflate.c):
	 * Kafka's LogValidator checks for client batches. */
	KM_EBATCHCOUNT = -10006, /* recordsCount < 1 or != lastOffsetDelta + 1 */
	KM_ERECOFFSET = -10007,	/* a record's offsetDelta is not its index */
	KM_EINFLATE = -10008,	/* compressed records corrupt, codec unknown */
	KM_EINFLATEMAX = -10009, /* records inflate past the configured limit */
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
	/* Kafka wire protocol (kafka/wire.c, kafka/proto_*.c). */
	KM_EWIRETRUNC = -10060,	 /* a field runs past the end of the frame */
	KM_EWIRENEGLEN = -10061, /* negative length/count or null, not nullable */
	KM_EWIRESTRLEN = -10062, /* string longer than its limit */
	KM_EWIREARRAY = -10063,	 /* array count over the configured maximum */
	KM_EWIREVARINT = -10064, /* unsigned varint over 5 bytes or 32 bits */
	KM_EWIRETAGS = -10065,	 /* more tagged fields than the configured max */
	KM_EWIREFRAMELEN = -10066, /* frame size prefix is negative */
	KM_EWIREFRAMEMAX = -10067, /* frame larger than the configured maximum */
	KM_EWIREAPIKEY = -10068, /* API key not known to this codec */
	KM_EWIREVERSION = -10069, /* API version not supported for this key */
	KM_EWIRECAPACITY = -10070, /* more items than the caller's array holds */
	KM_EWIRETRAILING = -10071, /* bytes left over after the message body */
	KM_EWIREVALUE = -10072,	 /* value not expressible at this version */
	/* kmirrord configuration (control/config.c, control/cluster_id.c). */
	KM_ECFGSYNTAX = -10080,	 /* malformed properties text or argument */
	KM_ECFGKEY = -10081,	 /* unknown configuration key */
	KM_ECFGVALUE = -10082,	 /* value does not parse or is out of range */
	KM_ECFGMISSING = -10083, /* required key missing, or keys contradict */
	KM_EMETAPROPS = -10084,	 /* data.dir/meta.properties malformed */
	KM_EMETAMISMATCH = -10085, /* config disagrees with meta.properties */
	KM_EDATADIRLOCK = -10086, /* data.dir is locked by another kmirrord */
	KM_ERESOLVE = -10088,	 /* host name does not resolve (getaddrinfo) */
	/* Control socket (control/ctlsock.c, control/ctlproto.c). */
	KM_ECTLJSON = -10090,	 /* request line is not valid JSON */
	KM_ECTLREQ = -10091,	 /* not an object, no "cmd", or bad argument */
	KM_ECTLCMD = -10092,	 /* unknown cmd, or no handler registered */
	KM_ECTLLINE = -10093,	 /* request line longer than the limit */
	KM_ECTLBUSY = -10094,	 /* too many control clients */
	/* Daemon: partitions, front-end, workers (dataplane/, control/). */
	KM_EMIRRORED = -10100,	 /* partition is mirrored: writes refused */
	KM_EUNKNOWNPART = -10101, /* no such topic or partition here */
	KM_EPARTOFFLINE = -10102, /* partition failed or not open yet */
	KM_ESOURCE = -10103,	 /* source cluster answered with an error */
	KM_EWORKERQ = -10104,	 /* worker message queue full */
	KM_ESHUTDOWN = -10105,	 /* daemon is shutting down */
	KM_ESOURCEID = -10106,	 /* source's cluster or topic id is not the
				    one the log mirrors */
	KM_EBASEOFFSET = -10107, /* source batch's baseOffset is not the
				    next offset expected */
	/* Committed offsets (kafka/gorec.c, dataplane/group/goffsets.c). */
	KM_EGOREC = -10120,	 /* malformed __consumer_offsets record */
	/* Security to the source (dataplane/net/tls.c, kafka/sasl.c). */
	KM_ETLS = -10130,	 /* TLS handshake failed (certificate, host
				    name, protocol) */
	KM_EAUTH = -10131,	 /* SASL authentication failed */
	KM_ESASLMECH = -10132,	 /* SASL mechanism not enabled by the broker */
	KM_ELAST = -10133,
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
