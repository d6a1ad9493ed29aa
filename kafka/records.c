#include "kafka/records.h"

#include <string.h>

#include "common/crc32c.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/varint.h"

/* A bounded reader over a chain: every read stays within left bytes. */
struct reader {
	const struct km_chain *chain;
	struct km_chain_cur cur;
	uint32_t left;
};

static int read_skip(struct reader *rd, uint32_t n)
{
	if (n > rd->left)
		return KM_ERECORD;
	if (km_chain_advance(rd->chain, &rd->cur, n) < 0)
		return KM_ERECORD;
	rd->left -= n;
	return 0;
}

/* Varints are staged through a small buffer: they may straddle segments. */
static int read_varlong(struct reader *rd, int64_t *out)
{
	uint8_t tmp[KM_VARLONG_BYTES_MAX];
	size_t n = km_chain_copy(rd->chain, rd->cur, tmp,
				 rd->left < sizeof(tmp) ? rd->left : sizeof(tmp));
	int rc = km_varint_decode_s64(tmp, n, out);

	if (rc == 0)
		return KM_EVARINT; /* cut by the end of the record or batch */
	return rc < 0 ? rc : read_skip(rd, (uint32_t)rc);
}

static int read_varint(struct reader *rd, int32_t *out)
{
	uint8_t tmp[KM_VARINT_BYTES_MAX];
	size_t n = km_chain_copy(rd->chain, rd->cur, tmp,
				 rd->left < sizeof(tmp) ? rd->left : sizeof(tmp));
	int rc = km_varint_decode_s32(tmp, n, out);

	if (rc == 0)
		return KM_EVARINT;
	return rc < 0 ? rc : read_skip(rd, (uint32_t)rc);
}

/* A length-prefixed field: -1 (null) when nullable, else 0..left bytes. */
static int read_bytes(struct reader *rd, bool nullable, int32_t *len,
		      struct km_chain_cur *at)
{
	int rc = read_varint(rd, len);

	if (rc < 0)
		return rc;
	*at = rd->cur;
	if (*len == -1 && nullable)
		return 0;
	if (*len < 0)
		return KM_ERECORD;
	return read_skip(rd, (uint32_t)*len);
}

int km_records_begin(struct km_records_iter *it, const struct km_batch *b)
{
	int rc;

	if (km_batch_codec(b) != KM_CODEC_NONE)
		return KM_ECOMPRESSED;
	it->batch = b;
	it->cur = b->start;
	rc = km_chain_advance(b->chain, &it->cur, KM_BATCH_HEADER_BYTES);
	KM_ASSERT(rc == 0);
	it->left_bytes = km_batch_size(b) - KM_BATCH_HEADER_BYTES;
	it->left_records = km_batch_records_count(b);
	return 0;
}

static int read_headers(struct reader *rd, int32_t count)
{
	struct km_chain_cur at;
	int32_t len;
	int rc = 0;

	/* Each header takes at least 2 bytes, so count is bounded by left. */
	if (count < 0 || (uint32_t)count > rd->left / 2)
		return KM_ERECORD;
	for (int32_t i = 0; i < count && rc == 0; i++) {
		rc = read_bytes(rd, false, &len, &at);
		if (rc == 0)
			rc = read_bytes(rd, true, &len, &at);
	}
	return rc;
}

/* The record body after its length varint, DefaultRecord.readFrom order. */
static int read_body(struct reader *rd, const struct km_batch *b,
		     struct km_record *r)
{
	int64_t ts_delta;
	int rc;

	if ((rc = read_skip(rd, 1)) < 0 || /* attributes: unused */
	    (rc = read_varlong(rd, &ts_delta)) < 0 ||
	    (rc = read_varint(rd, &r->offset_delta)) < 0 ||
	    (rc = read_bytes(rd, true, &r->key_len, &r->key)) < 0 ||
	    (rc = read_bytes(rd, true, &r->value_len, &r->value)) < 0 ||
	    (rc = read_varint(rd, &r->header_count)) < 0)
		return rc;
	r->headers = rd->cur;
	if ((rc = read_headers(rd, r->header_count)) < 0)
		return rc;
	/* "Invalid record size: expected to read N bytes in record payload". */
	if (rd->left != 0)
		return KM_ERECORD;
	r->timestamp = (int64_t)((uint64_t)km_batch_base_timestamp(b) +
				 (uint64_t)ts_delta);
	/* Wrapping arithmetic: a hostile baseOffset must not be UB here. */
	r->offset = (int64_t)((uint64_t)km_batch_base_offset(b) +
			      (uint64_t)(int64_t)r->offset_delta);
	/* DefaultRecord.readFrom: "baseSequence >= 0 ? incrementSequence". */
	r->sequence = km_batch_base_sequence(b) < 0
			      ? -1
			      : (int32_t)((uint32_t)km_batch_base_sequence(b) +
					  (uint32_t)r->offset_delta) &
					INT32_MAX;
	return 0;
}

int km_records_next(struct km_records_iter *it, struct km_record *r)
{
	struct reader rd = { it->batch->chain, it->cur, it->left_bytes };
	int32_t body;
	int rc;

	if (it->left_records == 0)
		return it->left_bytes == 0 ? 0 : KM_ERECCOUNT;
	if (it->left_bytes == 0)
		return KM_ERECCOUNT;
	if ((rc = read_varint(&rd, &body)) < 0)
		return rc;
	if (body < 0 || (uint32_t)body > rd.left)
		return KM_ERECORD;
	r->size_bytes = it->left_bytes - rd.left + (uint32_t)body;
	rd.left = (uint32_t)body;
	if ((rc = read_body(&rd, it->batch, r)) < 0)
		return rc;
	it->cur = rd.cur;
	it->left_bytes -= r->size_bytes;
	it->left_records--;
	return (int)r->size_bytes;
}

int km_record_header_get(const struct km_batch *b, const struct km_record *r,
			 int32_t i, struct km_record_header *h)
{
	struct reader rd = { b->chain, r->headers, r->size_bytes };
	int rc = 0;

	KM_ASSERT(i >= 0 && i < r->header_count);
	for (int32_t k = 0; k <= i && rc == 0; k++) {
		rc = read_bytes(&rd, false, &h->key_len, &h->key);
		if (rc == 0)
			rc = read_bytes(&rd, true, &h->value_len, &h->value);
	}
	return rc;
}

void km_record_headers_begin(struct km_record_headers_iter *it,
			     const struct km_record *r)
{
	it->cur = r->headers;
	it->left_bytes = r->size_bytes;
	it->left_headers = r->header_count;
}

int km_record_header_next(const struct km_batch *b,
			  struct km_record_headers_iter *it,
			  struct km_record_header *h)
{
	struct reader rd = { b->chain, it->cur, it->left_bytes };
	int rc;

	if (it->left_headers <= 0)
		return 0;
	if ((rc = read_bytes(&rd, false, &h->key_len, &h->key)) < 0 ||
	    (rc = read_bytes(&rd, true, &h->value_len, &h->value)) < 0)
		return rc;
	it->cur = rd.cur;
	it->left_bytes = rd.left;
	it->left_headers--;
	return 1;
}

/* ---- building ---- */

static int64_t body_size(const struct km_record_spec *r, int32_t delta,
			 int64_t base_ts)
{
	uint8_t tmp[KM_VARLONG_BYTES_MAX];
	int64_t n = 1 + km_varint_encode_s64(tmp, r->timestamp - base_ts) +
		    km_varint_size_s32(delta) + km_varint_size_s32(r->key_len) +
		    km_varint_size_s32(r->value_len) +
		    km_varint_size_s32(r->header_count);

	n += r->key_len > 0 ? r->key_len : 0;
	n += r->value_len > 0 ? r->value_len : 0;
	for (int32_t h = 0; h < r->header_count; h++) {
		int32_t klen = (int32_t)strlen(r->headers[h].key);
		int32_t vlen = r->headers[h].value_len;

		n += km_varint_size_s32(klen) + klen + km_varint_size_s32(vlen);
		n += vlen > 0 ? vlen : 0;
	}
	return n;
}

static bool spec_ok(const struct km_record_spec *r)
{
	if (r->key_len < -1 || r->value_len < -1 || r->header_count < 0)
		return false;
	for (int32_t h = 0; h < r->header_count; h++)
		if (r->headers[h].value_len < -1)
			return false;
	return true;
}

int km_records_build_size(const struct km_record_spec *recs, int32_t n)
{
	int64_t total = KM_BATCH_HEADER_BYTES;

	for (int32_t i = 0; i < n; i++) {
		int64_t body;

		if (!spec_ok(&recs[i]))
			return KM_ERECORD;
		body = body_size(&recs[i], i, recs[0].timestamp);
		total += km_varint_size_s32((int32_t)body) + body;
		if (total > KM_BATCH_BYTES_MAX)
			return KM_ERECORD;
	}
	return (int)total;
}

static uint8_t *put_bytes(uint8_t *p, const void *src, int32_t len)
{
	p += km_varint_encode_s32(p, len);
	if (len > 0) {
		memcpy(p, src, (size_t)len);
		p += len;
	}
	return p;
}

static uint8_t *put_record(uint8_t *p, const struct km_record_spec *r,
			   int32_t delta, int64_t base_ts)
{
	p += km_varint_encode_s32(p, (int32_t)body_size(r, delta, base_ts));
	*p++ = 0; /* attributes: unused */
	p += km_varint_encode_s64(p, r->timestamp - base_ts);
	p += km_varint_encode_s32(p, delta);
	p = put_bytes(p, r->key, r->key_len);
	p = put_bytes(p, r->value, r->value_len);
	p += km_varint_encode_s32(p, r->header_count);
	for (int32_t h = 0; h < r->header_count; h++) {
		const char *k = r->headers[h].key;

		p = put_bytes(p, k, (int32_t)strlen(k));
		p = put_bytes(p, r->headers[h].value, r->headers[h].value_len);
	}
	return p;
}

static void put_header(uint8_t *buf, const struct km_batch_spec *spec,
		       const struct km_record_spec *recs, int32_t n, int size)
{
	int64_t max_ts = n > 0 ? recs[0].timestamp : -1;

	for (int32_t i = 1; i < n; i++)
		if (recs[i].timestamp > max_ts)
			max_ts = recs[i].timestamp;
	km_store_be64(buf + KM_BATCH_OFF_BASE_OFFSET, (uint64_t)spec->base_offset);
	km_store_be32(buf + KM_BATCH_OFF_LENGTH,
		      (uint32_t)(size - KM_BATCH_LOG_OVERHEAD));
	km_store_be32(buf + KM_BATCH_OFF_LEADER_EPOCH, (uint32_t)spec->leader_epoch);
	buf[KM_BATCH_OFF_MAGIC] = KM_BATCH_MAGIC;
	km_store_be16(buf + KM_BATCH_OFF_ATTRIBUTES, (uint16_t)spec->attributes);
	km_store_be32(buf + KM_BATCH_OFF_LAST_OFFSET_DELTA,
		      (uint32_t)(n > 0 ? n - 1 : 0));
	km_store_be64(buf + KM_BATCH_OFF_BASE_TIMESTAMP,
		      (uint64_t)(n > 0 ? recs[0].timestamp : -1));
	km_store_be64(buf + KM_BATCH_OFF_MAX_TIMESTAMP, (uint64_t)max_ts);
	km_store_be64(buf + KM_BATCH_OFF_PRODUCER_ID, (uint64_t)spec->producer_id);
	km_store_be16(buf + KM_BATCH_OFF_PRODUCER_EPOCH,
		      (uint16_t)spec->producer_epoch);
	km_store_be32(buf + KM_BATCH_OFF_BASE_SEQUENCE,
		      (uint32_t)spec->base_sequence);
	km_store_be32(buf + KM_BATCH_OFF_RECORDS_COUNT, (uint32_t)n);
}

int km_records_build(void *buf, size_t cap, const struct km_batch_spec *spec,
		     const struct km_record_spec *recs, int32_t n)
{
	int size = km_records_build_size(recs, n);
	int64_t base_ts = n > 0 ? recs[0].timestamp : -1;
	uint8_t *p = (uint8_t *)buf + KM_BATCH_HEADER_BYTES;
	uint32_t crc;

	KM_ASSERT((spec->attributes & KM_BATCH_ATTR_CODEC_MASK) == KM_CODEC_NONE);
	if (size < 0)
		return size;
	if ((size_t)size > cap)
		return KM_ENOSPACE;
	put_header(buf, spec, recs, n, size);
	for (int32_t i = 0; i < n; i++)
		p = put_record(p, &recs[i], i, base_ts);
	KM_ASSERT(p == (uint8_t *)buf + size);
	crc = km_crc32c_update(0, (uint8_t *)buf + KM_BATCH_OFF_ATTRIBUTES,
			       (size_t)size - KM_BATCH_OFF_ATTRIBUTES);
	km_store_be32((uint8_t *)buf + KM_BATCH_OFF_CRC, crc);
	return size;
}
