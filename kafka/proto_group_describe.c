/* DescribeGroups (key 15) v0-4 and ListGroups (key 16) v0-4
 * (DescribeGroups{Request,Response}.json, ListGroups{Request,Response}.json).
 * DescribeGroups is flexible only from v5; ListGroups from v3.
 *
 * DescribeGroups request: Groups [STRING], IncludeAuthorizedOperations bool
 * v3+.
 * Response: ThrottleTimeMs int32 v1+, Groups [ErrorCode int16, GroupId
 * STRING, GroupState STRING, ProtocolType STRING, ProtocolData STRING,
 * Members [MemberId STRING, GroupInstanceId NULLABLE_STRING v4+, ClientId
 * STRING, ClientHost STRING, MemberMetadata BYTES, MemberAssignment BYTES],
 * AuthorizedOperations int32 v3+].
 * ListGroups request: StatesFilter [STRING] v4+.
 * Response: ThrottleTimeMs int32 v1+, ErrorCode int16, Groups [GroupId
 * STRING, ProtocolType STRING, GroupState STRING v4+].
 */
#include "kafka/proto_group_pvt.h"

#include "common/errors.h"
#include "common/km_assert.h"

int km_descgroups_req_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_descgroups_req *m)
{
	if (km_proto_group_wr_check(w, KM_API_DESCRIBE_GROUPS, version) < 0)
		return w->err;
	km_proto_group_wr_names(w, false, m->groups, m->n_groups);
	if (version >= 3)
		km_wire_wr_bool(w, m->include_authorized_operations);
	return w->err;
}

int km_descgroups_req_decode(struct km_wire_rd *r, int16_t version,
			     struct km_descgroups_req *m)
{
	m->n_groups = 0;
	m->include_authorized_operations = false;
	if (km_proto_group_rd_check(r, KM_API_DESCRIBE_GROUPS, version) < 0)
		return r->err;
	if (km_proto_group_rd_names(r, false, m->groups, m->groups_max,
			      &m->n_groups) < 0)
		return r->err;
	if (version >= 3)
		km_wire_rd_bool(r, &m->include_authorized_operations);
	return km_wire_rd_end(r);
}

static int rd_desc_member(struct km_wire_rd *r, int16_t version,
			  struct km_descgroups_member *p)
{
	km_wire_name_set_null(&p->group_instance_id);
	km_wire_rd_name(r, false, false, &p->member_id);
	if (version >= 4)
		km_wire_rd_name(r, false, true, &p->group_instance_id);
	km_wire_rd_name(r, false, false, &p->client_id);
	km_wire_rd_name(r, false, false, &p->client_host);
	km_proto_group_rd_bytes(r, false, false, &p->metadata);
	return km_proto_group_rd_bytes(r, false, false, &p->assignment);
}

static int rd_desc_group(struct km_wire_rd *r, int16_t version,
			 struct km_descgroups_resp *m,
			 struct km_descgroups_group *g)
{
	int32_t n;

	g->authorized_operations = KM_GROUP_AUTH_OPS_UNSET;
	km_wire_rd_i16(r, &g->error_code);
	km_wire_rd_name(r, false, false, &g->group_id);
	km_wire_rd_name(r, false, false, &g->group_state);
	km_wire_rd_name(r, false, false, &g->protocol_type);
	km_wire_rd_name(r, false, false, &g->protocol_data);
	if (r->err != 0 || km_proto_group_rd_count(r, false, false,
					     m->members_max - m->n_members,
					     &n) < 0)
		return r->err;
	g->first = m->n_members;
	g->count = 0;
	for (int32_t j = 0; j < n; j++) {
		if (rd_desc_member(r, version, &m->members[m->n_members]) < 0)
			return r->err;
		g->count++;
		m->n_members++;
	}
	if (version >= 3)
		km_wire_rd_i32(r, &g->authorized_operations);
	return r->err;
}

int km_descgroups_resp_decode(struct km_wire_rd *r, int16_t version,
			      struct km_descgroups_resp *m)
{
	int32_t n;

	m->throttle_time_ms = 0;
	m->n_groups = m->n_members = 0;
	if (km_proto_group_rd_check(r, KM_API_DESCRIBE_GROUPS, version) < 0)
		return r->err;
	if (version >= 1)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	if (r->err != 0 ||
	    km_proto_group_rd_count(r, false, false, m->groups_max, &n) < 0)
		return r->err;
	for (int32_t i = 0; i < n; i++) {
		if (rd_desc_group(r, version, m, &m->groups[i]) < 0)
			return r->err;
		m->n_groups++;
	}
	return km_wire_rd_end(r);
}

static int wr_desc_member(struct km_wire_wr *w, int16_t version,
			  const struct km_descgroups_member *p)
{
	km_wire_wr_name(w, false, false, &p->member_id);
	if (version >= 4)
		km_wire_wr_name(w, false, true, &p->group_instance_id);
	km_wire_wr_name(w, false, false, &p->client_id);
	km_wire_wr_name(w, false, false, &p->client_host);
	km_proto_group_wr_bytes(w, false, false, &p->metadata);
	return km_proto_group_wr_bytes(w, false, false, &p->assignment);
}

static int wr_desc_group(struct km_wire_wr *w, int16_t version,
			 const struct km_descgroups_resp *m,
			 const struct km_descgroups_group *g)
{
	KM_ASSERT(g->count <= m->n_members);
	KM_ASSERT(g->first <= m->n_members - g->count);
	km_wire_wr_i16(w, g->error_code);
	km_wire_wr_name(w, false, false, &g->group_id);
	km_wire_wr_name(w, false, false, &g->group_state);
	km_wire_wr_name(w, false, false, &g->protocol_type);
	km_wire_wr_name(w, false, false, &g->protocol_data);
	km_proto_group_wr_count(w, false, g->count);
	for (uint32_t j = 0; j < g->count && w->err == 0; j++)
		wr_desc_member(w, version, &m->members[g->first + j]);
	if (version >= 3)
		km_wire_wr_i32(w, g->authorized_operations);
	return w->err;
}

int km_descgroups_resp_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_descgroups_resp *m)
{
	if (km_proto_group_wr_check(w, KM_API_DESCRIBE_GROUPS, version) < 0)
		return w->err;
	if (version >= 1)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_proto_group_wr_count(w, false, m->n_groups);
	for (uint32_t i = 0; i < m->n_groups && w->err == 0; i++)
		wr_desc_group(w, version, m, &m->groups[i]);
	return w->err;
}

/* ---- ListGroups ---- */

static bool list_flex(int16_t version)
{
	return km_proto_is_flexible(KM_API_LIST_GROUPS, version);
}

int km_listgroups_req_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_listgroups_req *m)
{
	bool flex = list_flex(version);

	if (km_proto_group_wr_check(w, KM_API_LIST_GROUPS, version) < 0)
		return w->err;
	/* A filter the version cannot carry would widen the answer. */
	if ((version < 4 && m->n_states != 0) || (version < 5 && m->n_types != 0))
		return km_wire_wr_fail(w, KM_EWIREVALUE);
	if (version >= 4)
		km_proto_group_wr_names(w, flex, m->states_filter, m->n_states);
	if (version >= 5)
		km_proto_group_wr_names(w, flex, m->types_filter, m->n_types);
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

int km_listgroups_req_decode(struct km_wire_rd *r, int16_t version,
			     struct km_listgroups_req *m)
{
	bool flex = list_flex(version);

	m->n_states = 0;
	m->n_types = 0;
	if (km_proto_group_rd_check(r, KM_API_LIST_GROUPS, version) < 0)
		return r->err;
	if (version >= 4 && km_proto_group_rd_names(r, flex, m->states_filter,
					      m->states_max,
					      &m->n_states) < 0)
		return r->err;
	if (version >= 5 && km_proto_group_rd_names(r, flex, m->types_filter,
						    m->types_max, &m->n_types) < 0)
		return r->err;
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}

int km_listgroups_resp_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_listgroups_resp *m)
{
	bool flex = list_flex(version);

	if (km_proto_group_wr_check(w, KM_API_LIST_GROUPS, version) < 0)
		return w->err;
	if (version >= 1)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	km_proto_group_wr_count(w, flex, m->n_groups);
	for (uint32_t i = 0; i < m->n_groups && w->err == 0; i++) {
		const struct km_listgroups_group *g = &m->groups[i];

		km_wire_wr_name(w, flex, false, &g->group_id);
		km_wire_wr_name(w, flex, false, &g->protocol_type);
		if (version >= 4)
			km_wire_wr_name(w, flex, false, &g->group_state);
		if (version >= 5)
			km_wire_wr_name(w, flex, false, &g->group_type);
		if (flex)
			km_wire_wr_tags(w);
	}
	if (flex)
		km_wire_wr_tags(w);
	return w->err;
}

static int rd_list_group(struct km_wire_rd *r, int16_t version,
			 struct km_listgroups_group *g)
{
	bool flex = list_flex(version);

	km_wire_name_set(&g->group_state, "");
	km_wire_name_set(&g->group_type, "");
	km_wire_rd_name(r, flex, false, &g->group_id);
	km_wire_rd_name(r, flex, false, &g->protocol_type);
	if (version >= 4)
		km_wire_rd_name(r, flex, false, &g->group_state);
	if (version >= 5)
		km_wire_rd_name(r, flex, false, &g->group_type);
	if (flex)
		km_wire_rd_tags(r);
	return r->err;
}

int km_listgroups_resp_decode(struct km_wire_rd *r, int16_t version,
			      struct km_listgroups_resp *m)
{
	bool flex = list_flex(version);
	int32_t n;

	m->throttle_time_ms = 0;
	m->error_code = 0;
	m->n_groups = 0;
	if (km_proto_group_rd_check(r, KM_API_LIST_GROUPS, version) < 0)
		return r->err;
	if (version >= 1)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	km_wire_rd_i16(r, &m->error_code);
	if (r->err != 0 ||
	    km_proto_group_rd_count(r, flex, false, m->groups_max, &n) < 0)
		return r->err;
	for (int32_t i = 0; i < n; i++) {
		if (rd_list_group(r, version, &m->groups[i]) < 0)
			return r->err;
		m->n_groups++;
	}
	if (flex)
		km_wire_rd_tags(r);
	return km_wire_rd_end(r);
}
