/* A fetch-rate cap shared by every worker (mirror.throttle.bytes.per.sec,
 * per host or per topic; issue 19 item 8), and the count of the source's
 * own throttling (Fetch throttle_time_ms, KIP-219).
 *
 * One bucket is one atomic "theoretical arrival time" (GCRA, the token
 * bucket of ATM traffic shaping, RFC 2697's single-rate form): what comes
 * from the source is charged as it arrives - the host's bucket every
 * answer of a fetch session whole (its length prefix, headers, every
 * partition's part, aborted-transaction lists, batches skipped as
 * duplicates or cut at the answer's end and fetched again), a topic's
 * bucket its partitions' record sets as received - moving the time forward by
 * bytes / rate; no partition of the bucket is named in a Fetch while that
 * time is ahead of the clock. Every worker charges and checks the same word
 * with a compare-and-swap, so the rate holds across workers with no lock
 * and no rebalancing by the control thread; an idle bucket saves at most
 * KM_THROTTLE_BURST_US of credit. Nothing is dropped or split: a Fetch
 * waits, and asks for at most what the bucket allows (at least
 * KM_THROTTLE_CHUNK_US worth, so that a slow rate still fetches in useful
 * pieces; Kafka returns the first batch whole whatever the limit).
 *
 * A rate of 0 is no cap: a fetch session then pays one relaxed load per
 * check. The rate may change at any time (km_throttle_set_rate). The
 * control thread owns the buckets (they outlive the workers) and reads
 * their figures.
 */
#ifndef KM_DATAPLANE_THROTTLE_H
#define KM_DATAPLANE_THROTTLE_H

#ifndef __cplusplus
#include <stdatomic.h>
#endif
#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Credit an idle bucket keeps, and the least a Fetch may ask for. */
#define KM_THROTTLE_BURST_US 100000u
#define KM_THROTTLE_CHUNK_US 100000u

/* Visible for sizeof only: every field is private. C++ (tests, which
 * only allocate it and call the functions) sees plain words of the same
 * size and alignment (STYLE 8: every public header compiles as C++). */
#ifdef __cplusplus
#define KM_THROTTLE_ATOMIC
#else
#define KM_THROTTLE_ATOMIC _Atomic
#endif
struct km_throttle {
	KM_THROTTLE_ATOMIC uint64_t rate;	  /* bytes per second; 0: none */
	KM_THROTTLE_ATOMIC uint64_t tat_us;	  /* when the charges are paid */
	KM_THROTTLE_ATOMIC uint64_t throttled_us; /* a Fetch was held back */
	KM_THROTTLE_ATOMIC uint64_t source_ms;	  /* the source's throttle_time_ms */
	KM_THROTTLE_ATOMIC uint64_t source_n;	  /* ... answers carrying one */
	KM_THROTTLE_ATOMIC uint64_t received;	  /* bytes charged, capped or not */
};
#undef KM_THROTTLE_ATOMIC

struct km_throttle_stats {
	uint64_t rate;			/* configured; 0: none */
	uint64_t throttled_ms;		/* held back by this cap */
	uint64_t source_throttle_ms;	/* the source asked to wait */
	uint64_t source_throttles;	/* answers that asked */
	uint64_t received_bytes;	/* charged: received from the source */
};

/** The monotonic clock in microseconds. */
uint64_t km_throttle_now_us(void);

/** A bucket with rate bytes per second (0: no cap). */
void km_throttle_init(struct km_throttle *t, uint64_t rate);

/** Change the rate (any thread); 0 lifts the cap. */
void km_throttle_set_rate(struct km_throttle *t, uint64_t rate);

/** True when t caps anything (t may be NULL). */
bool km_throttle_on(const struct km_throttle *t);

/** Milliseconds until a Fetch may name the bucket's partitions: 0 now
 *  (or no cap), else at least 1. */
uint32_t km_throttle_wait_ms(struct km_throttle *t, uint64_t now_us);

/** The bytes a Fetch sent now may ask for, at most max: the credit, and
 *  at least KM_THROTTLE_CHUNK_US worth (max when no cap). */
int32_t km_throttle_allow(struct km_throttle *t, uint64_t now_us,
			  int32_t max);

/** An answer to a request sent at asked_us brought bytes from the source:
 *  counted (received_bytes) whether or not a cap is set, and with a cap
 *  the next Fetch waits for them. The credit is reckoned at asked_us, so
 *  that the time the request was on the way is not lost credit. */
void km_throttle_charge(struct km_throttle *t, uint64_t bytes,
			uint64_t asked_us, uint64_t now_us);

/** The source answered with throttle_time_ms = ms (> 0). */
void km_throttle_source(struct km_throttle *t, int32_t ms);

void km_throttle_get_stats(const struct km_throttle *t,
			   struct km_throttle_stats *out);

#ifdef __cplusplus
}
#endif

#endif
