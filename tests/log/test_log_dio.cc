// Goal: the .log written with direct I/O (log.direct.io, issue 18) holds
// exactly the bytes a buffered log holds. The partial last block, kept in
// memory and rewritten by every write that follows, reads back byte-equal
// however the batches fall on blocks (one batch per write, bursts whose
// writes wait for each other, a batch spanning two write buffers); a
// crash leaves at most zeros up to the block's end, which recovery cuts
// without reporting a torn tail; a roll and a clean close leave each .log
// at its data's end; log.direct.io=false and tmpfs (which takes O_DIRECT
// since Linux 6.6, with no device under it) write buffered, and tmpfs says
// so once.
// Method: real io_uring and files. The direct cases run in /tmp, a disk
// (ext4) here: the test fails if /tmp is tmpfs, since it would then test
// the fallback only. The SQEs prepared on the log's ring show the write
// opcode; /proc/self/fdinfo shows O_DIRECT on the fd they name. Expected
// bytes are the batches the test built, concatenated; a crash is a child
// that _exits without closing.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <linux/magic.h>

#include <fstream>
#include <memory>
#include <random>

#include "log_check.h"

using namespace logtest;

namespace {

bool OnTmpfs(const std::string &path)
{
	struct statfs sf;
	return statfs(path.c_str(), &sf) == 0 && sf.f_type == TMPFS_MAGIC;
}

// A log in /tmp with direct I/O as asked (whatever KM_TEST_LOG_DIRECT_IO
// says: these cases are about the mode itself).
std::unique_ptr<Log> Open(const std::string &dir, bool direct,
			  bool always = true, uint64_t segment = 1 << 30)
{
	return std::unique_ptr<Log>(new Log(dir, [&](km_log_config &c) {
		c.direct_io = direct;
		c.flush_always = always;
		c.segment_bytes = segment;
		c.index_bytes_max = 1 << 20;
	}));
}

struct Stream {
	std::vector<std::unique_ptr<Batch>> keep;
	std::vector<uint8_t> all;
	int64_t next = 0;

	Batch &Add(int value_bytes, int records = 1)
	{
		keep.emplace_back(new Batch(Data(next, 7, 0, (int32_t)next,
						 records, false, value_bytes)));
		all.insert(all.end(), keep.back()->bytes.begin(),
			   keep.back()->bytes.end());
		next += records;
		return *keep.back();
	}
	std::vector<uint8_t> Last() const { return keep.back()->bytes; }
};

// The opcodes of the writes prepared on the ring since SQE from, and
// whether the fd each names was opened O_DIRECT.
struct Sqes {
	int fixed = 0, plain = 0, vectored = 0, direct_fds = 0, syncs = 0;
};

bool FdIsDirect(int fd)
{
	std::ifstream in("/proc/self/fdinfo/" + std::to_string(fd));
	std::string key;
	unsigned long flags = 0;
	while (in >> key)
		if (key == "flags:") {
			in >> std::oct >> flags;
			break;
		}
	return (flags & O_DIRECT) != 0;
}

Sqes PreparedSince(km_uring *ring, unsigned from)
{
	const io_uring_sq *sq = &ring->ring.sq;
	Sqes s;
	for (unsigned i = from; i != sq->sqe_tail; i++) {
		const io_uring_sqe &e = sq->sqes[i & sq->ring_mask];
		bool w = true;
		if (e.opcode == IORING_OP_WRITE_FIXED)
			s.fixed++;
		else if (e.opcode == IORING_OP_WRITE)
			s.plain++;
		else if (e.opcode == IORING_OP_WRITEV)
			s.vectored++;
		else
			w = false;
		s.syncs += e.opcode == IORING_OP_FSYNC;
		s.direct_fds += w && FdIsDirect(e.fd);
	}
	return s;
}

// One batch, without waiting for it; a full write queue or buffer pool
// (a short append) is retried once a completion is reaped, as the
// fetcher does.
void AppendOrWait(Log *l, Batch &b)
{
	for (int guard = 0; guard < 1000; guard++) {
		km_log_append_result res;
		int rc = km_log_append_burst(l->log, &b.view, 1, KM_ORIGIN_MIRROR,
					     &res);
		if (rc == 1)
			return;
		ASSERT_EQ(0, rc) << km_strerror(rc);
		ASSERT_LE(0, km_uring_poll(&l->ring, true));
	}
	FAIL() << "the append never went in";
}

} // namespace

TEST(Dio, DirectOnADiskBufferedWhenOffOrOnTmpfs)
{
	TempDir td;
	ASSERT_FALSE(OnTmpfs(td.path)) << td.path << " is tmpfs: the direct "
				       "cases would test the fallback only";
	{
		auto l = Open(td.path, true);
		EXPECT_TRUE(km_log_direct_io(l->log));
		unsigned from = l->ring.ring.sq.sqe_tail;
		Stream s;
		ASSERT_EQ(1, l->Append(s.Add(100)));
		Sqes q = PreparedSince(&l->ring, from);
		EXPECT_EQ(1, q.fixed + q.plain) << "one direct write";
		EXPECT_EQ(1, q.fixed) << "from a registered buffer (root: no "
					 "RLIMIT_MEMLOCK refusal)";
		EXPECT_EQ(0, q.vectored);
		EXPECT_EQ(1, q.direct_fds) << "through an O_DIRECT fd";
		EXPECT_EQ(KM_LOG_DIO_ON, km_log_direct_io_mode());
	}
	TempDir off;
	{
		auto l = Open(off.path, false);
		EXPECT_FALSE(km_log_direct_io(l->log));
		unsigned from = l->ring.ring.sq.sqe_tail;
		Stream s;
		ASSERT_EQ(1, l->Append(s.Add(100)));
		Sqes q = PreparedSince(&l->ring, from);
		EXPECT_EQ(1, q.vectored);
		EXPECT_EQ(0, q.fixed + q.plain);
		EXPECT_EQ(0, q.direct_fds);
	}
	FastTempDir shm;
	ASSERT_TRUE(OnTmpfs(shm.path)) << "no /dev/shm tmpfs here";
	testing::internal::CaptureStderr();
	{
		auto a = Open(shm.path, true);
		auto b = Open(shm.path + "/b", true);
		EXPECT_FALSE(km_log_direct_io(a->log));
		EXPECT_FALSE(km_log_direct_io(b->log));
		unsigned from = a->ring.ring.sq.sqe_tail;
		Stream s;
		ASSERT_EQ(1, a->Append(s.Add(100)));
		Sqes q = PreparedSince(&a->ring, from);
		EXPECT_EQ(1, q.vectored);
		EXPECT_EQ(0, q.direct_fds);
	}
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_EQ(KM_LOG_DIO_REFUSED, km_log_direct_io_mode());
	const std::string line = "refuses O_DIRECT; its logs are written buffered";
	size_t at = err.find(line);
	EXPECT_NE(std::string::npos, at) << err;
	EXPECT_EQ(std::string::npos, err.find(line, at + 1)) << "said once: " << err;
}

// Batches of every size from 1 to ~3 blocks, one write each (flush=always
// syncs each): nearly every write starts inside the block the last one
// ended in. Then bursts without syncs, whose writes of the same block wait
// for each other, and a batch larger than a write buffer (2 MiB) from an
// unaligned position.
TEST(Dio, PartialBlockRewrittenManyTimesReadsBack)
{
	TempDir td;
	std::mt19937 rng(18);
	Stream s;
	{
		auto l = Open(td.path, true);
		ASSERT_TRUE(km_log_direct_io(l->log));
		for (int i = 0; i < 300; i++)
			ASSERT_EQ(1, l->Append(s.Add((int)(rng() % 12000) + 1)));
		EXPECT_EQ(s.all, ReadAll(l->log, 0, s.next));
		EXPECT_EQ(s.all, ReadOpenLog(l->dir + "/" + SegName(0, ".log")));
	}
	{
		auto l = Open(td.path, true, false);
		ASSERT_TRUE(l->rec.clean);
		for (int round = 0; round < 20; round++) {
			for (int i = 0; i < 5; i++)
				AppendOrWait(l.get(), s.Add((int)(rng() % 3000) + 1));
			if (round == 10)
				AppendOrWait(l.get(), s.Add(KM_LOG_DIO_BUFFER_BYTES * 8 / 5));
			ASSERT_EQ(0, km_log_flush(l->log));
		}
		ASSERT_EQ(0, km_log_sync(l->log));
		EXPECT_EQ(s.next, km_log_durable_offset(l->log));
		EXPECT_EQ(s.all, ReadAll(l->log, 0, s.next));
		EXPECT_EQ(s.all, ReadOpenLog(l->dir + "/" + SegName(0, ".log")));
		std::string dir = l->dir;
		ASSERT_EQ(0, l->Close());
		EXPECT_EQ(s.all, ReadFile(dir + "/" + SegName(0, ".log")))
			<< "a clean close leaves the .log at its data's end";
	}
	auto l = Open(td.path, true);
	EXPECT_TRUE(l->rec.clean);
	EXPECT_EQ(s.all, ReadAll(l->log, 0, s.next));
}

TEST(Dio, RecoveryCutsTheZerosOfACrashWithoutCallingItTorn)
{
	TempDir td;
	Stream s;
	for (int i = 0; i < 5; i++)
		s.Add(333 * (i + 1));
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		auto l = Open(td.path, true);
		for (auto &b : s.keep)
			if (l->Append(*b) != 1)
				_exit(1);
		_exit(km_log_durable_offset(l->log) == s.next ? 0 : 2);
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
	std::string seg = td.path + "/t-0/" + SegName(0, ".log");
	std::vector<uint8_t> f = ReadFile(seg);
	ASSERT_EQ(0u, f.size() % 4096) << "the crash left whole blocks";
	ASSERT_GT(f.size(), s.all.size()) << "and zeros past the data";

	testing::internal::CaptureStderr();
	auto l = Open(td.path, true);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_FALSE(l->rec.clean);
	EXPECT_EQ(-1, l->rec.truncated_at) << "nothing torn";
	EXPECT_EQ(0u, l->rec.bytes_truncated);
	EXPECT_EQ(std::string::npos, err.find("torn")) << err;
	EXPECT_NE(std::string::npos,
		  err.find("cutting " + std::to_string(f.size() - s.all.size()) +
			   " bytes of zeros after the last batch"))
		<< err;
	EXPECT_EQ(s.next, km_log_end_offset(l->log));
	EXPECT_EQ(s.all, ReadFile(seg)) << "cut at the data's end";
	EXPECT_EQ(s.all, ReadAll(l->log, 0, s.next));
	Stream more;
	more.next = s.next;
	ASSERT_EQ(1, l->Append(more.Add(50)));
	s.all.insert(s.all.end(), more.all.begin(), more.all.end());
	EXPECT_EQ(s.all, ReadAll(l->log, 0, more.next));
}

// Sealed segments end at their data while the log is still open (a roll
// cuts the zeros before the snapshot that stops recovery scanning them).
TEST(Dio, ARollLeavesTheSealedSegmentAtItsDataEnd)
{
	TempDir td;
	auto l = Open(td.path, true, true, 64 * 1024);
	Stream s;
	for (int i = 0; i < 40; i++)
		ASSERT_EQ(1, l->Append(s.Add(5000)));
	std::vector<int64_t> bases = Bases(l->dir, ".log");
	ASSERT_GT(bases.size(), 2u);
	std::vector<uint8_t> joined;
	for (size_t i = 0; i < bases.size(); i++) {
		std::string p = l->dir + "/" + SegName(bases[i], ".log");
		uint64_t tail = 0;
		WalkLog(p, &tail);
		if (i + 1 < bases.size()) {
			EXPECT_EQ(0u, tail) << SegName(bases[i], ".log");
		}
		std::vector<uint8_t> f = i + 1 < bases.size() ? ReadFile(p)
							      : ReadOpenLog(p);
		joined.insert(joined.end(), f.begin(), f.end());
	}
	EXPECT_EQ(s.all, joined);
}

namespace {

// Overwrite the file's copy of [pos, pos + n) through the page cache:
// a read that goes to the file sees 0xEE, the tail cache the real bytes.
void Scribble(const std::string &path, uint64_t pos, size_t n)
{
	int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
	ASSERT_GE(fd, 0) << path;
	std::vector<uint8_t> junk(n, 0xEE);
	ASSERT_EQ((ssize_t)n, pwrite(fd, junk.data(), n, (off_t)pos));
	close(fd);
}

struct TwoLogs {
	km_uring ring;
	km_log *a = nullptr, *b = nullptr;
	explicit TwoLogs(const std::string &dir, uint64_t cache)
	{
		EXPECT_EQ(0, km_uring_init(&ring, 64));
		km_log_config c;
		for (const char *t : { "a", "b" }) {
			km_log_config_defaults(&c, dir.c_str(), t, 0);
			c.direct_io = true;
			c.flush_always = true;
			c.tail_cache_bytes = cache;
			EXPECT_EQ(0, km_log_open(t[0] == 'a' ? &a : &b, &c, &ring,
						 nullptr));
		}
	}
	~TwoLogs()
	{
		km_log_close(a);
		km_log_close(b);
		km_uring_exit(&ring);
	}
	void Append(km_log *l, Batch &batch)
	{
		km_log_append_result res;
		ASSERT_EQ(1, km_log_append_burst(l, &batch.view, 1,
						 KM_ORIGIN_MIRROR, &res));
		ASSERT_EQ(0, km_log_sync(l));
	}
};

} // namespace

// The tail cache (log.tail.cache.bytes): a read at the tail copies the
// newest writes' buffers, not the file (after a direct write the page
// cache does not hold them, so the file means the disk); the pool takes
// back the longest kept first, so an idle partition's tail goes to the
// file again once a busy one needs the room; with no budget nothing is
// kept.
TEST(Dio, TailReadsComeFromTheCacheTheIdleOnesGoFirst)
{
	for (uint64_t cache : { (uint64_t)KM_LOG_DIO_BUFFER_BYTES, (uint64_t)0 }) {
		SCOPED_TRACE("tail cache " + std::to_string(cache));
		TempDir d;
		TwoLogs l(d.path, cache);
		ASSERT_NE(nullptr, l.a);
		ASSERT_NE(nullptr, l.b);
		Stream sa, sb;
		l.Append(l.a, sa.Add(3000));
		Scribble(d.path + "/a-0/" + SegName(0, ".log"), 100, 1000);
		std::vector<uint8_t> got = ReadAll(l.a, 0, sa.next);
		if (cache > 0)
			EXPECT_EQ(sa.all, got) << "read from the tail cache";
		else
			EXPECT_NE(sa.all, got) << "no cache: read from the file";
		// b's write takes the one buffer the budget allows: a's tail
		// is read from the file again.
		l.Append(l.b, sb.Add(3000));
		EXPECT_NE(sa.all, ReadAll(l.a, 0, sa.next))
			<< "a's tail given back for b's";
		Scribble(d.path + "/b-0/" + SegName(0, ".log"), 100, 1000);
		got = ReadAll(l.b, 0, sb.next);
		if (cache > 0)
			EXPECT_EQ(sb.all, got);
		else
			EXPECT_NE(sb.all, got);
	}
}

// ---- the CRC checked on the copy (km_batch_frame, issue 18 item 1) ----
//
// Goal: a batch framed with its CRC unchecked (km_batch_frame, what the
// fetcher does for a direct-writing log) is checked by the log as it is
// copied into the write buffers: a corrupt one is refused with KM_EBADCRC
// before anything of it reaches the disk - also when it spans write
// buffers, the first of which is full before its last byte is read - and
// the log takes the next batch as if it had never been offered; a mapped
// producer id (km_batch_map_pid on such a batch writes its header copy
// only) is in the bytes written, with a CRC that checks, while the receive
// buffer keeps the bytes as they came.
// Method: batches built by the test, one byte flipped in the CRC range
// (its first byte, inside the producer id, its last byte); the .log read
// back with plain reads and the expected bytes derived from the built
// batches (the id mapped by R1, the CRC recomputed with the bitwise
// reference).

namespace {

// A batch framed as the fetcher frames it for a direct-writing log.
struct Framed {
	std::vector<uint8_t> bytes;
	iovec iov;
	km_chain chain;
	km_batch view;

	explicit Framed(std::vector<uint8_t> b) : bytes(std::move(b))
	{
		iov = {bytes.data(), bytes.size()};
		chain = {&iov, 1};
		EXPECT_EQ((int)bytes.size(),
			  km_batch_frame(&view, &chain, km_chain_start(&chain),
					 KM_BATCH_BYTES_MAX));
		EXPECT_TRUE(view.crc_pending);
	}
	Framed(const Framed &) = delete;
};

// One record whose batch is exactly size bytes.
std::vector<uint8_t> DataOfSize(int64_t base, int64_t pid, size_t size)
{
	int value = (int)size - 80;
	std::vector<uint8_t> d;
	for (int i = 0; i < 8; i++) {
		d = Data(base, pid, 0, 0, 1, false, value);
		if (d.size() == size)
			return d;
		value += (int)size - (int)d.size();
	}
	ADD_FAILURE() << "no batch of " << size << " bytes";
	return d;
}

int AppendFramed(Log *l, std::vector<Framed *> v)
{
	std::vector<km_batch> views;
	for (Framed *f : v)
		views.push_back(f->view);
	km_log_append_result res;
	int rc = km_log_append_burst(l->log, views.data(), (uint32_t)views.size(),
				     KM_ORIGIN_MIRROR, &res);
	EXPECT_EQ(0, km_log_sync(l->log));
	return rc;
}

} // namespace

TEST(Dio, CrcCheckedOnTheCopyRefusesACorruptBatchWritingNothingOfIt)
{
	for (size_t where : {size_t(21), size_t(45), size_t(0)}) {
		SCOPED_TRACE("flipped byte " + std::to_string(where) +
			     " (0: the last)");
		TempDir td;
		auto l = Open(td.path, true);
		ASSERT_TRUE(km_log_direct_io(l->log));
		ASSERT_TRUE(km_log_verifies_crc(l->log));
		Framed a(Data(0, -1, 0, 0, 1));
		// 1.5 write buffers: the copy fills a whole one before it reads
		// the bytes the CRC ends with.
		std::vector<uint8_t> good_b = Data(1, -1, 0, 0, 3, false,
						   KM_LOG_DIO_BUFFER_BYTES / 2);
		std::vector<uint8_t> bad_b = good_b;
		size_t flip = where ? where : bad_b.size() - 1;
		ASSERT_LT(flip, bad_b.size());
		bad_b.at(flip) ^= 0x20;
		Framed b(bad_b), c(Data(4, -1, 0, 0, 1));

		EXPECT_EQ(1, AppendFramed(l.get(), {&a, &b, &c}))
			<< "the batch before the corrupt one is appended";
		EXPECT_EQ(KM_EBADCRC, AppendFramed(l.get(), {&b, &c}));
		EXPECT_EQ(0, km_log_error(l->log)) << "not sticky";
		EXPECT_EQ(1, km_log_end_offset(l->log));
		EXPECT_EQ(1, km_log_durable_offset(l->log));
		EXPECT_EQ(bad_b, b.bytes) << "the receive buffer is not written";
		std::vector<uint8_t> f = ReadFile(l->dir + "/" + SegName(0, ".log"));
		ASSERT_EQ(4096u, f.size()) << "nothing of the corrupt batch written";
		EXPECT_TRUE(std::equal(a.bytes.begin(), a.bytes.end(), f.begin()));
		EXPECT_EQ(std::vector<uint8_t>(f.size() - a.bytes.size(), 0),
			  std::vector<uint8_t>(f.begin() + a.bytes.size(), f.end()));

		// The same offsets, bytes as they should have come: taken as if
		// the corrupt ones had never been offered.
		Framed b2(good_b);
		EXPECT_EQ(2, AppendFramed(l.get(), {&b2, &c}));
		std::vector<uint8_t> all = a.bytes;
		all.insert(all.end(), good_b.begin(), good_b.end());
		all.insert(all.end(), c.bytes.begin(), c.bytes.end());
		EXPECT_EQ(5, km_log_durable_offset(l->log));
		EXPECT_EQ(all, ReadOpenLog(l->dir + "/" + SegName(0, ".log")));
		EXPECT_EQ(all, ReadAll(l->log, 0, 5));
	}
}

TEST(Dio, ProducerIdMappedOnTheCopyNotInTheReceiveBuffer)
{
	TempDir td;
	auto l = Open(td.path, true);
	ASSERT_TRUE(km_log_verifies_crc(l->log));
	// a ends 30 bytes before the first write buffer does: b's header,
	// where the id and the CRC are, straddles two buffers.
	Framed a(DataOfSize(0, -1, KM_LOG_DIO_BUFFER_BYTES - 30));
	Framed b(Data(1, 1000, 0, 0, 2));
	std::vector<uint8_t> came = b.bytes;
	ASSERT_EQ(1, km_batch_map_pid(&b.view));
	EXPECT_EQ(came, b.bytes) << "the map went into the header copy only";
	ASSERT_EQ(2, AppendFramed(l.get(), {&a, &b}));

	// R1: id 1000 -> -(1000 + 2); the CRC over attributes..end redone.
	std::vector<uint8_t> want = came;
	for (int i = 0; i < 8; i++)
		want[43 + i] = (uint8_t)((uint64_t)-1002 >> (56 - 8 * i));
	uint32_t crc = RefCrc32c(want.data() + 21, want.size() - 21);
	for (int i = 0; i < 4; i++)
		want[17 + i] = (uint8_t)(crc >> (24 - 8 * i));
	std::vector<uint8_t> all = a.bytes;
	all.insert(all.end(), want.begin(), want.end());
	EXPECT_EQ(all, ReadOpenLog(l->dir + "/" + SegName(0, ".log")));
	EXPECT_EQ(all, ReadAll(l->log, 0, 3));
}

// A batch that needs a roll first is checked on its own, before the roll
// (km_batch_settle): a corrupt one makes no new segment; a good one with a
// mapped id starts the new segment with the id mapped and a CRC that
// checks (the map is stored into the receive buffer then, as the parse
// path always did).
TEST(Dio, ABatchThatRollsIsCheckedBeforeTheRoll)
{
	// R1 on the built bytes: id 1000 -> -(1000 + 2), the CRC redone.
	auto mapped = [](std::vector<uint8_t> v) {
		for (int i = 0; i < 8; i++)
			v[43 + i] = (uint8_t)((uint64_t)-1002 >> (56 - 8 * i));
		uint32_t crc = RefCrc32c(v.data() + 21, v.size() - 21);
		for (int i = 0; i < 4; i++)
			v[17 + i] = (uint8_t)(crc >> (24 - 8 * i));
		return v;
	};
	TempDir td;
	auto l = Open(td.path, true, true, 64 * 1024);
	ASSERT_TRUE(km_log_verifies_crc(l->log));
	Framed a(Data(0, -1, 0, 0, 1, false, 40000));
	ASSERT_EQ(1, AppendFramed(l.get(), {&a}));
	std::vector<uint8_t> good = Data(1, 1000, 0, 0, 1, false, 40000);
	std::vector<uint8_t> bad = good;
	bad.back() ^= 1;
	Framed b(bad);
	ASSERT_EQ(1, km_batch_map_pid(&b.view));
	EXPECT_EQ(KM_EBADCRC, AppendFramed(l.get(), {&b}));
	EXPECT_EQ(0, km_log_error(l->log));
	EXPECT_EQ(std::vector<int64_t>{0}, Bases(l->dir, ".log"))
		<< "no segment made for a corrupt batch";

	Framed b2(good);
	ASSERT_EQ(1, km_batch_map_pid(&b2.view));
	ASSERT_EQ(1, AppendFramed(l.get(), {&b2}));
	ASSERT_EQ((std::vector<int64_t>{0, 1}), Bases(l->dir, ".log"));
	EXPECT_EQ(mapped(good), ReadOpenLog(l->dir + "/" + SegName(1, ".log")));
	EXPECT_EQ(a.bytes, ReadFile(l->dir + "/" + SegName(0, ".log")));

	// A buffered log writes from the receive buffer: such a batch offered
	// to it is settled there too (the fetcher frames with the CRC unchecked
	// only for a log that checks it on its copy).
	TempDir tb;
	auto lb = Open(tb.path, false);
	ASSERT_FALSE(km_log_verifies_crc(lb->log));
	std::vector<uint8_t> good0 = Data(0, 1000, 0, 0, 1, false, 40000);
	std::vector<uint8_t> bad0 = good0;
	bad0.back() ^= 1;
	Framed c(bad0), c2(good0);
	ASSERT_EQ(1, km_batch_map_pid(&c.view));
	ASSERT_EQ(1, km_batch_map_pid(&c2.view));
	EXPECT_EQ(KM_EBADCRC, AppendFramed(lb.get(), {&c}));
	EXPECT_EQ(0, km_log_end_offset(lb->log));
	EXPECT_EQ(1, AppendFramed(lb.get(), {&c2}));
	EXPECT_EQ(mapped(good0), ReadFile(lb->dir + "/" + SegName(0, ".log")));
}

// ---- an idle log gives its write state back (issue 17) ----
//
// Goal: a log whose end has not moved for KM_LOG_IDLE_MS, with nothing
// queued, gives back what its writes use - its tail cache's buffers, the
// direct-I/O tail block and the write ring's pages - and a write after
// that is byte-exact: the partial last block, forgotten with the pages
// that held it, is read back from the file and rewritten whole, and the
// tail cache fills again. A tick before KM_LOG_IDLE_MS, or one while the
// end moved, gives back nothing; the process's count of logs holding
// write state (status 'logs_awake') follows.
// Method: km_log_tick called with chosen times (the worker's sweep calls
// it once a second with the clock's); the pages given back seen with
// mincore over the log's memory (its first KM_LOG_WRITES_MAX write slots
// and tail block are within its first 64 KiB); the tail cache seen by
// scribbling on the .log and reading the tail (the cache answers with the
// bytes written, the file with the scribble); expected bytes are the
// batches the test built. Both write modes (buffered: the ring only).

namespace {

// Resident pages among the first bytes of the log's memory (one mapping,
// the struct first, log.c).
size_t ResidentPages(const km_log *log, size_t bytes = 64 * 1024)
{
	std::vector<unsigned char> v(bytes / 4096);
	EXPECT_EQ(0, mincore((void *)log, bytes, v.data())) << strerror(errno);
	size_t n = 0;
	for (unsigned char c : v)
		n += c & 1;
	return n;
}

} // namespace

TEST(Dio, AnIdleLogGivesItsWriteStateBackAndWritesByteExactAfter)
{
	for (bool direct : { true, false }) {
		SCOPED_TRACE(direct ? "direct" : "buffered");
		TempDir td;
		Stream s;
		auto l = Open(td.path, direct);
		ASSERT_EQ(direct, km_log_direct_io(l->log));
		uint64_t awake0 = km_log_awake_count();
		// Writes each ending inside a block.
		for (int i = 0; i < 70; i++)
			ASSERT_EQ(1, l->Append(s.Add(1000 + 37 * i)));
		EXPECT_EQ(awake0 + 1, km_log_awake_count());
		std::string seg = l->dir + "/" + SegName(0, ".log");
		size_t before = ResidentPages(l->log);

		const uint64_t t = 1000000;
		km_log_tick(l->log, t);
		km_log_tick(l->log, t + KM_LOG_IDLE_MS - 1);
		EXPECT_EQ(awake0 + 1, km_log_awake_count()) << "idle, not long enough";
		EXPECT_EQ(before, ResidentPages(l->log));
		if (direct) {
			// The tail is read from the cache: a scribble on the
			// file is not seen.
			Scribble(seg, s.all.size() - 500, 100);
			EXPECT_EQ(s.Last(), ReadAll(l->log, s.next - 1, s.next));
		}
		km_log_tick(l->log, t + KM_LOG_IDLE_MS);
		EXPECT_EQ(awake0, km_log_awake_count()) << "given back at KM_LOG_IDLE_MS";
		size_t after = ResidentPages(l->log);
		// The write ring's first page (its slot 0 takes every write of
		// an empty ring) and, direct, the tail block's page.
		EXPECT_LE(after + (direct ? 2u : 1u), before)
			<< "pages before " << before << ", after " << after;
		if (direct) {
			EXPECT_NE(s.Last(), ReadAll(l->log, s.next - 1, s.next))
				<< "the tail cache given back: read from the file";
			// The file as written again, for the tail block's reload.
			int fd = open(seg.c_str(), O_WRONLY | O_CLOEXEC);
			ASSERT_GE(fd, 0);
			ASSERT_EQ((ssize_t)s.all.size(),
				  pwrite(fd, s.all.data(), s.all.size(), 0));
			close(fd);
		}

		// Writes after: the partial block reloaded, small batches in it,
		// one crossing blocks, a tick while the end moves in between.
		for (int i = 0; i < 5; i++) {
			ASSERT_EQ(1, l->Append(s.Add(300 + 2000 * i)));
			km_log_tick(l->log, t + 2 * KM_LOG_IDLE_MS + i);
			EXPECT_EQ(awake0 + 1, km_log_awake_count());
		}
		EXPECT_EQ(s.all, ReadAll(l->log, 0, s.next));
		EXPECT_EQ(s.all, ReadOpenLog(seg));
		if (direct) {
			Scribble(seg, s.all.size() - 200, 100);
			EXPECT_EQ(s.Last(), ReadAll(l->log, s.next - 1, s.next))
				<< "the tail cache holds the new writes";
			int fd = open(seg.c_str(), O_WRONLY | O_CLOEXEC);
			ASSERT_GE(fd, 0);
			ASSERT_EQ((ssize_t)s.all.size(),
				  pwrite(fd, s.all.data(), s.all.size(), 0));
			close(fd);
		}
		// Idle again, then a clean close and an open: the same bytes.
		km_log_tick(l->log, t + 3 * KM_LOG_IDLE_MS);
		km_log_tick(l->log, t + 4 * KM_LOG_IDLE_MS);
		EXPECT_EQ(awake0, km_log_awake_count());
		ASSERT_EQ(1, l->Append(s.Add(777)));
		ASSERT_EQ(0, l->Close());
		EXPECT_EQ(awake0, km_log_awake_count()) << "a closed log is not counted";
		EXPECT_EQ(s.all, ReadFile(seg)) << "the .log at its data's end";
		l = Open(td.path, direct);
		EXPECT_TRUE(l->rec.clean);
		EXPECT_EQ(s.all, ReadAll(l->log, 0, s.next));
	}
}
