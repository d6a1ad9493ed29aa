// Goal: with a budget of descriptors smaller than its logs hold
// (km_log_files_set_max, issue 17's 10,000 partitions under a 20,000-file
// limit), the process holds no more than the budget (plus the one log in
// use), closes the files of cold logs and opens them again on use, and
// nothing a log holds changes for it: appends, rolls, reads from another
// thread, a truncation, DeleteRecords, a clean close and a reopen all see
// the same batches as without a budget.
// Method: 40 logs of one owner thread (one ring) on tmpfs, segments of
// 8 KiB so each has a few (4 descriptors for the first, 3 per further
// one), a budget of 60 descriptors against the ~200 they hold open. Rounds
// of one 1 KiB batch to every log in turn; after each append the
// process's descriptors (/proc/self/fd, less the count before the logs)
// stay within the budget plus one log's; every batch's value is a function
// of its log and offset. A reader thread reads every log whole after the
// rounds (its files mostly closed, so through descriptors of its own),
// comparing each batch with what was appended. One closed log is truncated,
// one has DeleteRecords, then all are closed and opened again without a
// budget and read back. The stats must show closes and reopens, so the test
// cannot pass with the cache idle.
// ShedsTheIndexesBeforeClosingALog: under a budget that the logs' .log
// files fit but not their directories and index files (280 descriptors
// for 40 logs of two segments each, 80 of them .logs, against 100), the
// owner sheds the least recently used logs' directory and index
// descriptors and closes no log (no release, no reopen), holding at most
// the budget plus one log's files after each append; the appends that
// rolled on shed logs, the reads from another thread, a truncation and
// DeleteRecords on shed logs work and see what was appended, and the
// shed logs opened what they needed again (counted). Without a budget
// nothing is shed.
#include <dirent.h>

#include <string>
#include <thread>
#include <vector>

#include "log_util.h"

using namespace logtest;

namespace {

constexpr int kLogs = 40;
constexpr int kRounds = 12;
constexpr uint64_t kBudget = 60;

int OpenFds()
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	while (d != nullptr && readdir(d) != nullptr)
		n++;
	if (d != nullptr)
		closedir(d);
	return n;
}

std::vector<uint8_t> ValueBatch(int64_t base, int log)
{
	return Data(base, -1, -1, -1, 1, false, 1000 + (int)(base * 7 + log) % 97,
		    1000 + base);
}

struct Many {
	FastTempDir tmp;
	km_uring ring;
	std::vector<km_log *> logs = std::vector<km_log *>(kLogs, nullptr);

	Many() { EXPECT_EQ(0, km_uring_init(&ring, 64)); }
	~Many()
	{
		for (auto *l : logs)
			if (l != nullptr)
				km_log_close(l);
		km_log_files_set_max(0);
		km_uring_exit(&ring);
	}
	int Open(int i)
	{
		km_log_config cfg;
		km_log_config_defaults(&cfg, tmp.path.c_str(), "t", i);
		cfg.segment_bytes = 8 * 1024;
		cfg.index_bytes_max = 4096;
		cfg.prealloc_bytes = 64 * 1024;
		cfg.flush_always = true;
		return km_log_open(&logs[i], &cfg, &ring, nullptr);
	}
	int Append(int i)
	{
		int64_t base = km_log_end_offset(logs[i]);
		Batch b(ValueBatch(base, i));
		km_log_append_result res;
		int rc = km_log_append_burst(logs[i], &b.view, 1,
					     KM_ORIGIN_MIRROR, &res);
		int s = km_log_sync(logs[i]);
		return rc == 1 ? s : rc;
	}
};

// Every batch of log i from its start to its end, each the one appended at
// its offset. @return how many, or -1 after a failure was added.
int ReadAll(km_log *log, int i)
{
	std::vector<uint8_t> buf(64 * 1024);
	int64_t off = km_log_start_offset(log), end = km_log_end_offset(log);
	int n = 0;

	while (off < end) {
		km_log_read_result rr;
		int rc = km_log_read(log, off, end, 1, buf.data(), buf.size(),
				     &rr);
		if (rc < 0 || rr.batches == 0) {
			ADD_FAILURE() << "log " << i << " at " << off << ": "
				      << km_strerror(rc);
			return -1;
		}
		std::vector<uint8_t> want = ValueBatch(off, i);
		std::vector<uint8_t> got(buf.begin(), buf.begin() + want.size());
		if (rr.first_offset != off || got != want) {
			ADD_FAILURE() << "log " << i << " batch at " << off
				      << " differs";
			return -1;
		}
		off = rr.next_offset;
		n++;
	}
	return n;
}

/* Every log read whole on another thread than the one that wrote them. */
void ExpectEveryLogReadsWhole(Many &m)
{
	std::vector<int> counts(kLogs, 0);
	std::thread reader([&] {
		for (int i = 0; i < kLogs; i++)
			counts[i] = ReadAll(m.logs[i], i);
	});
	reader.join();
	for (int i = 0; i < kLogs; i++)
		EXPECT_EQ(kRounds, counts[i]) << "log " << i;
}

/* Structural changes on the two least recently used logs: log 0 cut by 5
 * batches and appended to at the cut, log 1's first 4 records deleted. */
void CutAndDeleteTheColdest(Many &m)
{
	uint64_t removed_bytes = 0;
	uint32_t removed_batches = 0;
	int64_t cut = km_log_end_offset(m.logs[0]) - 5;
	ASSERT_EQ(cut, km_log_truncate_to(m.logs[0], cut, &removed_bytes,
					  &removed_batches));
	EXPECT_EQ(5u, removed_batches);
	int64_t low = 0;
	ASSERT_EQ(0, km_log_delete_records(m.logs[1], 4, &low));
	EXPECT_EQ(4, km_log_start_offset(m.logs[1]));
	ASSERT_EQ(0, m.Append(0)); // at the cut
}

} // namespace

TEST(LogFiles, ColdLogsCloseTheirFilesAndNothingChanges)
{
	struct km_log_files_stats st0, st;
	km_log_files_get_stats(&st0);
	Many m;
	int before = OpenFds();

	km_log_files_set_max(kBudget);
	for (int i = 0; i < kLogs; i++)
		ASSERT_EQ(0, m.Open(i)) << i;
	int most = 0;
	for (int r = 0; r < kRounds; r++)
		for (int i = 0; i < kLogs; i++) {
			ASSERT_EQ(0, m.Append(i)) << "round " << r << " log " << i;
			int held = OpenFds() - before;
			most = held > most ? held : most;
		}
	// One log may be over while it is in use: its own files (up to 1 + 3
	// per segment) besides the budget.
	km_log_files_get_stats(&st);
	EXPECT_LE(most, (int)kBudget + 1 + 3 * 8) << "descriptors held at most";
	EXPECT_GT(st.releases, st0.releases);
	EXPECT_GT(st.reopens, st0.reopens);
	EXPECT_GT(st.closed_logs, 0u);
	printf("descriptors: at most %d held for %d logs (budget %llu); "
	       "%llu closes, %llu reopens\n", most, kLogs,
	       (unsigned long long)kBudget,
	       (unsigned long long)(st.releases - st0.releases),
	       (unsigned long long)(st.reopens - st0.reopens));

	// Reads on another thread, most logs closed.
	ExpectEveryLogReadsWhole(m);

	// Structural changes on logs whose files are closed: log 0 is the
	// least recently used.
	ASSERT_NO_FATAL_FAILURE(CutAndDeleteTheColdest(m));

	std::vector<int64_t> ends(kLogs);
	for (int i = 0; i < kLogs; i++) {
		ends[i] = km_log_end_offset(m.logs[i]);
		ASSERT_EQ(0, km_log_close(m.logs[i])) << i;
		m.logs[i] = nullptr;
	}
	EXPECT_LE(OpenFds(), before) << "closing every log gives all back";
	km_log_files_set_max(0);
	for (int i = 0; i < kLogs; i++) {
		ASSERT_EQ(0, m.Open(i)) << i;
		EXPECT_EQ(ends[i], km_log_end_offset(m.logs[i])) << i;
		EXPECT_EQ(i == 0 ? kRounds - 4 : i == 1 ? kRounds - 4 : kRounds,
			  ReadAll(m.logs[i], i)) << "log " << i;
	}
}

namespace {

int LogFilesIn(const std::string &dir)
{
	int n = 0;
	DIR *d = opendir(dir.c_str());
	struct dirent *e;
	while (d != nullptr && (e = readdir(d)) != nullptr) {
		std::string name = e->d_name;
		n += name.size() > 4 && name.compare(name.size() - 4, 4, ".log") == 0;
	}
	if (d != nullptr)
		closedir(d);
	return n;
}

} // namespace

TEST(LogFiles, ShedsTheIndexesBeforeClosingALog)
{
	constexpr uint64_t kShedBudget = 100;
	struct km_log_files_stats st0, st;
	km_log_files_get_stats(&st0);
	Many m;
	int before = OpenFds();

	for (int i = 0; i < kLogs; i++)
		ASSERT_EQ(0, m.Open(i)) << i;
	km_log_files_get_stats(&st);
	EXPECT_EQ(st.sheds, st0.sheds) << "shed without a budget";
	// The directory, the .log, both indexes (and an O_DIRECT twin).
	EXPECT_EQ((4 + (km_log_direct_io_mode() == KM_LOG_DIO_ON)) * kLogs,
		  OpenFds() - before) << "without a budget";
	km_log_files_set_max(kShedBudget);
	int most = 0;
	for (int r = 0; r < kRounds; r++)
		for (int i = 0; i < kLogs; i++) {
			ASSERT_EQ(0, m.Append(i)) << "round " << r << " log " << i;
			int held = OpenFds() - before;
			most = held > most ? held : most;
		}
	int logs = 0;
	for (int i = 0; i < kLogs; i++)
		logs += LogFilesIn(m.tmp.path + "/t-" + std::to_string(i));
	ASSERT_GE(logs, 2 * kLogs) << "the appends rolled no segment";
	ASSERT_LT(logs, (int)kShedBudget) << "the .logs must fit the budget";
	km_log_files_get_stats(&st);
	// One log may be over while it is in use: its own files.
	EXPECT_LE(most, (int)kShedBudget + 1 + 3 * 8) << "descriptors held at most";
	EXPECT_EQ(st.releases, st0.releases) << "a log was closed";
	EXPECT_EQ(st.reopens, st0.reopens);
	EXPECT_GT(st.sheds, st0.sheds);
	EXPECT_GT(st.unsheds, st0.unsheds) << "the rolls opened nothing again";

	ExpectEveryLogReadsWhole(m);

	// Logs 0 and 1 are the least recently used: shed.
	ASSERT_NO_FATAL_FAILURE(CutAndDeleteTheColdest(m));
	EXPECT_EQ(kRounds - 4, ReadAll(m.logs[0], 0));
	EXPECT_EQ(kRounds - 4, ReadAll(m.logs[1], 1));
	km_log_files_get_stats(&st);
	EXPECT_EQ(st.releases, st0.releases) << "a log was closed";
	printf("descriptors: at most %d held by %d logs of %d segments (budget "
	       "%llu); %llu sheds, %llu reopened their directory and indexes\n",
	       most, kLogs, logs, (unsigned long long)kShedBudget,
	       (unsigned long long)(st.sheds - st0.sheds),
	       (unsigned long long)(st.unsheds - st0.unsheds));
}
