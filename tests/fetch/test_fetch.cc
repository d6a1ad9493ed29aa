// Goal: a fetch session (dataplane/fetch/fetcher*.c and fsess*.c over
// dataplane/net/kframe.c and the kernel backend) mirrors one partition of librdkafka's mock cluster,
// filled by real librdkafka producers (plain and idempotent, batches larger
// than a receive buffer), into a km_log, and the log then holds the source
// batches byte for byte except producerId (R1: -(p + 2)) and crc (patched),
// at the same offsets (R6). Restarting on the same log resumes at its end
// without duplicates; a cut connection, NOT_LEADER, a broker down and up,
// a corrupt source batch, a log ahead of the source, version negotiation,
// the receive-buffer clamp and the pipelining of Fetch with appends are
// each observed. Both receive modes of the kernel backend where it matters.
// Method: a one-broker mock cluster; the worker loop is pumped until the
// log's durable offset reaches the source high watermark (fetch_rig.h),
// bounded by a deadline, no sleeps; source batches are read with a raw
// client and compared with km_log_read.
#include <arpa/inet.h>
#include <string.h>

#include "fetch_rig.h"
#include "tests/support/kafka_peers.h"

namespace {

using namespace fetchtest;

// Every 40th value is 40 KB, so batches span several 16 KiB buffers.
std::string Produce(const std::string &boot, bool idempotent, int n,
		    int seed)
{
	kmtest::ProduceSpec s;
	s.topic = kTopic;
	s.count = n;
	s.seed = (uint64_t)seed;
	s.first_seq = seed;
	s.mode = idempotent ? kmtest::ProducerMode::kIdempotent
			    : kmtest::ProducerMode::kPlain;
	s.value_size_of = [](int64_t seq) {
		return seq % 40 == 0 ? (size_t)40000 : (size_t)(100 + seq % 7);
	};
	s.flush_every = 50;
	s.conf = {{"linger.ms", "5"}, {"batch.size", "200000"}};
	return kmtest::produce(boot, s);
}

class Fetch : public FetchRig,
	      public ::testing::WithParamInterface<km_net_rx_mode> {
protected:
	void SetUp() override
	{
		ASSERT_NO_FATAL_FAILURE(NewMock());
		ASSERT_NO_FATAL_FAILURE(SetUpRig(GetParam()));
	}
	void NewMock()
	{
		mock_.reset(new kmtest::MockCluster(1));
		ASSERT_EQ("", mock_->error());
		ASSERT_EQ("", mock_->create_topic(kTopic, 1));
		boot_ = ParseBootstraps(mock_->bootstrap());
		ASSERT_EQ(1u, boot_.size());
	}
	std::vector<Bytes> Source(int64_t *hw)
	{
		return FetchRig::Source(boot_[0], 0, hw);
	}
	std::unique_ptr<kmtest::MockCluster> mock_;
};

TEST_P(Fetch, MirrorsPlainAndIdempotentThenResumes)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), false, 200, 0));
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 200, 1000));
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
	EXPECT_EQ(KM_FETCHER_MIRRORING, km_fetcher_get_state(f_.get()));
	EXPECT_EQ(src.size(), Stats().batches);
	EXPECT_EQ(0u, Stats().corrupt);
	EXPECT_EQ(hw, km_log_end_offset(log_));
	EXPECT_STRNE("", km_fetcher_cluster_id(f_.get()));
	EXPECT_EQ(hw, km_fetcher_high_watermark(f_.get()));
	// The mock speaks ApiVersions v0-2 and answers v3 with
	// UNSUPPORTED_VERSION in a body that names no usable range: the
	// session stepped down to v0 (as librdkafka does), then picked Fetch
	// v11 (v5+ carries the log start), Metadata v2, ListOffsets v3.
	EXPECT_EQ(0, Stats().v_apiversions);
	EXPECT_EQ(11, Stats().v_fetch);
	EXPECT_EQ(2, Stats().v_metadata);
	EXPECT_EQ(3, Stats().v_listoffsets);
	EXPECT_EQ(0, Stats().log_start_offset);
	EXPECT_EQ(1, Stats().leader_id);
	EXPECT_EQ(boot_[0].port, Stats().leader.port);
	ASSERT_NO_FATAL_FAILURE(Stop());
	km_net_stats ns;
	km_net_get_stats(net_, &ns);
	EXPECT_EQ(0u, ns.rx_bufs_held);
	ASSERT_NO_FATAL_FAILURE(Compare(src));

	// Restart on the same (reopened) log after producing more: resumes at
	// the log end, no duplicates.
	ASSERT_NO_FATAL_FAILURE(CloseLog());
	ASSERT_NO_FATAL_FAILURE(OpenLog());
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 150, 5000));
	src = Source(&hw);
	ASSERT_EQ(550, hw);
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_EQ(0u, Stats().duplicates);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// A cut mid-stream (small fetches, so the backlog takes many): the session
// reconnects with backoff and resumes from the log end.
TEST_P(Fetch, ConnectionCutResumes)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 300, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_EQ(300, hw);
	StartOpts o;
	o.max_bytes = 32 * 1024;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] { return Stats().batches >= 1; }));
	ASSERT_LT(km_log_end_offset(log_), hw) << "no mid-stream left to cut";
	km_fetcher_cut(f_.get());
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_GE(Stats().reconnects, 1u);
	EXPECT_GE(Err(KM_FETCHER_ERR_DISCONNECT), 1u);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// 512-byte receive buffers: every batch, and most frames, span many
// buffers (the 40 KB ones about 80).
TEST_P(Fetch, TinyReceiveBuffers)
{
	ASSERT_NO_FATAL_FAILURE(NewNet(512, 512));
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 200, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	StartOpts o;
	o.max_bytes = 64 * 1024;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	ASSERT_NO_FATAL_FAILURE(Stop());
	km_net_stats ns;
	km_net_get_stats(net_, &ns);
	EXPECT_EQ(0u, ns.rx_bufs_held);
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// A log ahead of the source (the source lost data): OFFSET_OUT_OF_RANGE,
// ListOffsets, then FAILED with both offsets, and the log untouched.
TEST_P(Fetch, LogAheadOfSourceFails)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), false, 100, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	ASSERT_NO_FATAL_FAILURE(Stop());
	// A new source cluster, emptier than the log.
	ASSERT_NO_FATAL_FAILURE(NewMock());
	ASSERT_EQ("", Produce(mock_->bootstrap(), false, 10, 0));
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunToFailed());
	std::string why = km_fetcher_reason(f_.get());
	EXPECT_NE(std::string::npos, why.find("OFFSET_OUT_OF_RANGE")) << why;
	EXPECT_NE(std::string::npos, why.find("log end 100 ")) << why;
	EXPECT_NE(std::string::npos, why.find("high watermark 10 ")) << why;
	EXPECT_NE(std::string::npos, why.find("lost data")) << why;
	EXPECT_FALSE(km_fetcher_transient(f_.get())) << "an operator's cause";
	EXPECT_EQ(1u, Err(KM_FETCHER_ERR_OUT_OF_RANGE));
	EXPECT_EQ(100, km_log_end_offset(log_));
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// A corrupt batch in the source (the mock does not check CRCs): rejected,
// counted, refetched from its offset; what precedes it is mirrored and
// nothing past it is written; stored corruption (every refetch corrupt)
// fails the session after KM_FETCHER_CORRUPT_MAX tries, with the reason.
TEST_P(Fetch, CorruptBatchIsRefetchedThenFails)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), false, 60, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_FALSE(src.empty());
	Bytes bad = src.back();
	bad.back() ^= 0x5a; // records bytes change, crc does not
	rawkafka::Conn c;
	ASSERT_EQ("", c.connect(boot_[0].host, boot_[0].port, 5000));
	int16_t perr = -1;
	int64_t base = -1;
	ASSERT_EQ("", c.produce(kTopic, 0, bad, &perr, &base));
	ASSERT_EQ(0, perr);
	ASSERT_EQ(hw, base);
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunToFailed());
	EXPECT_EQ(hw, km_log_end_offset(log_));
	EXPECT_EQ((uint64_t)KM_FETCHER_CORRUPT_MAX, Stats().corrupt);
	EXPECT_EQ((uint64_t)KM_FETCHER_CORRUPT_MAX, Err(KM_FETCHER_ERR_CORRUPT));
	std::string why = km_fetcher_reason(f_.get());
	EXPECT_NE(std::string::npos, why.find("corrupt 5 times in a row"))
		<< why;
	EXPECT_FALSE(km_fetcher_transient(f_.get())) << "an operator's cause";
	EXPECT_NE(std::string::npos, why.find("offset " + std::to_string(hw)))
		<< why;
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// NOT_LEADER_OR_FOLLOWER on a Fetch: Metadata again (the leader is still
// this broker), resume from the log end on the same connection.
TEST_P(Fetch, NotLeaderRefreshesMetadata)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 300, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	StartOpts o;
	o.max_bytes = 32 * 1024;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] { return Stats().batches >= 1; }));
	uint64_t refreshes = Stats().metadata_refreshes;
	mock_->push_request_errors(KM_API_FETCH,
				   {RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION});
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_EQ(1u, Err(KM_FETCHER_ERR_NOT_LEADER));
	EXPECT_EQ(refreshes + 1, Stats().metadata_refreshes);
	EXPECT_EQ(0u, Stats().reconnects);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// The source broker goes down mid-stream and comes back.
TEST_P(Fetch, BrokerDownAndUpResumes)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 300, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	StartOpts o;
	o.max_bytes = 32 * 1024;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] { return Stats().batches >= 1; }));
	ASSERT_LT(km_log_end_offset(log_), hw);
	ASSERT_EQ("", mock_->set_broker_down(1));
	ASSERT_NO_FATAL_FAILURE(
		RunUntil([&] { return Stats().reconnects >= 2; }));
	EXPECT_EQ(KM_FETCHER_CONNECTING, km_fetcher_get_state(f_.get()));
	ASSERT_EQ("", mock_->set_broker_up(1));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_GE(Err(KM_FETCHER_ERR_DISCONNECT) + Err(KM_FETCHER_ERR_CONNECT),
		  1u);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// Failure handling (issue 19 item 6): the source down longer than
// cfg.unavailable_ms FAILS the partition with the transient flag, not
// before; a retry on probation (cfg.retry_attempt) FAILS at its first
// error; once the broker is up a retry mirrors on and a later outage
// is judged by unavailable_ms again (its probation ended).
TEST_P(Fetch, SourceDownLongerThanUnavailableFailsTransient)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 50, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	StartOpts o;
	o.unavailable_ms = 300;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_STREQ("", km_fetcher_note(f_.get()));
	ASSERT_EQ("", mock_->set_broker_down(1));
	auto t0 = Clock::now();
	// While it waits, the note says why and until when.
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] {
		return std::string(km_fetcher_note(f_.get())).find("FAILED (transient) after 300 ms") !=
		       std::string::npos;
	}));
	EXPECT_NE(std::string::npos,
		  std::string(km_fetcher_note(f_.get())).find("source unavailable: no good Fetch since"));
	ASSERT_NO_FATAL_FAILURE(RunToFailed());
	// The fetcher's clock counts whole milliseconds.
	EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(299));
	EXPECT_TRUE(km_fetcher_transient(f_.get()));
	std::string why = km_fetcher_reason(f_.get());
	EXPECT_NE(std::string::npos, why.find("source unavailable: no good Fetch"))
		<< why;
	ASSERT_NO_FATAL_FAILURE(Stop());

	o.retry_attempt = true;
	o.unavailable_ms = 60000;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	t0 = Clock::now();
	ASSERT_NO_FATAL_FAILURE(RunToFailed());
	EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(60000));
	EXPECT_TRUE(km_fetcher_transient(f_.get()));
	why = km_fetcher_reason(f_.get());
	EXPECT_NE(std::string::npos, why.find("a retry of")) << why;
	ASSERT_NO_FATAL_FAILURE(Stop());

	ASSERT_EQ("", mock_->set_broker_up(1));
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 50, 1));
	src = Source(&hw);
	o.unavailable_ms = 0;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	// Probation over: an outage now waits (unavailable_ms 0: forever).
	ASSERT_EQ("", mock_->set_broker_down(1));
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] { return Stats().reconnects >= 2; }));
	EXPECT_EQ(KM_FETCHER_CONNECTING, km_fetcher_get_state(f_.get()));
	std::string note = km_fetcher_note(f_.get());
	EXPECT_NE(std::string::npos, note.find("; reconnecting")) << note;
	EXPECT_EQ(std::string::npos, note.find("FAILED")) << note;
	ASSERT_EQ("", mock_->set_broker_up(1));
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 50, 2));
	src = Source(&hw);
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_STREQ("", km_fetcher_note(f_.get())) << "a good Fetch clears it";
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// Issue 17: the stall watchdog looks at a session's members only after an
// event (an error, a state change) or at the earliest deadline it keeps,
// never every turn. With reconnects 2 s apart the source down still FAILS
// the partition at unavailable_ms (the deadline fires, not the next
// connect error), and while mirroring the watchdog makes no pass per turn.
TEST_P(Fetch, StallDeadlineFiresWithoutAnEvent)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 50, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	StartOpts o;
	o.unavailable_ms = 300;
	o.backoff_ms = o.backoff_max_ms = 2000;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	// Mirroring, caught up: Fetches come and go, the watchdog sleeps.
	uint64_t looks = pool_.looks;
	int turns = 0;
	auto t1 = Clock::now() + std::chrono::milliseconds(200);
	while (Clock::now() < t1) {
		ASSERT_NO_FATAL_FAILURE(Turn());
		turns++;
	}
	EXPECT_GT(turns, 100);
	EXPECT_LE(pool_.looks - looks, 2u) << turns << " turns";
	auto t0 = Clock::now();
	ASSERT_EQ("", mock_->set_broker_down(1));
	ASSERT_NO_FATAL_FAILURE(RunToFailed());
	EXPECT_GE(Clock::now() - t0, std::chrono::milliseconds(299));
	EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500))
		<< "failed at a reconnect 2 s later, not at its deadline";
	EXPECT_TRUE(km_fetcher_transient(f_.get()));
	ASSERT_EQ("", mock_->set_broker_up(1));
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// Pipelining: with many batches waiting, Fetches go out while the previous
// response's batches are still being written (flush=always makes every
// append wait for an fdatasync), and the content is identical.
TEST_P(Fetch, NextFetchOverlapsAppends)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 400, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_GT(src.size(), 4u);
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_GT(Stats().fetch_pipelined, 0u);
	EXPECT_LE(Stats().fetch_pipelined, Stats().fetches);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

INSTANTIATE_TEST_SUITE_P(Rx, Fetch,
			 ::testing::Values(KM_NET_RX_AUTO, KM_NET_RX_SINGLE),
			 [](const ::testing::TestParamInfo<km_net_rx_mode> &i) {
				 return std::string(i.param == KM_NET_RX_AUTO
							    ? "Auto"
							    : "Single");
			 });

// ---- configuration, versions, buffers (one receive mode) ----

class FetchCfg : public Fetch {};

// km_fsess_pool_init and km_fetcher_init refuse what could never work, and a
// partition's PartitionMaxBytes is clamped to half of the receive buffers
// its session may hold.
TEST_P(FetchCfg, InitChecksAndClamp)
{
	StartOpts o;
	o.max_bytes = 64 << 20;
	km_fetcher_config fc = Config(o);
	ASSERT_NO_FATAL_FAILURE(Pool(o));
	ASSERT_EQ(0, km_fetcher_init(f_.get(), &fc, &pool_, log_));
	// 256 buffers of 16 KiB: 4 MiB, half of it less the overhead.
	EXPECT_EQ((int32_t)(2 << 20) - 1024, Stats().max_bytes);
	ASSERT_NO_FATAL_FAILURE(Stop());
	o.rx_bufs_max = 4096; // more than kframe holds: taken as 1024
	ASSERT_NO_FATAL_FAILURE(Pool(o));
	ASSERT_EQ(0, km_fetcher_init(f_.get(), &fc, &pool_, log_));
	EXPECT_EQ((int32_t)(8 << 20) - 1024, Stats().max_bytes);
	ASSERT_NO_FATAL_FAILURE(Stop());

	km_fetcher_config bad = Config(o);
	bad.n_bootstrap = 0;
	EXPECT_EQ(-EINVAL, km_fetcher_init(f_.get(), &bad, &pool_, log_));
	bad = Config(o);
	snprintf(bad.bootstrap[0].host, sizeof(bad.bootstrap[0].host),
		 "broker.invalid");
	EXPECT_EQ(-EINVAL, km_fetcher_init(f_.get(), &bad, &pool_, log_))
		<< "a name without a resolver";
	bad = Config(o);
	bad.topic[0] = '\0';
	EXPECT_EQ(-EINVAL, km_fetcher_init(f_.get(), &bad, &pool_, log_));
	bad = Config(o);
	EXPECT_EQ(-EINVAL, km_fetcher_init(f_.get(), &bad, nullptr, log_));

	km_fsess_pool p;
	km_fsess_pool_config pc = pool_.cfg;
	pc.scratch = nullptr;
	EXPECT_EQ(-EINVAL, km_fsess_pool_init(&p, &pc, net_, sess_.get()));
	pc = pool_.cfg;
	pc.rx_buf_bytes = 512;
	pc.rx_bufs_max = 16; // 8 KiB: not one useful Fetch
	EXPECT_EQ(-EINVAL, km_fsess_pool_init(&p, &pc, net_, sess_.get()));
	pc = pool_.cfg;
	pc.sessions_max = KM_FSESS_POOL_MAX + 1;
	EXPECT_EQ(-EINVAL, km_fsess_pool_init(&p, &pc, net_, sess_.get()));
	EXPECT_STREQ("not_leader", km_fetcher_err_name(KM_FETCHER_ERR_NOT_LEADER));
	EXPECT_STREQ("stall", km_fetcher_err_name(KM_FETCHER_ERR_STALL));
}

// A bootstrap host name goes through the pool's resolver.
TEST_P(FetchCfg, ResolverMapsNames)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), false, 50, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	StartOpts o;
	static int calls;
	calls = 0;
	o.resolve = [](void *ctx, const char *host, char ipv4[16]) {
		calls++;
		if (strcmp(host, "source-broker.test") != 0)
			return -ENOENT;
		snprintf(ipv4, 16, "%s", (const char *)ctx);
		return 0;
	};
	o.resolve_ctx = (void *)boot_[0].host.c_str();
	km_fetcher_config fc = Config(o);
	snprintf(fc.bootstrap[0].host, sizeof(fc.bootstrap[0].host),
		 "source-broker.test");
	ASSERT_NO_FATAL_FAILURE(Pool(o));
	ASSERT_EQ(0, km_fetcher_init(f_.get(), &fc, &pool_, log_));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_GE(calls, 1);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// The source offers Fetch only up to v4: the session uses v4 (no log start
// in responses) and mirrors all the same; up to v3: FAILED, saying why.
TEST_P(FetchCfg, NegotiatesFetchVersion)
{
	ASSERT_EQ("", Produce(mock_->bootstrap(), true, 100, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_EQ(0, rd_kafka_mock_set_apiversion(mock_->handle(), KM_API_FETCH,
						  0, 4));
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_EQ(4, Stats().v_fetch);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));

	ASSERT_EQ(0, rd_kafka_mock_set_apiversion(mock_->handle(), KM_API_FETCH,
						  0, 3));
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunToFailed());
	std::string why = km_fetcher_reason(f_.get());
	EXPECT_NE(std::string::npos, why.find("Fetch v0-v3; kmirror needs v4"))
		<< why;
	ASSERT_NO_FATAL_FAILURE(Stop());
}

// A response that could never fit the receive buffers the session may hold
// (a 40 KB batch, 32 KiB of buffers) fails it, naming both sizes, instead
// of stalling the pool.
TEST_P(FetchCfg, ResponseLargerThanBuffersFails)
{
	ASSERT_NO_FATAL_FAILURE(NewNet(512, 64));
	ASSERT_EQ("", Produce(mock_->bootstrap(), false, 41, 0)); // one 40 KB
	int64_t hw = 0;
	std::vector<Bytes> src = Source(&hw);
	ASSERT_NO_FATAL_FAILURE(Start());
	EXPECT_EQ(16 * 1024 - 1024, Stats().max_bytes);
	ASSERT_NO_FATAL_FAILURE(RunToFailed());
	std::string why = km_fetcher_reason(f_.get());
	EXPECT_NE(std::string::npos, why.find("exceeds the 32768 bytes")) << why;
	ASSERT_NO_FATAL_FAILURE(Stop());
	km_net_stats ns;
	km_net_get_stats(net_, &ns);
	EXPECT_EQ(0u, ns.rx_bufs_held);
}

INSTANTIATE_TEST_SUITE_P(Rx, FetchCfg, ::testing::Values(KM_NET_RX_AUTO),
			 [](const ::testing::TestParamInfo<km_net_rx_mode> &) {
				 return std::string("Auto");
			 });

} // namespace
