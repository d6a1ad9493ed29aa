/* Kafka wire primitives: a bounded reader over a buffer chain, a writer into a
 * caller buffer, and request/response framing. Pure code, no I/O.
 *
 * Every request and response is `size int32` + header + body (Kafka protocol
 * guide, "Common Request and Response Structure"). Fixed-width fields are
 * big-endian. Non-flexible versions use STRING (int16 length, -1 = null),
 * BYTES (int32 length, -1 = null) and ARRAY (int32 count, -1 = null); flexible
 * versions use the COMPACT_ forms, an unsigned varint holding N + 1 (0 =
 * null), and end every struct with a tagged-field section (uvarint count;
 * per field uvarint tag, uvarint size, data).
 *
 * Reader: struct km_wire_rd reads at most `len` bytes of a chain from a
 * cursor (one frame body), never assumes the bytes are contiguous, and copies
 * small fixed fields out. Byte fields (records) come back as spans, not
 * copies. Errors are sticky: the first failure is kept in rd->err, and every
 * later read returns it without touching the chain, so a decoder may read a
 * run of fields and check once. Each read zeroes its output on failure.
 *
 * Writer: struct km_wire_wr writes into one contiguous caller buffer. Large
 * byte fields (records) can be left "external": the writer writes their
 * length prefix and records a gap; the caller then sends buffer pieces and
 * its own iovecs interleaved (km_wire_wr_iovec), so a big payload is never
 * copied. The first failure (KM_ENOSPACE when the buffer or the gap table is
 * full) is sticky like the reader's.
 */
#ifndef KM_KAFKA_WIRE_H
#define KM_KAFKA_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/chain.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	/* Bytes of the size prefix in front of every frame. */
	KM_WIRE_SIZE_BYTES = 4,
	/* Kafka caps STRING at Short.MAX_VALUE bytes, compact ones too. */
	KM_WIRE_STRING_BYTES_MAX = 32767,
	/* Names copied out of frames (topic names are at most 249 bytes in
	 * Kafka; hosts, racks, cluster and transactional ids fit too). Each
	 * struct km_wire_name costs this + 3 bytes. */
	KM_WIRE_NAME_BYTES_MAX = 255,
	KM_WIRE_UUID_BYTES = 16,
};

/* Defaults for struct km_wire_limits, as km_wire_limits_default holds them.
 * 100 MiB is Kafka's socket.request.max.bytes default. */
#define KM_WIRE_FRAME_BYTES_MAX_DEFAULT (100u * 1024 * 1024)
#define KM_WIRE_ARRAY_COUNT_MAX_DEFAULT 100000u
#define KM_WIRE_TAGS_MAX_DEFAULT 64u

/* Bounds a reader enforces on top of the frame size (STYLE 13). */
struct km_wire_limits {
	uint32_t frame_bytes_max;  /* largest `size`, <= INT32_MAX - 4 */
	uint32_t array_count_max;  /* largest ARRAY count, any level */
	uint32_t tags_max;	   /* most tagged fields in one section */
};

extern const struct km_wire_limits km_wire_limits_default;

/* A string copied out of a frame, NUL-terminated. len -1 = null. */
struct km_wire_name {
	int16_t len;
	char s[KM_WIRE_NAME_BYTES_MAX + 1];
};

/* A byte field left in place: cur is its first byte, off its offset from the
 * start of the reader's region, len its length (-1 = null). Valid while the
 * chain's segments are (STYLE 10). */
struct km_wire_span {
	struct km_chain_cur cur;
	uint32_t off;
	int32_t len;
};

/* Reader over len bytes of chain from a cursor. Fields are readable (err,
 * pos) but written only by km_wire_rd_*. */
struct km_wire_rd {
	const struct km_chain *chain;
	struct km_chain_cur cur;	/* next byte to read */
	uint32_t pos;			/* bytes consumed from the region */
	uint32_t len;			/* bytes in the region (frame size) */
	const struct km_wire_limits *lim;
	int err;			/* first error, sticky; 0 if none */
};

/* One external byte field inside a written frame: `len` bytes the caller
 * supplies, which belong right after buffer offset `at`. */
struct km_wire_gap {
	size_t at;
	uint32_t len;
};

/* Writer into buf[0..cap). Fields are readable, written only by
 * km_wire_wr_*. */
struct km_wire_wr {
	uint8_t *buf;
	size_t cap;
	size_t pos;			/* bytes written into buf */
	uint64_t ext_bytes;		/* external bytes declared so far */
	struct km_wire_gap *gaps;	/* optional, see km_wire_wr_set_gaps */
	uint32_t gaps_max;
	uint32_t n_gaps;
	size_t frame_at;		/* the open frame's size field */
	uint64_t frame_ext;		/* ext_bytes when that frame began */
	int err;			/* first error, sticky; 0 if none */
};

/* ---- framing ---- */

/**
 * Detect one complete frame at cur.
 *
 * Checks, in order: the 4-byte size is in the chain (else 0, need more);
 * "size int32" is not negative -> KM_EWIREFRAMELEN; size <= frame_bytes_max
 * -> KM_EWIREFRAMEMAX (checked as soon as the prefix is readable, so a
 * hostile size never makes the caller wait); the whole frame is in the chain
 * (else 0).
 * @param frame_bytes_max  largest size accepted, at most INT32_MAX - 4.
 * @return 4 + size (> 0) with *size_out = size, 0 for "need more bytes", or
 *         KM_EWIREFRAMELEN / KM_EWIREFRAMEMAX.
 */
int km_wire_frame_parse(const struct km_chain *c, struct km_chain_cur cur,
			uint32_t frame_bytes_max, uint32_t *size_out);

/* ---- reader ---- */

/** Read len bytes of c from start; lim must outlive the reader. */
void km_wire_rd_init(struct km_wire_rd *r, const struct km_chain *c,
		     struct km_chain_cur start, uint32_t len,
		     const struct km_wire_limits *lim);

/** Bytes left in the region. */
static inline uint32_t km_wire_rd_left(const struct km_wire_rd *r)
{
	return r->len - r->pos;
}

/**
 * Fixed-width reads. @return 0, or KM_EWIRETRUNC if the field runs past the
 * region, or the sticky error.
 */
int km_wire_rd_i8(struct km_wire_rd *r, int8_t *v);
int km_wire_rd_i16(struct km_wire_rd *r, int16_t *v);
int km_wire_rd_i32(struct km_wire_rd *r, int32_t *v);
int km_wire_rd_i64(struct km_wire_rd *r, int64_t *v);
/** BOOLEAN: one byte, any non-zero value reads as true (as Kafka reads it). */
int km_wire_rd_bool(struct km_wire_rd *r, bool *v);
int km_wire_rd_uuid(struct km_wire_rd *r, uint8_t out[KM_WIRE_UUID_BYTES]);
/** Skip n bytes. @return 0 or KM_EWIRETRUNC. */
int km_wire_rd_skip(struct km_wire_rd *r, uint32_t n);

/**
 * UNSIGNED_VARINT (at most 5 bytes, value below 2^32).
 * @return 0, KM_EWIRETRUNC if the region ends inside it, KM_EWIREVARINT if
 *         it runs past 5 bytes or 32 bits.
 */
int km_wire_rd_uvarint(struct km_wire_rd *r, uint32_t *v);

/**
 * STRING / NULLABLE_STRING (flex = false: int16 length) or COMPACT_STRING /
 * COMPACT_NULLABLE_STRING (flex = true: uvarint N + 1), copied into out.
 * @return 0, or: KM_EWIRENEGLEN (length below -1, or null when !nullable),
 *         KM_EWIRESTRLEN (longer than KM_WIRE_STRING_BYTES_MAX, or than
 *         KM_WIRE_NAME_BYTES_MAX which out can hold), KM_EWIRETRUNC,
 *         KM_EWIREVARINT.
 */
int km_wire_rd_name(struct km_wire_rd *r, bool flex, bool nullable,
		    struct km_wire_name *out);

/**
 * As km_wire_rd_name, but a string longer than out holds is accepted and its
 * first KM_WIRE_NAME_BYTES_MAX bytes are kept; *truncated says so. For
 * fields only logged (clientId), which Kafka does not bound.
 */
int km_wire_rd_name_trunc(struct km_wire_rd *r, bool flex, bool nullable,
			  struct km_wire_name *out, bool *truncated);

/**
 * BYTES / NULLABLE_BYTES / records (int32 length) or their COMPACT_ forms,
 * left in place: out->cur is the first byte. No copy.
 * @return 0, KM_EWIRENEGLEN, KM_EWIRETRUNC or KM_EWIREVARINT.
 */
int km_wire_rd_bytes(struct km_wire_rd *r, bool flex, bool nullable,
		     struct km_wire_span *out);

/**
 * ARRAY count (int32) or COMPACT_ARRAY count (uvarint N + 1). -1 = null.
 * A count over lim->array_count_max is refused, and so is a count larger
 * than the bytes left (every element takes at least one byte), so a hostile
 * count never drives a long loop.
 * @return 0, KM_EWIRENEGLEN (below -1, or null when !nullable),
 *         KM_EWIREARRAY, KM_EWIRETRUNC or KM_EWIREVARINT.
 */
int km_wire_rd_array(struct km_wire_rd *r, bool flex, bool nullable,
		     int32_t *count);

/**
 * Skip a tagged-field section: every field is unknown to this codec (the
 * messages it decodes tag nothing it needs), and each is skipped by its
 * size, as Kafka skips tags it does not know.
 * @return 0, KM_EWIRETAGS (count over lim->tags_max), KM_EWIRETRUNC,
 *         KM_EWIREVARINT.
 */
int km_wire_rd_tags(struct km_wire_rd *r);

/**
 * Record an error a message decoder found (KM_EWIRECAPACITY, ...): it
 * becomes sticky unless an earlier one is.
 * @return the reader's (first) error.
 */
int km_wire_rd_fail(struct km_wire_rd *r, int code);

/**
 * The region must be fully consumed.
 * @return 0, KM_EWIRETRAILING if bytes are left, or the sticky error.
 */
int km_wire_rd_end(struct km_wire_rd *r);

/** Copy up to cap bytes of a span; returns how many were copied. */
size_t km_wire_span_copy(const struct km_chain *c,
			 const struct km_wire_span *s, void *dst, size_t cap);

/* ---- writer ---- */

void km_wire_wr_init(struct km_wire_wr *w, void *buf, size_t cap);

/** Give the writer a table for external byte fields (km_wire_wr_external). */
void km_wire_wr_set_gaps(struct km_wire_wr *w, struct km_wire_gap *gaps,
			 uint32_t gaps_max);

/** Fixed-width writes. @return 0, or KM_ENOSPACE (sticky). */
int km_wire_wr_i8(struct km_wire_wr *w, int8_t v);
int km_wire_wr_i16(struct km_wire_wr *w, int16_t v);
int km_wire_wr_i32(struct km_wire_wr *w, int32_t v);
int km_wire_wr_i64(struct km_wire_wr *w, int64_t v);
int km_wire_wr_bool(struct km_wire_wr *w, bool v);
int km_wire_wr_uuid(struct km_wire_wr *w, const uint8_t v[KM_WIRE_UUID_BYTES]);
int km_wire_wr_uvarint(struct km_wire_wr *w, uint32_t v);
/** n raw bytes, no length. */
int km_wire_wr_raw(struct km_wire_wr *w, const void *p, size_t n);

/**
 * A string of len bytes (s may be NULL for null, len ignored then).
 * @return 0, KM_ENOSPACE, KM_EWIRESTRLEN (len over 32767), KM_EWIRENEGLEN
 *         (null when !nullable).
 */
int km_wire_wr_string(struct km_wire_wr *w, bool flex, bool nullable,
		      const char *s, size_t len);

/** A struct km_wire_name (len -1 = null). Returns as km_wire_wr_string. */
int km_wire_wr_name(struct km_wire_wr *w, bool flex, bool nullable,
		    const struct km_wire_name *n);

/**
 * A byte field: p[0..len), or null when len == -1.
 * @return 0, KM_ENOSPACE, KM_EWIRENEGLEN (null when !nullable, len < -1).
 */
int km_wire_wr_bytes(struct km_wire_wr *w, bool flex, bool nullable,
		     const void *p, int32_t len);

/**
 * A byte field whose len bytes the caller supplies outside the buffer: writes
 * the length and records a gap at the current position.
 * @return the gap index (>= 0), or KM_ENOSPACE (buffer or gap table full),
 *         KM_EWIRENEGLEN (len < 0).
 */
int km_wire_wr_external(struct km_wire_wr *w, bool flex, int32_t len);

/** Array count (-1 = null). @return 0, KM_ENOSPACE, KM_EWIRENEGLEN. */
int km_wire_wr_array(struct km_wire_wr *w, bool flex, bool nullable,
		     int32_t count);

/** An empty tagged-field section (one zero byte). */
int km_wire_wr_tags(struct km_wire_wr *w);

/** Record an encoder's own error (KM_EWIREVERSION, ...); returns the
 *  writer's (first) error. */
int km_wire_wr_fail(struct km_wire_wr *w, int code);

/** Overwrite an int32 written earlier at buffer offset at (array counts). */
void km_wire_wr_patch_i32(struct km_wire_wr *w, size_t at, int32_t v);

/** Start a frame: a size slot, patched at the end, at the current position. */
int km_wire_wr_frame_begin(struct km_wire_wr *w);

/**
 * Close the frame begun last: patch its size to the bytes written since,
 * external ones included.
 * @return the frame's bytes (4 + size, external included, > 0), or the
 *         sticky error, or KM_EWIREFRAMEMAX if it exceeds INT32_MAX.
 */
int km_wire_wr_frame_end(struct km_wire_wr *w);

/**
 * Lay the written bytes and the caller's external fields out as iovecs:
 * buf pieces interleaved with ext[i] for gap i (ext[i].iov_len must equal
 * the gap's len).
 * @return the number of iovecs (<= 2 * n_gaps + 1), or KM_ENOSPACE if
 *         out_max is too small.
 */
int km_wire_wr_iovec(const struct km_wire_wr *w, const struct iovec *ext,
		     uint32_t n_ext, struct iovec *out, uint32_t out_max);

/** Set a name from a C string; returns 0 or KM_EWIRESTRLEN if too long. */
int km_wire_name_set(struct km_wire_name *n, const char *s);

/** Set a name to null. */
void km_wire_name_set_null(struct km_wire_name *n);

/** True if both are null or hold the same bytes. */
bool km_wire_name_eq(const struct km_wire_name *a,
		     const struct km_wire_name *b);

#ifdef __cplusplus
}
#endif

#endif
