/* Goal (issue 20, phase 2a): the transaction coordinator's state survives
 * kill -9 of kmirrord. A transaction over three partitions, killed at each
 * step of its commit (KMIRROR_TEST_CRASH: its PrepareCommit record durable;
 * the first of its markers durable; every marker durable but not the
 * CompleteCommit record), is committed on every partition after the
 * restart (a commit that was prepared must complete), never half; a
 * transaction left open across a kill keeps its timeout and is aborted on
 * every partition when it expires; in both, a new producer with the same
 * transactional.id works afterwards and the old one is fenced.
 * Method: kmirrord as a child process with local.topics=tx:3, librdkafka
 * 2.0.2's transactions API as the producers, librdkafka consumers at both
 * isolation levels. A transaction is decided when every partition's LSO
 * reached its log end (kmirrorctl status, polled with a deadline); what a
 * consumer must read is derived from the values the producer sent and
 * which transaction committed, never written down. */
#include <signal.h>

#include <librdkafka/rdkafka.h>

#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"
#include "tests/support/test_hooks.h"

using namespace kmtest;

namespace {

constexpr int kParts = 3;
constexpr int kPerPart = 4;
constexpr int kTimeoutMs = 5000; /* the open transaction's */

// A transactional librdkafka producer; errors as text ("" for none).
class Txn {
public:
	~Txn()
	{
		if (rk_)
			rd_kafka_destroy(rk_);
	}
	std::string Create(const std::string &bootstrap, const std::string &id,
			   int txn_timeout_ms = 60000)
	{
		std::string err;
		const std::string t = std::to_string(txn_timeout_ms);
		rk_ = client_new(RD_KAFKA_PRODUCER,
				 { { "bootstrap.servers", bootstrap },
				   { "transactional.id", id },
				   { "linger.ms", "5" },
				   { "transaction.timeout.ms", t },
				   { "message.timeout.ms", t } },
				 &err);
		return rk_ ? Check(rd_kafka_init_transactions(rk_, 30000)) : err;
	}
	std::string Begin() { return Check(rd_kafka_begin_transaction(rk_)); }
	std::string Send(int32_t partition, const std::string &value)
	{
		rd_kafka_resp_err_t e = rd_kafka_producev(
			rk_, RD_KAFKA_V_TOPIC("tx"),
			RD_KAFKA_V_PARTITION(partition),
			RD_KAFKA_V_VALUE((void *)value.data(), value.size()),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
		return e ? rd_kafka_err2str(e) : "";
	}
	std::string Flush()
	{
		return rd_kafka_flush(rk_, 30000) ? "flush timed out" : "";
	}
	std::string Commit(int timeout_ms = 30000)
	{
		return Check(rd_kafka_commit_transaction(rk_, timeout_ms));
	}
	bool fatal_ = false;

private:
	std::string Check(rd_kafka_error_t *e)
	{
		if (e == nullptr)
			return "";
		std::string s = rd_kafka_error_string(e);
		fatal_ = fatal_ || rd_kafka_error_is_fatal(e);
		rd_kafka_error_destroy(e);
		return s;
	}
	rd_kafka_t *rk_ = nullptr;
};

// kPerPart values of transaction `name` on every partition, sent.
std::string SendAll(Txn &p, const std::string &name,
		    std::vector<std::set<std::string>> *sent)
{
	std::string err = p.Begin();
	for (int part = 0; err.empty() && part < kParts; part++)
		for (int i = 0; err.empty() && i < kPerPart; i++) {
			std::string v = name + "-" + std::to_string(part) +
					"-" + std::to_string(i);
			err = p.Send(part, v);
			(*sent)[part].insert(v);
		}
	return err.empty() ? p.Flush() : err;
}

// Every partition decided: no open transaction holds its LSO back.
std::string WaitDecided(Daemon &d, int timeout_ms)
{
	return d.wait_status(
		[](const std::map<std::string, PartStatus> &st) {
			for (int p = 0; p < kParts; p++) {
				auto it = st.find("tx:" + std::to_string(p));
				if (it == st.end() || it->second.leo <= 0 ||
				    it->second.lso != it->second.leo ||
				    it->second.hw != it->second.leo)
					return false;
			}
			return true;
		},
		timeout_ms);
}

// The values of one partition up to its log end at an isolation level.
std::set<std::string> Read(Daemon &d, int32_t part, bool committed)
{
	ConsumeSpec s;
	s.topic = "tx";
	s.partition = part;
	s.read_committed = committed;
	std::vector<Message> out;
	EXPECT_EQ("", consume(d.bootstrap(), s, &out)) << part;
	std::set<std::string> v;
	for (const Message &m : out)
		if (m.value)
			v.insert(*m.value);
	return v;
}

// After a restart: a new instance with the same id fences the old, and
// its own transaction commits. Adds its values to *want.
void NewInstanceWorksOldIsFenced(Daemon &d, const std::string &id, Txn &old,
				 std::vector<std::set<std::string>> *want)
{
	Txn fresh;
	ASSERT_EQ("", fresh.Create(d.bootstrap(), id));
	ASSERT_EQ("", SendAll(fresh, id + "-after", want));
	ASSERT_EQ("", fresh.Commit());
	// The old instance's retried commit, or anything it does, is refused
	// under its older epoch.
	std::string err = old.Commit(10000);
	EXPECT_NE("", err) << "the old instance was not fenced";
	EXPECT_TRUE(old.fatal_) << err;
}

// The listener d had, for a restart the old clients find again.
std::string Listener(const Daemon &d)
{
	return "listeners=127.0.0.1:" + std::to_string(d.port());
}

class TxnLog : public ::testing::Test {
protected:
	void SetUp() override { ASSERT_EQ("", dir_.error()); }
	TempDir dir_{ "km-txnlog" };
};

// kill -9 at a step of a commit (the parameter): the prepared commit
// completes on every partition after the restart.
class TxnLogCrash : public ::testing::TestWithParam<const char *> {};

TEST_P(TxnLogCrash, ACommitKilledHereCompletesOnEveryPartition)
{
	KM_NEEDS_TEST_HOOKS();
	const char *point = GetParam();
	TempDir dir("km-txnlog-crash");
	ASSERT_EQ("", dir.error());
	Daemon d(dir.path(), { "local.topics=tx:3" });
	const std::string id = std::string("app-") + point;
	std::vector<std::set<std::string>> sent(kParts);

	d.set_env({ std::string("KMIRROR_TEST_CRASH=") + point });
	ASSERT_EQ("", d.start());
	Txn p;
	ASSERT_EQ("", p.Create(d.bootstrap(), id));
	ASSERT_EQ("", SendAll(p, id, &sent));
	EXPECT_NE("", p.Commit(3000)) << "kmirrord must die in it";
	ChildResult res;
	ASSERT_EQ("", d.child().wait(20000, &res));
	ASSERT_EQ(SIGKILL, res.signal) << res.describe();

	// On the same port: the old instance comes back to be fenced.
	Daemon d2(dir.path(), { "local.topics=tx:3", Listener(d) });
	ASSERT_EQ("", d2.start());
	ASSERT_EQ("", WaitDecided(d2, 30000));
	for (int part = 0; part < kParts; part++) {
		EXPECT_EQ(sent[part], Read(d2, part, true)) << part;
		EXPECT_EQ(sent[part], Read(d2, part, false)) << part;
	}
	ASSERT_NO_FATAL_FAILURE(NewInstanceWorksOldIsFenced(d2, id, p, &sent));
	ASSERT_EQ("", WaitDecided(d2, 30000));
	for (int part = 0; part < kParts; part++)
		EXPECT_EQ(sent[part], Read(d2, part, true)) << part;
	ASSERT_EQ("", d2.stop(30000, &res));
}

INSTANTIATE_TEST_SUITE_P(Steps, TxnLogCrash,
			 ::testing::Values("txn-after-prepare",
					   "txn-after-first-marker",
					   "txn-after-markers"),
			 [](const ::testing::TestParamInfo<const char *> &i) {
				 std::string n = i.param;
				 for (char &c : n)
					 c = c == '-' ? '_' : c;
				 return n;
			 });

// An open transaction across kill -9 keeps its timeout: aborted on every
// partition once it expires, its records on disk and never committed.
TEST_F(TxnLog, AnOpenTransactionAcrossAKillTimesOutAndAborts)
{
	Daemon d(dir_.path(), { "local.topics=tx:3" });
	std::vector<std::set<std::string>> sent(kParts), after(kParts);

	ASSERT_EQ("", d.start());
	Txn p;
	ASSERT_EQ("", p.Create(d.bootstrap(), "app-open", kTimeoutMs));
	// Its start is after this: the first AddPartitionsToTxn.
	const int64_t began_ms = now_ms();
	ASSERT_EQ("", SendAll(p, "open", &sent));
	ASSERT_EQ("", d.kill9());

	Daemon d2(dir_.path(), { "local.topics=tx:3", Listener(d) });
	ASSERT_EQ("", d2.start());
	ASSERT_EQ("", WaitDecided(d2, 30000));
	// Not aborted at once by the restart: its timeout ran on (the
	// coordinator's clock is the wall clock, this one monotonic: 100 ms
	// of slack).
	EXPECT_GE(now_ms() - began_ms, kTimeoutMs - 100);
	for (int part = 0; part < kParts; part++) {
		EXPECT_EQ(std::set<std::string>(), Read(d2, part, true)) << part;
		EXPECT_EQ(sent[part], Read(d2, part, false)) << part;
	}
	ASSERT_NO_FATAL_FAILURE(
		NewInstanceWorksOldIsFenced(d2, "app-open", p, &after));
	ASSERT_EQ("", WaitDecided(d2, 30000));
	for (int part = 0; part < kParts; part++)
		EXPECT_EQ(after[part], Read(d2, part, true)) << part;
	ChildResult res;
	ASSERT_EQ("", d2.stop(30000, &res));
}

} // namespace
