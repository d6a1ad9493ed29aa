/* Fetch request (key 1), v4-11 (FetchRequest.json); v12-13 as a client of
 * a source (km_proto_client_versions): v12 is flexible (compact arrays and
 * strings, a tagged-field section ending each struct) and adds
 * LastFetchedEpoch; v13 names each topic by its TopicId instead of its
 * name, so that a broker whose topic of that name is another one (deleted
 * and made again) answers UNKNOWN_TOPIC_ID instead of serving it.
 *
 * ReplicaId int32, MaxWaitMs int32, MinBytes int32, MaxBytes int32 (v3+),
 * IsolationLevel int8 (v4+), SessionId int32 v7+, SessionEpoch int32 v7+,
 * Topics [Topic STRING (v0-12) / TopicId uuid (v13+), Partitions
 * [Partition int32, CurrentLeaderEpoch int32 v9+, FetchOffset int64,
 * LastFetchedEpoch int32 v12+, LogStartOffset int64 v5+,
 * PartitionMaxBytes int32]], ForgottenTopicsData [Topic STRING (v7-12) /
 * TopicId uuid (v13+), Partitions [int32]] v7+, RackId STRING v11+. The
 * tagged ClusterId (v12+) is never sent.
 */
#include "kafka/proto.h"

#include <errno.h>

#include "common/errors.h"
#include "common/km_assert.h"

static int rd_part(struct km_wire_rd *r, int16_t version, void *parts,
		   uint32_t i)
{
	struct km_fetch_req_part *p = &((struct km_fetch_req_part *)parts)[i];

	p->current_leader_epoch = -1;
	p->last_fetched_epoch = -1;
	p->log_start_offset = -1;
	km_wire_rd_i32(r, &p->partition);
	if (version >= 9)
		km_wire_rd_i32(r, &p->current_leader_epoch);
	km_wire_rd_i64(r, &p->fetch_offset);
	if (version >= 12)
		km_wire_rd_i32(r, &p->last_fetched_epoch);
	if (version >= 5)
		km_wire_rd_i64(r, &p->log_start_offset);
	km_wire_rd_i32(r, &p->partition_max_bytes);
	if (version >= 12)
		km_wire_rd_tags(r);
	return r->err;
}

static int wr_part(struct km_wire_wr *w, int16_t version, const void *parts,
		   uint32_t i)
{
	const struct km_fetch_req_part *p =
		&((const struct km_fetch_req_part *)parts)[i];

	km_wire_wr_i32(w, p->partition);
	if (version >= 9)
		km_wire_wr_i32(w, p->current_leader_epoch);
	km_wire_wr_i64(w, p->fetch_offset);
	if (version >= 12)
		km_wire_wr_i32(w, p->last_fetched_epoch);
	if (version >= 5)
		km_wire_wr_i64(w, p->log_start_offset);
	km_wire_wr_i32(w, p->partition_max_bytes);
	if (version >= 12)
		km_wire_wr_tags(w);
	return w->err;
}

/* ForgottenTopicsData partitions are bare int32 indexes. */
static int rd_index(struct km_wire_rd *r, int16_t version, void *parts,
		    uint32_t i)
{
	(void)version;
	return km_wire_rd_i32(r, &((int32_t *)parts)[i]);
}

static int wr_index(struct km_wire_wr *w, int16_t version, const void *parts,
		    uint32_t i)
{
	(void)version;
	return km_wire_wr_i32(w, ((const int32_t *)parts)[i]);
}

/* v13+: topics by id (ids[t] for topics[t]), else by name. */
static int wr_topics(struct km_wire_wr *w, int16_t version,
		     const struct km_proto_topic *topics,
		     const uint8_t (*ids)[KM_WIRE_UUID_BYTES], uint32_t n,
		     const void *parts, uint32_t n_parts, km_proto_part_wr_fn fn)
{
	if (version < 13)
		return km_proto_wr_topics(w, version, version >= 12, topics, n,
					  parts, n_parts, fn);
	if (n > 0 && ids == NULL)
		return km_wire_wr_fail(w, -EINVAL);
	km_wire_wr_array(w, true, false, (int32_t)n);
	for (uint32_t t = 0; t < n && w->err == 0; t++) {
		KM_ASSERT(topics[t].count <= n_parts &&
			  topics[t].first <= n_parts - topics[t].count);
		km_wire_wr_uuid(w, ids[t]);
		km_wire_wr_array(w, true, false, (int32_t)topics[t].count);
		for (uint32_t j = 0; j < topics[t].count && w->err == 0; j++)
			fn(w, version, parts, topics[t].first + j);
		km_wire_wr_tags(w);
	}
	return w->err;
}

int km_fetch_req_encode(struct km_wire_wr *w, int16_t version,
			const struct km_fetch_req *m)
{
	int rc = km_proto_client_check(KM_API_FETCH, version);
	bool flex = version >= 12;

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	km_wire_wr_i32(w, m->replica_id);
	km_wire_wr_i32(w, m->max_wait_ms);
	km_wire_wr_i32(w, m->min_bytes);
	km_wire_wr_i32(w, m->max_bytes);
	km_wire_wr_i8(w, m->isolation_level);
	if (version >= 7) {
		km_wire_wr_i32(w, m->session_id);
		km_wire_wr_i32(w, m->session_epoch);
	}
	wr_topics(w, version, m->topics,
		  (const uint8_t (*)[KM_WIRE_UUID_BYTES])m->topic_ids,
		  m->n_topics, m->parts, m->n_parts, wr_part);
	if (version >= 7)
		wr_topics(w, version, m->forgotten,
			  (const uint8_t (*)[KM_WIRE_UUID_BYTES])m->forgotten_ids,
			  m->n_forgotten, m->forgotten_parts,
			  m->n_forgotten_parts, wr_index);
	if (version >= 11)
		km_wire_wr_name(w, flex, false, &m->rack_id);
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

static void set_defaults(struct km_fetch_req *m)
{
	m->isolation_level = 0;
	m->session_id = 0;
	m->session_epoch = -1;
	m->n_topics = m->n_parts = 0;
	m->n_forgotten = m->n_forgotten_parts = 0;
	km_wire_name_set(&m->rack_id, "");
}

/* One topic by id: its TopicId into ids[t], its partitions by fn. */
static int rd_topic_by_id(struct km_wire_rd *r, int16_t version,
			  const struct km_proto_topics_out *out,
			  uint8_t (*ids)[KM_WIRE_UUID_BYTES],
			  km_proto_part_rd_fn fn)
{
	struct km_proto_topic *t = &out->topics[*out->n_topics];
	int32_t n;

	km_wire_rd_uuid(r, ids[*out->n_topics]);
	km_wire_name_set_null(&t->name);
	if (km_wire_rd_array(r, true, false, &n) < 0)
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
	(*out->n_topics)++;
	return km_wire_rd_tags(r);
}

static int rd_topics(struct km_wire_rd *r, int16_t version,
		     const struct km_proto_topics_out *out,
		     uint8_t (*ids)[KM_WIRE_UUID_BYTES], km_proto_part_rd_fn fn)
{
	int32_t n;

	if (version < 13)
		return km_proto_rd_topics(r, version, version >= 12, out, fn);
	*out->n_topics = 0;
	*out->n_parts = 0;
	if (km_wire_rd_array(r, true, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > out->topics_max || (n > 0 && ids == NULL))
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	/* Bounded by n, itself bounded by array_count_max and the bytes. */
	for (int32_t i = 0; i < n; i++)
		if (rd_topic_by_id(r, version, out, ids, fn) < 0)
			return r->err;
	return 0;
}

int km_fetch_req_decode(struct km_wire_rd *r, int16_t version,
			struct km_fetch_req *m)
{
	int rc = km_proto_client_check(KM_API_FETCH, version);
	bool flex = version >= 12;
	struct km_proto_topics_out topics = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};
	struct km_proto_topics_out forgotten = {
		m->forgotten, m->forgotten_max, &m->n_forgotten,
		m->forgotten_parts, m->forgotten_parts_max,
		&m->n_forgotten_parts,
	};

	set_defaults(m);
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	km_wire_rd_i32(r, &m->replica_id);
	km_wire_rd_i32(r, &m->max_wait_ms);
	km_wire_rd_i32(r, &m->min_bytes);
	km_wire_rd_i32(r, &m->max_bytes);
	km_wire_rd_i8(r, &m->isolation_level);
	if (version >= 7) {
		km_wire_rd_i32(r, &m->session_id);
		km_wire_rd_i32(r, &m->session_epoch);
	}
	if (rd_topics(r, version, &topics, m->topic_ids, rd_part) < 0)
		return r->err;
	if (version >= 7 &&
	    rd_topics(r, version, &forgotten, m->forgotten_ids, rd_index) < 0)
		return r->err;
	if (version >= 11)
		km_wire_rd_name(r, flex, false, &m->rack_id);
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}
