#include "kafka/control.h"

#include <assert.h>
#include <string.h>

#include "common/endian.h"
#include "common/errors.h"
#include "common/varint.h"
#include "kafka/records.h"

/* MirrorPidResetRecord v0: 2 (Version) + 1 (length uvarint, ids < 127 bytes)
 * + id + 1 (empty tag section). */
static_assert(KM_CLUSTER_ID_BYTES_MAX < 127, "compact length fits one byte");

const char *km_ctrl_type_name(int type)
{
	static const char *const names[] = {
		"ABORT",	   "COMMIT",	      "LEADER_CHANGE",
		"SNAPSHOT_HEADER", "SNAPSHOT_FOOTER", "KRAFT_VERSION",
		"KRAFT_VOTERS",	   "MIRROR_PID_RESET",
	};

	if (type < 0 || type > KM_CTRL_MIRROR_PID_RESET)
		return "UNKNOWN";
	return names[type];
}

static int build_one(void *buf, size_t cap, const struct km_batch_spec *bs,
		     int64_t ts, const uint8_t *key, const uint8_t *value,
		     int32_t value_len)
{
	struct km_record_spec rec = {
		.key = key,
		.key_len = KM_CTRL_KEY_BYTES,
		.value = value,
		.value_len = value_len,
		.timestamp = ts,
	};

	return km_records_build(buf, cap, bs, &rec, 1);
}

static void put_key(uint8_t *key, int16_t type)
{
	km_store_be16(key, 0);
	km_store_be16(key + 2, (uint16_t)type);
}

int km_ctrl_build_marker(void *buf, size_t cap, const struct km_ctrl_spec *s,
			 int64_t producer_id, int16_t producer_epoch,
			 bool commit, int32_t coordinator_epoch)
{
	struct km_batch_spec bs = {
		.base_offset = s->base_offset,
		.leader_epoch = s->leader_epoch,
		.attributes = KM_BATCH_ATTR_CONTROL | KM_BATCH_ATTR_TRANSACTIONAL,
		.producer_id = producer_id,
		.producer_epoch = producer_epoch,
		.base_sequence = -1,
	};
	uint8_t key[KM_CTRL_KEY_BYTES], value[KM_CTRL_MARKER_VALUE_BYTES];

	put_key(key, commit ? KM_CTRL_COMMIT : KM_CTRL_ABORT);
	km_store_be16(value, 0);
	km_store_be32(value + 2, (uint32_t)coordinator_epoch);
	return build_one(buf, cap, &bs, s->timestamp, key, value, sizeof(value));
}

int km_ctrl_build_pid_reset(void *buf, size_t cap, const struct km_ctrl_spec *s,
			    const char *source_cluster_id)
{
	struct km_batch_spec bs = {
		.base_offset = s->base_offset,
		.leader_epoch = s->leader_epoch,
		.attributes = KM_BATCH_ATTR_CONTROL,
		.producer_id = -1,
		.producer_epoch = -1,
		.base_sequence = -1,
	};
	size_t id_len = strlen(source_cluster_id);
	uint8_t key[KM_CTRL_KEY_BYTES], value[KM_CLUSTER_ID_BYTES_MAX + 4];
	uint8_t *p = value;

	if (id_len == 0 || id_len > KM_CLUSTER_ID_BYTES_MAX)
		return KM_ECLUSTERID;
	put_key(key, KM_CTRL_MIRROR_PID_RESET);
	km_store_be16(p, 0); /* Version */
	p += 2;
	p += km_varint_encode_u64(p, id_len + 1); /* COMPACT_STRING: N + 1 */
	memcpy(p, source_cluster_id, id_len);
	p += id_len;
	*p++ = 0; /* tagged fields: none */
	return build_one(buf, cap, &bs, s->timestamp, key, value,
			 (int32_t)(p - value));
}

/* One unsigned varint from the chain, within *left bytes. */
static int read_uvarint(const struct km_chain *c, struct km_chain_cur *cur,
			size_t *left, uint64_t *out)
{
	uint8_t tmp[KM_VARINT_BYTES_MAX];
	size_t n = km_chain_copy(c, *cur, tmp, *left < sizeof(tmp) ? *left : sizeof(tmp));
	int rc = km_varint_decode_u64(tmp, n, KM_VARINT_BYTES_MAX, out);

	if (rc <= 0)
		return KM_ECTRLVALUE;
	*left -= (size_t)rc;
	return km_chain_advance(c, cur, (size_t)rc) < 0 ? KM_ECTRLVALUE : 0;
}

/* Skip a flexible tag section: count, then per tag: tag, size, data. Walked
 * in the chain, not the staging copy: tagged fields may be any size. */
static int skip_tags(const struct km_chain *c, struct km_chain_cur cur,
		     size_t left)
{
	uint64_t count, tag, size;
	int rc = read_uvarint(c, &cur, &left, &count);

	/* Bounded: each tag takes at least two bytes of left. */
	for (uint64_t i = 0; rc == 0 && i < count; i++) {
		if ((rc = read_uvarint(c, &cur, &left, &tag)) < 0 ||
		    (rc = read_uvarint(c, &cur, &left, &size)) < 0)
			break;
		if (size > left || km_chain_advance(c, &cur, (size_t)size) < 0)
			rc = KM_ECTRLVALUE;
		left -= rc == 0 ? (size_t)size : 0;
	}
	return rc;
}

/* Version and SourceClusterId from the staged value.
 * @return the bytes they take (where the tag section starts), or a code. */
static int parse_pid_reset(const uint8_t *v, size_t len, struct km_ctrl *out)
{
	uint64_t clen;
	int n;

	if (len < 3)
		return KM_ECTRLVALUE;
	out->value_version = (int16_t)km_load_be16(v);
	n = km_varint_decode_u64(v + 2, len - 2, KM_VARINT_BYTES_MAX, &clen);
	/* COMPACT_STRING: 0 would be null, which SourceClusterId is not. */
	if (n <= 0 || clen == 0)
		return KM_ECTRLVALUE;
	if (clen - 1 > KM_CLUSTER_ID_BYTES_MAX)
		return KM_ECLUSTERID;
	if (clen - 1 > len - 2 - (size_t)n)
		return KM_ECTRLVALUE;
	out->cluster_id_len = (uint32_t)(clen - 1);
	memcpy(out->cluster_id, v + 2 + n, out->cluster_id_len);
	out->cluster_id[out->cluster_id_len] = '\0';
	return 2 + n + (int)out->cluster_id_len;
}

static int parse_value(const struct km_batch *b, const struct km_record *r,
		       struct km_ctrl *out)
{
	/* Values we decode are small: stage them to read them flat. */
	uint8_t v[KM_CLUSTER_ID_BYTES_MAX + 64];
	struct km_chain_cur tags;
	size_t len;
	int rc;

	if (r->value_len < 0)
		return KM_ECTRLVALUE;
	len = (size_t)r->value_len < sizeof(v) ? (size_t)r->value_len : sizeof(v);
	km_chain_copy(b->chain, r->value, v, len);
	switch (out->type) {
	case KM_CTRL_ABORT:
	case KM_CTRL_COMMIT:
		if (len < KM_CTRL_MARKER_VALUE_BYTES)
			return KM_ECTRLVALUE;
		out->value_version = (int16_t)km_load_be16(v);
		out->coordinator_epoch = (int32_t)km_load_be32(v + 2);
		return 0;
	case KM_CTRL_MIRROR_PID_RESET:
		if ((rc = parse_pid_reset(v, len, out)) < 0)
			return rc;
		tags = r->value;
		if (km_chain_advance(b->chain, &tags, (size_t)rc) < 0)
			return KM_ECTRLVALUE;
		return skip_tags(b->chain, tags, (size_t)r->value_len - (size_t)rc);
	default:
		return 0;
	}
}

int km_ctrl_parse_record(const struct km_batch *b, const struct km_record *r,
			 struct km_ctrl *out)
{
	uint8_t key[KM_CTRL_KEY_BYTES];

	if (!km_batch_is_control(b))
		return KM_ENOTCONTROL;
	memset(out, 0, sizeof(*out));
	/* "Invalid control record, key size < 4"; version < 0 is invalid. */
	if (r->key_len < KM_CTRL_KEY_BYTES)
		return KM_ECTRLKEY;
	km_chain_copy(b->chain, r->key, key, sizeof(key));
	out->key_version = (int16_t)km_load_be16(key);
	out->type = (int16_t)km_load_be16(key + 2);
	if (out->key_version < 0)
		return KM_ECTRLKEY;
	return parse_value(b, r, out);
}

int km_ctrl_parse(const struct km_batch *b, struct km_ctrl *out)
{
	struct km_records_iter it;
	struct km_record r;
	int rc;

	if (!km_batch_is_control(b))
		return KM_ENOTCONTROL;
	memset(out, 0, sizeof(*out));
	if ((rc = km_records_begin(&it, b)) < 0)
		return rc;
	rc = km_records_next(&it, &r);
	if (rc <= 0)
		return rc == 0 ? KM_ERECCOUNT : rc;
	return km_ctrl_parse_record(b, &r, out);
}
