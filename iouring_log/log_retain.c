/* Retention: delete the oldest whole segments (issue 7). A mirror drops
 * what its source dropped (the source's log start, from every Fetch
 * response) and what local caps say (age, size); the log start becomes the
 * first remaining segment's base offset, which is also what an open after a
 * crash finds (log_recover.c), so nothing else needs persisting.
 *
 * Readers in flight (any thread, log_read.c) are safe: the segments leave
 * the array under the exclusive segment lock, which waits for every read
 * holding it shared; their files are closed and unlinked after, when no
 * read can reach them. The .log file goes first: an open ignores index
 * files without one. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

/* Is the oldest segment of the log (not the active one) to go? */
static bool deletable(const struct km_log *log, uint32_t i,
		      const struct km_log_retention *r, uint64_t total)
{
	const struct km_segment *s = &log->segs[i];

	if (i + 1 >= log->n_segs)
		return false; /* the active segment always stays */
	if (r->below_offset >= 0 && log->segs[i + 1].base_offset <= r->below_offset)
		return true;
	if (r->max_age_ms >= 0 && s->max_timestamp >= 0 &&
	    s->max_timestamp < r->now_ms - r->max_age_ms)
		return true;
	return r->max_bytes >= 0 && total > (uint64_t)r->max_bytes;
}

static uint64_t total_bytes(const struct km_log *log)
{
	uint64_t sum = 0;

	for (uint32_t i = 0; i < log->n_segs; i++)
		sum += log->segs[i].size_bytes;
	return sum;
}

int km_log_retain(struct km_log *log, const struct km_log_retention *r,
		  struct km_log_retained *out)
{
	struct km_segment gone[KM_LOG_RETAIN_BURST];
	uint64_t total = total_bytes(log);
	uint32_t n = 0;
	int rc = 0;

	memset(out, 0, sizeof(*out));
	while (n < KM_LOG_RETAIN_BURST && deletable(log, n, r, total)) {
		total -= log->segs[n].size_bytes;
		out->bytes += log->segs[n].size_bytes;
		n++;
	}
	out->segments = n;
	out->start = km_log_start_offset(log);
	if (n == 0)
		return 0;
	if ((rc = km_log_files_need(log)) < 0)
		return rc;
	memcpy(gone, log->segs, n * sizeof(gone[0]));
	km_log_lock_segments(log);
	memmove(log->segs, log->segs + n, (log->n_segs - n) * sizeof(gone[0]));
	log->n_segs -= n;
	/* A DeleteRecords start inside the first segment left stays. */
	if (log->segs[0].base_offset > log_start(log))
		atomic_store_explicit(&log->start_offset,
				      log->segs[0].base_offset,
				      memory_order_release);
	km_log_unlock_segments(log);
	for (uint32_t i = 0; i < n; i++) {
		int e = km_segment_delete(&gone[i], log->dir_fd);

		rc = rc ? rc : e;
	}
	out->start = log_start(log);
	km_log_snap_drop_before(log, log->segs[0].base_offset);
	KM_INFO("log", "%s: retention deleted %u segment(s), %llu bytes; log "
		"start now %lld", log->dir, n, (unsigned long long)out->bytes,
		(long long)out->start);
	return rc;
}

int km_log_retain_policy(struct km_log *log, int64_t below_offset,
			 int64_t now_ms, struct km_log_retained *out)
{
	struct km_log_retention r = {
		.below_offset = below_offset,
		.max_age_ms = log->cfg.retention_ms,
		.max_bytes = log->cfg.retention_bytes,
		.now_ms = now_ms,
	};

	return km_log_retain(log, &r, out);
}

int64_t km_log_retain_due(const struct km_log *log)
{
	const struct km_segment *s = &log->segs[0];

	/* deletable()'s rule: max_timestamp < now - retention_ms. */
	if (log->n_segs < 2 || log->cfg.retention_ms < 0 ||
	    s->max_timestamp < 0 ||
	    s->max_timestamp > INT64_MAX - 1 - log->cfg.retention_ms)
		return -1;
	return s->max_timestamp + log->cfg.retention_ms + 1;
}

/* ---- DeleteRecords: a log start inside a segment ----
 * Kafka's log start may lie inside a segment (DeleteRecords,
 * log-start-offset-checkpoint); whole segments below it go as retention's
 * do. The offset is kept in the log's directory, written whole and
 * renamed (a crash leaves the old or the new one), and read back at
 * open (km_log_start_load). */

static int save_start(struct km_log *log, int64_t offset)
{
	char text[32];
	int len = snprintf(text, sizeof(text), "%lld\n", (long long)offset);
	int fd = openat(log->dir_fd, KM_LOG_START_FILE ".tmp",
			O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)len) != len || fdatasync(fd) < 0)
		rc = errno ? -errno : -EIO;
	close(fd);
	if (rc == 0 && renameat(log->dir_fd, KM_LOG_START_FILE ".tmp",
				log->dir_fd, KM_LOG_START_FILE) < 0)
		rc = -errno;
	if (rc == 0 && fsync(log->dir_fd) < 0)
		rc = -errno;
	return rc;
}

void km_log_start_load(struct km_log *log)
{
	char text[32] = "";
	int fd = openat(log->dir_fd, KM_LOG_START_FILE, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	long long v;

	if (fd < 0)
		return;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	/* Past the log end (a cut log, a reset) it says nothing any more. */
	if (n > 0 && sscanf(text, "%lld", &v) == 1 && v > log_start(log) &&
	    v <= log->leo)
		atomic_store_explicit(&log->start_offset, v,
				      memory_order_release);
}

int km_log_delete_records(struct km_log *log, int64_t offset, int64_t *low)
{
	struct km_log_retention r = { .below_offset = offset,
				      .max_age_ms = -1, .max_bytes = -1 };
	struct km_log_retained out;
	int rc = 0;

	if ((rc = km_log_files_need(log)) < 0)
		return rc;
	if (offset < 0 || offset > km_log_durable_offset(log))
		return -ERANGE;
	if (offset > log_start(log)) {
		if ((rc = save_start(log, offset)) < 0)
			return rc;
		atomic_store_explicit(&log->start_offset, offset,
				      memory_order_release);
	}
	/* Bounded: each call deletes up to a burst, and segments only go. */
	for (uint32_t i = 0; i <= log->n_segs / KM_LOG_RETAIN_BURST; i++)
		if ((rc = km_log_retain(log, &r, &out)) < 0 ||
		    out.segments == 0)
			break;
	*low = log_start(log);
	return rc;
}

uint64_t km_log_size_bytes(const struct km_log *log)
{
	return total_bytes(log);
}

int km_log_set_limits(struct km_log *log, const struct km_log_limits *l)
{
	if (l->segment_bytes < 1024 || l->segment_bytes > (1ull << 31))
		return -EINVAL;
	if (l->compaction_set &&
	    km_log_set_compaction(log, l->compact, l->delete_retention_ms,
				  l->min_cleanable_ratio) < 0)
		return -EINVAL;
	log->cfg.retention_ms = l->retention_ms;
	log->cfg.retention_bytes = l->retention_bytes;
	log->cfg.segment_bytes = l->segment_bytes;
	log->cfg.client_batch_bytes_max = l->client_batch_bytes_max;
	log->cfg.client_log_append_time = l->client_log_append_time;
	return 0;
}

void km_log_client_rules(const struct km_log *log, uint32_t *batch_bytes_max,
			 bool *log_append_time)
{
	*batch_bytes_max = log->cfg.client_batch_bytes_max;
	*log_append_time = log->cfg.client_log_append_time;
}
