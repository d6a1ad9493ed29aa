/* __consumer_offsets keys and values (kafka/gorec.h). */
#include "kafka/gorec.h"

#include <stdbool.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"

/* A bounded cursor over a contiguous buffer; `bad` is sticky. */
struct cur {
	uint8_t *p;
	size_t left;
	bool bad;
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

static void put16(struct cur *c, uint16_t v)
{
	uint8_t *p = take(c, 2);

	if (p)
		km_store_be16(p, v);
}

static void put32(struct cur *c, uint32_t v)
{
	uint8_t *p = take(c, 4);

	if (p)
		km_store_be32(p, v);
}

static void put64(struct cur *c, uint64_t v)
{
	uint8_t *p = take(c, 8);

	if (p)
		km_store_be64(p, v);
}

static void put_str(struct cur *c, const char *s, size_t len)
{
	uint8_t *p;

	put16(c, (uint16_t)len);
	if ((p = take(c, len)) != NULL)
		memcpy(p, s, len);
}

static int64_t get(struct cur *c, size_t n)
{
	uint8_t *p = take(c, n);

	if (p == NULL)
		return 0;
	if (n == 2)
		return (int16_t)km_load_be16(p);
	if (n == 4)
		return (int32_t)km_load_be32(p);
	return (int64_t)km_load_be64(p);
}

/* A STRING of at most max bytes; *s points into the buffer. */
static uint16_t get_str(struct cur *c, size_t max, const char **s)
{
	int64_t len = get(c, 2);

	if (len < 0 || (size_t)len > max)
		c->bad = true;
	*s = c->bad ? "" : (const char *)take(c, (size_t)len);
	if (*s == NULL)
		*s = "";
	return c->bad ? 0 : (uint16_t)len;
}

static void get_name(struct cur *c, char out[KM_GOREC_NAME_MAX + 1])
{
	const char *s;
	uint16_t len = get_str(c, KM_GOREC_NAME_MAX, &s);

	memcpy(out, s, len);
	out[len] = '\0';
}

static int finish(const struct cur *c, size_t cap)
{
	if (c->bad)
		return KM_ENOSPACE;
	return (int)(cap - c->left);
}

int km_gorec_key_encode(void *buf, size_t cap, const char *group,
			const char *topic, int32_t partition)
{
	struct cur c = { buf, cap, false };
	size_t gl = strlen(group), tl = strlen(topic);

	if (gl > KM_GOREC_NAME_MAX || tl > KM_GOREC_NAME_MAX)
		return KM_EGOREC;
	put16(&c, 1);
	put_str(&c, group, gl);
	put_str(&c, topic, tl);
	put32(&c, (uint32_t)partition);
	return finish(&c, cap);
}

int km_gorec_value_encode(void *buf, size_t cap, const struct km_gorec_value *v)
{
	struct cur c = { buf, cap, false };

	if (v->metadata_len > KM_GOREC_METADATA_MAX)
		return KM_EGOREC;
	put16(&c, 3);
	put64(&c, (uint64_t)v->offset);
	put32(&c, (uint32_t)v->leader_epoch);
	put_str(&c, v->metadata ? v->metadata : "", v->metadata_len);
	put64(&c, (uint64_t)v->commit_ts);
	return finish(&c, cap);
}

int km_gorec_key_decode(const void *buf, size_t len, struct km_gorec_key *k)
{
	struct cur c = { (uint8_t *)buf, len, false };

	k->version = (int16_t)get(&c, 2);
	k->topic[0] = '\0';
	k->partition = -1;
	if (c.bad || k->version < 0 || k->version > 2)
		return KM_EGOREC;
	get_name(&c, k->group);
	if (k->version == 2)
		return c.bad ? KM_EGOREC : 0; /* the rest is not ours to read */
	get_name(&c, k->topic);
	k->partition = (int32_t)get(&c, 4);
	return c.bad || c.left != 0 ? KM_EGOREC : 0;
}

int km_gorec_value_decode(const void *buf, size_t len, struct km_gorec_value *v)
{
	struct cur c = { (uint8_t *)buf, len, false };
	int16_t version = (int16_t)get(&c, 2);

	v->leader_epoch = -1;
	if (c.bad || version < 0 || version > 3)
		return KM_EGOREC;
	v->offset = get(&c, 8);
	if (version >= 3)
		v->leader_epoch = (int32_t)get(&c, 4);
	v->metadata_len = get_str(&c, KM_GOREC_METADATA_MAX, &v->metadata);
	v->commit_ts = get(&c, 8);
	if (version == 1)
		(void)get(&c, 8); /* expireTimestamp: retention is ours */
	return c.bad || c.left != 0 ? KM_EGOREC : 0;
}
