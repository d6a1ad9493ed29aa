/* Free space on data.dir. Under disk.free.min.bytes, mirroring pauses (the
 * fetch sessions end; the logs stay served and retention keeps running)
 * instead of failing halfway on ENOSPC. It resumes once free space is back
 * above the threshold plus a margin, so that a disk hovering at the line
 * does not flap. The pause is not persisted: a restart measures again. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statvfs.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"

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

void km_daemon_disk_reason(const struct km_daemon *d, char *out, size_t cap)
{
	snprintf(out, cap, "paused: %" PRIu64 " bytes free on data.dir, under "
		 "disk.free.min.bytes=%" PRIu64 "; mirroring resumes at %" PRIu64
		 " bytes free", d->disk_free, d->cfg->disk_free_min_bytes,
		 resume_at(d));
}

int km_daemon_disk_init(struct km_daemon *d)
{
	int rc;

	d->disk_paused = calloc(d->table.n ? d->table.n : 1, sizeof(bool));
	if (d->disk_paused == NULL)
		return -ENOMEM;
	if ((rc = measure(d)) < 0) {
		KM_ERROR("daemon", "data.dir %s: statvfs: %s", d->cfg->data_dir,
			 km_strerror(rc));
		return rc;
	}
	d->disk_low = d->disk_free < d->cfg->disk_free_min_bytes;
	return 0;
}

/* A partition about to mirror while space is short stays PAUSED instead;
 * true if it was held. */
bool km_daemon_disk_hold(struct km_daemon *d, uint32_t i)
{
	if (!d->disk_low)
		return false;
	d->mstates[i].state = KM_MSTATE_PAUSED;
	d->disk_paused[i] = true;
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

static void resume_all(struct km_daemon *d)
{
	for (uint32_t i = 0; i < d->table.n; i++) {
		if (!km_daemon_disk_held(d, i))
			continue;
		/* A session that cannot start stays held: tried again in a
		 * second. */
		d->mstates[i].state = KM_MSTATE_MIRRORING;
		if (km_daemon_start_fetch(d, i) < 0)
			d->mstates[i].state = KM_MSTATE_PAUSED;
		else
			d->disk_paused[i] = false;
	}
}

/* Once a second on the control thread. */
void km_daemon_watch_disk(struct km_daemon *d)
{
	char why[256];
	bool was = d->disk_low;

	if (measure(d) < 0 || d->cfg->disk_free_min_bytes == 0)
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
	if (d->disk_low)
		pause_all(d);
	else
		resume_all(d);
}
