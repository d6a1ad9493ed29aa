/* Building blocks for the `[topic, [partition]]` arrays most messages
 * carry: flattened decode/encode, a decode cursor, a streaming encoder. */
#include "kafka/proto.h"

#include <stdint.h>
#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"

/* Read one topic: Name, then its partitions appended to out's array. */
static int rd_topic(struct km_wire_rd *r, int16_t version, bool flex,
		    const struct km_proto_topics_out *out,
		    struct km_proto_topic *t, km_proto_part_rd_fn fn)
{
	int32_t n;

	km_wire_rd_name(r, flex, false, &t->name);
	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > out->parts_max - *out->n_parts)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	t->first = *out->n_parts;
	t->count = 0;
	for (int32_t j = 0; j < n; j++) {
		if (fn(r, version, out->parts, t->first + t->count) < 0)
			return r->err;
		t->count++;
		(*out->n_parts)++;
	}
	if (flex)
		km_wire_rd_tags(r);
	return r->err;
}

int km_proto_rd_topics(struct km_wire_rd *r, int16_t version, bool flex,
		       const struct km_proto_topics_out *out,
		       km_proto_part_rd_fn fn)
{
	int32_t n;

	*out->n_topics = 0;
	*out->n_parts = 0;
	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > out->topics_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	/* Bounded by n, itself bounded by array_count_max and the bytes. */
	for (int32_t i = 0; i < n; i++) {
		if (rd_topic(r, version, flex, out, &out->topics[i], fn) < 0)
			return r->err;
		(*out->n_topics)++;
	}
	return 0;
}

int km_proto_wr_topics(struct km_wire_wr *w, int16_t version, bool flex,
		       const struct km_proto_topic *topics, uint32_t n,
		       const void *parts, uint32_t n_parts,
		       km_proto_part_wr_fn fn)
{
	KM_ASSERT(n <= INT32_MAX);
	km_wire_wr_array(w, flex, false, (int32_t)n);
	for (uint32_t i = 0; i < n && w->err == 0; i++) {
		const struct km_proto_topic *t = &topics[i];

		KM_ASSERT(t->count <= n_parts);
		KM_ASSERT(t->first <= n_parts - t->count);
		km_wire_wr_name(w, flex, false, &t->name);
		km_wire_wr_array(w, flex, false, (int32_t)t->count);
		for (uint32_t j = 0; j < t->count && w->err == 0; j++)
			fn(w, version, parts, t->first + j);
		if (flex)
			km_wire_wr_tags(w);
	}
	return w->err;
}

/* ---- streaming encoder ---- */

static void enc_close_topic(struct km_proto_enc *e)
{
	if (e->parts_at != SIZE_MAX)
		km_wire_wr_patch_i32(e->w, e->parts_at, e->n_parts);
	e->parts_at = SIZE_MAX;
}

int km_proto_enc_topics(struct km_proto_enc *e, struct km_wire_wr *w,
			int16_t version)
{
	e->w = w;
	e->version = version;
	e->topics_at = w->pos;
	e->n_topics = 0;
	e->parts_at = SIZE_MAX;
	e->n_parts = 0;
	return km_wire_wr_i32(w, 0);
}

int km_proto_enc_topic(struct km_proto_enc *e,
		       const struct km_wire_name *name)
{
	enc_close_topic(e);
	KM_ASSERT(e->n_topics < INT32_MAX);
	e->n_topics++;
	km_wire_wr_name(e->w, false, false, name);
	if (e->w->err != 0)
		return e->w->err;
	e->parts_at = e->w->pos;
	e->n_parts = 0;
	return km_wire_wr_i32(e->w, 0);
}

void km_proto_enc_part(struct km_proto_enc *e)
{
	/* A partition outside a topic is a caller bug, not input. */
	if (e->w->err == 0)
		KM_ASSERT(e->parts_at != SIZE_MAX);
	KM_ASSERT(e->n_parts < INT32_MAX);
	e->n_parts++;
}

int km_proto_enc_end(struct km_proto_enc *e)
{
	enc_close_topic(e);
	km_wire_wr_patch_i32(e->w, e->topics_at, e->n_topics);
	return e->w->err;
}

/* ---- decode cursor ---- */

static void cursor_init(struct km_proto_cursor *c, struct km_wire_rd *r,
			bool flex, bool by_id)
{
	km_wire_name_set_null(&c->topic);
	memset(c->topic_id, 0, sizeof(c->topic_id));
	c->topic_index = -1;
	c->rd = r;
	c->parts_left = 0;
	c->flex = flex;
	c->by_id = by_id;
	c->in_topic = false;
}

int km_proto_cursor_begin(struct km_proto_cursor *c, struct km_wire_rd *r)
{
	cursor_init(c, r, false, false);
	return km_wire_rd_array(r, false, false, &c->topics_left);
}

int km_proto_cursor_begin_flex(struct km_proto_cursor *c, struct km_wire_rd *r,
			       bool by_id)
{
	cursor_init(c, r, true, by_id);
	return km_wire_rd_array(r, true, false, &c->topics_left);
}

/* The next topic's header: its Name or TopicId, its partitions count. */
static int cursor_topic(struct km_proto_cursor *c)
{
	struct km_wire_rd *r = c->rd;

	c->topics_left--;
	c->topic_index++;
	if (c->by_id)
		km_wire_rd_uuid(r, c->topic_id);
	else
		km_wire_rd_name(r, c->flex, false, &c->topic);
	c->in_topic = true;
	return km_wire_rd_array(r, c->flex, false, &c->parts_left);
}

int km_proto_cursor_next(struct km_proto_cursor *c)
{
	struct km_wire_rd *r = c->rd;

	if (r->err != 0)
		return r->err;
	/* Bounded by topics_left; each pass consumes a topic header (and,
	 * flexible, the tagged fields that end the topic before). */
	while (c->parts_left == 0) {
		if (c->in_topic && c->flex && km_wire_rd_tags(r) < 0)
			return r->err;
		c->in_topic = false;
		if (c->topics_left == 0)
			return 0;
		if (cursor_topic(c) < 0)
			return r->err;
	}
	c->parts_left--;
	return 1;
}
