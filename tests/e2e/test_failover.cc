/* Failover (R4) end to end: kmirrord A serves a writable topic, kmirrord B
 * mirrors it; `kmirrorctl stop` on B cuts, writes the MIRROR_PID_RESET
 * barrier naming A's cluster id, and opens B for writes. Real librdkafka
 * producers and consumers on both sides. */
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <regex>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"
#include "tests/support/test_hooks.h"

using namespace kmtest;

namespace {

constexpr int kParts = 2;

TEST(Failover, StopWritesTheBarrierAndOpensForIdempotentProducers)
{
	TempDir ta("km-fo-a"), tb("km-fo-b");
	Daemon a(ta.path(), { "local.topics=t:2" });
	ASSERT_EQ("", a.start());
	for (int p = 0; p < kParts; p++)
		ASSERT_EQ("", produce(a.bootstrap(), idempotent("t", p, 300, p)));

	Daemon b(tb.path(), { "source.bootstrap.servers=" + a.bootstrap(),
			      "topics=t" });
	ASSERT_EQ("", b.start());
	ASSERT_EQ("", b.wait_status(
			      [](const std::map<std::string, PartStatus> &st) {
				      return st.size() == kParts &&
					     st.at("t:0").hw == 300 &&
					     st.at("t:1").hw == 300;
			      },
			      60000));

	ChildResult r;
	ASSERT_EQ("", ctl(b, { "stop", "--all", "--json" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\"barrier_offset\":300")) << r.out;

	/* The barrier names A's cluster id, right after A's data. */
	std::string a_id = cluster_id_of(ta.path());
	ASSERT_FALSE(a_id.empty());
	for (int p = 0; p < kParts; p++) {
		std::string text = dump(tb.path() + "/t-" + std::to_string(p) +
					"/00000000000000000000.log");
		EXPECT_NE(std::string::npos,
			  text.find("MirrorPidReset {\"version\":0,\"sourceClusterId\":\"" +
				    a_id + "\"}"))
			<< text.substr(text.size() > 2000 ? text.size() - 2000 : 0);
		EXPECT_NE(std::string::npos,
			  text.find("baseOffset: 300 lastOffset: 300 count: 1 "
				    "baseSequence: -1 lastSequence: -1 producerId: -1"));
	}
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", b.status(&st));
	EXPECT_EQ("STOPPED", st["t:0"].state);
	EXPECT_EQ(301, st["t:0"].leo);

	/* B now takes idempotent producers; a read_committed consumer sees A's
	 * data at A's offsets, then B's own after the barrier. */
	for (int p = 0; p < kParts; p++)
		ASSERT_EQ("", produce(b.bootstrap(), idempotent("t", p, 100, 10 + p)));
	/* A partition another worker owns shows the front-end its LSO as
	 * published on the owner's tick: wait for it before reading to the
	 * end (read_committed stops at the LSO). */
	ASSERT_EQ("", b.wait_status(
			      [](const std::map<std::string, PartStatus> &s) {
				      return s.at("t:0").lso == 401 &&
					     s.at("t:1").lso == 401;
			      },
			      10000));
	for (int p = 0; p < kParts; p++) {
		std::vector<Message> got, src;
		ConsumeSpec cs;
		cs.topic = "t";
		cs.partition = p;
		cs.read_committed = true;
		ASSERT_EQ("", consume(b.bootstrap(), cs, &got));
		ASSERT_EQ("", consume(a.bootstrap(), cs, &src));
		ASSERT_EQ(400u, got.size());
		for (size_t i = 0; i < 300; i++) {
			EXPECT_EQ(src[i].offset, got[i].offset);
			EXPECT_EQ(src[i].value, got[i].value);
		}
		for (size_t i = 300; i < 400; i++) {
			EXPECT_EQ((int64_t)i + 1, got[i].offset) << "after the barrier";
			EXPECT_EQ(payload_value(10 + p, p, (int64_t)i - 300, 100),
				  got[i].value);
		}
		/* Mirrored ids stay mapped; B's own producer has a fresh,
		 * positive id from B's first block. */
		for (int64_t id : pids_in(dump(tb.path() + "/t-" + std::to_string(p) +
					       "/00000000000000000000.log")))
			EXPECT_TRUE(id <= -1 || (id >= 0 && id < 2000)) << id;
	}

	/* A restart without the source (it is gone after a failover): B
	 * serves and takes writes at once, still STOPPED. */
	ChildResult res;
	ASSERT_EQ("", a.stop(30000, &res));
	ASSERT_EQ("", b.stop(30000, &res));
	ASSERT_EQ(0, res.exit_code) << res.describe();
	ASSERT_EQ("", b.start());
	st.clear();
	ASSERT_EQ("", b.status(&st));
	EXPECT_EQ("STOPPED", st["t:1"].state);
	EXPECT_EQ(401, st["t:1"].leo);
	ASSERT_EQ("", produce(b.bootstrap(), idempotent("t", 1, 50, 20)));
	/* status figures are published on the worker's tick */
	EXPECT_EQ("", b.wait_status(
			      [](const std::map<std::string, PartStatus> &s) {
				      return s.at("t:1").leo == 451;
			      },
			      10000));

	/* A second stop is refused with the reason. */
	EXPECT_NE("", ctl(b, { "stop", "t:0" }, &r));
	EXPECT_NE(std::string::npos, r.err.find("only a mirroring partition")) << r.err;
}

} // namespace

namespace {

/* Both stop modes with transactions open at the cut. librdkafka's mock
 * writes no transaction markers, so a transactional producer's batches
 * stay open on the mirror: exactly the hanging transactions a failover
 * must settle. */
TEST(Failover, StopModesSettleOpenTransactions)
{
	MockCluster mock(1);
	ASSERT_EQ("", mock.error());
	ASSERT_EQ("", mock.create_topic("x", 2));
	for (int p = 0; p < 2; p++) {
		ProduceSpec plain;
		plain.topic = "x";
		plain.partition = p;
		plain.count = 50;
		plain.flush_every = 10;
		ASSERT_EQ("", produce(mock.bootstrap(), plain));
		ProduceSpec txn = plain;
		txn.count = 30;
		txn.first_seq = 50;
		txn.mode = ProducerMode::kTransactional;
		txn.txn_size = 10;
		txn.transactional_id = "fo-txn-" + std::to_string(p);
		ASSERT_EQ("", produce(mock.bootstrap(), txn));
	}
	TempDir tb("km-fo-txn");
	Daemon b(tb.path(), { "source.bootstrap.servers=" + mock.bootstrap(),
			      "topics=x" });
	ASSERT_EQ("", b.start());
	ASSERT_EQ("", b.wait_status(
			      [](const std::map<std::string, PartStatus> &st) {
				      /* The LSO is bounded by the HW (durable):
				       * wait for both partitions' HW. */
				      return st.size() == 2 && st.at("x:0").leo == 80 &&
					     st.at("x:0").hw == 80 &&
					     st.at("x:1").leo == 80 &&
					     st.at("x:1").hw == 80;
			      },
			      60000));
	std::map<std::string, PartStatus> st;
	ASSERT_EQ("", b.status(&st));
	EXPECT_EQ(50, st["x:0"].lso) << "the mirrored transaction is open";

	/* truncate: back to the first open transaction's start. */
	ChildResult r;
	ASSERT_EQ("", ctl(b, { "stop", "x:0", "--json" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\"removed_records\":30")) << r.out;
	EXPECT_NE(std::string::npos, r.out.find("\"barrier_offset\":50")) << r.out;
	/* abort: everything kept, one ABORT marker, then the barrier. */
	ASSERT_EQ("", ctl(b, { "stop", "x:1", "--mode", "abort", "--json" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\"aborted\":1")) << r.out;
	EXPECT_NE(std::string::npos, r.out.find("\"barrier_offset\":81")) << r.out;

	st.clear();
	ASSERT_EQ("", b.status(&st));
	EXPECT_EQ(51, st["x:0"].leo);
	EXPECT_EQ(82, st["x:1"].leo);
	for (auto k : { "x:0", "x:1" }) {
		EXPECT_EQ(st[k].leo, st[k].lso) << k << ": no transaction hangs";
		EXPECT_EQ("STOPPED", st[k].state);
	}
	std::string text = dump(tb.path() + "/x-1/00000000000000000000.log");
	EXPECT_NE(std::string::npos, text.find("endTxnMarker: ABORT")) << text;
	for (int p = 0; p < 2; p++) {
		std::vector<Message> got;
		ConsumeSpec cs;
		cs.topic = "x";
		cs.partition = p;
		cs.read_committed = true;
		ASSERT_EQ("", consume(b.bootstrap(), cs, &got));
		ASSERT_EQ(50u, got.size()) << "read_committed never sees aborted data";
		for (size_t i = 0; i < got.size(); i++)
			EXPECT_EQ((int64_t)i, got[i].offset);
	}
}

} // namespace

namespace {

int count_of(const std::string &text, const std::string &what)
{
	int n = 0;

	for (size_t at = text.find(what); at != std::string::npos;
	     at = text.find(what, at + 1))
		n++;
	return n;
}

/* kill -9 in each step of STOPPING (KMIRROR_TEST_CRASH), restart: the stop
 * completes with exactly one barrier, and the partition is writable. */
TEST(Failover, CrashInEachStopStepResumesWithOneBarrier)
{
	KM_NEEDS_TEST_HOOKS();
	TempDir ta("km-fo-crash-a");
	Daemon a(ta.path(), { "local.topics=c:1" });
	ASSERT_EQ("", a.start());
	ASSERT_EQ("", produce(a.bootstrap(), idempotent("c", 0, 120, 3)));

	for (const char *point : { "stop-after-stopping", "stop-after-cut",
				   "stop-after-barrier", "stop-after-stopped" }) {
		SCOPED_TRACE(point);
		TempDir tb("km-fo-crash-b");
		Daemon b(tb.path(), { "source.bootstrap.servers=" + a.bootstrap(),
				      "topics=c" });
		b.set_env({ std::string("KMIRROR_TEST_CRASH=") + point });
		ASSERT_EQ("", b.start());
		ASSERT_EQ("", b.wait_status(
				      [](const std::map<std::string, PartStatus> &st) {
					      return st.count("c:0") && st.at("c:0").hw == 120;
				      },
				      60000));
		ChildResult r, res;
		EXPECT_NE("", ctl(b, { "stop", "--all" }, &r)) << "it must die";
		ASSERT_EQ("", b.child().wait(20000, &res));
		EXPECT_EQ(SIGKILL, res.signal) << res.describe();

		b.set_env({});
		ASSERT_EQ("", b.start());
		std::map<std::string, PartStatus> st;
		ASSERT_EQ("", b.status(&st));
		EXPECT_EQ("STOPPED", st["c:0"].state);
		EXPECT_EQ(121, st["c:0"].leo);
		std::string text = dump(tb.path() + "/c-0/00000000000000000000.log");
		EXPECT_EQ(1, count_of(text, "MirrorPidReset")) << text;
		ASSERT_EQ("", produce(b.bootstrap(), idempotent("c", 0, 10, 4)));
		/* status figures are published on the worker's tick */
		EXPECT_EQ("", b.wait_status(
				      [](const std::map<std::string, PartStatus> &s) {
					      return s.at("c:0").leo == 131;
				      },
				      10000));
		ASSERT_EQ("", b.stop(30000, &res));
	}
}

} // namespace

namespace {

/* What C shows of its partition c-0 once it holds B's 400 records. */
struct ChainResult {
	std::string error; /* "" if the chain ran */
	int64_t sequence_gaps = -1, epoch_regressions = -1, barriers = -1;
	std::string dump; /* kmirror-dump-log --deep of C's segment */
	std::string log;  /* C's log lines, for the failure message */
};

/* One partition's value of a metric in `kmirrorctl metrics`, or -1. */
int64_t part_metric(const Daemon &d, const std::string &name,
		    const std::string &topic, int partition)
{
	ChildResult r;
	if (!ctl(d, { "metrics" }, &r).empty())
		return -1;
	std::smatch m;
	std::regex re(name + "\\{topic=\"" + topic + "\",partition=\"" +
		      std::to_string(partition) + "\"\\} ([0-9]+)");
	return std::regex_search(r.out, m, re) ? std::stoll(m[1]) : -1;
}

/* The seed's collision case over a chain A -> B -> C: B fails over while C
 * keeps mirroring B. A's first producer and B's first local producer both
 * get raw id 0, so on C both are -2. With the barrier C forgets A's
 * producer before B's appears; without it (test switch) C's producer state
 * takes B's producer for A's and counts the sequence break. */
ChainResult run_chain(bool barrier)
{
	ChainResult out;
	TempDir ta("km-ch-a"), tb("km-ch-b"), tc("km-ch-c");
	Daemon a(ta.path(), { "local.topics=c:1" });
	auto fail = [&](std::string e) {
		out.error = e;
		return out;
	};
	if (std::string e = a.start(); !e.empty())
		return fail("A: " + e);
	if (std::string e = produce(a.bootstrap(), idempotent("c", 0, 300, 1)); !e.empty())
		return fail("produce A: " + e);
	Daemon b(tb.path(), { "source.bootstrap.servers=" + a.bootstrap(), "topics=c" });
	if (!barrier)
		b.set_env({ "KMIRROR_TEST_NO_BARRIER=1" });
	if (std::string e = b.start(); !e.empty())
		return fail("B: " + e);
	Daemon c(tc.path(), { "source.bootstrap.servers=" + b.bootstrap(), "topics=c" });
	if (std::string e = c.start(); !e.empty())
		return fail("C: " + e);
	auto at = [](int64_t end) {
		return [end](const std::map<std::string, PartStatus> &st) {
			return st.count("c:0") && st.at("c:0").hw == end;
		};
	};
	if (std::string e = c.wait_status(at(300), 60000); !e.empty())
		return fail("C catching up: " + e);
	ChildResult r;
	if (std::string e = ctl(b, { "stop", "--all" }, &r); !e.empty())
		return fail("stop B: " + e);
	if (std::string e = produce(b.bootstrap(), idempotent("c", 0, 100, 2)); !e.empty())
		return fail("produce B: " + e);
	int64_t end = barrier ? 401 : 400;
	if (std::string e = c.wait_status(at(end), 60000); !e.empty())
		return fail("C after the failover: " + e);

	/* C holds B's log byte for byte, offsets included. */
	std::vector<Message> mb, mc;
	ConsumeSpec cs;
	cs.topic = "c";
	if (std::string e = consume(b.bootstrap(), cs, &mb); !e.empty())
		return fail(e);
	if (std::string e = consume(c.bootstrap(), cs, &mc); !e.empty())
		return fail(e);
	if (mb.size() != 400 || mc.size() != 400)
		return fail("400 messages expected on B and C");
	for (size_t i = 0; i < mb.size(); i++)
		if (mb[i].offset != mc[i].offset || mb[i].value != mc[i].value)
			return fail("C differs from B at " + std::to_string(i));
	/* Published with hw on the worker's tick: they cover offset end. */
	out.sequence_gaps = part_metric(c, "kmirror_partition_producer_sequence_gaps_total", "c", 0);
	out.epoch_regressions = part_metric(c, "kmirror_partition_producer_epoch_regressions_total", "c", 0);
	out.barriers = part_metric(c, "kmirror_partition_barriers_applied_total", "c", 0);
	out.dump = dump(tc.path() + "/c-0/00000000000000000000.log");
	ChildResult res;
	c.stop(30000, &res);
	out.log = res.err;
	return out;
}

/* C's producer state took the barrier and saw no anomaly; the barrier is
 * in C's log at offset 300. */
TEST(Chain, BarrierKeepsCollidingProducersApartDownstream)
{
	ChainResult r = run_chain(true);
	ASSERT_EQ("", r.error);
	EXPECT_EQ(1, r.barriers) << r.log;
	EXPECT_EQ(0, r.sequence_gaps) << r.log;
	EXPECT_EQ(0, r.epoch_regressions) << r.log;
	EXPECT_EQ(1, count_of(r.dump, "MirrorPidReset")) << r.dump;
	EXPECT_NE(std::string::npos,
		  r.dump.find("baseOffset: 300 lastOffset: 300 count: 1"))
		<< r.dump;
}

TEST(Chain, WithoutTheBarrierDownstreamStateIsCorrupted)
{
	KM_NEEDS_TEST_HOOKS();
	ChainResult r = run_chain(false);
	ASSERT_EQ("", r.error);
	/* B's new producer (raw id 0, -2 on C) lands on the state of A's
	 * producer (also -2): its sequence 0 follows A's 299, one gap. */
	EXPECT_EQ(1, r.sequence_gaps) << r.log;
	EXPECT_EQ(0, r.barriers) << r.log;
	EXPECT_EQ(0, count_of(r.dump, "MirrorPidReset")) << r.dump;
}

} // namespace
