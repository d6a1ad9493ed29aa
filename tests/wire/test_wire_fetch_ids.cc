// Goal: Fetch v12 (flexible) and v13 (topics named by id) as kmirror speaks
// them to a source: the request it encodes is the bytes Kafka's
// FetchRequest.json gives, and the answers Kafka writes (compact arrays and
// records, tagged fields ending each struct, some of them set) decode to
// their fields, whatever way the bytes are split, and fail when cut.
// Method: frames written by hand from the schemas with wt::B; the encoder's
// output compared byte for byte, then decoded back; each response decoded
// with its bytes split at every point and in one-byte segments, and cut at
// every byte (which must fail, never decode short).
#include <gtest/gtest.h>

#include "wire_util.h"

namespace {

using wt::B;
using wt::Bytes;
using wt::Name;

const uint8_t kId1[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
const uint8_t kId2[16] = { 0xf0, 0xe1, 0xd2, 0xc3, 0xb4, 0xa5, 0x96, 0x87,
			   0x78, 0x69, 0x5a, 0x4b, 0x3c, 0x2d, 0x1e, 0x0f };

Bytes Id(const uint8_t *id) { return Bytes(id, id + 16); }

// Two topics (2 partitions, 1 partition), one forgotten topic, a rack.
struct Req {
	km_proto_topic topics[2] = { { Name("t1"), 0, 2 }, { Name("t2"), 2, 1 } };
	uint8_t ids[2][16];
	km_fetch_req_part parts[3] = { { 0, 3, 100, 7, 1 << 20, 5 },
				       { 1, 3, 200, 8, 1 << 19, -1 },
				       { 9, 4, 0, 0, 1 << 18, 2 } };
	km_proto_topic forgotten[1] = { { Name("old"), 0, 2 } };
	uint8_t fids[1][16];
	int32_t fparts[2] = { 5, 6 };
	km_fetch_req m;

	Req()
	{
		memcpy(ids[0], kId1, 16);
		memcpy(ids[1], kId2, 16);
		memset(fids[0], 0x77, 16);
		memset(&m, 0, sizeof(m));
		m.replica_id = -1, m.max_wait_ms = 250, m.min_bytes = 1;
		m.max_bytes = 1 << 26, m.isolation_level = 1;
		m.session_id = 77, m.session_epoch = 3;
		m.topics = topics, m.n_topics = 2;
		m.parts = parts, m.n_parts = 3;
		m.forgotten = forgotten, m.n_forgotten = 1;
		m.forgotten_parts = fparts, m.n_forgotten_parts = 2;
		m.rack_id = Name("rack-z");
		m.topic_ids = ids;
		m.forgotten_ids = fids;
	}
};

// FetchRequest.json v12/v13, flexible: each partition
// [Partition, CurrentLeaderEpoch, FetchOffset, LastFetchedEpoch,
// LogStartOffset, PartitionMaxBytes, tags].
B Part(const km_fetch_req_part &p)
{
	B b;
	b.i32(p.partition).i32(p.current_leader_epoch).i64(p.fetch_offset)
		.i32(p.last_fetched_epoch).i64(p.log_start_offset)
		.i32(p.partition_max_bytes).uvar(0);
	return b;
}

Bytes GoldenRequest(const Req &q, int16_t v)
{
	B b;
	b.i32(-1).i32(250).i32(1).i32(1 << 26).u8(1).i32(77).i32(3);
	b.uvar(3); // two topics
	for (int t = 0; t < 2; t++) {
		if (v >= 13)
			b.raw(Id(q.ids[t]));
		else
			b.cstr(t == 0 ? "t1" : "t2");
		b.uvar(q.topics[t].count + 1);
		for (uint32_t i = q.topics[t].first;
		     i < q.topics[t].first + q.topics[t].count; i++)
			b.raw(Part(q.parts[i]).b);
		b.uvar(0);
	}
	b.uvar(2); // one forgotten topic
	if (v >= 13)
		b.raw(Id(q.fids[0]));
	else
		b.cstr("old");
	b.uvar(3).i32(5).i32(6).uvar(0);
	b.cstr("rack-z").uvar(0);
	return b.b;
}

Bytes Encode(const km_fetch_req &m, int16_t v)
{
	static uint8_t buf[4096];
	km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(0, km_fetch_req_encode(&w, v, &m));
	return Bytes(buf, buf + w.pos);
}

TEST(WireFetchIds, RequestV12AndV13AreKafkasBytes)
{
	for (int16_t v : { 12, 13 }) {
		SCOPED_TRACE("v" + std::to_string(v));
		Req q;
		Bytes want = GoldenRequest(q, v);
		ASSERT_EQ(want, Encode(q.m, v));

		// And back: every field, ids in place of names at v13.
		wt::Chain ch(want, {});
		km_wire_rd r;
		km_wire_rd_init(&r, ch.get(), km_chain_start(ch.get()),
				(uint32_t)want.size(), &km_wire_limits_default);
		km_proto_topic topics[4], forgotten[4];
		km_fetch_req_part parts[4];
		int32_t fparts[4];
		uint8_t ids[4][16], fids[4][16];
		km_fetch_req d;
		memset(&d, 0, sizeof(d));
		d.topics = topics, d.topics_max = 4;
		d.parts = parts, d.parts_max = 4;
		d.forgotten = forgotten, d.forgotten_max = 4;
		d.forgotten_parts = fparts, d.forgotten_parts_max = 4;
		d.topic_ids = ids, d.forgotten_ids = fids;
		ASSERT_EQ(0, km_fetch_req_decode(&r, v, &d));
		ASSERT_EQ(2u, d.n_topics);
		ASSERT_EQ(3u, d.n_parts);
		for (int t = 0; t < 2; t++) {
			EXPECT_EQ(q.topics[t].count, d.topics[t].count);
			if (v >= 13) {
				EXPECT_EQ(0, memcmp(q.ids[t], ids[t], 16));
				EXPECT_LT(d.topics[t].name.len, 0);
			} else {
				EXPECT_EQ(wt::DumpName(q.topics[t].name),
					  wt::DumpName(d.topics[t].name));
			}
		}
		for (int i = 0; i < 3; i++) {
			EXPECT_EQ(q.parts[i].partition, parts[i].partition);
			EXPECT_EQ(q.parts[i].fetch_offset, parts[i].fetch_offset);
			EXPECT_EQ(q.parts[i].last_fetched_epoch, parts[i].last_fetched_epoch);
			EXPECT_EQ(q.parts[i].log_start_offset, parts[i].log_start_offset);
		}
		EXPECT_EQ(2u, d.n_forgotten_parts);
		if (v >= 13) {
			EXPECT_EQ(0, memcmp(q.fids[0], fids[0], 16));
		}
		EXPECT_EQ("\"rack-z\"", wt::DumpName(d.rack_id));
	}
}

// Without ids a v13 request cannot be written, nor read into nowhere.
TEST(WireFetchIds, V13NeedsTopicIds)
{
	Req q;
	q.m.topic_ids = nullptr;
	static uint8_t buf[4096];
	km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_LT(km_fetch_req_encode(&w, 13, &q.m), 0);
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(KM_EWIREVERSION, km_fetch_req_encode(&w, 14, &q.m));
}

// FetchResponse.json v12/v13: two topics; the first partition has
// DivergingEpoch (tag 0) and CurrentLeader (tag 1) set, an aborted
// transaction, records; the second UNKNOWN_TOPIC_ID, null aborted list,
// null records; a top-level tagged field (NodeEndpoints' tag 0) too.
Bytes GoldenResponse(int16_t v)
{
	B b;
	b.i32(5).i16(0).i32(0x1234);
	b.uvar(3);
	// topic 1
	if (v >= 13)
		b.raw(Id(kId1));
	else
		b.cstr("t1");
	b.uvar(2);
	b.i32(0).i16(0).i64(50).i64(40).i64(3);
	b.uvar(2).i64(1000).i64(7).uvar(0); // one aborted, its tags
	b.i32(-1);
	b.uvar(4).raw("abc"); // COMPACT_RECORDS: 3 bytes
	B div;
	div.i32(4).i64(33).uvar(0); // EpochEndOffset {Epoch, EndOffset, tags}
	B leader;
	leader.i32(2).i32(9).uvar(0);
	b.uvar(2).uvar(0).uvar((uint32_t)div.b.size()).raw(div.b)
		.uvar(1).uvar((uint32_t)leader.b.size()).raw(leader.b);
	b.uvar(0); // topic tags
	// topic 2
	if (v >= 13)
		b.raw(Id(kId2));
	else
		b.cstr("t2");
	b.uvar(2);
	b.i32(4).i16(100).i64(-1).i64(-1).i64(-1);
	b.uvar(0); // null aborted
	b.i32(-1);
	b.uvar(0); // null records
	b.uvar(0); // partition tags
	b.uvar(0); // topic tags
	b.uvar(1).uvar(0).uvar(1).uvar(1); // NodeEndpoints: empty compact array
	return b.b;
}

std::string DumpResponse(const Bytes &bytes, std::vector<size_t> cuts, int16_t v,
			 bool bytewise = false)
{
	wt::Chain ch = bytewise ? wt::Chain::Bytewise(bytes) : wt::Chain(bytes, cuts);
	km_wire_rd r;
	km_wire_rd_init(&r, ch.get(), km_chain_start(ch.get()), (uint32_t)bytes.size(),
			&km_wire_limits_default);
	km_fetch_aborted ab[4];
	km_fetch_resp_iter it;
	km_fetch_part p;
	std::ostringstream o;
	int rc = km_fetch_resp_begin(&it, &r, v, ab, 4);
	if (rc < 0)
		return wt::Err(rc);
	o << "throttle=" << it.throttle_time_ms << " session=" << it.session_id;
	while ((rc = km_fetch_resp_next_partition(&it, &p)) == 1) {
		o << " [";
		if (v >= 13)
			o << wt::Hex(it.cur.topic_id, 16);
		else
			o << wt::DumpName(it.cur.topic);
		o << "#" << it.cur.topic_index << wt::Dump(p, ch.get()) << "]";
	}
	return rc < 0 ? wt::Err(rc) : o.str();
}

TEST(WireFetchIds, ResponsesV12AndV13DecodeAtEverySplit)
{
	for (int16_t v : { 12, 13 }) {
		SCOPED_TRACE("v" + std::to_string(v));
		Bytes g = GoldenResponse(v);
		std::string t1 = v >= 13 ? wt::Hex(kId1, 16) : "\"t1\"";
		std::string t2 = v >= 13 ? wt::Hex(kId2, 16) : "\"t2\"";
		std::string whole = DumpResponse(g, {}, v);
		EXPECT_EQ("throttle=5 session=4660 [" + t1 + "#0(0 err=0 hw=50 lso=40 "
			  "start=3 aborted=1[1000@7 ] preferred=-1 records=@", whole.substr(0, whole.find("records=@") + 9));
		EXPECT_NE(std::string::npos, whole.find(":616263)]")) << whole;
		EXPECT_NE(std::string::npos,
			  whole.find("[" + t2 + "#1(4 err=100 hw=-1 lso=-1 start=-1 "
				     "aborted=-1[] preferred=-1 records=null)]")) << whole;
		for (size_t cut = 0; cut <= g.size(); cut++)
			ASSERT_EQ(whole, DumpResponse(g, { cut }, v)) << "split at " << cut;
		ASSERT_EQ(whole, DumpResponse(g, {}, v, true));
		for (size_t len = 0; len < g.size(); len++) {
			Bytes cut(g.begin(), g.begin() + (long)len);
			std::string d = DumpResponse(cut, {}, v);
			ASSERT_EQ(0u, d.find("ERR ")) << "cut at " << len << ": " << d;
		}
	}
}

} // namespace
