// Goal: the first slice of the mirror path works end to end: a fetch session
// (dataplane/fetcher.c over dataplane/kframe.c and the kernel backend) mirrors
// one partition of librdkafka's mock cluster, filled by real librdkafka
// producers (plain and idempotent, batches larger than a receive buffer),
// into a km_log, and the log then holds the source batches byte for byte
// except producerId (R1: -(p + 2)) and crc (patched), at the same offsets
// (R6). Restarting on the same log resumes at its end without duplicates; a
// connection cut mid-stream reconnects and resumes.
// Both receive modes of the kernel backend (multishot and single-shot).
// Method: the worker loop (km_uring_poll, km_net_poll, km_fetcher_step) is
// pumped until the log's durable offset reaches the source high watermark,
// bounded by a deadline (no sleeps); source batches are read with a raw
// blocking client (tests/rdkafka/raw_kafka.cc) and compared with km_log_read.
#include <gtest/gtest.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/errors.h"
#include "dataplane/fetcher.h"
#include "dataplane/net.h"
#include "iouring_log/log.h"
#include "kafka/batch.h"
#include "raw_kafka.h"

namespace {

using rawkafka::Bytes;
using Clock = std::chrono::steady_clock;

const char kTopic[] = "src";
const int kTimeoutMs = 20000;

struct Mock {
	rd_kafka_t *rk = nullptr;
	rd_kafka_mock_cluster_t *mock = nullptr;
	std::string boot, host, err;
	uint16_t port = 0;

	Mock()
	{
		char errstr[256];
		rd_kafka_conf_t *conf = rd_kafka_conf_new();
		rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr));
		rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
		if (!rk) {
			err = errstr;
			return;
		}
		mock = rd_kafka_mock_cluster_new(rk, 1);
		if (!mock) {
			err = "rd_kafka_mock_cluster_new failed";
			return;
		}
		boot = rd_kafka_mock_cluster_bootstraps(mock);
		if (!rawkafka::parse_bootstrap(boot, &host, &port))
			err = "bad bootstraps " + boot;
		else if (rd_kafka_mock_topic_create(mock, kTopic, 1, 1))
			err = "rd_kafka_mock_topic_create failed";
	}
	~Mock()
	{
		if (mock)
			rd_kafka_mock_cluster_destroy(mock);
		if (rk)
			rd_kafka_destroy(rk);
	}
};

// Produce n messages with a real producer; every 40th value is 40 KB, so
// batches span several 16 KiB receive buffers.
std::string Produce(const std::string &boot, bool idempotent, int n, int seed)
{
	char errstr[256];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	const char *props[][2] = {
		{"bootstrap.servers", boot.c_str()},
		{"enable.idempotence", idempotent ? "true" : "false"},
		{"acks", idempotent ? "all" : "1"},
		{"linger.ms", "5"},
		{"batch.size", "200000"},
		{"compression.type", "none"},
		{"log_level", "3"},
	};
	for (auto &p : props)
		if (rd_kafka_conf_set(conf, p[0], p[1], errstr,
				      sizeof(errstr)) != RD_KAFKA_CONF_OK) {
			rd_kafka_conf_destroy(conf);
			return errstr;
		}
	rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr,
				      sizeof(errstr));
	if (!rk)
		return errstr;
	std::string err;
	for (int i = 0; i < n && err.empty(); i++) {
		std::string key = "k" + std::to_string(seed + i);
		std::string val((i % 40 == 0) ? 40000 : 100 + i % 7,
				(char)('a' + (seed + i) % 26));
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(kTopic), RD_KAFKA_V_PARTITION(0),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_KEY(key.data(), key.size()),
			RD_KAFKA_V_VALUE((void *)val.data(), val.size()),
			RD_KAFKA_V_END);
		if (e)
			err = std::string("producev: ") + rd_kafka_err2str(e);
		if (i % 50 == 49)
			rd_kafka_flush(rk, kTimeoutMs); // several batches
	}
	if (err.empty() && rd_kafka_flush(rk, kTimeoutMs))
		err = "flush timed out";
	rd_kafka_destroy(rk);
	return err;
}

class Fetch : public ::testing::TestWithParam<km_net_rx_mode> {
protected:
	void SetUp() override
	{
		mock_ = new Mock();
		ASSERT_EQ("", mock_->err);
		char tmpl[] = "/tmp/km-fetch-XXXXXX";
		ASSERT_NE(nullptr, mkdtemp(tmpl));
		dir_ = tmpl;
		ASSERT_EQ(0, km_uring_init(&ring_, 512));
		km_net_config cfg = {};
		cfg.kind = KM_NET_KERNEL;
		cfg.conns_max = 4;
		cfg.rx_buf_count = 256;
		cfg.rx_buf_bytes = 16384;
		cfg.send_queue_max = 16;
		cfg.send_iov_max = 16;
		cfg.connect_timeout_ms = 5000;
		cfg.close_timeout_ms = 1000;
		cfg.uring = &ring_;
		cfg.rx_mode = GetParam();
		int rc = km_net_create(&cfg, &net_);
		ASSERT_EQ(0, rc) << km_strerror(rc);
		OpenLog();
	}
	// Replace the backend with one of small receive buffers.
	void SmallBuffers(uint32_t bytes, uint32_t count)
	{
		km_net_destroy(net_);
		net_ = nullptr;
		km_net_config cfg = {};
		cfg.kind = KM_NET_KERNEL;
		cfg.conns_max = 4;
		cfg.rx_buf_count = count;
		cfg.rx_buf_bytes = bytes;
		cfg.send_queue_max = 16;
		cfg.send_iov_max = 16;
		cfg.connect_timeout_ms = 5000;
		cfg.close_timeout_ms = 1000;
		cfg.uring = &ring_;
		cfg.rx_mode = GetParam();
		int rc = km_net_create(&cfg, &net_);
		ASSERT_EQ(0, rc) << km_strerror(rc);
	}
	void TearDown() override
	{
		if (net_) {
			km_net_destroy(net_);
		}
		if (log_) {
			EXPECT_EQ(0, km_log_close(log_));
		}
		km_uring_exit(&ring_);
		delete mock_;
		if (!dir_.empty()) {
			EXPECT_EQ(0, system(("rm -rf " + dir_).c_str()));
		}
	}
	void OpenLog()
	{
		km_log_config lc;
		km_log_config_defaults(&lc, dir_.c_str(), kTopic, 0);
		lc.segment_bytes = 1 << 20;
		lc.index_bytes_max = 64 * 1024;
		lc.flush_always = true;
		lc.prealloc_bytes = 1 << 20;
		int rc = km_log_open(&log_, &lc, &ring_, nullptr);
		ASSERT_EQ(0, rc) << km_strerror(rc);
	}
	void CloseLog()
	{
		ASSERT_EQ(0, km_log_close(log_));
		log_ = nullptr;
	}
	void Start(int32_t max_bytes = 0)
	{
		km_fetcher_config fc = {};
		snprintf(fc.host, sizeof(fc.host), "%s", mock_->host.c_str());
		fc.port = mock_->port;
		snprintf(fc.topic, sizeof(fc.topic), "%s", kTopic);
		fc.partition = 0;
		fc.max_wait_ms = 20;
		fc.max_bytes = max_bytes;
		fc.backoff_ms = 10;
		ASSERT_EQ(0, km_fetcher_init(&f_, &fc, net_, log_));
	}
	void Turn()
	{
		ASSERT_GE(km_uring_poll(&ring_, false), 0);
		ASSERT_GE(km_net_poll(net_), 0);
		km_fetcher_step(&f_);
	}
	// Pump until the durable offset reaches hw (or pred says stop).
	template <typename Pred> void RunUntil(Pred pred)
	{
		auto deadline = Clock::now() + std::chrono::milliseconds(kTimeoutMs);
		while (!pred() && Clock::now() < deadline &&
		       km_fetcher_get_state(&f_) != KM_FETCHER_FAILED)
			ASSERT_NO_FATAL_FAILURE(Turn());
		ASSERT_NE(KM_FETCHER_FAILED, km_fetcher_get_state(&f_))
			<< km_fetcher_reason(&f_);
		ASSERT_TRUE(pred()) << "timed out; durable "
				    << km_log_durable_offset(log_);
	}
	void RunTo(int64_t hw)
	{
		RunUntil([&] { return km_log_durable_offset(log_) >= hw; });
	}
	void Stop()
	{
		km_fetcher_stop(&f_);
		auto deadline = Clock::now() + std::chrono::milliseconds(kTimeoutMs);
		while (!km_fetcher_idle(&f_) && Clock::now() < deadline) {
			ASSERT_GE(km_uring_poll(&ring_, false), 0);
			ASSERT_GE(km_net_poll(net_), 0);
			km_fetcher_step(&f_);
		}
		ASSERT_TRUE(km_fetcher_idle(&f_));
		ASSERT_EQ(0, km_log_sync(log_));
	}
	// The source partition, batch by batch, and its high watermark.
	std::vector<Bytes> Source(int64_t *hw)
	{
		rawkafka::Conn c;
		std::vector<Bytes> out;
		EXPECT_EQ("", c.connect(mock_->host, mock_->port, 5000));
		EXPECT_EQ("", rawkafka::fetch_all(c, kTopic, 0, 0, 10000,
						  kTimeoutMs, &out));
		*hw = out.empty() ? 0 : rawkafka::batch_last_offset(out.back()) + 1;
		return out;
	}
	std::vector<Bytes> Mirror()
	{
		std::vector<Bytes> out;
		std::vector<uint8_t> buf(4 << 20);
		int64_t off = km_log_start_offset(log_);
		int64_t end = km_log_durable_offset(log_);
		while (off < end) {
			km_log_read_result r;
			int rc = km_log_read(log_, off, end, 1 << 20, buf.data(),
					     buf.size(), &r);
			EXPECT_EQ(0, rc) << km_strerror(rc);
			if (rc || r.batches == 0)
				break;
			Bytes got(buf.data(), buf.data() + r.bytes);
			EXPECT_TRUE(rawkafka::split_batches(got, &out));
			off = r.next_offset;
		}
		return out;
	}
	// Every mirrored batch is the source one except producerId and crc,
	// and verifies.
	void Compare(const std::vector<Bytes> &src)
	{
		std::vector<Bytes> got = Mirror();
		ASSERT_EQ(src.size(), got.size());
		for (size_t i = 0; i < src.size(); i++) {
			const Bytes &s = src[i], &g = got[i];
			ASSERT_EQ(s.size(), g.size()) << "batch " << i;
			Bytes s2 = s, g2 = g;
			for (int k = 0; k < 8; k++)
				s2[KM_BATCH_OFF_PRODUCER_ID + k] =
					g2[KM_BATCH_OFF_PRODUCER_ID + k] = 0;
			for (int k = 0; k < 4; k++)
				s2[KM_BATCH_OFF_CRC + k] = g2[KM_BATCH_OFF_CRC + k] = 0;
			ASSERT_TRUE(s2 == g2) << "batch " << i;
			iovec iv = {(void *)g.data(), g.size()};
			km_chain ch = {&iv, 1};
			km_batch b, sb;
			ASSERT_EQ((int)g.size(), km_batch_parse(&b, &ch,
					km_chain_start(&ch), 1 << 24))
				<< "batch " << i;
			iovec sv = {(void *)s.data(), s.size()};
			km_chain sch = {&sv, 1};
			ASSERT_EQ((int)s.size(), km_batch_parse(&sb, &sch,
					km_chain_start(&sch), 1 << 24));
			int64_t want;
			ASSERT_EQ(0, km_pid_map(km_batch_producer_id(&sb), &want));
			EXPECT_EQ(want, km_batch_producer_id(&b)) << "batch " << i;
			EXPECT_EQ(km_batch_base_offset(&sb), km_batch_base_offset(&b));
		}
	}

	Mock *mock_ = nullptr;
	std::string dir_;
	km_uring ring_ = {};
	km_net *net_ = nullptr;
	km_log *log_ = nullptr;
	km_fetcher f_;
};

TEST_P(Fetch, MirrorsPlainAndIdempotentThenResumes)
{
	ASSERT_EQ("", Produce(mock_->boot, false, 200, 0));
	ASSERT_EQ("", Produce(mock_->boot, true, 200, 1000));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_GT(src.size(), 4u);
	ASSERT_EQ(400, hw);
	bool idem = false, big = false;
	for (const Bytes &b : src) {
		if (b.size() > 16384)
			big = true;
		if (b[KM_BATCH_OFF_PRODUCER_ID] == 0 &&
		    b[KM_BATCH_OFF_PRODUCER_ID + 7] != 0xff)
			idem = true;
	}
	EXPECT_TRUE(big) << "no batch spans receive buffers";
	EXPECT_TRUE(idem) << "no idempotent batch";

	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_EQ(KM_FETCHER_MIRRORING, km_fetcher_get_state(&f_));
	EXPECT_EQ(src.size(), km_fetcher_get_stats(&f_)->batches);
	EXPECT_EQ(0u, km_fetcher_get_stats(&f_)->corrupt);
	EXPECT_EQ(hw, km_log_end_offset(log_));
	EXPECT_STRNE("", km_fetcher_cluster_id(&f_));
	ASSERT_NO_FATAL_FAILURE(Stop());
	km_net_stats ns;
	km_net_get_stats(net_, &ns);
	EXPECT_EQ(0u, ns.rx_bufs_held);
	ASSERT_NO_FATAL_FAILURE(Compare(src));

	// Restart on the same (reopened) log after producing more: resumes at
	// the log end, no duplicates.
	ASSERT_NO_FATAL_FAILURE(CloseLog());
	ASSERT_NO_FATAL_FAILURE(OpenLog());
	ASSERT_EQ("", Produce(mock_->boot, true, 150, 5000));
	src = Source(&hw);
	ASSERT_EQ(550, hw);
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_EQ(0u, km_fetcher_get_stats(&f_)->duplicates);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// A cut mid-stream (small fetches, so the backlog takes many): the session
// reconnects with backoff and resumes from the log end.
TEST_P(Fetch, ConnectionCutResumes)
{
	ASSERT_EQ("", Produce(mock_->boot, true, 300, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_EQ(300, hw);
	ASSERT_NO_FATAL_FAILURE(Start(32 * 1024));
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] {
		return km_fetcher_get_stats(&f_)->batches >= 1;
	}));
	ASSERT_LT(km_log_end_offset(log_), hw) << "no mid-stream left to cut";
	km_fetcher_cut(&f_);
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_GE(km_fetcher_get_stats(&f_)->reconnects, 1u);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// 512-byte receive buffers: every batch, and most frames, span many
// buffers (the 40 KB ones about 80).
TEST_P(Fetch, TinyReceiveBuffers)
{
	ASSERT_NO_FATAL_FAILURE(SmallBuffers(512, 512));
	ASSERT_EQ("", Produce(mock_->boot, true, 200, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_NO_FATAL_FAILURE(Start(64 * 1024));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	ASSERT_NO_FATAL_FAILURE(Stop());
	km_net_stats ns;
	km_net_get_stats(net_, &ns);
	EXPECT_EQ(0u, ns.rx_bufs_held);
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// OFFSET_OUT_OF_RANGE: a log ahead of the source fails with a reason.
TEST_P(Fetch, OffsetOutOfRangeFails)
{
	ASSERT_EQ("", Produce(mock_->boot, false, 100, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	ASSERT_NO_FATAL_FAILURE(Stop());
	// A new source cluster, emptier than the log.
	delete mock_;
	mock_ = new Mock();
	ASSERT_EQ("", mock_->err);
	ASSERT_EQ("", Produce(mock_->boot, false, 10, 0));
	ASSERT_NO_FATAL_FAILURE(Start());
	auto deadline = Clock::now() + std::chrono::milliseconds(kTimeoutMs);
	while (km_fetcher_get_state(&f_) != KM_FETCHER_FAILED &&
	       Clock::now() < deadline)
		ASSERT_NO_FATAL_FAILURE(Turn());
	ASSERT_EQ(KM_FETCHER_FAILED, km_fetcher_get_state(&f_));
	EXPECT_NE(nullptr, strstr(km_fetcher_reason(&f_), "OFFSET_OUT_OF_RANGE"))
		<< km_fetcher_reason(&f_);
	ASSERT_NO_FATAL_FAILURE(Stop());
}

} // namespace

namespace {

// A corrupt batch in the source (the mock does not check CRCs): rejected,
// counted, refetched from its offset; what precedes it is mirrored and
// nothing past it is written; stored corruption (every refetch corrupt)
// fails the session after KM_FETCHER_CORRUPT_MAX tries, with the reason.
TEST_P(Fetch, CorruptBatchIsRefetchedThenFails)
{
	ASSERT_EQ("", Produce(mock_->boot, false, 60, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_FALSE(src.empty());
	Bytes bad = src.back();
	bad.back() ^= 0x5a; // records bytes change, crc does not
	rawkafka::Conn c;
	ASSERT_EQ("", c.connect(mock_->host, mock_->port, 5000));
	int16_t perr = -1;
	int64_t base = -1;
	ASSERT_EQ("", c.produce(kTopic, 0, bad, &perr, &base));
	ASSERT_EQ(0, perr);
	ASSERT_EQ(hw, base);
	ASSERT_NO_FATAL_FAILURE(Start());
	auto deadline = Clock::now() + std::chrono::milliseconds(kTimeoutMs);
	while (km_fetcher_get_state(&f_) != KM_FETCHER_FAILED &&
	       Clock::now() < deadline)
		ASSERT_NO_FATAL_FAILURE(Turn());
	ASSERT_EQ(KM_FETCHER_FAILED, km_fetcher_get_state(&f_));
	EXPECT_EQ(hw, km_log_end_offset(log_));
	EXPECT_EQ((uint64_t)KM_FETCHER_CORRUPT_MAX,
		  km_fetcher_get_stats(&f_)->corrupt);
	EXPECT_NE(std::string::npos,
		  std::string(km_fetcher_reason(&f_)).find("corrupt 5 times in a row"))
		<< km_fetcher_reason(&f_);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// NOT_LEADER_OR_FOLLOWER on a Fetch: reconnect with backoff, resume from
// the log end.
TEST_P(Fetch, NotLeaderReconnects)
{
	ASSERT_EQ("", Produce(mock_->boot, true, 300, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_NO_FATAL_FAILURE(Start(32 * 1024));
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] {
		return km_fetcher_get_stats(&f_)->batches >= 1;
	}));
	rd_kafka_mock_push_request_errors(
		mock_->mock, 1 /* Fetch */, 1,
		RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION);
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_GE(km_fetcher_get_stats(&f_)->reconnects, 1u);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// The source broker goes down mid-stream and comes back.
TEST_P(Fetch, BrokerDownAndUpResumes)
{
	ASSERT_EQ("", Produce(mock_->boot, true, 300, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_NO_FATAL_FAILURE(Start(32 * 1024));
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] {
		return km_fetcher_get_stats(&f_)->batches >= 1;
	}));
	ASSERT_LT(km_log_end_offset(log_), hw);
	ASSERT_EQ(0, rd_kafka_mock_broker_set_down(mock_->mock, 1));
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] {
		return km_fetcher_get_stats(&f_)->reconnects >= 2;
	}));
	EXPECT_EQ(KM_FETCHER_CONNECTING, km_fetcher_get_state(&f_));
	ASSERT_EQ(0, rd_kafka_mock_broker_set_up(mock_->mock, 1));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

} // namespace

namespace {

INSTANTIATE_TEST_SUITE_P(Rx, Fetch,
			 ::testing::Values(KM_NET_RX_AUTO, KM_NET_RX_SINGLE),
			 [](const ::testing::TestParamInfo<km_net_rx_mode> &i) {
				 return std::string(i.param == KM_NET_RX_AUTO
							    ? "Auto"
							    : "Single");
			 });

} // namespace
