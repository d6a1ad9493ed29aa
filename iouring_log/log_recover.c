/* Recovery (R7): segments and snapshots found on disk become a consistent
 * log again. With the clean-shutdown marker the files are trusted; without
 * it every batch after the newest usable producer snapshot is read back,
 * CRC-verified and offset-checked, indexes and producer state are rebuilt,
 * and a torn or corrupt tail is cut. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return (x > y) - (x < y);
}

/* Keep the max newest (or oldest) offsets seen: a directory holding more
 * files than out has room for must not hide which ones are newest. */
static void keep(int64_t *out, uint32_t max, uint32_t *n, int64_t v,
		 bool oldest)
{
	uint32_t worst = 0;

	if (*n < max) {
		out[(*n)++] = v;
		return;
	}
	for (uint32_t i = 1; i < max; i++)
		if (oldest ? out[i] > out[worst] : out[i] < out[worst])
			worst = i;
	if (max > 0 && (oldest ? v < out[worst] : v > out[worst]))
		out[worst] = v;
}

int km_log_list_files(struct km_log *log, const char *suffix, int64_t *out,
		      uint32_t max, bool oldest, uint32_t *total)
{
	int fd = dup(log->dir_fd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	uint32_t n = 0, seen = 0;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return -errno;
	}
	/* The dup shares dir_fd's offset, left at the end by the last
	 * listing: start from the top. */
	rewinddir(d);
	while ((e = readdir(d)) != NULL) {
		char *end;
		long long v = strtoll(e->d_name, &end, 10);

		if (end - e->d_name == KM_SEGMENT_NAME_DIGITS &&
		    strcmp(end, suffix) == 0 && v >= 0) {
			keep(out, max, &n, v, oldest);
			seen++;
		}
	}
	closedir(d);
	qsort(out, n, sizeof(*out), cmp_i64);
	if (total != NULL)
		*total = seen;
	return (int)n;
}

static int open_segments(struct km_log *log)
{
	int64_t *bases = calloc(log->cfg.segments_max, sizeof(*bases));
	uint32_t found = 0;
	int n, rc = 0;

	if (bases == NULL)
		return -ENOMEM;
	n = km_log_list_files(log, ".log", bases, log->cfg.segments_max, true,
			      &found);
	if (n >= 0 && found > log->cfg.segments_max) {
		/* Opening some of them would lose the rest from view. */
		KM_ERROR("log", "%s: %u segments on disk, segments_max is %u",
			 km_log_dir(log), found, log->cfg.segments_max);
		free(bases);
		return KM_ESEGMENTS;
	}
	for (int i = 0; i < n && rc == 0; i++) {
		rc = km_segment_open(&log->segs[i], log->dir_fd, bases[i],
				     log->cfg.index_bytes_max, i == n - 1);
		if (rc == 0)
			log->n_segs++;
		if (i > 0 && rc == 0)
			log->segs[i - 1].next_offset = bases[i];
	}
	if (n == 0 && rc == 0) {
		rc = km_segment_create(&log->segs[0], log->dir_fd, 0,
				       log->cfg.index_bytes_max);
		log->n_segs = rc == 0 ? 1 : 0;
	}
	free(bases);
	return n < 0 ? n : rc;
}

/* The clean path: the files are trusted; only the end of the active segment
 * after its last index entry is read, to find the log end. */
static int clean_open(struct km_log *log, struct km_log_recovery *rec)
{
	struct km_segment *s = log_active(log);
	struct log_scan sc;
	struct km_batch b;
	uint64_t pos;
	int rc;

	rc = km_log_scan_init(&sc, log, s, km_segment_lookup(s, INT64_MAX),
			      s->size_bytes);
	if (rc < 0)
		return rc;
	log->leo = s->base_offset;
	while ((rc = km_log_scan_next(&sc, &b, &pos)) > 0)
		log->leo = km_batch_last_offset(&b) + 1;
	km_log_scan_fini(&sc);
	if (rc < 0)
		return rc; /* a bad batch despite the marker: scan it all */
	s->next_offset = log->leo;
	km_pstate_reset(log->ps);
	if ((rc = km_log_snap_load(log, log->ps, log->leo)) < 0)
		return rc;
	rec->clean = true;
	rec->snapshot_offset = log->leo;
	rec->recovery_point = log->leo;
	return 0;
}

struct rescan {
	struct km_log_recovery *rec;
	int64_t replay_from; /* batches below are in the loaded snapshot */
	int64_t next;	     /* the next batch must start at or after this */
};

static bool batch_error(int rc)
{
	return rc <= KM_EBASE || rc == -ENODATA;
}

/* Reopen segment i writable with empty indexes, to rebuild them. */
static int reopen_for_rebuild(struct km_log *log, uint32_t i, int64_t keep_txn)
{
	struct km_segment *s = &log->segs[i];
	int64_t base = s->base_offset;
	int rc;

	s->active = false; /* its indexes may hold a crash's garbage */
	km_segment_close(s);
	rc = km_segment_open(s, log->dir_fd, base, log->cfg.index_bytes_max, true);
	if (rc < 0)
		return rc;
	km_segment_reset_indexes(s);
	return km_segment_txn_truncate(s, keep_txn);
}

/* Offsets only grow ("offset continuity") and fit the segment's int32. */
static int check_offsets(const struct rescan *r, const struct km_segment *s,
			 const struct km_batch *b)
{
	if (km_batch_base_offset(b) < r->next ||
	    km_batch_base_offset(b) < s->base_offset ||
	    km_batch_last_offset(b) - s->base_offset > INT32_MAX)
		return KM_EOFFSET;
	return 0;
}

static int replay(struct km_log *log, struct km_pstate *ps,
		  struct km_segment *s, const struct km_batch *b,
		  struct km_pstate_result *pr)
{
	int rc = km_pstate_append(ps, b, KM_ORIGIN_MIRROR, log->leo, pr);

	if (rc < 0)
		return rc;
	if (pr->txn_aborted && s != NULL) {
		struct km_aborted_txn t = { pr->txn_producer_id,
					    pr->txn_first_offset,
					    pr->txn_last_offset,
					    pr->txn_last_stable_offset };

		rc = km_segment_txn_append(s, &t);
	}
	return rc;
}

static int rebuild_batch(struct km_log *log, struct rescan *r,
			 struct km_segment *s, const struct km_batch *b,
			 uint64_t pos)
{
	struct km_pstate_result pr;
	int rc = km_segment_index_batch(s, km_batch_base_offset(b),
					km_batch_last_offset(b),
					km_batch_max_timestamp(b), pos,
					km_batch_size(b),
					log->cfg.index_interval_bytes);

	if (rc == 0 && km_batch_base_offset(b) >= r->replay_from) {
		rc = replay(log, log->ps, s, b, &pr);
		r->rec->batches_replayed++;
	}
	if (rc == 0)
		rc = km_log_epoch_note(log, km_batch_leader_epoch(b),
				       km_batch_base_offset(b));
	r->next = km_batch_last_offset(b) + 1;
	log->leo = r->next;
	r->rec->batches_scanned++;
	r->rec->bytes_scanned += km_batch_size(b);
	return rc;
}

/* Could a whole batch of segment s, at or above offset next and within
 * room bytes, start at h? A cheap filter before the CRC that random bytes
 * all but never pass (the magic, a length that fits, and a base offset in
 * the 2^31 this segment can hold out of 2^64), so a long damaged stretch
 * costs one read of it, not a scan per position. */
static bool header_fits(const uint8_t *h, const struct km_segment *s,
			int64_t next, uint64_t room, uint32_t max)
{
	uint32_t len = km_load_be32(h + KM_BATCH_OFF_LENGTH);
	int64_t base = (int64_t)km_load_be64(h + KM_BATCH_OFF_BASE_OFFSET);

	return h[KM_BATCH_OFF_MAGIC] == KM_BATCH_MAGIC &&
	       len >= KM_BATCH_LENGTH_MIN &&
	       len <= max - KM_BATCH_LOG_OVERHEAD &&
	       len + (uint64_t)KM_BATCH_LOG_OVERHEAD <= room && base >= next &&
	       base - s->base_offset <= INT32_MAX;
}

static bool batch_at(struct km_log *log, struct km_segment *s, uint64_t at)
{
	struct log_scan sc;
	struct km_batch b;
	uint64_t p;
	int rc;

	if (km_log_scan_init(&sc, log, s, at, s->size_bytes) < 0)
		return false;
	rc = km_log_scan_next(&sc, &b, &p);
	km_log_scan_fini(&sc);
	return rc > 0;
}

/* Does a valid batch at or above offset next follow the bad one at pos (so
 * this is corruption in the middle of the data, not a torn tail)? The bad
 * batch's length may be what is damaged, so every position after pos is
 * tried, not only the one the length names: a torn tail has nothing valid
 * after it, and it is short, as is the way to the next batch mid-log. */
static bool valid_after(struct km_log *log, struct km_segment *s, uint64_t pos,
			int64_t next)
{
	const size_t chunk = 64 * 1024;
	uint8_t *buf = malloc(chunk);
	bool found = false;
	ssize_t n = 0;

	for (uint64_t at = pos + 1; buf != NULL && !found &&
				    at + KM_BATCH_HEADER_BYTES <= s->size_bytes;
	     at += (uint64_t)n - KM_BATCH_HEADER_BYTES + 1) {
		n = pread(s->log_fd, buf, chunk, (off_t)at);
		if (n < (ssize_t)KM_BATCH_HEADER_BYTES)
			break;
		for (ssize_t i = 0; !found && i + KM_BATCH_HEADER_BYTES <= n; i++)
			found = header_fits(buf + i, s, next,
					    s->size_bytes - at - (uint64_t)i,
					    log->cfg.batch_bytes_max) &&
				batch_at(log, s, at + (uint64_t)i);
	}
	free(buf);
	return found;
}

static uint64_t later_bytes(const struct km_log *log, uint32_t i)
{
	uint64_t n = 0;

	for (uint32_t k = i + 1; k < log->n_segs; k++)
		n += log->segs[k].size_bytes;
	return n;
}

/* Fill rec with the bad batch at pos of segment i, and log it. */
static void report_cut(struct km_log *log, uint32_t i, uint64_t pos, int code,
		       struct rescan *r)
{
	struct km_log_recovery *rec = r->rec;
	struct km_segment *s = &log->segs[i];

	/* A whole batch out of order was never a torn write. */
	rec->corrupt_mid_log = i + 1 < log->n_segs || code == KM_EOFFSET ||
			       valid_after(log, s, pos, r->next);
	rec->bytes_truncated = s->size_bytes - pos + later_bytes(log, i);
	rec->truncated_at = r->next;
	rec->corrupt_code = code;
	rec->corrupt_position = pos;
	snprintf(rec->corrupt_file, sizeof(rec->corrupt_file), "%020lld.log",
		 (long long)s->base_offset);
	KM_LOG(rec->corrupt_mid_log ? KM_LOG_ERROR : KM_LOG_WARN, "log",
	       "%s: %s batch at position %llu of %s (offset %lld): %s; "
	       "truncating %llu bytes", log->dir,
	       rec->corrupt_mid_log ? "corrupt" : "torn", (unsigned long long)pos,
	       rec->corrupt_file, (long long)r->next,
	       code == -ENODATA ? "file ends inside the batch" : km_strerror(code),
	       (unsigned long long)rec->bytes_truncated);
}

/* Cut the log at the bad batch found at pos of segment i. */
static int cut_at(struct km_log *log, uint32_t i, uint64_t pos, int code,
		  struct rescan *r)
{
	struct km_segment *s = &log->segs[i];
	int64_t ts, ts_offset;
	int rc;

	report_cut(log, i, pos, code, r);
	/* Cut at the start of a segment based above the log end (a gap
	 * before it), the empty segment would take appends below its base,
	 * which the next scan cuts as out of order: the rescanned segment
	 * before it takes them instead. */
	if (pos == 0 && i > 0 && s->base_offset > r->next &&
	    log->segs[i - 1].active) {
		s = &log->segs[--i];
		pos = s->size_bytes;
	}
	while (log->n_segs > i + 1)
		if ((rc = km_segment_delete(&log->segs[--log->n_segs],
					    log->dir_fd)) < 0)
			return rc;
	/* Every batch below pos was just indexed, so the segment's largest
	 * timestamp is exact; the truncation would take it back to the last
	 * time index entry's, losing the final entry a close writes. */
	ts = s->max_timestamp;
	ts_offset = s->max_timestamp_offset;
	if ((rc = km_segment_truncate(s, pos, r->next)) < 0)
		return rc;
	s->max_timestamp = ts;
	s->max_timestamp_offset = ts_offset;
	return fsync(s->log_fd) < 0 ? -errno : 1;
}

/* Direct writes fill the block the data ends in with zeros (log_dio.c):
 * after a crash the last segment may hold up to a block of them past its
 * last batch. They were never data: cut them without reporting a torn
 * tail. @return 0 if that is all there was, else code (the caller cuts
 * as for any bad batch), or -errno. */
static int cut_padding(struct km_log *log, struct km_segment *s, uint64_t pos,
		       int64_t next, int code)
{
	uint8_t buf[KM_DIO_BLOCK];
	uint64_t len = s->size_bytes - pos;
	ssize_t n;
	int rc;

	if (len >= KM_DIO_BLOCK)
		return code;
	n = pread(s->log_fd, buf, (size_t)len, (off_t)pos);
	if (n != (ssize_t)len)
		return code;
	for (uint64_t k = 0; k < len; k++)
		if (buf[k] != 0)
			return code;
	KM_INFO("log", "%s: cutting %llu bytes of zeros after the last batch "
		"(a direct write's padding)", log->dir, (unsigned long long)len);
	if ((rc = km_segment_truncate(s, pos, next)) < 0)
		return rc;
	return fsync(s->log_fd) < 0 ? -errno : 0;
}

/* @return 0 (segment fully valid), 1 (log cut here), or a negative error. */
static int rescan_segment(struct km_log *log, uint32_t i, struct rescan *r)
{
	struct km_segment *s = &log->segs[i];
	struct log_scan sc;
	struct km_batch b;
	uint64_t pos = 0;
	int rc = reopen_for_rebuild(log, i, r->replay_from);

	if (rc == 0)
		rc = km_log_scan_init(&sc, log, s, 0, s->size_bytes);
	if (rc < 0)
		return rc;
	while ((rc = km_log_scan_next(&sc, &b, &pos)) > 0) {
		if ((rc = check_offsets(r, s, &b)) < 0)
			break;
		/* Failing to rebuild state is not corruption: no cut. */
		if ((rc = rebuild_batch(log, r, s, &b, pos)) < 0) {
			km_log_scan_fini(&sc);
			return rc;
		}
	}
	km_log_scan_fini(&sc);
	if (rc < 0 && batch_error(rc) && i + 1 == log->n_segs)
		rc = cut_padding(log, s, pos, r->next, rc);
	if (rc < 0 && batch_error(rc))
		return cut_at(log, i, pos, rc, r);
	s->next_offset = r->next > s->base_offset ? r->next : s->base_offset;
	return rc;
}

/* Rescan from the segment holding snapshot offset snap (-1: from the first
 * segment with empty state). */
static int rescan_from(struct km_log *log, int64_t snap,
		       struct km_log_recovery *rec)
{
	uint32_t first = snap >= 0 ? km_log_find_segment(log, snap) : 0;
	struct rescan r = { rec, snap >= 0 ? snap : INT64_MIN,
			    log->segs[first].base_offset };
	int rc = km_log_epoch_truncate(log, r.next);

	rec->recovery_point = r.next;
	log->leo = r.next;
	for (uint32_t i = first; i < log->n_segs && rc == 0; i++)
		rc = rescan_segment(log, i, &r);
	if (rc < 0)
		return rc;
	/* Rebuilt segments other than the last become sealed again (no
	 * reader yet: the retired maps can go at once), those below a cut
	 * too. */
	rc = 0;
	for (uint32_t i = first; i + 1 < log->n_segs && rc == 0; i++) {
		if (log->segs[i].active)
			rc = km_segment_seal(&log->segs[i]);
		km_segment_drop_retired(&log->segs[i]);
	}
	return rc;
}

/* What a pass that cut found, kept across the passes after it (they scan
 * what the cut left, and find nothing to report). */
static void keep_cut(struct km_log_recovery *rec,
		     const struct km_log_recovery *cut)
{
	if (rec->truncated_at >= 0 || cut->truncated_at < 0)
		return;
	rec->bytes_truncated = cut->bytes_truncated;
	rec->truncated_at = cut->truncated_at;
	rec->corrupt_code = cut->corrupt_code;
	rec->corrupt_mid_log = cut->corrupt_mid_log;
	memcpy(rec->corrupt_file, cut->corrupt_file, sizeof(rec->corrupt_file));
	rec->corrupt_position = cut->corrupt_position;
}

static int unclean_open(struct km_log *log, struct km_log_recovery *rec)
{
	int64_t snaps[KM_LOG_SNAPSHOTS_MAX];
	int k = km_log_snap_list(log, snaps, KM_LOG_SNAPSHOTS_MAX);
	struct km_log_recovery cut = { .truncated_at = -1 };
	int64_t snap;
	int rc;

	if (k < 0)
		return k;
	for (;;) {
		snap = k > 0 ? snaps[k - 1] : -1;
		km_pstate_reset(log->ps);
		if (snap >= 0 && km_log_snap_load(log, log->ps, snap) < 0) {
			km_pstate_reset(log->ps);
			(void)km_log_snap_delete(log, snaps[--k]);
			continue;
		}
		memset(rec, 0, sizeof(*rec));
		rec->truncated_at = -1;
		if ((rc = rescan_from(log, snap, rec)) < 0)
			return rc;
		keep_cut(rec, &cut);
		if (snap <= log->leo)
			break;
		/* The snapshot covers data the cut removed: use an older one. */
		cut = *rec;
		(void)km_log_snap_delete(log, snaps[--k]);
	}
	rec->snapshot_offset = snap;
	return 0;
}

int km_log_recover(struct km_log *log, struct km_log_recovery *rec)
{
	/* A reset the last run began is finished before anything is read. */
	int rc = km_log_reset_redo(log);
	bool clean;

	/* So is a segment swap of the cleaner's (log_clean_swap.c). */
	if (rc == 0)
		rc = km_log_clean_redo(log);
	if (rc < 0)
		return rc;
	/* Opening changes files (the active segment's indexes are extended
	 * for appends): from here a crash must be recovered by a scan, so
	 * the marker goes first - here, or before, for many logs at once
	 * (km_log_unmark_many, log_marker.c). */
	if (log->cfg.marker != KM_LOG_MARK_CHECK) {
		clean = log->cfg.marker == KM_LOG_MARK_WAS_CLEAN;
	} else {
		clean = km_log_clean_marker_exists(log);
		if (clean && (unlinkat(log->dir_fd, CLEAN_MARKER, 0) < 0 ||
			      fsync(log->dir_fd) < 0))
			return -errno;
	}
	rc = open_segments(log);

	memset(rec, 0, sizeof(*rec));
	rec->truncated_at = -1;
	rec->snapshot_offset = -1;
	if (rc < 0)
		return rc;
	atomic_store_explicit(&log->start_offset, log->segs[0].base_offset,
			      memory_order_release);
	(void)km_log_epoch_defer(log, true);
	if (!clean || clean_open(log, rec) < 0)
		rc = unclean_open(log, rec);
	if (rc == 0)
		rc = km_log_epoch_defer(log, false);
	if (rc < 0)
		return rc;
	if ((rc = km_log_snap_drop_after(log, log->leo)) < 0)
		return rc;
	km_log_start_load(log);
	/* What the files hold is now made durable before it is served. A
	 * clean close synced it all before its marker, and a clean open
	 * writes nothing to the .log. */
	if (!rec->clean && fdatasync(log_active(log)->log_fd) < 0)
		return -errno;
	atomic_store_explicit(&log->appended, log->leo, memory_order_release);
	atomic_store_explicit(&log->durable, log->leo, memory_order_release);
	if (!rec->clean && rec->batches_scanned > 0)
		KM_INFO("log", "%s: recovered from offset %lld: %u batches "
			"(%llu bytes) scanned, log end %lld, %llu bytes cut",
			log->dir, (long long)rec->recovery_point,
			rec->batches_scanned,
			(unsigned long long)rec->bytes_scanned,
			(long long)log->leo,
			(unsigned long long)rec->bytes_truncated);
	return 0;
}

/* Replay segments from offset from (below upto) into ps. */
static int replay_range(struct km_log *log, struct km_pstate *ps, int64_t from,
			int64_t upto, km_log_replay_fn fn, void *ctx)
{
	int rc = 0;

	for (uint32_t i = km_log_find_segment(log, from);
	     i < log->n_segs && rc >= 0; i++) {
		struct km_segment *s = &log->segs[i];
		struct km_pstate_result pr;
		struct log_scan sc;
		struct km_batch b;
		uint64_t pos;

		if ((rc = km_log_scan_init(&sc, log, s, km_segment_lookup(s, from),
					   s->size_bytes)) < 0)
			return rc;
		while ((rc = km_log_scan_next(&sc, &b, &pos)) > 0) {
			if (km_batch_base_offset(&b) >= upto)
				break;
			if (km_batch_base_offset(&b) < from)
				continue;
			if ((rc = replay(log, ps, NULL, &b, &pr)) < 0)
				break;
			if (fn != NULL)
				fn(ctx, &b, &pr);
		}
		km_log_scan_fini(&sc);
	}
	return rc < 0 ? rc : 0;
}

int km_log_rebuild_pstate(struct km_log *log, struct km_pstate *ps,
			  int64_t snap_max, int64_t upto, km_log_replay_fn fn,
			  void *ctx, int64_t *snapshot_offset)
{
	int64_t snaps[KM_LOG_SNAPSHOTS_MAX];
	int k = km_log_snap_list(log, snaps, KM_LOG_SNAPSHOTS_MAX);
	int64_t from = log_start(log);

	if (k < 0)
		return k;
	km_pstate_reset(ps);
	*snapshot_offset = -1;
	while (k > 0 && snaps[k - 1] > snap_max)
		k--;
	for (; k > 0; k--) {
		if (km_log_snap_load(log, ps, snaps[k - 1]) == 0) {
			from = *snapshot_offset = snaps[k - 1];
			break;
		}
		km_pstate_reset(ps);
	}
	return replay_range(log, ps, from, upto, fn, ctx);
}
