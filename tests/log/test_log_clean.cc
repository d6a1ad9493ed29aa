// Goal: km_log_clean (issue 19 item 2) compacts a cleanup.policy=compact
// log as Kafka's cleaner does: below the active segment, the latest record
// per key stays at its offset and older ones go; a tombstone is kept with a
// delete horizon (attributes bit 6, baseTimestamp = now +
// delete.retention.ms) set the first time it is cleaned and goes once the
// horizon has passed; aborted transactional data goes while its ABORT
// marker stays; a COMMIT marker whose data is gone gets a horizon and then
// goes; the MIRROR_PID_RESET barrier always stays; a producer's last batch
// stays (emptied); and a crash at each step of the segment swap leaves,
// after the next open, either the old log or the cleaned one, never a mix.
// Also: a compressed batch that loses records is rewritten uncompressed
// with the rest at their offsets; a key map too small for the dirty
// section cleans as far as it reached and the next passes go on; readers
// on another thread keep reading whole, CRC-valid batches while segments
// are swapped under them.
// Method: real files and io_uring, 1 KiB segments; batches built with
// km_records_build; what the log holds is read back through km_log_read
// (the front end's path) and decoded record by record; the expectation is
// derived from what was appended and the offsets the log reports (its
// active segment's base), not written out by hand.
#include <zlib.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "log_check.h"

using namespace logtest;

#ifdef KM_TEST_HOOKS
extern "C" int km_log_clean_test_stop_after;
#endif

namespace {

constexpr int64_t kRetention = 10000;

struct Rec {
	int64_t off;
	std::string key;
	bool null_value;
	std::string value;
};

struct Read {
	std::vector<Rec> recs;
	std::vector<FileBatch> batches; // header fields, per batch
	std::map<int64_t, int16_t> attrs;
	std::map<int64_t, int64_t> base_ts;
};

std::vector<uint8_t> KV(int64_t base, const std::string &key,
			const char *value, int64_t pid = -1, bool txn = false,
			int32_t seq = -1)
{
	std::string v = value ? value : "";
	km_record_spec r = {key.data(), (int32_t)key.size(),
			    value ? v.data() : nullptr,
			    value ? (int32_t)v.size() : -1, 5000 + base,
			    nullptr, 0};
	km_batch_spec spec = {base, 0,
			      (int16_t)(txn ? KM_BATCH_ATTR_TRANSACTIONAL : 0),
			      pid, (int16_t)(pid == -1 ? -1 : 0), seq};
	std::vector<uint8_t> out(km_records_build_size(&r, 1));
	km_records_build(out.data(), out.size(), &spec, &r, 1);
	return out;
}

// Every batch the log serves, decoded (CRC-checked by km_batch_parse).
Read ReadBack(km_log *log)
{
	Read out;
	std::vector<uint8_t> all =
		ReadAll(log, km_log_start_offset(log), km_log_end_offset(log));
	size_t pos = 0;
	while (pos < all.size()) {
		iovec iov = {all.data() + pos, all.size() - pos};
		km_chain ch = {&iov, 1};
		km_batch b;
		int n = km_batch_parse(&b, &ch, km_chain_start(&ch),
				       KM_BATCH_BYTES_MAX);
		EXPECT_GT(n, 0) << km_strerror(n) << " at byte " << pos;
		if (n <= 0)
			break;
		FileBatch fb{};
		fb.base = km_batch_base_offset(&b);
		fb.last = km_batch_last_offset(&b);
		fb.pid = km_batch_producer_id(&b);
		fb.control = km_batch_is_control(&b);
		fb.ctrl_type = -1;
		if (fb.control && km_batch_records_count(&b) > 0) {
			km_ctrl c;
			if (km_ctrl_parse(&b, &c) == 0)
				fb.ctrl_type = c.type;
		}
		fb.size = (uint32_t)km_batch_records_count(&b);
		out.attrs[fb.base] = km_batch_attributes(&b);
		out.base_ts[fb.base] = km_batch_base_timestamp(&b);
		out.batches.push_back(fb);
		km_records_iter it;
		km_record r;
		EXPECT_EQ(0, km_records_begin(&it, &b));
		while (!fb.control && km_records_next(&it, &r) > 0) {
			Rec x;
			x.off = r.offset;
			std::string k(r.key_len > 0 ? r.key_len : 0, '\0');
			km_chain_copy(&ch, r.key, k.data(), k.size());
			x.key = k;
			x.null_value = r.value_len < 0;
			std::string v(r.value_len > 0 ? r.value_len : 0, '\0');
			km_chain_copy(&ch, r.value, v.data(), v.size());
			x.value = v;
			out.recs.push_back(x);
		}
		pos += (size_t)n;
	}
	return out;
}

void Tiny(km_log_config &c)
{
	c.segment_bytes = 1024;
	c.index_interval_bytes = 200;
	c.index_bytes_max = 4096;
	c.prealloc_bytes = 4096;
	c.compact = true;
	c.delete_retention_ms = kRetention;
	c.min_cleanable_ratio = 0; // every sealed segment makes a pass
}

int64_t ActiveBase(const Log &l)
{
	std::vector<int64_t> b = Bases(l.dir, ".log");
	return b.empty() ? -1 : *std::max_element(b.begin(), b.end());
}

void Put(Log &l, std::vector<uint8_t> bytes)
{
	Batch b(std::move(bytes));
	ASSERT_EQ(1, l.Append(b)) << "at " << km_batch_base_offset(&b.view);
}

struct Written {
	int64_t off;
	std::string key;
	std::string value;
};

// n records over `keys` keys, one per batch, from offset `from`.
std::vector<Written> Fill(Log &l, int64_t from, int n, int keys,
			  const char *tag)
{
	std::vector<Written> w;
	for (int i = 0; i < n; i++) {
		Written x{from + i, "key" + std::to_string(i % keys),
			  std::string(tag) + std::to_string(from + i)};
		Put(l, KV(x.off, x.key, x.value.c_str()));
		w.push_back(x);
	}
	return w;
}

TEST(LogClean, KeepsTheLatestRecordPerKeyAtItsOffset)
{
	FastTempDir t;
	Log l(t.path, Tiny);
	std::vector<Written> w = Fill(l, 0, 60, 7, "v");
	Read before = ReadBack(l.log);
	int64_t end = ActiveBase(l);
	ASSERT_GT(end, 20) << "the test needs several sealed segments";

	km_log_clean_stats st;
	ASSERT_EQ(1, km_log_clean(l.log, 1000, &st));
	EXPECT_EQ(end, st.clean_to);
	// Below the active segment, the latest offset of each key there.
	std::map<std::string, int64_t> latest;
	for (auto &x : w)
		if (x.off < end)
			latest[x.key] = x.off;
	std::vector<Written> want;
	for (auto &x : w)
		if (x.off >= end || latest[x.key] == x.off)
			want.push_back(x);
	for (int round = 0; round < 2; round++) {
		Read got = ReadBack(l.log);
		ASSERT_EQ(want.size(), got.recs.size()) << "round " << round;
		for (size_t i = 0; i < want.size(); i++) {
			EXPECT_EQ(want[i].off, got.recs[i].off);
			EXPECT_EQ(want[i].key, got.recs[i].key);
			EXPECT_EQ(want[i].value, got.recs[i].value);
		}
		EXPECT_LT(got.batches.size(), before.batches.size());
		EXPECT_EQ(km_log_end_offset(l.log), 60);
		// The same after a reopen that rescans every batch.
		ASSERT_EQ(0, l.Close());
		unlink((l.dir + "/.kafka_cleanshutdown").c_str());
		l.Open();
		EXPECT_FALSE(l.rec.clean);
		EXPECT_EQ(-1, l.rec.truncated_at);
	}
	EXPECT_FALSE(Exists(l.dir + "/cleaner.tmp"));
	// After an open all is dirty again: one pass that changes nothing
	// (no segment rewritten), then nothing to do.
	EXPECT_EQ(1, km_log_clean(l.log, 1000, &st));
	EXPECT_EQ(0u, st.segments);
	EXPECT_EQ(want.size(), ReadBack(l.log).recs.size());
	EXPECT_EQ(0, km_log_clean(l.log, 1000, &st));
}

// Kafka's min.cleanable.dirty.ratio: no pass until the dirty segments
// hold more than that part of the cleanable bytes.
TEST(LogClean, APassWaitsForTheDirtyRatio)
{
	FastTempDir t;
	Log l(t.path, [](km_log_config &c) {
		Tiny(c);
		c.min_cleanable_ratio = 0.5;
	});
	Fill(l, 0, 60, 60, "v"); // distinct keys: cleaning keeps them all
	km_log_clean_stats st;
	ASSERT_EQ(1, km_log_clean(l.log, 1000, &st)) << "all of it is dirty";
	const int64_t end = st.clean_to;
	// One more sealed segment: dirty, but a small part of the whole.
	for (int64_t at = km_log_end_offset(l.log); ActiveBase(l) == end; at++)
		Put(l, KV(at, "n" + std::to_string(at), "w"));
	EXPECT_EQ(0, km_log_clean(l.log, 1000, &st));
	// Many more: the dirty part outweighs the cleaned one - unless the
	// topic stopped being compacted (a synced cleanup.policy=delete).
	Fill(l, km_log_end_offset(l.log), 60, 7, "x");
	EXPECT_EQ(-EINVAL, km_log_set_compaction(l.log, true, 1, 1.5));
	ASSERT_EQ(0, km_log_set_compaction(l.log, false, kRetention, 0.5));
	EXPECT_EQ(0, km_log_clean(l.log, 1000, &st));
	ASSERT_EQ(0, km_log_set_compaction(l.log, true, kRetention, 0.5));
	EXPECT_EQ(1, km_log_clean(l.log, 1000, &st));
}

TEST(LogClean, TombstonesStayUntilTheirDeleteHorizon)
{
	FastTempDir t;
	Log l(t.path, Tiny);
	Put(l, KV(0, "gone", "value"));
	Put(l, KV(1, "gone", nullptr)); // the tombstone
	Fill(l, 2, 40, 5, "f");
	const int64_t now = 100000;
	km_log_clean_stats st;
	ASSERT_EQ(1, km_log_clean(l.log, now, &st));
	Read r = ReadBack(l.log);
	ASSERT_FALSE(r.recs.empty());
	EXPECT_EQ(1, r.recs[0].off) << "the value under the tombstone goes";
	EXPECT_TRUE(r.recs[0].null_value);
	ASSERT_TRUE(r.attrs.count(1));
	EXPECT_TRUE(r.attrs[1] & KM_BATCH_ATTR_DELETE_HORIZON);
	EXPECT_EQ(now + kRetention, r.base_ts[1]);
	// A batch without a tombstone gets no horizon.
	EXPECT_FALSE(r.attrs[r.batches.back().base] &
		     KM_BATCH_ATTR_DELETE_HORIZON);

	// Before the horizon: nothing to do; the tombstone stays.
	EXPECT_EQ(0, km_log_clean(l.log, now + kRetention - 1, &st));
	EXPECT_EQ(1, ReadBack(l.log).recs[0].off);
	// At it (Kafka: currentTime < horizon keeps): it goes by itself.
	ASSERT_EQ(1, km_log_clean(l.log, now + kRetention, &st));
	r = ReadBack(l.log);
	ASSERT_FALSE(r.recs.empty());
	EXPECT_GT(r.recs[0].off, 1);
	for (auto &x : r.recs)
		EXPECT_NE("gone", x.key);
}

bool HasBatch(const Read &r, int64_t base)
{
	for (auto &b : r.batches)
		if (b.base == base)
			return true;
	return false;
}

const FileBatch *BatchAt(const Read &r, int64_t base)
{
	for (auto &b : r.batches)
		if (b.base == base)
			return &b;
	return nullptr;
}

TEST(LogClean, ControlBatchesAsKafkasCleanerAndTheBarrierAlways)
{
	FastTempDir t;
	Log l(t.path, Tiny);
	// pid 7: a committed transaction whose key is overwritten by its next
	// one, so the first COMMIT's data goes; pid 8: an aborted
	// transaction of two batches, then a later plain batch of its own.
	Put(l, KV(0, "x", "t1", 7, true, 0));
	Put(l, Marker(1, 7, 0, true));
	Put(l, KV(2, "a", "aborted1", 8, true, 0));
	Put(l, KV(3, "b", "aborted2", 8, true, 1));
	Put(l, Marker(4, 8, 0, false));
	Put(l, Barrier(5));
	Put(l, KV(6, "x", "t2", 7, true, 1));
	Put(l, Marker(7, 7, 0, true));
	Put(l, KV(8, "c", "after", 8, false, 2));
	Fill(l, 9, 40, 5, "f");
	const int64_t t0 = 100000;
	km_log_clean_stats st;
	ASSERT_EQ(1, km_log_clean(l.log, t0, &st));
	Read r = ReadBack(l.log);
	EXPECT_FALSE(HasBatch(r, 0)) << "overwritten committed data";
	EXPECT_TRUE(HasBatch(r, 1)) << "its COMMIT: data was read this pass";
	EXPECT_FALSE(HasBatch(r, 2)) << "aborted data";
	EXPECT_FALSE(HasBatch(r, 3)) << "aborted data";
	ASSERT_TRUE(HasBatch(r, 4)) << "the ABORT stays while data was seen";
	EXPECT_EQ(KM_CTRL_ABORT, BatchAt(r, 4)->ctrl_type);
	ASSERT_TRUE(HasBatch(r, 5));
	EXPECT_EQ(KM_CTRL_MIRROR_PID_RESET, BatchAt(r, 5)->ctrl_type);
	EXPECT_TRUE(HasBatch(r, 6) && HasBatch(r, 7) && HasBatch(r, 8));
	km_aborted_txn ab[4];
	EXPECT_EQ(1, km_log_aborted_txns(l.log, 0, 9, ab, 4))
		<< "the .txnindex entry stays with its marker";

	// More data, a second pass: the first COMMIT and the ABORT have no
	// data left: each gets a horizon; a third pass past it removes them.
	Fill(l, 49, 20, 5, "g");
	ASSERT_EQ(1, km_log_clean(l.log, t0, &st));
	r = ReadBack(l.log);
	ASSERT_TRUE(HasBatch(r, 1) && HasBatch(r, 4));
	EXPECT_TRUE(r.attrs[1] & KM_BATCH_ATTR_DELETE_HORIZON);
	EXPECT_EQ(t0 + kRetention, r.base_ts[1]);
	EXPECT_TRUE(r.attrs[4] & KM_BATCH_ATTR_DELETE_HORIZON);
	EXPECT_FALSE(r.attrs[5] & KM_BATCH_ATTR_DELETE_HORIZON);
	EXPECT_EQ(0, km_log_aborted_txns(l.log, 0, 9, ab, 4));
	ASSERT_EQ(1, km_log_clean(l.log, t0 + kRetention + 1, &st));
	r = ReadBack(l.log);
	EXPECT_FALSE(HasBatch(r, 1));
	EXPECT_FALSE(HasBatch(r, 4));
	ASSERT_TRUE(HasBatch(r, 5)) << "the barrier is the failback point";
	EXPECT_EQ(KM_CTRL_MIRROR_PID_RESET, BatchAt(r, 5)->ctrl_type);
	EXPECT_TRUE(HasBatch(r, 7)) << "pid 7's last batch: its last marker";
	EXPECT_TRUE(HasBatch(r, 8)) << "pid 8's last data batch";
}

TEST(LogClean, AProducersLastBatchStaysEmpty)
{
	FastTempDir t;
	Log l(t.path, Tiny);
	Put(l, KV(0, "k", "old", 9, false, 0)); // pid 9's only batch
	Fill(l, 1, 40, 1, "v");			// overwrites key0, not k
	Put(l, KV(41, "k", "new"));
	Fill(l, 42, 30, 1, "w");
	km_log_clean_stats st;
	ASSERT_EQ(1, km_log_clean(l.log, 1000, &st));
	Read r = ReadBack(l.log);
	const FileBatch *b = BatchAt(r, 0);
	ASSERT_NE(nullptr, b) << "pid 9's last batch, for producer state";
	EXPECT_EQ(0u, b->size) << "its record is gone: emptied";
	EXPECT_EQ(9, b->pid);
	EXPECT_GE(st.batches_emptied, 1u);
	for (auto &x : r.recs)
		EXPECT_FALSE(x.key == "k" && x.off == 0);
}

// The records of an uncompressed batch, gzip'd into a codec-1 batch.
std::vector<uint8_t> Gzipped(std::vector<uint8_t> b)
{
	std::vector<uint8_t> recs(b.begin() + KM_BATCH_HEADER_BYTES, b.end());
	std::vector<uint8_t> z(compressBound(recs.size()) + 64);
	z_stream zs{};
	EXPECT_EQ(Z_OK, deflateInit2(&zs, 6, Z_DEFLATED, 31, 8, Z_DEFAULT_STRATEGY));
	zs.next_in = recs.data();
	zs.avail_in = (uInt)recs.size();
	zs.next_out = z.data();
	zs.avail_out = (uInt)z.size();
	EXPECT_EQ(Z_STREAM_END, deflate(&zs, Z_FINISH));
	z.resize(zs.total_out);
	deflateEnd(&zs);
	std::vector<uint8_t> out(b.begin(), b.begin() + KM_BATCH_HEADER_BYTES);
	out.insert(out.end(), z.begin(), z.end());
	uint32_t len = (uint32_t)out.size() - 12;
	for (int i = 0; i < 4; i++)
		out[8 + i] = (uint8_t)(len >> (24 - 8 * i));
	out[22] = (uint8_t)((out[22] & ~7) | KM_CODEC_GZIP);
	uint32_t crc = RefCrc32c(out.data() + 21, out.size() - 21);
	for (int i = 0; i < 4; i++)
		out[17 + i] = (uint8_t)(crc >> (24 - 8 * i));
	return out;
}

TEST(LogClean, ACompressedBatchLosingRecordsIsRewrittenUncompressed)
{
	FastTempDir t;
	Log l(t.path, Tiny);
	std::string v = "value";
	std::vector<km_record_spec> recs = {
		{ "a", 1, v.data(), 5, 5000, nullptr, 0 },
		{ "b", 1, v.data(), 5, 5001, nullptr, 0 },
		{ "c", 1, v.data(), 5, 5002, nullptr, 0 },
	};
	km_batch_spec spec = { 0, 0, 0, -1, -1, -1 };
	std::vector<uint8_t> plain(km_records_build_size(recs.data(), 3));
	km_records_build(plain.data(), plain.size(), &spec, recs.data(), 3);
	Put(l, Gzipped(plain));
	Put(l, KV(3, "a", "newer"));
	Fill(l, 4, 40, 5, "f");
	km_log_clean_stats st;
	ASSERT_EQ(1, km_log_clean(l.log, 1000, &st));
	Read r = ReadBack(l.log); // km_records_begin refuses a compressed one
	ASSERT_TRUE(r.attrs.count(0));
	EXPECT_EQ(0, r.attrs[0] & KM_BATCH_ATTR_CODEC_MASK);
	ASSERT_GE(r.recs.size(), 3u);
	EXPECT_EQ(1, r.recs[0].off);
	EXPECT_EQ("b", r.recs[0].key);
	EXPECT_EQ(2, r.recs[1].off);
	EXPECT_EQ("c", r.recs[1].key);
	EXPECT_EQ(3, r.recs[2].off);
	EXPECT_EQ("newer", r.recs[2].value);
	EXPECT_EQ(2, BatchAt(r, 0)->last) << "lastOffsetDelta kept";
	EXPECT_EQ(5001, r.base_ts[0]) << "the first kept record's timestamp";
}

TEST(LogClean, AFullKeyMapCleansWhatItReachedAndTheNextPassesGoOn)
{
	FastTempDir t;
	Log l(t.path, [](km_log_config &c) {
		Tiny(c);
		c.segment_bytes = 16384;
		c.cleaner_map_bytes = 24 * 1024; // 1024 slots, ~920 keys
	});
	// 3000 distinct keys, each written twice, far apart.
	std::vector<Written> w = Fill(l, 0, 1500, 1500, "a");
	std::vector<Written> w2 = Fill(l, 1500, 1500, 1500, "b");
	w.insert(w.end(), w2.begin(), w2.end());
	std::vector<Written> pad = Fill(l, 3000, 200, 200, "pad"); // a roll
	w.insert(w.end(), pad.begin(), pad.end());
	int64_t end = ActiveBase(l);
	ASSERT_GT(end, 3000);
	km_log_clean_stats st;
	ASSERT_EQ(1, km_log_clean(l.log, 1000, &st));
	EXPECT_TRUE(st.map_full);
	EXPECT_LT(st.dirty_to, end);
	EXPECT_GT(st.dirty_to, 0);
	int passes = 1;
	while (km_log_clean(l.log, 1000, &st) == 1 && passes < 20)
		passes++;
	EXPECT_GT(passes, 2);
	std::map<std::string, int64_t> latest;
	Read r = ReadBack(l.log);
	for (auto &x : r.recs) {
		if (x.off < end) {
			EXPECT_TRUE(latest.emplace(x.key, x.off).second)
				<< x.key << " twice, at " << latest[x.key]
				<< " and " << x.off;
		}
	}
	std::map<std::string, int64_t> want;
	for (auto &x : w)
		if (x.off < end)
			want[x.key] = x.off;
	EXPECT_EQ(want, latest);
}

TEST(LogClean, ReadersOnAnotherThreadSeeWholeBatchesThroughSwaps)
{
	FastTempDir t;
	Log l(t.path, Tiny);
	Fill(l, 0, 60, 7, "v");
	std::atomic<bool> stop{ false };
	std::atomic<long> reads{ 0 }, bad{ 0 };
	std::thread reader([&] {
		std::vector<uint8_t> buf(1 << 16);
		while (!stop.load()) {
			km_log_read_result rd;
			int64_t from = km_log_start_offset(l.log);
			int rc = km_log_read(l.log, from, INT64_MAX, 1 << 16,
					     buf.data(), buf.size(), &rd);
			if (rc != 0) {
				bad++;
				continue;
			}
			size_t pos = 0;
			int64_t next = from;
			while (pos < rd.bytes) {
				iovec iov = { buf.data() + pos, rd.bytes - pos };
				km_chain ch = { &iov, 1 };
				km_batch b;
				int n = km_batch_parse(&b, &ch, km_chain_start(&ch),
						       KM_BATCH_BYTES_MAX);
				if (n <= 0 || km_batch_base_offset(&b) < next) {
					bad++;
					break;
				}
				next = km_batch_last_offset(&b) + 1;
				pos += (size_t)n;
			}
			reads++;
		}
	});
	km_log_clean_stats st;
	int cleaned = 0;
	for (int round = 0; round < 30; round++) {
		Fill(l, km_log_end_offset(l.log), 15, 7, "r");
		cleaned += km_log_clean(l.log, 1000, &st) == 1;
	}
	stop = true;
	reader.join();
	EXPECT_EQ(0, bad.load());
	EXPECT_GT(reads.load(), 30);
	EXPECT_GT(cleaned, 20);
}

#ifdef KM_TEST_HOOKS
// step 2: the .swap files are all there (committed) when the run stops;
// undo: the commit point (.log.swap) is taken away first, as a crash
// before its rename would leave the directory.
void CrashAt(int step, bool undo, bool want_cleaned)
{
	FastTempDir t;
	Log l(t.path, Tiny);
	std::vector<Written> w = Fill(l, 0, 60, 7, "v");
	Read before = ReadBack(l.log);
	int64_t end = ActiveBase(l);
	km_log_clean_test_stop_after = step;
	km_log_clean_stats st;
	EXPECT_EQ(-EINTR, km_log_clean(l.log, 1000, &st));
	km_log_clean_test_stop_after = 0;
	if (undo) {
		ASSERT_EQ(0, unlink((l.dir + "/" + SegName(0, ".log.swap"))
					    .c_str()));
	}
	ASSERT_EQ(0, l.Close());
	unlink((l.dir + "/.kafka_cleanshutdown").c_str()); // a crash
	l.Open();
	Read got = ReadBack(l.log);
	size_t n0 = 0, n0_before = 0; // records of segment 0
	int64_t seg1 = Bases(l.dir, ".log")[1];
	for (auto &x : got.recs)
		n0 += x.off < seg1;
	for (auto &x : before.recs)
		n0_before += x.off < seg1;
	if (want_cleaned)
		EXPECT_LT(n0, n0_before);
	else
		EXPECT_EQ(n0, n0_before);
	for (auto &n : ListDir(l.dir))
		EXPECT_FALSE(EndsWith(n, ".swap")) << n;
	EXPECT_FALSE(Exists(l.dir + "/cleaner.tmp"));
	// And a clean after it gives the fully cleaned log.
	ASSERT_EQ(1, km_log_clean(l.log, 1000, &st));
	std::map<std::string, int64_t> latest;
	for (auto &x : w)
		if (x.off < end)
			latest[x.key] = x.off;
	size_t want = 0;
	for (auto &x : w)
		want += x.off >= end || latest[x.key] == x.off;
	EXPECT_EQ(want, ReadBack(l.log).recs.size());
}

TEST(LogClean, CrashAfterTheSwapCommittedFinishesIt)
{
	CrashAt(2, false, true);
}

TEST(LogClean, CrashBeforeTheSwapCommittedRollsItBack)
{
	CrashAt(2, true, false);
}

TEST(LogClean, CrashAfterTheRenamesKeepsTheCleanedFiles)
{
	CrashAt(3, false, true);
}
#endif

} // namespace
