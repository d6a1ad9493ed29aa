/* Compaction of a cleanup.policy=compact log (km_log_clean, log.h): Kafka's
 * Cleaner.doClean on one log. The cleanable part is the segments below the
 * active one whose offsets are all below the LSO (Kafka cleans below the
 * first unstable offset and never the active segment); the dirty section
 * is what was appended since the last clean (all of it after an open: the
 * checkpoint is kept in memory only, so a restart costs one full pass).
 *
 * 1. The key map: every keyed record of the dirty section, in offset order,
 *    aborted transactional data left out, until the map is full (at
 *    cleaner_map_bytes); map.latest is how far it got.
 * 2. Each segment from the log start up to map.latest is rewritten by the
 *    batch rules (log_clean_batch.c) into the cleaner's directory and
 *    swapped in (log_clean_swap.c), one at a time, so that a failure
 *    leaves every segment either old or cleaned: both are valid logs.
 * 3. The dirty section starts after map.latest; the earliest delete
 *    horizon still ahead is remembered, to clean again when it passes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/log.h"
#include "iouring_log/log_clean_pvt.h"

/* Segments [0, *n) are cleanable; *end is the first offset that is not. */
static void cleanable(struct km_log *log, uint32_t *n, int64_t *end)
{
	int64_t lso = km_log_lso(log);

	*n = 0;
	while (*n + 1 < log->n_segs && log->segs[*n + 1].base_offset <= lso)
		(*n)++;
	*end = log->segs[*n].base_offset;
}

/* Kafka's cleanableRatio: dirty bytes over all the cleanable ones. */
static bool dirty_enough(const struct km_log *log, uint32_t n_clean)
{
	uint64_t dirty = 0, total = 0;

	for (uint32_t i = 0; i < n_clean; i++) {
		total += log->segs[i].size_bytes;
		if (log->segs[i].next_offset > log->clean_dirty)
			dirty += log->segs[i].size_bytes;
	}
	return dirty > 0 &&
	       (double)dirty > log->cfg.min_cleanable_ratio * (double)total;
}

static int build_map(struct km_cleaner *c, uint32_t n_clean, int64_t end)
{
	struct km_log *log = c->log;
	int64_t from = log->clean_dirty;
	int rc = km_log_clean_txn_init(&c->txn, log, from, end);

	c->map.latest = from - 1;
	for (uint32_t i = km_log_find_segment(log, from);
	     rc == 0 && i < n_clean; i++)
		rc = km_log_clean_map_segment(c, &log->segs[i], from);
	km_log_clean_txn_free(&c->txn);
	c->st->dirty_from = from;
	c->st->dirty_to = c->map.latest + 1;
	c->st->map_full = rc == 1;
	if (rc == 1 && c->map.latest < from) {
		KM_ERROR("log", "%s: the cleaner's key map (%llu bytes) cannot "
			 "hold the keys of one batch at offset %lld", log->dir,
			 (unsigned long long)log->cfg.cleaner_map_bytes,
			 (long long)from);
		return -ENOBUFS;
	}
	return rc < 0 ? rc : 0;
}

static int clean_one(struct km_cleaner *c, uint32_t i, int tmp_fd)
{
	struct km_log *log = c->log;
	struct km_segment out;
	int rc = km_segment_create(&out, tmp_fd, log->segs[i].base_offset,
				   log->cfg.index_bytes_max);

	if (rc < 0)
		return rc;
	c->changed = false;
	rc = km_log_clean_segment(c, &log->segs[i], &out);
	if (rc == 0 && !c->changed)
		return km_segment_delete(&out, tmp_fd); /* nothing to swap */
	if (rc == 0 && fdatasync(out.log_fd) < 0)
		rc = -errno;
	if (rc == 0)
		rc = km_segment_seal(&out);
	km_segment_close(&out);
	if (rc == 0)
		rc = km_log_clean_swap(log, i, tmp_fd);
	if (rc == 0)
		c->st->segments++;
	return rc;
}

static int clean_segments(struct km_cleaner *c, uint32_t n_clean, int64_t end)
{
	struct km_log *log = c->log;
	int tmp_fd = -1;
	int rc = km_log_clean_tmpdir(log, &tmp_fd);

	if (rc == 0)
		rc = km_log_clean_txn_init(&c->txn, log, log_start(log), end);
	for (uint32_t i = 0; rc == 0 && i < n_clean &&
			     log->segs[i].base_offset <= c->map.latest; i++) {
		rc = clean_one(c, i, tmp_fd);
		c->st->clean_to = log->segs[i].next_offset;
	}
	km_log_clean_txn_free(&c->txn);
	if (tmp_fd >= 0) {
		close(tmp_fd);
		if (unlinkat(log->dir_fd, KM_CLEAN_DIR, AT_REMOVEDIR) < 0 &&
		    rc == 0)
			rc = -errno;
	}
	return rc;
}

static void report(const struct km_log *log, const struct km_log_clean_stats *s)
{
	KM_INFO("log", "%s: cleaned %u segment(s) below offset %lld: %llu "
		"bytes -> %llu, %llu of %llu records kept, %u batches removed, "
		"%u emptied; key map over [%lld, %lld)%s", log->dir, s->segments,
		(long long)s->clean_to, (unsigned long long)s->bytes_read,
		(unsigned long long)s->bytes_written,
		(unsigned long long)s->records_kept,
		(unsigned long long)s->records_read, s->batches_removed,
		s->batches_emptied, (long long)s->dirty_from,
		(long long)s->dirty_to, s->map_full ? " (map full)" : "");
}

int km_log_clean(struct km_log *log, int64_t now_ms,
		 struct km_log_clean_stats *out)
{
	struct km_cleaner c;
	uint32_t n_clean;
	int64_t end;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!log->cfg.compact || log->error != 0)
		return 0;
	cleanable(log, &n_clean, &end);
	if (log->clean_dirty < log_start(log) || log->clean_dirty > log->leo)
		log->clean_dirty = log_start(log);
	if (n_clean == 0 ||
	    ((log->clean_dirty >= end || !dirty_enough(log, n_clean)) &&
	     now_ms < log->clean_horizon))
		return 0;
	if ((rc = km_log_files_need(log)) < 0)
		return rc;
	memset(&c, 0, sizeof(c));
	c.log = log;
	c.now_ms = now_ms;
	c.st = out;
	c.horizon_min = INT64_MAX;
	if ((rc = km_log_clean_map_init(&c.map, log->cfg.cleaner_map_bytes)) == 0 &&
	    (rc = build_map(&c, n_clean, end)) == 0)
		rc = clean_segments(&c, n_clean, end);
	km_log_clean_map_free(&c.map);
	km_inflate_destroy(c.inflate);
	free(c.out);
	if (rc < 0) {
		KM_WARN("log", "%s: cleaning failed: %s", log->dir,
			km_strerror(rc));
		return rc;
	}
	log->clean_dirty = c.map.latest + 1 > end ? end : c.map.latest + 1;
	log->clean_horizon = c.horizon_min;
	report(log, out);
	return 1;
}

int km_log_set_compaction(struct km_log *log, bool compact,
			  int64_t delete_retention_ms, double min_cleanable_ratio)
{
	if (delete_retention_ms < 0 || !(min_cleanable_ratio >= 0.0) ||
	    min_cleanable_ratio > 1.0)
		return -EINVAL;
	log->cfg.compact = compact;
	log->cfg.delete_retention_ms = delete_retention_ms;
	log->cfg.min_cleanable_ratio = min_cleanable_ratio;
	return 0;
}
