// Goal: a full disk stops the log at batch granularity, not the log (issue
// 21 item 6). An append of more than fits appends the whole batches that
// fit - until the filesystem holds just the 1 MiB kept for a stop's writes
// (keep_free_bytes), whatever the fallocate step (64 MiB by default, more
// than the whole filesystem here) and the index preallocation; a roll's
// files and control batches may use that reserve - and refuses the rest
// with -ENOSPC, the log
// unchanged: no partial batch in the files, the log end and the durable
// offset at the last batch appended. Once the filesystem grows, the rest
// appends into the same open log; a space failure that did fail the log (a
// segment roll the disk stopped half-way) is repaired in place by
// km_log_clear_error. A crash in the full state recovers cleanly on the
// still-full filesystem, and so does a reopen after a clean close.
// Method: a tmpfs of its own per test (8 or 32 MiB; root only, GTEST_SKIP
// with the reason otherwise), grown with MS_REMOUNT; ~60 KiB mirrored
// batches of one producer at offsets 0, 1, 2, ..., 1 MiB of the filesystem
// kept free for a stop's writes (keep_free_bytes); the files are walked
// batch by batch (CRC-checked) after each phase; a crash is a child that
// exits without closing.
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <sys/wait.h>

#include <functional>
#include <memory>

#include "log_check.h"

using namespace logtest;

namespace {

const int kValue = 60000;
const int64_t kPid = 5;
const uint64_t kKeepFree = 1 << 20; // the default: kept for a stop's writes

uint64_t FreeBytes(const std::string &path)
{
	struct statvfs sv;
	return statvfs(path.c_str(), &sv) == 0
		       ? (uint64_t)sv.f_bavail * sv.f_frsize
		       : 0;
}

// A tmpfs mounted for the test, unmounted even on failure.
class Fs {
public:
	explicit Fs(uint64_t mib)
	{
		char tmpl[] = "/tmp/kmirror-enospc-XXXXXX";
		if (mkdtemp(tmpl) == nullptr) {
			error_ = "mkdtemp";
			return;
		}
		path_ = tmpl;
		if (mount("tmpfs", path_.c_str(), "tmpfs", 0, Size(mib).c_str()) != 0) {
			error_ = "cannot mount a " + std::to_string(mib) +
				 " MiB tmpfs at " + path_ + ": " + strerror(errno) +
				 " (needs root / CAP_SYS_ADMIN)";
			rmdir(path_.c_str());
			path_.clear();
		}
	}
	~Fs()
	{
		if (path_.empty())
			return;
		if (umount2(path_.c_str(), 0) != 0)
			umount2(path_.c_str(), MNT_DETACH);
		rmdir(path_.c_str());
	}
	const std::string &error() const { return error_; }
	const std::string &path() const { return path_; }
	// `mount -o remount,size=...`: the space comes back under the log.
	bool Grow(uint64_t mib)
	{
		return mount("tmpfs", path_.c_str(), "tmpfs", MS_REMOUNT,
			     Size(mib).c_str()) == 0;
	}
	// Leave no more than `leave` bytes free (a file takes the rest).
	void FillTo(uint64_t leave)
	{
		uint64_t free = FreeBytes(path_);
		int fd = open((path_ + "/filler").c_str(), O_CREAT | O_WRONLY, 0600);
		ASSERT_GE(fd, 0);
		struct stat st;
		ASSERT_EQ(0, fstat(fd, &st));
		if (free > leave) {
			ASSERT_EQ(0, posix_fallocate(fd, st.st_size,
						     (off_t)(free - leave)));
		}
		close(fd);
	}

private:
	static std::string Size(uint64_t mib)
	{
		return "size=" + std::to_string(mib) + "m";
	}
	std::string path_, error_;
};

// n batches of ~60 KiB at offsets 0..n-1, sequences continuing.
struct Feed {
	std::vector<std::unique_ptr<Batch>> own;
	std::vector<km_batch> views;
	explicit Feed(int n, int value = kValue)
	{
		for (int i = 0; i < n; i++) {
			own.emplace_back(new Batch(Data(i, kPid, 0, i, 1, false, value)));
			views.push_back(own.back()->view);
		}
	}
	uint64_t Bytes(size_t from, size_t to) const
	{
		uint64_t n = 0;
		for (size_t i = from; i < to; i++)
			n += own[i]->bytes.size();
		return n;
	}
};

// Append feed[*next..] in bursts of 32 until all are in or the log
// refuses; a short burst is retried at once, and after the write queue
// drains. @return 0 (all in) or the refusal.
int AppendUntilRefused(Log &l, Feed &f, size_t *next)
{
	for (int guard = 0; *next < f.views.size() && guard < 100000; guard++) {
		uint32_t want = (uint32_t)std::min<size_t>(32, f.views.size() - *next);
		km_log_append_result res;
		int rc = km_log_append_burst(l.log, &f.views[*next], want,
					     KM_ORIGIN_MIRROR, &res);
		if (rc < 0)
			return rc;
		if (rc == 0)
			km_uring_poll(&l.ring, true); // the write queue is full
		*next += (size_t)rc;
	}
	return 0;
}

// Every .log of the partition, walked: whole, CRC-valid batches at offsets
// 0..end-1 in order, nothing after the last one.
void ExpectWholeBatches(const std::string &part_dir, int64_t end,
			const std::string &when)
{
	SCOPED_TRACE(when);
	int64_t next = 0;
	for (int64_t base : Bases(part_dir, ".log")) {
		uint64_t tail = 0;
		std::vector<FileBatch> v =
			WalkLog(part_dir + "/" + SegName(base, ".log"), &tail);
		EXPECT_EQ(0u, tail) << SegName(base, ".log")
				    << ": bytes of a batch that is not whole";
		for (const FileBatch &b : v) {
			EXPECT_EQ(next, b.base) << SegName(base, ".log");
			next = b.last + 1;
		}
	}
	EXPECT_EQ(end, next) << "the files end elsewhere than the log";
}

void ExpectReadable(km_log *log, int64_t end)
{
	std::vector<uint8_t> all = ReadAll(log, 0, end);
	int64_t next = 0;
	for (size_t at = 0; at < all.size();) {
		iovec iov = {&all[at], all.size() - at};
		km_chain ch = {&iov, 1};
		km_batch b;
		int n = km_batch_parse(&b, &ch, km_chain_start(&ch),
				       KM_BATCH_BYTES_MAX);
		ASSERT_GT(n, 0) << "unparsable batch read back at offset " << next;
		ASSERT_EQ(next, km_batch_base_offset(&b));
		next = km_batch_last_offset(&b) + 1;
		at += (size_t)n;
	}
	EXPECT_EQ(end, next);
}

struct Case {
	uint64_t mib;
	uint64_t segment_bytes;
	const char *name;
};

std::ostream &operator<<(std::ostream &o, const Case &c) { return o << c.name; }

class Enospc : public ::testing::TestWithParam<Case> {
protected:
	void SetUp() override
	{
		fs_.reset(new Fs(GetParam().mib));
		if (!fs_->error().empty())
			GTEST_SKIP() << fs_->error();
	}
	// Kafka's defaults but the segment size: a 64 MiB fallocate step
	// and, with 1 GiB segments, 2 x 3 MiB of preallocated indexes.
	std::function<void(km_log_config &)> Cfg()
	{
		uint64_t seg = GetParam().segment_bytes;
		return [seg](km_log_config &c) {
			c.segment_bytes = seg;
			c.prealloc_bytes = 64ull << 20;
			c.index_bytes_max = 10 << 20;
			c.keep_free_bytes = kKeepFree;
			c.flush_always = false;
		};
	}
	int Batches() const { return (int)(GetParam().mib * 2 * 1048576 / kValue); }
	std::unique_ptr<Fs> fs_;
};

// What a full-disk phase must leave, the log still open.
void ExpectFullButConsistent(Log &l, const Feed &f, size_t next, int refusal,
			     uint64_t free_at_open, const std::string &mnt,
			     bool rolls)
{
	uint64_t batch = f.own[0]->bytes.size();
	uint64_t slack = 2 * batch + free_at_open / 50 + (256 << 10) + kKeepFree;
	EXPECT_TRUE(km_log_is_space_error(refusal)) << km_strerror(refusal);
	EXPECT_NE(std::string::npos,
		  std::string(km_strerror(refusal)).find("No space"));
	ASSERT_LT(next, f.views.size()) << "everything fit: no full disk";
	EXPECT_GE(f.Bytes(0, next) + slack, free_at_open)
		<< "appended " << next << " batches (" << f.Bytes(0, next)
		<< " bytes) of " << free_at_open << " bytes free";
	EXPECT_LT(FreeBytes(mnt), kKeepFree + batch + (64 << 10))
		<< "the disk is not full";
	// What a stop writes (a barrier, a snapshot, state files) still fits;
	// a roll's own files (index pages, snapshot) may take a few pages.
	EXPECT_GE(FreeBytes(mnt) + (64 << 10), kKeepFree)
		<< "data took the space kept for a stop";
	EXPECT_EQ((int64_t)next, km_log_end_offset(l.log))
		<< "the log end is past the last batch appended";
	// Without a roll, nothing can fail after the reservation: the
	// refusal leaves the log appendable.
	if (!rolls) {
		EXPECT_EQ(0, km_log_error(l.log)) << km_strerror(km_log_error(l.log));
	}
	int s = km_log_sync(l.log);
	EXPECT_TRUE(s == 0 || s == km_log_error(l.log)) << km_strerror(s);
	EXPECT_EQ((int64_t)next, km_log_appended_offset(l.log));
	if (km_log_error(l.log) == 0) {
		ASSERT_EQ(0, km_log_flush(l.log));
		ASSERT_EQ(0, km_log_sync(l.log));
		EXPECT_EQ((int64_t)next, km_log_durable_offset(l.log));
	}
	ExpectWholeBatches(l.dir, (int64_t)next, "full");
	ExpectReadable(l.log, (int64_t)next);
}

// Fill, grow, finish: all in one open log, no reopen.
TEST_P(Enospc, AppendsWhatFitsThenTheRestOnceTheFilesystemGrows)
{
	Feed f(Batches());
	Log l(fs_->path(), Cfg());
	ASSERT_NE(nullptr, l.log);
	uint64_t free_at_open = FreeBytes(fs_->path());
	size_t next = 0;
	int refusal = AppendUntilRefused(l, f, &next);
	bool rolls = GetParam().segment_bytes < (GetParam().mib << 20);
	ExpectFullButConsistent(l, f, next, refusal, free_at_open, fs_->path(),
				rolls);

	// Refused again while full, with the same code, nothing changed.
	size_t again = next;
	EXPECT_TRUE(km_log_is_space_error(AppendUntilRefused(l, f, &again)));
	EXPECT_EQ(next, again);

	ASSERT_TRUE(fs_->Grow(GetParam().mib * 4)) << strerror(errno);
	ASSERT_EQ(0, km_log_clear_error(l.log))
		<< "a space error must clear once space is back";
	ASSERT_EQ(0, AppendUntilRefused(l, f, &next));
	ASSERT_EQ(0, km_log_flush(l.log));
	ASSERT_EQ(0, km_log_sync(l.log));
	EXPECT_EQ((int64_t)f.views.size(), km_log_durable_offset(l.log));
	StateView live = Capture(l.log, {kPid});
	ASSERT_EQ(0, l.Close());

	l.Open();
	EXPECT_TRUE(l.rec.clean);
	ExpectSameState(live, Capture(l.log, {kPid}), "reopened");
	ExpectWholeBatches(l.dir, (int64_t)f.views.size(), "grown");
	ExpectReadable(l.log, (int64_t)f.views.size());
}

// Fill, then crash (no close) with the disk still full: recovery on the
// full filesystem loses nothing that was durable and cuts nothing.
TEST_P(Enospc, CrashWhileFullRecoversOnTheFullDisk)
{
	std::string mnt = fs_->path();
	auto cfg = Cfg();
	int fds[2];
	ASSERT_EQ(0, pipe(fds));
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		Feed f(Batches());
		Log l(mnt, cfg);
		size_t next = 0;
		int64_t durable = -1;
		if (km_log_is_space_error(AppendUntilRefused(l, f, &next)) &&
		    km_log_flush(l.log) == 0 && km_log_sync(l.log) == 0)
			durable = km_log_durable_offset(l.log);
		else if (km_log_error(l.log) != 0)
			durable = km_log_appended_offset(l.log);
		if (write(fds[1], &durable, sizeof(durable)) != sizeof(durable))
			_exit(3);
		_exit(0); // a crash: no close, the page cache as it is
	}
	close(fds[1]);
	int64_t durable = -2;
	ASSERT_EQ((ssize_t)sizeof(durable), read(fds[0], &durable, sizeof(durable)));
	close(fds[0]);
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	ASSERT_GT(durable, 0) << "the child mirrored nothing";
	fs_->FillTo(0); // whatever the child left, the disk is full now

	{
		Log l(mnt, cfg);
		ASSERT_NE(nullptr, l.log);
		EXPECT_FALSE(l.rec.clean);
		EXPECT_EQ(0u, l.rec.bytes_truncated) << "a partial batch was on disk";
		EXPECT_GE(km_log_end_offset(l.log), durable) << "durable data lost";
		ExpectWholeBatches(l.dir, km_log_end_offset(l.log), "recovered");
		ExpectReadable(l.log, km_log_end_offset(l.log));

		// Still full: the next batch is refused, the log kept.
		Feed f(Batches());
		size_t next = (size_t)km_log_end_offset(l.log);
		EXPECT_TRUE(km_log_is_space_error(AppendUntilRefused(l, f, &next)));
		ASSERT_TRUE(fs_->Grow(GetParam().mib * 4));
		ASSERT_EQ(0, km_log_clear_error(l.log));
		ASSERT_EQ(0, AppendUntilRefused(l, f, &next));
		ASSERT_EQ(0, l.Close());
	}
	Log l(mnt, cfg);
	ExpectWholeBatches(l.dir, Batches(), "after growing");
}

// A clean close on the full disk trims the indexes; what that freed is
// taken by someone else; the reopen must not need index_bytes_max again.
TEST_P(Enospc, CleanCloseOnAFullDiskReopensWithoutSpace)
{
	Feed f(Batches());
	Log l(fs_->path(), Cfg());
	size_t next = 0;
	ASSERT_TRUE(km_log_is_space_error(AppendUntilRefused(l, f, &next)));
	(void)l.Close(); // its snapshot may not fit: the reopen then rescans
	fs_->FillTo(0);
	l.Open();
	ASSERT_NE(nullptr, l.log);
	EXPECT_EQ((int64_t)next, km_log_end_offset(l.log));
	ExpectReadable(l.log, (int64_t)next);
	ASSERT_TRUE(fs_->Grow(GetParam().mib * 4));
	ASSERT_EQ(0, km_log_clear_error(l.log));
	ASSERT_EQ(0, AppendUntilRefused(l, f, &next));
	ASSERT_EQ(0, l.Close());
	l.Open();
	ExpectWholeBatches(l.dir, Batches(), "after growing");
}

INSTANTIATE_TEST_SUITE_P(
	Sizes, Enospc,
	::testing::Values(Case{ 8, 1ull << 30, "8MiB_1GiB_segments" },
			  Case{ 32, 1ull << 30, "32MiB_1GiB_segments" },
			  Case{ 32, 1ull << 20, "32MiB_1MiB_segments" }),
	[](const ::testing::TestParamInfo<Case> &i) { return std::string(i.param.name); });

// Segment rolls at every free-space level near full: whichever step of a
// roll the disk stops (the snapshot, the new segment's index files, the
// batch's blocks in it), the log either refuses the batch unchanged or
// fails with a space error that km_log_clear_error repairs once space is
// back, without a reopen; producer state then equals what a reopen
// rebuilds, and every batch is in the files once, whole.
TEST(EnospcRoll, EveryStepOfARollOnAFullDiskIsRepairedInPlace)
{
	int sticky = 0;
	for (uint64_t pages = 0; pages <= 12; pages++) {
		SCOPED_TRACE("pages left free: " + std::to_string(pages));
		Fs fs(2);
		if (!fs.error().empty())
			GTEST_SKIP() << fs.error();
		auto cfg = [](km_log_config &c) {
			c.segment_bytes = 64 * 1024;
			c.prealloc_bytes = 64 * 1024;
			c.index_bytes_max = 8 * 1024;
			c.keep_free_bytes = 0; // to the last page
			c.flush_always = true;
		};
		Feed f(40, 3000); // ~3 KiB: 21 per segment
		Log l(fs.path(), cfg);
		size_t next = 0;
		// The first segment whole, its blocks reserved up to its end.
		for (; next < 15; next++)
			ASSERT_EQ(1, l.Append(*f.own[next]));
		fs.FillTo(pages * 4096);
		int rc = AppendUntilRefused(l, f, &next);
		if (rc == 0)
			continue; // the roll found room: nothing to see here
		ASSERT_TRUE(km_log_is_space_error(rc)) << km_strerror(rc);
		sticky += km_log_error(l.log) != 0;
		EXPECT_EQ((int64_t)next, km_log_end_offset(l.log));
		int s = km_log_sync(l.log); // the writes queued before it
		EXPECT_TRUE(s == 0 || s == km_log_error(l.log)) << km_strerror(s);
		ExpectWholeBatches(l.dir, (int64_t)next, "full");
		ASSERT_TRUE(fs.Grow(8));
		ASSERT_EQ(0, km_log_clear_error(l.log));
		EXPECT_EQ(0, km_log_error(l.log));
		ASSERT_EQ(0, AppendUntilRefused(l, f, &next));
		ASSERT_EQ(0, km_log_sync(l.log));
		EXPECT_EQ(40, km_log_durable_offset(l.log));
		StateView live = Capture(l.log, {kPid});
		ASSERT_EQ(0, l.Close());
		l.Open();
		ExpectSameState(live, Capture(l.log, {kPid}), "reopened");
		ExpectWholeBatches(l.dir, 40, "grown");
	}
	EXPECT_GT(sticky, 0) << "no free-space level stopped a roll half-way: "
				"the repair was not exercised";
}

} // namespace
