#include "kafka/wire.h"

#include <assert.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/km_assert.h"
#include "common/varint.h"

static_assert(KM_WIRE_FRAME_BYTES_MAX_DEFAULT <= INT32_MAX - KM_WIRE_SIZE_BYTES,
	      "a frame's bytes must fit the int return of the parsers");
static_assert(KM_WIRE_NAME_BYTES_MAX < KM_WIRE_STRING_BYTES_MAX,
	      "a name is a short STRING");
static_assert(KM_WIRE_NAME_BYTES_MAX <= INT16_MAX, "name lengths are int16");

const struct km_wire_limits km_wire_limits_default = {
	KM_WIRE_FRAME_BYTES_MAX_DEFAULT,
	KM_WIRE_ARRAY_COUNT_MAX_DEFAULT,
	KM_WIRE_TAGS_MAX_DEFAULT,
};

/* ---- framing ---- */

int km_wire_frame_parse(const struct km_chain *c, struct km_chain_cur cur,
			uint32_t frame_bytes_max, uint32_t *size_out)
{
	uint8_t be[KM_WIRE_SIZE_BYTES];
	int32_t size;

	KM_ASSERT(frame_bytes_max <= INT32_MAX - KM_WIRE_SIZE_BYTES);
	if (km_chain_copy(c, cur, be, sizeof(be)) < sizeof(be))
		return 0;
	/* "size int32: the length of the request or response, not counting
	 * the size field itself"; a negative size is no length at all. */
	size = (int32_t)km_load_be32(be);
	if (size < 0)
		return KM_EWIREFRAMELEN;
	/* Checked before waiting for the body (socket.request.max.bytes). */
	if ((uint32_t)size > frame_bytes_max)
		return KM_EWIREFRAMEMAX;
	if (!km_chain_has(c, cur, KM_WIRE_SIZE_BYTES + (size_t)size))
		return 0;
	*size_out = (uint32_t)size;
	return KM_WIRE_SIZE_BYTES + size;
}

/* ---- reader ---- */

void km_wire_rd_init(struct km_wire_rd *r, const struct km_chain *c,
		     struct km_chain_cur start, uint32_t len,
		     const struct km_wire_limits *lim)
{
	KM_ASSERT(lim != NULL);
	r->chain = c;
	r->cur = start;
	r->pos = 0;
	r->len = len;
	r->lim = lim;
	r->err = 0;
}

int km_wire_rd_fail(struct km_wire_rd *r, int code)
{
	if (r->err == 0)
		r->err = code;
	return r->err;
}

/* Step the cursor past n bytes the region holds. */
static int rd_advance(struct km_wire_rd *r, uint32_t n)
{
	if (n > km_wire_rd_left(r))
		return km_wire_rd_fail(r, KM_EWIRETRUNC);
	/* The chain may end before the region does (a frame handed over
	 * before it was complete): that is a truncation too. */
	if (km_chain_advance(r->chain, &r->cur, n) < 0)
		return km_wire_rd_fail(r, KM_EWIRETRUNC);
	r->pos += n;
	return 0;
}

/* Copy n bytes out and step past them; the fast path stays in a segment. */
static int rd_take(struct km_wire_rd *r, void *dst, uint32_t n)
{
	const struct km_chain *c = r->chain;

	if (r->err != 0)
		return r->err;
	if (n > km_wire_rd_left(r))
		return km_wire_rd_fail(r, KM_EWIRETRUNC);
	if (r->cur.seg < c->n_iov &&
	    c->iov[r->cur.seg].iov_len - r->cur.off > n) {
		memcpy(dst, (const uint8_t *)c->iov[r->cur.seg].iov_base +
				    r->cur.off, n);
		r->cur.off += n;
		r->pos += n;
		return 0;
	}
	if (km_chain_copy(c, r->cur, dst, n) != n)
		return km_wire_rd_fail(r, KM_EWIRETRUNC);
	return rd_advance(r, n);
}

int km_wire_rd_i8(struct km_wire_rd *r, int8_t *v)
{
	uint8_t b = 0;
	int rc = rd_take(r, &b, 1);

	*v = rc == 0 ? (int8_t)b : 0;
	return rc;
}

int km_wire_rd_i16(struct km_wire_rd *r, int16_t *v)
{
	uint8_t be[2];
	int rc = rd_take(r, be, sizeof(be));

	*v = rc == 0 ? (int16_t)km_load_be16(be) : 0;
	return rc;
}

int km_wire_rd_i32(struct km_wire_rd *r, int32_t *v)
{
	uint8_t be[4];
	int rc = rd_take(r, be, sizeof(be));

	*v = rc == 0 ? (int32_t)km_load_be32(be) : 0;
	return rc;
}

int km_wire_rd_i64(struct km_wire_rd *r, int64_t *v)
{
	uint8_t be[8];
	int rc = rd_take(r, be, sizeof(be));

	*v = rc == 0 ? (int64_t)km_load_be64(be) : 0;
	return rc;
}

int km_wire_rd_bool(struct km_wire_rd *r, bool *v)
{
	int8_t b;
	int rc = km_wire_rd_i8(r, &b);

	*v = b != 0;
	return rc;
}

int km_wire_rd_uuid(struct km_wire_rd *r, uint8_t out[KM_WIRE_UUID_BYTES])
{
	int rc = rd_take(r, out, KM_WIRE_UUID_BYTES);

	if (rc != 0)
		memset(out, 0, KM_WIRE_UUID_BYTES);
	return rc;
}

int km_wire_rd_skip(struct km_wire_rd *r, uint32_t n)
{
	if (r->err != 0)
		return r->err;
	return rd_advance(r, n);
}

int km_wire_rd_uvarint(struct km_wire_rd *r, uint32_t *v)
{
	uint8_t buf[KM_VARINT_BYTES_MAX];
	uint32_t want = km_wire_rd_left(r) < sizeof(buf) ? km_wire_rd_left(r)
							  : sizeof(buf);
	size_t have;
	uint64_t u = 0;
	int n;

	*v = 0;
	if (r->err != 0)
		return r->err;
	have = km_chain_copy(r->chain, r->cur, buf, want);
	n = km_varint_decode_u64(buf, have, KM_VARINT_BYTES_MAX, &u);
	/* ByteUtils.readUnsignedVarint: "Varint is too long" past 5 bytes. */
	if (n < 0 || (n > 0 && u > UINT32_MAX))
		return km_wire_rd_fail(r, KM_EWIREVARINT);
	if (n == 0)
		return km_wire_rd_fail(r, KM_EWIRETRUNC);
	*v = (uint32_t)u;
	return rd_advance(r, (uint32_t)n);
}

/* The length of a string field: -1 = null, else 0..32767 bytes. */
static int rd_string_len(struct km_wire_rd *r, bool flex, bool nullable,
			 int32_t *len)
{
	int16_t n16;
	uint32_t u;

	*len = 0;
	if (flex) {
		/* COMPACT_STRING: "length N + 1 ... 0 = null". */
		if (km_wire_rd_uvarint(r, &u) < 0)
			return r->err;
		*len = u == 0 ? -1 : (u - 1 > INT32_MAX ? INT32_MAX
							: (int32_t)(u - 1));
	} else {
		/* STRING: "int16 length N ... -1 = null (NULLABLE_STRING)". */
		if (km_wire_rd_i16(r, &n16) < 0)
			return r->err;
		*len = n16;
	}
	if (*len < -1 || (*len == -1 && !nullable))
		return km_wire_rd_fail(r, KM_EWIRENEGLEN);
	/* "string field had length ... which is too long" (> Short.MAX). */
	if (*len > KM_WIRE_STRING_BYTES_MAX)
		return km_wire_rd_fail(r, KM_EWIRESTRLEN);
	return 0;
}

/* Copy a string of len bytes into out, keeping at most the name's room. */
static int rd_name_body(struct km_wire_rd *r, int32_t len,
			struct km_wire_name *out)
{
	uint32_t keep = len > KM_WIRE_NAME_BYTES_MAX ? KM_WIRE_NAME_BYTES_MAX
						     : (uint32_t)len;

	if ((uint32_t)len > km_wire_rd_left(r))
		return km_wire_rd_fail(r, KM_EWIRETRUNC);
	if (rd_take(r, out->s, keep) < 0)
		return r->err;
	out->s[keep] = '\0';
	out->len = (int16_t)keep;
	return rd_advance(r, (uint32_t)len - keep);
}

int km_wire_rd_name_trunc(struct km_wire_rd *r, bool flex, bool nullable,
			  struct km_wire_name *out, bool *truncated)
{
	int32_t len;

	km_wire_name_set_null(out);
	*truncated = false;
	if (rd_string_len(r, flex, nullable, &len) < 0 || len < 0)
		return r->err;
	*truncated = len > KM_WIRE_NAME_BYTES_MAX;
	if (rd_name_body(r, len, out) < 0) {
		km_wire_name_set_null(out);
		return r->err;
	}
	return 0;
}

int km_wire_rd_name(struct km_wire_rd *r, bool flex, bool nullable,
		    struct km_wire_name *out)
{
	int32_t len;

	km_wire_name_set_null(out);
	if (rd_string_len(r, flex, nullable, &len) < 0 || len < 0)
		return r->err;
	if (len > KM_WIRE_NAME_BYTES_MAX)
		return km_wire_rd_fail(r, KM_EWIRESTRLEN);
	if (rd_name_body(r, len, out) < 0) {
		km_wire_name_set_null(out);
		return r->err;
	}
	return 0;
}

int km_wire_rd_bytes(struct km_wire_rd *r, bool flex, bool nullable,
		     struct km_wire_span *out)
{
	int32_t len = 0;
	uint32_t u;

	memset(out, 0, sizeof(*out));
	out->len = -1;
	if (flex) {
		/* COMPACT_BYTES / COMPACT_RECORDS: uvarint N + 1, 0 = null. */
		if (km_wire_rd_uvarint(r, &u) < 0)
			return r->err;
		len = u == 0 ? -1 : (u - 1 > INT32_MAX ? INT32_MAX
						       : (int32_t)(u - 1));
	} else if (km_wire_rd_i32(r, &len) < 0) {
		/* BYTES: "int32 length N ... -1 = null (NULLABLE_BYTES)". */
		return r->err;
	}
	if (len < -1 || (len == -1 && !nullable))
		return km_wire_rd_fail(r, KM_EWIRENEGLEN);
	if (len == -1)
		return 0;
	if ((uint32_t)len > km_wire_rd_left(r))
		return km_wire_rd_fail(r, KM_EWIRETRUNC);
	out->cur = r->cur;
	out->off = r->pos;
	if (rd_advance(r, (uint32_t)len) < 0) {
		out->len = -1;
		return r->err;
	}
	out->len = len;
	return 0;
}

int km_wire_rd_array(struct km_wire_rd *r, bool flex, bool nullable,
		     int32_t *count)
{
	int64_t n = 0;
	uint32_t u;
	int32_t n32;

	*count = 0;
	if (flex) {
		/* COMPACT_ARRAY: "length N + 1 ... 0 = null". */
		if (km_wire_rd_uvarint(r, &u) < 0)
			return r->err;
		n = (int64_t)u - 1;
	} else {
		/* ARRAY: "int32 N ... -1 = null". */
		if (km_wire_rd_i32(r, &n32) < 0)
			return r->err;
		n = n32;
	}
	if (n < -1 || (n == -1 && !nullable))
		return km_wire_rd_fail(r, KM_EWIRENEGLEN);
	if (n > (int64_t)r->lim->array_count_max || n > INT32_MAX)
		return km_wire_rd_fail(r, KM_EWIREARRAY);
	/* Every element of our arrays takes at least one byte. */
	if (n > (int64_t)km_wire_rd_left(r))
		return km_wire_rd_fail(r, KM_EWIRETRUNC);
	*count = (int32_t)n;
	return 0;
}

int km_wire_rd_tags(struct km_wire_rd *r)
{
	uint32_t n, tag, size;

	/* "TAG_BUFFER: uvarint count, then per field uvarint tag, uvarint
	 * size, data". Unknown tags are skipped by size. */
	if (km_wire_rd_uvarint(r, &n) < 0)
		return r->err;
	if (n > r->lim->tags_max)
		return km_wire_rd_fail(r, KM_EWIRETAGS);
	for (uint32_t i = 0; i < n; i++) {
		km_wire_rd_uvarint(r, &tag);
		km_wire_rd_uvarint(r, &size);
		if (km_wire_rd_skip(r, size) < 0)
			return r->err;
	}
	return 0;
}

int km_wire_rd_end(struct km_wire_rd *r)
{
	if (r->err != 0)
		return r->err;
	if (r->pos != r->len)
		return km_wire_rd_fail(r, KM_EWIRETRAILING);
	return 0;
}

size_t km_wire_span_copy(const struct km_chain *c,
			 const struct km_wire_span *s, void *dst, size_t cap)
{
	size_t n;

	if (s->len <= 0)
		return 0;
	n = (size_t)s->len < cap ? (size_t)s->len : cap;
	return km_chain_copy(c, s->cur, dst, n);
}

/* ---- names ---- */

int km_wire_name_set(struct km_wire_name *n, const char *s)
{
	size_t len = strlen(s);

	if (len > KM_WIRE_NAME_BYTES_MAX)
		return KM_EWIRESTRLEN;
	memcpy(n->s, s, len + 1);
	n->len = (int16_t)len;
	return 0;
}

void km_wire_name_set_null(struct km_wire_name *n)
{
	n->len = -1;
	n->s[0] = '\0';
}

bool km_wire_name_eq(const struct km_wire_name *a,
		     const struct km_wire_name *b)
{
	if (a->len != b->len)
		return false;
	return a->len <= 0 || memcmp(a->s, b->s, (size_t)a->len) == 0;
}

/* ---- writer ---- */

void km_wire_wr_init(struct km_wire_wr *w, void *buf, size_t cap)
{
	memset(w, 0, sizeof(*w));
	w->buf = buf;
	w->cap = cap;
}

void km_wire_wr_set_gaps(struct km_wire_wr *w, struct km_wire_gap *gaps,
			 uint32_t gaps_max)
{
	KM_ASSERT(w->n_gaps == 0);
	w->gaps = gaps;
	w->gaps_max = gaps_max;
}

int km_wire_wr_fail(struct km_wire_wr *w, int code)
{
	if (w->err == 0)
		w->err = code;
	return w->err;
}

/* Reserve n bytes; NULL (and the sticky error) if they do not fit. */
static uint8_t *wr_room(struct km_wire_wr *w, size_t n)
{
	uint8_t *p;

	if (w->err != 0)
		return NULL;
	if (w->cap - w->pos < n) {
		km_wire_wr_fail(w, KM_ENOSPACE);
		return NULL;
	}
	p = w->buf + w->pos;
	w->pos += n;
	return p;
}

int km_wire_wr_i8(struct km_wire_wr *w, int8_t v)
{
	uint8_t *p = wr_room(w, 1);

	if (p == NULL)
		return w->err;
	*p = (uint8_t)v;
	return 0;
}

int km_wire_wr_i16(struct km_wire_wr *w, int16_t v)
{
	uint8_t *p = wr_room(w, 2);

	if (p == NULL)
		return w->err;
	km_store_be16(p, (uint16_t)v);
	return 0;
}

int km_wire_wr_i32(struct km_wire_wr *w, int32_t v)
{
	uint8_t *p = wr_room(w, 4);

	if (p == NULL)
		return w->err;
	km_store_be32(p, (uint32_t)v);
	return 0;
}

int km_wire_wr_i64(struct km_wire_wr *w, int64_t v)
{
	uint8_t *p = wr_room(w, 8);

	if (p == NULL)
		return w->err;
	km_store_be64(p, (uint64_t)v);
	return 0;
}

int km_wire_wr_bool(struct km_wire_wr *w, bool v)
{
	return km_wire_wr_i8(w, v ? 1 : 0);
}

int km_wire_wr_uuid(struct km_wire_wr *w, const uint8_t v[KM_WIRE_UUID_BYTES])
{
	return km_wire_wr_raw(w, v, KM_WIRE_UUID_BYTES);
}

int km_wire_wr_uvarint(struct km_wire_wr *w, uint32_t v)
{
	uint8_t tmp[KM_VARLONG_BYTES_MAX];
	int n = km_varint_encode_u64(tmp, v);

	return km_wire_wr_raw(w, tmp, (size_t)n);
}

int km_wire_wr_raw(struct km_wire_wr *w, const void *p, size_t n)
{
	uint8_t *d = wr_room(w, n);

	if (d == NULL)
		return w->err;
	if (n > 0)
		memcpy(d, p, n);
	return 0;
}

/* A length prefix: N + 1 as uvarint (0 = null) or fixed int16/int32. */
static int wr_len(struct km_wire_wr *w, bool flex, int wide, int32_t len)
{
	if (flex)
		return km_wire_wr_uvarint(w, (uint32_t)(len + 1));
	if (wide)
		return km_wire_wr_i32(w, len);
	return km_wire_wr_i16(w, (int16_t)len);
}

int km_wire_wr_string(struct km_wire_wr *w, bool flex, bool nullable,
		      const char *s, size_t len)
{
	if (w->err != 0)
		return w->err;
	if (s == NULL && !nullable)
		return km_wire_wr_fail(w, KM_EWIRENEGLEN);
	if (s == NULL)
		return wr_len(w, flex, 0, -1);
	if (len > KM_WIRE_STRING_BYTES_MAX)
		return km_wire_wr_fail(w, KM_EWIRESTRLEN);
	wr_len(w, flex, 0, (int32_t)len);
	return km_wire_wr_raw(w, s, len);
}

int km_wire_wr_name(struct km_wire_wr *w, bool flex, bool nullable,
		    const struct km_wire_name *n)
{
	KM_ASSERT(n->len <= KM_WIRE_NAME_BYTES_MAX);
	if (n->len < 0)
		return km_wire_wr_string(w, flex, nullable, NULL, 0);
	return km_wire_wr_string(w, flex, nullable, n->s, (size_t)n->len);
}

int km_wire_wr_bytes(struct km_wire_wr *w, bool flex, bool nullable,
		     const void *p, int32_t len)
{
	if (w->err != 0)
		return w->err;
	if (len < -1 || (len == -1 && !nullable))
		return km_wire_wr_fail(w, KM_EWIRENEGLEN);
	wr_len(w, flex, 1, len);
	return len > 0 ? km_wire_wr_raw(w, p, (size_t)len) : w->err;
}

int km_wire_wr_external(struct km_wire_wr *w, bool flex, int32_t len)
{
	if (w->err != 0)
		return w->err;
	if (len < 0)
		return km_wire_wr_fail(w, KM_EWIRENEGLEN);
	if (w->n_gaps == w->gaps_max)
		return km_wire_wr_fail(w, KM_ENOSPACE);
	if (wr_len(w, flex, 1, len) < 0)
		return w->err;
	w->gaps[w->n_gaps].at = w->pos;
	w->gaps[w->n_gaps].len = (uint32_t)len;
	w->ext_bytes += (uint32_t)len;
	return (int)w->n_gaps++;
}

int km_wire_wr_array(struct km_wire_wr *w, bool flex, bool nullable,
		     int32_t count)
{
	if (w->err != 0)
		return w->err;
	if (count < -1 || (count == -1 && !nullable))
		return km_wire_wr_fail(w, KM_EWIRENEGLEN);
	return wr_len(w, flex, 1, count);
}

int km_wire_wr_tags(struct km_wire_wr *w)
{
	return km_wire_wr_uvarint(w, 0);
}

void km_wire_wr_patch_i32(struct km_wire_wr *w, size_t at, int32_t v)
{
	if (w->err != 0)
		return;
	KM_ASSERT(at + 4 <= w->pos);
	km_store_be32(w->buf + at, (uint32_t)v);
}

int km_wire_wr_frame_begin(struct km_wire_wr *w)
{
	w->frame_at = w->pos;
	w->frame_ext = w->ext_bytes;
	return km_wire_wr_i32(w, 0);
}

int km_wire_wr_frame_end(struct km_wire_wr *w)
{
	uint64_t size;

	if (w->err != 0)
		return w->err;
	KM_ASSERT(w->pos >= w->frame_at + KM_WIRE_SIZE_BYTES);
	size = (w->pos - w->frame_at - KM_WIRE_SIZE_BYTES) +
	       (w->ext_bytes - w->frame_ext);
	if (size > INT32_MAX - KM_WIRE_SIZE_BYTES)
		return km_wire_wr_fail(w, KM_EWIREFRAMEMAX);
	km_wire_wr_patch_i32(w, w->frame_at, (int32_t)size);
	return (int)size + KM_WIRE_SIZE_BYTES;
}

int km_wire_wr_iovec(const struct km_wire_wr *w, const struct iovec *ext,
		     uint32_t n_ext, struct iovec *out, uint32_t out_max)
{
	uint32_t k = 0;
	size_t prev = 0;

	KM_ASSERT(n_ext == w->n_gaps);
	for (uint32_t i = 0; i < w->n_gaps; i++) {
		KM_ASSERT(ext[i].iov_len == w->gaps[i].len);
		if (w->gaps[i].at > prev) {
			if (k == out_max)
				return KM_ENOSPACE;
			out[k].iov_base = w->buf + prev;
			out[k++].iov_len = w->gaps[i].at - prev;
			prev = w->gaps[i].at;
		}
		if (ext[i].iov_len == 0)
			continue;
		if (k == out_max)
			return KM_ENOSPACE;
		out[k++] = ext[i];
	}
	if (w->pos > prev) {
		if (k == out_max)
			return KM_ENOSPACE;
		out[k].iov_base = w->buf + prev;
		out[k++].iov_len = w->pos - prev;
	}
	return (int)k;
}
