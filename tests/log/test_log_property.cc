// Goal: "live state equals replayed state" (DESIGN.md): for random streams
// of data batches (several producers, positive and mapped negative ids,
// transactional and not, epoch bumps, producerless batches, compaction
// gaps), ABORT/COMMIT markers and MIRROR_PID_RESET barriers (mirrored, and
// local ones only where R3 allows them), appended in bursts across many
// segment rolls, everything the log exposes about producer state - every
// producer's km_pstate_get fields, km_pstate_count, km_pstate_max_positive_pid,
// the open transactions, the aborted-transaction index - and the LSO and
// the bytes read back are the same (a) live, (b) after a clean close +
// reopen, (c) after a crash (a child process that appends the same stream
// and exits without closing) and recovery replay, and (d) after
// km_log_truncate_to a random point of the recovered log, compared with a
// fresh log fed only the batches below that point - there, once both are
// closed, every file of the partition directory is byte for byte the same.
// Method: fixed seeds (20), a deterministic generator, small segments; real
// files and a real io_uring; syncs at the end of each run rather than per
// batch, to keep the 4 logs per seed within a few seconds.
#include <sys/wait.h>

#include <random>

#include "log_check.h"

using namespace logtest;

namespace {

struct Step {
	std::vector<uint8_t> bytes;
	km_origin origin;
	int64_t last; // last offset it occupies
};

struct Prod {
	int64_t id;
	int16_t epoch = 0;
	int32_t seq = 0;
	int32_t coord = 0;
	bool in_txn = false;
};

// A stream that is valid for MIRROR appends everywhere and for local
// (CONTROL) barriers where it puts them.
std::vector<Step> Generate(uint32_t seed, int steps)
{
	std::mt19937 rng(seed);
	auto pick = [&](uint32_t n) { return (uint32_t)(rng() % n); };
	std::vector<Prod> ps;
	for (int64_t id : {3, 8, 1000, -7, -12, -20})
		ps.push_back(Prod{id});
	std::vector<Step> out;
	int64_t off = 0, ts = 10000;
	for (int i = 0; i < steps; i++) {
		uint32_t r = pick(100);
		ts += (int64_t)pick(200) - 60; // mostly up, sometimes down
		Prod *open = nullptr;
		for (auto &p : ps)
			if (p.in_txn && (open == nullptr || pick(2)))
				open = &p;
		bool neg_open = false;
		for (auto &p : ps)
			neg_open |= p.in_txn && p.id < 0;
		if (r < 15 && open != nullptr) { // marker
			bool commit = pick(2);
			if (pick(4) == 0)
				open->coord++;
			km_ctrl_spec s = {off, 0, ts};
			std::vector<uint8_t> m(KM_CTRL_MARKER_BATCH_BYTES);
			km_ctrl_build_marker(m.data(), m.size(), &s, open->id,
					     open->epoch, commit, open->coord);
			out.push_back({m, KM_ORIGIN_MIRROR, off});
			open->in_txn = false;
			off += 1;
			continue;
		}
		if (r < 20 && !neg_open) { // barrier, local or mirrored
			km_ctrl_spec s = {off, 0, ts};
			std::vector<uint8_t> b(256);
			int n = km_ctrl_build_pid_reset(b.data(), b.size(), &s,
							"srcClusterAAAAAAAAAAAAA");
			b.resize(n);
			out.push_back({b, pick(2) ? KM_ORIGIN_CONTROL : KM_ORIGIN_MIRROR,
				       off});
			off += 1;
			continue;
		}
		if (r < 24) { // epoch bump of a producer outside a txn
			Prod &p = ps[pick(ps.size())];
			if (!p.in_txn) {
				p.epoch++;
				p.seq = 0;
			}
			continue;
		}
		if (r < 30) // compaction gap (mirrored data keeps its offsets)
			off += 1 + pick(4);
		int n = 1 + (int)pick(4);
		int value = 10 + (int)pick(300);
		int64_t bts = ts - (pick(5) == 0 ? 5000 : 0);
		if (r < 36) { // no producer
			out.push_back({Data(off, -1, -1, -1, n, false, value, bts),
				       KM_ORIGIN_MIRROR, off + n - 1});
			off += n;
			continue;
		}
		Prod &p = ps[pick(ps.size())];
		bool txn = p.in_txn || pick(3) == 0;
		out.push_back({Data(off, p.id, p.epoch, p.seq, n, txn, value, bts),
			       KM_ORIGIN_MIRROR, off + n - 1});
		p.in_txn = txn;
		p.seq += n;
		off += n;
	}
	return out;
}

const std::set<int64_t> kPids = {3, 8, 1000, -7, -12, -20, -1};

void Config(km_log_config &c)
{
	c.segment_bytes = 4000;
	c.index_interval_bytes = 400;
	c.index_bytes_max = 1024;
	c.prealloc_bytes = 8192;
	c.flush_always = false;
	c.flush_bytes = 1ull << 40;
	c.flush_interval_ms = 1u << 30;
}

// Appends steps [0, n): consecutive MIRROR steps in bursts of 1-4, local
// ones alone; every call must take all it is given. Ends durable.
void Feed(Log &l, std::vector<Step> &steps, size_t n, uint32_t seed)
{
	std::mt19937 rng(seed ^ 0x5eed);
	std::vector<std::unique_ptr<Batch>> keep;
	for (size_t i = 0; i < n;) {
		size_t k = 1;
		if (steps[i].origin == KM_ORIGIN_MIRROR)
			while (k < 1 + rng() % 4 && i + k < n &&
			       steps[i + k].origin == KM_ORIGIN_MIRROR)
				k++;
		std::vector<km_batch> views;
		for (size_t j = 0; j < k; j++) {
			keep.emplace_back(new Batch(steps[i + j].bytes));
			views.push_back(keep.back()->view);
		}
		km_log_append_result res;
		int rc = km_log_append_burst(l.log, views.data(), (uint32_t)k,
					     steps[i].origin, &res);
		ASSERT_EQ((int)k, rc) << "step " << i << ": " << km_strerror(rc);
		ASSERT_EQ(steps[i + k - 1].last, res.last_offset) << "step " << i;
		ASSERT_EQ(0, km_log_sync(l.log));
		i += k;
	}
	ASSERT_EQ(0, km_log_flush(l.log));
	ASSERT_EQ(0, km_log_sync(l.log));
	ASSERT_EQ(km_log_end_offset(l.log), km_log_durable_offset(l.log));
}

// Batches back to back with partitionLeaderEpoch zeroed: local (CONTROL)
// batches get the log's leader epoch written into them (R6).
std::vector<uint8_t> MaskEpochs(std::vector<uint8_t> v)
{
	for (size_t at = 0; at + 12 <= v.size();
	     at += 12 + GetBE(&v[at + 8], 4))
		memset(&v[at + 12], 0, 4);
	return v;
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
		EXPECT_TRUE(ReadFile(a + "/" + n) == ReadFile(b + "/" + n))
			<< n << " differs";
	}
}

class LiveEqualsReplayed : public ::testing::TestWithParam<uint32_t> {};

TEST_P(LiveEqualsReplayed, Seed)
{
	const uint32_t seed = GetParam();
	std::vector<Step> steps = Generate(seed, 70);
	std::vector<uint8_t> all;
	for (auto &s : steps)
		all.insert(all.end(), s.bytes.begin(), s.bytes.end());
	TempDir td;

	// (c) first, in a child: the same stream, then exit without closing.
	std::string crash_dir = td.path + "/crash";
	pid_t pid = fork();
	ASSERT_GE(pid, 0);
	if (pid == 0) {
		Log l(crash_dir, Config);
		Feed(l, steps, steps.size(), seed);
		_exit(::testing::Test::HasFailure() ? 1 : 0);
	}

	// (a) live.
	Log live(td.path + "/live", Config);
	Feed(live, steps, steps.size(), seed);
	ASSERT_FALSE(HasFatalFailure());
	int64_t leo = km_log_end_offset(live.log);
	StateView s_live = Capture(live.log, kPids);
	ASSERT_GE(Bases(live.dir, ".log").size(), 3u) << "rolls";
	std::vector<uint8_t> live_bytes = ReadAll(live.log, 0, leo, 1 << 16);
	EXPECT_EQ(MaskEpochs(all), MaskEpochs(live_bytes));

	// (b) clean close + reopen.
	ASSERT_EQ(0, live.Close());
	live.Open();
	EXPECT_TRUE(live.rec.clean);
	ExpectSameState(s_live, Capture(live.log, kPids), "clean reopen");
	EXPECT_EQ(live_bytes, ReadAll(live.log, 0, leo, 1 << 16));

	int status;
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	// (c) recovery replay after the crash.
	Log crashed(crash_dir, Config);
	EXPECT_FALSE(crashed.rec.clean);
	EXPECT_EQ(0u, crashed.rec.bytes_truncated);
	ExpectSameState(s_live, Capture(crashed.log, kPids), "crash recovery");
	EXPECT_EQ(live_bytes, ReadAll(crashed.log, 0, leo, 1 << 16));

	// (d) truncate the recovered log at a random point; compare with a
	// fresh log that only ever saw the batches below it.
	std::mt19937 rng(seed * 7919u);
	int64_t cut = (int64_t)(rng() % (uint64_t)(leo + 1));
	size_t keep = 0;
	while (keep < steps.size() && steps[keep].last < cut)
		keep++;
	int64_t want_end = keep ? steps[keep - 1].last + 1 : 0;
	std::string layout;
	for (int64_t b : Bases(crashed.dir, ".log"))
		layout += " " + std::to_string(b);
	ASSERT_EQ(want_end, km_log_truncate_to(crashed.log, cut, nullptr, nullptr))
		<< "cut " << cut << ", segments at" << layout;
	Log fresh(td.path + "/fresh", Config);
	Feed(fresh, steps, keep, seed);
	ASSERT_FALSE(HasFatalFailure());
	StateView s_fresh = Capture(fresh.log, kPids);
	ExpectSameState(s_fresh, Capture(crashed.log, kPids),
			"truncated at " + std::to_string(cut));
	EXPECT_EQ(ReadAll(fresh.log, 0, want_end), ReadAll(crashed.log, 0, want_end));
	ASSERT_EQ(0, crashed.Close());
	ASSERT_EQ(0, fresh.Close());
	{
		SCOPED_TRACE("files after truncation at " + std::to_string(cut));
		ExpectSameFiles(fresh.dir, crashed.dir);
	}
}

INSTANTIATE_TEST_SUITE_P(Seeds, LiveEqualsReplayed, ::testing::Range(1u, 21u));

} // namespace
