/* Kafka consumer-group messages, both directions: kmirrord as a group
 * coordinator (decode requests, encode responses) and as a client of its
 * source cluster (FindCoordinator, OffsetFetch, ListGroups). Pure code over
 * struct km_wire_rd / km_wire_wr, with the shapes and error rules of
 * kafka/proto.h (read its header comment first).
 *
 * Versions, v0 up to the highest librdkafka 2.0.2 sends (seen with
 * debug=protocol against its mock cluster, which advertises OffsetFetch
 * 0-5 only; the rest from rd_kafka_*Request's version caps):
 *   FindCoordinator (10) 0-2      OffsetCommit (8) 0-7
 *   OffsetFetch (9) 0-7, flexible 6+ (librdkafka: up to 7, RequireStable)
 *   JoinGroup (11) 0-5            Heartbeat (12) 0-3
 *   LeaveGroup (13) 0-3 (librdkafka sends 0-1; v3 batches Members)
 *   SyncGroup (14) 0-3            DescribeGroups (15) 0-4
 *   DeleteGroups (42) 0-2, flexible 2+ (kafka-consumer-groups --delete)
 *   OffsetDelete (47) 0, never flexible (--delete-offsets)
 *   ListGroups (16) 0-5, flexible 3+ (compact types, tag sections; header
 *   versions from km_proto_req_header_version / km_proto_resp_header_version;
 *   v5, GroupType and TypesFilter, is what Kafka 4.x's Admin client asks)
 *
 * Names: group ids, member ids, instance ids, topics, protocol names, group
 * states and DescribeGroups' ClientId/ClientHost are struct km_wire_name and
 * so at most KM_WIRE_NAME_BYTES_MAX (255) bytes; a longer one is REFUSED
 * with KM_EWIRESTRLEN (never cut: a cut id would name another member). A
 * member id is ClientId "-" UUID (36 chars), so a coordinator that mints
 * member ids must cut the client id to KM_GROUP_CLIENT_ID_BYTES_MAX first.
 * FindCoordinator's ErrorMessage is only logged and is cut instead.
 *
 * Byte fields (member metadata, assignments, committed offset metadata,
 * which Kafka allows up to offset.metadata.max.bytes = 4096 and more) are a
 * struct km_group_bytes: encoders take p/len, decoders fill span (in place,
 * no copy, valid while the chain's segments are) and set p = NULL,
 * len = span.len.
 *
 * Arrays are caller-given with capacities, as in proto.h; more items than
 * an array holds fail with KM_EWIRECAPACITY. Fields absent at a version
 * decode as the schema default the comment names.
 */
#ifndef KM_KAFKA_PROTO_GROUP_H
#define KM_KAFKA_PROTO_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "kafka/proto.h"
#include "kafka/wire.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
	/* Longest client id that still fits a member id ("-" + 36-char UUID)
	 * in a struct km_wire_name. */
	KM_GROUP_CLIENT_ID_BYTES_MAX = KM_WIRE_NAME_BYTES_MAX - 37,
	/* DescribeGroups AuthorizedOperations default (Integer.MIN_VALUE:
	 * "not requested"). */
	KM_GROUP_AUTH_OPS_UNSET = INT32_MIN,
};

/* A BYTES or (offset metadata) NULLABLE_STRING field. */
struct km_group_bytes {
	const void *p;			/* encode: the bytes */
	int32_t len;			/* -1 = null */
	struct km_wire_span span;	/* decode: in place */
};

/* ---- FindCoordinator (10), v0-2 ---- */

struct km_findcoord_req {
	struct km_wire_name key;	/* group id (or transactional id) */
	int8_t key_type;		/* v1+: 0 group, 1 transaction; else 0 */
};

struct km_findcoord_resp {
	int32_t throttle_time_ms;	/* v1+, else 0 */
	int16_t error_code;
	struct km_wire_name error_message; /* v1+, nullable, cut; else null */
	int32_t node_id;
	struct km_wire_name host;
	int32_t port;
};

/** v0 cannot name a key type: key_type != 0 at v0 -> KM_EWIREVALUE. */
int km_findcoord_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_findcoord_req *m);
int km_findcoord_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_findcoord_req *m);
int km_findcoord_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_findcoord_resp *m);
int km_findcoord_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_findcoord_resp *m);

/* ---- OffsetCommit (8), v0-7 ---- */

struct km_offcommit_req_part {
	int32_t partition;
	int64_t committed_offset;
	int32_t committed_leader_epoch; /* v6+, else -1 */
	int64_t commit_timestamp;	/* v1 only, else -1 */
	struct km_group_bytes metadata; /* CommittedMetadata, nullable */
};

struct km_offcommit_req {
	struct km_wire_name group_id;
	int32_t generation_id;		/* v1+, else -1 */
	struct km_wire_name member_id;	/* v1+, else "" */
	struct km_wire_name group_instance_id; /* v7+, nullable; else null */
	int64_t retention_time_ms;	/* v2-4, else -1 */
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_offcommit_req_part *parts;
	uint32_t parts_max;
	uint32_t n_parts;
};

struct km_offcommit_resp_part {
	int32_t partition;
	int16_t error_code;
};

struct km_offcommit_resp {
	int32_t throttle_time_ms;	/* v3+, else 0 */
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_offcommit_resp_part *parts;
	uint32_t parts_max;
	uint32_t n_parts;
};

int km_offcommit_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_offcommit_req *m);
int km_offcommit_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_offcommit_req *m);
int km_offcommit_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_offcommit_resp *m);
int km_offcommit_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_offcommit_resp *m);

/* ---- OffsetFetch (9), v0-7; flexible from v6 ---- */

struct km_offfetch_req {
	struct km_wire_name group_id;
	/* Topics: each names PartitionIndexes parts[first, first + count).
	 * all_topics = null Topics ("fetch all offsets", v2+). */
	bool all_topics;
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	int32_t *parts;
	uint32_t parts_max;
	uint32_t n_parts;
	bool require_stable;		/* v7+, else false */
};

struct km_offfetch_resp_part {
	int32_t partition;
	int64_t committed_offset;	/* -1: none committed */
	int32_t committed_leader_epoch; /* v5+, else -1 */
	struct km_group_bytes metadata; /* nullable */
	int16_t error_code;
};

struct km_offfetch_resp {
	int32_t throttle_time_ms;	/* v3+, else 0 */
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_offfetch_resp_part *parts;
	uint32_t parts_max;
	uint32_t n_parts;
	int16_t error_code;		/* v2+ (last field), else 0 */
};

/** all_topics below v2 -> KM_EWIREVALUE (v0-1 have no null Topics). */
int km_offfetch_req_encode(struct km_wire_wr *w, int16_t version,
			   const struct km_offfetch_req *m);
/** A null Topics below v2 is KM_EWIRENEGLEN. */
int km_offfetch_req_decode(struct km_wire_rd *r, int16_t version,
			   struct km_offfetch_req *m);
int km_offfetch_resp_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_offfetch_resp *m);
int km_offfetch_resp_decode(struct km_wire_rd *r, int16_t version,
			    struct km_offfetch_resp *m);

/* ---- JoinGroup (11), v0-5 ---- */

struct km_joingroup_protocol {
	struct km_wire_name name;
	struct km_group_bytes metadata;
};

struct km_joingroup_req {
	struct km_wire_name group_id;
	int32_t session_timeout_ms;
	int32_t rebalance_timeout_ms;	/* v1+, else -1 */
	struct km_wire_name member_id;	/* "" on the first join */
	struct km_wire_name group_instance_id; /* v5+, nullable; else null */
	struct km_wire_name protocol_type;
	struct km_joingroup_protocol *protocols;
	uint32_t protocols_max;
	uint32_t n_protocols;
};

struct km_group_member {
	struct km_wire_name member_id;
	struct km_wire_name group_instance_id; /* nullable; null if absent */
	struct km_group_bytes data;	/* JoinGroup Metadata / SyncGroup
					 * Assignment */
};

struct km_joingroup_resp {
	int32_t throttle_time_ms;	/* v2+, else 0 */
	int16_t error_code;
	int32_t generation_id;
	struct km_wire_name protocol_name;
	struct km_wire_name leader;
	struct km_wire_name member_id;
	struct km_group_member *members; /* GroupInstanceId v5+ */
	uint32_t members_max;
	uint32_t n_members;
};

int km_joingroup_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_joingroup_req *m);
int km_joingroup_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_joingroup_req *m);
int km_joingroup_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_joingroup_resp *m);
int km_joingroup_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_joingroup_resp *m);

/* ---- SyncGroup (14), v0-3 ---- */

struct km_syncgroup_req {
	struct km_wire_name group_id;
	int32_t generation_id;
	struct km_wire_name member_id;
	struct km_wire_name group_instance_id; /* v3+, nullable; else null */
	/* Assignments: member_id + data (the assignment); the instance id
	 * is not on the wire here. */
	struct km_group_member *assignments;
	uint32_t assignments_max;
	uint32_t n_assignments;
};

struct km_syncgroup_resp {
	int32_t throttle_time_ms;	/* v1+, else 0 */
	int16_t error_code;
	struct km_group_bytes assignment;
};

int km_syncgroup_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_syncgroup_req *m);
int km_syncgroup_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_syncgroup_req *m);
int km_syncgroup_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_syncgroup_resp *m);
int km_syncgroup_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_syncgroup_resp *m);

/* ---- Heartbeat (12), v0-3 ---- */

struct km_heartbeat_req {
	struct km_wire_name group_id;
	int32_t generation_id;
	struct km_wire_name member_id;
	struct km_wire_name group_instance_id; /* v3+, nullable; else null */
};

struct km_heartbeat_resp {
	int32_t throttle_time_ms;	/* v1+, else 0 */
	int16_t error_code;
};

int km_heartbeat_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_heartbeat_req *m);
int km_heartbeat_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_heartbeat_req *m);
int km_heartbeat_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_heartbeat_resp *m);
int km_heartbeat_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_heartbeat_resp *m);

/* ---- LeaveGroup (13), v0-3 ---- */

struct km_leavegroup_member {
	struct km_wire_name member_id;
	struct km_wire_name group_instance_id; /* nullable */
	int16_t error_code;		/* response only */
};

struct km_leavegroup_req {
	struct km_wire_name group_id;
	/* v0-2 MemberId is members[0].member_id (exactly one member; other
	 * counts -> KM_EWIREVALUE); v3+ Members is the array. A v0-2 decode
	 * gives one member with a null instance id. */
	struct km_leavegroup_member *members;
	uint32_t members_max;
	uint32_t n_members;
};

struct km_leavegroup_resp {
	int32_t throttle_time_ms;	/* v1+, else 0 */
	int16_t error_code;
	struct km_leavegroup_member *members; /* v3+, else none */
	uint32_t members_max;
	uint32_t n_members;
};

int km_leavegroup_req_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_leavegroup_req *m);
int km_leavegroup_req_decode(struct km_wire_rd *r, int16_t version,
			     struct km_leavegroup_req *m);
int km_leavegroup_resp_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_leavegroup_resp *m);
int km_leavegroup_resp_decode(struct km_wire_rd *r, int16_t version,
			      struct km_leavegroup_resp *m);

/* ---- DescribeGroups (15), v0-4 ---- */

struct km_descgroups_req {
	struct km_wire_name *groups;
	uint32_t groups_max;
	uint32_t n_groups;
	bool include_authorized_operations; /* v3+, else false */
};

struct km_descgroups_member {
	struct km_wire_name member_id;
	struct km_wire_name group_instance_id; /* v4+, nullable; else null */
	struct km_wire_name client_id;
	struct km_wire_name client_host;
	struct km_group_bytes metadata;
	struct km_group_bytes assignment;
};

struct km_descgroups_group {
	int16_t error_code;
	struct km_wire_name group_id;
	struct km_wire_name group_state;
	struct km_wire_name protocol_type;
	struct km_wire_name protocol_data; /* the chosen protocol's name */
	uint32_t first;			/* members[first, first + count) */
	uint32_t count;
	int32_t authorized_operations;	/* v3+, else KM_GROUP_AUTH_OPS_UNSET */
};

struct km_descgroups_resp {
	int32_t throttle_time_ms;	/* v1+, else 0 */
	struct km_descgroups_group *groups;
	uint32_t groups_max;
	uint32_t n_groups;
	struct km_descgroups_member *members;
	uint32_t members_max;
	uint32_t n_members;
};

int km_descgroups_req_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_descgroups_req *m);
int km_descgroups_req_decode(struct km_wire_rd *r, int16_t version,
			     struct km_descgroups_req *m);
int km_descgroups_resp_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_descgroups_resp *m);
int km_descgroups_resp_decode(struct km_wire_rd *r, int16_t version,
			      struct km_descgroups_resp *m);

/* ---- ListGroups (16), v0-5; flexible from v3 ---- */

struct km_listgroups_req {
	struct km_wire_name *states_filter; /* v4+, else none */
	uint32_t states_max;
	uint32_t n_states;
	struct km_wire_name *types_filter; /* v5+, else none */
	uint32_t types_max;
	uint32_t n_types;
};

struct km_listgroups_group {
	struct km_wire_name group_id;
	struct km_wire_name protocol_type;
	struct km_wire_name group_state; /* v4+, else "" */
	struct km_wire_name group_type;	 /* v5+ ("classic"...), else "" */
};

struct km_listgroups_resp {
	int32_t throttle_time_ms;	/* v1+, else 0 */
	int16_t error_code;
	struct km_listgroups_group *groups;
	uint32_t groups_max;
	uint32_t n_groups;
};

/** A states filter below v4 or a types filter below v5 ->
 *  KM_EWIREVALUE (it would be dropped). */
int km_listgroups_req_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_listgroups_req *m);
int km_listgroups_req_decode(struct km_wire_rd *r, int16_t version,
			     struct km_listgroups_req *m);
int km_listgroups_resp_encode(struct km_wire_wr *w, int16_t version,
			      const struct km_listgroups_resp *m);
int km_listgroups_resp_decode(struct km_wire_rd *r, int16_t version,
			      struct km_listgroups_resp *m);

/* ---- DeleteGroups (42), v0-2; flexible from v2 ---- */

struct km_delgroups_req {
	struct km_wire_name *groups;	/* GroupsNames */
	uint32_t groups_max;
	uint32_t n_groups;
};

struct km_delgroups_result {
	struct km_wire_name group_id;
	int16_t error_code;
};

struct km_delgroups_resp {
	int32_t throttle_time_ms;
	struct km_delgroups_result *results;
	uint32_t results_max;
	uint32_t n_results;
};

int km_delgroups_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_delgroups_req *m);
int km_delgroups_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_delgroups_req *m);
int km_delgroups_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_delgroups_resp *m);
int km_delgroups_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_delgroups_resp *m);

/* ---- OffsetDelete (47), v0; not flexible ---- */

struct km_offdelete_req {
	struct km_wire_name group_id;
	/* Topics: each names PartitionIndex parts[first, first + count). */
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	int32_t *parts;
	uint32_t parts_max;
	uint32_t n_parts;
};

struct km_offdelete_resp {
	int16_t error_code;
	int32_t throttle_time_ms;
	struct km_proto_topic *topics;
	uint32_t topics_max;
	uint32_t n_topics;
	struct km_offcommit_resp_part *parts; /* PartitionIndex, ErrorCode */
	uint32_t parts_max;
	uint32_t n_parts;
};

int km_offdelete_req_encode(struct km_wire_wr *w, int16_t version,
			    const struct km_offdelete_req *m);
int km_offdelete_req_decode(struct km_wire_rd *r, int16_t version,
			    struct km_offdelete_req *m);
int km_offdelete_resp_encode(struct km_wire_wr *w, int16_t version,
			     const struct km_offdelete_resp *m);
int km_offdelete_resp_decode(struct km_wire_rd *r, int16_t version,
			     struct km_offdelete_resp *m);

#ifdef __cplusplus
}
#endif

#endif
