/* Open files of cold partitions (issue 17). A log needs its directory and
 * the index files' descriptors only for what changes its files - an open,
 * a roll, retention, a truncation, a close, a checkpoint, an index page -
 * and between those only each segment's .log (the active one's O_DIRECT
 * twin too; sealed ones' for readers): the indexes are written and read
 * through their maps, which stay valid after their descriptors are
 * closed. The operations open what they need (km_log_files_need; the
 * append path only when it rolls, writes a checkpoint or a .txnindex
 * entry, or allocates index blocks).
 *
 * Past a budget (km_log_files_set_max), the owner first sheds the
 * directory and index descriptors of its least recently used logs (3 a
 * one-segment log), keeping their .logs: so 10,000 one-segment partitions
 * (40,000 files) run under this machine's hard RLIMIT_NOFILE of 20,000
 * holding 10,000 .logs and nothing is closed and reopened per append (the
 * cache below churned through ~20,000 reopens a run). Only when every log
 * is shed does it close every file of its least recently used idle logs
 * (nothing queued, in flight or unflushed) and open them again at their
 * next use; the maps, sizes and reservations stay, so a cold log costs no
 * descriptor and a busy one keeps its files. Under the budget nothing is
 * shed: no reopen is paid where descriptors are plentiful.
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

/* Logs from the tail up to edge (the most recently used of them) are
 * shed or closed: eviction sheds the one before edge next, and closes
 * logs from the tail once edge is the head. */
struct lru {
	struct km_log *head, *tail; /* most recently used first */
	struct km_log *edge;	    /* NULL: no log of the run */
};

static _Thread_local struct lru lru;
static _Atomic uint64_t g_max;	 /* 0: no budget, nothing is closed */
static _Atomic uint64_t g_open;	 /* descriptors held by open logs */
static _Atomic uint64_t g_closed; /* logs whose files are closed now */
static _Atomic uint64_t g_releases, g_reopens, g_sheds, g_unsheds;

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
	out->sheds = atomic_load(&g_sheds);
	out->unsheds = atomic_load(&g_unsheds);
}

/* What the log holds now. */
static uint32_t fds_of(const struct km_log *log)
{
	uint32_t n = (log->dir_fd >= 0) + (log->dio_fd >= 0);

	for (uint32_t i = 0; i < log->n_segs; i++) {
		const struct km_segment *s = &log->segs[i];

		n += (s->log_fd >= 0) + (s->index_fd >= 0) +
		     (s->time_fd >= 0) + (s->txn_fd >= 0);
	}
	return n;
}

/* What a reopen of everything takes: the directory and three files per
 * segment (a .txnindex is rare). */
static uint32_t fds_all(const struct km_log *log)
{
	return 1 + 3 * log->n_segs;
}

static void recount(struct km_log *log)
{
	uint32_t held = fds_of(log);

	if (held != log->files_held) {
		atomic_fetch_add(&g_open, held);
		atomic_fetch_sub(&g_open, log->files_held);
		log->files_held = held;
	}
}

static void unlink_lru(struct km_log *log)
{
	if (!log->lru_in)
		return;
	if (lru.edge == log) /* what follows it is shed too */
		lru.edge = log->lru_next;
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

static void shed(struct km_log *log)
{
	km_log_lock_segments(log); /* readers may be using the files */
	for (uint32_t i = 0; i < log->n_segs; i++)
		km_segment_files_shed(&log->segs[i]);
	if (log->dir_fd >= 0)
		close(log->dir_fd);
	log->dir_fd = -1;
	log->files_shed = true;
	km_log_unlock_segments(log);
	recount(log);
	atomic_fetch_add(&g_sheds, 1);
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
	log->files_shed = false;
	km_log_unlock_segments(log);
	atomic_fetch_sub(&g_open, log->files_held);
	log->files_held = 0;
	atomic_fetch_add(&g_closed, 1);
	atomic_fetch_add(&g_releases, 1);
}

/* The next log to shed: the one before the shed run, passing over keep
 * (whose operation is opening what it needs). */
static struct km_log *to_shed(const struct km_log *keep)
{
	struct km_log *v = lru.edge != NULL ? lru.edge->lru_prev : lru.tail;

	if (v != NULL && v == keep) {
		v = v->lru_prev;
		if (v != NULL) { /* keep moves to the head at its touch */
			unlink_lru((struct km_log *)keep);
			push_head((struct km_log *)keep);
		}
	}
	return v;
}

/* Shed, then close least recently used idle logs (never keep) until room
 * is left for need more descriptors under the budget. */
static void evict(const struct km_log *keep, uint64_t need)
{
	uint64_t max = atomic_load(&g_max);

	for (int n = 0; max != 0 && n < EVICT_TRIES &&
			atomic_load(&g_open) + need > max; n++) {
		struct km_log *v = to_shed(keep);

		if (v != NULL) {
			if (!v->files_shed && !v->files_closed)
				shed(v);
			lru.edge = v;
			continue;
		}
		v = lru.tail;
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

/* Everything closed (by release: every file; by shed: all but the .logs)
 * opened again. */
static int reopen(struct km_log *log)
{
	bool was_closed = log->files_closed;
	int rc = 0;

	km_log_lock_segments(log);
	log->dir_fd = open(log->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (log->dir_fd < 0)
		rc = -errno;
	for (uint32_t i = 0; rc == 0 && i < log->n_segs; i++)
		rc = km_segment_files_reopen(&log->segs[i], log->dir_fd);
	/* A failure leaves the log as it was: a shed one keeps its .logs,
	 * which writes in flight may be using. */
	for (uint32_t i = 0; rc < 0 && i < log->n_segs; i++)
		if (was_closed)
			km_segment_files_close(&log->segs[i]);
		else
			km_segment_files_shed(&log->segs[i]);
	if (rc < 0 && log->dir_fd >= 0)
		close(log->dir_fd);
	if (rc < 0)
		log->dir_fd = -1;
	else
		log->files_closed = false;
	log->files_shed = rc < 0 && !was_closed;
	km_log_unlock_segments(log);
	recount(log);
	if (rc < 0) {
		KM_ERROR("log", "%s: cannot reopen its files: %s", log->dir,
			 km_strerror(rc));
		return rc;
	}
	if (was_closed) {
		atomic_fetch_sub(&g_closed, 1);
		atomic_fetch_add(&g_reopens, 1);
	} else {
		atomic_fetch_add(&g_unsheds, 1);
	}
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
	recount(log);
	if (lru.head != log) {
		unlink_lru(log);
		push_head(log);
	}
}

/* Its files open again if a budget closed them; with all, the directory
 * and the indexes' too. */
static int need(struct km_log *log, bool all)
{
	int rc;

	if (log->files_closed || (all && log->files_shed)) {
		evict(log, fds_all(log));
		if ((rc = reopen(log)) < 0)
			return rc;
	}
	touch(log);
	if (over_budget())
		evict(log, 0);
	return 0;
}

int km_log_files_need(struct km_log *log)
{
	return need(log, true);
}

int km_log_files_need_write(struct km_log *log)
{
	return need(log, false);
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
	log->files_shed = false;
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
