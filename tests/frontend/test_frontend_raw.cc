// Goal: the front-end holds up against peers no client library would be:
// garbage, negative and huge size prefixes, unknown API keys, unsupported
// versions, malformed and trailing bodies, a frame cut off by a close. Each
// such connection is closed (counted as a protocol error), its receive
// buffers come back, and the server goes on serving a real client. And the
// protocol details a library hides: responses leave in request order while
// a Fetch long-polls or a Produce waits for durability; ApiVersions answers
// an unknown version with UNSUPPORTED_VERSION in a v0 body; acks=0 gets no
// response; every refused Produce, Fetch and InitProducerId gets its Kafka
// error code; MaxBytes, partition max bytes and KIP-74; ListOffsets v0 and
// v1; an offline partition; DescribeConfigs' and DescribeCluster's answers
// and error codes.
// Method: fe_harness.h's server; requests built with kafka/proto.h's
// encoders (or by hand when they must be wrong) over a blocking socket,
// responses decoded with kafka/proto.h's decoders; every read bounded by a
// deadline (poll(2)).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <errno.h>
#include <librdkafka/rdkafka.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/km_limits.h"
#include "fe_harness.h"
#include "fe_raw.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/gorec.h"
#include "kafka/proto.h"
#include "kafka/proto_group.h"
#include "kafka/records.h"
#include "kafka/sasl.h"
#include "kafka/wire.h"

namespace {

using fetest::BodyFn;
using fetest::Bytes;
using fetest::DecodeFetch;
using fetest::FetchOut;
using fetest::FetchReq;
using fetest::MonoMs;
using fetest::Open;
using fetest::PartSpec;
using fetest::ProducePart;
using fetest::ProduceReq;
using fetest::RawConn;
using fetest::RawOn;
using fetest::Req;
using fetest::Resp;
using fetest::Server;

const std::vector<PartSpec> kParts = {
	{"alpha", 0, true}, {"alpha", 1, true}, {"alpha", 2, true},
	{"mirror", 0, false}, {"txn", 0, true},
};

Bytes Batch(int n, size_t value_bytes = 16, int16_t attrs = 0,
	    int64_t pid = -1)
{
	std::vector<std::string> vals(n);
	std::vector<km_record_spec> recs(n);
	for (int i = 0; i < n; i++) {
		vals[i] = fetest::RandomBytes(value_bytes, (uint64_t)i + 1);
		recs[i] = {};
		recs[i].key_len = -1;
		recs[i].value = vals[i].data();
		recs[i].value_len = (int32_t)vals[i].size();
		recs[i].timestamp = 1700000000000LL + i;
	}
	km_batch_spec spec = {0, -1, attrs, pid, (int16_t)(pid < 0 ? -1 : 0),
			      pid < 0 ? -1 : 0};
	Bytes out(km_records_build_size(recs.data(), n));
	EXPECT_EQ((int)out.size(), km_records_build(out.data(), out.size(),
						     &spec, recs.data(), n));
	return out;
}

class Raw : public RawOn<&kParts> {
protected:
	int16_t ProduceOne(const std::string &topic, int32_t partition,
			   const Bytes *records, int16_t acks = 1,
			   int64_t *base = nullptr)
	{
		Resp x;
		km_proto_topic t[2];
		km_produce_resp_part ps[2];
		km_produce_resp m = {t, 2, 0, ps, 2, 0, 0};
		RoundTrip(ProduceReq(7, 7, acks, {{topic, partition, records}}),
			  KM_API_PRODUCE, 7, &x);
		EXPECT_EQ(7, x.corr);
		EXPECT_EQ(0, km_produce_resp_decode(&x.r, 7, &m));
		EXPECT_EQ(1u, m.n_parts);
		if (base != nullptr)
			*base = ps[0].base_offset;
		return m.n_parts == 1 ? ps[0].error_code : -999;
	}
	void Fetch(const Bytes &req, int16_t ver, FetchOut *out)
	{
		Resp x;
		ASSERT_NO_FATAL_FAILURE(RoundTrip(req, KM_API_FETCH, ver, &x));
		ASSERT_NO_FATAL_FAILURE(DecodeFetch(&x, ver, out));
	}
};

TEST_F(Raw, HostileClientsAreDroppedAndTheServerSurvives)
{
	struct Case {
		const char *what;
		Bytes bytes;
	};
	std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	Bytes huge = {0x7f, 0xff, 0xff, 0xff};
	huge.resize(104, 'x');
	Bytes trailing = Req(KM_API_METADATA, 1, 1, [](km_wire_wr *w) {
		km_wire_wr_array(w, false, true, -1);
		km_wire_wr_i32(w, 12345);
	});
	std::vector<Case> cases = {
		{"http garbage", Bytes(http.begin(), http.end())},
		{"negative size", {0xff, 0xff, 0xff, 0xf0, 0, 0, 0, 0}},
		{"huge size", huge},
		{"short header", {0, 0, 0, 2, 0, 3}},
		{"unknown API key", Req(9999, 0, 1, nullptr)},
		{"unsupported version", Req(KM_API_FETCH, 3, 1, nullptr)},
		{"array past the frame", Req(KM_API_METADATA, 1, 1,
			[](km_wire_wr *w) { km_wire_wr_i32(w, 5); })},
		{"trailing bytes", trailing},
	};
	for (const Case &cs : cases) {
		RawConn c;
		ASSERT_EQ("", c.Connect(srv_.port()));
		ASSERT_TRUE(c.Send(cs.bytes)) << cs.what;
		EXPECT_TRUE(c.WaitClosed()) << cs.what << ": not closed";
	}
	// A frame cut off by the client's close: nothing to answer, and the
	// buffers it held go back to the pool.
	{
		RawConn c;
		ASSERT_EQ("", c.Connect(srv_.port()));
		Bytes cut = {0, 0, 0x10, 0};
		cut.resize(600, 'y');
		ASSERT_TRUE(c.Send(cut));
	}
	// A client that leaves while its Produce waits for the fsync: the
	// write still lands, and the connection's slot is reused only after
	// the outcome came back (the sanitizer build checks the memory).
	{
		RawConn c;
		Bytes b = Batch(2);
		ASSERT_EQ("", c.Connect(srv_.port()));
		ASSERT_TRUE(c.Send(ProduceReq(1, 7, -1, {{"alpha", 2, &b}})));
	}
	c_.Close();
	uint64_t end = MonoMs() + 10000;
	while (MonoMs() < end &&
	       (srv_.Stats().conns != 0 || srv_.NetStats().rx_bufs_held != 0 ||
		km_log_durable_offset(srv_.log(2)) < 2))
		srv_.Run([] {});
	EXPECT_EQ(2, km_log_durable_offset(srv_.log(2)));
	km_frontend_stats st = srv_.Stats();
	EXPECT_EQ(0u, st.conns);
	EXPECT_EQ(0u, srv_.NetStats().rx_bufs_held);
	EXPECT_EQ(cases.size(), st.protocol_errors);
	EXPECT_EQ(1u, st.requests_other);

	// And a real client is served.
	fetest::Producer p;
	ASSERT_EQ("", p.Create(srv_.bootstrap(), {{"acks", "all"}}));
	const rd_kafka_metadata_t *md = nullptr;
	ASSERT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR,
		  rd_kafka_metadata(static_cast<rd_kafka_t *>(p.rk), 1, nullptr,
				    &md, 10000));
	EXPECT_EQ(1, md->broker_cnt);
	EXPECT_EQ(7, md->brokers[0].id);
	EXPECT_EQ(3, md->topic_cnt);
	rd_kafka_metadata_destroy(md);
	std::vector<fetest::Msg> msgs(1);
	msgs[0].key_null = msgs[0].value_null = false;
	msgs[0].value = "after the storm";
	ASSERT_EQ("", p.Send("alpha", &msgs, 20000));
	EXPECT_EQ(0, msgs[0].err);
	fetest::Consumer con;
	ASSERT_EQ("", con.Start(srv_.bootstrap(), "alpha", {0},
				RD_KAFKA_OFFSET_BEGINNING, {}));
	ASSERT_TRUE(con.PollUntil([&] { return !con.msgs.empty(); }, 20000));
	EXPECT_EQ("after the storm", con.msgs[0].value);
}

TEST_F(Raw, ApiVersionsUnknownVersionGetsV0Body)
{
	const km_api_range want[] = {
		{KM_API_PRODUCE, 3, 7},	     {KM_API_FETCH, 4, 11},
		{KM_API_LIST_OFFSETS, 0, 9}, {KM_API_METADATA, 0, 12},
		{KM_API_OFFSET_COMMIT, 0, 7}, {KM_API_OFFSET_FETCH, 0, 7},
		{KM_API_FIND_COORDINATOR, 0, 2}, {KM_API_JOIN_GROUP, 0, 5},
		{KM_API_HEARTBEAT, 0, 3},    {KM_API_LEAVE_GROUP, 0, 3},
		{KM_API_SYNC_GROUP, 0, 3},   {KM_API_DESCRIBE_GROUPS, 0, 4},
		{KM_API_LIST_GROUPS, 0, 5},  {KM_API_SASL_HANDSHAKE, 0, 1},
		{KM_API_API_VERSIONS, 0, 3},
		{KM_API_CREATE_TOPICS, 2, 7}, {KM_API_DELETE_TOPICS, 1, 6},
		{KM_API_DELETE_RECORDS, 0, 2},
		{KM_API_INIT_PRODUCER_ID, 0, 4},
		{KM_API_ADD_PARTITIONS_TO_TXN, 0, 3}, {KM_API_ADD_OFFSETS_TO_TXN, 0, 4},
		{KM_API_END_TXN, 0, 4}, {KM_API_TXN_OFFSET_COMMIT, 0, 4},
		{KM_API_DESCRIBE_CONFIGS, 1, 4},
		{KM_API_SASL_AUTHENTICATE, 0, 2},
		{KM_API_CREATE_PARTITIONS, 0, 3},
		{KM_API_DELETE_GROUPS, 0, 2},
		{KM_API_OFFSET_DELETE, 0, 0},
		{KM_API_DESCRIBE_CLUSTER, 0, 2}, {KM_API_KMIRROR_BARRIER, 0, 0},
	};
	const uint32_t n = sizeof(want) / sizeof(want[0]);
	// v4: a flexible request this broker does not know. The body is
	// v3's (compact names + tags), written by hand.
	Bytes v4 = Req(KM_API_API_VERSIONS, 4, 41, [](km_wire_wr *w) {
		km_wire_wr_string(w, true, false, "raw", 3);
		km_wire_wr_string(w, true, false, "1.0", 3);
		km_wire_wr_tags(w);
	});
	for (int16_t ver : {4, 3, 0}) {
		Resp x;
		km_api_range keys[32];
		km_apiversions_resp m = {0, keys, 32, 0, 0};
		int16_t body_ver = ver == 4 ? 0 : ver;
		Bytes req = ver == 4 ? v4
				     : Req(KM_API_API_VERSIONS, ver, 41 + ver,
					   [&](km_wire_wr *w) {
						   km_apiversions_req r;
						   km_wire_name_set(&r.sw_name, "raw");
						   km_wire_name_set(&r.sw_version, "1.0");
						   km_apiversions_req_encode(w, ver, &r);
					   });
		ASSERT_NO_FATAL_FAILURE(
			RoundTrip(req, KM_API_API_VERSIONS, body_ver, &x));
		EXPECT_EQ(41 + (ver == 4 ? 0 : ver), x.corr);
		ASSERT_EQ(0, km_apiversions_resp_decode(&x.r, body_ver, &m))
			<< "v" << ver;
		EXPECT_EQ(ver == 4 ? KM_KERR_UNSUPPORTED_VERSION : 0,
			  m.error_code) << "v" << ver;
		ASSERT_EQ(n, m.n_keys);
		for (uint32_t i = 0; i < n; i++) {
			EXPECT_EQ(want[i].api_key, keys[i].api_key);
			EXPECT_EQ(want[i].min_version, keys[i].min_version);
			EXPECT_EQ(want[i].max_version, keys[i].max_version);
		}
	}
}

// A Fetch parked on an empty partition holds back the answers of the
// Metadata and ApiVersions requests sent after it; a Produce waiting for
// its fsync holds back the Metadata after it.
// DescribeConfigs as Kafka's ConfigHelper answers: a served topic's configs
// (only the keys asked for; synonyms only when asked), the broker's own id
// and "" (no dynamic defaults), UNKNOWN_TOPIC_OR_PARTITION for a topic not
// served, INVALID_REQUEST for another broker id and a resource type with no
// configs here; DescribeCluster names us, and refuses the controllers'
// endpoint with MISMATCHED_ENDPOINT_TYPE.
class RawAdmin : public Raw {
protected:
	// One DescribeConfigs round trip at ver; every array sized for six.
	void Describe(int16_t ver, const km_dconfigs_req &q, km_dconfigs_resp *m)
	{
		Resp x;
		ASSERT_NO_FATAL_FAILURE(RoundTrip(
			Req(KM_API_DESCRIBE_CONFIGS, ver, 5,
			    [&](km_wire_wr *w) { km_dconfigs_req_encode(w, ver, &q); }),
			KM_API_DESCRIBE_CONFIGS, ver, &x));
		m->results = rs_, m->results_max = 8;
		m->entries = es_, m->entries_max = 64;
		m->synonyms = ss_, m->synonyms_max = 64;
		ASSERT_EQ(0, km_dconfigs_resp_decode(&x.r, ver, m)) << "v" << ver;
	}
	km_dconfigs_dresult rs_[8];
	km_dconfigs_dentry es_[64];
	km_dconfigs_dsyn ss_[64];
};

TEST_F(RawAdmin, DescribeConfigsAsKafka)
{
	const std::string me = "7"; // fe_harness.cc's node id
	km_dconfigs_resource res[6] = {
		{2, {}, 0, 2}, {2, {}, 0, -1}, {2, {}, 0, -1},
		{4, {}, 0, -1}, {4, {}, 0, -1}, {4, {}, 0, -1},
	};
	km_wire_name_set(&res[0].name, "alpha");
	km_wire_name_set(&res[1].name, "nosuch");
	km_wire_name_set(&res[2].name, "mirror");
	km_wire_name_set(&res[3].name, me.c_str());
	km_wire_name_set(&res[4].name, "");
	km_wire_name_set(&res[5].name, "77");
	km_wire_name keys[2];
	km_wire_name_set(&keys[0], "segment.bytes");
	km_wire_name_set(&keys[1], "no.such.key");
	for (int16_t ver : {1, 4}) {
		km_dconfigs_req q = {res, 6, 6, keys, 2, 2, ver == 4, false};
		km_dconfigs_resp m = {};
		ASSERT_NO_FATAL_FAILURE(Describe(ver, q, &m));
		const km_dconfigs_dresult *rs = rs_;
		const km_dconfigs_dsyn *ss = ss_;
		const km_dconfigs_dentry *es = es_;
		ASSERT_EQ(6u, m.n_results);
		// alpha: only segment.bytes; fe_harness.cc's logs roll at 2 MiB,
		// the front end's broker level is kmirror's default (1 GiB): the
		// topic's own value, and at v4 its synonyms, topic's first
		EXPECT_EQ(0, rs[0].error_code);
		EXPECT_STREQ("alpha", rs[0].name.s);
		ASSERT_EQ(1u, rs[0].n_configs);
		const km_dconfigs_dentry &e = es[rs[0].first];
		EXPECT_STREQ("segment.bytes", e.name.s);
		EXPECT_STREQ(std::to_string(2 << 20).c_str(), e.value.s);
		EXPECT_EQ(KM_CONFIG_SOURCE_TOPIC, e.source);
		EXPECT_TRUE(e.read_only);
		ASSERT_EQ(ver == 4 ? 2u : 0u, e.n_synonyms);
		if (ver == 4) {
			EXPECT_STREQ("segment.bytes", ss[e.syn_first].name.s);
			EXPECT_EQ(KM_CONFIG_SOURCE_TOPIC, ss[e.syn_first].source);
			EXPECT_STREQ("log.segment.bytes", ss[e.syn_first + 1].name.s);
			EXPECT_STREQ("1073741824", ss[e.syn_first + 1].value.s);
			EXPECT_EQ(KM_CONFIG_SOURCE_DEFAULT, ss[e.syn_first + 1].source);
			EXPECT_EQ(KM_CONFIG_TYPE_INT, e.config_type);
		}
		EXPECT_EQ(KM_KERR_UNKNOWN_TOPIC_OR_PARTITION, rs[1].error_code);
		EXPECT_EQ(0u, rs[1].n_configs);
		EXPECT_EQ(0, rs[2].error_code) << "a mirrored topic has configs too";
		EXPECT_GE(rs[2].n_configs, 8u);
		EXPECT_EQ(0, rs[3].error_code);
		// one broker name each, and the clusters it mirrors from (none:
		// no fetcher here has met a source)
		ASSERT_EQ(rs[2].n_configs + 1, rs[3].n_configs);
		const km_dconfigs_dentry &src = es[rs[3].first + rs[3].n_configs - 1];
		EXPECT_STREQ("kmirror.source.cluster.ids", src.name.s);
		EXPECT_STREQ("", src.value.s);
		EXPECT_TRUE(src.read_only);
		EXPECT_EQ(0, rs[4].error_code);
		EXPECT_EQ(0u, rs[4].n_configs);
		EXPECT_EQ(KM_KERR_INVALID_REQUEST, rs[5].error_code);
		EXPECT_NE(nullptr, strstr(rs[5].error_message.s, "Unexpected broker id"));
	}
	// a resource type kmirror has no configs of (GROUP = 32)
	km_dconfigs_resource grp = {32, {}, 0, -1};
	km_wire_name_set(&grp.name, "g");
	km_dconfigs_req q = {&grp, 1, 1, keys, 0, 0, false, false};
	km_dconfigs_resp m = {};
	ASSERT_NO_FATAL_FAILURE(Describe(4, q, &m));
	ASSERT_EQ(1u, m.n_results);
	EXPECT_EQ(KM_KERR_INVALID_REQUEST, rs_[0].error_code);
	EXPECT_STREQ("Unsupported resource type: GROUP", rs_[0].error_message.s);
}

TEST_F(Raw, DescribeClusterAsKafka)
{
	const int32_t node = 7; // fe_harness.cc's node id and cluster id
	const char *cluster = "kmirror-frontend-test";
	Resp x;
	for (int8_t endpoint : {1, 2}) {
		km_dcluster_req cq = {false, endpoint, false};
		ASSERT_NO_FATAL_FAILURE(RoundTrip(
			Req(KM_API_DESCRIBE_CLUSTER, 2, 7,
			    [&](km_wire_wr *w) { km_dcluster_req_encode(w, 2, &cq); }),
			KM_API_DESCRIBE_CLUSTER, 2, &x));
		km_dcluster_broker b[2];
		km_dcluster_resp cm = {};
		cm.brokers = b, cm.brokers_max = 2;
		ASSERT_EQ(0, km_dcluster_resp_decode(&x.r, 2, &cm));
		if (endpoint == 1) {
			EXPECT_EQ(0, cm.error_code);
			EXPECT_STREQ(cluster, cm.cluster_id.s);
			ASSERT_EQ(1u, cm.n_brokers);
			EXPECT_EQ(node, b[0].broker_id);
			EXPECT_EQ(srv_.port(), b[0].port);
			EXPECT_EQ(INT32_MIN, cm.cluster_authorized_operations);
		} else {
			EXPECT_EQ(KM_KERR_MISMATCHED_ENDPOINT_TYPE, cm.error_code);
			EXPECT_EQ(0u, cm.n_brokers);
			EXPECT_EQ(-1, cm.controller_id);
		}
	}
}

TEST_F(Raw, ResponsesLeaveInRequestOrder)
{
	Bytes all = FetchReq(1, 11, 400, 1 << 20, {{"alpha", 0, 0, 1 << 20}});
	Bytes md = Req(KM_API_METADATA, 1, 2, [](km_wire_wr *w) {
		km_wire_wr_array(w, false, true, -1);
	});
	Bytes av = Req(KM_API_API_VERSIONS, 0, 3, nullptr);
	all.insert(all.end(), md.begin(), md.end());
	all.insert(all.end(), av.begin(), av.end());
	uint64_t t0 = MonoMs();
	ASSERT_TRUE(c_.Send(all));
	const struct {
		int16_t key, ver;
	} order[] = {{KM_API_FETCH, 11}, {KM_API_METADATA, 1},
		     {KM_API_API_VERSIONS, 0}};
	for (int i = 0; i < 3; i++) {
		Resp x;
		ASSERT_EQ("", c_.ReadFrame(&x.body));
		Open(&x, order[i].key, order[i].ver);
		EXPECT_EQ(i + 1, x.corr) << "responses out of request order";
		if (i == 0) {
			EXPECT_GE(MonoMs() - t0, 300u) << "the Fetch did not wait";
		}
	}
	Bytes batch = Batch(3);
	Bytes pr = ProduceReq(4, 7, -1, {{"alpha", 0, &batch}});
	Bytes md2 = Req(KM_API_METADATA, 4, 5, [](km_wire_wr *w) {
		km_wire_wr_array(w, false, true, 0);
		km_wire_wr_bool(w, false);
	});
	pr.insert(pr.end(), md2.begin(), md2.end());
	ASSERT_TRUE(c_.Send(pr));
	Resp x;
	ASSERT_EQ("", c_.ReadFrame(&x.body));
	Open(&x, KM_API_PRODUCE, 7);
	EXPECT_EQ(4, x.corr) << "Metadata overtook the Produce";
	km_proto_topic t[2];
	km_produce_resp_part ps[2];
	km_produce_resp m = {t, 2, 0, ps, 2, 0, 0};
	ASSERT_EQ(0, km_produce_resp_decode(&x.r, 7, &m));
	EXPECT_EQ(0, ps[0].error_code);
	EXPECT_EQ(0, ps[0].base_offset);
	EXPECT_GE(km_log_durable_offset(srv_.log(0)), 3) << "acked before fsync";
	Resp y;
	ASSERT_EQ("", c_.ReadFrame(&y.body));
	Open(&y, KM_API_METADATA, 4);
	EXPECT_EQ(5, y.corr);
}

TEST_F(Raw, ProduceRefusalsHaveTheirCodesAndWriteNothing)
{
	Bytes good = Batch(2);
	Bytes bad = Batch(2);
	bad.back() ^= 0x40;
	Bytes marker(KM_CTRL_MARKER_BATCH_BYTES);
	km_ctrl_spec cs = {0, 0, 1700000000000LL};
	ASSERT_EQ((int)marker.size(),
		  km_ctrl_build_marker(marker.data(), marker.size(), &cs, 1000,
				       0, true, 0));
	Bytes txn = Batch(1, 16, KM_BATCH_ATTR_TRANSACTIONAL, 1000);
	EXPECT_EQ(KM_KERR_CORRUPT_MESSAGE, ProduceOne("alpha", 0, &bad));
	EXPECT_EQ(KM_KERR_INVALID_RECORD, ProduceOne("alpha", 0, &marker));
	// Issue 20: a transactional batch of a producer whose transaction does
	// not hold the partition (here: no transaction at all).
	EXPECT_EQ(KM_KERR_INVALID_TXN_STATE, ProduceOne("alpha", 0, &txn));
	EXPECT_EQ(KM_KERR_INVALID_RECORD, ProduceOne("alpha", 0, nullptr));
	EXPECT_EQ(KM_KERR_UNKNOWN_TOPIC_OR_PARTITION,
		  ProduceOne("alpha", 9, &good));
	EXPECT_EQ(KM_KERR_UNKNOWN_TOPIC_OR_PARTITION,
		  ProduceOne("nope", 0, &good));
	EXPECT_EQ(KM_KERR_POLICY_VIOLATION, ProduceOne("mirror", 0, &good));
	EXPECT_EQ(KM_KERR_INVALID_REQUIRED_ACKS,
		  ProduceOne("alpha", 0, &good, 2));
	EXPECT_EQ(0, srv_.EndOffset(0));
	EXPECT_EQ(0, srv_.EndOffset(3));
	int64_t base = -1;
	EXPECT_EQ(0, ProduceOne("alpha", 0, &good, 1, &base));
	EXPECT_EQ(0, base);
	// Offline: not open or failed. Retriable for clients.
	srv_.SetError(1, -EIO);
	EXPECT_EQ(KM_KERR_NOT_LEADER_OR_FOLLOWER, ProduceOne("alpha", 1, &good));
	EXPECT_GE(srv_.Stats().partition_errors, 9u);
}

TEST_F(Raw, AcksZeroIsNotAnsweredAndRefusalCloses)
{
	Bytes good = Batch(2);
	Bytes pr = ProduceReq(1, 3, 0, {{"alpha", 2, &good}});
	Bytes md = Req(KM_API_METADATA, 1, 2, [](km_wire_wr *w) {
		km_wire_wr_array(w, false, true, 0);
	});
	pr.insert(pr.end(), md.begin(), md.end());
	ASSERT_TRUE(c_.Send(pr));
	Resp x;
	ASSERT_EQ("", c_.ReadFrame(&x.body));
	Open(&x, KM_API_METADATA, 1);
	EXPECT_EQ(2, x.corr) << "acks=0 was answered";
	uint64_t end = MonoMs() + 10000;
	while (km_log_appended_offset(srv_.log(2)) < 2 && MonoMs() < end)
		srv_.Run([] {});
	EXPECT_EQ(2, km_log_appended_offset(srv_.log(2)));
	// Kafka closes an acks=0 connection whose write fails: it is the
	// only way the client hears of it.
	ASSERT_TRUE(c_.Send(ProduceReq(3, 3, 0, {{"mirror", 0, &good}})));
	EXPECT_TRUE(c_.WaitClosed());
}

TEST_F(Raw, InitProducerIdAndFetchErrors)
{
	for (int16_t ver : {0, 2, 4}) {
		Resp x;
		km_initpid_req q = {};
		km_initpid_resp m = {};
		km_wire_name_set_null(&q.transactional_id);
		q.transaction_timeout_ms = -1;
		q.producer_id = -1;
		q.producer_epoch = -1;
		ASSERT_NO_FATAL_FAILURE(RoundTrip(
			Req(KM_API_INIT_PRODUCER_ID, ver, 9,
			    [&](km_wire_wr *w) { km_initpid_req_encode(w, ver, &q); }),
			KM_API_INIT_PRODUCER_ID, ver, &x));
		ASSERT_EQ(0, km_initpid_resp_decode(&x.r, ver, &m));
		EXPECT_EQ(0, m.error_code);
		EXPECT_EQ(1000 + ver / 2, m.producer_id) << "v" << ver;
		EXPECT_EQ(0, m.producer_epoch);
		km_wire_name_set(&q.transactional_id, "my-txn");
		ASSERT_NO_FATAL_FAILURE(RoundTrip(
			Req(KM_API_INIT_PRODUCER_ID, ver, 10,
			    [&](km_wire_wr *w) { km_initpid_req_encode(w, ver, &q); }),
			KM_API_INIT_PRODUCER_ID, ver, &x));
		ASSERT_EQ(0, km_initpid_resp_decode(&x.r, ver, &m));
		// Issue 20: the coordinator checks the timeout as Kafka.
		EXPECT_EQ(KM_KERR_INVALID_TRANSACTION_TIMEOUT, m.error_code);
		EXPECT_EQ(-1, m.producer_id);
	}
	// A transactional id gets the allocator's next id at epoch 0, then
	// the same id at the next epoch (issue 20).
	for (int16_t epoch = 0; epoch < 2; epoch++) {
		Resp x;
		km_initpid_req q = {};
		km_initpid_resp m = {};
		km_wire_name_set(&q.transactional_id, "my-txn");
		q.transaction_timeout_ms = 60000;
		q.producer_id = -1;
		q.producer_epoch = -1;
		ASSERT_NO_FATAL_FAILURE(RoundTrip(
			Req(KM_API_INIT_PRODUCER_ID, 4, 11,
			    [&](km_wire_wr *w) { km_initpid_req_encode(w, 4, &q); }),
			KM_API_INIT_PRODUCER_ID, 4, &x));
		ASSERT_EQ(0, km_initpid_resp_decode(&x.r, 4, &m));
		EXPECT_EQ(0, m.error_code);
		EXPECT_EQ(1000 + 3, m.producer_id) << "after 1000..1002";
		EXPECT_EQ(epoch, m.producer_epoch);
	}
	FetchOut f;
	ASSERT_NO_FATAL_FAILURE(Fetch(FetchReq(1, 11, 0, 1 << 20,
					       {{"alpha", 0, 5, 1 << 20},
						{"alpha", 7, 0, 1 << 20},
						{"ghost", 0, 0, 1 << 20}}),
				      11, &f));
	ASSERT_EQ(3u, f.parts.size());
	EXPECT_EQ(KM_KERR_OFFSET_OUT_OF_RANGE, f.parts[0].error);
	EXPECT_EQ(KM_KERR_UNKNOWN_TOPIC_OR_PARTITION, f.parts[1].error);
	EXPECT_EQ("ghost", f.parts[2].topic);
	EXPECT_EQ(KM_KERR_UNKNOWN_TOPIC_OR_PARTITION, f.parts[2].error);
	FetchOut s;
	ASSERT_NO_FATAL_FAILURE(Fetch(FetchReq(2, 11, 0, 1 << 20,
					       {{"alpha", 0, 0, 1 << 20}}, 99, 1),
				      11, &s));
	EXPECT_EQ(KM_KERR_FETCH_SESSION_ID_NOT_FOUND, s.top_error);
	EXPECT_TRUE(s.parts.empty());
	FetchOut e;
	ASSERT_NO_FATAL_FAILURE(Fetch(FetchReq(3, 11, 0, 1 << 20,
					       {{"alpha", 0, 0, 1 << 20}}, 0, 3),
				      11, &e));
	// Kafka 4.3 looks session 0 up: not found (kafka-fsess checks it).
	EXPECT_EQ(KM_KERR_FETCH_SESSION_ID_NOT_FOUND, e.top_error);
	// A partition taken offline.
	srv_.SetError(1, -EIO);
	FetchOut o;
	ASSERT_NO_FATAL_FAILURE(Fetch(FetchReq(4, 4, 0, 1 << 20,
					       {{"alpha", 1, 0, 1 << 20}}),
				      4, &o));
	EXPECT_EQ(KM_KERR_NOT_LEADER_OR_FOLLOWER, o.parts[0].error);
	Resp x;
	km_metadata_broker br[2];
	km_metadata_topic mt[8];
	km_metadata_part mp[16];
	int32_t nodes[64];
	km_metadata_resp m = {};
	m.brokers = br;
	m.brokers_max = 2;
	m.topics = mt;
	m.topics_max = 8;
	m.parts = mp;
	m.parts_max = 16;
	m.nodes = nodes;
	m.nodes_max = 64;
	ASSERT_NO_FATAL_FAILURE(RoundTrip(
		Req(KM_API_METADATA, 2, 5, [](km_wire_wr *w) {
			km_wire_name n1, n2;
			km_wire_name_set(&n1, "alpha");
			km_wire_name_set(&n2, "nope");
			km_wire_wr_array(w, false, false, 2);
			km_wire_wr_name(w, false, false, &n1);
			km_wire_wr_name(w, false, false, &n2);
		}),
		KM_API_METADATA, 2, &x));
	ASSERT_EQ(0, km_metadata_resp_decode(&x.r, 2, &m));
	EXPECT_STREQ("kmirror-frontend-test", m.cluster_id.s);
	EXPECT_EQ(7, m.controller_id);
	ASSERT_EQ(2u, m.n_topics);
	EXPECT_EQ(0, mt[0].error_code);
	ASSERT_EQ(3u, mt[0].count);
	EXPECT_EQ(0, mp[0].error_code);
	EXPECT_EQ(7, mp[0].leader_id);
	EXPECT_EQ(KM_KERR_LEADER_NOT_AVAILABLE, mp[1].error_code);
	EXPECT_EQ(-1, mp[1].leader_id);
	EXPECT_EQ(KM_KERR_UNKNOWN_TOPIC_OR_PARTITION, mt[1].error_code);
}

// Metadata v10+: each topic with the id its logs' partition.metadata hold
// (v9: none), but a mirrored one whose fetcher has not named the source's
// id yet with none (its log's may be one drawn at open); v12 by id: the
// topic of a known id, named, and for an id no topic has (that drawn one
// too) UNKNOWN_TOPIC_ID with a null name and that id (KafkaApis).
struct MdOut {
	km_metadata_broker br[2];
	km_metadata_topic mt[8];
	km_metadata_part mp[16];
	int32_t nodes[64];
	km_metadata_resp m = {};
	MdOut()
	{
		m.brokers = br, m.brokers_max = 2;
		m.topics = mt, m.topics_max = 8;
		m.parts = mp, m.parts_max = 16;
		m.nodes = nodes, m.nodes_max = 64;
	}
};

TEST_F(Raw, MetadataNamesTopicIdsAndFindsTopicsById)
{
	uint8_t alpha[KM_WIRE_UUID_BYTES], mirror[KM_WIRE_UUID_BYTES];
	const uint8_t zero[KM_WIRE_UUID_BYTES] = {};
	km_log_topic_id(srv_.log(0), alpha);
	km_log_topic_id(srv_.log(3), mirror);
	ASSERT_NE(0, memcmp(alpha, zero, sizeof(zero)));
	ASSERT_NE(0, memcmp(alpha, mirror, sizeof(alpha)));
	for (int16_t v : {9, 10, 12}) {
		SCOPED_TRACE("version " + std::to_string(v));
		Resp x;
		MdOut o;
		km_metadata_req all = {nullptr, 0, -1, false, nullptr};
		ASSERT_NO_FATAL_FAILURE(RoundTrip(
			Req(KM_API_METADATA, v, 9, [&](km_wire_wr *w) {
				km_metadata_req_encode(w, v, &all);
			}),
			KM_API_METADATA, v, &x));
		ASSERT_EQ(0, km_metadata_resp_decode(&x.r, v, &o.m));
		ASSERT_EQ(3u, o.m.n_topics);
		for (uint32_t i = 0; i < o.m.n_topics; i++) {
			std::string name = o.mt[i].name.s;
			const uint8_t *want = v < 10 ? zero
					      : name == "alpha" ? alpha
					      : name == "mirror" ? zero
								 : nullptr;
			if (want == nullptr) { // txn: its own, non-zero
				EXPECT_NE(0, memcmp(o.mt[i].topic_id, zero, 16));
				continue;
			}
			EXPECT_EQ(0, memcmp(want, o.mt[i].topic_id, 16)) << name;
		}
	}
	const uint8_t unknown[KM_WIRE_UUID_BYTES] = {9, 9, 9};
	km_wire_name names[4];
	uint8_t ids[4][KM_WIRE_UUID_BYTES];
	for (auto &n : names)
		km_wire_name_set_null(&n);
	memcpy(ids[0], unknown, 16);
	memcpy(ids[1], alpha, 16);
	memcpy(ids[2], alpha, 16); // asked twice, answered once
	memcpy(ids[3], mirror, 16);
	km_metadata_req by_id = {names, 4, 4, false, ids};
	Resp x;
	MdOut o;
	ASSERT_NO_FATAL_FAILURE(RoundTrip(
		Req(KM_API_METADATA, 12, 10, [&](km_wire_wr *w) {
			km_metadata_req_encode(w, 12, &by_id);
		}),
		KM_API_METADATA, 12, &x));
	ASSERT_EQ(0, km_metadata_resp_decode(&x.r, 12, &o.m));
	ASSERT_EQ(3u, o.m.n_topics);
	EXPECT_EQ(KM_KERR_UNKNOWN_TOPIC_ID, o.mt[0].error_code);
	EXPECT_EQ(-1, o.mt[0].name.len) << "null name";
	EXPECT_EQ(0, memcmp(unknown, o.mt[0].topic_id, 16));
	EXPECT_EQ(0u, o.mt[0].count);
	EXPECT_EQ(0, o.mt[1].error_code);
	EXPECT_STREQ("alpha", o.mt[1].name.s);
	EXPECT_EQ(0, memcmp(alpha, o.mt[1].topic_id, 16));
	EXPECT_EQ(3u, o.mt[1].count);
	EXPECT_EQ(KM_KERR_UNKNOWN_TOPIC_ID, o.mt[2].error_code);
	EXPECT_EQ(0, memcmp(mirror, o.mt[2].topic_id, 16));
}

// KIP-74: the first batch of the first partition with data is served even
// if larger than the limits; after it, partition and response MaxBytes
// hold. ListOffsets v0 (old style) and v1 agree.
TEST_F(Raw, FetchMaxBytesAndKip74)
{
	Bytes big = Batch(1, 100 * 1024);
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, ProduceOne("alpha", 0, &big, -1));
	ASSERT_EQ(0, ProduceOne("alpha", 1, &big, -1));
	struct {
		int32_t max_bytes, part_max;
		size_t want0, want1;
	} cases[] = {
		{1 << 20, 1000, 1, 0},	   // partition limit; KIP-74 for p0
		{150 * 1024, 1 << 20, 1, 0}, // response limit
		{250 * 1024, 1 << 20, 2, 0},
		{10 << 20, 1 << 20, 3, 1},
		{0, 0, 1, 0},		   // still one batch: progress
	};
	for (const auto &c : cases) {
		FetchOut f;
		ASSERT_NO_FATAL_FAILURE(Fetch(
			FetchReq(1, 11, 0, c.max_bytes,
				 {{"alpha", 0, 0, c.part_max},
				  {"alpha", 1, 0, c.part_max}}),
			11, &f));
		ASSERT_EQ(2u, f.parts.size());
		EXPECT_EQ(c.want0, f.parts[0].batch_bases.size())
			<< c.max_bytes << "/" << c.part_max;
		EXPECT_EQ(c.want1, f.parts[1].batch_bases.size())
			<< c.max_bytes << "/" << c.part_max;
		EXPECT_EQ(3, f.parts[0].hw);
		EXPECT_EQ(3, f.parts[0].lso);
		EXPECT_EQ(0, f.parts[0].log_start);
	}
	// From the middle of the log, with fetch v4 (no log start field).
	FetchOut mid;
	ASSERT_NO_FATAL_FAILURE(Fetch(FetchReq(2, 4, 0, 1 << 20,
					       {{"alpha", 0, 2, 1 << 20}}),
				      4, &mid));
	ASSERT_EQ(1u, mid.parts[0].batch_bases.size());
	EXPECT_EQ(2, mid.parts[0].batch_bases[0]);
	for (int16_t ver : {0, 1, 5}) {
		Resp x;
		km_proto_topic t = {};
		km_listoffsets_req_part q[2] = {{0, -1, -2, 1}, {0, -1, -1, 1}};
		km_listoffsets_req req = {};
		km_wire_name_set(&t.name, "alpha");
		t.count = 2;
		req.replica_id = -1;
		req.topics = &t;
		req.topics_max = req.n_topics = 1;
		req.parts = q;
		req.parts_max = req.n_parts = 2;
		ASSERT_NO_FATAL_FAILURE(RoundTrip(
			Req(KM_API_LIST_OFFSETS, ver, 6,
			    [&](km_wire_wr *w) { km_listoffsets_req_encode(w, ver, &req); }),
			KM_API_LIST_OFFSETS, ver, &x));
		km_proto_topic rt[2];
		km_listoffsets_resp_part rp[4];
		km_listoffsets_resp m = {0, rt, 2, 0, rp, 4, 0};
		ASSERT_EQ(0, km_listoffsets_resp_decode(&x.r, ver, &m));
		ASSERT_EQ(2u, m.n_parts);
		EXPECT_EQ(0, rp[0].offset) << "v" << ver << " earliest";
		EXPECT_EQ(3, rp[1].offset) << "v" << ver << " latest";
	}
}

// Past conns_max (32 here) a new connection is reset at once; a freed
// slot serves the next one.
TEST_F(Raw, ConnectionLimit)
{
	std::vector<RawConn> conns(31);
	for (RawConn &c : conns)
		ASSERT_EQ("", c.Connect(srv_.port()));
	uint64_t end = MonoMs() + 10000;
	while (srv_.Stats().conns < 32 && MonoMs() < end)
		srv_.Run([] {});
	ASSERT_EQ(32u, srv_.Stats().conns);
	RawConn extra;
	ASSERT_EQ("", extra.Connect(srv_.port()));
	EXPECT_TRUE(extra.WaitClosed()) << "connection 33 was served";
	EXPECT_EQ(1u, srv_.Stats().refused);
	conns[0].Close();
	while (srv_.Stats().conns > 31 && MonoMs() < end)
		srv_.Run([] {});
	RawConn next;
	Resp x;
	ASSERT_EQ("", next.Connect(srv_.port()));
	ASSERT_TRUE(next.Send(Req(KM_API_API_VERSIONS, 0, 77, nullptr)));
	ASSERT_EQ("", next.ReadFrame(&x.body));
	Open(&x, KM_API_API_VERSIONS, 0);
	EXPECT_EQ(77, x.corr);
}

// ---- the group coordinator's bounds ----

const std::vector<PartSpec> kGroupParts = {
	{"__consumer_offsets", 0, true}, {"alpha", 0, true}, {"alpha", 1, true},
};

using RawGroups = RawOn<&kGroupParts>;

Bytes JoinReq(int32_t corr, uint32_t n_protocols)
{
	std::vector<km_joingroup_protocol> ps(n_protocols);
	for (uint32_t i = 0; i < n_protocols; i++) {
		ps[i] = {};
		km_wire_name_set(&ps[i].name, ("p" + std::to_string(i)).c_str());
		ps[i].metadata.p = "m";
		ps[i].metadata.len = 1;
	}
	km_joingroup_req q = {};
	km_wire_name_set(&q.group_id, "g");
	q.session_timeout_ms = 10000;
	q.rebalance_timeout_ms = 30000;
	km_wire_name_set(&q.member_id, "");
	km_wire_name_set_null(&q.group_instance_id);
	km_wire_name_set(&q.protocol_type, "consumer");
	q.protocols = ps.data();
	q.protocols_max = q.n_protocols = n_protocols;
	return Req(KM_API_JOIN_GROUP, 5, corr,
		   [&](km_wire_wr *w) { km_joingroup_req_encode(w, 5, &q); });
}

// Over the bounds of the coordinator's tables: a Kafka error where the
// answer has a field for one, and the connection goes on; where it has
// none (DescribeGroups), the connection is closed.
TEST_F(RawGroups, RequestsOverTheTablesBoundsGetKafkaErrors)
{
	Resp x;
	km_group_member jm[4];
	km_joingroup_resp jr = {};
	jr.members = jm;
	jr.members_max = 4;
	RoundTrip(JoinReq(1, KM_GROUP_PROTOCOLS_MAX + 1), KM_API_JOIN_GROUP, 5, &x);
	ASSERT_EQ(0, km_joingroup_resp_decode(&x.r, 5, &jr));
	EXPECT_EQ(KM_KERR_INVALID_REQUEST, jr.error_code);
	EXPECT_EQ(-1, jr.generation_id);
	// Within the bound: served (a new dynamic member, v5).
	Resp y;
	RoundTrip(JoinReq(2, KM_GROUP_PROTOCOLS_MAX), KM_API_JOIN_GROUP, 5, &y);
	ASSERT_EQ(0, km_joingroup_resp_decode(&y.r, 5, &jr));
	EXPECT_EQ(KM_KERR_MEMBER_ID_REQUIRED, jr.error_code);

	std::vector<km_group_member> as(KM_GROUP_MEMBERS_MAX + 1);
	for (size_t i = 0; i < as.size(); i++) {
		as[i] = {};
		km_wire_name_set(&as[i].member_id, ("m" + std::to_string(i)).c_str());
		km_wire_name_set_null(&as[i].group_instance_id);
		as[i].data.p = "a";
		as[i].data.len = 1;
	}
	km_syncgroup_req sq = {};
	km_wire_name_set(&sq.group_id, "g");
	sq.generation_id = 1;
	km_wire_name_set(&sq.member_id, "m0");
	km_wire_name_set_null(&sq.group_instance_id);
	sq.assignments = as.data();
	sq.assignments_max = sq.n_assignments = (uint32_t)as.size();
	Resp z;
	RoundTrip(Req(KM_API_SYNC_GROUP, 3, 3, [&](km_wire_wr *w) {
			  km_syncgroup_req_encode(w, 3, &sq);
		  }), KM_API_SYNC_GROUP, 3, &z);
	km_syncgroup_resp sr = {};
	ASSERT_EQ(0, km_syncgroup_resp_decode(&z.r, 3, &sr));
	EXPECT_EQ(KM_KERR_INVALID_REQUEST, sr.error_code);

	std::vector<km_leavegroup_member> lm(KM_GROUP_LEAVE_MAX + 1);
	for (size_t i = 0; i < lm.size(); i++) {
		lm[i] = {};
		km_wire_name_set(&lm[i].member_id, ("m" + std::to_string(i)).c_str());
		km_wire_name_set_null(&lm[i].group_instance_id);
	}
	km_leavegroup_req lq = {};
	km_wire_name_set(&lq.group_id, "g");
	lq.members = lm.data();
	lq.members_max = lq.n_members = (uint32_t)lm.size();
	Resp l;
	RoundTrip(Req(KM_API_LEAVE_GROUP, 3, 4, [&](km_wire_wr *w) {
			  km_leavegroup_req_encode(w, 3, &lq);
		  }), KM_API_LEAVE_GROUP, 3, &l);
	km_leavegroup_member lrm[4];
	km_leavegroup_resp lr = {};
	lr.members = lrm;
	lr.members_max = 4;
	ASSERT_EQ(0, km_leavegroup_resp_decode(&l.r, 3, &lr));
	EXPECT_EQ(KM_KERR_INVALID_REQUEST, lr.error_code);
	EXPECT_EQ(0u, lr.n_members);

	std::vector<km_wire_name> ids(KM_GROUP_DESCRIBE_GROUPS_MAX + 1);
	for (size_t i = 0; i < ids.size(); i++)
		km_wire_name_set(&ids[i], ("g" + std::to_string(i)).c_str());
	km_descgroups_req dq = {};
	dq.groups = ids.data();
	dq.groups_max = dq.n_groups = (uint32_t)ids.size();
	ASSERT_TRUE(c_.Send(Req(KM_API_DESCRIBE_GROUPS, 4, 5, [&](km_wire_wr *w) {
		km_descgroups_req_encode(w, 4, &dq);
	})));
	EXPECT_TRUE(c_.WaitClosed());
}

// n commits of group "oc" to alpha-0 and alpha-1 by turns, offsets from
// base, each with metadata md.
Bytes CommitReq(int32_t corr, uint32_t n, int64_t base, const std::string &md)
{
	std::vector<km_proto_topic> t(1);
	std::vector<km_offcommit_req_part> ps(n);
	km_wire_name_set(&t[0].name, "alpha");
	t[0].first = 0;
	t[0].count = n;
	for (uint32_t i = 0; i < n; i++) {
		ps[i] = {};
		ps[i].partition = (int32_t)(i % 2);
		ps[i].committed_offset = base + i;
		ps[i].committed_leader_epoch = -1;
		ps[i].commit_timestamp = -1;
		ps[i].metadata.p = md.data();
		ps[i].metadata.len = (int32_t)md.size();
	}
	km_offcommit_req q = {};
	km_wire_name_set(&q.group_id, "oc");
	q.generation_id = -1;
	km_wire_name_set(&q.member_id, "");
	km_wire_name_set_null(&q.group_instance_id);
	q.retention_time_ms = -1;
	q.topics = t.data();
	q.topics_max = q.n_topics = 1;
	q.parts = ps.data();
	q.parts_max = q.n_parts = n;
	return Req(KM_API_OFFSET_COMMIT, 7, corr,
		   [&](km_wire_wr *w) { km_offcommit_req_encode(w, 7, &q); });
}

std::vector<int16_t> CommitErrors(Resp *x)
{
	std::vector<km_proto_topic> t(4);
	std::vector<km_offcommit_resp_part> ps(1024);
	km_offcommit_resp m = {};
	m.topics = t.data();
	m.topics_max = 4;
	m.parts = ps.data();
	m.parts_max = 1024;
	EXPECT_EQ(0, km_offcommit_resp_decode(&x->r, 7, &m));
	std::vector<int16_t> out;
	for (uint32_t i = 0; i < m.n_parts; i++)
		out.push_back(ps[i].error_code);
	return out;
}

// A commit whose batch would pass KM_GOFFSETS_BATCH_BYTES_MAX is answered
// INVALID_COMMIT_OFFSET_SIZE, as Kafka answers it; commits that fill the
// ring of writes in flight wait for room and are all answered, in order,
// and the last one is what OffsetFetch reads.
TEST_F(RawGroups, OffsetCommitsOverTheBoundAndPastTheRing)
{
	const std::string md(KM_GOREC_METADATA_MAX, 'm');
	const uint32_t huge = KM_GOFFSETS_BATCH_BYTES_MAX / KM_GOREC_METADATA_MAX + 8;
	Resp x;
	RoundTrip(CommitReq(1, huge, 0, md), KM_API_OFFSET_COMMIT, 7, &x);
	std::vector<int16_t> e = CommitErrors(&x);
	ASSERT_EQ(huge, e.size());
	for (int16_t v : e)
		EXPECT_EQ(KM_KERR_INVALID_COMMIT_OFFSET_SIZE, v);

	// 16 commits of ~800 KB batches at once: five times the ring.
	const uint32_t n = 200;
	for (int32_t k = 0; k < 16; k++)
		ASSERT_TRUE(c_.Send(CommitReq(100 + k, n, k * 1000, md)));
	for (int32_t k = 0; k < 16; k++) {
		Resp r;
		ASSERT_EQ("", c_.ReadFrame(&r.body, 30000)) << k;
		Open(&r, KM_API_OFFSET_COMMIT, 7);
		EXPECT_EQ(100 + k, r.corr);
		std::vector<int16_t> errs = CommitErrors(&r);
		ASSERT_EQ(n, errs.size());
		for (int16_t v : errs)
			ASSERT_EQ(KM_KERR_NONE, v) << "commit " << k;
	}

	int32_t fparts[2] = {0, 1};
	km_proto_topic ft[1] = {};
	km_wire_name_set(&ft[0].name, "alpha");
	ft[0].count = 2;
	km_offfetch_req fq = {};
	km_wire_name_set(&fq.group_id, "oc");
	fq.topics = ft;
	fq.topics_max = fq.n_topics = 1;
	fq.parts = fparts;
	fq.parts_max = fq.n_parts = 2;
	Resp f;
	RoundTrip(Req(KM_API_OFFSET_FETCH, 5, 9, [&](km_wire_wr *w) {
			  km_offfetch_req_encode(w, 5, &fq);
		  }), KM_API_OFFSET_FETCH, 5, &f);
	km_proto_topic rt[2];
	km_offfetch_resp_part rp[4];
	km_offfetch_resp fm = {};
	fm.topics = rt;
	fm.topics_max = 2;
	fm.parts = rp;
	fm.parts_max = 4;
	ASSERT_EQ(0, km_offfetch_resp_decode(&f.r, 5, &fm));
	ASSERT_EQ(2u, fm.n_parts);
	EXPECT_EQ(KM_KERR_NONE, fm.error_code);
	for (uint32_t i = 0; i < 2; i++) {
		EXPECT_EQ(KM_KERR_NONE, rp[i].error_code);
		EXPECT_EQ(15 * 1000 + (int64_t)n - 2 + rp[i].partition,
			  rp[i].committed_offset);
		EXPECT_EQ((int32_t)md.size(), rp[i].metadata.len);
	}
}

} // namespace

// DescribeGroups of a group kmirrord has never seen (no members, no
// committed offsets) is Kafka's v0-5 answer: state Dead, no protocol, no
// members; the connection goes on (kafka-consumer-groups --describe of an
// unknown group crashed kmirrord with a NULL protocol name).
TEST_F(RawGroups, DescribeOfAnUnknownGroupIsDead)
{
	km_wire_name ids[1];
	km_wire_name_set(&ids[0], "nosuch");
	km_descgroups_req dq = {};
	dq.groups = ids;
	dq.groups_max = dq.n_groups = 1;
	for (int16_t v : { 0, 4 }) {
		Resp x;
		RoundTrip(Req(KM_API_DESCRIBE_GROUPS, v, 6 + v, [&](km_wire_wr *w) {
				  km_descgroups_req_encode(w, v, &dq);
			  }), KM_API_DESCRIBE_GROUPS, v, &x);
		km_descgroups_group g[2];
		km_descgroups_member mem[2];
		km_descgroups_resp m = {};
		m.groups = g;
		m.groups_max = 2;
		m.members = mem;
		m.members_max = 2;
		ASSERT_EQ(0, km_descgroups_resp_decode(&x.r, v, &m)) << "v" << v;
		ASSERT_EQ(1u, m.n_groups);
		EXPECT_EQ(KM_KERR_NONE, g[0].error_code);
		EXPECT_STREQ("nosuch", g[0].group_id.s);
		EXPECT_STREQ("Dead", g[0].group_state.s);
		EXPECT_STREQ("", g[0].protocol_type.s);
		EXPECT_STREQ("", g[0].protocol_data.s);
		EXPECT_EQ(0u, g[0].count);
	}
}

// ListGroups v5 (Kafka 4.x's Admin client): every group here is a classic
// group - GroupType "classic", kept by a TypesFilter naming classic in any
// case, left out by one naming only consumer; v4 has no GroupType.
TEST_F(RawGroups, ListGroupsV5NamesEveryGroupClassic)
{
	Resp c;
	RoundTrip(CommitReq(1, 2, 10, ""), KM_API_OFFSET_COMMIT, 7, &c);
	ASSERT_EQ((std::vector<int16_t>{ 0, 0 }), CommitErrors(&c));
	struct Case {
		int16_t v;
		std::vector<std::string> types;
		bool listed;
		const char *type;
	} cases[] = {
		{ 5, {}, true, "classic" },
		{ 5, { "Classic" }, true, "classic" },
		{ 5, { "consumer", "classic" }, true, "classic" },
		{ 5, { "consumer" }, false, "" },
		{ 4, {}, true, "" },
	};
	int32_t corr = 2;
	for (const Case &k : cases) {
		std::vector<km_wire_name> types(k.types.size());
		for (size_t i = 0; i < types.size(); i++)
			km_wire_name_set(&types[i], k.types[i].c_str());
		km_listgroups_req q = {};
		q.types_filter = types.data();
		q.types_max = q.n_types = (uint32_t)types.size();
		Resp x;
		RoundTrip(Req(KM_API_LIST_GROUPS, k.v, corr++, [&](km_wire_wr *w) {
				  km_listgroups_req_encode(w, k.v, &q);
			  }), KM_API_LIST_GROUPS, k.v, &x);
		km_listgroups_group g[4];
		km_listgroups_resp m = {};
		m.groups = g;
		m.groups_max = 4;
		ASSERT_EQ(0, km_listgroups_resp_decode(&x.r, k.v, &m)) << corr;
		EXPECT_EQ(0, m.error_code);
		ASSERT_EQ(k.listed ? 1u : 0u, m.n_groups) << "case " << corr - 2;
		if (!k.listed)
			continue;
		EXPECT_STREQ("oc", g[0].group_id.s);
		EXPECT_STREQ("Empty", g[0].group_state.s);
		EXPECT_STREQ(k.type, g[0].group_type.s) << "case " << corr - 2;
	}
}

// OffsetFetch v7 of group "oc" on alpha-0 and alpha-1, and the two
// offsets of its answer.
Bytes FetchOcReq(int32_t corr)
{
	int32_t parts[2] = { 0, 1 };
	km_proto_topic t[1];
	km_wire_name_set(&t[0].name, "alpha");
	t[0].first = 0;
	t[0].count = 2;
	km_offfetch_req fq = {};
	km_wire_name_set(&fq.group_id, "oc");
	fq.topics = t;
	fq.topics_max = fq.n_topics = 1;
	fq.parts = parts;
	fq.parts_max = fq.n_parts = 2;
	return Req(KM_API_OFFSET_FETCH, 7, corr,
		   [&](km_wire_wr *w) { km_offfetch_req_encode(w, 7, &fq); });
}

std::vector<int64_t> FetchOcOffsets(Resp *f)
{
	km_proto_topic rt[2];
	km_offfetch_resp_part rp[4];
	km_offfetch_resp fr = {};
	fr.topics = rt;
	fr.topics_max = 2;
	fr.parts = rp;
	fr.parts_max = 4;
	std::vector<int64_t> out;
	EXPECT_EQ(0, km_offfetch_resp_decode(&f->r, 7, &fr));
	for (uint32_t i = 0; i < fr.n_parts; i++)
		out.push_back(rp[i].committed_offset);
	return out;
}

// DeleteGroups: Kafka's coordinator's answers - a group with only
// committed offsets is deleted (its offsets read -1 after, it is no longer
// listed), one never seen is GROUP_ID_NOT_FOUND, one with a member joining
// NON_EMPTY_GROUP; the connection goes on.
TEST_F(RawGroups, DeleteGroupsAnswersAsKafka)
{
	Resp c, j;
	RoundTrip(CommitReq(1, 2, 10, "md"), KM_API_OFFSET_COMMIT, 7, &c);
	ASSERT_EQ((std::vector<int16_t>{ 0, 0 }), CommitErrors(&c));
	RoundTrip(JoinReq(2, 1), KM_API_JOIN_GROUP, 5, &j); // "g": pending
	for (int16_t v : { 0, 2 }) {
		km_wire_name names[3];
		km_wire_name_set(&names[0], "oc");
		km_wire_name_set(&names[1], "nosuch");
		km_wire_name_set(&names[2], "g");
		km_delgroups_req q = { names, 3, 3 };
		Resp x;
		RoundTrip(Req(KM_API_DELETE_GROUPS, v, 3 + v, [&](km_wire_wr *w) {
				  km_delgroups_req_encode(w, v, &q);
			  }), KM_API_DELETE_GROUPS, v, &x);
		km_delgroups_result res[4];
		km_delgroups_resp m = { 0, res, 4, 0 };
		ASSERT_EQ(0, km_delgroups_resp_decode(&x.r, v, &m)) << v;
		ASSERT_EQ(3u, m.n_results);
		EXPECT_STREQ("oc", res[0].group_id.s);
		/* deleted at v0; at v2 it is gone already */
		EXPECT_EQ(v == 0 ? KM_KERR_NONE : KM_KERR_GROUP_ID_NOT_FOUND,
			  res[0].error_code) << v;
		EXPECT_EQ(KM_KERR_GROUP_ID_NOT_FOUND, res[1].error_code) << v;
		EXPECT_EQ(KM_KERR_NON_EMPTY_GROUP, res[2].error_code) << v;
	}
	Resp f;
	RoundTrip(FetchOcReq(9), KM_API_OFFSET_FETCH, 7, &f);
	std::vector<int64_t> got = FetchOcOffsets(&f);
	EXPECT_EQ((std::vector<int64_t>{ -1, -1 }), got) << "the offsets are gone";
}

// OffsetDelete: the partitions named lose their committed offset, the
// others keep it; a group never seen is GROUP_ID_NOT_FOUND (no topics in
// the answer); a group with a member joining answers each partition
// GROUP_SUBSCRIBED_TO_TOPIC and keeps its offsets.
TEST_F(RawGroups, OffsetDeleteAnswersAsKafka)
{
	Resp c, j;
	RoundTrip(CommitReq(1, 2, 10, "md"), KM_API_OFFSET_COMMIT, 7, &c);
	ASSERT_EQ((std::vector<int16_t>{ 0, 0 }), CommitErrors(&c));
	RoundTrip(JoinReq(2, 1), KM_API_JOIN_GROUP, 5, &j); // "g": pending
	struct Case {
		const char *group;
		int16_t top;
		int16_t part;
	} cases[] = {
		{ "oc", KM_KERR_NONE, KM_KERR_NONE },
		{ "nosuch", KM_KERR_GROUP_ID_NOT_FOUND, -2 },
		{ "g", KM_KERR_NONE, KM_KERR_GROUP_SUBSCRIBED_TO_TOPIC },
	};
	int32_t corr = 3;
	for (const Case &k : cases) {
		int32_t part0 = 0;
		km_proto_topic t[1];
		km_wire_name_set(&t[0].name, "alpha");
		t[0].first = 0;
		t[0].count = 1;
		km_offdelete_req q = {};
		km_wire_name_set(&q.group_id, k.group);
		q.topics = t;
		q.topics_max = q.n_topics = 1;
		q.parts = &part0;
		q.parts_max = q.n_parts = 1;
		Resp x;
		RoundTrip(Req(KM_API_OFFSET_DELETE, 0, corr++, [&](km_wire_wr *w) {
				  km_offdelete_req_encode(w, 0, &q);
			  }), KM_API_OFFSET_DELETE, 0, &x);
		km_proto_topic rt[2];
		km_offcommit_resp_part rp[2];
		km_offdelete_resp m = { 0, 0, rt, 2, 0, rp, 2, 0 };
		ASSERT_EQ(0, km_offdelete_resp_decode(&x.r, 0, &m)) << k.group;
		EXPECT_EQ(k.top, m.error_code) << k.group;
		ASSERT_EQ(k.part == -2 ? 0u : 1u, m.n_parts) << k.group;
		if (k.part != -2) {
			EXPECT_EQ(k.part, rp[0].error_code) << k.group;
		}
	}
	Resp f;
	RoundTrip(FetchOcReq(corr), KM_API_OFFSET_FETCH, 7, &f);
	EXPECT_EQ((std::vector<int64_t>{ -1, 11 }), FetchOcOffsets(&f))
		<< "alpha-0 deleted, alpha-1 kept";
}

// KIP-227 fetch sessions as Kafka's FetchManager serves them: a full
// Fetch with epoch 0 opens a session and answers every partition; an
// incremental one answers only partitions with records or new figures
// (the session remembers each partition's offset from the request that
// last named it); a repeated epoch is INVALID_FETCH_SESSION_EPOCH, an
// unknown id FETCH_SESSION_ID_NOT_FOUND, both with no partition and
// SessionId 0; ForgottenTopicsData drops a partition; epoch -1 closes the
// session; a full Fetch naming a partition not here gets no session.
// Expected offsets come from our own Produce answers.
TEST_F(Raw, FetchSessionsAsKafka)
{
	Bytes b2 = Batch(2), b1 = Batch(1);
	int64_t base = -1;
	ASSERT_EQ(0, ProduceOne("alpha", 0, &b2, -1));
	ASSERT_EQ(0, ProduceOne("alpha", 1, &b1, -1));
	auto fetch = [&](int32_t corr, const std::vector<fetest::FetchPart> &ps,
			 int32_t id, int32_t epoch, FetchOut *out,
			 const std::vector<fetest::FetchPart> &fg = {}) {
		Fetch(FetchReq(corr, 11, 0, 1 << 20, ps, id, epoch, 0, fg), 11, out);
	};
	const int32_t m = 1 << 20;
	FetchOut full;
	ASSERT_NO_FATAL_FAILURE(fetch(1, {{"alpha", 0, 0, m}, {"alpha", 1, 0, m},
					  {"alpha", 2, 0, m}}, 0, 0, &full));
	ASSERT_EQ(0, full.top_error);
	const int32_t id = full.session_id;
	ASSERT_GT(id, 0) << "epoch 0 opens a session";
	ASSERT_EQ(3u, full.parts.size()) << "a full answer names every partition";
	EXPECT_EQ(2, full.parts[0].hw);
	EXPECT_EQ(1u, full.parts[0].batch_bases.size());
	EXPECT_EQ(1u, full.parts[1].batch_bases.size());
	EXPECT_EQ(1u, srv_.Stats().fetch_full);

	// The client moves alpha-0 and alpha-1 to their ends: nothing new.
	FetchOut quiet;
	ASSERT_NO_FATAL_FAILURE(fetch(2, {{"alpha", 0, 2, m}, {"alpha", 1, 1, m}},
				      id, 1, &quiet));
	EXPECT_EQ(0, quiet.top_error);
	EXPECT_EQ(id, quiet.session_id);
	EXPECT_TRUE(quiet.parts.empty()) << "unchanged partitions are left out";

	// alpha-2 takes a batch: an empty incremental Fetch brings it, from
	// the offset the session holds (0).
	ASSERT_EQ(0, ProduceOne("alpha", 2, &b1, -1, &base));
	FetchOut news;
	ASSERT_NO_FATAL_FAILURE(fetch(3, {}, id, 2, &news));
	ASSERT_EQ(1u, news.parts.size());
	EXPECT_EQ(2, news.parts[0].partition);
	ASSERT_EQ(1u, news.parts[0].batch_bases.size());
	EXPECT_EQ(base, news.parts[0].batch_bases[0]);
	EXPECT_EQ(base + 1, news.parts[0].hw);
	EXPECT_EQ(2u, srv_.Stats().fetch_incremental);

	// Epoch 2 again, and an id never given.
	FetchOut dup, lost;
	ASSERT_NO_FATAL_FAILURE(fetch(4, {}, id, 2, &dup));
	EXPECT_EQ(KM_KERR_INVALID_FETCH_SESSION_EPOCH, dup.top_error);
	EXPECT_EQ(0, dup.session_id);
	EXPECT_TRUE(dup.parts.empty());
	ASSERT_NO_FATAL_FAILURE(fetch(5, {}, id == INT32_MAX ? 1 : id + 1, 3, &lost));
	EXPECT_EQ(KM_KERR_FETCH_SESSION_ID_NOT_FOUND, lost.top_error);
	EXPECT_EQ(0, lost.session_id);

	// alpha-2 forgotten: its next batch is not answered; alpha-0's is.
	FetchOut fg, after;
	ASSERT_NO_FATAL_FAILURE(fetch(6, {}, id, 3, &fg, {{"alpha", 2, 0, 0}}));
	EXPECT_EQ(0, fg.top_error);
	ASSERT_EQ(0, ProduceOne("alpha", 2, &b1, -1));
	ASSERT_EQ(0, ProduceOne("alpha", 0, &b1, -1, &base));
	ASSERT_NO_FATAL_FAILURE(fetch(7, {}, id, 4, &after));
	ASSERT_EQ(1u, after.parts.size()) << "alpha-2 left the session";
	EXPECT_EQ(0, after.parts[0].partition);
	ASSERT_EQ(1u, after.parts[0].batch_bases.size());
	EXPECT_EQ(base, after.parts[0].batch_bases[0]);

	// Epoch -1 closes it (answered without a session); then it is gone.
	FetchOut closing, gone;
	ASSERT_NO_FATAL_FAILURE(fetch(8, {{"alpha", 1, 1, m}}, id, -1, &closing));
	EXPECT_EQ(0, closing.top_error);
	EXPECT_EQ(0, closing.session_id);
	EXPECT_EQ(1u, closing.parts.size());
	ASSERT_NO_FATAL_FAILURE(fetch(9, {}, id, 5, &gone));
	EXPECT_EQ(KM_KERR_FETCH_SESSION_ID_NOT_FOUND, gone.top_error);

	// A partition not here: no session, everything answered.
	FetchOut ghost;
	ASSERT_NO_FATAL_FAILURE(fetch(10, {{"alpha", 0, 0, m}, {"ghost", 0, 0, m}},
				      0, 0, &ghost));
	EXPECT_EQ(0, ghost.session_id);
	ASSERT_EQ(2u, ghost.parts.size());
	EXPECT_EQ(KM_KERR_UNKNOWN_TOPIC_OR_PARTITION, ghost.parts[1].error);
	EXPECT_EQ(0u, srv_.Stats().fetch_sessions);
}
