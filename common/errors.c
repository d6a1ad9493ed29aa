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
		return "record batch header has negative lastOffsetDelta or recordsCount";
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
	case KM_ESNAPSHOT:
		return "producer state snapshot is corrupt (bad version, CRC or length)";
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
