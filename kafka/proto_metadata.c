/* Metadata (key 3), v0-12 (Metadata{Request,Response}.json): the front end
 * serves them all and the fetch sessions may ask any; v10+ names topic ids.
 * Flexible from v9: compact strings and arrays, a tag section after every
 * struct.
 *
 * Request: Topics [TopicId uuid v10+, Name STRING (nullable v10+)] (v0:
 * empty = all topics; v1+: null = all, empty = none),
 * AllowAutoTopicCreation bool v4+, IncludeClusterAuthorizedOperations bool
 * v8-10, IncludeTopicAuthorizedOperations bool v8+.
 * Response: ThrottleTimeMs v3+, Brokers [NodeId int32, Host STRING, Port
 * int32, Rack NULLABLE_STRING v1+], ClusterId NULLABLE_STRING v2+,
 * ControllerId int32 v1+, Topics [ErrorCode int16, Name STRING (nullable
 * v12+), TopicId uuid v10+, IsInternal bool v1+, Partitions [ErrorCode
 * int16, PartitionIndex int32, LeaderId int32, LeaderEpoch int32 v7+,
 * ReplicaNodes [int32], IsrNodes [int32], OfflineReplicas [int32] v5+],
 * TopicAuthorizedOperations int32 v8+], ClusterAuthorizedOperations int32
 * v8-10.
 */
#include "kafka/proto.h"

#include <string.h>

#include "common/errors.h"
#include "common/km_assert.h"

/* "default": "-2147483648": authorized operations not asked for. */
#define OPS_NOT_ASKED INT32_MIN

static bool flexible(int16_t version)
{
	return km_proto_is_flexible(KM_API_METADATA, version);
}

static void wr_tags(struct km_wire_wr *w, bool flex)
{
	if (flex)
		km_wire_wr_tags(w);
}

static void rd_tags(struct km_wire_rd *r, bool flex)
{
	if (flex)
		km_wire_rd_tags(r);
}

int km_metadata_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_metadata_req *m)
{
	static const uint8_t no_id[KM_WIRE_UUID_BYTES];
	int rc = km_proto_client_check(KM_API_METADATA, version);
	bool flex = flexible(version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	/* "In version 0, an empty array indicates 'request metadata for all
	 * topics'": v0 has no way to ask for none. */
	if (version == 0 && m->n_topics == 0)
		return km_wire_wr_fail(w, KM_EWIREVALUE);
	if (m->n_topics < 0)
		km_wire_wr_array(w, flex, true, version == 0 ? 0 : -1);
	else
		km_wire_wr_array(w, flex, false, m->n_topics);
	for (int32_t i = 0; i < m->n_topics && w->err == 0; i++) {
		/* By name: "If using the topic name, this should just be the
		 * default empty value" for TopicId. */
		if (version >= 10)
			km_wire_wr_uuid(w, m->topic_ids != NULL ? m->topic_ids[i]
							       : no_id);
		km_wire_wr_name(w, flex, version >= 10, &m->topics[i]);
		wr_tags(w, flex);
	}
	if (version >= 4)
		km_wire_wr_bool(w, m->allow_auto_topic_creation);
	if (version >= 8 && version <= 10)
		km_wire_wr_bool(w, false);
	if (version >= 8)
		km_wire_wr_bool(w, false);
	wr_tags(w, flex);
	return w->err;
}

int km_metadata_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_metadata_req *m)
{
	int rc = km_proto_client_check(KM_API_METADATA, version);
	bool flex = flexible(version), ops;
	uint8_t id[KM_WIRE_UUID_BYTES];
	int32_t n;

	m->n_topics = 0;
	m->allow_auto_topic_creation = true;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	/* "nullableVersions": "1+". */
	if (km_wire_rd_array(r, flex, version >= 1, &n) < 0)
		return r->err;
	if (n > 0 && (uint32_t)n > m->topics_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		memset(id, 0, sizeof(id));
		if (version >= 10)
			km_wire_rd_uuid(r, id);
		if (m->topic_ids != NULL)
			memcpy(m->topic_ids[i], id, sizeof(id));
		km_wire_rd_name(r, flex, version >= 10, &m->topics[i]);
		rd_tags(r, flex);
		if (r->err != 0)
			return r->err;
	}
	m->n_topics = version == 0 && n == 0 ? -1 : n;
	if (version >= 4)
		km_wire_rd_bool(r, &m->allow_auto_topic_creation);
	if (version >= 8 && version <= 10)
		km_wire_rd_bool(r, &ops);
	if (version >= 8)
		km_wire_rd_bool(r, &ops);
	rd_tags(r, flex);
	return km_wire_rd_end(r);
}

/* ---- response ---- */

static void wr_nodes(struct km_wire_wr *w, bool flex,
		     const struct km_metadata_resp *m, uint32_t first,
		     uint32_t count)
{
	KM_ASSERT(count <= m->n_nodes);
	KM_ASSERT(first <= m->n_nodes - count);
	km_wire_wr_array(w, flex, false, (int32_t)count);
	for (uint32_t i = 0; i < count; i++)
		km_wire_wr_i32(w, m->nodes[first + i]);
}

static void wr_part(struct km_wire_wr *w, int16_t version,
		    const struct km_metadata_resp *m,
		    const struct km_metadata_part *p)
{
	bool flex = flexible(version);

	km_wire_wr_i16(w, p->error_code);
	km_wire_wr_i32(w, p->partition);
	km_wire_wr_i32(w, p->leader_id);
	if (version >= 7)
		km_wire_wr_i32(w, p->leader_epoch);
	wr_nodes(w, flex, m, p->replicas_first, p->replicas_count);
	wr_nodes(w, flex, m, p->isr_first, p->isr_count);
	if (version >= 5)
		km_wire_wr_array(w, flex, false, 0);
	wr_tags(w, flex);
}

static void wr_topic(struct km_wire_wr *w, int16_t version,
		     const struct km_metadata_resp *m,
		     const struct km_metadata_topic *t)
{
	bool flex = flexible(version);

	KM_ASSERT(t->count <= m->n_parts);
	KM_ASSERT(t->first <= m->n_parts - t->count);
	km_wire_wr_i16(w, t->error_code);
	km_wire_wr_name(w, flex, version >= 12, &t->name);
	if (version >= 10)
		km_wire_wr_uuid(w, t->topic_id);
	if (version >= 1)
		km_wire_wr_bool(w, t->is_internal);
	km_wire_wr_array(w, flex, false, (int32_t)t->count);
	for (uint32_t j = 0; j < t->count && w->err == 0; j++)
		wr_part(w, version, m, &m->parts[t->first + j]);
	if (version >= 8)
		km_wire_wr_i32(w, OPS_NOT_ASKED);
	wr_tags(w, flex);
}

int km_metadata_resp_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_metadata_resp *m)
{
	int rc = km_proto_client_check(KM_API_METADATA, version);
	bool flex = flexible(version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	KM_ASSERT(m->n_brokers <= INT32_MAX);
	KM_ASSERT(m->n_topics <= INT32_MAX);
	if (version >= 3)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_array(w, flex, false, (int32_t)m->n_brokers);
	for (uint32_t i = 0; i < m->n_brokers && w->err == 0; i++) {
		const struct km_metadata_broker *b = &m->brokers[i];

		km_wire_wr_i32(w, b->node_id);
		km_wire_wr_name(w, flex, false, &b->host);
		km_wire_wr_i32(w, b->port);
		if (version >= 1)
			km_wire_wr_name(w, flex, true, &b->rack);
		wr_tags(w, flex);
	}
	if (version >= 2)
		km_wire_wr_name(w, flex, true, &m->cluster_id);
	if (version >= 1)
		km_wire_wr_i32(w, m->controller_id);
	km_wire_wr_array(w, flex, false, (int32_t)m->n_topics);
	for (uint32_t i = 0; i < m->n_topics && w->err == 0; i++)
		wr_topic(w, version, m, &m->topics[i]);
	if (version >= 8 && version <= 10)
		km_wire_wr_i32(w, OPS_NOT_ASKED);
	wr_tags(w, flex);
	return w->err;
}

/* ReplicaNodes or IsrNodes into the node pool. */
static int rd_nodes(struct km_wire_rd *r, bool flex, struct km_metadata_resp *m,
		    uint32_t *first, uint32_t *count)
{
	int32_t n;

	*first = m->n_nodes;
	*count = 0;
	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->nodes_max - m->n_nodes)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++)
		km_wire_rd_i32(r, &m->nodes[m->n_nodes++]);
	*count = (uint32_t)n;
	return r->err;
}

/* OfflineReplicas: nothing kmirror uses; the array count is bounded by the
 * bytes left (km_wire_rd_array), so is this loop. */
static int skip_nodes(struct km_wire_rd *r, bool flex)
{
	int32_t n, id;

	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	for (int32_t i = 0; i < n && r->err == 0; i++)
		km_wire_rd_i32(r, &id);
	return r->err;
}

static int rd_part(struct km_wire_rd *r, int16_t version,
		   struct km_metadata_resp *m, struct km_metadata_part *p)
{
	bool flex = flexible(version);

	p->leader_epoch = -1;
	km_wire_rd_i16(r, &p->error_code);
	km_wire_rd_i32(r, &p->partition);
	km_wire_rd_i32(r, &p->leader_id);
	if (version >= 7)
		km_wire_rd_i32(r, &p->leader_epoch);
	rd_nodes(r, flex, m, &p->replicas_first, &p->replicas_count);
	rd_nodes(r, flex, m, &p->isr_first, &p->isr_count);
	if (version >= 5)
		skip_nodes(r, flex);
	rd_tags(r, flex);
	return r->err;
}

static int rd_topic(struct km_wire_rd *r, int16_t version,
		    struct km_metadata_resp *m, struct km_metadata_topic *t)
{
	bool flex = flexible(version);
	int32_t n, ops;

	t->is_internal = false;
	memset(t->topic_id, 0, sizeof(t->topic_id));
	km_wire_rd_i16(r, &t->error_code);
	km_wire_rd_name(r, flex, version >= 12, &t->name);
	if (version >= 10)
		km_wire_rd_uuid(r, t->topic_id);
	if (version >= 1)
		km_wire_rd_bool(r, &t->is_internal);
	t->first = m->n_parts;
	t->count = 0;
	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->parts_max - m->n_parts)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t j = 0; j < n; j++) {
		if (rd_part(r, version, m, &m->parts[m->n_parts]) < 0)
			return r->err;
		m->n_parts++;
		t->count++;
	}
	if (version >= 8)
		km_wire_rd_i32(r, &ops);
	rd_tags(r, flex);
	return r->err;
}

static int rd_brokers(struct km_wire_rd *r, int16_t version,
		      struct km_metadata_resp *m)
{
	bool flex = flexible(version);
	int32_t n;

	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->brokers_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		struct km_metadata_broker *b = &m->brokers[i];

		km_wire_name_set_null(&b->rack);
		km_wire_rd_i32(r, &b->node_id);
		km_wire_rd_name(r, flex, false, &b->host);
		km_wire_rd_i32(r, &b->port);
		if (version >= 1)
			km_wire_rd_name(r, flex, true, &b->rack);
		rd_tags(r, flex);
		if (r->err != 0)
			return r->err;
		m->n_brokers++;
	}
	return 0;
}

int km_metadata_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_metadata_resp *m)
{
	int rc = km_proto_client_check(KM_API_METADATA, version);
	bool flex = flexible(version);
	int32_t n, ops;

	m->throttle_time_ms = 0;
	m->n_brokers = m->n_topics = m->n_parts = m->n_nodes = 0;
	km_wire_name_set_null(&m->cluster_id);
	m->controller_id = -1;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	if (version >= 3)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	if (rd_brokers(r, version, m) < 0)
		return r->err;
	if (version >= 2)
		km_wire_rd_name(r, flex, true, &m->cluster_id);
	if (version >= 1)
		km_wire_rd_i32(r, &m->controller_id);
	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->topics_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		if (rd_topic(r, version, m, &m->topics[i]) < 0)
			return r->err;
		m->n_topics++;
	}
	if (version >= 8 && version <= 10)
		km_wire_rd_i32(r, &ops);
	rd_tags(r, flex);
	return km_wire_rd_end(r);
}
