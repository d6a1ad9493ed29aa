/* Decompression of compressed records: see inflate.h. */
#include "kafka/inflate.h"

#include <errno.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
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
	z->buf = malloc(out_bytes_max);
	if (!z->zs_ready || z->zd == NULL || z->buf == NULL) {
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

/* ---- lz4 (the frame format, over liblz4's block decoder) ---- */

#define LZ4_FRAME_MAGIC 0x184D2204u
#define LZ4_SKIP_MAGIC 0x184D2A50u /* 0x184D2A50..5F */
#define LZ4_FLG_DICT_ID 0x01
#define LZ4_FLG_RESERVED 0x02
#define LZ4_FLG_CONTENT_CHECKSUM 0x04
#define LZ4_FLG_CONTENT_SIZE 0x08
#define LZ4_FLG_BLOCK_CHECKSUM 0x10
#define LZ4_FLG_BLOCK_INDEP 0x20
#define LZ4_BLOCK_RAW 0x80000000u

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
	return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

struct lz4_frame {
	uint8_t flg;
	uint32_t block_max;
	uint32_t out_start;	/* where this frame's output starts */
};

/* One data block. Linked blocks may refer back to the frame's earlier
 * output, which lies right before them in the buffer. */
static int lz4_block(struct km_inflate *z, const struct lz4_frame *f,
		     const uint8_t *p, uint32_t n, bool raw)
{
	uint32_t cap = room(z) < f->block_max ? room(z) : f->block_max;
	char *dst = (char *)z->buf + z->len;
	int got;

	if (raw) {
		if (n > room(z))
			return KM_EINFLATEMAX;
		memcpy(dst, p, n);
		z->len += n;
		return 0;
	}
	if (f->flg & LZ4_FLG_BLOCK_INDEP)
		got = LZ4_decompress_safe((const char *)p, dst, (int)n, (int)cap);
	else
		got = LZ4_decompress_safe_usingDict(
			(const char *)p, dst, (int)n, (int)cap,
			(const char *)z->buf + f->out_start,
			(int)(z->len - f->out_start));
	/* The block format does not say its size: a failure with less room
	 * than a whole block is read as the buffer running out. */
	if (got < 0)
		return cap < f->block_max ? KM_EINFLATEMAX : KM_EINFLATE;
	z->len += (uint32_t)got;
	return 0;
}

/* The frame descriptor at p (after the magic): FLG, BD, content size,
 * header checksum. @return its size, or KM_EINFLATE. */
static int lz4_descriptor(const uint8_t *p, uint32_t n, struct lz4_frame *f,
			  uint64_t *content_size)
{
	uint32_t size = 3, bsid;

	if (n < size)
		return KM_EINFLATE;
	f->flg = p[0];
	bsid = (p[1] >> 4) & 0x07;
	/* "Version Number: 2 bits, must be set to 01"; reserved bits 0; a
	 * dictionary id names a dictionary this host does not have. */
	if ((f->flg >> 6) != 1 || (f->flg & LZ4_FLG_RESERVED) ||
	    (f->flg & LZ4_FLG_DICT_ID) || (p[1] & 0x8F) || bsid < 4)
		return KM_EINFLATE;
	f->block_max = 1u << (8 + 2 * bsid); /* 4: 64 KiB .. 7: 4 MiB */
	*content_size = UINT64_MAX;
	if (f->flg & LZ4_FLG_CONTENT_SIZE) {
		size += 8;
		if (n < size)
			return KM_EINFLATE;
		*content_size = le64(p + 2);
	}
	return (int)size;
}

/* The blocks of a frame, from pos up to and including its EndMark.
 * @return the position after the EndMark, or a code. */
static int lz4_blocks(struct km_inflate *z, const struct lz4_frame *f,
		      const uint8_t *src, uint32_t len, uint32_t pos)
{
	uint32_t sums = (f->flg & LZ4_FLG_BLOCK_CHECKSUM) ? 4 : 0;

	/* Bounded: every block takes at least 4 bytes. */
	for (uint32_t i = 0; i <= len / 4; i++) {
		uint32_t word, n;
		int rc;

		if (len - pos < 4)
			return KM_EINFLATE;
		word = le32(src + pos);
		pos += 4;
		if (word == 0)
			return (int)pos; /* EndMark */
		n = word & ~LZ4_BLOCK_RAW;
		if (n > f->block_max || n > len - pos || sums > len - pos - n)
			return KM_EINFLATE;
		if ((rc = lz4_block(z, f, src + pos, n,
				    (word & LZ4_BLOCK_RAW) != 0)) < 0)
			return rc;
		pos += n + sums;
	}
	return KM_EINFLATE;
}

/* One frame at src (magic included). @return bytes it takes, or a code. */
static int lz4_frame(struct km_inflate *z, const uint8_t *src, uint32_t len)
{
	struct lz4_frame f = { .out_start = z->len };
	uint64_t content_size;
	int rc = lz4_descriptor(src + 4, len - 4, &f, &content_size);
	uint32_t pos;

	if (rc < 0)
		return rc;
	if ((rc = lz4_blocks(z, &f, src, len, 4 + (uint32_t)rc)) < 0)
		return rc;
	pos = (uint32_t)rc;
	if (f.flg & LZ4_FLG_CONTENT_CHECKSUM) {
		if (len - pos < 4)
			return KM_EINFLATE;
		pos += 4;
	}
	if (content_size != UINT64_MAX && content_size != z->len - f.out_start)
		return KM_EINFLATE;
	return (int)pos;
}

/* Frames back to back, as LZ4's decoders read them. */
static int run_lz4(struct km_inflate *z, const uint8_t *src, uint32_t len)
{
	uint32_t pos = 0;

	while (pos < len) { /* bounded: each frame takes 7 bytes or more */
		uint32_t magic, skip;
		int rc;

		if (len - pos < 8)
			return KM_EINFLATE;
		magic = le32(src + pos);
		if ((magic & 0xFFFFFFF0u) == LZ4_SKIP_MAGIC) {
			skip = le32(src + pos + 4);
			if (skip > len - pos - 8)
				return KM_EINFLATE;
			pos += 8 + skip;
			continue;
		}
		if (magic != LZ4_FRAME_MAGIC)
			return KM_EINFLATE;
		if ((rc = lz4_frame(z, src + pos, len - pos)) < 0)
			return rc;
		pos += (uint32_t)rc;
	}
	return 0;
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
