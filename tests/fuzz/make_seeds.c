/* Writes a seed corpus for fuzz_batch: a data batch with headers, the same
 * records compressed with each codec (so the decompressors behind
 * km_validate_batch get well-formed streams to mutate), a COMMIT marker, an
 * ABORT marker and a MIRROR_PID_RESET barrier, each as one file (first byte
 * = split point, as the fuzz target reads it). */
#include <stdio.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include "common/crc32c.h"
#include "common/endian.h"
#include "kafka/control.h"
#include "kafka/records.h"

static int put(const char *dir, const char *name, const unsigned char *b, int n)
{
	char path[4096];
	FILE *f;
	unsigned char split = 30;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL || n <= 0) {
		perror(path);
		return 1;
	}
	fwrite(&split, 1, 1, f);
	fwrite(b, 1, (size_t)n, f);
	return fclose(f) != 0;
}

/* n bytes at in, compressed with codec into out (cap bytes); 0 if not. */
static size_t squeeze(int codec, const unsigned char *in, size_t n,
		      unsigned char *out, size_t cap)
{
	z_stream z = { 0 };
	size_t len = cap;
	LZ4F_preferences_t lp = { 0 };

	switch (codec) {
	case KM_CODEC_GZIP:
		if (deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8,
				 Z_DEFAULT_STRATEGY) != Z_OK)
			return 0;
		z.next_in = (unsigned char *)in;
		z.avail_in = (unsigned)n;
		z.next_out = out;
		z.avail_out = (unsigned)cap;
		len = deflate(&z, Z_FINISH) == Z_STREAM_END ? z.total_out : 0;
		deflateEnd(&z);
		return len;
	case KM_CODEC_SNAPPY:
		return snappy_compress((const char *)in, n, (char *)out, &len) ==
				       SNAPPY_OK ? len : 0;
	case KM_CODEC_LZ4:
		len = LZ4F_compressFrame(out, cap, in, n, &lp);
		return LZ4F_isError(len) ? 0 : len;
	default:
		len = ZSTD_compress(out, cap, in, n, 3);
		return ZSTD_isError(len) ? 0 : len;
	}
}

/* The data batch b (n bytes) with its records compressed; its size. */
static int compressed(int codec, const unsigned char *b, int n,
		      unsigned char *out, size_t cap)
{
	size_t len;

	if (n <= KM_BATCH_HEADER_BYTES)
		return -1;
	len = squeeze(codec, b + KM_BATCH_HEADER_BYTES,
		      (size_t)n - KM_BATCH_HEADER_BYTES,
		      out + KM_BATCH_HEADER_BYTES, cap - KM_BATCH_HEADER_BYTES);
	if (len == 0)
		return -1;
	memcpy(out, b, KM_BATCH_HEADER_BYTES);
	len += KM_BATCH_HEADER_BYTES;
	km_store_be32(out + KM_BATCH_OFF_LENGTH, (uint32_t)len - 12);
	km_store_be16(out + KM_BATCH_OFF_ATTRIBUTES, (uint16_t)codec);
	km_store_be32(out + KM_BATCH_OFF_CRC,
		      km_crc32c_update(0, out + KM_BATCH_OFF_ATTRIBUTES,
				       len - KM_BATCH_OFF_ATTRIBUTES));
	return (int)len;
}

int main(int argc, char **argv)
{
	static const struct km_record_header_spec h = { "trace", "abc", 3 };
	struct km_record_spec recs[2] = {
		{ "k", 1, "value", 5, 1000, &h, 1 },
		{ NULL, -1, NULL, -1, 1001, NULL, 0 },
	};
	struct km_batch_spec spec = { 0, 1, 0, 5000, 0, 0 };
	struct km_ctrl_spec cs = { 2, 1, 1002 };
	static const char *const names[] = { "", "gzip", "snappy", "lz4",
					     "zstd" };
	unsigned char buf[512], zbuf[1024];
	int rc = 0, n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	n = km_records_build(buf, sizeof(buf), &spec, recs, 2);
	rc |= put(argv[1], "data", buf, n);
	for (int codec = KM_CODEC_GZIP; codec <= KM_CODEC_ZSTD; codec++)
		rc |= put(argv[1], names[codec], zbuf,
			  compressed(codec, buf, n, zbuf, sizeof(zbuf)));
	rc |= put(argv[1], "commit", buf,
		  km_ctrl_build_marker(buf, sizeof(buf), &cs, 5000, 0, true, 3));
	rc |= put(argv[1], "abort", buf,
		  km_ctrl_build_marker(buf, sizeof(buf), &cs, 5000, 0, false, 3));
	rc |= put(argv[1], "barrier", buf,
		  km_ctrl_build_pid_reset(buf, sizeof(buf), &cs,
					  "Zm9vYmFyYmF6cXV4cXV1eA"));
	return rc;
}
