/* A FAILED partition whose cause may pass retries by itself (issue 19
 * item 6), on the control thread, once a second with the other watches.
 *
 * The fetcher says which failures are transient (km_fetcher_transient: the
 * source unreachable, no leader, not leader, timeouts, for
 * mirror.source.unavailable.ms). Such a partition is not persisted FAILED
 * (a restart simply mirrors again); after a backoff of
 * mirror.failed.retry.initial.backoff.ms, doubled per attempt up to
 * mirror.failed.retry.max.backoff.ms, with +-20% jitter as Kafka's
 * clients' exponential backoff has (partitions failed by one outage do
 * not retry in step), its fetcher is replaced by a new one on probation:
 * the first transient error before a good Fetch fails it again, so this
 * backoff, not the fetch session's, paces the attempts. A partition that
 * fetches again ends the series. After mirror.failed.retry.max.attempts
 * in a row (0: never), or for any other cause, FAILED is persisted and
 * waits for an operator (km_daemon_watch). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"

int km_daemon_retry_init(struct km_daemon *d)
{
	d->retries = calloc(d->table.cap, sizeof(*d->retries));
	return d->retries ? 0 : -ENOMEM;
}

/* xorshift64: jitter needs no quality, only that partitions differ. */
static uint64_t next_random(struct km_daemon *d)
{
	uint64_t x = d->retry_rng ? d->retry_rng : km_daemon_now_ms() | 1;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	d->retry_rng = x;
	return x;
}

/* The backoff before retry `attempt` (0 = the first). */
static uint64_t backoff_ms(struct km_daemon *d, uint32_t attempt)
{
	uint64_t b = d->cfg->failed_retry_initial_backoff_ms;
	uint64_t max = d->cfg->failed_retry_max_backoff_ms;
	uint64_t j;

	for (uint32_t k = 0; k < attempt && b < max; k++)
		b *= 2;
	if (b > max)
		b = max;
	j = b / 5;
	return b - j + (j ? next_random(d) % (2 * j + 1) : 0);
}

static bool exhausted(const struct km_daemon *d, const struct km_daemon_retry *r)
{
	return d->cfg->failed_retry_max_attempts != 0 &&
	       r->attempts >= d->cfg->failed_retry_max_attempts;
}

/* Replace the failed fetcher by one on probation. One that cannot be
 * started (no fetch session free, say) is tried again after the next
 * backoff: no fetcher would ever report FAILED to schedule it. */
static void retry_now(struct km_daemon *d, uint32_t i, uint64_t now)
{
	struct km_daemon_retry *r = &d->retries[i];
	struct km_part *p = &d->table.parts[i];
	int rc;

	r->attempts++;
	r->total++;
	r->next_ms = 0;
	KM_INFO("daemon", "partition %s-%d: retry %u of a transient FAILED "
		"(%s)", p->topic, p->partition, r->attempts, r->why);
	if ((rc = km_daemon_pause_fetch(d, i)) < 0 ||
	    (rc = km_daemon_start_fetch(d, i)) < 0) {
		r->next_ms = now + backoff_ms(d, r->attempts);
		KM_ERROR("daemon", "partition %s-%d: retry %u: %s; retry %u in "
			 "%" PRIu64 " ms", p->topic, p->partition, r->attempts,
			 km_strerror(rc), r->attempts + 1, r->next_ms - now);
	}
}

bool km_daemon_retry_watch(struct km_daemon *d, uint32_t i, int fetch_state)
{
	struct km_daemon_retry *r = &d->retries[i];
	struct km_part *p = &d->table.parts[i];
	uint64_t now;

	/* The clock only for a partition with a retry in view: this runs
	 * for every partition each second (issue 17). */
	if (r->next_ms != 0) { /* scheduled: nothing else to decide */
		if ((now = km_daemon_now_ms()) >= r->next_ms)
			retry_now(d, i, now);
		return true;
	}
	if (fetch_state == KM_PART_FETCH_MIRRORING && r->attempts != 0) {
		KM_INFO("daemon", "partition %s-%d: mirroring again after %u "
			"retries", p->topic, p->partition, r->attempts);
		r->attempts = 0;
	}
	if (fetch_state != KM_PART_FETCH_FAILED ||
	    !atomic_load_explicit(&p->stats.fetch_transient,
				  memory_order_relaxed))
		return false;
	if (exhausted(d, r)) {
		KM_ERROR("daemon", "partition %s-%d: FAILED after %u retries "
			 "(mirror.failed.retry.max.attempts): %s", p->topic,
			 p->partition, r->attempts, p->stats.reason);
		return false;
	}
	snprintf(r->why, sizeof(r->why), "%s", p->stats.reason);
	now = km_daemon_now_ms();
	r->next_ms = now + backoff_ms(d, r->attempts);
	/* One WARN per outage; its retries, up to one a minute per
	 * partition, at INFO. */
	KM_LOG(r->attempts == 0 ? KM_LOG_WARN : KM_LOG_INFO, "daemon",
	       "partition %s-%d: transient FAILED: %s; retry %u in %" PRIu64
	       " ms", p->topic, p->partition, r->why, r->attempts + 1,
	       r->next_ms - now);
	return true;
}

bool km_daemon_retry_active(const struct km_daemon *d, uint32_t i)
{
	return d->retries[i].attempts != 0 || d->retries[i].next_ms != 0;
}

void km_daemon_retry_reset(struct km_daemon *d, uint32_t i)
{
	d->retries[i].attempts = 0;
	d->retries[i].next_ms = 0;
}

void km_daemon_retry_status(const struct km_daemon *d, uint32_t i,
			    json_t *row)
{
	const struct km_daemon_retry *r = &d->retries[i];
	uint64_t now = km_daemon_now_ms();

	/* Columns only where there is something to say: a table of healthy
	 * partitions stays as narrow as before. */
	if (!d->mirrored[i] || r->total == 0)
		return;
	json_object_set_new(row, "retries", json_integer((json_int_t)r->total));
	if (r->attempts == 0 && r->next_ms == 0)
		return;
	json_object_set_new(row, "retry_attempt",
			    json_integer((json_int_t)r->attempts));
	json_object_set_new(row, "next_retry_ms",
			    r->next_ms == 0 ? json_null()
			    : json_integer((json_int_t)(r->next_ms > now
							? r->next_ms - now : 0)));
	json_object_set_new(row, "last_failure", json_string(r->why));
}
