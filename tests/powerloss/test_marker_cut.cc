/* Goal: the clean-shutdown markers of many logs at once (log_marker.c,
 * issue 17) keep R7 through a power cut at any step. A cut during a
 * batched close (km_log_close_many) leaves a marker only on a log whose
 * every file was synced first: no marker at all after a cut in steps 1-4,
 * all of them after step 5; a log with its marker holds every batch it
 * appended, opens without a scan (rec.clean), and into the same state and
 * log end a scan of the same files gives. A cut once the unmark before the
 * opens (km_log_unmark_many) returned, or after the first append that
 * followed, brings no marker back: every open scans, and the appended
 * batch is there.
 * Method: the logs' data dir is on lossyfs (lossyfs.c), which keeps only
 * what was fsync'd/fdatasync'd (names: once their directory was). A child
 * process opens kLogs logs on one io_uring, appends to some (a producer
 * each, so their snapshots change; the others stay idle) until durable,
 * and is SIGKILLed by the test hook km_log_marker_test_hook after step k;
 * the parent cuts the power, then opens every log from the backing
 * directory. Real files, real io_uring. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/log/log_check.h"
#include "tests/powerloss/lossyfs.h"
#include "tests/support/test_hooks.h"

#ifdef KM_TEST_HOOKS
extern "C" void (*km_log_marker_test_hook)(int step);
#endif

using namespace logtest;
using kmtest::LossyFs;

namespace {

/* More than one batch of a close (64 logs): logs 0..3 take appends,
 * the others stay idle. */
constexpr int kLogs = 70;
constexpr int kBusy = 4;

int g_die_at;

#ifdef KM_TEST_HOOKS
void DieAt(int step)
{
	if (step == g_die_at)
		raise(SIGKILL);
}
#endif

void Config(km_log_config &c, const std::string &dir, int p, int8_t marker)
{
	static std::string keep; /* km_log_config borrows the path */
	keep = dir;
	km_log_config_defaults(&c, keep.c_str(), "t", p);
	c.segment_bytes = 1 << 20;
	c.index_bytes_max = 64 * 1024;
	c.prealloc_bytes = 1 << 20;
	c.direct_io = TestDirectIo();
	c.marker = marker;
}

/* The batches log p holds after round r (0: none; each round adds 3). */
int64_t EndAfter(int p, int rounds)
{
	return p < kBusy ? (int64_t)rounds * 3 * (p + 1) : 0;
}

/* Child: append round r's batches (producer 100 + p) and wait until
 * durable. @return false on any failure. */
bool AppendRound(km_log *log, int p, int r)
{
	for (int64_t off = EndAfter(p, r - 1); off < EndAfter(p, r); off++) {
		Batch b(Data(off, 100 + p, 0, (int32_t)off, 1));
		km_log_append_result res;
		if (km_log_append_burst(log, &b.view, 1, KM_ORIGIN_MIRROR,
					&res) != 1 ||
		    km_log_flush(log) != 0 || km_log_sync(log) != 0)
			return false;
	}
	return km_log_durable_offset(log) == EndAfter(p, r);
}

/* Child: open every log (marks: what an unmark found, or NULL), append
 * round r, close them all together; die where the hook says. */
[[noreturn]] void Child(const std::string &dir, int r, int die_at,
			bool unmark, bool die_after_append)
{
	km_uring ring;
	static km_log *logs[kLogs];
	static km_log_unmark u[kLogs];

	g_die_at = die_at;
#ifdef KM_TEST_HOOKS
	km_log_marker_test_hook = DieAt;
#endif
	if (km_uring_init(&ring, 256) != 0)
		_exit(2);
	for (int p = 0; p < kLogs; p++)
		u[p] = { "t", p, KM_LOG_MARK_CHECK };
	if (unmark && km_log_unmark_many(dir.c_str(), u, kLogs) != 0)
		_exit(3);
	for (int p = 0; p < kLogs; p++) {
		km_log_config c;
		Config(c, dir, p, u[p].found);
		if (km_log_open(&logs[p], &c, &ring, nullptr) != 0)
			_exit(4);
		if (r > 0 && !AppendRound(logs[p], p, r))
			_exit(5);
	}
	if (die_after_append)
		raise(SIGKILL);
	_exit(km_log_close_many(logs, kLogs, nullptr) == 0 ? 0 : 6);
}

class MarkerCut : public ::testing::Test {
protected:
	void SetUp() override
	{
		KM_NEEDS_TEST_HOOKS();
		if (std::string why = kmtest::lossyfs_unavailable(); !why.empty())
			GTEST_SKIP() << why;
	}
	/* Run Child on the mount; cut the power unless it exited 0. */
	void Run(int r, int die_at, bool unmark, bool die_after_append)
	{
		ASSERT_EQ("", fs_.mount());
		pid_t pid = fork();
		ASSERT_GE(pid, 0);
		if (pid == 0)
			Child(fs_.path(), r, die_at, unmark, die_after_append);
		int st;
		ASSERT_EQ(pid, waitpid(pid, &st, 0));
		if (WIFEXITED(st)) {
			ASSERT_EQ(0, WEXITSTATUS(st)) << "child failed";
			ASSERT_EQ("", fs_.unmount());
			return;
		}
		ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
		std::string report;
		ASSERT_EQ("", fs_.cut(&report));
		EXPECT_NE(std::string::npos, report.find("0 restore errors"))
			<< report;
	}
	std::string Dir(int p) const
	{
		return back_.path + "/t-" + std::to_string(p);
	}
	bool Marked(int p) const
	{
		return Exists(Dir(p) + "/.kafka_cleanshutdown");
	}
	/* Open log p from the backing dir: what it says, and the state. */
	StateView Open(int p, bool *clean)
	{
		km_uring ring;
		km_log *log = nullptr;
		km_log_config c;
		km_log_recovery rec;
		StateView v;

		Config(c, back_.path, p, KM_LOG_MARK_CHECK);
		EXPECT_EQ(0, km_uring_init(&ring, 64));
		int rc = km_log_open(&log, &c, &ring, &rec);
		EXPECT_EQ(0, rc) << km_strerror(rc);
		if (rc != 0)
			return v;
		*clean = rec.clean;
		v = Capture(log, { 100 + p });
		EXPECT_EQ(0, km_log_close(log));
		km_uring_exit(&ring);
		return v;
	}
	/* A marked log opens without a scan into what a scan of the same
	 * files gives, holding all of round r. */
	void CheckMarked(int p, int r)
	{
		SCOPED_TRACE("log " + std::to_string(p));
		bool clean = false;
		StateView trusted = Open(p, &clean);
		EXPECT_TRUE(clean) << "a marked log must open without a scan";
		EXPECT_EQ(EndAfter(p, r), trusted.leo);
		ASSERT_EQ(0, unlink((Dir(p) + "/.kafka_cleanshutdown").c_str()));
		StateView scanned = Open(p, &clean);
		EXPECT_FALSE(clean);
		ExpectSameState(scanned, trusted, "clean open vs scan");
	}
	/* An unmarked log scans and keeps every batch made durable. */
	void CheckScanned(int p, int64_t end)
	{
		SCOPED_TRACE("log " + std::to_string(p));
		bool clean = true;
		StateView v = Open(p, &clean);
		EXPECT_FALSE(clean);
		EXPECT_EQ(end, v.leo);
	}

	TempDir back_, mnt_;
	LossyFs fs_{ back_.path, mnt_.path + "/m" };
};

/* Step k of the first batch of a close: a cut there leaves no marker
 * before step 5 made them durable; after it, the first batch's logs are
 * marked and the others not yet; a whole close (k = 6) marks all. Logs
 * made and closed once, then reopened (their markers taken by an unmark)
 * for a second round. */
TEST_F(MarkerCut, CloseCutAtEachStep)
{
	for (int k = 1; k <= 6; k++) {
		SCOPED_TRACE("cut after close step " + std::to_string(k));
		Run(1, 0, false, false); /* round 1, closed whole */
		for (int p = 0; p < kLogs; p++)
			ASSERT_TRUE(Marked(p)) << p;
		Run(2, k == 6 ? 0 : k, true, false);
		int marked = 0;
		for (int p = 0; p < kLogs; p++) {
			if (k < 5) {
				EXPECT_FALSE(Marked(p))
					<< "log " << p << ": marked before step 5";
			}
			if (k == 6) {
				EXPECT_TRUE(Marked(p)) << "log " << p;
			}
			if (Marked(p)) {
				marked++;
				CheckMarked(p, 2);
			} else {
				CheckScanned(p, EndAfter(p, 2));
			}
		}
		if (k >= 5) {
			EXPECT_GT(marked, 0) << "step 5 makes markers durable";
		}
		if (k == 5) {
			EXPECT_LT(marked, kLogs) << "the second batch closes later";
		}
		for (int p = 0; p < kLogs; p++)
			std::filesystem::remove_all(Dir(p));
	}
}

/* A cut once the unmark returned (before any append), and one after the
 * first appends that followed: no marker comes back. */
TEST_F(MarkerCut, UnmarkThenCut)
{
	for (bool appended : { false, true }) {
		SCOPED_TRACE(appended ? "cut after the appends" : "cut after the unmark");
		Run(1, 0, false, false);
		for (int p = 0; p < kLogs; p++)
			ASSERT_TRUE(Marked(p)) << p;
		Run(appended ? 2 : 0, appended ? 0 : 10, true, appended);
		for (int p = 0; p < kLogs; p++) {
			EXPECT_FALSE(Marked(p))
				<< "log " << p << ": the unmark was not durable";
			CheckScanned(p, EndAfter(p, appended ? 2 : 1));
		}
		for (int p = 0; p < kLogs; p++)
			std::filesystem::remove_all(Dir(p));
	}
}

} // namespace
