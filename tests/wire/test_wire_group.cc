// Goal: the consumer-group codecs (kafka/proto_group.h) write exactly the
// bytes Kafka's schemas define, read them back, and refuse hostile input
// with the precise wire error without ever reading out of bounds.
// Method: a sample message per (API, direction) with every field set
// (group_util.cc); its golden body is written field by field from the
// schemas. For every version: encode == golden, decode (from a chain cut
// into one-byte segments) and re-encode gives the same bytes, every
// truncation point gives KM_EWIRETRUNC. Then hand-made cases: defaults of
// absent fields, null arrays, unknown tags skipped, capacities, long ids.
#include <gtest/gtest.h>

#include "group_util.h"

namespace {

using wt::B;
using wt::Bytes;
using wt::Name;

struct Rd {
	wt::Chain ch;
	km_wire_rd r;
	explicit Rd(const Bytes &b, bool bytewise = false,
		    uint32_t len = UINT32_MAX)
		: ch(bytewise ? wt::Chain::Bytewise(b) : wt::Chain(b, {}))
	{
		km_wire_rd_init(&r, ch.get(), km_chain_start(ch.get()),
				len == UINT32_MAX ? (uint32_t)b.size() : len,
				&km_wire_limits_default);
	}
};

std::string What(int16_t key, bool req, int16_t v)
{
	return std::to_string(key) + (req ? " req v" : " resp v") +
	       std::to_string(v);
}

template <typename Fn> void ForAll(Fn fn)
{
	for (int16_t key : gt::kKeys) {
		km_api_range vr;
		ASSERT_EQ(0, km_proto_versions(key, &vr));
		for (int16_t v = vr.min_version; v <= vr.max_version; v++)
			for (bool req : {true, false})
				fn(key, req, v);
	}
}

// (ListGroups v5, above librdkafka's 4, is what Kafka 4.x's Admin client asks.)
TEST(WireGroup, VersionsAreLibrdkafkas)
{
	const int want[][3] = {{8, 7, 8}, {9, 7, 6}, {10, 2, 3}, {11, 5, 6},
			       {12, 3, 4}, {13, 3, 4}, {14, 3, 4}, {15, 4, 5},
			       {16, 5, 3}};
	for (auto &k : want) {
		km_api_range r;
		ASSERT_EQ(0, km_proto_versions((int16_t)k[0], &r));
		EXPECT_EQ(0, r.min_version);
		EXPECT_EQ(k[1], r.max_version) << k[0];
		EXPECT_FALSE(km_proto_is_flexible((int16_t)k[0],
						  (int16_t)(k[2] - 1)));
		EXPECT_TRUE(km_proto_is_flexible((int16_t)k[0], (int16_t)k[2]));
	}
	EXPECT_STREQ("REBALANCE_IN_PROGRESS", km_kerr_name(27));
	EXPECT_STREQ("UNSTABLE_OFFSET_COMMIT", km_kerr_name(88));
	EXPECT_STREQ("FENCED_INSTANCE_ID", km_kerr_name(82));
	EXPECT_STREQ("OFFSET_METADATA_TOO_LARGE", km_kerr_name(12));
	EXPECT_STREQ("GROUP_ID_NOT_FOUND", km_kerr_name(69));
}

TEST(WireGroup, EncodeIsGoldenAtEveryVersion)
{
	int n = 0;
	ForAll([&](int16_t key, bool req, int16_t v) {
		Bytes got = gt::EncodeSample(key, req, v);
		Bytes want = gt::Golden(key, req, v);
		// Only ListGroups v0-2 requests have an empty body.
		if (!(key == KM_API_LIST_GROUPS && req && v < 3)) {
			ASSERT_FALSE(got.empty()) << What(key, req, v);
		}
		EXPECT_EQ(wt::Hex(want.data(), want.size()),
			  wt::Hex(got.data(), got.size()))
			<< What(key, req, v);
		n++;
	});
	EXPECT_EQ(2 * (8 + 8 + 3 + 6 + 4 + 4 + 4 + 5 + 6 + 3 + 1), n);
}

TEST(WireGroup, RoundTripAtEveryVersion)
{
	ForAll([&](int16_t key, bool req, int16_t v) {
		Bytes golden = gt::Golden(key, req, v);
		auto *s = new gt::Store();
		Rd a(golden, true);
		ASSERT_EQ(0, gt::Decode(&a.r, s, key, req, v))
			<< What(key, req, v);
		s->Own(a.ch.get(), key, req);
		uint8_t buf[4096];
		km_wire_wr w;
		km_wire_wr_init(&w, buf, sizeof(buf));
		ASSERT_EQ(0, gt::Encode(&w, s, key, req, v)) << What(key, req, v);
		EXPECT_EQ(wt::Hex(golden.data(), golden.size()),
			  wt::Hex(buf, w.pos))
			<< What(key, req, v);
		delete s;
	});
}

TEST(WireGroup, EveryTruncationIsTrunc)
{
	ForAll([&](int16_t key, bool req, int16_t v) {
		Bytes golden = gt::Golden(key, req, v);
		auto *s = new gt::Store();
		for (uint32_t len = 0; len < golden.size(); len++) {
			Bytes cut(golden.begin(), golden.begin() + len);
			Rd a(cut, true);
			EXPECT_EQ(KM_EWIRETRUNC, gt::Decode(&a.r, s, key, req, v))
				<< What(key, req, v) << " cut at " << len;
			EXPECT_LE(a.r.pos, len);
		}
		// One byte more is trailing.
		Bytes more = golden;
		more.push_back(0);
		Rd b(more);
		EXPECT_EQ(KM_EWIRETRAILING, gt::Decode(&b.r, s, key, req, v))
			<< What(key, req, v);
		delete s;
	});
}

TEST(WireGroup, CapacityOverflow)
{
	struct Case {
		int16_t key;
		bool req;
		int16_t v;
	} cases[] = {
		{KM_API_OFFSET_COMMIT, true, 7}, {KM_API_OFFSET_COMMIT, false, 3},
		{KM_API_OFFSET_FETCH, true, 7},	 {KM_API_OFFSET_FETCH, false, 6},
		{KM_API_JOIN_GROUP, true, 5},	 {KM_API_JOIN_GROUP, false, 5},
		{KM_API_LEAVE_GROUP, true, 3},	 {KM_API_LEAVE_GROUP, false, 3},
		{KM_API_SYNC_GROUP, true, 3},	 {KM_API_DESCRIBE_GROUPS, true, 4},
		{KM_API_DESCRIBE_GROUPS, false, 4}, {KM_API_LIST_GROUPS, true, 4},
		{KM_API_LIST_GROUPS, false, 4},
	};
	for (const Case &c : cases) {
		Bytes g = gt::Golden(c.key, c.req, c.v);
		auto *s = new gt::Store();
		s->Wire(1);
		Rd a(g);
		int rc = gt::Decode(&a.r, s, c.key, c.req, c.v);
		// Every sample has two items in some array, or one where 0 fits.
		if (rc == 0) {
			s->Wire(0);
			Rd b(g);
			rc = gt::Decode(&b.r, s, c.key, c.req, c.v);
		}
		EXPECT_EQ(KM_EWIRECAPACITY, rc) << What(c.key, c.req, c.v);
		delete s;
	}
}

TEST(WireGroup, AbsentFieldsReadAsDefaults)
{
	gt::Store s;
	Rd a(gt::Golden(KM_API_OFFSET_COMMIT, true, 0));
	ASSERT_EQ(0, km_offcommit_req_decode(&a.r, 0, &s.ocq));
	EXPECT_EQ(-1, s.ocq.generation_id);
	EXPECT_STREQ("", s.ocq.member_id.s);
	EXPECT_EQ(-1, s.ocq.group_instance_id.len);
	EXPECT_EQ(-1, s.ocq.retention_time_ms);
	ASSERT_EQ(2u, s.ocq.n_parts);
	EXPECT_EQ(-1, s.ocq_parts[0].committed_leader_epoch);
	EXPECT_EQ(-1, s.ocq_parts[0].commit_timestamp);
	EXPECT_EQ(2, s.ocq_parts[0].metadata.len);
	EXPECT_EQ(-1, s.ocq_parts[1].metadata.len);

	Rd b(gt::Golden(KM_API_OFFSET_COMMIT, true, 1));
	ASSERT_EQ(0, km_offcommit_req_decode(&b.r, 1, &s.ocq));
	EXPECT_EQ(1000, s.ocq_parts[0].commit_timestamp);
	EXPECT_EQ(3, s.ocq.generation_id);

	Rd c(gt::Golden(KM_API_JOIN_GROUP, false, 0));
	ASSERT_EQ(0, km_joingroup_resp_decode(&c.r, 0, &s.jgp));
	EXPECT_EQ(0, s.jgp.throttle_time_ms);
	EXPECT_EQ(3, s.jgp.generation_id);
	ASSERT_EQ(2u, s.jgp.n_members);
	EXPECT_EQ(-1, s.members[0].group_instance_id.len);

	Rd d(gt::Golden(KM_API_DESCRIBE_GROUPS, false, 2));
	ASSERT_EQ(0, km_descgroups_resp_decode(&d.r, 2, &s.dgp));
	EXPECT_EQ(KM_GROUP_AUTH_OPS_UNSET, s.dgroups[0].authorized_operations);
	EXPECT_STREQ("rdkafka", s.dmembers[0].client_id.s);

	Rd e(gt::Golden(KM_API_LIST_GROUPS, false, 3));
	ASSERT_EQ(0, km_listgroups_resp_decode(&e.r, 3, &s.lsp));
	EXPECT_STREQ("", s.lgroups[0].group_state.s);
	EXPECT_STREQ("grp", s.lgroups[0].group_id.s);

	Rd f(gt::Golden(KM_API_OFFSET_FETCH, false, 1));
	ASSERT_EQ(0, km_offfetch_resp_decode(&f.r, 1, &s.ofp));
	EXPECT_EQ(0, s.ofp.error_code);
	EXPECT_EQ(-1, s.ofp_parts[0].committed_leader_epoch);
	EXPECT_EQ(42, s.ofp_parts[0].committed_offset);
	EXPECT_EQ("@30:6d64", wt::DumpSpan(f.ch.get(),
					     s.ofp_parts[0].metadata.span));
}

TEST(WireGroup, OffsetFetchNullTopicsMeanAll)
{
	gt::Store s;
	for (int16_t v : {2, 5, 6, 7}) {
		bool flex = v >= 6;
		B b;
		flex ? b.cstr("grp").uvar(0) : b.str("grp").i32(-1);
		if (v >= 7)
			b.u8(0);
		if (flex)
			b.u8(0);
		Rd a(b.b);
		ASSERT_EQ(0, km_offfetch_req_decode(&a.r, v, &s.ofq)) << v;
		EXPECT_TRUE(s.ofq.all_topics);
		EXPECT_EQ(0u, s.ofq.n_topics);
		uint8_t buf[64];
		km_wire_wr w;
		km_wire_wr_init(&w, buf, sizeof(buf));
		ASSERT_EQ(0, km_offfetch_req_encode(&w, v, &s.ofq));
		EXPECT_EQ(wt::Hex(b.b.data(), b.b.size()), wt::Hex(buf, w.pos));
	}
	// v0-1 have no null Topics: refused both ways.
	Bytes v1 = B().str("grp").i32(-1).b;
	Rd a(v1);
	EXPECT_EQ(KM_EWIRENEGLEN, km_offfetch_req_decode(&a.r, 1, &s.ofq));
	s.ofq.all_topics = true;
	uint8_t buf[64];
	km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(KM_EWIREVALUE, km_offfetch_req_encode(&w, 1, &s.ofq));
	// Null arrays where the schema does not allow them.
	Rd c(B().str("grp").i32(30000).str("").str("consumer").i32(-1).b);
	EXPECT_EQ(KM_EWIRENEGLEN, km_joingroup_req_decode(&c.r, 0, &s.jgq));
	Rd d(B().i32(-1).b);
	EXPECT_EQ(KM_EWIRENEGLEN, km_descgroups_req_decode(&d.r, 0, &s.dgq));
}

TEST(WireGroup, UnknownTagsAreSkipped)
{
	gt::Store s;
	// ListGroups v4 request: StatesFilter ["Stable"], then a tag
	// section with two unknown tags.
	Bytes lg = B().uvar(2).cstr("Stable").uvar(2).uvar(0).uvar(3)
			   .raw("abc").uvar(9).uvar(0).b;
	Rd a(lg, true);
	ASSERT_EQ(0, km_listgroups_req_decode(&a.r, 4, &s.lsq));
	ASSERT_EQ(1u, s.lsq.n_states);
	EXPECT_STREQ("Stable", s.names[0].s);
	// OffsetFetch v6 response, tags at partition, topic and top level.
	Bytes of = B().i32(0).uvar(2).cstr("events").uvar(2).i32(0).i64(9)
			   .i32(1).uvar(1).i16(0).uvar(1).uvar(7).uvar(1).u8(1)
			   .uvar(1).uvar(100).uvar(0).i16(0).uvar(1).uvar(0)
			   .uvar(2).raw("zz").b;
	Rd b(of, true);
	ASSERT_EQ(0, km_offfetch_resp_decode(&b.r, 6, &s.ofp));
	EXPECT_EQ(9, s.ofp_parts[0].committed_offset);
	EXPECT_EQ(0, s.ofp_parts[0].metadata.len);
	// A tag whose size runs past the body is truncated.
	Bytes bad = B().uvar(1).uvar(0).uvar(9).raw("ab").b;
	Rd c(bad);
	EXPECT_EQ(KM_EWIRETRUNC, km_listgroups_req_decode(&c.r, 3, &s.lsq));
	// Too many tags.
	B many;
	many.uvar(KM_WIRE_TAGS_MAX_DEFAULT + 1);
	for (uint32_t i = 0; i <= KM_WIRE_TAGS_MAX_DEFAULT; i++)
		many.uvar(i).uvar(0);
	Rd d(many.b);
	EXPECT_EQ(KM_EWIRETAGS, km_listgroups_req_decode(&d.r, 3, &s.lsq));
}

TEST(WireGroup, LongIdsAreRefusedAndLongMetadataKept)
{
	gt::Store s;
	// A member id made from a 230-byte client id: over 255 bytes.
	std::string member(230, 'c');
	member += "-0123456789abcdef0123456789abcdef0123";
	ASSERT_GT(member.size(), (size_t)KM_WIRE_NAME_BYTES_MAX);
	Bytes hb = B().str("grp").i32(1).str(member).b;
	Rd a(hb);
	EXPECT_EQ(KM_EWIRESTRLEN, km_heartbeat_req_decode(&a.r, 0, &s.hbq));
	std::string ok(KM_GROUP_CLIENT_ID_BYTES_MAX, 'c');
	ok += "-0123456789abcdef0123456789abcdef0123";
	EXPECT_EQ((size_t)KM_WIRE_NAME_BYTES_MAX, ok.size());
	Rd b(B().str("grp").i32(1).str(ok).b);
	EXPECT_EQ(0, km_heartbeat_req_decode(&b.r, 0, &s.hbq));
	// Offset metadata of 5000 bytes comes back as a span.
	std::string md(5000, 'm');
	Bytes oc = B().str("grp").i32(1).str("events").i32(1).i32(0).i64(1)
			   .str(md).b;
	Rd c(oc, false);
	ASSERT_EQ(0, km_offcommit_req_decode(&c.r, 0, &s.ocq));
	EXPECT_EQ(5000, s.ocq_parts[0].metadata.len);
	EXPECT_EQ(5000, s.ocq_parts[0].metadata.span.len);
	// Lengths below -1 and overlong compact strings.
	Rd d(B().str("grp").i32(1).str("events").i32(1).i32(0).i64(1).i16(-2).b);
	EXPECT_EQ(KM_EWIRENEGLEN, km_offcommit_req_decode(&d.r, 0, &s.ocq));
	Rd e(B().cstr("grp").uvar(2).cstr("t").uvar(2).i32(0).i64(1).i32(-1)
		     .uvar(40000).b);
	EXPECT_EQ(KM_EWIRESTRLEN, km_offfetch_resp_decode(&e.r, 6, &s.ofp));
	// FindCoordinator's ErrorMessage is only logged: cut, not refused.
	std::string msg(400, 'e');
	Rd f(B().i32(0).i16(15).str(msg).i32(-1).str("").i32(-1).b);
	ASSERT_EQ(0, km_findcoord_resp_decode(&f.r, 1, &s.fcp));
	EXPECT_EQ(KM_WIRE_NAME_BYTES_MAX, s.fcp.error_message.len);
	EXPECT_EQ(KM_KERR_COORDINATOR_NOT_AVAILABLE, s.fcp.error_code);
}

TEST(WireGroup, EncoderRefusals)
{
	gt::Store s;
	uint8_t buf[256];
	km_wire_wr w;
	auto Fresh = [&] { km_wire_wr_init(&w, buf, sizeof(buf)); };
	gt::Sample(&s, KM_API_FIND_COORDINATOR, true, 0);
	s.fcq.key_type = 1;
	Fresh();
	EXPECT_EQ(KM_EWIREVALUE, km_findcoord_req_encode(&w, 0, &s.fcq));
	Fresh();
	EXPECT_EQ(0, km_findcoord_req_encode(&w, 1, &s.fcq));
	gt::Sample(&s, KM_API_LEAVE_GROUP, true, 3);
	Fresh();
	EXPECT_EQ(KM_EWIREVALUE, km_leavegroup_req_encode(&w, 2, &s.lgq));
	gt::Sample(&s, KM_API_LIST_GROUPS, true, 4);
	Fresh();
	EXPECT_EQ(KM_EWIREVALUE, km_listgroups_req_encode(&w, 3, &s.lsq));
	gt::Sample(&s, KM_API_LIST_GROUPS, true, 5); // a types filter at v4
	Fresh();
	EXPECT_EQ(KM_EWIREVALUE, km_listgroups_req_encode(&w, 4, &s.lsq));
	// Versions out of range, both directions, before any byte.
	Fresh();
	EXPECT_EQ(KM_EWIREVERSION, km_joingroup_req_encode(&w, 6, &s.jgq));
	EXPECT_EQ(0u, w.pos);
	Rd a(B().b);
	EXPECT_EQ(KM_EWIREVERSION, km_syncgroup_resp_decode(&a.r, 4, &s.sgp));
	Rd b(B().b);
	EXPECT_EQ(KM_EWIREVERSION, km_offfetch_req_decode(&b.r, 8, &s.ofq));
	// Buffer full.
	gt::Sample(&s, KM_API_DESCRIBE_GROUPS, false, 4);
	km_wire_wr_init(&w, buf, 20);
	EXPECT_EQ(KM_ENOSPACE, km_descgroups_resp_encode(&w, 4, &s.dgp));
}

// A whole request frame through the header path: flexible header v2 for
// OffsetFetch v7 and ListGroups v4, v1 below.
TEST(WireGroup, FramesCarryTheRightHeaders)
{
	for (auto kv : {std::pair<int16_t, int16_t>{KM_API_OFFSET_FETCH, 7},
			{KM_API_OFFSET_FETCH, 5}, {KM_API_LIST_GROUPS, 4},
			{KM_API_LIST_GROUPS, 2}, {KM_API_JOIN_GROUP, 5}}) {
		uint8_t buf[512];
		km_wire_wr w;
		gt::Store s;
		km_wire_wr_init(&w, buf, sizeof(buf));
		km_reqhdr h = {kv.first, kv.second, 9, Name("rdkafka"), false};
		ASSERT_EQ(0, km_proto_req_begin(&w, &h));
		size_t body_at = w.pos;
		gt::Sample(&s, kv.first, true, kv.second);
		ASSERT_EQ(0, gt::Encode(&w, &s, kv.first, true, kv.second));
		ASSERT_GT(km_wire_wr_frame_end(&w), 0);
		bool flex = km_proto_is_flexible(kv.first, kv.second);
		EXPECT_EQ(4u + 8 + 9 + (flex ? 1 : 0), body_at);
		Bytes f(buf, buf + w.pos);
		wt::Chain ch = wt::Chain::Bytewise(f);
		km_chain_cur cur = km_chain_start(ch.get());
		km_chain_advance(ch.get(), &cur, 4);
		km_wire_rd r;
		km_wire_rd_init(&r, ch.get(), cur, (uint32_t)f.size() - 4,
				&km_wire_limits_default);
		km_reqhdr got;
		ASSERT_EQ(0, km_reqhdr_decode(&r, &got));
		EXPECT_EQ(9, got.correlation_id);
		EXPECT_EQ(0, gt::Decode(&r, &s, kv.first, true, kv.second));
	}
}

} // namespace
