/* Metadata (key 3), v0-4 (Metadata{Request,Response}.json); none of these
 * versions is flexible.
 *
 * Request: Topics [Name STRING] (v0: empty = all topics; v1+: null = all,
 * empty = none), AllowAutoTopicCreation bool v4+.
 * Response: ThrottleTimeMs v3+, Brokers [NodeId int32, Host STRING, Port
 * int32, Rack NULLABLE_STRING v1+], ClusterId NULLABLE_STRING v2+,
 * ControllerId int32 v1+, Topics [ErrorCode int16, Name STRING, IsInternal
 * bool v1+, Partitions [ErrorCode int16, PartitionIndex int32, LeaderId
 * int32, ReplicaNodes [int32], IsrNodes [int32]]].
 */
#include "kafka/proto.h"

#include "common/errors.h"
#include "common/km_assert.h"

int km_metadata_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_metadata_req *m)
{
	int rc = km_proto_check(KM_API_METADATA, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	/* "In version 0, an empty array indicates 'request metadata for all
	 * topics'": v0 has no way to ask for none. */
	if (version == 0 && m->n_topics == 0)
		return km_wire_wr_fail(w, KM_EWIREVALUE);
	if (m->n_topics < 0)
		km_wire_wr_array(w, false, true, version == 0 ? 0 : -1);
	else
		km_wire_wr_array(w, false, false, m->n_topics);
	for (int32_t i = 0; i < m->n_topics && w->err == 0; i++)
		km_wire_wr_name(w, false, false, &m->topics[i]);
	if (version >= 4)
		km_wire_wr_bool(w, m->allow_auto_topic_creation);
	return w->err;
}

int km_metadata_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_metadata_req *m)
{
	int rc = km_proto_check(KM_API_METADATA, version);
	int32_t n;

	m->n_topics = 0;
	m->allow_auto_topic_creation = true;
	if (rc < 0)
		return km_wire_rd_fail(r, rc);
	/* "nullableVersions": "1+". */
	if (km_wire_rd_array(r, false, version >= 1, &n) < 0)
		return r->err;
	if (n > 0 && (uint32_t)n > m->topics_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++)
		if (km_wire_rd_name(r, false, false, &m->topics[i]) < 0)
			return r->err;
	m->n_topics = version == 0 && n == 0 ? -1 : n;
	if (version >= 4)
		km_wire_rd_bool(r, &m->allow_auto_topic_creation);
	return km_wire_rd_end(r);
}

/* ---- response ---- */

static void wr_nodes(struct km_wire_wr *w, const struct km_metadata_resp *m,
		     uint32_t first, uint32_t count)
{
	KM_ASSERT(count <= m->n_nodes);
	KM_ASSERT(first <= m->n_nodes - count);
	km_wire_wr_array(w, false, false, (int32_t)count);
	for (uint32_t i = 0; i < count; i++)
		km_wire_wr_i32(w, m->nodes[first + i]);
}

static void wr_topic(struct km_wire_wr *w, int16_t version,
		     const struct km_metadata_resp *m,
		     const struct km_metadata_topic *t)
{
	KM_ASSERT(t->count <= m->n_parts);
	KM_ASSERT(t->first <= m->n_parts - t->count);
	km_wire_wr_i16(w, t->error_code);
	km_wire_wr_name(w, false, false, &t->name);
	if (version >= 1)
		km_wire_wr_bool(w, t->is_internal);
	km_wire_wr_array(w, false, false, (int32_t)t->count);
	for (uint32_t j = 0; j < t->count && w->err == 0; j++) {
		const struct km_metadata_part *p = &m->parts[t->first + j];

		km_wire_wr_i16(w, p->error_code);
		km_wire_wr_i32(w, p->partition);
		km_wire_wr_i32(w, p->leader_id);
		wr_nodes(w, m, p->replicas_first, p->replicas_count);
		wr_nodes(w, m, p->isr_first, p->isr_count);
	}
}

int km_metadata_resp_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_metadata_resp *m)
{
	int rc = km_proto_check(KM_API_METADATA, version);

	if (rc < 0)
		return km_wire_wr_fail(w, rc);
	KM_ASSERT(m->n_brokers <= INT32_MAX);
	KM_ASSERT(m->n_topics <= INT32_MAX);
	if (version >= 3)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_array(w, false, false, (int32_t)m->n_brokers);
	for (uint32_t i = 0; i < m->n_brokers && w->err == 0; i++) {
		const struct km_metadata_broker *b = &m->brokers[i];

		km_wire_wr_i32(w, b->node_id);
		km_wire_wr_name(w, false, false, &b->host);
		km_wire_wr_i32(w, b->port);
		if (version >= 1)
			km_wire_wr_name(w, false, true, &b->rack);
	}
	if (version >= 2)
		km_wire_wr_name(w, false, true, &m->cluster_id);
	if (version >= 1)
		km_wire_wr_i32(w, m->controller_id);
	km_wire_wr_array(w, false, false, (int32_t)m->n_topics);
	for (uint32_t i = 0; i < m->n_topics && w->err == 0; i++)
		wr_topic(w, version, m, &m->topics[i]);
	return w->err;
}

/* ReplicaNodes or IsrNodes into the node pool. */
static int rd_nodes(struct km_wire_rd *r, struct km_metadata_resp *m,
		    uint32_t *first, uint32_t *count)
{
	int32_t n;

	*first = m->n_nodes;
	*count = 0;
	if (km_wire_rd_array(r, false, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->nodes_max - m->n_nodes)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++)
		km_wire_rd_i32(r, &m->nodes[m->n_nodes++]);
	*count = (uint32_t)n;
	return r->err;
}

static int rd_part(struct km_wire_rd *r, struct km_metadata_resp *m,
		   struct km_metadata_part *p)
{
	km_wire_rd_i16(r, &p->error_code);
	km_wire_rd_i32(r, &p->partition);
	km_wire_rd_i32(r, &p->leader_id);
	rd_nodes(r, m, &p->replicas_first, &p->replicas_count);
	return rd_nodes(r, m, &p->isr_first, &p->isr_count);
}

static int rd_topic(struct km_wire_rd *r, int16_t version,
		    struct km_metadata_resp *m, struct km_metadata_topic *t)
{
	int32_t n;

	t->is_internal = false;
	km_wire_rd_i16(r, &t->error_code);
	km_wire_rd_name(r, false, false, &t->name);
	if (version >= 1)
		km_wire_rd_bool(r, &t->is_internal);
	t->first = m->n_parts;
	t->count = 0;
	if (km_wire_rd_array(r, false, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->parts_max - m->n_parts)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t j = 0; j < n; j++) {
		if (rd_part(r, m, &m->parts[m->n_parts]) < 0)
			return r->err;
		m->n_parts++;
		t->count++;
	}
	return 0;
}

static int rd_brokers(struct km_wire_rd *r, int16_t version,
		      struct km_metadata_resp *m)
{
	int32_t n;

	if (km_wire_rd_array(r, false, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->brokers_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		struct km_metadata_broker *b = &m->brokers[i];

		km_wire_name_set_null(&b->rack);
		km_wire_rd_i32(r, &b->node_id);
		km_wire_rd_name(r, false, false, &b->host);
		km_wire_rd_i32(r, &b->port);
		if (version >= 1)
			km_wire_rd_name(r, false, true, &b->rack);
		if (r->err != 0)
			return r->err;
		m->n_brokers++;
	}
	return 0;
}

int km_metadata_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_metadata_resp *m)
{
	int rc = km_proto_check(KM_API_METADATA, version);
	int32_t n;

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
		km_wire_rd_name(r, false, true, &m->cluster_id);
	if (version >= 1)
		km_wire_rd_i32(r, &m->controller_id);
	if (km_wire_rd_array(r, false, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->topics_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		if (rd_topic(r, version, m, &m->topics[i]) < 0)
			return r->err;
		m->n_topics++;
	}
	return km_wire_rd_end(r);
}
