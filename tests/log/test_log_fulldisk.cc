// Goal: when the disk fills, or writes start failing, the log fails cleanly:
// an append the disk cannot hold is refused with a clear error code
// (-ENOSPC, named by km_strerror) and nothing of it written, the batches
// before it appended whole, the log itself still appendable (test_log_enospc
// has the rest of that contract: growth, repair, crash); the log closes
// without leaving I/O in flight, and everything below the durable offset
// reads back valid after a reopen. The space the log reserves with
// fallocate ahead of its writes (so an append cannot fail half-way) covers
// everything it writes - the mmapped index pages included, since a write
// into an unbacked page of a full filesystem is a SIGBUS, not an error code
// - and a sealed segment gives its unused reservation back. A failing write
// path (RLIMIT_FSIZE: -EFBIG from the write itself, not from fallocate) is
// sticky and clear.
// (Offsets may gap: the batch tried after the refusal is ahead of the rest.)
// Method: a 2 MiB tmpfs mounted for each test (root only: GTEST_SKIP with
// the reason otherwise), unmounted in TearDown even on failure; the parts
// that may die of a signal run in a child process, which reports what it saw
// through a pipe; real io_uring writes and fdatasync.
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "log_check.h"

using namespace logtest;

namespace {

class FullDisk : public ::testing::Test {
protected:
	std::string mnt_;
	bool mounted_ = false;

	void SetUp() override
	{
		char tmpl[] = "/tmp/kmirror-full-XXXXXX";
		ASSERT_NE(nullptr, mkdtemp(tmpl));
		mnt_ = tmpl;
		if (mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=2m") != 0) {
			int e = errno;
			rmdir(mnt_.c_str());
			GTEST_SKIP() << "cannot mount a 2 MiB tmpfs at " << mnt_ << ": "
				     << strerror(e) << " (needs root / CAP_SYS_ADMIN)";
		}
		mounted_ = true;
	}
	void TearDown() override
	{
		if (mounted_ && umount2(mnt_.c_str(), 0) != 0)
			umount2(mnt_.c_str(), MNT_DETACH);
		rmdir(mnt_.c_str());
	}
};

// What a child saw, sent back whole through a pipe.
struct Report {
	int stage; // how far it got
	int rc, error, again, close_rc;
	uint32_t busy_before_close, busy_after_close;
	int64_t durable, appended_batches;
	bool named;
};

// Runs fn(report) in a child; returns its report and exit status.
template <typename Fn> Report InChild(Fn fn, int *status)
{
	int fds[2];
	Report r{};
	if (pipe(fds) != 0) {
		ADD_FAILURE() << "pipe";
		return r;
	}
	pid_t pid = fork();
	if (pid == 0) {
		close(fds[0]);
		Report mine{};
		fn(mine, fds[1]);
		_exit(0);
	}
	close(fds[1]);
	Report got{};
	ssize_t n, total = 0;
	// The last complete report wins (the child may send several).
	while ((n = read(fds[0], (char *)&got + total, sizeof(got) - total)) > 0) {
		total += n;
		if (total == (ssize_t)sizeof(got)) {
			r = got;
			total = 0;
		}
	}
	close(fds[0]);
	waitpid(pid, status, 0);
	return r;
}

void Send(int fd, const Report &r)
{
	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(9);
}

void Tmpfs(km_log_config &c)
{
	c.segment_bytes = 256 * 1024;
	c.prealloc_bytes = 64 * 1024;
	c.index_bytes_max = 8 * 1024;
	c.index_interval_bytes = 4096;
	c.flush_always = true;
	c.keep_free_bytes = 0; // to the last page: 2 MiB hold little
}

std::string Signal(int status)
{
	if (WIFSIGNALED(status))
		return std::string("killed by ") + strsignal(WTERMSIG(status));
	return "exit " + std::to_string(WEXITSTATUS(status));
}

TEST_F(FullDisk, EnospcIsClearRefusesOnlyWhatDoesNotFitAndLosesNothingDurable)
{
	std::string dir = mnt_;
	int status;
	Report r = InChild(
		[&](Report &rep, int fd) {
			Log l(dir, Tmpfs);
			rep.stage = 1;
			// Bursts of 32 batches (~93 KiB, more than one 64 KiB
			// reservation step), not waiting for them: when the disk
			// fills, it is mid-burst, with that burst's first batches
			// queued and in flight.
			std::vector<std::unique_ptr<Batch>> keep;
			int64_t off = 0;
			int rc = 0;
			for (int i = 0; i < 500 && rc >= 0 && !km_log_error(l.log); i++) {
				std::vector<km_batch> v;
				for (int k = 0; k < 32; k++) {
					keep.emplace_back(new Batch(Data(
						off + 4 * k, 3, 0, (int32_t)(off + 4 * k), 4,
						false, 700)));
					v.push_back(keep.back()->view);
				}
				km_log_append_result res;
				for (int done = 0, g = 0; done < 32 && g < 100; g++) {
					rc = km_log_append_burst(l.log, v.data() + done,
								 32 - done, KM_ORIGIN_MIRROR, &res);
					rep.busy_before_close = km_uring_busy(&l.ring);
					if (rc < 0 || km_log_error(l.log))
						break;
					done += rc;
					rep.appended_batches += rc;
					// Short: the queue is full (0 now: wait), or
					// the next batch does not fit (retried at once,
					// its refusal comes with writes in flight).
					if (rc == 0)
						km_uring_poll(&l.ring, true);
				}
				off += 128;
				if (!km_log_error(l.log) && km_log_sync(l.log) == 0)
					rep.durable = km_log_durable_offset(l.log);
				Send(fd, rep); // progress, in case of a signal
			}
			if (rc >= 0)
				rc = km_log_error(l.log);
			rep.stage = 2;
			rep.rc = rc;
			rep.error = km_log_error(l.log);
			rep.named = strstr(km_strerror(rc), "No space") != nullptr;
			Batch again(Data(off + 100, 3, 0, 0, 1, false, 10));
			km_log_append_result res;
			rep.again = km_log_append_burst(l.log, &again.view, 1,
							KM_ORIGIN_MIRROR, &res);
			rep.durable = km_log_durable_offset(l.log);
			Send(fd, rep);
			rep.close_rc = l.Close(); // right away, I/O possibly in flight
			rep.busy_after_close = km_uring_busy(&l.ring);
			rep.stage = 3;
			Send(fd, rep);
			if (rep.busy_after_close)
				_exit(0); // the ring points into the freed log
		},
		&status);
	ASSERT_TRUE(WIFEXITED(status))
		<< Signal(status) << " after " << r.appended_batches
		<< " batches (stage " << r.stage << ")";
	ASSERT_EQ(3, r.stage);
	EXPECT_GT(r.appended_batches, 300) << "2 MiB hold more than that";
	EXPECT_EQ(-ENOSPC, r.rc) << km_strerror(r.rc);
	EXPECT_EQ(0, r.error) << "a refused batch fails the log: "
			      << km_strerror(r.error);
	EXPECT_TRUE(r.named) << km_strerror(r.rc);
	EXPECT_TRUE(r.again == 1 || r.again == -ENOSPC)
		<< "a small batch after it: " << km_strerror(r.again);
	ASSERT_GT(r.busy_before_close, 0u) << "the scenario: the error came mid-burst";
	EXPECT_EQ(0u, r.busy_after_close) << "km_log_close left I/O in flight";

	// Reopen (recovery): everything reported durable is there and valid.
	Report v = InChild(
		[&](Report &rep, int fd) {
			Log l(dir, Tmpfs);
			if (l.log == nullptr)
				_exit(2);
			rep.durable = km_log_end_offset(l.log);
			std::vector<uint8_t> all = ReadAll(l.log, 0, rep.durable);
			int64_t next = 0;
			for (size_t at = 0; at < all.size();) {
				iovec iov = {&all[at], all.size() - at};
				km_chain ch = {&iov, 1};
				km_batch b;
				int n = km_batch_parse(&b, &ch, km_chain_start(&ch),
						       KM_BATCH_BYTES_MAX);
				if (n <= 0 || km_batch_base_offset(&b) < next)
					break;
				next = km_batch_last_offset(&b) + 1;
				at += (size_t)n;
				rep.appended_batches++;
			}
			rep.rc = next == rep.durable ? 0 : -1;
			rep.stage = 4;
			Send(fd, rep);
		},
		&status);
	ASSERT_TRUE(WIFEXITED(status)) << "reopen on the full disk: " << Signal(status);
	ASSERT_EQ(4, v.stage) << "reopen failed";
	EXPECT_GE(v.durable, r.durable) << "durable offsets lost";
	EXPECT_EQ(0, v.rc) << "batches below the end do not all read back valid";
}

// The log reserved .log space; then something else fills the disk. Appends
// that fit the reservation must still work or fail with a code: the first
// .index / .timeindex entry needs a page of its own.
TEST_F(FullDisk, IndexEntryOnAFullDiskIsNotASigbus)
{
	std::string dir = mnt_;
	int status;
	Report r = InChild(
		[&](Report &rep, int fd) {
			Log l(dir, [](km_log_config &c) {
				Tmpfs(c);
				c.prealloc_bytes = 256 * 1024;
				c.index_interval_bytes = 1024;
			});
			Batch first(Data(0, 3, 0, 0, 1, false, 700));
			if (l.Append(first) != 1)
				_exit(2);
			// Fill every free page of the filesystem.
			int ff = open((dir + "/filler").c_str(), O_WRONLY | O_CREAT, 0644);
			std::vector<char> chunk(4096, 'x');
			while (write(ff, chunk.data(), chunk.size()) > 0) {
			}
			close(ff);
			rep.stage = 1;
			Send(fd, rep);
			int64_t off = 1;
			for (int i = 0; i < 20; i++) { // 20 x ~800 B: in the reservation
				Batch b(Data(off, 3, 0, (int32_t)off, 1, false, 700));
				rep.rc = l.Append(b);
				if (rep.rc != 1)
					break;
				off++;
				rep.appended_batches++;
				Send(fd, rep);
			}
			rep.error = km_log_error(l.log);
			rep.stage = 2;
			Send(fd, rep);
		},
		&status);
	ASSERT_GE(r.stage, 1) << "setup";
	EXPECT_TRUE(WIFEXITED(status))
		<< Signal(status) << " after " << r.appended_batches
		<< " batches appended within the reserved space: an index entry "
		   "written to an mmapped page the full filesystem cannot back";
	if (WIFEXITED(status)) {
		EXPECT_EQ(2, r.stage);
		EXPECT_TRUE(r.rc == 1 || r.rc == -ENOSPC) << km_strerror(r.rc);
	}
}

// "km_segment_seal: ... .log reservation released": a sealed segment keeps
// no preallocated blocks beyond its data, live or after a crash.
TEST_F(FullDisk, SealedSegmentsGiveBackTheirReservation)
{
	std::string dir = mnt_;
	auto cfg = [](km_log_config &c) {
		Tmpfs(c);
		c.segment_bytes = 64 * 1024;
		c.prealloc_bytes = 256 * 1024;
	};
	auto check = [&](const char *when) {
		std::string p = dir + "/t-0";
		std::vector<int64_t> bases = Bases(p, ".log");
		ASSERT_GE(bases.size(), 3u);
		for (size_t i = 0; i + 1 < bases.size(); i++) {
			struct stat st;
			ASSERT_EQ(0, stat((p + "/" + SegName(bases[i], ".log")).c_str(), &st));
			uint64_t used = (uint64_t)st.st_blocks * 512;
			uint64_t data = ((uint64_t)st.st_size + 4095) / 4096 * 4096;
			EXPECT_LE(used, data)
				<< when << ": " << SegName(bases[i], ".log") << " holds "
				<< used << " bytes of blocks for " << st.st_size
				<< " bytes of data";
		}
	};
	int status;
	InChild(
		[&](Report &, int) {
			Log l(dir, cfg);
			for (int i = 0; i < 150; i++) {
				Batch b(Data(i, 3, 0, i, 1, false, 1200));
				if (l.Append(b) != 1)
					_exit(2);
			}
			check("live, segments sealed by rolls");
			_exit(::testing::Test::HasFailure() ? 1 : 0); // crash: no close
		},
		&status);
	ASSERT_TRUE(WIFEXITED(status)) << Signal(status);
	EXPECT_EQ(0, WEXITSTATUS(status)) << "live check failed (see above)";
	{
		Log l(dir, cfg);
		EXPECT_FALSE(l.rec.clean);
		EXPECT_EQ(0, l.Close());
	}
	check("after a crash, recovery and a clean close");
}

// A write path that fails for another reason: RLIMIT_FSIZE makes the write
// itself fail with -EFBIG (fallocate with KEEP_SIZE is not limited by it).
TEST(WriteError, FailedWriteIsStickyAndNothingDurableIsLost)
{
	TempDir td;
	// Batches of 2 KiB: 10 of them end on a block boundary, so a direct
	// write (whole blocks) of the 10th still fits below the limit and the
	// 11th starts at it, as a buffered one does.
	int value = 1900;
	while (Data(0, 3, 0, 0, 1, false, value).size() < 2048)
		value++;
	uint32_t batch_bytes = (uint32_t)Data(0, 3, 0, 0, 1, false, value).size();
	ASSERT_EQ(2048u, batch_bytes);
	int status;
	int fds[2];
	ASSERT_EQ(0, pipe(fds));
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		signal(SIGXFSZ, SIG_IGN);
		Log l(td.path, [](km_log_config &c) { c.prealloc_bytes = 1 << 20; });
		// Exactly 10 batches fit below the limit.
		rlimit lim = {10 * (rlim_t)batch_bytes, 10 * (rlim_t)batch_bytes};
		if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
			_exit(2);
		Report rep{};
		int rc = 0;
		for (int i = 0; i < 12; i++) {
			Batch b(Data(i, 3, 0, i, 1, false, value));
			km_log_append_result res;
			rc = km_log_append_burst(l.log, &b.view, 1, KM_ORIGIN_MIRROR, &res);
			int s = km_log_sync(l.log);
			if (rc < 0 || s < 0) {
				rep.rc = s < 0 ? s : rc;
				break;
			}
			rep.appended_batches++;
		}
		rep.error = km_log_error(l.log);
		rep.durable = km_log_durable_offset(l.log);
		Batch again(Data(11, 3, 0, 11, 1, false, value));
		km_log_append_result res;
		rep.again = km_log_append_burst(l.log, &again.view, 1,
						KM_ORIGIN_MIRROR, &res);
		rep.close_rc = l.Close();
		rep.busy_after_close = km_uring_busy(&l.ring);
		if (write(fds[1], &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
			_exit(3);
		_exit(0);
	}
	close(fds[1]);
	Report rep{};
	ASSERT_EQ((ssize_t)sizeof(rep), read(fds[0], &rep, sizeof(rep)));
	close(fds[0]);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status)) << Signal(status);
	EXPECT_EQ(-EFBIG, rep.rc) << km_strerror(rep.rc);
	EXPECT_EQ(-EFBIG, rep.error) << km_strerror(rep.error);
	EXPECT_EQ(-EFBIG, rep.again) << "refused with the same code";
	EXPECT_EQ(10, rep.durable);
	EXPECT_NE(0, rep.close_rc) << "close reports the failure";
	EXPECT_EQ(0u, rep.busy_after_close);

	Log l(td.path);
	EXPECT_FALSE(l.rec.clean);
	EXPECT_EQ(10, km_log_end_offset(l.log));
	EXPECT_EQ(0u, l.rec.bytes_truncated) << "the failed write left nothing";
	std::vector<uint8_t> all = ReadAll(l.log, 0, 10);
	EXPECT_EQ(10u * batch_bytes, all.size());
	Batch next(Data(10, 3, 0, 10, 1, false, value));
	EXPECT_EQ(1, l.Append(next)) << "the log works again without the limit";
}

} // namespace
