/* km_log_reset_to (Kafka's truncateFullyAndStartAt) and the redo of a reset
 * a crash interrupted.
 *
 * Crash consistency: one rename commits the reset, that of RESET_MARKER
 * ("<offset>\n", written to a tmp file, synced, renamed, directory synced).
 * Before it nothing has changed. After it, until the marker is gone again,
 * every open finishes the reset before it reads anything, doing what the
 * reset itself does: remove every segment and snapshot file (the old ones,
 * and a new segment an earlier attempt may have begun), empty
 * leader-epoch-checkpoint, create the empty segment at offset (which syncs
 * the directory, making the removals durable with it), and only then remove
 * the marker and sync the directory again. The marker is gone, durably,
 * before km_log_reset_to returns, so no later append can be wiped by a
 * redo. A crash at any point thus reopens either the old log whole or the
 * new empty one, never old segments next to the new one, which recovery
 * would take for a log with a hole in it (or, with offset below the old
 * end, for offsets going backwards: corruption).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

static int write_marker(struct km_log *log, int64_t offset)
{
	char text[32];
	int n = snprintf(text, sizeof(text), "%lld\n", (long long)offset);

	return km_log_write_text_atomic(log, RESET_MARKER, text, (size_t)n);
}

/* @return 1 and *offset, 0 if there is no marker, or a negative code. */
static int read_marker(struct km_log *log, int64_t *offset)
{
	char text[32], *end;
	int fd = openat(log->dir_fd, RESET_MARKER, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	n = read(fd, text, sizeof(text) - 1);
	if (n < 0) {
		n = -errno;
		close(fd);
		return (int)n;
	}
	close(fd);
	text[n] = '\0';
	*offset = strtoll(text, &end, 10);
	/* Renamed into place whole, so anything else is not ours. */
	return end > text && *end == '\n' && *offset >= 0 ? 1 : -EBADMSG;
}

static int remove_marker(struct km_log *log)
{
	if (unlinkat(log->dir_fd, RESET_MARKER, 0) < 0 && errno != ENOENT)
		return -errno;
	return fsync(log->dir_fd) < 0 ? -errno : 0;
}

/* "<20 digits><kind>": a segment or snapshot file, or the tmp file of a
 * snapshot a crash interrupted. */
static bool is_log_file(const char *name)
{
	static const char *const kinds[] = { ".log", ".index", ".timeindex",
					     ".txnindex", ".snapshot",
					     ".snapshot.tmp" };

	if (strspn(name, "0123456789") != KM_SEGMENT_NAME_DIGITS)
		return false;
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (strcmp(name + KM_SEGMENT_NAME_DIGITS, kinds[i]) == 0)
			return true;
	return false;
}

/* Every segment and snapshot file, from the directory itself rather than
 * the open segments: a redo has none open, and files of a segment that a
 * crash left half deleted or half created are found too. */
static int remove_log_files(struct km_log *log)
{
	int fd = dup(log->dir_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	int rc = 0;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	rewinddir(d); /* the dup shares dir_fd's offset */
	/* Bounded by the directory's entries; removing the entry just read
	 * does not make readdir skip or repeat others. */
	while ((e = readdir(d)) != NULL)
		if (is_log_file(e->d_name) &&
		    unlinkat(log->dir_fd, e->d_name, 0) < 0 && errno != ENOENT &&
		    rc == 0)
			rc = -errno;
	closedir(d);
	return rc;
}

/* The files of the reset log, with the segments closed: nothing of the old
 * one, no leader epochs, and the empty segment at offset in *seg, open. */
static int rewrite_dir(struct km_log *log, int64_t offset,
		       struct km_segment *seg)
{
	int rc = remove_log_files(log);

	if (rc == 0)
		rc = km_log_epoch_clear(log);
	if (rc == 0)
		rc = km_segment_create(seg, log->dir_fd, offset,
				       log->cfg.index_bytes_max);
	return rc;
}

/* Under the segment lock: readers next see one empty segment, and the
 * start, appended and durable offsets all at offset. */
static int reset_segments(struct km_log *log, int64_t offset)
{
	int rc;

	while (log->n_segs > 0) {
		struct km_segment *s = &log->segs[--log->n_segs];

		s->active = false; /* no point trimming what goes */
		km_segment_close(s);
	}
	if ((rc = rewrite_dir(log, offset, &log->segs[0])) < 0)
		return rc; /* no segment: readers find nothing */
	log->n_segs = 1;
	log->leo = offset;
	(void)unlinkat(log->dir_fd, KM_LOG_START_FILE, 0); /* a new log */
	atomic_store_explicit(&log->start_offset, offset, memory_order_release);
	atomic_store_explicit(&log->appended, offset, memory_order_release);
	atomic_store_explicit(&log->durable, offset, memory_order_release);
	return 0;
}

/* What the owner keeps about the old log besides its files. */
static void reset_memory(struct km_log *log)
{
	km_pstate_reset(log->ps);
	log->local_epoch_chosen = false;
	log->unflushed_bytes = 0;
	log->last_flush_ms = km_log_now_ms();
}

int km_log_reset_to(struct km_log *log, int64_t offset)
{
	int rc;

	if ((rc = km_log_files_need(log)) < 0)
		return rc;
	if (offset < 0)
		return -EINVAL;
	/* Also leaves no write or sync queued against the old files. */
	rc = km_log_sync(log);
	if (rc == 0)
		rc = write_marker(log, offset);
	if (rc == 0) {
		km_log_lock_segments(log);
		rc = reset_segments(log, offset);
		km_log_unlock_segments(log);
	}
	if (rc == 0)
		rc = remove_marker(log);
	if (rc < 0) {
		km_log_set_error(log, rc);
		return rc;
	}
	reset_memory(log);
	KM_INFO("log", "%s: reset: the log is empty and starts at offset %lld",
		log->dir, (long long)offset);
	return 0;
}

int km_log_reset_redo(struct km_log *log)
{
	struct km_segment seg;
	int64_t offset = -1;
	int rc = read_marker(log, &offset);

	/* A marker not renamed into place yet: that reset never began. */
	if (rc >= 0 && unlinkat(log->dir_fd, RESET_MARKER ".tmp", 0) < 0 &&
	    errno != ENOENT)
		rc = -errno;
	if (rc <= 0)
		return rc;
	KM_WARN("log", "%s: finishing the reset to offset %lld that the last "
		"run began", log->dir, (long long)offset);
	/* The files are about to change under any clean-shutdown claim. */
	if (unlinkat(log->dir_fd, CLEAN_MARKER, 0) < 0 && errno != ENOENT)
		return -errno;
	if ((rc = rewrite_dir(log, offset, &seg)) < 0)
		return rc;
	km_segment_close(&seg); /* the open that follows opens it again */
	return remove_marker(log);
}
