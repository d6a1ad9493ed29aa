/* The clean-shutdown marker, for many logs at once (issue 17).
 *
 * .kafka_cleanshutdown in a partition's directory lets the next open trust
 * the files without a scan (R7), so it may exist only while they are what
 * a finished close left, durably: it becomes durable after everything it
 * vouches for (close), and its removal becomes durable before an open
 * changes a file. Done one log after another, that is a handful of syncs
 * per log in a row, and 10,000 partitions took most of a minute to stop
 * and seconds to start. Here the syncs of many logs are in flight together
 * through io_uring, in steps, each waiting for all of the step before:
 *
 * close (km_log_close_many, batches of CLOSE_BATCH logs):
 *   1. each log's appends waited for and fdatasync'd (queued for all, then
 *      waited for);
 *   2. each log, no syncs: direct-write padding cut, the active segment
 *      sealed, the producer snapshot at the log end written to its .tmp
 *      (not at all when the file there holds the same bytes);
 *   3. every file step 2 changed fsync'd;
 *   4. each new snapshot renamed into place, those directories fsync'd;
 *   5. each marker created, the directories fsync'd.
 * A log whose step fails gets no marker, and the next open scans it. A
 * crash in any step leaves markers only on logs whose files were synced.
 *
 * open (km_log_unmark_many, before the opens): every marker unlinked, the
 * directories fsync'd together; then each open is told what was found.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errors.h"
#include "common/file.h"
#include "common/km_assert.h"
#include "common/log.h"
#include "iouring_log/log_pvt.h"

/* Logs closed together: their files stay open until the batch ends, so
 * this bounds the descriptors a close adds to the budget's. */
#define CLOSE_BATCH 64
/* fsyncs per log in one step at most: .log, the three indexes, snapshot */
#define SYNCS_PER_LOG 5
/* Directories unmarked together (their descriptors open meanwhile). */
#define UNMARK_BATCH 256

#ifdef KM_TEST_HOOKS
/* Tests: called after each step of a batched close (1-5) and after the
 * removals of km_log_unmark_many are durable (10), to die there. */
void (*km_log_marker_test_hook)(int step);
#define STEP_DONE(step)                                                      \
	do {                                                                 \
		if (km_log_marker_test_hook != NULL)                         \
			km_log_marker_test_hook(step);                        \
	} while (0)
#else
#define STEP_DONE(step) ((void)0)
#endif

struct closing {
	struct km_log *log;
	int rc;
	bool cut;    /* the .log's size changed: fsync it, not only its data */
	int snap_fd; /* the new snapshot's .tmp, -1: none */
	char snap_name[64];
};

struct sync_req {
	struct km_io_req io; /* first: the CQE's user_data */
	struct syncer *s;
	int *rc;
};

/* fsyncs in flight together on one ring, each failure its owner's. */
struct syncer {
	struct km_uring *ring;
	struct sync_req *reqs;
	uint32_t n, cap, pending;
	int rc; /* the ring failed: nothing can be trusted */
};

static void sync_done(struct km_io_req *req, int res, uint32_t flags)
{
	struct sync_req *r = (struct sync_req *)req;

	(void)flags;
	if (res < 0 && *r->rc == 0)
		*r->rc = res;
	r->s->pending--;
}

static void sync_add(struct syncer *s, int fd, int *rc)
{
	struct sync_req *r;

	if (s->rc < 0 && *rc == 0)
		*rc = s->rc; /* the ring failed before: nothing is synced */
	if (fd < 0 || *rc < 0)
		return;
	KM_ASSERT(s->n < s->cap);
	r = &s->reqs[s->n];
	r->io.fn = sync_done;
	r->s = s;
	r->rc = rc;
	if (km_uring_fsync(s->ring, fd, &r->io) < 0) {
		*rc = -EBUSY;
		return;
	}
	s->n++;
	s->pending++;
}

/* @return 0, or the ring's error (requests may still be in flight: the
 * caller keeps reqs alive). */
static int sync_wait(struct syncer *s)
{
	while (s->rc == 0 && s->pending > 0) {
		int rc = km_uring_poll(s->ring, true);

		if (rc < 0)
			s->rc = rc;
	}
	s->n = 0;
	return s->rc;
}

/* ---- close ---- */

/* Nothing appended since the last completed sync. */
static bool synced(struct km_log *log)
{
	return log->filling == NULL && log->w_count == 0 &&
	       log->f_count == 0 && !log->f_in_flight &&
	       atomic_load_explicit(&log->durable, memory_order_relaxed) ==
		       log->leo;
}

/* Step 1a: the log's files open (a budget may have closed them) and out
 * of the LRU, its fdatasync queued if it has anything unsynced. */
static void begin(struct closing *c)
{
	struct km_log *log = c->log;

	c->snap_fd = -1;
	c->cut = false;
	c->rc = km_log_files_need(log);
	if (c->rc == 0 && !synced(log))
		c->rc = km_log_flush(log);
	km_log_files_pin(log);
}

/* The snapshot file at offset holds these len bytes already. */
static bool same_file(struct km_log *log, const char *name, size_t len)
{
	uint8_t buf[4096];
	int fd = openat(log->dir_fd, name, O_RDONLY | O_CLOEXEC);
	size_t at = 0;
	ssize_t n = 0;

	if (fd < 0)
		return false;
	while (at <= len && (n = read(fd, buf, sizeof(buf))) > 0) {
		if (at + (size_t)n > len ||
		    memcmp(buf, log->snap_buf + at, (size_t)n) != 0)
			break;
		at += (size_t)n;
	}
	close(fd);
	return n == 0 && at == len;
}

/* Step 2's snapshot: the .tmp written, not synced; none if unchanged. */
static int snap_stage(struct closing *c)
{
	struct km_log *log = c->log;
	char tmp[80];
	int n = km_pstate_snapshot_encode(log->ps, log->snap_buf,
					  log->snap_cap), rc;

	if (n < 0)
		return n;
	snprintf(c->snap_name, sizeof(c->snap_name), "%020lld.snapshot",
		 (long long)log->leo);
	if (same_file(log, c->snap_name, (size_t)n))
		return 0;
	snprintf(tmp, sizeof(tmp), "%s.tmp", c->snap_name);
	c->snap_fd = openat(log->dir_fd, tmp,
			    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (c->snap_fd < 0)
		return -errno;
	rc = km_file_write_all(c->snap_fd, log->snap_buf, (size_t)n);
	return rc;
}

/* Step 2: everything the marker vouches for written, nothing synced. */
static void stage(struct closing *c)
{
	if (c->rc == 0)
		c->rc = km_log_dio_cut(c->log, &c->cut);
	if (c->rc == 0)
		c->rc = km_segment_seal_nosync(log_active(c->log));
	if (c->rc == 0)
		c->rc = snap_stage(c);
}

static void sync_staged(struct syncer *s, struct closing *c)
{
	struct km_segment *seg = log_active(c->log);

	sync_add(s, c->cut ? seg->log_fd : -1, &c->rc);
	sync_add(s, seg->index_fd, &c->rc);
	sync_add(s, seg->time_fd, &c->rc);
	sync_add(s, seg->txn_fd, &c->rc);
	sync_add(s, c->snap_fd, &c->rc);
}

/* Step 4: a synced snapshot takes its name. */
static void snap_commit(struct syncer *s, struct closing *c)
{
	char tmp[80];

	if (c->snap_fd < 0)
		return;
	close(c->snap_fd);
	c->snap_fd = -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", c->snap_name);
	if (c->rc == 0 && renameat(c->log->dir_fd, tmp, c->log->dir_fd,
				   c->snap_name) < 0)
		c->rc = -errno;
	if (c->rc < 0)
		(void)unlinkat(c->log->dir_fd, tmp, 0);
	sync_add(s, c->log->dir_fd, &c->rc);
}

/* Step 5: the marker, on a log whose every step succeeded. */
static void mark(struct syncer *s, struct closing *c)
{
	int fd;

	if (c->rc < 0 || s->rc < 0)
		return;
	fd = openat(c->log->dir_fd, CLEAN_MARKER,
		    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		c->rc = -errno;
		return;
	}
	close(fd);
	sync_add(s, c->log->dir_fd, &c->rc);
}

static int close_batch(struct closing *cs, uint32_t n, struct syncer *s)
{
	for (uint32_t i = 0; i < n; i++)
		begin(&cs[i]);
	/* Always, also after a failure: queued and in-flight requests point
	 * into the log. */
	for (uint32_t i = 0; i < n; i++) {
		int rc = km_log_sync(cs[i].log);

		cs[i].rc = cs[i].rc ? cs[i].rc : rc;
	}
	STEP_DONE(1);
	for (uint32_t i = 0; i < n; i++)
		stage(&cs[i]);
	STEP_DONE(2);
	for (uint32_t i = 0; i < n; i++)
		sync_staged(s, &cs[i]);
	if (sync_wait(s) < 0)
		return s->rc;
	STEP_DONE(3);
	for (uint32_t i = 0; i < n; i++)
		snap_commit(s, &cs[i]);
	if (sync_wait(s) < 0)
		return s->rc;
	STEP_DONE(4);
	for (uint32_t i = 0; i < n; i++)
		mark(s, &cs[i]);
	if (sync_wait(s) < 0)
		return s->rc;
	STEP_DONE(5);
	return 0;
}

static void finish(struct closing *c, int ring_rc, int *rc_out)
{
	char tmp[80];

	if (c->snap_fd >= 0) { /* a step before the rename failed */
		close(c->snap_fd);
		snprintf(tmp, sizeof(tmp), "%s.tmp", c->snap_name);
		(void)unlinkat(c->log->dir_fd, tmp, 0);
	}
	if (c->rc == 0)
		c->rc = ring_rc;
	if (c->rc < 0)
		KM_ERROR("log", "%s: unclean close (%s); the next open recovers",
			 c->log->dir, km_strerror(c->rc));
	if (rc_out != NULL)
		*rc_out = c->rc;
	km_log_free(c->log);
}

int km_log_close_many(struct km_log **logs, uint32_t n, int *rcs)
{
	struct closing *cs = calloc(CLOSE_BATCH, sizeof(*cs));
	struct syncer s = { .cap = CLOSE_BATCH * SYNCS_PER_LOG,
			    .ring = n > 0 ? logs[0]->ring : NULL };
	int first = 0;

	s.reqs = calloc(s.cap, sizeof(*s.reqs));
	for (uint32_t k = 0; k < n; k += CLOSE_BATCH) {
		uint32_t m = n - k < CLOSE_BATCH ? n - k : CLOSE_BATCH;

		for (uint32_t i = 0; i < m; i++) {
			KM_ASSERT(logs[k + i]->ring == s.ring);
			if (cs != NULL)
				cs[i] = (struct closing){ .log = logs[k + i] };
		}
		if (cs == NULL || s.reqs == NULL) {
			/* No memory to batch in: each its own abandon. */
			for (uint32_t i = 0; i < m; i++) {
				km_log_abandon(logs[k + i]);
				if (rcs != NULL)
					rcs[k + i] = -ENOMEM;
			}
			first = -ENOMEM;
			continue;
		}
		(void)close_batch(cs, m, &s);
		for (uint32_t i = 0; i < m; i++) {
			finish(&cs[i], s.rc, rcs ? &rcs[k + i] : NULL);
			first = first ? first : cs[i].rc;
		}
	}
	free(cs);
	if (s.rc == 0) /* else requests may still point into it: leak it */
		free(s.reqs);
	return first;
}

/* ---- open ---- */

struct unmarking {
	int fd; /* the partition directory, -1: nothing to sync */
	int rc;
};

/* Unlink one log's marker; fd left open to sync if there was one. */
static int unmark_one(int data_fd, struct km_log_unmark *u,
		      struct unmarking *m)
{
	char name[PATH_MAX];
	int n = snprintf(name, sizeof(name), "%s-%d", u->topic, u->partition);

	m->fd = -1;
	m->rc = 0;
	u->found = KM_LOG_MARK_WAS_UNCLEAN;
	if (n < 0 || (size_t)n >= sizeof(name))
		return -ENAMETOOLONG;
	m->fd = openat(data_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (m->fd < 0)
		return errno == ENOENT ? 0 : -errno;
	if (unlinkat(m->fd, CLEAN_MARKER, 0) == 0) {
		u->found = KM_LOG_MARK_WAS_CLEAN;
		return 0;
	}
	n = errno;
	close(m->fd);
	m->fd = -1;
	return n == ENOENT ? 0 : -n;
}

static int unmark_batch(int data_fd, struct km_log_unmark *u, uint32_t n,
			struct unmarking *ms, struct syncer *s)
{
	int rc = 0;

	for (uint32_t i = 0; i < n && rc == 0; i++) {
		rc = unmark_one(data_fd, &u[i], &ms[i]);
		sync_add(s, ms[i].fd, &ms[i].rc);
	}
	if (sync_wait(s) < 0)
		return s->rc; /* the descriptors may be in use still: leak */
	for (uint32_t i = 0; i < n; i++) {
		if (ms[i].fd >= 0)
			close(ms[i].fd);
		rc = rc ? rc : ms[i].rc;
	}
	return rc;
}

int km_log_unmark_many(const char *data_dir, struct km_log_unmark *u,
		       uint32_t n)
{
	struct unmarking *ms = calloc(UNMARK_BATCH, sizeof(*ms));
	struct syncer s = { .cap = UNMARK_BATCH };
	struct km_uring ring;
	int data_fd, rc;

	s.reqs = calloc(s.cap, sizeof(*s.reqs));
	if (ms == NULL || s.reqs == NULL) {
		free(ms);
		free(s.reqs);
		return -ENOMEM;
	}
	if ((rc = km_uring_init(&ring, UNMARK_BATCH)) < 0) {
		free(ms);
		free(s.reqs);
		return rc;
	}
	s.ring = &ring;
	data_fd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	rc = data_fd < 0 ? (errno == ENOENT ? 0 : -errno) : 0;
	for (uint32_t i = 0; i < n && data_fd < 0; i++)
		u[i].found = KM_LOG_MARK_WAS_UNCLEAN;
	for (uint32_t k = 0; data_fd >= 0 && rc == 0 && k < n;
	     k += UNMARK_BATCH)
		rc = unmark_batch(data_fd, u + k,
				  n - k < UNMARK_BATCH ? n - k : UNMARK_BATCH,
				  ms, &s);
	if (data_fd >= 0)
		close(data_fd);
	if (s.rc == 0) {
		km_uring_exit(&ring);
		free(s.reqs);
	}
	free(ms);
	if (rc == 0)
		STEP_DONE(10);
	return rc;
}
