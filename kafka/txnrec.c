/* __transaction_state keys and values (kafka/txnrec.h). */
#include "kafka/txnrec.h"

#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"

/* A bounded cursor over a contiguous buffer; `bad` is sticky. */
struct cur {
	uint8_t *p;
	size_t left;
	bool bad;
	bool flex;		/* value v1: compact lengths, tag sections */
};

static uint8_t *take(struct cur *c, size_t n)
{
	uint8_t *p = c->p;

	if (c->bad || c->left < n) {
		c->bad = true;
		return NULL;
	}
	c->p += n;
	c->left -= n;
	return p;
}

static void put(struct cur *c, uint64_t v, size_t n)
{
	uint8_t *p = take(c, n);

	for (size_t i = 0; p != NULL && i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static void put_str(struct cur *c, const char *s)
{
	size_t len = strlen(s);
	uint8_t *p;

	put(c, len, 2);
	if ((p = take(c, len)) != NULL)
		memcpy(p, s, len);
}

static int64_t get(struct cur *c, size_t n)
{
	uint8_t *p = take(c, n);
	uint64_t v = 0;

	for (size_t i = 0; p != NULL && i < n; i++)
		v = v << 8 | p[i];
	if (n == 1)
		return (int8_t)v;
	if (n == 2)
		return (int16_t)v;
	if (n == 4)
		return (int32_t)v;
	return (int64_t)v;
}

/* An unsigned varint of at most 5 bytes (Kafka's readUnsignedVarint). */
static uint32_t get_uvar(struct cur *c)
{
	uint32_t v = 0;

	for (int shift = 0; shift <= 28; shift += 7) {
		int64_t b = get(c, 1) & 0xff;

		v |= (uint32_t)(b & 0x7f) << shift;
		if (c->bad || (b & 0x80) == 0)
			return v;
	}
	c->bad = true;
	return 0;
}

/* An array or string length: int16/int32, or compact (n + 1) when flex.
 * -1 is null. */
static int64_t get_len(struct cur *c, size_t fixed)
{
	return c->flex ? (int64_t)get_uvar(c) - 1 : get(c, fixed);
}

static void get_name(struct cur *c, char out[KM_TXNREC_NAME_MAX + 1])
{
	int64_t len = get_len(c, 2);
	const uint8_t *s;

	if (len < 0 || len > KM_TXNREC_NAME_MAX)
		c->bad = true;
	s = c->bad ? NULL : take(c, (size_t)len);
	if (s == NULL)
		len = 0;
	memcpy(out, s == NULL ? (const uint8_t *)"" : s, (size_t)len);
	out[len] = '\0';
}

int km_txnrec_key_encode(void *buf, size_t cap, const char *txn_id)
{
	struct cur c = { buf, cap, false, false };

	if (strlen(txn_id) > KM_TXNREC_NAME_MAX)
		return -EINVAL;
	put(&c, 0, 2);
	put_str(&c, txn_id);
	return c.bad ? KM_ENOSPACE : (int)(cap - c.left);
}

int km_txnrec_key_decode(const void *buf, size_t len,
			 char id[KM_TXNREC_NAME_MAX + 1])
{
	struct cur c = { (uint8_t *)buf, len, false, false };

	if (get(&c, 2) != 0)
		return -EBADMSG;
	get_name(&c, id);
	return c.bad || c.left != 0 ? -EBADMSG : 0;
}

/* How many partitions from i on share parts[i]'s topic. */
static uint32_t run_of(const struct km_txnrec_value *v, uint32_t i)
{
	uint32_t n = 1;

	while (i + n < v->n_parts &&
	       strcmp(v->parts[i + n].topic, v->parts[i].topic) == 0)
		n++;
	return n;
}

static uint32_t topics_of(const struct km_txnrec_value *v)
{
	uint32_t t = 0;

	for (uint32_t i = 0; i < v->n_parts; i += run_of(v, i))
		t++;
	return t;
}

static void put_parts(struct cur *c, const struct km_txnrec_value *v)
{
	if (v->status == KM_TXNREC_EMPTY) {
		put(c, (uint32_t)-1, 4);
		return;
	}
	put(c, topics_of(v), 4);
	for (uint32_t i = 0, n; i < v->n_parts; i += n) {
		n = run_of(v, i);
		put_str(c, v->parts[i].topic);
		put(c, n, 4);
		for (uint32_t j = 0; j < n; j++)
			put(c, (uint32_t)v->parts[i + j].partition, 4);
	}
}

int km_txnrec_value_encode(void *buf, size_t cap,
			   const struct km_txnrec_value *v)
{
	struct cur c = { buf, cap, false, false };

	if (v->n_parts > KM_TXNREC_PARTS_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < v->n_parts; i++)
		if (strlen(v->parts[i].topic) > KM_TXNREC_NAME_MAX)
			return -EINVAL;
	put(&c, 0, 2);
	put(&c, (uint64_t)v->producer_id, 8);
	put(&c, (uint16_t)v->producer_epoch, 2);
	put(&c, (uint32_t)v->timeout_ms, 4);
	put(&c, (uint8_t)v->status, 1);
	put_parts(&c, v);
	put(&c, (uint64_t)v->last_update_ms, 8);
	put(&c, (uint64_t)v->start_ms, 8);
	return c.bad ? KM_ENOSPACE : (int)(cap - c.left);
}

/* A tag section: v's tagged fields when v is given (the value's own
 * section), every other tag skipped by its size, as Kafka skips tags it
 * does not know. */
static void skip_tags(struct cur *c, struct km_txnrec_value *v)
{
	uint32_t n = get_uvar(c);

	for (uint32_t i = 0; !c->bad && i < n; i++) {
		uint32_t tag = get_uvar(c), size = get_uvar(c);

		if (v != NULL && tag <= 1 && size == 8)
			*(tag == 0 ? &v->prev_producer_id
				   : &v->next_producer_id) = get(c, 8);
		else if (v != NULL && tag == 2 && size == 2)
			v->client_txn_version = (int16_t)get(c, 2);
		else
			(void)take(c, size);
	}
}

/* One topic's partitions appended to v->parts. */
static int get_topic(struct cur *c, struct km_txnrec_value *v)
{
	char topic[KM_TXNREC_NAME_MAX + 1];
	int64_t n;

	get_name(c, topic);
	n = get_len(c, 4);
	if (c->bad || n < 0 || (size_t)n > c->left / 4)
		return -EBADMSG;
	if (v->n_parts + (uint64_t)n > KM_TXNREC_PARTS_MAX)
		return -E2BIG;
	for (int64_t j = 0; j < n; j++) {
		struct km_txnrec_part *p = &v->parts[v->n_parts++];

		memcpy(p->topic, topic, sizeof(topic));
		p->partition = (int32_t)get(c, 4);
	}
	if (c->flex)
		skip_tags(c, NULL);
	return c->bad ? -EBADMSG : 0;
}

static int get_parts(struct cur *c, struct km_txnrec_value *v)
{
	int64_t n = get_len(c, 4);
	int rc = 0;

	if (n < -1 || (n > 0 && (size_t)n > c->left))
		return -EBADMSG;
	for (int64_t i = 0; rc == 0 && i < n; i++)
		rc = get_topic(c, v);
	return rc;
}

static void value_defaults(struct km_txnrec_value *v)
{
	memset(v, 0, sizeof(*v));
	v->start_ms = -1;
	v->prev_producer_id = -1;
	v->next_producer_id = -1;
}

int km_txnrec_value_decode(const void *buf, size_t len,
			   struct km_txnrec_value *v)
{
	struct cur c = { (uint8_t *)buf, len, false, false };
	int rc;

	value_defaults(v);
	v->version = (int16_t)get(&c, 2);
	if (c.bad || v->version < 0 || v->version > 1)
		return -EBADMSG;
	c.flex = v->version >= 1;
	v->producer_id = get(&c, 8);
	v->producer_epoch = (int16_t)get(&c, 2);
	v->timeout_ms = (int32_t)get(&c, 4);
	v->status = (int8_t)get(&c, 1);
	if ((rc = get_parts(&c, v)) < 0)
		return rc;
	v->last_update_ms = get(&c, 8);
	v->start_ms = get(&c, 8);
	if (c.flex)
		skip_tags(&c, v);
	return c.bad || c.left != 0 ? -EBADMSG : 0;
}
