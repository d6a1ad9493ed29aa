// Shared by the group wire tests: one sample message per (API, direction)
// with every field set, storage to decode into, and a dispatcher over the
// nine consumer-group codecs of kafka/proto_group.h.
#ifndef KM_TESTS_WIRE_GROUP_UTIL_H
#define KM_TESTS_WIRE_GROUP_UTIL_H

#include <cstring>

#include "kafka/proto_group.h"
#include "wire_util.h"

namespace gt {

constexpr int16_t kKeys[] = {
	KM_API_OFFSET_COMMIT, KM_API_OFFSET_FETCH, KM_API_FIND_COORDINATOR,
	KM_API_JOIN_GROUP,    KM_API_HEARTBEAT,    KM_API_LEAVE_GROUP,
	KM_API_SYNC_GROUP,    KM_API_DESCRIBE_GROUPS, KM_API_LIST_GROUPS,
	KM_API_DELETE_GROUPS, KM_API_OFFSET_DELETE,
};
constexpr uint32_t kN = 8;

struct Store {
	km_proto_topic topics[kN];
	km_offcommit_req_part ocq_parts[kN];
	km_offcommit_resp_part ocp_parts[kN];
	int32_t ofq_parts[kN];
	km_offfetch_resp_part ofp_parts[kN];
	km_joingroup_protocol protos[kN];
	km_group_member members[kN];
	km_leavegroup_member lmembers[kN];
	km_wire_name names[kN];
	km_wire_name types[kN];
	km_descgroups_group dgroups[kN];
	km_descgroups_member dmembers[kN];
	km_listgroups_group lgroups[kN];
	km_delgroups_result dresults[kN];
	km_findcoord_req fcq;
	km_findcoord_resp fcp;
	km_offcommit_req ocq;
	km_offcommit_resp ocp;
	km_offfetch_req ofq;
	km_offfetch_resp ofp;
	km_joingroup_req jgq;
	km_joingroup_resp jgp;
	km_heartbeat_req hbq;
	km_heartbeat_resp hbp;
	km_leavegroup_req lgq;
	km_leavegroup_resp lgp;
	km_syncgroup_req sgq;
	km_syncgroup_resp sgp;
	km_descgroups_req dgq;
	km_descgroups_resp dgp;
	km_listgroups_req lsq;
	km_listgroups_resp lsp;
	km_delgroups_req deq;
	km_delgroups_resp dep;
	km_offdelete_req odq;
	km_offdelete_resp odp;
	uint8_t arena[1 << 16];
	size_t arena_used = 0;

	Store() { Wire(); }
	// Point every message at the arrays, capacity kN (or cap).
	void Wire(uint32_t cap = kN);
	// Copy decoded spans into the arena so the message re-encodes.
	void Own(const km_chain *c, int16_t key, bool req);
	void OwnBytes(const km_chain *c, km_group_bytes *b);
};

// The sample message of (key, req) for version v, in s.
void Sample(Store *s, int16_t key, bool req, int16_t v);
int Encode(km_wire_wr *w, Store *s, int16_t key, bool req, int16_t v);
int Decode(km_wire_rd *r, Store *s, int16_t key, bool req, int16_t v);

// The sample's body, written out from the schemas with wt::B.
wt::Bytes Golden(int16_t key, bool req, int16_t v);

// Encode the sample into bytes (asserting success).
wt::Bytes EncodeSample(int16_t key, bool req, int16_t v);

} // namespace gt

#endif
