// The worker loop of fetch sessions, for the fetch suite's tests: a real
// io_uring, the kernel network backend, a pool of fetch sessions
// (dataplane/fetch/fsess.h), a partition log on real files, and a km_fetcher in
// the pool, driven the way a worker drives them (km_uring_poll,
// km_net_poll, km_fsess_pool_step), pumped until an observable condition holds
// or a deadline passes (no sleeps). The source's exact bytes are read with
// the raw client of tests/rdkafka (raw_kafka.h) and compared with the log.
#ifndef KM_TESTS_FETCH_FETCH_RIG_H
#define KM_TESTS_FETCH_FETCH_RIG_H

#include <gtest/gtest.h>

#include <stdio.h>
#include <stdlib.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "common/errors.h"
#include "dataplane/fetch/fetcher.h"
#include "dataplane/fetch/fsess.h"
#include "dataplane/net/net.h"
#include "iouring_log/log.h"
#include "kafka/batch.h"
#include "raw_kafka.h"

namespace fetchtest {

using rawkafka::Bytes;
using Clock = std::chrono::steady_clock;

constexpr char kTopic[] = "src";
constexpr int kTimeoutMs = 20000;

struct Addr {
	std::string host;
	uint16_t port = 0;
};

// Every host:port of a bootstrap list, in its order (the mock lists broker
// 1 first).
inline std::vector<Addr> ParseBootstraps(const std::string &boot)
{
	std::vector<Addr> out;
	size_t at = 0;

	while (at < boot.size()) {
		size_t comma = boot.find(',', at);
		std::string one = boot.substr(at, comma == std::string::npos
							  ? std::string::npos
							  : comma - at);
		size_t colon = one.rfind(':');
		Addr a;

		a.host = one.substr(0, colon);
		a.port = (uint16_t)atoi(one.c_str() + colon + 1);
		out.push_back(a);
		if (comma == std::string::npos)
			break;
		at = comma + 1;
	}
	return out;
}

struct StartOpts {
	std::vector<Addr> bootstrap;
	int32_t max_bytes = 0;
	bool reset_earliest = false;
	uint32_t rx_bufs_max = 0; // per session; 0: the whole pool
	km_fetcher_resolve_fn resolve = nullptr;
	void *resolve_ctx = nullptr;
	km_throttle *throttle = nullptr; // the host's cap (throttle.h)
	uint32_t unavailable_ms = 0; // issue 19 item 6
	bool retry_attempt = false;
	uint32_t backoff_ms = 10, backoff_max_ms = 200; // reconnects too
};

constexpr uint32_t kSessionsMax = 8;

class FetchRig : public ::testing::Test {
protected:
	void SetUpRig(km_net_rx_mode mode, uint32_t buf_bytes = 16384,
		      uint32_t buf_count = 256)
	{
		char tmpl[] = "/tmp/km-fetch-XXXXXX";
		ASSERT_NE(nullptr, mkdtemp(tmpl));
		dir_ = tmpl;
		ASSERT_EQ(0, km_uring_init(&ring_, 512));
		ring_ok_ = true;
		mode_ = mode;
		ASSERT_NO_FATAL_FAILURE(NewNet(buf_bytes, buf_count));
		scratch_.reset(new km_fetcher_scratch);
		sess_.reset(new km_fsess[kSessionsMax]);
		f_.reset(new km_fetcher);
		ASSERT_NO_FATAL_FAILURE(OpenLog());
	}
	void TearDown() override
	{
		if (net_)
			km_net_destroy(net_);
		if (log_) {
			EXPECT_EQ(0, km_log_close(log_));
		}
		if (ring_ok_)
			km_uring_exit(&ring_);
		if (!dir_.empty()) {
			EXPECT_EQ(0, system(("rm -rf " + dir_).c_str()));
		}
	}
	// A (new) backend whose pool is buf_count buffers of buf_bytes.
	void NewNet(uint32_t buf_bytes, uint32_t buf_count,
		    uint32_t conns_max = 4)
	{
		if (net_)
			km_net_destroy(net_);
		net_ = nullptr;
		km_net_config cfg = {};
		cfg.kind = KM_NET_KERNEL;
		cfg.conns_max = conns_max;
		cfg.rx_buf_count = buf_count;
		cfg.rx_buf_bytes = buf_bytes;
		cfg.send_queue_max = 16;
		cfg.send_iov_max = 16;
		cfg.connect_timeout_ms = 5000;
		cfg.close_timeout_ms = 1000;
		cfg.uring = &ring_;
		cfg.rx_mode = mode_;
		int rc = km_net_create(&cfg, &net_);
		ASSERT_EQ(0, rc) << km_strerror(rc);
		buf_bytes_ = buf_bytes;
		buf_count_ = buf_count;
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
	// (Re)configure the pool of sessions, which must be idle to change.
	void Pool(const StartOpts &o)
	{
		km_fsess_pool_config pc = {};
		pc.sessions_max = kSessionsMax;
		pc.rx_buf_bytes = buf_bytes_;
		pc.rx_bufs_max = o.rx_bufs_max ? o.rx_bufs_max : buf_count_;
		pc.scratch = scratch_.get();
		pc.resolve = o.resolve;
		pc.resolve_ctx = o.resolve_ctx;
		if (pool_ok_ && pc.rx_buf_bytes == pool_.cfg.rx_buf_bytes &&
		    pc.rx_bufs_max == pool_.cfg.rx_bufs_max &&
		    pc.resolve == pool_.cfg.resolve &&
		    pc.resolve_ctx == pool_.cfg.resolve_ctx &&
		    pool_.net == net_)
			return;
		ASSERT_TRUE(!pool_ok_ || km_fsess_pool_idle(&pool_));
		ASSERT_EQ(0, km_fsess_pool_init(&pool_, &pc, net_, sess_.get()));
		pool_ok_ = true;
	}
	km_fetcher_config Config(const StartOpts &o)
	{
		km_fetcher_config fc = {};
		std::vector<Addr> boot = o.bootstrap.empty() ? boot_ : o.bootstrap;
		for (const Addr &a : boot) {
			km_fetcher_addr &b = fc.bootstrap[fc.n_bootstrap++];
			snprintf(b.host, sizeof(b.host), "%s", a.host.c_str());
			b.port = a.port;
		}
		snprintf(fc.topic, sizeof(fc.topic), "%s", kTopic);
		fc.partition = 0;
		fc.max_wait_ms = 20;
		fc.max_bytes = o.max_bytes;
		fc.backoff_ms = o.backoff_ms;
		fc.backoff_max_ms = o.backoff_max_ms;
		fc.offset_reset_earliest = o.reset_earliest;
		fc.throttle = o.throttle;
		fc.unavailable_ms = o.unavailable_ms;
		fc.retry_attempt = o.retry_attempt;
		return fc;
	}
	void Start(const StartOpts &o = StartOpts())
	{
		km_fetcher_config fc = Config(o);
		ASSERT_NO_FATAL_FAILURE(Pool(o));
		ASSERT_EQ(0, km_fetcher_init(f_.get(), &fc, &pool_, log_));
	}
	void Turn()
	{
		ASSERT_GE(km_uring_poll(&ring_, false), 0);
		ASSERT_GE(km_net_poll(net_), 0);
		km_fsess_pool_step(&pool_);
	}
	// Pump until pred() holds; the session must not fail meanwhile.
	template <typename Pred> void RunUntil(Pred pred, int ms = kTimeoutMs)
	{
		auto deadline = Clock::now() + std::chrono::milliseconds(ms);
		while (!pred() && Clock::now() < deadline &&
		       km_fetcher_get_state(f_.get()) != KM_FETCHER_FAILED)
			ASSERT_NO_FATAL_FAILURE(Turn());
		ASSERT_NE(KM_FETCHER_FAILED, km_fetcher_get_state(f_.get()))
			<< km_fetcher_reason(f_.get());
		ASSERT_TRUE(pred()) << "timed out; durable "
				    << km_log_durable_offset(log_);
	}
	// Pump until the durable offset reaches hw.
	void RunTo(int64_t hw)
	{
		RunUntil([&] { return km_log_durable_offset(log_) >= hw; });
	}
	// Pump until the session FAILS (it must).
	void RunToFailed()
	{
		auto deadline = Clock::now() + std::chrono::milliseconds(kTimeoutMs);
		while (km_fetcher_get_state(f_.get()) != KM_FETCHER_FAILED &&
		       Clock::now() < deadline)
			ASSERT_NO_FATAL_FAILURE(Turn());
		ASSERT_EQ(KM_FETCHER_FAILED, km_fetcher_get_state(f_.get()));
	}
	// Stop and wait until every buffer is back, every write done and
	// (the partition being the only one) its session closed.
	void Stop()
	{
		km_fetcher_stop(f_.get());
		auto deadline = Clock::now() + std::chrono::milliseconds(kTimeoutMs);
		while ((!km_fetcher_idle(f_.get()) || !km_fsess_pool_idle(&pool_)) &&
		       Clock::now() < deadline)
			ASSERT_NO_FATAL_FAILURE(Turn());
		ASSERT_TRUE(km_fetcher_idle(f_.get()));
		ASSERT_TRUE(km_fsess_pool_idle(&pool_));
		ASSERT_EQ(0, km_log_sync(log_));
	}
	const km_fetcher_stats &Stats() { return *km_fetcher_get_stats(f_.get()); }
	uint64_t Err(km_fetcher_err kind) { return Stats().errors[kind]; }
	// The source partition from `from`, batch by batch, read from the
	// broker at `leader`; *hw is the last offset + 1.
	std::vector<Bytes> Source(const Addr &leader, int64_t from, int64_t *hw)
	{
		rawkafka::Conn c;
		std::vector<Bytes> out;
		EXPECT_EQ("", c.connect(leader.host, leader.port, 5000));
		EXPECT_EQ("", rawkafka::fetch_all(c, kTopic, 0, from, 100000,
						  kTimeoutMs, &out));
		*hw = out.empty() ? from
				  : rawkafka::batch_last_offset(out.back()) + 1;
		return out;
	}
	// The log, batch by batch, from its start to its durable offset.
	std::vector<Bytes> Mirror(km_log *log = nullptr)
	{
		std::vector<Bytes> out;
		km_log *lg = log ? log : log_;
		std::vector<uint8_t> buf(4 << 20);
		int64_t off = km_log_start_offset(lg);
		int64_t end = km_log_durable_offset(lg);
		while (off < end) {
			km_log_read_result r;
			int rc = km_log_read(lg, off, end, 1 << 20, buf.data(),
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
	// The log holds exactly the source's batches, in order: same offsets,
	// same bytes but producerId (R1: -(p + 2)) and crc (patched, valid).
	void Compare(const std::vector<Bytes> &src, km_log *log = nullptr)
	{
		std::vector<Bytes> got = Mirror(log);
		ASSERT_EQ(src.size(), got.size());
		for (size_t i = 0; i < src.size(); i++)
			ASSERT_NO_FATAL_FAILURE(CompareOne(src[i], got[i], i));
	}
	void CompareOne(const Bytes &s, const Bytes &g, size_t i)
	{
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
		ASSERT_EQ((int)g.size(),
			  km_batch_parse(&b, &ch, km_chain_start(&ch), 1 << 26))
			<< "batch " << i;
		iovec sv = {(void *)s.data(), s.size()};
		km_chain sch = {&sv, 1};
		ASSERT_EQ((int)s.size(), km_batch_parse(&sb, &sch,
						       km_chain_start(&sch),
						       1 << 26));
		int64_t want;
		ASSERT_EQ(0, km_pid_map(km_batch_producer_id(&sb), &want));
		EXPECT_EQ(want, km_batch_producer_id(&b)) << "batch " << i;
		EXPECT_EQ(km_batch_base_offset(&sb), km_batch_base_offset(&b));
	}

	std::string dir_;
	km_uring ring_ = {};
	bool ring_ok_ = false;
	km_net_rx_mode mode_ = KM_NET_RX_AUTO;
	km_net *net_ = nullptr;
	uint32_t buf_bytes_ = 0, buf_count_ = 0;
	km_log *log_ = nullptr;
	std::unique_ptr<km_fetcher_scratch> scratch_;
	std::unique_ptr<km_fsess[]> sess_;
	km_fsess_pool pool_ = {};
	bool pool_ok_ = false;
	std::unique_ptr<km_fetcher> f_;
	std::vector<Addr> boot_; // default bootstrap list
};

} // namespace fetchtest

#endif
