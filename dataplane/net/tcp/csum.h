/* Internet checksum (RFC 1071) over flat buffers and buffer chains.
 *
 * Sums are kept in host order (16-bit little-endian loads): the one's
 * complement sum is byte-order independent (RFC 1071 2.B), so storing the
 * folded result with a native 16-bit store puts it in network order. A
 * chain segment that starts at an odd stream offset has its sum byte-swapped
 * before it is added (RFC 1071 2.B again), so chains split anywhere work.
 */
#ifndef KM_DATAPLANE_TCP_CSUM_H
#define KM_DATAPLANE_TCP_CSUM_H

#include <stddef.h>
#include <stdint.h>

#include "common/chain.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Add len bytes at p (taken to start at an even offset) to sum. */
uint32_t km_csum_add(uint32_t sum, const void *p, size_t len);

/**
 * Add len bytes of a chain from cur to sum.
 * @return 0 and *sum updated, or -ERANGE if fewer than len bytes follow.
 */
int km_csum_chain(const struct km_chain *c, struct km_chain_cur cur,
		  size_t len, uint32_t *sum);

/** Sum of the IPv4 pseudo-header (RFC 9293 3.1): addresses in host order. */
uint32_t km_csum_pseudo(uint32_t src, uint32_t dst, uint8_t proto,
			uint16_t l4_len);

/** Fold to 16 bits (not complemented): what offload wants in the field. */
uint16_t km_csum_fold(uint32_t sum);

/** The checksum field value: the complement of the folded sum. A buffer
 *  that includes a correct checksum field gives 0. */
static inline uint16_t km_csum_final(uint32_t sum)
{
	return (uint16_t)~km_csum_fold(sum);
}

#ifdef __cplusplus
}
#endif

#endif
