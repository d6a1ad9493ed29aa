// Goal: the partition log appends through io_uring, reads back what it
// wrote, rolls segments, recovers cleanly and after a torn tail, and
// truncates consistently; the largest positive producer id it holds
// (what InitProducerId must hand out ids above, R4 step 6) is known again
// after a crash and after a clean close, with rolls in between.
// Method: real files in a temp dir, a real ring, small segment sizes.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/endian.h"
#include "log_util.h"

using namespace logtest;

namespace {

TEST(Log, AppendReadDurable)
{
	TempDir td;
	Log l(td.path);
	Batch a(Data(0, 5, 0, 0, 3)), b(Data(3, 5, 0, 3, 2));
	km_log_append_result res;
	ASSERT_EQ(1, l.Append(a, KM_ORIGIN_MIRROR, &res));
	EXPECT_EQ(0, res.first_offset);
	EXPECT_EQ(2, res.last_offset);
	ASSERT_EQ(1, l.Append(b));
	EXPECT_EQ(5, km_log_end_offset(l.log));
	EXPECT_EQ(5, km_log_appended_offset(l.log));
	EXPECT_EQ(5, km_log_durable_offset(l.log));

	std::vector<uint8_t> buf(1 << 16);
	km_log_read_result rd;
	ASSERT_EQ(0, km_log_read(l.log, 3, 5, 1 << 16, buf.data(), buf.size(), &rd));
	EXPECT_EQ(1u, rd.batches);
	EXPECT_EQ(3, rd.first_offset);
	EXPECT_EQ(5, rd.next_offset);
	ASSERT_EQ(b.bytes.size(), rd.bytes);
	EXPECT_EQ(0, memcmp(buf.data(), b.bytes.data(), rd.bytes));
	ASSERT_EQ(0, km_log_read(l.log, 1, 5, 1, buf.data(), buf.size(), &rd));
	EXPECT_EQ(1u, rd.batches) << "at least one batch even over max_bytes";
	EXPECT_EQ(0, rd.first_offset);
	EXPECT_EQ(-ERANGE, km_log_read(l.log, 6, 5, 100, buf.data(), buf.size(), &rd));
}

TEST(Log, DuplicatesSkippedOverlapRefused)
{
	TempDir td;
	Log l(td.path);
	Batch a(Data(0, 5, 0, 0, 3)), dup(Data(0, 5, 0, 0, 3)),
		overlap(Data(2, 5, 0, 2, 3)), gap(Data(10, 5, 0, 3, 1));
	ASSERT_EQ(1, l.Append(a));
	km_log_append_result res;
	EXPECT_EQ(1, l.Append(dup, KM_ORIGIN_MIRROR, &res));
	EXPECT_EQ(1u, res.duplicates);
	EXPECT_EQ(0u, res.appended);
	EXPECT_EQ(KM_EOFFSET, l.Append(overlap));
	EXPECT_EQ(1, l.Append(gap)) << "compaction gaps stay gaps";
	EXPECT_EQ(11, km_log_end_offset(l.log));
}

TEST(Log, CleanReopenAndRoll)
{
	TempDir td;
	std::string dir;
	{
		Log l(td.path, 4096);
		for (int i = 0; i < 40; i++) {
			Batch b(Data(i * 2, 7, 0, i * 2, 2));
			ASSERT_EQ(1, l.Append(b));
		}
		dir = l.dir;
		EXPECT_EQ(0, l.Close());
		l.Open();
		EXPECT_TRUE(l.rec.clean);
		EXPECT_EQ(80, km_log_end_offset(l.log));
		km_producer_info pi;
		ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), 7, &pi));
		EXPECT_EQ(79, pi.last_seq);
		std::vector<uint8_t> buf(1 << 16);
		km_log_read_result rd;
		for (int64_t off = 0; off < 80; off = rd.next_offset) {
			ASSERT_EQ(0, km_log_read(l.log, off, 80, 300, buf.data(),
						 buf.size(), &rd));
			ASSERT_GT(rd.batches, 0u) << off;
			EXPECT_EQ(off - off % 2, rd.first_offset);
		}
	}
	int logs = 0;
	for (auto &e : std::filesystem::directory_iterator(dir))
		logs += e.path().extension() == ".log";
	EXPECT_GE(logs, 3) << "11 KiB in 4 KiB segments must have rolled";
	EXPECT_TRUE(std::filesystem::exists(dir + "/leader-epoch-checkpoint"));
	EXPECT_TRUE(std::filesystem::exists(dir + "/partition.metadata"));
}

// A child appends, syncs, adds half a batch and exits without closing: the
// crash leaves no clean-shutdown marker and a torn tail, which recovery cuts
// from the file so that the next append follows the last whole batch.
TEST(Log, TornTailRecovered)
{
	TempDir td;
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(td.path);
		off_t end = 0;
		for (int i = 0; i < 10; i++) {
			Batch b(Data(i, 9, 0, i, 1));
			if (l.Append(b) != 1)
				_exit(1);
			end += (off_t)b.bytes.size();
		}
		std::string path = l.dir + "/00000000000000000000.log";
		Batch extra(Data(10, 9, 0, 10, 1));
		int fd = open(path.c_str(), O_WRONLY | O_APPEND);
		// The torn write follows the data (a direct write's zeros
		// past it would otherwise come first).
		if (ftruncate(fd, end) != 0)
			_exit(3);
		_exit(write(fd, extra.bytes.data(), 30) == 30 ? 0 : 2);
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));

	Log l(td.path);
	EXPECT_FALSE(l.rec.clean);
	EXPECT_EQ(30u, l.rec.bytes_truncated);
	EXPECT_EQ(10, l.rec.truncated_at);
	EXPECT_EQ(-ENODATA, l.rec.corrupt_code);
	EXPECT_FALSE(l.rec.corrupt_mid_log);
	EXPECT_EQ(10, km_log_end_offset(l.log));
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), 9, &pi));
	EXPECT_EQ(9, pi.last_seq);

	// The tail is gone from the file, not only from the offsets: the next
	// batch follows the tenth directly, and a reopen (which trusts the
	// files after a clean close) finds it there.
	Batch one(Data(0, 9, 0, 0, 1));
	std::string path = l.dir + "/00000000000000000000.log";
	struct stat st;
	ASSERT_EQ(0, stat(path.c_str(), &st));
	EXPECT_EQ(10 * one.bytes.size(), (size_t)st.st_size);
	Batch next(Data(10, 9, 0, 10, 1));
	ASSERT_EQ(1, l.Append(next));
	ASSERT_EQ(0, l.Close());
	l.Open();
	EXPECT_TRUE(l.rec.clean);
	ASSERT_EQ(11, km_log_end_offset(l.log));
	std::vector<uint8_t> buf(1 << 16);
	km_log_read_result rd;
	ASSERT_EQ(0, km_log_read(l.log, 10, 11, 1 << 16, buf.data(), buf.size(), &rd));
	ASSERT_EQ(next.bytes.size(), rd.bytes);
	EXPECT_EQ(0, memcmp(buf.data(), next.bytes.data(), rd.bytes));
}

TEST(Log, TruncateTo)
{
	TempDir td;
	Log l(td.path, 2048);
	for (int i = 0; i < 30; i++) {
		Batch b(Data(i * 3, 4, 0, i * 3, 3));
		ASSERT_EQ(1, l.Append(b));
	}
	uint64_t bytes;
	uint32_t batches;
	EXPECT_EQ(30, km_log_truncate_to(l.log, 31, &bytes, &batches));
	EXPECT_EQ(20u, batches);
	EXPECT_EQ(30, km_log_end_offset(l.log));
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), 4, &pi));
	EXPECT_EQ(29, pi.last_seq);
	Batch next(Data(30, 4, 0, 30, 1));
	ASSERT_EQ(1, l.Append(next));
	EXPECT_EQ(31, km_log_durable_offset(l.log));
	EXPECT_EQ(0, l.Close());
	l.Open();
	EXPECT_EQ(31, km_log_end_offset(l.log));
}

// R4 step 6: "InitProducerId hands out ids above the largest positive id
// ever seen in the log". Local producer 5000 writes once, then a smaller
// local id: after a crash before any roll (replay alone), after a crash
// past rolls (the newest snapshot, above 5000's batch, plus replay), and
// after a clean close (the snapshot alone), the log still says 5000.
// Each phase's writer is a child that exits without closing.
void AppendThenDie(const std::string &dir, int64_t pid, int32_t seq0, int n)
{
	pid_t child = fork();
	ASSERT_GE(child, 0);
	if (child == 0) {
		Log l(dir, [](km_log_config &c) { c.segment_bytes = 2048; });
		for (int i = 0; i < n; i++) {
			Batch b(Data(0, pid, 0, seq0 + i, 1));
			if (l.Append(b, KM_ORIGIN_CLIENT) != 1)
				_exit(1);
		}
		_exit(0);
	}
	int status;
	ASSERT_EQ(child, waitpid(child, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(Log, LargestPositiveProducerIdSurvivesRecovery)
{
	TempDir td;
	auto cfg = [](km_log_config &c) { c.segment_bytes = 2048; };
	AppendThenDie(td.path, 5000, 0, 1);
	AppendThenDie(td.path, 12, 0, 2);
	{
		Log l(td.path, cfg);
		ASSERT_FALSE(l.rec.clean);
		ASSERT_EQ(-1, l.rec.snapshot_offset);
		EXPECT_EQ(5000, km_pstate_max_positive_pid(km_log_pstate(l.log)));
		l.Close();
	}
	AppendThenDie(td.path, 12, 2, 30);
	Log l(td.path, cfg);
	ASSERT_FALSE(l.rec.clean);
	ASSERT_GT(l.rec.snapshot_offset, 3) << "rolled: recovery starts from a "
					       "snapshot above 5000's batch";
	ASSERT_GT(l.rec.batches_replayed, 0u);
	EXPECT_EQ(5000, km_pstate_max_positive_pid(km_log_pstate(l.log)));
	ASSERT_EQ(0, l.Close());
	l.Open();
	ASSERT_TRUE(l.rec.clean);
	EXPECT_EQ(5000, km_pstate_max_positive_pid(km_log_pstate(l.log)));
}

} // namespace
