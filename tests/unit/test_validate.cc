// Goal: km_validate_batch() accepts what real producers write and refuses,
// each with its own code, a batch whose header disagrees with its records:
// lastOffsetDelta != recordsCount - 1 (1000, 2^31 - 1), recordsCount 0 or 3
// over one record, 1 over two, offset deltas out of order, a record length
// that overruns or underruns its fields, bytes left after the records, a
// producer id without a sequence - uncompressed and in every codec - and,
// for compressed batches, corrupt, truncated or trailing streams and
// decompression bombs.
// Method: records encoded here field by field (so any field can lie), put
// in a batch with a correct CRC, compressed with the libraries kmirror
// links (zlib, snappy, liblz4, libzstd) in every framing Kafka and
// librdkafka write; the verdict and the reason text are checked.
#include <gtest/gtest.h>

#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "common/varint.h"
#include "kafka/batch.h"
#include "kafka/inflate.h"
#include "kafka/validate.h"
#include "sample.h"

namespace {

using Bytes = std::vector<uint8_t>;

// ---- records and batches, field by field ----

struct Rec {
	int32_t offset_delta;
	std::string value = std::string(24, 'v');
	int length_adjust = 0; /* added to the true length varint */
};

void PutVarint(Bytes *b, int32_t v)
{
	uint8_t tmp[KM_VARINT_BYTES_MAX];
	int n = km_varint_encode_s32(tmp, v);
	b->insert(b->end(), tmp, tmp + n);
}

void PutVarlong(Bytes *b, int64_t v)
{
	uint8_t tmp[KM_VARLONG_BYTES_MAX];
	int n = km_varint_encode_s64(tmp, v);
	b->insert(b->end(), tmp, tmp + n);
}

// DefaultRecord.writeTo: length, attributes, timestampDelta, offsetDelta,
// key (here "k<delta>"), value, one header.
Bytes EncodeRecord(const Rec &r)
{
	Bytes body = {0};
	std::string key = "k" + std::to_string(r.offset_delta);
	PutVarlong(&body, r.offset_delta);
	PutVarint(&body, r.offset_delta);
	PutVarint(&body, (int32_t)key.size());
	body.insert(body.end(), key.begin(), key.end());
	PutVarint(&body, (int32_t)r.value.size());
	body.insert(body.end(), r.value.begin(), r.value.end());
	PutVarint(&body, 1);
	PutVarint(&body, 1);
	body.push_back('h');
	PutVarint(&body, -1);
	Bytes out;
	PutVarint(&out, (int32_t)body.size() + r.length_adjust);
	out.insert(out.end(), body.begin(), body.end());
	return out;
}

// n well-formed records, offsets 0..n-1, values of value_bytes.
std::vector<Rec> Recs(int n, size_t value_bytes = 24)
{
	std::vector<Rec> v;
	for (int i = 0; i < n; i++) {
		Rec r = {i, std::string(value_bytes, (char)('a' + i % 26))};
		v.push_back(r);
	}
	return v;
}

Bytes EncodeRecords(const std::vector<Rec> &recs)
{
	Bytes out;
	for (const Rec &r : recs) {
		Bytes b = EncodeRecord(r);
		out.insert(out.end(), b.begin(), b.end());
	}
	return out;
}

struct Hdr {
	int32_t last_offset_delta;
	int32_t count;
	int64_t pid = -1;
	int32_t base_sequence = -1;
};

Hdr Consistent(int n)
{
	return {n - 1, n};
}

// A batch of section (records, compressed as codec says) with a valid CRC.
Bytes MakeBatch(const Hdr &h, int codec, const Bytes &section)
{
	Bytes b(KM_BATCH_HEADER_BYTES);
	b.insert(b.end(), section.begin(), section.end());
	km_store_be64(&b[KM_BATCH_OFF_BASE_OFFSET], 0);
	km_store_be32(&b[KM_BATCH_OFF_LENGTH], (uint32_t)(b.size() - 12));
	km_store_be32(&b[KM_BATCH_OFF_LEADER_EPOCH], (uint32_t)-1);
	b[KM_BATCH_OFF_MAGIC] = KM_BATCH_MAGIC;
	km_store_be16(&b[KM_BATCH_OFF_ATTRIBUTES], (uint16_t)codec);
	km_store_be32(&b[KM_BATCH_OFF_LAST_OFFSET_DELTA],
		      (uint32_t)h.last_offset_delta);
	km_store_be64(&b[KM_BATCH_OFF_BASE_TIMESTAMP], 1700000000000ULL);
	km_store_be64(&b[KM_BATCH_OFF_MAX_TIMESTAMP], 1700000000000ULL);
	km_store_be64(&b[KM_BATCH_OFF_PRODUCER_ID], (uint64_t)h.pid);
	km_store_be16(&b[KM_BATCH_OFF_PRODUCER_EPOCH], h.pid < 0 ? 0xFFFF : 0);
	km_store_be32(&b[KM_BATCH_OFF_BASE_SEQUENCE], (uint32_t)h.base_sequence);
	km_store_be32(&b[KM_BATCH_OFF_RECORDS_COUNT], (uint32_t)h.count);
	km_store_be32(&b[KM_BATCH_OFF_CRC],
		      km_crc32c_update(0, &b[KM_BATCH_OFF_ATTRIBUTES],
				       b.size() - KM_BATCH_OFF_ATTRIBUTES));
	return b;
}

// ---- compression, in the framings producers write ----

Bytes Gzip(const Bytes &in)
{
	z_stream s = {};
	EXPECT_EQ(Z_OK, deflateInit2(&s, 6, Z_DEFLATED, 16 + MAX_WBITS, 8,
				     Z_DEFAULT_STRATEGY));
	Bytes out(deflateBound(&s, in.size()) + 32);
	s.next_in = (Bytef *)in.data();
	s.avail_in = (uInt)in.size();
	s.next_out = out.data();
	s.avail_out = (uInt)out.size();
	EXPECT_EQ(Z_STREAM_END, deflate(&s, Z_FINISH));
	out.resize(s.total_out);
	deflateEnd(&s);
	return out;
}

Bytes SnappyRaw(const Bytes &in)
{
	size_t n = snappy_max_compressed_length(in.size());
	Bytes out(n);
	EXPECT_EQ(SNAPPY_OK, snappy_compress((const char *)in.data(), in.size(),
					     (char *)out.data(), &n));
	out.resize(n);
	return out;
}

// xerial's SnappyOutputStream: magic, version 1, compatible 1, then
// length-prefixed blocks (32 KiB of input each, as Kafka's Java client).
Bytes SnappyXerial(const Bytes &in)
{
	Bytes out = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1,
		     0, 0, 0, 1};
	for (size_t off = 0; off < in.size(); off += 32768) {
		Bytes part(in.begin() + off,
			   in.begin() + std::min(in.size(), off + 32768));
		Bytes c = SnappyRaw(part);
		uint8_t len[4];
		km_store_be32(len, (uint32_t)c.size());
		out.insert(out.end(), len, len + 4);
		out.insert(out.end(), c.begin(), c.end());
	}
	return out;
}

Bytes Lz4With(const Bytes &in, const LZ4F_preferences_t &prefs)
{
	Bytes out(LZ4F_compressFrameBound(in.size(), &prefs));
	size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(),
				      in.size(), &prefs);
	EXPECT_FALSE(LZ4F_isError(n)) << LZ4F_getErrorName(n);
	out.resize(n);
	return out;
}

// LZ4F's defaults: 64 KiB linked blocks, no checksums (librdkafka's).
Bytes Lz4(const Bytes &in)
{
	LZ4F_preferences_t p = {};
	return Lz4With(in, p);
}

// Kafka's Java stream: independent blocks; plus every optional field.
Bytes Lz4Independent(const Bytes &in)
{
	LZ4F_preferences_t p = {};
	p.frameInfo.blockMode = LZ4F_blockIndependent;
	p.frameInfo.blockSizeID = LZ4F_max256KB;
	p.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
	p.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
	p.frameInfo.contentSize = in.size();
	return Lz4With(in, p);
}

Bytes Zstd(const Bytes &in)
{
	Bytes out(ZSTD_compressBound(in.size()));
	size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
	EXPECT_FALSE(ZSTD_isError(n));
	out.resize(n);
	return out;
}

struct Codec {
	const char *name;
	int id;
	std::function<Bytes(const Bytes &)> compress;
};

const Codec kCodecs[] = {
	{"none", KM_CODEC_NONE, [](const Bytes &b) { return b; }},
	{"gzip", KM_CODEC_GZIP, Gzip},
	{"snappy_raw", KM_CODEC_SNAPPY, SnappyRaw},
	{"snappy_xerial", KM_CODEC_SNAPPY, SnappyXerial},
	{"lz4_linked", KM_CODEC_LZ4, Lz4},
	{"lz4_independent", KM_CODEC_LZ4, Lz4Independent},
	{"zstd", KM_CODEC_ZSTD, Zstd},
};

// ---- the fixture: one decompressor, verdicts over one-segment chains ----

class Validate : public ::testing::TestWithParam<Codec> {
protected:
	void SetUp() override
	{
		ASSERT_EQ(0, km_inflate_create(KM_INFLATE_BYTES_MAX, &z_));
	}
	void TearDown() override { km_inflate_destroy(z_); }

	// The verdict on batch b; why_ holds the reason.
	int Check(Bytes &b, km_inflate *z)
	{
		iovec v = {b.data(), b.size()};
		km_chain ch = {&v, 1};
		km_batch batch;
		why_[0] = '\0';
		int n = km_batch_parse(&batch, &ch, km_chain_start(&ch),
				       KM_BATCH_BYTES_MAX);
		EXPECT_EQ((int)b.size(), n) << km_strerror(n);
		if (n <= 0)
			return n;
		return km_validate_batch(&batch, z, why_, sizeof(why_));
	}
	int Check(Bytes &&b) { return Check(b, z_); }
	// A batch of recs under header h in this test's codec.
	Bytes Make(const Hdr &h, const std::vector<Rec> &recs)
	{
		return MakeBatch(h, GetParam().id,
				 GetParam().compress(EncodeRecords(recs)));
	}
	Bytes MakeRaw(const Hdr &h, const Bytes &plain)
	{
		return MakeBatch(h, GetParam().id, GetParam().compress(plain));
	}
	km_inflate *z_ = nullptr;
	char why_[256];
};

TEST_P(Validate, WellFormedBatchesPass)
{
	for (int n : {1, 2, 7, 300}) {
		SCOPED_TRACE(n);
		// 300 records of 400 bytes: several lz4 and snappy blocks.
		EXPECT_EQ(0, Check(Make(Consistent(n), Recs(n, n > 100 ? 400 : 24))))
			<< why_;
	}
	Hdr idem = Consistent(3);
	idem.pid = 42;
	idem.base_sequence = 0;
	EXPECT_EQ(0, Check(Make(idem, Recs(3)))) << why_;
	// The tree's own builder (null keys, headers) as one more producer.
	Bytes built = sample::DataBatch(0, -1, 5);
	Bytes section(built.begin() + KM_BATCH_HEADER_BYTES, built.end());
	EXPECT_EQ(0, Check(MakeRaw(Consistent(5), section))) << why_;
}

TEST_P(Validate, LastOffsetDeltaMustBeCountMinusOne)
{
	for (int32_t delta : {1, 1000, INT32_MAX}) {
		SCOPED_TRACE(delta);
		EXPECT_EQ(KM_EBATCHCOUNT, Check(Make({delta, 1}, Recs(1))));
		EXPECT_NE(nullptr, strstr(why_, "Inconsistent batch offset range"))
			<< why_;
	}
	// Two records that say they are 1001.
	EXPECT_EQ(KM_EBATCHCOUNT, Check(Make({1000, 2}, Recs(2))));
	// Negative deltas never get past the framing (km_batch_parse).
}

TEST_P(Validate, RecordsCountMustMatchTheRecords)
{
	// 0 records claimed: LogValidator's "Invalid reported count".
	EXPECT_EQ(KM_EBATCHCOUNT, Check(Make({0, 0}, Recs(1))));
	EXPECT_NE(nullptr, strstr(why_, "Invalid reported count")) << why_;
	// 3 over 1, with the header's two fields disagreeing.
	EXPECT_EQ(KM_EBATCHCOUNT, Check(Make({0, 3}, Recs(1))));
	// 3 over 1 and 2 over 1, the header consistent: the walk runs short.
	EXPECT_EQ(KM_ERECCOUNT, Check(Make({2, 3}, Recs(1))));
	EXPECT_NE(nullptr, strstr(why_, "holds only 1")) << why_;
	EXPECT_EQ(KM_ERECCOUNT, Check(Make({1, 2}, Recs(1))));
	// 1 over 2: the second record is left over.
	EXPECT_EQ(KM_ERECCOUNT, Check(Make({0, 1}, Recs(2))));
	EXPECT_NE(nullptr, strstr(why_, "records still remaining")) << why_;
	// 2 over 5.
	EXPECT_EQ(KM_ERECCOUNT, Check(Make({1, 2}, Recs(5))));
}

TEST_P(Validate, OffsetDeltasMustRunFromZero)
{
	std::vector<Rec> skip = Recs(2), swap = Recs(2), late = Recs(1);
	skip[1].offset_delta = 2;
	swap[0].offset_delta = 1;
	swap[1].offset_delta = 0;
	late[0].offset_delta = 5;
	EXPECT_EQ(KM_ERECOFFSET, Check(Make(Consistent(2), skip)));
	EXPECT_NE(nullptr, strstr(why_, "record 1 has offsetDelta 2")) << why_;
	EXPECT_EQ(KM_ERECOFFSET, Check(Make(Consistent(2), swap)));
	EXPECT_EQ(KM_ERECOFFSET, Check(Make(Consistent(1), late)));
}

TEST_P(Validate, RecordLengthMustFillTheRecordExactly)
{
	// Overrun: bytes left in the record after its fields ("Invalid
	// record size"). Underrun: the record ends inside a field - its last
	// varint (the header's value length), or the value.
	const struct {
		int adjust, code;
	} cases[] = {
		{1, KM_ERECORD}, {3, KM_ERECORD}, {-1, KM_EVARINT},
		{-20, KM_ERECORD},
	};
	for (const auto &c : cases) {
		SCOPED_TRACE(c.adjust);
		std::vector<Rec> first = Recs(2), last = Recs(2);
		first[0].length_adjust = c.adjust;
		last[1].length_adjust = c.adjust;
		EXPECT_EQ(c.code, Check(Make(Consistent(2), first))) << why_;
		EXPECT_EQ(c.code, Check(Make(Consistent(2), last))) << why_;
	}
	// A length far past the batch.
	std::vector<Rec> huge = Recs(1);
	huge[0].length_adjust = 100000;
	EXPECT_EQ(KM_ERECORD, Check(Make(Consistent(1), huge)));
}

TEST_P(Validate, BytesAfterTheLastRecordAreRefused)
{
	Bytes plain = EncodeRecords(Recs(2));
	plain.push_back(0);
	EXPECT_EQ(KM_ERECCOUNT, Check(MakeRaw(Consistent(2), plain)));
	plain.insert(plain.end(), 200, 'x');
	EXPECT_EQ(KM_ERECCOUNT, Check(MakeRaw(Consistent(2), plain)));
}

TEST_P(Validate, AProducerIdNeedsASequence)
{
	Hdr h = Consistent(1);
	h.pid = 7;
	EXPECT_EQ(KM_EBATCHHDR, Check(Make(h, Recs(1))));
	EXPECT_NE(nullptr, strstr(why_, "Invalid sequence number -1")) << why_;
	h.base_sequence = 0;
	EXPECT_EQ(0, Check(Make(h, Recs(1)))) << why_;
}

INSTANTIATE_TEST_SUITE_P(Codecs, Validate, ::testing::ValuesIn(kCodecs),
			 [](const ::testing::TestParamInfo<Codec> &i) {
				 return std::string(i.param.name);
			 });

// ---- compressed streams themselves ----

class Compressed : public Validate {};

TEST_P(Compressed, CorruptTruncatedOrTrailingStreamsAreRefused)
{
	Bytes plain = EncodeRecords(Recs(20, 100));
	Bytes c = GetParam().compress(plain);
	Bytes flipped = c, cut(c.begin(), c.end() - c.size() / 3),
	      trailing = c;
	for (size_t i = c.size() / 4; i < c.size() / 2; i++)
		flipped[i] ^= 0x5A;
	trailing.insert(trailing.end(), {1, 2, 3, 4, 5, 6, 7, 8, 9});
	for (const Bytes *s : {&flipped, &cut, &trailing}) {
		int rc = Check(MakeBatch(Consistent(20), GetParam().id, *s));
		// A flip may still decode, into records that then fail.
		EXPECT_TRUE(rc == KM_EINFLATE || rc == KM_ERECORD ||
			    rc == KM_EVARINT || rc == KM_ERECCOUNT ||
			    rc == KM_ERECOFFSET)
			<< km_strerror(rc) << ": " << why_;
	}
	EXPECT_EQ(KM_EINFLATE,
		  Check(MakeBatch(Consistent(20), GetParam().id, cut)));
	EXPECT_EQ(KM_EINFLATE,
		  Check(MakeBatch(Consistent(20), GetParam().id, trailing)));
	EXPECT_EQ(KM_EINFLATE,
		  Check(MakeBatch(Consistent(20), GetParam().id, Bytes())));
	EXPECT_NE(nullptr, strstr(why_, "do not decompress")) << why_;
}

TEST_P(Compressed, BombsAreRefusedAtTheLimit)
{
	km_inflate *small;
	ASSERT_EQ(0, km_inflate_create(4096, &small));
	Bytes plain = EncodeRecords(Recs(40, 200)); /* ~9 KiB */
	Bytes b = MakeBatch(Consistent(40), GetParam().id,
			    GetParam().compress(plain));
	EXPECT_EQ(KM_EINFLATEMAX, Check(b, small));
	EXPECT_NE(nullptr, strstr(why_, "more than 4096 bytes")) << why_;
	EXPECT_EQ(0, Check(b, z_)) << why_;
	// 64 MiB of zeros, a few KiB compressed, against the default limit.
	Bytes zeros(64u << 20);
	Bytes bomb = MakeBatch(Consistent(1), GetParam().id,
			       GetParam().compress(zeros));
	EXPECT_LT(bomb.size(), 4u << 20);
	EXPECT_EQ(KM_EINFLATEMAX, Check(bomb, z_)) << why_;
	// The scratch is reusable after a refusal.
	EXPECT_EQ(0, Check(b, z_)) << why_;
	km_inflate_destroy(small);
}

TEST_P(Compressed, NeedsADecompressor)
{
	Bytes b = Make(Consistent(1), Recs(1));
	EXPECT_EQ(-EINVAL, Check(b, nullptr));
}

INSTANTIATE_TEST_SUITE_P(Codecs, Compressed,
			 ::testing::ValuesIn(kCodecs + 1, std::end(kCodecs)),
			 [](const ::testing::TestParamInfo<Codec> &i) {
				 return std::string(i.param.name);
			 });

// ---- framings one codec call does not write ----

class Framing : public ::testing::Test {
protected:
	void SetUp() override
	{
		ASSERT_EQ(0, km_inflate_create(KM_INFLATE_BYTES_MAX, &z_));
	}
	void TearDown() override { km_inflate_destroy(z_); }
	int Check(int codec, const Bytes &section, int n)
	{
		Bytes b = MakeBatch(Consistent(n), codec, section);
		iovec v = {b.data(), b.size()};
		km_chain ch = {&v, 1};
		km_batch batch;
		EXPECT_GT(km_batch_parse(&batch, &ch, km_chain_start(&ch),
					 KM_BATCH_BYTES_MAX), 0);
		return km_validate_batch(&batch, z_, why_, sizeof(why_));
	}
	km_inflate *z_ = nullptr;
	char why_[256];
};

Bytes Cat(const Bytes &a, const Bytes &b)
{
	Bytes out = a;
	out.insert(out.end(), b.begin(), b.end());
	return out;
}

TEST_F(Framing, StreamsBackToBackAreOneRecordsSection)
{
	Bytes one = EncodeRecords({Rec{0}}), two = EncodeRecords({Rec{1}});
	EXPECT_EQ(0, Check(KM_CODEC_GZIP, Cat(Gzip(one), Gzip(two)), 2)) << why_;
	EXPECT_EQ(0, Check(KM_CODEC_ZSTD, Cat(Zstd(one), Zstd(two)), 2)) << why_;
	EXPECT_EQ(0, Check(KM_CODEC_LZ4, Cat(Lz4(one), Lz4Independent(two)), 2))
		<< why_;
	// A skippable frame (magic 0x184D2A5x, LE size) between the two.
	Bytes skip = {0x53, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 'a', 'b', 'c'};
	EXPECT_EQ(0, Check(KM_CODEC_LZ4, Cat(Cat(Lz4(one), skip), Lz4(two)), 2))
		<< why_;
}

TEST_F(Framing, UnknownCodecsAndLz4DictionariesAreRefused)
{
	Bytes plain = EncodeRecords(Recs(1));
	EXPECT_EQ(KM_EINFLATE, Check(5, plain, 1));
	EXPECT_EQ(KM_EINFLATE, Check(7, plain, 1));
	Bytes lz = Lz4(plain);
	lz[4] |= 0x01; /* FLG: a dictionary id follows */
	EXPECT_EQ(KM_EINFLATE, Check(KM_CODEC_LZ4, lz, 1));
	lz = Lz4Independent(plain);
	lz[12] ^= 0x01; /* the content size (at 6..13) disagrees */
	EXPECT_EQ(KM_EINFLATE, Check(KM_CODEC_LZ4, lz, 1));
}

TEST_F(Framing, UncompressedRecordsAcrossSegmentsAreWalked)
{
	Bytes b = MakeBatch(Consistent(4), KM_CODEC_NONE, EncodeRecords(Recs(4)));
	Bytes bad = MakeBatch({3, 4}, KM_CODEC_NONE, EncodeRecords(Recs(3)));
	for (Bytes *x : {&b, &bad}) {
		sample::Chain c(*x, {5, 61, 70, 71, 100});
		km_batch batch;
		ASSERT_GT(km_batch_parse(&batch, &c.chain,
					 km_chain_start(&c.chain),
					 KM_BATCH_BYTES_MAX), 0);
		EXPECT_EQ(x == &b ? 0 : KM_ERECCOUNT,
			  km_validate_batch(&batch, nullptr, nullptr, 0));
	}
}

} // namespace
