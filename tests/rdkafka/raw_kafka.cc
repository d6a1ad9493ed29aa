/* A small raw Kafka client (Fetch v4, Produce v3) for tests; see raw_kafka.h.
 * Goal: read and write a broker's stored RecordBatch bytes verbatim.
 * Method: hand-written big-endian encoder/decoder over one socket, every
 * wait bounded by poll() and a deadline (tests/support/blocking_io.h). */
#include "raw_kafka.h"

#include <unistd.h>

#include <chrono>

namespace rawkafka {

namespace {

const int16_t kApiProduce = 0;
const int16_t kApiFetch = 1;
const char kClientId[] = "kmirror-raw-test";
const int32_t kMaxResponseBytes = 64 * 1024 * 1024;

using kmtest::Clock;
using kmtest::io_all;
using kmtest::ms_left;

/* Big-endian writer. */
struct Writer {
	Bytes b;

	void i8(int8_t v) { b.push_back((uint8_t)v); }
	void i16(int16_t v) { be((uint16_t)v, 2); }
	void i32(int32_t v) { be((uint32_t)v, 4); }
	void i64(int64_t v) { be((uint64_t)v, 8); }
	void str(const std::string &s)
	{
		i16((int16_t)s.size());
		b.insert(b.end(), s.begin(), s.end());
	}
	void null_str() { i16(-1); }
	void bytes(const Bytes &v)
	{
		i32((int32_t)v.size());
		b.insert(b.end(), v.begin(), v.end());
	}

private:
	void be(uint64_t v, int n)
	{
		for (int i = n - 1; i >= 0; i--)
			b.push_back((uint8_t)(v >> (8 * i)));
	}
};

/* Big-endian reader; any overrun sets ok = false and reads zeros. */
struct Reader {
	const uint8_t *p;
	size_t left;
	bool ok = true;

	Reader(const uint8_t *data, size_t len) : p(data), left(len) {}

	uint64_t be(int n)
	{
		uint64_t v = 0;

		if (left < (size_t)n) {
			ok = false;
			left = 0;
			return 0;
		}
		for (int i = 0; i < n; i++)
			v = (v << 8) | p[i];
		p += n;
		left -= (size_t)n;
		return v;
	}
	int16_t i16() { return (int16_t)be(2); }
	int32_t i32() { return (int32_t)be(4); }
	int64_t i64() { return (int64_t)be(8); }
	bool skip(size_t n)
	{
		if (left < n) {
			ok = false;
			left = 0;
			return false;
		}
		p += n;
		left -= n;
		return true;
	}
	std::string str()
	{
		int16_t n = i16();
		std::string s;

		if (n > 0 && (size_t)n <= left)
			s.assign((const char *)p, (size_t)n);
		if (n > 0)
			skip((size_t)n);
		return s;
	}
	Bytes bytes()
	{
		int32_t n = i32();
		Bytes v;

		if (n > 0 && (size_t)n <= left)
			v.assign(p, p + n);
		if (n > 0)
			skip((size_t)n);
		return v;
	}
};

uint64_t load_be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

} // namespace

Conn::~Conn()
{
	if (fd_ >= 0)
		close(fd_);
}

std::string Conn::connect(const std::string &host, uint16_t port,
			  int timeout_ms)
{
	if (fd_ >= 0)
		close(fd_);
	return kmtest::tcp_connect(host, port, timeout_ms, &fd_);
}

std::string Conn::roundtrip(int16_t api_key, int16_t api_version,
			    const Bytes &body, Bytes *resp_body)
{
	Clock::time_point deadline =
		Clock::now() + std::chrono::milliseconds(io_timeout_ms);
	int32_t corr = next_correlation_id_++;
	Writer req;
	uint8_t size_be[4];
	int32_t size;
	std::string err;

	if (fd_ < 0)
		return "not connected";
	/* Request header v1. */
	req.i32(0); /* size, patched below */
	req.i16(api_key);
	req.i16(api_version);
	req.i32(corr);
	req.str(kClientId);
	req.b.insert(req.b.end(), body.begin(), body.end());
	size = (int32_t)(req.b.size() - 4);
	for (int i = 0; i < 4; i++)
		req.b[(size_t)i] = (uint8_t)((uint32_t)size >> (24 - 8 * i));
	err = io_all(fd_, req.b.data(), req.b.size(), true, deadline);
	if (!err.empty())
		return err;

	/* Response header v0: correlationId only. */
	err = io_all(fd_, size_be, sizeof(size_be), false, deadline);
	if (!err.empty())
		return err;
	size = (int32_t)load_be(size_be, 4);
	if (size < 4 || size > kMaxResponseBytes)
		return "bad response size " + std::to_string(size);
	resp_body->assign((size_t)size, 0);
	err = io_all(fd_, resp_body->data(), resp_body->size(), false,
		     deadline);
	if (!err.empty())
		return err;
	if ((int32_t)load_be(resp_body->data(), 4) != corr)
		return "correlation id mismatch";
	resp_body->erase(resp_body->begin(), resp_body->begin() + 4);
	return "";
}

std::string Conn::fetch(const std::string &topic, int32_t partition,
			int64_t offset, int32_t max_wait_ms,
			FetchPartition *out)
{
	const int32_t max_bytes = 1024 * 1024;
	Writer w;
	Bytes resp;
	std::string err;

	w.i32(-1); /* ReplicaId: a consumer */
	w.i32(max_wait_ms);
	w.i32(1); /* MinBytes */
	w.i32(max_bytes);
	w.i8(0); /* IsolationLevel: read uncommitted */
	w.i32(1); /* topics */
	w.str(topic);
	w.i32(1); /* partitions */
	w.i32(partition);
	w.i64(offset);
	w.i32(max_bytes);
	err = roundtrip(kApiFetch, 4, w.b, &resp);
	if (!err.empty())
		return err;

	Reader r(resp.data(), resp.size());
	bool found = false;

	r.i32(); /* ThrottleTimeMs */
	for (int32_t t = r.i32(); r.ok && t > 0; t--) {
		std::string name = r.str();

		for (int32_t p = r.i32(); r.ok && p > 0; p--) {
			FetchPartition fp;
			int32_t index = r.i32();

			fp.error = r.i16();
			fp.high_watermark = r.i64();
			fp.last_stable_offset = r.i64();
			fp.aborted_count = r.i32();
			if (fp.aborted_count > 0)
				r.skip((size_t)fp.aborted_count * 16);
			fp.records = r.bytes();
			if (r.ok && name == topic && index == partition) {
				*out = std::move(fp);
				found = true;
			}
		}
	}
	if (!r.ok)
		return "truncated Fetch response";
	if (!found)
		return "Fetch response without " + topic + "/" +
		       std::to_string(partition);
	return "";
}

std::string Conn::produce(const std::string &topic, int32_t partition,
			  const Bytes &records, int16_t *error,
			  int64_t *base_offset)
{
	Writer w;
	Bytes resp;
	std::string err;
	bool found = false;

	w.null_str(); /* TransactionalId */
	w.i16(1);     /* Acks: leader */
	w.i32(io_timeout_ms);
	w.i32(1); /* topic_data */
	w.str(topic);
	w.i32(1); /* partition_data */
	w.i32(partition);
	w.bytes(records);
	err = roundtrip(kApiProduce, 3, w.b, &resp);
	if (!err.empty())
		return err;

	Reader r(resp.data(), resp.size());

	for (int32_t t = r.i32(); r.ok && t > 0; t--) {
		std::string name = r.str();

		for (int32_t p = r.i32(); r.ok && p > 0; p--) {
			int32_t index = r.i32();
			int16_t e = r.i16();
			int64_t base = r.i64();

			r.i64(); /* LogAppendTimeMs */
			if (r.ok && name == topic && index == partition) {
				*error = e;
				*base_offset = base;
				found = true;
			}
		}
	}
	r.i32(); /* ThrottleTimeMs */
	if (!r.ok)
		return "truncated Produce response";
	if (!found)
		return "Produce response without " + topic + "/" +
		       std::to_string(partition);
	return "";
}

bool split_batches(const Bytes &records, std::vector<Bytes> *out)
{
	size_t pos = 0;

	while (records.size() - pos >= 12) {
		int32_t len = (int32_t)load_be(&records[pos + 8], 4);

		if (len < 49)
			return false;
		if (records.size() - pos - 12 < (size_t)len)
			break; /* partial trailing batch */
		out->emplace_back(records.begin() + (long)pos,
				  records.begin() + (long)(pos + 12 + (size_t)len));
		pos += 12 + (size_t)len;
	}
	return true;
}

int64_t batch_last_offset(const Bytes &batch)
{
	return (int64_t)load_be(&batch[0], 8) +
	       (int32_t)load_be(&batch[23], 4);
}

std::string fetch_all(Conn &conn, const std::string &topic, int32_t partition,
		      int64_t from, int max_fetches, int timeout_ms,
		      std::vector<Bytes> *batches)
{
	Clock::time_point deadline =
		Clock::now() + std::chrono::milliseconds(timeout_ms);
	int64_t offset = from;

	for (int i = 0; i < max_fetches; i++) {
		FetchPartition fp;
		std::vector<Bytes> got;
		std::string err;

		if (ms_left(deadline) == 0)
			return "fetch_all timed out at offset " +
			       std::to_string(offset);
		err = conn.fetch(topic, partition, offset, 10, &fp);
		if (!err.empty())
			return err;
		if (fp.error != 0)
			return "Fetch error " + std::to_string(fp.error) +
			       " at offset " + std::to_string(offset);
		if (!split_batches(fp.records, &got))
			return "bad batch length at offset " +
			       std::to_string(offset);
		for (Bytes &b : got) {
			/* A broker may return a batch that starts before the
			 * requested offset; keep only what is new. */
			if (batch_last_offset(b) < offset)
				continue;
			offset = batch_last_offset(b) + 1;
			batches->push_back(std::move(b));
		}
		if (offset >= fp.high_watermark)
			return "";
	}
	return "fetch_all: more than " + std::to_string(max_fetches) +
	       " fetches";
}

} // namespace rawkafka
