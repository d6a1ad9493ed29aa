/* Buffer chains: a byte stream held in several segments (struct iovec), as
 * kernel receive buffers and DPDK mbuf chains deliver it. Decoders address a
 * chain through a cursor and never assume the bytes are contiguous.
 *
 * Lifetime: a chain borrows its segments; they must outlive every view
 * (struct km_batch, struct km_record) built over it.
 */
#ifndef KM_COMMON_CHAIN_H
#define KM_COMMON_CHAIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

struct km_chain {
	const struct iovec *iov; /* segments in stream order; may be empty */
	uint32_t n_iov;
};

/* A position in a chain: byte off of segment seg. The end of the chain is
 * {n_iov, 0}; a cursor at the end of a segment is normalised to the start of
 * the next non-empty one. */
struct km_chain_cur {
	uint32_t seg;
	uint32_t off;
};

/** Cursor at the first byte of the chain (or at its end if it is empty). */
struct km_chain_cur km_chain_start(const struct km_chain *c);

/** True if at least len bytes follow cur. Walks at most len bytes' segments. */
bool km_chain_has(const struct km_chain *c, struct km_chain_cur cur, size_t len);

/**
 * Move cur forward by n bytes.
 * @return 0, or -ERANGE if fewer than n bytes follow (cur is then at the end).
 */
int km_chain_advance(const struct km_chain *c, struct km_chain_cur *cur,
		     size_t n);

/** km_chain_next's out-of-line part: a move that leaves cur's segment. */
struct km_chain_cur km_chain_next_far(const struct km_chain *c,
				      struct km_chain_cur cur, size_t n);

/**
 * cur moved forward by n bytes, as km_chain_advance moves it (to the end
 * at most), returned by value. For loops that step a cursor kept in
 * memory from batch to batch: km_chain_advance writes seg and off one by
 * one, and the next 8-byte read of the cursor cannot be forwarded from two
 * 4-byte stores, so it waits until they retire - behind the CRC of the
 * batch just parsed, which then no longer overlaps the next one (16 ns of
 * a 1 KiB batch's ~45 in bench-batch). One 8-byte store is forwarded.
 */
static inline struct km_chain_cur km_chain_next(const struct km_chain *c,
						struct km_chain_cur cur,
						size_t n)
{
	if (cur.seg < c->n_iov && c->iov[cur.seg].iov_len - cur.off > n) {
		cur.off += (uint32_t)n;
		return cur;
	}
	return km_chain_next_far(c, cur, n);
}

/** Copy up to len bytes from cur; returns how many were there to copy. */
size_t km_chain_copy(const struct km_chain *c, struct km_chain_cur cur,
		     void *dst, size_t len);

/** Overwrite up to len bytes at cur; returns how many were written. */
size_t km_chain_store(const struct km_chain *c, struct km_chain_cur cur,
		      const void *src, size_t len);

/**
 * Standard CRC-32C of len bytes from cur.
 * @return 0 and the CRC in *crc, or -ERANGE if fewer than len bytes follow.
 */
int km_chain_crc32c(const struct km_chain *c, struct km_chain_cur cur,
		    size_t len, uint32_t *crc);

/** Pointer to len contiguous bytes at cur, or NULL if they straddle segments. */
void *km_chain_contig(const struct km_chain *c, struct km_chain_cur cur,
		      size_t len);

#ifdef __cplusplus
}
#endif

#endif
