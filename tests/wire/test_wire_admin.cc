// Goal: the codecs of the Admin client's describe calls (DescribeConfigs v1-4,
// DescribeCluster v0-2) write and read Kafka's own bytes, at every version.
// Method: bodies Kafka's generated message classes serialize
// (kafka-clients 4.3.1, MessageUtil.toByteBufferAccessor, printed with
// jshell) are compared byte for byte with what kmirror's encoders write
// for the same message, and decoded back to it; then every version's frame
// is encoded and decoded at every split point, fields absent from a
// version coming back as the schema's default.
#include <gtest/gtest.h>

#include <functional>

#include "wire_util.h"

namespace {

using wt::Bytes;
using wt::Name;

// Resources: ("events", keys retention.ms, segment.bytes), broker "1"
// with null keys; IncludeSynonyms true, IncludeDocumentation false.
const Bytes kKafkaDcReqV1 = {
	0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x06, 0x65, 0x76, 0x65, 0x6e, 0x74,
	0x73, 0x00, 0x00, 0x00, 0x02, 0x00, 0x0c, 0x72, 0x65, 0x74, 0x65, 0x6e,
	0x74, 0x69, 0x6f, 0x6e, 0x2e, 0x6d, 0x73, 0x00, 0x0d, 0x73, 0x65, 0x67,
	0x6d, 0x65, 0x6e, 0x74, 0x2e, 0x62, 0x79, 0x74, 0x65, 0x73, 0x04, 0x00,
	0x01, 0x31, 0xff, 0xff, 0xff, 0xff, 0x01,
};
const Bytes kKafkaDcReqV4 = {
	0x03, 0x02, 0x07, 0x65, 0x76, 0x65, 0x6e, 0x74, 0x73, 0x03, 0x0d, 0x72,
	0x65, 0x74, 0x65, 0x6e, 0x74, 0x69, 0x6f, 0x6e, 0x2e, 0x6d, 0x73, 0x0e,
	0x73, 0x65, 0x67, 0x6d, 0x65, 0x6e, 0x74, 0x2e, 0x62, 0x79, 0x74, 0x65,
	0x73, 0x00, 0x04, 0x02, 0x31, 0x00, 0x00, 0x01, 0x00, 0x00,
};
// Results: "events" (segment.bytes=1048576, read-only, STATIC_BROKER,
// synonym log.segment.bytes, type INT, no documentation) and "nosuch"
// (UNKNOWN_TOPIC_OR_PARTITION); error messages "".
const Bytes kKafkaDcRespV1 = {
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
	0x02, 0x00, 0x06, 0x65, 0x76, 0x65, 0x6e, 0x74, 0x73, 0x00, 0x00, 0x00,
	0x01, 0x00, 0x0d, 0x73, 0x65, 0x67, 0x6d, 0x65, 0x6e, 0x74, 0x2e, 0x62,
	0x79, 0x74, 0x65, 0x73, 0x00, 0x07, 0x31, 0x30, 0x34, 0x38, 0x35, 0x37,
	0x36, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x11, 0x6c, 0x6f,
	0x67, 0x2e, 0x73, 0x65, 0x67, 0x6d, 0x65, 0x6e, 0x74, 0x2e, 0x62, 0x79,
	0x74, 0x65, 0x73, 0x00, 0x07, 0x31, 0x30, 0x34, 0x38, 0x35, 0x37, 0x36,
	0x04, 0x00, 0x03, 0x00, 0x00, 0x02, 0x00, 0x06, 0x6e, 0x6f, 0x73, 0x75,
	0x63, 0x68, 0x00, 0x00, 0x00, 0x00,
};
const Bytes kKafkaDcRespV4 = {
	0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x01, 0x02, 0x07, 0x65, 0x76,
	0x65, 0x6e, 0x74, 0x73, 0x02, 0x0e, 0x73, 0x65, 0x67, 0x6d, 0x65, 0x6e,
	0x74, 0x2e, 0x62, 0x79, 0x74, 0x65, 0x73, 0x08, 0x31, 0x30, 0x34, 0x38,
	0x35, 0x37, 0x36, 0x01, 0x04, 0x00, 0x02, 0x12, 0x6c, 0x6f, 0x67, 0x2e,
	0x73, 0x65, 0x67, 0x6d, 0x65, 0x6e, 0x74, 0x2e, 0x62, 0x79, 0x74, 0x65,
	0x73, 0x08, 0x31, 0x30, 0x34, 0x38, 0x35, 0x37, 0x36, 0x04, 0x00, 0x03,
	0x00, 0x00, 0x00, 0x00, 0x03, 0x01, 0x02, 0x07, 0x6e, 0x6f, 0x73, 0x75,
	0x63, 0x68, 0x01, 0x00, 0x00,
};
// IncludeClusterAuthorizedOperations true, brokers, no fenced ones.
const Bytes kKafkaClReqV2 = { 0x01, 0x01, 0x00, 0x00 };
// Cluster "kmirror", controller 1, broker 1 at 127.0.0.1:9092, no rack,
// operations not asked (INT32_MIN), error message null.
const Bytes kKafkaClRespV0 = {
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0x6b, 0x6d, 0x69, 0x72,
	0x72, 0x6f, 0x72, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x01,
	0x0a, 0x31, 0x32, 0x37, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31, 0x00, 0x00,
	0x23, 0x84, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00,
};
const Bytes kKafkaClRespV2 = {
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x6b, 0x6d, 0x69,
	0x72, 0x72, 0x6f, 0x72, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00,
	0x01, 0x0a, 0x31, 0x32, 0x37, 0x2e, 0x30, 0x2e, 0x30, 0x2e, 0x31, 0x00,
	0x00, 0x23, 0x84, 0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0x00,
};

// The body one encoder call writes.
Bytes Body(const std::function<int(km_wire_wr *)> &fn)
{
	static uint8_t buf[1 << 16];
	km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	EXPECT_EQ(0, fn(&w));
	return Bytes(buf, buf + w.pos);
}

// A whole frame around a body: header for (key, ver), then the body.
Bytes Frame(bool request, int16_t key, int16_t ver, const Bytes &body)
{
	static uint8_t buf[1 << 16];
	km_wire_wr w;
	km_wire_wr_init(&w, buf, sizeof(buf));
	if (request) {
		km_reqhdr h = {key, ver, 77, Name("admin"), false};
		EXPECT_EQ(0, km_proto_req_begin(&w, &h));
	} else {
		EXPECT_EQ(0, km_proto_resp_begin(&w, key, ver, 77));
	}
	km_wire_wr_raw(&w, body.data(), body.size());
	EXPECT_GT(km_wire_wr_frame_end(&w), 0);
	return Bytes(buf, buf + w.pos);
}

std::string Decode(bool request, int16_t key, int16_t ver, const Bytes &f,
		   size_t cut)
{
	wt::Chain ch(f, {cut});
	return request ? wt::ServerDecode(ch.get())
		       : wt::ClientDecode(ch.get(), key, ver);
}

// Decoded at every split point, the frame reads as want.
void ExpectEverySplit(bool request, int16_t key, int16_t ver, const Bytes &body,
		      const std::string &want)
{
	Bytes f = Frame(request, key, ver, body);
	std::string hdr = request ? "hdr{key=" + std::to_string(key) + " ver=" +
					    std::to_string(ver) +
					    " corr=77 client=\"admin\"} "
				  : "corr=77 ";
	for (size_t cut = 0; cut <= f.size(); cut++)
		ASSERT_EQ(hdr + want, Decode(request, key, ver, f, cut))
			<< "key " << key << " v" << ver << " cut " << cut;
}

// ---- DescribeConfigs ----

struct DcReq {
	km_dconfigs_resource res[2];
	km_wire_name keys[2];
	km_dconfigs_req m;

	DcReq(bool docs)
	{
		res[0] = {2, Name("events"), 0, 2};
		res[1] = {4, Name("1"), 0, -1};
		keys[0] = Name("retention.ms");
		keys[1] = Name("segment.bytes");
		m = {res, 2, 2, keys, 2, 2, true, docs};
	}
};

const std::string kDcReqDump = "dconfigs_req{(2 \"events\" keys=[\"retention.ms\","
			       "\"segment.bytes\"])(4 \"1\" keys=null) syn=1 doc=0}";

TEST(WireAdmin, DescribeConfigsRequestIsKafkasBytes)
{
	DcReq q(false);
	EXPECT_EQ(kKafkaDcReqV1, Body([&](km_wire_wr *w) {
		return km_dconfigs_req_encode(w, 1, &q.m);
	}));
	EXPECT_EQ(kKafkaDcReqV4, Body([&](km_wire_wr *w) {
		return km_dconfigs_req_encode(w, 4, &q.m);
	}));
	ExpectEverySplit(true, KM_API_DESCRIBE_CONFIGS, 1, kKafkaDcReqV1, kDcReqDump);
	ExpectEverySplit(true, KM_API_DESCRIBE_CONFIGS, 4, kKafkaDcReqV4, kDcReqDump);
}

// The response of kKafkaDcResp*, through the streaming encoder.
Bytes DcResp(int16_t v, const char *doc)
{
	const km_dconfigs_synonym syn = {"log.segment.bytes", "1048576", 4};
	const km_dconfigs_entry e = {"segment.bytes", "1048576", true, 4, false,
				     &syn, 1, 3, doc};
	const km_dconfigs_result ok = {0, "", 2, "events", 1};
	const km_dconfigs_result unknown = {3, "", 2, "nosuch", 0};
	return Body([&](km_wire_wr *w) {
		km_dconfigs_resp_enc_begin(w, v, 0, 2);
		km_dconfigs_resp_enc_result(w, v, &ok);
		km_dconfigs_resp_enc_entry(w, v, &e);
		km_dconfigs_resp_enc_result_end(w, v);
		km_dconfigs_resp_enc_result(w, v, &unknown);
		km_dconfigs_resp_enc_result_end(w, v);
		return km_dconfigs_resp_enc_end(w, v);
	});
}

std::string DcRespDump(int16_t v, const char *doc)
{
	std::string d = v >= 3 && doc ? std::string("\"") + doc + "\"" : "null";
	return "dconfigs_resp{throttle=0 (err=0 msg=\"\" 2 \"events\" "
	       "[(\"segment.bytes\"=\"1048576\" ro=1 src=4 sens=0 type=" +
	       std::string(v >= 3 ? "3" : "0") + " doc=" + d +
	       " syn=\"log.segment.bytes\"=\"1048576\"/4;)]) (err=3 msg=\"\" 2 "
	       "\"nosuch\" [])}";
}

TEST(WireAdmin, DescribeConfigsResponseIsKafkasBytes)
{
	EXPECT_EQ(kKafkaDcRespV1, DcResp(1, nullptr));
	EXPECT_EQ(kKafkaDcRespV4, DcResp(4, nullptr));
	ExpectEverySplit(false, KM_API_DESCRIBE_CONFIGS, 1, kKafkaDcRespV1,
			 DcRespDump(1, nullptr));
	ExpectEverySplit(false, KM_API_DESCRIBE_CONFIGS, 4, kKafkaDcRespV4,
			 DcRespDump(4, nullptr));
}

TEST(WireAdmin, DescribeConfigsEveryVersion)
{
	km_api_range r;
	ASSERT_EQ(0, km_proto_versions(KM_API_DESCRIBE_CONFIGS, &r));
	EXPECT_EQ(1, r.min_version);
	EXPECT_EQ(4, r.max_version);
	for (int16_t v = r.min_version; v <= r.max_version; v++) {
		SCOPED_TRACE("version " + std::to_string(v));
		DcReq q(true);
		Bytes body = Body([&](km_wire_wr *w) {
			return km_dconfigs_req_encode(w, v, &q.m);
		});
		std::string want = kDcReqDump;
		if (v >= 3) // IncludeDocumentation
			want.replace(want.find("doc=0"), 5, "doc=1");
		ExpectEverySplit(true, KM_API_DESCRIBE_CONFIGS, v, body, want);
		ExpectEverySplit(false, KM_API_DESCRIBE_CONFIGS, v,
				 DcResp(v, "The segment size."),
				 DcRespDump(v, "The segment size."));
	}
}

// Caller arrays too small: the decoder says so rather than overrun.
TEST(WireAdmin, DescribeConfigsRequestOverCapacity)
{
	Bytes f = Frame(true, KM_API_DESCRIBE_CONFIGS, 4, kKafkaDcReqV4);
	wt::Chain ch(f, {});
	km_chain_cur cur = km_chain_start(ch.get());
	km_chain_advance(ch.get(), &cur, KM_WIRE_SIZE_BYTES);
	km_wire_rd r;
	km_wire_rd_init(&r, ch.get(), cur, (uint32_t)f.size() - 4,
			&km_wire_limits_default);
	km_reqhdr h;
	ASSERT_EQ(0, km_reqhdr_decode(&r, &h));
	km_dconfigs_resource res[2];
	km_wire_name keys[1];
	km_dconfigs_req m = {res, 2, 0, keys, 1, 0, false, false};
	EXPECT_EQ(KM_EWIRECAPACITY, km_dconfigs_req_decode(&r, 4, &m));
}

// ---- DescribeCluster ----

TEST(WireAdmin, DescribeClusterIsKafkasBytes)
{
	km_dcluster_req q = {true, 1, false};
	EXPECT_EQ(kKafkaClReqV2, Body([&](km_wire_wr *w) {
		return km_dcluster_req_encode(w, 2, &q);
	}));
	km_dcluster_broker b = {1, Name("127.0.0.1"), 9092, Name(nullptr), false};
	km_dcluster_resp m = {0, 0, Name(nullptr), 1, Name("kmirror"), 1, &b, 1, 1,
			      INT32_MIN};
	EXPECT_EQ(kKafkaClRespV0, Body([&](km_wire_wr *w) {
		return km_dcluster_resp_encode(w, 0, &m);
	}));
	EXPECT_EQ(kKafkaClRespV2, Body([&](km_wire_wr *w) {
		return km_dcluster_resp_encode(w, 2, &m);
	}));
	ExpectEverySplit(true, KM_API_DESCRIBE_CLUSTER, 2, kKafkaClReqV2,
			 "dcluster_req{ops=1 endpoint=1 fenced=0}");
	const std::string resp = "dcluster_resp{throttle=0 err=0 msg=null endpoint=1 "
				 "cluster=\"kmirror\" controller=1 brokers=[(1 "
				 "\"127.0.0.1\":9092 rack=null fenced=0)] ops=-2147483648}";
	ExpectEverySplit(false, KM_API_DESCRIBE_CLUSTER, 0, kKafkaClRespV0, resp);
	ExpectEverySplit(false, KM_API_DESCRIBE_CLUSTER, 2, kKafkaClRespV2, resp);
}

TEST(WireAdmin, DescribeClusterEveryVersion)
{
	km_api_range r;
	ASSERT_EQ(0, km_proto_versions(KM_API_DESCRIBE_CLUSTER, &r));
	for (int16_t v = r.min_version; v <= r.max_version; v++) {
		SCOPED_TRACE("version " + std::to_string(v));
		km_dcluster_req q = {true, 2, true};
		Bytes body = Body([&](km_wire_wr *w) {
			return km_dcluster_req_encode(w, v, &q);
		});
		// EndpointType v1+ (default 1), IncludeFencedBrokers v2+
		ExpectEverySplit(true, KM_API_DESCRIBE_CLUSTER, v, body,
				 "dcluster_req{ops=1 endpoint=" +
					 std::string(v >= 1 ? "2" : "1") +
					 " fenced=" + (v >= 2 ? "1" : "0") + "}");
		km_dcluster_broker b[2] = {
			{4, Name("h4"), 9, Name("rack-a"), true},
			{5, Name("h5"), 10, Name(nullptr), false},
		};
		km_dcluster_resp m = {7, 114, Name("why"), 2, Name("c"), 4, b, 2, 2,
				      (1 << 8)};
		Bytes rb = Body([&](km_wire_wr *w) {
			return km_dcluster_resp_encode(w, v, &m);
		});
		ExpectEverySplit(false, KM_API_DESCRIBE_CLUSTER, v, rb,
				 "dcluster_resp{throttle=7 err=114 msg=\"why\" endpoint=" +
					 std::string(v >= 1 ? "2" : "1") +
					 " cluster=\"c\" controller=4 brokers=[(4 \"h4\":9 "
					 "rack=\"rack-a\" fenced=" + (v >= 2 ? "1" : "0") +
					 ")(5 \"h5\":10 rack=null fenced=0)] ops=256}");
	}
}

} // namespace
