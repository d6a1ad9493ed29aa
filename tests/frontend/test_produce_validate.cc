// Goal: a Produce batch whose header disagrees with its records - though
// its CRC is right - is answered INVALID_RECORD (87) for its partition and
// writes nothing: lastOffsetDelta 1, 1000 or 2^31 - 1 over one record,
// recordsCount 0, 2 or 3 over one record, 1 over two, offset deltas out of
// order, a record length that lies, a compressed stream that is corrupt or
// a decompression bomb. The log end does not move, no segment appears, the
// connection stays up, and a correct Produce on it right after succeeds;
// the other partitions of the same request are written. Real producers'
// batches in every codec still pass.
// Method: fe_harness.h's server with writable partitions; batches built
// with kafka/records.h's builder, then their header or record bytes
// changed and the CRC recomputed; sent as raw Produce v7 frames over one
// blocking connection (fe_raw.h), every read bounded by a deadline; the
// log end read on the owner thread and the partition directory listed.
// librdkafka producers with compression.codec gzip, snappy, lz4 and zstd.
#include <gtest/gtest.h>

#include <dirent.h>
#include <librdkafka/rdkafka.h>
#include <zlib.h>

#include <climits>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "fe_harness.h"
#include "fe_raw.h"
#include "kafka/batch.h"
#include "kafka/proto.h"
#include "kafka/records.h"

namespace {

using fetest::Bytes;
using fetest::PartSpec;
using fetest::ProducePart;
using fetest::ProduceReq;
using fetest::Resp;

const std::vector<PartSpec> kParts = {
	{"local", 0, true}, {"local", 1, true}, {"mirror", 0, false},
};
constexpr int kTimeoutMs = 30000;

// n records, null keys, values of value_bytes: with 16-byte values every
// record is 23 bytes (length 22 in one varint byte) and record i's
// offsetDelta is its 4th byte (length, attributes, timestampDelta i).
Bytes Batch(int n, size_t value_bytes = 16)
{
	std::vector<std::string> vals(n);
	for (int i = 0; i < n; i++)
		vals[i] = fetest::RandomBytes(value_bytes, (uint64_t)i + 7);
	return fetest::PlainBatch(vals);
}

constexpr size_t kRecordBytes = 23;

void Recrc(Bytes *b)
{
	km_store_be32(&(*b)[KM_BATCH_OFF_CRC],
		      km_crc32c_update(0, &(*b)[KM_BATCH_OFF_ATTRIBUTES],
				       b->size() - KM_BATCH_OFF_ATTRIBUTES));
}

// b with lastOffsetDelta and recordsCount set, and a valid CRC.
Bytes WithHeader(Bytes b, int32_t last_offset_delta, int32_t count)
{
	km_store_be32(&b[KM_BATCH_OFF_LAST_OFFSET_DELTA],
		      (uint32_t)last_offset_delta);
	km_store_be32(&b[KM_BATCH_OFF_RECORDS_COUNT], (uint32_t)count);
	Recrc(&b);
	return b;
}

// b's records gzip'ed (codec 1) into a batch with the same header.
Bytes Gzipped(const Bytes &b, const Bytes *plain = nullptr)
{
	Bytes in = plain ? *plain : Bytes(b.begin() + KM_BATCH_HEADER_BYTES,
					  b.end());
	uLongf n = compressBound(in.size()) + 64;
	Bytes out(b.begin(), b.begin() + KM_BATCH_HEADER_BYTES);
	z_stream s = {};
	EXPECT_EQ(Z_OK, deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8,
				     Z_DEFAULT_STRATEGY));
	out.resize(KM_BATCH_HEADER_BYTES + n);
	s.next_in = (Bytef *)in.data();
	s.avail_in = (uInt)in.size();
	s.next_out = out.data() + KM_BATCH_HEADER_BYTES;
	s.avail_out = (uInt)n;
	EXPECT_EQ(Z_STREAM_END, deflate(&s, Z_FINISH));
	out.resize(KM_BATCH_HEADER_BYTES + s.total_out);
	deflateEnd(&s);
	km_store_be32(&out[KM_BATCH_OFF_LENGTH], (uint32_t)(out.size() - 12));
	km_store_be16(&out[KM_BATCH_OFF_ATTRIBUTES], KM_CODEC_GZIP);
	Recrc(&out);
	return out;
}

class ProduceValidate : public fetest::RawOn<&kParts> {
protected:
	// One Produce v7 naming parts; each partition's error code, in order.
	std::vector<int16_t> Produce(const std::vector<ProducePart> &parts,
				     int16_t acks = 1,
				     std::vector<int64_t> *bases = nullptr)
	{
		Resp x;
		km_proto_topic t[4];
		km_produce_resp_part ps[4];
		km_produce_resp m = {t, 4, 0, ps, 4, 0, 0};
		std::vector<int16_t> errs;
		RoundTrip(ProduceReq(++corr_, 7, acks, parts), KM_API_PRODUCE,
			  7, &x);
		EXPECT_EQ(corr_, x.corr);
		EXPECT_EQ(0, km_produce_resp_decode(&x.r, 7, &m));
		for (uint32_t i = 0; i < m.n_parts; i++) {
			errs.push_back(ps[i].error_code);
			if (bases != nullptr)
				bases->push_back(ps[i].base_offset);
		}
		return errs;
	}
	int16_t ProduceOne(int32_t partition, const Bytes &b, int16_t acks = 1,
			   int64_t *base = nullptr)
	{
		std::vector<int64_t> bases;
		std::vector<int16_t> e =
			Produce({{"local", partition, &b}}, acks, &bases);
		EXPECT_EQ(1u, e.size());
		if (base != nullptr && !bases.empty())
			*base = bases[0];
		return e.empty() ? -999 : e[0];
	}
	// Segment files (.log) in partition i's directory.
	size_t Segments(size_t i)
	{
		size_t n = 0;
		DIR *d = opendir(km_log_dir(srv_.log(i)));
		EXPECT_NE(nullptr, d);
		for (dirent *e; d != nullptr && (e = readdir(d)) != nullptr;) {
			std::string name = e->d_name;
			n += name.size() > 4 &&
			     name.compare(name.size() - 4, 4, ".log") == 0;
		}
		if (d != nullptr)
			closedir(d);
		return n;
	}
	// b is refused with INVALID_RECORD, writing nothing; a correct batch
	// right after, on the same connection, is appended at the old end.
	void ExpectRefused(const Bytes &b, int16_t acks = 1)
	{
		int64_t end = srv_.EndOffset(0);
		size_t segs = Segments(0);
		EXPECT_EQ(KM_KERR_INVALID_RECORD, ProduceOne(0, b, acks));
		EXPECT_EQ(end, srv_.EndOffset(0)) << "the log end moved";
		EXPECT_EQ(segs, Segments(0)) << "a segment was rolled";
		int64_t base = -1;
		EXPECT_EQ(KM_KERR_NONE, ProduceOne(0, Batch(2), acks, &base));
		EXPECT_EQ(end, base);
		EXPECT_EQ(end + 2, srv_.EndOffset(0));
	}
	int32_t corr_ = 0;
};

TEST_F(ProduceValidate, LastOffsetDeltaPastTheRecordsIsRefused)
{
	for (int32_t delta : {1, 1000, INT32_MAX}) {
		SCOPED_TRACE(delta);
		ASSERT_NO_FATAL_FAILURE(ExpectRefused(WithHeader(Batch(1), delta, 1)));
		ASSERT_NO_FATAL_FAILURE(
			ExpectRefused(WithHeader(Batch(5, 300), delta, 5)));
	}
	// The same, durable acks, and compressed.
	ASSERT_NO_FATAL_FAILURE(ExpectRefused(WithHeader(Batch(1), 1000, 1), -1));
	ASSERT_NO_FATAL_FAILURE(
		ExpectRefused(Gzipped(WithHeader(Batch(3), 1000, 3))));
}

TEST_F(ProduceValidate, RecordsCountThatDisagreesIsRefused)
{
	const struct {
		int records, delta, count;
	} cases[] = {
		{1, 0, 0}, {1, 1, 2}, {1, 0, 2}, {1, 2, 3}, {1, 0, 3},
		{2, 0, 1}, {2, 1, 1}, {50, 48, 49}, {3, 9, 10},
	};
	for (const auto &c : cases) {
		SCOPED_TRACE(std::to_string(c.count) + " over " +
			     std::to_string(c.records));
		Bytes b = WithHeader(Batch(c.records), c.delta, c.count);
		ASSERT_NO_FATAL_FAILURE(ExpectRefused(b));
		ASSERT_NO_FATAL_FAILURE(ExpectRefused(Gzipped(b)));
	}
}

TEST_F(ProduceValidate, RecordsThatLieAboutThemselvesAreRefused)
{
	Bytes order = Batch(3), length = Batch(2), under = Batch(2);
	// Record 1's offsetDelta 1 (zigzag 2) -> 2 (zigzag 4).
	ASSERT_EQ(2, order[KM_BATCH_HEADER_BYTES + kRecordBytes + 3]);
	order[KM_BATCH_HEADER_BYTES + kRecordBytes + 3] = 4;
	Recrc(&order);
	// Record 0's length 22 (zigzag 44) -> 23 and 21.
	ASSERT_EQ(44, length[KM_BATCH_HEADER_BYTES]);
	length[KM_BATCH_HEADER_BYTES] = 46;
	Recrc(&length);
	under[KM_BATCH_HEADER_BYTES] = 42;
	Recrc(&under);
	for (const Bytes *b : {&order, &length, &under}) {
		ASSERT_NO_FATAL_FAILURE(ExpectRefused(*b));
		ASSERT_NO_FATAL_FAILURE(ExpectRefused(Gzipped(*b)));
	}
}

TEST_F(ProduceValidate, CorruptStreamsAndBombsAreRefused)
{
	Bytes good = Gzipped(Batch(4));
	Bytes corrupt = good;
	corrupt[corrupt.size() - 5] ^= 0xFF; /* in the gzip trailer's CRC */
	Recrc(&corrupt);
	// Zeros past the decompression limit: ~40 KiB on the wire.
	Bytes zeros(KM_INFLATE_BYTES_MAX + (1u << 20));
	Bytes bomb = Gzipped(Batch(1), &zeros);
	ASSERT_LT(bomb.size(), 1u << 20);
	ASSERT_NO_FATAL_FAILURE(ExpectRefused(corrupt));
	ASSERT_NO_FATAL_FAILURE(ExpectRefused(bomb));
	EXPECT_EQ(KM_KERR_NONE, ProduceOne(0, good));
}

// One bad partition in a request does not fail the others.
TEST_F(ProduceValidate, OnlyTheBadPartitionIsRefused)
{
	Bytes bad = WithHeader(Batch(1), INT32_MAX, 1), good = Batch(3);
	std::vector<int64_t> bases;
	std::vector<int16_t> e = Produce(
		{{"local", 0, &bad}, {"local", 1, &good}}, -1, &bases);
	ASSERT_EQ(2u, e.size());
	EXPECT_EQ(KM_KERR_INVALID_RECORD, e[0]);
	EXPECT_EQ(KM_KERR_NONE, e[1]);
	EXPECT_EQ(0, srv_.EndOffset(0));
	EXPECT_EQ(3, srv_.EndOffset(1));
}

// The report's numbers: twenty 70-byte Produces of lastOffsetDelta 2^31-1
// once moved the log end to 42949672960 and left 20 segments.
TEST_F(ProduceValidate, TwentyHostileProducesLeaveTheLogAlone)
{
	Bytes b = WithHeader(Batch(1, 8), INT32_MAX, 1);
	size_t segs = Segments(0);
	for (int i = 0; i < 20; i++)
		EXPECT_EQ(KM_KERR_INVALID_RECORD, ProduceOne(0, b)) << i;
	EXPECT_EQ(0, srv_.EndOffset(0));
	EXPECT_EQ(segs, Segments(0));
	EXPECT_GE(srv_.Stats().partition_errors, 20u);
	EXPECT_EQ(KM_KERR_NONE, ProduceOne(0, Batch(1)));
	EXPECT_EQ(1, srv_.EndOffset(0));
}

// No false refusals: what librdkafka writes in every codec passes.
TEST_F(ProduceValidate, RealProducersPassInEveryCodec)
{
	int64_t want = 0;
	for (const char *codec : {"none", "gzip", "snappy", "lz4", "zstd"}) {
		SCOPED_TRACE(codec);
		fetest::Producer p;
		ASSERT_EQ("", p.Create(srv_.bootstrap(),
				       {{"enable.idempotence", "true"},
					{"acks", "all"},
					{"linger.ms", "20"},
					{"compression.codec", codec},
					{"message.timeout.ms", "20000"}}));
		std::vector<fetest::Msg> msgs(200);
		for (size_t i = 0; i < msgs.size(); i++) {
			msgs[i].partition = 1;
			msgs[i].key_null = i % 3 == 0;
			msgs[i].key = "key-" + std::to_string(i);
			msgs[i].value_null = false;
			msgs[i].value = std::string(100 + i, (char)('a' + i % 26));
		}
		ASSERT_EQ("", p.Send("local", &msgs, kTimeoutMs));
		for (const fetest::Msg &m : msgs)
			ASSERT_EQ(0, m.err) << rd_kafka_err2str(
				(rd_kafka_resp_err_t)m.err);
		want += (int64_t)msgs.size();
		EXPECT_EQ(want, srv_.EndOffset(1));
	}
}

} // namespace
