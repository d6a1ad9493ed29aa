/* C side of test_spsc.cc: common/spsc.h uses C11 atomics, which C++
 * cannot include. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/spsc.h"
#include "tests/unit/spsc_support.h"

struct run {
	struct km_spsc q;
	uint64_t n;
	uint64_t full_seen;	/* pushes refused: ring full */
};

static void *producer(void *arg)
{
	struct run *r = arg;

	/* A full ring waits for the consumer: yield the core to it rather
	 * than spin out the time slice (on 2 busy cores the two threads
	 * took turns a time slice at a time: 64 s under ASan at load 15). */
	for (uint64_t i = 1; i <= r->n; i++)
		while (!km_spsc_push(&r->q, (void *)(uintptr_t)i)) {
			r->full_seen++;
			sched_yield();
		}
	return NULL;
}

int km_test_spsc_init(uint32_t capacity)
{
	struct km_spsc q;
	void *slots[4];

	return km_spsc_init(&q, slots, capacity);
}

int km_test_spsc_fill(uint32_t capacity, uint32_t *pushed, int *fifo)
{
	void **slots = calloc(capacity, sizeof(void *));
	struct km_spsc q;
	uintptr_t want = 1;
	void *p;
	int rc;

	if (slots == NULL || (rc = km_spsc_init(&q, slots, capacity)) < 0) {
		free(slots);
		return -1;
	}
	*pushed = 0;
	while (km_spsc_push(&q, (void *)(uintptr_t)(*pushed + 1)))
		(*pushed)++;
	*fifo = 1;
	while ((p = km_spsc_pop(&q)) != NULL)
		*fifo &= (uintptr_t)p == want++;
	*fifo &= km_spsc_empty(&q);
	free(slots);
	return 0;
}

int km_test_spsc_threads(uint64_t n, uint32_t capacity, uint64_t *full_seen)
{
	void **slots = calloc(capacity, sizeof(void *));
	struct run r = { .n = n };
	pthread_t t;
	uint64_t want = 1;

	if (slots == NULL || km_spsc_init(&r.q, slots, capacity) < 0)
		return -1;
	pthread_create(&t, NULL, producer, &r);
	while (want <= n) {
		void *p = km_spsc_pop(&r.q);

		if (p == NULL) {
			sched_yield(); /* empty: the producer's turn */
			continue;
		}
		if ((uint64_t)(uintptr_t)p != want++)
			break;
	}
	pthread_join(t, NULL);
	free(slots);
	*full_seen = r.full_seen;
	return want == n + 1 ? 0 : -2;
}
