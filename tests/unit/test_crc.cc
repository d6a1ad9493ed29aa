// Goal: CRC-32C is the standard one, km_crc32c_patch() equals a full
// recompute for any message size and change position, and km_crc32c_copy()
// copies every byte and gives the CRC of a plain update (issue 18: the
// direct writer's copy checks the CRC of what it copied).
// Method: published vectors (RFC 3720 B.4), chunked vs whole updates, and
// random messages of 61 B to 1 MiB with random changes, patched vs recomputed.
// Also that a CRC leaves no dirty upper vector state behind (x86: XINUSE
// read with XGETBV 1 right after the call), which costs the next legacy-SSE
// instruction ~120 ns on the Xeons here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <random>
#include <vector>

#include "common/crc32c.h"
#include "common/km_limits.h"

namespace {

const uint32_t kOne = 0x80000000u; // the polynomial 1, reflected

uint32_t Crc(const std::vector<uint8_t> &v)
{
	return km_crc32c_update(0, v.data(), v.size());
}

TEST(Crc32c, CheckValue)
{
	EXPECT_EQ(0xE3069283u, km_crc32c_update(0, "123456789", 9));
	EXPECT_EQ(0u, km_crc32c_update(0, "", 0));
}

TEST(Crc32c, Rfc3720Vectors)
{
	std::vector<uint8_t> zeros(32, 0), ones(32, 0xff), inc(32), dec(32);
	for (int i = 0; i < 32; i++) {
		inc[i] = (uint8_t)i;
		dec[i] = (uint8_t)(31 - i);
	}
	EXPECT_EQ(0x8A9136AAu, Crc(zeros));
	EXPECT_EQ(0x62A8AB43u, Crc(ones));
	EXPECT_EQ(0x46DD794Eu, Crc(inc));
	EXPECT_EQ(0x113FDB5Cu, Crc(dec));
}

TEST(Crc32c, PiecewiseEqualsWhole)
{
	std::mt19937_64 rng(1);
	std::vector<uint8_t> buf(100000);
	for (auto &b : buf)
		b = (uint8_t)rng();
	uint32_t whole = Crc(buf);
	for (size_t cut : {0, 1, 7, 61, 4096, 99999, 100000}) {
		uint32_t c = km_crc32c_update(0, buf.data(), cut);
		c = km_crc32c_update(c, buf.data() + cut, buf.size() - cut);
		EXPECT_EQ(whole, c) << "cut at " << cut;
	}
}

TEST(Crc32c, CopyCopiesAndEqualsUpdate)
{
	std::mt19937_64 rng(3);
	std::vector<uint8_t> src(300000);
	for (auto &b : src)
		b = (uint8_t)rng();
	// Around the copy's internal block (16 KiB) and past several.
	for (size_t len : {0, 1, 63, 16383, 16384, 16385, 65536 + 5, 300000}) {
		for (size_t cut : {size_t(0), len / 3}) {
			std::vector<uint8_t> dst(len + 2, 0xA5);
			uint32_t c = km_crc32c_copy(0, dst.data() + 1, src.data(), cut);
			c = km_crc32c_copy(c, dst.data() + 1 + cut, src.data() + cut,
					   len - cut);
			EXPECT_EQ(km_crc32c_update(0, src.data(), len), c)
				<< len << " cut at " << cut;
			EXPECT_TRUE(std::equal(src.begin(), src.begin() + len,
					       dst.begin() + 1)) << len;
			EXPECT_EQ(0xA5, dst[0]);
			EXPECT_EQ(0xA5, dst[len + 1]) << "nothing past the end";
		}
	}
}

TEST(Crc32c, PowersOfX)
{
	EXPECT_EQ(kOne, km_crc32c_xpow8n(0));
	EXPECT_EQ(kOne >> 8, km_crc32c_xpow8n(1)); // x^8
	std::mt19937_64 rng(2);
	for (int i = 0; i < 200; i++) {
		uint64_t a = rng() % (1u << 31), b = rng() % (1u << 31);
		EXPECT_EQ(km_crc32c_xpow8n(a + b),
			  km_crc32c_mulmod(km_crc32c_xpow8n(a),
					   km_crc32c_xpow8n(b)));
	}
}

// crc(message with n zero bytes appended) = crc-shifted relation, checked
// through the patch of a region at the very end and at the very start.
TEST(Crc32c, PatchAtEdges)
{
	std::vector<uint8_t> buf(1000, 0x5a);
	uint32_t crc = Crc(buf);
	uint8_t old8[8], new8[8];

	memcpy(old8, buf.data() + 992, 8);
	memset(new8, 0xa5, 8);
	memcpy(buf.data() + 992, new8, 8);
	crc = km_crc32c_patch(crc, 0, old8, new8, 8);
	EXPECT_EQ(Crc(buf), crc);

	memcpy(old8, buf.data(), 8);
	memcpy(buf.data(), new8, 8);
	crc = km_crc32c_patch(crc, 992, old8, new8, 8);
	EXPECT_EQ(Crc(buf), crc);
}

TEST(Crc32c, PatchEqualsRecomputeRandom)
{
	std::mt19937_64 rng(3);
	std::vector<size_t> sizes = {61, 62, 100, 255, 256, 257, 1024,
				     4095, 65536, 65537, 300000, 1 << 20};
	for (int i = 0; i < 40; i++)
		sizes.push_back(61 + rng() % ((1 << 20) - 61));
	for (size_t size : sizes) {
		std::vector<uint8_t> buf(size);
		for (auto &b : buf)
			b = (uint8_t)rng();
		uint32_t crc = Crc(buf);
		for (int round = 0; round < 4; round++) {
			size_t len = 1 + rng() % KM_CRC_PATCH_BYTES_MAX;
			if (len > size)
				len = size;
			size_t pos = rng() % (size - len + 1);
			std::vector<uint8_t> old(buf.begin() + pos,
						 buf.begin() + pos + len);
			for (size_t k = 0; k < len; k++)
				buf[pos + k] = (uint8_t)rng();
			crc = km_crc32c_patch(crc, size - pos - len, old.data(),
					      buf.data() + pos, len);
			ASSERT_EQ(Crc(buf), crc)
				<< "size " << size << " pos " << pos << " len " << len;
		}
	}
}

TEST(Crc32c, PatchOfUnchangedBytesIsIdentity)
{
	uint8_t same[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	EXPECT_EQ(0xdeadbeefu, km_crc32c_patch(0xdeadbeefu, 12345, same, same, 8));
}

#if defined(__x86_64__)
// XINUSE: which XSAVE state components are not in their initial state.
uint64_t XInUse()
{
	uint32_t lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
	return ((uint64_t)hi << 32) | lo;
}

// ISA-L's AVX-512 CRC returns with zmm0-15's upper halves in use; the
// next legacy-SSE instruction (km_batch_parse's header copy) then stalls
// ~120 ns, 4x the CRC of a 1 KiB batch (bench-batch's hot path). Bits 2
// (YMM_Hi128) and 6 (ZMM_Hi256) are what vzeroupper clears.
TEST(Crc32c, LeavesNoDirtyUpperVectorState)
{
	unsigned a, b, c, d;
	std::vector<uint8_t> buf(16384, 0x5a);
	const uint64_t upper = (1u << 2) | (1u << 6);

	if (!__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & (1u << 2)))
		GTEST_SKIP() << "no XGETBV with ECX=1 on this CPU";
	for (size_t len : {9u, 100u, 255u, 256u, 1003u, 16384u}) {
		uint32_t crc = km_crc32c_update(0, buf.data(), len);
		uint64_t inuse = XInUse();

		EXPECT_EQ(0u, inuse & upper) << "len " << len << " crc " << crc;
	}
}
#endif

} // namespace
