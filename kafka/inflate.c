/* Decompression of compressed records: see inflate.h. */
#include "kafka/inflate.h"

#include <errno.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "kafka/batch.h"

/* zlib's inflate state (~7 KiB) and its 32 KiB window, allocated once from
 * this arena: inflateReset() keeps both, so no call allocates. */
#define ZLIB_ARENA_BYTES (64u * 1024)

struct km_inflate {
	uint8_t *buf;
	uint32_t cap;
	uint32_t len;		/* output so far */
	z_stream zs;
	bool zs_ready;
	ZSTD_DCtx *zd;
	LZ4F_dctx *lz;
	uint32_t arena_used;
	alignas(16) uint8_t arena[ZLIB_ARENA_BYTES];
};

/* ---- life cycle ---- */

static voidpf arena_alloc(voidpf opaque, uInt items, uInt size)
{
	struct km_inflate *z = opaque;
	uint64_t n = ((uint64_t)items * size + 15u) & ~(uint64_t)15u;

	if (n > ZLIB_ARENA_BYTES - z->arena_used)
		return Z_NULL; /* inflate() answers Z_MEM_ERROR */
	z->arena_used += (uint32_t)n;
	return z->arena + z->arena_used - n;
}

static void arena_free(voidpf opaque, voidpf p)
{
	/* The arena goes with the object: zlib frees only in inflateEnd(). */
	(void)opaque;
	(void)p;
}

int km_inflate_create(uint32_t out_bytes_max, struct km_inflate **out)
{
	struct km_inflate *z;

	if (out_bytes_max == 0 || out_bytes_max > INT32_MAX)
		return -EINVAL;
	if ((z = calloc(1, sizeof(*z))) == NULL)
		return -ENOMEM;
	z->cap = out_bytes_max;
	z->zs.zalloc = arena_alloc;
	z->zs.zfree = arena_free;
	z->zs.opaque = z;
	/* 16 + MAX_WBITS: a gzip wrapper, as GZIPOutputStream writes. */
	z->zs_ready = inflateInit2(&z->zs, 16 + MAX_WBITS) == Z_OK;
	z->zd = ZSTD_createDCtx();
	if (LZ4F_isError(LZ4F_createDecompressionContext(&z->lz, LZ4F_VERSION)))
		z->lz = NULL;
	z->buf = malloc(out_bytes_max);
	if (!z->zs_ready || z->zd == NULL || z->lz == NULL || z->buf == NULL) {
		km_inflate_destroy(z);
		return -ENOMEM;
	}
	*out = z;
	return 0;
}

void km_inflate_destroy(struct km_inflate *z)
{
	if (z == NULL)
		return;
	if (z->zs_ready)
		inflateEnd(&z->zs);
	ZSTD_freeDCtx(z->zd);
	if (z->lz != NULL)
		LZ4F_freeDecompressionContext(z->lz);
	free(z->buf);
	free(z);
}

uint32_t km_inflate_bytes_max(const struct km_inflate *z)
{
	return z->cap;
}

static uint32_t room(const struct km_inflate *z)
{
	return z->cap - z->len;
}

/* ---- gzip ---- */

/* GZIPInputStream reads members back to back; so does this. Each member
 * takes at least 18 bytes (10 of header, 8 of trailer), which bounds the
 * loop. */
static int run_gzip(struct km_inflate *z, const uint8_t *src, uint32_t len)
{
	z_stream *s = &z->zs;

	s->next_in = (Bytef *)src;
	s->avail_in = len;
	s->next_out = z->buf;
	s->avail_out = z->cap;
	for (uint32_t member = 0; member <= len / 18; member++) {
		int rc;

		inflateReset(s);
		rc = inflate(s, Z_FINISH);
		z->len = (uint32_t)(s->next_out - z->buf);
		if (rc == Z_STREAM_END && s->avail_in == 0)
			return 0;
		if (rc == Z_STREAM_END)
			continue;
		/* Z_FINISH short of the end: out of room, or out of input. */
		if (rc == Z_BUF_ERROR && s->avail_out == 0)
			return KM_EINFLATEMAX;
		return KM_EINFLATE;
	}
	return KM_EINFLATE;
}

/* ---- snappy ---- */

static const uint8_t xerial_magic[8] = { 0x82, 'S', 'N', 'A', 'P',
					 'P',  'Y', 0 };
#define XERIAL_HEADER_BYTES 16u /* magic, version int32, compatible int32 */

static int snappy_block(struct km_inflate *z, const uint8_t *p, uint32_t n)
{
	size_t need, got;

	if (snappy_uncompressed_length((const char *)p, n, &need) != SNAPPY_OK)
		return KM_EINFLATE;
	/* The block states its size up front: a bomb is refused unread. */
	if (need > room(z))
		return KM_EINFLATEMAX;
	got = need;
	if (snappy_uncompress((const char *)p, n, (char *)z->buf + z->len,
			      &got) != SNAPPY_OK || got != need)
		return KM_EINFLATE;
	z->len += (uint32_t)got;
	return 0;
}

/* Without xerial's magic the bytes are one raw block, as xerial's
 * SnappyInputStream reads them and librdkafka writes them. Each framed
 * block takes at least 5 bytes, which bounds the loop. */
static int run_snappy(struct km_inflate *z, const uint8_t *src, uint32_t len)
{
	uint32_t pos = XERIAL_HEADER_BYTES;
	int rc = 0;

	if (len < XERIAL_HEADER_BYTES ||
	    memcmp(src, xerial_magic, sizeof(xerial_magic)) != 0)
		return snappy_block(z, src, len);
	while (pos < len && rc == 0) {
		uint32_t n;

		if (len - pos < 4)
			return KM_EINFLATE;
		n = km_load_be32(src + pos);
		pos += 4;
		if (n == 0 || n > len - pos)
			return KM_EINFLATE;
		rc = snappy_block(z, src + pos, n);
		pos += n;
	}
	return rc;
}

/* ---- lz4 ---- */

/* liblz4's frame decoder, frames (and skippable frames) back to back, into
 * the stable output buffer: linked blocks read their history from it.
 * A frame's content size and checksums are checked as liblz4 does. */
static int run_lz4(struct km_inflate *z, const uint8_t *src, uint32_t len)
{
	LZ4F_decompressOptions_t opt = { .stableDst = 1 };
	size_t pos = 0, hint = 1;

	LZ4F_resetDecompressionContext(z->lz);
	while (pos < len) {
		size_t in = len - pos, out = room(z);

		hint = LZ4F_decompress(z->lz, z->buf + z->len, &out, src + pos,
				       &in, &opt);
		if (LZ4F_isError(hint))
			return KM_EINFLATE;
		if (in == 0 && out == 0)
			return room(z) == 0 ? KM_EINFLATEMAX : KM_EINFLATE;
		pos += in;
		z->len += (uint32_t)out;
	}
	return hint == 0 ? 0 : KM_EINFLATE; /* 0: the last frame ended */
}

/* ---- zstd ---- */

/* One shot into the whole buffer: zstd then needs no window buffer of its
 * own (a hostile window size allocates nothing), and reads every frame. */
static int run_zstd(struct km_inflate *z, const uint8_t *src, uint32_t len)
{
	size_t n = ZSTD_decompressDCtx(z->zd, z->buf, z->cap, src, len);

	if (ZSTD_isError(n))
		return ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall
			       ? KM_EINFLATEMAX
			       : KM_EINFLATE;
	z->len = (uint32_t)n;
	return 0;
}

int km_inflate_records(struct km_inflate *z, int codec, const void *src,
		       uint32_t len, const uint8_t **out)
{
	int rc;

	KM_ASSERT(z != NULL);
	z->len = 0;
	/* Every codec's stream has a header: no bytes is no stream. */
	if (len == 0)
		return KM_EINFLATE;
	switch (codec) {
	case KM_CODEC_GZIP:
		rc = run_gzip(z, src, len);
		break;
	case KM_CODEC_SNAPPY:
		rc = run_snappy(z, src, len);
		break;
	case KM_CODEC_LZ4:
		rc = run_lz4(z, src, len);
		break;
	case KM_CODEC_ZSTD:
		rc = run_zstd(z, src, len);
		break;
	default:
		rc = KM_EINFLATE;
		break;
	}
	if (rc < 0)
		return rc;
	KM_ASSERT(z->len <= z->cap);
	*out = z->buf;
	return (int)z->len;
}
