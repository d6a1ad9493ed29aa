// Goal: a crash at any moment loses nothing that was reported durable and
// leaves nothing torn (R6, R7). A child process appends under flush=always
// (single batches and bursts, data of two producers, transactions with
// COMMIT/ABORT markers, segment rolls) and reports each durable offset to the
// parent through a pipe, written only after km_log_durable_offset() passed
// it. The parent SIGKILLs the child at a random moment - after a random
// number of reports plus a bounded busy poll on the pipe with a random
// budget - 60 times, on a fresh or a continuing log dir. After each kill,
// reopening (recovery) must leave: every reported offset present and
// CRC-valid through km_log_read + km_batch_parse, with the content the
// child wrote at that offset; every batch in every .log file parsing, with
// contiguous offsets and no torn tail; producer state and LSO equal to what
// the batches on disk imply; and, once closed, every .index entry pointing
// at the start of the batch whose last offset it names, and .timeindex
// entries naming the running maximum timestamp.
// Also: recovery starts from the newest producer snapshot (R7), and a torn
// tail in a segment below that snapshot - what a power loss can leave,
// since the snapshot is written at the roll before the old segment's data
// is synced - is still found and cut.
// Method: fork + pipe + SIGKILL, real files, real io_uring, real fdatasync.
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <random>

#include "log_check.h"

using namespace logtest;

namespace {

constexpr int64_t kPlain = 3;  // producer without transactions
constexpr int64_t kTxn = 4;    // transactional producer
constexpr int64_t kMapped = -7; // a mapped one, no transactions

void CrashConfig(km_log_config &c)
{
	c.segment_bytes = 12 * 1024;
	c.index_interval_bytes = 700;
	c.index_bytes_max = 4096;
	c.prealloc_bytes = 16 * 1024;
	c.flush_always = true;
}

// The value the child writes at a batch's base offset: the parent checks
// it byte for byte.
std::string ValueAt(int64_t base)
{
	return std::string(40 + (size_t)(base * 7 % 300), (char)('a' + base % 26));
}

std::vector<uint8_t> DataAt(int64_t base, int64_t pid, int32_t seq, int n,
			    bool txn)
{
	std::string v = ValueAt(base);
	std::vector<km_record_spec> recs(n);
	for (int i = 0; i < n; i++)
		recs[i] = {"k", 1, v.data(), (int32_t)v.size(), 1000 + base + i,
			   nullptr, 0};
	km_batch_spec spec = {base, 0,
			      (int16_t)(txn ? KM_BATCH_ATTR_TRANSACTIONAL : 0),
			      pid, 0, seq};
	std::vector<uint8_t> out(km_records_build_size(recs.data(), n));
	km_records_build(out.data(), out.size(), &spec, recs.data(), n);
	return out;
}

// The child: continue every producer from the recovered state, append
// forever (bounded), report each durable offset. Never returns.
[[noreturn]] void Child(const std::string &dir, int wfd, uint32_t seed)
{
	std::mt19937 rng(seed);
	Log l(dir, CrashConfig);
	if (l.log == nullptr)
		_exit(3);
	km_pstate *ps = km_log_pstate(l.log);
	std::map<int64_t, int32_t> seq;
	bool in_txn = false;
	for (int64_t p : {kPlain, kTxn, kMapped}) {
		km_producer_info pi;
		seq[p] = km_pstate_get(ps, p, &pi) == 0 ? pi.last_seq + 1 : 0;
		if (p == kTxn && km_pstate_get(ps, p, &pi) == 0)
			in_txn = pi.txn_first_offset >= 0;
	}
	int64_t off = km_log_end_offset(l.log);
	for (int round = 0; round < 100000; round++) {
		std::vector<std::unique_ptr<Batch>> keep;
		std::vector<km_batch> views;
		int k = 1 + (int)(rng() % 5);
		for (int j = 0; j < k; j++) {
			uint32_t r = rng() % 10;
			std::vector<uint8_t> b;
			if (r < 2 && in_txn) {
				km_ctrl_spec s = {off, 0, 1000 + off};
				b.resize(KM_CTRL_MARKER_BATCH_BYTES);
				km_ctrl_build_marker(b.data(), b.size(), &s, kTxn, 0,
						     rng() % 2, 0);
				in_txn = false;
				off += 1;
			} else {
				int64_t p = r < 5 ? kTxn : r < 8 ? kPlain : kMapped;
				int n = 1 + (int)(rng() % 3);
				b = DataAt(off, p, seq[p], n, p == kTxn);
				in_txn |= p == kTxn;
				seq[p] += n;
				off += n;
			}
			keep.emplace_back(new Batch(b));
			views.push_back(keep.back()->view);
		}
		km_log_append_result res;
		if (km_log_append_burst(l.log, views.data(), k, KM_ORIGIN_MIRROR,
					&res) != k)
			_exit(4);
		for (int guard = 0; km_log_durable_offset(l.log) < off; guard++) {
			if (guard > 100000 || km_uring_poll(&l.ring, true) < 0)
				_exit(5);
		}
		int64_t d = km_log_durable_offset(l.log);
		if (write(wfd, &d, sizeof(d)) != (ssize_t)sizeof(d))
			_exit(6);
	}
	_exit(0);
}

// What the batches on disk imply for the producers and the LSO.
struct Implied {
	std::map<int64_t, FileBatch> last_data; // newest data batch per pid
	int64_t open_from = -1;			 // kTxn's open txn
	int64_t end = 0;
};

// Walk every segment file: all must parse completely, offsets contiguous
// from 0, each file starting at its base; contents as the child wrote them.
Implied CheckFiles(const std::string &dir, std::vector<std::vector<FileBatch>> *segs)
{
	Implied im;
	std::vector<int64_t> bases = Bases(dir, ".log");
	EXPECT_FALSE(bases.empty());
	for (size_t i = 0; i < bases.size(); i++) {
		uint64_t tail;
		int err;
		std::vector<FileBatch> fb =
			WalkLog(dir + "/" + SegName(bases[i], ".log"), &tail, &err);
		EXPECT_EQ(0u, tail) << SegName(bases[i], ".log")
				    << ": unparsable tail (" << km_strerror(err) << ")";
		for (auto &b : fb) {
			EXPECT_EQ(im.end, b.base) << "offsets contiguous";
			EXPECT_LE(bases[i], b.base);
			if (b.control) {
				if (b.pid == kTxn)
					im.open_from = -1;
			} else {
				im.last_data[b.pid] = b;
				if (b.pid == kTxn && im.open_from < 0)
					im.open_from = b.base;
				std::string v = ValueAt(b.base);
				EXPECT_NE(std::search(b.bytes.begin(), b.bytes.end(),
						      v.begin(), v.end()),
					  b.bytes.end())
					<< "content at " << b.base;
			}
			im.end = b.last + 1;
		}
		if (segs)
			segs->push_back(fb);
	}
	return im;
}

// Index entries of closed (trimmed) segments against their batches.
void CheckIndexes(const std::string &dir,
		  const std::vector<std::vector<FileBatch>> &segs)
{
	std::vector<int64_t> bases = Bases(dir, ".log");
	ASSERT_EQ(bases.size(), segs.size());
	for (size_t i = 0; i < bases.size(); i++) {
		std::string p = dir + "/" + SegName(bases[i], ".");
		std::vector<uint8_t> idx = ReadFile(p + "index");
		std::vector<uint8_t> tix = ReadFile(p + "timeindex");
		EXPECT_EQ(0u, idx.size() % 8);
		EXPECT_EQ(0u, tix.size() % 12);
		std::map<uint64_t, const FileBatch *> at;
		std::map<int64_t, const FileBatch *> by_last;
		for (auto &b : segs[i]) {
			at[b.pos] = &b;
			by_last[b.last] = &b;
		}
		int64_t prev = -1;
		for (size_t e = 0; e + 8 <= idx.size(); e += 8) {
			int64_t off = bases[i] + (int32_t)GetBE(&idx[e], 4);
			uint64_t pos = GetBE(&idx[e + 4], 4);
			auto it = at.find(pos);
			ASSERT_NE(it, at.end()) << SegName(bases[i], ".index")
						<< " entry " << e / 8
						<< ": no batch starts at " << pos;
			EXPECT_EQ(it->second->last, off) << "entry names its LAST offset";
			EXPECT_GT(off, prev);
			prev = off;
		}
		int64_t prev_ts = -1;
		for (size_t e = 0; e + 12 <= tix.size(); e += 12) {
			int64_t ts = (int64_t)GetBE(&tix[e], 8);
			int64_t off = bases[i] + (int32_t)GetBE(&tix[e + 8], 4);
			auto it = by_last.find(off);
			ASSERT_NE(it, by_last.end()) << SegName(bases[i], ".timeindex")
						     << ": no batch ends at " << off;
			EXPECT_GT(ts, prev_ts);
			int64_t max = -1;
			for (auto &b : segs[i])
				if (b.last <= off)
					max = std::max(max, b.max_ts);
			EXPECT_EQ(max, ts) << "the running maximum at " << off;
			prev_ts = ts;
		}
	}
}

void CheckState(Log &l, const Implied &im)
{
	km_pstate *ps = km_log_pstate(l.log);
	EXPECT_EQ(im.end, km_log_end_offset(l.log));
	for (auto &kv : im.last_data) {
		km_producer_info pi;
		ASSERT_EQ(0, km_pstate_get(ps, kv.first, &pi)) << kv.first;
		EXPECT_EQ(kv.second.last_seq, pi.last_seq) << kv.first;
		EXPECT_EQ(kv.second.last, pi.last_offset) << kv.first;
	}
	km_producer_info pi;
	if (km_pstate_get(ps, kTxn, &pi) == 0) {
		EXPECT_EQ(im.open_from, pi.txn_first_offset);
	}
	EXPECT_EQ(im.open_from >= 0 ? im.open_from : im.end, km_log_lso(l.log));
}

TEST(Crash, SigkillAtRandomMoments)
{
	TempDir td;
	std::mt19937 rng(20261130);
	int dir_no = 0, late_reports = 0, torn_cuts = 0;
	std::string dir = td.path + "/d0";
	for (int kill_no = 0; kill_no < 60; kill_no++) {
		if (kill_no > 0 && rng() % 5 == 0)
			dir = td.path + "/d" + std::to_string(++dir_no);
		SCOPED_TRACE("kill " + std::to_string(kill_no) + " in " + dir);
		int fds[2];
		ASSERT_EQ(0, pipe(fds));
		pid_t pid = fork();
		ASSERT_GE(pid, 0);
		if (pid == 0) {
			close(fds[0]);
			Child(dir, fds[1], rng());
		}
		close(fds[1]);
		// Wait for a random number of reports (each one an fdatasync),
		// then spin a random budget of non-blocking polls: the kill
		// lands anywhere in the append / write / sync cycle.
		int64_t durable = 0, d;
		int want = (int)(rng() % 25);
		for (int got = 0; got < want;) {
			pollfd p = {fds[0], POLLIN, 0};
			if (poll(&p, 1, 1000) <= 0)
				break; // the child stalled or died: kill anyway
			if (read(fds[0], &d, sizeof(d)) != (ssize_t)sizeof(d))
				break;
			durable = std::max(durable, d);
			got++;
		}
		for (uint32_t spin = rng() % 20000; spin > 0; spin--) {
			pollfd p = {fds[0], POLLIN, 0};
			if (poll(&p, 1, 0) == 1 &&
			    read(fds[0], &d, sizeof(d)) == (ssize_t)sizeof(d))
				durable = std::max(durable, d);
		}
		ASSERT_EQ(0, kill(pid, SIGKILL));
		int status;
		ASSERT_EQ(pid, waitpid(pid, &status, 0));
		ASSERT_TRUE(WIFSIGNALED(status))
			<< "child ended by itself, status " << status;
		// Reports written before the kill still count.
		while (read(fds[0], &d, sizeof(d)) == (ssize_t)sizeof(d)) {
			durable = std::max(durable, d);
			late_reports++;
		}
		close(fds[0]);

		Log l(dir, CrashConfig);
		ASSERT_NE(nullptr, l.log);
		torn_cuts += l.rec.bytes_truncated > 0;
		EXPECT_FALSE(l.rec.corrupt_mid_log);
		int64_t leo = km_log_end_offset(l.log);
		ASSERT_GE(leo, durable) << "an offset reported durable is gone";
		// Every reported offset, through the read path, CRC-checked.
		std::vector<uint8_t> bytes = ReadAll(l.log, 0, leo, 1 << 14);
		int64_t next = 0;
		for (size_t at = 0; at < bytes.size();) {
			iovec iov = {&bytes[at], bytes.size() - at};
			km_chain ch = {&iov, 1};
			km_batch b;
			int rc = km_batch_parse(&b, &ch, km_chain_start(&ch),
						KM_BATCH_BYTES_MAX);
			ASSERT_GT(rc, 0) << "read back at " << next << ": "
					 << km_strerror(rc);
			ASSERT_EQ(next, km_batch_base_offset(&b));
			next = km_batch_last_offset(&b) + 1;
			at += (size_t)rc;
		}
		EXPECT_EQ(leo, next);
		std::vector<std::vector<FileBatch>> segs;
		Implied im = CheckFiles(l.dir, &segs);
		CheckState(l, im);
		ASSERT_EQ(0, l.Close());
		segs.clear();
		CheckFiles(dir + "/t-0", &segs);
		CheckIndexes(dir + "/t-0", segs);
		if (HasFailure())
			return; // the first broken state is the one to look at
	}
	RecordProperty("torn_cuts", torn_cuts);
	RecordProperty("late_reports", late_reports);
}

// R7: "rebuild producer state from the newest valid snapshot plus replay".
TEST(Recovery, StartsFromTheNewestSnapshot)
{
	TempDir td;
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(td.path, [](km_log_config &c) { c.segment_bytes = 2048; });
		for (int i = 0; i < 20; i++) {
			Batch b(DataAt(i * 2, kPlain, i * 2, 2, false));
			if (l.Append(b) != 1)
				_exit(1);
		}
		_exit(0); // no close
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	std::vector<int64_t> snaps = Bases(td.path + "/t-0", ".snapshot");
	ASSERT_GE(snaps.size(), 2u) << "one per roll";
	Log l(td.path, [](km_log_config &c) { c.segment_bytes = 2048; });
	EXPECT_FALSE(l.rec.clean);
	EXPECT_EQ(snaps.back(), l.rec.snapshot_offset);
	EXPECT_EQ((40 - snaps.back()) / 2, (int64_t)l.rec.batches_replayed);
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), kPlain, &pi));
	EXPECT_EQ(39, pi.last_seq);
	// Truncation drops the snapshots past the new end ("snapshots ...
	// rebuilt consistently"), so no later recovery can load one.
	ASSERT_EQ(6, km_log_truncate_to(l.log, 6, nullptr, nullptr));
	for (int64_t s : Bases(l.dir, ".snapshot"))
		EXPECT_LE(s, 6) << SegName(s, ".snapshot") << " outlived the truncation";
}

// Kill the calling process at its first unlinkat(2) or unlink(2).
void DieAtFirstUnlink()
{
	sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unlinkat, 2, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unlink, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	};
	sock_fprog prog = {(unsigned short)(sizeof(f) / sizeof(f[0])), f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
		_exit(77);
}

// A crash while a cleanly closed log is being opened - after the open has
// started changing files, at the moment it removes .kafka_cleanshutdown -
// must not leave files that the next open trusts as clean but that no
// longer match the log. (Found by Crash.SigkillAtRandomMoments: the open
// extends the active segment's indexes before it removes the marker.)
TEST(Recovery, DeathWhileOpeningACleanLog)
{
	TempDir td;
	std::vector<std::vector<FileBatch>> segs;
	{
		Log l(td.path, CrashConfig);
		for (int i = 0; i < 60; i++) {
			Batch b(DataAt(i * 2, kPlain, i * 2, 2, false));
			ASSERT_EQ(1, l.Append(b));
		}
		ASSERT_EQ(0, l.Close());
	}
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		DieAtFirstUnlink();
		km_uring ring;
		km_log *log;
		km_log_config cfg;
		km_log_config_defaults(&cfg, td.path.c_str(), "t", 0);
		CrashConfig(cfg);
		if (km_uring_init(&ring, 8) != 0)
			_exit(2);
		km_log_open(&log, &cfg, &ring, nullptr);
		_exit(3); // opened without removing the marker?
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
		GTEST_SKIP() << "seccomp unavailable";
	ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
		<< "the open must remove the clean-shutdown marker";

	Log l(td.path, CrashConfig);
	Implied im = CheckFiles(l.dir, nullptr);
	CheckState(l, im);
	EXPECT_EQ(120, km_log_end_offset(l.log));
	std::vector<uint8_t> buf(1 << 16);
	for (int64_t off = 0; off < 120; off += 7) {
		km_log_read_result rd;
		ASSERT_EQ(0, km_log_read(l.log, off, 120, 1, buf.data(), buf.size(), &rd));
		EXPECT_EQ(off - off % 2, rd.first_offset) << off;
	}
	ASSERT_EQ(0, l.Close());
	CheckFiles(l.dir, &segs);
	CheckIndexes(l.dir, segs);
}

// A power loss can keep a snapshot a roll wrote (and synced) while losing
// the unsynced tail of the segment below it, if the roll writes the
// snapshot before that data is durable. The child looks for that window -
// right after a burst that rolls, is <base>.snapshot on disk while the
// durable offset is still below base? - and if it exists, the parent plays
// the loss (that segment's tail cut mid-batch) and recovery must still find
// the torn batch though it lies below the snapshot. (A log that makes the
// data durable before writing the snapshot has no window: nothing to play.)
TEST(Recovery, TornTailBelowTheRollSnapshotIsCut)
{
	TempDir td;
	auto cfg = [](km_log_config &c) {
		c.segment_bytes = 2048;
		c.flush_always = false;
		c.flush_bytes = 1ull << 40;
		c.flush_interval_ms = 1u << 30;
	};
	int fds[2];
	ASSERT_EQ(0, pipe(fds));
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(td.path, cfg);
		std::vector<std::unique_ptr<Batch>> keep;
		std::vector<km_batch> v;
		for (int i = 0; i < 2; i++) { // 2 x ~530 bytes, synced
			keep.emplace_back(new Batch(Data(i, kPlain, 0, i, 1, false, 450)));
			v.push_back(keep.back()->view);
		}
		km_log_append_result res;
		if (km_log_append_burst(l.log, v.data(), 2, KM_ORIGIN_MIRROR, &res) != 2 ||
		    km_log_flush(l.log) != 0 || km_log_sync(l.log) != 0)
			_exit(1);
		int64_t d = km_log_durable_offset(l.log);
		v.clear();
		// 2 fills segment 0; 3 rolls; 4..6 go to segment 3.
		for (int i = 2; i < 7; i++) {
			keep.emplace_back(new Batch(Data(i, kPlain, 0, i, 1, false, 450)));
			v.push_back(keep.back()->view);
		}
		if (km_log_append_burst(l.log, v.data(), 5, KM_ORIGIN_MIRROR, &res) != 5)
			_exit(2);
		std::vector<int64_t> snaps = Bases(l.dir, ".snapshot");
		int64_t window[3] = {d, km_log_durable_offset(l.log),
				     snaps.empty() ? -1 : snaps.front()};
		if (write(fds[1], window, sizeof(window)) != (ssize_t)sizeof(window))
			_exit(3);
		if (km_log_sync(l.log) != 0)
			_exit(4);
		_exit(0); // no close
	}
	close(fds[1]);
	int64_t window[3];
	ASSERT_EQ((ssize_t)sizeof(window), read(fds[0], window, sizeof(window)));
	close(fds[0]);
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	int64_t synced = window[0], durable_at_roll = window[1], snap = window[2];
	ASSERT_EQ(2, synced);
	ASSERT_EQ(3, snap) << "the roll at 3 wrote its snapshot";
	if (durable_at_roll >= snap)
		return; // no window: the data below the snapshot was durable

	// The power loss: segment 0 keeps its synced part and half a batch.
	std::string seg0 = td.path + "/t-0/" + SegName(0, ".log");
	std::vector<FileBatch> fb = WalkLog(seg0);
	ASSERT_EQ(3u, fb.size());
	ASSERT_EQ(snap, fb.back().last + 1) << "segment 0 ends where the snapshot says";
	ASSERT_EQ(0, truncate(seg0.c_str(), (off_t)(fb[2].pos + fb[2].size / 2)));

	Log l(td.path, cfg);
	std::vector<std::vector<FileBatch>> segs;
	for (int64_t b : Bases(l.dir, ".log")) {
		uint64_t tail;
		WalkLog(l.dir + "/" + SegName(b, ".log"), &tail);
		EXPECT_EQ(0u, tail) << SegName(b, ".log") << " keeps a torn batch";
	}
	EXPECT_GE(km_log_end_offset(l.log), synced);
	EXPECT_EQ(2, km_log_end_offset(l.log)) << "cut at the torn batch";
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), kPlain, &pi));
	EXPECT_EQ(1, pi.last_seq) << "state from the batches that are there";
	std::vector<uint8_t> buf(1 << 16);
	km_log_read_result rd;
	EXPECT_EQ(0, km_log_read(l.log, 0, km_log_end_offset(l.log), 1 << 16,
				 buf.data(), buf.size(), &rd));
}

} // namespace
