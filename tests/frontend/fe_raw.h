// Raw Kafka peers for the front-end suite: a blocking socket with
// deadline-bounded reads, request frames built with kafka/proto.h's
// encoders, Produce requests over any records bytes (however wrong),
// Fetch requests and their responses parsed batch by batch, and the gtest
// fixture of a server plus one such connection. Shared by
// test_frontend_raw.cc, test_produce_validate.cc, test_serving_rules.cc and
// test_frontend_clients.cc (TxnServe).
#ifndef KM_TESTS_FRONTEND_FE_RAW_H
#define KM_TESTS_FRONTEND_FE_RAW_H

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/errors.h"
#include "fe_harness.h"
#include "kafka/batch.h"
#include "kafka/proto.h"
#include "kafka/records.h"
#include "kafka/wire.h"

namespace fetest {

class RawConn {
public:
	~RawConn() { Close(); }
	std::string Connect(uint16_t port)
	{
		sockaddr_in a = {};
		int one = 1;
		fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd_ < 0)
			return "socket failed";
		a.sin_family = AF_INET;
		a.sin_port = htons(port);
		inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
		if (connect(fd_, (sockaddr *)&a, sizeof(a)) < 0)
			return std::string("connect: ") + strerror(errno);
		setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		return "";
	}
	bool Send(const Bytes &b)
	{
		for (size_t off = 0; off < b.size();) {
			ssize_t n = send(fd_, b.data() + off, b.size() - off,
					 MSG_NOSIGNAL);
			if (n <= 0)
				return false;
			off += (size_t)n;
		}
		return true;
	}
	// One response: its body (after the size). "" or why not.
	std::string ReadFrame(Bytes *body, int timeout_ms = 10000)
	{
		uint64_t end = MonoMs() + (uint64_t)timeout_ms;
		uint8_t sz[4];
		std::string err = ReadN(sz, 4, end);
		if (!err.empty())
			return err;
		uint32_t n = (uint32_t)sz[0] << 24 | (uint32_t)sz[1] << 16 |
			     (uint32_t)sz[2] << 8 | sz[3];
		if (n > (64u << 20))
			return "absurd response size";
		body->resize(n);
		return ReadN(body->data(), n, end);
	}
	// True once the server closed the connection (EOF or reset).
	bool WaitClosed(int timeout_ms = 10000)
	{
		uint64_t end = MonoMs() + (uint64_t)timeout_ms;
		uint8_t buf[4096];
		while (MonoMs() < end) {
			pollfd p = {fd_, POLLIN, 0};
			if (poll(&p, 1, 50) <= 0)
				continue;
			ssize_t n = recv(fd_, buf, sizeof(buf), 0);
			if (n == 0 || (n < 0 && errno == ECONNRESET))
				return true;
		}
		return false;
	}
	void Close()
	{
		if (fd_ >= 0)
			close(fd_);
		fd_ = -1;
	}

private:
	std::string ReadN(uint8_t *p, size_t n, uint64_t end)
	{
		size_t got = 0;
		while (got < n) {
			pollfd pf = {fd_, POLLIN, 0};
			if (MonoMs() > end)
				return "timed out";
			if (poll(&pf, 1, 50) <= 0)
				continue;
			ssize_t r = recv(fd_, p + got, n - got, 0);
			if (r == 0)
				return "closed by the server";
			if (r < 0)
				return std::string("recv: ") + strerror(errno);
			got += (size_t)r;
		}
		return "";
	}
	int fd_ = -1;
};

using BodyFn = std::function<void(km_wire_wr *)>;

inline Bytes Req(int16_t key, int16_t ver, int32_t corr, const BodyFn &body)
{
	Bytes buf(4 << 20);
	km_wire_wr w;
	km_reqhdr h = {};
	km_wire_wr_init(&w, buf.data(), buf.size());
	h.api_key = key;
	h.api_version = ver;
	h.correlation_id = corr;
	km_wire_name_set(&h.client_id, "raw-test");
	km_proto_req_begin(&w, &h);
	if (body)
		body(&w);
	int n = km_wire_wr_frame_end(&w);
	EXPECT_GT(n, 0) << km_strerror(n);
	buf.resize(n > 0 ? (size_t)n : 0);
	return buf;
}

// A response body with a reader past its header.
struct Resp {
	Bytes body;
	iovec v;
	km_chain ch;
	km_wire_rd r;
	int32_t corr = -1;
};

inline void Open(Resp *x, int16_t key, int16_t ver)
{
	x->v = {x->body.data(), x->body.size()};
	x->ch = {&x->v, 1};
	km_wire_rd_init(&x->r, &x->ch, km_chain_start(&x->ch),
			(uint32_t)x->body.size(), &km_wire_limits_default);
	EXPECT_EQ(0, km_resphdr_decode(&x->r, key, ver, &x->corr));
}

struct ProducePart {
	std::string topic;
	int32_t partition;
	const Bytes *records; /* nullptr: null records */
};

inline Bytes ProduceReq(int32_t corr, int16_t ver, int16_t acks,
		 const std::vector<ProducePart> &parts)
{
	return Req(KM_API_PRODUCE, ver, corr, [&](km_wire_wr *w) {
		km_proto_enc e;
		km_wire_name txn, t;
		km_wire_name_set_null(&txn);
		km_produce_req_enc_begin(&e, w, ver, &txn, acks, 5000);
		for (const ProducePart &p : parts) {
			km_wire_name_set(&t, p.topic.c_str());
			km_produce_req_enc_topic(&e, &t);
			km_produce_req_enc_partition(
				&e, p.partition,
				p.records ? p.records->data() : nullptr,
				p.records ? (int32_t)p.records->size() : -1);
		}
		km_produce_req_enc_end(&e);
	});
}

// One partition of a Fetch request.
struct FetchPart {
	std::string topic;
	int32_t partition;
	int64_t offset;
	int32_t max_bytes;
};

inline Bytes FetchReq(int32_t corr, int16_t ver, int32_t max_wait,
		      int32_t max_bytes, const std::vector<FetchPart> &parts,
		      int32_t session_id = 0, int32_t session_epoch = -1,
		      int8_t isolation = 0,
		      const std::vector<FetchPart> &forgotten = {})
{
	std::vector<km_proto_topic> topics, fg;
	std::vector<int32_t> fg_parts;
	for (const FetchPart &p : forgotten) {
		if (fg.empty() || strcmp(fg.back().name.s, p.topic.c_str()) != 0) {
			km_proto_topic t = {};
			km_wire_name_set(&t.name, p.topic.c_str());
			t.first = (uint32_t)fg_parts.size();
			fg.push_back(t);
		}
		fg.back().count++;
		fg_parts.push_back(p.partition);
	}
	std::vector<km_fetch_req_part> ps;
	for (const FetchPart &p : parts) {
		if (topics.empty() ||
		    strcmp(topics.back().name.s, p.topic.c_str()) != 0) {
			km_proto_topic t = {};
			km_wire_name_set(&t.name, p.topic.c_str());
			t.first = (uint32_t)ps.size();
			topics.push_back(t);
		}
		topics.back().count++;
		ps.push_back({p.partition, -1, p.offset, -1, p.max_bytes, -1});
	}
	km_fetch_req m = {};
	m.replica_id = -1;
	m.max_wait_ms = max_wait;
	m.min_bytes = 1;
	m.max_bytes = max_bytes;
	m.isolation_level = isolation;
	m.session_id = session_id;
	m.session_epoch = session_epoch;
	m.topics = topics.data();
	m.n_topics = m.topics_max = (uint32_t)topics.size();
	m.parts = ps.data();
	m.n_parts = m.parts_max = (uint32_t)ps.size();
	m.forgotten = fg.data();
	m.n_forgotten = m.forgotten_max = (uint32_t)fg.size();
	m.forgotten_parts = fg_parts.data();
	m.n_forgotten_parts = m.forgotten_parts_max = (uint32_t)fg_parts.size();
	km_wire_name_set(&m.rack_id, "");
	return Req(KM_API_FETCH, ver, corr,
		   [&](km_wire_wr *w) { km_fetch_req_encode(w, ver, &m); });
}

// A Fetch response, every served batch parsed (a partial one fails).
struct FetchOut {
	int16_t top_error = 0;
	int32_t session_id = 0;
	struct Part {
		std::string topic;
		int32_t partition;
		int16_t error;
		int64_t hw;
		int64_t lso;
		int64_t log_start;
		std::vector<int64_t> batch_bases; /* of whole batches */
		std::vector<int64_t> batch_lasts; /* their last offsets */
		uint32_t bytes;
		/* AbortedTransactions: {producer id, first offset} */
		std::vector<std::pair<int64_t, int64_t>> aborted;
	};
	std::vector<Part> parts;
};

inline void DecodeFetch(Resp *x, int16_t ver, FetchOut *out)
{
	// As many as a response of ours can list (KM_FRONTEND_ABORTED_MAX).
	std::vector<km_fetch_aborted> ab(256);
	km_fetch_resp_iter it;
	km_fetch_part p;
	ASSERT_EQ(0, km_fetch_resp_begin(&it, &x->r, ver, ab.data(),
					 (uint32_t)ab.size()));
	out->top_error = it.error_code;
	out->session_id = it.session_id;
	int rc;
	while ((rc = km_fetch_resp_next_partition(&it, &p)) == 1) {
		FetchOut::Part o = {it.cur.topic.s, p.partition, p.error_code,
				    p.high_watermark, p.last_stable_offset,
				    p.log_start_offset, {}, {}, 0, {}};
		for (int32_t k = 0; k < p.n_aborted; k++)
			o.aborted.push_back({p.aborted[k].producer_id,
					     p.aborted[k].first_offset});
		o.bytes = p.records.len > 0 ? (uint32_t)p.records.len : 0;
		km_chain_cur cur = p.records.cur;
		uint32_t left = o.bytes;
		while (left > 0) {
			km_batch b;
			int n = km_batch_parse(&b, &x->ch, cur, left);
			ASSERT_GT(n, 0) << "a partial or bad batch was served";
			o.batch_bases.push_back(km_batch_base_offset(&b));
			o.batch_lasts.push_back(km_batch_last_offset(&b));
			km_chain_advance(&x->ch, &cur, (size_t)n);
			left -= (uint32_t)n;
		}
		out->parts.push_back(o);
	}
	ASSERT_EQ(0, rc) << km_strerror(rc);
}

// One uncompressed batch of vals (null keys, timestamps 1700000000000 + i),
// without a producer id, at base offset 0.
inline Bytes PlainBatch(const std::vector<std::string> &vals)
{
	int n = (int)vals.size();
	std::vector<km_record_spec> recs(vals.size());
	for (int i = 0; i < n; i++) {
		recs[i] = {};
		recs[i].key_len = -1;
		recs[i].value = vals[i].data();
		recs[i].value_len = (int32_t)vals[i].size();
		recs[i].timestamp = 1700000000000LL + i;
	}
	km_batch_spec spec = {0, -1, 0, -1, -1, -1};
	Bytes out(km_records_build_size(recs.data(), n));
	EXPECT_EQ((int)out.size(), km_records_build(out.data(), out.size(),
						     &spec, recs.data(), n));
	return out;
}

// A front-end and one raw connection to it, started by Start(parts).
class RawFixture : public ::testing::Test {
protected:
	void Start(const std::vector<PartSpec> &parts)
	{
		ASSERT_EQ("", srv_.Start(parts));
		ASSERT_EQ("", c_.Connect(srv_.port()));
	}
	void TearDown() override
	{
		c_.Close();
		srv_.Stop();
		EXPECT_EQ("", srv_.LoopError());
	}
	void RoundTrip(const Bytes &req, int16_t key, int16_t ver, Resp *x)
	{
		ASSERT_TRUE(c_.Send(req));
		ASSERT_EQ("", c_.ReadFrame(&x->body));
		Open(x, key, ver);
	}
	Server srv_;
	RawConn c_;
};

// A front-end serving parts, and one raw connection to it.
template <const std::vector<PartSpec> *parts>
class RawOn : public RawFixture {
protected:
	void SetUp() override { Start(*parts); }
};

} // namespace fetest

#endif
