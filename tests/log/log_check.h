// Shared by the log test suites: byte-level helpers written from the spec
// (big-endian writers, a bitwise reference CRC-32C), file access, an
// independent walk over the batches of a segment file, and a snapshot of
// everything the log exposes about producer state, for comparisons.
#ifndef KM_TESTS_LOG_CHECK_H
#define KM_TESTS_LOG_CHECK_H

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "log_util.h"

namespace logtest {

// ---- bytes, as the spec lays them out ----

inline void PutBE(std::vector<uint8_t> &v, uint64_t x, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--)
		v.push_back((uint8_t)(x >> (8 * i)));
}
inline void Put8(std::vector<uint8_t> &v, uint64_t x) { PutBE(v, x, 1); }
inline void Put16(std::vector<uint8_t> &v, uint64_t x) { PutBE(v, x, 2); }
inline void Put32(std::vector<uint8_t> &v, uint64_t x) { PutBE(v, x, 4); }
inline void Put64(std::vector<uint8_t> &v, uint64_t x) { PutBE(v, x, 8); }

inline uint64_t GetBE(const uint8_t *p, int bytes)
{
	uint64_t x = 0;
	for (int i = 0; i < bytes; i++)
		x = (x << 8) | p[i];
	return x;
}

// Spec §1: "ZigZag: (n << 1) ^ (n >> 63); LEB128: 7 bits per byte, low
// group first, MSB = continuation".
inline void PutVarlong(std::vector<uint8_t> &v, int64_t n)
{
	uint64_t z = ((uint64_t)n << 1) ^ (uint64_t)(n >> 63);
	while (z >= 0x80) {
		v.push_back((uint8_t)(z | 0x80));
		z >>= 7;
	}
	v.push_back((uint8_t)z);
}

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), bit by bit: the
// reference the tests check our ISA-L-based code against.
inline uint32_t RefCrc32c(const uint8_t *p, size_t n)
{
	uint32_t c = 0xFFFFFFFFu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
	}
	return ~c;
}

// ---- files ----

inline std::vector<uint8_t> ReadFile(const std::string &path)
{
	std::vector<uint8_t> out;
	int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return out;
	uint8_t buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		out.insert(out.end(), buf, buf + n);
	close(fd);
	return out;
}

inline std::string ReadText(const std::string &path)
{
	std::vector<uint8_t> b = ReadFile(path);
	return std::string(b.begin(), b.end());
}

inline bool Exists(const std::string &path)
{
	struct stat st;
	return stat(path.c_str(), &st) == 0;
}

// File names in dir, sorted.
inline std::vector<std::string> ListDir(const std::string &dir)
{
	std::vector<std::string> out;
	DIR *d = opendir(dir.c_str());
	if (d == nullptr)
		return out;
	while (struct dirent *e = readdir(d)) {
		std::string n = e->d_name;
		if (n != "." && n != "..")
			out.push_back(n);
	}
	closedir(d);
	std::sort(out.begin(), out.end());
	return out;
}

inline bool EndsWith(const std::string &s, const std::string &suf)
{
	return s.size() >= suf.size() &&
	       s.compare(s.size() - suf.size(), suf.size(), suf) == 0;
}

// Base offsets of the "<20 digits><suffix>" files in dir, ascending.
inline std::vector<int64_t> Bases(const std::string &dir, const char *suffix)
{
	std::vector<int64_t> out;
	for (auto &n : ListDir(dir))
		if (n.size() == 20 + strlen(suffix) && EndsWith(n, suffix))
			out.push_back(std::stoll(n.substr(0, 20)));
	return out;
}

inline std::string SegName(int64_t base, const char *suffix)
{
	char b[64];
	snprintf(b, sizeof(b), "%020lld%s", (long long)base, suffix);
	return b;
}

// ---- an independent walk over a .log file ----

struct FileBatch {
	uint64_t pos;
	uint32_t size;
	int64_t base, last, max_ts, pid;
	int16_t epoch;
	int32_t base_seq, last_seq;
	bool txn, control;
	int ctrl_type; // -1 unless control
	std::vector<uint8_t> bytes;
};

// Every batch of a segment file, CRC-checked by km_batch_parse. *tail gets
// the bytes left at the end that do not parse (0 for a clean file), *err
// the parse code there.
inline std::vector<FileBatch> WalkLog(const std::string &path,
				      uint64_t *tail = nullptr,
				      int *err = nullptr)
{
	std::vector<FileBatch> out;
	std::vector<uint8_t> f = ReadFile(path);
	uint64_t pos = 0;
	int rc = 0;
	while (pos < f.size()) {
		iovec iov = {f.data() + pos, f.size() - pos};
		km_chain ch = {&iov, 1};
		km_batch b;
		rc = km_batch_parse(&b, &ch, km_chain_start(&ch),
				    KM_BATCH_BYTES_MAX);
		if (rc <= 0)
			break;
		FileBatch fb;
		fb.pos = pos;
		fb.size = (uint32_t)rc;
		fb.base = km_batch_base_offset(&b);
		fb.last = km_batch_last_offset(&b);
		fb.max_ts = km_batch_max_timestamp(&b);
		fb.pid = km_batch_producer_id(&b);
		fb.epoch = km_batch_producer_epoch(&b);
		fb.base_seq = km_batch_base_sequence(&b);
		fb.last_seq = km_batch_last_sequence(&b);
		fb.txn = km_batch_is_transactional(&b);
		fb.control = km_batch_is_control(&b);
		fb.ctrl_type = -1;
		if (fb.control) {
			km_ctrl c;
			if (km_ctrl_parse(&b, &c) == 0)
				fb.ctrl_type = c.type;
		}
		fb.bytes.assign(f.begin() + pos, f.begin() + pos + rc);
		out.push_back(std::move(fb));
		pos += (uint64_t)rc;
	}
	if (tail)
		*tail = f.size() - pos;
	if (err)
		*err = pos < f.size() ? rc : 0;
	return out;
}

// The bytes of a .log that is still open: with direct I/O (log.direct.io)
// the file ends at the last write's block end, zeros past the data, which
// a close or a seal cuts. Those zeros, if any, are checked (fewer than a
// block, the file a whole number of blocks) and left out.
inline std::vector<uint8_t> ReadOpenLog(const std::string &path)
{
	std::vector<uint8_t> f = ReadFile(path);
	uint64_t tail = 0;
	std::vector<FileBatch> v = WalkLog(path, &tail);
	uint64_t end = f.size() - tail;
	if (tail == 0)
		return f;
	EXPECT_TRUE(TestDirectIo()) << path << ": " << tail
				    << " bytes past the last batch";
	EXPECT_LT(tail, 4096u) << path;
	EXPECT_EQ(0u, f.size() % 4096) << path;
	for (uint64_t i = end; i < f.size(); i++)
		if (f[i] != 0) {
			ADD_FAILURE() << path << ": padding not zero at " << i;
			break;
		}
	f.resize(end);
	return f;
}

// ---- what the log says about producer state ----

struct StateView {
	int64_t leo = -1, lso = -1, start = -1;
	uint32_t count = 0;
	int64_t max_positive = -1;
	std::map<int64_t, km_producer_info> producers; // by id, found ones
	std::vector<int64_t> open_txns;		       // first offsets
	std::vector<km_aborted_txn> aborted;

	std::string Describe() const
	{
		std::ostringstream o;
		o << "leo=" << leo << " lso=" << lso << " count=" << count
		  << " max+=" << max_positive << " open=[";
		for (auto f : open_txns)
			o << f << ",";
		o << "] aborted=" << aborted.size() << "\n";
		for (auto &kv : producers) {
			const km_producer_info &p = kv.second;
			o << "  pid " << p.producer_id << " epoch " << p.epoch
			  << " ce " << p.coordinator_epoch << " ts "
			  << p.last_timestamp << " txn " << p.txn_first_offset
			  << " n " << p.batch_count << " seq " << p.first_seq
			  << ".." << p.last_seq << " off " << p.first_offset
			  << ".." << p.last_offset << "\n";
		}
		return o.str();
	}
};

inline StateView Capture(km_log *log, const std::set<int64_t> &pids)
{
	StateView v;
	km_pstate *ps = km_log_pstate(log);
	v.leo = km_log_end_offset(log);
	v.lso = km_log_lso(log);
	v.start = km_log_start_offset(log);
	v.count = km_pstate_count(ps);
	v.max_positive = km_pstate_max_positive_pid(ps);
	for (int64_t pid : pids) {
		km_producer_info pi;
		if (km_pstate_get(ps, pid, &pi) == 0)
			v.producers[pid] = pi;
	}
	std::vector<km_producer_info> open(1024);
	uint32_t n = km_pstate_open_txns(ps, open.data(), (uint32_t)open.size());
	for (uint32_t i = 0; i < n && i < open.size(); i++)
		v.open_txns.push_back(open[i].txn_first_offset);
	std::vector<km_aborted_txn> ab(4096);
	int k = km_log_aborted_txns(log, 0, v.leo + 1, ab.data(),
				    (uint32_t)ab.size());
	EXPECT_GE(k, 0) << km_strerror(k);
	for (int i = 0; i < k && i < (int)ab.size(); i++)
		v.aborted.push_back(ab[i]);
	return v;
}

// Equality of two views. A reloaded producer remembers only the newest batch
// (spec §3: "Only the NEWEST batch per producer is persisted (not all 5)"),
// so batch_count is compared as "some batch remembered or none".
inline void ExpectSameState(const StateView &want, const StateView &got,
			    const std::string &what)
{
	SCOPED_TRACE(what);
	const ::testing::TestResult *tr =
		::testing::UnitTest::GetInstance()->current_test_info()->result();
	int parts = tr->total_part_count();
	EXPECT_EQ(want.leo, got.leo);
	EXPECT_EQ(want.lso, got.lso);
	EXPECT_EQ(want.start, got.start);
	EXPECT_EQ(want.count, got.count);
	EXPECT_EQ(want.max_positive, got.max_positive);
	EXPECT_EQ(want.open_txns, got.open_txns);
	EXPECT_EQ(want.aborted.size(), got.aborted.size());
	for (size_t i = 0; i < want.aborted.size() && i < got.aborted.size(); i++) {
		EXPECT_EQ(want.aborted[i].producer_id, got.aborted[i].producer_id);
		EXPECT_EQ(want.aborted[i].first_offset, got.aborted[i].first_offset);
		EXPECT_EQ(want.aborted[i].last_offset, got.aborted[i].last_offset);
		EXPECT_EQ(want.aborted[i].last_stable_offset,
			  got.aborted[i].last_stable_offset);
	}
	EXPECT_EQ(want.producers.size(), got.producers.size());
	for (auto &kv : want.producers) {
		auto it = got.producers.find(kv.first);
		if (it == got.producers.end()) {
			ADD_FAILURE() << "producer " << kv.first << " missing";
			continue;
		}
		const km_producer_info &a = kv.second, &b = it->second;
		SCOPED_TRACE("producer " + std::to_string(kv.first));
		EXPECT_EQ(a.epoch, b.epoch);
		EXPECT_EQ(a.coordinator_epoch, b.coordinator_epoch);
		EXPECT_EQ(a.last_timestamp, b.last_timestamp);
		EXPECT_EQ(a.txn_first_offset, b.txn_first_offset);
		EXPECT_EQ(a.batch_count > 0, b.batch_count > 0);
		EXPECT_EQ(a.first_seq, b.first_seq);
		EXPECT_EQ(a.last_seq, b.last_seq);
		EXPECT_EQ(a.first_offset, b.first_offset);
		EXPECT_EQ(a.last_offset, b.last_offset);
	}
	if (tr->total_part_count() != parts)
		ADD_FAILURE() << "want:\n" << want.Describe() << "got:\n"
			      << got.Describe();
}

// All batches in [from, upto) through km_log_read, concatenated.
inline std::vector<uint8_t> ReadAll(km_log *log, int64_t from, int64_t upto,
				    uint32_t max_bytes = 1 << 20)
{
	std::vector<uint8_t> out, buf(4 << 20);
	int64_t off = from;
	for (int guard = 0; off < upto && guard < 100000; guard++) {
		km_log_read_result rd;
		int rc = km_log_read(log, off, upto, max_bytes, buf.data(),
				     buf.size(), &rd);
		EXPECT_EQ(0, rc) << km_strerror(rc) << " at " << off;
		if (rc != 0 || rd.batches == 0)
			break;
		out.insert(out.end(), buf.begin(), buf.begin() + rd.bytes);
		off = rd.next_offset;
	}
	return out;
}

} // namespace logtest

#endif
