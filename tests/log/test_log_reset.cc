// Goal: km_log_reset_to (Kafka's truncateFullyAndStartAt, log.h) leaves an
// empty log that starts at the offset - segments, snapshots, aborted-txn
// entries, leader epochs and producer state of the old log gone; start, end,
// appended and durable at the offset; the partition's files exactly one
// empty segment named for the offset, an emptied leader-epoch-checkpoint and
// the unchanged partition.metadata - which then takes mirrored batches at
// or above the offset while refusing (overlap) or skipping (wholly below)
// those below it (R6), and local ones at the end, and which reopens the same,
// cleanly or after a crash. A crash at any point during the reset must
// reopen as either the old log, whole, or the new empty one: never a mix.
// Method: real files and io_uring (the crashes on tmpfs where there is one:
// see FastTempDir). For the crashes, a child process opens a
// copy of a prepared log and resets it under a seccomp filter that hands
// every file-changing system call (openat, write, pwrite64, ftruncate,
// fallocate, fsync, fdatasync, renameat, renameat2, unlinkat) to the parent
// as a user notification. The parent counts them and SIGKILLs the child
// while it waits before the n-th, for every n the reset makes, then reopens
// and checks which log it got and that the switch from old to new happens
// at exactly one step (the commit). Also killed: after the reset returned,
// and after appends and a roll that followed it.
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "log_check.h"

using namespace logtest;

namespace {

constexpr int64_t kPlain = 3;
constexpr int64_t kTxn = 4;

std::string ValueAt(int64_t base)
{
	return std::string(40 + (size_t)(base * 7 % 300), (char)('a' + base % 26));
}

std::vector<uint8_t> Epoch(int64_t base, int64_t pid, int32_t seq, int n,
			   int32_t leader_epoch, bool txn = false)
{
	std::string v = ValueAt(base);
	std::vector<km_record_spec> recs(n);
	for (int i = 0; i < n; i++)
		recs[i] = {"k", 1, v.data(), (int32_t)v.size(), 1000 + base + i,
			   nullptr, 0};
	km_batch_spec spec = {base, leader_epoch,
			      (int16_t)(txn ? KM_BATCH_ATTR_TRANSACTIONAL : 0),
			      pid, 0, seq};
	std::vector<uint8_t> out(km_records_build_size(recs.data(), n));
	km_records_build(out.data(), out.size(), &spec, recs.data(), n);
	return out;
}

void SmallSegments(km_log_config &c)
{
	c.segment_bytes = 2048;
	c.index_interval_bytes = 300;
	c.index_bytes_max = 1024;
	c.prealloc_bytes = 8192;
}

// The old log every test starts from: 0..62 in several segments (each roll
// writes a snapshot), leader epochs 1 and 3, an aborted transaction (a
// .txnindex entry) and a committed one. Returns its end offset.
int64_t FillOldLog(Log &l)
{
	int64_t off = 0;
	int32_t seq_plain = 0, seq_txn = 0;
	for (int i = 0; i < 20; i++) {
		bool txn = i >= 5 && i < 8;
		int64_t pid = txn ? kTxn : kPlain;
		int32_t &seq = txn ? seq_txn : seq_plain;
		Batch b(Epoch(off, pid, seq, 3, i < 10 ? 1 : 3, txn));
		EXPECT_EQ(1, l.Append(b));
		seq += 3;
		off += 3;
		if (i == 7 || i == 14) {
			if (i == 14) { // a committed transaction too
				Batch t(Epoch(off, kTxn, seq_txn, 1, 3, true));
				EXPECT_EQ(1, l.Append(t));
				seq_txn += 1;
				off += 1;
			}
			Batch m(Marker(off, kTxn, 0, i == 14));
			EXPECT_EQ(1, l.Append(m));
			off += 1;
		}
	}
	return off;
}

std::vector<std::string> SegmentFiles(int64_t base)
{
	std::vector<std::string> v;
	/* no .txnindex: a new segment holds no aborted transaction */
	for (const char *s : {".index", ".log", ".timeindex"})
		v.push_back(SegName(base, s));
	return v;
}

// The directory of a log just reset to `to` (and not closed yet).
void ExpectResetFiles(const std::string &dir, int64_t to,
		      const std::string &metadata)
{
	std::vector<std::string> want = SegmentFiles(to);
	want.push_back("leader-epoch-checkpoint");
	want.push_back("partition.metadata");
	EXPECT_EQ(want, ListDir(dir));
	EXPECT_EQ("0\n0\n", ReadText(dir + "/leader-epoch-checkpoint"));
	EXPECT_EQ(metadata, ReadText(dir + "/partition.metadata"));
	EXPECT_EQ(0u, ReadFile(dir + "/" + SegName(to, ".log")).size());
}

// Everything the read path and the offsets say about an empty log at `to`.
void ExpectEmptyAt(km_log *log, int64_t to)
{
	EXPECT_EQ(to, km_log_start_offset(log));
	EXPECT_EQ(to, km_log_end_offset(log));
	EXPECT_EQ(to, km_log_appended_offset(log));
	EXPECT_EQ(to, km_log_durable_offset(log));
	EXPECT_EQ(to, km_log_lso(log));
	EXPECT_EQ(0, km_log_error(log));
	std::vector<uint8_t> buf(1 << 16);
	km_log_read_result rd;
	EXPECT_EQ(0, km_log_read(log, to, INT64_MAX, 1 << 16, buf.data(),
				 buf.size(), &rd));
	EXPECT_EQ(0u, rd.batches);
	EXPECT_EQ(-ERANGE, km_log_read(log, to - 1, INT64_MAX, 1 << 16,
				       buf.data(), buf.size(), &rd));
	EXPECT_EQ(-ERANGE, km_log_read(log, 0, INT64_MAX, 1 << 16, buf.data(),
				       buf.size(), &rd));
	km_aborted_txn ab[4];
	EXPECT_EQ(0, km_log_aborted_txns(log, 0, INT64_MAX, ab, 4));
	int64_t found = 0;
	EXPECT_EQ(0, km_log_offset_for_time(log, 0, &found));
	EXPECT_EQ(-1, found);
	km_pstate *ps = km_log_pstate(log);
	EXPECT_EQ(0u, km_pstate_count(ps));
	km_producer_info pi;
	EXPECT_NE(0, km_pstate_get(ps, kPlain, &pi));
	EXPECT_NE(0, km_pstate_get(ps, kTxn, &pi));
}

// The batches of a read of [from, upto), as (base, last) pairs, CRC-checked.
std::vector<std::pair<int64_t, int64_t>> Offsets(km_log *log, int64_t from,
						 int64_t upto)
{
	std::vector<std::pair<int64_t, int64_t>> out;
	std::vector<uint8_t> all = ReadAll(log, from, upto);
	for (size_t at = 0; at < all.size();) {
		iovec iov = {&all[at], all.size() - at};
		km_chain ch = {&iov, 1};
		km_batch b;
		int rc = km_batch_parse(&b, &ch, km_chain_start(&ch),
					KM_BATCH_BYTES_MAX);
		if (rc <= 0) {
			ADD_FAILURE() << "unparsable at byte " << at;
			break;
		}
		out.push_back({km_batch_base_offset(&b), km_batch_last_offset(&b)});
		at += (size_t)rc;
	}
	return out;
}

TEST(Reset, EmptyLogAtTheOffsetThatMirrorsOnAndReopens)
{
	TempDir td;
	Log l(td.path, SmallSegments);
	int64_t old_end = FillOldLog(l);
	ASSERT_EQ(63, old_end);
	ASSERT_GE(Bases(l.dir, ".log").size(), 3u);
	ASSERT_FALSE(Bases(l.dir, ".snapshot").empty());
	km_aborted_txn ab[4];
	ASSERT_EQ(1, km_log_aborted_txns(l.log, 0, old_end, ab, 4));
	std::string metadata = ReadText(l.dir + "/partition.metadata");

	ASSERT_EQ(0, km_log_reset_to(l.log, 1000));
	ExpectEmptyAt(l.log, 1000);
	ExpectResetFiles(l.dir, 1000, metadata);

	// R6 from the new end: wholly below is a duplicate (skipped), an
	// overlap is refused, a gap is kept, local batches take the end.
	km_log_append_result res;
	Batch below(Epoch(990, kPlain, 0, 3, 5));
	EXPECT_EQ(1, l.Append(below, KM_ORIGIN_MIRROR, &res));
	EXPECT_EQ(1u, res.duplicates);
	EXPECT_EQ(0u, res.appended);
	EXPECT_EQ(1000, km_log_end_offset(l.log));
	Batch first(Epoch(1000, kPlain, 0, 3, 5));
	EXPECT_EQ(1, l.Append(first, KM_ORIGIN_MIRROR, &res));
	EXPECT_EQ(1000, res.first_offset);
	Batch straddle(Epoch(1002, kPlain, 3, 3, 5));
	EXPECT_EQ(KM_EOFFSET, l.Append(straddle));
	Batch gap(Epoch(1010, kPlain, 3, 2, 6));
	EXPECT_EQ(1, l.Append(gap));
	Batch local(Epoch(0, -1, -1, 1, 0));
	EXPECT_EQ(1, l.Append(local, KM_ORIGIN_CLIENT, &res));
	EXPECT_EQ(1012, res.first_offset);
	EXPECT_EQ(1013, km_log_end_offset(l.log));
	EXPECT_EQ(1013, km_log_durable_offset(l.log));
	using P = std::pair<int64_t, int64_t>;
	std::vector<P> want = {{1000, 1002}, {1010, 1011}, {1012, 1012}};
	EXPECT_EQ(want, Offsets(l.log, 1000, 1013));
	// Epochs start again from the reset (the local one above both).
	EXPECT_EQ("0\n3\n5 1000\n6 1010\n7 1012\n",
		  ReadText(l.dir + "/leader-epoch-checkpoint"));
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), kPlain, &pi));
	EXPECT_EQ(4, pi.last_seq);
	EXPECT_EQ(1011, pi.last_offset);

	// Clean reopen: the same log, from the offset.
	ASSERT_EQ(0, l.Close());
	EXPECT_EQ(std::vector<int64_t>{1013}, Bases(l.dir, ".snapshot"));
	l.Open();
	EXPECT_TRUE(l.rec.clean);
	EXPECT_EQ(1000, km_log_start_offset(l.log));
	EXPECT_EQ(1013, km_log_end_offset(l.log));
	EXPECT_EQ(want, Offsets(l.log, 1000, 1013));
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), kPlain, &pi));
	EXPECT_EQ(4, pi.last_seq);
	EXPECT_EQ(metadata, ReadText(l.dir + "/partition.metadata"));
}

// Reset below the end: the old batches at the same offsets never return.
TEST(Reset, BelowTheEndOldBatchesStayGone)
{
	TempDir td;
	Log l(td.path, SmallSegments);
	ASSERT_EQ(63, FillOldLog(l));
	ASSERT_EQ(0, km_log_reset_to(l.log, 10));
	ExpectEmptyAt(l.log, 10);
	Batch b(Epoch(10, kPlain, 100, 3, 9));
	ASSERT_EQ(1, l.Append(b));
	ASSERT_EQ(0, l.Close());
	l.Open();
	EXPECT_EQ(10, km_log_start_offset(l.log));
	EXPECT_EQ(13, km_log_end_offset(l.log));
	std::vector<std::pair<int64_t, int64_t>> want = {{10, 12}};
	EXPECT_EQ(want, Offsets(l.log, 10, 13));
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), kPlain, &pi));
	EXPECT_EQ(102, pi.last_seq) << "state is that of the new batch only";
	EXPECT_EQ(std::vector<int64_t>{10}, Bases(l.dir, ".log"));
	km_aborted_txn ab[4];
	EXPECT_EQ(0, km_log_aborted_txns(l.log, 0, INT64_MAX, ab, 4));
}

TEST(Reset, NegativeOffsetChangesNothing)
{
	TempDir td;
	Log l(td.path, SmallSegments);
	ASSERT_EQ(63, FillOldLog(l));
	std::vector<std::string> files = ListDir(l.dir);
	EXPECT_EQ(-EINVAL, km_log_reset_to(l.log, -1));
	EXPECT_EQ(0, km_log_error(l.log));
	EXPECT_EQ(0, km_log_start_offset(l.log));
	EXPECT_EQ(63, km_log_end_offset(l.log));
	EXPECT_EQ(files, ListDir(l.dir));
}

// ---- crashes ----

#if defined(__x86_64__)
constexpr uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
constexpr uint32_t kArch = 0;
#endif

// Calls that change files; the child waits before each for the parent.
std::vector<uint32_t> Watched()
{
	std::vector<uint32_t> v = {__NR_openat, __NR_write, __NR_pwrite64,
				   __NR_ftruncate, __NR_fallocate, __NR_fsync,
				   __NR_fdatasync, __NR_unlinkat, __NR_renameat2};
#ifdef __NR_renameat
	v.push_back(__NR_renameat);
#endif
	return v;
}

// Install the notifying filter. @return the listener fd, or -1.
int NotifyFilter()
{
	std::vector<uint32_t> nrs = Watched();
	std::vector<sock_filter> f;
	f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
	f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0));
	f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
	f.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
	for (size_t i = 0; i < nrs.size(); i++) // to the last: skip the rest + ALLOW
		f.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nrs[i],
				     (uint8_t)(nrs.size() - i), 0));
	f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
	f.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF));
	sock_fprog prog = {(unsigned short)f.size(), f.data()};
	if (kArch == 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		return -1;
	return (int)syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER,
			    SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
}

bool SendFd(int sock, int fd)
{
	char byte = 0, ctl[CMSG_SPACE(sizeof(int))] = {};
	iovec iov = {&byte, 1};
	msghdr m = {};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl;
	m.msg_controllen = sizeof(ctl);
	cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &m, 0) == 1;
}

int RecvFd(int sock)
{
	char byte, ctl[CMSG_SPACE(sizeof(int))] = {};
	iovec iov = {&byte, 1};
	msghdr m = {};
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	m.msg_control = ctl;
	m.msg_controllen = sizeof(ctl);
	pollfd p = {sock, POLLIN, 0};
	if (poll(&p, 1, 10000) != 1 || recvmsg(sock, &m, 0) != 1)
		return -1;
	cmsghdr *c = CMSG_FIRSTHDR(&m);
	int fd = -1;
	if (c != nullptr && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

constexpr int kResetTo = 5000;
constexpr int kSkip = 77;

// The child: open the log, then reset it with every file-changing call
// supervised; after the reset, optionally append (with a roll) and sync.
// Ends without closing the log: a crash as far as the files know.
[[noreturn]] void ResetChild(const std::string &data_dir, int sock, int hold,
			     bool append_after)
{
	km_uring ring;
	km_log *log;
	km_log_config cfg;
	km_log_config_defaults(&cfg, data_dir.c_str(), "t", 0);
	SmallSegments(cfg);
	cfg.flush_always = true;
	if (km_uring_init(&ring, 16) != 0 || km_log_open(&log, &cfg, &ring, nullptr) != 0)
		_exit(2);
	int listener = NotifyFilter();
	if (listener < 0)
		_exit(kSkip);
	if (!SendFd(sock, listener))
		_exit(3);
	close(listener);
	(void)hold; // held open until exit: the parent sees the exit as HUP
	if (km_log_reset_to(log, kResetTo) != 0)
		_exit(4);
	for (int i = 0; append_after && i < 12; i++) {
		std::vector<uint8_t> bytes = Epoch(kResetTo + i * 3, kPlain, i * 3, 3, 2);
		iovec iov = {bytes.data(), bytes.size()};
		km_chain ch = {&iov, 1};
		km_batch b;
		km_log_append_result res;
		if (km_batch_parse(&b, &ch, km_chain_start(&ch), KM_BATCH_BYTES_MAX) <= 0 ||
		    km_log_append_burst(log, &b, 1, KM_ORIGIN_MIRROR, &res) != 1 ||
		    km_log_sync(log) != 0)
			_exit(5);
	}
	_exit(0);
}

// What the parent saw of one child.
struct ChildRun {
	int calls = 0;	     // supervised calls the child began
	bool killed = false; // by us, before call number kill_at
	bool no_continue = false; // the kernel cannot let a call go on
	int status = 0;
};

// Answer the child's notifications, killing it before the kill_at-th
// (0: never). Ends when the child is gone.
ChildRun Supervise(pid_t pid, int listener, int hup, int kill_at)
{
	ChildRun r;
	for (int guard = 0; guard < 100000; guard++) {
		pollfd p[2] = {{listener, POLLIN, 0}, {hup, POLLIN, 0}};
		if (poll(p, 2, 10000) <= 0) {
			ADD_FAILURE() << "the child is stuck";
			kill(pid, SIGKILL);
			break;
		}
		if (p[0].revents & POLLIN) {
			seccomp_notif req;
			memset(&req, 0, sizeof(req));
			if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
				continue; // the child died meanwhile (ENOENT)
			if (++r.calls == kill_at) {
				kill(pid, SIGKILL); // it waits: the call never runs
				r.killed = true;
				break;
			}
			seccomp_notif_resp resp;
			memset(&resp, 0, sizeof(resp));
			resp.id = req.id;
			resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp) < 0 &&
			    errno == EINVAL) { // before Linux 5.5
				r.no_continue = true;
				kill(pid, SIGKILL);
				break;
			}
			continue;
		}
		if (p[1].revents & (POLLHUP | POLLIN))
			break;
	}
	EXPECT_EQ(pid, waitpid(pid, &r.status, 0));
	return r;
}

// Fork a child on a copy of base at dir, kill it before call kill_at.
ChildRun CrashRun(const std::string &base, const std::string &dir, int kill_at,
	     bool append_after = false)
{
	std::filesystem::copy(base, dir, std::filesystem::copy_options::recursive);
	int sv[2], hp[2];
	EXPECT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv));
	EXPECT_EQ(0, pipe2(hp, O_CLOEXEC));
	pid_t pid = fork();
	if (pid == 0) {
		close(sv[0]);
		close(hp[0]);
		ResetChild(dir, sv[1], hp[1], append_after);
	}
	close(sv[1]);
	close(hp[1]);
	ChildRun r;
	int listener = RecvFd(sv[0]);
	if (listener >= 0) {
		r = Supervise(pid, listener, hp[0], kill_at);
		close(listener);
	} else {
		EXPECT_EQ(pid, waitpid(pid, &r.status, 0));
	}
	close(sv[0]);
	close(hp[0]);
	return r;
}

// A prepared old log (closed cleanly), its content and files.
struct OldLog {
	std::string dir; // the data dir
	int64_t end = 0;
	std::vector<std::pair<int64_t, int64_t>> batches;
	std::vector<uint8_t> bytes;
	std::vector<std::string> files;
	std::string metadata, epochs;
};

OldLog Prepare(const std::string &data_dir)
{
	OldLog o;
	o.dir = data_dir;
	Log l(data_dir, SmallSegments);
	o.end = FillOldLog(l);
	o.batches = Offsets(l.log, 0, o.end);
	o.bytes = ReadAll(l.log, 0, o.end);
	EXPECT_EQ(0, l.Close());
	o.files = ListDir(data_dir + "/t-0");
	o.metadata = ReadText(data_dir + "/t-0/partition.metadata");
	o.epochs = ReadText(data_dir + "/t-0/leader-epoch-checkpoint");
	EXPECT_EQ("0\n2\n1 0\n3 31\n", o.epochs);
	return o;
}

// Reopen the log in data dir `dir` after a crash: the old log whole, or the
// new empty one. @return true if it is the new one.
bool CheckOneOrTheOther(const std::string &dir, const OldLog &old)
{
	Log l(dir, SmallSegments);
	EXPECT_NE(nullptr, l.log);
	if (l.log == nullptr)
		return false;
	bool reset = km_log_start_offset(l.log) == kResetTo;
	if (reset) {
		ExpectEmptyAt(l.log, kResetTo);
		ExpectResetFiles(l.dir, kResetTo, old.metadata);
		Batch b(Epoch(kResetTo, kPlain, 0, 3, 2));
		EXPECT_EQ(1, l.Append(b));
	} else {
		EXPECT_EQ(0, km_log_start_offset(l.log));
		EXPECT_EQ(old.end, km_log_end_offset(l.log));
		EXPECT_EQ(old.bytes, ReadAll(l.log, 0, old.end));
		km_aborted_txn ab[4];
		EXPECT_EQ(1, km_log_aborted_txns(l.log, 0, old.end, ab, 4));
		EXPECT_FALSE(Exists(l.dir + "/" + SegName(kResetTo, ".log")));
		EXPECT_EQ(old.epochs, ReadText(l.dir + "/leader-epoch-checkpoint"));
	}
	EXPECT_EQ(0, l.Close());
	if (!reset) { // closed again as the old log was: the same files
		EXPECT_EQ(old.files, ListDir(l.dir));
	}
	return reset;
}

TEST(ResetCrash, KilledBeforeEveryFileChangeOfTheReset)
{
	FastTempDir td;
	OldLog old = Prepare(td.path + "/base");
	// A full run first: how many supervised calls the reset makes.
	ChildRun full = CrashRun(old.dir, td.path + "/full", 0);
	if (full.no_continue ||
	    (WIFEXITED(full.status) && WEXITSTATUS(full.status) == kSkip))
		GTEST_SKIP() << "seccomp user notification unavailable";
	ASSERT_TRUE(WIFEXITED(full.status) && WEXITSTATUS(full.status) == 0)
		<< "status " << full.status;
	ASSERT_GT(full.calls, 10);
	// After the reset returned, unclosed: the new log.
	EXPECT_TRUE(CheckOneOrTheOther(td.path + "/full", old));

	int first_new = -1, olds = 0, news = 0;
	for (int n = 1; n <= full.calls; n++) {
		SCOPED_TRACE("killed before supervised call " + std::to_string(n) +
			     " of " + std::to_string(full.calls));
		std::string dir = td.path + "/k" + std::to_string(n);
		ChildRun r = CrashRun(old.dir, dir, n);
		ASSERT_TRUE(r.killed);
		ASSERT_TRUE(WIFSIGNALED(r.status) && WTERMSIG(r.status) == SIGKILL);
		bool now_new = CheckOneOrTheOther(dir, old);
		news += now_new;
		olds += !now_new;
		if (now_new && first_new < 0)
			first_new = n;
		// One commit point: once the new log shows, it stays.
		EXPECT_TRUE(first_new < 0 || now_new);
		std::filesystem::remove_all(dir);
		if (HasFailure())
			return;
	}
	EXPECT_GT(olds, 3) << "the crashes never hit the old side";
	EXPECT_GT(news, 3) << "the crashes never hit the new side";
	RecordProperty("kill_points", full.calls);
	RecordProperty("commit_at", first_new);
}

// A crash after the reset and appends that rolled: recovery replays the new
// segments only; the old log's snapshots are gone, the new roll's is there.
TEST(ResetCrash, KilledAfterAppendsThatFollowedIt)
{
	FastTempDir td;
	OldLog old = Prepare(td.path + "/base");
	ChildRun r = CrashRun(old.dir, td.path + "/run", 0, true);
	if (r.no_continue || (WIFEXITED(r.status) && WEXITSTATUS(r.status) == kSkip))
		GTEST_SKIP() << "seccomp user notification unavailable";
	ASSERT_TRUE(WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0);
	Log l(td.path + "/run", SmallSegments);
	EXPECT_FALSE(l.rec.clean);
	EXPECT_EQ(kResetTo, km_log_start_offset(l.log));
	EXPECT_EQ(kResetTo + 36, km_log_end_offset(l.log));
	std::vector<std::pair<int64_t, int64_t>> want;
	for (int i = 0; i < 12; i++)
		want.push_back({kResetTo + i * 3, kResetTo + i * 3 + 2});
	EXPECT_EQ(want, Offsets(l.log, kResetTo, kResetTo + 36));
	std::vector<int64_t> segs = Bases(l.dir, ".log");
	ASSERT_GE(segs.size(), 2u) << "the appends rolled";
	EXPECT_EQ(kResetTo, segs.front());
	for (int64_t s : Bases(l.dir, ".snapshot"))
		EXPECT_GT(s, kResetTo) << "an old snapshot survived";
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), kPlain, &pi));
	EXPECT_EQ(35, pi.last_seq);
	EXPECT_NE(0, km_pstate_get(km_log_pstate(l.log), kTxn, &pi));
	EXPECT_EQ("0\n1\n2 5000\n", ReadText(l.dir + "/leader-epoch-checkpoint"));
	EXPECT_EQ(old.metadata, ReadText(l.dir + "/partition.metadata"));
}

} // namespace
