/* Truncation and the R4 transaction-clean cut. Control-path operations: they
 * wait for in-flight I/O and may allocate. */
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

static int cut_segments(struct km_log *log, int64_t offset, uint64_t *bytes,
			uint32_t *batches)
{
	uint32_t i = km_log_find_segment(log, offset);
	struct km_segment *s;
	uint64_t pos;
	int64_t next;
	int rc;

	/* Never delete the first segment: the log keeps at least one. */
	while (log->n_segs > i + 1 ||
	       (log->n_segs > 1 && log_active(log)->base_offset >= offset)) {
		s = log_active(log);
		if ((rc = count_from(log, s, 0, bytes, batches)) < 0 ||
		    (rc = km_segment_delete(s, log->dir_fd)) < 0)
			return rc;
		log->n_segs--;
	}
	s = log_active(log);
	if ((rc = cut_position(log, s, offset, &pos, &next)) < 0)
		return rc;
	if (pos == 0 && log->n_segs > 1) {
		/* Nothing of it stays: drop it, as a cut at its base does,
		 * so the end is the offset after the last batch kept. */
		if ((rc = count_from(log, s, 0, bytes, batches)) < 0 ||
		    (rc = km_segment_delete(s, log->dir_fd)) < 0)
			return rc;
		log->n_segs--;
		s = log_active(log);
		if ((rc = cut_position(log, s, offset, &pos, &next)) < 0)
			return rc;
	}
	if ((rc = count_from(log, s, pos, bytes, batches)) < 0 ||
	    (rc = km_segment_truncate(s, pos, next)) < 0)
		return rc;
	log->leo = next;
	if ((rc = activate_last(log)) < 0 ||
	    (rc = reload_max_timestamp(log, log_active(log))) < 0)
		return rc;
	return fsync(log_active(log)->log_fd) < 0 ? -errno : 0;
}

int64_t km_log_truncate_to(struct km_log *log, int64_t offset,
			   uint64_t *removed_bytes, uint32_t *removed_batches)
{
	uint64_t bytes = 0;
	uint32_t batches = 0;
	int64_t snap;
	int rc = km_log_sync(log);

	if (rc == 0 && offset < log->leo)
		rc = cut_segments(log, offset, &bytes, &batches);
	/* Everything kept becomes the durable offset below: sync it first,
	 * whatever the flush policy left unsynced. */
	if (rc == 0 && fdatasync(log_active(log)->log_fd) < 0)
		rc = -errno;
	if (rc == 0)
		rc = km_log_epoch_truncate(log, log->leo);
	if (rc == 0)
		rc = km_log_drop_snapshots_after(log, log->leo);
	if (rc == 0)
		rc = km_log_rebuild_pstate(log, log->ps, log->leo, log->leo, NULL,
					   NULL, &snap);
	if (rc < 0) {
		km_log_set_error(log, rc);
		return rc;
	}
	atomic_store_explicit(&log->appended, log->leo, memory_order_release);
	atomic_store_explicit(&log->durable, log->leo, memory_order_release);
	if (removed_bytes)
		*removed_bytes = bytes;
	if (removed_batches)
		*removed_batches = batches;
	KM_INFO("log", "%s: truncated to offset %lld: %u batches, %llu bytes "
		"removed", log->dir, (long long)log->leo, batches,
		(unsigned long long)bytes);
	return log->leo;
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
	void *mem = malloc(km_pstate_memsize(&pc));
	struct km_pstate *tmp = mem ? km_pstate_init(mem, &pc) : NULL;
	struct cut cut;
	int64_t snap;
	int rc = km_log_sync(log);

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
