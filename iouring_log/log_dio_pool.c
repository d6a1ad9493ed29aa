/* The worker's direct-I/O write buffers: one pool per ring, not per
 * partition, so that thousands of quiet partitions hold none (a partition
 * holds a buffer while its write is being filled or in flight, and, as
 * its tail cache, the buffers of its newest writes until the pool needs
 * them: the longest kept go first). The buffers are registered with the
 * ring as a sparse table filled as they are made, so a write does not pin
 * its pages each time (WRITE_FIXED); where registration is refused
 * (RLIMIT_MEMLOCK) plain writes are used.
 *
 * A buffer is never unmapped while the ring lives: a reader on another
 * thread may be copying from a kept one as the owner takes it back (the
 * tail slot's seqlock tells the reader to discard that copy). One given
 * back beyond KM_DIO_CHUNKS_KEEP free ones is unregistered, then its
 * pages dropped (MADV_DONTNEED; pinned pages must not be dropped under a
 * registration, which would keep writing the old ones). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/km_assert.h"
#include "iouring_log/log_dio.h"

static struct km_dio_pool *pool_of(struct km_uring *u)
{
	struct km_dio_pool *p = u->dio;

	if (p != NULL)
		return p;
	if ((p = calloc(1, sizeof(*p))) == NULL)
		return NULL;
	for (uint32_t i = 0; i < KM_DIO_CHUNKS_MAX; i++)
		p->chunks[i].index = -1;
	p->registered = io_uring_register_buffers_sparse(&u->ring,
							 KM_DIO_CHUNKS_MAX) == 0;
	u->dio = p;
	return p;
}

/* The ring's table slot of c names its buffer (on), or nothing. */
static void set_slot(struct km_uring *u, struct km_dio_chunk *c, bool on)
{
	uint32_t i = (uint32_t)(c - u->dio->chunks);
	struct iovec iov = { on ? c->buf : NULL, on ? KM_DIO_CHUNK_BYTES : 0 };
	__u64 tag = 0;

	c->index = -1;
	if (!u->dio->registered)
		return;
	if (io_uring_register_buffers_update_tag(&u->ring, i, &iov, &tag, 1) == 1 &&
	    on)
		c->index = (int)i;
}

static struct km_dio_chunk *make(struct km_uring *u, struct km_dio_pool *p)
{
	for (uint32_t i = 0; i < KM_DIO_CHUNKS_MAX; i++) {
		struct km_dio_chunk *c = &p->chunks[i];
		void *m;

		if (c->buf != NULL)
			continue;
		m = mmap(NULL, KM_DIO_CHUNK_BYTES, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		c->buf = m;
		set_slot(u, c, true);
		p->n_made++;
		return c;
	}
	return NULL;
}

/* Take c out of its tail slot: readers that copied from it meanwhile see
 * the slot's sequence move and discard the copy. */
static void unkeep(struct km_dio_pool *p, struct km_dio_chunk *c)
{
	struct km_dio_tail *t = c->tail;
	uint32_t seq = atomic_load_explicit(&t->seq, memory_order_relaxed);

	atomic_store_explicit(&t->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	t->chunk = NULL;
	t->bytes = 0;
	atomic_store_explicit(&t->seq, seq + 2, memory_order_release);
	c->tail = NULL;
	p->n_kept--;
}

static struct km_dio_chunk *oldest_kept(struct km_dio_pool *p)
{
	struct km_dio_chunk *best = NULL;

	for (uint32_t i = 0; i < KM_DIO_CHUNKS_MAX; i++) {
		struct km_dio_chunk *c = &p->chunks[i];

		if (c->tail != NULL && (best == NULL || c->stamp < best->stamp))
			best = c;
	}
	return best;
}

struct km_dio_chunk *km_dio_get(struct km_uring *u)
{
	struct km_dio_pool *p = pool_of(u);
	struct km_dio_chunk *c;

	if (p == NULL)
		return NULL;
	if ((c = p->free) != NULL) {
		p->free = c->next;
		p->n_free--;
		c->next = NULL;
		if (c->cold) {
			c->cold = false;
			set_slot(u, c, true);
		}
		return c;
	}
	if ((c = make(u, p)) != NULL)
		return c;
	if ((c = oldest_kept(p)) != NULL)
		unkeep(p, c);
	return c;
}

void km_dio_put(struct km_uring *u, struct km_dio_chunk *c)
{
	struct km_dio_pool *p = u->dio;

	KM_ASSERT(p != NULL && c->buf != NULL && c->tail == NULL);
	if (p->n_free >= KM_DIO_CHUNKS_KEEP && !c->cold) {
		/* A burst of huge batches is over: give its memory back. */
		set_slot(u, c, false);
		(void)madvise(c->buf, KM_DIO_CHUNK_BYTES, MADV_DONTNEED);
		c->cold = true;
	}
	c->next = p->free;
	p->free = c;
	p->n_free++;
}

void km_dio_tail_drop(struct km_uring *u, struct km_dio_tail *t)
{
	struct km_dio_chunk *c = t->chunk;

	if (c == NULL)
		return;
	unkeep(u->dio, c);
	km_dio_put(u, c);
}

void km_dio_keep(struct km_uring *u, struct km_dio_chunk *c,
		 struct km_dio_tail *t, uint32_t max_kept)
{
	struct km_dio_pool *p = u->dio;
	struct km_dio_chunk *old;

	KM_ASSERT(t->chunk == NULL && max_kept > 0);
	if (p->n_kept >= max_kept && (old = oldest_kept(p)) != NULL) {
		unkeep(p, old);
		km_dio_put(u, old);
	}
	c->tail = t;
	c->stamp = ++p->clock;
	p->n_kept++;
	/* The caller filled t's range under an odd sequence. */
	t->chunk = c;
}

uint32_t km_dio_available(const struct km_uring *u)
{
	const struct km_dio_pool *p = u->dio;

	return p == NULL ? KM_DIO_CHUNKS_MAX
			 : p->n_free + p->n_kept + KM_DIO_CHUNKS_MAX - p->n_made;
}

void km_dio_pool_free(struct km_uring *u)
{
	struct km_dio_pool *p = u->dio;

	if (p == NULL)
		return;
	for (uint32_t i = 0; i < KM_DIO_CHUNKS_MAX; i++)
		if (p->chunks[i].buf != NULL)
			munmap(p->chunks[i].buf, KM_DIO_CHUNK_BYTES);
	if (p->registered)
		(void)io_uring_unregister_buffers(&u->ring);
	free(p);
	u->dio = NULL;
}
