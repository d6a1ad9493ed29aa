/* A full data.dir, then space returns (issue 21 item 6). kmirrord on a
 * 32 MiB tmpfs with 14 MiB free mirrors a source holding 16 MiB: it
 * mirrors whole batches as far as space allows (not nothing, as when one
 * append of a ~15 MB Fetch response failed on its 64 MiB fallocate step),
 * each partition the disk refuses is PAUSED with a reason that names
 * ENOSPC, the batch refused and the log end it would have followed; stop
 * and start (failover and back) work on the full disk; after
 * `mount -o remount,size=128m` mirroring resumes by itself - no restart,
 * no operator - and reaches the source's high watermarks, byte for byte;
 * stop and start work after too. kill -9 on the full disk: the restart
 * recovers on the still-full filesystem, loses nothing durable, and
 * resumes once space is back.
 * Method: librdkafka's mock cluster (one broker, topic f with 4 partitions
 * of 4 MiB: the mock keeps ~5 MiB each), real producers and consumers, a
 * tmpfs of its own for data.dir filled to 14 MiB free with a file; every
 * wait polls status with a deadline. Root only (mount): skipped otherwise,
 * with the reason. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <regex>
#include <vector>

#include <gtest/gtest.h>

#include "tests/e2e/daemon.h"
#include "tests/e2e/e2e_util.h"
#include "tests/support/kafka_peers.h"

using namespace kmtest;

namespace {

const char *kTopic = "f";
const int kParts = 4;
const int64_t kRecords = 1024;	   /* per partition ... */
const size_t kValue = 4096;	   /* ... of 4 KiB: 4 MiB each */
const uint64_t kFree = 14ull << 20; /* left free on the 32 MiB tmpfs */
using StatusMap = std::map<std::string, PartStatus>;

std::string key(int p)
{
	return std::string(kTopic) + ":" + std::to_string(p);
}

/* The final JSON line of a kmirrorctl --json reply. */
json_t *final_line(const std::string &out)
{
	size_t end = out.find_last_not_of('\n');
	size_t start = out.rfind('\n', end);
	std::string line = out.substr(start == std::string::npos ? 0 : start + 1,
				      end == std::string::npos ? 0 : end + 1);
	return json_loads(line.c_str(), 0, nullptr);
}

class FullDisk : public ::testing::Test {
protected:
	void SetUp() override
	{
		if (geteuid() != 0)
			GTEST_SKIP() << "mounting a tmpfs for data.dir needs root";
		ASSERT_EQ("", mock_.error());
		ASSERT_EQ("", mock_.create_topic(kTopic, kParts));
		ASSERT_EQ("", dir_.error());
		fs_.reset(new Tmpfs(dir_.file("fs"), "32m"));
		ASSERT_EQ("", fs_->error());
	}

	/* Threshold off (min 0): the full disk is met by the appends. With
	 * 64 MiB segments the fallocate step (64 MiB) is more than the disk
	 * holds; with 1 MiB ones, segments roll on the full disk. */
	std::vector<std::string> sets(const std::string &min = "0",
				      const std::string &segment = "64M")
	{
		return { "source.bootstrap.servers=" + mock_.bootstrap(),
			 std::string("topics=") + kTopic, "segment.bytes=" + segment,
			 "disk.free.min.bytes=" + min };
	}
	std::string data_dir() { return dir_.file("fs") + "/data"; }

	/* 4 MiB more on each partition, in ~256 KiB batches. */
	void produce_all()
	{
		for (int p = 0; p < kParts; p++) {
			ProduceSpec ps;
			ps.topic = kTopic;
			ps.partition = p;
			ps.count = kRecords;
			ps.value_size = kValue;
			ps.seed = 21 + p;
			ps.flush_every = 64;
			ProduceResult pr;
			ASSERT_EQ("", produce(mock_.bootstrap(), ps, &pr));
			ASSERT_EQ(kRecords, pr.delivered);
		}
	}

	int64_t source_hw(int p)
	{
		int64_t lo = -1, hi = -1;
		EXPECT_EQ("", watermarks(mock_.bootstrap(), kTopic, p, &lo, &hi));
		return hi;
	}

	std::string wait_all_mirroring(Daemon &d)
	{
		return d.wait_status(
			[](const StatusMap &st) {
				for (int p = 0; p < kParts; p++)
					if (!st.count(key(p)) ||
					    st.at(key(p)).state != "MIRRORING")
						return false;
				return true;
			},
			30000);
	}

	/* Settled on the full disk: each partition PAUSED for space, or
	 * caught up; at least one PAUSED. */
	std::string wait_full(Daemon &d, const std::vector<int64_t> &hw)
	{
		return d.wait_status(
			[&](const StatusMap &st) {
				int paused = 0;
				for (int p = 0; p < kParts; p++) {
					const PartStatus &s = st.at(key(p));
					if (s.state == "PAUSED" && !s.reason.empty())
						paused++;
					else if (s.hw != hw[p])
						return false;
				}
				return paused > 0;
			},
			60000);
	}

	std::string wait_caught_up(Daemon &d, const std::vector<int64_t> &hw,
				   int timeout_ms = 60000)
	{
		return d.wait_status(
			[&](const StatusMap &st) {
				for (int p = 0; p < kParts; p++)
					if (st.at(key(p)).state != "MIRRORING" ||
					    st.at(key(p)).hw != hw[p])
						return false;
				return true;
			},
			timeout_ms);
	}

	/* The same records at the same offsets on both sides. */
	void expect_same(const Daemon &d, int p, int64_t to)
	{
		std::vector<Message> a, b;
		ConsumeSpec cs;
		cs.topic = kTopic;
		cs.partition = p;
		cs.to = to;
		ASSERT_EQ("", consume(mock_.bootstrap(), cs, &a));
		ASSERT_EQ("", consume(d.bootstrap(), cs, &b));
		ASSERT_EQ(size_t(to), b.size()) << "partition " << p;
		ASSERT_EQ(a.size(), b.size());
		for (size_t i = 0; i < a.size(); i++) {
			ASSERT_EQ(a[i].offset, b[i].offset) << p << ": " << i;
			ASSERT_EQ(a[i].value, b[i].value) << p << ": " << i;
		}
	}

	/* A PAUSED-for-space reason names ENOSPC, the refused batch and
	 * the log end it follows - the status' own LEO. */
	void expect_reason(const PartStatus &s, int p)
	{
		SCOPED_TRACE(key(p) + ": " + s.reason);
		EXPECT_NE(std::string::npos, s.reason.find("ENOSPC"));
		EXPECT_NE(std::string::npos, s.reason.find("data.dir is full"));
		std::smatch m;
		std::regex re("log append of offsets ([0-9]+)\\.\\.([0-9]+) of " +
			      std::string(kTopic) + "-" + std::to_string(p) +
			      " \\(log end ([0-9]+), durable ([0-9]+)\\)");
		ASSERT_TRUE(std::regex_search(s.reason, m, re));
		int64_t first = std::stoll(m[1]), last = std::stoll(m[2]);
		int64_t end = std::stoll(m[3]), durable = std::stoll(m[4]);
		EXPECT_EQ(end, first) << "the refused batch is not the next one";
		EXPECT_LE(first, last);
		EXPECT_EQ(s.leo, end) << "the reason's log end is not the LEO";
		EXPECT_LE(durable, end);
	}

	/* stop, then start again from the barrier (the mock is no kmirror
	 * host: --truncate-to names the point); both must work. */
	void stop_and_start(Daemon &d, int p, const std::string &when)
	{
		SCOPED_TRACE(when);
		ChildResult r;
		ASSERT_EQ("", ctl(d, { "stop", key(p), "--json" }, &r)) << r.out << r.err;
		json_t *root = final_line(r.out);
		json_t *row = json_array_get(json_object_get(root, "partitions"), 0);
		ASSERT_NE(nullptr, row) << r.out;
		int64_t barrier = json_integer_value(json_object_get(row, "barrier_offset"));
		json_decref(root);
		StatusMap st;
		ASSERT_EQ("", d.status(&st));
		EXPECT_EQ("STOPPED", st.at(key(p)).state);
		EXPECT_EQ(barrier + 1, st.at(key(p)).leo);
		ASSERT_EQ("", ctl(d, { "start", key(p), "--truncate-to",
				       std::to_string(barrier) },
				  &r))
			<< r.out << r.err;
		EXPECT_EQ(std::string::npos, (r.out + r.err).find("No space"));
		/* The barrier is cut again: expect_same() later finds the
		 * source's batches at its offset. */
	}

	MockCluster mock_{ 1 };
	TempDir dir_{ "km-full" };
	/* Start d, fill the disk to kFree, produce more than fits and wait
	 * until every partition is held for space; *hw: the source's ends. */
	std::string run_until_full(Daemon &d, std::vector<int64_t> *hw)
	{
		if (std::string e = d.start(); !e.empty())
			return e;
		if (std::string e = wait_all_mirroring(d); !e.empty())
			return e;
		if (std::string e = fs_->fill_to(kFree); !e.empty())
			return e;
		produce_all();
		for (int p = 0; p < kParts; p++)
			hw->push_back(source_hw(p));
		return wait_full(d, *hw);
	}

	std::unique_ptr<Tmpfs> fs_;
};

TEST_F(FullDisk, MirrorsWhatFitsPausesForSpaceAndResumesByItselfWhenSpaceReturns)
{
	Daemon d(data_dir(), sets());
	std::vector<int64_t> hw;
	ASSERT_EQ("", run_until_full(d, &hw));

	/* As far as space allows: all but the 1 MiB kept for a stop, a
	 * refused batch per partition and the segments' own files. */
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	int64_t bytes = 0;
	int held = -1;
	for (int p = 0; p < kParts; p++) {
		const PartStatus &s = st.at(key(p));
		bytes += s.disk_bytes;
		if (s.state != "PAUSED")
			continue;
		expect_reason(s, p);
		held = p;
	}
	ASSERT_GE(held, 0);
	EXPECT_GE(bytes, (int64_t)(kFree - (4ull << 20)))
		<< "mirrored " << bytes << " bytes with " << kFree << " free";
	EXPECT_LT(free_bytes(dir_.file("fs")), 2ull << 20) << "the disk is not full";
	ChildResult r;
	ASSERT_EQ("", ctl(d, { "metrics" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\nkmirror_disk_paused 1\n"));
	EXPECT_NE("", ctl(d, { "resume", key(held) }, &r))
		<< "resume must refuse while the disk is full";
	EXPECT_NE(std::string::npos, (r.out + r.err).find("ENOSPC")) << r.out << r.err;

	/* Failover and back on the full disk: the space kept for it. */
	stop_and_start(d, held, "full");
	ASSERT_EQ("", wait_full(d, hw)) << "start on the full disk";

	/* Space returns: no restart, no operator. */
	ASSERT_EQ("", fs_->grow("128m"));
	ASSERT_EQ("", wait_caught_up(d, hw));
	for (int p = 0; p < kParts; p++)
		expect_same(d, p, hw[p]);
	ASSERT_EQ("", ctl(d, { "metrics" }, &r));
	EXPECT_NE(std::string::npos, r.out.find("\nkmirror_disk_paused 0\n"));

	stop_and_start(d, 0, "space back");
	ASSERT_EQ("", wait_caught_up(d, hw));
	EXPECT_EQ(std::string::npos,
		  d.child().stderr_so_far().find("cut: No space left on device"));
}

/* With the threshold on too (disk.free.min.bytes=2M, above the 1 MiB the
 * appends leave), whichever comes first pauses; both resume by themselves. */
TEST_F(FullDisk, TheFreeSpaceThresholdAndTheRefusedAppendPauseAlike)
{
	Daemon d(data_dir(), sets("2M", "1M"));
	std::vector<int64_t> hw;
	ASSERT_EQ("", run_until_full(d, &hw));
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	for (int p = 0; p < kParts; p++) {
		const PartStatus &s = st.at(key(p));
		if (s.state != "PAUSED")
			continue;
		EXPECT_TRUE(s.reason.find("disk.free.min.bytes") != std::string::npos ||
			    s.reason.find("ENOSPC") != std::string::npos)
			<< s.reason;
		if (s.reason.find("ENOSPC") != std::string::npos)
			expect_reason(s, p);
	}
	ASSERT_EQ("", fs_->grow("128m"));
	ASSERT_EQ("", wait_caught_up(d, hw));
	expect_same(d, kParts - 1, hw[kParts - 1]);
}

/* kill -9 with the disk full; the restart, on the still-full disk,
 * recovers every log without losing what was durable, holds the
 * partitions it cannot feed, and mirrors on once space is back. */
TEST_F(FullDisk, Kill9WhileFullRecoversOnTheFullDisk)
{
	Daemon d(data_dir(), sets("0", "1M"));
	std::vector<int64_t> hw;
	ASSERT_EQ("", run_until_full(d, &hw));
	StatusMap before;
	ASSERT_EQ("", d.status(&before));
	ASSERT_EQ("", d.kill9());

	ASSERT_EQ("", d.start());
	ASSERT_EQ("", wait_full(d, hw)) << "after the restart on the full disk";
	StatusMap st;
	ASSERT_EQ("", d.status(&st));
	for (int p = 0; p < kParts; p++)
		EXPECT_GE(st.at(key(p)).hw, before.at(key(p)).hw)
			<< key(p) << ": durable data lost";
	ASSERT_EQ("", fs_->grow("128m"));
	ASSERT_EQ("", wait_caught_up(d, hw));
	for (int p = 0; p < kParts; p++)
		expect_same(d, p, hw[p]);
}

} // namespace
