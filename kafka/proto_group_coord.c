/* FindCoordinator (key 10) v0-2 and Heartbeat (key 12) v0-3
 * (FindCoordinator{Request,Response}.json, Heartbeat{Request,Response}.json);
 * none of these versions is flexible.
 *
 * FindCoordinator request: Key STRING, KeyType int8 v1+.
 * Response: ThrottleTimeMs int32 v1+, ErrorCode int16, ErrorMessage
 * NULLABLE_STRING v1+, NodeId int32, Host STRING, Port int32.
 * Heartbeat request: GroupId STRING, GenerationId int32, MemberId STRING,
 * GroupInstanceId NULLABLE_STRING v3+.
 * Response: ThrottleTimeMs int32 v1+, ErrorCode int16.
 */
#include "kafka/proto_group_pvt.h"

#include "common/errors.h"

int km_findcoord_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_findcoord_req *m)
{
	if (km_proto_group_wr_check(w, KM_API_FIND_COORDINATOR, version) < 0)
		return w->err;
	/* v0 only finds group coordinators: a key type would be lost. */
	if (version == 0 && m->key_type != 0)
		return km_wire_wr_fail(w, KM_EWIREVALUE);
	km_wire_wr_name(w, false, false, &m->key);
	if (version >= 1)
		km_wire_wr_i8(w, m->key_type);
	return w->err;
}

int km_findcoord_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_findcoord_req *m)
{
	km_wire_name_set(&m->key, "");
	m->key_type = 0;
	if (km_proto_group_rd_check(r, KM_API_FIND_COORDINATOR, version) < 0)
		return r->err;
	km_wire_rd_name(r, false, false, &m->key);
	if (version >= 1)
		km_wire_rd_i8(r, &m->key_type);
	return km_wire_rd_end(r);
}

int km_findcoord_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_findcoord_resp *m)
{
	if (km_proto_group_wr_check(w, KM_API_FIND_COORDINATOR, version) < 0)
		return w->err;
	if (version >= 1)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	if (version >= 1)
		km_wire_wr_name(w, false, true, &m->error_message);
	km_wire_wr_i32(w, m->node_id);
	km_wire_wr_name(w, false, false, &m->host);
	km_wire_wr_i32(w, m->port);
	return w->err;
}

int km_findcoord_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_findcoord_resp *m)
{
	bool cut;

	m->throttle_time_ms = 0;
	m->error_code = 0;
	km_wire_name_set_null(&m->error_message);
	m->node_id = -1;
	km_wire_name_set(&m->host, "");
	m->port = -1;
	if (km_proto_group_rd_check(r, KM_API_FIND_COORDINATOR, version) < 0)
		return r->err;
	if (version >= 1)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	km_wire_rd_i16(r, &m->error_code);
	/* Only logged, so a long message is cut rather than refused. */
	if (version >= 1)
		km_wire_rd_name_trunc(r, false, true, &m->error_message, &cut);
	km_wire_rd_i32(r, &m->node_id);
	km_wire_rd_name(r, false, false, &m->host);
	km_wire_rd_i32(r, &m->port);
	return km_wire_rd_end(r);
}

/* ---- Heartbeat ---- */

int km_heartbeat_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_heartbeat_req *m)
{
	if (km_proto_group_wr_check(w, KM_API_HEARTBEAT, version) < 0)
		return w->err;
	km_wire_wr_name(w, false, false, &m->group_id);
	km_wire_wr_i32(w, m->generation_id);
	km_wire_wr_name(w, false, false, &m->member_id);
	if (version >= 3)
		km_wire_wr_name(w, false, true, &m->group_instance_id);
	return w->err;
}

int km_heartbeat_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_heartbeat_req *m)
{
	km_wire_name_set(&m->group_id, "");
	m->generation_id = -1;
	km_wire_name_set(&m->member_id, "");
	km_wire_name_set_null(&m->group_instance_id);
	if (km_proto_group_rd_check(r, KM_API_HEARTBEAT, version) < 0)
		return r->err;
	km_wire_rd_name(r, false, false, &m->group_id);
	km_wire_rd_i32(r, &m->generation_id);
	km_wire_rd_name(r, false, false, &m->member_id);
	if (version >= 3)
		km_wire_rd_name(r, false, true, &m->group_instance_id);
	return km_wire_rd_end(r);
}

int km_heartbeat_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_heartbeat_resp *m)
{
	if (km_proto_group_wr_check(w, KM_API_HEARTBEAT, version) < 0)
		return w->err;
	if (version >= 1)
		km_wire_wr_i32(w, m->throttle_time_ms);
	km_wire_wr_i16(w, m->error_code);
	return w->err;
}

int km_heartbeat_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_heartbeat_resp *m)
{
	m->throttle_time_ms = 0;
	m->error_code = 0;
	if (km_proto_group_rd_check(r, KM_API_HEARTBEAT, version) < 0)
		return r->err;
	if (version >= 1)
		km_wire_rd_i32(r, &m->throttle_time_ms);
	km_wire_rd_i16(r, &m->error_code);
	return km_wire_rd_end(r);
}
