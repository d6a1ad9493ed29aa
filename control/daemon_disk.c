/* Free space on data.dir. Under disk.free.min.bytes, mirroring pauses (the
 * fetch sessions end; the logs stay served and retention keeps running)
 * instead of failing halfway on ENOSPC. It resumes once free space is back
 * above the threshold plus a margin, so that a disk hovering at the line
 * does not flap. The pause is not persisted: a restart measures again.
 *
 * A full disk can still refuse an append: the threshold is 0 (off), or
 * lower than what a burst writes before the next look. Then the log
 * appends the whole batches that fit and refuses the rest with the log
 * unchanged (iouring_log/log.h), the fetcher reports it (its state
 * KM_PART_FETCH_NOSPACE, with the reason), and the partition takes the
 * same PAUSED-for-space state, with that reason. It resumes by itself when
 * free space is above the threshold's resume point and has grown by
 * REGROW_BYTES since the refusal: a disk that stays full is not retried
 * every second, one that gets space back is without an operator. The
 * owner repairs the log, if it must, before the new fetcher appends
 * (km_log_clear_error). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"

/* Growth of free space since a refused append before it is tried again. */
#define REGROW_BYTES (1ull << 20)

static uint64_t resume_at(const struct km_daemon *d)
{
	uint64_t min = d->cfg->disk_free_min_bytes;

	return min + min / 4;
}

static int measure(struct km_daemon *d)
{
	struct statvfs sv;

	if (statvfs(d->cfg->data_dir, &sv) < 0)
		return -errno;
	d->disk_free = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

/* Free space partition i's refused append waits for. */
static uint64_t refused_resume_at(const struct km_daemon *d, uint32_t i)
{
	uint64_t grown = d->disk_holds[i].free_at + REGROW_BYTES;

	return grown > resume_at(d) ? grown : resume_at(d);
}

void km_daemon_disk_reason(const struct km_daemon *d, char *out, size_t cap)
{
	snprintf(out, cap, "paused: %" PRIu64 " bytes free on data.dir, under "
		 "disk.free.min.bytes=%" PRIu64 "; mirroring resumes at %" PRIu64
		 " bytes free", d->disk_free, d->cfg->disk_free_min_bytes,
		 resume_at(d));
}

void km_daemon_disk_part_reason(const struct km_daemon *d, uint32_t i,
				char *out, size_t cap)
{
	const struct km_daemon_disk_hold *h = &d->disk_holds[i];

	if (!h->refused) {
		km_daemon_disk_reason(d, out, cap);
		return;
	}
	snprintf(out, cap, "paused: data.dir is full: %s; mirroring resumes at "
		 "%" PRIu64 " bytes free (%" PRIu64 " now)", h->why,
		 refused_resume_at(d, i), d->disk_free);
}

int km_daemon_disk_init(struct km_daemon *d)
{
	int rc;

	d->disk_holds = calloc(d->table.cap,
			       sizeof(*d->disk_holds));
	if (d->disk_holds == NULL)
		return -ENOMEM;
	if ((rc = measure(d)) < 0) {
		KM_ERROR("daemon", "data.dir %s: statvfs: %s", d->cfg->data_dir,
			 km_strerror(rc));
		return rc;
	}
	d->disk_low = d->disk_free < d->cfg->disk_free_min_bytes;
	return 0;
}

bool km_daemon_disk_pausing(const struct km_daemon *d)
{
	if (d->disk_low)
		return true;
	for (uint32_t i = 0; i < d->table.n; i++)
		if (km_daemon_disk_held(d, i))
			return true;
	return false;
}

void km_daemon_disk_release(struct km_daemon *d, uint32_t i)
{
	d->disk_holds[i].paused = d->disk_holds[i].refused = false;
}

static void hold(struct km_daemon *d, uint32_t i)
{
	d->mstates[i].state = KM_MSTATE_PAUSED;
	d->disk_holds[i].paused = true;
}

/* A partition about to mirror while space is short stays PAUSED instead;
 * true if it was held. */
bool km_daemon_disk_hold(struct km_daemon *d, uint32_t i)
{
	if (!d->disk_low)
		return false;
	hold(d, i);
	d->disk_holds[i].refused = false;
	return true;
}

static void pause_all(struct km_daemon *d)
{
	for (uint32_t i = 0; i < d->table.n; i++) {
		struct km_part *p = &d->table.parts[i];
		int rc;

		if (!d->mirrored[i] || d->mstates[i].state != KM_MSTATE_MIRRORING)
			continue;
		if ((rc = km_daemon_pause_fetch(d, i)) < 0) {
			KM_ERROR("daemon", "partition %s-%d: pause for free "
				 "space: %s", p->topic, p->partition,
				 km_strerror(rc));
			continue;
		}
		km_daemon_disk_hold(d, i);
	}
}

/* Mirroring partitions whose fetcher had an append refused for space
 * move to PAUSED-for-space; they are not persisted (a restart measures
 * again, and its recovery finds the log as it is). */
static void hold_refused(struct km_daemon *d)
{
	for (uint32_t i = 0; i < d->table.n; i++) {
		struct km_part *p = &d->table.parts[i];
		struct km_daemon_disk_hold *h = &d->disk_holds[i];
		int rc;

		/* Acquire: the reason is written before the state. */
		if (!d->mirrored[i] || d->mstates[i].state != KM_MSTATE_MIRRORING ||
		    atomic_load_explicit(&p->stats.fetch_state,
					 memory_order_acquire) !=
			    KM_PART_FETCH_NOSPACE)
			continue;
		snprintf(h->why, sizeof(h->why), "%s", p->stats.reason);
		if ((rc = km_daemon_pause_fetch(d, i)) < 0) {
			KM_ERROR("daemon", "partition %s-%d: pause for free "
				 "space: %s", p->topic, p->partition,
				 km_strerror(rc));
			continue;
		}
		hold(d, i);
		h->refused = true;
		h->free_at = d->disk_free;
		KM_WARN("daemon", "partition %s-%d: paused, data.dir is full: "
			"%s; mirroring resumes at %" PRIu64 " bytes free",
			p->topic, p->partition, h->why, refused_resume_at(d, i));
	}
}

static void resume_all(struct km_daemon *d)
{
	for (uint32_t i = 0; i < d->table.n; i++) {
		struct km_daemon_disk_hold *h = &d->disk_holds[i];

		if (!km_daemon_disk_held(d, i) ||
		    (h->refused && d->disk_free < refused_resume_at(d, i)))
			continue;
		/* A session that cannot start (its log not repaired yet)
		 * stays held: tried again in a second. */
		d->mstates[i].state = KM_MSTATE_MIRRORING;
		if (km_daemon_start_fetch(d, i) < 0) {
			d->mstates[i].state = KM_MSTATE_PAUSED;
			continue;
		}
		if (h->refused)
			KM_INFO("daemon", "partition %s-%d: mirroring resumes: "
				"%" PRIu64 " bytes free on data.dir",
				d->table.parts[i].topic,
				d->table.parts[i].partition, d->disk_free);
		h->paused = h->refused = false;
	}
}

/* The disk.free.min.bytes threshold, with its margin; off at 0. */
static void watch_threshold(struct km_daemon *d)
{
	char why[256];
	bool was = d->disk_low;

	if (d->cfg->disk_free_min_bytes == 0)
		return;
	if (d->disk_free < d->cfg->disk_free_min_bytes)
		d->disk_low = true;
	else if (d->disk_free >= resume_at(d))
		d->disk_low = false;
	if (d->disk_low && !was) {
		km_daemon_disk_reason(d, why, sizeof(why));
		KM_WARN("daemon", "mirroring %s", why);
	} else if (!d->disk_low && was) {
		KM_INFO("daemon", "mirroring resumes: %" PRIu64 " bytes free on "
			"data.dir", d->disk_free);
	}
}

/* Once a second on the control thread. */
void km_daemon_watch_disk(struct km_daemon *d)
{
	if (measure(d) < 0)
		return;
	watch_threshold(d);
	hold_refused(d);
	if (d->disk_low)
		pause_all(d);
	else
		resume_all(d);
}
