// Shared by the log tests: a temp dir, a ring, batch builders, and a
// helper to append and wait for durability through the real io_uring.
#ifndef KM_TESTS_LOG_UTIL_H
#define KM_TESTS_LOG_UTIL_H

#include <gtest/gtest.h>
#include <sys/uio.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/errors.h"
#include "iouring_log/log.h"
#include "kafka/control.h"
#include "kafka/records.h"

namespace logtest {

struct TempDir {
	std::string path;
	TempDir()
	{
		char tmpl[] = "/tmp/kmirror-log-XXXXXX";
		path = mkdtemp(tmpl);
	}
	~TempDir() { std::filesystem::remove_all(path); }
};

// A temp dir on tmpfs (/dev/shm) where there is one, else in /tmp: for
// tests whose point is not the disk but that sync a lot (every roll syncs
// ~7 times, a few ms each on a disk). A SIGKILL leaves the files as the page
// cache holds them, the same on tmpfs as on a disk.
struct FastTempDir {
	std::string path;
	FastTempDir()
	{
		char shm[] = "/dev/shm/kmirror-log-XXXXXX";
		char tmp[] = "/tmp/kmirror-log-XXXXXX";
		const char *p = mkdtemp(shm);
		path = p != nullptr ? p : mkdtemp(tmp);
	}
	~FastTempDir() { std::filesystem::remove_all(path); }
};

// Owned bytes of one batch plus a parsed view over them.
struct Batch {
	std::vector<uint8_t> bytes;
	iovec iov;
	km_chain chain;
	km_batch view;

	explicit Batch(std::vector<uint8_t> b) : bytes(std::move(b))
	{
		iov = {bytes.data(), bytes.size()};
		chain = {&iov, 1};
		int rc = km_batch_parse(&view, &chain, km_chain_start(&chain),
					KM_BATCH_BYTES_MAX);
		if (rc != (int)bytes.size())
			abort();
	}
	Batch(const Batch &) = delete;
};

inline std::vector<uint8_t> Data(int64_t base, int64_t pid, int16_t epoch,
				 int32_t seq, int n, bool txn = false,
				 int value_bytes = 100, int64_t ts = 1000)
{
	std::vector<km_record_spec> recs(n);
	std::string value(value_bytes, 'v');
	for (int i = 0; i < n; i++)
		recs[i] = {"k", 1, value.data(), (int32_t)value.size(), ts + i,
			   nullptr, 0};
	km_batch_spec spec = {base, 0,
			      (int16_t)(txn ? KM_BATCH_ATTR_TRANSACTIONAL : 0),
			      pid, epoch, seq};
	std::vector<uint8_t> out(km_records_build_size(recs.data(), n));
	km_records_build(out.data(), out.size(), &spec, recs.data(), n);
	return out;
}

inline std::vector<uint8_t> Marker(int64_t off, int64_t pid, int16_t epoch,
				   bool commit, int64_t ts = 1000)
{
	km_ctrl_spec s = {off, 0, ts};
	std::vector<uint8_t> out(KM_CTRL_MARKER_BATCH_BYTES);
	km_ctrl_build_marker(out.data(), out.size(), &s, pid, epoch, commit, 0);
	return out;
}

inline std::vector<uint8_t> Barrier(int64_t off, const char *cluster = "src")
{
	km_ctrl_spec s = {off, 0, 1000};
	std::vector<uint8_t> out(256);
	int n = km_ctrl_build_pid_reset(out.data(), out.size(), &s, cluster);
	out.resize(n);
	return out;
}

// The log's write mode for this run: direct I/O (the default) unless
// KM_TEST_LOG_DIRECT_IO=0 (meson registers each log suite both ways).
// Direct I/O is really exercised only where the data dir is on a disk:
// TempDir is /tmp (a disk here); FastTempDir and the space tests' own
// filesystems are tmpfs, where the log falls back to buffered writes.
inline bool TestDirectIo()
{
	const char *v = getenv("KM_TEST_LOG_DIRECT_IO");
	return v == nullptr || std::string(v) != "0";
}

struct Log {
	km_uring ring;
	km_log *log = nullptr;
	km_log_config cfg;
	km_log_recovery rec;
	std::string dir;

	explicit Log(const std::string &data_dir, uint64_t segment_bytes = 1 << 20,
		     bool always = true)
	{
		Defaults(data_dir, segment_bytes, always);
		EXPECT_EQ(0, km_uring_init(&ring, 64));
		Open();
	}
	// The same defaults, then tweak(cfg) before the first open (a ring of
	// ring_entries SQEs). Open() may then be called again after Close().
	template <typename Tweak, typename = decltype(std::declval<Tweak &>()(
					  std::declval<km_log_config &>()))>
	Log(const std::string &data_dir, Tweak tweak, unsigned ring_entries = 64)
	{
		Defaults(data_dir, 1 << 20, true);
		tweak(cfg);
		EXPECT_EQ(0, km_uring_init(&ring, ring_entries));
		Open();
	}
	void Defaults(const std::string &data_dir, uint64_t segment_bytes,
		      bool always)
	{
		data_dir_ = data_dir;
		km_log_config_defaults(&cfg, data_dir_.c_str(), "t", 0);
		cfg.segment_bytes = segment_bytes;
		cfg.index_bytes_max = 64 * 1024;
		cfg.flush_always = always;
		cfg.prealloc_bytes = 1 << 20;
		cfg.direct_io = TestDirectIo();
	}
	std::string data_dir_;
	void Open()
	{
		int rc = km_log_open(&log, &cfg, &ring, &rec);
		ASSERT_EQ(0, rc) << km_strerror(rc);
		dir = km_log_dir(log);
	}
	int Close()
	{
		int rc = km_log_close(log);
		log = nullptr;
		return rc;
	}
	// Append and wait until durable; returns the append's return value.
	int Append(Batch &b, km_origin origin = KM_ORIGIN_MIRROR,
		   km_log_append_result *res = nullptr)
	{
		km_log_append_result local;
		int rc = km_log_append_burst(log, &b.view, 1, origin,
					     res ? res : &local);
		EXPECT_EQ(0, km_log_sync(log));
		return rc;
	}
	~Log()
	{
		if (log)
			Close();
		// km_log_close must leave nothing in flight ("wait for in-flight
		// I/O"): requests point into the freed log. Leak the ring rather
		// than abort the whole test binary if it did not.
		if (km_uring_busy(&ring) == 0)
			km_uring_exit(&ring);
		else
			ADD_FAILURE() << "km_log_close left " << km_uring_busy(&ring)
				      << " requests in flight";
	}
};

} // namespace logtest

#endif
