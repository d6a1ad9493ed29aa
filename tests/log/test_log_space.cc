// Goal: a partition log takes disk in proportion to its data (issue 17):
// the .log's fallocate step starts at 64 KiB and grows only while the
// partition writes fast (km_segment_step_next), and the .index/.timeindex
// files are sparse at their full length, as Kafka's setLength makes them,
// with blocks allocated a page at a time ahead of their entries. A new,
// empty partition then holds no data blocks at all; one that took a single
// batch holds at most one small step beyond it.
// Method: the step rule called directly; then real logs on /dev/shm (tmpfs
// allocates blocks exactly as asked, like ext4 for fallocate) and
// st_blocks of each file, read after each append; Kafka's default
// index_bytes_max (10 MiB) and prealloc_bytes (64 MiB).
#include <sys/stat.h>

#include "log_check.h"

using namespace logtest;

namespace {

const uint64_t kMin = KM_SEGMENT_STEP_MIN_BYTES;

TEST(SpaceStep, StartsSmallDoublesWhenFastHalvesWhenSlow)
{
	const uint64_t max = 64ull << 20;
	EXPECT_EQ(kMin, km_segment_step_next(0, 0, max));
	EXPECT_EQ(2 * kMin, km_segment_step_next(kMin, 10, max));
	EXPECT_EQ(max, km_segment_step_next(max, 10, max)) << "capped at max";
	EXPECT_EQ(max, km_segment_step_next(max / 2 + 1, 10, max));
	EXPECT_EQ(4 * kMin, km_segment_step_next(4 * kMin, 2000, max))
		<< "a step that lasted between 1 s and 4 s is kept";
	EXPECT_EQ(2 * kMin, km_segment_step_next(4 * kMin, 5000, max));
	EXPECT_EQ(kMin, km_segment_step_next(kMin, 60000, max))
		<< "never below the minimum";
	EXPECT_EQ(8192u, km_segment_step_next(0, 0, 8192))
		<< "a max below the minimum (small segments) wins";
	EXPECT_EQ(8192u, km_segment_step_next(8192, 10, 8192));
}

uint64_t Blocks(const std::string &path)
{
	struct stat st;
	if (stat(path.c_str(), &st) != 0)
		return UINT64_MAX;
	return (uint64_t)st.st_blocks * 512;
}

uint64_t Size(const std::string &path)
{
	struct stat st;
	return stat(path.c_str(), &st) == 0 ? (uint64_t)st.st_size : UINT64_MAX;
}

auto KafkaSizes = [](km_log_config &c) {
	c.index_bytes_max = 10 << 20;
	c.prealloc_bytes = 64ull << 20;
	c.segment_bytes = 1ull << 30;
	c.flush_always = false;
};

std::string Seg0(const Log &l, const char *suffix)
{
	return l.dir + "/" + SegName(0, suffix);
}

TEST(Space, AnEmptyPartitionHoldsNoDataBlocks)
{
	FastTempDir td;
	Log l(td.path, KafkaSizes);
	ASSERT_NE(nullptr, l.log);
	// Full length, as Kafka's (index_bytes_max capped by what a segment
	// can index): entries are appended through the map.
	EXPECT_GE(Size(Seg0(l, ".index")), 1u << 20);
	EXPECT_EQ(Size(Seg0(l, ".index")), Size(Seg0(l, ".timeindex")));
	EXPECT_EQ(0u, Blocks(Seg0(l, ".index"))) << "index allocated, not sparse";
	EXPECT_EQ(0u, Blocks(Seg0(l, ".timeindex")));
	EXPECT_EQ(0u, Blocks(Seg0(l, ".log")));
}

TEST(Space, OneBatchReservesOneSmallStep)
{
	FastTempDir td;
	Log l(td.path, KafkaSizes);
	Batch b(Data(0, 3, 0, 0, 10));
	ASSERT_EQ(1, l.Append(b));
	EXPECT_GE(Blocks(Seg0(l, ".log")), b.bytes.size());
	EXPECT_LE(Blocks(Seg0(l, ".log")), kMin)
		<< "the first step of a partition is the smallest";
	// Blocks for the entries the next batch may add, a page each.
	EXPECT_EQ(4096u, Blocks(Seg0(l, ".index")));
	EXPECT_EQ(4096u, Blocks(Seg0(l, ".timeindex")));
}

// Batches of ~64 KiB back to back: each step lasts well under a second,
// so the steps double up to prealloc_bytes; index blocks follow entries.
TEST(Space, AFastWriterGetsLargerStepsAndIndexBlocksFollowEntries)
{
	FastTempDir td;
	Log l(td.path, KafkaSizes);
	uint64_t written = 0, ahead_max = 0;
	for (int i = 0; i < 400; i++) {
		Batch b(Data(i, 3, 0, i, 1, false, 64 * 1024));
		km_log_append_result res;
		ASSERT_EQ(1, km_log_append_burst(l.log, &b.view, 1,
						 KM_ORIGIN_MIRROR, &res));
		ASSERT_EQ(0, km_log_sync(l.log));
		written += b.bytes.size();
		uint64_t blocks = Blocks(Seg0(l, ".log"));
		ASSERT_GE(blocks, written);
		ahead_max = std::max(ahead_max, blocks - written);
	}
	EXPECT_GT(ahead_max, 4 * kMin)
		<< "steps did not grow for a partition writing "
		<< written / 1048576 << " MiB in a burst";
	EXPECT_LE(ahead_max, 64ull << 20);
	// One offset entry per batch past the interval: 400 entries, 3200
	// bytes; blocks for them and the next, rounded to a page.
	uint64_t ientries = 0;
	{
		std::vector<uint8_t> idx = ReadFile(Seg0(l, ".index"));
		for (size_t o = 0; o + 8 <= idx.size(); o += 8)
			if (idx[o + 4] | idx[o + 5] | idx[o + 6] | idx[o + 7])
				ientries++;
	}
	EXPECT_GE(ientries, 300u);
	EXPECT_LE(Blocks(Seg0(l, ".index")), (ientries + 1) * 8 + 2 * 4096);
	EXPECT_GE(Blocks(Seg0(l, ".index")), ientries * 8);
	ASSERT_EQ(0, l.Close());
	// Closed: the indexes trimmed to their entries, the .log to its data.
	EXPECT_EQ(Size(Seg0(l, ".log")), written);
	EXPECT_LE(Blocks(Seg0(l, ".log")), written + 4096);
	EXPECT_EQ(0u, Size(Seg0(l, ".index")) % 8);
	EXPECT_LE(Size(Seg0(l, ".index")), (ientries + 1) * 8);
}

// A reopened active segment starts its allocation over: what it holds
// keeps its blocks, and new entries get theirs.
TEST(Space, AReopenedSegmentKeepsAllocatingAheadOfItsEntries)
{
	FastTempDir td;
	Log l(td.path, KafkaSizes);
	for (int i = 0; i < 50; i++) {
		Batch b(Data(i, 3, 0, i, 1, false, 8 * 1024));
		ASSERT_EQ(1, l.Append(b));
	}
	ASSERT_EQ(0, l.Close());
	l.Open();
	EXPECT_GE(Size(Seg0(l, ".index")), 1u << 20) << "reopened at full length";
	for (int i = 50; i < 100; i++) {
		Batch b(Data(i, 3, 0, i, 1, false, 8 * 1024));
		ASSERT_EQ(1, l.Append(b));
	}
	EXPECT_LE(Blocks(Seg0(l, ".index")), 8192u);
	EXPECT_GE(Blocks(Seg0(l, ".index")), 4096u);
	EXPECT_EQ(100, km_log_end_offset(l.log));
}

} // namespace
