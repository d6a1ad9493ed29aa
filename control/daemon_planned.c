/* A planned stop (`kmirrorctl stop --planned`): before the R4 stop, wait
 * until every partition named has all the source has: our log end equals
 * the source HW its fetcher last saw, and a Fetch answer that came after
 * says so too (the HW compared is not one from before the last records).
 * Then the stop runs as any other (daemon_stop.c), its last group-offset
 * sync included. If timeout_ms passes first, the request fails naming the
 * partitions behind and their lag, and nothing changes: they mirror on.
 *
 * The wait does not hold the control thread: the request is deferred
 * (KM_CTLSOCK_DEFERRED), the control loop looks again every
 * PLANNED_POLL_MS, sends a progress line each PLANNED_PROGRESS_MS and
 * answers when it is done, so status and the other verbs are served
 * meanwhile. One planned stop waits at a time; a client that goes away
 * cancels its own. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/errors.h"
#include "common/log.h"
#include "control/daemon_pvt.h"

#define PLANNED_TIMEOUT_MS_DEFAULT 60000
#define PLANNED_PROGRESS_MS 1000

#define LOAD(p, f) atomic_load_explicit(&(p)->stats.f, memory_order_relaxed)

static void planned_clear(struct km_daemon *d)
{
	struct km_daemon_planned *w = &d->planned;

	json_decref(w->req);
	free(w->sel);
	free(w->mark);
	free(w->mark_hw);
	memset(w, 0, sizeof(*w));
}

/* Can partition i catch up by itself? Only while it mirrors. */
static const char *cannot_wait(const struct km_daemon *d, uint32_t i)
{
	const struct km_part *p = &d->table.parts[i];

	if (d->mstates[i].state != KM_MSTATE_MIRRORING)
		return km_mstate_name(d->mstates[i].state);
	if (atomic_load_explicit(&p->error, memory_order_relaxed) != 0 ||
	    atomic_load_explicit(&p->stats.fetch_state, memory_order_acquire) ==
		    KM_PART_FETCH_FAILED)
		return "FAILED";
	return NULL;
}

int km_daemon_planned_begin(struct km_daemon *d, const json_t *req,
			    json_t *resp, const bool *sel)
{
	struct km_daemon_planned *w = &d->planned;
	const json_t *t = json_object_get(req, "timeout_ms");
	uint32_t n = d->table.n ? d->table.n : 1;
	char msg[512];

	if (w->token != 0) {
		json_object_set_new(resp, "message", json_string(
			"a planned stop is already waiting; try again when it is done"));
		return -EBUSY;
	}
	for (uint32_t i = 0; i < d->table.n; i++) {
		const char *why = sel[i] ? cannot_wait(d, i) : NULL;

		if (why == NULL)
			continue;
		snprintf(msg, sizeof(msg), "%.200s-%d is %s: a planned stop waits "
			 "for it to catch up with the source, which it cannot; "
			 "stop it without --planned", d->table.parts[i].topic,
			 d->table.parts[i].partition, why);
		json_object_set_new(resp, "message", json_string(msg));
		return KM_ECTLREQ;
	}
	w->sel = calloc(n, sizeof(*w->sel));
	w->mark = calloc(n, sizeof(*w->mark));
	w->mark_hw = calloc(n, sizeof(*w->mark_hw));
	w->req = json_deep_copy(req);
	if (w->sel == NULL || w->mark == NULL || w->mark_hw == NULL ||
	    w->req == NULL) {
		planned_clear(d);
		return -ENOMEM;
	}
	memcpy(w->sel, sel, d->table.n * sizeof(*sel));
	json_object_del(w->req, "planned");
	json_object_del(w->req, "timeout_ms");
	w->timeout_ms = t ? (uint64_t)json_integer_value(t) : PLANNED_TIMEOUT_MS_DEFAULT;
	w->started_ms = km_clock_ms();
	w->progress_ms = w->started_ms + PLANNED_PROGRESS_MS;
	w->token = km_ctlsock_token(d->ctl);
	KM_INFO("daemon", "planned stop: waiting up to %llu ms for the "
		"partitions to catch up", (unsigned long long)w->timeout_ms);
	return KM_CTLSOCK_DEFERRED;
}

/* Has partition i caught up, confirmed by a later Fetch answer? Level
 * (our log end at the source HW) is first seen with answers a0 and HW h0
 * (mark[i] = a0 + 1, mark_hw[i] = h0; mark 0: not level); a Fetch answer
 * after a0 that still gives h0 says the source has nothing more. */
static bool caught_up(struct km_daemon *d, uint32_t i)
{
	const struct km_part *p = &d->table.parts[i];
	int64_t leo = LOAD(p, leo), src = LOAD(p, source_hw);
	uint64_t answers = LOAD(p, fetch_answers);
	struct km_daemon_planned *w = &d->planned;

	if (src < 0 || leo < src ||
	    atomic_load_explicit(&p->stats.fetch_state, memory_order_acquire) !=
		    KM_PART_FETCH_MIRRORING) {
		w->mark[i] = 0;
		return false;
	}
	if (w->mark[i] == 0 || w->mark_hw[i] != src) {
		w->mark[i] = answers + 1;
		w->mark_hw[i] = src;
		return false;
	}
	return answers >= w->mark[i];
}

/* "orders:0 lag 12 (log end 88, source HW 100), ..." of those behind. */
static void behind(struct km_daemon *d, char *out, size_t cap, uint32_t *n)
{
	size_t len = 0;

	*n = 0;
	out[0] = '\0';
	for (uint32_t i = 0; i < d->table.n; i++) {
		const struct km_part *p = &d->table.parts[i];
		int64_t leo = LOAD(p, leo), src = LOAD(p, source_hw);

		if (!d->planned.sel[i] || caught_up(d, i))
			continue;
		if (len < cap && src < 0)
			len += (size_t)snprintf(out + len, cap - len,
				"%s%.200s:%d lag unknown (log end %lld, no Fetch "
				"answer yet)", *n ? ", " : "", p->topic, p->partition,
				(long long)leo);
		else if (len < cap)
			len += (size_t)snprintf(out + len, cap - len,
				"%s%.200s:%d lag %lld (log end %lld, source HW %lld%s)",
				*n ? ", " : "", p->topic, p->partition,
				(long long)(src > leo ? src - leo : 0), (long long)leo,
				(long long)src, leo >= src
				? ", waiting for a Fetch answer to confirm" : "");
		(*n)++;
	}
}

/* Finish the waiting request with rc and resp. */
static void answer(struct km_daemon *d, int rc, json_t *resp)
{
	if (km_ctlsock_complete(d->ctl, d->planned.token, rc, resp) < 0)
		KM_INFO("daemon", "planned stop: its client has gone");
	planned_clear(d);
}

static void run_stop(struct km_daemon *d, json_t *resp)
{
	struct km_daemon_planned *w = &d->planned;
	uint64_t waited = km_clock_ms() - w->started_ms;
	int rc;

	KM_INFO("daemon", "planned stop: caught up after %llu ms, stopping",
		(unsigned long long)waited);
	d->stop_token = w->token;
	rc = km_daemon_stop_now(d, w->req, resp);
	d->stop_token = 0;
	json_object_set_new(resp, "caught_up_after_ms", json_integer((json_int_t)waited));
	answer(d, rc, resp);
}

/* A partition named that no longer mirrors (stopped or paused by another
 * request, FAILED): the wait is given up, nothing stopped by it. */
static bool left_mirroring(struct km_daemon *d)
{
	char msg[512];

	for (uint32_t i = 0; i < d->table.n; i++) {
		const char *why = d->planned.sel[i] ? cannot_wait(d, i) : NULL;
		json_t *resp;

		if (why == NULL)
			continue;
		snprintf(msg, sizeof(msg), "planned stop given up: %.200s-%d is %s "
			 "now, so it cannot catch up; nothing was stopped by this "
			 "request", d->table.parts[i].topic,
			 d->table.parts[i].partition, why);
		resp = json_pack("{s:s}", "message", msg);
		KM_WARN("daemon", "%s", msg);
		answer(d, -ECANCELED, resp);
		json_decref(resp);
		return true;
	}
	return false;
}

/* A progress line; false once the client has gone (the wait ends). */
static bool tell(struct km_daemon *d, const char *list, uint32_t n)
{
	char msg[2300];
	json_t *prog;
	int rc;

	snprintf(msg, sizeof(msg), "waiting for %u partition%s to catch up: %s",
		 n, n == 1 ? "" : "s", list);
	prog = json_pack("{s:s}", "message", msg);
	rc = prog ? km_ctlsock_progress(d->ctl, d->planned.token, prog) : 0;
	json_decref(prog);
	return rc != -ENOENT;
}

void km_daemon_planned_step(struct km_daemon *d)
{
	struct km_daemon_planned *w = &d->planned;
	uint64_t now = km_clock_ms();
	char list[2048], msg[2300];
	uint32_t n;
	json_t *resp;

	if (w->token == 0 || left_mirroring(d))
		return;
	behind(d, list, sizeof(list), &n);
	if (n == 0) {
		if ((resp = json_object()) != NULL)
			run_stop(d, resp);
		json_decref(resp);
	} else if (now >= w->started_ms + w->timeout_ms) {
		snprintf(msg, sizeof(msg), "planned stop: not caught up within %llu "
			 "ms, nothing was stopped (the partitions mirror on): %s",
			 (unsigned long long)w->timeout_ms, list);
		KM_WARN("daemon", "%s", msg);
		resp = json_pack("{s:s}", "message", msg);
		answer(d, -ETIMEDOUT, resp);
		json_decref(resp);
	} else if (now >= w->progress_ms) {
		w->progress_ms = now + PLANNED_PROGRESS_MS;
		if (!tell(d, list, n)) {
			KM_INFO("daemon", "planned stop: its client has gone, not stopping");
			planned_clear(d);
		}
	}
}

void km_daemon_planned_free(struct km_daemon *d)
{
	planned_clear(d);
}
