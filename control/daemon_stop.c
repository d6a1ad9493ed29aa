/* R4 on the control thread: the stop verb and its resumption on restart.
 * Per partition: persist STOPPING, let the owner run steps 1-4
 * (km_worker_stop), persist STOPPED with the barrier's offset. Then one
 * last offset sync of the groups for the partitions stopped, capped at
 * their cuts (daemon_groups.c), and only then are they opened for writes,
 * so no group is sent past the cut into what is written here next. A crash
 * anywhere resumes from the persisted state; the owner finds its own
 * barrier and does not write a second. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"
#include "control/mstate.h"

#define STOP_TIMEOUT_MS (10 * 60 * 1000)
#define REPLY_TIMEOUT_MS 10000

void km_daemon_part_dir(const struct km_daemon *d, const struct km_part *p,
			char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s-%d", d->cfg->data_dir, p->topic,
		 p->partition);
}

int km_daemon_load_states(struct km_daemon *d)
{
	char dir[4096];
	int rc;

	d->mstates = calloc(d->table.cap, sizeof(*d->mstates));
	if (d->mstates == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < d->table.n; i++) {
		km_daemon_part_dir(d, &d->table.parts[i], dir, sizeof(dir));
		if ((rc = km_mstate_load(dir, &d->mstates[i])) < 0) {
			KM_ERROR("daemon", "%s/%s: %s", dir, KM_MSTATE_FILE,
				 km_strerror(rc));
			return rc;
		}
		km_daemon_settle_role(d, i); /* daemon_roles.c */
	}
	return 0;
}

static int open_writes(struct km_daemon *d, uint32_t i)
{
	struct km_part *p = &d->table.parts[i];
	struct km_worker_reply r;
	int rc = km_worker_open_writes(d->workers[p->owner], p, &r);

	return rc < 0 ? rc : km_worker_wait(d->ctl_efd, &r, REPLY_TIMEOUT_MS);
}

/* Steps 1-5 for partition i, from STOPPING on: STOPPED on 0, for the
 * caller to open for writes. */
static int finish_stop(struct km_daemon *d, uint32_t i,
		       struct km_stop_result *res, char *err, size_t err_len)
{
	struct km_mstate_rec *ms = &d->mstates[i];
	struct km_part *p = &d->table.parts[i];
	struct km_worker_reply r;
	char dir[4096];
	int rc;

	km_daemon_part_dir(d, p, dir, sizeof(dir));
	km_worker_crash_point("stop-after-stopping");
	rc = km_worker_stop(d->workers[p->owner], p,
			    (enum km_stop_mode)ms->stop_mode,
			    ms->source_cluster_id, &r);
	if (rc == 0)
		rc = km_worker_wait(d->ctl_efd, &r, STOP_TIMEOUT_MS);
	if (rc < 0) {
		snprintf(err, err_len, "%.200s-%d: %.256s", p->topic, p->partition,
			 r.msg);
		return rc;
	}
	*res = r.stop;
	ms->state = KM_MSTATE_STOPPED;
	ms->last_mirrored_offset = r.stop.barrier_offset;
	if ((rc = km_mstate_save(dir, ms)) == 0)
		km_worker_crash_point("stop-after-stopped");
	else
		snprintf(err, err_len, "%s-%d: after the barrier: %s", p->topic,
			 p->partition, km_strerror(rc));
	return rc;
}

static int begin_stop(struct km_daemon *d, uint32_t i, int mode,
		      struct km_stop_result *res, char *err, size_t err_len)
{
	struct km_mstate_rec *ms = &d->mstates[i], was = d->mstates[i];
	struct km_part *p = &d->table.parts[i];
	char dir[4096];
	int rc;

	/* The cluster the log mirrors (issue 21); else: a failback's
	 * upstream named itself when it was asked (R5); so did the source of
	 * a `start` that found none at boot. */
	const char *cid = d->sources[i].cluster_id[0] != '\0'
				  ? d->sources[i].cluster_id
			  : ms->source[0] || d->source_cluster_id[0] == '\0'
				  ? ms->source_cluster_id
				  : d->source_cluster_id;

	if (cid[0] == '\0') {
		snprintf(err, err_len, "%s-%d: the source's cluster id is not "
			 "known, so the barrier cannot name it", p->topic,
			 p->partition);
		return KM_ESOURCE;
	}
	km_daemon_part_dir(d, p, dir, sizeof(dir));
	ms->state = KM_MSTATE_STOPPING;
	ms->stop_mode = mode;
	ms->failed_reason[0] = '\0'; /* a FAILED one is failed over: moot */
	if (cid != ms->source_cluster_id)
		snprintf(ms->source_cluster_id, sizeof(ms->source_cluster_id),
			 "%s", cid);
	if ((rc = km_mstate_save(dir, ms)) < 0) {
		/* Nothing is cut before STOPPING is on disk: the partition
		 * stays as it was, and the stop can be asked again. */
		*ms = was;
		snprintf(err, err_len, "%.300s/%s: %s", dir, KM_MSTATE_FILE,
			 km_strerror(rc));
		return rc;
	}
	km_daemon_disk_release(d, i);
	return finish_stop(d, i, res, err, err_len);
}

/* On start, after the logs are open: finish interrupted stops and open
 * stopped partitions for writes; neither gets a fetcher. */
int km_daemon_resume_stops(struct km_daemon *d)
{
	char err[512];
	struct km_stop_result res;
	int rc = 0;

	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++) {
		struct km_part *p = &d->table.parts[i];

		if (d->mstates[i].state == KM_MSTATE_STOPPING) {
			KM_INFO("daemon", "partition %s-%d: resuming an interrupted stop",
				p->topic, p->partition);
			if ((rc = finish_stop(d, i, &res, err, sizeof(err))) < 0)
				KM_ERROR("daemon", "%s", err);
		}
		if (rc == 0 && d->mstates[i].state == KM_MSTATE_STOPPED)
			rc = open_writes(d, i);
	}
	return rc;
}

/* ---- the `stop` verb ------------------------------------------------------ */

static json_t *stop_row(const struct km_part *p, const struct km_stop_result *r)
{
	char name[KM_WIRE_NAME_BYTES_MAX + 16];

	snprintf(name, sizeof(name), "%s:%d", p->topic, p->partition);
	return json_pack("{s:s, s:I, s:I, s:I, s:i, s:I, s:b}", "partition", name,
			 "cut_offset", (json_int_t)r->cut_offset,
			 "removed_records", (json_int_t)r->removed_records,
			 "removed_bytes", (json_int_t)r->removed_bytes,
			 "aborted", (int)r->aborted,
			 "barrier_offset", (json_int_t)r->barrier_offset,
			 "resumed", r->resumed);
}

/* Does request item `want` ("topic" or "topic:N") name partition i? */
bool km_daemon_selected(const struct km_daemon *d, uint32_t i,
			const json_t *req)
{
	const struct km_part *p = &d->table.parts[i];
	const json_t *list = json_object_get(req, "partitions"), *v;
	char topic[KM_CTLPROTO_TOPIC_BYTES_MAX];
	int32_t part;
	size_t k;

	if (p->deleted) /* DeleteTopics: no verb acts on it any more */
		return false;
	if (json_is_true(json_object_get(req, "all")))
		return true;
	json_array_foreach(list, k, v) {
		if (km_ctlproto_partition_parse(json_string_value(v), topic,
						&part, NULL, 0) == 0 &&
		    strcmp(topic, p->topic) == 0 &&
		    (part < 0 || part == p->partition))
			return true;
	}
	return false;
}

/* A request item that names no partition here ("nosuch", "orders:7"):
 * KM_EUNKNOWNPART with "no such partition here: <item>" in resp, so that
 * a typo is refused by name rather than doing nothing (or less than
 * asked) and exiting 0; else 0. */
int km_daemon_unmatched(const struct km_daemon *d, const json_t *req,
			json_t *resp)
{
	const json_t *list = json_object_get(req, "partitions"), *v;
	char topic[KM_CTLPROTO_TOPIC_BYTES_MAX], msg[512];
	int32_t part;
	size_t k;

	if (json_is_true(json_object_get(req, "all")))
		return 0;
	json_array_foreach(list, k, v) {
		const char *item = json_string_value(v);
		bool found = false;

		if (item == NULL || km_ctlproto_partition_parse(item, topic, &part,
							       NULL, 0) != 0)
			continue; /* kmirrorctl checked the form */
		for (uint32_t i = 0; !found && i < d->table.n; i++)
			found = strcmp(topic, d->table.parts[i].topic) == 0 &&
				(part < 0 || part == d->table.parts[i].partition);
		if (found)
			continue;
		snprintf(msg, sizeof(msg), "no such partition here: %.300s", item);
		json_object_set_new(resp, "message", json_string(msg));
		return KM_EUNKNOWNPART;
	}
	return 0;
}

static int stop_mode_of(const struct km_daemon *d, const json_t *req)
{
	const char *m = json_string_value(json_object_get(req, "mode"));

	if (m == NULL)
		return d->cfg->stop_mode == KM_CONFIG_STOP_ABORT ? KM_STOP_ABORT
								 : KM_STOP_TRUNCATE;
	return strcmp(m, "abort") == 0 ? KM_STOP_ABORT : KM_STOP_TRUNCATE;
}

/* A FAILED mirror is failed over like a healthy one: its log is a clean
 * copy up to where it stopped; so is one paused for free space (a full
 * disk must not prevent a failover). A stop that failed (STOPPING) is
 * retried, as a restart would. */
static bool stoppable(const struct km_daemon *d, uint32_t i)
{
	enum km_mstate st = d->mstates[i].state;

	return d->mirrored[i] &&
	       (st == KM_MSTATE_MIRRORING || st == KM_MSTATE_FAILED ||
		st == KM_MSTATE_STOPPING || km_daemon_disk_held(d, i));
}

/* Only partitions that mirror can be stopped; naming anything else
 * explicitly is refused before any partition is touched. */
static int check_selection(struct km_daemon *d, const json_t *req,
			   json_t *resp, uint32_t *count)
{
	char msg[512];

	int rc = km_daemon_unmatched(d, req, resp);

	*count = 0;
	if (rc < 0)
		return rc;
	for (uint32_t i = 0; i < d->table.n; i++) {
		if (!km_daemon_selected(d, i, req))
			continue;
		if (stoppable(d, i)) {
			(*count)++;
		} else if (!json_is_true(json_object_get(req, "all"))) {
			snprintf(msg, sizeof(msg), "%s-%d is %s: only a mirroring "
				 "partition can be stopped",
				 d->table.parts[i].topic, d->table.parts[i].partition,
				 d->mirrored[i] ? km_mstate_name(d->mstates[i].state)
						: "not mirrored");
			json_object_set_new(resp, "message", json_string(msg));
			return KM_ECTLREQ;
		}
	}
	if (*count == 0 && !json_is_true(json_object_get(req, "all"))) {
		json_object_set_new(resp, "message",
				    json_string("no such partition here"));
		return KM_EUNKNOWNPART;
	}
	return 0;
}

/* Steps 1-5 for every partition the request selects, in table order,
 * until one fails; stopped[i] and cut[i] say which reached STOPPED. */
static int stop_selected(struct km_daemon *d, const json_t *req, json_t *rows,
			 bool *stopped, int64_t *cut, json_t *resp)
{
	struct km_stop_result res;
	char err[512], msg[400];
	int rc = 0;

	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++) {
		if (!km_daemon_selected(d, i, req) || !stoppable(d, i))
			continue;
		rc = d->mstates[i].state == KM_MSTATE_STOPPING
			     ? finish_stop(d, i, &res, err, sizeof(err))
			     : begin_stop(d, i, stop_mode_of(d, req), &res, err,
					  sizeof(err));
		if (rc < 0) {
			json_object_set_new(resp, "message", json_string(err));
			break;
		}
		stopped[i] = true;
		cut[i] = res.cut_offset;
		json_array_append_new(rows, stop_row(&d->table.parts[i], &res));
		snprintf(msg, sizeof(msg), "%s-%d stopped: barrier at %lld",
			 d->table.parts[i].topic, d->table.parts[i].partition,
			 (long long)res.barrier_offset);
		json_t *prog = json_pack("{s:s}", "message", msg);
		km_ctlsock_progress(d->ctl, d->stop_token, prog);
		json_decref(prog);
	}
	return rc;
}

/* Step 6 for what stop_selected stopped, even if a later one failed. */
static int open_stopped(struct km_daemon *d, const bool *stopped, int rc,
			json_t *resp)
{
	char err[512];

	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];
		int wrc = stopped[i] ? open_writes(d, i) : 0;

		if (wrc < 0 && rc == 0) {
			snprintf(err, sizeof(err), "%.200s-%d: after the barrier: "
				 "%s", p->topic, p->partition, km_strerror(wrc));
			json_object_set_new(resp, "message", json_string(err));
			rc = wrc;
		}
	}
	return rc;
}

int km_daemon_stop_now(struct km_daemon *d, const json_t *req, json_t *resp)
{
	uint32_t n = d->table.n ? d->table.n : 1, count;
	bool *stopped = calloc(n, sizeof(*stopped));
	int64_t *cut = calloc(n, sizeof(*cut));
	json_t *rows = json_array();
	int rc = stopped && cut && rows ? check_selection(d, req, resp, &count)
					: -ENOMEM;

	if (rc == 0)
		rc = stop_selected(d, req, rows, stopped, cut, resp);
	if (stopped != NULL && cut != NULL) {
		km_daemon_sync_groups_at_stop(d, stopped, cut, resp);
		rc = open_stopped(d, stopped, rc, resp);
	}
	json_object_set_new(resp, "partitions", rows ? rows : json_array());
	free(stopped);
	free(cut);
	return rc;
}

/* stop --planned: the selection is checked now, the stop runs once every
 * partition named has caught up (daemon_planned.c). */
static int planned(struct km_daemon *d, const json_t *req, json_t *resp)
{
	bool *sel = calloc(d->table.n ? d->table.n : 1, sizeof(*sel));
	uint32_t count = 0;
	int rc = sel ? check_selection(d, req, resp, &count) : -ENOMEM;

	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++)
		sel[i] = km_daemon_selected(d, i, req) && stoppable(d, i);
	if (rc == 0 && count > 0)
		rc = km_daemon_planned_begin(d, req, resp, sel);
	else if (rc == 0) /* --all with nothing mirroring: nothing to wait for */
		rc = km_daemon_stop_now(d, req, resp);
	free(sel);
	return rc;
}

int km_daemon_on_stop(void *ctx, const json_t *req, json_t *resp)
{
	struct km_daemon *d = ctx;

	if (json_is_true(json_object_get(req, "planned")))
		return planned(d, req, resp);
	return km_daemon_stop_now(d, req, resp);
}
