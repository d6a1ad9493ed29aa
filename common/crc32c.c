#include "common/crc32c.h"

#include <isa-l/crc.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "common/km_assert.h"
#include "common/km_limits.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* CRC-32C generator 0x1EDC6F41, bit-reversed: the reflected form in which
 * bit 31 is the coefficient of x^0 and bit 0 that of x^31. */
#define POLY_REFLECTED 0x82F63B78u
#define X0 0x80000000u /* the polynomial 1 */

/* pow_tab[k][v] = x^(8 * v * 256^k) mod P: the shift by tail bytes is the
 * product of one entry per non-zero byte of tail. clmul_tab holds the same
 * powers times x^-32, because the clmul product reduced by the crc32
 * instruction comes out multiplied by x^32 (see mul_clmul). 8 KiB in all. */
static uint32_t pow_tab[4][256];
static uint32_t clmul_tab[4][256];
static bool use_clmul;
static bool use_vzeroupper;

#if defined(__x86_64__)
/* ISA-L's AVX-512 CRC (crc32_iscsi_by16_10) returns with the upper halves of
 * zmm0-15 dirty: it has no vzeroupper. The next legacy-SSE instruction (the
 * 61-byte header copy in km_batch_parse, any SSE memcpy) then pays a state
 * transition of ~120 ns on this Xeon, four times the CRC of a 1 KiB batch
 * (bench-batch: hot path 0.17x ISA-L CRC alone at 1 KiB before this). */
__attribute__((target("avx"))) static void clear_upper(void)
{
	_mm256_zeroupper();
}
#endif

static inline uint32_t crc_raw(const unsigned char *p, int n, uint32_t crc)
{
	crc = crc32_iscsi((unsigned char *)p, n, crc);
#if defined(__x86_64__)
	if (use_vzeroupper)
		clear_upper();
#endif
	return crc;
}

uint32_t km_crc32c_update(uint32_t crc, const void *buf, size_t len)
{
	unsigned char *p = (unsigned char *)buf;

	/* ISA-L neither pre- nor post-inverts; the standard CRC does both. */
	crc = ~crc;
	while (len > 0) {
		int n = len > INT_MAX ? INT_MAX : (int)len;

		crc = crc_raw(p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return ~crc;
}

/* km_crc32c_copy's block: the source block is still in L1d (48 KiB
 * here) when the CRC reads it. */
#define COPY_BLOCK_BYTES (16u << 10)
/* Below this a plain memcpy: streaming stores pay off on whole lines. */
#define STREAM_MIN_BYTES 256u

static bool use_stream;

#if defined(__x86_64__)
/* memcpy with stores that go around the cache (the source is read into
 * it as usual). For a destination nobody reads soon - a direct-I/O write
 * buffer the device reads by DMA - this saves the read of each line the
 * store would first bring in and the eviction of other data: in a 1 MiB
 * copy from a hot source, 0.11 against 0.16-0.18 CPU s/GB (glibc's
 * AVX-512 memmove, rep movsb at this size). */
__attribute__((target("avx2"))) static void copy_stream(unsigned char *d,
							const unsigned char *s,
							size_t n)
{
	size_t head = (32u - ((uintptr_t)d & 31u)) & 31u, i;

	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (i = 0; i + 128 <= n; i += 128) {
		__m256i a = _mm256_loadu_si256((const __m256i *)(s + i));
		__m256i b = _mm256_loadu_si256((const __m256i *)(s + i + 32));
		__m256i c = _mm256_loadu_si256((const __m256i *)(s + i + 64));
		__m256i e = _mm256_loadu_si256((const __m256i *)(s + i + 96));

		_mm256_stream_si256((__m256i *)(d + i), a);
		_mm256_stream_si256((__m256i *)(d + i + 32), b);
		_mm256_stream_si256((__m256i *)(d + i + 64), c);
		_mm256_stream_si256((__m256i *)(d + i + 96), e);
	}
	memcpy(d + i, s + i, n - i);
}

/* Streaming stores are weakly ordered: drained before anyone (a syscall
 * handing the buffer to a device, another thread) may read them. */
static void stream_fence(void)
{
	_mm_sfence();
}
#else
static void copy_stream(unsigned char *d, const unsigned char *s, size_t n)
{
	memcpy(d, s, n);
}

static void stream_fence(void)
{
}
#endif

uint32_t km_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len)
{
	unsigned char *d = (unsigned char *)dst;
	const unsigned char *s = (const unsigned char *)src;
	bool stream = use_stream && len >= STREAM_MIN_BYTES;

	crc = ~crc;
	while (len > 0) {
		size_t n = len < COPY_BLOCK_BYTES ? len : COPY_BLOCK_BYTES;

		/* The CRC reads the source block the copy just read: with
		 * streaming stores the destination is not in cache. */
		if (stream)
			copy_stream(d, s, n);
		else
			memcpy(d, s, n);
		crc = crc_raw(s, (int)n, crc);
		d += n;
		s += n;
		len -= n;
	}
	if (stream)
		stream_fence();
	return ~crc;
}

uint32_t km_crc32c_mulmod(uint32_t a, uint32_t b)
{
	uint32_t prod = 0;

	/* Walk a's coefficients from x^0 up, multiplying b by x each step. */
	for (uint32_t m = X0; m != 0; m >>= 1) {
		if (a & m)
			prod ^= b;
		b = (b & 1) ? (b >> 1) ^ POLY_REFLECTED : b >> 1;
	}
	return prod;
}

#if defined(__x86_64__)
/* a * b * x^32 mod P. The 63-bit carry-less product, shifted left once, is a
 * 64-bit reflected polynomial; the crc32 instruction reduces it as a message,
 * which multiplies by x^32 on the way. */
__attribute__((target("pclmul,sse4.2"))) static uint32_t
mul_clmul(uint32_t a, uint32_t b)
{
	__m128i va = _mm_cvtsi32_si128((int)a);
	__m128i vb = _mm_cvtsi32_si128((int)b);
	uint64_t prod = (uint64_t)_mm_cvtsi128_si64(_mm_clmulepi64_si128(va, vb, 0));

	return (uint32_t)_mm_crc32_u64(0, prod << 1);
}
#endif

static uint32_t xpow8n_portable(uint64_t n)
{
	uint32_t r = X0;

	for (int k = 0; k < 4 && n != 0; k++, n >>= 8)
		if (n & 0xff)
			r = km_crc32c_mulmod(r, pow_tab[k][n & 0xff]);
	return r;
}

uint32_t km_crc32c_xpow8n(uint64_t n)
{
	KM_ASSERT(n <= UINT32_MAX);
	return xpow8n_portable(n);
}

/* raw * x^(8 * tail) mod P, portable. */
static uint32_t shift_bytes(uint32_t raw, uint32_t tail)
{
	return km_crc32c_mulmod(raw, xpow8n_portable(tail));
}

#if defined(__x86_64__)
/* The whole patch on SSE4.2 + PCLMUL, in one function so mul_clmul inlines.
 * The raw CRC of the delta comes from the crc32 instruction: for 8 bytes an
 * ISA-L call costs ~20 ns of dispatch and small-buffer setup, the
 * instruction ~1 ns (bench-batch). */
__attribute__((target("pclmul,sse4.2"))) static uint32_t
patch_clmul(uint32_t crc, uint32_t tail, const unsigned char *o,
	    const unsigned char *n, size_t len)
{
	uint64_t raw = 0;

	for (; len >= 8; o += 8, n += 8, len -= 8) {
		uint64_t wo, wn;

		memcpy(&wo, o, 8);
		memcpy(&wn, n, 8);
		raw = _mm_crc32_u64(raw, wo ^ wn);
	}
	for (; len > 0; o++, n++, len--)
		raw = _mm_crc32_u8((uint32_t)raw, (uint8_t)(*o ^ *n));
	for (int k = 0; k < 4 && tail != 0; k++, tail >>= 8)
		if (tail & 0xff)
			raw = mul_clmul((uint32_t)raw, clmul_tab[k][tail & 0xff]);
	return crc ^ (uint32_t)raw;
}
#endif

uint32_t km_crc32c_patch(uint32_t crc, size_t tail_bytes, const void *old_bytes,
			 const void *new_bytes, size_t len)
{
	const unsigned char *o = old_bytes;
	const unsigned char *n = new_bytes;
	unsigned char delta[KM_CRC_PATCH_BYTES_MAX];

	KM_ASSERT(len <= KM_CRC_PATCH_BYTES_MAX);
	KM_ASSERT(tail_bytes <= UINT32_MAX);
#if defined(__x86_64__)
	if (use_clmul)
		return patch_clmul(crc, (uint32_t)tail_bytes, o, n, len);
#endif
	for (size_t i = 0; i < len; i++)
		delta[i] = o[i] ^ n[i];
	/* Zero init, no inversion: the raw CRC of the delta alone. */
	return crc ^ shift_bytes(crc_raw(delta, (int)len, 0),
				 (uint32_t)tail_bytes);
}

static uint32_t x_inverse_pow32(void)
{
	/* x^-1 = (P + 1) / x: P's coefficients shifted down one degree. */
	uint32_t xinv = (POLY_REFLECTED << 1) | 1u;
	uint32_t r = X0;

	for (int i = 0; i < 32; i++)
		r = km_crc32c_mulmod(r, xinv);
	return r;
}

static void fill_tables(void)
{
	uint32_t base = X0 >> 8; /* x^8 */
	uint32_t xinv32 = x_inverse_pow32();

	for (int k = 0; k < 4; k++) {
		pow_tab[k][0] = X0;
		for (int v = 1; v < 256; v++)
			pow_tab[k][v] = km_crc32c_mulmod(pow_tab[k][v - 1], base);
		for (int v = 0; v < 256; v++)
			clmul_tab[k][v] = km_crc32c_mulmod(pow_tab[k][v], xinv32);
		/* Next table's step is x^(8 * 256^(k+1)) = base^256. */
		base = km_crc32c_mulmod(pow_tab[k][255], base);
	}
}

/* Tables are filled before main() so the patch path never checks for them. */
__attribute__((constructor)) static void crc32c_init(void)
{
	fill_tables();
#if defined(__x86_64__)
	__builtin_cpu_init();
	use_clmul = __builtin_cpu_supports("pclmul") &&
		    __builtin_cpu_supports("sse4.2");
	use_vzeroupper = __builtin_cpu_supports("avx");
	use_stream = __builtin_cpu_supports("avx2");
#endif
}
