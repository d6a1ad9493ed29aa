/* The one clock for timers, deadlines and rates: CLOCK_MONOTONIC in
 * milliseconds (never jumps with the wall clock); and the wall clock, for
 * what Kafka stores as a timestamp (records, commits, retention.ms). */
#ifndef KM_COMMON_CLOCK_H
#define KM_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t km_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline int64_t km_clock_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
