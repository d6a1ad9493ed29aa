/* R5 on the owner: PREPARING, the cut before a partition with local
 * history mirrors again (start, failback). The control thread found the
 * offset (the upstream's barrier for our cluster id, or the operator's
 * --truncate-to / --from-start) and persisted PREPARING with it; here the
 * log is cut there, with nothing else writing: no fetcher, Produce refused
 * and the local writes already taken appended (km_worker_stop_step waits). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "dataplane/serve/local_write.h"
#include "dataplane/worker_pvt.h"

int km_worker_prepare(struct km_worker *w, struct km_part *p,
		      int64_t truncate_to, bool from_start,
		      struct km_worker_reply *reply)
{
	struct wmsg *m = km_worker_msg_new(WMSG_STOP, p, reply);

	if (m == NULL)
		return -ENOMEM;
	m->u.stop.mode = KM_STOP_PREPARE;
	m->u.stop.truncate_to = truncate_to;
	m->u.stop.from_start = from_start;
	return km_worker_post(w, m);
}

/* Cut to `to`: whole batches from the first one holding an offset >= to. */
static int cut_to(struct km_log *log, int64_t to, struct km_stop_result *r)
{
	int64_t end = km_log_end_offset(log);
	int64_t rc;

	if (to >= end)
		return 0;
	rc = km_log_truncate_to(log, to > km_log_start_offset(log)
					     ? to
					     : km_log_start_offset(log),
				&r->removed_bytes, &r->removed_batches);
	if (rc < 0)
		return (int)rc;
	r->removed_records = end - rc;
	/* Below our log start (or from the start): an empty log that
	 * restarts exactly there, so that offsets stay the upstream's. */
	if (to < km_log_start_offset(log))
		return km_log_reset_to(log, to);
	return 0;
}

int km_worker_prepare_run(struct km_worker *w, struct wpart *wp, const struct wmsg *m,
		 struct km_stop_result *r)
{
	int64_t to = m->u.stop.from_start ? 0 : m->u.stop.truncate_to;
	int rc;

	(void)w;
	memset(r, 0, sizeof(*r));
	r->barrier_offset = -1;
	/* The writer's copies (and the Produce copies it adopted) go only
	 * once the log has no write from them in flight. */
	rc = km_log_sync(wp->log);
	if (wp->lw != NULL) {
		km_local_write_destroy(wp->lw);
		wp->lw = NULL;
	}
	if (rc < 0)
		return rc;
	if (to >= 0 && (rc = cut_to(wp->log, to, r)) < 0)
		return rc;
	r->cut_offset = km_log_end_offset(wp->log);
	KM_INFO("worker", "partition %s-%d: prepared to mirror from offset "
		"%lld (%lld records, %llu bytes in %u batches discarded)",
		wp->part->topic, wp->part->partition, (long long)r->cut_offset,
		(long long)r->removed_records,
		(unsigned long long)r->removed_bytes, r->removed_batches);
	return km_log_checkpoint(wp->log);
}
