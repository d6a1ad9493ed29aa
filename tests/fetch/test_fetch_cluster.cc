// Goal: a fetch session follows its partition's leader across a cluster:
// the leader is not the bootstrap broker; the leader moves twice while a
// real producer keeps producing; NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE
// and a retriable error are injected on Fetch and on Metadata; the source's
// log start moves past our log end (OFFSET_OUT_OF_RANGE), which fails the
// session naming both offsets unless offset_reset_earliest restarts the log
// at the source's start. In every case the log ends up holding exactly the
// source's batches (offsets, and bytes but the mapped producer id and
// patched crc): no loss, no duplicate.
// Method: librdkafka's mock cluster with 3 brokers and a replication factor
// of 3, real librdkafka producers (tests/support/kafka_peers.h), the worker
// loop of fetch_rig.h pumped until observable conditions hold, bounded by
// deadlines; faults injected with rd_kafka_mock_partition_set_leader,
// rd_kafka_mock_push_request_errors and rd_kafka_mock_topic_set_error.
#include <atomic>
#include <thread>

#include "fetch_rig.h"
#include "tests/support/kafka_peers.h"

namespace {

using namespace fetchtest;

class FetchCluster : public FetchRig {
protected:
	void SetUp() override
	{
		mock_.reset(new kmtest::MockCluster(3));
		ASSERT_EQ("", mock_->error());
		ASSERT_EQ("", mock_->create_topic(kTopic, 1, 3));
		brokers_ = ParseBootstraps(mock_->bootstrap());
		ASSERT_EQ(3u, brokers_.size());
		ASSERT_NO_FATAL_FAILURE(SetLeader(3));
		boot_ = brokers_;
		ASSERT_NO_FATAL_FAILURE(SetUpRig(KM_NET_RX_AUTO));
	}
	void SetLeader(int32_t id)
	{
		ASSERT_EQ("", mock_->set_leader(kTopic, 0, id));
		leader_ = id;
	}
	const Addr &Broker(int32_t id) { return brokers_[(size_t)id - 1]; }
	std::string Produce(bool idempotent, int n, int64_t first_seq,
			    size_t value_size = 0)
	{
		kmtest::ProduceSpec s;
		s.topic = kTopic;
		s.count = n;
		s.first_seq = first_seq;
		s.seed = 7;
		s.mode = idempotent ? kmtest::ProducerMode::kIdempotent
				    : kmtest::ProducerMode::kPlain;
		if (value_size)
			s.value_size = value_size;
		else
			s.value_size_of = [](int64_t seq) {
				return seq % 40 == 0 ? (size_t)40000
						     : (size_t)(100 + seq % 7);
			};
		s.flush_every = 10;
		s.conf = {{"linger.ms", "5"}, {"batch.size", "400000"}};
		return kmtest::produce(mock_->bootstrap(), s);
	}
	std::string Watermarks(int64_t *low, int64_t *high)
	{
		return kmtest::watermarks(mock_->bootstrap(), kTopic, 0, low,
					  high);
	}
	std::vector<Bytes> Source(int64_t from, int64_t *hw)
	{
		return FetchRig::Source(Broker(leader_), from, hw);
	}
	std::unique_ptr<kmtest::MockCluster> mock_;
	std::vector<Addr> brokers_;
	int32_t leader_ = -1;
};

// The bootstrap list names broker 1 only; the leader is broker 3, found
// through Metadata, and mirrored from its own address.
TEST_F(FetchCluster, LeaderIsNotTheBootstrapBroker)
{
	ASSERT_EQ("", Produce(false, 100, 0));
	ASSERT_EQ("", Produce(true, 100, 100));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(0, &hw);
	ASSERT_EQ(200, hw);
	StartOpts o;
	o.bootstrap = {Broker(1)};
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_EQ(KM_FETCHER_MIRRORING, km_fetcher_get_state(f_.get()));
	EXPECT_EQ(3, Stats().leader_id);
	EXPECT_EQ(Broker(3).host, Stats().leader.host);
	EXPECT_EQ(Broker(3).port, Stats().leader.port);
	EXPECT_EQ(1u, Stats().reconnects) << "bootstrap, then the leader";
	EXPECT_EQ(1u, Stats().metadata_refreshes) << "none at the leader";
	EXPECT_EQ(0u, Stats().leader_changes);
	EXPECT_STRNE("", km_fetcher_cluster_id(f_.get()));
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// A producer thread that keeps producing (one idempotent producer, a flush
// every 8 messages so the partition gets many batches) until told to stop,
// at most kAhead messages ahead of what the test says was mirrored, so the
// mock stays far below its 5 MiB per partition however fast it runs.
class Producer {
public:
	static constexpr int64_t kAhead = 400;
	explicit Producer(const std::string &boot) : boot_(boot) {}
	~Producer() { Join(); }
	void Start()
	{
		th_ = std::thread([this] { Run(); });
	}
	void Join()
	{
		stop_ = true;
		if (th_.joinable())
			th_.join();
	}
	int64_t Produced() const { return produced_; }
	std::atomic<int64_t> mirrored_{0};
	std::string err_;

private:
	// Wait (bounded) until the mirror is close enough behind.
	bool Window(int64_t i)
	{
		auto deadline = Clock::now() + std::chrono::milliseconds(kTimeoutMs);
		while (i - mirrored_ >= kAhead && !stop_) {
			if (Clock::now() > deadline)
				return false;
			std::this_thread::yield();
		}
		return true;
	}
	void Run()
	{
		rd_kafka_t *rk = kmtest::client_new(
			RD_KAFKA_PRODUCER,
			{{"bootstrap.servers", boot_},
			 {"enable.idempotence", "true"},
			 {"linger.ms", "2"}},
			&err_);
		if (!rk)
			return;
		for (int64_t i = 0; !stop_ && err_.empty(); i++) {
			if (!Window(i)) {
				err_ = "the mirror stopped following";
				break;
			}
			std::string v(i % 100 == 0 ? 8000 : 100 + i % 13,
				      (char)('a' + i % 26));
			rd_kafka_resp_err_t e = rd_kafka_producev(
				rk, RD_KAFKA_V_TOPIC(kTopic),
				RD_KAFKA_V_PARTITION(0),
				RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
				RD_KAFKA_V_VALUE((void *)v.data(), v.size()),
				RD_KAFKA_V_END);
			if (e)
				err_ = rd_kafka_err2str(e);
			if (i % 8 == 7 && rd_kafka_flush(rk, kTimeoutMs))
				err_ = "flush timed out";
			produced_ = i + 1;
		}
		if (err_.empty() && rd_kafka_flush(rk, kTimeoutMs))
			err_ = "final flush timed out";
		rd_kafka_destroy(rk);
	}
	std::string boot_;
	std::thread th_;
	std::atomic<bool> stop_{false};
	std::atomic<int64_t> produced_{0};
};

// The leader moves 3 -> 1 -> 2 while the producer keeps producing and the
// session keeps mirroring: it follows each move, and the log is the source,
// batch for batch.
TEST_F(FetchCluster, LeaderMovesWhileProducing)
{
	Producer p(mock_->bootstrap());
	p.Start();
	StartOpts o;
	o.bootstrap = {Broker(2)};
	ASSERT_NO_FATAL_FAILURE(Start(o));
	auto mirrored = [&] {
		p.mirrored_ = km_log_end_offset(log_);
		return Stats().batches;
	};
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] { return mirrored() >= 20; }));
	for (int32_t to : {1, 2}) {
		uint64_t before = Stats().batches;
		int64_t produced = p.Produced();
		ASSERT_NO_FATAL_FAILURE(SetLeader(to));
		ASSERT_NO_FATAL_FAILURE(RunUntil([&] {
			return mirrored() >= before + 20 &&
			       Stats().leader_id == to &&
			       p.Produced() > produced;
		}));
	}
	p.Join();
	ASSERT_EQ("", p.err_);
	int64_t low = -1, high = -1;
	ASSERT_EQ("", Watermarks(&low, &high));
	ASSERT_EQ(0, low);
	ASSERT_EQ(p.Produced(), high);
	ASSERT_NO_FATAL_FAILURE(RunTo(high));
	EXPECT_EQ(KM_FETCHER_MIRRORING, km_fetcher_get_state(f_.get()));
	EXPECT_EQ(2, Stats().leader_id);
	EXPECT_EQ(Broker(2).port, Stats().leader.port);
	EXPECT_GE(Stats().leader_changes, 2u);
	EXPECT_GE(Err(KM_FETCHER_ERR_NOT_LEADER), 2u);
	EXPECT_EQ(0u, Stats().duplicates);
	ASSERT_NO_FATAL_FAILURE(Stop());
	int64_t hw = 0;
	std::vector<Bytes> src = Source(0, &hw);
	ASSERT_EQ(high, hw);
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// Errors injected on Fetch (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
// REQUEST_TIMED_OUT), then on Metadata: librdkafka 2.0.2's mock never pops
// rd_kafka_mock_push_request_errors for Metadata (its handler does not ask
// for them), so those go in as the topic's error code with
// rd_kafka_mock_topic_set_error: LEADER_NOT_AVAILABLE, then
// REQUEST_TIMED_OUT. Each is counted by kind, answered with Metadata or a
// retry after backoff, and the content is the same.
TEST_F(FetchCluster, InjectedErrorsOnFetchAndMetadata)
{
	ASSERT_EQ("", Produce(true, 300, 0));
	int64_t hw = 0;
	std::vector<Bytes> src = Source(0, &hw);
	StartOpts o;
	o.bootstrap = {Broker(1), Broker(2)};
	o.max_bytes = 32 * 1024;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] { return Stats().batches >= 1; }));
	mock_->push_request_errors(
		KM_API_FETCH, {RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
			       RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE,
			       RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT});
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] {
		return Err(KM_FETCHER_ERR_NOT_LEADER) == 1 &&
		       Err(KM_FETCHER_ERR_LEADER_NOT_AVAILABLE) == 1 &&
		       Err(KM_FETCHER_ERR_RETRIABLE) == 1;
	}));
	// Metadata: the topic errs; a NOT_LEADER makes the session ask.
	rd_kafka_mock_topic_set_error(mock_->handle(), kTopic,
				      RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE);
	mock_->push_request_errors(KM_API_FETCH,
				   {RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION});
	ASSERT_NO_FATAL_FAILURE(RunUntil([&] {
		return Err(KM_FETCHER_ERR_LEADER_NOT_AVAILABLE) >= 2;
	}));
	EXPECT_EQ(KM_FETCHER_CONNECTING, km_fetcher_get_state(f_.get()))
		<< "no leader: not mirroring";
	rd_kafka_mock_topic_set_error(mock_->handle(), kTopic,
				      RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT);
	ASSERT_NO_FATAL_FAILURE(RunUntil(
		[&] { return Err(KM_FETCHER_ERR_RETRIABLE) >= 2; }));
	rd_kafka_mock_topic_set_error(mock_->handle(), kTopic,
				      RD_KAFKA_RESP_ERR_NO_ERROR);
	ASSERT_NO_FATAL_FAILURE(RunTo(hw));
	EXPECT_EQ(KM_FETCHER_MIRRORING, km_fetcher_get_state(f_.get()));
	EXPECT_EQ(2u, Err(KM_FETCHER_ERR_NOT_LEADER));
	EXPECT_GE(Stats().metadata_refreshes, 5u);
	EXPECT_EQ(3, Stats().leader_id);
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

// The mock keeps about 5 MiB per partition: 7.5 MiB produced after a first
// mirror of 20 messages moves the source's log start past our log end.
// Without offset_reset_earliest the session FAILS naming both offsets and
// leaves the log alone; with it the log restarts at the source's start and
// holds the source from there on.
TEST_F(FetchCluster, OffsetOutOfRangeBehindSourceStart)
{
	ASSERT_EQ("", Produce(false, 20, 0, 100));
	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunTo(20));
	ASSERT_NO_FATAL_FAILURE(Stop());
	ASSERT_EQ(20, km_log_end_offset(log_));
	ASSERT_EQ("", Produce(false, 250, 20, 30000));
	int64_t low = -1, high = -1;
	ASSERT_EQ("", Watermarks(&low, &high));
	ASSERT_GT(low, 20) << "the mock kept everything?";
	ASSERT_EQ(270, high);

	ASSERT_NO_FATAL_FAILURE(Start());
	ASSERT_NO_FATAL_FAILURE(RunToFailed());
	std::string why = km_fetcher_reason(f_.get());
	EXPECT_NE(std::string::npos, why.find("OFFSET_OUT_OF_RANGE")) << why;
	EXPECT_NE(std::string::npos,
		  why.find("starts at offset " + std::to_string(low) + ","))
		<< why;
	EXPECT_NE(std::string::npos, why.find("log end 20 ")) << why;
	EXPECT_NE(std::string::npos, why.find("mirror.offset.reset=earliest"))
		<< why;
	EXPECT_EQ(1u, Err(KM_FETCHER_ERR_OUT_OF_RANGE));
	EXPECT_EQ(low, Stats().log_start_offset);
	EXPECT_EQ(20, km_log_end_offset(log_));
	ASSERT_NO_FATAL_FAILURE(Stop());

	StartOpts o;
	o.reset_earliest = true;
	ASSERT_NO_FATAL_FAILURE(Start(o));
	ASSERT_NO_FATAL_FAILURE(RunTo(high));
	EXPECT_EQ(1u, Stats().log_resets);
	EXPECT_EQ((uint64_t)(low - 20), Stats().offsets_skipped) << "the gap";
	EXPECT_EQ(1u, Err(KM_FETCHER_ERR_OUT_OF_RANGE));
	EXPECT_EQ(low, km_log_start_offset(log_));
	ASSERT_NO_FATAL_FAILURE(Stop());
	int64_t hw = 0;
	std::vector<Bytes> src = Source(low, &hw);
	ASSERT_EQ(high, hw);
	ASSERT_NO_FATAL_FAILURE(Compare(src));
}

} // namespace
