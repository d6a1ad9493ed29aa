/* DeleteGroups (42), v0-2, flexible from v2: what kafka-consumer-groups
 * --delete sends (kafka/proto_group.h). */
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
