// Goal: the producer ids kmirrord hands to local idempotent producers
// (InitProducerId, control/daemon_pid.c) follow R4 step 6: every id is above
// the largest positive id seen in the logs, and no id is handed out twice,
// across restarts too - also ids handed out but never written to a log,
// which only the persisted block end remembers.
// Method: a real data.dir in a temp dir; the allocator (through
// pid_alloc_support.c: its header is control's private one) is opened,
// asked for ids, closed and opened again as a restart of kmirrord does, with
// the largest id the logs hold given as kmirrord's open would find it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "pid_alloc_support.h"

namespace {

struct DataDir {
	std::string path;
	DataDir()
	{
		char tmpl[] = "/tmp/kmirror-pids-XXXXXX";
		path = mkdtemp(tmpl);
	}
	~DataDir() { std::filesystem::remove_all(path); }
};

const int64_t kBlock = km_test_pids_block();

// One run of the allocator, as one run of kmirrord holds it.
struct Pids {
	km_test_pids *p = nullptr;
	Pids(const DataDir &d, int64_t max_seen)
	{
		int rc = 0;
		p = km_test_pids_open(d.path.c_str(), max_seen, &rc);
		EXPECT_EQ(0, rc);
	}
	~Pids()
	{
		if (p != nullptr)
			km_test_pids_close(p);
	}
	int64_t Next()
	{
		int64_t pid = -1;
		int16_t epoch = -1;
		EXPECT_EQ(0, km_test_pids_next(p, &pid, &epoch));
		EXPECT_EQ(0, epoch);
		return pid;
	}
};

std::string BlockFile(const DataDir &d)
{
	std::ifstream f(d.path + "/" + km_test_pids_file());
	std::string s;
	std::getline(f, s);
	return s;
}

// Ids handed out before a restart are never handed out after it, even
// when no log holds them (the producers may still be alive).
TEST(PidAlloc, IdsOfAnEarlierRunAreNeverHandedOutAgain)
{
	DataDir d;
	std::set<int64_t> seen;
	{
		Pids a(d, -1);
		ASSERT_NE(nullptr, a.p);
		for (int i = 0; i < 3; i++)
			ASSERT_TRUE(seen.insert(a.Next()).second);
		EXPECT_EQ(0, *seen.begin()) << "nothing seen: ids start at 0";
		EXPECT_EQ(std::to_string(kBlock), BlockFile(d))
			<< "the block is persisted before its first id is used";
	}
	for (int run = 0; run < 3; run++) {
		SCOPED_TRACE("restart " + std::to_string(run));
		Pids a(d, -1);
		ASSERT_NE(nullptr, a.p);
		int64_t first = a.Next();
		EXPECT_GT(first, *seen.rbegin());
		EXPECT_GE(first, (run + 1) * kBlock)
			<< "the unused rest of the last block is skipped";
		ASSERT_TRUE(seen.insert(first).second) << first;
	}
}

// Above the largest positive id in the logs (ids a source's producers had
// before a failover are written mapped, negative: only local ones count).
TEST(PidAlloc, IdsStartAboveTheLargestIdInTheLogs)
{
	DataDir d;
	{
		Pids a(d, 4999);
		ASSERT_NE(nullptr, a.p);
		EXPECT_EQ(5000, a.Next());
		EXPECT_EQ(5001, a.Next());
	}
	{
		// A smaller id in the logs than the block end: the block end
		// wins.
		Pids a(d, 5001);
		ASSERT_NE(nullptr, a.p);
		EXPECT_GE(a.Next(), 5000 + kBlock);
	}
	{
		// A larger one (a producer of a block whose file was lost):
		// above it.
		Pids a(d, 90000);
		ASSERT_NE(nullptr, a.p);
		EXPECT_EQ(90001, a.Next());
	}
}

// Crossing a block end persists the next block before handing out its ids.
TEST(PidAlloc, EachBlockIsPersistedBeforeItsIds)
{
	DataDir d;
	Pids a(d, -1);
	ASSERT_NE(nullptr, a.p);
	for (int64_t i = 0; i < kBlock; i++)
		ASSERT_EQ(i, a.Next());
	EXPECT_EQ(std::to_string(kBlock), BlockFile(d));
	EXPECT_EQ(kBlock, a.Next());
	EXPECT_EQ(std::to_string(2 * kBlock), BlockFile(d));
}

} // namespace
