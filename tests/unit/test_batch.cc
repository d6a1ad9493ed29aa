// Goal: km_batch_parse frames and validates RecordBatch v2 over buffer chains
// in the documented order, never reads out of bounds, and km_batch_map_pid
// applies R1 in place with a CRC that stays valid.
// Method: batches built by kmirror's builder, parsed whole and split at every
// byte; every truncation point and every single-bit flip checked against the
// error the rule order predicts (run under ASan/UBSan by ./kmirror test).
// km_batch_verify_map (the contiguous entry point): over random batches and
// producer ids (-1, 0, INT64_MAX and random ones of both signs) its patched
// CRC equals a full recompute and the id is km_pid_map's; every single-bit
// flip gets km_batch_parse's exact code and leaves the bytes as they came.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>

#include "common/crc32c.h"
#include "common/endian.h"
#include "common/errors.h"
#include "common/km_limits.h"
#include "kafka/batch.h"
#include "sample.h"

namespace {

const uint32_t kMax = KM_BATCH_BYTES_MAX;

int Parse(std::vector<uint8_t> &buf, std::vector<size_t> cuts, km_batch *b,
	  uint32_t max = kMax)
{
	static sample::Chain *keep; // the view borrows the chain
	delete keep;
	keep = new sample::Chain(buf, std::move(cuts));
	return km_batch_parse(b, &keep->chain, km_chain_start(&keep->chain), max);
}

int Parse(std::vector<uint8_t> &buf, uint32_t max = kMax)
{
	km_batch b;
	return Parse(buf, {}, &b, max);
}

uint32_t FullCrc(const std::vector<uint8_t> &buf)
{
	return km_crc32c_update(0, buf.data() + 21, buf.size() - 21);
}

TEST(BatchParse, WholeAndHeaderFields)
{
	auto buf = sample::DataBatch(100, 5000, 4);
	km_batch b;
	ASSERT_EQ((int)buf.size(), Parse(buf, {}, &b));
	EXPECT_EQ(100, km_batch_base_offset(&b));
	EXPECT_EQ(103, km_batch_last_offset(&b));
	EXPECT_EQ((int32_t)buf.size() - 12, km_batch_length(&b));
	EXPECT_EQ(3, km_batch_leader_epoch(&b));
	EXPECT_EQ(2, km_batch_magic(&b));
	EXPECT_EQ(FullCrc(buf), km_batch_crc(&b));
	EXPECT_EQ(5000, km_batch_producer_id(&b));
	EXPECT_EQ(0, km_batch_producer_epoch(&b));
	EXPECT_EQ(0, km_batch_base_sequence(&b));
	EXPECT_EQ(3, km_batch_last_sequence(&b));
	EXPECT_EQ(4, km_batch_records_count(&b));
	EXPECT_EQ(1700000000000, km_batch_base_timestamp(&b));
	EXPECT_EQ(1700000000003, km_batch_max_timestamp(&b));
	EXPECT_EQ(KM_CODEC_NONE, km_batch_codec(&b));
	EXPECT_FALSE(km_batch_is_control(&b));
	EXPECT_FALSE(km_batch_is_transactional(&b));
	EXPECT_FALSE(km_batch_is_log_append_time(&b));
	EXPECT_FALSE(km_batch_has_delete_horizon(&b));
}

TEST(BatchParse, AttributeDecoding)
{
	auto buf = sample::DataBatch(0, 1, 1);
	km_store_be16(&buf[21], 0x7f & ~0x20); // all flags but control, codec 7
	km_store_be32(&buf[17], FullCrc(buf));
	km_batch b;
	ASSERT_GT(Parse(buf, {}, &b), 0);
	EXPECT_EQ(7, km_batch_codec(&b));
	EXPECT_STREQ("unknown", km_codec_name(km_batch_codec(&b)));
	EXPECT_TRUE(km_batch_is_log_append_time(&b));
	EXPECT_TRUE(km_batch_is_transactional(&b));
	EXPECT_FALSE(km_batch_is_control(&b));
	EXPECT_TRUE(km_batch_has_delete_horizon(&b));
	EXPECT_STREQ("zstd", km_codec_name(KM_CODEC_ZSTD));
}

TEST(BatchParse, EverySplitPointParsesTheSame)
{
	auto buf = sample::DataBatch(7, 42, 3);
	for (size_t cut = 0; cut <= buf.size(); cut++) {
		km_batch b;
		ASSERT_EQ((int)buf.size(), Parse(buf, {cut}, &b)) << cut;
		EXPECT_EQ(42, km_batch_producer_id(&b));
	}
	std::mt19937 rng(4);
	for (int i = 0; i < 200; i++) {
		std::vector<size_t> cuts;
		for (int k = 0; k < 5; k++)
			cuts.push_back(rng() % (buf.size() + 1));
		std::sort(cuts.begin(), cuts.end());
		km_batch b;
		ASSERT_EQ((int)buf.size(), Parse(buf, cuts, &b));
	}
}

TEST(BatchParse, SecondBatchInChain)
{
	auto one = sample::DataBatch(0, 1, 2), two = sample::DataBatch(2, 1, 3);
	std::vector<uint8_t> buf(one);
	buf.insert(buf.end(), two.begin(), two.end());
	sample::Chain ch(buf, {one.size() - 5, one.size() + 9});
	km_chain_cur cur = km_chain_start(&ch.chain);
	km_batch b;
	ASSERT_EQ((int)one.size(), km_batch_parse(&b, &ch.chain, cur, kMax));
	ASSERT_EQ(0, km_chain_advance(&ch.chain, &cur, one.size()));
	ASSERT_EQ((int)two.size(), km_batch_parse(&b, &ch.chain, cur, kMax));
	EXPECT_EQ(2, km_batch_base_offset(&b));
	ASSERT_EQ(0, km_chain_advance(&ch.chain, &cur, two.size()));
	EXPECT_EQ(0, km_batch_parse(&b, &ch.chain, cur, kMax)); // end: need more
}

// A prefix is "need more bytes"; a batch whose length was cut to match
// fails the length rule or the CRC.
TEST(BatchParse, EveryTruncationPoint)
{
	auto buf = sample::DataBatch(0, 9, 5);
	for (size_t n = 0; n < buf.size(); n++) {
		std::vector<uint8_t> prefix(buf.begin(), buf.begin() + n);
		EXPECT_EQ(0, Parse(prefix)) << n;
		if (n < 12)
			continue;
		km_store_be32(&prefix[8], (uint32_t)(n - 12));
		EXPECT_EQ(n - 12 < 49 ? KM_EBATCHLEN : KM_EBADCRC, Parse(prefix))
			<< n;
	}
}

int ExpectedAfterFlip(size_t byte, const std::vector<uint8_t> &flipped,
		      size_t size)
{
	if (byte < 8 || (byte >= 12 && byte < 16))
		return (int)size; // baseOffset and leader epoch: outside the CRC
	if (byte < 12) {
		int32_t len = (int32_t)km_load_be32(&flipped[8]);
		if (len < 49)
			return KM_EBATCHLEN;
		if ((uint64_t)len + 12 > kMax)
			return KM_EBATCHMAX;
		if ((size_t)len + 12 > size)
			return 0;
		return KM_EBADCRC;
	}
	if (byte == 16)
		return KM_EBADMAGIC;
	return KM_EBADCRC;
}

TEST(BatchParse, EverySingleBitFlip)
{
	auto buf = sample::DataBatch(0, 9, 3);
	for (size_t byte = 0; byte < buf.size(); byte++) {
		for (int bit = 0; bit < 8; bit++) {
			auto f = buf;
			f[byte] ^= (uint8_t)(1u << bit);
			EXPECT_EQ(ExpectedAfterFlip(byte, f, buf.size()), Parse(f))
				<< "byte " << byte << " bit " << bit;
		}
	}
}

TEST(BatchParse, MaximumSize)
{
	auto buf = sample::DataBatch(0, 9, 3);
	EXPECT_EQ((int)buf.size(), Parse(buf, (uint32_t)buf.size()));
	EXPECT_EQ(KM_EBATCHMAX, Parse(buf, (uint32_t)buf.size() - 1));
	// Rejected from the 12-byte prefix alone: no waiting for the body.
	std::vector<uint8_t> head(buf.begin(), buf.begin() + 12);
	km_store_be32(&head[8], 0x7ffffff0);
	EXPECT_EQ(KM_EBATCHMAX, Parse(head));
	km_store_be32(&head[8], 0xffffffff);
	EXPECT_EQ(KM_EBATCHLEN, Parse(head));
}

TEST(BatchParse, OtherMagicIsNamedError)
{
	for (uint8_t magic : {0, 1, 3, 0xff}) {
		auto buf = sample::DataBatch(0, 9, 2);
		buf[16] = magic;
		EXPECT_EQ(KM_EBADMAGIC, Parse(buf)) << (int)magic;
	}
	EXPECT_STRNE(km_strerror(KM_EBADMAGIC), km_strerror(KM_EBADCRC));
}

TEST(BatchParse, NegativeHeaderCountsRejected)
{
	auto buf = sample::DataBatch(0, 9, 2);
	km_store_be32(&buf[23], (uint32_t)-1);
	km_store_be32(&buf[17], FullCrc(buf));
	EXPECT_EQ(KM_EBATCHHDR, Parse(buf));
	buf = sample::DataBatch(0, 9, 2);
	km_store_be32(&buf[57], (uint32_t)-5);
	km_store_be32(&buf[17], FullCrc(buf));
	EXPECT_EQ(KM_EBATCHHDR, Parse(buf));
}

TEST(PidMap, Function)
{
	struct {
		int64_t in, out;
	} cases[] = {
		{-1, -1}, {-2, -2}, {0, -2}, {5, -7}, {INT64_MIN, INT64_MIN},
		{INT64_MAX - 1, INT64_MIN},
	};
	for (auto c : cases) {
		int64_t m = 0, mm = 0;
		ASSERT_EQ(0, km_pid_map(c.in, &m)) << c.in;
		EXPECT_EQ(c.out, m) << c.in;
		ASSERT_EQ(0, km_pid_map(m, &mm));
		EXPECT_EQ(m, mm) << "map(map(p)) == map(p) for " << c.in;
	}
	int64_t untouched = 123;
	EXPECT_EQ(KM_EPIDMAX, km_pid_map(INT64_MAX, &untouched));
	EXPECT_EQ(123, untouched);
}

TEST(PidMap, InPlaceKeepsCrcValid)
{
	int64_t pids[] = {-1, -2, 0, 5, INT64_MAX - 1};
	for (int64_t pid : pids) {
		auto buf = sample::DataBatch(0, pid, 3);
		km_batch b;
		ASSERT_GT(Parse(buf, {}, &b), 0);
		int64_t want;
		ASSERT_EQ(0, km_pid_map(pid, &want));
		EXPECT_EQ(pid >= 0 ? 1 : 0, km_batch_map_pid(&b)) << pid;
		EXPECT_EQ(want, km_batch_producer_id(&b));
		EXPECT_EQ(want, (int64_t)km_load_be64(&buf[43])); // in the bytes
		EXPECT_EQ(FullCrc(buf), km_load_be32(&buf[17]));
		EXPECT_EQ(0, km_batch_verify_crc(&b));
		EXPECT_EQ(0, km_batch_map_pid(&b)) << "idempotent";
		km_batch again;
		EXPECT_EQ((int)buf.size(), Parse(buf, {}, &again));
	}
}

TEST(PidMap, Int64MaxRefusedAndUntouched)
{
	auto buf = sample::DataBatch(0, INT64_MAX, 3);
	auto before = buf;
	km_batch b;
	ASSERT_GT(Parse(buf, {}, &b), 0);
	EXPECT_EQ(KM_EPIDMAX, km_batch_map_pid(&b));
	EXPECT_EQ(before, buf);
	EXPECT_NE(std::string("unknown kmirror error"), km_strerror(KM_EPIDMAX));
}

// The 8 id bytes and 4 crc bytes are written back wherever segments break.
TEST(PidMap, AcrossEverySplitPoint)
{
	auto orig = sample::DataBatch(0, 77, 2, 300);
	auto ref = orig;
	{
		km_batch b;
		ASSERT_GT(Parse(ref, {}, &b), 0);
		ASSERT_EQ(1, km_batch_map_pid(&b));
	}
	for (size_t cut = 0; cut <= 70; cut++) {
		auto buf = orig;
		km_batch b;
		ASSERT_GT(Parse(buf, {cut, cut + 3}, &b), 0);
		ASSERT_EQ(1, km_batch_map_pid(&b));
		EXPECT_EQ(ref, buf) << cut;
	}
}

TEST(PidMap, PatchMatchesRecomputeForLargeBatches)
{
	std::mt19937_64 rng(5);
	for (int value_bytes : {0, 100, 1000, 16000, 200000}) {
		auto buf = sample::DataBatch(0, (int64_t)(rng() >> 2), 5, value_bytes);
		km_batch b;
		ASSERT_GT(Parse(buf, {}, &b), 0);
		ASSERT_EQ(1, km_batch_map_pid(&b));
		EXPECT_EQ(FullCrc(buf), km_batch_crc(&b)) << value_bytes;
	}
}

// A batch of random bytes: built by kmirror's builder, its record bytes
// then overwritten at random and its crc made right again.
std::vector<uint8_t> RandomBatch(std::mt19937_64 &rng, int64_t pid,
				 int value_bytes_max = 3000)
{
	int n = 1 + (int)(rng() % 20);
	auto buf = sample::DataBatch((int64_t)(rng() >> 1), pid, n,
				     (int)(rng() % value_bytes_max));
	for (size_t i = 61; i < buf.size(); i++)
		buf[i] = (uint8_t)rng();
	km_store_be16(&buf[21], (uint16_t)(rng() & 0x10)); // transactional or not
	km_store_be32(&buf[17], FullCrc(buf));
	return buf;
}

int64_t RandomPid(std::mt19937_64 &rng, int i)
{
	static const int64_t edges[] = {-1, 0, INT64_MAX, 1, -2, INT64_MAX - 1,
					INT64_MIN};
	if (i < (int)(sizeof(edges) / sizeof(edges[0])))
		return edges[i];
	return (int64_t)rng() >> (rng() % 63); // both signs, every magnitude
}

TEST(VerifyMap, PatchedCrcEqualsRecomputeForRandomBatchesAndIds)
{
	std::mt19937_64 rng(18);
	for (int i = 0; i < 500; i++) {
		int64_t pid = RandomPid(rng, i);
		auto buf = RandomBatch(rng, pid);
		auto before = buf;
		int64_t want;
		int rc = km_batch_verify_map(buf.data(), buf.size(), kMax);

		if (km_pid_map(pid, &want) < 0) {
			EXPECT_EQ(KM_EPIDMAX, rc) << pid;
			EXPECT_EQ(before, buf) << "refused, yet written: " << pid;
			continue;
		}
		ASSERT_EQ((int)buf.size(), rc) << pid;
		EXPECT_EQ(want, (int64_t)km_load_be64(&buf[43])) << pid;
		EXPECT_EQ(FullCrc(buf), km_load_be32(&buf[17])) << pid;
		if (pid < 0) {
			EXPECT_EQ(before, buf) << "a negative id is left alone";
		}
		// Only the id and crc change: the rest is the source's.
		for (size_t k = 0; k < buf.size(); k++)
			if ((k < 17 || k >= 21) && (k < 43 || k >= 51)) {
				ASSERT_EQ(before[k], buf[k]) << "byte " << k;
			}
		// The parse of the result agrees, and a second pass maps nothing.
		km_batch b;
		ASSERT_EQ((int)buf.size(), Parse(buf, {}, &b));
		EXPECT_EQ(want, km_batch_producer_id(&b));
		auto once = buf;
		EXPECT_EQ((int)buf.size(),
			  km_batch_verify_map(buf.data(), buf.size(), kMax));
		EXPECT_EQ(once, buf) << "idempotent";
	}
}

// The CRC is checked over the bytes as they came, before any write: a
// damaged batch gets km_batch_parse's own code and is not touched.
TEST(VerifyMap, EverySingleBitFlipGetsParsesCodeUntouched)
{
	std::mt19937_64 rng(7);
	auto buf = RandomBatch(rng, 4242, 40);
	ASSERT_GT(buf.size(), 200u) << "a batch with records past the header";
	for (size_t byte = 0; byte < buf.size(); byte++) {
		for (int bit = 0; bit < 8; bit++) {
			auto f = buf;
			f[byte] ^= (uint8_t)(1u << bit);
			auto g = f;
			int want = ExpectedAfterFlip(byte, f, buf.size());
			int rc = km_batch_verify_map(g.data(), g.size(), kMax);

			ASSERT_EQ(want, rc) << "byte " << byte << " bit " << bit;
			if (rc <= 0) {
				ASSERT_EQ(f, g) << "byte " << byte << " bit " << bit;
			}
		}
	}
}

TEST(VerifyMap, TruncatedAndOversizedAsParse)
{
	std::mt19937_64 rng(9);
	auto buf = RandomBatch(rng, 5);
	auto before = buf;
	for (size_t n = 0; n < buf.size(); n += 1 + n / 8)
		EXPECT_EQ(0, km_batch_verify_map(buf.data(), n, kMax)) << n;
	EXPECT_EQ(KM_EBATCHMAX, km_batch_verify_map(buf.data(), buf.size(),
						    (uint32_t)buf.size() - 1));
	EXPECT_EQ(before, buf);
}

TEST(Batch, SettersOutsideCrc)
{
	auto buf = sample::DataBatch(0, 9, 2);
	km_batch b;
	ASSERT_GT(Parse(buf, {30}, &b), 0);
	km_batch_set_base_offset(&b, 1234567);
	km_batch_set_leader_epoch(&b, 17);
	EXPECT_EQ(1234567, (int64_t)km_load_be64(&buf[0]));
	EXPECT_EQ(17, (int32_t)km_load_be32(&buf[12]));
	EXPECT_EQ(0, km_batch_verify_crc(&b));
	km_batch again;
	ASSERT_GT(Parse(buf, {}, &again), 0);
	EXPECT_EQ(1234567, km_batch_base_offset(&again));
	EXPECT_EQ(17, km_batch_leader_epoch(&again));
}

TEST(Batch, LastSequenceWraps)
{
	auto buf = sample::DataBatch(0, 9, 3);
	km_store_be32(&buf[53], INT32_MAX - 1);
	km_store_be32(&buf[17], FullCrc(buf));
	km_batch b;
	ASSERT_GT(Parse(buf, {}, &b), 0);
	EXPECT_EQ(0, km_batch_last_sequence(&b)); // MAX-1, MAX, 0
}

} // namespace
