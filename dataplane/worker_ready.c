/* The partitions a worker visits at its tick (issue 17): those something
 * happened to - an append, a Fetch answer, an error or a state change of
 * their fetcher, a message for them - kept on a ready list until they are
 * quiet again, and those whose deadline came, from a timer heap (a binary
 * min-heap of wparts indexes keyed by due_ms): retention by time when the
 * oldest segment ages out, the retention a busy partition's pace put off,
 * compaction's pace, the tick at which an idle log gives its write memory
 * back (km_log_idle_due), and a backstop of KM_WORKER_IDLE_MS for the rest. An
 * idle partition costs no work per turn, and none per second: it was
 * visited once a second by a sweep of every partition (at 10,000
 * partitions a fifth of a streaming mirror's CPU). */
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

/* ---- the timer heap ----
 * Each entry holds its key: a sift reads the heap's own array, not the
 * partitions' (10,000 of them, a cache miss each). */

static void put(struct km_worker *w, uint32_t at, struct km_worker_due e)
{
	w->heap[at] = e;
	w->wparts[e.slot].heap_at = at + 1;
}

static void sift_up(struct km_worker *w, uint32_t at)
{
	struct km_worker_due e = w->heap[at];

	while (at > 0 && w->heap[(at - 1) / 2].due_ms > e.due_ms) {
		put(w, at, w->heap[(at - 1) / 2]);
		at = (at - 1) / 2;
	}
	put(w, at, e);
}

static void sift_down(struct km_worker *w, uint32_t at)
{
	struct km_worker_due e = w->heap[at];

	for (;;) {
		uint32_t c = 2 * at + 1;

		if (c >= w->n_heap)
			break;
		if (c + 1 < w->n_heap &&
		    w->heap[c + 1].due_ms < w->heap[c].due_ms)
			c++;
		if (w->heap[c].due_ms >= e.due_ms)
			break;
		put(w, at, w->heap[c]);
		at = c;
	}
	put(w, at, e);
}

static void unschedule(struct km_worker *w, struct wpart *wp)
{
	uint32_t at = wp->heap_at;
	struct km_worker_due last;

	if (at == 0)
		return;
	at--;
	wp->heap_at = 0;
	last = w->heap[--w->n_heap];
	if (at == w->n_heap)
		return;
	put(w, at, last);
	sift_down(w, at);
	sift_up(w, w->wparts[last.slot].heap_at - 1);
}

static void schedule(struct km_worker *w, struct wpart *wp, uint64_t due)
{
	struct km_worker_due e = { due, (uint32_t)(wp - w->wparts) };
	uint64_t was;

	if (wp->heap_at == 0) {
		put(w, w->n_heap++, e);
		sift_up(w, w->n_heap - 1);
		return;
	}
	was = w->heap[wp->heap_at - 1].due_ms;
	w->heap[wp->heap_at - 1].due_ms = due;
	if (due < was)
		sift_up(w, wp->heap_at - 1);
	else if (due > was)
		sift_down(w, wp->heap_at - 1);
}

/* ---- */

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
	unschedule(w, &w->wparts[i]);
	if (i != last && w->wparts[last].heap_at != 0)
		w->heap[w->wparts[last].heap_at - 1].slot = i;
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

/* Off the ready list: to the heap, at its next deadline. */
static void settle(struct km_worker *w, struct wpart *wp)
{
	wp->active = false;
	schedule(w, wp, km_worker_next_due(w, wp));
}

/* The ready list, then the heap's partitions whose deadline came: at most
 * n_wparts over the ticks of one KM_WORKER_RETAIN_MS (rounded up) a tick,
 * so that deadlines falling together spread as the sweep did. */
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
			settle(w, wp);
		else
			w->act[k++] = w->act[j];
	}
	w->n_act = k;
	for (uint32_t j = 0; j < share && w->n_heap > 0 &&
			     w->heap[0].due_ms <= w->now_ms; j++) {
		struct wpart *wp = &w->wparts[w->heap[0].slot];

		unschedule(w, wp);
		if (wp->active)
			continue; /* the ready list has it */
		km_worker_visit(w, wp);
		if (quiet(wp))
			schedule(w, wp, km_worker_next_due(w, wp));
		else
			km_worker_touch(w, wp);
	}
}
