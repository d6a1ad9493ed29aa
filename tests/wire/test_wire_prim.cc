// Goal: the wire primitives and framing read exactly what Kafka's types
// say, wherever a chain breaks, and refuse every hostile length with its own
// code; the writer never writes past its buffer; the version table and the
// headers follow the schemas (incl. the ApiVersions header exception).
// Method: hand-built byte strings (wt::B) read at every split point; hostile
// lengths, counts, varints and tag sections, one code each; writers given
// every capacity below what a message needs, with guard bytes after the
// buffer; a real RecordBatch carried in a Fetch response and handed from
// the records span to km_batch_parse.
#include <gtest/gtest.h>

#include <set>

#include "common/km_limits.h"
#include "kafka/batch.h"
#include "kafka/records.h"
#include "wire_util.h"

namespace {

using wt::B;
using wt::Bytes;

struct Rd {
	wt::Chain ch;
	km_wire_rd r;
	Rd(const Bytes &b, std::vector<size_t> cuts = {},
	   const km_wire_limits *lim = &km_wire_limits_default)
		: ch(b, cuts)
	{
		km_wire_rd_init(&r, ch.get(), km_chain_start(ch.get()),
				(uint32_t)b.size(), lim);
	}
};

TEST(WirePrim, FixedWidthAtEverySplit)
{
	B b;
	uint8_t uuid[16];
	for (int i = 0; i < 16; i++)
		uuid[i] = (uint8_t)(0xa0 + i);
	b.u8(0xfe).i16(-2).i32(0x12345678).i64(-5).u8(1).u8(7)
		.raw(Bytes(uuid, uuid + 16));
	for (size_t cut = 0; cut <= b.b.size(); cut++) {
		Rd t(b.b, {cut});
		int8_t i8;
		int16_t i16;
		int32_t i32;
		int64_t i64;
		bool t1, t2;
		uint8_t u[16];
		EXPECT_EQ(0, km_wire_rd_i8(&t.r, &i8));
		EXPECT_EQ(0, km_wire_rd_i16(&t.r, &i16));
		EXPECT_EQ(0, km_wire_rd_i32(&t.r, &i32));
		EXPECT_EQ(0, km_wire_rd_i64(&t.r, &i64));
		EXPECT_EQ(0, km_wire_rd_bool(&t.r, &t1));
		EXPECT_EQ(0, km_wire_rd_bool(&t.r, &t2));
		EXPECT_EQ(0, km_wire_rd_uuid(&t.r, u));
		EXPECT_EQ(-2, i8);
		EXPECT_EQ(-2, i16);
		EXPECT_EQ(0x12345678, i32);
		EXPECT_EQ(-5, i64);
		EXPECT_TRUE(t1);
		EXPECT_TRUE(t2) << "any non-zero byte is true";
		EXPECT_EQ(0, memcmp(u, uuid, 16));
		EXPECT_EQ(0, km_wire_rd_end(&t.r));
		// Reading past the region is a truncation, and sticky.
		EXPECT_EQ(KM_EWIRETRUNC, km_wire_rd_i8(&t.r, &i8));
		EXPECT_EQ(0, i8);
		EXPECT_EQ(KM_EWIRETRUNC, km_wire_rd_end(&t.r));
	}
}

TEST(WirePrim, RegionBoundsReadsNotTheChain)
{
	// The chain holds more than the region: the reader stops at len.
	B b;
	b.i32(1).i32(2);
	wt::Chain ch(b.b, {2});
	km_wire_rd r;
	int32_t v;
	km_wire_rd_init(&r, ch.get(), km_chain_start(ch.get()), 6,
			&km_wire_limits_default);
	EXPECT_EQ(0, km_wire_rd_i32(&r, &v));
	EXPECT_EQ(KM_EWIRETRUNC, km_wire_rd_i32(&r, &v));
	EXPECT_EQ(4u, r.pos) << "a failed read does not move";
	// A region longer than the chain (frame not all there) is cut too.
	int64_t v64;
	km_wire_rd_init(&r, ch.get(), km_chain_start(ch.get()), 12,
			&km_wire_limits_default);
	EXPECT_EQ(0, km_wire_rd_i64(&r, &v64));
	EXPECT_EQ(KM_EWIRETRUNC, km_wire_rd_i32(&r, &v));
}

TEST(WirePrim, UnsignedVarints)
{
	const uint32_t values[] = {0, 1, 127, 128, 16383, 16384, 1u << 21,
				   (1u << 28) - 1, 1u << 28, UINT32_MAX};
	for (uint32_t v : values) {
		B b;
		b.uvar(v);
		for (size_t cut = 0; cut <= b.b.size(); cut++) {
			Rd t(b.b, {cut});
			uint32_t got = 1;
			ASSERT_EQ(0, km_wire_rd_uvarint(&t.r, &got)) << v;
			EXPECT_EQ(v, got);
			EXPECT_EQ(0, km_wire_rd_end(&t.r));
		}
		// Every cut inside the number is a truncation.
		for (size_t k = 0; k < b.b.size(); k++) {
			Rd t(Bytes(b.b.begin(), b.b.begin() + k));
			uint32_t got;
			EXPECT_EQ(KM_EWIRETRUNC, km_wire_rd_uvarint(&t.r, &got));
		}
	}
	// "Varint is too long": a sixth byte, or bits past 32.
	Rd six(Bytes{0x80, 0x80, 0x80, 0x80, 0x80, 0x01});
	Rd big(Bytes{0xff, 0xff, 0xff, 0xff, 0x1f});
	uint32_t got;
	EXPECT_EQ(KM_EWIREVARINT, km_wire_rd_uvarint(&six.r, &got));
	EXPECT_EQ(KM_EWIREVARINT, km_wire_rd_uvarint(&big.r, &got));
	EXPECT_EQ(0u, got);
}

TEST(WirePrim, Strings)
{
	km_wire_name n;
	{
		Rd t(B().str("abc").i16(-1).cstr("xy").u8(0).b, {3});
		EXPECT_EQ(0, km_wire_rd_name(&t.r, false, false, &n));
		EXPECT_STREQ("abc", n.s);
		EXPECT_EQ(0, km_wire_rd_name(&t.r, false, true, &n));
		EXPECT_EQ(-1, n.len);
		EXPECT_EQ(0, km_wire_rd_name(&t.r, true, false, &n));
		EXPECT_STREQ("xy", n.s);
		EXPECT_EQ(0, km_wire_rd_name(&t.r, true, true, &n));
		EXPECT_EQ(-1, n.len) << "compact 0 = null";
		EXPECT_EQ(0, km_wire_rd_end(&t.r));
	}
	struct Case {
		Bytes b;
		bool flex, nullable;
		int want;
	} cases[] = {
		{B().i16(-1).b, false, false, KM_EWIRENEGLEN},
		{B().i16(-2).b, false, true, KM_EWIRENEGLEN},
		{B().i16(INT16_MIN).b, false, true, KM_EWIRENEGLEN},
		{B().u8(0).b, true, false, KM_EWIRENEGLEN},
		{B().str(std::string(256, 'x')).b, false, false, KM_EWIRESTRLEN},
		{B().i16(30000).b, false, false, KM_EWIRESTRLEN},
		{B().uvar(32769).b, true, false, KM_EWIRESTRLEN},
		{B().uvar(UINT32_MAX).b, true, false, KM_EWIRESTRLEN},
		{B().i16(10).raw("abcde").b, false, false, KM_EWIRETRUNC},
		{B().uvar(11).raw("abcde").b, true, false, KM_EWIRETRUNC},
		{B().u8(0x80).b, true, false, KM_EWIRETRUNC},
		{B().u8(1).b, false, false, KM_EWIRETRUNC},
	};
	for (const Case &c : cases) {
		Rd t(c.b);
		EXPECT_EQ(c.want, km_wire_rd_name(&t.r, c.flex, c.nullable, &n))
			<< wt::Hex(c.b.data(), c.b.size());
		EXPECT_EQ(-1, n.len);
		EXPECT_EQ(c.want, t.r.err);
	}
}

TEST(WirePrim, LongClientIdIsCutNotRefused)
{
	std::string id(300, 'c');
	Rd t(B().str(id).i32(7).b, {100});
	km_wire_name n;
	bool cut = false;
	int32_t after;
	ASSERT_EQ(0, km_wire_rd_name_trunc(&t.r, false, true, &n, &cut));
	EXPECT_TRUE(cut);
	EXPECT_EQ(KM_WIRE_NAME_BYTES_MAX, n.len);
	EXPECT_EQ(std::string(KM_WIRE_NAME_BYTES_MAX, 'c'), n.s);
	ASSERT_EQ(0, km_wire_rd_i32(&t.r, &after));
	EXPECT_EQ(7, after) << "the reader is past the whole string";
}

TEST(WirePrim, BytesStayInPlace)
{
	Bytes payload(1000);
	for (size_t i = 0; i < payload.size(); i++)
		payload[i] = (uint8_t)i;
	B b;
	b.i32(1000).raw(payload).i32(-1).uvar(4).raw("abc").u8(0);
	for (size_t cut : {0, 3, 4, 5, 500, 1004, 1010}) {
		Rd t(b.b, {cut});
		km_wire_span s;
		Bytes got(1000);
		ASSERT_EQ(0, km_wire_rd_bytes(&t.r, false, false, &s));
		EXPECT_EQ(4u, s.off);
		EXPECT_EQ(1000, s.len);
		EXPECT_EQ(1000u, km_wire_span_copy(t.ch.get(), &s, got.data(),
						   got.size()));
		EXPECT_EQ(payload, got);
		ASSERT_EQ(0, km_wire_rd_bytes(&t.r, false, true, &s));
		EXPECT_EQ(-1, s.len);
		ASSERT_EQ(0, km_wire_rd_bytes(&t.r, true, false, &s));
		EXPECT_EQ(3, s.len);
		ASSERT_EQ(0, km_wire_rd_bytes(&t.r, true, true, &s));
		EXPECT_EQ(-1, s.len);
		EXPECT_EQ(0, km_wire_rd_end(&t.r));
	}
	struct Case {
		Bytes b;
		bool flex, nullable;
		int want;
	} cases[] = {
		{B().i32(-1).b, false, false, KM_EWIRENEGLEN},
		{B().i32(-2).b, false, true, KM_EWIRENEGLEN},
		{B().i32(INT32_MIN).b, false, true, KM_EWIRENEGLEN},
		{B().i32(INT32_MAX).b, false, true, KM_EWIRETRUNC},
		{B().i32(5).raw("abcd").b, false, true, KM_EWIRETRUNC},
		{B().uvar(UINT32_MAX).b, true, true, KM_EWIRETRUNC},
		{B().u8(0).b, true, false, KM_EWIRENEGLEN},
		{B().i16(0).b, false, true, KM_EWIRETRUNC},
	};
	for (const Case &c : cases) {
		Rd t(c.b);
		km_wire_span s;
		EXPECT_EQ(c.want, km_wire_rd_bytes(&t.r, c.flex, c.nullable, &s))
			<< wt::Hex(c.b.data(), c.b.size());
		EXPECT_EQ(-1, s.len);
	}
}

TEST(WirePrim, ArrayCounts)
{
	km_wire_limits lim = km_wire_limits_default;
	lim.array_count_max = 3;
	struct Case {
		Bytes b;
		bool flex, nullable;
		int want;
		int32_t count;
	} cases[] = {
		{B().i32(3).raw("abc").b, false, false, 0, 3},
		{B().i32(-1).b, false, true, 0, -1},
		{B().u8(0).b, true, true, 0, -1},
		{B().u8(4).raw("abc").b, true, false, 0, 3},
		{B().i32(-1).b, false, false, KM_EWIRENEGLEN, 0},
		{B().i32(-7).b, false, true, KM_EWIRENEGLEN, 0},
		{B().u8(0).b, true, false, KM_EWIRENEGLEN, 0},
		{B().i32(4).raw("abcd").b, false, false, KM_EWIREARRAY, 0},
		{B().i32(INT32_MAX).b, false, false, KM_EWIREARRAY, 0},
		{B().uvar(UINT32_MAX).b, true, false, KM_EWIREARRAY, 0},
		{B().i32(3).raw("ab").b, false, false, KM_EWIRETRUNC, 0},
	};
	for (const Case &c : cases) {
		Rd t(c.b, {}, &lim);
		int32_t n = 99;
		EXPECT_EQ(c.want, km_wire_rd_array(&t.r, c.flex, c.nullable, &n))
			<< wt::Hex(c.b.data(), c.b.size());
		EXPECT_EQ(c.count, n);
	}
	// The default bound: 100000.
	Rd t(B().i32(100001).raw(std::string(200000, 'x')).b);
	int32_t n;
	EXPECT_EQ(KM_EWIREARRAY, km_wire_rd_array(&t.r, false, false, &n));
}

TEST(WirePrim, TagSectionsSkipUnknownTags)
{
	B b;
	b.uvar(3).uvar(0).uvar(2).raw("ab").uvar(5).uvar(0).uvar(300)
		.uvar(200).raw(std::string(200, 't')).i32(42);
	for (size_t cut = 0; cut <= b.b.size(); cut += 3) {
		Rd t(b.b, {cut});
		int32_t after;
		ASSERT_EQ(0, km_wire_rd_tags(&t.r));
		ASSERT_EQ(0, km_wire_rd_i32(&t.r, &after));
		EXPECT_EQ(42, after);
	}
	km_wire_limits lim = km_wire_limits_default;
	lim.tags_max = 2;
	Rd over(b.b, {}, &lim);
	EXPECT_EQ(KM_EWIRETAGS, km_wire_rd_tags(&over.r));
	Rd size_past_end(B().uvar(1).uvar(0).uvar(10).raw("abc").b);
	EXPECT_EQ(KM_EWIRETRUNC, km_wire_rd_tags(&size_past_end.r));
	Rd bad_tag(B().uvar(1).raw(Bytes{0x80, 0x80, 0x80, 0x80, 0x80}).b);
	EXPECT_EQ(KM_EWIREVARINT, km_wire_rd_tags(&bad_tag.r));
	Rd huge_count(B().uvar(UINT32_MAX).b);
	EXPECT_EQ(KM_EWIRETAGS, km_wire_rd_tags(&huge_count.r));
}

TEST(WirePrim, ErrorsAreStickyAndFirstWins)
{
	Rd t(B().i16(-5).i32(1).b);
	km_wire_name n;
	int32_t v = 7;
	EXPECT_EQ(KM_EWIRENEGLEN, km_wire_rd_name(&t.r, false, false, &n));
	EXPECT_EQ(KM_EWIRENEGLEN, km_wire_rd_i32(&t.r, &v));
	EXPECT_EQ(0, v);
	EXPECT_EQ(KM_EWIRENEGLEN, km_wire_rd_fail(&t.r, KM_EWIRECAPACITY));
	EXPECT_EQ(KM_EWIRENEGLEN, km_wire_rd_end(&t.r));
	EXPECT_EQ(2u, t.r.pos);
}

TEST(WireFrame, SizePrefix)
{
	uint32_t size = 0;
	// Negative and oversized sizes are refused from the prefix alone.
	wt::Chain neg(B().i32(-1).b, {2});
	EXPECT_EQ(KM_EWIREFRAMELEN,
		  km_wire_frame_parse(neg.get(), km_chain_start(neg.get()),
				      1000, &size));
	wt::Chain big(B().i32(1001).b, {1});
	EXPECT_EQ(KM_EWIREFRAMEMAX,
		  km_wire_frame_parse(big.get(), km_chain_start(big.get()),
				      1000, &size));
	wt::Chain huge(B().i32(INT32_MAX).b, {});
	EXPECT_EQ(KM_EWIREFRAMEMAX,
		  km_wire_frame_parse(huge.get(), km_chain_start(huge.get()),
				      KM_WIRE_FRAME_BYTES_MAX_DEFAULT, &size));
	// Need more until the whole frame is there; the next frame is not
	// this one's business.
	Bytes two = B().i32(3).raw("abc").i32(0).b;
	for (size_t k = 0; k < 7; k++) {
		wt::Chain part(Bytes(two.begin(), two.begin() + k), {k / 2});
		EXPECT_EQ(0, km_wire_frame_parse(part.get(),
						 km_chain_start(part.get()),
						 1000, &size));
	}
	wt::Chain both(two, {5});
	EXPECT_EQ(7, km_wire_frame_parse(both.get(), km_chain_start(both.get()),
					 1000, &size));
	EXPECT_EQ(3u, size);
	km_chain_cur next = km_chain_start(both.get());
	km_chain_advance(both.get(), &next, 7);
	EXPECT_EQ(4, km_wire_frame_parse(both.get(), next, 1000, &size));
	EXPECT_EQ(0u, size);
}

// ---- writer ----

TEST(WireWriter, NeverWritesPastItsBuffer)
{
	// Encode a message into every capacity below what it needs: each
	// fails with KM_ENOSPACE and the guard bytes after it stay intact.
	km_wire_name topics[2] = {wt::Name("alpha"), wt::Name("beta")};
	km_metadata_req m = {topics, 2, 2, true, nullptr};
	uint8_t full[256];
	km_wire_wr w;
	km_wire_wr_init(&w, full, sizeof(full));
	ASSERT_EQ(0, km_metadata_req_encode(&w, 4, &m));
	size_t need = w.pos;
	for (size_t cap = 0; cap < need; cap++) {
		std::vector<uint8_t> buf(cap + 16, 0xee);
		km_wire_wr_init(&w, buf.data(), cap);
		EXPECT_EQ(KM_ENOSPACE, km_metadata_req_encode(&w, 4, &m));
		EXPECT_LE(w.pos, cap);
		for (size_t i = cap; i < cap + 16; i++)
			ASSERT_EQ(0xee, buf[i]) << cap;
	}
}

TEST(WireWriter, TypesAndRefusals)
{
	uint8_t buf[64];
	km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	km_wire_wr_uvarint(&w, 300);
	km_wire_wr_string(&w, true, true, nullptr, 0);
	km_wire_wr_string(&w, false, true, nullptr, 0);
	km_wire_wr_bytes(&w, false, true, nullptr, -1);
	km_wire_wr_array(&w, true, true, -1);
	km_wire_wr_tags(&w);
	ASSERT_EQ(0, w.err);
	EXPECT_EQ(wt::Hex(B().uvar(300).u8(0).i16(-1).i32(-1).u8(0).u8(0)
				  .b.data(), 11),
		  wt::Hex(buf, w.pos));
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(KM_EWIRENEGLEN, km_wire_wr_string(&w, false, false, nullptr, 0));
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(KM_EWIRESTRLEN, km_wire_wr_string(&w, false, false, "x", 40000));
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(KM_EWIRENEGLEN, km_wire_wr_array(&w, false, false, -1));
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(KM_EWIRENEGLEN, km_wire_wr_bytes(&w, false, false, nullptr, -1));
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(KM_ENOSPACE, km_wire_wr_external(&w, false, 10))
		<< "no gap table";
	km_wire_name longname;
	EXPECT_EQ(KM_EWIRESTRLEN, km_wire_name_set(&longname,
						   std::string(256, 'n').c_str()));
}

TEST(WireWriter, ExternalFieldsBecomeIovecs)
{
	uint8_t buf[64];
	km_wire_gap gaps[2];
	km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	km_wire_wr_set_gaps(&w, gaps, 2);
	ASSERT_EQ(0, km_wire_wr_frame_begin(&w));
	km_wire_wr_i16(&w, 1);
	EXPECT_EQ(0, km_wire_wr_external(&w, false, 3));
	EXPECT_EQ(1, km_wire_wr_external(&w, true, 2));
	EXPECT_EQ(KM_ENOSPACE, km_wire_wr_external(&w, false, 1));
	km_wire_wr_init(&w, buf, sizeof(buf));
	km_wire_wr_set_gaps(&w, gaps, 2);
	km_wire_wr_frame_begin(&w);
	km_wire_wr_i16(&w, 1);
	km_wire_wr_external(&w, false, 3);
	km_wire_wr_external(&w, true, 2);
	km_wire_wr_i8(&w, 9);
	ASSERT_EQ(4 + 2 + 4 + 3 + 1 + 2 + 1, km_wire_wr_frame_end(&w));
	iovec ext[2] = {{(void *)"abc", 3}, {(void *)"de", 2}};
	iovec out[8];
	int n = km_wire_wr_iovec(&w, ext, 2, out, 8);
	ASSERT_EQ(5, n);
	Bytes joined;
	for (int i = 0; i < n; i++)
		joined.insert(joined.end(), (uint8_t *)out[i].iov_base,
			      (uint8_t *)out[i].iov_base + out[i].iov_len);
	EXPECT_EQ(B().i32(13).i16(1).i32(3).raw("abc").u8(3).raw("de").u8(9).b,
		  joined);
	EXPECT_EQ(KM_ENOSPACE, km_wire_wr_iovec(&w, ext, 2, out, 4));
}

// ---- versions, headers, errors ----

TEST(WireProto, VersionTable)
{
	km_api_range all[KM_PROTO_APIS];
	ASSERT_EQ(KM_PROTO_APIS, km_proto_supported(all, KM_PROTO_APIS));
	EXPECT_EQ(KM_ENOSPACE, km_proto_supported(all, KM_PROTO_APIS - 1));
	/* Everything spoken is served, the group coordinator's APIs too. */
	const int want[][3] = {{0, 3, 7}, {1, 4, 11}, {2, 0, 9}, {3, 0, 12},
			       {8, 0, 7}, {9, 0, 7}, {10, 0, 2}, {11, 0, 5},
			       {12, 0, 3}, {13, 0, 3}, {14, 0, 3},
			       {15, 0, 4}, {16, 0, 5}, {17, 0, 1}, {18, 0, 3},
			       {19, 2, 7}, {20, 1, 6}, {21, 0, 2},
			       {22, 0, 4}, {24, 0, 3}, {25, 0, 4}, {26, 0, 4}, {28, 0, 4},
			       {32, 1, 4}, {36, 0, 2}, {37, 0, 3}, {42, 0, 2}, {47, 0, 0},
			       {60, 0, 2},
			       {KM_API_KMIRROR_BARRIER, 0, 0}};
	for (int i = 0; i < KM_PROTO_APIS; i++) {
		EXPECT_EQ(want[i][0], all[i].api_key);
		EXPECT_EQ(want[i][1], all[i].min_version);
		EXPECT_EQ(want[i][2], all[i].max_version);
	}
	EXPECT_EQ(KM_EWIREAPIKEY, km_proto_check(50, 1)) << "DescribeUserScramCredentials";
	EXPECT_EQ(0, km_proto_check(KM_API_OFFSET_FETCH, 7));
	EXPECT_EQ(KM_EWIREVERSION, km_proto_check(KM_API_OFFSET_FETCH, 8));
	EXPECT_EQ(KM_EWIREAPIKEY, km_proto_check(-1, 0));
	EXPECT_EQ(KM_EWIREAPIKEY, km_proto_check(KM_API_CONTROLLED_SHUTDOWN, 0));
	EXPECT_EQ(KM_EWIREVERSION, km_proto_check(KM_API_FETCH, 12));
	EXPECT_EQ(KM_EWIREVERSION, km_proto_check(KM_API_FETCH, 3));
	EXPECT_EQ(KM_EWIREVERSION, km_proto_check(KM_API_PRODUCE, -1));
	EXPECT_EQ(0, km_proto_check(KM_API_API_VERSIONS, 3));
	// Header versions, ApiVersions' exception included.
	EXPECT_EQ(2, km_proto_req_header_version(KM_API_API_VERSIONS, 3));
	EXPECT_EQ(0, km_proto_resp_header_version(KM_API_API_VERSIONS, 3));
	EXPECT_EQ(1, km_proto_req_header_version(KM_API_API_VERSIONS, 2));
	EXPECT_EQ(2, km_proto_req_header_version(KM_API_INIT_PRODUCER_ID, 2));
	EXPECT_EQ(1, km_proto_resp_header_version(KM_API_INIT_PRODUCER_ID, 2));
	EXPECT_EQ(1, km_proto_req_header_version(KM_API_INIT_PRODUCER_ID, 1));
	EXPECT_EQ(0, km_proto_resp_header_version(KM_API_INIT_PRODUCER_ID, 1));
	EXPECT_EQ(1, km_proto_req_header_version(KM_API_FETCH, 11));
	EXPECT_EQ(2, km_proto_req_header_version(KM_API_FETCH, 12));
	EXPECT_EQ(1, km_proto_resp_header_version(KM_API_METADATA, 9));
	EXPECT_EQ(0, km_proto_req_header_version(KM_API_CONTROLLED_SHUTDOWN, 0));
	EXPECT_EQ(1, km_proto_req_header_version(50, 2)) << "unknown: v1";
	EXPECT_EQ(1, km_proto_req_header_version(KM_API_DESCRIBE_CONFIGS, 3));
	EXPECT_EQ(2, km_proto_req_header_version(KM_API_DESCRIBE_CONFIGS, 4));
	EXPECT_EQ(1, km_proto_resp_header_version(KM_API_DESCRIBE_CONFIGS, 4));
	EXPECT_EQ(2, km_proto_req_header_version(KM_API_DESCRIBE_CLUSTER, 0));
	EXPECT_EQ(1, km_proto_resp_header_version(KM_API_DESCRIBE_CLUSTER, 0));
	EXPECT_EQ(KM_EWIREVERSION, km_proto_check(KM_API_DESCRIBE_CONFIGS, 0))
		<< "v0 left Kafka in 4.0";
	EXPECT_EQ(2, km_proto_req_header_version(KM_API_OFFSET_FETCH, 6));
	EXPECT_EQ(1, km_proto_resp_header_version(KM_API_OFFSET_FETCH, 6));
	EXPECT_EQ(1, km_proto_req_header_version(KM_API_OFFSET_FETCH, 5));
	EXPECT_EQ(2, km_proto_req_header_version(KM_API_LIST_GROUPS, 3));
	EXPECT_EQ(0, km_proto_resp_header_version(KM_API_LIST_GROUPS, 2));
	EXPECT_EQ(1, km_proto_req_header_version(KM_API_JOIN_GROUP, 5));
	EXPECT_TRUE(km_proto_is_flexible(KM_API_LIST_OFFSETS, 6));
	EXPECT_FALSE(km_proto_is_flexible(KM_API_LIST_OFFSETS, 5));
	EXPECT_TRUE(km_proto_is_flexible(KM_API_PRODUCE, 9));
	EXPECT_FALSE(km_proto_is_flexible(1234, 99));
}

// The front-end's log lines name APIs from the same table as the versions:
// every API served has ApiKeys.java's name, and a key outside it a fixed one.
TEST(WireProto, ApiNamesComeFromTheVersionTable)
{
	EXPECT_STREQ("Produce", km_proto_api_name(KM_API_PRODUCE));
	EXPECT_STREQ("Fetch", km_proto_api_name(KM_API_FETCH));
	EXPECT_STREQ("ApiVersions", km_proto_api_name(KM_API_API_VERSIONS));
	EXPECT_STREQ("OffsetCommit", km_proto_api_name(KM_API_OFFSET_COMMIT));
	EXPECT_STREQ("KmirrorBarrier",
		     km_proto_api_name(KM_API_KMIRROR_BARRIER));
	EXPECT_STREQ("ControlledShutdown",
		     km_proto_api_name(KM_API_CONTROLLED_SHUTDOWN));
	EXPECT_STREQ("unknown API", km_proto_api_name(50));
	EXPECT_STREQ("unknown API", km_proto_api_name(-1));
	km_api_range all[KM_PROTO_APIS];
	ASSERT_EQ(KM_PROTO_APIS, km_proto_supported(all, KM_PROTO_APIS));
	for (const km_api_range &a : all)
		EXPECT_STRNE("unknown API", km_proto_api_name(a.api_key))
			<< "key " << a.api_key;
}

// A server can answer what it cannot decode: the correlation id is there.
TEST(WireProto, UnknownKeysAndVersionsKeepTheHeader)
{
	// DescribeUserScramCredentials v2 (flexible in Kafka, unknown here):
	// read as v1.
	Bytes unknown = B().i16(50).i16(2).i32(77).str("cli").u8(0).b;
	Rd a(unknown);
	km_reqhdr h;
	EXPECT_EQ(KM_EWIREAPIKEY, km_reqhdr_decode(&a.r, &h));
	EXPECT_EQ(77, h.correlation_id);
	EXPECT_STREQ("cli", h.client_id.s);
	EXPECT_EQ(0, a.r.err) << "not sticky";
	EXPECT_EQ(13u, a.r.pos);
	// Fetch v12 is flexible: the header's tag section is read too.
	Bytes v12 = B().i16(1).i16(12).i32(78).i16(-1).uvar(1).uvar(0)
			    .uvar(1).u8(5).b;
	Rd b(v12);
	EXPECT_EQ(KM_EWIREVERSION, km_reqhdr_decode(&b.r, &h));
	EXPECT_EQ(78, h.correlation_id);
	EXPECT_EQ(-1, h.client_id.len);
	EXPECT_EQ(0, km_wire_rd_end(&b.r));
	// ApiVersions v4 (a newer client): also the version code.
	Rd c(B().i16(18).i16(4).i32(79).str("x").u8(0).uvar(1).raw("").b);
	EXPECT_EQ(KM_EWIREVERSION, km_reqhdr_decode(&c.r, &h));
	EXPECT_EQ(79, h.correlation_id);
	// A truncated header is a wire error, whatever the key.
	Rd d(B().i16(9).i16(8).i32(77).i16(5).raw("ab").b);
	EXPECT_EQ(KM_EWIRETRUNC, km_reqhdr_decode(&d.r, &h));
}

TEST(WireProto, ErrorCodesAreNamedAndDistinct)
{
	const int codes[] = {
		KM_EWIRETRUNC,	  KM_EWIRENEGLEN,   KM_EWIRESTRLEN,
		KM_EWIREARRAY,	  KM_EWIREVARINT,   KM_EWIRETAGS,
		KM_EWIREFRAMELEN, KM_EWIREFRAMEMAX, KM_EWIREAPIKEY,
		KM_EWIREVERSION,  KM_EWIRECAPACITY, KM_EWIRETRAILING,
		KM_EWIREVALUE,
	};
	std::set<std::string> seen;
	for (int code : codes) {
		EXPECT_LE(code, -10060);
		EXPECT_GT(code, KM_ELAST);
		std::string s = km_strerror(code);
		EXPECT_NE("unknown kmirror error", s) << code;
		EXPECT_TRUE(seen.insert(s).second) << s;
	}
	EXPECT_STREQ("UNSUPPORTED_VERSION", km_kerr_name(35));
	EXPECT_STREQ("NOT_LEADER_OR_FOLLOWER", km_kerr_name(6));
	EXPECT_STREQ("OUT_OF_ORDER_SEQUENCE_NUMBER", km_kerr_name(45));
	EXPECT_STREQ("INVALID_PRODUCER_EPOCH", km_kerr_name(47));
	EXPECT_STREQ("POLICY_VIOLATION", km_kerr_name(44));
	EXPECT_STREQ("PRODUCER_FENCED", km_kerr_name(90));
	EXPECT_STREQ("UNKNOWN_ERROR_CODE", km_kerr_name(1234));
}

// ---- hostile messages ----

TEST(WireHostile, CapacitiesAreEnforced)
{
	km_wire_name names[2];
	km_metadata_req m = {names, 2, 0, true, nullptr};
	Rd t(B().i32(3).str("a").str("b").str("c").u8(1).b);
	EXPECT_EQ(KM_EWIRECAPACITY, km_metadata_req_decode(&t.r, 4, &m));

	// More aborted transactions than the iterator holds.
	B f;
	f.i32(0).i32(1).str("t").i32(1).i32(0).i16(0).i64(1).i64(1)
		.i32(2).i64(1).i64(2).i64(3).i64(4).i32(0);
	Rd u(f.b);
	km_fetch_aborted ab[1];
	km_fetch_resp_iter it;
	km_fetch_part p;
	ASSERT_EQ(0, km_fetch_resp_begin(&it, &u.r, 4, ab, 1));
	EXPECT_EQ(KM_EWIRECAPACITY, km_fetch_resp_next_partition(&it, &p));
	EXPECT_EQ(KM_EWIRECAPACITY, km_fetch_resp_next_partition(&it, &p))
		<< "sticky";
}

TEST(WireHostile, FetchRequestLengths)
{
	const std::pair<Bytes, int> cases[] = {
		// topics count -1 (not nullable)
		{B().i32(-1).i32(0).i32(0).i32(0).u8(0).i32(-1).b,
		 KM_EWIRENEGLEN},
		// topics count far over what the bytes could hold
		{B().i32(-1).i32(0).i32(0).i32(0).u8(0).i32(50000).b,
		 KM_EWIRETRUNC},
		// topics count over the array maximum
		{B().i32(-1).i32(0).i32(0).i32(0).u8(0).i32(INT32_MAX).b,
		 KM_EWIREARRAY},
		// topic name length -2
		{B().i32(-1).i32(0).i32(0).i32(0).u8(0).i32(1).i16(-2).b,
		 KM_EWIRENEGLEN},
		// partitions count -5
		{B().i32(-1).i32(0).i32(0).i32(0).u8(0).i32(1).str("t")
			 .i32(-5).b,
		 KM_EWIRENEGLEN},
		// more topics than the caller's array (kCap = 64)
		{B().i32(-1).i32(0).i32(0).i32(0).u8(0).i32(65)
			 .raw(Bytes(65 * 6, 0)).b,
		 KM_EWIRECAPACITY},
	};
	for (const auto &c : cases) {
		Rd t(c.first);
		std::string got = wt::DecodeRequestBody(&t.r, KM_API_FETCH, 4);
		EXPECT_EQ(wt::Err(c.second), got);
	}
}

TEST(WireHostile, RecordsLengths)
{
	// Records length past the frame, or -2, in a Produce request.
	Bytes head = B().i16(-1).i16(1).i32(0).i32(1).str("t").i32(1).i32(0).b;
	Rd past(B().raw(head).i32(100).raw("abc").b);
	EXPECT_EQ(wt::Err(KM_EWIRETRUNC),
		  wt::DecodeRequestBody(&past.r, KM_API_PRODUCE, 3));
	Rd neg(B().raw(head).i32(-2).b);
	EXPECT_EQ(wt::Err(KM_EWIRENEGLEN),
		  wt::DecodeRequestBody(&neg.r, KM_API_PRODUCE, 3));
	Rd null(B().raw(head).i32(-1).b);
	EXPECT_NE(std::string::npos,
		  wt::DecodeRequestBody(&null.r, KM_API_PRODUCE, 3).find("null"));
}

TEST(WireHostile, UnsupportedVersionsInBodies)
{
	Rd t(Bytes{});
	// Fetch v12-13 are spoken as a client of a source; v14 is not.
	EXPECT_EQ(wt::Err(KM_EWIREVERSION),
		  wt::DecodeRequestBody(&t.r, KM_API_FETCH, 14));
	uint8_t buf[64];
	km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	km_initpid_req m = {wt::Name(nullptr), 1, -1, -1};
	EXPECT_EQ(KM_EWIREVERSION, km_initpid_req_encode(&w, 5, &m));
	km_metadata_req none = {nullptr, 0, 0, true, nullptr};
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(KM_EWIREVALUE, km_metadata_req_encode(&w, 0, &none))
		<< "v0 cannot ask for no topics";
}

// ---- the records span feeds km_batch_parse ----

TEST(WireRecords, FetchedBatchParsesFromTheSpan)
{
	Bytes value(300, 'v');
	km_record_spec rec = {"k", 1, value.data(), (int32_t)value.size(),
			      1700000000000, nullptr, 0};
	km_batch_spec spec = {100, 3, 0, 4242, 1, 0};
	int n = km_records_build_size(&rec, 1);
	ASSERT_GT(n, 0);
	Bytes batch((size_t)n);
	ASSERT_EQ(n, km_records_build(batch.data(), batch.size(), &spec, &rec, 1));

	uint8_t buf[256];
	km_wire_gap gaps[1];
	km_wire_wr w;
	km_proto_enc e;
	km_wire_name topic = wt::Name("events");
	km_fetch_part p = {0, 0, 101, 101, 0, 0, nullptr, -1, {}};
	km_wire_wr_init(&w, buf, sizeof(buf));
	km_wire_wr_set_gaps(&w, gaps, 1);
	km_proto_resp_begin(&w, KM_API_FETCH, 11, 1);
	km_fetch_resp_enc_begin(&e, &w, 11, 0, 0, 0);
	km_fetch_resp_enc_topic(&e, &topic);
	km_fetch_resp_enc_partition(&e, &p, nullptr, n);
	km_fetch_resp_enc_end(&e);
	int total = km_wire_wr_frame_end(&w);
	ASSERT_GT(total, n);
	Bytes frame(buf, buf + w.pos);
	frame.insert(frame.end(), batch.begin(), batch.end());
	ASSERT_EQ((size_t)total, frame.size());

	for (size_t cut = 0; cut <= frame.size(); cut += 11) {
		wt::Chain ch(frame, {cut, cut + 50});
		km_wire_rd r;
		km_fetch_resp_iter it;
		km_fetch_part got;
		km_fetch_aborted ab[1];
		int32_t corr;
		km_chain_cur body = km_chain_start(ch.get());
		km_chain_advance(ch.get(), &body, 4);
		km_wire_rd_init(&r, ch.get(), body, (uint32_t)total - 4,
				&km_wire_limits_default);
		ASSERT_EQ(0, km_resphdr_decode(&r, KM_API_FETCH, 11, &corr));
		ASSERT_EQ(0, km_fetch_resp_begin(&it, &r, 11, ab, 1));
		ASSERT_EQ(1, km_fetch_resp_next_partition(&it, &got));
		ASSERT_EQ(n, got.records.len);
		km_batch b;
		ASSERT_EQ(n, km_batch_parse(&b, ch.get(), got.records.cur,
					    KM_BATCH_BYTES_MAX))
			<< "cut " << cut;
		EXPECT_EQ(100, km_batch_base_offset(&b));
		EXPECT_EQ(4242, km_batch_producer_id(&b));
		EXPECT_EQ(0, km_fetch_resp_next_partition(&it, &got));
	}
}

} // namespace

// KmirrorBarrier v0 (kmirror's own API, docs/design.md "KmirrorBarrier"): the bytes are
// plain non-flexible Kafka types, decoded at every split, and a cut body
// is refused.
TEST(WireProto, KmirrorBarrierBytes)
{
	B req, resp;
	req.str("orders").i32(3).str("clusterA");
	resp.i16(0).i64(300).i64(0).i64(401).str("clusterB");
	for (size_t cut = 0; cut <= req.b.size(); cut++) {
		Rd t(req.b, {cut});
		km_barrier_req m;
		ASSERT_EQ(0, km_barrier_req_decode(&t.r, 0, &m)) << cut;
		EXPECT_STREQ("orders", m.topic.s);
		EXPECT_EQ(3, m.partition);
		EXPECT_STREQ("clusterA", m.source_cluster_id.s);
	}
	Rd t(resp.b);
	km_barrier_resp m;
	ASSERT_EQ(0, km_barrier_resp_decode(&t.r, 0, &m));
	EXPECT_EQ(300, m.barrier_offset);
	EXPECT_EQ(401, m.high_watermark);
	EXPECT_STREQ("clusterB", m.cluster_id.s);

	uint8_t buf[128];
	km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	ASSERT_EQ(0, km_barrier_resp_encode(&w, 0, &m));
	EXPECT_EQ(resp.b, Bytes(buf, buf + w.pos));

	Bytes cut(resp.b.begin(), resp.b.end() - 3);
	Rd c(cut);
	EXPECT_EQ(KM_EWIRETRUNC, km_barrier_resp_decode(&c.r, 0, &m));
	Rd v1(req.b);
	km_barrier_req r1;
	EXPECT_EQ(KM_EWIREVERSION, km_barrier_req_decode(&v1.r, 1, &r1));
}
