#include "kafka/batch.h"

#include <assert.h>
#include <stddef.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"

/* STYLE 12: the wire layout is checked at compile time. */
static_assert(KM_BATCH_OFF_CRC == 17, "crc sits at byte 17");
static_assert(KM_BATCH_OFF_ATTRIBUTES == KM_BATCH_OFF_CRC + 4,
	      "the CRC range starts at attributes, right after the crc");
static_assert(KM_BATCH_OFF_PRODUCER_ID == 43, "producerId at byte 43");
static_assert(KM_BATCH_OFF_PRODUCER_EPOCH == 51, "producerEpoch at byte 51");
static_assert(KM_BATCH_HEADER_BYTES == 61, "RECORD_BATCH_OVERHEAD is 61");
static_assert(KM_BATCH_LENGTH_MIN == 49, "smallest batchLength is 49");
static_assert(KM_BATCH_BYTES_MAX <= INT32_MAX, "sizes must fit a return int");

const char *km_codec_name(int codec)
{
	static const char *const names[] = { "none", "gzip", "snappy", "lz4",
					     "zstd" };

	if (codec < 0 || codec > KM_CODEC_ZSTD)
		return "unknown";
	return names[codec];
}

int km_pid_map(int64_t p, int64_t *out)
{
	if (p < 0) {
		*out = p;
		return 0;
	}
	if (p == INT64_MAX)
		return KM_EPIDMAX;
	/* -(p + 2) == ~p - 1, which cannot overflow for p < INT64_MAX. */
	*out = ~p - 1;
	return 0;
}

static struct km_chain_cur cur_at(const struct km_batch *b, size_t off)
{
	struct km_chain_cur cur = b->start;
	int rc = km_chain_advance(b->chain, &cur, off);

	KM_ASSERT(rc == 0);
	return cur;
}

int km_batch_verify_crc(const struct km_batch *b)
{
	const uint8_t *p = b->base;
	uint32_t crc;
	int rc;

	/* One segment (the common case): one ISA-L call, no chain walk. */
	if (p != NULL) {
		crc = km_crc32c_update(0, p + KM_BATCH_OFF_ATTRIBUTES,
				       b->size_bytes - KM_BATCH_OFF_ATTRIBUTES);
		return crc == km_batch_crc(b) ? 0 : KM_EBADCRC;
	}
	rc = km_chain_crc32c(b->chain, cur_at(b, KM_BATCH_OFF_ATTRIBUTES),
			     b->size_bytes - KM_BATCH_OFF_ATTRIBUTES, &crc);
	KM_ASSERT(rc == 0);
	return crc == km_batch_crc(b) ? 0 : KM_EBADCRC;
}

static int frame(struct km_batch *b, const struct km_chain *chain,
		 struct km_chain_cur cur, uint32_t size_bytes_max, bool crc)
{
	const uint8_t *p = km_chain_contig(chain, cur, KM_BATCH_HEADER_BYTES);
	size_t have = KM_BATCH_HEADER_BYTES;
	int32_t len;
	int rc;

	/* The header is almost always inside one segment: copy it directly. */
	if (p != NULL)
		memcpy(b->hdr, p, KM_BATCH_HEADER_BYTES);
	else
		have = km_chain_copy(chain, cur, b->hdr, KM_BATCH_HEADER_BYTES);

	KM_ASSERT(size_bytes_max <= KM_BATCH_BYTES_MAX);
	if (have < KM_BATCH_LOG_OVERHEAD)
		return 0;
	b->chain = chain;
	b->start = cur;
	b->crc_pending = !crc;
	/* "batchLength: bytes after this field"; below 49 there is no room for
	 * the v2 header (sizeInBytes < RECORD_BATCH_OVERHEAD is corrupt). */
	len = km_batch_length(b);
	if (len < KM_BATCH_LENGTH_MIN)
		return KM_EBATCHLEN;
	if ((uint64_t)len + KM_BATCH_LOG_OVERHEAD > size_bytes_max)
		return KM_EBATCHMAX;
	b->size_bytes = (uint32_t)len + KM_BATCH_LOG_OVERHEAD;
	b->base = km_chain_contig(chain, cur, b->size_bytes);
	if (b->base == NULL && !km_chain_has(chain, cur, b->size_bytes))
		return 0;
	/* "magic int8 = 2": v0/v1 message sets are not RecordBatch v2. */
	if (km_batch_magic(b) != KM_BATCH_MAGIC)
		return KM_EBADMAGIC;
	/* "crc: CRC-32C from attributes to the end of the batch". */
	b->wire_crc = km_batch_crc(b);
	rc = crc ? km_batch_verify_crc(b) : 0;
	if (rc < 0)
		return rc;
	if (km_batch_last_offset_delta(b) < 0 || km_batch_records_count(b) < 0)
		return KM_EBATCHHDR;
	return (int)b->size_bytes;
}

int km_batch_parse(struct km_batch *b, const struct km_chain *chain,
		   struct km_chain_cur cur, uint32_t size_bytes_max)
{
	return frame(b, chain, cur, size_bytes_max, true);
}

int km_batch_frame(struct km_batch *b, const struct km_chain *chain,
		   struct km_chain_cur cur, uint32_t size_bytes_max)
{
	return frame(b, chain, cur, size_bytes_max, false);
}

/* Write bytes at a header offset into both the chain and the header copy. */
static void store_header(struct km_batch *b, size_t off, const void *src,
			 size_t len)
{
	size_t n;

	if (b->base != NULL) {
		memcpy(b->base + off, src, len);
	} else {
		n = km_chain_store(b->chain, cur_at(b, off), src, len);
		KM_ASSERT(n == len);
	}
	memcpy(b->hdr + off, src, len);
}

int km_batch_map_pid(struct km_batch *b)
{
	uint8_t old_be[8], new_be[8], crc_be[4];
	int64_t pid, mapped;
	uint32_t crc;
	int rc;

	/* The id from the batch's own bytes when they are contiguous: the
	 * header copy's 16-byte stores split it (bytes 43-50 straddle the
	 * stores at 32 and 45), so a load from the copy right after the parse
	 * waits for them instead of being forwarded. */
	memcpy(old_be, (b->base != NULL ? b->base : b->hdr) +
			       KM_BATCH_OFF_PRODUCER_ID, sizeof(old_be));
	pid = (int64_t)km_load_be64(old_be);
	rc = km_pid_map(pid, &mapped);
	if (rc < 0)
		return rc;
	if (mapped == pid)
		return 0;
	km_store_be64(new_be, (uint64_t)mapped);
	crc = km_crc32c_patch(km_batch_crc(b),
			      b->size_bytes - KM_BATCH_OFF_PRODUCER_EPOCH,
			      old_be, new_be, sizeof(new_be));
	km_store_be32(crc_be, crc);
	if (b->crc_pending) {
		/* The copy takes hdr over the bytes that came: the receive
		 * buffer is not written, and the CRC is checked on the copy. */
		memcpy(b->hdr + KM_BATCH_OFF_PRODUCER_ID, new_be, 8);
		memcpy(b->hdr + KM_BATCH_OFF_CRC, crc_be, 4);
		return 1;
	}
	if (b->base != NULL) {
		/* Plain stores, no call: this runs once per batch. */
		memcpy(b->base + KM_BATCH_OFF_PRODUCER_ID, new_be, 8);
		memcpy(b->base + KM_BATCH_OFF_CRC, crc_be, 4);
		memcpy(b->hdr + KM_BATCH_OFF_PRODUCER_ID, new_be, 8);
		memcpy(b->hdr + KM_BATCH_OFF_CRC, crc_be, 4);
	} else {
		store_header(b, KM_BATCH_OFF_PRODUCER_ID, new_be, sizeof(new_be));
		store_header(b, KM_BATCH_OFF_CRC, crc_be, sizeof(crc_be));
	}
	/* STYLE 12: in strict builds, the patch is checked against a recompute. */
	KM_ASSERT_HOT(km_batch_verify_crc(b) == 0);
	return 1;
}

int km_batch_settle(struct km_batch *b)
{
	uint8_t hdr[KM_BATCH_HEADER_BYTES];
	int rc;

	if (!b->crc_pending)
		return 0;
	/* The CRC of the bytes as they came: hdr may hold a mapped id. */
	memcpy(hdr, b->hdr, sizeof(hdr));
	km_store_be32(b->hdr + KM_BATCH_OFF_CRC, b->wire_crc);
	rc = km_batch_verify_crc(b);
	memcpy(b->hdr, hdr, sizeof(hdr));
	if (rc < 0)
		return rc;
	b->crc_pending = false;
	/* A mapped id (or none: the same bytes) into the chain. */
	store_header(b, KM_BATCH_OFF_PRODUCER_ID, hdr + KM_BATCH_OFF_PRODUCER_ID, 8);
	store_header(b, KM_BATCH_OFF_CRC, hdr + KM_BATCH_OFF_CRC, 4);
	return 0;
}

int km_batch_verify_map(uint8_t *p, size_t avail, uint32_t size_bytes_max)
{
	struct iovec iov = { p, avail };
	struct km_chain chain = { &iov, 1 };
	struct km_batch b;
	int size = km_batch_parse(&b, &chain, km_chain_start(&chain),
				  size_bytes_max);
	int rc;

	if (size <= 0)
		return size;
	rc = km_batch_map_pid(&b);
	return rc < 0 ? rc : size;
}

void km_batch_set_log_append_time(struct km_batch *b, int64_t now_ms)
{
	/* attributes .. maxTimestamp: one region, one patch */
	enum { FROM = KM_BATCH_OFF_ATTRIBUTES, TO = KM_BATCH_OFF_PRODUCER_ID };
	uint8_t old_be[TO - FROM], new_be[TO - FROM], crc_be[4];
	uint16_t attrs = (uint16_t)km_batch_attributes(b) | KM_BATCH_ATTR_LOG_APPEND_TIME;
	uint32_t crc;

	if (km_batch_is_log_append_time(b) && km_batch_max_timestamp(b) == now_ms)
		return;
	memcpy(old_be, b->hdr + FROM, sizeof(old_be));
	memcpy(new_be, old_be, sizeof(new_be));
	km_store_be16(new_be, attrs);
	km_store_be64(new_be + (KM_BATCH_OFF_MAX_TIMESTAMP - FROM), (uint64_t)now_ms);
	crc = km_crc32c_patch(km_batch_crc(b), b->size_bytes - TO, old_be, new_be,
			      sizeof(new_be));
	km_store_be32(crc_be, crc);
	store_header(b, FROM, new_be, sizeof(new_be));
	store_header(b, KM_BATCH_OFF_CRC, crc_be, sizeof(crc_be));
	KM_ASSERT_HOT(km_batch_verify_crc(b) == 0);
}

void km_batch_set_base_offset(struct km_batch *b, int64_t base_offset)
{
	uint8_t be[8];

	km_store_be64(be, (uint64_t)base_offset);
	store_header(b, KM_BATCH_OFF_BASE_OFFSET, be, sizeof(be));
}

void km_batch_set_leader_epoch(struct km_batch *b, int32_t epoch)
{
	uint8_t be[4];

	km_store_be32(be, (uint32_t)epoch);
	store_header(b, KM_BATCH_OFF_LEADER_EPOCH, be, sizeof(be));
}
