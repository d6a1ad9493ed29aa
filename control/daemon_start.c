/* R5 on the control thread: `start` and `failback`, PREPARING -> MIRRORING.
 *
 * A partition with history (STOPPED after a failover, a local writable
 * one, a FAILED one) mirrors again only from a point its log shares with
 * the upstream. The upstream's latest MIRROR_PID_RESET barrier for our
 * cluster id is that point (a kmirror host answers KmirrorBarrier); the
 * operator may name it instead (--truncate-to) or start over
 * (--from-start). Per partition: decide the cut, persist PREPARING with it
 * (and the upstream), let the owner cut (km_worker_prepare), persist
 * MIRRORING, start the fetch session. A crash after PREPARING is persisted
 * runs the same cut again on restart; nothing is mirrored before it is done.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/errors.h"
#include "common/log.h"
#include "common/resolve.h"
#include "control/ctlproto.h"
#include "control/daemon_pvt.h"
#include "control/mstate.h"
#include "control/upstream.h"

#define ASK_TIMEOUT_MS 5000
#define PREPARE_TIMEOUT_MS (10 * 60 * 1000)

/* One verb's arguments. */
struct start_args {
	const char *source;	/* failback: "HOST:PORT"; NULL: the partition's */
	int64_t truncate_to;	/* -1: ask the upstream */
	bool from_start;
};

int km_daemon_parse_source(const char *s, struct km_config_addr *out)
{
	const char *colon = strrchr(s, ':'), *host = s;
	size_t n = colon ? (size_t)(colon - s) : 0;

	if (s[0] == '[') { /* "[fd00::1]:9092": the brackets are not the host */
		if (n < 3 || colon[-1] != ']')
			return -EINVAL;
		host = s + 1;
		n -= 2;
	}
	if (colon == NULL || n == 0 || n >= sizeof(out->host) ||
	    colon[1] < '0' || colon[1] > '9')
		return -EINVAL;
	snprintf(out->host, sizeof(out->host), "%.*s", (int)n, host);
	out->port = (uint16_t)atoi(colon + 1);
	return 0;
}

/* Where partition i mirrors from: its failback source, else the config's
 * source.bootstrap.servers (the first address answers). */
static int source_addrs(const struct km_daemon *d, uint32_t i,
			const char *source, struct km_config_addr *out,
			uint32_t *n)
{
	const char *s = source ? source : d->mstates[i].source;

	*n = 0;
	if (s[0] == '\0') {
		for (; *n < d->cfg->bootstrap_count; (*n)++)
			out[*n] = d->cfg->bootstrap[*n];
		return *n ? 0 : -ENOENT;
	}
	if (km_daemon_parse_source(s, out) < 0)
		return -EINVAL;
	*n = 1;
	return 0;
}

/* Ask the upstream where our logs part. */
static int ask_upstream(struct km_daemon *d, uint32_t i,
			const struct km_config_addr *a, uint32_t n,
			struct km_upstream_answer *ans, char *err, size_t len)
{
	const struct km_part *p = &d->table.parts[i];
	int rc = -ENOENT;

	for (uint32_t k = 0; k < n; k++) {
		rc = km_upstream_ask(&a[k], p->topic, p->partition,
				     d->cfg->cluster_id, ASK_TIMEOUT_MS, ans);
		if (rc == 0)
			return 0;
		snprintf(err, len, "%.200s-%d: upstream %.256s:%u: %s", p->topic,
			 p->partition, a[k].host, a[k].port,
			 ans->why[0] ? ans->why : km_strerror(rc));
	}
	return rc < 0 ? rc : KM_ESOURCE;
}

/* The cut R5 asks for, from the upstream's answer. */
static int barrier_cut(const struct km_daemon *d, uint32_t i,
		       const struct km_config_addr *a,
		       const struct km_upstream_answer *ans, int64_t *cut,
		       char *err, size_t len)
{
	const struct km_part *p = &d->table.parts[i];
	const char *hint = "; give --truncate-to OFFSET or --from-start";
	char own[128] = "";

	if (d->mstates[i].last_mirrored_offset >= 0)
		snprintf(own, sizeof(own), " (this partition's own barrier is "
			 "at %lld)", (long long)d->mstates[i].last_mirrored_offset);
	if (!ans->kmirror) {
		snprintf(err, len, "%.200s-%d: %.256s:%u is not a kmirror host "
			 "(its ApiVersions lacks KmirrorBarrier), so it cannot "
			 "say where our logs part%s%s", p->topic, p->partition,
			 a->host, a->port, own, hint);
		return KM_ESOURCE;
	}
	if (ans->error_code != 0) {
		snprintf(err, len, "%.200s-%d: upstream %.256s:%u: %s", p->topic,
			 p->partition, a->host, a->port,
			 km_kerr_name(ans->error_code));
		return KM_ESOURCE;
	}
	if (ans->barrier_offset < 0) {
		snprintf(err, len, "%.200s-%d: upstream %.256s:%u (cluster %.64s) "
			 "holds no MIRROR_PID_RESET barrier for our cluster %.64s: "
			 "it never mirrored from us, so no common history is "
			 "known%s%s", p->topic, p->partition, a->host, a->port,
			 ans->cluster_id, d->cfg->cluster_id, own, hint);
		return KM_ESOURCE;
	}
	*cut = ans->barrier_offset;
	return 0;
}

/* Where to cut partition i, and the upstream's cluster id when known. */
static int decide_cut(struct km_daemon *d, uint32_t i,
		      const struct start_args *a, struct km_mstate_rec *ms,
		      char *err, size_t len)
{
	struct km_config_addr addrs[KM_CONFIG_BOOTSTRAP_MAX];
	struct km_upstream_answer ans;
	uint32_t n;
	int rc = source_addrs(d, i, a->source, addrs, &n);

	if (rc < 0) {
		snprintf(err, len, "%.200s-%d: no source to mirror from: give "
			 "failback --source HOST:PORT", d->table.parts[i].topic,
			 d->table.parts[i].partition);
		return KM_ECTLREQ;
	}
	ms->prepare_from_start = a->from_start;
	ms->prepare_truncate_to = a->truncate_to;
	if ((rc = ask_upstream(d, i, addrs, n, &ans, err, len)) < 0)
		return rc;
	if (km_upstream_mirrors_from(&ans, d->cfg->cluster_id)) {
		km_daemon_loop_reason(d, i, &addrs[0], &ans, err, len);
		return KM_ESOURCE;
	}
	snprintf(ms->source_cluster_id, sizeof(ms->source_cluster_id), "%s",
		 ans.cluster_id);
	if (a->from_start || a->truncate_to >= 0)
		return 0;
	/* A FAILED mirror never took local writes: it resumes where it is,
	 * from the source its log mirrors (issue 21). */
	if (d->mstates[i].state == KM_MSTATE_FAILED && a->source == NULL)
		return km_daemon_source_keep(d, i, &addrs[0], ans.cluster_id,
					     err, len);
	return barrier_cut(d, i, addrs, &ans, &ms->prepare_truncate_to, err,
			   len);
}

static int save(struct km_daemon *d, uint32_t i)
{
	char dir[4096];

	km_daemon_part_dir(d, &d->table.parts[i], dir, sizeof(dir));
	return km_mstate_save(dir, &d->mstates[i]);
}

/* PREPARING on: the owner's cut, then MIRRORING. */
static int finish_prepare(struct km_daemon *d, uint32_t i,
			  struct km_stop_result *res, char *err, size_t len)
{
	struct km_mstate_rec *ms = &d->mstates[i];
	struct km_part *p = &d->table.parts[i];
	struct km_worker_reply r;
	int rc;

	km_worker_crash_point("prepare-after-preparing");
	rc = km_worker_prepare(d->workers[p->owner], p, ms->prepare_truncate_to,
			       ms->prepare_from_start, &r);
	if (rc == 0)
		rc = km_worker_wait(d->ctl_efd, &r, PREPARE_TIMEOUT_MS);
	if (rc < 0) {
		snprintf(err, len, "%.200s-%d: cut: %.256s", p->topic,
			 p->partition, r.msg[0] ? r.msg : km_strerror(rc));
		return rc;
	}
	*res = r.stop;
	km_worker_crash_point("prepare-after-cut");
	/* A cut log mirrors the source it was cut for (issue 21). */
	if ((ms->prepare_from_start || ms->prepare_truncate_to >= 0) &&
	    (rc = km_daemon_source_accept(d, i, ms->source_cluster_id)) < 0) {
		snprintf(err, len, "%.200s-%d: %s: %s", p->topic, p->partition,
			 KM_CLUSTER_ID_SOURCE_FILE, km_strerror(rc));
		return rc;
	}
	ms->state = KM_MSTATE_MIRRORING;
	ms->prepare_truncate_to = -1;
	ms->prepare_from_start = false;
	ms->failed_reason[0] = '\0';
	d->mirrored[i] = true;
	if ((rc = save(d, i)) < 0)
		snprintf(err, len, "%.200s-%d: %s: %s", p->topic, p->partition,
			 KM_MSTATE_FILE, km_strerror(rc));
	return rc;
}

static int start_one(struct km_daemon *d, uint32_t i,
		     const struct start_args *a, struct km_stop_result *res,
		     char *err, size_t len)
{
	struct km_mstate_rec ms = d->mstates[i], was = d->mstates[i];
	int rc;

	/* A start that failed in its cut (a full disk, say) is retried with
	 * the cut it persisted, as a restart would. */
	if (ms.state == KM_MSTATE_PREPARING)
		goto out_prepare;
	if ((rc = decide_cut(d, i, a, &ms, err, len)) < 0)
		return rc;
	ms.state = KM_MSTATE_PREPARING;
	ms.role = KM_MSTATE_ROLE_MIRROR; /* from here on its log is a mirror's */
	if (a->source != NULL)
		snprintf(ms.source, sizeof(ms.source), "%s", a->source);
	d->mstates[i] = ms;
	if ((rc = save(d, i)) < 0) {
		/* Not PREPARING on disk, so not in memory: nothing was cut. */
		d->mstates[i] = was;
		snprintf(err, len, "%s: %s", KM_MSTATE_FILE, km_strerror(rc));
		return rc;
	}
out_prepare:
	if ((rc = finish_prepare(d, i, res, err, len)) < 0)
		return rc;
	return km_daemon_start_fetch(d, i);
}

/* ---- selection and the verbs ---------------------------------------------- */

/* May partition i start mirroring? A mirroring, paused or stopping one may
 * not; everything with history may, and a PREPARING one retries its cut. */
static bool startable(const struct km_daemon *d, uint32_t i, char *why,
		      size_t len)
{
	const struct km_part *p = &d->table.parts[i];
	enum km_mstate st = d->mstates[i].state;
	bool active = st == KM_MSTATE_PAUSED || st == KM_MSTATE_STOPPING ||
		      (st == KM_MSTATE_MIRRORING && d->mirrored[i]);

	if (active && st == KM_MSTATE_MIRRORING && km_daemon_retry_active(d, i))
		snprintf(why, len, "%.200s-%d is FAILED by a transient cause "
			 "and retries by itself (status: next_retry_ms); pause "
			 "and resume it to retry now", p->topic, p->partition);
	else if (active)
		snprintf(why, len, "%.200s-%d is %s: start and failback take a "
			 "STOPPED, FAILED, PREPARING or local partition%s", p->topic,
			 p->partition, km_mstate_name(st),
			 st == KM_MSTATE_PAUSED ? " (use resume)" : "");
	return !active;
}

static json_t *start_row(const struct km_daemon *d, uint32_t i,
			 const struct km_stop_result *r)
{
	const struct km_part *p = &d->table.parts[i];
	char name[KM_WIRE_NAME_BYTES_MAX + 16];

	snprintf(name, sizeof(name), "%s:%d", p->topic, p->partition);
	return json_pack("{s:s, s:I, s:I, s:I, s:i, s:s}", "partition", name,
			 "truncated_to", (json_int_t)r->cut_offset,
			 "removed_records", (json_int_t)r->removed_records,
			 "removed_bytes", (json_int_t)r->removed_bytes,
			 "removed_batches", (int)r->removed_batches,
			 "source", d->mstates[i].source[0] ? d->mstates[i].source
							   : "source.bootstrap.servers");
}

static void progress(struct km_daemon *d, const json_t *row)
{
	char msg[512];
	json_t *prog;

	snprintf(msg, sizeof(msg), "%s: cut at %lld (%lld records, %lld bytes "
		 "discarded), mirroring",
		 json_string_value(json_object_get(row, "partition")),
		 (long long)json_integer_value(json_object_get(row, "truncated_to")),
		 (long long)json_integer_value(json_object_get(row, "removed_records")),
		 (long long)json_integer_value(json_object_get(row, "removed_bytes")));
	prog = json_pack("{s:s}", "message", msg);
	km_ctlsock_progress(d->ctl, 0, prog);
	json_decref(prog);
}

static int run_verb(struct km_daemon *d, const json_t *req, json_t *resp,
		    const struct start_args *a)
{
	json_t *rows = json_array();
	struct km_stop_result res;
	char err[1024] = "";
	uint32_t count = 0;
	int rc = 0;

	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++) {
		if (!km_daemon_selected(d, i, req))
			continue;
		count++;
		if (!startable(d, i, err, sizeof(err)))
			rc = KM_ECTLREQ;
	}
	if (rc == 0 && count == 0) {
		snprintf(err, sizeof(err), "no such partition here");
		rc = KM_EUNKNOWNPART;
	}
	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++) {
		if (!km_daemon_selected(d, i, req))
			continue;
		if ((rc = start_one(d, i, a, &res, err, sizeof(err))) < 0)
			break;
		json_t *row = start_row(d, i, &res);
		progress(d, row);
		json_array_append_new(rows, row);
	}
	if (rc < 0)
		json_object_set_new(resp, "message", json_string(err));
	json_object_set_new(resp, "partitions", rows);
	return rc;
}

static void parse_args(const json_t *req, struct start_args *a)
{
	const json_t *t = json_object_get(req, "truncate_to");

	a->source = json_string_value(json_object_get(req, "source"));
	a->truncate_to = json_is_integer(t) ? (int64_t)json_integer_value(t) : -1;
	a->from_start = json_is_true(json_object_get(req, "from_start"));
}

int km_daemon_on_start(void *ctx, const json_t *req, json_t *resp)
{
	struct start_args a;

	parse_args(req, &a);
	a.source = NULL;
	return run_verb(ctx, req, resp, &a);
}

/* --source is checked before any partition is touched: an IPv6 literal
 * would pass the upstream question only to fail every fetch (the fetch
 * sessions are IPv4), so it is refused as what it is. */
static int check_source(const char *source, json_t *resp)
{
	struct km_config_addr a;
	char msg[512];

	if (source == NULL || km_daemon_parse_source(source, &a) < 0) {
		snprintf(msg, sizeof(msg), "--source %.300s: expected HOST:PORT",
			 source ? source : "");
		json_object_set_new(resp, "message", json_string(msg));
		return KM_ECTLREQ;
	}
	if (km_resolve_is_ipv6(a.host)) {
		snprintf(msg, sizeof(msg), "--source %.300s: IPv6 is not "
			 "supported yet (give an IPv4 address or a host name)",
			 source);
		json_object_set_new(resp, "message", json_string(msg));
		return -EAFNOSUPPORT;
	}
	return 0;
}

int km_daemon_on_failback(void *ctx, const json_t *req, json_t *resp)
{
	struct start_args a;
	int rc;

	parse_args(req, &a);
	if ((rc = check_source(a.source, resp)) < 0)
		return rc;
	return run_verb(ctx, req, resp, &a);
}

/* On start, after the logs are open: finish interrupted PREPARINGs (the
 * fetch sessions start with the other MIRRORING partitions). */
int km_daemon_resume_prepares(struct km_daemon *d)
{
	struct km_stop_result res;
	char err[512];
	int rc = 0;

	for (uint32_t i = 0; rc == 0 && i < d->table.n; i++) {
		if (d->mstates[i].state != KM_MSTATE_PREPARING)
			continue;
		KM_INFO("daemon", "partition %s-%d: resuming an interrupted "
			"start (cut to %lld%s)", d->table.parts[i].topic,
			d->table.parts[i].partition,
			(long long)d->mstates[i].prepare_truncate_to,
			d->mstates[i].prepare_from_start ? ", from the start" : "");
		if ((rc = finish_prepare(d, i, &res, err, sizeof(err))) < 0)
			KM_ERROR("daemon", "%s", err);
	}
	return rc;
}

/* Any state -> FAILED: a fetch session that gave up is persisted, so a
 * restart does not retry blindly what needs an operator (`start`); a
 * transient cause is retried instead (daemon_retry.c). */
void km_daemon_watch(struct km_daemon *d)
{
	for (uint32_t i = 0; i < d->table.n; i++) {
		struct km_part *p = &d->table.parts[i];
		struct km_mstate_rec *ms = &d->mstates[i];
		int st = atomic_load_explicit(&p->stats.fetch_state,
					      memory_order_acquire);

		if (!d->mirrored[i] || ms->state != KM_MSTATE_MIRRORING) {
			km_daemon_retry_reset(d, i);
			continue;
		}
		if (km_daemon_retry_watch(d, i, st) ||
		    st != KM_PART_FETCH_FAILED)
			continue;
		ms->state = KM_MSTATE_FAILED;
		snprintf(ms->failed_reason, sizeof(ms->failed_reason), "%s",
			 p->stats.reason);
		if (save(d, i) < 0)
			KM_ERROR("daemon", "partition %s-%d: cannot persist FAILED",
				 p->topic, p->partition);
	}
}
