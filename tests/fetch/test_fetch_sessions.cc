// Goal: one worker's partitions share fetch sessions, one connection per
// source broker (kmirror issue #4): 3 topics x 8 partitions led by the 3
// brokers of a cluster are mirrored over exactly 3 connections, each
// carrying the 8 partitions its broker leads in multi-partition Fetch
// requests, with every log holding its source partition batch for batch
// (offsets, bytes but the mapped producer id and patched crc). A leader
// moving mid-stream takes its partition to the session of the new leader
// (no new connection, nothing lost or duplicated, the others undisturbed);
// a partition that FAILS (a corrupt batch stored at its source) leaves its
// session while the others on the same connection keep mirroring.
// Method: librdkafka's mock cluster with 3 brokers, leaders set per
// partition, real librdkafka producers (tests/support/kafka_peers.h); one
// pool of sessions, one km_log and one km_fetcher per partition, driven as
// a worker drives them (fetch_rig.h), bounded by deadlines, no sleeps;
// connections counted with km_net_get_stats, requests with the pool's
// figures; the source read back with a raw client.
#include <stdio.h>

#include "fetch_rig.h"
#include "tests/support/kafka_peers.h"

namespace {

using namespace fetchtest;

constexpr int kTopics = 3;
constexpr int kParts = 8;
constexpr int kBrokers = 3;

struct Part {
	std::string topic;
	int32_t partition = 0;
	int32_t leader = 0;
	km_log *log = nullptr;
	std::unique_ptr<km_fetcher> f{new km_fetcher};
	int64_t hw = 0; // what was produced, as the source says
};

class FetchSessions : public FetchRig {
protected:
	void SetUp() override
	{
		mock_.reset(new kmtest::MockCluster(kBrokers));
		ASSERT_EQ("", mock_->error());
		brokers_ = ParseBootstraps(mock_->bootstrap());
		ASSERT_EQ((size_t)kBrokers, brokers_.size());
		boot_ = brokers_;
		ASSERT_NO_FATAL_FAILURE(SetUpRig(KM_NET_RX_AUTO));
		ASSERT_NO_FATAL_FAILURE(NewNet(16384, 256, 8));
		for (int t = 0; t < kTopics; t++) {
			std::string name = "mirror-" + std::to_string(t);
			ASSERT_EQ("", mock_->create_topic(name, kParts, 3));
			for (int p = 0; p < kParts; p++) {
				parts_.emplace_back();
				Part &x = parts_.back();
				x.topic = name;
				x.partition = p;
				x.leader = 1 + (t * kParts + p) % kBrokers;
			}
		}
		for (Part &x : parts_) {
			ASSERT_EQ("", mock_->set_leader(x.topic, x.partition,
							x.leader));
			ASSERT_NO_FATAL_FAILURE(OpenPart(x));
		}
	}
	void TearDown() override
	{
		for (Part &x : parts_) {
			if (x.log) {
				EXPECT_EQ(0, km_log_close(x.log));
			}
		}
		FetchRig::TearDown();
	}
	void OpenPart(Part &x)
	{
		km_log_config lc;
		km_log_config_defaults(&lc, dir_.c_str(), x.topic.c_str(),
				       x.partition);
		lc.segment_bytes = 1 << 20;
		lc.index_bytes_max = 64 * 1024;
		lc.flush_always = true;
		lc.prealloc_bytes = 1 << 20;
		int rc = km_log_open(&x.log, &lc, &ring_, nullptr);
		ASSERT_EQ(0, rc) << km_strerror(rc);
	}
	// n messages into x (a flush every 2: many batches), then x.hw.
	std::string Produce(Part &x, int n, int64_t first_seq)
	{
		kmtest::ProduceSpec s;
		s.topic = x.topic;
		s.partition = x.partition;
		s.count = n;
		s.first_seq = first_seq;
		s.seed = (uint64_t)x.partition + 1;
		s.mode = x.partition % 2 ? kmtest::ProducerMode::kIdempotent
					 : kmtest::ProducerMode::kPlain;
		s.value_size_of = [](int64_t seq) {
			return (size_t)(100 + seq % 300);
		};
		s.flush_every = 2;
		s.conf = {{"linger.ms", "1"}};
		std::string err = kmtest::produce(mock_->bootstrap(), s);
		int64_t low = 0;
		if (err.empty())
			err = kmtest::watermarks(mock_->bootstrap(), x.topic,
						 x.partition, &low, &x.hw);
		return err;
	}
	void StartAll()
	{
		StartOpts o;
		o.rx_bufs_max = 64; // 3 sessions x 1 MiB of the 4 MiB pool
		ASSERT_NO_FATAL_FAILURE(Pool(o));
		for (Part &x : parts_) {
			km_fetcher_config fc = Config(o);
			snprintf(fc.topic, sizeof(fc.topic), "%s", x.topic.c_str());
			fc.partition = x.partition;
			ASSERT_EQ(0, km_fetcher_init(x.f.get(), &fc, &pool_, x.log));
		}
	}
	// Pump until pred() holds; no partition but `may_fail` may FAIL.
	template <typename Pred>
	void RunAll(Pred pred, const Part *may_fail = nullptr)
	{
		auto deadline = Clock::now() + std::chrono::milliseconds(kTimeoutMs);
		while (!pred() && Clock::now() < deadline) {
			ASSERT_NO_FATAL_FAILURE(Turn());
			for (const Part &x : parts_)
				ASSERT_TRUE(&x == may_fail ||
					    km_fetcher_get_state(x.f.get()) !=
						    KM_FETCHER_FAILED)
					<< Name(x) << ": "
					<< km_fetcher_reason(x.f.get());
		}
		ASSERT_TRUE(pred()) << "timed out";
	}
	bool Mirrored(const Part &x)
	{
		return km_log_durable_offset(x.log) >= x.hw;
	}
	bool AllMirrored(const Part *but = nullptr)
	{
		for (const Part &x : parts_)
			if (&x != but && !Mirrored(x))
				return false;
		return true;
	}
	void StopAll()
	{
		for (Part &x : parts_)
			km_fetcher_stop(x.f.get());
		auto quiet = [&] {
			for (const Part &x : parts_)
				if (!km_fetcher_idle(x.f.get()))
					return false;
			return km_fsess_pool_idle(&pool_);
		};
		auto deadline = Clock::now() + std::chrono::milliseconds(kTimeoutMs);
		while (!quiet() && Clock::now() < deadline)
			ASSERT_NO_FATAL_FAILURE(Turn());
		ASSERT_TRUE(quiet());
		km_net_stats ns;
		km_net_get_stats(net_, &ns);
		EXPECT_EQ(0u, ns.rx_bufs_held);
		for (Part &x : parts_)
			ASSERT_EQ(0, km_log_sync(x.log));
	}
	// Every log is its source partition (from the leader now).
	void CompareAll()
	{
		for (Part &x : parts_) {
			rawkafka::Conn c;
			std::vector<Bytes> src;
			const Addr &b = brokers_[(size_t)x.leader - 1];
			ASSERT_EQ("", c.connect(b.host, b.port, 5000));
			ASSERT_EQ("", rawkafka::fetch_all(c, x.topic, x.partition,
							  0, 100000, kTimeoutMs,
							  &src));
			SCOPED_TRACE(Name(x));
			ASSERT_NO_FATAL_FAILURE(Compare(src, x.log));
		}
	}
	static std::string Name(const Part &x)
	{
		return x.topic + "-" + std::to_string(x.partition);
	}
	km_net_stats Net()
	{
		km_net_stats ns;
		km_net_get_stats(net_, &ns);
		return ns;
	}
	km_fsess_pool_stats PoolStats()
	{
		km_fsess_pool_stats ps;
		km_fsess_pool_get_stats(&pool_, &ps);
		return ps;
	}
	void Report(const char *what)
	{
		km_fsess_pool_stats ps = PoolStats();
		km_net_stats ns = Net();
		printf("[ figures  ] %s: %u partitions, net connects %llu, "
		       "conns_used %u, sessions opened %llu; requests %llu: "
		       "fetch %llu naming %llu partitions (%.1f each), "
		       "pipelined %llu, metadata %llu, listoffsets %llu\n",
		       what, (unsigned)parts_.size(),
		       (unsigned long long)ns.connects, ns.conns_used,
		       (unsigned long long)ps.sessions_opened,
		       (unsigned long long)ps.sum.requests,
		       (unsigned long long)ps.sum.fetch_requests,
		       (unsigned long long)ps.sum.fetch_partitions,
		       ps.sum.fetch_requests
			       ? (double)ps.sum.fetch_partitions /
					 (double)ps.sum.fetch_requests
			       : 0.0,
		       (unsigned long long)ps.sum.fetch_pipelined,
		       (unsigned long long)ps.sum.metadata_requests,
		       (unsigned long long)ps.sum.listoffsets_requests);
	}
	// The session of x serves x's leader.
	void ExpectOnLeader(const Part &x)
	{
		const km_fsess *s = km_fetcher_session(x.f.get());
		ASSERT_NE(nullptr, s) << Name(x);
		ASSERT_NE(nullptr, km_fsess_broker(s)) << Name(x);
		EXPECT_EQ(brokers_[(size_t)x.leader - 1].port,
			  km_fsess_broker(s)->port)
			<< Name(x);
		EXPECT_EQ(x.leader, km_fetcher_get_stats(x.f.get())->leader_id);
	}

	std::unique_ptr<kmtest::MockCluster> mock_;
	std::vector<Addr> brokers_;
	std::vector<Part> parts_;
};

// 24 partitions over 3 brokers: 3 connections, 8 partitions each, the
// content identical.
TEST_F(FetchSessions, OneConnectionPerLeaderBroker)
{
	for (Part &x : parts_)
		ASSERT_EQ("", Produce(x, 30, 0));
	ASSERT_NO_FATAL_FAILURE(StartAll());
	ASSERT_NO_FATAL_FAILURE(RunAll([&] { return AllMirrored(); }));
	km_net_stats ns = Net();
	km_fsess_pool_stats ps = PoolStats();
	Report("mirrored");
	EXPECT_EQ((uint64_t)kBrokers, ns.connects)
		<< "the bootstrap connection became broker 1's session";
	EXPECT_EQ((uint32_t)kBrokers, ns.conns_used);
	EXPECT_EQ((uint32_t)kBrokers, ps.sessions_open);
	EXPECT_EQ((uint32_t)kBrokers, ps.sessions_connected);
	for (uint32_t i = 0; i < kSessionsMax; i++) {
		const km_fsess *s = km_fsess_pool_session(&pool_, i);
		if (s != nullptr) {
			EXPECT_EQ((uint32_t)(kTopics * kParts / kBrokers),
				  km_fsess_members(s));
			EXPECT_NE(nullptr, km_fsess_broker(s));
		}
	}
	for (const Part &x : parts_) {
		ASSERT_NO_FATAL_FAILURE(ExpectOnLeader(x));
		EXPECT_EQ(KM_FETCHER_MIRRORING, km_fetcher_get_state(x.f.get()));
		EXPECT_STRNE("", km_fetcher_cluster_id(x.f.get()));
		EXPECT_EQ(0u, km_fetcher_get_stats(x.f.get())->duplicates);
	}
	// Multi-partition Fetch: the mock answers one batch per partition
	// per Fetch, so each request names several partitions.
	EXPECT_GE(ps.sum.fetch_partitions, 4 * ps.sum.fetch_requests);
	EXPECT_GT(ps.sum.fetch_pipelined, 0u);
	ASSERT_NO_FATAL_FAILURE(StopAll());
	ASSERT_NO_FATAL_FAILURE(CompareAll());
}

// The leader of one partition moves to a broker that leads others while
// its backlog is being mirrored: it joins that broker's session, no new
// connection, nothing lost or duplicated, no other partition disturbed.
TEST_F(FetchSessions, LeaderMoveMidStream)
{
	for (Part &x : parts_)
		ASSERT_EQ("", Produce(x, 60, 0));
	Part &m = parts_[0];
	ASSERT_EQ(1, m.leader);
	ASSERT_NO_FATAL_FAILURE(StartAll());
	ASSERT_NO_FATAL_FAILURE(RunAll([&] {
		return km_fetcher_get_stats(m.f.get())->batches >= 2 &&
		       PoolStats().sessions_open == (uint32_t)kBrokers;
	}));
	std::vector<uint64_t> moves;
	for (const Part &x : parts_)
		moves.push_back(km_fetcher_get_stats(x.f.get())->session_moves);
	const km_fsess *from = km_fetcher_session(m.f.get());
	EXPECT_LT(km_log_end_offset(m.log), m.hw) << "not mid-stream";
	ASSERT_EQ("", mock_->set_leader(m.topic, m.partition, 2));
	m.leader = 2;
	ASSERT_EQ("", Produce(m, 20, 60)); // to the new leader
	ASSERT_NO_FATAL_FAILURE(RunAll([&] { return AllMirrored(); }));
	Report("after the move");
	const km_fetcher_stats *st = km_fetcher_get_stats(m.f.get());
	EXPECT_EQ(moves[0] + 1, st->session_moves);
	EXPECT_NE(from, km_fetcher_session(m.f.get()));
	ASSERT_NO_FATAL_FAILURE(ExpectOnLeader(m));
	EXPECT_GE(st->errors[KM_FETCHER_ERR_NOT_LEADER], 1u);
	EXPECT_GE(st->leader_changes, 1u);
	EXPECT_EQ(0u, st->duplicates);
	for (size_t i = 1; i < parts_.size(); i++) {
		const km_fetcher_stats *o = km_fetcher_get_stats(parts_[i].f.get());
		EXPECT_EQ(moves[i], o->session_moves) << Name(parts_[i]);
		EXPECT_EQ(0u, o->errors[KM_FETCHER_ERR_NOT_LEADER]);
		EXPECT_EQ(0u, o->reconnects - (parts_[i].leader != 1));
	}
	km_net_stats ns = Net();
	EXPECT_EQ((uint64_t)kBrokers, ns.connects) << "no new connection";
	EXPECT_EQ((uint32_t)kBrokers, ns.conns_used);
	ASSERT_NO_FATAL_FAILURE(StopAll());
	ASSERT_NO_FATAL_FAILURE(CompareAll());
}

// A corrupt batch stored in one partition (the mock does not check CRCs)
// fails it after KM_FETCHER_CORRUPT_MAX refetches; it leaves its session,
// whose connection and other partitions carry on.
TEST_F(FetchSessions, OnePartitionFailsOthersContinue)
{
	for (Part &x : parts_)
		ASSERT_EQ("", Produce(x, 20, 0));
	Part &bad = parts_[kParts + 3];
	Part *peer = nullptr; // another partition on bad's broker
	for (Part &x : parts_)
		if (&x != &bad && x.leader == bad.leader)
			peer = &x;
	ASSERT_NE(nullptr, peer);
	rawkafka::Conn c;
	std::vector<Bytes> src;
	const Addr &lb = brokers_[(size_t)bad.leader - 1];
	ASSERT_EQ("", c.connect(lb.host, lb.port, 5000));
	ASSERT_EQ("", rawkafka::fetch_all(c, bad.topic, bad.partition, 0, 1000,
					  kTimeoutMs, &src));
	Bytes broken = src.back();
	broken.back() ^= 0x5a; // records bytes change, crc does not
	int16_t perr = -1;
	int64_t base = -1;
	ASSERT_EQ("", c.produce(bad.topic, bad.partition, broken, &perr, &base));
	ASSERT_EQ(0, perr);
	ASSERT_EQ(bad.hw, base);

	ASSERT_NO_FATAL_FAILURE(StartAll());
	ASSERT_NO_FATAL_FAILURE(RunAll(
		[&] {
			return km_fetcher_idle(bad.f.get()) && AllMirrored(&bad);
		},
		&bad));
	EXPECT_EQ(KM_FETCHER_FAILED, km_fetcher_get_state(bad.f.get()));
	std::string why = km_fetcher_reason(bad.f.get());
	EXPECT_NE(std::string::npos, why.find("corrupt 5 times in a row"))
		<< why;
	EXPECT_EQ(bad.hw, km_log_end_offset(bad.log));
	EXPECT_EQ((uint64_t)KM_FETCHER_CORRUPT_MAX,
		  km_fetcher_get_stats(bad.f.get())->corrupt);
	const km_fsess *s = km_fetcher_session(peer->f.get());
	ASSERT_NE(nullptr, s);
	EXPECT_EQ((uint32_t)(kTopics * kParts / kBrokers - 1),
		  km_fsess_members(s));

	// The connection the failed partition rode on keeps mirroring.
	ASSERT_EQ("", Produce(*peer, 20, 20));
	ASSERT_NO_FATAL_FAILURE(RunAll([&] { return Mirrored(*peer); }, &bad));
	Report("one failed");
	km_net_stats ns = Net();
	EXPECT_EQ((uint64_t)kBrokers, ns.connects) << "nothing reconnected";
	EXPECT_EQ((uint32_t)kBrokers, ns.conns_used);
	for (const Part &x : parts_) {
		const km_fetcher_stats *o = km_fetcher_get_stats(x.f.get());
		EXPECT_EQ(0u, o->errors[KM_FETCHER_ERR_DISCONNECT]) << Name(x);
		if (&x != &bad) {
			EXPECT_EQ(KM_FETCHER_MIRRORING,
				  km_fetcher_get_state(x.f.get()));
			EXPECT_EQ(0u, o->corrupt) << Name(x);
		}
	}
	ASSERT_NO_FATAL_FAILURE(StopAll());
	src.clear();
	for (Part &x : parts_) {
		if (&x != &bad)
			continue;
		src.clear();
		ASSERT_EQ("", rawkafka::fetch_all(c, x.topic, x.partition, 0,
						  1000, kTimeoutMs, &src));
		src.pop_back(); // the corrupt one, never written
		ASSERT_NO_FATAL_FAILURE(Compare(src, x.log));
	}
}

} // namespace
