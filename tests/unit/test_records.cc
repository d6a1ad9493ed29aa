// Goal: records of uncompressed batches iterate exactly as built (keys,
// values, nulls, headers, offsets, timestamps, sequences), across segment
// breaks, and malformed records inside a CRC-valid batch get named errors.
// Method: batches from kmirror's builder; malformed ones are edited and
// re-checksummed so the record-level checks, not the CRC, must catch them;
// every single-byte edit of the records is held to the outcome an oracle
// (a flat-array decoder of the record layout, in this file) derives.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>

#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "kafka/records.h"
#include "sample.h"

namespace {

std::string Copy(const km_batch &b, km_chain_cur at, int32_t len)
{
	std::string s(len < 0 ? 0 : len, '\0');
	km_chain_copy(b.chain, at, s.data(), s.size());
	return s;
}

void Recrc(std::vector<uint8_t> &buf)
{
	km_store_be32(&buf[17],
		      km_crc32c_update(0, buf.data() + 21, buf.size() - 21));
}

std::vector<uint8_t> MixedBatch()
{
	static const char v1[] = "one", v2[] = "";
	static const km_record_header_spec hdrs[] = {
		{"trace", v1, 3}, {"empty", v2, 0}, {"null", nullptr, -1}};
	km_record_spec recs[3] = {};
	recs[0] = {"k0", 2, "value-0", 7, 1000, hdrs, 3};
	recs[1] = {nullptr, -1, nullptr, -1, 990, nullptr, 0}; // tombstone
	recs[2] = {"", 0, "v", 1, 1234, hdrs, 1};
	km_batch_spec spec = {50, 1, 0, 5000, 2, 17};
	std::vector<uint8_t> out(km_records_build_size(recs, 3));
	EXPECT_EQ((int)out.size(), km_records_build(out.data(), out.size(),
						      &spec, recs, 3));
	return out;
}

TEST(Records, IterateWhatWasBuilt)
{
	auto buf = MixedBatch();
	for (size_t cut : {0ul, 61ul, 63ul, 70ul, 90ul, buf.size() - 1}) {
		sample::Chain ch(buf, {cut});
		km_batch b;
		ASSERT_EQ((int)buf.size(), km_batch_parse(&b, &ch.chain,
			  km_chain_start(&ch.chain), KM_BATCH_BYTES_MAX));
		EXPECT_EQ(1234, km_batch_max_timestamp(&b));
		km_records_iter it;
		km_record r;
		ASSERT_EQ(0, km_records_begin(&it, &b));

		ASSERT_GT(km_records_next(&it, &r), 0);
		EXPECT_EQ(50, r.offset);
		EXPECT_EQ(1000, r.timestamp);
		EXPECT_EQ(17, r.sequence);
		EXPECT_EQ("k0", Copy(b, r.key, r.key_len));
		EXPECT_EQ("value-0", Copy(b, r.value, r.value_len));
		ASSERT_EQ(3, r.header_count);
		km_record_header h;
		ASSERT_EQ(0, km_record_header_get(&b, &r, 0, &h));
		EXPECT_EQ("trace", Copy(b, h.key, h.key_len));
		EXPECT_EQ("one", Copy(b, h.value, h.value_len));
		ASSERT_EQ(0, km_record_header_get(&b, &r, 2, &h));
		EXPECT_EQ("null", Copy(b, h.key, h.key_len));
		EXPECT_EQ(-1, h.value_len);

		ASSERT_GT(km_records_next(&it, &r), 0);
		EXPECT_EQ(51, r.offset);
		EXPECT_EQ(990, r.timestamp);
		EXPECT_EQ(18, r.sequence);
		EXPECT_EQ(-1, r.key_len);
		EXPECT_EQ(-1, r.value_len);
		EXPECT_EQ(0, r.header_count);

		ASSERT_GT(km_records_next(&it, &r), 0);
		EXPECT_EQ(52, r.offset);
		EXPECT_EQ(0, r.key_len);
		EXPECT_EQ("v", Copy(b, r.value, r.value_len));
		EXPECT_EQ(0, km_records_next(&it, &r)) << "end after 3";
	}
}

int IterateAll(std::vector<uint8_t> &buf)
{
	sample::Chain ch(buf, {buf.size() / 2});
	km_batch b;
	int rc = km_batch_parse(&b, &ch.chain, km_chain_start(&ch.chain),
				KM_BATCH_BYTES_MAX);
	if (rc <= 0)
		return rc == 0 ? -1 : rc;
	km_records_iter it;
	km_record r;
	if ((rc = km_records_begin(&it, &b)) < 0)
		return rc;
	while ((rc = km_records_next(&it, &r)) > 0)
		;
	return rc;
}

TEST(Records, CountMismatch)
{
	auto buf = MixedBatch();
	km_store_be32(&buf[57], 2); // one record left over
	Recrc(buf);
	EXPECT_EQ(KM_ERECCOUNT, IterateAll(buf));
	buf = MixedBatch();
	km_store_be32(&buf[57], 4); // one record missing
	Recrc(buf);
	EXPECT_EQ(KM_ERECCOUNT, IterateAll(buf));
}

TEST(Records, LengthOverrunsBatch)
{
	auto buf = MixedBatch();
	buf[61] = 0x7e; // first record claims 63 body bytes: its fields end
	Recrc(buf);     // well before, inside the batch, so the record is bad
	EXPECT_EQ(KM_ERECORD, IterateAll(buf));
	buf = MixedBatch();
	buf[61] = 0x01; // negative length (zigzag -1)
	Recrc(buf);
	EXPECT_EQ(KM_ERECORD, IterateAll(buf));
}

TEST(Records, BadVarint)
{
	auto buf = MixedBatch();
	// Timestamp delta of record 0 becomes an 11-byte varlong run.
	std::vector<uint8_t> run(11, 0xff);
	buf.insert(buf.begin() + 63, run.begin(), run.end());
	km_store_be32(&buf[8], (uint32_t)buf.size() - 12);
	buf[61] = (uint8_t)(buf[61] + 22); // body grows by 11 (zigzag * 2)
	Recrc(buf);
	EXPECT_EQ(KM_EVARINT, IterateAll(buf));
}

// The outcome the record layout itself gives the records area of buf
// (bytes 61 on, recordsCount from the header), written from Kafka's
// DefaultRecord.readFrom over a flat array and naming errors as records.h
// does: a varint longer than 5 (varlong 10) bytes, over 32 bits (a tenth
// byte over 1), or cut by the end of its record (the length: of the batch)
// is EVARINT; a length below -1 (-1 where null is not allowed), a length or
// header count the rest of the record cannot hold (a header takes at least 2
// bytes), a record shorter or longer than its fields is ERECORD; records
// ending before recordsCount or bytes after the last one is ERECCOUNT.
class RecordsOracle {
public:
	explicit RecordsOracle(const std::vector<uint8_t> &b) : b_(b) {}

	int Outcome()
	{
		int32_t left = (int32_t)km_load_be32(&b_[57]);
		size_t end = b_.size();
		int rc;

		pos_ = 61;
		for (; left > 0; left--) {
			int64_t len;

			if (pos_ == end)
				return KM_ERECCOUNT;
			if ((rc = Varint(end, 5, &len)) != 0)
				return rc;
			if (len < 0 || (size_t)len > end - pos_)
				return KM_ERECORD;
			if ((rc = Body(pos_ + (size_t)len)) != 0)
				return rc;
		}
		return pos_ == end ? 0 : KM_ERECCOUNT;
	}

private:
	int Varint(size_t lim, int max, int64_t *out)
	{
		uint64_t u = 0;

		for (int i = 0; i < max; i++) {
			if (pos_ == lim)
				return KM_EVARINT;
			uint8_t c = b_[pos_++];
			u |= (uint64_t)(c & 0x7f) << (7 * i);
			if ((c & 0x80) != 0)
				continue;
			if ((max == 5 && u > UINT32_MAX) || (i == 9 && c > 1))
				return KM_EVARINT;
			*out = max == 5 ? (int64_t)(int32_t)((uint32_t)(u >> 1) ^ -(uint32_t)(u & 1))
					: (int64_t)((u >> 1) ^ -(u & 1));
			return 0;
		}
		return KM_EVARINT;
	}
	int Bytes(size_t lim, bool nullable)
	{
		int64_t n;
		int rc = Varint(lim, 5, &n);

		if (rc != 0 || (n == -1 && nullable))
			return rc;
		if (n < 0 || (size_t)n > lim - pos_)
			return KM_ERECORD;
		pos_ += (size_t)n;
		return 0;
	}
	int Body(size_t lim)
	{
		int64_t v, headers;
		int rc;

		if (pos_ == lim)
			return KM_ERECORD; // no attributes byte
		pos_++;
		if ((rc = Varint(lim, 10, &v)) != 0 || // timestamp delta
		    (rc = Varint(lim, 5, &v)) != 0 ||  // offset delta
		    (rc = Bytes(lim, true)) != 0 ||    // key
		    (rc = Bytes(lim, true)) != 0 ||    // value
		    (rc = Varint(lim, 5, &headers)) != 0)
			return rc;
		if (headers < 0 || (size_t)headers > (lim - pos_) / 2)
			return KM_ERECORD;
		for (int64_t h = 0; h < headers; h++)
			if ((rc = Bytes(lim, false)) != 0 || (rc = Bytes(lim, true)) != 0)
				return rc;
		return pos_ == lim ? 0 : KM_ERECORD;
	}

	const std::vector<uint8_t> &b_;
	size_t pos_ = 0;
};

TEST(Records, EveryByteEditGetsTheLayoutsOutcome)
{
	// Any single-byte change in the records, re-checksummed, gets exactly
	// the outcome the oracle derives from the layout, and edits reach each
	// outcome but ERECCOUNT: one byte cannot end the records early or leave
	// bytes after them without breaking a record (CountMismatch has it).
	auto orig = MixedBatch();
	std::map<int, int> seen;

	ASSERT_EQ(0, RecordsOracle(orig).Outcome());
	for (size_t i = 61; i < orig.size(); i++) {
		for (int v : {0x00, 0x01, 0x02, 0x7e, 0x7f, 0x80, 0x8f, 0xff}) {
			auto buf = orig;
			buf[i] = (uint8_t)v;
			Recrc(buf);
			int want = RecordsOracle(buf).Outcome();
			int rc = IterateAll(buf);
			EXPECT_EQ(want, rc) << "byte " << i << " = " << v << ": "
					    << km_strerror(rc) << ", want "
					    << km_strerror(want);
			seen[want]++;
		}
	}
	for (int want : {0, (int)KM_ERECORD, (int)KM_EVARINT})
		EXPECT_GT(seen[want], 0) << km_strerror(want) << " never expected";
}

TEST(Records, CompressedNotIterated)
{
	auto buf = MixedBatch();
	km_store_be16(&buf[21], KM_CODEC_GZIP);
	Recrc(buf);
	EXPECT_EQ(KM_ECOMPRESSED, IterateAll(buf));
}

TEST(Records, BuilderRejectsBadSpecs)
{
	km_record_spec r = {nullptr, -2, nullptr, -1, 0, nullptr, 0};
	EXPECT_EQ(KM_ERECORD, km_records_build_size(&r, 1));
	km_record_spec ok = {"k", 1, "v", 1, 0, nullptr, 0};
	km_batch_spec spec = {0, 0, 0, -1, -1, -1};
	uint8_t small[40];
	EXPECT_EQ(KM_ENOSPACE, km_records_build(small, sizeof(small), &spec, &ok, 1));
}

} // namespace
