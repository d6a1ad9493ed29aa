/* CreateTopics, DeleteTopics, DeleteRecords and CreatePartitions, server
 * side (kafka/proto_admin.h; fields from Kafka's
 * {CreateTopics,DeleteTopics,DeleteRecords,CreatePartitions}{Request,
 * Response}.json). */
#include "kafka/proto_admin.h"

#include <limits.h>
#include <string.h>

#include "common/errors.h"

static int rd_check(struct km_wire_rd *r, int16_t key, int16_t version)
{
	int rc = km_proto_check(key, version);

	return rc < 0 ? km_wire_rd_fail(r, rc) : 0;
}

static int wr_check(struct km_wire_wr *w, int16_t key, int16_t version)
{
	int rc = km_proto_check(key, version);

	return rc < 0 ? km_wire_wr_fail(w, rc) : 0;
}

static int rd_end(struct km_wire_rd *r, bool flex)
{
	if (flex)
		km_wire_rd_tags(r);
	return r->err ? r->err : km_wire_rd_end(r);
}

static int wr_tags(struct km_wire_wr *w, bool flex)
{
	return flex ? km_wire_wr_tags(w) : w->err;
}

static int wr_cstr(struct km_wire_wr *w, bool flex, bool nullable,
		   const char *s)
{
	return km_wire_wr_string(w, flex, nullable, s, s ? strlen(s) : 0);
}

/* [BrokerIds [int32]]-like arrays: only the ids' range and the widest
 * list are kept (a single broker judges an assignment by them). */
static int rd_broker_ids(struct km_wire_rd *r, bool flex, int32_t *min,
			 int32_t *max, int32_t *n_out)
{
	int32_t n, id;

	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	for (int32_t i = 0; i < n; i++) {
		if (km_wire_rd_i32(r, &id) < 0)
			return r->err;
		*min = id < *min ? id : *min;
		*max = id > *max ? id : *max;
	}
	*n_out = n;
	return 0;
}

/* ---- CreateTopics ---- */

static int ct_assignments(struct km_wire_rd *r, bool flex,
			  struct km_ctopics_topic *t)
{
	int32_t n, part, ids;

	t->assign_broker_min = INT32_MAX;
	t->assign_broker_max = INT32_MIN;
	t->assign_replicas_max = 0;
	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	t->n_assignments = n;
	for (int32_t i = 0; i < n; i++) {
		km_wire_rd_i32(r, &part);
		if (rd_broker_ids(r, flex, &t->assign_broker_min,
				  &t->assign_broker_max, &ids) < 0)
			return r->err;
		if (ids > t->assign_replicas_max)
			t->assign_replicas_max = ids;
		if (flex)
			km_wire_rd_tags(r);
	}
	return r->err;
}

static int ct_configs(struct km_wire_rd *r, bool flex, struct km_ctopics_req *m,
		      struct km_ctopics_topic *t)
{
	int32_t n;

	if (km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->configs_max - m->n_configs)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	t->configs_first = m->n_configs;
	t->n_configs = 0;
	for (int32_t i = 0; i < n; i++) {
		struct km_ctopics_config *c = &m->configs[m->n_configs];

		km_wire_rd_name(r, flex, false, &c->name);
		km_wire_rd_name_trunc(r, flex, true, &c->value, &c->cut);
		if (flex)
			km_wire_rd_tags(r);
		if (r->err)
			return r->err;
		m->n_configs++;
		t->n_configs++;
	}
	return 0;
}

int km_ctopics_req_decode(struct km_wire_rd *r, int16_t version,
			  struct km_ctopics_req *m)
{
	bool flex = km_proto_is_flexible(KM_API_CREATE_TOPICS, version);
	int32_t n;

	m->n_topics = m->n_configs = 0;
	m->validate_only = false;
	if (rd_check(r, KM_API_CREATE_TOPICS, version) < 0 ||
	    km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->topics_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		struct km_ctopics_topic *t = &m->topics[i];

		km_wire_rd_name(r, flex, false, &t->name);
		km_wire_rd_i32(r, &t->num_partitions);
		km_wire_rd_i16(r, &t->replication_factor);
		if (r->err || ct_assignments(r, flex, t) < 0 ||
		    ct_configs(r, flex, m, t) < 0)
			return r->err;
		if (flex)
			km_wire_rd_tags(r);
		m->n_topics++;
	}
	km_wire_rd_i32(r, &m->timeout_ms);
	km_wire_rd_bool(r, &m->validate_only);
	return rd_end(r, flex);
}

static void ct_wr_configs(struct km_wire_wr *w, bool flex,
			  const struct km_ctopics_result *t)
{
	km_wire_wr_array(w, flex, true, t->n_configs);
	for (int32_t k = 0; k < t->n_configs; k++) {
		const struct km_ctopics_rconfig *c = &t->configs[k];

		wr_cstr(w, flex, false, c->name);
		wr_cstr(w, flex, true, c->value);
		km_wire_wr_bool(w, c->read_only);
		km_wire_wr_i8(w, c->source);
		km_wire_wr_bool(w, c->sensitive);
		wr_tags(w, flex);
	}
}

int km_ctopics_resp_encode(struct km_wire_wr *w, int16_t version,
			   int32_t throttle_time_ms,
			   const struct km_ctopics_result *res, uint32_t n)
{
	bool flex = km_proto_is_flexible(KM_API_CREATE_TOPICS, version);

	if (wr_check(w, KM_API_CREATE_TOPICS, version) < 0)
		return w->err;
	km_wire_wr_i32(w, throttle_time_ms);
	km_wire_wr_array(w, flex, false, (int32_t)n);
	for (uint32_t i = 0; i < n && w->err == 0; i++) {
		const struct km_ctopics_result *t = &res[i];

		wr_cstr(w, flex, false, t->name);
		if (version >= 7)
			km_wire_wr_uuid(w, t->topic_id);
		km_wire_wr_i16(w, t->error_code);
		wr_cstr(w, flex, true, t->error_message);
		if (version >= 5) {
			km_wire_wr_i32(w, t->num_partitions);
			km_wire_wr_i16(w, t->replication_factor);
			ct_wr_configs(w, flex, t);
		}
		wr_tags(w, flex);
	}
	return wr_tags(w, flex);
}

/* ---- DeleteTopics ---- */

int km_dtopics_req_decode(struct km_wire_rd *r, int16_t version,
			  struct km_dtopics_req *m)
{
	bool flex = km_proto_is_flexible(KM_API_DELETE_TOPICS, version);
	int32_t n;

	m->n_topics = 0;
	if (rd_check(r, KM_API_DELETE_TOPICS, version) < 0 ||
	    km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->topics_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		struct km_dtopics_topic *t = &m->topics[i];

		memset(t->id, 0, sizeof(t->id));
		km_wire_rd_name(r, flex, version >= 6, &t->name);
		if (version >= 6) {
			km_wire_rd_uuid(r, t->id);
			km_wire_rd_tags(r);
		}
		if (r->err)
			return r->err;
		m->n_topics++;
	}
	km_wire_rd_i32(r, &m->timeout_ms);
	return rd_end(r, flex);
}

int km_dtopics_resp_encode(struct km_wire_wr *w, int16_t version,
			   int32_t throttle_time_ms,
			   const struct km_dtopics_result *res, uint32_t n)
{
	bool flex = km_proto_is_flexible(KM_API_DELETE_TOPICS, version);

	if (wr_check(w, KM_API_DELETE_TOPICS, version) < 0)
		return w->err;
	km_wire_wr_i32(w, throttle_time_ms);
	km_wire_wr_array(w, flex, false, (int32_t)n);
	for (uint32_t i = 0; i < n && w->err == 0; i++) {
		const struct km_dtopics_result *t = &res[i];

		/* Null only where the schema allows it (v6+). */
		wr_cstr(w, flex, version >= 6,
			version >= 6 || t->name ? t->name : "");
		if (version >= 6)
			km_wire_wr_uuid(w, t->id);
		km_wire_wr_i16(w, t->error_code);
		if (version >= 5)
			wr_cstr(w, flex, true, t->error_message);
		wr_tags(w, flex);
	}
	return wr_tags(w, flex);
}

/* ---- DeleteRecords ---- */

static int dr_rd_part(struct km_wire_rd *r, int16_t version, void *parts,
		      uint32_t i)
{
	struct km_delrec_part *p = &((struct km_delrec_part *)parts)[i];

	km_wire_rd_i32(r, &p->partition);
	km_wire_rd_i64(r, &p->offset);
	p->error_code = 0;
	if (km_proto_is_flexible(KM_API_DELETE_RECORDS, version))
		km_wire_rd_tags(r);
	return r->err;
}

static int dr_wr_part(struct km_wire_wr *w, int16_t version, const void *parts,
		      uint32_t i)
{
	const struct km_delrec_part *p =
		&((const struct km_delrec_part *)parts)[i];

	km_wire_wr_i32(w, p->partition);
	km_wire_wr_i64(w, p->offset);
	km_wire_wr_i16(w, p->error_code);
	return wr_tags(w, km_proto_is_flexible(KM_API_DELETE_RECORDS, version));
}

int km_delrec_req_decode(struct km_wire_rd *r, int16_t version,
			 struct km_delrec_req *m)
{
	bool flex = km_proto_is_flexible(KM_API_DELETE_RECORDS, version);
	struct km_proto_topics_out out = { m->topics, m->topics_max,
					   &m->n_topics, m->parts,
					   m->parts_max, &m->n_parts };

	m->n_topics = m->n_parts = 0;
	if (rd_check(r, KM_API_DELETE_RECORDS, version) < 0 ||
	    km_proto_rd_topics(r, version, flex, &out, dr_rd_part) < 0)
		return r->err;
	km_wire_rd_i32(r, &m->timeout_ms);
	return rd_end(r, flex);
}

int km_delrec_resp_encode(struct km_wire_wr *w, int16_t version,
			  int32_t throttle_time_ms,
			  const struct km_proto_topic *topics, uint32_t n_topics,
			  const struct km_delrec_part *parts, uint32_t n_parts)
{
	bool flex = km_proto_is_flexible(KM_API_DELETE_RECORDS, version);

	if (wr_check(w, KM_API_DELETE_RECORDS, version) < 0)
		return w->err;
	km_wire_wr_i32(w, throttle_time_ms);
	if (km_proto_wr_topics(w, version, flex, topics, n_topics, parts,
			       n_parts, dr_wr_part) < 0)
		return w->err;
	return wr_tags(w, flex);
}

/* ---- CreatePartitions ---- */

static int cp_assignments(struct km_wire_rd *r, bool flex,
			  struct km_cparts_topic *t)
{
	int32_t n, ids;

	t->assign_broker_min = INT32_MAX;
	t->assign_broker_max = INT32_MIN;
	if (km_wire_rd_array(r, flex, true, &n) < 0)
		return r->err;
	t->n_assignments = n;
	for (int32_t i = 0; i < n; i++) {
		if (rd_broker_ids(r, flex, &t->assign_broker_min,
				  &t->assign_broker_max, &ids) < 0)
			return r->err;
		if (flex)
			km_wire_rd_tags(r);
	}
	return r->err;
}

int km_cparts_req_decode(struct km_wire_rd *r, int16_t version,
			 struct km_cparts_req *m)
{
	bool flex = km_proto_is_flexible(KM_API_CREATE_PARTITIONS, version);
	int32_t n;

	m->n_topics = 0;
	if (rd_check(r, KM_API_CREATE_PARTITIONS, version) < 0 ||
	    km_wire_rd_array(r, flex, false, &n) < 0)
		return r->err;
	if ((uint32_t)n > m->topics_max)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	for (int32_t i = 0; i < n; i++) {
		struct km_cparts_topic *t = &m->topics[i];

		km_wire_rd_name(r, flex, false, &t->name);
		km_wire_rd_i32(r, &t->count);
		if (r->err || cp_assignments(r, flex, t) < 0)
			return r->err;
		if (flex)
			km_wire_rd_tags(r);
		m->n_topics++;
	}
	km_wire_rd_i32(r, &m->timeout_ms);
	km_wire_rd_bool(r, &m->validate_only);
	return rd_end(r, flex);
}

int km_cparts_resp_encode(struct km_wire_wr *w, int16_t version,
			  int32_t throttle_time_ms,
			  const struct km_cparts_result *res, uint32_t n)
{
	bool flex = km_proto_is_flexible(KM_API_CREATE_PARTITIONS, version);

	if (wr_check(w, KM_API_CREATE_PARTITIONS, version) < 0)
		return w->err;
	km_wire_wr_i32(w, throttle_time_ms);
	km_wire_wr_array(w, flex, false, (int32_t)n);
	for (uint32_t i = 0; i < n && w->err == 0; i++) {
		wr_cstr(w, flex, false, res[i].name);
		km_wire_wr_i16(w, res[i].error_code);
		wr_cstr(w, flex, true, res[i].error_message);
		wr_tags(w, flex);
	}
	return wr_tags(w, flex);
}
