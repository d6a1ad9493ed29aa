// Samples, storage and golden bodies for the group wire tests; see
// group_util.h. The golden bodies are written from the message schemas
// (clients/src/main/resources/common/message/*.json), field by field, with
// no use of the codec: they are the reference the encoders are held to.
#include "group_util.h"

namespace gt {

using wt::B;
using wt::Bytes;
using wt::Name;

static const char kMd[] = "md";
static const char kAsgn[] = "asgn";

void Store::Wire(uint32_t cap)
{
	ocq.topics = ocp.topics = ofq.topics = ofp.topics = topics;
	ocq.topics_max = ocp.topics_max = ofq.topics_max = ofp.topics_max = cap;
	ocq.parts = ocq_parts, ocq.parts_max = cap;
	ocp.parts = ocp_parts, ocp.parts_max = cap;
	ofq.parts = ofq_parts, ofq.parts_max = cap;
	ofp.parts = ofp_parts, ofp.parts_max = cap;
	jgq.protocols = protos, jgq.protocols_max = cap;
	jgp.members = members, jgp.members_max = cap;
	sgq.assignments = members, sgq.assignments_max = cap;
	lgq.members = lgp.members = lmembers;
	lgq.members_max = lgp.members_max = cap;
	dgq.groups = names, dgq.groups_max = cap;
	dgp.groups = dgroups, dgp.groups_max = cap;
	dgp.members = dmembers, dgp.members_max = cap;
	lsq.states_filter = names, lsq.states_max = cap;
	lsq.types_filter = types, lsq.types_max = cap;
	deq.groups = names, deq.groups_max = cap;
	dep.results = dresults, dep.results_max = cap;
	odq.topics = odp.topics = topics;
	odq.topics_max = odp.topics_max = cap;
	odq.parts = ofq_parts, odq.parts_max = cap;
	odp.parts = ocp_parts, odp.parts_max = cap;
	lsp.groups = lgroups, lsp.groups_max = cap;
}

void Store::OwnBytes(const km_chain *c, km_group_bytes *b)
{
	if (b->len <= 0) {
		b->p = b->len == 0 ? "" : nullptr;
		return;
	}
	size_t n = km_wire_span_copy(c, &b->span, arena + arena_used,
				     sizeof(arena) - arena_used);
	b->p = arena + arena_used;
	arena_used += n;
}

void Store::Own(const km_chain *c, int16_t key, bool req)
{
	switch (key) {
	case KM_API_OFFSET_COMMIT:
		for (uint32_t i = 0; req && i < ocq.n_parts; i++)
			OwnBytes(c, &ocq_parts[i].metadata);
		break;
	case KM_API_OFFSET_FETCH:
		for (uint32_t i = 0; !req && i < ofp.n_parts; i++)
			OwnBytes(c, &ofp_parts[i].metadata);
		break;
	case KM_API_JOIN_GROUP:
		for (uint32_t i = 0; req && i < jgq.n_protocols; i++)
			OwnBytes(c, &protos[i].metadata);
		for (uint32_t i = 0; !req && i < jgp.n_members; i++)
			OwnBytes(c, &members[i].data);
		break;
	case KM_API_SYNC_GROUP:
		for (uint32_t i = 0; req && i < sgq.n_assignments; i++)
			OwnBytes(c, &members[i].data);
		if (!req)
			OwnBytes(c, &sgp.assignment);
		break;
	case KM_API_DESCRIBE_GROUPS:
		for (uint32_t i = 0; !req && i < dgp.n_members; i++) {
			OwnBytes(c, &dmembers[i].metadata);
			OwnBytes(c, &dmembers[i].assignment);
		}
		break;
	}
}

static km_group_bytes Bts(const char *s)
{
	km_group_bytes b{};
	b.p = s;
	b.len = s == nullptr ? -1 : (int32_t)strlen(s);
	return b;
}

static void SampleOffsets(Store *s, bool req, int16_t v)
{
	(void)v;
	s->topics[0] = {Name("events"), 0, 2};
	if (req) {
		s->ocq = {Name("grp"), 3, Name("m-1"), Name("inst"), 86400000,
			  s->topics, kN, 1, s->ocq_parts, kN, 2};
		s->ocq_parts[0] = {0, 42, 7, 1000, Bts(kMd)};
		s->ocq_parts[1] = {1, 43, 7, 1000, Bts(nullptr)};
		s->ofq = {Name("grp"), false, s->topics, kN, 1,
			  s->ofq_parts, kN, 2, true};
		s->ofq_parts[0] = 0;
		s->ofq_parts[1] = 1;
		return;
	}
	s->ocp = {5, s->topics, kN, 1, s->ocp_parts, kN, 2};
	s->ocp_parts[0] = {0, 0};
	s->ocp_parts[1] = {1, KM_KERR_OFFSET_METADATA_TOO_LARGE};
	s->ofp = {5, s->topics, kN, 1, s->ofp_parts, kN, 2, 0};
	s->ofp_parts[0] = {0, 42, 7, Bts(kMd), 0};
	s->ofp_parts[1] = {1, -1, -1, Bts(nullptr), 0};
}

static void SampleJoin(Store *s, bool req, int16_t v)
{
	if (req) {
		s->jgq = {Name("grp"), 30000, 60000, Name("m-1"), Name("inst"),
			  Name("consumer"), s->protos, kN, 1};
		s->protos[0] = {Name("range"), Bts(kMd)};
		s->sgq = {Name("grp"), 3, Name("m-1"), Name("inst"),
			  s->members, kN, 1};
		s->hbq = {Name("grp"), 3, Name("m-1"), Name("inst")};
		s->lgq = {Name("grp"), s->lmembers, kN, v < 3 ? 1u : 2u};
		s->lmembers[0] = {Name("m-1"), Name(v < 3 ? nullptr : "inst"),
				  0};
		s->lmembers[1] = {Name("m-2"), Name(nullptr), 0};
		return;
	}
	s->jgp = {5, 0, 3, Name("range"), Name("m-1"), Name("m-1"),
		  s->members, kN, 2};
	s->sgp = {5, 0, Bts(kAsgn)};
	s->hbp = {5, KM_KERR_REBALANCE_IN_PROGRESS};
	s->lgp = {5, 0, s->lmembers, kN, 2};
	s->lmembers[0] = {Name("m-1"), Name("inst"), 0};
	s->lmembers[1] = {Name("m-2"), Name(nullptr),
			  KM_KERR_UNKNOWN_MEMBER_ID};
}

void Sample(Store *s, int16_t key, bool req, int16_t v)
{
	s->Wire();
	SampleOffsets(s, req, v);
	SampleJoin(s, req, v);
	// JoinGroup members and SyncGroup assignments share the array.
	if (key == KM_API_SYNC_GROUP)
		s->members[0] = {Name("m-1"), Name(nullptr), Bts(kAsgn)};
	else {
		s->members[0] = {Name("m-1"), Name("inst"), Bts(kMd)};
		s->members[1] = {Name("m-2"), Name(nullptr), Bts("")};
	}
	s->fcq = {Name("grp"), 0};
	s->fcp = {5, 0, Name(nullptr), 2, Name("localhost"), 9092};
	s->names[0] = key == KM_API_LIST_GROUPS ? Name("Stable") : Name("grp");
	s->dgq = {s->names, kN, 1, true};
	s->dgp = {5, s->dgroups, kN, 1, s->dmembers, kN, 1};
	s->dgroups[0] = {0, Name("grp"), Name("Stable"), Name("consumer"),
			 Name("range"), 0, 1, 8};
	s->dmembers[0] = {Name("m-1"), Name("inst"), Name("rdkafka"),
			  Name("/127.0.0.1"), Bts(kMd), Bts(kAsgn)};
	s->lsq = {s->names, kN, v >= 4 ? 1u : 0u, s->types, kN, v >= 5 ? 1u : 0u};
	s->types[0] = Name("classic");
	s->lsp = {5, 0, s->lgroups, kN, 1};
	s->lgroups[0] = {Name("grp"), Name("consumer"), Name("Stable"),
			 Name(v >= 5 ? "classic" : "")};
	s->deq = {s->names, kN, 1};
	s->dep = {5, s->dresults, kN, 2};
	s->dresults[0] = {Name("grp"), 0};
	s->dresults[1] = {Name("busy"), KM_KERR_NON_EMPTY_GROUP};
	if (key == KM_API_OFFSET_DELETE) {
		// one topic, partitions 0 and 1 (the offsets' samples' arrays)
		s->topics[0] = {Name("events"), 0, 2};
		s->ofq_parts[0] = 0;
		s->ofq_parts[1] = 1;
		s->ocp_parts[0] = {0, 0};
		s->ocp_parts[1] = {1, KM_KERR_GROUP_SUBSCRIBED_TO_TOPIC};
		s->odq = {Name("grp"), s->topics, kN, 1, s->ofq_parts, kN, 2};
		s->odp = {0, 5, s->topics, kN, 1, s->ocp_parts, kN, 2};
	}
}


int Encode(km_wire_wr *w, Store *s, int16_t key, bool req, int16_t v)
{
	switch (key) {
	case KM_API_FIND_COORDINATOR:
		return req ? km_findcoord_req_encode(w, v, &s->fcq)
			   : km_findcoord_resp_encode(w, v, &s->fcp);
	case KM_API_OFFSET_COMMIT:
		return req ? km_offcommit_req_encode(w, v, &s->ocq)
			   : km_offcommit_resp_encode(w, v, &s->ocp);
	case KM_API_OFFSET_FETCH:
		return req ? km_offfetch_req_encode(w, v, &s->ofq)
			   : km_offfetch_resp_encode(w, v, &s->ofp);
	case KM_API_JOIN_GROUP:
		return req ? km_joingroup_req_encode(w, v, &s->jgq)
			   : km_joingroup_resp_encode(w, v, &s->jgp);
	case KM_API_HEARTBEAT:
		return req ? km_heartbeat_req_encode(w, v, &s->hbq)
			   : km_heartbeat_resp_encode(w, v, &s->hbp);
	case KM_API_LEAVE_GROUP:
		return req ? km_leavegroup_req_encode(w, v, &s->lgq)
			   : km_leavegroup_resp_encode(w, v, &s->lgp);
	case KM_API_SYNC_GROUP:
		return req ? km_syncgroup_req_encode(w, v, &s->sgq)
			   : km_syncgroup_resp_encode(w, v, &s->sgp);
	case KM_API_DESCRIBE_GROUPS:
		return req ? km_descgroups_req_encode(w, v, &s->dgq)
			   : km_descgroups_resp_encode(w, v, &s->dgp);
	case KM_API_LIST_GROUPS:
		return req ? km_listgroups_req_encode(w, v, &s->lsq)
			   : km_listgroups_resp_encode(w, v, &s->lsp);
	case KM_API_DELETE_GROUPS:
		return req ? km_delgroups_req_encode(w, v, &s->deq)
			   : km_delgroups_resp_encode(w, v, &s->dep);
	case KM_API_OFFSET_DELETE:
		return req ? km_offdelete_req_encode(w, v, &s->odq)
			   : km_offdelete_resp_encode(w, v, &s->odp);
	}
	return KM_EWIREAPIKEY;
}

int Decode(km_wire_rd *r, Store *s, int16_t key, bool req, int16_t v)
{
	switch (key) {
	case KM_API_FIND_COORDINATOR:
		return req ? km_findcoord_req_decode(r, v, &s->fcq)
			   : km_findcoord_resp_decode(r, v, &s->fcp);
	case KM_API_OFFSET_COMMIT:
		return req ? km_offcommit_req_decode(r, v, &s->ocq)
			   : km_offcommit_resp_decode(r, v, &s->ocp);
	case KM_API_OFFSET_FETCH:
		return req ? km_offfetch_req_decode(r, v, &s->ofq)
			   : km_offfetch_resp_decode(r, v, &s->ofp);
	case KM_API_JOIN_GROUP:
		return req ? km_joingroup_req_decode(r, v, &s->jgq)
			   : km_joingroup_resp_decode(r, v, &s->jgp);
	case KM_API_HEARTBEAT:
		return req ? km_heartbeat_req_decode(r, v, &s->hbq)
			   : km_heartbeat_resp_decode(r, v, &s->hbp);
	case KM_API_LEAVE_GROUP:
		return req ? km_leavegroup_req_decode(r, v, &s->lgq)
			   : km_leavegroup_resp_decode(r, v, &s->lgp);
	case KM_API_SYNC_GROUP:
		return req ? km_syncgroup_req_decode(r, v, &s->sgq)
			   : km_syncgroup_resp_decode(r, v, &s->sgp);
	case KM_API_DESCRIBE_GROUPS:
		return req ? km_descgroups_req_decode(r, v, &s->dgq)
			   : km_descgroups_resp_decode(r, v, &s->dgp);
	case KM_API_LIST_GROUPS:
		return req ? km_listgroups_req_decode(r, v, &s->lsq)
			   : km_listgroups_resp_decode(r, v, &s->lsp);
	case KM_API_DELETE_GROUPS:
		return req ? km_delgroups_req_decode(r, v, &s->deq)
			   : km_delgroups_resp_decode(r, v, &s->dep);
	case KM_API_OFFSET_DELETE:
		return req ? km_offdelete_req_decode(r, v, &s->odq)
			   : km_offdelete_resp_decode(r, v, &s->odp);
	}
	return KM_EWIREAPIKEY;
}

// ---- golden bodies ----

// Writes in the version's encoding: classic or compact.
struct F {
	B b;
	bool flex;
	F &s(const std::string &v) { flex ? b.cstr(v) : b.str(v); return *this; }
	F &null() { flex ? b.uvar(0) : b.i16(-1); return *this; }
	F &arr(int32_t n) { flex ? b.uvar((uint32_t)n + 1) : b.i32(n); return *this; }
	F &bytes(const std::string &v)
	{
		flex ? b.uvar((uint32_t)v.size() + 1) : b.i32((int32_t)v.size());
		b.raw(v);
		return *this;
	}
	F &tags() { if (flex) b.u8(0); return *this; }
};

static Bytes GoldenOffsets(int16_t key, bool req, int16_t v)
{
	F f{B(), km_proto_is_flexible(key, v)};
	if (key == KM_API_OFFSET_COMMIT && req) {
		f.s("grp");
		if (v >= 1)
			f.b.i32(3), f.s("m-1");
		if (v >= 7)
			f.s("inst");
		if (v >= 2 && v <= 4)
			f.b.i64(86400000);
		f.arr(1).s("events").arr(2);
		for (int p = 0; p < 2; p++) {
			f.b.i32(p).i64(42 + p);
			if (v >= 6)
				f.b.i32(7);
			if (v == 1)
				f.b.i64(1000);
			p == 0 ? f.s("md") : f.null();
		}
		return f.b.b;
	}
	if (key == KM_API_OFFSET_COMMIT) {
		if (v >= 3)
			f.b.i32(5);
		f.arr(1).s("events").arr(2);
		f.b.i32(0).i16(0).i32(1).i16(12);
		return f.b.b;
	}
	if (req) {
		f.s("grp").arr(1).s("events").arr(2);
		f.b.i32(0).i32(1);
		f.tags();
		if (v >= 7)
			f.b.u8(1);
		f.tags();
		return f.b.b;
	}
	if (v >= 3)
		f.b.i32(5);
	f.arr(1).s("events").arr(2);
	f.b.i32(0).i64(42);
	if (v >= 5)
		f.b.i32(7);
	f.s("md").b.i16(0);
	f.tags();
	f.b.i32(1).i64(-1);
	if (v >= 5)
		f.b.i32(-1);
	f.null().b.i16(0);
	f.tags().tags();
	if (v >= 2)
		f.b.i16(0);
	f.tags();
	return f.b.b;
}

static Bytes GoldenJoin(int16_t key, bool req, int16_t v)
{
	F f{B(), false};
	if (key == KM_API_JOIN_GROUP && req) {
		f.s("grp").b.i32(30000);
		if (v >= 1)
			f.b.i32(60000);
		f.s("m-1");
		if (v >= 5)
			f.s("inst");
		f.s("consumer").arr(1).s("range").bytes("md");
	} else if (key == KM_API_JOIN_GROUP) {
		if (v >= 2)
			f.b.i32(5);
		f.b.i16(0).i32(3);
		f.s("range").s("m-1").s("m-1").arr(2).s("m-1");
		if (v >= 5)
			f.s("inst");
		f.bytes("md").s("m-2");
		if (v >= 5)
			f.null();
		f.bytes("");
	} else if (key == KM_API_SYNC_GROUP && req) {
		f.s("grp").b.i32(3);
		f.s("m-1");
		if (v >= 3)
			f.s("inst");
		f.arr(1).s("m-1").bytes("asgn");
	} else if (key == KM_API_SYNC_GROUP) {
		if (v >= 1)
			f.b.i32(5);
		f.b.i16(0);
		f.bytes("asgn");
	} else if (key == KM_API_HEARTBEAT && req) {
		f.s("grp").b.i32(3);
		f.s("m-1");
		if (v >= 3)
			f.s("inst");
	} else if (key == KM_API_HEARTBEAT) {
		if (v >= 1)
			f.b.i32(5);
		f.b.i16(27);
	} else if (req) {
		f.s("grp");
		if (v < 3)
			f.s("m-1");
		else
			f.arr(2).s("m-1").s("inst").s("m-2").null();
	} else {
		if (v >= 1)
			f.b.i32(5);
		f.b.i16(0);
		if (v >= 3) {
			f.arr(2).s("m-1").s("inst").b.i16(0);
			f.s("m-2").null().b.i16(25);
		}
	}
	return f.b.b;
}

static Bytes GoldenOther(int16_t key, bool req, int16_t v)
{
	F f{B(), km_proto_is_flexible(key, v)};
	if (key == KM_API_FIND_COORDINATOR && req) {
		f.s("grp");
		if (v >= 1)
			f.b.u8(0);
	} else if (key == KM_API_FIND_COORDINATOR) {
		if (v >= 1)
			f.b.i32(5);
		f.b.i16(0);
		if (v >= 1)
			f.null();
		f.b.i32(2);
		f.s("localhost").b.i32(9092);
	} else if (key == KM_API_DESCRIBE_GROUPS && req) {
		f.arr(1).s("grp");
		if (v >= 3)
			f.b.u8(1);
	} else if (key == KM_API_DESCRIBE_GROUPS) {
		if (v >= 1)
			f.b.i32(5);
		f.arr(1).b.i16(0);
		f.s("grp").s("Stable").s("consumer").s("range").arr(1);
		f.s("m-1");
		if (v >= 4)
			f.s("inst");
		f.s("rdkafka").s("/127.0.0.1").bytes("md").bytes("asgn");
		if (v >= 3)
			f.b.i32(8);
	} else if (key == KM_API_OFFSET_DELETE && req) {
		f.s("grp").arr(1).s("events").arr(2).b.i32(0).i32(1);
	} else if (key == KM_API_OFFSET_DELETE) {
		f.b.i16(0).i32(5);
		f.arr(1).s("events").arr(2).b.i32(0).i16(0).i32(1).i16(86);
	} else if (key == KM_API_DELETE_GROUPS && req) {
		f.arr(1).s("grp").tags();
	} else if (key == KM_API_DELETE_GROUPS) {
		f.b.i32(5);
		f.arr(2).s("grp").b.i16(0);
		f.tags().s("busy").b.i16(68);
		f.tags().tags();
	} else if (req) {
		if (v >= 4)
			f.arr(1).s("Stable");
		if (v >= 5)
			f.arr(1).s("classic");
		f.tags();
	} else {
		if (v >= 1)
			f.b.i32(5);
		f.b.i16(0);
		f.arr(1).s("grp").s("consumer");
		if (v >= 4)
			f.s("Stable");
		if (v >= 5)
			f.s("classic");
		f.tags().tags();
	}
	return f.b.b;
}

Bytes Golden(int16_t key, bool req, int16_t v)
{
	switch (key) {
	case KM_API_OFFSET_COMMIT:
	case KM_API_OFFSET_FETCH:
		return GoldenOffsets(key, req, v);
	case KM_API_JOIN_GROUP:
	case KM_API_SYNC_GROUP:
	case KM_API_HEARTBEAT:
	case KM_API_LEAVE_GROUP:
		return GoldenJoin(key, req, v);
	}
	return GoldenOther(key, req, v);
}

Bytes EncodeSample(int16_t key, bool req, int16_t v)
{
	static Store s;
	uint8_t buf[4096];
	km_wire_wr w;

	Sample(&s, key, req, v);
	km_wire_wr_init(&w, buf, sizeof(buf));
	if (Encode(&w, &s, key, req, v) != 0)
		return {};
	return Bytes(buf, buf + w.pos);
}

} // namespace gt
