/* What the front-end's connections may hold of their receive pool.
 *
 * A request stays in receive buffers until it is whole (zero copy), and the
 * pool is shared by every client connection of the worker: without bounds,
 * one client announcing a large request, or a few holding half of one each,
 * would take every buffer and no other request could complete. So, as
 * Kafka's memory pool for requests (queued.max.request.bytes) does, a
 * connection whose next request is incomplete is charged the buffers the
 * whole request will take, once its size prefix is in; if the front-end's
 * budget cannot take that, its receive is paused (km_net_recv_pause) and it
 * waits for the budget, holding only what had already arrived. A charged
 * request therefore always completes, and the budget is never passed by more
 * than what paused connections had in hand.
 *
 * Also bounded: a request larger than a connection may hold (frame_bytes_max
 * is clamped to it) closes the connection as soon as its size is read; bytes
 * arriving in small pieces are packed into full buffers (km_kframe_compact)
 * so that a slow sender holds what its bytes fill, not a buffer per piece; a
 * connection holding more than conn_bufs_max (pipelined requests waiting for
 * their turn) stops being read until they are taken; and an incomplete
 * request must be whole within request_timeout_ms of its first bytes, or of
 * being charged after a wait, else the connection is closed (waiting or
 * not: a client may not keep buffers by never finishing a request). */
#include <stdio.h>

#include "common/log.h"
#include "dataplane/serve/frontend_pvt.h"

/* Buffers a request may hold beyond what its bytes fill: a start in the
 * middle of a buffer, a last buffer partly full, and the pieces that
 * arrive between two packings. */
#define RX_SLACK 8u
/* Accounting unit where the backend's segments are not whole buffers. */
#define RX_UNIT_DEFAULT 2048u
#define RX_TIMEOUT_DEFAULT_MS 30000u

static uint32_t bufs_for(const struct km_frontend *fe, uint64_t bytes)
{
	return (uint32_t)((bytes + fe->rx.unit - 1) / fe->rx.unit) + RX_SLACK;
}

void km_frontend_rx_init(struct km_frontend *fe,
			 const struct km_frontend_config *cfg)
{
	struct km_net_stats ns;
	uint32_t fit;

	km_net_get_stats(fe->net, &ns);
	fe->rx.buf_bytes = ns.rx_buf_bytes;
	fe->rx.unit = ns.rx_buf_bytes ? ns.rx_buf_bytes : RX_UNIT_DEFAULT;
	/* A quarter of the pool is left for what paused connections had in
	 * hand and for the receives in flight. */
	fe->rx.bufs_max = cfg->rx_bufs_max ? cfg->rx_bufs_max
					   : ns.rx_bufs_total / 4 * 3;
	if (fe->rx.bufs_max < 2 * RX_SLACK + 2)
		fe->rx.bufs_max = 2 * RX_SLACK + 2;
	fe->rx.conn_bufs_max = fe->rx.bufs_max / 2;
	fit = (fe->rx.conn_bufs_max - RX_SLACK) * fe->rx.unit -
	      KM_WIRE_SIZE_BYTES;
	if (fe->limits.frame_bytes_max > fit) {
		KM_INFO("frontend", "requests are limited to %u bytes: what a "
			"connection may hold of the %u receive buffers",
			fit, ns.rx_bufs_total);
		fe->limits.frame_bytes_max = fit;
	}
	fe->rx.timeout_ms = cfg->request_timeout_ms ? cfg->request_timeout_ms
						    : RX_TIMEOUT_DEFAULT_MS;
}

static void set_paused(struct fe_conn *fc, bool paused)
{
	if (fc->rx_paused == paused)
		return;
	fc->rx_paused = paused;
	(void)km_net_recv_pause(fc->c, paused);
}

static void set_wait(struct fe_conn *fc, bool wait)
{
	if (fc->rx_wait == wait)
		return;
	fc->rx_wait = wait;
	if (wait) {
		fc->fe->rx.waiting++;
		fc->fe->st.rx_waits++;
	} else {
		fc->fe->rx.waiting--;
	}
}

static void set_charge(struct fe_conn *fc, uint32_t bufs)
{
	fc->fe->rx.charged += bufs;
	fc->fe->rx.charged -= fc->rx_charge;
	fc->rx_charge = bufs;
}

/* The buffers fc's queue will take: its next request whole if that is
 * incomplete and sized, else what it holds. */
static uint32_t wanted(const struct fe_conn *fc, uint32_t held, bool *partial)
{
	uint32_t size, want;

	*partial = fc->held == NULL && fc->kf.queued > fc->kf.head_off;
	if (!*partial || km_kframe_peek_size(&fc->kf, &size) != 1)
		return held;
	want = bufs_for(fc->fe, (uint64_t)KM_WIRE_SIZE_BYTES + size);
	return want > held ? want : held;
}

static void pack(struct fe_conn *fc)
{
	struct km_frontend *fe = fc->fe;
	uint32_t held = km_kframe_buffers(&fc->kf);

	if (fe->rx.buf_bytes == 0 || fe->lsns[fc->listener].cfg.net != NULL ||
	    held <= bufs_for(fe, fc->kf.queued - fc->kf.head_off) + RX_SLACK)
		return;
	if (km_kframe_compact(&fc->kf, fe->rx.buf_bytes) > 0)
		fe->st.rx_compactions++;
}

/* What fc holds, in the budget's units: its buffers, or for a listener on
 * another net (the DPDK port's, whose segments are parts of frames from a
 * pool of its own) the units its bytes would fill, so that the same
 * request costs the same on either. */
static uint32_t held_units(const struct fe_conn *fc)
{
	const struct km_frontend *fe = fc->fe;

	if (fe->lsns[fc->listener].cfg.net == NULL)
		return km_kframe_buffers(&fc->kf);
	if (fc->kf.queued == fc->kf.head_off)
		return 0;
	return bufs_for(fe, fc->kf.queued - fc->kf.head_off);
}

/* Charge what fc's queue takes, or make it wait. @return true if its
 * charge went down (waiters may fit now). */
static bool charge(struct fe_conn *fc, uint64_t now_ms)
{
	struct km_frontend *fe = fc->fe;
	uint32_t held = held_units(fc), before = fc->rx_charge;
	bool partial, granted = false;
	uint32_t want = wanted(fc, held, &partial);

	if (want > held && want > before &&
	    fe->rx.charged - before + want > fe->rx.bufs_max) {
		set_wait(fc, true);
		want = held;
	} else {
		granted = fc->rx_wait;
		set_wait(fc, false);
	}
	set_charge(fc, want);
	/* A waiting connection is timed too: what it holds is not charged
	 * in full, but held all the same. */
	if (!partial)
		fc->rx_since_ms = 0;
	else if (fc->rx_since_ms == 0 || granted ||
		 fc->rx_frames != fc->kf.frames_in)
		fc->rx_since_ms = now_ms;
	fc->rx_frames = fc->kf.frames_in;
	set_paused(fc, fc->rx_wait || held >= fe->rx.conn_bufs_max);
	return fc->rx_charge < before;
}

/* Connections waiting for the budget get it in the order they are found,
 * small requests passing a large one that does not fit yet. */
static void wake_waiters(struct km_frontend *fe, uint64_t now_ms)
{
	uint32_t left = fe->conns_used;

	for (uint32_t i = 0; i < fe->conns_max && left > 0 && fe->rx.waiting;
	     i++) {
		struct fe_conn *fc = &fe->conns[i];

		if (!fc->used)
			continue;
		left--;
		if (fc->rx_wait && fc->c != NULL && !fc->closing)
			charge(fc, now_ms);
	}
}

void km_frontend_rx_update(struct fe_conn *fc)
{
	uint64_t now = km_frontend_now_ms();

	if (fc->c == NULL || fc->closing)
		return;
	pack(fc);
	if (charge(fc, now))
		wake_waiters(fc->fe, now);
}

void km_frontend_rx_closed(struct fe_conn *fc)
{
	bool freed = fc->rx_charge > 0;

	set_charge(fc, 0);
	set_wait(fc, false);
	fc->rx_paused = false;
	fc->rx_since_ms = 0;
	if (freed)
		wake_waiters(fc->fe, km_frontend_now_ms());
}

uint64_t km_frontend_rx_deadline(const struct fe_conn *fc)
{
	return fc->rx_since_ms ? fc->rx_since_ms + fc->fe->rx.timeout_ms
			       : UINT64_MAX;
}

void km_frontend_rx_tick(struct fe_conn *fc, uint64_t now_ms)
{
	uint32_t size = 0;

	if (fc->rx_since_ms == 0 || now_ms < km_frontend_rx_deadline(fc))
		return;
	fc->fe->st.request_timeouts++;
	(void)km_kframe_peek_size(&fc->kf, &size);
	km_frontend_conn_drop(fc, "a request of %u bytes is not whole after "
			      "%u ms (%llu bytes in)", size,
			      fc->fe->rx.timeout_ms,
			      (unsigned long long)(fc->kf.queued -
						   fc->kf.head_off));
}
