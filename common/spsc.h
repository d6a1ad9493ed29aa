/* Single-producer single-consumer ring of pointers, between two threads.
 *
 * The cross-thread channel of DESIGN.md ("no locks on the hot path"): one
 * ring per (sender, receiver) pair, so each end has exactly one writer.
 * The producer owns `head`, the consumer owns `tail`; each publishes its
 * index with a release store and reads the other's with an acquire load,
 * which orders the slot's contents (and what the pointer points to) with
 * the index. Indexes run freely and wrap; capacity is a power of two.
 */
#ifndef KM_COMMON_SPSC_H
#define KM_COMMON_SPSC_H

#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct km_spsc {
	alignas(64) _Atomic uint32_t head; /* next slot to fill: producer */
	alignas(64) _Atomic uint32_t tail; /* next slot to drain: consumer */
	alignas(64) uint32_t mask;
	void **slots;
};

/**
 * Set up a ring over slots[capacity] (caller-owned memory).
 * @return 0, or -EINVAL unless capacity is a power of two >= 2.
 */
int km_spsc_init(struct km_spsc *q, void **slots, uint32_t capacity);

/** Producer side. @return true if p was queued, false if the ring is full. */
static inline bool km_spsc_push(struct km_spsc *q, void *p)
{
	uint32_t h = atomic_load_explicit(&q->head, memory_order_relaxed);
	uint32_t t = atomic_load_explicit(&q->tail, memory_order_acquire);

	if (h - t > q->mask)
		return false;
	q->slots[h & q->mask] = p;
	atomic_store_explicit(&q->head, h + 1, memory_order_release);
	return true;
}

/** Consumer side. @return the oldest pointer, or NULL if empty. */
static inline void *km_spsc_pop(struct km_spsc *q)
{
	uint32_t t = atomic_load_explicit(&q->tail, memory_order_relaxed);
	uint32_t h = atomic_load_explicit(&q->head, memory_order_acquire);
	void *p;

	if (t == h)
		return NULL;
	p = q->slots[t & q->mask];
	atomic_store_explicit(&q->tail, t + 1, memory_order_release);
	return p;
}

/** Either side: true if nothing is queued (a snapshot). */
static inline bool km_spsc_empty(struct km_spsc *q)
{
	return atomic_load_explicit(&q->head, memory_order_acquire) ==
	       atomic_load_explicit(&q->tail, memory_order_acquire);
}

#ifdef __cplusplus
}
#endif

#endif
