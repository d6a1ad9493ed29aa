/* Opening, closing and configuring a partition log. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/km_assert.h"
#include "common/km_limits.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

void km_log_config_defaults(struct km_log_config *cfg, const char *data_dir,
			    const char *topic, int32_t partition)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->data_dir = data_dir;
	cfg->topic = topic;
	cfg->partition = partition;
	cfg->segment_bytes = 1ull << 30;	   /* segment.bytes */
	cfg->index_interval_bytes = 4096;	   /* index.interval.bytes */
	cfg->index_bytes_max = 10 * 1024 * 1024;   /* segment.index.bytes */
	cfg->flush_interval_ms = 1000;
	cfg->flush_bytes = 64ull << 20;
	cfg->prealloc_bytes = 64ull << 20;
	cfg->keep_free_bytes = 1ull << 20;
	cfg->batch_bytes_max = KM_BATCH_BYTES_MAX;
	cfg->segments_max = 1024;
	cfg->retention_ms = -1;
	cfg->retention_bytes = -1;
	cfg->pstate.producers_max = 4096;
	cfg->pstate.txns_max = 1024;
	cfg->delete_retention_ms = 86400000;	   /* delete.retention.ms */
	cfg->cleaner_map_bytes = 128ull << 20;	   /* dedupe.buffer.size */
	cfg->min_cleanable_ratio = 0.5;		   /* min.cleanable.dirty.ratio */
	cfg->direct_io = true;
	cfg->tail_cache_bytes = 16ull << 20;
}

/* A log's memory is one zeroed mapping, backed only where it is touched:
 * the struct (its write ring fills as the partition writes), the segment
 * array (segments_max), the producer table (producers_max) and the
 * snapshot buffer are sized for the most a partition may hold, and a quiet
 * partition touches a page or two of each - where calloc from the heap
 * writes them all. One mapping, not four: vm.max_map_count (65530) also
 * has to cover two index maps per segment of thousands of partitions. */
struct log_layout {
	size_t segs, ps, snap, total; /* offsets, and the whole length */
};

static size_t page_up(size_t n)
{
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);

	return (n + pg - 1) / pg * pg;
}

static void log_layout(const struct km_log_config *c, struct log_layout *l)
{
	l->segs = page_up(sizeof(struct km_log));
	l->ps = l->segs + page_up((size_t)c->segments_max *
				  sizeof(struct km_segment));
	l->snap = l->ps + page_up(km_pstate_memsize(&c->pstate));
	l->total = l->snap + page_up(10 + 46 * (size_t)c->pstate.producers_max);
}

static struct km_log *alloc_log(const struct km_log_config *c)
{
	struct log_layout l;
	struct km_log *log;
	uint8_t *p;

	log_layout(c, &l);
	p = mmap(NULL, l.total, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	log = (struct km_log *)p;
	log->map_bytes = l.total;
	log->segs = (struct km_segment *)(p + l.segs);
	log->ps_mem = p + l.ps;
	log->snap_buf = p + l.snap;
	log->snap_cap = l.total - l.snap;
	log->ps = km_pstate_init(log->ps_mem, &c->pstate);
	return log;
}

void km_log_free(struct km_log *log)
{
	km_log_files_forget(log);
	for (uint32_t i = 0; i < log->n_segs; i++)
		km_segment_close(&log->segs[i]);
	if (log->dir_fd >= 0)
		close(log->dir_fd);
	if (log->dio_fd >= 0)
		close(log->dio_fd);
	km_log_dio_release(log);
	km_log_sleep(log);
	pthread_rwlock_destroy(&log->seg_lock);
	free(log->dir);
	munmap(log, log->map_bytes);
}

/* Writer-preferring: readers of other threads call in a tight loop, and
 * glibc's default (readers first) could keep the owner's roll waiting for
 * as long as they do. */
static int init_seg_lock(struct km_log *log)
{
	pthread_rwlockattr_t attr;
	int rc = pthread_rwlockattr_init(&attr);

	if (rc != 0)
		return -rc;
	rc = pthread_rwlockattr_setkind_np(
		&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (rc == 0)
		rc = pthread_rwlock_init(&log->seg_lock, &attr);
	pthread_rwlockattr_destroy(&attr);
	return -rc;
}

void km_log_lock_segments(struct km_log *log)
{
	/* Fails only on misuse (EDEADLK: the owner already holds it). */
	KM_ASSERT(pthread_rwlock_wrlock(&log->seg_lock) == 0);
	/* The active segment's file may change: the O_DIRECT fd and the
	 * remembered last block are opened and read again when needed. */
	km_log_dio_forget(log);
}

void km_log_unlock_segments(struct km_log *log)
{
	KM_ASSERT(pthread_rwlock_unlock(&log->seg_lock) == 0);
}

static int sync_dir_path(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static int open_dir(struct km_log *log)
{
	static _Thread_local char synced[PATH_MAX]; /* this thread's last */
	const struct km_log_config *c = &log->cfg;
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%s-%d", c->data_dir,
			 c->topic, c->partition);
	bool made;
	int rc;

	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	if ((log->dir = strdup(path)) == NULL)
		return -ENOMEM;
	if (mkdir(c->data_dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	made = mkdir(log->dir, 0755) == 0;
	if (!made && errno != EEXIST)
		return -errno;
	/* The partition directory's name survives a power cut only once its
	 * parent is synced (POSIX; ext4 is kinder), and nothing synced inside
	 * it counts before. Once per thread and data.dir, and for each one
	 * made: a name made just before a crash is covered by the restart's
	 * first open, without 10,000 opens each syncing the same parent. */
	if (made || strcmp(synced, c->data_dir) != 0) {
		if ((rc = sync_dir_path(c->data_dir)) < 0)
			return rc;
		snprintf(synced, sizeof(synced), "%s", c->data_dir);
	}
	log->dir_fd = open(log->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return log->dir_fd < 0 ? -errno : 0;
}

static int check_config(const struct km_log_config *c)
{
	if (c->segment_bytes < 1024 || c->segment_bytes > (1ull << 31) ||
	    c->index_bytes_max < 64 || c->segments_max < 1 ||
	    c->batch_bytes_max > KM_BATCH_BYTES_MAX ||
	    c->batch_bytes_max < KM_BATCH_HEADER_BYTES)
		return -EINVAL;
	return 0;
}

/* The indexes are reserved whole when a segment opens: no bigger than the
 * segment can fill (an entry per index interval, 12 B for the time index),
 * so small segments do not each pin 2 x 10 MiB of disk. A full index rolls
 * the segment, so the cap is never wrong, only early. */
static uint32_t index_bytes_for(const struct km_log_config *c)
{
	uint64_t need = (c->segment_bytes / (c->index_interval_bytes
						 ? c->index_interval_bytes : 1) + 2) * 12;

	need = (need + 4095) & ~4095ull;
	return need < c->index_bytes_max ? (uint32_t)need : c->index_bytes_max;
}

int km_log_open(struct km_log **out, const struct km_log_config *cfg,
		struct km_uring *ring, struct km_log_recovery *rec)
{
	struct km_log_recovery local;
	struct km_log *log;
	int rc = check_config(cfg);

	if (rc < 0)
		return rc;
	if (cfg->pstate.producers_max == 0 || cfg->pstate.txns_max == 0)
		return -EINVAL;
	if ((log = alloc_log(cfg)) == NULL)
		return -ENOMEM;
	if ((rc = init_seg_lock(log)) < 0) {
		munmap(log, log->map_bytes);
		return rc;
	}
	log->cfg = *cfg;
	log->cfg.index_bytes_max = index_bytes_for(cfg);
	log->ring = ring;
	log->dir_fd = -1;
	log->dio_fd = -1;
	log->clean_horizon = INT64_MAX;
	log->last_flush_ms = km_log_now_ms();
	if ((rc = open_dir(log)) < 0 ||
	    (rc = km_log_write_metadata(log)) < 0 ||
	    (rc = km_log_epoch_load(log)) < 0 ||
	    (rc = km_log_recover(log, rec ? rec : &local)) < 0 ||
	    (rc = km_log_dio_probe(log)) < 0)
		goto out_free;
	log->cfg.data_dir = log->cfg.topic = NULL; /* borrowed: not kept */
	/* What an unmark found holds for this open only: a config read
	 * back (km_log_config_get) must not vouch for a later one. */
	log->cfg.marker = KM_LOG_MARK_CHECK;
	km_log_files_track(log);
	*out = log;
	return 0;
out_free:
	km_log_free(log);
	return rc;
}

bool km_log_clean_marker_exists(struct km_log *log)
{
	return faccessat(log->dir_fd, CLEAN_MARKER, F_OK, 0) == 0;
}

int km_log_close(struct km_log *log)
{
	int rc;

	/* One close is a batch of one: the same steps, the same order. */
	km_log_close_many(&log, 1, &rc);
	return rc;
}

void km_log_abandon(struct km_log *log)
{
	/* Queued and in-flight requests point into *log; the files closed
	 * by a budget are opened for the close's trims. */
	(void)km_log_files_need(log);
	(void)km_log_sync(log);
	km_log_free(log);
}

int km_log_checkpoint(struct km_log *log)
{
	/* km_log_sync only waits: the fdatasync must be queued first, or the
	 * durable offset (the HW) waits for the flush timer. */
	int rc = km_log_files_need(log);

	if (rc == 0)
		rc = km_log_flush(log);
	if (rc == 0)
		rc = km_log_sync(log);

	return rc < 0 ? rc : km_log_snap_write(log, log->leo);
}

int64_t km_log_start_offset(const struct km_log *log)
{
	return log_start(log);
}

int64_t km_log_lso(struct km_log *log)
{
	return km_pstate_lso(log->ps, km_log_durable_offset(log));
}

struct km_pstate *km_log_pstate(struct km_log *log)
{
	return log->ps;
}

bool km_log_direct_io(const struct km_log *log)
{
	return log->dio_on;
}

const char *km_log_dir(const struct km_log *log)
{
	return log->dir;
}
