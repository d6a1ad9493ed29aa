// Goal: every file the partition log writes has Kafka's bytes (spec §3-§4):
// .log holds the appended batches byte for byte at the positions the roll
// rule gives; .index / .timeindex hold exactly the entries Kafka's
// LogSegment.append rule produces (preallocated while active, trimmed to the
// entries after a roll and after close, with the final time entry);
// .txnindex holds one 34-byte AbortedTxn per aborted transaction and
// exists only once its segment holds one (Kafka's rule); every
// <offset>.snapshot is ProducerSnapshot v1 with its CRC-32C; the text files
// (leader-epoch-checkpoint, partition.metadata) have Kafka's layout; a clean
// close + reopen gives back the same log; recovery after a crash rebuilds
// the .index / .timeindex entries the rule implies; kmirror-dump-log reads
// our segments and finds every batch valid.
// Method: real files, a real io_uring, fdatasync after every append. The
// expected bytes are built here field by field from the spec (big-endian
// writers, a bitwise reference CRC-32C, a hand-encoded record batch, an
// independent model of the index rule), never by the code under test.
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "common/endian.h"
#include "log_check.h"

using namespace logtest;

namespace {

// ---- expected bytes, from the spec ----

// A RecordBatch v2 written out field by field (spec §1): two records, the
// second with a null key and timestamp delta 5.
std::vector<uint8_t> HandBatch(int64_t base, int64_t pid, int16_t epoch,
			       int32_t seq)
{
	std::vector<uint8_t> recs;
	auto record = [&](int64_t ts_delta, int64_t off_delta, const char *key,
			  const char *val) {
		std::vector<uint8_t> body;
		Put8(body, 0); // attributes
		PutVarlong(body, ts_delta);
		PutVarlong(body, off_delta);
		if (key) {
			PutVarlong(body, (int64_t)strlen(key));
			body.insert(body.end(), key, key + strlen(key));
		} else {
			PutVarlong(body, -1);
		}
		PutVarlong(body, (int64_t)strlen(val));
		body.insert(body.end(), val, val + strlen(val));
		PutVarlong(body, 0); // headersCount
		PutVarlong(recs, (int64_t)body.size());
		recs.insert(recs.end(), body.begin(), body.end());
	};
	record(0, 0, "a", "hello");
	record(5, 1, nullptr, "world!");

	std::vector<uint8_t> crc_part; // attributes .. end
	Put16(crc_part, 0);	       // attributes: none, CreateTime
	Put32(crc_part, 1);	       // lastOffsetDelta
	Put64(crc_part, 1000);	       // baseTimestamp
	Put64(crc_part, 1005);	       // maxTimestamp
	Put64(crc_part, (uint64_t)pid);
	Put16(crc_part, (uint16_t)epoch);
	Put32(crc_part, (uint32_t)seq);
	Put32(crc_part, 2); // recordsCount
	crc_part.insert(crc_part.end(), recs.begin(), recs.end());

	std::vector<uint8_t> b;
	Put64(b, (uint64_t)base);
	Put32(b, 4 + 1 + 4 + crc_part.size()); // batchLength: after itself
	Put32(b, 0);			       // partitionLeaderEpoch
	Put8(b, 2);			       // magic
	Put32(b, RefCrc32c(crc_part.data(), crc_part.size()));
	b.insert(b.end(), crc_part.begin(), crc_part.end());
	return b;
}

std::vector<uint8_t> MarkerCE(int64_t off, int64_t pid, int16_t epoch,
			      bool commit, int32_t coord, int64_t ts)
{
	km_ctrl_spec s = {off, 0, ts};
	std::vector<uint8_t> out(KM_CTRL_MARKER_BATCH_BYTES);
	EXPECT_EQ((int)out.size(), km_ctrl_build_marker(out.data(), out.size(),
							&s, pid, epoch, commit,
							coord));
	return out;
}

std::vector<uint8_t> DataLE(int64_t base, int32_t leader_epoch, int64_t pid,
			    int32_t seq, int n)
{
	std::vector<uint8_t> b = Data(base, pid, 0, seq, n);
	// partitionLeaderEpoch is outside the CRC (spec §1): set it in place.
	km_store_be32(b.data() + 12, (uint32_t)leader_epoch);
	return b;
}

// What one appended batch contributes to the files.
struct Appended {
	std::vector<uint8_t> bytes;
	int64_t base, last, max_ts;
};

Appended Info(const std::vector<uint8_t> &b)
{
	Appended a;
	a.bytes = b;
	a.base = (int64_t)GetBE(b.data(), 8);
	a.last = a.base + (int32_t)GetBE(b.data() + 23, 4);
	a.max_ts = (int64_t)GetBE(b.data() + 35, 8);
	return a;
}

// One segment as the model expects it.
struct SegModel {
	int64_t base;
	std::vector<uint8_t> log, index, timeindex;
	int64_t max_ts = -1, max_off;
	int64_t last_time_ts = -1;
	uint64_t since = 0;
};

// Spec §3: roll when the batch would take the segment past segment.bytes;
// "if bytes since last entry > index.interval.bytes add an entry (that
// batch's LAST offset, that batch's START position) ... counter += batch
// size"; the time index gets (max timestamp so far, its offset) at the same
// moments, only when the timestamp grows, and once more when the segment is
// sealed (onBecomeInactiveSegment).
std::vector<SegModel> Model(const std::vector<Appended> &in,
			    uint64_t segment_bytes, uint32_t interval)
{
	std::vector<SegModel> segs;
	for (const Appended &a : in) {
		if (segs.empty() ||
		    (!segs.back().log.empty() &&
		     segs.back().log.size() + a.bytes.size() > segment_bytes)) {
			SegModel s;
			s.base = a.base;
			s.max_off = a.base;
			segs.push_back(s);
		}
		SegModel &s = segs.back();
		if (a.max_ts > s.max_ts) {
			s.max_ts = a.max_ts;
			s.max_off = a.last;
		}
		if (s.since > interval) {
			Put32(s.index, (uint64_t)(a.last - s.base));
			Put32(s.index, s.log.size());
			if (s.max_ts > s.last_time_ts) {
				Put64(s.timeindex, (uint64_t)s.max_ts);
				Put32(s.timeindex, (uint64_t)(s.max_off - s.base));
				s.last_time_ts = s.max_ts;
			}
			s.since = 0;
		}
		s.since += a.bytes.size();
		s.log.insert(s.log.end(), a.bytes.begin(), a.bytes.end());
	}
	return segs;
}

std::vector<uint8_t> Sealed(const SegModel &s)
{
	std::vector<uint8_t> t = s.timeindex;
	if (s.max_ts > s.last_time_ts) {
		Put64(t, (uint64_t)s.max_ts);
		Put32(t, (uint64_t)(s.max_off - s.base));
	}
	return t;
}

// Snapshot entry, spec §3: producerId int64, epoch int16, lastSequence int32,
// lastOffset int64, offsetDelta int32, timestamp int64, coordinatorEpoch
// int32, currentTxnFirstOffset int64.
struct SnapEntry {
	int64_t pid;
	int16_t epoch;
	int32_t last_seq;
	int64_t last_offset;
	int32_t offset_delta;
	int64_t ts;
	int32_t coord;
	int64_t txn_first;
};

// version int16 (1) | crc uint32 (CRC-32C over bytes 6..EOF) | count int32 |
// entries, in producer id order (pstate.h: "sorted by producer id").
std::vector<uint8_t> Snapshot(std::vector<SnapEntry> es)
{
	std::sort(es.begin(), es.end(),
		  [](const SnapEntry &a, const SnapEntry &b) { return a.pid < b.pid; });
	std::vector<uint8_t> body;
	Put32(body, es.size());
	for (const SnapEntry &e : es) {
		Put64(body, (uint64_t)e.pid);
		Put16(body, (uint16_t)e.epoch);
		Put32(body, (uint32_t)e.last_seq);
		Put64(body, (uint64_t)e.last_offset);
		Put32(body, (uint32_t)e.offset_delta);
		Put64(body, (uint64_t)e.ts);
		Put32(body, (uint32_t)e.coord);
		Put64(body, (uint64_t)e.txn_first);
	}
	std::vector<uint8_t> out;
	Put16(out, 1);
	Put32(out, RefCrc32c(body.data(), body.size()));
	out.insert(out.end(), body.begin(), body.end());
	return out;
}

// The snapshot a log holding exactly `in` must write: the newest data batch
// per producer (no transactions or markers in these streams).
std::vector<uint8_t> SnapshotOf(const std::vector<Appended> &in, int64_t upto)
{
	std::map<int64_t, SnapEntry> m;
	for (const Appended &a : in) {
		if (a.base >= upto)
			break;
		int64_t pid = (int64_t)GetBE(a.bytes.data() + 43, 8);
		if (pid == -1)
			continue;
		int32_t seq = (int32_t)GetBE(a.bytes.data() + 53, 4);
		m[pid] = {pid, (int16_t)GetBE(a.bytes.data() + 51, 2),
			  seq + (int32_t)(a.last - a.base), a.last,
			  (int32_t)(a.last - a.base), a.max_ts, -1, -1};
	}
	std::vector<SnapEntry> es;
	for (auto &kv : m)
		es.push_back(kv.second);
	return Snapshot(es);
}

std::vector<uint8_t> Zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

std::vector<uint8_t> Slice(const std::vector<uint8_t> &v, size_t from, size_t n)
{
	if (from >= v.size())
		return {};
	n = std::min(n, v.size() - from);
	return std::vector<uint8_t>(v.begin() + from, v.begin() + from + n);
}

// A deterministic stream: producers 3, 4 and the mapped -7 continuing
// their sequences, producerless batches, a compaction gap now and then,
// record counts, sizes and timestamps that go up and down.
std::vector<std::vector<uint8_t>> Stream(int n_batches)
{
	std::vector<std::vector<uint8_t>> out;
	uint32_t x = 12345;
	auto rnd = [&](uint32_t m) {
		x = x * 1103515245u + 12345u;
		return (x >> 8) % m;
	};
	std::map<int64_t, int32_t> seq;
	int64_t off = 0;
	out.push_back(HandBatch(0, 3, 0, 0));
	seq[3] = 2;
	off = 2;
	const int64_t pids[] = {3, 4, -7, -1};
	for (int i = 1; i < n_batches; i++) {
		int64_t pid = pids[rnd(4)];
		int n = 1 + (int)rnd(4);
		int64_t ts = 5000 + (int64_t)rnd(4000) - (i % 3 == 0 ? 3000 : 0);
		if (rnd(5) == 0)
			off += 1 + rnd(3); // compaction gap
		int32_t s = pid == -1 ? -1 : seq[pid];
		out.push_back(Data(off, pid, pid == -1 ? -1 : 0, s, n, false,
				   20 + (int)rnd(400), ts));
		if (pid != -1)
			seq[pid] += n;
		off += n;
	}
	return out;
}

constexpr uint64_t kSegBytes = 2048;
constexpr uint32_t kInterval = 300;
constexpr uint32_t kIndexMax = 1024;

void SmallSegments(km_log_config &c)
{
	c.segment_bytes = kSegBytes;
	c.index_interval_bytes = kInterval;
	c.index_bytes_max = kIndexMax;
	c.prealloc_bytes = 4096;
}

TEST(Formats, HandBuiltBatchParses)
{
	std::vector<uint8_t> b = HandBatch(0, 3, 0, 0);
	iovec iov = {b.data(), b.size()};
	km_chain ch = {&iov, 1};
	km_batch v;
	ASSERT_EQ((int)b.size(), km_batch_parse(&v, &ch, km_chain_start(&ch),
						KM_BATCH_BYTES_MAX));
	EXPECT_EQ(1, km_batch_last_offset(&v));
	EXPECT_EQ(1005, km_batch_max_timestamp(&v));
	EXPECT_EQ(2, km_batch_records_count(&v));
}

// .log, .index, .timeindex (active and sealed), snapshots at each roll and
// at close, and the round trip through a clean reopen.
TEST(Formats, SegmentFilesByteForByte)
{
	TempDir td;
	std::vector<std::vector<uint8_t>> stream = Stream(40);
	std::vector<Appended> in;
	for (auto &b : stream)
		in.push_back(Info(b));
	std::vector<SegModel> model = Model(in, kSegBytes, kInterval);
	ASSERT_GE(model.size(), 3u) << "the stream must roll a few times";

	Log l(td.path, SmallSegments);
	// Single appends and bursts of up to 3.
	std::vector<std::unique_ptr<Batch>> keep;
	for (size_t i = 0; i < stream.size();) {
		size_t n = std::min<size_t>(1 + i % 3, stream.size() - i);
		std::vector<km_batch> views;
		for (size_t k = 0; k < n; k++) {
			keep.emplace_back(new Batch(stream[i + k]));
			views.push_back(keep.back()->view);
		}
		km_log_append_result res;
		ASSERT_EQ((int)n, km_log_append_burst(l.log, views.data(), n,
						      KM_ORIGIN_MIRROR, &res));
		ASSERT_EQ(0, km_log_sync(l.log));
		i += n;
	}
	int64_t leo = in.back().last + 1;
	ASSERT_EQ(leo, km_log_durable_offset(l.log));

	// While open: sealed segments trimmed, the active one preallocated.
	std::vector<int64_t> bases = Bases(l.dir, ".log");
	ASSERT_EQ(model.size(), bases.size());
	for (size_t i = 0; i < model.size(); i++) {
		const SegModel &m = model[i];
		SCOPED_TRACE("segment " + std::to_string(m.base));
		ASSERT_EQ(m.base, bases[i]);
		std::string p = l.dir + "/" + SegName(m.base, ".");
		EXPECT_EQ(m.log, i + 1 < model.size() ? ReadFile(p + "log")
						      : ReadOpenLog(p + "log"));
		if (i + 1 < model.size()) {
			EXPECT_EQ(m.index, ReadFile(p + "index"));
			EXPECT_EQ(Sealed(m), ReadFile(p + "timeindex"));
			EXPECT_EQ(SnapshotOf(in, model[i + 1].base),
				  ReadFile(l.dir + "/" +
					   SegName(model[i + 1].base, ".snapshot")))
				<< "snapshot at the roll to " << model[i + 1].base;
		} else {
			std::vector<uint8_t> idx = ReadFile(p + "index");
			std::vector<uint8_t> tix = ReadFile(p + "timeindex");
			EXPECT_EQ(kIndexMax, idx.size()) << "preallocated";
			EXPECT_EQ(kIndexMax, tix.size()) << "preallocated";
			EXPECT_EQ(m.index, Slice(idx, 0, m.index.size()));
			EXPECT_EQ(Zeros(kIndexMax - m.index.size()),
				  Slice(idx, m.index.size(), kIndexMax));
			EXPECT_EQ(m.timeindex, Slice(tix, 0, m.timeindex.size()));
		}
		EXPECT_FALSE(Exists(p + "txnindex")) << "no abort, no .txnindex";
	}
	EXPECT_EQ("0\n1\n0 0\n", ReadText(l.dir + "/leader-epoch-checkpoint"));

	// Reads give back the appended bytes, whatever the chunking.
	std::vector<uint8_t> all;
	for (auto &b : stream)
		all.insert(all.end(), b.begin(), b.end());
	EXPECT_EQ(all, ReadAll(l.log, 0, leo, 1));
	EXPECT_EQ(all, ReadAll(l.log, 0, leo, 1 << 20));
	std::set<int64_t> pids = {3, 4, -7};
	StateView before = Capture(l.log, pids);

	ASSERT_EQ(0, l.Close());
	const SegModel &last = model.back();
	std::string p = l.dir + "/" + SegName(last.base, ".");
	EXPECT_EQ(last.index, ReadFile(p + "index")) << "trimmed at close";
	EXPECT_EQ(Sealed(last), ReadFile(p + "timeindex"))
		<< "trimmed at close, with the final entry";
	EXPECT_EQ(SnapshotOf(in, leo), ReadFile(l.dir + "/" + SegName(leo, ".snapshot")));
	EXPECT_TRUE(Exists(l.dir + "/.kafka_cleanshutdown"));

	l.Open();
	EXPECT_TRUE(l.rec.clean);
	EXPECT_FALSE(Exists(l.dir + "/.kafka_cleanshutdown"))
		<< "the marker goes once the log is open";
	ExpectSameState(before, Capture(l.log, pids), "after clean reopen");
	EXPECT_EQ(all, ReadAll(l.log, 0, leo, 700));
	int64_t off;
	ASSERT_EQ(0, km_log_offset_for_time(l.log, 0, &off));
	EXPECT_EQ(0, off);
}

// R7: a crash (no clean-shutdown marker) and no usable snapshot make the
// open rescan every segment; the indexes it rebuilds are the ones the rule
// implies, sealed ones trimmed, the active one preallocated and trimmed at
// the next close, and lookups by offset and time answer from them.
TEST(Formats, RecoveryRebuildsTheIndexesTheRuleImplies)
{
	TempDir td;
	std::vector<std::vector<uint8_t>> stream = Stream(40);
	std::vector<Appended> in;
	for (auto &b : stream)
		in.push_back(Info(b));
	std::vector<SegModel> model = Model(in, kSegBytes, kInterval);
	ASSERT_GE(model.size(), 3u) << "the stream must roll a few times";
	int64_t leo = in.back().last + 1;

	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(td.path, SmallSegments);
		for (auto &b : stream) {
			Batch v(b);
			if (l.Append(v) != 1)
				_exit(1);
		}
		_exit(0); // no close: the files as a crash leaves them
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	std::string dir = td.path + "/t-0";
	ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
	for (auto &n : ListDir(dir)) {
		if (EndsWith(n, ".snapshot")) {
			ASSERT_EQ(0, unlink((dir + "/" + n).c_str())) << n;
		}
	}

	Log l(td.path, SmallSegments);
	ASSERT_FALSE(l.rec.clean);
	EXPECT_EQ((uint32_t)in.size(), l.rec.batches_scanned) << "every segment rescanned";
	ASSERT_EQ(leo, km_log_end_offset(l.log));
	for (size_t i = 0; i < model.size(); i++) {
		const SegModel &m = model[i];
		SCOPED_TRACE("segment " + std::to_string(m.base));
		std::string p = l.dir + "/" + SegName(m.base, ".");
		if (i + 1 < model.size()) {
			EXPECT_EQ(m.index, ReadFile(p + "index"));
			EXPECT_EQ(Sealed(m), ReadFile(p + "timeindex"));
		} else {
			std::vector<uint8_t> idx = ReadFile(p + "index");
			std::vector<uint8_t> tix = ReadFile(p + "timeindex");
			ASSERT_EQ(kIndexMax, idx.size()) << "preallocated";
			ASSERT_EQ(kIndexMax, tix.size()) << "preallocated";
			EXPECT_EQ(m.index, Slice(idx, 0, m.index.size()));
			EXPECT_EQ(Zeros(kIndexMax - m.index.size()),
				  Slice(idx, m.index.size(), kIndexMax));
			EXPECT_EQ(m.timeindex, Slice(tix, 0, m.timeindex.size()));
		}
	}
	std::vector<uint8_t> all;
	for (auto &b : stream)
		all.insert(all.end(), b.begin(), b.end());
	EXPECT_EQ(all, ReadAll(l.log, 0, leo, 700));
	ASSERT_EQ(0, l.Close());
	const SegModel &last = model.back();
	std::string p = l.dir + "/" + SegName(last.base, ".");
	EXPECT_EQ(last.index, ReadFile(p + "index")) << "trimmed at close";
	EXPECT_EQ(Sealed(last), ReadFile(p + "timeindex"));
}

// Opening a log reads the sealed segments' files; it must not change them.
// Reopened again, the log must answer as before. With constant timestamps
// a segment has more .index than .timeindex bytes; with varying ones,
// usually the other way round.
class Reopen : public ::testing::TestWithParam<bool> {};

TEST_P(Reopen, LeavesSealedSegmentFilesAlone)
{
	TempDir td;
	std::vector<std::vector<uint8_t>> stream;
	if (GetParam()) {
		stream = Stream(40);
	} else {
		for (int i = 0; i < 40; i++)
			stream.push_back(Data(i * 2, 3, 0, i * 2, 2, false, 150, 5000));
	}
	Log l(td.path, SmallSegments);
	for (auto &b : stream) {
		Batch v(b);
		ASSERT_EQ(1, l.Append(v));
	}
	ASSERT_EQ(0, l.Close());
	std::map<std::string, std::vector<uint8_t>> files;
	for (auto &n : ListDir(l.dir))
		if (EndsWith(n, "index") || EndsWith(n, ".log") ||
		    EndsWith(n, ".snapshot"))
			files[n] = ReadFile(l.dir + "/" + n);
	ASSERT_GE(files.size(), 12u);
	std::vector<int64_t> want_time;
	for (int round = 0; round < 3; round++) {
		SCOPED_TRACE("reopen " + std::to_string(round));
		l.Open();
		ASSERT_TRUE(l.rec.clean);
		std::vector<int64_t> got_time;
		for (int64_t ts = 0; ts < 10000; ts += 97) {
			int64_t off;
			ASSERT_EQ(0, km_log_offset_for_time(l.log, ts, &off));
			got_time.push_back(off);
		}
		if (round == 0)
			want_time = got_time;
		EXPECT_EQ(want_time, got_time) << "ListOffsets by time changed";
		ASSERT_EQ(0, l.Close());
		for (auto &kv : files) {
			if (kv.first.find(SegName(Bases(l.dir, ".log").back(), "")) == 0)
				continue; // the active segment's files are rewritten
			EXPECT_TRUE(kv.second == ReadFile(l.dir + "/" + kv.first))
				<< kv.first << " changed: " << kv.second.size()
				<< " -> " << ReadFile(l.dir + "/" + kv.first).size()
				<< " bytes";
		}
	}
}

INSTANTIATE_TEST_SUITE_P(Timestamps, Reopen, ::testing::Values(true, false),
			 [](const ::testing::TestParamInfo<bool> &i) {
				 return i.param ? "varying" : "constant";
			 });

// .txnindex entries and a snapshot with open and closed transactions,
// coordinator epochs and a mapped producer; LSO across a reopen.
TEST(Formats, TxnIndexAndSnapshotWithTransactions)
{
	TempDir td;
	Log l(td.path);
	std::vector<std::vector<uint8_t>> s;
	s.push_back(Data(0, 3, 1, 0, 2, true, 50, 100));   // A opens at 0
	s.push_back(Data(2, 4, 0, 0, 2, true, 50, 110));   // B opens at 2
	s.push_back(MarkerCE(4, 3, 1, false, 5, 120));	   // A aborted
	s.push_back(Data(5, -7, 2, 10, 3, false, 50, 130)); // mapped, no txn
	s.push_back(MarkerCE(8, 4, 0, true, 5, 140));	   // B committed
	s.push_back(Data(9, 3, 1, 2, 1, true, 50, 150));   // A opens at 9
	s.push_back(MarkerCE(10, 3, 1, false, 6, 160));	   // A aborted
	s.push_back(Data(11, 4, 0, 2, 2, true, 50, 170));  // B opens at 11
	for (auto &b : s) {
		Batch v(b);
		ASSERT_EQ(1, l.Append(v));
	}
	// AbortedTxn: version int16 0, producerId, firstOffset, lastOffset (the
	// marker), lastStableOffset (the next open txn of another producer,
	// else marker + 1).
	std::vector<uint8_t> want;
	Put16(want, 0), Put64(want, 3), Put64(want, 0), Put64(want, 4), Put64(want, 2);
	Put16(want, 0), Put64(want, 3), Put64(want, 9), Put64(want, 10), Put64(want, 11);
	std::string seg0 = l.dir + "/" + SegName(0, ".");
	EXPECT_EQ(want, ReadFile(seg0 + "txnindex"));
	EXPECT_EQ(11, km_log_lso(l.log)) << "B is open from 11";

	km_aborted_txn ab[4];
	ASSERT_EQ(2, km_log_aborted_txns(l.log, 0, 13, ab, 4));
	EXPECT_EQ(0, ab[0].first_offset);
	EXPECT_EQ(2, ab[0].last_stable_offset);
	EXPECT_EQ(9, ab[1].first_offset);
	ASSERT_EQ(1, km_log_aborted_txns(l.log, 5, 13, ab, 4))
		<< "the first ended at 4, before the range";
	EXPECT_EQ(10, ab[0].last_offset);

	std::set<int64_t> pids = {3, 4, -7};
	StateView before = Capture(l.log, pids);
	ASSERT_EQ(0, l.Close());
	std::vector<uint8_t> snap = Snapshot({
		// Data(...) timestamps: ts + i for record i; maxTimestamp is the last.
		{-7, 2, 12, 7, 2, 132, -1, -1},
		{3, 1, 2, 9, 0, 160, 6, -1},  // last event: the ABORT at 160
		{4, 0, 3, 12, 1, 171, 5, 11}, // open from 11
	});
	EXPECT_EQ(snap, ReadFile(l.dir + "/" + SegName(13, ".snapshot")));
	EXPECT_EQ(want, ReadFile(seg0 + "txnindex"));

	l.Open();
	ExpectSameState(before, Capture(l.log, pids), "after clean reopen");
	EXPECT_EQ(11, km_log_lso(l.log));
}

// Kafka makes a segment's .txnindex only for its first aborted
// transaction (its TransactionIndex opens the file lazily), and DumpLog-
// Segments / a broker given our files expect the same set of files: a
// segment holding data and a COMMIT has none - appended, closed, reopened,
// recovered after a crash - the first ABORT makes it, and a crash's
// recovery that must rebuild it makes it again; truncating below the abort
// removes it (the directory of a log that never held the abort).
TEST(Formats, TxnIndexOnlyOnceTheSegmentHoldsAnAbort)
{
	TempDir td;
	const std::string seg0 = td.path + "/t-0/" + SegName(0, ".txnindex");
	std::vector<uint8_t> want;
	Put16(want, 0), Put64(want, 3), Put64(want, 3), Put64(want, 5), Put64(want, 6);
	std::vector<std::vector<uint8_t>> first = {
		Data(0, 3, 1, 0, 2, true, 50, 100), MarkerCE(2, 3, 1, true, 5, 110) };
	std::vector<std::vector<uint8_t>> second = {
		Data(3, 3, 1, 2, 2, true, 50, 120), MarkerCE(5, 3, 1, false, 5, 130) };
	// A crash after the COMMIT: the recovery's rescan makes no file.
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(td.path);
		for (auto &b : first) {
			Batch v(b);
			if (l.Append(v) != 1 || Exists(seg0))
				_exit(1);
		}
		_exit(0); // no close: the files as a crash leaves them
	}
	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status)) << "appended, or a .txnindex without an abort";
	{
		Log l(td.path);
		ASSERT_FALSE(l.rec.clean);
		EXPECT_EQ(3, km_log_end_offset(l.log));
		EXPECT_FALSE(Exists(seg0)) << "after recovery";
		ASSERT_EQ(0, l.Close());
		l.Open();
		EXPECT_FALSE(Exists(seg0)) << "after a clean reopen";
		Batch d(second[0]);
		ASSERT_EQ(1, l.Append(d));
		EXPECT_FALSE(Exists(seg0)) << "an open transaction is no abort";
		Batch x(second[1]);
		ASSERT_EQ(1, l.Append(x));
		EXPECT_EQ(want, ReadFile(seg0)) << "the ABORT makes it";
		km_aborted_txn ab[2];
		ASSERT_EQ(1, km_log_aborted_txns(l.log, 0, 6, ab, 2));
		EXPECT_EQ(3, ab[0].first_offset);
		ASSERT_GE(km_log_truncate_to(l.log, 5, nullptr, nullptr), 0);
		EXPECT_FALSE(Exists(seg0)) << "gone with its only entry";
		EXPECT_EQ(0, km_log_aborted_txns(l.log, 0, 6, ab, 2));
	}
	// A crash after the ABORT with the file and the snapshots gone: the
	// rescan replays the abort and makes the file again.
	TempDir td2;
	const std::string seg0b = td2.path + "/t-0/" + SegName(0, ".txnindex");
	pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(td2.path);
		for (auto *v : { &first, &second })
			for (auto &b : *v) {
				Batch bb(b);
				if (l.Append(bb) != 1)
					_exit(1);
			}
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status));
	ASSERT_EQ(want, ReadFile(seg0b)) << "made at the abort, before any close";
	ASSERT_EQ(0, unlink(seg0b.c_str()));
	for (auto &n : ListDir(td2.path + "/t-0")) {
		if (EndsWith(n, ".snapshot")) {
			ASSERT_EQ(0, unlink((td2.path + "/t-0/" + n).c_str())) << n;
		}
	}
	Log l(td2.path);
	ASSERT_FALSE(l.rec.clean);
	EXPECT_EQ(want, ReadFile(seg0b)) << "rebuilt by the recovery";
}

// leader-epoch-checkpoint: "0\n<count>\n<epoch> <start>\n"; a batch from an
// older leader starts no entry; the first local write takes an epoch above
// every mirrored one (R6); truncation drops entries past the end.
TEST(Formats, LeaderEpochCheckpoint)
{
	TempDir td;
	Log l(td.path);
	for (auto b : {DataLE(0, 0, 3, 0, 3), DataLE(3, 2, 3, 3, 3),
		       DataLE(6, 1, 3, 6, 2)}) {
		Batch v(b);
		ASSERT_EQ(1, l.Append(v));
	}
	EXPECT_EQ("0\n2\n0 0\n2 3\n", ReadText(l.dir + "/leader-epoch-checkpoint"));
	Batch local(Data(0, 9, 0, 0, 1));
	km_log_append_result res;
	ASSERT_EQ(1, l.Append(local, KM_ORIGIN_CLIENT, &res));
	EXPECT_EQ(8, res.first_offset);
	EXPECT_EQ(3, km_batch_leader_epoch(&local.view));
	EXPECT_EQ("0\n3\n0 0\n2 3\n3 8\n",
		  ReadText(l.dir + "/leader-epoch-checkpoint"));
	EXPECT_FALSE(Exists(l.dir + "/leader-epoch-checkpoint.tmp"));
	EXPECT_EQ(3, km_log_truncate_to(l.log, 3, nullptr, nullptr));
	EXPECT_EQ("0\n1\n0 0\n", ReadText(l.dir + "/leader-epoch-checkpoint"));
}

// partition.metadata: "version: 0\ntopic_id: <22 chars>" with no newline
// after the id (Kafka's PartitionMetadataFileFormatter.toFile; the id is
// Uuid.toString, URL-safe base64 without padding), written once and kept.
TEST(Formats, PartitionMetadata)
{
	TempDir td;
	Log l(td.path);
	std::string text = ReadText(l.dir + "/partition.metadata");
	EXPECT_TRUE(std::regex_match(
		text, std::regex("version: 0\ntopic_id: [A-Za-z0-9_-]{22}")))
		<< text;
	ASSERT_EQ(0, l.Close());
	l.Open();
	EXPECT_EQ(text, ReadText(l.dir + "/partition.metadata"));
}

// The topic id the owner gives (the source topic's) is the one the file
// names, byte for byte, at open and when it is learned later; it replaces
// a random one, and an older kmirror's file (a newline after the id) is
// read as Kafka reads it.
TEST(Formats, PartitionMetadataNamesTheGivenTopicId)
{
	const uint8_t a[16] = { 0x6f, 0x1b, 0x3c, 0x9e, 0x00, 0x11, 0x42, 0x33,
				0x84, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb };
	const uint8_t b[16] = { 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x43, 0x21,
				0x90, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07 };
	/* Uuid.toString of a and b, worked out apart from kmirror (Python:
	 * base64.urlsafe_b64encode, "=" padding dropped). */
	const std::string ta = "bxs8ngARQjOEVWZ3iJmquw";
	const std::string tb = "_ty6mHZUQyGQAQIDBAUGBw";
	TempDir td;
	Log l(td.path);
	uint8_t got[16];
	ASSERT_EQ(1, km_log_set_topic_id(l.log, a));
	EXPECT_EQ("version: 0\ntopic_id: " + ta,
		  ReadText(l.dir + "/partition.metadata"));
	EXPECT_FALSE(Exists(l.dir + "/partition.metadata.tmp"));
	EXPECT_EQ(0, km_log_set_topic_id(l.log, a)) << "rewritten unchanged";
	km_log_topic_id(l.log, got);
	EXPECT_EQ(0, memcmp(a, got, 16));
	ASSERT_EQ(0, l.Close());
	/* Reopened without an id: the file's is kept. */
	l.Open();
	EXPECT_EQ("version: 0\ntopic_id: " + ta,
		  ReadText(l.dir + "/partition.metadata"));
	ASSERT_EQ(0, l.Close());
	/* Opened with another: it is the one named. */
	memcpy(l.cfg.topic_id, b, 16);
	l.Open();
	EXPECT_EQ("version: 0\ntopic_id: " + tb,
		  ReadText(l.dir + "/partition.metadata"));
	ASSERT_EQ(0, l.Close());
	std::ofstream(l.dir + "/partition.metadata")
		<< "version: 0\ntopic_id: " << ta << "\n";
	EXPECT_EQ(1, km_log_metadata_read(l.dir.c_str(), got));
	EXPECT_EQ(0, memcmp(a, got, 16));
}

// kmirror-dump-log (kafka-dump-log.sh's format) reads every segment we
// write, data, transaction markers and the barrier, and finds every batch
// valid.
TEST(Formats, DumpToolReadsOurSegments)
{
	const char *tool = getenv("KM_DUMP_LOG");
	if (tool == nullptr || !*tool)
		FAIL() << "KM_DUMP_LOG not set (meson sets it; run through meson test)";
	TempDir td;
	Log l(td.path, SmallSegments);
	std::vector<std::vector<uint8_t>> stream = Stream(30);
	int64_t off = Info(stream.back()).last + 1;
	stream.push_back(Data(off, 5, 0, 0, 2, true, 100, 9000));
	stream.push_back(MarkerCE(off + 2, 5, 0, false, 1, 9001));
	stream.push_back(Barrier(off + 3, "XyzClusterId0123456789"));
	for (auto &b : stream) {
		Batch v(b);
		ASSERT_EQ(1, l.Append(v));
	}
	ASSERT_EQ(0, l.Close());
	std::string cmd = std::string("'") + tool + "' --deep";
	std::vector<int64_t> bases = Bases(l.dir, ".log");
	ASSERT_GE(bases.size(), 3u);
	for (int64_t b : bases)
		cmd += " '" + l.dir + "/" + SegName(b, ".log") + "'";
	FILE *p = popen(cmd.c_str(), "r");
	ASSERT_NE(nullptr, p);
	std::string out;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		out.append(buf, n);
	ASSERT_EQ(0, pclose(p)) << out;
	size_t valid = 0, pos = 0;
	while ((pos = out.find("isvalid: true", pos)) != std::string::npos)
		valid++, pos++;
	EXPECT_EQ(stream.size(), valid) << out;
	EXPECT_EQ(std::string::npos, out.find("isvalid: false")) << out;
	EXPECT_EQ(std::string::npos, out.find("invalid bytes")) << out;
	EXPECT_NE(std::string::npos, out.find("endTxnMarker: ABORT")) << out;
	EXPECT_NE(std::string::npos, out.find("XyzClusterId0123456789")) << out;
}

} // namespace
