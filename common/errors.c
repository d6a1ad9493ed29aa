#include "common/errors.h"

#include <string.h>

static const char *km_message(int code)
{
	switch (code) {
	case KM_EBATCHLEN:
		return "record batch length below the v2 minimum (batchLength < 49)";
	case KM_EBATCHMAX:
		return "record batch larger than the configured maximum";
	case KM_EBADMAGIC:
		return "record batch magic is not 2 (only RecordBatch v2 is supported)";
	case KM_EBADCRC:
		return "record batch CRC32C mismatch (corrupt batch)";
	case KM_EBATCHHDR:
		return "record batch header has negative lastOffsetDelta or recordsCount, or a producer id with no sequence";
	case KM_EBATCHCOUNT:
		return "record batch recordsCount is below 1 or disagrees with lastOffsetDelta + 1";
	case KM_ERECOFFSET:
		return "record offsetDelta out of order (must run 0..recordsCount-1)";
	case KM_EINFLATE:
		return "compressed records do not decompress (corrupt stream or unknown codec)";
	case KM_EINFLATEMAX:
		return "compressed records decompress to more than the configured limit";
	case KM_EPIDMAX:
		return "producerId INT64_MAX cannot be mapped to the negative space";
	case KM_EVARINT:
		return "malformed varint in record (too long or truncated)";
	case KM_ERECORD:
		return "malformed record: fields overrun the record length";
	case KM_ERECCOUNT:
		return "records do not match recordsCount or the batch length";
	case KM_ECOMPRESSED:
		return "records of a compressed batch cannot be iterated in place";
	case KM_ENOTCONTROL:
		return "batch is not a control batch";
	case KM_ECTRLKEY:
		return "malformed control record key";
	case KM_ECTRLVALUE:
		return "malformed control record value";
	case KM_ECLUSTERID:
		return "cluster id empty or too long";
	case KM_ENOSPACE:
		return "output buffer too small";
	case KM_EDUPLICATE:
		return "duplicate batch: already appended (DUPLICATE_SEQUENCE_NUMBER)";
	case KM_EPRODUCERFENCED:
		return "producer epoch is older than the current one (INVALID_PRODUCER_EPOCH)";
	case KM_EOUTOFORDERSEQ:
		return "sequence number does not continue the producer's last (OUT_OF_ORDER_SEQUENCE_NUMBER)";
	case KM_EINVALIDTXNSTATE:
		return "non-transactional batch while the producer's transaction is open (INVALID_TXN_STATE)";
	case KM_ECOORDFENCED:
		return "transaction marker from an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED)";
	case KM_ETXNOPEN:
		return "barrier refused: a mirrored producer's transaction is still open";
	case KM_EPSTATEFULL:
		return "producer state table is full";
	case KM_EOFFSET:
		return "batch offsets overlap the log end or go backwards";
	case KM_ESEGMENTS:
		return "partition has reached its maximum number of segments";
	case KM_ECORRUPT:
		return "corrupt record batch in the log on disk";
	case KM_EWIRETRUNC:
		return "Kafka frame truncated: a field runs past the end of the frame";
	case KM_EWIRENEGLEN:
		return "Kafka field has a negative length or count (or null) but is not nullable";
	case KM_EWIRESTRLEN:
		return "Kafka string longer than its limit";
	case KM_EWIREARRAY:
		return "Kafka array count over the configured maximum";
	case KM_EWIREVARINT:
		return "Kafka unsigned varint longer than 5 bytes or over 32 bits";
	case KM_EWIRETAGS:
		return "Kafka tagged-field section has more fields than the configured maximum";
	case KM_EWIREFRAMELEN:
		return "Kafka frame size prefix is negative";
	case KM_EWIREFRAMEMAX:
		return "Kafka frame larger than the configured maximum";
	case KM_EWIREAPIKEY:
		return "unknown or unsupported Kafka API key";
	case KM_EWIREVERSION:
		return "unsupported Kafka API version (UNSUPPORTED_VERSION)";
	case KM_EWIRECAPACITY:
		return "Kafka message has more items than the decoder's arrays hold";
	case KM_EWIRETRAILING:
		return "Kafka frame has bytes left over after the message body";
	case KM_EWIREVALUE:
		return "Kafka field value cannot be expressed at this API version";
	case KM_ESNAPSHOT:
		return "producer state snapshot is corrupt (bad version, CRC or length)";
	case KM_ECFGSYNTAX:
		return "malformed configuration text or argument";
	case KM_ECFGKEY:
		return "unknown configuration key";
	case KM_ECFGVALUE:
		return "invalid configuration value";
	case KM_ECFGMISSING:
		return "required configuration key missing, or keys contradict each other";
	case KM_EMETAPROPS:
		return "meta.properties in data.dir is malformed or of an unsupported version";
	case KM_EMETAMISMATCH:
		return "configuration disagrees with meta.properties in data.dir (cluster.id or node.id)";
	case KM_EDATADIRLOCK:
		return "data.dir is in use by another kmirrord (its .lock is held)";
	case KM_ERESOLVE:
		return "cannot resolve host name";
	case KM_ECTLJSON:
		return "control request is not valid JSON";
	case KM_ECTLREQ:
		return "control request malformed: not an object, no cmd, or a bad argument";
	case KM_ECTLCMD:
		return "unknown control command";
	case KM_ECTLLINE:
		return "control request line too long";
	case KM_ECTLBUSY:
		return "too many control clients";
	case KM_EMIRRORED:
		return "partition is mirrored: writes are refused until it is "
		       "stopped";
	case KM_EUNKNOWNPART:
		return "unknown topic or partition";
	case KM_EPARTOFFLINE:
		return "partition is offline (failed or not open yet)";
	case KM_ESOURCE:
		return "source cluster answered with an error";
	case KM_EWORKERQ:
		return "worker message queue is full";
	case KM_ESHUTDOWN:
		return "daemon is shutting down";
	case KM_ESOURCEID:
		return "source cluster or topic id is not the one the log mirrors";
	case KM_EBASEOFFSET:
		return "source batch baseOffset is not the next offset expected";
	case KM_EGOREC:
		return "malformed __consumer_offsets record (key or value)";
	case KM_ETLS:
		return "TLS handshake with the source failed";
	case KM_EAUTH:
		return "SASL authentication with the source failed";
	case KM_ESASLMECH:
		return "SASL mechanism not enabled by the source broker";
	default:
		return NULL;
	}
}

const char *km_strerror(int code)
{
	const char *msg;

	if (code >= 0)
		return "success";
	msg = km_message(code);
	if (msg != NULL)
		return msg;
	if (code > -4096)
		return strerror(-code);
	return "unknown kmirror error";
}
