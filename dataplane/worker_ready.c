/* The partitions a worker visits at its tick (issue 17): those something
 * happened to - an append, a Fetch answer, an error or a state change of
 * their fetcher, a message for them - kept on a ready list until they are
 * quiet again, and every partition once per KM_WORKER_RETAIN_MS in a
 * round-robin sweep spread over the ticks (retention and compaction by
 * time, and the figures no event announces). An idle partition costs no
 * work per turn, and one visit a second. */
#include "dataplane/serve/local_write.h"
#include "dataplane/worker_pvt.h"

static void touched(void *arg)
{
	struct wpart *wp = arg;

	km_worker_touch(wp->w, wp);
}

void km_worker_touch(struct km_worker *w, struct wpart *wp)
{
	if (wp->active)
		return;
	wp->active = true;
	w->act[w->n_act++] = (uint32_t)(wp - w->wparts);
}

void km_worker_hook(struct km_worker *w, struct wpart *wp)
{
	wp->w = w;
	wp->part->wslot = (uint32_t)(wp - w->wparts);
	km_log_set_touch(wp->log, touched, wp);
	if (wp->fetcher != NULL)
		km_fetcher_set_touch(wp->fetcher, touched, wp);
}

/* Partition i leaves (on_drop): the last one takes its place. */
void km_worker_unlist(struct km_worker *w, uint32_t i)
{
	uint32_t last = w->n_wparts - 1, k = 0;

	for (uint32_t j = 0; j < w->n_act; j++) {
		if (w->act[j] == i)
			continue;
		w->act[k++] = w->act[j] == last ? i : w->act[j];
	}
	w->n_act = k;
	if (w->sweep_next > last)
		w->sweep_next = 0;
}

/* Nothing left for a visit to do until the next event. */
static bool quiet(const struct wpart *wp)
{
	int st;

	if (wp->stopping != NULL || km_log_busy(wp->log) ||
	    (wp->lw != NULL && km_local_write_pending(wp->lw) > 0))
		return false;
	if (wp->fetcher == NULL)
		return true;
	st = km_fetcher_get_state(wp->fetcher);
	/* A fetcher getting its leader or offsets, or stalled, has deadlines
	 * of its own (the stall watchdog): followed until it mirrors. */
	return st == KM_FETCHER_MIRRORING ||
	       (st == KM_FETCHER_FAILED && wp->fetch_failed_logged);
}

/* The ready list, then the sweep's share of this tick: n_wparts over the
 * ticks of one KM_WORKER_RETAIN_MS, rounded up. */
void km_worker_visit_all(struct km_worker *w)
{
	uint32_t k = 0, n = w->n_wparts;
	uint32_t share = (n * KM_WORKER_TICK_MS + KM_WORKER_RETAIN_MS - 1) /
			 KM_WORKER_RETAIN_MS;

	/* n_act read each time: one touched during a visit is visited too
	 * (k <= j, so the compaction never overwrites one unread). */
	for (uint32_t j = 0; j < w->n_act; j++) {
		struct wpart *wp = &w->wparts[w->act[j]];

		km_worker_visit(w, wp);
		if (quiet(wp))
			wp->active = false;
		else
			w->act[k++] = w->act[j];
	}
	w->n_act = k;
	for (uint32_t j = 0; j < share && n > 0; j++) {
		struct wpart *wp = &w->wparts[w->sweep_next];

		w->sweep_next = (w->sweep_next + 1) % n;
		if (wp->active)
			continue;
		km_worker_visit(w, wp);
		if (!quiet(wp))
			km_worker_touch(w, wp);
	}
}
