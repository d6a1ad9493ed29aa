/* pause and resume: a paused partition keeps its log and serves it, but its
 * fetch session is removed; the state (PAUSED) is persisted, so a restart
 * keeps it paused. resume starts the session again from the log end. */
#include <stdio.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/mstate.h"

#define PAUSE_TIMEOUT_MS 30000

static int save_state(struct km_daemon *d, uint32_t i, enum km_mstate st)
{
	char dir[4096];

	d->mstates[i].state = st;
	km_daemon_part_dir(d, &d->table.parts[i], dir, sizeof(dir));
	return km_mstate_save(dir, &d->mstates[i]);
}

int km_daemon_pause_fetch(struct km_daemon *d, uint32_t i)
{
	struct km_part *p = &d->table.parts[i];
	struct km_worker_reply r;
	int rc = km_worker_stop(d->workers[p->owner], p, KM_STOP_PAUSE, "", &r);

	if (rc == 0)
		rc = km_worker_wait(d->ctl_efd, &r, PAUSE_TIMEOUT_MS);
	return rc;
}

static int pause_one(struct km_daemon *d, uint32_t i)
{
	struct km_part *p = &d->table.parts[i];
	int rc = km_daemon_pause_fetch(d, i);

	if (rc == 0)
		rc = save_state(d, i, KM_MSTATE_PAUSED);
	if (rc == 0)
		KM_INFO("daemon", "partition %s-%d: paused", p->topic, p->partition);
	return rc;
}

static int resume_one(struct km_daemon *d, uint32_t i)
{
	struct km_part *p = &d->table.parts[i];
	int rc = save_state(d, i, KM_MSTATE_MIRRORING);

	if (rc == 0)
		rc = km_daemon_start_fetch(d, i);
	if (rc == 0)
		KM_INFO("daemon", "partition %s-%d: resumed", p->topic, p->partition);
	return rc;
}

/* Apply fn to the selected partitions in state `from`; naming one in
 * another state explicitly is refused before anything changes. */
static int apply(struct km_daemon *d, const json_t *req, json_t *resp,
		 enum km_mstate from, int (*fn)(struct km_daemon *, uint32_t))
{
	bool all = json_is_true(json_object_get(req, "all"));
	json_t *done = json_array();
	char msg[512];
	int rc = km_daemon_unmatched(d, req, resp);

	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];
		bool ok = d->mirrored[i] && d->mstates[i].state == from;

		if (km_daemon_selected(d, i, req) && km_daemon_disk_held(d, i) &&
		    !all) {
			km_daemon_disk_part_reason(d, i, msg, sizeof(msg));
			json_object_set_new(resp, "message", json_string(msg));
			rc = KM_ECTLREQ;
		}
		if (!km_daemon_selected(d, i, req) || ok || all)
			continue;
		snprintf(msg, sizeof(msg), "%.250s-%d is %s: only a %s partition "
			 "can be %s", p->topic, p->partition,
			 d->mirrored[i] ? km_mstate_name(d->mstates[i].state)
					: "not mirrored",
			 km_mstate_name(from),
			 from == KM_MSTATE_PAUSED ? "resumed" : "paused");
		json_object_set_new(resp, "message", json_string(msg));
		rc = KM_ECTLREQ;
	}
	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];

		if (!km_daemon_selected(d, i, req) || !d->mirrored[i] ||
		    d->mstates[i].state != from || km_daemon_disk_held(d, i))
			continue;
		if ((rc = fn(d, i)) < 0)
			break;
		snprintf(msg, sizeof(msg), "%.250s:%d", p->topic, p->partition);
		json_array_append_new(done, json_string(msg));
	}
	json_object_set_new(resp, "partitions", done);
	return rc;
}

int km_daemon_on_pause(void *ctx, const json_t *req, json_t *resp)
{
	return apply(ctx, req, resp, KM_MSTATE_MIRRORING, pause_one);
}

int km_daemon_on_resume(void *ctx, const json_t *req, json_t *resp)
{
	return apply(ctx, req, resp, KM_MSTATE_PAUSED, resume_one);
}
