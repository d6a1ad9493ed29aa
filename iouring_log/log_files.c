/* Open files of cold partitions (issue 17): a log holds its directory and
 * each segment's .log, .index and .timeindex open, four descriptors for a
 * one-segment partition, so 10,000 partitions need 40,000 - twice this
 * machine's hard RLIMIT_NOFILE. Past a budget (km_log_files_set_max), the
 * owner closes the files of its least recently used logs that are idle
 * (nothing queued, in flight or unflushed) and opens them again at their
 * next use; the maps, sizes and reservations stay, so a cold log costs no
 * descriptor and a busy one keeps its files.
 *
 * Each owner thread keeps its own LRU (thread-local: a log is used by the
 * thread that opened it), the count of descriptors held is process-wide.
 * Readers on other threads find a closed segment's .log at -1 under the
 * segment lock and read through a descriptor of their own for that call.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

/* Logs tried per eviction: a busy one at the tail moves to the head. */
#define EVICT_TRIES 16

struct lru {
	struct km_log *head, *tail; /* most recently used first */
};

static _Thread_local struct lru lru;
static _Atomic uint64_t g_max;	 /* 0: no budget, nothing is closed */
static _Atomic uint64_t g_open;	 /* descriptors held by open logs */
static _Atomic uint64_t g_closed; /* logs whose files are closed now */
static _Atomic uint64_t g_releases, g_reopens;

void km_log_files_set_max(uint64_t fds)
{
	atomic_store(&g_max, fds);
}

void km_log_files_get_stats(struct km_log_files_stats *out)
{
	out->max = atomic_load(&g_max);
	out->held = atomic_load(&g_open);
	out->closed_logs = atomic_load(&g_closed);
	out->releases = atomic_load(&g_releases);
	out->reopens = atomic_load(&g_reopens);
}

/* The directory, three files per segment (a .txnindex is rare), and the
 * active segment's O_DIRECT fd (log_dio.c). */
static uint32_t fds_of(const struct km_log *log)
{
	return 2 + 3 * log->n_segs;
}

static void unlink_lru(struct km_log *log)
{
	if (!log->lru_in)
		return;
	if (log->lru_prev != NULL)
		log->lru_prev->lru_next = log->lru_next;
	else
		lru.head = log->lru_next;
	if (log->lru_next != NULL)
		log->lru_next->lru_prev = log->lru_prev;
	else
		lru.tail = log->lru_prev;
	log->lru_prev = log->lru_next = NULL;
	log->lru_in = false;
}

static void push_head(struct km_log *log)
{
	log->lru_prev = NULL;
	log->lru_next = lru.head;
	if (lru.head != NULL)
		lru.head->lru_prev = log;
	lru.head = log;
	if (lru.tail == NULL)
		lru.tail = log;
	log->lru_in = true;
}

/* Its descriptors may go: no request of it is queued or in flight, and
 * nothing waits for a flush that would need them. */
static bool idle(const struct km_log *log)
{
	return log->w_count == 0 && log->filling == NULL &&
	       !log->f_in_flight && log->f_count == 0 &&
	       log->unflushed_bytes == 0;
}

static void release(struct km_log *log)
{
	unlink_lru(log);
	km_log_lock_segments(log); /* readers may be using the files */
	for (uint32_t i = 0; i < log->n_segs; i++)
		km_segment_files_close(&log->segs[i]);
	if (log->dir_fd >= 0)
		close(log->dir_fd);
	log->dir_fd = -1;
	/* Idle: no direct write holds it; log_dio.c opens it again. */
	if (log->dio_fd >= 0)
		close(log->dio_fd);
	log->dio_fd = -1;
	log->files_closed = true;
	km_log_unlock_segments(log);
	atomic_fetch_sub(&g_open, log->files_held);
	log->files_held = 0;
	atomic_fetch_add(&g_closed, 1);
	atomic_fetch_add(&g_releases, 1);
}

/* Close least recently used idle logs (never keep) until room is left
 * for need more descriptors under the budget. */
static void evict(const struct km_log *keep, uint64_t need)
{
	uint64_t max = atomic_load(&g_max);

	for (int n = 0; max != 0 && n < EVICT_TRIES &&
			atomic_load(&g_open) + need > max; n++) {
		struct km_log *v = lru.tail;

		if (v == NULL || v == keep)
			return;
		if (idle(v)) {
			release(v);
		} else {
			unlink_lru(v);
			push_head(v);
		}
	}
}

static int reopen(struct km_log *log)
{
	int rc = 0;

	km_log_lock_segments(log);
	log->dir_fd = open(log->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (log->dir_fd < 0)
		rc = -errno;
	for (uint32_t i = 0; rc == 0 && i < log->n_segs; i++)
		rc = km_segment_files_reopen(&log->segs[i], log->dir_fd);
	if (rc < 0) {
		for (uint32_t i = 0; i < log->n_segs; i++)
			km_segment_files_close(&log->segs[i]);
		if (log->dir_fd >= 0)
			close(log->dir_fd);
		log->dir_fd = -1;
	} else {
		log->files_closed = false;
	}
	km_log_unlock_segments(log);
	if (rc < 0) {
		KM_ERROR("log", "%s: cannot reopen its files: %s", log->dir,
			 km_strerror(rc));
		return rc;
	}
	atomic_fetch_sub(&g_closed, 1);
	atomic_fetch_add(&g_reopens, 1);
	return 0;
}

static bool over_budget(void)
{
	uint64_t max = atomic_load(&g_max);

	return max != 0 && atomic_load(&g_open) > max;
}

/* Account for what the log holds now (segments come and go) and make it
 * the most recently used. */
static void touch(struct km_log *log)
{
	uint32_t held = fds_of(log);

	if (held != log->files_held) {
		atomic_fetch_add(&g_open, held);
		atomic_fetch_sub(&g_open, log->files_held);
		log->files_held = held;
	}
	if (lru.head != log) {
		unlink_lru(log);
		push_head(log);
	}
}

int km_log_files_need(struct km_log *log)
{
	int rc;

	if (log->files_closed) {
		evict(log, fds_of(log));
		if ((rc = reopen(log)) < 0)
			return rc;
	}
	touch(log);
	if (over_budget())
		evict(log, 0);
	return 0;
}

void km_log_files_track(struct km_log *log)
{
	touch(log);
	if (over_budget())
		evict(log, 0);
}

void km_log_files_trim(void)
{
	if (over_budget())
		evict(NULL, 0);
}

void km_log_files_forget(struct km_log *log)
{
	unlink_lru(log);
	atomic_fetch_sub(&g_open, log->files_held);
	log->files_held = 0;
	if (log->files_closed)
		atomic_fetch_sub(&g_closed, 1);
	log->files_closed = false;
}

void km_log_files_pin(struct km_log *log)
{
	unlink_lru(log);
}

/* ---- readers (any thread, segment lock held shared) ---- */

static _Thread_local const char *r_dir;
static _Thread_local const struct km_segment *r_seg;
static _Thread_local const char *r_suffix;
static _Thread_local int r_fd = -1;

void km_log_reader_begin(const struct km_log *log)
{
	r_dir = log->dir;
}

void km_log_reader_end(void)
{
	if (r_fd >= 0)
		close(r_fd);
	r_fd = -1;
	r_seg = NULL;
}

int km_log_reader_fd(const struct km_segment *s, const char *suffix,
		     int open_fd)
{
	char path[PATH_MAX];

	if (open_fd >= 0)
		return open_fd;
	if (r_seg == s && r_suffix == suffix && r_fd >= 0)
		return r_fd;
	km_log_reader_end();
	km_segment_path(path, r_dir, s->base_offset, suffix);
	r_fd = open(path, O_RDONLY | O_CLOEXEC);
	r_seg = s;
	r_suffix = suffix;
	return r_fd < 0 ? -errno : r_fd;
}
