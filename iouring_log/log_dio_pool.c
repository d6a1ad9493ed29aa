/* The worker's direct-I/O write buffers: one pool per ring, not per
 * partition, so that thousands of quiet partitions hold none (a partition
 * holds a buffer only while its write is being filled or in flight). The
 * buffers are registered with the ring as a sparse table filled as they
 * are made, so a write does not pin its pages each time (WRITE_FIXED);
 * where registration is refused (RLIMIT_MEMLOCK) plain writes are used. */
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

/* Slot i of the ring's table names c's buffer (or nothing, buf NULL). */
static void set_slot(struct km_uring *u, uint32_t i, struct km_dio_chunk *c)
{
	struct iovec iov = { c->buf, c->buf ? KM_DIO_CHUNK_BYTES : 0 };
	__u64 tag = 0;

	c->index = -1;
	if (!u->dio->registered)
		return;
	if (io_uring_register_buffers_update_tag(&u->ring, i, &iov, &tag, 1) == 1 &&
	    c->buf != NULL)
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
		set_slot(u, i, c);
		p->n_made++;
		return c;
	}
	return NULL;
}

struct km_dio_chunk *km_dio_get(struct km_uring *u)
{
	struct km_dio_pool *p = pool_of(u);
	struct km_dio_chunk *c;

	if (p == NULL)
		return NULL;
	if ((c = p->free) == NULL)
		return make(u, p);
	p->free = c->next;
	p->n_free--;
	c->next = NULL;
	return c;
}

void km_dio_put(struct km_uring *u, struct km_dio_chunk *c)
{
	struct km_dio_pool *p = u->dio;

	KM_ASSERT(p != NULL && c->buf != NULL);
	if (p->n_free >= KM_DIO_CHUNKS_KEEP) {
		/* A burst of huge batches is over: give its memory back. */
		munmap(c->buf, KM_DIO_CHUNK_BYTES);
		c->buf = NULL;
		set_slot(u, (uint32_t)(c - p->chunks), c);
		p->n_made--;
		return;
	}
	c->next = p->free;
	p->free = c;
	p->n_free++;
}

uint32_t km_dio_available(const struct km_uring *u)
{
	const struct km_dio_pool *p = u->dio;

	return p == NULL ? KM_DIO_CHUNKS_MAX
			 : p->n_free + KM_DIO_CHUNKS_MAX - p->n_made;
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
