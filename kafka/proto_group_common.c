/* Helpers the group codecs share (kafka/proto_group_pvt.h). */
#include "kafka/proto_group_pvt.h"

#include "common/errors.h"
#include "common/km_assert.h"

int km_proto_group_rd_check(struct km_wire_rd *r, int16_t api_key, int16_t version)
{
	int rc = km_proto_check(api_key, version);

	return rc < 0 ? km_wire_rd_fail(r, rc) : 0;
}

int km_proto_group_wr_check(struct km_wire_wr *w, int16_t api_key, int16_t version)
{
	int rc = km_proto_check(api_key, version);

	return rc < 0 ? km_wire_wr_fail(w, rc) : 0;
}

int km_proto_group_rd_bytes(struct km_wire_rd *r, bool flex, bool nullable,
		      struct km_group_bytes *b)
{
	km_wire_rd_bytes(r, flex, nullable, &b->span);
	b->p = NULL;
	b->len = b->span.len;
	return r->err;
}

/* A programmer error, not input: bytes claimed but not given. */
static void check_given(const struct km_group_bytes *b)
{
	if (b->len > 0)
		KM_ASSERT(b->p != NULL);
}

int km_proto_group_wr_bytes(struct km_wire_wr *w, bool flex, bool nullable,
		      const struct km_group_bytes *b)
{
	check_given(b);
	return km_wire_wr_bytes(w, flex, nullable, b->p, b->len);
}

/* "STRING: ... the length N is given as an INT16" (compact: UNSIGNED_VARINT
 * N + 1); -1 (compact 0) is null. */
static int rd_strlen(struct km_wire_rd *r, bool flex, int32_t *len)
{
	int16_t n16;
	uint32_t n;

	if (!flex) {
		km_wire_rd_i16(r, &n16);
		*len = n16;
		return r->err;
	}
	if (km_wire_rd_uvarint(r, &n) < 0)
		return r->err;
	if (n > KM_WIRE_STRING_BYTES_MAX + 1u)
		return km_wire_rd_fail(r, KM_EWIRESTRLEN);
	*len = (int32_t)n - 1;
	return 0;
}

int km_proto_group_rd_strspan(struct km_wire_rd *r, bool flex, bool nullable,
			struct km_group_bytes *b)
{
	int32_t len = -1;

	b->p = NULL;
	b->len = b->span.len = -1;
	b->span.off = r->pos;
	if (rd_strlen(r, flex, &len) < 0)
		return r->err;
	if (len < -1 || (len == -1 && !nullable))
		return km_wire_rd_fail(r, KM_EWIRENEGLEN);
	b->span.cur = r->cur;
	b->span.off = r->pos;
	if (len > 0 && km_wire_rd_skip(r, (uint32_t)len) < 0)
		return r->err;
	b->len = b->span.len = len;
	return 0;
}

int km_proto_group_wr_strbytes(struct km_wire_wr *w, bool flex, bool nullable,
			 const struct km_group_bytes *b)
{
	check_given(b);
	if (b->len < -1)
		return km_wire_wr_fail(w, KM_EWIRENEGLEN);
	if (b->len == -1)
		return km_wire_wr_string(w, flex, nullable, NULL, 0);
	return km_wire_wr_string(w, flex, nullable,
				 b->len == 0 ? "" : (const char *)b->p,
				 (size_t)b->len);
}

int km_proto_group_rd_count(struct km_wire_rd *r, bool flex, bool nullable,
		      uint32_t room, int32_t *n)
{
	if (km_wire_rd_array(r, flex, nullable, n) < 0)
		return r->err;
	if (*n > 0 && (uint32_t)*n > room)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	return 0;
}

int km_proto_group_wr_count(struct km_wire_wr *w, bool flex, uint32_t n)
{
	KM_ASSERT(n <= INT32_MAX);
	return km_wire_wr_array(w, flex, false, (int32_t)n);
}

/* One topic: Name, PartitionIndexes [int32] appended to out's array. */
static int rd_topic_i32(struct km_wire_rd *r, bool flex,
			const struct km_proto_topics_out *out,
			struct km_proto_topic *t)
{
	int32_t n;
	int32_t *parts = out->parts;

	km_wire_rd_name(r, flex, false, &t->name);
	if (km_proto_group_rd_count(r, flex, false,
			      out->parts_max - *out->n_parts, &n) < 0)
		return r->err;
	t->first = *out->n_parts;
	t->count = 0;
	for (int32_t j = 0; j < n; j++) {
		if (km_wire_rd_i32(r, &parts[t->first + t->count]) < 0)
			return r->err;
		t->count++;
		(*out->n_parts)++;
	}
	if (flex)
		km_wire_rd_tags(r);
	return r->err;
}

int km_proto_group_rd_topics_i32(struct km_wire_rd *r, bool flex, bool nullable,
			   const struct km_proto_topics_out *out,
			   bool *is_null)
{
	int32_t n;

	*out->n_topics = 0;
	*out->n_parts = 0;
	*is_null = false;
	if (km_proto_group_rd_count(r, flex, nullable, out->topics_max, &n) < 0)
		return r->err;
	*is_null = n < 0;
	/* Bounded by n, itself bounded by array_count_max and the bytes. */
	for (int32_t i = 0; i < n; i++) {
		if (rd_topic_i32(r, flex, out, &out->topics[i]) < 0)
			return r->err;
		(*out->n_topics)++;
	}
	return 0;
}

int km_proto_group_wr_topics_i32(struct km_wire_wr *w, bool flex, bool is_null,
			   const struct km_proto_topic *topics, uint32_t n,
			   const int32_t *parts, uint32_t n_parts)
{
	if (is_null)
		return km_wire_wr_array(w, flex, true, -1);
	km_proto_group_wr_count(w, flex, n);
	for (uint32_t i = 0; i < n && w->err == 0; i++) {
		const struct km_proto_topic *t = &topics[i];

		KM_ASSERT(t->count <= n_parts);
		KM_ASSERT(t->first <= n_parts - t->count);
		km_wire_wr_name(w, flex, false, &t->name);
		km_proto_group_wr_count(w, flex, t->count);
		for (uint32_t j = 0; j < t->count; j++)
			km_wire_wr_i32(w, parts[t->first + j]);
		if (flex)
			km_wire_wr_tags(w);
	}
	return w->err;
}

int km_proto_group_rd_names(struct km_wire_rd *r, bool flex, struct km_wire_name *a,
		      uint32_t max, uint32_t *n)
{
	int32_t count;

	*n = 0;
	if (km_proto_group_rd_count(r, flex, false, max, &count) < 0)
		return r->err;
	for (int32_t i = 0; i < count; i++) {
		if (km_wire_rd_name(r, flex, false, &a[i]) < 0)
			return r->err;
		(*n)++;
	}
	return 0;
}

int km_proto_group_wr_names(struct km_wire_wr *w, bool flex,
		      const struct km_wire_name *a, uint32_t n)
{
	km_proto_group_wr_count(w, flex, n);
	for (uint32_t i = 0; i < n && w->err == 0; i++)
		km_wire_wr_name(w, flex, false, &a[i]);
	return w->err;
}
