/* DeleteGroups (42), v0-2, flexible from v2, and OffsetDelete (47), v0:
 * what kafka-consumer-groups --delete and --delete-offsets send
 * (kafka/proto_group.h). */
#include "kafka/proto_group_pvt.h"

static bool del_flex(int16_t version)
{
	return km_proto_is_flexible(KM_API_DELETE_GROUPS, version);
}

int km_delgroups_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_delgroups_req *m)
{
	bool flex = del_flex(version);

	if (km_proto_group_wr_check(w, KM_API_DELETE_GROUPS, version) < 0)
		return w->err;
	km_proto_group_wr_names(w, flex, m->groups, m->n_groups);
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

int km_delgroups_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_delgroups_req *m)
{
	bool flex = del_flex(version);

	m->n_groups = 0;
	if (km_proto_group_rd_check(r, KM_API_DELETE_GROUPS, version) < 0)
		return r->err;
	if (km_proto_group_rd_names(r, flex, m->groups, m->groups_max,
				    &m->n_groups) < 0)
		return r->err;
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}

int km_delgroups_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_delgroups_resp *m)
{
	bool flex = del_flex(version);

	if (km_proto_group_wr_check(w, KM_API_DELETE_GROUPS, version) < 0)
		return w->err;
	km_wire_wr_i32(w, m->throttle_time_ms);
	km_proto_group_wr_count(w, flex, m->n_results);
	for (uint32_t i = 0; i < m->n_results && w->err == 0; i++) {
		km_wire_wr_name(w, flex, false, &m->results[i].group_id);
		km_wire_wr_i16(w, m->results[i].error_code);
		if (flex)
			km_wire_wr_tags(w);
	}
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

int km_delgroups_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_delgroups_resp *m)
{
	bool flex = del_flex(version);
	int32_t n;

	m->throttle_time_ms = 0;
	m->n_results = 0;
	if (km_proto_group_rd_check(r, KM_API_DELETE_GROUPS, version) < 0)
		return r->err;
	km_wire_rd_i32(r, &m->throttle_time_ms);
	if (r->err != 0 ||
	    km_proto_group_rd_count(r, flex, false, m->results_max, &n) < 0)
		return r->err;
	for (int32_t i = 0; i < n; i++) {
		km_wire_rd_name(r, flex, false, &m->results[i].group_id);
		km_wire_rd_i16(r, &m->results[i].error_code);
		if (flex)
			km_wire_rd_tags(r);
		if (r->err != 0)
			return r->err;
		m->n_results++;
	}
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}

/* ---- OffsetDelete (47), v0: kafka-consumer-groups --delete-offsets ---- */

int km_offdelete_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_offdelete_req *m)
{
	if (km_proto_group_wr_check(w, KM_API_OFFSET_DELETE, version) < 0)
		return w->err;
	km_wire_wr_name(w, false, false, &m->group_id);
	return km_proto_group_wr_topics_i32(w, false, false, m->topics, m->n_topics,
					    m->parts, m->n_parts);
}

int km_offdelete_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_offdelete_req *m)
{
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};
	bool is_null;

	km_wire_name_set(&m->group_id, "");
	m->n_topics = m->n_parts = 0;
	if (km_proto_group_rd_check(r, KM_API_OFFSET_DELETE, version) < 0)
		return r->err;
	km_wire_rd_name(r, false, false, &m->group_id);
	if (r->err != 0 ||
	    km_proto_group_rd_topics_i32(r, false, false, &out, &is_null) < 0)
		return r->err;
	return km_wire_rd_end(r);
}

static int rd_del_part(struct km_wire_rd *r, int16_t version, void *parts,
		       uint32_t i)
{
	struct km_offcommit_resp_part *p =
		&((struct km_offcommit_resp_part *)parts)[i];

	(void)version;
	km_wire_rd_i32(r, &p->partition);
	return km_wire_rd_i16(r, &p->error_code);
}

static int wr_del_part(struct km_wire_wr *w, int16_t version, const void *parts,
		       uint32_t i)
{
	const struct km_offcommit_resp_part *p =
		&((const struct km_offcommit_resp_part *)parts)[i];

	(void)version;
	km_wire_wr_i32(w, p->partition);
	return km_wire_wr_i16(w, p->error_code);
}

int km_offdelete_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_offdelete_resp *m)
{
	if (km_proto_group_wr_check(w, KM_API_OFFSET_DELETE, version) < 0)
		return w->err;
	km_wire_wr_i16(w, m->error_code);
	km_wire_wr_i32(w, m->throttle_time_ms);
	return km_proto_wr_topics(w, version, false, m->topics, m->n_topics,
				  m->parts, m->n_parts, wr_del_part);
}

int km_offdelete_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_offdelete_resp *m)
{
	struct km_proto_topics_out out = {
		m->topics, m->topics_max, &m->n_topics,
		m->parts, m->parts_max, &m->n_parts,
	};

	m->error_code = 0;
	m->throttle_time_ms = 0;
	m->n_topics = m->n_parts = 0;
	if (km_proto_group_rd_check(r, KM_API_OFFSET_DELETE, version) < 0)
		return r->err;
	km_wire_rd_i16(r, &m->error_code);
	km_wire_rd_i32(r, &m->throttle_time_ms);
	if (r->err != 0 || km_proto_rd_topics(r, version, false, &out, rd_del_part) < 0)
		return r->err;
	return km_wire_rd_end(r);
}
