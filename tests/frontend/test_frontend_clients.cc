// Goal: ordinary Kafka clients work against the front-end. A librdkafka
// 2.0.2 idempotent producer (acks=all) writes every kind of record (keys,
// null keys and values, empty values, headers, ~900 KiB values, gzip, lz4,
// zstd and none) and a librdkafka consumer with check.crcs=true reads it
// all back at the offsets the delivery reports gave, byte for byte; kcat
// lists the topics and reads them too; watermarks and offsets-for-times are
// right (to the record inside a batch); read_committed sees only committed
// data and stops at the LSO while read_uncommitted sees everything up to
// the high watermark, and a raw read_committed Fetch carries no aborted
// data batch (mirrored ids < -1, which Kafka's Java consumer cannot
// filter) yet keeps offsets, markers and the aborted list, and serves the
// failover's barrier only at the head of its records (transaction markers
// behind their data, as Kafka); a consumer waiting at the end gets a record produced
// later without waiting out its MaxWaitMs; a producer to a MIRROR partition
// fails at once with POLICY_VIOLATION and nothing is written.
// Method: fe_harness.h's server (a worker loop on its own thread over real
// io_uring, sockets and logs) and real clients on the test thread; every
// wait is bounded by a deadline on an observable condition (no sleeps).
#include <gtest/gtest.h>

#include <librdkafka/rdkafka.h>
#include <unistd.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "common/errors.h"
#include "fe_harness.h"
#include "fe_raw.h"
#include "iouring_log/log.h"
#include "kafka/batch.h"
#include "kafka/control.h"
#include "kafka/proto.h"
#include "kafka/records.h"

namespace {

using fetest::Consumer;
using fetest::Msg;
using fetest::MonoMs;
using fetest::PartSpec;
using fetest::Producer;
using fetest::Props;
using fetest::Server;

const std::vector<PartSpec> kParts = {
	{"alpha", 0, true}, {"alpha", 1, true}, {"alpha", 2, true},
	{"mirror", 0, false}, {"txn", 0, true},
};
const int kTimeoutMs = 30000;

class Clients : public ::testing::Test {
protected:
	void SetUp() override { ASSERT_EQ("", srv_.Start(kParts)); }
	void TearDown() override
	{
		srv_.Stop();
		EXPECT_EQ("", srv_.LoopError());
	}
	// Produce msgs (partition set in each) with an idempotent acks=all
	// producer; every delivery must succeed.
	void Produce(const std::string &topic, std::vector<Msg> *msgs,
		     const Props &extra = {})
	{
		Producer p;
		Props props = {{"enable.idempotence", "true"},
			       {"acks", "all"},
			       {"linger.ms", "5"},
			       {"message.timeout.ms", "20000"}};
		props.insert(props.end(), extra.begin(), extra.end());
		ASSERT_EQ("", p.Create(srv_.bootstrap(), props));
		ASSERT_EQ("", p.Send(topic, msgs, kTimeoutMs));
		for (const Msg &m : *msgs)
			ASSERT_EQ(0, m.err) << rd_kafka_err2str(
				(rd_kafka_resp_err_t)m.err);
	}
	Server srv_;
};

Msg Simple(int32_t partition, const std::string &key, const std::string &val)
{
	Msg m;
	m.partition = partition;
	m.key_null = false;
	m.key = key;
	m.value_null = false;
	m.value = val;
	return m;
}

// Message i of a codec's set: every shape the wire can carry.
Msg Shaped(int32_t partition, int i, uint64_t seed)
{
	Msg m = Simple(partition, "key-" + std::to_string(seed) + "-" +
				  std::to_string(i),
		       "value-" + std::to_string(i));
	if (i % 7 == 0) {
		m.key_null = true;
		m.key.clear();
	}
	if (i == 3) {
		m.value_null = true;
		m.value.clear();
	}
	if (i == 4)
		m.value.clear(); // empty, not null
	if (i % 3 == 0)
		m.headers = {{"h1", false, "x" + std::to_string(i)},
			     {"h-null", true, ""},
			     {"h-empty", false, ""}};
	if (i == 10 || i == 25)
		m.value = fetest::RandomBytes(900 * 1024, seed * 100 + i);
	return m;
}

void ExpectSame(const Msg &want, const Msg &got)
{
	SCOPED_TRACE("partition " + std::to_string(want.partition) +
		     " offset " + std::to_string(want.offset));
	EXPECT_EQ(want.partition, got.partition);
	EXPECT_EQ(want.offset, got.offset);
	EXPECT_EQ(want.key_null, got.key_null);
	EXPECT_EQ(want.key, got.key);
	EXPECT_EQ(want.value_null, got.value_null);
	EXPECT_TRUE(want.value == got.value)
		<< "value of " << want.value.size() << " bytes differs ("
		<< got.value.size() << " read)";
	ASSERT_EQ(want.headers.size(), got.headers.size());
	for (size_t h = 0; h < want.headers.size(); h++) {
		EXPECT_EQ(want.headers[h].name, got.headers[h].name);
		EXPECT_EQ(want.headers[h].null, got.headers[h].null);
		EXPECT_EQ(want.headers[h].value, got.headers[h].value);
	}
}

TEST_F(Clients, IdempotentProducerAndConsumerRoundTripEveryShape)
{
	const char *codecs[] = {"none", "gzip", "lz4", "zstd"};
	std::map<std::pair<int32_t, int64_t>, Msg> want;
	std::map<int32_t, int64_t> end;
	for (int c = 0; c < 4; c++) {
		std::vector<Msg> msgs;
		for (int i = 0; i < 30; i++)
			msgs.push_back(Shaped(c % 3, i, c + 1));
		ASSERT_NO_FATAL_FAILURE(Produce(
			"alpha", &msgs, {{"compression.type", codecs[c]}}));
		for (const Msg &m : msgs) {
			want[{m.partition, m.offset}] = m;
			end[m.partition] = std::max(end[m.partition], m.offset + 1);
		}
	}
	ASSERT_EQ(120u, want.size()) << "offsets given twice";
	EXPECT_EQ(60, end[0]);
	EXPECT_EQ(30, end[1]);
	EXPECT_EQ(30, end[2]);

	Consumer con;
	ASSERT_EQ("", con.Start(srv_.bootstrap(), "alpha", {0, 1, 2},
				RD_KAFKA_OFFSET_BEGINNING, {}));
	ASSERT_TRUE(con.PollUntil(
		[&] {
			return con.Eof(0) == end[0] && con.Eof(1) == end[1] &&
			       con.Eof(2) == end[2];
		},
		kTimeoutMs))
		<< con.msgs.size() << " messages read";
	EXPECT_TRUE(con.errors.empty()) << con.errors[0];
	ASSERT_EQ(want.size(), con.msgs.size());
	for (const Msg &got : con.msgs) {
		auto it = want.find({got.partition, got.offset});
		ASSERT_NE(want.end(), it) << got.partition << "/" << got.offset;
		ExpectSame(it->second, got);
	}
	km_frontend_stats st = srv_.Stats();
	EXPECT_GT(st.requests[KM_API_PRODUCE], 0u);
	EXPECT_GT(st.requests[KM_API_FETCH], 0u);
	EXPECT_GT(st.records_bytes_out, 2u * 900 * 1024);
	EXPECT_EQ(0u, st.protocol_errors);
}

TEST_F(Clients, KcatListsAndConsumes)
{
	int status = 0;
	fetest::Shell("command -v kcat", &status);
	if (status != 0)
		GTEST_SKIP() << "kcat is not installed (Debian package kcat)";
	std::vector<Msg> msgs;
	for (int i = 0; i < 5; i++)
		msgs.push_back(Simple(1, "k" + std::to_string(i),
				      "v" + std::to_string(i)));
	ASSERT_NO_FATAL_FAILURE(Produce("alpha", &msgs));

	std::string b = " -b " + srv_.bootstrap();
	std::string list = fetest::Shell("timeout 20 kcat -L" + b, &status);
	ASSERT_EQ(0, status) << list;
	EXPECT_NE(std::string::npos, list.find(" 1 brokers:")) << list;
	EXPECT_NE(std::string::npos,
		  list.find("broker 7 at " + srv_.bootstrap()))
		<< list;
	EXPECT_NE(std::string::npos,
		  list.find("topic \"alpha\" with 3 partitions:"))
		<< list;
	EXPECT_NE(std::string::npos,
		  list.find("topic \"mirror\" with 1 partitions:"))
		<< list;
	EXPECT_NE(std::string::npos,
		  list.find("partition 2, leader 7, replicas: 7, isrs: 7"))
		<< list;
	std::string got = fetest::Shell(
		"timeout 20 kcat -C -q -e -t alpha -p 1 -o beginning "
		"-f '%o %k %s\\n'" + b, &status);
	ASSERT_EQ(0, status) << got;
	EXPECT_EQ("0 k0 v0\n1 k1 v1\n2 k2 v2\n3 k3 v3\n4 k4 v4\n", got);
}

TEST_F(Clients, WatermarksAndOffsetsForTimes)
{
	const int64_t t0 = 1700000000000LL;
	std::vector<Msg> one;
	// Five batches of one record, a second apart.
	for (int i = 0; i < 5; i++) {
		one = {Simple(0, "k", "single-" + std::to_string(i))};
		one[0].timestamp = t0 + 1000 * i;
		ASSERT_NO_FATAL_FAILURE(Produce("alpha", &one));
	}
	// One batch of three records 10 ms apart.
	std::vector<Msg> three;
	for (int i = 0; i < 3; i++) {
		three.push_back(Simple(0, "k", "multi-" + std::to_string(i)));
		three.back().timestamp = t0 + 10000 + 10 * i;
	}
	ASSERT_NO_FATAL_FAILURE(Produce("alpha", &three, {{"linger.ms", "200"}}));
	ASSERT_EQ(5, three[0].offset);
	ASSERT_EQ(7, three[2].offset);
	// They must share a batch, or the record-level answer is not tested.
	km_log_read_result r = {};
	srv_.Run([&] {
		std::vector<uint8_t> buf(1 << 20);
		EXPECT_EQ(0, km_log_read(srv_.log(0), 5,
					 km_log_durable_offset(srv_.log(0)), 0,
					 buf.data(), buf.size(), &r));
	});
	ASSERT_EQ(1u, r.batches);
	ASSERT_EQ(5, r.first_offset);
	ASSERT_EQ(8, r.next_offset) << "the three records are not one batch";

	Producer q;
	ASSERT_EQ("", q.Create(srv_.bootstrap(), {}));
	rd_kafka_t *rk = static_cast<rd_kafka_t *>(q.rk);
	int64_t lo = -5, hi = -5;
	ASSERT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR,
		  rd_kafka_query_watermark_offsets(rk, "alpha", 0, &lo, &hi,
						   kTimeoutMs));
	EXPECT_EQ(0, lo);
	EXPECT_EQ(8, hi);
	ASSERT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR,
		  rd_kafka_query_watermark_offsets(rk, "alpha", 2, &lo, &hi,
						   kTimeoutMs));
	EXPECT_EQ(0, lo);
	EXPECT_EQ(0, hi);
	struct {
		int64_t ts;
		int64_t want;
	} cases[] = {
		{t0 - 5, 0},	     {t0, 0},		{t0 + 1500, 2},
		{t0 + 4000, 4},	     {t0 + 4001, 5},	{t0 + 10010, 6},
		{t0 + 10011, 7},     {t0 + 10020, 7},	{t0 + 99999, -1},
	};
	for (const auto &c : cases) {
		rd_kafka_topic_partition_list_t *l =
			rd_kafka_topic_partition_list_new(1);
		rd_kafka_topic_partition_list_add(l, "alpha", 0)->offset = c.ts;
		rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(rk, l,
								   kTimeoutMs);
		EXPECT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR, e) << rd_kafka_err2str(e);
		EXPECT_EQ(0, l->elems[0].err);
		EXPECT_EQ(c.want, l->elems[0].offset) << "timestamp t0+"
						      << c.ts - t0;
		rd_kafka_topic_partition_list_destroy(l);
	}
}

// The harness appends transactional batches itself (clients cannot write
// them here): a committed transaction, an aborted one, plain data, an open
// transaction, more plain data. Offsets: commit data 0-1, COMMIT 2, abort
// data 3-4, ABORT 5, plain 6, open data 7, plain 8: HW 9, LSO 7.
class Txn : public Clients {
protected:
	void Append(const std::vector<std::string> &vals, int64_t pid,
		    bool txn, km_origin origin)
	{
		std::vector<km_record_spec> recs(vals.size());
		for (size_t i = 0; i < vals.size(); i++) {
			recs[i] = {};
			recs[i].key_len = -1;
			recs[i].value = vals[i].data();
			recs[i].value_len = (int32_t)vals[i].size();
			recs[i].timestamp = 1700000000000LL;
		}
		km_batch_spec spec = {0, -1,
				      (int16_t)(txn ? KM_BATCH_ATTR_TRANSACTIONAL
						    : 0),
				      pid, (int16_t)(pid < 0 ? -1 : 0),
				      pid < 0 ? -1 : 0};
		fetest::Bytes b(km_records_build_size(recs.data(),
						       (int32_t)recs.size()));
		ASSERT_EQ((int)b.size(), km_records_build(b.data(), b.size(),
							   &spec, recs.data(),
							   (int32_t)recs.size()));
		AppendBytes(std::move(b), origin);
	}
	void Marker(int64_t pid, bool commit)
	{
		fetest::Bytes b(KM_CTRL_MARKER_BATCH_BYTES);
		km_ctrl_spec s = {0, 0, 1700000000000LL};
		ASSERT_EQ((int)b.size(),
			  km_ctrl_build_marker(b.data(), b.size(), &s, pid, 0,
					       commit, 0));
		AppendBytes(std::move(b), KM_ORIGIN_CONTROL);
	}
	// On the owner's thread; the bytes live until the test ends.
	void AppendBytes(fetest::Bytes b, km_origin origin)
	{
		bufs_.push_back(std::move(b));
		fetest::Bytes &kept = bufs_.back();
		int rc = -1;
		srv_.Run([&] {
			iovecs_.push_back({kept.data(), kept.size()});
			chains_.push_back({&iovecs_.back(), 1});
			km_batch batch;
			rc = km_batch_parse(&batch, &chains_.back(),
					    km_chain_start(&chains_.back()),
					    1 << 20);
			if (rc <= 0)
				return;
			km_log_append_result res;
			rc = km_log_append_burst(srv_.log(4), &batch, 1, origin,
						 &res);
			if (rc == 1)
				rc = km_log_flush(srv_.log(4));
		});
		ASSERT_EQ(0, rc) << km_strerror(rc);
	}
	void Build()
	{
		Append({"c1", "c2"}, 5000, true, KM_ORIGIN_CLIENT);
		Marker(5000, true);
		Append({"a1", "a2"}, 5001, true, KM_ORIGIN_CLIENT);
		Marker(5001, false);
		Append({"p1"}, -1, false, KM_ORIGIN_CLIENT);
		Append({"o1"}, 5002, true, KM_ORIGIN_CLIENT);
		Append({"p2"}, -1, false, KM_ORIGIN_CLIENT);
		uint64_t end = MonoMs() + kTimeoutMs;
		while (km_log_durable_offset(srv_.log(4)) < 9 && MonoMs() < end)
			srv_.Run([] {}); // one loop turn
		ASSERT_EQ(9, km_log_durable_offset(srv_.log(4)));
	}
	std::vector<std::string> Read(const char *isolation, int64_t end)
	{
		Consumer con;
		std::vector<std::string> vals;
		EXPECT_EQ("", con.Start(srv_.bootstrap(), "txn", {0},
					RD_KAFKA_OFFSET_BEGINNING,
					{{"isolation.level", isolation}}));
		EXPECT_TRUE(con.PollUntil([&] { return con.Eof(0) >= 0; },
					  kTimeoutMs));
		EXPECT_EQ(end, con.Eof(0)) << isolation;
		EXPECT_TRUE(con.errors.empty()) << con.errors[0];
		for (const Msg &m : con.msgs)
			vals.push_back(m.value + "@" + std::to_string(m.offset));
		int64_t lo = -5, hi = -5;
		EXPECT_EQ(RD_KAFKA_RESP_ERR_NO_ERROR,
			  rd_kafka_query_watermark_offsets(
				  static_cast<rd_kafka_t *>(con.rk), "txn", 0,
				  &lo, &hi, kTimeoutMs));
		EXPECT_EQ(end, hi) << isolation << " high watermark";
		return vals;
	}
	std::deque<fetest::Bytes> bufs_;
	std::deque<iovec> iovecs_;
	std::deque<km_chain> chains_;
};

TEST_F(Txn, ReadCommittedStopsAtLsoAndSkipsAborted)
{
	ASSERT_NO_FATAL_FAILURE(Build());
	int64_t lso = -1;
	srv_.Run([&] { lso = km_log_lso(srv_.log(4)); });
	ASSERT_EQ(7, lso);
	std::vector<std::string> committed = Read("read_committed", 7);
	EXPECT_EQ((std::vector<std::string>{"c1@0", "c2@1", "p1@6"}), committed);
	std::vector<std::string> all = Read("read_uncommitted", 9);
	EXPECT_EQ((std::vector<std::string>{"c1@0", "c2@1", "a1@3", "a2@4",
					     "p1@6", "o1@7", "p2@8"}),
		  all);
}

// Mirrored transactions (R1: ids below -1, appended as MIRROR with their
// own offsets) and a local one (id 7000, as after a failover): commit data
// C 0-1 (-5002), aborted data A 2-3 (-5003), plain 4, A 5, COMMIT(C) 6,
// A 7-8, ABORT(A) 9, plain 10, local aborted data 11, ABORT(7000) 12,
// plain 13: HW = LSO = 14.
class TxnServe : public Txn {
protected:
	void Mirrored(const std::vector<std::string> &vals, int64_t pid,
		      int64_t base)
	{
		std::vector<km_record_spec> recs(vals.size());
		for (size_t i = 0; i < vals.size(); i++) {
			recs[i] = {};
			recs[i].key_len = -1;
			recs[i].value = vals[i].data();
			recs[i].value_len = (int32_t)vals[i].size();
			recs[i].timestamp = 1700000000000LL;
		}
		bool txn = pid != -1;
		km_batch_spec spec = {base, 0,
				      (int16_t)(txn ? KM_BATCH_ATTR_TRANSACTIONAL
						    : 0),
				      pid, (int16_t)(txn ? 0 : -1),
				      txn ? seq_[pid] : -1};
		fetest::Bytes b(km_records_build_size(recs.data(),
						       (int32_t)recs.size()));
		ASSERT_EQ((int)b.size(), km_records_build(b.data(), b.size(),
							   &spec, recs.data(),
							   (int32_t)recs.size()));
		size_[base] = (int32_t)b.size();
		seq_[pid] += (int32_t)vals.size();
		AppendBytes(std::move(b), KM_ORIGIN_MIRROR);
	}
	void MirroredMarker(int64_t pid, int64_t base, bool commit)
	{
		fetest::Bytes b(KM_CTRL_MARKER_BATCH_BYTES);
		km_ctrl_spec cs = {base, 0, 1700000000000LL};
		ASSERT_EQ((int)b.size(),
			  km_ctrl_build_marker(b.data(), b.size(), &cs, pid, 0,
					       commit, 0));
		size_[base] = (int32_t)b.size();
		AppendBytes(std::move(b), KM_ORIGIN_MIRROR);
	}
	void BuildServe()
	{
		Mirrored({"c1", "c2"}, -5002, 0);
		Mirrored({"a1", "a2"}, -5003, 2);
		Mirrored({"p1"}, -1, 4);
		Mirrored({"a3"}, -5003, 5);
		MirroredMarker(-5002, 6, true);
		Mirrored({"a4", "a5"}, -5003, 7);
		MirroredMarker(-5003, 9, false);
		Mirrored({"p2"}, -1, 10);
		Append({"l1"}, 7000, true, KM_ORIGIN_CLIENT);
		Marker(7000, false);
		Append({"p3"}, -1, false, KM_ORIGIN_CLIENT);
		uint64_t end = MonoMs() + kTimeoutMs;
		while (km_log_durable_offset(srv_.log(4)) < 14 && MonoMs() < end)
			srv_.Run([] {}); // one loop turn
		ASSERT_EQ(14, km_log_durable_offset(srv_.log(4)));
		int64_t lso = -1;
		srv_.Run([&] { lso = km_log_lso(srv_.log(4)); });
		ASSERT_EQ(14, lso);
		ASSERT_EQ("", c_.Connect(srv_.port()));
	}
	// One partition's answer to a Fetch v11 of txn-0 from off with a
	// partition MaxBytes of max_bytes.
	fetest::FetchOut::Part Get(int64_t off, int32_t max_bytes, bool committed)
	{
		fetest::Resp x;
		fetest::FetchOut out;
		EXPECT_TRUE(c_.Send(fetest::FetchReq(++corr_, 11, 0, 1 << 20,
						     {{"txn", 0, off, max_bytes}},
						     0, -1, committed ? 1 : 0)));
		EXPECT_EQ("", c_.ReadFrame(&x.body));
		fetest::Open(&x, KM_API_FETCH, 11);
		fetest::DecodeFetch(&x, 11, &out);
		EXPECT_EQ(1u, out.parts.size());
		if (out.parts.size() != 1)
			return {};
		EXPECT_EQ(0, out.parts[0].error);
		EXPECT_EQ(end_, out.parts[0].hw);
		EXPECT_EQ(end_, out.parts[0].lso);
		return out.parts[0];
	}
	// Serve once the log is durable up to end_.
	void ServeAtEnd()
	{
		uint64_t end = MonoMs() + kTimeoutMs;
		while (km_log_durable_offset(srv_.log(4)) < end_ && MonoMs() < end)
			srv_.Run([] {}); // one loop turn
		ASSERT_EQ(end_, km_log_durable_offset(srv_.log(4)));
		ASSERT_EQ("", c_.Connect(srv_.port()));
	}
	int64_t end_ = 14;
	std::map<int64_t, int32_t> size_; // batch bytes by base offset
	std::map<int64_t, int32_t> seq_;  // next sequence by producer id
	fetest::RawConn c_;
	int32_t corr_ = 0;
};

using Bases = std::vector<int64_t>;
using Aborted = std::vector<std::pair<int64_t, int64_t>>;

// read_committed leaves the aborted transactions' data batches out (Kafka's
// Java consumer cannot filter ids below -1) and keeps everything else at
// its offsets, the markers and the AbortedTransactions list included;
// read_uncommitted serves every batch. A fetch starting inside an aborted
// range, or whose MaxBytes ends inside one, still makes progress.
TEST_F(TxnServe, ReadCommittedLeavesAbortedBatchesOut)
{
	ASSERT_NO_FATAL_FAILURE(BuildServe());
	const Aborted both = {{-5003, 2}, {7000, 11}};
	struct Case {
		int64_t off;
		int32_t max_bytes;
		Bases committed, uncommitted;
		Aborted aborted;
	} cases[] = {
		{0, 1 << 20, {0, 4, 6, 9, 10, 12, 13},
		 {0, 2, 4, 5, 6, 7, 9, 10, 11, 12, 13}, both},
		// inside the aborted range: its rest is left out
		{5, 1 << 20, {6, 9, 10, 12, 13}, {5, 6, 7, 9, 10, 11, 12, 13}, both},
		// only aborted data before the marker
		{7, 1 << 20, {9, 10, 12, 13}, {7, 9, 10, 11, 12, 13}, both},
		// MaxBytes ends inside: the next kept batch comes after all,
		// and alone (the rest, read on, is cut to MaxBytes)
		{2, 1, {4}, {2}, both},
		{7, 1, {9}, {7}, both},
		{11, 1, {12}, {11}, {{7000, 11}}},
		// MaxBytes holds 2, 4 and 5: what is left out does not count
		{2, size_[2] + size_[4] + size_[5], {4}, {2, 4, 5}, {{-5003, 2}}},
	};
	for (const Case &c : cases) {
		fetest::FetchOut::Part rc = Get(c.off, c.max_bytes, true);
		EXPECT_EQ(c.committed, rc.batch_bases)
			<< "read_committed from " << c.off << " max " << c.max_bytes;
		EXPECT_EQ(c.aborted, rc.aborted)
			<< "read_committed from " << c.off << " max " << c.max_bytes;
		fetest::FetchOut::Part ru = Get(c.off, c.max_bytes, false);
		EXPECT_EQ(c.uncommitted, ru.batch_bases)
			<< "read_uncommitted from " << c.off << " max " << c.max_bytes;
		EXPECT_TRUE(ru.aborted.empty()) << "read_uncommitted";
	}
	// librdkafka read_committed over the served gaps: exactly the
	// committed and plain records.
	c_.Close();
	EXPECT_EQ((std::vector<std::string>{"c1@0", "c2@1", "p1@4", "p2@10",
					     "p3@13"}),
		  Read("read_committed", 14));
}

// 300 small aborted transactions, more than one Fetch response lists
// (KM_FRONTEND_ABORTED_MAX, 256), then a plain record: read_committed reads
// a range that holds fewer, so every Fetch advances, and librdkafka reaches
// the plain record. Without the smaller read no Fetch serves anything.
TEST_F(TxnServe, DenseAbortedTransactionsStillAdvance)
{
	const int n = 300;
	for (int k = 0; k < n; k++) {
		ASSERT_NO_FATAL_FAILURE(Mirrored({"a" + std::to_string(k)},
						 -5003, 2 * k));
		ASSERT_NO_FATAL_FAILURE(MirroredMarker(-5003, 2 * k + 1, false));
	}
	ASSERT_NO_FATAL_FAILURE(Mirrored({"p"}, -1, 2 * n));
	end_ = 2 * n + 1;
	ASSERT_NO_FATAL_FAILURE(ServeAtEnd());
	int64_t off = 0;
	for (int fetches = 0; off < end_ && fetches < 2 * n; fetches++) {
		fetest::FetchOut::Part rc = Get(off, 1 << 20, true);
		ASSERT_FALSE(rc.batch_bases.empty()) << "nothing served from " << off;
		EXPECT_LE(rc.aborted.size(), 256u) << "from " << off;
		for (int64_t b : rc.batch_bases)
			EXPECT_TRUE(b % 2 == 1 || b == 2 * n)
				<< "aborted data at " << b << " served";
		off = rc.batch_bases.back() + 1;
	}
	EXPECT_EQ(end_, off);
	c_.Close();
	EXPECT_EQ((std::vector<std::string>{"p@600"}),
		  Read("read_committed", end_));
}

// The failover's barrier is served only at the head of a partition's
// records (docs/design.md, "The barrier comes alone"): a Fetch from below
// it ends just before it, the next one starts with it and goes on past it;
// a COMMIT marker still comes right behind its data, as Kafka serves it.
// Offsets: commit data 0-1 (-5002), COMMIT 2, plain 3, the barrier 4
// (mirrored, as down a chain), plain 5-6: HW = LSO = 7. Without the cut a
// Fetch from 0 serves the barrier with the data (librdkafka consumers that
// close then commit 5).
TEST_F(TxnServe, TheBarrierComesAlone)
{
	Mirrored({"c1", "c2"}, -5002, 0);
	MirroredMarker(-5002, 2, true);
	Mirrored({"p1"}, -1, 3);
	fetest::Bytes b(256);
	km_ctrl_spec cs = {4, 0, 1700000000000LL};
	int n = km_ctrl_build_pid_reset(b.data(), b.size(), &cs, "src-cluster");
	ASSERT_GT(n, 0) << km_strerror(n);
	b.resize((size_t)n);
	AppendBytes(std::move(b), KM_ORIGIN_MIRROR);
	Mirrored({"p2"}, -1, 5);
	Mirrored({"p3"}, -1, 6);
	end_ = 7;
	ASSERT_NO_FATAL_FAILURE(ServeAtEnd());
	for (bool committed : {false, true}) {
		SCOPED_TRACE(committed ? "read_committed" : "read_uncommitted");
		EXPECT_EQ((Bases{0, 2, 3}), Get(0, 1 << 20, committed).batch_bases);
		EXPECT_EQ((Bases{3}), Get(3, 1 << 20, committed).batch_bases);
		EXPECT_EQ((Bases{4, 5, 6}), Get(4, 1 << 20, committed).batch_bases);
		EXPECT_EQ((Bases{5, 6}), Get(5, 1 << 20, committed).batch_bases);
	}
	c_.Close();
	EXPECT_EQ((std::vector<std::string>{"c1@0", "c2@1", "p1@3", "p2@5",
					     "p3@6"}),
		  Read("read_committed", 7));
}

// A consumer parked at the end (MaxWaitMs 10 s) gets a record produced
// later as soon as it is durable, not when its wait runs out.
TEST_F(Clients, LongPollWakesOnNewData)
{
	Consumer con;
	ASSERT_EQ("", con.Start(srv_.bootstrap(), "alpha", {2},
				RD_KAFKA_OFFSET_END,
				{{"fetch.wait.max.ms", "10000"}}));
	uint64_t parked0 = srv_.Stats().fetch_parked;
	ASSERT_TRUE(con.PollUntil(
		[&] { return srv_.Stats().fetch_parked > parked0; }, kTimeoutMs))
		<< "the consumer's Fetch never parked";
	std::vector<Msg> msgs = {Simple(2, "late", "arrival")};
	ASSERT_NO_FATAL_FAILURE(Produce("alpha", &msgs));
	uint64_t delivered = MonoMs();
	ASSERT_TRUE(con.PollUntil([&] { return !con.msgs.empty(); }, kTimeoutMs));
	EXPECT_LT(MonoMs() - delivered, 5000u)
		<< "the parked Fetch waited out its MaxWaitMs";
	EXPECT_EQ("arrival", con.msgs[0].value);
	EXPECT_EQ(0, con.msgs[0].offset);
}

TEST_F(Clients, ProduceToMirrorPartitionFailsFast)
{
	Producer p;
	ASSERT_EQ("", p.Create(srv_.bootstrap(),
			       {{"enable.idempotence", "true"},
				{"acks", "all"},
				{"message.timeout.ms", "60000"}}));
	std::vector<Msg> msgs = {Simple(0, "k", "refused")};
	uint64_t t = MonoMs();
	ASSERT_EQ("", p.Send("mirror", &msgs, kTimeoutMs));
	EXPECT_EQ(RD_KAFKA_RESP_ERR_POLICY_VIOLATION, msgs[0].err)
		<< rd_kafka_err2str((rd_kafka_resp_err_t)msgs[0].err);
	EXPECT_LT(MonoMs() - t, 10000u) << "not a permanent error: retried";
	EXPECT_EQ(0, srv_.EndOffset(3));
	EXPECT_EQ(0, km_log_appended_offset(srv_.log(3)));
	EXPECT_EQ(0u, srv_.ProduceCalls(3));
	EXPECT_GE(srv_.Stats().produce_refused_mirror, 1u);
	// The same producer still writes a writable partition.
	std::vector<Msg> ok = {Simple(1, "k", "accepted")};
	ASSERT_EQ("", p.Send("alpha", &ok, kTimeoutMs));
	EXPECT_EQ(0, ok[0].err) << rd_kafka_err2str((rd_kafka_resp_err_t)ok[0].err);
}

} // namespace
