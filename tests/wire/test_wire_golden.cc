// Goal: the codecs agree byte for byte with frames written by hand from
// Kafka's schemas (golden.h), whatever way the bytes are split or cut.
// Method: decode each golden frame on the server or client path and compare
// with the expected fields; encode the same message with kmirror's encoders
// and compare with the golden bytes (records also left external and joined
// through iovecs); decode with the frame split at every byte and split into
// one-byte segments; cut the frame at every byte (need-more from the framer,
// KM_EWIRETRUNC from the decoders).
#include <gtest/gtest.h>

#include "golden.h"
#include "wire_util.h"

namespace {

using wt::Bytes;

Bytes G(const golden_frame &g) { return Bytes(g.bytes, g.bytes + g.size); }

std::string Decode(const golden_frame &g, const km_chain *c)
{
	return g.request ? wt::ServerDecode(c)
			 : wt::ClientDecode(c, g.api_key, g.version);
}

const char *const kExpected[GOLDEN_COUNT] = {
	"hdr{key=18 ver=3 corr=1 client=\"rdkafka\"} "
	"apiversions_req{sw=\"librdkafka\" \"2.0.2\"}",

	"corr=7 metadata_resp{throttle=0 brokers=[(1 \"localhost\":9092 "
	"rack=null)(2 \"127.0.0.1\":9093 rack=\"rack-b\")] "
	"cluster=\"kmirror-golden-cluster\" controller=1 topics=[(err=0 "
	"\"events\" internal=0 parts=[(err=0 p=0 leader=1 replicas=[1,2] "
	"isr=[1,2])(err=0 p=1 leader=2 replicas=[2] isr=[])])]}",

	"hdr{key=1 ver=4 corr=42 client=\"rdkafka\"} fetch_req{replica=-1 "
	"wait=500 min=1 max=52428800 iso=0 session=0/-1 topics=[\"events\"[0+2] "
	"] parts=[(0 epoch=-1 off=0 lso=-1 max=1048576)(1 epoch=-1 off=42 "
	"lso=-1 max=1048576)] forgotten=[] fparts=[] rack=\"\"}",

	"corr=43 fetch_resp{throttle=0 err=0 session=305419896 "
	"[\"events\"#0(0 err=0 hw=5 lso=5 start=0 aborted=-1[] preferred=-1 "
	"records=@72:30313233343536373839616263646566)\"events\"#0(1 err=1 "
	"hw=10 lso=7 start=2 aborted=1[1000@7 ] preferred=2 records=@146:)]}",

	"hdr{key=0 ver=3 corr=5 client=\"rdkafka\"} produce_req{txn=null "
	"acks=-1 timeout=30000 [\"events\"#0(2 @49:30313233343536373839616263"
	"646566)]}",

	"hdr{key=22 ver=4 corr=9 client=\"rdkafka\"} initpid_req{txn=null "
	"timeout=60000 pid=-1 epoch=-1}",
};

TEST(WireGolden, SizePrefixesMatch)
{
	for (const golden_frame &g : golden_frames) {
		uint32_t size = 0;
		wt::Chain ch(G(g), {});
		EXPECT_EQ((int)g.size, km_wire_frame_parse(ch.get(),
							   km_chain_start(ch.get()),
							   1 << 20, &size))
			<< g.name;
		EXPECT_EQ(g.size - 4, size) << g.name;
	}
}

TEST(WireGolden, DecodesToTheSchemaFields)
{
	for (size_t i = 0; i < GOLDEN_COUNT; i++) {
		const golden_frame &g = golden_frames[i];
		wt::Chain ch(G(g), {});
		EXPECT_EQ(kExpected[i], Decode(g, ch.get())) << g.name;
	}
}

TEST(WireGolden, EverySplitPointDecodesIdentically)
{
	for (size_t i = 0; i < GOLDEN_COUNT; i++) {
		const golden_frame &g = golden_frames[i];
		for (size_t cut = 0; cut <= g.size; cut++) {
			wt::Chain ch(G(g), {cut});
			ASSERT_EQ(kExpected[i], Decode(g, ch.get()))
				<< g.name << " split at " << cut;
		}
		for (size_t a = 0; a <= g.size; a += 7)
			for (size_t b = a; b <= g.size; b += 5) {
				wt::Chain ch(G(g), {a, b});
				ASSERT_EQ(kExpected[i], Decode(g, ch.get()))
					<< g.name << " split at " << a << ","
					<< b;
			}
		wt::Chain bytewise = wt::Chain::Bytewise(G(g));
		EXPECT_EQ(kExpected[i], Decode(g, bytewise.get())) << g.name;
	}
}

TEST(WireGolden, EveryTruncationIsRejected)
{
	for (const golden_frame &g : golden_frames) {
		Bytes full = G(g);
		// The framer waits for the rest, never decodes a part.
		for (size_t k = 0; k < g.size; k++) {
			wt::Chain ch(Bytes(full.begin(), full.begin() + k), {k / 2});
			ASSERT_EQ("NEED", Decode(g, ch.get()))
				<< g.name << " first " << k << " bytes";
		}
		// A frame whose size says it ends early: the decoders name
		// the field that runs past the end.
		for (uint32_t len = 0; len < g.size - 4; len++)
			ASSERT_EQ(KM_EWIRETRUNC,
				  wt::DecodeCut(full, len, g.request, g.api_key,
						g.version))
				<< g.name << " cut to " << len;
		EXPECT_EQ(0, wt::DecodeCut(full, g.size - 4, g.request,
					   g.api_key, g.version))
			<< g.name;
	}
}

// Trailing bytes after a complete body are refused, not ignored.
TEST(WireGolden, TrailingBytesAreRejected)
{
	for (const golden_frame &g : golden_frames) {
		wt::B b;
		b.raw(Bytes(g.bytes + 4, g.bytes + g.size)).u8(0);
		wt::Chain ch(b.frame(), {});
		EXPECT_NE(std::string::npos,
			  Decode(g, ch.get()).find(km_strerror(KM_EWIRETRAILING)))
			<< g.name;
	}
}

// ---- the encoders write the golden bytes ----

const char kRecords[] = "0123456789abcdef";

struct Out {
	uint8_t buf[1024];
	km_wire_gap gaps[4];
	km_wire_wr w;
	Out()
	{
		km_wire_wr_init(&w, buf, sizeof(buf));
		km_wire_wr_set_gaps(&w, gaps, 4);
	}
	// The frame with external fields joined in.
	Bytes Join(const std::vector<iovec> &ext) const
	{
		iovec iov[16];
		int n = km_wire_wr_iovec(&w, ext.data(), (uint32_t)ext.size(),
					 iov, 16);
		Bytes b;
		for (int i = 0; i < n; i++)
			b.insert(b.end(), (uint8_t *)iov[i].iov_base,
				 (uint8_t *)iov[i].iov_base + iov[i].iov_len);
		return b;
	}
	Bytes Flat() const { return Bytes(buf, buf + w.pos); }
};

km_reqhdr Hdr(int16_t key, int16_t ver, int32_t corr)
{
	km_reqhdr h;
	h.api_key = key, h.api_version = ver, h.correlation_id = corr;
	h.client_id = wt::Name("rdkafka");
	h.client_id_truncated = false;
	return h;
}

TEST(WireGoldenEncode, ApiVersionsV3Request)
{
	Out o;
	km_reqhdr h = Hdr(KM_API_API_VERSIONS, 3, 1);
	km_apiversions_req m = {wt::Name("librdkafka"), wt::Name("2.0.2")};
	ASSERT_EQ(0, km_proto_req_begin(&o.w, &h));
	ASSERT_EQ(0, km_apiversions_req_encode(&o.w, 3, &m));
	ASSERT_EQ((int)sizeof(golden_apiversions_v3_req),
		  km_wire_wr_frame_end(&o.w));
	EXPECT_EQ(G(golden_frames[0]), o.Flat());
}

TEST(WireGoldenEncode, MetadataV4Response)
{
	Out o;
	km_metadata_broker brokers[2] = {
		{1, wt::Name("localhost"), 9092, wt::Name(nullptr)},
		{2, wt::Name("127.0.0.1"), 9093, wt::Name("rack-b")},
	};
	km_metadata_topic topic = {0, wt::Name("events"), false, 0, 2, {}};
	km_metadata_part parts[2] = {{0, 0, 1, 0, 2, 2, 2, -1},
				     {0, 1, 2, 4, 1, 5, 0, -1}};
	int32_t nodes[5] = {1, 2, 1, 2, 2};
	km_metadata_resp m;
	memset(&m, 0, sizeof(m));
	m.brokers = brokers, m.n_brokers = 2;
	m.cluster_id = wt::Name("kmirror-golden-cluster");
	m.controller_id = 1;
	m.topics = &topic, m.n_topics = 1;
	m.parts = parts, m.n_parts = 2;
	m.nodes = nodes, m.n_nodes = 5;
	ASSERT_EQ(0, km_proto_resp_begin(&o.w, KM_API_METADATA, 4, 7));
	ASSERT_EQ(0, km_metadata_resp_encode(&o.w, 4, &m));
	ASSERT_GT(km_wire_wr_frame_end(&o.w), 0);
	EXPECT_EQ(G(golden_frames[1]), o.Flat());
}

TEST(WireGoldenEncode, FetchV4Request)
{
	Out o;
	km_reqhdr h = Hdr(KM_API_FETCH, 4, 42);
	km_proto_topic topic = {wt::Name("events"), 0, 2};
	km_fetch_req_part parts[2] = {{0, -1, 0, -1, 1 << 20, -1},
				      {1, -1, 42, -1, 1 << 20, -1}};
	km_fetch_req m;
	memset(&m, 0, sizeof(m));
	m.replica_id = -1, m.max_wait_ms = 500, m.min_bytes = 1;
	m.max_bytes = 50 << 20;
	m.topics = &topic, m.n_topics = 1;
	m.parts = parts, m.n_parts = 2;
	ASSERT_EQ(0, km_proto_req_begin(&o.w, &h));
	ASSERT_EQ(0, km_fetch_req_encode(&o.w, 4, &m));
	ASSERT_GT(km_wire_wr_frame_end(&o.w), 0);
	EXPECT_EQ(G(golden_frames[2]), o.Flat());
}

// The Fetch response with its records left external: the buffer holds
// everything but the 16 record bytes, which come back through iovecs.
TEST(WireGoldenEncode, FetchV11ResponseWithExternalRecords)
{
	Out o;
	km_proto_enc e;
	km_wire_name topic = wt::Name("events");
	km_fetch_aborted aborted = {1000, 7};
	km_fetch_part p0 = {0, 0, 5, 5, 0, -1, nullptr, -1, {}};
	km_fetch_part p1 = {1, 1, 10, 7, 2, 1, &aborted, 2, {}};
	ASSERT_EQ(0, km_proto_resp_begin(&o.w, KM_API_FETCH, 11, 43));
	ASSERT_EQ(0, km_fetch_resp_enc_begin(&e, &o.w, 11, 0, 0, 0x12345678));
	ASSERT_EQ(0, km_fetch_resp_enc_topic(&e, &topic));
	ASSERT_EQ(0, km_fetch_resp_enc_partition(&e, &p0, nullptr, 16));
	ASSERT_EQ(0, km_fetch_resp_enc_partition(&e, &p1, "", 0));
	ASSERT_EQ(0, km_fetch_resp_enc_end(&e));
	ASSERT_EQ((int)sizeof(golden_fetch_v11_resp),
		  km_wire_wr_frame_end(&o.w));
	EXPECT_EQ(sizeof(golden_fetch_v11_resp) - 16, o.w.pos);
	ASSERT_EQ(1u, o.w.n_gaps);
	EXPECT_EQ(16u, o.w.gaps[0].len);
	iovec ext = {(void *)kRecords, 16};
	EXPECT_EQ(G(golden_frames[3]), o.Join({ext}));
}

TEST(WireGoldenEncode, ProduceV3Request)
{
	for (bool external : {false, true}) {
		Out o;
		km_proto_enc e;
		km_reqhdr h = Hdr(KM_API_PRODUCE, 3, 5);
		km_wire_name txn = wt::Name(nullptr), topic = wt::Name("events");
		ASSERT_EQ(0, km_proto_req_begin(&o.w, &h));
		ASSERT_EQ(0, km_produce_req_enc_begin(&e, &o.w, 3, &txn, -1,
						      30000));
		ASSERT_EQ(0, km_produce_req_enc_topic(&e, &topic));
		ASSERT_EQ(0, km_produce_req_enc_partition(
				     &e, 2, external ? nullptr : kRecords, 16));
		ASSERT_EQ(0, km_produce_req_enc_end(&e));
		ASSERT_EQ((int)sizeof(golden_produce_v3_req),
			  km_wire_wr_frame_end(&o.w));
		iovec ext = {(void *)kRecords, 16};
		EXPECT_EQ(G(golden_frames[4]),
			  external ? o.Join({ext}) : o.Flat());
	}
}

TEST(WireGoldenEncode, InitProducerIdV4Request)
{
	Out o;
	km_reqhdr h = Hdr(KM_API_INIT_PRODUCER_ID, 4, 9);
	km_initpid_req m = {wt::Name(nullptr), 60000, -1, -1};
	ASSERT_EQ(0, km_proto_req_begin(&o.w, &h));
	ASSERT_EQ(0, km_initpid_req_encode(&o.w, 4, &m));
	ASSERT_GT(km_wire_wr_frame_end(&o.w), 0);
	EXPECT_EQ(G(golden_frames[5]), o.Flat());
}

} // namespace
