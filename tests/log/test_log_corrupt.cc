// Goal: R7's "verify every batch's CRC and offsets, truncate a torn or
// corrupt tail" for damage that is not a torn tail. A batch damaged in the
// middle of the active segment (a flipped CRC-covered byte, a broken magic,
// a batch length made longer, shorter or absurd), in a sealed segment
// (mid-segment, and as that segment's last batch), or CRC-valid batches
// whose offsets go backwards, overlap, fall below their segment's base or
// overflow its 32-bit relative offsets: recovery reports corrupt_mid_log
// with the code, the segment file and the byte position of the first bad
// batch, the offset it cut at and the bytes it removed (the later segments
// included), logs it at ERROR as corruption, and leaves a log that is the
// log a fresh writer fed only the batches before the cut would have made:
// the same reads, producer state, LSO and aborted transactions, and once
// both are closed every file of the partition directory byte for byte.
// The log takes appends at the cut afterwards; a clean shutdown's open
// that meets a bad batch in the tail it reads recovers the same way. Torn
// tails (the file ends inside the last batch, its end zeroed, zeros after
// it) stay torn: corrupt_mid_log false, a WARN. And the boundary R7 draws
// ("scan segments after the recovery point"): damage below the newest
// producer snapshot is not looked at, as Kafka does not look below its
// recovery point; with that snapshot unusable the recovery point moves
// down and the damage is found.
// Method: a child process appends the batches (flush=always) and exits
// without closing (a crash); the parent damages the files with pwrite, or
// writes segment files from the batch builders itself, and reopens. Real
// files, a real io_uring.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>

#include "common/endian.h"
#include "log_check.h"

using namespace logtest;

namespace {

const std::set<int64_t> kPids = {5, -7};

struct Step {
	std::vector<uint8_t> bytes;
	int64_t base, last;
};

// Producer 5 plain (2 records a batch), mapped producer -7 transactional,
// ABORT and COMMIT in turn: the cut must also keep the aborted-transaction
// index and the LSO right.
std::vector<Step> Stream(int n)
{
	std::vector<Step> out;
	int64_t off = 0;
	int32_t seq5 = 0, seq7 = 0;
	for (int i = 0; i < n; i++) {
		Step s;
		switch (i % 4) {
		case 1:
			s.bytes = Data(off, -7, 0, seq7, 1, true, 150, 1000 + off);
			seq7 += 1;
			break;
		case 3:
			s.bytes = Marker(off, -7, 0, i % 8 == 7, 1000 + off);
			break;
		default:
			s.bytes = Data(off, 5, 0, seq5, 2, false, 150, 1000 + off);
			seq5 += 2;
		}
		Batch b(s.bytes);
		s.base = off;
		s.last = km_batch_last_offset(&b.view);
		off = s.last + 1;
		out.push_back(std::move(s));
	}
	return out;
}

using Tweak = std::function<void(km_log_config &)>;

Tweak Segments(uint64_t bytes)
{
	return [bytes](km_log_config &c) {
		c.segment_bytes = bytes;
		c.index_interval_bytes = 500;
		c.index_bytes_max = 4096;
		c.prealloc_bytes = 16 * 1024;
		c.flush_always = true;
	};
}

// Append steps in a child that exits without closing the log.
void WriteAndCrash(const std::string &data_dir, const Tweak &t,
		   const std::vector<Step> &steps)
{
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(data_dir, t);
		if (l.log == nullptr)
			_exit(1);
		for (auto &s : steps) {
			Batch b(s.bytes);
			if (l.Append(b) != 1)
				_exit(2);
		}
		_exit(::testing::Test::HasFailure() ? 3 : 0);
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

void Pwrite(const std::string &path, uint64_t pos, const std::vector<uint8_t> &b)
{
	int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
	ASSERT_GE(fd, 0) << path;
	ASSERT_EQ((ssize_t)b.size(), pwrite(fd, b.data(), b.size(), (off_t)pos));
	close(fd);
}

std::vector<uint8_t> BE32(uint32_t x)
{
	std::vector<uint8_t> v;
	Put32(v, x);
	return v;
}

void WriteFile(const std::string &path, const std::vector<uint8_t> &b)
{
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	ASSERT_GE(fd, 0) << path;
	ASSERT_EQ((ssize_t)b.size(), write(fd, b.data(), b.size()));
	close(fd);
}

std::string Hex(const std::vector<uint8_t> &b)
{
	std::string out;
	char h[4];
	for (size_t i = 0; i < b.size() && i < 256; i++) {
		snprintf(h, sizeof(h), "%02x", b[i]);
		out += h;
		if (i % 12 == 11)
			out += ' ';
	}
	return out + (b.size() > 256 ? "..." : "");
}

// Files of two closed partition directories, byte for byte (the topic id
// in partition.metadata is random per log).
void ExpectSameFiles(const std::string &a, const std::string &b)
{
	std::vector<std::string> fa = ListDir(a), fb = ListDir(b);
	EXPECT_EQ(fa, fb);
	for (auto &n : fa) {
		if (n == "partition.metadata")
			continue;
		std::vector<uint8_t> x = ReadFile(a + "/" + n),
				     y = ReadFile(b + "/" + n);
		EXPECT_TRUE(x == y) << n << " differs: " << Hex(x) << " vs "
				    << Hex(y);
	}
}

// What a log fed only steps[0, keep) looks like, closed: its state, its
// bytes, its directory.
struct Reference {
	TempDir td;
	StateView state;
	std::vector<uint8_t> bytes;
	std::string dir;

	Reference(const Tweak &t, const std::vector<Step> &steps, size_t keep)
	{
		Log l(td.path, t);
		for (size_t i = 0; i < keep; i++) {
			Batch b(steps[i].bytes);
			EXPECT_EQ(1, l.Append(b));
		}
		int64_t leo = km_log_end_offset(l.log);
		state = Capture(l.log, kPids);
		bytes = ReadAll(l.log, 0, leo);
		dir = l.dir;
		EXPECT_EQ(0, l.Close());
	}
};

// What recovery must have reported and logged for a cut.
struct Cut {
	bool mid;
	int code;
	std::string file;
	uint64_t pos;
	int64_t offset;
	uint64_t bytes;
};

void ExpectCut(const km_log_recovery &rec, const std::string &err, const Cut &c)
{
	EXPECT_FALSE(rec.clean);
	EXPECT_EQ(c.mid, rec.corrupt_mid_log);
	EXPECT_EQ(c.code, rec.corrupt_code)
		<< km_strerror(c.code) << " vs " << km_strerror(rec.corrupt_code);
	EXPECT_EQ(c.file, rec.corrupt_file);
	EXPECT_EQ(c.pos, rec.corrupt_position);
	EXPECT_EQ(c.offset, rec.truncated_at);
	EXPECT_EQ(c.bytes, rec.bytes_truncated);
	// What the operator sees: one line, at ERROR for corruption.
	std::string what = std::string(c.mid ? "corrupt" : "torn") +
			   " batch at position " + std::to_string(c.pos) + " of " +
			   c.file + " (offset " + std::to_string(c.offset) + ")";
	size_t at = err.find(what);
	ASSERT_NE(std::string::npos, at) << err;
	size_t bol = err.rfind('\n', at);
	std::string line = err.substr(bol == std::string::npos ? 0 : bol + 1,
				      err.find('\n', at) - (bol + 1));
	EXPECT_NE(std::string::npos,
		  line.find(c.mid ? " ERROR log: " : " WARN  log: "))
		<< line;
	EXPECT_NE(std::string::npos,
		  line.find("truncating " + std::to_string(c.bytes) + " bytes"))
		<< line;
	EXPECT_EQ(std::string::npos,
		  err.find(c.mid ? "torn batch at" : "corrupt batch at"))
		<< err;
}

// The recovered log against the reference: reads, state, then an append
// at the cut, then (both closed) the files.
// gone: files of the reference that recovery deleted (unusable snapshots).
void ExpectLikeReference(Log &l, Reference &ref, const std::vector<Step> &steps,
			 size_t keep, const Tweak &t,
			 const std::vector<std::string> &gone = {})
{
	int64_t end = keep ? steps[keep - 1].last + 1 : 0;
	EXPECT_EQ(end, km_log_end_offset(l.log));
	EXPECT_EQ(end, km_log_durable_offset(l.log));
	for (int64_t b : Bases(l.dir, ".log")) {
		uint64_t tail;
		WalkLog(l.dir + "/" + SegName(b, ".log"), &tail);
		EXPECT_EQ(0u, tail) << SegName(b, ".log") << " keeps bad bytes";
	}
	EXPECT_EQ(ref.bytes, ReadAll(l.log, 0, end));
	ExpectSameState(ref.state, Capture(l.log, kPids), "after the cut");
	ASSERT_EQ(0, l.Close());
	for (auto &n : gone) {
		EXPECT_FALSE(Exists(l.dir + "/" + n)) << n;
		EXPECT_EQ(0, unlink((ref.dir + "/" + n).c_str())) << n;
	}
	ExpectSameFiles(ref.dir, l.dir);

	// Appendable at the cut: the next step goes in, durable, and stays.
	l.Open();
	EXPECT_TRUE(l.rec.clean);
	Batch next(steps[keep].bytes);
	ASSERT_EQ(1, l.Append(next));
	EXPECT_EQ(steps[keep].last + 1, km_log_durable_offset(l.log));
	ASSERT_EQ(0, l.Close());
	Log again(l.data_dir_, t);
	EXPECT_EQ(steps[keep].last + 1, km_log_end_offset(again.log));
	EXPECT_EQ(0u, again.rec.bytes_truncated);
}

// ---- damage in the middle of the active segment ----

struct Damage {
	const char *name;
	int code;
	// The bytes to write over the batch at pos (size bytes long).
	std::function<std::pair<uint64_t, std::vector<uint8_t>>(
		const FileBatch &)> poke;
};

const Damage kDamages[] = {
	{"CrcCoveredByteFlipped", KM_EBADCRC,
	 [](const FileBatch &b) {
		 return std::make_pair(b.pos + b.size - 3,
				       std::vector<uint8_t>{(uint8_t)~b.bytes[b.size - 3]});
	 }},
	{"MagicNot2", KM_EBADMAGIC,
	 [](const FileBatch &b) {
		 return std::make_pair(b.pos + KM_BATCH_OFF_MAGIC,
				       std::vector<uint8_t>{1});
	 }},
	// The length now ends inside the next batch: the CRC is computed
	// over the wrong bytes, and the next batch is not where it says.
	{"LengthLonger", KM_EBADCRC,
	 [](const FileBatch &b) {
		 return std::make_pair(b.pos + KM_BATCH_OFF_LENGTH,
				       BE32(b.size - KM_BATCH_LOG_OVERHEAD + 40));
	 }},
	{"LengthShorter", KM_EBADCRC,
	 [](const FileBatch &b) {
		 return std::make_pair(b.pos + KM_BATCH_OFF_LENGTH,
				       BE32(b.size - KM_BATCH_LOG_OVERHEAD - 40));
	 }},
	{"LengthBelowTheHeader", KM_EBATCHLEN,
	 [](const FileBatch &b) {
		 return std::make_pair(b.pos + KM_BATCH_OFF_LENGTH, BE32(20));
	 }},
	{"LengthAbsurd", KM_EBATCHMAX,
	 [](const FileBatch &b) {
		 return std::make_pair(b.pos + KM_BATCH_OFF_LENGTH,
				       BE32(0x7ffffff0u));
	 }},
	// Longer than what is left of the file: it looks like a batch the
	// file ends inside, but valid batches follow it.
	{"LengthPastTheFileEnd", -ENODATA,
	 [](const FileBatch &b) {
		 return std::make_pair(b.pos + KM_BATCH_OFF_LENGTH,
				       BE32(1u << 20));
	 }},
};

void PrintTo(const Damage &d, std::ostream *os) { *os << d.name; }

class MidActive : public ::testing::TestWithParam<Damage> {};

TEST_P(MidActive, ReportedAsCorruptionCutAndLikeAFreshLog)
{
	const Damage &d = GetParam();
	const Tweak t = Segments(1 << 20);
	std::vector<Step> steps = Stream(12);
	TempDir td;
	WriteAndCrash(td.path, t, steps);
	ASSERT_FALSE(HasFatalFailure());
	std::string seg = td.path + "/t-0/" + SegName(0, ".log");
	std::vector<FileBatch> fb = WalkLog(seg);
	ASSERT_EQ(12u, fb.size());
	uint64_t file_bytes = ReadFile(seg).size();
	const size_t bad = 6; // producer 5's, after an aborted transaction
	auto [at, bytes] = d.poke(fb[bad]);
	Pwrite(seg, at, bytes);

	testing::internal::CaptureStderr();
	Log l(td.path, t);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(nullptr, l.log);
	ExpectCut(l.rec, err,
		  {true, d.code, SegName(0, ".log"), fb[bad].pos, steps[bad].base,
		   file_bytes - fb[bad].pos});
	EXPECT_EQ(0, l.rec.recovery_point);
	Reference ref(t, steps, bad);
	ExpectLikeReference(l, ref, steps, bad, t);
}

INSTANTIATE_TEST_SUITE_P(Damages, MidActive, ::testing::ValuesIn(kDamages),
			 [](const ::testing::TestParamInfo<Damage> &i) {
				 return std::string(i.param.name);
			 });

// A clean shutdown is trusted, but the open still reads the active
// segment from its last index entry to find the log end: a bad batch there
// sends it to full recovery instead. With no index entry at all (the
// interval above the segment's size) that is the whole segment.
TEST(CleanShutdown, DamageInTheTailItReadsFallsBackToRecovery)
{
	const Tweak t = [](km_log_config &c) {
		Segments(1 << 20)(c);
		c.index_interval_bytes = 1 << 20;
	};
	std::vector<Step> steps = Stream(12);
	TempDir td;
	{
		Log l(td.path, t);
		for (auto &st : steps) {
			Batch b(st.bytes);
			ASSERT_EQ(1, l.Append(b));
		}
		ASSERT_EQ(0, l.Close());
	}
	std::string seg = td.path + "/t-0/" + SegName(0, ".log");
	std::vector<FileBatch> fb = WalkLog(seg);
	ASSERT_EQ(12u, fb.size());
	uint64_t file_bytes = ReadFile(seg).size();
	const size_t bad = 6;
	Pwrite(seg, fb[bad].pos + fb[bad].size - 3,
	       {(uint8_t)~fb[bad].bytes[fb[bad].size - 3]});

	testing::internal::CaptureStderr();
	Log l(td.path, t);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(nullptr, l.log);
	ExpectCut(l.rec, err,
		  {true, KM_EBADCRC, SegName(0, ".log"), fb[bad].pos,
		   steps[bad].base, file_bytes - fb[bad].pos});
	Reference ref(t, steps, bad);
	ExpectLikeReference(l, ref, steps, bad, t);
}

// ---- torn tails stay torn ----

struct Torn {
	const char *name;
	int code;
	// Change the file whose last batch is last; return the bytes the
	// file then has from last.pos on.
	std::function<uint64_t(const std::string &, const FileBatch &)> tear;
};

const Torn kTorns[] = {
	{"FileEndsInsideTheLastBatch", -ENODATA,
	 [](const std::string &path, const FileBatch &b) {
		 EXPECT_EQ(0, truncate(path.c_str(), (off_t)(b.pos + b.size / 2)));
		 return (uint64_t)b.size / 2;
	 }},
	// A crash can keep a write's size but not all of its data.
	{"LastBatchEndZeroed", KM_EBADCRC,
	 [](const std::string &path, const FileBatch &b) {
		 Pwrite(path, b.pos + b.size / 2,
			std::vector<uint8_t>(b.size - b.size / 2, 0));
		 return (uint64_t)b.size;
	 }},
	{"ZerosAfterTheLastBatch", KM_EBATCHLEN,
	 [](const std::string &path, const FileBatch &b) {
		 Pwrite(path, b.pos + b.size, std::vector<uint8_t>(4096, 0));
		 return (uint64_t)4096;
	 }},
};

void PrintTo(const Torn &t, std::ostream *os) { *os << t.name; }

class TornTail : public ::testing::TestWithParam<Torn> {};

TEST_P(TornTail, StaysTornAndCut)
{
	const Torn &tt = GetParam();
	const Tweak t = Segments(1 << 20);
	std::vector<Step> steps = Stream(8);
	TempDir td;
	WriteAndCrash(td.path, t, steps);
	ASSERT_FALSE(HasFatalFailure());
	std::string seg = td.path + "/t-0/" + SegName(0, ".log");
	std::vector<FileBatch> fb = WalkLog(seg);
	ASSERT_EQ(8u, fb.size());
	// Zeros after the last batch are cut where the zeros start.
	bool after = tt.code == KM_EBATCHLEN;
	size_t bad = after ? 8 : 7;
	uint64_t pos = after ? fb[7].pos + fb[7].size : fb[7].pos;
	uint64_t cut_bytes = tt.tear(seg, fb[7]);
	// A direct write's zeros past the batch are cut with it.
	if (TestDirectIo())
		cut_bytes = ReadFile(seg).size() - pos;

	testing::internal::CaptureStderr();
	Log l(td.path, t);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(nullptr, l.log);
	ExpectCut(l.rec, err,
		  {false, tt.code, SegName(0, ".log"), pos,
		   after ? steps[7].last + 1 : steps[7].base, cut_bytes});
	if (bad < steps.size()) {
		Reference ref(t, steps, bad);
		ExpectLikeReference(l, ref, steps, bad, t);
	} else {
		EXPECT_EQ(steps[7].last + 1, km_log_end_offset(l.log));
	}
}

INSTANTIATE_TEST_SUITE_P(Tails, TornTail, ::testing::ValuesIn(kTorns),
			 [](const ::testing::TestParamInfo<Torn> &i) {
				 return std::string(i.param.name);
			 });

// ---- damage in a sealed segment ----

// 2 KiB segments of ~6 batches: 40 steps make 7 or so segments, each with
// the producer snapshot its roll wrote.
struct Sealed {
	const Tweak t = Segments(2048);
	std::vector<Step> steps = Stream(40);
	TempDir td;
	std::string dir;
	std::vector<int64_t> bases;

	void Write()
	{
		WriteAndCrash(td.path, t, steps);
		dir = td.path + "/t-0";
		bases = Bases(dir, ".log");
		ASSERT_GE(bases.size(), 4u);
		EXPECT_EQ(std::vector<int64_t>(bases.begin() + 1, bases.end()),
			  Bases(dir, ".snapshot"))
			<< "a snapshot per roll";
	}
	// The step whose batch starts at base.
	size_t StepAt(int64_t base) const
	{
		for (size_t i = 0; i < steps.size(); i++)
			if (steps[i].base == base)
				return i;
		ADD_FAILURE() << "no batch at " << base;
		return 0;
	}
	uint64_t SizeOf(int64_t base) const
	{
		return ReadFile(dir + "/" + SegName(base, ".log")).size();
	}
	// Flip a byte in every snapshot above base (unusable: recovery falls
	// back to the one at base).
	void SpoilSnapshotsAbove(int64_t base)
	{
		for (int64_t s : Bases(dir, ".snapshot"))
			if (s > base) {
				std::string p = dir + "/" + SegName(s, ".snapshot");
				std::vector<uint8_t> f = ReadFile(p);
				ASSERT_GT(f.size(), 10u);
				Pwrite(p, 8, {(uint8_t)~f[8]});
			}
	}
};

// R7 scans from the recovery point, the newest snapshot: a sealed segment
// below it is trusted, as Kafka trusts the segments below its recovery
// point. The damage stays where it is; nothing is reported or cut.
TEST(SealedSegment, BelowTheRecoveryPointIsNotScanned)
{
	Sealed s;
	s.Write();
	ASSERT_FALSE(HasFatalFailure());
	int64_t b1 = s.bases[1];
	std::string seg = s.dir + "/" + SegName(b1, ".log");
	std::vector<FileBatch> fb = WalkLog(seg);
	ASSERT_GE(fb.size(), 3u);
	Pwrite(seg, fb[1].pos + fb[1].size - 3, {(uint8_t)~fb[1].bytes[fb[1].size - 3]});

	Log l(s.td.path, s.t);
	EXPECT_FALSE(l.rec.clean);
	EXPECT_EQ(s.bases.back(), l.rec.recovery_point);
	EXPECT_EQ(s.bases.back(), l.rec.snapshot_offset);
	EXPECT_EQ(s.steps.size() - s.StepAt(s.bases.back()), l.rec.batches_scanned);
	EXPECT_EQ(-1, l.rec.truncated_at);
	EXPECT_EQ(0u, l.rec.bytes_truncated);
	EXPECT_FALSE(l.rec.corrupt_mid_log);
	EXPECT_EQ(s.steps.back().last + 1, km_log_end_offset(l.log));
	int err = 0;
	EXPECT_EQ(1u, WalkLog(seg, nullptr, &err).size());
	EXPECT_EQ(KM_EBADCRC, err) << "the damage is still there";
}

// With the newer snapshots unusable the recovery point moves down to the
// snapshot at segment rp (none for 0: the first segment, empty state): the
// damaged batch in the middle of sealed segment k (>= rp) is corruption;
// the rest of k and every later segment go, the rescanned segments below k
// are sealed segments again (their final time index entry included).
void MidSealedSegment(size_t rp, size_t k)
{
	Sealed s;
	s.Write();
	ASSERT_FALSE(::testing::Test::HasFatalFailure());
	int64_t bk = s.bases[k];
	std::string seg = s.dir + "/" + SegName(bk, ".log");
	std::vector<FileBatch> fb = WalkLog(seg);
	ASSERT_GE(fb.size(), 4u);
	size_t bad = s.StepAt(fb[2].base);
	Pwrite(seg, fb[2].pos + KM_BATCH_OFF_MAGIC, {0});
	s.SpoilSnapshotsAbove(s.bases[rp]);
	uint64_t cut = s.SizeOf(bk) - fb[2].pos;
	for (size_t i = k + 1; i < s.bases.size(); i++)
		cut += s.SizeOf(s.bases[i]);

	testing::internal::CaptureStderr();
	Log l(s.td.path, s.t);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(nullptr, l.log);
	ExpectCut(l.rec, err,
		  {true, KM_EBADMAGIC, SegName(bk, ".log"), fb[2].pos,
		   s.steps[bad].base, cut});
	EXPECT_EQ(s.bases[rp], l.rec.recovery_point);
	EXPECT_EQ(rp > 0 ? s.bases[rp] : -1, l.rec.snapshot_offset);
	EXPECT_EQ(std::vector<int64_t>(s.bases.begin(), s.bases.begin() + k + 1),
		  Bases(l.dir, ".log"));
	for (const char *suffix : {".index", ".timeindex", ".snapshot"})
		for (int64_t b : Bases(l.dir, suffix))
			EXPECT_LE(b, bk) << SegName(b, suffix) << " outlived the cut";
	std::vector<std::string> gone;
	for (size_t i = rp + 1; i <= k; i++)
		gone.push_back(SegName(s.bases[i], ".snapshot"));
	Reference ref(s.t, s.steps, bad);
	ExpectLikeReference(l, ref, s.steps, bad, s.t, gone);
}

TEST(SealedSegment, MidSegmentFoundFromAnOlderSnapshot)
{
	MidSealedSegment(1, 1);
}

TEST(SealedSegment, MidSegmentAboveRescannedOnes)
{
	MidSealedSegment(1, 3);
}

TEST(SealedSegment, MidSegmentWithNoUsableSnapshotAtAll)
{
	MidSealedSegment(0, 2);
}

// The damaged batch is the last of its segment: no valid batch follows in
// that file, but later segments do - corruption, not a torn tail.
TEST(SealedSegment, LastBatchOfASealedSegmentIsNotATornTail)
{
	Sealed s;
	s.Write();
	ASSERT_FALSE(HasFatalFailure());
	int64_t b1 = s.bases[1];
	std::string seg = s.dir + "/" + SegName(b1, ".log");
	std::vector<FileBatch> fb = WalkLog(seg);
	const FileBatch &last = fb.back();
	size_t bad = s.StepAt(last.base);
	Pwrite(seg, last.pos + last.size - 3, {(uint8_t)~last.bytes[last.size - 3]});
	s.SpoilSnapshotsAbove(b1);
	uint64_t cut = last.size;
	for (size_t i = 2; i < s.bases.size(); i++)
		cut += s.SizeOf(s.bases[i]);

	testing::internal::CaptureStderr();
	Log l(s.td.path, s.t);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(nullptr, l.log);
	ExpectCut(l.rec, err,
		  {true, KM_EBADCRC, SegName(b1, ".log"), last.pos, last.base, cut});
	Reference ref(s.t, s.steps, bad);
	ExpectLikeReference(l, ref, s.steps, bad, s.t);
}

// ---- offsets only grow (CRC-valid batches, offsets wrong) ----

// Segment files written from the batch builders; no snapshot, so recovery
// scans from the first segment.
struct Handmade {
	TempDir td;
	const Tweak t = Segments(1 << 20);
	std::string dir = td.path + "/t-0";

	Handmade() { std::filesystem::create_directories(dir); }
	// Concatenate; positions of each batch in *pos.
	void Segment(int64_t base, const std::vector<std::vector<uint8_t>> &bs,
		     std::vector<uint64_t> *pos)
	{
		std::vector<uint8_t> f;
		for (auto &b : bs) {
			pos->push_back(f.size());
			f.insert(f.end(), b.begin(), b.end());
		}
		WriteFile(dir + "/" + SegName(base, ".log"), f);
	}
};

TEST(Offsets, OverlapIsCutAndReported)
{
	Handmade h;
	std::vector<uint64_t> pos;
	std::vector<std::vector<uint8_t>> bs = {
		Data(0, 5, 0, 0, 2), Data(2, 5, 0, 2, 2), Data(4, 5, 0, 4, 2),
		Data(5, 5, 0, 6, 2), // 5 is already taken
		Data(7, 5, 0, 8, 2)};
	h.Segment(0, bs, &pos);
	uint64_t size = ReadFile(h.dir + "/" + SegName(0, ".log")).size();
	testing::internal::CaptureStderr();
	Log l(h.td.path, h.t);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(nullptr, l.log);
	ExpectCut(l.rec, err,
		  {true, KM_EOFFSET, SegName(0, ".log"), pos[3], 6, size - pos[3]});
	EXPECT_EQ(6, km_log_end_offset(l.log));
	km_producer_info pi;
	ASSERT_EQ(0, km_pstate_get(km_log_pstate(l.log), 5, &pi));
	EXPECT_EQ(5, pi.last_seq) << "state from the batches before the cut";
	Batch next(Data(6, 5, 0, 6, 2));
	EXPECT_EQ(1, l.Append(next));
	EXPECT_EQ(8, km_log_durable_offset(l.log));
}

TEST(Offsets, GoingBackwardsIsCutAndReported)
{
	Handmade h;
	std::vector<uint64_t> pos;
	std::vector<std::vector<uint8_t>> bs = {
		Data(0, 5, 0, 0, 2), Data(2, 5, 0, 2, 2), Data(4, 5, 0, 4, 2),
		Data(0, 8, 0, 0, 2), // back to 0
		Data(6, 5, 0, 6, 2)};
	h.Segment(0, bs, &pos);
	uint64_t size = ReadFile(h.dir + "/" + SegName(0, ".log")).size();
	testing::internal::CaptureStderr();
	Log l(h.td.path, h.t);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(nullptr, l.log);
	ExpectCut(l.rec, err,
		  {true, KM_EOFFSET, SegName(0, ".log"), pos[3], 6, size - pos[3]});
	EXPECT_EQ(6, km_log_end_offset(l.log));
	km_producer_info pi;
	EXPECT_EQ(-ENOENT, km_pstate_get(km_log_pstate(l.log), 8, &pi))
		<< "the backwards batch's producer was not replayed";
	EXPECT_EQ(5, km_pstate_max_positive_pid(km_log_pstate(l.log)));
}

// Segment 10 follows segment 0 (which ends at 4, a gap: compaction) and
// starts with a batch at 6: above the log end, below the segment's base.
TEST(Offsets, BelowTheSegmentBaseIsCutAndReported)
{
	Handmade h;
	std::vector<uint64_t> p0, p1;
	h.Segment(0, {Data(0, 5, 0, 0, 2), Data(2, 5, 0, 2, 2)}, &p0);
	h.Segment(10, {Data(6, 5, 0, 4, 2), Data(12, 5, 0, 6, 2)}, &p1);
	uint64_t size = ReadFile(h.dir + "/" + SegName(10, ".log")).size();
	testing::internal::CaptureStderr();
	Log l(h.td.path, h.t);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(nullptr, l.log);
	ExpectCut(l.rec, err,
		  {true, KM_EOFFSET, SegName(10, ".log"), p1[0], 4, size});
	EXPECT_EQ(4, km_log_end_offset(l.log));
	Batch next(Data(4, 5, 0, 4, 2));
	EXPECT_EQ(1, l.Append(next));
	EXPECT_EQ(6, km_log_durable_offset(l.log));
	std::vector<uint8_t> buf(1 << 16);
	km_log_read_result rd;
	ASSERT_EQ(0, km_log_read(l.log, 4, 6, 1 << 16, buf.data(), buf.size(), &rd));
	EXPECT_EQ(4, rd.first_offset);
	ASSERT_EQ(0, l.Close());
	// And a crash after that append must not lose it: reopen without the
	// clean-shutdown marker, so every segment is scanned again.
	ASSERT_EQ(0, unlink((l.dir + "/.kafka_cleanshutdown").c_str()));
	for (int64_t b : Bases(l.dir, ".snapshot"))
		ASSERT_EQ(0, unlink((l.dir + "/" + SegName(b, ".snapshot")).c_str()));
	l.Open();
	EXPECT_FALSE(l.rec.clean);
	EXPECT_EQ(-1, l.rec.truncated_at);
	EXPECT_EQ(6, km_log_end_offset(l.log));
}

// A batch whose last offset is more than INT32_MAX past its segment's base
// cannot be indexed (relative offsets are int32). It is the last one, but
// whole: corruption, not a torn tail.
TEST(Offsets, PastTheSegmentsRelativeRangeIsCutAndReported)
{
	Handmade h;
	std::vector<uint64_t> pos;
	const int64_t far = INT32_MAX; // last offset INT32_MAX + 1
	h.Segment(0, {Data(0, 5, 0, 0, 2), Data(far, 5, 0, 2, 2)}, &pos);
	uint64_t size = ReadFile(h.dir + "/" + SegName(0, ".log")).size();
	testing::internal::CaptureStderr();
	Log l(h.td.path, h.t);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(nullptr, l.log);
	ExpectCut(l.rec, err,
		  {true, KM_EOFFSET, SegName(0, ".log"), pos[1], 2, size - pos[1]});
	EXPECT_EQ(2, km_log_end_offset(l.log));
}

} // namespace
