/* libFuzzer target for the batch view, records and control records.
 *
 * Goal: no input, split anywhere, makes km_batch_parse, km_batch_map_pid,
 * record iteration, km_validate_batch (and the decompressors behind it) or
 * km_ctrl_parse read or write out of bounds, hang, or break their
 * contracts, and km_batch_verify_map (the contiguous entry point) answer
 * what km_batch_parse does and write nothing unless it maps. Method: byte 0
 * picks where the input is split into two segments. The input is parsed as is; then a "repaired" copy gets a
 * matching batchLength, magic 2 and a correct CRC, so the fuzzer also reaches
 * the record and control decoders behind the CRC check.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/inflate.h"
#include "kafka/records.h"
#include "kafka/validate.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk_records(const struct km_batch *b)
{
	struct km_records_iter it;
	struct km_record r;
	struct km_record_header h;
	int32_t n = 0;
	int rc;

	if (km_records_begin(&it, b) < 0)
		return;
	while ((rc = km_records_next(&it, &r)) > 0) {
		n++;
		for (int32_t i = 0; i < r.header_count && i < 4; i++)
			KM_ASSERT(km_record_header_get(b, &r, i, &h) == 0);
	}
	KM_ASSERT(rc <= 0);
	if (rc == 0)
		KM_ASSERT(n == km_batch_records_count(b));
}

/* One decompressor for the whole run, as a worker has (1 MiB: bombs hit
 * the limit fast). */
static struct km_inflate *inflater(void)
{
	static struct km_inflate *z;

	if (z == NULL)
		KM_ASSERT(km_inflate_create(1u << 20, &z) == 0);
	return z;
}

/* The local-write checks: a code from validate.h's list, and an accepted
 * uncompressed batch is one whose records walk cleanly to the count. */
static void validate(const struct km_batch *b)
{
	char why[128];
	int rc = km_validate_batch(b, inflater(), why, sizeof(why));

	KM_ASSERT(rc == 0 || rc == KM_EBATCHHDR || rc == KM_EBATCHCOUNT ||
		  rc == KM_ERECOFFSET || rc == KM_ERECORD ||
		  rc == KM_ERECCOUNT || rc == KM_EVARINT ||
		  rc == KM_EINFLATE || rc == KM_EINFLATEMAX || rc == -EINVAL);
	if (rc == 0)
		KM_ASSERT(km_batch_records_count(b) ==
			  km_batch_last_offset_delta(b) + 1);
}

static void exercise(uint8_t *buf, size_t size, size_t cut)
{
	struct iovec iov[2] = { { buf, cut }, { buf + cut, size - cut } };
	struct km_chain chain = { iov, 2 };
	struct km_batch b;
	struct km_ctrl c;
	int rc = km_batch_parse(&b, &chain, km_chain_start(&chain),
				KM_BATCH_BYTES_MAX);

	if (rc <= 0)
		return;
	KM_ASSERT((size_t)rc <= size);
	walk_records(&b);
	validate(&b);
	if (km_batch_is_control(&b))
		(void)km_ctrl_parse(&b, &c);
	rc = km_batch_map_pid(&b);
	KM_ASSERT(rc == 0 || rc == 1 || rc == KM_EPIDMAX);
	KM_ASSERT(km_batch_verify_crc(&b) == 0);
	KM_ASSERT(km_batch_producer_id(&b) < 0 || rc == KM_EPIDMAX);
}

/* km_batch_verify_map over the same bytes in one piece: parse's code (or
 * KM_EPIDMAX), the bytes untouched unless it mapped, then a valid crc. */
static void verify_map(const uint8_t *buf, size_t size)
{
	struct iovec iov = { (void *)buf, size };
	struct km_chain chain = { &iov, 1 };
	struct km_batch b;
	int want = km_batch_parse(&b, &chain, km_chain_start(&chain),
				  KM_BATCH_BYTES_MAX);
	uint8_t *copy = malloc(size + 1);
	int rc;

	memcpy(copy, buf, size);
	rc = km_batch_verify_map(copy, size, KM_BATCH_BYTES_MAX);
	if (want > 0 && km_batch_producer_id(&b) == INT64_MAX)
		want = KM_EPIDMAX;
	KM_ASSERT(rc == want);
	if (rc <= 0 || km_batch_producer_id(&b) < 0)
		KM_ASSERT(memcmp(copy, buf, size) == 0);
	else
		KM_ASSERT(km_crc32c_update(0, copy + KM_BATCH_OFF_ATTRIBUTES,
					   (size_t)rc - KM_BATCH_OFF_ATTRIBUTES) ==
			  km_load_be32(copy + KM_BATCH_OFF_CRC));
	free(copy);
}

static void repair(uint8_t *buf, size_t size)
{
	km_store_be32(buf + KM_BATCH_OFF_LENGTH,
		      (uint32_t)(size - KM_BATCH_LOG_OVERHEAD));
	buf[KM_BATCH_OFF_MAGIC] = KM_BATCH_MAGIC;
	km_store_be32(buf + KM_BATCH_OFF_CRC,
		      km_crc32c_update(0, buf + KM_BATCH_OFF_ATTRIBUTES,
				       size - KM_BATCH_OFF_ATTRIBUTES));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf;
	size_t cut;

	if (size < 1 || size > (1u << 20))
		return 0;
	cut = size > 1 ? data[0] % size : 0;
	data++, size--;
	/* A private copy: the view writes the mapped id back into it. */
	buf = malloc(size + 1);
	memcpy(buf, data, size);
	verify_map(buf, size);
	exercise(buf, size, cut < size ? cut : size);
	if (size >= KM_BATCH_HEADER_BYTES) {
		repair(buf, size);
		verify_map(buf, size);
		exercise(buf, size, cut < size ? cut : size);
	}
	free(buf);
	return 0;
}
