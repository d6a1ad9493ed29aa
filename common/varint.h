/* Kafka's variable-length integers: ZigZag then LEB128 (7 bits a byte, low
 * group first, MSB = continuation). "varint" is 32-bit (at most 5 bytes),
 * "varlong" 64-bit (at most 10); unsigned varints carry compact lengths. */
#ifndef KM_COMMON_VARINT_H
#define KM_COMMON_VARINT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KM_VARINT_BYTES_MAX 5
#define KM_VARLONG_BYTES_MAX 10

/**
 * Decode an unsigned LEB128 of at most max_bytes bytes from buf[0..len).
 * @return bytes consumed (> 0), 0 if buf ends inside the number, or
 *         KM_EVARINT if it runs past max_bytes or overflows 64 bits.
 */
int km_varint_decode_u64(const uint8_t *buf, size_t len, size_t max_bytes,
			 uint64_t *out);

/** ZigZag varint (int32). Returns as km_varint_decode_u64. */
int km_varint_decode_s32(const uint8_t *buf, size_t len, int32_t *out);

/** ZigZag varlong (int64). Returns as km_varint_decode_u64. */
int km_varint_decode_s64(const uint8_t *buf, size_t len, int64_t *out);

/** Encode unsigned LEB128; buf needs KM_VARLONG_BYTES_MAX. Returns bytes. */
int km_varint_encode_u64(uint8_t *buf, uint64_t v);

/** Encode ZigZag varint (int32). Returns bytes written (<= 5). */
int km_varint_encode_s32(uint8_t *buf, int32_t v);

/** Encode ZigZag varlong (int64). Returns bytes written (<= 10). */
int km_varint_encode_s64(uint8_t *buf, int64_t v);

/** Bytes the ZigZag varint encoding of v takes. */
int km_varint_size_s32(int32_t v);

#ifdef __cplusplus
}
#endif

#endif
