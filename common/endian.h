/* Big-endian loads and stores: every fixed-width Kafka field is big-endian.
 * memcpy keeps them alignment-safe; compilers turn them into one bswap. */
#ifndef KM_COMMON_ENDIAN_H
#define KM_COMMON_ENDIAN_H

#include <stdint.h>
#include <string.h>

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "kmirror assumes a little-endian host (x86-64, arm64)"
#endif

#ifdef __cplusplus
extern "C" {
#endif

static inline uint16_t km_load_be16(const void *p)
{
	uint16_t v;
	memcpy(&v, p, sizeof(v));
	return __builtin_bswap16(v);
}

static inline uint32_t km_load_be32(const void *p)
{
	uint32_t v;
	memcpy(&v, p, sizeof(v));
	return __builtin_bswap32(v);
}

static inline uint64_t km_load_be64(const void *p)
{
	uint64_t v;
	memcpy(&v, p, sizeof(v));
	return __builtin_bswap64(v);
}

static inline void km_store_be16(void *p, uint16_t v)
{
	v = __builtin_bswap16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void km_store_be32(void *p, uint32_t v)
{
	v = __builtin_bswap32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void km_store_be64(void *p, uint64_t v)
{
	v = __builtin_bswap64(v);
	memcpy(p, &v, sizeof(v));
}

#ifdef __cplusplus
}
#endif

#endif
