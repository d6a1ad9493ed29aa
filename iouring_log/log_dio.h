/* Direct I/O for the log's .log writes (log_dio.c): the worker's pool of
 * aligned write buffers, registered with its ring. Internal to
 * iouring_log/. */
#ifndef KM_IOURING_LOG_LOG_DIO_H
#define KM_IOURING_LOG_LOG_DIO_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/km_limits.h"
#include "iouring_log/log.h"
#include "iouring_log/uring.h"

/* O_DIRECT's unit here: write positions, lengths and buffer addresses are
 * multiples of it (the page size, a multiple of every block size met). */
#define KM_DIO_BLOCK 4096u
/* One write's buffer. Large enough that a busy partition's writes are
 * the device's efficient size, small enough that many partitions of a
 * worker each get one (log.h says why 2 MiB). */
#define KM_DIO_CHUNK_BYTES KM_LOG_DIO_BUFFER_BYTES
/* Buffers a worker may hold: the largest batch spans 32 of them. */
#define KM_DIO_CHUNKS_MAX 40u
/* Buffers kept allocated once free; more are given back (munmap). */
#define KM_DIO_CHUNKS_KEEP 2u

_Static_assert(KM_BATCH_BYTES_MAX / KM_DIO_CHUNK_BYTES + 4 <= KM_DIO_CHUNKS_MAX,
	       "the largest batch must fit the pool");

/* Tail slots per log: the buffers of its newest completed writes, kept
 * for readers (the tail cache, km_log_dio_read). */
#define KM_DIO_TAIL_SLOTS 2u

struct km_dio_chunk;

/* One cached range of a log's active segment: bytes [pos, pos + bytes) of
 * the segment based at base are chunk's first bytes. Readers on other
 * threads copy under the seqlock (seq odd while the owner changes it). */
struct km_dio_tail {
	_Atomic uint32_t seq;
	struct km_dio_chunk *chunk;
	int64_t base;
	uint64_t pos;
	uint32_t bytes;
};

struct km_dio_chunk {
	uint8_t *buf;		   /* KM_DIO_CHUNK_BYTES, page aligned; NULL: unmade */
	int index;		   /* slot in the ring's buffer table, -1: none */
	bool cold;		   /* pages given back, unregistered (free only) */
	struct km_dio_chunk *next; /* on the free list */
	struct km_dio_tail *tail;  /* the tail slot holding it, or NULL */
	uint64_t stamp;		   /* when it was kept (LRU among kept ones) */
};

struct km_dio_pool {
	struct km_dio_chunk chunks[KM_DIO_CHUNKS_MAX];
	struct km_dio_chunk *free;
	uint32_t n_free;
	uint32_t n_made;
	uint32_t n_kept;  /* held by tail slots */
	uint64_t clock;	  /* stamps kept chunks */
	bool registered;  /* the ring has a (sparse) buffer table */
};

/** A free buffer (made and registered on demand), or NULL if the pool is
 *  exhausted or out of memory. */
struct km_dio_chunk *km_dio_get(struct km_uring *u);

/** Give a buffer back. */
void km_dio_put(struct km_uring *u, struct km_dio_chunk *c);

/** Keep c (just written) in the empty tail slot t, whose range the caller
 *  sets under an odd sequence; at most max_kept chunks of the pool are kept: beyond, the oldest kept
 *  one is given back first (idle partitions' tails go first). */
void km_dio_keep(struct km_uring *u, struct km_dio_chunk *c,
		 struct km_dio_tail *t, uint32_t max_kept);

/** Empty tail slot t, giving its chunk back. */
void km_dio_tail_drop(struct km_uring *u, struct km_dio_tail *t);

/** Buffers km_dio_get could still hand out. */
uint32_t km_dio_available(const struct km_uring *u);

/** Free the ring's pool (km_uring_exit). */
void km_dio_pool_free(struct km_uring *u);

#endif
