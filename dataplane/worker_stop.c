/* R4, the owner's part of a stop: remove the fetcher, fdatasync, cut,
 * append the MIRROR_PID_RESET barrier, fdatasync and snapshot. The control
 * thread persists the state around it (STOPPING before, STOPPED after) and
 * then opens the partition for writes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/log.h"
#include "dataplane/serve/local_write.h"
#include "dataplane/worker_pvt.h"
#include "kafka/control.h"

#include <signal.h>

/* Batches a stop writes: one ABORT marker per open transaction, then the
 * barrier; each at most this big. */
#define CTRL_BATCH_BYTES 512
#define ABORTS_MAX 1024

int km_worker_stop(struct km_worker *w, struct km_part *p,
		   enum km_stop_mode mode, const char *source_cluster_id,
		   struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_STOP, p, reply);

	if (m == NULL)
		return -ENOMEM;
	m->u.stop.mode = mode;
	snprintf(m->u.stop.cluster_id, sizeof(m->u.stop.cluster_id), "%s",
		 source_cluster_id);
	return km_worker_post(w, m);
}

int km_worker_open_writes(struct km_worker *w, struct km_part *p,
			  struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_WRITABLE, p, reply);

	if (m == NULL)
		return -ENOMEM;
	return km_worker_post(w, m);
}

/* Append one control batch built in buf (len bytes) with CONTROL origin
 * and wait until it is written. *offset gets where it went. */
static int append_control(struct km_log *log, uint8_t *buf, int len,
			  int64_t *offset)
{
	struct iovec iov = { buf, (size_t)len };
	struct km_chain ch = { &iov, 1 };
	struct km_chain_cur cur = { 0, 0 };
	struct km_log_append_result res;
	struct km_batch b;
	int rc = km_batch_parse(&b, &ch, cur, (uint32_t)len);

	if (rc <= 0)
		return rc < 0 ? rc : KM_EBATCHLEN;
	rc = km_log_append_burst(log, &b, 1, KM_ORIGIN_CONTROL, &res);
	if (rc == 0)
		rc = -EBUSY; /* the write queue is full right after a sync: a bug */
	if (rc < 0)
		return rc;
	*offset = res.first_offset;
	return km_log_sync(log); /* the bytes are ours until written */
}

/* The last batch of the log, if it is a MIRROR_PID_RESET for cluster_id:
 * a stop that crashed after its barrier must not write another. */
static bool ends_with_barrier(struct km_log *log, const char *cluster_id,
			      int64_t *offset)
{
	uint8_t buf[CTRL_BATCH_BYTES * 2];
	int64_t end = km_log_end_offset(log);
	struct km_log_read_result rr;
	struct iovec iov = { buf, 0 };
	struct km_chain ch = { &iov, 1 };
	struct km_chain_cur cur = { 0, 0 };
	struct km_batch b;
	struct km_ctrl c;

	if (end <= km_log_start_offset(log) ||
	    km_log_read(log, end - 1, end, 0, buf, sizeof(buf), &rr) < 0 ||
	    rr.batches == 0)
		return false;
	iov.iov_len = rr.bytes;
	if (km_batch_parse(&b, &ch, cur, rr.bytes) <= 0 ||
	    km_ctrl_parse(&b, &c) < 0 || c.type != KM_CTRL_MIRROR_PID_RESET)
		return false;
	*offset = rr.first_offset;
	return strcmp(c.cluster_id, cluster_id) == 0;
}

static int cut_truncate(struct km_log *log, struct km_stop_result *r)
{
	int64_t end = km_log_end_offset(log);
	int64_t cut = km_log_clean_cut(log);

	if (cut < 0)
		return (int)cut;
	if (cut < end) {
		int64_t rc = km_log_truncate_to(log, cut, &r->removed_bytes,
						&r->removed_batches);
		if (rc < 0)
			return (int)rc;
	}
	r->removed_records = end - cut;
	return 0;
}

static int cut_abort(struct km_log *log, struct km_stop_result *r)
{
	struct km_producer_info *open = calloc(ABORTS_MAX, sizeof(*open));
	uint8_t buf[CTRL_BATCH_BYTES];
	uint32_t n;
	int rc = 0;

	if (open == NULL)
		return -ENOMEM;
	n = km_pstate_open_txns(km_log_pstate(log), open, ABORTS_MAX);
	if (n > ABORTS_MAX)
		rc = KM_EPSTATEFULL;
	for (uint32_t i = 0; rc == 0 && i < n; i++) {
		struct km_ctrl_spec s = { .base_offset = 0, .leader_epoch = -1,
					  .timestamp = km_clock_wall_ms() };
		int64_t at;
		int len = km_ctrl_build_marker(buf, sizeof(buf), &s,
					       open[i].producer_id, open[i].epoch,
					       false, open[i].coordinator_epoch);

		rc = len < 0 ? len : append_control(log, buf, len, &at);
		r->aborted += rc == 0;
	}
	free(open);
	return rc;
}

static int write_barrier(struct km_log *log, const char *cluster_id,
			 int64_t *offset)
{
	struct km_ctrl_spec s = { .base_offset = 0, .leader_epoch = -1,
				  .timestamp = km_clock_wall_ms() };
	uint8_t buf[CTRL_BATCH_BYTES];
	int len;

	/* R3: never over an open mirrored transaction. */
	if (km_pstate_has_open_negative_txn(km_log_pstate(log)))
		return KM_ETXNOPEN;
#ifdef KM_TEST_HOOKS
	/* Test switch: show what happens downstream without the barrier. */
	if (getenv("KMIRROR_TEST_NO_BARRIER") != NULL) {
		KM_WARN("worker", "KMIRROR_TEST_NO_BARRIER: no barrier written");
		*offset = km_log_end_offset(log);
		return 0;
	}
#endif
	len = km_ctrl_build_pid_reset(buf, sizeof(buf), &s, cluster_id);
	return len < 0 ? len : append_control(log, buf, len, offset);
}

#ifdef KM_TEST_HOOKS
/* Test switch (docs/testing.md): KMIRROR_TEST_CRASH=<point> kills the
 * process with SIGKILL at that point of a stop, to prove a restart resumes
 * it. */
void km_worker_crash_point(const char *point)
{
	const char *want = getenv("KMIRROR_TEST_CRASH");

	if (want != NULL && strcmp(want, point) == 0) {
		KM_WARN("worker", "KMIRROR_TEST_CRASH=%s: killing the process", point);
		raise(SIGKILL);
	}
}
#endif

/* Steps 2-4, with the fetcher gone. */
static int run_stop(struct km_log *log, const struct wmsg *m,
		    struct km_stop_result *r)
{
	int rc;

	memset(r, 0, sizeof(*r));
	/* Step 2: fdatasync (queued, then waited for). */
	if ((rc = km_log_flush(log)) < 0 || (rc = km_log_sync(log)) < 0)
		return rc;
	if (ends_with_barrier(log, m->u.stop.cluster_id, &r->barrier_offset)) {
		r->resumed = true;
		r->cut_offset = r->barrier_offset;
		return km_log_checkpoint(log);
	}
	rc = m->u.stop.mode == KM_STOP_ABORT ? cut_abort(log, r)
					      : cut_truncate(log, r);
	r->cut_offset = km_log_end_offset(log);
	if (rc == 0) {
		km_worker_crash_point("stop-after-cut");
		rc = write_barrier(log, m->u.stop.cluster_id, &r->barrier_offset);
	}
	if (rc == 0)
		rc = km_log_checkpoint(log);
	if (rc == 0)
		km_worker_crash_point("stop-after-barrier");
	return rc;
}

static void finish(struct km_worker *w, struct wpart *wp)
{
	struct wmsg *m = wp->stopping;
	struct km_stop_result r = { .cut_offset = -1, .barrier_offset = -1 };
	char msg[200];
	int rc;

	if (m->u.stop.mode == KM_STOP_PAUSE) {
		wp->stopping = NULL;
		atomic_store_explicit(&wp->part->stats.fetch_state,
				      KM_PART_FETCH_NONE, memory_order_release);
		km_worker_reply_done(w, m->reply, 0, "paused");
		free(m);
		return;
	}
	/* After a full disk, a stop or a start must not need a restart:
	 * the log takes appends again first, or the reason is the space. */
	rc = km_worker_clear_space_error(wp);
	if (rc == 0)
		rc = m->u.stop.mode == KM_STOP_PREPARE
			     ? km_worker_prepare_run(w, wp, m, &r)
			     : run_stop(wp->log, m, &r);

	wp->stopping = NULL;
	if (m->reply != NULL)
		m->reply->stop = r;
	if (rc < 0)
		KM_ERROR("worker", "partition %s-%d: %s: %s", wp->part->topic,
			 wp->part->partition,
			 m->u.stop.mode == KM_STOP_PREPARE ? "prepare" : "stop",
			 km_strerror(rc));
	else if (m->u.stop.mode != KM_STOP_PREPARE)
		KM_INFO("worker", "partition %s-%d: stopped: cut at %lld "
			"(%lld records, %llu bytes removed, %u aborted), barrier "
			"at %lld%s", wp->part->topic, wp->part->partition,
			(long long)r.cut_offset, (long long)r.removed_records,
			(unsigned long long)r.removed_bytes, r.aborted,
			(long long)r.barrier_offset,
			r.resumed ? " (already there: resumed)" : "");
	atomic_store_explicit(&wp->part->stats.fetch_state, KM_PART_FETCH_NONE,
			      memory_order_release);
	km_worker_publish(wp); /* the reply's reader sees the cut and barrier */
	snprintf(msg, sizeof(msg), "%s%s", km_strerror(rc),
		 km_log_is_space_error(rc)
			 ? " (data.dir is full: retry once space is back)" : "");
	km_worker_reply_done(w, m->reply, rc, rc < 0 ? msg : NULL);
	free(m);
}

int km_worker_stop_step(struct km_worker *w, struct wpart *wp)
{
	if (wp->fetcher != NULL && !km_fetcher_idle(wp->fetcher))
		return 0;
	/* A Produce taken before the mode changed is appended (and answered)
	 * before the cut, never after it. */
	if (wp->lw != NULL && km_local_write_pending(wp->lw) > 0)
		return 0;
	km_worker_fetcher_free(wp);
	finish(w, wp);
	return 1;
}

void km_worker_stop_on_stop(struct km_worker *w, struct wmsg *m)
{
	struct wpart *wp = km_worker_find(w, m->part);

	if (wp == NULL || wp->stopping != NULL) {
		km_worker_reply_done(w, m->reply, wp ? -EALREADY : -ENOENT,
				     wp ? "a stop is already running"
					: "not this worker's partition");
		free(m);
		return;
	}
	wp->stopping = m;
	if (m->u.stop.mode == KM_STOP_PREPARE)
		atomic_store_explicit(&wp->part->mode, KM_PART_MIRROR,
				      memory_order_release);
	if (wp->fetcher != NULL)
		km_fetcher_stop(wp->fetcher);
}

void km_worker_stop_on_writable(struct km_worker *w, struct wmsg *m)
{
	struct wpart *wp = km_worker_find(w, m->part);
	int rc = wp ? 0 : -ENOENT;

	if (wp != NULL && wp->lw == NULL) {
		atomic_store_explicit(&wp->part->mode, KM_PART_WRITABLE,
				      memory_order_release);
		rc = km_worker_fe_open_writer(w, wp);
	}
	km_worker_reply_done(w, m->reply, rc, rc ? NULL : "writable");
}
