/* Kafka's LogValidator checks for client batches: see validate.h. */
#include "kafka/validate.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "kafka/inflate.h"
#include "kafka/records.h"

/* Format the reason, if the caller wants one, and return code. */
static int refuse(int code, char *why, size_t why_len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int refuse(int code, char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why == NULL || why_len == 0)
		return code;
	va_start(ap, fmt);
	vsnprintf(why, why_len, fmt, ap);
	va_end(ap);
	return code;
}

/* LogValidator.validateBatch for AppendOrigin.CLIENT and magic 2. The count
 * from the offsets is a long there, so lastOffsetDelta = INT32_MAX is a
 * count of 2^31 that no int32 recordsCount matches. */
static int check_header(const struct km_batch *b, char *why, size_t why_len)
{
	int64_t from_offsets = (int64_t)km_batch_last_offset_delta(b) + 1;
	int32_t count = km_batch_records_count(b);

	if (from_offsets <= 0)
		return refuse(KM_EBATCHHDR, why, why_len,
			      "Batch has an invalid offset range: "
			      "lastOffsetDelta %" PRId32,
			      km_batch_last_offset_delta(b));
	if (count <= 0)
		return refuse(KM_EBATCHCOUNT, why, why_len,
			      "Invalid reported count for record batch: %" PRId32,
			      count);
	if (from_offsets != count)
		return refuse(KM_EBATCHCOUNT, why, why_len,
			      "Inconsistent batch offset range: lastOffsetDelta "
			      "%" PRId32 " (%" PRId64 " offsets) but recordsCount "
			      "%" PRId32, km_batch_last_offset_delta(b),
			      from_offsets, count);
	if (km_batch_producer_id(b) >= 0 && km_batch_base_sequence(b) < 0)
		return refuse(KM_EBATCHHDR, why, why_len,
			      "Invalid sequence number %" PRId32 " in record "
			      "batch with producerId %" PRId64,
			      km_batch_base_sequence(b), km_batch_producer_id(b));
	return 0;
}

/* The end of the walk: what km_records_next() refused, in words. */
static int records_error(const struct km_records_iter *it, int32_t index,
			 int rc, char *why, size_t why_len)
{
	int32_t count = km_batch_records_count(it->batch);

	if (rc != KM_ERECCOUNT)
		return refuse(rc, why, why_len, "record %" PRId32 ": %s", index,
			      km_strerror(rc));
	if (it->left_records > 0)
		return refuse(rc, why, why_len,
			      "recordsCount %" PRId32 " but the batch holds "
			      "only %" PRId32 " records", count, index);
	return refuse(rc, why, why_len,
		      "Incorrect declared batch size, records still remaining: "
		      "%" PRIu32 " bytes after the %" PRId32 " records of "
		      "recordsCount", it->left_bytes, count);
}

/* Every record of b, in order. Bounded: each pass consumes a record of at
 * least 7 bytes, or ends the walk. */
static int walk_records(const struct km_batch *b, char *why, size_t why_len)
{
	struct km_records_iter it;
	struct km_record r;
	int32_t index = 0;
	int rc = km_records_begin(&it, b);

	KM_ASSERT(rc == 0); /* the caller hands over uncompressed views */
	while ((rc = km_records_next(&it, &r)) > 0) {
		if (r.offset_delta != index)
			return refuse(KM_ERECOFFSET, why, why_len,
				      "record %" PRId32 " has offsetDelta %" PRId32
				      " (relative offsets must run 0..%" PRId32 ")",
				      index, r.offset_delta,
				      km_batch_records_count(b) - 1);
		index++;
	}
	return rc == 0 ? 0 : records_error(&it, index, rc, why, why_len);
}

/* Decompress b's records and walk them through a view of the same header
 * (codec cleared) over a two-segment chain: the header, then the
 * decompressed records. */
static int walk_compressed(const struct km_batch *b, struct km_inflate *z,
			   char *why, size_t why_len)
{
	uint32_t len = km_batch_size(b) - KM_BATCH_HEADER_BYTES;
	struct km_chain_cur cur = b->start;
	const uint8_t *src = NULL, *plain;
	struct km_batch view;
	struct iovec iov[2];
	int n;

	/* No bytes is no stream: km_inflate_records() says so. */
	if (z == NULL ||
	    km_chain_advance(b->chain, &cur, KM_BATCH_HEADER_BYTES) < 0 ||
	    (len > 0 && (src = km_chain_contig(b->chain, cur, len)) == NULL))
		return refuse(-EINVAL, why, why_len,
			      "compressed records not in one segment");
	n = km_inflate_records(z, km_batch_codec(b), src, len, &plain);
	if (n == KM_EINFLATEMAX)
		return refuse(n, why, why_len,
			      "%s records decompress to more than %" PRIu32
			      " bytes", km_codec_name(km_batch_codec(b)),
			      km_inflate_bytes_max(z));
	if (n < 0)
		return refuse(n, why, why_len,
			      "%s records (codec %d) do not decompress",
			      km_codec_name(km_batch_codec(b)), km_batch_codec(b));
	memcpy(view.hdr, b->hdr, sizeof(view.hdr));
	view.hdr[KM_BATCH_OFF_ATTRIBUTES + 1] &= (uint8_t)~KM_BATCH_ATTR_CODEC_MASK;
	iov[0] = (struct iovec){ view.hdr, KM_BATCH_HEADER_BYTES };
	iov[1] = (struct iovec){ (void *)plain, (size_t)n };
	view.chain = &(struct km_chain){ iov, 2 };
	view.start = (struct km_chain_cur){ 0, 0 };
	view.size_bytes = KM_BATCH_HEADER_BYTES + (uint32_t)n;
	view.base = NULL;
	return walk_records(&view, why, why_len);
}

int km_validate_batch(const struct km_batch *b, struct km_inflate *z,
		      char *why, size_t why_len)
{
	int rc = check_header(b, why, why_len);

	if (rc < 0)
		return rc;
	if (km_batch_codec(b) == KM_CODEC_NONE)
		return walk_records(b, why, why_len);
	return walk_compressed(b, z, why, why_len);
}
