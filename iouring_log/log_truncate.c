/* Truncation and the R4 transaction-clean cut. Control-path operations: they
 * wait for in-flight I/O and may allocate. A truncation works out what to
 * remove by reading first, then changes the files under the segment lock
 * (log_read.c); the clean cut only reads and takes no lock. */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

/* Batches and bytes of segment s from pos to its end. */
static int count_from(struct km_log *log, struct km_segment *s, uint64_t pos,
		      uint64_t *bytes, uint32_t *batches)
{
	struct log_scan sc;
	struct km_batch b;
	uint64_t at;
	int rc = km_log_scan_init(&sc, log, s, pos, s->size_bytes);

	if (rc < 0)
		return rc;
	while ((rc = km_log_scan_next(&sc, &b, &at)) > 0)
		(*batches)++;
	km_log_scan_fini(&sc);
	*bytes += s->size_bytes - pos;
	return rc < 0 && rc != -ENODATA ? rc : 0;
}

/* Position of the first batch of s holding an offset >= offset. */
static int cut_position(struct km_log *log, struct km_segment *s,
			int64_t offset, uint64_t *pos, int64_t *next)
{
	struct log_scan sc;
	struct km_batch b;
	/* Start at a batch wholly below offset (its last offset < offset), so
	 * *next is known before the first batch that is cut. */
	int rc = km_log_scan_init(&sc, log, s, km_segment_lookup(s, offset - 1),
				  s->size_bytes);

	if (rc < 0)
		return rc;
	*next = s->base_offset;
	while ((rc = km_log_scan_next(&sc, &b, pos)) > 0) {
		if (km_batch_last_offset(&b) >= offset)
			break;
		*next = km_batch_last_offset(&b) + 1;
	}
	if (rc <= 0)
		*pos = s->size_bytes;
	km_log_scan_fini(&sc);
	return rc < 0 ? rc : 0;
}

/* Kafka's LogSegment.loadLargestTimestamp: the time index knows the largest
 * timestamp only as of its last entry; batches after it may hold a larger. */
static int reload_max_timestamp(struct km_log *log, struct km_segment *s)
{
	struct log_scan sc;
	struct km_batch b;
	uint64_t at;
	int rc = km_log_scan_init(&sc, log, s,
				  km_segment_lookup(s, s->max_timestamp_offset),
				  s->size_bytes);

	if (rc < 0)
		return rc;
	while ((rc = km_log_scan_next(&sc, &b, &at)) > 0) {
		if (km_batch_max_timestamp(&b) > s->max_timestamp) {
			s->max_timestamp = km_batch_max_timestamp(&b);
			s->max_timestamp_offset = km_batch_last_offset(&b);
		}
	}
	km_log_scan_fini(&sc);
	return rc < 0 ? rc : 0;
}

/* Make the (new) last segment the active one. */
static int activate_last(struct km_log *log)
{
	struct km_segment *s = log_active(log);
	int64_t base = s->base_offset, next = s->next_offset;
	int rc;

	if (s->active)
		return 0;
	km_segment_close(s);
	rc = km_segment_open(s, log->dir_fd, base, log->cfg.index_bytes_max, true);
	s->next_offset = next;
	return rc;
}

/* What a truncation removes, worked out by reading before the segments are
 * locked: segments [keep, n_segs) go; segment keep - 1 is cut at .log
 * position pos and then ends before offset next. */
struct cut_plan {
	uint32_t keep;
	uint64_t pos;
	int64_t next;
	uint64_t bytes;
	uint32_t batches;
};

static int plan_cut(struct km_log *log, int64_t offset, struct cut_plan *p)
{
	int rc;

	p->keep = km_log_find_segment(log, offset) + 1;
	/* Never drop the first segment: the log keeps at least one. */
	if (p->keep > 1 && log->segs[p->keep - 1].base_offset >= offset)
		p->keep--;
	rc = cut_position(log, &log->segs[p->keep - 1], offset, &p->pos,
			  &p->next);
	if (rc == 0 && p->pos == 0 && p->keep > 1) {
		/* Nothing of it stays: drop it, as a cut at its base does,
		 * so the end is the offset after the last batch kept. */
		p->keep--;
		rc = cut_position(log, &log->segs[p->keep - 1], offset, &p->pos,
				  &p->next);
	}
	for (uint32_t i = p->keep; i < log->n_segs && rc == 0; i++)
		rc = count_from(log, &log->segs[i], 0, &p->bytes, &p->batches);
	if (rc == 0)
		rc = count_from(log, &log->segs[p->keep - 1], p->pos, &p->bytes,
				&p->batches);
	return rc;
}

/* Under the segment lock. */
static int apply_cut(struct km_log *log, const struct cut_plan *p)
{
	int rc = 0;

	while (log->n_segs > p->keep && rc == 0) {
		rc = km_segment_delete(log_active(log), log->dir_fd);
		log->n_segs--; /* closed even if a file stayed behind */
	}
	if (rc == 0)
		rc = km_segment_truncate(log_active(log), p->pos, p->next);
	if (rc < 0)
		return rc;
	log->leo = p->next;
	if ((rc = activate_last(log)) < 0 ||
	    (rc = reload_max_timestamp(log, log_active(log))) < 0)
		return rc;
	return 0;
}

static void publish_end(struct km_log *log)
{
	atomic_store_explicit(&log->appended, log->leo, memory_order_release);
	atomic_store_explicit(&log->durable, log->leo, memory_order_release);
}

/* Apply p (NULL: nothing to cut) and make everything kept durable, whatever
 * the flush policy left unsynced, before it becomes the durable offset.
 * Readers wait from the first file changed until the published offsets
 * match the files again. */
static int cut(struct km_log *log, const struct cut_plan *p)
{
	int rc;

	if (p == NULL) {
		if (fdatasync(log_active(log)->log_fd) < 0)
			return -errno;
		publish_end(log);
		return 0;
	}
	km_log_lock_segments(log);
	rc = apply_cut(log, p);
	/* fsync, not fdatasync: the new file size must stick too. */
	if (rc == 0 && fsync(log_active(log)->log_fd) < 0)
		rc = -errno;
	if (rc == 0)
		publish_end(log);
	km_log_unlock_segments(log);
	return rc;
}

/* After a cut to log->leo: leader epochs, snapshots and producer state
 * follow the log. */
static int settle(struct km_log *log)
{
	int64_t snap;
	int rc = km_log_epoch_truncate(log, log->leo);

	if (rc == 0)
		rc = km_log_snap_drop_after(log, log->leo);
	if (rc == 0)
		rc = km_log_rebuild_pstate(log, log->ps, log->leo, log->leo, NULL,
					   NULL, &snap);
	return rc;
}

int64_t km_log_truncate_to(struct km_log *log, int64_t offset,
			   uint64_t *removed_bytes, uint32_t *removed_batches)
{
	struct cut_plan p = { 0 };
	int rc = km_log_files_need(log);
	bool cutting;

	if (rc == 0)
		rc = km_log_sync(log);
	cutting = rc == 0 && offset < log->leo;

	if (cutting)
		rc = plan_cut(log, offset, &p);
	if (rc == 0)
		rc = cut(log, cutting ? &p : NULL);
	if (rc == 0)
		rc = settle(log);
	if (rc < 0) {
		km_log_set_error(log, rc);
		return rc;
	}
	if (removed_bytes)
		*removed_bytes = p.bytes;
	if (removed_batches)
		*removed_batches = p.batches;
	KM_INFO("log", "%s: truncated to offset %lld: %u batches, %llu bytes "
		"removed", log->dir, (long long)log->leo, p.batches,
		(unsigned long long)p.bytes);
	return log->leo;
}

bool km_log_is_space_error(int code)
{
	return code == -ENOSPC || code == -EDQUOT;
}

/* Wait for this log's requests with its error set: writes and the sync in
 * flight complete, queued syncs are never issued (they cover writes that
 * may have failed) and are dropped. */
static int drain_failed(struct km_log *log)
{
	int rc = km_log_sync(log);

	if (rc < 0 && rc != log->error)
		return rc;
	log->f_head = log->f_count = 0;
	log->unflushed_bytes = 0;
	return 0;
}

/* The cut a space error needs: back to what was written (the appended
 * offset; its bytes end where the active segment is readable). An empty active segment above the appended
 * offset (a roll over an offset gap whose batch never fit) keeps its
 * base: the log end moves up to it, as recovery would find it. */
static void space_plan(struct km_log *log, struct cut_plan *p)
{
	struct km_segment *s = log_active(log);
	int64_t appended = atomic_load_explicit(&log->appended,
						memory_order_relaxed);

	p->keep = log->n_segs;
	p->pos = km_segment_readable(s);
	p->next = p->pos == 0 && s->base_offset > appended ? s->base_offset
							   : appended;
	p->bytes = s->size_bytes - p->pos;
	p->batches = 0;
}

/* A roll the disk stopped after sealing the last segment: make it the
 * active one again. The active copy is opened beside the sealed one, which
 * readers keep using until the swap and keep whole if the disk cannot hold
 * the active copy's indexes yet. Its offsets end at the log end. */
static int reactivate(struct km_log *log)
{
	struct km_segment *s = log_active(log), fresh;
	int rc = km_segment_open(&fresh, log->dir_fd, s->base_offset,
				 log->cfg.index_bytes_max, true);

	if (rc < 0)
		return rc;
	fresh.next_offset = log->leo;
	km_log_lock_segments(log);
	km_segment_close(s);
	*s = fresh;
	km_log_unlock_segments(log);
	return 0;
}

int km_log_clear_error(struct km_log *log)
{
	struct cut_plan p;
	int64_t leo = log->leo;
	int rc;

	if (log->error == 0 || !km_log_is_space_error(log->error))
		return log->error;
	if ((rc = km_log_files_need(log)) < 0)
		return rc;
	if ((rc = drain_failed(log)) < 0 ||
	    (!log_active(log)->active && (rc = reactivate(log)) < 0)) {
		/* Callers retry while the disk is full: not a WARN each time. */
		KM_DEBUG("log", "%s: still failed (%s): repairing it: %s",
			log->dir, km_strerror(log->error), km_strerror(rc));
		return rc;
	}
	space_plan(log, &p);
	if ((rc = cut(log, &p)) == 0)
		rc = settle(log);
	if (rc < 0) {
		KM_DEBUG("log", "%s: still failed (%s): repairing it: %s",
			log->dir, km_strerror(log->error), km_strerror(rc));
		return rc;
	}
	KM_INFO("log", "%s: %s cleared: appends resume at offset %lld (the "
		"log end was %lld; %llu bytes never written were dropped)",
		log->dir, km_strerror(log->error), (long long)log->leo,
		(long long)leo, (unsigned long long)p.bytes);
	log->error = 0;
	return 0;
}

/* The cut in progress: c, lowered to the first offset of any transaction
 * that started below c and ended (its marker) at or after c. */
struct cut {
	int64_t c;
	int64_t lowest;
};

static void on_replayed(void *ctx, const struct km_batch *b,
			const struct km_pstate_result *pr)
{
	struct cut *cut = ctx;

	(void)b;
	if (pr->txn_completed && pr->txn_last_offset >= cut->c &&
	    pr->txn_first_offset < cut->lowest)
		cut->lowest = pr->txn_first_offset;
}

int64_t km_log_clean_cut(struct km_log *log)
{
	struct km_pstate_config pc = log->cfg.pstate;
	void *mem = calloc(1, km_pstate_memsize(&pc));
	struct km_pstate *tmp = mem ? km_pstate_init(mem, &pc) : NULL;
	struct cut cut;
	int64_t snap;
	int rc = km_log_files_need(log);

	if (rc == 0)
		rc = km_log_sync(log);

	if (tmp == NULL) {
		free(mem);
		return rc < 0 ? rc : -ENOMEM;
	}
	cut.c = km_log_lso(log);
	/* Each pass can only lower c, and c is bounded below by the log
	 * start, so this ends; a pass replays from the newest snapshot <= c,
	 * which knows every transaction open at that point. */
	for (int pass = 0; rc == 0 && pass < 1000; pass++) {
		cut.lowest = cut.c;
		rc = km_log_rebuild_pstate(log, tmp, cut.c, log->leo, on_replayed,
					   &cut, &snap);
		if (rc < 0 || cut.lowest == cut.c)
			break;
		cut.c = cut.lowest;
	}
	free(mem);
	return rc < 0 ? rc : cut.c;
}
