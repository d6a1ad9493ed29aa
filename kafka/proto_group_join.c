/* JoinGroup (key 11) v0-5, SyncGroup (key 14) v0-3 and LeaveGroup (key 13)
 * v0-3 ({JoinGroup,SyncGroup,LeaveGroup}{Request,Response}.json); none of
 * these versions is flexible.
 *
 * JoinGroup request: GroupId STRING, SessionTimeoutMs int32,
 * RebalanceTimeoutMs int32 v1+, MemberId STRING, GroupInstanceId
 * NULLABLE_STRING v5+, ProtocolType STRING, Protocols [Name STRING,
 * Metadata BYTES].
 * Response: ThrottleTimeMs int32 v2+, ErrorCode int16, GenerationId int32,
 * ProtocolName STRING, Leader STRING, MemberId STRING, Members [MemberId
 * STRING, GroupInstanceId NULLABLE_STRING v5+, Metadata BYTES].
 * SyncGroup request: GroupId STRING, GenerationId int32, MemberId STRING,
 * GroupInstanceId NULLABLE_STRING v3+, Assignments [MemberId STRING,
 * Assignment BYTES].
 * Response: ThrottleTimeMs int32 v1+, ErrorCode int16, Assignment BYTES.
 * LeaveGroup request: GroupId STRING, MemberId STRING v0-2, Members
 * [MemberId STRING, GroupInstanceId NULLABLE_STRING] v3+.
 * Response: ThrottleTimeMs int32 v1+, ErrorCode int16, Members [MemberId
 * STRING, GroupInstanceId NULLABLE_STRING, ErrorCode int16] v3+.
 */
#include "kafka/proto_group_pvt.h"

#include "common/errors.h"

int km_joingroup_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_joingroup_req *m)
{
	if (km_proto_group_wr_check(w, KM_API_JOIN_GROUP, version) < 0)
		return w->err;
	km_wire_wr_name(w, false, false, &m->group_id);
	km_wire_wr_i32(w, m->session_timeout_ms);
	if (version >= 1)
		km_wire_wr_i32(w, m->rebalance_timeout_ms);
	km_wire_wr_name(w, false, false, &m->member_id);
	if (version >= 5)
		km_wire_wr_name(w, false, true, &m->group_instance_id);
	km_wire_wr_name(w, false, false, &m->protocol_type);
	km_proto_group_wr_count(w, false, m->n_protocols);
	for (uint32_t i = 0; i < m->n_protocols && w->err == 0; i++) {
		km_wire_wr_name(w, false, false, &m->protocols[i].name);
		km_proto_group_wr_bytes(w, false, false, &m->protocols[i].metadata);
	}
	return w->err;
}

static void join_req_defaults(struct km_joingroup_req *m)
{
	km_wire_name_set(&m->group_id, "");
	m->session_timeout_ms = 0;
	m->rebalance_timeout_ms = -1;
	km_wire_name_set(&m->member_id, "");
	km_wire_name_set_null(&m->group_instance_id);
	km_wire_name_set(&m->protocol_type, "");
	m->n_protocols = 0;
}

int km_joingroup_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_joingroup_req *m)
{
	int32_t n;

	join_req_defaults(m);
	if (km_proto_group_rd_check(r, KM_API_JOIN_GROUP, version) < 0)
		return r->err;
	km_wire_rd_name(r, false, false, &m->group_id);
	km_wire_rd_i32(r, &m->session_timeout_ms);
	if (version >= 1)
		km_wire_rd_i32(r, &m->rebalance_timeout_ms);
	km_wire_rd_name(r, false, false, &m->member_id);
	if (version >= 5)
		km_wire_rd_name(r, false, true, &m->group_instance_id);
	km_wire_rd_name(r, false, false, &m->protocol_type);
	if (km_proto_group_rd_count(r, false, false, m->protocols_max, &n) < 0)
		return r->err;
	for (int32_t i = 0; i < n; i++) {
		struct km_joingroup_protocol *p = &m->protocols[i];

		km_wire_rd_name(r, false, false, &p->name);
		if (km_proto_group_rd_bytes(r, false, false, &p->metadata) < 0)
			return r->err;
		m->n_protocols++;
	}
	return km_wire_rd_end(r);
}

/* Members of a JoinGroup response (with_instance: v5+) or the assignments
 * of a SyncGroup request (never an instance id). */
static int wr_members(struct km_wire_wr *w, bool with_instance,
		      const struct km_group_member *a, uint32_t n)
{
	km_proto_group_wr_count(w, false, n);
	for (uint32_t i = 0; i < n && w->err == 0; i++) {
		km_wire_wr_name(w, false, false, &a[i].member_id);
		if (with_instance)
			km_wire_wr_name(w, false, true, &a[i].group_instance_id);
		km_proto_group_wr_bytes(w, false, false, &a[i].data);
	}
	return w->err;
}

static int rd_members(struct km_wire_rd *r, bool with_instance,
		      struct km_group_member *a, uint32_t max, uint32_t *n)
{
	int32_t count;

	*n = 0;
	if (km_proto_group_rd_count(r, false, false, max, &count) < 0)
		return r->err;
	for (int32_t i = 0; i < count; i++) {
		km_wire_name_set_null(&a[i].group_instance_id);
		km_wire_rd_name(r, false, false, &a[i].member_id);
		if (with_instance)
			km_wire_rd_name(r, false, true, &a[i].group_instance_id);
		if (km_proto_group_rd_bytes(r, false, false, &a[i].data) < 0)
			return r->err;
		(*n)++;
	}
	return 0;
}

int km_joingroup_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_joingroup_resp *m)
{
	if (km_proto_group_wr_check(w, KM_API_JOIN_GROUP, version) < 0)
		return w->err;
	if (version >= 2)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	km_wire_wr_i32(w, m->generation_id);
	km_wire_wr_name(w, false, false, &m->protocol_name);
	km_wire_wr_name(w, false, false, &m->leader);
	km_wire_wr_name(w, false, false, &m->member_id);
	return wr_members(w, version >= 5, m->members, m->n_members);
}

int km_joingroup_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_joingroup_resp *m)
{
	m->throttle_time_ms = 0;
	m->error_code = 0;
	m->generation_id = -1;
	km_wire_name_set(&m->protocol_name, "");
	km_wire_name_set(&m->leader, "");
	km_wire_name_set(&m->member_id, "");
	m->n_members = 0;
	if (km_proto_group_rd_check(r, KM_API_JOIN_GROUP, version) < 0)
		return r->err;
	if (version >= 2)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	km_wire_rd_i16(r, &m->error_code);
	km_wire_rd_i32(r, &m->generation_id);
	km_wire_rd_name(r, false, false, &m->protocol_name);
	km_wire_rd_name(r, false, false, &m->leader);
	km_wire_rd_name(r, false, false, &m->member_id);
	if (r->err != 0 || rd_members(r, version >= 5, m->members,
				      m->members_max, &m->n_members) < 0)
		return r->err;
	return km_wire_rd_end(r);
}

/* ---- SyncGroup ---- */

int km_syncgroup_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_syncgroup_req *m)
{
	if (km_proto_group_wr_check(w, KM_API_SYNC_GROUP, version) < 0)
		return w->err;
	km_wire_wr_name(w, false, false, &m->group_id);
	km_wire_wr_i32(w, m->generation_id);
	km_wire_wr_name(w, false, false, &m->member_id);
	if (version >= 3)
		km_wire_wr_name(w, false, true, &m->group_instance_id);
	return wr_members(w, false, m->assignments, m->n_assignments);
}

int km_syncgroup_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_syncgroup_req *m)
{
	km_wire_name_set(&m->group_id, "");
	m->generation_id = -1;
	km_wire_name_set(&m->member_id, "");
	km_wire_name_set_null(&m->group_instance_id);
	m->n_assignments = 0;
	if (km_proto_group_rd_check(r, KM_API_SYNC_GROUP, version) < 0)
		return r->err;
	km_wire_rd_name(r, false, false, &m->group_id);
	km_wire_rd_i32(r, &m->generation_id);
	km_wire_rd_name(r, false, false, &m->member_id);
	if (version >= 3)
		km_wire_rd_name(r, false, true, &m->group_instance_id);
	if (r->err != 0 || rd_members(r, false, m->assignments,
				      m->assignments_max,
				      &m->n_assignments) < 0)
		return r->err;
	return km_wire_rd_end(r);
}

int km_syncgroup_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_syncgroup_resp *m)
{
	if (km_proto_group_wr_check(w, KM_API_SYNC_GROUP, version) < 0)
		return w->err;
	if (version >= 1)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	return km_proto_group_wr_bytes(w, false, false, &m->assignment);
}

int km_syncgroup_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_syncgroup_resp *m)
{
	m->throttle_time_ms = 0;
	m->error_code = 0;
	m->assignment.p = NULL;
	m->assignment.len = m->assignment.span.len = 0;
	if (km_proto_group_rd_check(r, KM_API_SYNC_GROUP, version) < 0)
		return r->err;
	if (version >= 1)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	km_wire_rd_i16(r, &m->error_code);
	km_proto_group_rd_bytes(r, false, false, &m->assignment);
	return km_wire_rd_end(r);
}

/* ---- LeaveGroup ---- */

int km_leavegroup_req_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_leavegroup_req *m)
{
	if (km_proto_group_wr_check(w, KM_API_LEAVE_GROUP, version) < 0)
		return w->err;
	/* v0-2 carry exactly one MemberId. */
	if (version < 3 && m->n_members != 1)
		return km_wire_wr_fail(w, KM_EWIREVALUE);
	km_wire_wr_name(w, false, false, &m->group_id);
	if (version < 3)
		return km_wire_wr_name(w, false, false, &m->members[0].member_id);
	km_proto_group_wr_count(w, false, m->n_members);
	for (uint32_t i = 0; i < m->n_members && w->err == 0; i++) {
		km_wire_wr_name(w, false, false, &m->members[i].member_id);
		km_wire_wr_name(w, false, true,
				&m->members[i].group_instance_id);
	}
	return w->err;
}

/* v3+ Members; with_error: the response's per-member ErrorCode. */
static int rd_leave_members(struct km_wire_rd *r, bool with_error,
			    struct km_leavegroup_member *a, uint32_t max,
			    uint32_t *n)
{
	int32_t count;

	if (km_proto_group_rd_count(r, false, false, max, &count) < 0)
		return r->err;
	for (int32_t i = 0; i < count; i++) {
		a[i].error_code = 0;
		km_wire_rd_name(r, false, false, &a[i].member_id);
		km_wire_rd_name(r, false, true, &a[i].group_instance_id);
		if (with_error)
			km_wire_rd_i16(r, &a[i].error_code);
		if (r->err != 0)
			return r->err;
		(*n)++;
	}
	return 0;
}

int km_leavegroup_req_decode(struct km_wire_rd *r, int16_t version,
			     struct km_leavegroup_req *m)
{
	km_wire_name_set(&m->group_id, "");
	m->n_members = 0;
	if (km_proto_group_rd_check(r, KM_API_LEAVE_GROUP, version) < 0)
		return r->err;
	km_wire_rd_name(r, false, false, &m->group_id);
	if (version >= 3) {
		if (r->err != 0 || rd_leave_members(r, false, m->members,
						    m->members_max,
						    &m->n_members) < 0)
			return r->err;
		return km_wire_rd_end(r);
	}
	if (m->members_max < 1)
		return km_wire_rd_fail(r, KM_EWIRECAPACITY);
	km_wire_name_set_null(&m->members[0].group_instance_id);
	m->members[0].error_code = 0;
	if (km_wire_rd_name(r, false, false, &m->members[0].member_id) < 0)
		return r->err;
	m->n_members = 1;
	return km_wire_rd_end(r);
}

int km_leavegroup_resp_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_leavegroup_resp *m)
{
	if (km_proto_group_wr_check(w, KM_API_LEAVE_GROUP, version) < 0)
		return w->err;
	if (version >= 1)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	if (version < 3)
		return w->err;
	km_proto_group_wr_count(w, false, m->n_members);
	for (uint32_t i = 0; i < m->n_members && w->err == 0; i++) {
		const struct km_leavegroup_member *p = &m->members[i];

		km_wire_wr_name(w, false, false, &p->member_id);
		km_wire_wr_name(w, false, true, &p->group_instance_id);
		km_wire_wr_i16(w, p->error_code);
	}
	return w->err;
}

int km_leavegroup_resp_decode(struct km_wire_rd *r, int16_t version,
			      struct km_leavegroup_resp *m)
{
	m->throttle_time_ms = 0;
	m->error_code = 0;
	m->n_members = 0;
	if (km_proto_group_rd_check(r, KM_API_LEAVE_GROUP, version) < 0)
		return r->err;
	if (version >= 1)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	km_wire_rd_i16(r, &m->error_code);
	if (version >= 3 && r->err == 0)
		rd_leave_members(r, true, m->members, m->members_max,
				 &m->n_members);
	return km_wire_rd_end(r);
}
