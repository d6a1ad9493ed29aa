// Goal: common/ building blocks behave at their edges: varint limits, chain
// cursors over empty and odd segments (km_chain_next lands where
// km_chain_advance does), the chain CRC at any split, and km_strerror naming
// every code.
// Method: table-driven checks with hand-encoded bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "common/chain.h"
#include "common/crc32c.h"
#include "common/errors.h"
#include "common/varint.h"

namespace {

TEST(Varint, RoundTripSigned)
{
	int32_t v32[] = {0, 1, -1, 63, -64, 64, INT32_MAX, INT32_MIN};
	for (int32_t v : v32) {
		uint8_t buf[KM_VARINT_BYTES_MAX];
		int n = km_varint_encode_s32(buf, v);
		int32_t out;
		ASSERT_EQ(n, km_varint_decode_s32(buf, n, &out)) << v;
		EXPECT_EQ(v, out);
		EXPECT_EQ(n, km_varint_size_s32(v));
		EXPECT_EQ(0, km_varint_decode_s32(buf, n - 1, &out)) << "cut";
	}
	int64_t v64[] = {0, -1, INT64_MAX, INT64_MIN, 1700000000000};
	for (int64_t v : v64) {
		uint8_t buf[KM_VARLONG_BYTES_MAX];
		int n = km_varint_encode_s64(buf, v);
		int64_t out;
		ASSERT_EQ(n, km_varint_decode_s64(buf, n, &out)) << v;
		EXPECT_EQ(v, out);
	}
}

TEST(Varint, KnownEncodings)
{
	uint8_t buf[KM_VARLONG_BYTES_MAX];
	EXPECT_EQ(1, km_varint_encode_s32(buf, 36));
	EXPECT_EQ(0x48, buf[0]); // the barrier record's length
	EXPECT_EQ(1, km_varint_encode_s32(buf, -1));
	EXPECT_EQ(0x01, buf[0]);
	EXPECT_EQ(2, km_varint_encode_s32(buf, 64));
	EXPECT_EQ(0x80, buf[0]);
	EXPECT_EQ(0x01, buf[1]);
}

TEST(Varint, TooLongOrOverflowing)
{
	const uint8_t six[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
	int32_t v;
	EXPECT_EQ(KM_EVARINT, km_varint_decode_s32(six, sizeof(six), &v));
	const uint8_t big5[] = {0xff, 0xff, 0xff, 0xff, 0x7f}; // > 32 bits
	EXPECT_EQ(KM_EVARINT, km_varint_decode_s32(big5, sizeof(big5), &v));
	const uint8_t ok5[] = {0xfe, 0xff, 0xff, 0xff, 0x0f}; // INT32_MAX
	ASSERT_EQ(5, km_varint_decode_s32(ok5, sizeof(ok5), &v));
	EXPECT_EQ(INT32_MAX, v);
	uint8_t eleven[11];
	memset(eleven, 0xff, sizeof(eleven));
	int64_t w;
	EXPECT_EQ(KM_EVARINT, km_varint_decode_s64(eleven, sizeof(eleven), &w));
	eleven[9] = 0x02; // tenth byte carrying more than bit 63
	EXPECT_EQ(KM_EVARINT, km_varint_decode_s64(eleven, 10, &w));
}

TEST(Chain, EmptySegmentsAndCursor)
{
	char a[] = "abc", c[] = "defg";
	iovec iov[] = {{nullptr, 0}, {a, 3}, {nullptr, 0}, {c, 4}, {nullptr, 0}};
	km_chain ch = {iov, 5};
	km_chain_cur cur = km_chain_start(&ch);
	EXPECT_EQ(1u, cur.seg);
	EXPECT_TRUE(km_chain_has(&ch, cur, 7));
	EXPECT_FALSE(km_chain_has(&ch, cur, 8));
	char out[8] = {};
	EXPECT_EQ(7u, km_chain_copy(&ch, cur, out, 8));
	EXPECT_STREQ("abcdefg", out);
	ASSERT_EQ(0, km_chain_advance(&ch, &cur, 3));
	EXPECT_EQ(3u, cur.seg); // normalised past the empty segment
	EXPECT_EQ(c, (char *)km_chain_contig(&ch, cur, 4));
	EXPECT_EQ(nullptr, km_chain_contig(&ch, cur, 5));
	EXPECT_EQ(-ERANGE, km_chain_advance(&ch, &cur, 5));
	EXPECT_EQ(5u, cur.seg); // at the end
	EXPECT_EQ(0u, km_chain_copy(&ch, cur, out, 1));
	uint32_t crc;
	EXPECT_EQ(-ERANGE, km_chain_crc32c(&ch, km_chain_start(&ch), 8, &crc));
	ASSERT_EQ(0, km_chain_crc32c(&ch, km_chain_start(&ch), 7, &crc));
}

/* The chain CRC (it prefetches segments ahead) equals the flat CRC of the
 * same bytes for any split, start and length, empty segments included. */
TEST(Chain, Crc32cEqualsFlatAtEverySplit)
{
	std::mt19937 rng(11);
	for (int round = 0; round < 200; round++) {
		std::vector<unsigned char> b(1 + rng() % 20000);
		for (auto &x : b)
			x = (unsigned char)rng();
		std::vector<iovec> iov;
		for (size_t at = 0; at < b.size();) {
			size_t n = std::min(b.size() - at, (size_t)(rng() % 3000));
			iov.push_back({ b.data() + at, n });
			at += n;
		}
		km_chain ch = { iov.data(), (uint32_t)iov.size() };
		size_t off = rng() % b.size(), len = rng() % (b.size() - off + 1);
		km_chain_cur cur = km_chain_start(&ch);
		ASSERT_EQ(0, km_chain_advance(&ch, &cur, off));
		uint32_t crc = 1;
		ASSERT_EQ(0, km_chain_crc32c(&ch, cur, len, &crc));
		EXPECT_EQ(km_crc32c_update(0, b.data() + off, len), crc)
			<< "round " << round;
		EXPECT_EQ(-ERANGE, km_chain_crc32c(&ch, cur, b.size() - off + 1, &crc));
	}
}

/* km_chain_next (by value, fast inside a segment) lands exactly where
 * km_chain_advance does from every start and by every length, empty
 * segments, segment ends and moves past the end included. */
TEST(Chain, NextEqualsAdvanceEverywhere)
{
	std::mt19937 rng(17);
	for (int round = 0; round < 50; round++) {
		std::vector<unsigned char> b(1 + rng() % 200);
		std::vector<iovec> iov;
		for (size_t at = 0; at < b.size();) {
			size_t n = std::min(b.size() - at, (size_t)(rng() % 40));
			iov.push_back({ b.data() + at, n }); // 0: an empty one
			at += n;
		}
		km_chain ch = { iov.data(), (uint32_t)iov.size() };
		for (size_t off = 0; off <= b.size(); off++) {
			km_chain_cur at = km_chain_start(&ch);
			ASSERT_EQ(0, km_chain_advance(&ch, &at, off));
			for (size_t n = 0; n <= b.size() - off + 1; n++) {
				km_chain_cur want = at;
				(void)km_chain_advance(&ch, &want, n);
				km_chain_cur got = km_chain_next(&ch, at, n);
				ASSERT_EQ(want.seg, got.seg)
					<< "round " << round << " off " << off
					<< " n " << n;
				ASSERT_EQ(want.off, got.off)
					<< "round " << round << " off " << off
					<< " n " << n;
			}
		}
	}
}

TEST(Chain, StoreAcrossSegments)
{
	char a[4] = {}, b[4] = {};
	iovec iov[] = {{a, 4}, {b, 4}};
	km_chain ch = {iov, 2};
	km_chain_cur cur = km_chain_start(&ch);
	ASSERT_EQ(0, km_chain_advance(&ch, &cur, 2));
	EXPECT_EQ(4u, km_chain_store(&ch, cur, "WXYZ", 4));
	EXPECT_EQ(0, memcmp(a + 2, "WX", 2));
	EXPECT_EQ(0, memcmp(b, "YZ", 2));
}

TEST(Errors, EveryCodeIsNamedAndDistinct)
{
	const int codes[] = {
		KM_EBATCHLEN, KM_EBATCHMAX, KM_EBADMAGIC, KM_EBADCRC,
		KM_EBATCHHDR, KM_EBATCHCOUNT, KM_ERECOFFSET, KM_EINFLATE,
		KM_EINFLATEMAX, KM_EPIDMAX, KM_EVARINT, KM_ERECORD,
		KM_ERECCOUNT, KM_ECOMPRESSED, KM_ENOTCONTROL, KM_ECTRLKEY,
		KM_ECTRLVALUE, KM_ECLUSTERID, KM_ENOSPACE, KM_EDUPLICATE,
		KM_EPRODUCERFENCED, KM_EOUTOFORDERSEQ, KM_EINVALIDTXNSTATE,
		KM_ECOORDFENCED, KM_ETXNOPEN, KM_EPSTATEFULL, KM_ESNAPSHOT,
		KM_EOFFSET, KM_ESEGMENTS, KM_ECORRUPT, KM_EWIRETRUNC,
		KM_EWIRENEGLEN, KM_EWIRESTRLEN, KM_EWIREARRAY, KM_EWIREVARINT,
		KM_EWIRETAGS, KM_EWIREFRAMELEN, KM_EWIREFRAMEMAX, KM_EWIREAPIKEY,
		KM_EWIREVERSION, KM_EWIRECAPACITY, KM_EWIRETRAILING,
		KM_EWIREVALUE, KM_ECFGSYNTAX, KM_ECFGKEY, KM_ECFGVALUE,
		KM_ECFGMISSING, KM_EMETAPROPS, KM_EMETAMISMATCH, KM_ECTLJSON,
		KM_ECTLREQ, KM_ECTLCMD, KM_ECTLLINE, KM_ECTLBUSY,
		KM_EMIRRORED, KM_EUNKNOWNPART, KM_EPARTOFFLINE, KM_ESOURCE,
		KM_EWORKERQ, KM_ESHUTDOWN, KM_ESOURCEID, KM_EBASEOFFSET,
		KM_EGOREC,
	};
	std::set<std::string> seen;
	for (int code : codes) {
		EXPECT_LT(code, -4095) << "clear of the errno range";
		EXPECT_GT(code, KM_ELAST);
		std::string s = km_strerror(code);
		EXPECT_NE("unknown kmirror error", s) << code;
		EXPECT_TRUE(seen.insert(s).second) << "duplicate text for " << code;
	}
	EXPECT_EQ(std::string("unknown kmirror error"), km_strerror(KM_ELAST));
	EXPECT_EQ(std::string(strerror(ENOSPC)), km_strerror(-ENOSPC));
	EXPECT_STREQ("success", km_strerror(0));
}

} // namespace
