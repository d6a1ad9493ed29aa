/* Real bytes that no one here wrote.
 *
 * Goal: kmirror's RecordBatch code (kafka/batch.h, kafka/records.h) must
 * accept batches written by a real, independent Kafka client exactly as a
 * broker stores them, and the R1 producer-id mapping (km_batch_map_pid) must
 * leave those batches valid for an independent reader that checks CRCs.
 *
 * Method:
 *  1. Start librdkafka's in-process mock cluster with one broker (so it is
 *     the leader of everything); each case gets its own partition of the
 *     topics "src" and "mapped", so its batches are told apart.
 *  2. Produce with real librdkafka producers: plain (acks=1, no
 *     idempotence), idempotent, transactional (one committed and one aborted
 *     transaction), and idempotent with each of gzip, snappy, lz4 and zstd
 *     (a codec is skipped only if rd_kafka_conf_set says it is not built
 *     in). Each case sends two rounds of six messages, with keys, values,
 *     headers, a null key, a null value, a null header value and explicit
 *     timestamps, and linger.ms so that a round becomes one batch (flush()
 *     between rounds); every delivery report must be a success.
 *  3. Fetch the stored batches back verbatim with a small raw client
 *     (raw_kafka.h: Fetch v4 over a socket, one batch per Fetch).
 *  4. Check every batch with kmirror's code: km_batch_parse over one segment
 *     and over many splits of the same bytes (cuts inside the 61-byte header,
 *     inside records, one byte per segment, empty segments, each segment its
 *     own heap block so ASan sees overreads) must agree; header fields must
 *     match what was produced; uncompressed records must decode to the
 *     produced keys, values, headers and timestamps; km_batch_map_pid must
 *     map p >= 0 to -(p + 2), keep km_batch_verify_crc == 0 and agree with a
 *     bitwise CRC-32C written here (reflected polynomial 0x82F63B78), touch
 *     only the producerId and crc fields, and be a no-op the second time.
 *  5. Independent reader: write each mapped batch, byte for byte, into the
 *     "mapped" topic with a raw Produce v3 (one batch per request; the mock
 *     never checks CRCs and accepts producerId < -1 because it validates
 *     producer ids only when a TransactionalId is sent), and consume it with
 *     a librdkafka consumer with check.crcs=true: every message must arrive
 *     intact and no CRC error may surface. Control: one mapped batch with a
 *     value byte flipped and the CRC left alone (topic "corrupt") must make
 *     the same consumer report "failed CRC32C check", while a
 *     check.crcs=false consumer silently delivers the flipped byte.
 *
 * Note: the raw client fetches zstd batches with Fetch v4. A real broker
 * would refuse that (zstd needs Fetch v10); the mock serves stored bytes
 * whatever the version, which is all this test needs.
 */
#include <gtest/gtest.h>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/chain.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "kafka/batch.h"
#include "kafka/records.h"

#include "raw_kafka.h"

namespace {

using rawkafka::Bytes;
using OptStr = std::optional<std::string>;
using Header = std::pair<std::string, OptStr>;
using Clock = std::chrono::steady_clock;

const int kRounds = 2;
const int kPerRound = 6;
const int kTimeoutMs = 10000;
/* One partition per case in each topic: the mock's control calls
 * (rd_kafka_mock_topic_create) now and then stall for a second, so the test
 * makes three of them rather than one per case and topic. */
const char kSrcTopic[] = "src";	     /* what librdkafka produced */
const char kDstTopic[] = "mapped";   /* the same batches, pid-mapped */
const char kCorruptTopic[] = "corrupt"; /* one mapped batch, a byte flipped */

/* ---- an independent CRC-32C and big-endian loads ---- */

/* Bitwise CRC-32C (Castagnoli): reflected polynomial 0x82F63B78, initial
 * value and final xor 0xFFFFFFFF. Shares nothing with common/crc32c.c. */
uint32_t ref_crc32c(const uint8_t *p, size_t n)
{
	uint32_t crc = 0xFFFFFFFFu;

	for (size_t i = 0; i < n; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
	}
	return ~crc;
}

uint64_t be(const Bytes &b, size_t off, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = (v << 8) | b.at(off + (size_t)i);
	return v;
}

/* The CRC a checking reader computes: bytes [21, size) of the batch. */
uint32_t independent_crc(const Bytes &b)
{
	return ref_crc32c(b.data() + 21, b.size() - 21);
}

uint32_t stored_crc(const Bytes &b)
{
	return (uint32_t)be(b, 17, 4);
}

int64_t stored_pid(const Bytes &b)
{
	return (int64_t)be(b, 43, 8);
}

/* ---- what was produced ---- */

struct Msg {
	OptStr key;
	OptStr value;
	std::vector<Header> headers;
	int64_t timestamp = 0;

	bool operator==(const Msg &o) const
	{
		return key == o.key && value == o.value &&
		       headers == o.headers && timestamp == o.timestamp;
	}
};

std::string show(const OptStr &s)
{
	return s ? "\"" + *s + "\"" : std::string("null");
}

std::string show(const Msg &m)
{
	std::string out = "{key=" + show(m.key) + " value=" +
			  (m.value ? std::to_string(m.value->size()) + " bytes"
				   : std::string("null")) +
			  " ts=" + std::to_string(m.timestamp) + " headers=[";

	for (const Header &h : m.headers)
		out += h.first + "=" + show(h.second) + " ";
	return out + "]}";
}

enum class Kind { Plain, Idempotent, TxnCommit, TxnAbort };

struct Case {
	std::string name;
	int32_t part; /* partition of kSrcTopic and kDstTopic */
	Kind kind;
	const char *codec; /* compression.codec value */
	int codec_id;	   /* expected attributes & 7 */
	std::string skip_reason; /* set if the codec is not built in */
	std::vector<Msg> msgs;	 /* in produce order = offset order */
	std::vector<Bytes> batches; /* fetched verbatim from src topic */

	bool has_pid() const { return kind != Kind::Plain; }
	bool transactional() const
	{
		return kind == Kind::TxnCommit || kind == Kind::TxnAbort;
	}
};

/* Deterministic, varied messages: binary bytes, a long compressible value,
 * a null key (i == 1), a null value (i == 2), a null header value and a
 * repeated header key. */
Msg make_msg(const std::string &cname, int case_no, int i)
{
	Msg m;
	std::string v = "value-" + cname + "-" + std::to_string(i) + ":";

	if (i != 1)
		m.key = "key-" + cname + "-" + std::to_string(i);
	v += std::string(1, '\0') + "\x01\x7f\x80\xff";
	for (int k = 0; k < 40 + 13 * i; k++)
		v += "pattern" + std::to_string(k % 5);
	if (i != 2)
		m.value = v;
	if (i % 3 != 0) {
		m.headers.push_back({ "trace", "t-" + std::to_string(i) });
		m.headers.push_back({ "nullable", std::nullopt });
		m.headers.push_back(
			{ "bin", std::string("\x00\xfe", 2) + std::to_string(i) });
		m.headers.push_back({ "trace", std::string() }); /* again */
	}
	m.timestamp = 1700000000000LL + case_no * 100000LL + i * 7LL;
	return m;
}

/* ---- librdkafka plumbing ---- */

struct DeliveryStats {
	int ok = 0;
	int failed = 0;
	std::string first_error;
};

void on_delivery(rd_kafka_t *, const rd_kafka_message_t *m, void *opaque)
{
	DeliveryStats *st = static_cast<DeliveryStats *>(opaque);

	if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
		st->ok++;
	} else if (st->failed++ == 0) {
		st->first_error = rd_kafka_err2str(m->err);
	}
}

/* Set conf properties; "" or the first error. */
std::string conf_set_all(rd_kafka_conf_t *conf,
			 const std::vector<std::pair<std::string, std::string>>
				 &props)
{
	char errstr[512];

	for (const auto &kv : props)
		if (rd_kafka_conf_set(conf, kv.first.c_str(),
				      kv.second.c_str(), errstr,
				      sizeof(errstr)) != RD_KAFKA_CONF_OK)
			return kv.first + "=" + kv.second + ": " + errstr;
	return "";
}

/* "" if this build of librdkafka has the codec, else its own words why not. */
std::string codec_unsupported(const char *codec)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char errstr[512];
	std::string why;

	if (rd_kafka_conf_set(conf, "compression.codec", codec, errstr,
			      sizeof(errstr)) != RD_KAFKA_CONF_OK)
		why = errstr;
	rd_kafka_conf_destroy(conf);
	return why;
}

std::string take_error(rd_kafka_error_t *error, const char *what)
{
	std::string s;

	if (!error)
		return "";
	s = std::string(what) + ": " + rd_kafka_error_string(error);
	rd_kafka_error_destroy(error);
	return s;
}

/* Produce one round of c's messages [from, from + kPerRound). */
std::string produce_round(rd_kafka_t *rk, Case &c, int from)
{
	for (int i = from; i < from + kPerRound; i++) {
		const Msg &m = c.msgs[(size_t)i];
		rd_kafka_headers_t *hdrs = nullptr;
		rd_kafka_resp_err_t err;
		/* NULL pointer = null key or value (the macros need plain
		 * expressions, not conditionals). */
		const void *key = m.key ? m.key->data() : nullptr;
		size_t key_len = m.key ? m.key->size() : 0;
		void *value = m.value ? (void *)m.value->data() : nullptr;
		size_t value_len = m.value ? m.value->size() : 0;

		if (!m.headers.empty()) {
			hdrs = rd_kafka_headers_new(m.headers.size());
			for (const Header &h : m.headers)
				rd_kafka_header_add(
					hdrs, h.first.c_str(),
					(ssize_t)h.first.size(),
					h.second ? h.second->data() : nullptr,
					h.second ? (ssize_t)h.second->size()
						 : 0);
		}
		err = rd_kafka_producev(
			rk, RD_KAFKA_V_TOPIC(kSrcTopic),
			RD_KAFKA_V_PARTITION(c.part),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_KEY(key, key_len),
			RD_KAFKA_V_VALUE(value, value_len),
			RD_KAFKA_V_TIMESTAMP(m.timestamp),
			RD_KAFKA_V_HEADERS(hdrs), RD_KAFKA_V_END);
		if (err) {
			if (hdrs)
				rd_kafka_headers_destroy(hdrs);
			return "producev: " + std::string(rd_kafka_err2str(err));
		}
	}
	return "";
}

std::string flush(rd_kafka_t *rk)
{
	rd_kafka_resp_err_t err = rd_kafka_flush(rk, kTimeoutMs);

	return err ? "flush: " + std::string(rd_kafka_err2str(err)) : "";
}

/* Produce the cases `cs` (all of one kind and producer config) with one
 * producer. Transactional cases: TxnCommit is committed, TxnAbort is flushed
 * (so its batches are stored) and then aborted. */
std::string produce_cases(const std::string &bootstraps,
			  std::vector<Case *> cs)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	DeliveryStats stats;
	char errstr[512];
	rd_kafka_t *rk;
	std::string err;
	size_t expected = 0;
	Kind kind = cs.front()->kind;
	bool txn = cs.front()->transactional();

	std::vector<std::pair<std::string, std::string>> props = {
		{ "bootstrap.servers", bootstraps },
		{ "linger.ms", "200" }, /* flush() cuts it short */
		{ "compression.codec", cs.front()->codec },
		{ "message.timeout.ms", std::to_string(kTimeoutMs) },
	};
	if (kind == Kind::Plain) {
		props.push_back({ "acks", "1" });
		props.push_back({ "enable.idempotence", "false" });
	} else if (kind == Kind::Idempotent) {
		props.push_back({ "enable.idempotence", "true" });
	} else {
		props.push_back({ "transactional.id", "kmirror-rdk-txn" });
	}
	err = conf_set_all(conf, props);
	if (!err.empty()) {
		rd_kafka_conf_destroy(conf);
		return err;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, on_delivery);
	rd_kafka_conf_set_opaque(conf, &stats);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!rk) {
		rd_kafka_conf_destroy(conf);
		return std::string("rd_kafka_new: ") + errstr;
	}

	if (txn)
		err = take_error(rd_kafka_init_transactions(rk, kTimeoutMs),
				 "init_transactions");
	for (Case *c : cs) {
		if (!err.empty())
			break;
		expected += c->msgs.size();
		if (txn)
			err = take_error(rd_kafka_begin_transaction(rk),
					 "begin_transaction");
		/* A flush between rounds makes each round its own batch. */
		for (int r = 0; r < kRounds && err.empty(); r++) {
			err = produce_round(rk, *c, r * kPerRound);
			if (err.empty())
				err = flush(rk);
		}
		if (err.empty() && c->kind == Kind::TxnCommit)
			err = take_error(
				rd_kafka_commit_transaction(rk, kTimeoutMs),
				"commit_transaction");
		if (err.empty() && c->kind == Kind::TxnAbort)
			err = take_error(
				rd_kafka_abort_transaction(rk, kTimeoutMs),
				"abort_transaction");
	}
	if (err.empty())
		err = flush(rk);
	if (err.empty() && (stats.failed != 0 || (size_t)stats.ok != expected))
		err = "delivery reports: " + std::to_string(stats.ok) +
		      " ok, " + std::to_string(stats.failed) + " failed (" +
		      stats.first_error + "), expected " +
		      std::to_string(expected) + " ok";
	rd_kafka_destroy(rk);
	return err;
}

using TopicPart = std::pair<std::string, int32_t>;

/* A consumer assigned to the given partitions, from the beginning. */
struct Consumer {
	rd_kafka_t *rk = nullptr;

	~Consumer()
	{
		if (rk) {
			rd_kafka_consumer_close(rk);
			rd_kafka_destroy(rk);
		}
	}

	std::string start(const std::string &bootstraps, bool check_crcs,
			  const std::vector<TopicPart> &parts_wanted)
	{
		static int group_no;
		rd_kafka_conf_t *conf = rd_kafka_conf_new();
		rd_kafka_topic_partition_list_t *parts;
		rd_kafka_resp_err_t rerr;
		char errstr[512];
		std::string err = conf_set_all(
			conf,
			{ { "bootstrap.servers", bootstraps },
			  { "group.id",
			    "kmirror-rdk-" + std::to_string(group_no++) },
			  { "check.crcs", check_crcs ? "true" : "false" },
			  { "enable.auto.commit", "false" },
			  { "enable.partition.eof", "false" },
			  { "auto.offset.reset", "earliest" },
			  { "fetch.wait.max.ms", "10" } });

		if (!err.empty()) {
			rd_kafka_conf_destroy(conf);
			return err;
		}
		rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr,
				  sizeof(errstr));
		if (!rk) {
			rd_kafka_conf_destroy(conf);
			return std::string("rd_kafka_new: ") + errstr;
		}
		rd_kafka_poll_set_consumer(rk);
		parts = rd_kafka_topic_partition_list_new(
			(int)parts_wanted.size());
		for (const TopicPart &tp : parts_wanted)
			rd_kafka_topic_partition_list_add(parts, tp.first.c_str(),
							  tp.second)
				->offset = RD_KAFKA_OFFSET_BEGINNING;
		rerr = rd_kafka_assign(rk, parts);
		rd_kafka_topic_partition_list_destroy(parts);
		return rerr ? "assign: " + std::string(rd_kafka_err2str(rerr))
			    : "";
	}
};

struct Consumed {
	std::string topic;
	int32_t partition;
	int64_t offset;
	Msg msg;
};

Consumed convert(const rd_kafka_message_t *m)
{
	Consumed c;
	rd_kafka_headers_t *hdrs = nullptr;
	rd_kafka_timestamp_type_t tstype;

	c.topic = rd_kafka_topic_name(m->rkt);
	c.partition = m->partition;
	c.offset = m->offset;
	if (m->key)
		c.msg.key = std::string((const char *)m->key, m->key_len);
	if (m->payload)
		c.msg.value = std::string((const char *)m->payload, m->len);
	c.msg.timestamp = rd_kafka_message_timestamp(m, &tstype);
	if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
		const char *name;
		const void *val;
		size_t size;

		for (size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &val,
							   &size) ==
				   RD_KAFKA_RESP_ERR_NO_ERROR;
		     i++)
			c.msg.headers.push_back(
				{ name, val ? OptStr(std::string(
						      (const char *)val, size))
					    : std::nullopt });
	}
	return c;
}

/* Poll until `want` messages arrived, the first message error (a CRC
 * failure among them) surfaced, or the deadline. Stopping at the first error
 * matters: after a CRC failure librdkafka 2.0.2 skips to a wrong position
 * (rd_kafka_buf_skip_to() is given a length, not a position) and then fetches
 * garbage offsets and resets, so nothing after it is meaningful. */
void consume(Consumer &cons, size_t want, int timeout_ms,
	     std::vector<Consumed> *got, std::vector<std::string> *errors)
{
	Clock::time_point deadline =
		Clock::now() + std::chrono::milliseconds(timeout_ms);

	while (got->size() < want && Clock::now() < deadline) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(cons.rk, 100);

		if (!m)
			continue;
		if (m->err)
			errors->push_back(
				std::string(m->rkt ? rd_kafka_topic_name(m->rkt)
						   : "-") +
				" [" + std::to_string(m->partition) + "] " +
				rd_kafka_err2name(m->err) + ": " +
				rd_kafka_message_errstr(m));
		else
			got->push_back(convert(m));
		rd_kafka_message_destroy(m);
		if (!errors->empty())
			break;
	}
}

/* ---- chains ---- */

/* The bytes of a batch cut at the given points (sorted; a repeated point
 * makes an empty segment), each segment its own heap block. */
struct SplitChain {
	std::vector<std::unique_ptr<uint8_t[]>> blocks;
	std::vector<struct iovec> iov;
	struct km_chain chain;

	SplitChain(const Bytes &b, const std::vector<size_t> &cuts)
	{
		size_t prev = 0;

		for (size_t i = 0; i <= cuts.size(); i++) {
			size_t end = i < cuts.size() ? cuts[i] : b.size();
			size_t len = end - prev;

			blocks.emplace_back(new uint8_t[len]);
			if (len)
				memcpy(blocks.back().get(), b.data() + prev,
				       len);
			iov.push_back({ blocks.back().get(), len });
			prev = end;
		}
		chain.iov = iov.data();
		chain.n_iov = (uint32_t)iov.size();
	}

	Bytes gather() const
	{
		Bytes out;

		for (const struct iovec &v : iov)
			out.insert(out.end(), (const uint8_t *)v.iov_base,
				   (const uint8_t *)v.iov_base + v.iov_len);
		return out;
	}
};

/* Cut plans for a batch of `size` bytes: none; each interesting point alone
 * (field boundaries and their neighbours inside the header, the first
 * records, the middle, the end); all of them at once with empty segments at
 * the start, the end and inside the crc/producerId fields; one byte per
 * segment; and a few pseudo-random sets. */
std::vector<std::vector<size_t>> cut_plans(size_t size)
{
	std::vector<size_t> marks = { 1,  7,  8,  9,  11, 12, 13, 16,
				      17, 18, 19, 20, 21, 22, 23, 27,
				      35, 43, 44, 47, 50, 51, 52, 53,
				      57, 60, 61, 62, 63, 64, 66, 70,
				      size / 2, size - 2, size - 1 };
	std::vector<std::vector<size_t>> plans = { {} };
	std::vector<size_t> all = { 0, 19, 47, size };
	std::vector<size_t> every;
	uint64_t lcg = size;

	for (size_t m : marks)
		if (m > 0 && m < size) {
			plans.push_back({ m });
			all.push_back(m);
		}
	std::sort(all.begin(), all.end());
	all.erase(std::unique(all.begin(), all.end()), all.end());
	all.insert(std::lower_bound(all.begin(), all.end(), 19), 19);
	all.insert(std::lower_bound(all.begin(), all.end(), 47), 47);
	all.insert(all.begin(), 0);
	plans.push_back(all);
	for (size_t i = 1; i < size; i++)
		every.push_back(i);
	plans.push_back(every);
	for (int r = 0; r < 4; r++) {
		std::vector<size_t> cuts;

		for (int k = 0; k < 7; k++) {
			lcg = lcg * 6364136223846793005ULL + 1442695040888963407ULL;
			cuts.push_back(1 + (size_t)((lcg >> 33) % (size - 1)));
		}
		std::sort(cuts.begin(), cuts.end());
		plans.push_back(cuts);
	}
	return plans;
}

std::string describe(const std::vector<size_t> &cuts)
{
	std::string s = "cuts [";

	if (cuts.size() > 40)
		return "one byte per segment (" + std::to_string(cuts.size()) +
		       " cuts)";
	for (size_t c : cuts)
		s += std::to_string(c) + " ";
	return s + "]";
}

/* ---- decoding with kmirror ---- */

struct Decoded {
	int64_t offset;
	int32_t offset_delta;
	int32_t sequence;
	uint32_t size_bytes;
	Msg msg;

	bool operator==(const Decoded &o) const
	{
		return offset == o.offset && offset_delta == o.offset_delta &&
		       sequence == o.sequence && size_bytes == o.size_bytes &&
		       msg == o.msg;
	}
};

OptStr copy_field(const struct km_chain *chain, struct km_chain_cur at,
		  int32_t len)
{
	std::string s;

	if (len < 0)
		return std::nullopt;
	s.resize((size_t)len);
	if (km_chain_copy(chain, at, s.data(), (size_t)len) != (size_t)len)
		return std::string("<short copy>");
	return s;
}

std::string km_err(int rc)
{
	return std::to_string(rc) + " (" + km_strerror(rc) + ")";
}

/* Every record of an uncompressed batch, via km_records_*. */
std::string decode_records(const struct km_chain *chain,
			   const struct km_batch *b, std::vector<Decoded> *out)
{
	struct km_records_iter it;
	int32_t count = km_batch_records_count(b);
	int rc = km_records_begin(&it, b);

	if (rc != 0)
		return "km_records_begin: " + km_err(rc);
	for (int32_t n = 0; n <= count; n++) {
		struct km_record r;
		Decoded d;

		rc = km_records_next(&it, &r);
		if (rc == 0)
			return n == count ? "" : "records end early";
		if (rc < 0)
			return "km_records_next: " + km_err(rc);
		if ((uint32_t)rc != r.size_bytes)
			return "record size mismatch";
		d.offset = r.offset;
		d.offset_delta = r.offset_delta;
		d.sequence = r.sequence;
		d.size_bytes = r.size_bytes;
		d.msg.key = copy_field(chain, r.key, r.key_len);
		d.msg.value = copy_field(chain, r.value, r.value_len);
		d.msg.timestamp = r.timestamp;
		for (int32_t i = 0; i < r.header_count; i++) {
			struct km_record_header h;

			rc = km_record_header_get(b, &r, i, &h);
			if (rc != 0)
				return "km_record_header_get: " + km_err(rc);
			d.msg.headers.push_back(
				{ copy_field(chain, h.key, h.key_len)
					  .value_or("<null key>"),
				  copy_field(chain, h.value, h.value_len) });
		}
		out->push_back(std::move(d));
	}
	return "more records than recordsCount";
}

/* ---- the shared world: cluster, cases, fetched batches ---- */

struct World {
	rd_kafka_t *host = nullptr; /* owns the mock cluster */
	rd_kafka_mock_cluster_t *mock = nullptr;
	std::string bootstraps;
	std::string raw_host;
	uint16_t raw_port = 0;
	std::vector<Case> cases;
	std::string skipped; /* codecs not built in, and why */

	~World()
	{
		if (mock)
			rd_kafka_mock_cluster_destroy(mock);
		if (host)
			rd_kafka_destroy(host);
	}

	Case *find(const std::string &name)
	{
		for (Case &c : cases)
			if (c.name == name)
				return &c;
		return nullptr;
	}

	std::string setup();
};

std::string World::setup()
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char errstr[512];
	std::string err;
	const int32_t n_cases = 8;

	cases = {
		{ "plain", 0, Kind::Plain, "none", KM_CODEC_NONE, "", {}, {} },
		{ "idempotent", 1, Kind::Idempotent, "none", KM_CODEC_NONE, "", {}, {} },
		{ "txn-commit", 2, Kind::TxnCommit, "none", KM_CODEC_NONE, "", {}, {} },
		{ "txn-abort", 3, Kind::TxnAbort, "none", KM_CODEC_NONE, "", {}, {} },
		{ "gzip", 4, Kind::Idempotent, "gzip", KM_CODEC_GZIP, "", {}, {} },
		{ "snappy", 5, Kind::Idempotent, "snappy", KM_CODEC_SNAPPY, "", {}, {} },
		{ "lz4", 6, Kind::Idempotent, "lz4", KM_CODEC_LZ4, "", {}, {} },
		{ "zstd", 7, Kind::Idempotent, "zstd", KM_CODEC_ZSTD, "", {}, {} },
	};
	for (size_t n = 0; n < cases.size(); n++) {
		Case &c = cases[n];

		c.skip_reason = codec_unsupported(c.codec);
		if (!c.skip_reason.empty())
			skipped += std::string(c.codec) + ": " +
				   c.skip_reason + "; ";
		for (int i = 0; i < kRounds * kPerRound; i++)
			c.msgs.push_back(make_msg(c.name, (int)n, i));
	}

	/* The mock needs an rd_kafka_t to live in; it never connects. */
	err = conf_set_all(conf, { { "log_level", "3" } });
	if (!err.empty()) {
		rd_kafka_conf_destroy(conf);
		return err;
	}
	host = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (!host) {
		rd_kafka_conf_destroy(conf);
		return std::string("rd_kafka_new: ") + errstr;
	}
	mock = rd_kafka_mock_cluster_new(host, 1);
	if (!mock)
		return "rd_kafka_mock_cluster_new failed";
	bootstraps = rd_kafka_mock_cluster_bootstraps(mock);
	if (!rawkafka::parse_bootstrap(bootstraps, &raw_host, &raw_port))
		return "unexpected bootstrap list " + bootstraps;
	for (const char *t : { kSrcTopic, kDstTopic, kCorruptTopic })
		if (rd_kafka_mock_topic_create(mock, t,
					       t == kCorruptTopic ? 1 : n_cases,
					       1))
			return std::string("rd_kafka_mock_topic_create ") + t;

	/* One producer per case, except one transactional producer for both
	 * transactions (the same producer id, two partitions). */
	for (Case &c : cases) {
		if (!c.skip_reason.empty() || c.kind == Kind::TxnAbort)
			continue;
		std::vector<Case *> group = { &c };
		if (c.kind == Kind::TxnCommit)
			group.push_back(find("txn-abort"));
		err = produce_cases(bootstraps, group);
		if (!err.empty())
			return c.name + ": " + err;
	}

	rawkafka::Conn conn;
	err = conn.connect(raw_host, raw_port, kTimeoutMs);
	if (!err.empty())
		return "raw connect: " + err;
	for (Case &c : cases) {
		if (!c.skip_reason.empty())
			continue;
		err = rawkafka::fetch_all(conn, kSrcTopic, c.part, 0, 100,
					  kTimeoutMs, &c.batches);
		if (!err.empty())
			return c.name + ": " + err;
	}
	return "";
}

/* ---- the fixture ---- */

class RealBytes : public ::testing::Test {
protected:
	static void SetUpTestSuite()
	{
		world = new World();
		setup_error = world->setup();
	}

	static void TearDownTestSuite()
	{
		delete world;
		world = nullptr;
	}

	void SetUp() override
	{
		ASSERT_EQ(setup_error, "") << "suite setup failed";
	}

	/* Cases whose batches exist (codec built in). */
	static std::vector<const Case *> active()
	{
		std::vector<const Case *> out;

		for (const Case &c : world->cases)
			if (c.skip_reason.empty())
				out.push_back(&c);
		return out;
	}

	static World *world;
	static std::string setup_error;
};

World *RealBytes::world;
std::string RealBytes::setup_error;

/* Map a copy of batch bytes through kmirror; returns the mapped bytes. */
Bytes map_copy(const Bytes &orig, int *rc_out)
{
	Bytes b = orig;
	struct iovec v = { b.data(), b.size() };
	struct km_chain chain = { &v, 1 };
	struct km_batch kb;

	*rc_out = km_batch_parse(&kb, &chain, km_chain_start(&chain),
				 KM_BATCH_BYTES_MAX);
	if (*rc_out > 0)
		*rc_out = km_batch_map_pid(&kb);
	return b;
}

int64_t r1(int64_t p)
{
	return p >= 0 ? -(p + 2) : p;
}

/* ---- the tests ---- */

TEST(ReferenceCrc, KnownVectors)
{
	const char *check = "123456789";
	uint8_t zeros[32] = {};
	uint8_t ones[32];

	memset(ones, 0xff, sizeof(ones));
	/* RFC 3720 B.4 and the CRC catalogue's check value. */
	EXPECT_EQ(ref_crc32c((const uint8_t *)check, 9), 0xE3069283u);
	EXPECT_EQ(ref_crc32c(zeros, sizeof(zeros)), 0x8A9136AAu);
	EXPECT_EQ(ref_crc32c(ones, sizeof(ones)), 0x62A8AB43u);
}

/* Each codec librdkafka has wrote every batch of its case in that codec:
 * the attributes' low 3 bits read straight from the fetched bytes (offset
 * 21), not through km_batch_parse, so a producer that silently fell back to
 * no compression fails here. A codec librdkafka lacks is not asserted but
 * reported as this case's skip. */
TEST_F(RealBytes, EveryCodecIsBuiltIn)
{
	const std::pair<const char *, int> want[] = {
		{ "gzip", 1 }, { "snappy", 2 }, { "lz4", 3 }, { "zstd", 4 }
	};

	for (const auto &[name, id] : want) {
		const Case *c = world->find(name);

		SCOPED_TRACE(name);
		ASSERT_NE(c, nullptr);
		EXPECT_EQ(c->codec_id, id) << "the case expects another codec";
		if (!c->skip_reason.empty())
			continue;
		ASSERT_GE(c->batches.size(), (size_t)kRounds);
		for (size_t n = 0; n < c->batches.size(); n++) {
			ASSERT_GE(c->batches[n].size(), 61u);
			EXPECT_EQ((int)(be(c->batches[n], 21, 2) & 7), id)
				<< "batch " << n << " of " << c->batches.size();
		}
	}
	if (!world->skipped.empty())
		GTEST_SKIP() << "librdkafka " << rd_kafka_version_str()
			     << " lacks codecs, their cases are skipped: "
			     << world->skipped;
}

TEST_F(RealBytes, FetchedAllProducedMessagesInSeveralBatches)
{
	for (const Case *c : active()) {
		int64_t total = 0;
		int32_t largest = 0;

		SCOPED_TRACE(c->name);
		for (const Bytes &b : c->batches) {
			ASSERT_GE(b.size(), 61u);
			total += (int32_t)be(b, 57, 4);
			largest = std::max(largest, (int32_t)be(b, 57, 4));
		}
		EXPECT_EQ(total, (int64_t)c->msgs.size());
		printf("  %-10s %zu batches:", c->name.c_str(),
		       c->batches.size());
		for (const Bytes &b : c->batches)
			printf(" [%zu bytes, %d records, codec %d, pid %lld]",
			       b.size(), (int)be(b, 57, 4),
			       (int)(be(b, 21, 2) & 7), (long long)stored_pid(b));
		printf("\n");
		/* A flush between rounds: at least one batch per round. */
		EXPECT_GE(c->batches.size(), (size_t)kRounds);
		EXPECT_GT(largest, 1) << "no batch holds several messages";
	}
}

TEST_F(RealBytes, HeaderFieldsMatchWhatWasProduced)
{
	for (const Case *c : active()) {
		int64_t next_offset = 0;
		size_t k = 0; /* first message of the current batch */
		int64_t pid0 = 0;
		int16_t epoch0 = 0;

		SCOPED_TRACE(c->name);
		for (size_t n = 0; n < c->batches.size(); n++) {
			const Bytes &bytes = c->batches[n];
			Bytes copy = bytes;
			struct iovec v = { copy.data(), copy.size() };
			struct km_chain chain = { &v, 1 };
			struct km_batch b;
			int rc = km_batch_parse(&b, &chain,
						km_chain_start(&chain),
						KM_BATCH_BYTES_MAX);
			int32_t count;
			int64_t max_ts = INT64_MIN;

			SCOPED_TRACE("batch " + std::to_string(n));
			ASSERT_EQ(rc, (int)bytes.size()) << km_err(rc);
			EXPECT_EQ(km_batch_size(&b), bytes.size());
			EXPECT_EQ(km_batch_magic(&b), 2);
			EXPECT_EQ(km_batch_crc(&b), independent_crc(bytes))
				<< "librdkafka's CRC vs the bitwise reference";
			EXPECT_EQ(km_batch_verify_crc(&b), 0);
			EXPECT_EQ(km_batch_base_offset(&b), next_offset);
			count = km_batch_records_count(&b);
			ASSERT_GE(count, 1);
			ASSERT_LE(k + (size_t)count, c->msgs.size());
			EXPECT_EQ(km_batch_last_offset_delta(&b), count - 1);
			EXPECT_EQ(km_batch_codec(&b), c->codec_id)
				<< km_codec_name(km_batch_codec(&b));
			EXPECT_EQ(km_batch_is_transactional(&b),
				  c->transactional());
			EXPECT_FALSE(km_batch_is_control(&b));
			EXPECT_FALSE(km_batch_is_log_append_time(&b));
			EXPECT_FALSE(km_batch_has_delete_horizon(&b));
			if (c->has_pid()) {
				EXPECT_GE(km_batch_producer_id(&b), 0);
				EXPECT_GE(km_batch_producer_epoch(&b), 0);
				/* Sequences count records per partition. */
				EXPECT_EQ(km_batch_base_sequence(&b), (int32_t)k);
				EXPECT_EQ(km_batch_last_sequence(&b),
					  (int32_t)k + count - 1);
				if (n == 0) {
					pid0 = km_batch_producer_id(&b);
					epoch0 = km_batch_producer_epoch(&b);
				}
				EXPECT_EQ(km_batch_producer_id(&b), pid0);
				EXPECT_EQ(km_batch_producer_epoch(&b), epoch0);
			} else {
				EXPECT_EQ(km_batch_producer_id(&b), -1);
				EXPECT_EQ(km_batch_producer_epoch(&b), -1);
				EXPECT_EQ(km_batch_base_sequence(&b), -1);
				EXPECT_EQ(km_batch_last_sequence(&b), -1);
			}
			for (size_t i = k; i < k + (size_t)count; i++)
				max_ts = std::max(max_ts, c->msgs[i].timestamp);
			EXPECT_EQ(km_batch_base_timestamp(&b),
				  c->msgs[k].timestamp);
			EXPECT_EQ(km_batch_max_timestamp(&b), max_ts);
			next_offset += count;
			k += (size_t)count;
		}
		EXPECT_EQ(k, c->msgs.size());
	}
}

TEST_F(RealBytes, UncompressedRecordsMatchWhatWasProduced)
{
	for (const Case *c : active()) {
		size_t k = 0;

		SCOPED_TRACE(c->name);
		for (size_t n = 0; n < c->batches.size(); n++) {
			Bytes copy = c->batches[n];
			struct iovec v = { copy.data(), copy.size() };
			struct km_chain chain = { &v, 1 };
			struct km_batch b;
			struct km_records_iter it;
			std::vector<Decoded> recs;
			int rc = km_batch_parse(&b, &chain,
						km_chain_start(&chain),
						KM_BATCH_BYTES_MAX);

			SCOPED_TRACE("batch " + std::to_string(n));
			ASSERT_GT(rc, 0) << km_err(rc);
			if (c->codec_id != KM_CODEC_NONE) {
				EXPECT_EQ(km_records_begin(&it, &b),
					  KM_ECOMPRESSED);
				k += (size_t)km_batch_records_count(&b);
				continue;
			}
			ASSERT_EQ(decode_records(&chain, &b, &recs), "");
			ASSERT_EQ(recs.size(),
				  (size_t)km_batch_records_count(&b));
			for (size_t i = 0; i < recs.size(); i++, k++) {
				const Decoded &d = recs[i];

				ASSERT_LT(k, c->msgs.size());
				EXPECT_EQ(d.offset_delta, (int32_t)i);
				EXPECT_EQ(d.offset, (int64_t)k);
				EXPECT_EQ(d.sequence,
					  c->has_pid() ? (int32_t)k : -1);
				EXPECT_TRUE(d.msg == c->msgs[k])
					<< "record " << k << "\n  decoded  "
					<< show(d.msg) << "\n  produced "
					<< show(c->msgs[k]);
			}
		}
		EXPECT_EQ(k, c->msgs.size());
	}
}

TEST_F(RealBytes, MapPidKeepsEveryBatchValid)
{
	for (const Case *c : active()) {
		SCOPED_TRACE(c->name);
		for (size_t n = 0; n < c->batches.size(); n++) {
			const Bytes &orig = c->batches[n];
			int64_t pid = stored_pid(orig);
			Bytes b = orig;
			struct iovec v = { b.data(), b.size() };
			struct km_chain chain = { &v, 1 };
			struct km_batch kb, again;
			Bytes once;
			int rc = km_batch_parse(&kb, &chain,
						km_chain_start(&chain),
						KM_BATCH_BYTES_MAX);

			SCOPED_TRACE("batch " + std::to_string(n) + " pid " +
				     std::to_string(pid));
			ASSERT_EQ(rc, (int)orig.size()) << km_err(rc);
			rc = km_batch_map_pid(&kb);
			EXPECT_EQ(rc, pid >= 0 ? 1 : 0);
			EXPECT_EQ(km_batch_producer_id(&kb), r1(pid));
			EXPECT_EQ(stored_pid(b), r1(pid)) << "bytes not written";
			if (pid >= 0) {
				EXPECT_LE(stored_pid(b), -2);
			}
			EXPECT_EQ(km_batch_verify_crc(&kb), 0);
			EXPECT_EQ(km_batch_crc(&kb), stored_crc(b));
			EXPECT_EQ(independent_crc(b), stored_crc(b))
				<< "the bitwise reference disagrees";
			/* Only crc [17, 21) and producerId [43, 51) change. */
			for (size_t i = 0; i < b.size(); i++) {
				bool may_change = (i >= 17 && i < 21) ||
						  (i >= 43 && i < 51);

				if (!may_change) {
					ASSERT_EQ(b[i], orig[i])
						<< "byte " << i << " changed";
				}
			}
			if (pid < 0) {
				EXPECT_TRUE(b == orig);
			}

			/* Mapping twice is a no-op. */
			once = b;
			EXPECT_EQ(km_batch_map_pid(&kb), 0);
			EXPECT_TRUE(b == once);

			/* A fresh parse of the mapped bytes accepts them. */
			rc = km_batch_parse(&again, &chain,
					    km_chain_start(&chain),
					    KM_BATCH_BYTES_MAX);
			EXPECT_EQ(rc, (int)b.size()) << km_err(rc);
			EXPECT_EQ(km_batch_producer_id(&again), r1(pid));
			EXPECT_EQ(km_batch_map_pid(&again), 0);
		}
	}
}

TEST_F(RealBytes, SplitChainsParseDecodeAndMapIdentically)
{
	size_t plans_run = 0;

	for (const Case *c : active()) {
		SCOPED_TRACE(c->name);
		for (size_t n = 0; n < c->batches.size(); n++) {
			const Bytes &orig = c->batches[n];
			SplitChain whole(orig, {});
			struct km_batch ref;
			std::vector<Decoded> ref_recs;
			int ref_map_rc;
			Bytes ref_mapped = map_copy(orig, &ref_map_rc);
			int rc = km_batch_parse(&ref, &whole.chain,
						km_chain_start(&whole.chain),
						KM_BATCH_BYTES_MAX);

			SCOPED_TRACE("batch " + std::to_string(n));
			ASSERT_EQ(rc, (int)orig.size()) << km_err(rc);
			ASSERT_GE(ref_map_rc, 0) << km_err(ref_map_rc);
			if (c->codec_id == KM_CODEC_NONE) {
				ASSERT_EQ(decode_records(&whole.chain, &ref,
							 &ref_recs),
					  "");
			}

			for (const std::vector<size_t> &cuts :
			     cut_plans(orig.size())) {
				SplitChain sc(orig, cuts);
				struct km_batch b;
				std::vector<Decoded> recs;

				SCOPED_TRACE(describe(cuts));
				plans_run++;
				rc = km_batch_parse(&b, &sc.chain,
						    km_chain_start(&sc.chain),
						    KM_BATCH_BYTES_MAX);
				ASSERT_EQ(rc, (int)orig.size()) << km_err(rc);
				EXPECT_EQ(memcmp(b.hdr, ref.hdr, sizeof(b.hdr)),
					  0);
				EXPECT_EQ(km_batch_size(&b), km_batch_size(&ref));
				EXPECT_EQ(km_batch_verify_crc(&b), 0);
				if (c->codec_id == KM_CODEC_NONE) {
					ASSERT_EQ(decode_records(&sc.chain, &b,
								 &recs),
						  "");
					EXPECT_TRUE(recs == ref_recs)
						<< "records differ";
				}
				EXPECT_EQ(km_batch_map_pid(&b), ref_map_rc);
				EXPECT_EQ(km_batch_verify_crc(&b), 0);
				EXPECT_TRUE(sc.gather() == ref_mapped)
					<< "mapped bytes differ";
				EXPECT_EQ(km_batch_map_pid(&b), 0);
				EXPECT_TRUE(sc.gather() == ref_mapped);
			}
		}
	}
	printf("  %zu cut plans run\n", plans_run);
	EXPECT_GT(plans_run, 100u);
}

TEST_F(RealBytes, MappedBatchesPassACheckCrcsConsumer)
{
	rawkafka::Conn conn;
	std::vector<TopicPart> parts;
	size_t want = 0;

	ASSERT_EQ(conn.connect(world->raw_host, world->raw_port, kTimeoutMs),
		  "");
	for (const Case *c : active()) {
		std::vector<Bytes> mapped, stored;
		int64_t next = 0;

		SCOPED_TRACE(c->name);
		for (const Bytes &orig : c->batches) {
			int rc;
			int16_t perr = -1;
			int64_t base = -1;

			mapped.push_back(map_copy(orig, &rc));
			ASSERT_EQ(rc, c->has_pid() ? 1 : 0) << km_err(rc);
			/* One batch per Produce: the mock garbles two. */
			ASSERT_EQ(conn.produce(kDstTopic, c->part, mapped.back(),
					       &perr, &base),
				  "");
			ASSERT_EQ(perr, 0) << "Produce error code";
			EXPECT_EQ(base, next);
			next = rawkafka::batch_last_offset(orig) + 1;
		}
		/* The broker stores the mapped bytes as they are (it assigns
		 * baseOffset, the same here): the consumer reads them. */
		ASSERT_EQ(rawkafka::fetch_all(conn, kDstTopic, c->part, 0, 100,
					      kTimeoutMs, &stored),
			  "");
		ASSERT_EQ(stored.size(), mapped.size());
		for (size_t n = 0; n < stored.size(); n++) {
			EXPECT_TRUE(stored[n] == mapped[n]) << "batch " << n;
			EXPECT_EQ(stored_pid(stored[n]),
				  r1(stored_pid(c->batches[n])));
		}
		parts.push_back({ kDstTopic, c->part });
		want += c->msgs.size();
	}

	Consumer cons;
	std::vector<Consumed> got;
	std::vector<std::string> errors;

	ASSERT_EQ(cons.start(world->bootstraps, true, parts), "");
	consume(cons, want, kTimeoutMs, &got, &errors);
	for (const std::string &e : errors)
		ADD_FAILURE() << "consumer error: " << e;
	ASSERT_EQ(got.size(), want) << "messages delivered with check.crcs";

	for (const Case *c : active()) {
		std::vector<const Consumed *> mine;

		SCOPED_TRACE(c->name);
		for (const Consumed &m : got)
			if (m.topic == kDstTopic && m.partition == c->part)
				mine.push_back(&m);
		std::sort(mine.begin(), mine.end(),
			  [](const Consumed *a, const Consumed *b) {
				  return a->offset < b->offset;
			  });
		ASSERT_EQ(mine.size(), c->msgs.size());
		for (size_t i = 0; i < mine.size(); i++) {
			EXPECT_EQ(mine[i]->offset, (int64_t)i);
			EXPECT_TRUE(mine[i]->msg == c->msgs[i])
				<< "message " << i << "\n  consumed "
				<< show(mine[i]->msg) << "\n  produced "
				<< show(c->msgs[i]);
		}
	}
}

TEST_F(RealBytes, CorruptedMappedBatchFailsTheCheckCrcsConsumer)
{
	const Case *c = world->find("idempotent");
	rawkafka::Conn conn;
	Bytes bad;
	size_t flip = 0;
	int rc;
	int16_t perr = -1;
	int64_t base = -1;

	ASSERT_NE(c, nullptr);
	ASSERT_FALSE(c->batches.empty());
	bad = map_copy(c->batches[0], &rc);
	ASSERT_EQ(rc, 1) << km_err(rc);

	/* Find the first record value's first byte with kmirror's iterator,
	 * then flip it without touching the CRC. */
	{
		struct iovec v = { bad.data(), bad.size() };
		struct km_chain chain = { &v, 1 };
		struct km_batch b;
		struct km_records_iter it;
		struct km_record r;

		ASSERT_GT(km_batch_parse(&b, &chain, km_chain_start(&chain),
					 KM_BATCH_BYTES_MAX),
			  0);
		ASSERT_EQ(km_records_begin(&it, &b), 0);
		ASSERT_GT(km_records_next(&it, &r), 0);
		ASSERT_GT(r.value_len, 0);
		ASSERT_EQ(r.value.seg, 0u);
		flip = r.value.off;
	}
	bad[flip] ^= 0x20;
	ASSERT_NE(independent_crc(bad), stored_crc(bad));
	{
		struct iovec v = { bad.data(), bad.size() };
		struct km_chain chain = { &v, 1 };
		struct km_batch b;

		EXPECT_EQ(km_batch_parse(&b, &chain, km_chain_start(&chain),
					 KM_BATCH_BYTES_MAX),
			  KM_EBADCRC);
	}

	ASSERT_EQ(conn.connect(world->raw_host, world->raw_port, kTimeoutMs),
		  "");
	ASSERT_EQ(conn.produce(kCorruptTopic, 0, bad, &perr, &base), "");
	ASSERT_EQ(perr, 0);
	ASSERT_EQ(base, 0);

	/* check.crcs=true: an error, and nothing from that batch delivered. */
	{
		Consumer cons;
		std::vector<Consumed> got;
		std::vector<std::string> errors;

		ASSERT_EQ(cons.start(world->bootstraps, true, { { kCorruptTopic, 0 } }),
			  "");
		consume(cons, 1, kTimeoutMs, &got, &errors);
		EXPECT_TRUE(got.empty()) << got.size() << " messages delivered";
		ASSERT_FALSE(errors.empty()) << "no CRC error surfaced";
		EXPECT_NE(errors[0].find("failed CRC32C check"),
			  std::string::npos)
			<< errors[0];
		EXPECT_NE(errors[0].find("_BAD_MSG"), std::string::npos)
			<< errors[0];
	}

	/* check.crcs=false: the same bytes arrive, the flip goes unnoticed.
	 * So the failure above is the CRC check's doing. */
	{
		Consumer cons;
		std::vector<Consumed> got;
		std::vector<std::string> errors;
		const Msg &first = c->msgs[0];

		ASSERT_EQ(cons.start(world->bootstraps, false, { { kCorruptTopic, 0 } }),
			  "");
		consume(cons, (size_t)be(bad, 57, 4), kTimeoutMs, &got, &errors);
		EXPECT_TRUE(errors.empty()) << errors.front();
		ASSERT_FALSE(got.empty());
		ASSERT_TRUE(got[0].msg.value.has_value());
		ASSERT_TRUE(first.value.has_value());
		EXPECT_EQ(got[0].msg.key, first.key);
		ASSERT_EQ(got[0].msg.value->size(), first.value->size());
		EXPECT_NE(*got[0].msg.value, *first.value);
		EXPECT_EQ((uint8_t)(*got[0].msg.value)[0],
			  (uint8_t)((*first.value)[0] ^ 0x20));
	}
}

} // namespace
