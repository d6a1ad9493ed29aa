/* Failback (R5) end to end. A is the primary (a writable topic), B mirrors
 * it and fails over; A, back, mirrors B's log: it asks B (KmirrorBarrier,
 * kmirror's own API on B's Kafka port) for the latest barrier naming A's
 * cluster id, cuts its own log there (the writes A took after B's failover
 * go, and are reported), copies B's barrier and B's new data, then stops
 * again and takes local writes. Offsets are identical on A and B at every
 * step; a common point below A's log start (A's retention deleted it)
 * restarts A's log there. Real librdkafka producers and consumers. */
#include <signal.h>

#include <functional>
#include <memory>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"
#include "tests/support/test_hooks.h"

using namespace kmtest;

namespace {

using StatusMap = std::map<std::string, PartStatus>;

std::function<bool(const StatusMap &)> at(const char *key, int64_t hw)
{
	return [key, hw](const StatusMap &st) {
		return st.count(key) && st.at(key).hw == hw;
	};
}

std::vector<Message> read_all(const Daemon &d, int64_t from = 0)
{
	std::vector<Message> got;
	ConsumeSpec cs;
	cs.topic = "t";
	cs.partition = 0;
	cs.from = from;
	EXPECT_EQ("", consume(d.bootstrap(), cs, &got));
	return got;
}

/* Same offsets, same bytes. */
void expect_same(const Daemon &x, const Daemon &y, size_t n)
{
	std::vector<Message> a = read_all(x), b = read_all(y);

	ASSERT_EQ(n, a.size());
	ASSERT_EQ(n, b.size());
	for (size_t i = 0; i < n; i++) {
		EXPECT_EQ(a[i].offset, b[i].offset) << i;
		EXPECT_EQ(a[i].key, b[i].key) << i;
		EXPECT_EQ(a[i].value, b[i].value) << i;
	}
}

std::string barrier_line(int64_t offset)
{
	return "baseOffset: " + std::to_string(offset) + " lastOffset: " +
	       std::to_string(offset) + " count: 1 baseSequence: -1 "
	       "lastSequence: -1 producerId: -1";
}

bool has_barrier(const std::string &text, const std::string &cluster_id)
{
	return text.find("MirrorPidReset {\"version\":0,\"sourceClusterId\":\"" +
			 cluster_id + "\"}") != std::string::npos;
}

/* A (primary, t:1 writable) with 300 records, B mirroring it, stopped:
 * barrier at 300, then 100 of B's own (301..400). A took 50 more (300..349)
 * after B's failover: split brain, which the failback discards. */
struct Pair {
	TempDir ta{ "km-fb-a" }, tb{ "km-fb-b" };
	Daemon a;
	std::unique_ptr<Daemon> bp; /* its source is A's ephemeral port */
	std::string a_id, b_id;

	/* a_sets: more of A's keys. */
	explicit Pair(std::vector<std::string> a_sets = {})
		: a(ta.path(), with(std::move(a_sets), "local.topics=t:1"))
	{
	}
	static std::vector<std::string> with(std::vector<std::string> v,
					     const std::string &one)
	{
		v.push_back(one);
		return v;
	}

	Daemon &b() { return *bp; }

	std::string set_up()
	{
		ChildResult r;
		if (std::string e = a.start(); !e.empty())
			return "A: " + e;
		if (std::string e = produce(a.bootstrap(), idempotent("t", 0, 300, 1));
		    !e.empty())
			return "produce A: " + e;
		bp = std::make_unique<Daemon>(
			tb.path(), std::vector<std::string>{
					   "source.bootstrap.servers=" + a.bootstrap(),
					   "topics=t" });
		if (std::string e = b().start(); !e.empty())
			return "B: " + e;
		if (std::string e = b().wait_status(at("t:0", 300), 60000); !e.empty())
			return "B catching up: " + e;
		if (std::string e = ctl(b(), { "stop", "--all" }, &r); !e.empty())
			return "stop B: " + e;
		if (std::string e = produce(b().bootstrap(), idempotent("t", 0, 100, 2));
		    !e.empty())
			return "produce B: " + e;
		if (std::string e = produce(a.bootstrap(), idempotent("t", 0, 50, 3));
		    !e.empty())
			return "produce A after the failover: " + e;
		a_id = cluster_id_of(ta.path());
		b_id = cluster_id_of(tb.path());
		return a_id.empty() || b_id.empty() ? "no cluster ids" : "";
	}
};

TEST(Failback, MirrorsBackFromTheBarrierThenStopsAgain)
{
	Pair p;
	ASSERT_EQ("", p.set_up());
	ChildResult r;

	/* B answers where A's and B's logs part: its barrier for A's id. */
	ASSERT_EQ("", ctl(p.a, { "failback", "t:0", "--source", p.b().bootstrap(),
				 "--json" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\"truncated_to\":300")) << r.out;
	EXPECT_NE(std::string::npos, r.out.find("\"removed_records\":50")) << r.out;
	ASSERT_EQ("", p.a.wait_status(at("t:0", 401), 60000));
	StatusMap st;
	ASSERT_EQ("", p.a.status(&st));
	EXPECT_EQ("MIRRORING", st["t:0"].state);
	expect_same(p.a, p.b(), 400);

	/* A copied B's barrier (naming A) at B's offset; B's producer ids are
	 * mapped on A. Writes are refused while A mirrors. */
	std::string text = dump(p.ta.path() + "/t-0/00000000000000000000.log");
	EXPECT_TRUE(has_barrier(text, p.a_id)) << text.substr(0, 3000);
	EXPECT_NE(std::string::npos, text.find(barrier_line(300)));
	EXPECT_NE("", produce(p.a.bootstrap(), idempotent("t", 0, 1, 4)));

	/* A stops again: its barrier names B, after B's data; A's idempotent
	 * producers write again, at the offsets after it. */
	ASSERT_EQ("", ctl(p.a, { "stop", "t:0", "--json" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\"barrier_offset\":401")) << r.out;
	ASSERT_EQ("", produce(p.a.bootstrap(), idempotent("t", 0, 20, 5)));
	ASSERT_EQ("", p.a.wait_status(at("t:0", 422), 10000));
	text = dump(p.ta.path() + "/t-0/00000000000000000000.log");
	EXPECT_TRUE(has_barrier(text, p.b_id));
	EXPECT_NE(std::string::npos, text.find(barrier_line(401)));
	std::vector<Message> got = read_all(p.a);
	ASSERT_EQ(420u, got.size());
	EXPECT_EQ(402, got[400].offset);
	EXPECT_EQ(payload_value(5, 0, 0, 100), got[400].value);

	/* After a restart A is still STOPPED and writable, B's barrier and
	 * data intact. */
	ChildResult res;
	ASSERT_EQ("", p.a.stop(30000, &res));
	ASSERT_EQ("", p.a.start());
	st.clear();
	ASSERT_EQ("", p.a.status(&st));
	EXPECT_EQ("STOPPED", st["t:0"].state);
	EXPECT_EQ(422, st["t:0"].leo);
}

/* Refusals name their reason, and change nothing. */
TEST(Failback, RefusesWithoutACommonHistory)
{
	Pair p;
	ASSERT_EQ("", p.set_up());
	ChildResult r;

	/* A plain Kafka source cannot say where the logs part. */
	MockCluster mock(1);
	ASSERT_EQ("", mock.error());
	EXPECT_NE("", ctl(p.a, { "failback", "t:0", "--source",
				 mock.bootstrap() }, &r));
	EXPECT_NE(std::string::npos, r.err.find("not a kmirror host")) << r.err;
	EXPECT_NE(std::string::npos, r.err.find("--truncate-to")) << r.err;

	/* B holds no barrier for B's own id: asked from B's side about A,
	 * A never mirrored from B. */
	EXPECT_NE("", ctl(p.b(), { "failback", "t:0", "--source", p.a.bootstrap() },
			  &r));
	EXPECT_NE(std::string::npos, r.err.find("holds no MIRROR_PID_RESET barrier"))
		<< r.err;

	/* A has no configured source: start needs failback --source. */
	EXPECT_NE("", ctl(p.a, { "start", "t:0" }, &r));
	EXPECT_NE(std::string::npos, r.err.find("no source")) << r.err;

	/* Nothing changed: both still take writes at their own offsets. */
	StatusMap sa, sb;
	ASSERT_EQ("", p.a.status(&sa));
	ASSERT_EQ("", p.b().status(&sb));
	EXPECT_EQ(350, sa["t:0"].leo);
	EXPECT_EQ("STOPPED", sb["t:0"].state);
	EXPECT_EQ(401, sb["t:0"].leo);
	ASSERT_EQ("", produce(p.a.bootstrap(), idempotent("t", 0, 5, 6)));

	/* The operator's cut: --truncate-to keeps A's log below 250 (A's own
	 * records, which B holds too) and mirrors B from there. */
	ASSERT_EQ("", ctl(p.a, { "failback", "t:0", "--source", p.b().bootstrap(),
				 "--truncate-to", "250", "--json" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\"removed_records\":105")) << r.out;
	ASSERT_EQ("", p.a.wait_status(at("t:0", 401), 60000));
	expect_same(p.a, p.b(), 400);

	/* --from-start: A, stopped again, empties its log and copies B
	 * from B's first offset. */
	ASSERT_EQ("", ctl(p.a, { "stop", "t:0" }, &r));
	ASSERT_EQ("", ctl(p.a, { "failback", "t:0", "--source", p.b().bootstrap(),
				 "--from-start", "--json" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\"removed_records\":402")) << r.out;
	ASSERT_EQ("", p.a.wait_status(at("t:0", 401), 60000));
	expect_same(p.a, p.b(), 400);
}

/* The common point (B's barrier, 300) is below A's log start: A's
 * retention deleted it while A took split-brain writes. The cut then
 * empties A's log and restarts it at 300 (Kafka's truncateFullyAndStartAt),
 * so that A copies B's barrier and data at B's offsets; a log left starting
 * at its old start would be ahead of B's, or missing [300, start). */
TEST(Failback, CommonPointBelowOurLogStartRestartsTheLogThere)
{
	Pair p({ "segment.bytes=16384", "topic.retention.bytes=t:65536" });
	ASSERT_EQ("", p.set_up());
	ProduceSpec more = idempotent("t", 0, 2000, 7);
	more.value_size = 1000;
	ASSERT_EQ("", produce(p.a.bootstrap(), more));
	ASSERT_EQ("", p.a.wait_status([](const StatusMap &st) {
		return st.count("t:0") && st.at("t:0").leo == 2350 &&
		       st.at("t:0").log_start > 401;
	}, 30000)) << "A's retention did not pass the common point";

	ChildResult r;
	ASSERT_EQ("", ctl(p.a, { "failback", "t:0", "--source", p.b().bootstrap(),
				 "--json" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\"truncated_to\":300")) << r.out;
	/* Everything from A's log start (which retention may still move)
	 * to its end. */
	size_t at_removed = r.out.find("\"removed_records\":");
	ASSERT_NE(std::string::npos, at_removed) << r.out;
	int64_t removed = std::stoll(r.out.substr(at_removed + 18));
	EXPECT_GT(removed, 0) << r.out;
	EXPECT_LT(removed, 2350 - 401) << r.out;
	ASSERT_EQ("", p.a.wait_status(at("t:0", 401), 30000));
	StatusMap st;
	ASSERT_EQ("", p.a.status(&st));
	EXPECT_EQ("MIRRORING", st["t:0"].state);
	EXPECT_EQ(300, st["t:0"].log_start);

	/* B's barrier (naming A) first, at 300, then B's 100 records at B's
	 * offsets, byte for byte. */
	std::string text = dump(p.ta.path() + "/t-0/00000000000000000300.log");
	EXPECT_NE(std::string::npos, text.find(barrier_line(300))) << text.substr(0, 2000);
	EXPECT_TRUE(has_barrier(text, p.a_id));
	std::vector<Message> a = read_all(p.a, 300), b = read_all(p.b());
	ASSERT_EQ(100u, a.size());
	ASSERT_EQ(400u, b.size());
	for (size_t i = 0; i < 100; i++) {
		EXPECT_EQ(b[300 + i].offset, a[i].offset) << i;
		EXPECT_EQ(b[300 + i].value, a[i].value) << i;
	}
	EXPECT_EQ(301, a[0].offset);
}

/* kill -9 after PREPARING is persisted and after the cut: the restart cuts
 * (again: idempotent) and mirrors, with one barrier from B, no other. */
TEST(Failback, CrashWhilePreparingResumes)
{
	KM_NEEDS_TEST_HOOKS();
	for (const char *point : { "prepare-after-preparing", "prepare-after-cut" }) {
		SCOPED_TRACE(point);
		Pair p;
		ASSERT_EQ("", p.set_up());
		ChildResult r, res;
		ASSERT_EQ("", p.a.stop(30000, &res));
		p.a.set_env({ std::string("KMIRROR_TEST_CRASH=") + point });
		ASSERT_EQ("", p.a.start());
		EXPECT_NE("", ctl(p.a, { "failback", "t:0", "--source",
					 p.b().bootstrap() }, &r)) << "it must die";
		ASSERT_EQ("", p.a.child().wait(20000, &res));
		EXPECT_EQ(SIGKILL, res.signal) << res.describe();
		p.a.set_env({});
		ASSERT_EQ("", p.a.start());
		ASSERT_EQ("", p.a.wait_status(at("t:0", 401), 60000));
		expect_same(p.a, p.b(), 400);
		std::string text = dump(p.ta.path() + "/t-0/00000000000000000000.log");
		size_t n = 0;
		for (size_t pos = 0; (pos = text.find("MirrorPidReset", pos)) !=
				     std::string::npos; pos++)
			n++;
		EXPECT_EQ(1u, n) << text.substr(0, 3000);
	}
}

} // namespace
