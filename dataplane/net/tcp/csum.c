#include "dataplane/net/tcp/csum.h"

#include <errno.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Lengths summed with AVX2: below, the set-up costs more than it saves;
 * above, a 64-bit lane could wrap (2^32 words of 32 bits). */
#define SUM_AVX2_MIN 256u
#define SUM_AVX2_MAX (1u << 30)


/* One's-complement sum of little-endian 64-bit words, with the carries
 * out of bit 63 kept in the upper half of a 128-bit accumulator (an add
 * and an add-with-carry per 8 bytes, twice the 32-bit loop's rate: every
 * received byte is summed in DPDK mode). 2^64 = 1 (mod 2^16 - 1), so the
 * carries are added back in at the end. */
static uint64_t sum_words_scalar(const uint8_t *p, size_t len)
{
	unsigned __int128 s = 0;
	uint64_t w, lo, hi;
	uint32_t v;
	uint16_t h;

	for (; len >= 32; p += 32, len -= 32) {
		for (int k = 0; k < 4; k++) {
			memcpy(&w, p + 8 * k, 8);
			s += w;
		}
	}
	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&w, p, 8);
		s += w;
	}
	if (len >= 4) {
		memcpy(&v, p, 4);
		s += v;
		p += 4;
		len -= 4;
	}
	if (len >= 2) {
		memcpy(&h, p, 2);
		s += h;
		p += 2;
		len -= 2;
	}
	/* A trailing byte is the high byte of a zero-padded network word,
	 * which a little-endian load reads as the low byte. */
	if (len)
		s += *p;
	lo = (uint64_t)s;
	hi = (uint64_t)(s >> 64);
	lo += hi;
	lo += lo < hi;
	return (lo & 0xffffffffu) + (lo >> 32);
}

#if defined(__x86_64__)
/* Ports without checksum offload (net_memif, net_ring, af_packet) sum every
 * byte twice, once sending and once receiving: AVX2 adds 64 bytes a pass
 * as 32-bit words widened into 64-bit lanes, twice the rate of the scalar
 * loop on a 9000-byte frame. 2^32 = 1 (mod 2^16 - 1), so 32-bit words sum
 * to what 16-bit ones do; a lane takes 2^32 words before it could wrap. */
__attribute__((target("avx2")))
static uint64_t sum_avx2(const uint8_t *p, size_t len, size_t *done)
{
	__m256i a0 = _mm256_setzero_si256(), a1 = a0, z = a0;
	uint64_t l[8];
	size_t i = 0;

	for (; i + 64 <= len; i += 64) {
		__m256i v = _mm256_loadu_si256((const __m256i *)(p + i));
		__m256i w = _mm256_loadu_si256((const __m256i *)(p + i + 32));

		a0 = _mm256_add_epi64(a0, _mm256_unpacklo_epi32(v, z));
		a1 = _mm256_add_epi64(a1, _mm256_unpackhi_epi32(v, z));
		a0 = _mm256_add_epi64(a0, _mm256_unpacklo_epi32(w, z));
		a1 = _mm256_add_epi64(a1, _mm256_unpackhi_epi32(w, z));
	}
	_mm256_storeu_si256((__m256i *)l, a0);
	_mm256_storeu_si256((__m256i *)(l + 4), a1);
	*done = i;
	return l[0] + l[1] + l[2] + l[3] + l[4] + l[5] + l[6] + l[7];
}
#endif

static uint64_t sum_words(const uint8_t *p, size_t len)
{
#if defined(__x86_64__)
	if (len >= SUM_AVX2_MIN && len <= SUM_AVX2_MAX &&
	    __builtin_cpu_supports("avx2")) {
		size_t done;
		uint64_t a = sum_avx2(p, len, &done);
		uint64_t t = a + sum_words_scalar(p + done, len - done);

		t += t < a;
		return (t & 0xffffffffu) + (t >> 32);
	}
#endif
	return sum_words_scalar(p, len);
}

static uint32_t fold64(uint64_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint32_t)s;
}

uint32_t km_csum_add(uint32_t sum, const void *p, size_t len)
{
	return fold64((uint64_t)sum + sum_words(p, len));
}

uint16_t km_csum_fold(uint32_t sum)
{
	return (uint16_t)fold64(sum);
}

int km_csum_chain(const struct km_chain *c, struct km_chain_cur cur,
		  size_t len, uint32_t *sum)
{
	uint64_t s = *sum;
	size_t done = 0;

	while (done < len && cur.seg < c->n_iov) {
		const uint8_t *p = (const uint8_t *)c->iov[cur.seg].iov_base;
		size_t left = c->iov[cur.seg].iov_len - cur.off;
		size_t n = len - done < left ? len - done : left;
		uint32_t part = fold64(sum_words(p + cur.off, n));

		/* Bytes at an odd stream offset sit in the low half of their
		 * network word: swap this piece's sum into place. */
		if (done & 1)
			part = __builtin_bswap16((uint16_t)part);
		s += part;
		done += n;
		cur.seg++;
		cur.off = 0;
	}
	if (done < len)
		return -ERANGE;
	*sum = fold64(s);
	return 0;
}

/* Every frame in and out sums the pseudo-header: its six 16-bit network
 * words are added as numbers, then put in the byte order of these sums
 * (native loads; swapping a one's complement sum swaps its bytes, RFC
 * 1071 2.B), without a trip through memory and sum_words. */
uint32_t km_csum_pseudo(uint32_t src, uint32_t dst, uint8_t proto,
			uint16_t l4_len)
{
	uint32_t s = (src >> 16) + (src & 0xffff) + (dst >> 16) +
		     (dst & 0xffff) + proto + l4_len;

	s = fold64(s);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	s = __builtin_bswap16((uint16_t)s);
#endif
	return s;
}
