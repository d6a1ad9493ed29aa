/* CRC-32C (Castagnoli), the checksum of Kafka RecordBatch v2.
 *
 * Bulk computation runs on ISA-L's crc32_iscsi. km_crc32c_patch() updates a
 * CRC after a few bytes changed without reading the rest of the data: CRC is
 * linear over GF(2), so for two messages of equal length
 *   crc(A) ^ crc(B) = raw(A ^ B)
 * where raw is the CRC with zero init and no final xor. A ^ B is zero except
 * for the changed bytes, so raw(A ^ B) = raw(delta) * x^(8 * tail) mod P,
 * tail being the number of bytes after the change. The power of x comes from
 * four 256-entry tables (one per byte of tail), so a patch costs at most four
 * carry-less multiplies whatever the batch size.
 */
#ifndef KM_COMMON_CRC32C_H
#define KM_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Extend a standard CRC-32C over more bytes.
 *
 * Start with crc = 0; km_crc32c_update(0, "123456789", 9) == 0xE3069283.
 * Feeding a message in pieces gives the same result as feeding it whole.
 */
uint32_t km_crc32c_update(uint32_t crc, const void *buf, size_t len);

/**
 * Copy len bytes from src to dst and extend crc over them, as
 * km_crc32c_update(crc, dst, len) after memcpy(dst, src, len) would, but
 * in blocks small enough that the CRC reads each block of src from the L1
 * cache the copy just read it into: one pass over the bytes from memory
 * instead of two. dst is written with stores that go around the cache
 * (where the CPU has them, AVX2), for a destination not read soon, such
 * as a direct-I/O write buffer; they are fenced before the return. The
 * regions must not overlap.
 */
uint32_t km_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/**
 * CRC-32C of a message after len bytes of it changed from old to new.
 *
 * @param crc         CRC-32C of the message before the change.
 * @param tail_bytes  bytes of the message after the changed region, i.e. the
 *                    distance from the region's end to the end of the CRC
 *                    range. Must be below 2^32.
 * @param old_bytes   the region before the change.
 * @param new_bytes   the region after the change.
 * @param len         region length, at most KM_CRC_PATCH_BYTES_MAX.
 * @return the CRC-32C of the changed message. Reads nothing but the region.
 */
uint32_t km_crc32c_patch(uint32_t crc, size_t tail_bytes, const void *old_bytes,
			 const void *new_bytes, size_t len);

/**
 * x^(8 * n) mod P in the reflected representation CRC-32C uses (bit 31 is
 * the coefficient of x^0). Exposed for tests of the patch arithmetic.
 */
uint32_t km_crc32c_xpow8n(uint64_t n);

/** a * b mod P, portable bit-serial reference, reflected representation. */
uint32_t km_crc32c_mulmod(uint32_t a, uint32_t b);

#ifdef __cplusplus
}
#endif

#endif
