/* The shared fetch-rate cap: one GCRA word per bucket. See throttle.h. */
#include "dataplane/fetch/throttle.h"

#include <time.h>

#define US_PER_S 1000000u

uint64_t km_throttle_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * US_PER_S + (uint64_t)ts.tv_nsec / 1000u;
}

void km_throttle_init(struct km_throttle *t, uint64_t rate)
{
	atomic_init(&t->rate, rate);
	atomic_init(&t->tat_us, 0);
	atomic_init(&t->throttled_us, 0);
	atomic_init(&t->source_ms, 0);
	atomic_init(&t->source_n, 0);
	atomic_init(&t->received, 0);
}

void km_throttle_set_rate(struct km_throttle *t, uint64_t rate)
{
	atomic_store_explicit(&t->rate, rate, memory_order_relaxed);
}

bool km_throttle_on(const struct km_throttle *t)
{
	return t != NULL &&
	       atomic_load_explicit(&t->rate, memory_order_relaxed) != 0;
}

uint32_t km_throttle_wait_ms(struct km_throttle *t, uint64_t now_us)
{
	uint64_t tat;

	if (!km_throttle_on(t))
		return 0;
	tat = atomic_load_explicit(&t->tat_us, memory_order_relaxed);
	if (tat <= now_us)
		return 0;
	/* Rounded up: a wait of 0 would spin on a bucket still in debt. */
	return (uint32_t)((tat - now_us + 999u) / 1000u);
}

int32_t km_throttle_allow(struct km_throttle *t, uint64_t now_us,
			  int32_t max)
{
	uint64_t rate, tat, us = 0, bytes;

	if (t == NULL ||
	    (rate = atomic_load_explicit(&t->rate, memory_order_relaxed)) == 0)
		return max;
	tat = atomic_load_explicit(&t->tat_us, memory_order_relaxed);
	if (now_us > tat)
		us = now_us - tat < KM_THROTTLE_BURST_US ? now_us - tat
							 : KM_THROTTLE_BURST_US;
	if (us < KM_THROTTLE_CHUNK_US)
		us = KM_THROTTLE_CHUNK_US;
	/* The config bounds rate to 2^40 (a TiB/s): no overflow here. */
	bytes = rate * us / US_PER_S;
	if (bytes == 0)
		bytes = 1;
	return bytes < (uint64_t)max ? (int32_t)bytes : max;
}

void km_throttle_charge(struct km_throttle *t, uint64_t bytes,
			uint64_t asked_us, uint64_t now_us)
{
	uint64_t rate, old, start, next, from, cost;

	if (t == NULL || bytes == 0)
		return;
	atomic_fetch_add_explicit(&t->received, bytes, memory_order_relaxed);
	if ((rate = atomic_load_explicit(&t->rate, memory_order_relaxed)) == 0)
		return;
	cost = bytes * US_PER_S / rate;
	old = atomic_load_explicit(&t->tat_us, memory_order_relaxed);
	do {
		/* An idle bucket keeps at most the burst's credit, as it
		 * stood when the bytes were asked for: a slow answer does
		 * not forfeit the credit it was sent with. */
		start = old + KM_THROTTLE_BURST_US < asked_us
				? asked_us - KM_THROTTLE_BURST_US : old;
		next = start + cost;
	} while (!atomic_compare_exchange_weak_explicit(
			&t->tat_us, &old, next, memory_order_relaxed,
			memory_order_relaxed));
	/* Held back: the stretch of [now, next] that was not already owed,
	 * so that sessions charging together count each moment once. */
	from = old > now_us ? old : now_us;
	if (next > from)
		atomic_fetch_add_explicit(&t->throttled_us, next - from,
					  memory_order_relaxed);
}

void km_throttle_source(struct km_throttle *t, int32_t ms)
{
	if (t == NULL || ms <= 0)
		return;
	atomic_fetch_add_explicit(&t->source_ms, (uint64_t)ms,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&t->source_n, 1, memory_order_relaxed);
}

void km_throttle_get_stats(const struct km_throttle *t,
			   struct km_throttle_stats *out)
{
	out->rate = atomic_load_explicit(&t->rate, memory_order_relaxed);
	out->throttled_ms = atomic_load_explicit(&t->throttled_us,
						 memory_order_relaxed) / 1000u;
	out->source_throttle_ms = atomic_load_explicit(&t->source_ms,
						       memory_order_relaxed);
	out->source_throttles = atomic_load_explicit(&t->source_n,
						     memory_order_relaxed);
	out->received_bytes = atomic_load_explicit(&t->received,
						   memory_order_relaxed);
}
