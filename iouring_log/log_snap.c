/* Producer snapshots of the partition directory, `<offset>.snapshot`
 * (Kafka's format, pstate_codec.c): the state before the batch at offset.
 * Written at each roll (log_io.c) and at a clean close or checkpoint; read
 * back by recovery and truncation, which start from the newest usable one;
 * deleted when unusable, or when what they describe is cut (recovery,
 * truncation) or dropped (retention).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

static void snap_name(char *name, size_t size, int64_t offset)
{
	snprintf(name, size, "%020lld.snapshot", (long long)offset);
}

int km_log_snap_write_encoded(struct km_log *log, int64_t offset, size_t len)
{
	char name[64];

	snap_name(name, sizeof(name), offset);
	return km_log_write_text_atomic(log, name, (const char *)log->snap_buf,
					len);
}

int km_log_snap_write(struct km_log *log, int64_t offset)
{
	int n = km_pstate_snapshot_encode(log->ps, log->snap_buf, log->snap_cap);

	if (n < 0)
		return n;
	return km_log_snap_write_encoded(log, offset, (size_t)n);
}

int km_log_snap_list(struct km_log *log, int64_t *out, uint32_t max)
{
	return km_log_list_files(log, ".snapshot", out, max, false, NULL);
}

int km_log_snap_load(struct km_log *log, struct km_pstate *ps, int64_t offset)
{
	char name[64];
	ssize_t n;
	int fd, rc;

	snap_name(name, sizeof(name), offset);
	fd = openat(log->dir_fd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, log->snap_buf, log->snap_cap);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc == 0)
		rc = km_pstate_snapshot_decode(ps, log->snap_buf, (size_t)n, offset);
	if (rc < 0)
		KM_WARN("log", "%s: producer snapshot %s unusable: %s", log->dir,
			name, km_strerror(rc));
	return rc;
}

int km_log_snap_delete(struct km_log *log, int64_t offset)
{
	char name[64];

	snap_name(name, sizeof(name), offset);
	return unlinkat(log->dir_fd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
}

/* Snapshots past the end describe data that is gone. */
int km_log_snap_drop_after(struct km_log *log, int64_t offset)
{
	int64_t snaps[KM_LOG_SNAPSHOTS_MAX];
	uint32_t total, dropped;
	int n, rc = 0;

	/* The newest first: more of them than snaps holds takes passes. */
	do {
		n = km_log_list_files(log, ".snapshot", snaps,
				      KM_LOG_SNAPSHOTS_MAX, false, &total);
		dropped = 0;
		for (int i = 0; i < n && rc == 0; i++) {
			if (snaps[i] <= offset)
				continue;
			rc = km_log_snap_delete(log, snaps[i]);
			dropped += rc == 0;
		}
	} while (n >= 0 && rc == 0 && dropped > 0 &&
		 total > KM_LOG_SNAPSHOTS_MAX);
	return n < 0 ? n : rc;
}

/* Snapshots below the new log start describe nothing left. */
void km_log_snap_drop_before(struct km_log *log, int64_t start)
{
	int64_t offs[KM_LOG_SNAPSHOTS_MAX];
	uint32_t total, dropped;
	int n;

	/* The oldest first, in passes, as above. */
	do {
		n = km_log_list_files(log, ".snapshot", offs,
				      KM_LOG_SNAPSHOTS_MAX, true, &total);
		dropped = 0;
		for (int i = 0; i < n; i++)
			if (offs[i] < start)
				dropped += km_log_snap_delete(log, offs[i]) == 0;
	} while (n >= 0 && dropped > 0 && total > KM_LOG_SNAPSHOTS_MAX);
}
