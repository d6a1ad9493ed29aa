/* Goal: what kmirrord acknowledged survives a power cut (issue 22 item 1):
 * the high watermark it published while mirroring, the stop's barrier once
 * the stop reported done, every Produce acked with acks=all after a stop,
 * committed group offsets, and a failback cut part way; after each cut the
 * log recovers cleanly, byte-equal to the source up to what was published.
 * Method: kmirrord's data.dir is on lossyfs (lossyfs.c), a FUSE filesystem
 * that keeps only what was fsync'd/fdatasync'd (and names whose directory
 * was fsync'd). A cut is kill -9 of kmirrord and SIGUSR1 to lossyfs, which
 * puts its backing directory back to what a disk would hold. The backing
 * directory is read with kmirror-dump-log before anything runs on it again
 * (so a re-fetch cannot hide a loss), then lossyfs is mounted on it again
 * and kmirrord restarted there. Sources are librdkafka's mock cluster and a
 * second kmirrord; clients are real librdkafka producers and consumers.
 * Every wait is a deadline on an observable condition. */
#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/powerloss/lossyfs.h"
#include "tests/support/kafka_peers.h"
#include "tests/support/test_hooks.h"

using namespace kmtest;

namespace {

constexpr int kWaitMs = 60000;
using StatusMap = std::map<std::string, PartStatus>;

size_t count_of(const std::string &text, const std::string &what)
{
	size_t n = 0;

	for (size_t at = text.find(what); at != std::string::npos;
	     at = text.find(what, at + 1))
		n++;
	return n;
}

std::string barrier_line(int64_t offset)
{
	return "baseOffset: " + std::to_string(offset) + " lastOffset: " +
	       std::to_string(offset) + " count: 1 baseSequence: -1 "
	       "lastSequence: -1 producerId: -1";
}

/* The .log segments of a partition directory as a disk holds them: the end
 * offset of the valid batches, contiguous from the first; a torn tail past
 * them is what recovery cuts. *why: a gap or a bad batch before the end. */
int64_t durable_end(const std::string &dir, std::string *why)
{
	std::string tail;
	std::vector<Dumped> b = dump_batches(dir, &tail);
	int64_t end = b.empty() ? 0 : b[0].base;

	why->clear();
	for (const Dumped &d : b) {
		if (!d.valid || d.base != end) {
			*why = "batch at " + std::to_string(d.base) +
			       (d.valid ? " after a gap" : " invalid") +
			       " in " + dir;
			return end;
		}
		end = d.last + 1;
	}
	return end;
}

/* Commit offsets for a group with a simple (memberless) commit: "" once
 * kmirrord acknowledged it. */
std::string commit_offsets(const std::string &bootstrap,
			   const std::string &group, const std::string &topic,
			   int64_t offset)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "group.id", group } },
				    &err);
	if (rk == nullptr)
		return err;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, topic.c_str(), 0)->offset = offset;
	rd_kafka_resp_err_t e = rd_kafka_commit(rk, l, 0);
	if (e == RD_KAFKA_RESP_ERR_NO_ERROR && l->elems[0].err)
		e = l->elems[0].err;
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_destroy(rk);
	return e ? std::string("commit: ") + rd_kafka_err2str(e) : "";
}

/* The group's committed offset of topic:0, -1 if none or not asked. */
int64_t committed(const std::string &bootstrap, const std::string &group,
		  const std::string &topic)
{
	std::string err;
	rd_kafka_t *rk = client_new(RD_KAFKA_CONSUMER,
				    { { "bootstrap.servers", bootstrap },
				      { "group.id", group } },
				    &err);
	int64_t off = -1;
	if (rk == nullptr)
		return -1;
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_topic_partition_list_add(l, topic.c_str(), 0);
	if (rd_kafka_committed(rk, l, 10000) == 0 && !l->elems[0].err)
		off = l->elems[0].offset;
	rd_kafka_topic_partition_list_destroy(l);
	rd_kafka_destroy(rk);
	return off;
}

std::vector<Message> read_range(const std::string &bootstrap,
				const std::string &topic, int64_t from,
				int64_t to)
{
	std::vector<Message> got;
	ConsumeSpec cs;
	cs.topic = topic;
	cs.from = from;
	cs.to = to;
	EXPECT_EQ("", consume(bootstrap, cs, &got)) << topic;
	return got;
}

/* One kmirrord on one lossyfs: the power cut takes both down. */
class Node {
public:
	Node(const char *name, std::vector<std::string> sets)
		: back_(std::string("km-pl-") + name),
		  mnt_(std::string("km-pl-mnt-") + name),
		  ctl_(std::string("km-pl-ctl-") + name),
		  fs_(back_.path(), mnt_.path() + "/m")
	{
		sets.push_back("data.dir=" + fs_.path());
		sets.push_back("control.socket=" + ctl_.path() + "/ctl.sock");
		/* Small segments: rolls (index seals, snapshots, new files
		 * and their directory fsync) happen between cuts. */
		sets.push_back("segment.bytes=16384");
		d_ = std::make_unique<Daemon>(fs_.path(), sets);
	}

	std::string up()
	{
		if (std::string e = fs_.mount(); !e.empty())
			return e;
		return d_->start();
	}
	/* kill -9 and the cut; what lossyfs reported is kept for messages. */
	std::string cut()
	{
		std::string rep;
		if (d_->child().running())
			if (std::string e = d_->kill9(); !e.empty())
				return "kill -9: " + e;
		if (std::string e = fs_.cut(&rep); !e.empty())
			return e;
		cuts_ += rep;
		return rep.find(" 0 restore errors") == std::string::npos
			       ? "lossyfs: " + rep
			       : "";
	}
	Daemon &d() { return *d_; }
	/* A partition's directory on the backing store (after a cut). */
	std::string disk(const std::string &topic) const
	{
		return back_.path() + "/" + topic + "-0";
	}
	std::string log0(const std::string &topic) const
	{
		return dump(disk(topic) + "/00000000000000000000.log");
	}
	PartStatus status(const std::string &part)
	{
		StatusMap st;
		EXPECT_EQ("", d_->status(&st));
		return st[part];
	}
	std::string wait_hw(const std::string &part, int64_t hw)
	{
		return d_->wait_status(
			[&](const StatusMap &st) {
				return st.count(part) && st.at(part).hw >= hw;
			},
			kWaitMs);
	}

private:
	TempDir back_, mnt_, ctl_;
	LossyFs fs_;
	std::unique_ptr<Daemon> d_;
	std::string cuts_;
};

class PowerLoss : public ::testing::Test {
protected:
	void SetUp() override
	{
		if (std::string why = lossyfs_unavailable(); !why.empty())
			GTEST_SKIP() << why;
		ASSERT_EQ("", mock_.error());
		ASSERT_EQ("", mock_.create_topic("m", 1));
	}
	std::vector<std::string> mirror_sets()
	{
		return { "source.bootstrap.servers=" + mock_.bootstrap(),
			 "topics=m" };
	}
	/* Mirror n of the mock's records, stop, and check the stop's answer. */
	void mirror_and_stop(Node &n, int64_t records)
	{
		ASSERT_EQ("", produce(mock_.bootstrap(),
				      idempotent("m", 0, records, 1)));
		ASSERT_EQ("", n.up());
		ASSERT_EQ("", n.wait_hw("m:0", records));
		ChildResult r;
		ASSERT_EQ("", ctl(n.d(), { "stop", "--all", "--json" }, &r));
		ASSERT_NE(std::string::npos,
			  r.out.find("\"barrier_offset\":" +
				     std::to_string(records)))
			<< r.out;
	}

	MockCluster mock_{ 1 };
};

/* ---- mirroring: the published high watermark ------------------------- */

TEST_F(PowerLoss, MirroringKeepsThePublishedHighWatermarkAtEveryCut)
{
	std::atomic<bool> done{ false };
	std::atomic<int64_t> produced{ 0 };
	std::string src_err;
	std::thread src([&] {
		for (int r = 0; r < 400 && !done; r++) {
			ProduceSpec s = idempotent("m", 0, 50, 1);
			s.first_seq = r * 50;
			s.flush_every = 10;
			if (std::string e = produce(mock_.bootstrap(), s); !e.empty()) {
				src_err = e;
				return;
			}
			produced += 50;
		}
	});
	/* The source stops growing at the end, or when an ASSERT returns. */
	struct Joiner {
		std::atomic<bool> &done;
		std::thread &t;
		void stop()
		{
			done = true;
			if (t.joinable())
				t.join();
		}
		~Joiner() { stop(); }
	} joiner{ done, src };
	Node n("mirror", mirror_sets());
	int64_t last = 0;

	for (int cut = 0; cut < 6; cut++) {
		SCOPED_TRACE("cut " + std::to_string(cut));
		ASSERT_EQ("", n.up());
		/* Cut while the log grows: past the last cut's mark, as soon
		 * as the published HW moved on. */
		ASSERT_EQ("", n.wait_hw("m:0", last + 150 + 37 * cut));
		/* Published twice: in status, and to a client (ListOffsets). */
		int64_t lo = -1, client_hw = -1;
		ASSERT_EQ("", watermarks(n.d().bootstrap(), "m", 0, &lo, &client_hw));
		int64_t hw = std::max(client_hw, n.status("m:0").hw);
		ASSERT_EQ("", n.cut());
		std::string why;
		int64_t end = durable_end(n.disk("m"), &why);
		EXPECT_EQ("", why);
		EXPECT_GE(end, hw) << "published HW " << hw
				   << " not on disk after the cut";
		last = hw;
	}
	joiner.stop();
	ASSERT_EQ("", src_err);

	/* Recovery is clean and the log equals the source, record for record. */
	ASSERT_EQ("", n.up());
	int64_t all = produced;
	ASSERT_EQ("", n.wait_hw("m:0", all));
	PartStatus st = n.status("m:0");
	EXPECT_EQ(0, st.corrupt);
	EXPECT_EQ("MIRRORING", st.state);
	std::vector<Message> got = read_range(n.d().bootstrap(), "m", 0, all);
	std::vector<Message> want = read_range(mock_.bootstrap(), "m", 0, all);
	ASSERT_EQ((size_t)all, got.size());
	ASSERT_EQ(want.size(), got.size());
	for (size_t i = 0; i < got.size(); i++) {
		ASSERT_EQ(want[i].offset, got[i].offset) << i;
		ASSERT_EQ(want[i].key, got[i].key) << i;
		ASSERT_EQ(want[i].value, got[i].value) << i;
	}
}

/* ---- stop: the barrier, then acks=all Produce ------------------------ */

TEST_F(PowerLoss, TheBarrierAndEveryAckedProduceSurviveACut)
{
	Node n("stop", mirror_sets());
	mirror_and_stop(n, 300);
	ASSERT_EQ("", n.cut());
	std::string text = n.log0("m");
	EXPECT_EQ(1u, count_of(text, "MirrorPidReset")) << text.substr(0, 3000);
	EXPECT_NE(std::string::npos, text.find(barrier_line(300)));

	ASSERT_EQ("", n.up());
	EXPECT_EQ("STOPPED", n.status("m:0").state);
	EXPECT_EQ(301, n.status("m:0").leo);

	/* All acked, then the cut at once. */
	ProduceSpec s = idempotent("m", 0, 200, 7);
	s.conf = { { "acks", "all" } };
	ASSERT_EQ("", produce(n.d().bootstrap(), s));
	ASSERT_EQ("", n.cut());
	std::string why;
	EXPECT_GE(durable_end(n.disk("m"), &why), 501);
	EXPECT_EQ("", why);

	/* A cut while a producer is in flight: what was acked is there. */
	ASSERT_EQ("", n.up());
	ProduceSpec t = idempotent("m", 0, 3000, 8);
	t.conf = { { "acks", "all" } };
	t.timeout_ms = 5000;
	ProduceResult pr;
	std::thread p([&] { produce(n.d().bootstrap(), t, &pr); });
	std::string w = n.d().wait_status(
		[](const StatusMap &st) { return st.at("m:0").leo >= 801; },
		kWaitMs);
	std::string c = n.cut();
	p.join();
	ASSERT_EQ("", w);
	ASSERT_EQ("", c);
	ASSERT_GT(pr.delivered, 0);
	int64_t end = durable_end(n.disk("m"), &why);
	EXPECT_EQ("", why);
	EXPECT_GE(end, 501 + pr.delivered) << pr.delivered << " acked";

	ASSERT_EQ("", n.up());
	EXPECT_EQ(0, n.status("m:0").corrupt);
	std::vector<Message> got =
		read_range(n.d().bootstrap(), "m", 301, 501 + pr.delivered);
	ASSERT_EQ((size_t)(200 + pr.delivered), got.size());
	for (int64_t i = 0; i < 200; i++)
		EXPECT_EQ(payload_value(7, 0, i, 100), got[i].value) << i;
	for (int64_t i = 0; i < pr.delivered; i++)
		EXPECT_EQ(payload_value(8, 0, i, 100), got[200 + i].value) << i;
}

/* A cut in each step of STOPPING (KMIRROR_TEST_CRASH kills kmirrord there,
 * then the power goes): the restart completes the stop with one barrier. */
TEST_F(PowerLoss, ACutInEachStopStepResumesWithOneBarrier)
{
	KM_NEEDS_TEST_HOOKS();
	ASSERT_EQ("", produce(mock_.bootstrap(), idempotent("m", 0, 120, 3)));
	for (const char *point : { "stop-after-stopping", "stop-after-cut",
				   "stop-after-barrier", "stop-after-stopped" }) {
		SCOPED_TRACE(point);
		Node n("stopstep", mirror_sets());
		n.d().set_env({ std::string("KMIRROR_TEST_CRASH=") + point });
		ASSERT_EQ("", n.up());
		ASSERT_EQ("", n.wait_hw("m:0", 120));
		ChildResult r, res;
		EXPECT_NE("", ctl(n.d(), { "stop", "--all" }, &r)) << "it must die";
		ASSERT_EQ("", n.d().child().wait(20000, &res));
		EXPECT_EQ(SIGKILL, res.signal) << res.describe();
		ASSERT_EQ("", n.cut());
		std::string why;
		EXPECT_GE(durable_end(n.disk("m"), &why), 120);
		EXPECT_EQ("", why);

		n.d().set_env({});
		ASSERT_EQ("", n.up());
		PartStatus st = n.status("m:0");
		EXPECT_EQ("STOPPED", st.state);
		EXPECT_EQ(121, st.leo);
		EXPECT_EQ(1u, count_of(dump(n.d().data_dir() +
					    "/m-0/00000000000000000000.log"),
				       "MirrorPidReset"));
		ASSERT_EQ("", n.cut());
		/* The resumed stop was synced before it said STOPPED. */
		std::string text = n.log0("m");
		EXPECT_EQ(1u, count_of(text, "MirrorPidReset")) << text;
		EXPECT_NE(std::string::npos, text.find(barrier_line(120)));
	}
}

/* ---- committed group offsets ----------------------------------------- */

TEST_F(PowerLoss, CommittedGroupOffsetsSurviveACut)
{
	Node n("groups", mirror_sets());
	mirror_and_stop(n, 200);
	for (int64_t off : { 123, 187 }) {
		SCOPED_TRACE(off);
		ASSERT_EQ("", commit_offsets(n.d().bootstrap(), "g", "m", off));
		ASSERT_EQ("", n.cut());
		ASSERT_EQ("", n.up());
		EXPECT_EQ(off, committed(n.d().bootstrap(), "g", "m"));
	}
}

/* ---- failback --------------------------------------------------------- */

/* A (primary, on lossyfs) with 300 records, B mirroring it and failed over
 * with 100 of its own, A with 50 after that; A's failback from B is cut in
 * each step of PREPARING, and once A's HW passed B's barrier. */
TEST_F(PowerLoss, FailbackCutPartWayResumesWithOneBarrier)
{
	KM_NEEDS_TEST_HOOKS();
	for (const char *point : { "prepare-after-preparing", "prepare-after-cut",
				   "" }) {
		SCOPED_TRACE(point);
		Node a("fb-a", { "local.topics=t:1" });
		ASSERT_EQ("", a.up());
		ASSERT_EQ("", produce(a.d().bootstrap(), idempotent("t", 0, 300, 1)));
		TempDir tb("km-pl-fb-b");
		Daemon b(tb.path(), { "source.bootstrap.servers=" +
					      a.d().bootstrap(),
				      "topics=t" });
		ASSERT_EQ("", b.start());
		ASSERT_EQ("", b.wait_status(
				      [](const StatusMap &st) {
					      return st.count("t:0") &&
						     st.at("t:0").hw == 300;
				      },
				      kWaitMs));
		ChildResult r, res;
		ASSERT_EQ("", ctl(b, { "stop", "--all" }, &r));
		ASSERT_EQ("", produce(b.bootstrap(), idempotent("t", 0, 100, 2)));
		ASSERT_EQ("", produce(a.d().bootstrap(), idempotent("t", 0, 50, 3)));

		if (*point != '\0') {
			ASSERT_EQ("", a.d().stop(30000, &res));
			a.d().set_env({ std::string("KMIRROR_TEST_CRASH=") + point });
			ASSERT_EQ("", a.d().start());
			EXPECT_NE("", ctl(a.d(), { "failback", "t:0", "--source",
						   b.bootstrap() }, &r));
			ASSERT_EQ("", a.d().child().wait(20000, &res));
			EXPECT_EQ(SIGKILL, res.signal) << res.describe();
		} else {
			ASSERT_EQ("", ctl(a.d(), { "failback", "t:0", "--source",
						   b.bootstrap() }, &r));
			ASSERT_EQ("", a.wait_hw("t:0", 401));
		}
		ASSERT_EQ("", a.cut());
		if (*point == '\0') {
			std::string why;
			EXPECT_GE(durable_end(a.disk("t"), &why), 401);
			EXPECT_EQ("", why);
		}
		a.d().set_env({});
		ASSERT_EQ("", a.up());
		ASSERT_EQ("", a.wait_hw("t:0", 401));
		std::vector<Message> x = read_range(a.d().bootstrap(), "t", 0, 401);
		std::vector<Message> y = read_range(b.bootstrap(), "t", 0, 401);
		ASSERT_EQ(400u, x.size());
		ASSERT_EQ(400u, y.size());
		for (size_t i = 0; i < 400; i++) {
			EXPECT_EQ(y[i].offset, x[i].offset) << i;
			EXPECT_EQ(y[i].value, x[i].value) << i;
		}
		EXPECT_EQ(1u, count_of(dump(a.d().data_dir() +
					    "/t-0/00000000000000000000.log"),
				       "MirrorPidReset"));
	}
}

} // namespace
