/* The append path: batches -> queued writev per contiguous run -> io_uring;
 * completions advance the appended offset in order; group fdatasyncs advance
 * the durable offset. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/clock.h"
#include "common/container.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

uint64_t km_log_now_ms(void)
{
	return km_clock_ms();
}

void km_log_set_error(struct km_log *log, int err)
{
	KM_ASSERT(err < 0);
	if (log->error != 0)
		return;
	/* A full disk is waited out (km_log_clear_error), not an error. */
	KM_LOG(km_log_is_space_error(err) ? KM_LOG_WARN : KM_LOG_ERROR, "log",
	       "%s: %s; refusing appends from offset %lld%s", log->dir,
	       km_strerror(err), (long long)log->leo,
	       km_log_is_space_error(err) ? " until space is back" : "");
	log->error = err;
}

static void flush_done(struct km_io_req *req, int res, uint32_t flags);

/* Issue the oldest pending sync once the writes it covers have completed:
 * a sync issued earlier would not cover writes still in flight. */
static void kick_flush(struct km_log *log)
{
	struct log_flush *f = &log->flushes[log->f_head];
	int64_t appended = atomic_load_explicit(&log->appended,
						memory_order_relaxed);

	if (log->f_in_flight || log->f_count == 0 || f->target > appended)
		return;
	log->flush_io.fn = flush_done;
	if (km_uring_fdatasync(log->ring, f->fd, &log->flush_io) < 0) {
		km_log_set_error(log, -EBUSY);
		return;
	}
	log->f_in_flight = true;
}

/* Bumped after any log's durable offset moves on: a reader that sees it
 * unchanged knows no high watermark moved (km_log_durable_gen). */
static _Atomic uint64_t g_durable_gen;

uint64_t km_log_durable_gen(void)
{
	return atomic_load_explicit(&g_durable_gen, memory_order_acquire);
}

static void durable_to(struct km_log *log, int64_t offset)
{
	atomic_store_explicit(&log->durable, offset, memory_order_release);
	atomic_fetch_add_explicit(&g_durable_gen, 1, memory_order_release);
}

static void flush_done(struct km_io_req *req, int res, uint32_t flags)
{
	struct km_log *log = km_container_of(req, struct km_log, flush_io);
	struct log_flush *f = &log->flushes[log->f_head];

	(void)flags;
	log->f_in_flight = false;
	if (res < 0) {
		km_log_set_error(log, res);
		return;
	}
	/* Release: a reader that sees this offset sees synced bytes. */
	if (f->target > atomic_load_explicit(&log->durable, memory_order_relaxed))
		durable_to(log, f->target);
	log->f_head = (log->f_head + 1) % KM_LOG_FLUSHES_MAX;
	log->f_count--;
	kick_flush(log);
}

int km_log_queue_flush(struct km_log *log, int fd, int64_t target)
{
	uint32_t tail = (log->f_head + log->f_count + KM_LOG_FLUSHES_MAX - 1) %
			KM_LOG_FLUSHES_MAX;
	bool tail_idle = log->f_count > 1 || (log->f_count == 1 && !log->f_in_flight);

	/* Coalesce with a queued, not yet issued sync of the same file. */
	if (log->f_count > 0 && tail_idle && log->flushes[tail].fd == fd) {
		if (target > log->flushes[tail].target)
			log->flushes[tail].target = target;
	} else {
		if (log->f_count == KM_LOG_FLUSHES_MAX)
			return -EBUSY;
		tail = (log->f_head + log->f_count) % KM_LOG_FLUSHES_MAX;
		log->flushes[tail] = (struct log_flush){ fd, target };
		log->f_count++;
	}
	log->unflushed_bytes = 0;
	log->last_flush_ms = km_log_now_ms();
	kick_flush(log);
	return 0;
}

void km_log_write_done(struct km_io_req *req, int res, uint32_t flags)
{
	struct log_write *w = (struct log_write *)req;
	struct km_log *log = w->log;
	int64_t appended = -1;
	uint64_t readable = 0;

	(void)flags;
	/* Every write targets the active segment: a roll, truncation or
	 * reset first waits for the writes in flight. */
	KM_ASSERT_HOT(w->fd == log_active(log)->log_fd);
	if (res < 0)
		km_log_set_error(log, res);
	else if ((uint32_t)res != (w->chunk ? w->io_bytes : w->bytes))
		km_log_set_error(log, -EIO); /* short write to a reserved file */
	w->done = true;
	if (w->chunk != NULL)
		km_log_dio_done(log, w, res >= 0 && (uint32_t)res == w->io_bytes);
	/* Completions can arrive out of order; publish only a done prefix. */
	while (log->w_count > 0 && log->writes[log->w_head].done) {
		appended = log->writes[log->w_head].end_offset;
		readable = log->writes[log->w_head].pos +
			   log->writes[log->w_head].bytes;
		log->writes[log->w_head].done = false;
		log->w_head = (log->w_head + 1) % KM_LOG_WRITES_MAX;
		log->w_count--;
	}
	/* Empty: start again at slot 0, so that the ring's backed pages (the
	 * log is one lazily backed mapping, log.c) are as many as its
	 * deepest queue, not all 64 slots of a partition once busy. */
	if (log->w_count == 0)
		log->w_head = 0;
	if (appended >= 0 && log->error == 0) {
		/* Bytes first, then offsets, both release: a reader that
		 * acquires appended and then the readable bytes finds the
		 * bytes of every batch below appended readable. */
		km_segment_set_readable(log_active(log), readable);
		atomic_store_explicit(&log->appended, appended,
				      memory_order_release);
	}
	kick_flush(log);
}

/* Hand the write being filled to the ring. */
static int queue_filling(struct km_log *log)
{
	struct log_write *w = log->filling;
	int rc;

	if (w == NULL)
		return 0;
	if (w->chunk != NULL)
		return km_log_dio_close(log);
	log->filling = NULL;
	w->io.fn = km_log_write_done;
	rc = km_uring_writev(log->ring, w->fd, w->iov, w->n_iov, w->pos, false,
			     &w->io);
	if (rc < 0)
		km_log_set_error(log, rc);
	return rc;
}

struct log_write *km_log_write_new(struct km_log *log, struct km_segment *seg)
{
	struct log_write *w;

	if (log->w_count == KM_LOG_WRITES_MAX)
		return NULL;
	km_log_wake(log);
	w = &log->writes[(log->w_head + log->w_count) % KM_LOG_WRITES_MAX];
	log->w_count++;
	memset(w, 0, offsetof(struct log_write, iov));
	w->log = log;
	w->fd = seg->log_fd;
	w->pos = seg->size_bytes;
	log->filling = w;
	return w;
}

/* Chain segments a batch spans: each may need an iovec of its own. */
static uint32_t count_iov(const struct km_batch *b)
{
	struct km_chain_cur cur = b->start;
	uint32_t left = km_batch_size(b), n = 0;

	while (left > 0) {
		size_t avail = b->chain->iov[cur.seg].iov_len - cur.off;
		size_t take = avail < left ? avail : left;

		n++;
		left -= (uint32_t)take;
		(void)km_chain_advance(b->chain, &cur, take);
	}
	return n;
}

static uint32_t free_writes(const struct km_log *log)
{
	return KM_LOG_WRITES_MAX - log->w_count;
}

/* Add one memory run to the write being filled, starting another write
 * when it is full. Runs contiguous in memory merge into one iovec. */
static void add_run(struct km_log *log, struct km_segment *seg, char *base,
		    size_t len, int64_t end_offset)
{
	struct log_write *w = log->filling;
	struct iovec *last;

	if (w != NULL && w->fd != seg->log_fd) {
		queue_filling(log);
		w = NULL;
	}
	if (w == NULL) {
		w = km_log_write_new(log, seg);
		KM_ASSERT(w != NULL); /* prepare() checked free_writes() */
	}
	last = w->n_iov ? &w->iov[w->n_iov - 1] : NULL;
	if (last && (char *)last->iov_base + last->iov_len == base) {
		last->iov_len += len;
	} else {
		if (w->n_iov == KM_LOG_WRITE_IOV_MAX) {
			/* Maybe mid-batch: seg->size_bytes is still the batch's
			 * start, so continue where this write ends. */
			uint64_t next_pos = w->pos + w->bytes;

			queue_filling(log);
			w = km_log_write_new(log, seg);
			KM_ASSERT(w != NULL);
			w->pos = next_pos;
		}
		w->iov[w->n_iov++] = (struct iovec){ base, len };
	}
	w->bytes += (uint32_t)len;
	w->end_offset = end_offset;
}

/* Queue b's bytes for the active segment. A batch split over several
 * writes publishes its offsets only with its last piece. */
static void add_batch(struct km_log *log, struct km_segment *seg,
		      const struct km_batch *b)
{
	struct km_chain_cur cur = b->start;
	uint32_t left = km_batch_size(b);

	while (left > 0) {
		const struct iovec *v = &b->chain->iov[cur.seg];
		size_t avail = v->iov_len - cur.off;
		size_t take = avail < left ? avail : left;

		left -= (uint32_t)take;
		add_run(log, seg, (char *)v->iov_base + cur.off, take,
			left == 0 ? km_batch_last_offset(b) + 1 : log->leo);
		(void)km_chain_advance(b->chain, &cur, take);
	}
}

/* Roll to a new segment at base. snap_len bytes of log->snap_buf hold the
 * producer snapshot for base (the state before the batch at base). */
static int roll(struct km_log *log, int64_t base, int snap_len)
{
	struct km_segment *old = log_active(log);
	int rc;

	if (log->n_segs == log->cfg.segments_max)
		return KM_ESEGMENTS;
	if ((rc = km_log_files_need(log)) < 0) /* the directory, the indexes */
		return rc;
	queue_filling(log);
	/* <base>.snapshot tells recovery that everything below base is in
	 * the log, and recovery rescans only from the newest snapshot: so
	 * the old segment's data must be on disk before the snapshot is.
	 * Wait for this log's writes, then sync (rolls are rare). */
	for (uint32_t n = 0; log->w_count > 0 && n < 1000000; n++)
		if ((rc = km_uring_poll(log->ring, true)) < 0)
			return rc;
	if (log->error)
		return log->error;
	if ((rc = km_log_dio_trim(log)) < 0 || fdatasync(old->log_fd) < 0)
		return rc < 0 ? rc : -errno;
	if (log->leo > atomic_load_explicit(&log->durable, memory_order_relaxed))
		durable_to(log, log->leo);
	/* Readers keep reading the old segment meanwhile: the seal swaps its
	 * index maps for read-only ones and retires the writable ones. */
	if ((rc = km_segment_seal(old)) < 0)
		return rc;
	if ((rc = km_log_snap_write_encoded(log, base, (size_t)snap_len)) < 0)
		return rc;
	/* Built past n_segs, where no reader looks, and shown whole under
	 * the lock; once the lock has been held, no read that could have
	 * loaded the retired maps is still running. */
	rc = km_segment_create(&log->segs[log->n_segs], log->dir_fd, base,
			       log->cfg.index_bytes_max);
	if (rc < 0) {
		/* No empty segment may stay behind for recovery to adopt. */
		(void)km_segment_delete(&log->segs[log->n_segs], log->dir_fd);
		return rc;
	}
	km_log_lock_segments(log);
	log->n_segs++;
	km_log_unlock_segments(log);
	km_segment_drop_retired(old);
	KM_INFO("log", "%s: rolled to segment %020lld", log->dir,
		(long long)base);
	return 0;
}

static bool needs_roll(struct km_log *log, const struct km_batch *b)
{
	struct km_segment *s = log_active(log);

	if (s->size_bytes == 0)
		return false;
	return s->size_bytes + km_batch_size(b) > log->cfg.segment_bytes ||
	       km_batch_last_offset(b) - s->base_offset > INT32_MAX ||
	       km_segment_index_full(s);
}

/* R6 for mirrored batches; local ones take the next offsets. */
static int place(struct km_log *log, struct km_batch *b, enum km_origin origin)
{
	if (origin != KM_ORIGIN_MIRROR) {
		if (!log->local_epoch_chosen) {
			log->local_epoch = log->n_epochs == 0
				? 0 : log->epochs[log->n_epochs - 1].epoch + 1;
			log->local_epoch_chosen = true;
		}
		km_batch_set_base_offset(b, log->leo);
		km_batch_set_leader_epoch(b, log->local_epoch);
		return 1;
	}
	log->local_epoch_chosen = false;
	if (km_batch_last_offset(b) < log->leo)
		return 0; /* already have it: a refetch after reconnect */
	if (km_batch_base_offset(b) < log->leo)
		return KM_EOFFSET;
	return 1;
}

/* Refusals that change nothing: size, and room in the write queue. */
static int check_room(struct km_log *log, const struct km_batch *b,
		      enum km_origin origin)
{
	int rc;

	if (km_batch_size(b) > log->cfg.batch_bytes_max)
		return KM_EBATCHMAX;
	if (log->dio_on) {
		rc = km_log_dio_room(log, km_batch_size(b));
		/* The write buffers are the worker's: other partitions' writes
		 * may hold them all. A CONTROL batch (a stop's barrier, a
		 * transaction marker) waits for them, as a roll waits. */
		for (uint32_t n = 0; rc == -EAGAIN && origin == KM_ORIGIN_CONTROL &&
				     km_uring_busy(log->ring) > 0 && n < 1000000; n++)
			if ((rc = km_uring_poll(log->ring, true)) >= 0)
				rc = km_log_dio_room(log, km_batch_size(b));
		return rc;
	}
	/* One write per KM_LOG_WRITE_IOV_MAX runs, plus one to close a
	 * partly filled write, plus one spare for a roll. */
	if (free_writes(log) < count_iov(b) / KM_LOG_WRITE_IOV_MAX + 3)
		return -EAGAIN;
	return 0;
}

/* Blocks for b in the active segment, so that its write cannot fail for
 * space. The step scales with the partition's write rate
 * (km_segment_step_next), from 64 KiB up to prealloc_bytes: a
 * partition reserves about a second of its own writes ahead, so thousands
 * of quiet ones do not each pin prealloc_bytes of disk while a busy one
 * still gets large extents (Kafka reserves nothing unless
 * file.preallocate=true, and then a whole segment). No more than a segment
 * holds. Data leaves keep_free_bytes of the filesystem to CONTROL batches
 * and the files a stop or a recovery writes, so that a full disk can still
 * be failed over. */
static int reserve(struct km_log *log, const struct km_batch *b,
		   enum km_origin origin)
{
	struct km_segment *seg = log_active(log);
	uint64_t end = seg->size_bytes + km_batch_size(b);
	uint64_t max = log->cfg.prealloc_bytes < log->cfg.segment_bytes
			       ? log->cfg.prealloc_bytes
			       : log->cfg.segment_bytes;
	uint64_t now = 0, step = log->step_bytes;
	bool stepping;
	int rc;

	/* A direct write fills the last block with zeros: its blocks too. */
	if (log->dio_on)
		end = (end + KM_DIO_BLOCK - 1) & ~(uint64_t)(KM_DIO_BLOCK - 1);
	stepping = end > seg->reserved_bytes;
	/* Index blocks take the index files' descriptors: a page of each
	 * every MiB or two of the partition's data. */
	if (log->files_shed && km_segment_index_due(seg) &&
	    (rc = km_log_files_need(log)) < 0)
		return rc;
	if (stepping) {
		now = km_log_now_ms();
		step = km_segment_step_next(log->step_bytes, now - log->step_ms,
					    max);
	}
	rc = km_segment_reserve(seg, end, step,
				origin == KM_ORIGIN_CONTROL
					? 0 : log->cfg.keep_free_bytes);
	if (rc == 0 && stepping) {
		log->step_bytes = step;
		log->step_ms = now;
	}
	return rc;
}

/* Roll for an accepted batch (its snapshot, snap_len bytes, is in
 * log->snap_buf) and reserve in the new segment. Producer state has taken
 * the batch already, so failures here are sticky: a space error is
 * repaired by km_log_clear_error. */
static int roll_for(struct km_log *log, struct km_batch *b,
		    enum km_origin origin, int snap_len)
{
	int rc = roll(log, km_batch_base_offset(b), snap_len);

	if (rc == 0)
		rc = reserve(log, b, origin);
	if (rc < 0)
		km_log_set_error(log, rc); /* nothing of this batch written */
	return rc;
}

static int note_side_effects(struct km_log *log, const struct km_batch *b,
			     const struct km_pstate_result *pr)
{
	struct km_segment *seg = log_active(log);
	int rc;

	if (pr->txn_aborted) {
		struct km_aborted_txn t = { pr->txn_producer_id,
					    pr->txn_first_offset,
					    pr->txn_last_offset,
					    pr->txn_last_stable_offset };

		/* The .txnindex and its directory, shed between operations. */
		if ((rc = km_log_files_need(log)) < 0 ||
		    (rc = km_segment_txn_append(seg, &t)) < 0)
			return rc;
	}
	if ((rc = km_log_epoch_note(log, km_batch_leader_epoch(b),
				    km_batch_base_offset(b))) < 0)
		return rc;
	return km_segment_index_batch(seg, km_batch_base_offset(b),
				      km_batch_last_offset(b),
				      km_batch_max_timestamp(b), seg->size_bytes,
				      km_batch_size(b),
				      log->cfg.index_interval_bytes);
}

static void count_result(struct km_log_append_result *res,
			 const struct km_batch *b,
			 const struct km_pstate_result *pr)
{
	if (res->first_offset < 0)
		res->first_offset = km_batch_base_offset(b);
	res->last_offset = km_batch_last_offset(b);
	res->appended++;
	res->barriers += pr->barrier;
	res->barrier_expired += pr->barrier_expired;
}

bool km_log_verifies_crc(const struct km_log *log)
{
	return log->dio_on;
}

/* A batch framed with its CRC unchecked (km_batch_frame) is checked before
 * producer state or the segment sees it: as it is copied into the write
 * buffers (staged: nothing of it submitted yet), or, when a roll comes
 * first or the writes are buffered (from the chain), on its own.
 * @return 1 if staged in *m, 0 if checked (or not pending), or KM_EBADCRC
 *         or the log's error with the log unchanged. */
static int check_pending(struct km_log *log, struct km_batch *b, bool rolls,
			 struct km_dio_mark *m)
{
	int rc;

	if (!b->crc_pending)
		return 0;
	if (rolls || !log->dio_on)
		return km_batch_settle(b);
	rc = km_log_dio_stage(log, log_active(log), b, m);
	return rc < 0 ? rc : 1;
}

static int append_one(struct km_log *log, struct km_batch *b,
		      enum km_origin origin, struct km_log_append_result *res)
{
	struct km_pstate_result pr;
	struct km_dio_mark mark;
	bool staged;
	int snap_len = -1;
	int rc = place(log, b, origin);

	if (rc <= 0) {
		res->duplicates += rc == 0;
		return rc;
	}
	if ((rc = check_room(log, b, origin)) < 0)
		return rc;
	/* A roll's snapshot is the state before this batch: encode it now,
	 * so producer state can still refuse the batch before a segment is
	 * made for it (a refused mirrored batch after an offset gap would
	 * leave an empty segment based above the log end). */
	if (needs_roll(log, b)) {
		snap_len = km_pstate_snapshot_encode(log->ps, log->snap_buf,
						     log->snap_cap);
		if (snap_len < 0)
			return snap_len;
	} else if ((rc = reserve(log, b, origin)) < 0) {
		/* Before producer state sees the batch: a batch the disk
		 * cannot hold is refused with the log unchanged, and the
		 * batches before it stay appended (whole batches only). */
		return rc;
	}
	if ((rc = check_pending(log, b, snap_len >= 0, &mark)) < 0)
		return rc;
	staged = rc == 1;
	rc = km_pstate_append(log->ps, b, origin, km_log_durable_offset(log), &pr);
	if (rc < 0) {
		if (staged)
			km_log_dio_undo(log, &mark);
		res->dup_first_offset = pr.dup_first_offset;
		res->dup_last_offset = pr.dup_last_offset;
		return rc;
	}
	if (snap_len >= 0 && (rc = roll_for(log, b, origin, snap_len)) < 0)
		return rc;
	if ((rc = note_side_effects(log, b, &pr)) < 0) {
		if (staged)
			km_log_dio_undo(log, &mark);
		km_log_set_error(log, rc);
		return rc;
	}
	if (staged)
		km_log_dio_commit(log, &mark);
	else if (log->dio_on)
		km_log_dio_add(log, log_active(log), b);
	else
		add_batch(log, log_active(log), b);
	log_active(log)->size_bytes += km_batch_size(b);
	log->leo = km_batch_last_offset(b) + 1;
	log->unflushed_bytes += km_batch_size(b);
	count_result(res, b, &pr);
	return 0;
}

int km_log_append_burst(struct km_log *log, struct km_batch *batches,
			uint32_t n, enum km_origin origin,
			struct km_log_append_result *res)
{
	uint32_t i;
	int rc = 0;

	memset(res, 0, sizeof(*res));
	res->first_offset = res->last_offset = -1;
	res->dup_first_offset = res->dup_last_offset = -1;
	if (log->error)
		return log->error;
	if ((rc = km_log_files_need_write(log)) < 0)
		return rc;
	for (i = 0; i < n && rc == 0; i++)
		rc = append_one(log, &batches[i], origin, res);
	if (rc < 0)
		i--; /* the failing batch stays the caller's */
	if (res->appended > 0 && log->touch != NULL)
		log->touch(log->touch_arg);
	queue_filling(log);
	if (log->cfg.flush_always && res->appended > 0)
		rc = km_log_flush(log) < 0 ? log->error : rc;
	else if (log->unflushed_bytes >= log->cfg.flush_bytes)
		(void)km_log_flush(log);
	(void)km_uring_submit(log->ring);
	if (i == 0 && rc < 0 && rc != -EAGAIN)
		return rc;
	return (int)i;
}

int km_log_flush(struct km_log *log)
{
	int rc = km_log_files_need_write(log);

	if (rc < 0)
		return rc;
	queue_filling(log);
	if (log->error)
		return log->error;
	rc = km_log_queue_flush(log, log_active(log)->log_fd, log->leo);
	if (rc == 0)
		rc = km_uring_submit(log->ring) < 0 ? -EIO : 0;
	return rc;
}

void km_log_tick(struct km_log *log, uint64_t now_ms)
{
	km_log_files_trim();
	if (log->unflushed_bytes > 0 &&
	    now_ms - log->last_flush_ms >= log->cfg.flush_interval_ms)
		(void)km_log_flush(log);
	km_log_idle_check(log, now_ms);
}

void km_log_set_touch(struct km_log *log, void (*fn)(void *arg), void *arg)
{
	log->touch = fn;
	log->touch_arg = arg;
}

bool km_log_busy(const struct km_log *log)
{
	return log->unflushed_bytes > 0 || log->w_count > 0 ||
	       log->filling != NULL || log->f_count > 0 || log->f_in_flight;
}

int km_log_sync(struct km_log *log)
{
	queue_filling(log);
	/* This log's requests only: the ring is shared with the worker's
	 * sockets, whose multishot requests never drain. Each pass completes
	 * at least one request; a failed log issues no more syncs. */
	for (uint32_t n = 0; n < 1000000; n++) {
		int rc;

		if (log->w_count == 0 && !log->f_in_flight &&
		    (log->f_count == 0 || log->error))
			break;
		if ((rc = km_uring_poll(log->ring, true)) < 0)
			return rc;
	}
	return log->error;
}

int64_t km_log_end_offset(const struct km_log *log)
{
	return log->leo;
}

int64_t km_log_appended_offset(const struct km_log *log)
{
	return atomic_load_explicit(&log->appended, memory_order_acquire);
}

int64_t km_log_durable_offset(const struct km_log *log)
{
	return atomic_load_explicit(&log->durable, memory_order_acquire);
}

int km_log_error(const struct km_log *log)
{
	return log->error;
}
