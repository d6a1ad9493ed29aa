#include "common/chain.h"

#include <errno.h>
#include <string.h>

#include "common/crc32c.h"

static size_t seg_len(const struct km_chain *c, uint32_t seg)
{
	return c->iov[seg].iov_len;
}

/* Skip past exhausted and empty segments so cur names a real byte or the end. */
static void normalise(const struct km_chain *c, struct km_chain_cur *cur)
{
	while (cur->seg < c->n_iov && cur->off >= seg_len(c, cur->seg)) {
		cur->seg++;
		cur->off = 0;
	}
}

struct km_chain_cur km_chain_start(const struct km_chain *c)
{
	struct km_chain_cur cur = { 0, 0 };

	normalise(c, &cur);
	return cur;
}

bool km_chain_has(const struct km_chain *c, struct km_chain_cur cur, size_t len)
{
	size_t have = 0;

	for (uint32_t s = cur.seg; s < c->n_iov && have < len; s++)
		have += seg_len(c, s) - (s == cur.seg ? cur.off : 0);
	return have >= len;
}

int km_chain_advance(const struct km_chain *c, struct km_chain_cur *cur,
		     size_t n)
{
	while (n > 0 && cur->seg < c->n_iov) {
		size_t left = seg_len(c, cur->seg) - cur->off;
		size_t step = n < left ? n : left;

		cur->off += (uint32_t)step;
		n -= step;
		normalise(c, cur);
	}
	return n == 0 ? 0 : -ERANGE;
}

struct km_chain_cur km_chain_next_far(const struct km_chain *c,
				      struct km_chain_cur cur, size_t n)
{
	(void)km_chain_advance(c, &cur, n);
	return cur;
}

/* Visit len bytes from cur segment by segment; returns bytes visited. */
static size_t walk(const struct km_chain *c, struct km_chain_cur cur,
		   size_t len,
		   void (*fn)(void *ctx, unsigned char *p, size_t n), void *ctx)
{
	size_t done = 0;

	normalise(c, &cur);
	while (done < len && cur.seg < c->n_iov) {
		unsigned char *p = (unsigned char *)c->iov[cur.seg].iov_base;
		size_t left = seg_len(c, cur.seg) - cur.off;
		size_t n = len - done < left ? len - done : left;

		fn(ctx, p + cur.off, n);
		done += n;
		cur.off += (uint32_t)n;
		normalise(c, &cur);
	}
	return done;
}

static void copy_out(void *ctx, unsigned char *p, size_t n)
{
	unsigned char **dst = ctx;

	memcpy(*dst, p, n);
	*dst += n;
}

static void copy_in(void *ctx, unsigned char *p, size_t n)
{
	const unsigned char **src = ctx;

	memcpy(p, *src, n);
	*src += n;
}

size_t km_chain_copy(const struct km_chain *c, struct km_chain_cur cur,
		     void *dst, size_t len)
{
	unsigned char *d = dst;

	return walk(c, cur, len, copy_out, &d);
}

size_t km_chain_store(const struct km_chain *c, struct km_chain_cur cur,
		      const void *src, size_t len)
{
	const unsigned char *s = src;

	return walk(c, cur, len, copy_in, &s);
}

/* Segments are often one frame each, scattered through a pool (DPDK mbufs)
 * and no longer in cache when a whole batch is checked: the hardware
 * prefetcher does not follow them, so the CRC waits on memory at every
 * segment. Asking for the segment after next while summing this one keeps
 * the loads ahead; a segment's first 2 KiB is enough, the prefetcher
 * follows a contiguous run by itself. */
#define PREFETCH_AHEAD 2u
#define PREFETCH_BYTES 2048u

static void prefetch_seg(const struct km_chain *c, uint32_t seg)
{
	const char *p;
	size_t n;

	if (seg >= c->n_iov)
		return;
	p = (const char *)c->iov[seg].iov_base;
	n = seg_len(c, seg) < PREFETCH_BYTES ? seg_len(c, seg) : PREFETCH_BYTES;
	for (size_t o = 0; o < n; o += 64)
		__builtin_prefetch(p + o);
}

int km_chain_crc32c(const struct km_chain *c, struct km_chain_cur cur,
		    size_t len, uint32_t *crc)
{
	uint32_t v = 0;
	size_t done = 0;

	normalise(c, &cur);
	for (uint32_t k = 1; k < PREFETCH_AHEAD; k++)
		prefetch_seg(c, cur.seg + k);
	while (done < len && cur.seg < c->n_iov) {
		unsigned char *p = (unsigned char *)c->iov[cur.seg].iov_base;
		size_t left = seg_len(c, cur.seg) - cur.off;
		size_t n = len - done < left ? len - done : left;

		prefetch_seg(c, cur.seg + PREFETCH_AHEAD);
		v = km_crc32c_update(v, p + cur.off, n);
		done += n;
		cur.off += (uint32_t)n;
		normalise(c, &cur);
	}
	if (done != len)
		return -ERANGE;
	*crc = v;
	return 0;
}

void *km_chain_contig(const struct km_chain *c, struct km_chain_cur cur,
		      size_t len)
{
	normalise(c, &cur);
	if (cur.seg >= c->n_iov || seg_len(c, cur.seg) - cur.off < len)
		return NULL;
	return (unsigned char *)c->iov[cur.seg].iov_base + cur.off;
}
