// Goal: a Fetch response that fits the receive buffers a session may hold
// in bytes, but arrives in so many small pieces (a slow link: every
// receive buffer only partly filled) that it would need more buffers than
// the session may hold, does not wedge the pool: the session drops the
// connection, halves Fetch MaxBytes, refetches, and mirrors everything.
// Method: real batches (a librdkafka producer into the mock cluster, read
// back raw) served by a small single-partition broker written here with
// kmirror's own encoders (kafka/proto.h), which sends any response above
// 20000 bytes in 256-byte pieces a millisecond apart (pacing the peer is
// the scenario, not a synchronisation); the session may hold 4 buffers of
// 16 KiB, so MaxBytes starts at 31 KiB and the first response stalls.
#include <poll.h>

#include <atomic>
#include <thread>

#include "fetch_rig.h"
#include "kafka/proto.h"
#include "tests/support/kafka_peers.h"

namespace {

using namespace fetchtest;

// One partition of kTopic, the batches given, on 127.0.0.1.
class FakeBroker {
public:
	~FakeBroker()
	{
		stop_ = true;
		if (th_.joinable())
			th_.join();
		if (lfd_ >= 0)
			close(lfd_);
	}
	std::string Start(const std::vector<Bytes> &batches, size_t drip_above)
	{
		struct sockaddr_in sa = {};
		socklen_t len = sizeof(sa);
		batches_ = batches;
		drip_above_ = drip_above;
		sa.sin_family = AF_INET;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		lfd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd_ < 0 || bind(lfd_, (sockaddr *)&sa, sizeof(sa)) < 0 ||
		    listen(lfd_, 4) < 0 ||
		    getsockname(lfd_, (sockaddr *)&sa, &len) < 0)
			return std::string("listen: ") + strerror(errno);
		port_ = ntohs(sa.sin_port);
		th_ = std::thread([this] { Run(); });
		return "";
	}
	uint16_t port() const { return port_; }
	int64_t hw() const
	{
		return rawkafka::batch_last_offset(batches_.back()) + 1;
	}
	std::string err_;
	std::atomic<int> dripped_{0};
	// Answer the first n Fetches as a broker over its quota does (Kafka's
	// SessionlessFetchContext.getThrottledResponse: no partition at all,
	// throttle_time_ms = ms), and time the pause that follows each.
	void Throttle(int n, int32_t ms)
	{
		throttle_n_ = n;
		throttle_ms_ = ms;
	}
	std::atomic<int> throttled_{0};
	std::atomic<int64_t> min_pause_ms_{INT64_MAX};

private:
	// Accept and serve one connection at a time until stopped.
	void Run()
	{
		while (!stop_ && err_.empty()) {
			struct pollfd p = {lfd_, POLLIN, 0};
			if (poll(&p, 1, 50) != 1)
				continue;
			int fd = accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				   sizeof(one));
			Serve(fd);
			close(fd);
		}
	}
	// Read a request frame; false when the peer left or we stop.
	bool ReadFrame(int fd, Bytes *req)
	{
		uint8_t be[4];
		for (;;) { // until a request, the peer's close, or stop
			struct pollfd p = {fd, POLLIN, 0};
			if (stop_)
				return false;
			if (poll(&p, 1, 50) == 1)
				break;
		}
		auto deadline = kmtest::deadline_in(5000);
		if (!kmtest::io_all(fd, be, 4, false, deadline).empty())
			return false;
		req->resize((size_t)be[0] << 24 | (size_t)be[1] << 16 |
			    (size_t)be[2] << 8 | be[3]);
		return kmtest::io_all(fd, req->data(), req->size(), false,
				      deadline)
			.empty();
	}
	void Serve(int fd)
	{
		Bytes req, resp;
		while (ReadFrame(fd, &req)) {
			if (quiet_from_ != Clock::time_point()) {
				int64_t ms = std::chrono::duration_cast<
					std::chrono::milliseconds>(Clock::now() -
								   quiet_from_).count();
				min_pause_ms_ = std::min<int64_t>(min_pause_ms_, ms);
				quiet_from_ = Clock::time_point();
			}
			resp.assign(1 << 20, 0);
			size_t n = Respond(req, &resp);
			if (n == 0)
				return;
			if (!Send(fd, resp.data(), n))
				return;
			if (answered_throttled_) {
				quiet_from_ = Clock::now();
				answered_throttled_ = false;
			}
		}
	}
	bool Send(int fd, uint8_t *p, size_t n)
	{
		auto deadline = kmtest::deadline_in(5000);
		if (n <= drip_above_)
			return kmtest::io_all(fd, p, n, true, deadline).empty();
		dripped_++;
		for (size_t at = 0; at < n; at += 256) {
			size_t k = n - at < 256 ? n - at : 256;
			if (!kmtest::io_all(fd, p + at, k, true, deadline).empty())
				return false;
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		}
		return true;
	}
	// The response frame to req in out; its size, 0 to hang up.
	size_t Respond(const Bytes &req, Bytes *out)
	{
		iovec iv = {(void *)req.data(), req.size()};
		km_chain ch = {&iv, 1};
		km_wire_rd r;
		km_reqhdr h;
		km_wire_wr w;
		km_wire_rd_init(&r, &ch, km_chain_start(&ch), (uint32_t)req.size(),
				&km_wire_limits_default);
		if (km_reqhdr_decode(&r, &h) < 0)
			return Fail("request header");
		km_wire_wr_init(&w, out->data(), out->size());
		int16_t v = h.api_version;
		if (h.api_key == KM_API_API_VERSIONS && v > 2)
			v = 0; // answered UNSUPPORTED_VERSION in a v0 body
		km_proto_resp_begin(&w, h.api_key, v, h.correlation_id);
		bool ok = false;
		switch (h.api_key) {
		case KM_API_API_VERSIONS:
			ok = ApiVersions(&w, v, h.api_version > 2);
			break;
		case KM_API_METADATA:
			ok = Metadata(&w, v);
			break;
		case KM_API_LIST_OFFSETS:
			ok = ListOffsets(&r, &w, v);
			break;
		case KM_API_FETCH:
			ok = Fetch(&r, &w, v);
			break;
		default:
			break;
		}
		if (!ok || km_wire_wr_frame_end(&w) < 0)
			return Fail("response to API " + std::to_string(h.api_key));
		return w.pos;
	}
	size_t Fail(const std::string &why)
	{
		err_ = why;
		return 0;
	}
	bool ApiVersions(km_wire_wr *w, int16_t v, bool unsupported)
	{
		km_api_range keys[] = {{KM_API_FETCH, 4, 11},
				       {KM_API_LIST_OFFSETS, 1, 3},
				       {KM_API_METADATA, 0, 4},
				       {KM_API_API_VERSIONS, 0, 2}};
		km_apiversions_resp m = {0, keys, 4, 4, 0};
		if (unsupported) {
			m.error_code = KM_KERR_UNSUPPORTED_VERSION;
			m.keys = &keys[3];
			m.n_keys = 1;
		}
		return km_apiversions_resp_encode(w, v, &m) == 0;
	}
	bool Metadata(km_wire_wr *w, int16_t v)
	{
		km_metadata_broker b = {};
		km_metadata_topic t = {};
		km_metadata_part p = {};
		int32_t nodes[2] = {1, 1};
		km_metadata_resp m = {};
		b.node_id = 1;
		km_wire_name_set(&b.host, "127.0.0.1");
		b.port = port_;
		km_wire_name_set_null(&b.rack);
		km_wire_name_set(&t.name, kTopic);
		t.count = 1;
		p.leader_id = 1;
		p.replicas_count = p.isr_count = 1;
		p.isr_first = 1;
		m.brokers = &b;
		m.n_brokers = 1;
		km_wire_name_set(&m.cluster_id, "fake-cluster");
		m.controller_id = 1;
		m.topics = &t;
		m.n_topics = 1;
		m.parts = &p;
		m.n_parts = 1;
		m.nodes = nodes;
		m.n_nodes = 2;
		return km_metadata_resp_encode(w, v, &m) == 0;
	}
	bool ListOffsets(km_wire_rd *r, km_wire_wr *w, int16_t v)
	{
		km_proto_topic t[2];
		km_listoffsets_req_part rp[2];
		km_listoffsets_req q = {0, 0, t, 2, 0, rp, 2, 0};
		if (km_listoffsets_req_decode(r, v, &q) < 0 || q.n_parts != 1)
			return false;
		km_listoffsets_resp_part p = {0, 0, 1, -1, 0, -1};
		p.offset = rp[0].timestamp == -2 ? BaseOffset(batches_[0])
						 : hw();
		km_proto_topic rt = t[0];
		rt.first = 0;
		km_listoffsets_resp m = {0, &rt, 1, 1, &p, 1, 1};
		return km_listoffsets_resp_encode(w, v, &m) == 0;
	}
	static int64_t BaseOffset(const Bytes &b)
	{
		uint64_t v = 0;
		for (int i = 0; i < 8; i++)
			v = v << 8 | b[(size_t)i];
		return (int64_t)v;
	}
	bool Fetch(km_wire_rd *r, km_wire_wr *w, int16_t v)
	{
		km_proto_topic t[2];
		km_fetch_req_part rp[2];
		km_proto_topic ft[2];
		int32_t fp[2];
		km_fetch_req q = {};
		q.topics = t;
		q.topics_max = 2;
		q.parts = rp;
		q.parts_max = 2;
		q.forgotten = ft;
		q.forgotten_max = 2;
		q.forgotten_parts = fp;
		q.forgotten_parts_max = 2;
		if (km_fetch_req_decode(r, v, &q) < 0 || q.n_parts != 1)
			return false;
		if (throttle_n_ > 0) {
			km_proto_enc e;
			throttle_n_--;
			throttled_++;
			answered_throttled_ = true;
			return km_fetch_resp_enc_begin(&e, w, v, throttle_ms_, 0,
						       0) == 0 &&
			       km_fetch_resp_enc_end(&e) == 0;
		}
		Bytes rec = Records(rp[0].fetch_offset, q.max_bytes);
		km_fetch_part p = {};
		p.high_watermark = p.last_stable_offset = hw();
		p.log_start_offset = 0;
		p.n_aborted = -1;
		p.preferred_read_replica = -1;
		km_proto_enc e;
		return km_fetch_resp_enc_begin(&e, w, v, 0, 0, 0) == 0 &&
		       km_fetch_resp_enc_topic(&e, &t[0].name) == 0 &&
		       km_fetch_resp_enc_partition(&e, &p, rec.data(),
						   (int32_t)rec.size()) == 0 &&
		       km_fetch_resp_enc_end(&e) == 0;
	}
	// Whole batches from the one holding offset, up to max_bytes, but
	// always the first (KIP-74).
	Bytes Records(int64_t offset, int32_t max_bytes)
	{
		Bytes out;
		for (const Bytes &b : batches_) {
			if (rawkafka::batch_last_offset(b) < offset)
				continue;
			if (!out.empty() &&
			    out.size() + b.size() > (size_t)max_bytes)
				break;
			out.insert(out.end(), b.begin(), b.end());
		}
		return out;
	}

	std::vector<Bytes> batches_;
	int throttle_n_ = 0;
	int32_t throttle_ms_ = 0;
	bool answered_throttled_ = false;
	Clock::time_point quiet_from_;
	size_t drip_above_ = 0;
	int lfd_ = -1;
	uint16_t port_ = 0;
	std::thread th_;
	std::atomic<bool> stop_{false};
};

class FetchStall : public FetchRig {
protected:
	void SetUp() override
	{
		ASSERT_NO_FATAL_FAILURE(SetUpRig(KM_NET_RX_AUTO, 16384, 64));
	}
};

TEST_F(FetchStall, SlowResponseHalvesMaxBytes)
{
	// Real batches of about 3 KB (a flush every 3 messages of 1 KB).
	kmtest::MockCluster mock(1);
	ASSERT_EQ("", mock.error());
	ASSERT_EQ("", mock.create_topic(kTopic, 1));
	kmtest::ProduceSpec s;
	s.topic = kTopic;
	s.count = 60;
	s.value_size = 1000;
	s.flush_every = 3;
	s.mode = kmtest::ProducerMode::kIdempotent;
	ASSERT_EQ("", kmtest::produce(mock.bootstrap(), s));
	int64_t hw = 0;
	std::vector<Bytes> src =
		FetchRig::Source(Addr{mock.host(), mock.port()}, 0, &hw);
	ASSERT_EQ(60, hw);
	ASSERT_GE(src.size(), 15u);

	FakeBroker fake;
	ASSERT_EQ("", fake.Start(src, 20000));
	StartOpts o;
	o.bootstrap = {Addr{"127.0.0.1", fake.port()}};
	o.rx_bufs_max = 4; // 64 KiB: MaxBytes 31 KiB
	ASSERT_NO_FATAL_FAILURE(Start(o));
	EXPECT_EQ(32768 - 1024, Stats().max_bytes);
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_EQ("", fake.err_);
	EXPECT_GE(fake.dripped_, 1);
	EXPECT_EQ(1u, Err(KM_FETCHER_ERR_STALL));
	EXPECT_EQ((32768 - 1024) / 2, Stats().max_bytes);
	EXPECT_EQ(1u, Stats().reconnects);
	EXPECT_STREQ("fake-cluster", km_fetcher_cluster_id(f_.get()));
	ASSERT_NO_FATAL_FAILURE(Stop());
	km_net_stats ns;
	km_net_get_stats(net_, &ns);
	EXPECT_EQ(0u, ns.rx_bufs_held);
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// KIP-219: a broker over its quota answers a Fetch (v8+) at once with no
// partition and throttle_time_ms, and mutes the channel that long. The
// session must not take the empty answer for partitions missing (FAILED),
// must send nothing to the broker before the time is over, and counts
// it on the host's bucket; then everything is mirrored. Fails when the
// session does not wait (a pause shorter than asked) or when it treats the
// answer as partitions missing.
TEST_F(FetchStall, ThrottledAnswerIsWaitedOut)
{
	kmtest::MockCluster mock(1);
	ASSERT_EQ("", mock.error());
	ASSERT_EQ("", mock.create_topic(kTopic, 1));
	kmtest::ProduceSpec s;
	s.topic = kTopic;
	s.count = 30;
	s.value_size = 100;
	s.flush_every = 3;
	ASSERT_EQ("", kmtest::produce(mock.bootstrap(), s));
	int64_t hw = 0;
	std::vector<Bytes> src =
		FetchRig::Source(Addr{mock.host(), mock.port()}, 0, &hw);
	ASSERT_EQ(30, hw);

	constexpr int32_t kThrottleMs = 300;
	FakeBroker fake;
	fake.Throttle(2, kThrottleMs);
	ASSERT_EQ("", fake.Start(src, SIZE_MAX));
	km_throttle host;
	km_throttle_init(&host, 0); // no cap of ours: it counts the source's
	StartOpts o;
	o.bootstrap = {Addr{"127.0.0.1", fake.port()}};
	o.throttle = &host;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_EQ("", fake.err_);
	EXPECT_EQ(2, fake.throttled_.load());
	EXPECT_GE(fake.min_pause_ms_.load(), kThrottleMs)
		<< "a request came before the throttle time was over";
	km_throttle_stats st;
	km_throttle_get_stats(&host, &st);
	EXPECT_EQ(2u, st.source_throttles);
	EXPECT_EQ(2u * kThrottleMs, st.source_throttle_ms);
	EXPECT_EQ(0u, st.throttled_ms);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

} // namespace
